//! The HCA: objects (PDs, MRs, CQs, QPs), their creation, modification
//! and events. What an engine thread runs lives beside it, one concern a
//! file:
//!
//! - `scan.rs`: the doorbell scan;
//! - `send_queue.rs`: the send-queue walk, each WQE fetched and handed to
//!   [`crate::exec`], and its CQE;
//! - `wire.rs`: wire QPs, where the HCA meets the RC transport
//!   ([`crate::rc`]);
//! - `delegate.rs`: QPs whose transport is a [`crate::delegate::Delegate`];
//! - `views.rs`: the traits through which `exec` and `respond` see it.

mod delegate;
mod scan;
mod send_queue;
mod views;
mod wire;

use crate::cq::{Cq, CqMode};
use crate::fault::Faults;
use crate::hot::HotSet;
use crate::mr::{Access, MrTable, Pd};
use crate::qp::{Qp, QpCaps, QpMemory, QpState};
use crate::table::Table;
use crate::trace::{Kind, Recorder};
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::raw::{MLX5_ADAPTER_PAGE_SIZE, MLX5_SEND_WQE_BB};
use marrow_mmio::Region;

/// Errors of the control path (object creation and modification).
#[derive(Debug, thiserror::Error)]
pub enum HcaError {
    /// No such object.
    #[error("no {what} {id:#x}")]
    NoSuch {
        /// Kind of object.
        what: &'static str,
        /// Its number.
        id: u32,
    },
    /// A size that is not a power of two or is out of range.
    #[error("{what} = {value}: must be a power of two in {min}..={max}")]
    BadSize {
        /// Which size.
        what: &'static str,
        /// The value given.
        value: u32,
        /// Smallest allowed.
        min: u32,
        /// Largest allowed.
        max: u32,
    },
    /// A QP state transition the state machine does not allow.
    #[error("QP {qpn:#x}: {from:?} → {to:?} is not a legal transition (IBA §10.3.1)")]
    BadTransition {
        /// The QP.
        qpn: u32,
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// INIT→RTR needs the peer QP.
    #[error("QP {qpn:#x}: INIT→RTR needs the destination QP number")]
    NoPeer {
        /// The QP.
        qpn: u32,
    },
    /// RoCEv2 attributes that cannot be used.
    #[error("QP {qpn:#x}: {why}")]
    BadWire {
        /// The QP.
        qpn: u32,
        /// What is wrong.
        why: String,
    },
    /// Shared memory could not be created.
    #[error("shared memory: {0}")]
    Io(#[from] std::io::Error),
    /// The softnic daemon holding the other end refused or failed.
    #[error(transparent)]
    Daemon(#[from] crate::client::ClientError),
    /// An object still in use by another (`ibv_destroy_cq` on a CQ a QP
    /// uses: EBUSY).
    #[error("{what} {id:#x} is in use by {by}")]
    Busy {
        /// Kind of object.
        what: &'static str,
        /// Its number.
        id: u32,
        /// What uses it.
        by: String,
    },
}

/// Attributes of a QP modification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModifyQp {
    /// Target state.
    pub state: QpState,
    /// Destination QP (INIT→RTR).
    pub dest_qpn: Option<u32>,
    /// RNR retry count (7 = infinite).
    pub rnr_retry: Option<u32>,
    /// The RoCEv2 path (INIT→RTR, and RTR→RTS for `sq_psn`, timeouts and
    /// retries), when the destination QP is reached over a wire port.
    pub wire: Option<crate::rc::WireAttrs>,
}

impl ModifyQp {
    /// Just a state change.
    pub fn to(state: QpState) -> Self {
        ModifyQp { state, dest_qpn: None, rnr_retry: None, wire: None }
    }

    /// INIT→RTR towards `dest_qpn` of this model.
    pub fn rtr(dest_qpn: u32) -> Self {
        ModifyQp { dest_qpn: Some(dest_qpn), ..Self::to(QpState::Rtr) }
    }
}

/// A device-side event software may want to know about (IBA "asynchronous events").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A CQ overflowed; its QPs went to ERR.
    CqOverflow {
        /// The CQ.
        cqn: u32,
    },
    /// A QP entered the error state.
    QpFatal {
        /// The QP.
        qpn: u32,
        /// Why.
        why: String,
    },
}

/// The device model's state. One lock guards it; engine threads take it
/// for a scan, the control path for each call.
#[derive(Debug)]
pub struct Hca {
    pub(crate) mrs: MrTable,
    pub(crate) cqs: Table<Cq>,
    pub(crate) qps: Table<Qp>,
    next_pd: u32,
    pub(crate) trace: Option<Recorder>,
    pub(crate) events: std::collections::VecDeque<AsyncEvent>,
    /// Events dropped because [`MAX_EVENTS`] were waiting.
    events_dropped: u64,
    /// Doorbells refused: written on one QP's UAR page, naming another QP
    /// that is not bound to that page.
    doorbells_refused: u64,
    /// RNR retry interval.
    pub(crate) rnr_timer: std::time::Duration,
    /// Wire ports ([`crate::SoftNic::attach_port`]).
    pub(crate) ports: Vec<crate::rc::port::PortHandle>,
    /// QPs looked at again every [`hot::stride`] QPs of a sweep.
    hot: HotSet,
}

/// The first CQ number handed out.
const FIRST_CQN: u32 = 0x80;
/// The first QP number: QPN 0 and 1 are the special QPs of IBA; numbering
/// from 0x100, a doorbell of all zeros can never name a real QP.
const FIRST_QPN: u32 = 0x100;

impl Default for Hca {
    fn default() -> Self {
        Hca {
            mrs: MrTable::default(),
            cqs: Table::new(FIRST_CQN),
            qps: Table::new(FIRST_QPN),
            next_pd: 1,
            trace: None,
            events: std::collections::VecDeque::new(),
            events_dropped: 0,
            doorbells_refused: 0,
            rnr_timer: std::time::Duration::from_micros(20),
            ports: Vec::new(),
            hot: HotSet::default(),
        }
    }
}

/// The `ds` (16-byte units) of a WQE whose first 8 bytes are `first` (the
/// control segment's start, which a BlueFlame doorbell also carries).
fn wqe_ds(first: &[u8]) -> usize {
    use zerocopy::FromBytes;
    let head = first.get(..marrow_mlx5::raw::mlx5_uar_db::SIZE).unwrap_or_default();
    marrow_mlx5::raw::mlx5_uar_db::read_from_bytes(head).map_or(0, |d| usize::from(d.ds()))
}

/// Asynchronous events kept until taken; older ones are dropped (and
/// counted) beyond this, as an event queue that nobody reads overflows.
pub const MAX_EVENTS: usize = 4096;

fn check_pow2(what: &'static str, value: u32, min: u32, max: u32) -> Result<(), HcaError> {
    if value.is_power_of_two() && (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(HcaError::BadSize { what, value, min, max })
    }
}

impl Hca {
    /// Allocate a protection domain.
    pub fn alloc_pd(&mut self) -> Pd {
        self.next_pd += 1;
        Pd(self.next_pd - 1)
    }

