//! Send queue posting, in rdma-core's order (`providers/mlx5/qp.c`
//! `_mlx5_post_send` and `post_send_db`):
//!
//! 1. WQE stores into the ring;
//! 2. `to_device`: WQE before doorbell record;
//! 3. doorbell record `[MLX5_SND_DBR]` = next free WQEBB, big endian;
//! 4. `wc_start`: doorbell record before the write-combining doorbell;
//! 5. one 8-byte store to the UAR doorbell (BlueFlame register);
//! 6. `wc_flush`: push it out before anything later;
//! 7. alternate the BlueFlame half (`bf->offset ^= buf_size`).

use marrow_mlx5::doorbell::{uar_doorbell_from_ctrl, uar_doorbell_index_qpn};
use marrow_mlx5::raw::{
    MLX5_BF_OFFSET, MLX5_DB_BLUEFLAME_BUFFER_SIZE, MLX5_SEND_WQE_BB, MLX5_SND_DBR, mlx5_qp_dbrec, mlx5_wqe_ctrl_seg,
};
use marrow_mlx5::wqe::{BuiltWqe, CtrlParams, WqeError, WqeOp, build_wqe};
use marrow_mmio::{OutOfBounds, Region, barrier};
use zerocopy::FromBytes;

const BB: usize = MLX5_SEND_WQE_BB as usize;
/// Bytes of one BlueFlame buffer (half of the register).
const BF_BUF: usize = MLX5_DB_BLUEFLAME_BUFFER_SIZE as usize;

/// Why a post failed. Nothing was written to the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// The WQE itself is invalid.
    Wqe(WqeError),
    /// Not enough free WQEBBs: `need`, with `free` left until completions arrive.
    QueueFull {
        /// WQEBBs the WQE needs.
        need: usize,
        /// WQEBBs free.
        free: usize,
    },
    /// A ring, doorbell record or doorbell page access was out of bounds.
    Mmio(OutOfBounds),
}

