//! Reliable-connected QPs: the state machine of the InfiniBand Architecture
//! Specification vol. 1 §10.3.1 (RESET→INIT→RTR→RTS, SQD, SQE, ERR), the
//! send queue of 64-byte WQEBBs with its doorbell record, the receive queue,
//! and the UAR page whose BlueFlame register receives doorbells (rdma-core:
//! registers at `MLX5_BF_OFFSET` 0x800, two halves of 0x100 used in turn).

use crate::fault::Faults;
use crate::mr::Pd;
use crate::shm::Shm;
use marrow_mlx5::raw::{
    MLX5_ADAPTER_PAGE_SIZE, MLX5_BF_OFFSET, MLX5_DB_BLUEFLAME_BUFFER_SIZE, MLX5_RCV_DBR, MLX5_SEND_WQE_BB, MLX5_SND_DBR,
};
use marrow_mmio::Region;
use std::sync::Arc;
use std::time::Instant;

/// QP states, numbered as `enum ibv_qp_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum QpState {
    /// Just created or reset.
    Reset = 0,
    /// Initialised: receives may be posted.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drained: new WQEs wait.
    Sqd = 4,
    /// Send queue error.
    Sqe = 5,
    /// Error: every WQE is flushed.
    Err = 6,
}

impl QpState {
    /// From the `ibv_qp_state` number.
    pub fn from_u8(v: u8) -> Option<QpState> {
        Some(match v {
            0 => QpState::Reset,
            1 => QpState::Init,
            2 => QpState::Rtr,
            3 => QpState::Rts,
            4 => QpState::Sqd,
            5 => QpState::Sqe,
            6 => QpState::Err,
            _ => return None,
        })
    }

    /// Whether a modify from `self` to `to` is allowed (IBA §10.3.1, fig. 124).
    pub fn can_move_to(self, to: QpState) -> bool {
        use QpState::*;
        matches!(
            (self, to),
            (_, Reset)
                | (_, Err)
                | (Reset, Init)
                | (Init, Init)
                | (Init, Rtr)
                | (Rtr, Rts)
                | (Rts, Rts)
                | (Rts, Sqd)
                | (Sqd, Sqd)
                | (Sqd, Rts)
                | (Sqe, Rts)
        )
    }

    /// True where the QP accepts incoming requests (responder side).
    pub fn can_receive(self) -> bool {
        matches!(self, QpState::Rtr | QpState::Rts | QpState::Sqd)
    }
}

/// Queue sizes of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue WQEBBs (a power of two, 1 to 32768).
    pub sq_wqebbs: u32,
    /// Receive WQEs (a power of two).
    pub rq_wqes: u32,
    /// Bytes per receive WQE (a power of two ≥ 16): stride / 16 scatter entries.
    pub rq_stride: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        QpCaps { sq_wqebbs: 64, rq_wqes: 64, rq_stride: 64 }
    }
}

/// Where a QP's queues live, for the process that posts to them.
#[derive(Clone, Debug)]
pub struct QpMemory {
    /// Send queue ring.
    pub sq: Region,
    /// Receive queue ring.
    pub rq: Region,
    /// Doorbell record: `[0]` receive counter, `[1]` send counter.
    pub dbrec: Region,
    /// The UAR page (4 KiB).
    pub uar: Region,
    /// Mapping of the rings and doorbell record.
    pub queues: Arc<Shm>,
    /// Mapping of the UAR page.
    pub uar_page: Arc<Shm>,
    /// Byte offsets within `queues`: (sq, rq, dbrec).
    pub offsets: (usize, usize, usize),
}

/// Offsets of the doorbell registers in a UAR page polled by the model.
pub const DOORBELL_OFFSETS: [usize; 2] =
    [MLX5_BF_OFFSET as usize, MLX5_BF_OFFSET as usize + MLX5_DB_BLUEFLAME_BUFFER_SIZE as usize];

