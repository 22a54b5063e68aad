//! Completion queues: 64-byte CQEs in a ring, the owner bit flipping on each
//! pass (rdma-core `cq.c` `get_sw_cqe`: software owns CQE `n` when
//! `(op_own & 1) == !!(n & ncqe)`), the consumer index read from the CQ
//! doorbell record `[MLX5_CQ_SET_CI]`, overflow detected when the ring is
//! full; or collapsed (`cc=1`) and overrun-allowed (`oi=1`), every CQE in
//! slot 0, as NVSHMEM creates its CQs (`ibgda.cpp` `DEVX_SET(cqc, ...)`).
//! A normal CQ may be overrun-allowed too (the PRM's CQ context `oi`, as
//! DOCA GPUNetIO creates its CQs): it never overflows, the doorbell record
//! is never read, and a CQE not yet consumed is overwritten a pass later,
//! so its consumer must keep no more than `ncqe` CQEs outstanding.

use crate::shm::Shm;
use crate::trace::{Kind, Recorder};
use marrow_mlx5::cqe::{COLLAPSED_CQ_FILL, Completion, encode_cqe, owner_bit_for};
use marrow_mlx5::raw::{MLX5_CQ_SET_CI, MLX5_CQE_INIT_OP_OWN, MLX5_CQE_SIZE, mlx5_cq_dbrec};
use marrow_mmio::Region;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

const CQE: usize = MLX5_CQE_SIZE as usize;

/// Byte offset of the consumer index in a CQ's doorbell record (`[MLX5_CQ_SET_CI]`, BE32).
pub const SET_CI_OFFSET: usize = 4 * MLX5_CQ_SET_CI as usize;

/// How CQEs are placed: the same two modes the CPU initiator polls
/// (normal, owner bit per pass; collapsed, every CQE in slot 0).
pub use marrow_driver::CqMode;

/// The CQ is in error (it overflowed): the CQE was not written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqError;

/// A CQ as the device model holds it.
#[derive(Debug)]
pub struct Cq {
    /// CQ number.
    pub cqn: u32,
    /// Placement mode.
    pub mode: CqMode,
    /// Entries (a power of two).
    pub ncqe: u32,
    /// The CQE ring.
    pub buf: Region,
    /// The CQ doorbell record (8 bytes).
    pub dbrec: Region,
    /// CQEs written so far, not reduced.
    pub pi: u32,
    /// Set once the ring overflowed; no CQE is written after that.
    pub overflowed: bool,
    /// Force an overflow on the next CQE (fault injection).
    pub force_overflow: bool,
    /// Overrun allowed (CQ context `oi`): no overflow check, no consumer
    /// index read. Collapsed CQs always have it.
    pub overrun_ignore: bool,
    /// The shared mapping behind `buf` and `dbrec`.
    pub shm: Arc<Shm>,
}

/// Bytes of the shared mapping of a CQ: the ring, then the doorbell record
/// at the next 64-byte boundary.
pub fn cq_layout(ncqe: u32) -> (usize, usize) {
    let ring = ncqe as usize * CQE;
    (ring, ring + 64)
}

impl Cq {
    /// A CQ of `ncqe` entries over a fresh mapping, initialised as rdma-core
    /// does (`op_own = 0xf0`: INVALID, owner 0).
    pub fn new(cqn: u32, ncqe: u32, mode: CqMode) -> std::io::Result<Cq> {
        let (ring, total) = cq_layout(ncqe);
        let shm = Arc::new(Shm::create(&format!("cq{cqn}"), total)?);
        let r = shm.region();
        let buf = r.sub(0, ring).map_err(std::io::Error::other)?;
        let dbrec = r.sub(ring, 8).map_err(std::io::Error::other)?;
        Self::in_memory(cqn, ncqe, mode, shm, buf, dbrec)
    }

