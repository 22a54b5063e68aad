//! Receive queue posting (`providers/mlx5/qp.c` `mlx5_post_recv`): a
//! receive WQE is a scatter list of data segments, terminated by one with
//! `lkey = MLX5_INVALID_LKEY` when it is shorter than the stride; then
//! `to_device` and the doorbell record's `[MLX5_RCV_DBR]` = new head.

use marrow_mlx5::raw::{MLX5_INVALID_LKEY, MLX5_RCV_DBR, mlx5_qp_dbrec, mlx5_wqe_data_seg};
use marrow_mlx5::wqe::Sge;
use marrow_mmio::{OutOfBounds, Region, barrier};
use zerocopy::{FromZeros, IntoBytes};

/// Why a receive post failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvError {
    /// More entries than one receive WQE (stride / 16) holds.
    TooManySges {
        /// Entries given.
        got: usize,
        /// Entries that fit.
        max: usize,
    },
    /// No free receive WQE.
    QueueFull,
    /// An access was out of bounds.
    Mmio(OutOfBounds),
}

impl core::fmt::Display for RecvError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RecvError::TooManySges { got, max } => write!(f, "{got} scatter entries, a receive WQE holds {max}"),
            RecvError::QueueFull => write!(f, "receive queue full"),
            RecvError::Mmio(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RecvError {}

/// A receive queue.
#[derive(Debug)]
pub struct RecvQueue {
    ring: Region,
    nwqe: u32,
    stride: usize,
    dbrec: Region,
    head: u32,
    tail: u32,
}

impl RecvQueue {
    /// A receive queue of `nwqe` WQEs of `stride` bytes each.
    pub fn new(ring: Region, nwqe: u32, stride: usize, dbrec: Region) -> Self {
        RecvQueue { ring, nwqe, stride, dbrec, head: 0, tail: 0 }
    }

    /// Post one receive WQE and publish the new head.
    pub fn post(&mut self, sgl: &[Sge]) -> Result<u16, RecvError> {
        let max = self.stride / 16;
        if sgl.len() > max {
            return Err(RecvError::TooManySges { got: sgl.len(), max });
        }
        if self.head.wrapping_sub(self.tail) >= self.nwqe {
            return Err(RecvError::QueueFull);
        }
        let base = (self.head % self.nwqe) as usize * self.stride;
        for (i, s) in sgl.iter().enumerate() {
            let mut d = mlx5_wqe_data_seg::new_zeroed();
            d.set_byte_count(s.length).set_lkey(s.lkey).set_addr(s.addr);
            self.ring.write_bytes(base + i * 16, d.as_bytes()).map_err(RecvError::Mmio)?;
        }
        if sgl.len() < max {
            let mut t = mlx5_wqe_data_seg::new_zeroed();
            t.set_lkey(MLX5_INVALID_LKEY);
            self.ring.write_bytes(base + sgl.len() * 16, t.as_bytes()).map_err(RecvError::Mmio)?;
        }
        let index = self.head as u16;
        self.head = self.head.wrapping_add(1);
        // The receive WQE must be visible before the new head.
        barrier::to_device();
        self.dbrec
            .write_be32(4 * MLX5_RCV_DBR as usize, self.head & mlx5_qp_dbrec::RCV_WQE_COUNTER_MASK)
            .map_err(RecvError::Mmio)?;
        Ok(index)
    }

    /// Record that the receive at `wqe_counter` completed.
    pub fn complete(&mut self, _wqe_counter: u16) {
        self.tail = self.tail.wrapping_add(1);
    }
}
