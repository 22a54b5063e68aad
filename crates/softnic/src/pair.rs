//! Two connected RC endpoints on one softnic, each with its own send and
//! receive CQs, a registered buffer, and the CPU initiator's queue
//! handles. What tests, `marrow demo` and the benchmarks start from.

use crate::SoftNic;
use crate::cq::CqMode;
use crate::hca::{HcaError, ModifyQp};
use crate::mr::Access;
use crate::qp::{QpCaps, QpState};
use crate::shm::Shm;
use marrow_driver::{CqPoller, PollError, RecvQueue, SendQueue};
use marrow_mlx5::cqe::Completion;
use marrow_mmio::Region;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Sizes of a pair.
#[derive(Clone, Copy, Debug)]
pub struct PairConfig {
    /// Send queue WQEBBs.
    pub sq_wqebbs: u32,
    /// Entries of each CQ.
    pub ncqe: u32,
    /// CQ placement.
    pub cq_mode: CqMode,
    /// Bytes of each endpoint's registered buffer.
    pub buf_len: usize,
    /// Rights of the registered buffers.
    pub access: Access,
    /// Record a register trace of at most this many bytes, from before the
    /// QPs are connected (so their state changes are in it).
    pub trace: Option<usize>,
}

impl Default for PairConfig {
    fn default() -> Self {
        PairConfig {
            sq_wqebbs: 64,
            ncqe: 64,
            cq_mode: CqMode::Normal,
            buf_len: 1 << 20,
            access: Access::all(),
            trace: None,
        }
    }
}

/// One side of a pair.
#[derive(Debug)]
pub struct Endpoint {
    /// QP number.
    pub qpn: u32,
    /// Send CQ number.
    pub send_cqn: u32,
    /// Receive CQ number.
    pub recv_cqn: u32,
    /// The send queue (CPU initiator).
    pub sq: SendQueue,
    /// The send CQ poller.
    pub scq: CqPoller,
    /// The receive queue.
    pub rq: RecvQueue,
    /// The receive CQ poller.
    pub rcq: CqPoller,
    /// The registered buffer.
    pub buf: Region,
    /// Its virtual address (what WQEs carry).
    pub addr: u64,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
    shm: Arc<Shm>,
}

impl Endpoint {
    /// The shared mapping behind `buf`.
    pub fn buf_shm(&self) -> &Arc<Shm> {
        &self.shm
    }
}

/// A wait that ran out of time, with the state that explains it.
#[derive(Debug, thiserror::Error)]
#[error(
    "no completion after {waited:?} on CQ {cqn:#x} of QP {qpn:#x}: QP {state:?}, \
     send queue posted {sq_pi} WQEBBs, device consumed {sq_ci}; CQ consumer {cq_ci}, device produced {cq_pi}{overflow}"
)]
pub struct WaitTimeout {
    /// How long it waited.
    pub waited: Duration,
    /// The QP.
    pub qpn: u32,
    /// The CQ.
    pub cqn: u32,
    /// QP state.
    pub state: QpState,
    /// Producer index (WQEBBs posted).
    pub sq_pi: u32,
    /// Device's consumer index (WQEBBs executed).
    pub sq_ci: u32,
    /// Software's CQ consumer index.
    pub cq_ci: u32,
    /// Device's CQ producer index.
    pub cq_pi: u32,
    /// ", CQ overflowed" when it did.
    pub overflow: &'static str,
}

/// Why a wait failed.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// Nothing arrived in time.
    #[error(transparent)]
    Timeout(#[from] WaitTimeout),
    /// The CQE could not be read.
    #[error("polling: {0}")]
    Poll(PollError),
}

/// Two connected endpoints.
#[derive(Debug)]
pub struct Pair {
    /// The device model.
    pub nic: SoftNic,
    /// The requester side in most uses.
    pub a: Endpoint,
    /// The responder side in most uses.
    pub b: Endpoint,
}

/// Which endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `a`.
    A,
    /// `b`.
    B,
}