    /// A CQ of `ncqe` entries whose ring (`ncqe` × 64 bytes) and doorbell
    /// record (8 bytes) are given, inside `shm`; initialised as [`Cq::new`]
    /// initialises its own.
    pub fn in_memory(
        cqn: u32,
        ncqe: u32,
        mode: CqMode,
        shm: Arc<Shm>,
        buf: Region,
        dbrec: Region,
    ) -> std::io::Result<Cq> {
        let ring = ncqe as usize * CQE;
        if buf.len() < ring || dbrec.len() < 8 {
            return Err(std::io::Error::other(format!(
                "CQ of {ncqe} entries needs {ring} ring bytes and 8 doorbell-record bytes, got {} and {}",
                buf.len(),
                dbrec.len()
            )));
        }
        // A fresh memfd is zero already; caller-provided memory may not be.
        dbrec.fill(0, 8, 0).map_err(std::io::Error::other)?;
        let init = if mode == CqMode::Collapsed { COLLAPSED_CQ_FILL } else { MLX5_CQE_INIT_OP_OWN as u8 };
        for i in 0..ncqe as usize {
            // NVSHMEM memsets its collapsed CQ to all ones; rdma-core sets op_own only.
            if mode == CqMode::Collapsed {
                buf.fill(i * CQE, CQE, COLLAPSED_CQ_FILL).map_err(std::io::Error::other)?;
            }
            buf.write_u8(i * CQE + CQE - 1, init).map_err(std::io::Error::other)?;
        }
        let overrun_ignore = mode == CqMode::Collapsed;
        Ok(Cq { cqn, mode, ncqe, buf, dbrec, pi: 0, overflowed: false, force_overflow: false, overrun_ignore, shm })
    }

    /// The consumer index software last published (24 bits).
    pub fn consumer_index(&self) -> u32 {
        (self.dbrec.read_be32(SET_CI_OFFSET).unwrap_or(0) >> mlx5_cq_dbrec::CONS_INDEX_SHIFT)
            & mlx5_cq_dbrec::CONS_INDEX_MASK
    }

    /// Byte offset in `buf` of the slot the next CQE goes to.
    pub fn next_slot_offset(&self) -> usize {
        match self.mode {
            CqMode::Normal => (self.pi % self.ncqe.max(1)) as usize * CQE,
            CqMode::Collapsed => 0,
        }
    }

    /// Write one CQE. `Err` when the CQ overflows (or already has): the
    /// caller moves the QP to the error state, as the HCA does on a CQ error.
    pub fn push(&mut self, c: &Completion, qpn: u32, trace: &mut Option<Recorder>) -> Result<(), CqError> {
        if self.overflowed {
            return Err(CqError);
        }
        // An overrun-allowed CQ never overflows: no consumer index to read.
        let ci = if self.overrun_ignore { self.pi } else { self.consumer_index() };
        // Counted modulo the record's consumer index, as hardware compares them.
        let outstanding = self.pi.wrapping_sub(ci) & mlx5_cq_dbrec::CONS_INDEX_MASK;
        if self.force_overflow || (!self.overrun_ignore && outstanding >= self.ncqe) {
            self.overflowed = true;
            if let Some(t) = trace {
                let mut b = self.pi.to_le_bytes().to_vec();
                b.extend_from_slice(&ci.to_le_bytes());
                t.record(Kind::CQ_OVERFLOW, qpn, self.cqn, 0, &b);
            }
            return Err(CqError);
        }
        let owner = match self.mode {
            CqMode::Normal => owner_bit_for(self.pi, self.ncqe) == 1,
            // Slot 0 always; the owner bit alternates so each CQE differs.
            CqMode::Collapsed => self.pi & 1 == 1,
        };
        let bytes = encode_cqe(c, owner).map_err(|_| CqError)?;
        let off = self.next_slot_offset();
        // Payload first, op_own last: a poller that sees the new owner bit
        // (then issues its from_device barrier) sees the whole CQE.
        let [payload @ .., op_own] = &bytes;
        self.buf.write_array(off, payload).map_err(|_| CqError)?;
        fence(Ordering::Release);
        self.buf.write_u8(off + CQE - 1, *op_own).map_err(|_| CqError)?;
        if let Some(t) = trace {
            t.record(Kind::CQE_WRITE, qpn, self.cqn, off as u64, &bytes);
        }
        self.pi = self.pi.wrapping_add(1);
        Ok(())
    }
}