    /// Register memory; returns (lkey, rkey).
    pub fn reg_mr(&mut self, pd: Pd, addr: u64, region: Region, access: Access) -> (u32, u32) {
        self.mrs.register(pd, addr, region, access)
    }

    /// Register device memory (a GPU's, behind its copy engine) at `addr`;
    /// returns (lkey, rkey).
    pub fn reg_device_mr(
        &mut self,
        pd: Pd,
        addr: u64,
        dev: std::sync::Arc<dyn crate::mr::DeviceMemory>,
        access: Access,
    ) -> (u32, u32) {
        let len = dev.len() as u64;
        self.mrs.register_backing(pd, addr, len, crate::mr::Backing::Device(dev), access)
    }

    /// Deregister memory.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), HcaError> {
        self.mrs.deregister(lkey).map(|_| ()).ok_or(HcaError::NoSuch { what: "MR with lkey", id: lkey })
    }

    /// Destroy a QP (`ibv_destroy_qp`), in any state: its queues go with it,
    /// WQEs not yet executed are not, and a peer's requests to it find no
    /// QP (as on hardware, no response: the peer's retries run out).
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), HcaError> {
        self.qps.remove(&qpn).ok_or(HcaError::NoSuch { what: "QP", id: qpn })?;
        if let Some(t) = &mut self.trace {
            t.record(Kind::QP_STATE, qpn, 0, 0, b"destroyed");
        }
        Ok(())
    }

    /// Destroy a CQ (`ibv_destroy_cq`); refused while a QP uses it.
    pub fn destroy_cq(&mut self, cqn: u32) -> Result<(), HcaError> {
        self.cq(cqn)?;
        let users: Vec<String> = self
            .qps
            .values()
            .filter(|q| q.send_cq == cqn || q.recv_cq == cqn)
            .map(|q| format!("QP {:#x}", q.qpn))
            .collect();
        if !users.is_empty() {
            return Err(HcaError::Busy { what: "CQ", id: cqn, by: users.join(", ") });
        }
        self.cqs.remove(&cqn);
        Ok(())
    }

    /// QPs, CQs and MRs that exist now.
    pub fn object_counts(&self) -> (usize, usize, usize) {
        (self.qps.len(), self.cqs.len(), self.mrs.len())
    }

    /// Doorbells refused so far: written on a QP's UAR page and naming a QP
    /// not bound to that page (each is also traced).
    pub fn doorbells_refused(&self) -> u64 {
        self.doorbells_refused
    }

    /// Events dropped so far because [`MAX_EVENTS`] were waiting untaken.
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped
    }

    /// Create a CQ of `ncqe` 64-byte entries.
    pub fn create_cq(&mut self, ncqe: u32, mode: CqMode) -> Result<u32, HcaError> {
        check_pow2("ncqe", ncqe, 1, 1 << 22)?;
        let cqn = self.cqs.next_number();
        Ok(self.cqs.push(Cq::new(cqn, ncqe, mode)?))
    }

    /// Create a CQ whose ring and doorbell record live in memory the caller
    /// provides (`ring` is `ncqe` × 64 bytes, `dbrec` 8 bytes, both inside
    /// `shm`): for a CQ placed where another agent already maps it, such as
    /// a PCI BAR shared with a virtual machine. The ring is initialised as
    /// [`create_cq`](Self::create_cq) initialises its own.
    pub fn create_cq_in(
        &mut self,
        ncqe: u32,
        mode: CqMode,
        shm: std::sync::Arc<crate::shm::Shm>,
        ring: Region,
        dbrec: Region,
    ) -> Result<u32, HcaError> {
        check_pow2("ncqe", ncqe, 1, 1 << 22)?;
        let cqn = self.cqs.next_number();
        Ok(self.cqs.push(Cq::in_memory(cqn, ncqe, mode, shm, ring, dbrec)?))
    }

    /// Allow or forbid overrun on a CQ (the CQ context's `oi`, set at
    /// CREATE_CQ or by MODIFY_CQ): an overrun-allowed CQ never overflows
    /// and its doorbell record is never read. Collapsed CQs always allow it.
    pub fn set_cq_overrun_ignore(&mut self, cqn: u32, on: bool) -> Result<(), HcaError> {
        let cq = self.cqs.get_mut(&cqn).ok_or(HcaError::NoSuch { what: "CQ", id: cqn })?;
        cq.overrun_ignore = on || cq.mode == CqMode::Collapsed;
        Ok(())
    }

    /// A CQ.
    pub fn cq(&self, cqn: u32) -> Result<&Cq, HcaError> {
        self.cqs.get(&cqn).ok_or(HcaError::NoSuch { what: "CQ", id: cqn })
    }

    /// Create an RC QP in RESET.
    pub fn create_qp(&mut self, pd: Pd, send_cq: u32, recv_cq: u32, caps: QpCaps) -> Result<u32, HcaError> {
        check_pow2("sq_wqebbs", caps.sq_wqebbs, 1, 32768)?;
        check_pow2("rq_wqes", caps.rq_wqes, 1, 32768)?;
        check_pow2("rq_stride", caps.rq_stride, 16, 1024)?;
        self.cq(send_cq)?;
        self.cq(recv_cq)?;
        let qpn = self.qps.next_number();
        let mem = QpMemory::allocate(qpn, &caps)?;
        Ok(self.push_qp(qpn, pd, send_cq, recv_cq, caps, mem))
    }

    /// Create an RC QP in RESET whose rings, doorbell record and UAR page are
    /// the caller's `mem` (sized for `caps`): for queues placed where another
    /// agent already maps them, such as a PCI BAR shared with a virtual
    /// machine.
    pub fn create_qp_in(
        &mut self,
        pd: Pd,
        send_cq: u32,
        recv_cq: u32,
        caps: QpCaps,
        mem: QpMemory,
    ) -> Result<u32, HcaError> {
        check_pow2("sq_wqebbs", caps.sq_wqebbs, 1, 32768)?;
        check_pow2("rq_wqes", caps.rq_wqes, 1, 32768)?;
        check_pow2("rq_stride", caps.rq_stride, 16, 1024)?;
        let too_small = |what: &'static str, have: usize, need: usize| {
            (have < need).then(|| HcaError::Io(std::io::Error::other(format!("{what} is {have} bytes, {need} needed"))))
        };
        let sq_need = caps.sq_wqebbs as usize * MLX5_SEND_WQE_BB as usize;
        let rq_need = (caps.rq_wqes * caps.rq_stride) as usize;
        if let Some(e) = too_small("send queue", mem.sq.len(), sq_need)
            .or_else(|| too_small("receive queue", mem.rq.len(), rq_need))
            .or_else(|| too_small("doorbell record", mem.dbrec.len(), 8))
            .or_else(|| too_small("UAR page", mem.uar.len(), MLX5_ADAPTER_PAGE_SIZE as usize))
        {
            return Err(e);
        }
        self.cq(send_cq)?;
        self.cq(recv_cq)?;
        let qpn = self.qps.next_number();
        Ok(self.push_qp(qpn, pd, send_cq, recv_cq, caps, mem))
    }

    fn push_qp(&mut self, qpn: u32, pd: Pd, send_cq: u32, recv_cq: u32, caps: QpCaps, mem: QpMemory) -> u32 {
        self.qps.push(Qp {
            qpn,
            pd,
            state: QpState::Reset,
            send_cq,
            recv_cq,
            peer: None,
            caps,
            mem,
            sq_ci: 0,
            sq_target: None,
            rq_ci: 0,
            faults: Faults::default(),
            executed: 0,
            error_reported: false,
            delayed: Vec::new(),
            rnr: None,
            rnr_retry: 7,
            wire: None,
            delegate: None,
            blueflame: None,
        })
    }

    /// A QP.
    pub fn qp(&self, qpn: u32) -> Result<&Qp, HcaError> {
        self.qps.get(&qpn).ok_or(HcaError::NoSuch { what: "QP", id: qpn })
    }

    pub(crate) fn qp_mut(&mut self, qpn: u32) -> Result<&mut Qp, HcaError> {
        self.qps.get_mut(&qpn).ok_or(HcaError::NoSuch { what: "QP", id: qpn })
    }

    /// Modify a QP (the control path: `ibv_modify_qp`).
    pub fn modify_qp(&mut self, qpn: u32, m: ModifyQp) -> Result<(), HcaError> {
        let nports = self.ports.len() as u32;
        let qp = self.qp_mut(qpn)?;
        if !qp.state.can_move_to(m.state) {
            return Err(HcaError::BadTransition { qpn, from: qp.state, to: m.state });
        }
        if let Some(w) = &m.wire
            && w.port >= nports
        {
            return Err(HcaError::BadWire { qpn, why: format!("port {} does not exist ({nports} attached)", w.port) });
        }
        // Everything is checked before anything changes.
        let wire = match (qp.state, m.state, m.wire) {
            (QpState::Init, QpState::Rtr, Some(w)) => {
                let dest = m.dest_qpn.ok_or(HcaError::NoPeer { qpn })?;
                Some(crate::rc::WireQp::new(w, dest).map_err(|why| HcaError::BadWire { qpn, why })?)
            }
            (_, _, Some(w)) => {
                w.check().map_err(|why| HcaError::BadWire { qpn, why })?;
                None
            }
            _ => None,
        };
        if qp.state == QpState::Init && m.state == QpState::Rtr {
            qp.peer = Some(m.dest_qpn.ok_or(HcaError::NoPeer { qpn })?);
            qp.wire = wire.map(Box::new);
        } else if let (Some(w), Some(wq)) = (m.wire, qp.wire.as_mut()) {
            wq.path.attrs = w;
            wq.req.update(&w);
        }
        if let Some(r) = m.rnr_retry {
            qp.rnr_retry = r;
        }
        if m.state == QpState::Reset {
            qp.sq_ci = 0;
            qp.sq_target = None;
            qp.rq_ci = 0;
            qp.peer = None;
            qp.wire = None;
            qp.delegate = None;
            qp.blueflame = None;
            qp.error_reported = false;
            qp.rnr = None;
            qp.mem.dbrec.write_be32(0, 0).ok();
            qp.mem.dbrec.write_be32(4, 0).ok();
        }
        self.set_state(qpn, m.state);
        Ok(())
    }

    pub(crate) fn set_state(&mut self, qpn: u32, to: QpState) {
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        let from = qp.state;
        qp.state = to;
        tracing::debug!(qpn = format_args!("{qpn:#x}"), ?from, ?to, "QP transition");
        if let Some(t) = &mut self.trace {
            t.record(Kind::QP_STATE, qpn, 0, 0, &[from as u8, to as u8]);
        }
    }

    /// Move a QP to ERR because of an error CQE or a CQ error.
    pub(crate) fn fail_qp(&mut self, qpn: u32, why: String) {
        if self.qps.get(&qpn).is_some_and(|q| q.state != QpState::Err) {
            self.set_state(qpn, QpState::Err);
            self.push_event(AsyncEvent::QpFatal { qpn, why });
        }
    }

    fn push_event(&mut self, e: AsyncEvent) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
            self.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// Arm faults on a QP.
    pub fn set_faults(&mut self, qpn: u32, faults: Faults) -> Result<(), HcaError> {
        let overflow = faults.overflow_cq;
        let qp = self.qp_mut(qpn)?;
        qp.faults = faults;
        let cqn = qp.send_cq;
        if overflow && let Some(cq) = self.cqs.get_mut(&cqn) {
            cq.force_overflow = true;
        }
        Ok(())
    }

    /// Drain the asynchronous events.
    pub fn take_events(&mut self) -> Vec<AsyncEvent> {
        self.events.drain(..).collect()
    }

    /// Drain the events that `mine` says belong to the caller, leaving the rest.
    pub fn take_events_where(&mut self, mine: impl Fn(&AsyncEvent) -> bool) -> Vec<AsyncEvent> {
        let mut taken = Vec::new();
        self.events.retain(|e| {
            let m = mine(e);
            if m {
                taken.push(e.clone());
            }
            !m
        });
        taken
    }

    /// Write a CQE to `cqn` for `qpn`; on overflow the QPs using the CQ go to ERR.
    pub(crate) fn complete(&mut self, cqn: u32, qpn: u32, c: &Completion) {
        let Some(cq) = self.cqs.get_mut(&cqn) else { return };
        if cq.push(c, qpn, &mut self.trace).is_err() {
            if !self.events.contains(&AsyncEvent::CqOverflow { cqn }) {
                self.push_event(AsyncEvent::CqOverflow { cqn });
            }
            let users: Vec<u32> =
                self.qps.values().filter(|q| q.send_cq == cqn || q.recv_cq == cqn).map(|q| q.qpn).collect();
            for q in users {
                self.fail_qp(q, format!("CQ {cqn:#x} overflowed"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AsyncEvent, Hca, MAX_EVENTS};

    #[test]
    fn untaken_events_are_bounded_and_the_drops_counted() {
        let mut h = Hca::default();
        for qpn in 0..(MAX_EVENTS as u32 + 10) {
            h.push_event(AsyncEvent::QpFatal { qpn, why: String::new() });
        }
        assert_eq!(h.events.len(), MAX_EVENTS);
        assert_eq!(h.events_dropped(), 10);
        // The oldest went first.
        assert_eq!(h.events.front(), Some(&AsyncEvent::QpFatal { qpn: 10, why: String::new() }));
        let odd = h.take_events_where(|e| matches!(e, AsyncEvent::QpFatal { qpn, .. } if qpn % 2 == 1));
        assert_eq!(odd.len(), MAX_EVENTS / 2);
        assert_eq!(h.take_events().len(), MAX_EVENTS / 2);
    }
}
