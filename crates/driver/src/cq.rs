//! CQ polling, in rdma-core's order (`providers/mlx5/cq.c` `get_sw_cqe`,
//! `mlx5_poll_one`, `update_cons_index`): read `op_own` once, check
//! ownership against the consumer index, `from_device`, copy the CQE out,
//! decode the copy, advance the consumer index and publish it in the CQ
//! doorbell record.

use marrow_mlx5::cqe::{COLLAPSED_CQ_FILL, Completion, CqeError, decode_cqe, sw_owns};
use marrow_mlx5::raw::{CqeOpcode, MLX5_CQ_SET_CI, MLX5_CQE_SIZE, mlx5_cq_dbrec, mlx5_cqe64};
use marrow_mmio::{OutOfBounds, Region, barrier};

const CQE: usize = MLX5_CQE_SIZE as usize;

/// How the device writes the CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqMode {
    /// One CQE per slot, the owner bit flipping on every pass.
    Normal,
    /// Collapsed (`cc=1`) and overrun-allowed (`oi=1`): every CQE in slot 0,
    /// as NVSHMEM creates its CQs. Polled by `wqe_counter`, not ownership.
    Collapsed,
}

/// Why a poll failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollError {
    /// The CQE the device wrote cannot be decoded.
    Cqe(CqeError),
    /// A CQ access was out of bounds.
    Mmio(OutOfBounds),
}

impl core::fmt::Display for PollError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PollError::Cqe(e) => write!(f, "{e}"),
            PollError::Mmio(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PollError {}

/// A CQ consumer.
#[derive(Debug)]
pub struct CqPoller {
    buf: Region,
    ncqe: u32,
    dbrec: Region,
    mode: CqMode,
    /// Consumer index, not reduced modulo the ring.
    ci: u32,
    /// Collapsed mode: the last 64 bytes seen in slot 0.
    last: [u8; CQE],
}

impl CqPoller {
    /// A poller over `buf` (`ncqe` × 64 bytes) and the CQ doorbell record.
    pub fn new(buf: Region, ncqe: u32, dbrec: Region, mode: CqMode) -> Self {
        CqPoller { buf, ncqe, dbrec, mode, ci: 0, last: [COLLAPSED_CQ_FILL; CQE] }
    }

    /// Consumer index, not reduced.
    pub fn ci(&self) -> u32 {
        self.ci
    }

    /// The next completion, or `None` when the device has not written one.
    pub fn poll(&mut self) -> Result<Option<Completion>, PollError> {
        match self.mode {
            CqMode::Normal => self.poll_normal(),
            CqMode::Collapsed => self.poll_collapsed(),
        }
    }

    fn poll_normal(&mut self) -> Result<Option<Completion>, PollError> {
        let slot = (self.ci % self.ncqe) as usize * CQE;
        let op_own = self.buf.read_u8(slot + CQE - 1).map_err(PollError::Mmio)?;
        if !sw_owns(op_own, self.ci, self.ncqe) {
            return Ok(None);
        }
        // The owner bit was seen; only now may the payload be read.
        barrier::from_device();
        let mut cqe = [0u8; CQE];
        self.buf.read_bytes(slot, &mut cqe).map_err(PollError::Mmio)?;
        let c = decode_cqe(&cqe).map_err(PollError::Cqe)?;
        self.ci = self.ci.wrapping_add(1);
        // Return the slot to the device (rdma-core update_cons_index).
        barrier::to_device();
        self.dbrec
            .write_be32(4 * MLX5_CQ_SET_CI as usize, self.ci & mlx5_cq_dbrec::CONS_INDEX_MASK)
            .map_err(PollError::Mmio)?;
        Ok(Some(c))
    }

    fn poll_collapsed(&mut self) -> Result<Option<Completion>, PollError> {
        // The owner byte first, as in normal mode: the device writes it
        // last, and each CQE into slot 0 flips its owner bit, so a new
        // op_own means a whole new CQE. Comparing the whole slot instead
        // took a CQE whose payload was half written, then took it again
        // once its op_own landed (seen as a repeated wqe_counter).
        let op_own = self.buf.read_u8(CQE - 1).map_err(PollError::Mmio)?;
        if op_own == self.last[CQE - 1] || op_own >> mlx5_cqe64::OPCODE_SHIFT == CqeOpcode::INVALID.0 {
            return Ok(None);
        }
        barrier::from_device();
        let mut cqe = [0u8; CQE];
        self.buf.read_bytes(0, &mut cqe).map_err(PollError::Mmio)?;
        self.last = cqe;
        let c = decode_cqe(&cqe).map_err(PollError::Cqe)?;
        self.ci = self.ci.wrapping_add(1);
        Ok(Some(c))
    }
}