fn endpoint(nic: &SoftNic, pd: crate::mr::Pd, cfg: &PairConfig, name: &str) -> Result<Endpoint, HcaError> {
    let mut hca = nic.hca();
    let send_cqn = hca.create_cq(cfg.ncqe, cfg.cq_mode)?;
    let recv_cqn = hca.create_cq(cfg.ncqe, CqMode::Normal)?;
    let caps = QpCaps { sq_wqebbs: cfg.sq_wqebbs, ..QpCaps::default() };
    let qpn = hca.create_qp(pd, send_cqn, recv_cqn, caps)?;
    let shm = Arc::new(Shm::create(name, cfg.buf_len)?);
    let buf = shm.region().sub(0, cfg.buf_len).map_err(std::io::Error::other)?;
    let addr = buf.base_addr() as u64;
    let (lkey, rkey) = hca.reg_mr(pd, addr, buf, cfg.access);
    let qp = hca.qp(qpn)?;
    let m = &qp.mem;
    let sq = SendQueue::new(m.sq, caps.sq_wqebbs, m.dbrec, m.uar, qpn);
    let rq = RecvQueue::new(m.rq, caps.rq_wqes, caps.rq_stride as usize, m.dbrec);
    let scq = {
        let c = hca.cq(send_cqn)?;
        CqPoller::new(c.buf, c.ncqe, c.dbrec, c.mode)
    };
    let rcq = {
        let c = hca.cq(recv_cqn)?;
        CqPoller::new(c.buf, c.ncqe, c.dbrec, c.mode)
    };
    Ok(Endpoint { qpn, send_cqn, recv_cqn, sq, scq, rq, rcq, buf, addr, lkey, rkey, shm })
}

impl Pair {
    /// Create, connect (RESET→INIT→RTR→RTS both ways) and start one engine thread.
    pub fn new(cfg: PairConfig) -> Result<Pair, HcaError> {
        let mut pair = Self::unstarted(cfg)?;
        pair.nic.start(1);
        Ok(pair)
    }

    /// As [`Pair::new`] without an engine thread: drive it with `nic.scan()`.
    pub fn unstarted(cfg: PairConfig) -> Result<Pair, HcaError> {
        let nic = SoftNic::new();
        if let Some(cap) = cfg.trace {
            nic.enable_trace(cap);
        }
        let pd = nic.hca().alloc_pd();
        let a = endpoint(&nic, pd, &cfg, "buf-a")?;
        let b = endpoint(&nic, pd, &cfg, "buf-b")?;
        {
            let mut hca = nic.hca();
            for (me, peer) in [(a.qpn, b.qpn), (b.qpn, a.qpn)] {
                hca.modify_qp(me, ModifyQp::to(QpState::Init))?;
                hca.modify_qp(me, ModifyQp::rtr(peer))?;
                hca.modify_qp(me, ModifyQp::to(QpState::Rts))?;
            }
        }
        Ok(Pair { nic, a, b })
    }

    /// An endpoint.
    pub fn side(&mut self, s: Side) -> &mut Endpoint {
        match s {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Wait for the next CQE on a send (`recv = false`) or receive CQ, at
    /// most `timeout`; a timeout reports the QP and CQ state.
    pub fn wait(&mut self, s: Side, recv: bool, timeout: Duration) -> Result<Completion, WaitError> {
        let start = Instant::now();
        let threads = !self.nic.engines.is_empty();
        loop {
            if !threads {
                self.nic.scan();
            }
            let ep = self.side(s);
            let poller = if recv { &mut ep.rcq } else { &mut ep.scq };
            if let Some(c) = poller.poll().map_err(WaitError::Poll)? {
                return Ok(c);
            }
            if start.elapsed() > timeout {
                return Err(self.timeout(s, recv, start.elapsed()).into());
            }
            std::hint::spin_loop();
            if start.elapsed() > Duration::from_micros(200) {
                std::thread::yield_now();
            }
        }
    }

    fn timeout(&mut self, s: Side, recv: bool, waited: Duration) -> WaitTimeout {
        let (qpn, cqn, sq_pi, cq_ci) = {
            let ep = self.side(s);
            let cqn = if recv { ep.recv_cqn } else { ep.send_cqn };
            let ci = if recv { ep.rcq.ci() } else { ep.scq.ci() };
            (ep.qpn, cqn, ep.sq.pi(), ci)
        };
        let hca = self.nic.hca();
        let (state, sq_ci) = hca.qp(qpn).map(|q| (q.state, q.sq_ci)).unwrap_or((QpState::Err, 0));
        let (cq_pi, overflowed) = hca.cq(cqn).map(|c| (c.pi, c.overflowed)).unwrap_or((0, false));
        WaitTimeout {
            waited,
            qpn,
            cqn,
            state,
            sq_pi,
            sq_ci,
            cq_ci,
            cq_pi,
            overflow: if overflowed { ", CQ overflowed" } else { "" },
        }
    }
}