impl From<OutOfBounds> for PostError {
    fn from(e: OutOfBounds) -> Self {
        PostError::Mmio(e)
    }
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PostError::Wqe(e) => write!(f, "{e}"),
            PostError::QueueFull { need, free } => write!(f, "send queue full: need {need} WQEBBs, {free} free"),
            PostError::Mmio(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PostError {}

/// A send queue: the ring, its doorbell record and its UAR page.
#[derive(Debug)]
pub struct SendQueue {
    ring: Region,
    nwqebb: u32,
    dbrec: Region,
    uar: Region,
    qpn: u32,
    /// Producer index in WQEBBs, not reduced modulo the ring.
    pi: u32,
    /// WQEBBs known consumed (from completions), not reduced.
    ci: u32,
    bf_offset: usize,
    /// Control bytes of the last WQE posted, for the rdma-core doorbell.
    last_ctrl: Option<mlx5_wqe_ctrl_seg>,
    /// The last WQE posted, when it fits a BlueFlame buffer.
    last_wqe: Option<([u8; BF_BUF], usize)>,
    index_qpn_doorbell: bool,
}

impl SendQueue {
    /// A send queue over `ring` (`nwqebb` × 64 bytes, a power of two), the
    /// QP doorbell record (8 bytes) and the UAR page.
    pub fn new(ring: Region, nwqebb: u32, dbrec: Region, uar: Region, qpn: u32) -> Self {
        SendQueue {
            ring,
            nwqebb,
            dbrec,
            uar,
            qpn,
            pi: 0,
            ci: 0,
            bf_offset: MLX5_BF_OFFSET as usize,
            last_ctrl: None,
            last_wqe: None,
            index_qpn_doorbell: false,
        }
    }

    /// Ring with NVSHMEM/DOCA's doorbell (`{BE32(pi << 8), BE32(qpn << 8)}`)
    /// instead of rdma-core's (the last WQE's first 8 control bytes).
    pub fn with_index_qpn_doorbell(mut self) -> Self {
        self.index_qpn_doorbell = true;
        self
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Producer index (next free WQEBB), not reduced.
    pub fn pi(&self) -> u32 {
        self.pi
    }

    /// WQEBBs free for posting.
    pub fn free(&self) -> usize {
        (self.nwqebb - self.pi.wrapping_sub(self.ci)) as usize
    }

    /// Record that the WQE at `wqe_counter` (and everything before it)
    /// completed, `wqebbs` being its size; frees its slots.
    pub fn complete_through(&mut self, wqe_counter: u16, wqebbs: u32) {
        // Widen the 16-bit counter against the producer index.
        let behind = (self.pi as u16).wrapping_sub(wqe_counter) as u32;
        self.ci = self.pi.wrapping_sub(behind).wrapping_add(wqebbs);
    }

    /// Build `op` and copy it into the ring at the producer index (WQEBB by
    /// WQEBB, wrapping at the end of the ring). Does not ring the doorbell.
    pub fn post(&mut self, params: CtrlParams, op: &WqeOp<'_>) -> Result<BuiltWqe, PostError> {
        let mut scratch = [0u8; 16 * BB];
        let ctrl = CtrlParams { wqe_index: self.pi as u16, qpn: self.qpn, ..params };
        let built = build_wqe(&ctrl, op, &mut scratch).map_err(PostError::Wqe)?;
        let need = built.wqebbs as usize;
        if need > self.free() {
            return Err(PostError::QueueFull { need, free: self.free() });
        }
        for i in 0..need {
            let slot = (self.pi.wrapping_add(i as u32) % self.nwqebb) as usize;
            self.ring.write_bytes(slot * BB, &scratch[i * BB..(i + 1) * BB])?;
        }
        self.last_ctrl = mlx5_wqe_ctrl_seg::read_from_bytes(&scratch[..16]).ok();
        self.last_wqe = (built.len() <= BF_BUF).then(|| {
            let mut b = [0u8; BF_BUF];
            b[..built.len()].copy_from_slice(&scratch[..built.len()]);
            (b, built.len())
        });
        self.pi = self.pi.wrapping_add(need as u32);
        Ok(built)
    }

    /// Copy raw WQE bytes (a multiple of 64, as many WQEBBs as given) into
    /// the ring at the producer index, unchecked: for exercising a device's
    /// validation with WQEs no builder would produce.
    pub fn post_raw(&mut self, wqe: &[u8]) -> Result<(), PostError> {
        let need = wqe.len().div_ceil(BB);
        if need > self.free() {
            return Err(PostError::QueueFull { need, free: self.free() });
        }
        for i in 0..need {
            let slot = (self.pi.wrapping_add(i as u32) % self.nwqebb) as usize;
            let mut bb = [0u8; BB];
            let chunk = &wqe[i * BB..wqe.len().min((i + 1) * BB)];
            bb[..chunk.len()].copy_from_slice(chunk);
            self.ring.write_bytes(slot * BB, &bb)?;
        }
        self.last_ctrl = mlx5_wqe_ctrl_seg::read_from_bytes(&wqe[..16.min(wqe.len())]).ok();
        self.last_wqe = None;
        self.pi = self.pi.wrapping_add(need as u32);
        Ok(())
    }

    /// Publish the one WQE just posted by BlueFlame: the whole WQE into the
    /// register instead of an 8-byte doorbell (rdma-core `post_send_db` does
    /// this for a single WQE that fits the buffer). Falls back to [`ring`]
    /// when the last WQE does not fit. The first 8 bytes go last, as one
    /// store: shared memory has no write-combining burst, and a device model
    /// polling the register must see the rest before them.
    ///
    /// [`ring`]: SendQueue::ring
    pub fn ring_blueflame(&mut self) -> Result<(), PostError> {
        let Some((wqe, len)) = self.last_wqe.take() else { return self.ring() };
        // The WQE stores (ring copy) must be visible before the doorbell record.
        barrier::to_device();
        self.dbrec.write_be32(4 * MLX5_SND_DBR as usize, self.pi & mlx5_qp_dbrec::SEND_WQE_COUNTER_MASK)?;
        // The doorbell record before the write-combining register.
        barrier::wc_start();
        self.uar.write_bytes(self.bf_offset + 8, &wqe[8..len])?;
        // The body before the first 8 bytes that announce it.
        barrier::wc_start();
        let mut first = [0u8; 8];
        first.copy_from_slice(&wqe[..8]);
        self.uar.write_8bytes(self.bf_offset, first)?;
        // Push the write-combined register out now.
        barrier::wc_flush();
        self.bf_offset ^= MLX5_DB_BLUEFLAME_BUFFER_SIZE as usize;
        Ok(())
    }

    /// Publish everything posted: doorbell record, then the UAR doorbell.
    pub fn ring(&mut self) -> Result<(), PostError> {
        // The WQE stores must be visible before the device can see the new
        // doorbell record.
        barrier::to_device();
        self.dbrec.write_be32(4 * MLX5_SND_DBR as usize, self.pi & mlx5_qp_dbrec::SEND_WQE_COUNTER_MASK)?;
        let bytes = match (self.index_qpn_doorbell, &self.last_ctrl) {
            (false, Some(c)) => uar_doorbell_from_ctrl(c),
            _ => uar_doorbell_index_qpn(self.pi as u16, self.qpn)
                .map_err(|_| PostError::Wqe(WqeError::QpnOutOfRange { qpn: self.qpn }))?,
        };
        // The doorbell record must be visible before the doorbell that
        // makes the device read it.
        barrier::wc_start();
        self.uar.write_8bytes(self.bf_offset, bytes)?;
        // Push the write-combined doorbell out now, not when the buffer fills.
        barrier::wc_flush();
        // Successive doorbells alternate between the two halves of the
        // BlueFlame register (0x800, 0x900).
        self.bf_offset ^= MLX5_DB_BLUEFLAME_BUFFER_SIZE as usize;
        Ok(())
    }
}