impl QpMemory {
    /// Allocate the rings, doorbell record and UAR page of a QP.
    pub fn allocate(qpn: u32, caps: &QpCaps) -> std::io::Result<QpMemory> {
        let sq_len = caps.sq_wqebbs as usize * MLX5_SEND_WQE_BB as usize;
        let rq_len = (caps.rq_wqes * caps.rq_stride) as usize;
        let rq_off = sq_len.div_ceil(4096) * 4096;
        let db_off = rq_off + rq_len.div_ceil(64) * 64;
        let queues = Arc::new(Shm::create(&format!("qp{qpn}"), db_off + 64)?);
        let uar_page = Arc::new(Shm::create(&format!("uar{qpn}"), MLX5_ADAPTER_PAGE_SIZE as usize)?);
        let q = queues.region();
        let e = std::io::Error::other;
        Ok(QpMemory {
            sq: q.sub(0, sq_len).map_err(e)?,
            rq: q.sub(rq_off, rq_len.max(16)).map_err(e)?,
            dbrec: q.sub(db_off, 8).map_err(e)?,
            uar: uar_page.region(),
            queues,
            uar_page,
            offsets: (0, rq_off, db_off),
        })
    }
}

/// A delayed doorbell waiting for its time.
#[derive(Clone, Copy, Debug)]
pub struct PendingDoorbell {
    /// When it may be acted on.
    pub at: Instant,
    /// Its bytes.
    pub bytes: [u8; 8],
}

/// A QP as the device model holds it.
#[derive(Debug)]
pub struct Qp {
    /// QP number.
    pub qpn: u32,
    /// Protection domain.
    pub pd: Pd,
    /// Current state.
    pub state: QpState,
    /// CQ for send completions.
    pub send_cq: u32,
    /// CQ for receive completions.
    pub recv_cq: u32,
    /// The connected peer QP (set at INIT→RTR).
    pub peer: Option<u32>,
    /// Sizes.
    pub caps: QpCaps,
    /// Memory.
    pub mem: QpMemory,
    /// Next WQEBB to execute, not reduced.
    pub sq_ci: u32,
    /// How far doorbells have announced (16-bit WQEBB index).
    pub sq_target: Option<u16>,
    /// Next receive WQE to consume, not reduced.
    pub rq_ci: u32,
    /// Armed faults.
    pub faults: Faults,
    /// WQEs executed so far (for `Faults::fail_wqe`).
    pub executed: u64,
    /// An error CQE was already produced (for CE = first error only).
    pub error_reported: bool,
    /// Doorbells held back by `Faults::delay_doorbell`.
    pub delayed: Vec<PendingDoorbell>,
    /// A SEND waiting for a receive WQE at the peer: first attempt, retries.
    pub rnr: Option<(Instant, u32)>,
    /// RNR retries before RNR_RETRY_EXC (7 = forever, as in IBA).
    pub rnr_retry: u32,
    /// The RoCEv2 transport, when the peer is reached over a wire port.
    pub wire: Option<Box<crate::rc::WireQp>>,
    /// The transport outside the model, when a delegate carries this QP's
    /// messages ([`crate::delegate`]).
    pub delegate: Option<crate::delegate::DelegateQp>,
    /// A WQE that arrived by BlueFlame: its index and bytes.
    pub blueflame: Option<(u16, Vec<u8>)>,
}

/// Byte offset of the send counter in a QP's doorbell record (`[MLX5_SND_DBR]`, BE32).
pub const SND_DBR_OFFSET: usize = 4 * MLX5_SND_DBR as usize;
/// Byte offset of the receive counter in the doorbell record.
pub const RCV_DBR_OFFSET: usize = 4 * MLX5_RCV_DBR as usize;

impl Qp {
    /// Byte offset in the send queue of the WQEBB `k` past the consumer index.
    pub fn sq_slot_offset(&self, k: u32) -> usize {
        (self.sq_ci.wrapping_add(k) % self.caps.sq_wqebbs.max(1)) as usize * MLX5_SEND_WQE_BB as usize
    }

    /// WQEBBs announced but not executed.
    pub fn pending(&self) -> u32 {
        match self.sq_target {
            Some(t) => t.wrapping_sub(self.sq_ci as u16) as u32,
            None => 0,
        }
    }

    /// Nothing for the engine to do on this QP this scan: no doorbell in
    /// its UAR registers, no WQE announced and not executed, no delayed
    /// doorbell, no RNR wait and no wire state or delegate (a wire QP's
    /// timers run, and a delegate is polled, every scan).
    pub fn idle(&self) -> bool {
        self.pending() == 0
            && self.delayed.is_empty()
            && self.rnr.is_none()
            && self.wire.is_none()
            && self.delegate.is_none()
            && DOORBELL_OFFSETS.iter().all(|&off| {
                self.mem.uar.atomic_u64(off).is_ok_and(|a| a.load(std::sync::atomic::Ordering::Relaxed) == 0)
            })
    }
}
