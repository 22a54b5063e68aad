//! The HCA: objects (PDs, MRs, CQs, QPs), the doorbell scan an engine
//! thread runs, and the send-queue walk that fetches each WQE and hands it
//! to [`crate::exec`].

use crate::clock::ScanClock;
use crate::cq::{Cq, CqMode};
use crate::exec::{self, Outcome};
use crate::fault::Faults;
use crate::hot::{self, HotSet};
use crate::mr::{Access, MrTable, Pd};
use crate::qp::{DOORBELL_OFFSETS, PendingDoorbell, Qp, QpCaps, QpMemory, QpState, RCV_DBR_OFFSET, SND_DBR_OFFSET};
use crate::table::Table;
use crate::trace::{Kind, Recorder};
use marrow_mlx5::cqe::{Completion, ErrorCompletion};
use marrow_mlx5::doorbell::{DoorbellStyle, decode_uar_doorbell};
use marrow_mlx5::raw::{
    CompletionMode, CqeOpcode, MLX5_ADAPTER_PAGE_SIZE, MLX5_DB_BLUEFLAME_BUFFER_SIZE, MLX5_SEND_WQE_BB, Syndrome,
    WqeOpcode, mlx5_wqe_data_seg,
};
use marrow_mlx5::wqe::wqebbs_for_ds;
use marrow_mlx5::wqe_decode::CtrlFields;
use marrow_mmio::Region;
use std::time::Instant;

const BB: usize = MLX5_SEND_WQE_BB as usize;

/// A fetched WQE: one or two WQEBBs stay on the stack, unzeroed until read.
type WqeBuf = smallvec::SmallVec<[u8; 2 * BB]>;

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

/// A doorbell on `qp` was just seen: ask for the lines its WQEs will touch
/// next, before any of them is read. The send counter of the doorbell
/// record, the WQE at the consumer index, the send CQ's next slot (for a
/// store) and, unless the CQ ignores overrun, its consumer index were last
/// written by the poster or read by it, so each is a miss; asked for
/// together, the misses overlap instead of following one another through
/// the doorbell's decode, the fetch and the CQE. A hint: nothing here
/// reads or changes what the engine then does.
fn prefetch_for_doorbell(qp: &Qp, cqs: &Table<Cq>) {
    use marrow_mmio::Prefetch;
    let m = &qp.mem;
    let _ = m.dbrec.prefetch(SND_DBR_OFFSET, Prefetch::Read);
    let _ = m.sq.prefetch(qp.sq_slot_offset(0), Prefetch::Read);
    if let Some(cq) = cqs.get(&qp.send_cq) {
        let _ = cq.buf.prefetch(cq.next_slot_offset(), Prefetch::Write);
        if !cq.overrun_ignore {
            let _ = cq.dbrec.prefetch(crate::cq::SET_CI_OFFSET, Prefetch::Read);
        }
    }
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
        shm: std::sync::Arc<crate::Shm>,
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

    /// One scan of every QP: doorbells found, send queues walked, and the
    /// recently busy QPs looked at again every few QPs of the sweep (see
    /// `hot.rs`). Returns the number of WQEs executed or flushed, so an idle
    /// engine can back off.
    pub fn scan(&mut self) -> usize {
        let mut work = 0;
        // At most one clock read per scan, and none where nothing needs the
        // time (clock.rs).
        let mut clock = ScanClock::default();
        self.hot.expire_now_and_then(&mut clock);
        let stride = hot::stride(self.hot.len());
        // QPNs are dense from the table's base: no list to allocate per scan.
        for (i, qpn) in self.qps.number_range().enumerate() {
            if i > 0 && (i as u32).is_multiple_of(stride) && !self.hot.is_empty() {
                let busy: smallvec::SmallVec<[u32; hot::MAX_HOT]> = self.hot.numbers().collect();
                for q in busy {
                    work += self.visit(q, &mut clock);
                }
            }
            work += self.visit(qpn, &mut clock);
        }
        work
    }

    /// Serve `qpn` once: doorbells, send queue, wire timers. Most QPs are
    /// idle most scans: one look decides, so an idle QP costs a few loads,
    /// not the full walk.
    fn visit(&mut self, qpn: u32, clock: &mut ScanClock) -> usize {
        if self.qps.get(&qpn).is_none_or(Qp::idle) {
            return 0;
        }
        self.find_doorbells(qpn, clock);
        let work = self.walk_send_queue(qpn) + self.tick_wire(qpn, clock);
        if work > 0 {
            self.hot.touch(qpn, clock.now());
        }
        work
    }

    /// Read and clear the doorbell registers of `qpn`'s UAR page; `clock`
    /// is the scan's time, read only for a delayed doorbell (a fault).
    fn find_doorbells(&mut self, qpn: u32, clock: &mut ScanClock) {
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        let uar = qp.mem.uar;
        let mut found = smallvec::SmallVec::<[(usize, [u8; 8]); 2]>::new();
        for off in DOORBELL_OFFSETS {
            // Taking the value (leaving zeros) sees a doorbell written twice
            // with the same bytes; no real QP has number 0, so an all-zero
            // register is always "no doorbell".
            // Look before taking: an idle scan then only reads the line, so
            // it stays clean in this CPU's cache, and a device's doorbell
            // store need not first pull back a line our swap dirtied.
            if uar.atomic_u64(off).is_ok_and(|a| a.load(std::sync::atomic::Ordering::Relaxed) != 0) {
                if found.is_empty() {
                    prefetch_for_doorbell(qp, &self.cqs);
                }
                if let Ok(bytes) = uar.swap_8bytes(off, [0; 8])
                    && bytes != [0; 8]
                {
                    found.push((off, bytes));
                }
            }
        }
        let ready: Vec<PendingDoorbell> = if qp.delayed.is_empty() {
            Vec::new()
        } else {
            let now = clock.now();
            let (due, later): (Vec<_>, Vec<_>) = qp.delayed.drain(..).partition(|d| d.at <= now);
            qp.delayed = later;
            due
        };
        for (off, bytes) in found {
            if let Some(t) = &mut self.trace {
                t.record(Kind::DOORBELL, qpn, 0, off as u64, &bytes);
            }
            self.take_blueflame(qpn, off, bytes);
            let Some(qp) = self.qps.get_mut(&qpn) else { return };
            if qp.faults.drop_doorbells > 0 {
                qp.faults.drop_doorbells -= 1;
                if let Some(t) = &mut self.trace {
                    t.record(Kind::DOORBELL_DROPPED, qpn, 0, off as u64, &bytes);
                }
                continue;
            }
            if let Some(d) = qp.faults.delay_doorbell {
                qp.delayed.push(PendingDoorbell { at: clock.now() + d, bytes });
                continue;
            }
            self.ring(qpn, bytes);
        }
        for d in ready {
            self.ring(qpn, d.bytes);
        }
    }

    /// A BlueFlame write carries the whole WQE in the register (rdma-core
    /// `post_send_db` copies it in 64-byte chunks when it fits the buffer,
    /// `MLX5_DB_BLUEFLAME_BUFFER_SIZE`): keep it, so the WQE is executed
    /// from these bytes rather than fetched from the ring. Shared memory has
    /// no write-combining burst, so the writer stores the first 8 bytes
    /// last; the rest of the buffer is read after them, then cleared.
    fn take_blueflame(&mut self, qpn: u32, off: usize, first: [u8; 8]) {
        let ds = wqe_ds(&first);
        let len = ds * 16;
        if ds == 0 || len > MLX5_DB_BLUEFLAME_BUFFER_SIZE as usize {
            return;
        }
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        // Looked at on the stack: most doorbells are 8 bytes, and an
        // allocation per doorbell was a visible part of the engine's
        // doorbell-to-CQE latency.
        let mut rest = [0u8; MLX5_DB_BLUEFLAME_BUFFER_SIZE as usize - 8];
        let rest = &mut rest[..len.saturating_sub(8)];
        if rest.is_empty() || qp.mem.uar.read_bytes(off + 8, rest).is_err() || rest.iter().all(|&b| b == 0) {
            return; // an 8-byte doorbell
        }
        let mut wqe = first.to_vec();
        wqe.extend_from_slice(rest);
        let _ = qp.mem.uar.fill(off + 8, len - 8, 0);
        let index = decode_uar_doorbell(first).wqe_index;
        if let Some(t) = &mut self.trace {
            t.record(Kind::BLUEFLAME, qpn, 0, off as u64, &wqe);
        }
        qp.blueflame = Some((index, wqe));
    }

    /// Act on a doorbell found on `page_qpn`'s UAR page.
    fn ring(&mut self, page_qpn: u32, bytes: [u8; 8]) {
        let db = decode_uar_doorbell(bytes);
        // The doorbell names its QP. A UAR page may be shared by several QPs
        // (the queues a caller places with `create_qp_in`), but a doorbell
        // drives only a QP bound to the page it was written on: a process
        // holding one QP's page must not ring another's.
        let page = self.qps.get(&page_qpn).map(|q| q.mem.uar.base_addr());
        let bound = self.qps.get(&db.qpn).is_some_and(|q| Some(q.mem.uar.base_addr()) == page);
        if !bound {
            self.doorbells_refused += 1;
            if let Some(t) = &mut self.trace {
                let msg = if self.qps.contains_key(&db.qpn) {
                    format!(
                        "doorbell on QP {page_qpn:#x}'s UAR page names QP {:#x}, which is not bound to that page; not executed",
                        db.qpn
                    )
                } else {
                    format!("doorbell names QPN {:#x}, which does not exist; ignored", db.qpn)
                };
                t.record(Kind::WQE_ERROR, page_qpn, 0, 0, msg.as_bytes());
            }
            return;
        }
        let qpn = db.qpn;
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        let dbrec = qp.mem.dbrec.read_be32(SND_DBR_OFFSET).unwrap_or(0) as u16;
        if let Some(t) = &mut self.trace {
            let mut rec = [0u8; 8];
            qp.mem.dbrec.read_bytes(0, &mut rec).ok();
            t.record(Kind::DBREC_READ, qpn, 0, 0, &rec);
        }
        // How far the doorbell itself says: rdma-core rings with the last
        // WQE's control bytes (index of its first WQEBB, its ds), NVSHMEM and
        // DOCA with the next free index. Take whichever of that and the
        // doorbell record reaches further, within one ring.
        let from_db = match db.style {
            DoorbellStyle::RdmaCore => db.wqe_index.wrapping_add(wqebbs_for_ds(db.ds as usize) as u16),
            DoorbellStyle::IndexAndQpn => db.wqe_index,
        };
        let ci = qp.sq_ci as u16;
        let n = qp.caps.sq_wqebbs as u16;
        let ahead = |t: u16| t.wrapping_sub(ci);
        let mut target = qp.sq_target.unwrap_or(ci);
        for t in [dbrec, from_db] {
            if ahead(t) <= n && ahead(t) > ahead(target) {
                target = t;
            }
        }
        qp.sq_target = Some(target);
    }

    /// Execute (or flush) the WQEs announced on `qpn`'s send queue.
    fn walk_send_queue(&mut self, qpn: u32) -> usize {
        let mut done = 0;
        // A bounded batch per scan keeps one busy QP from starving the others.
        while done < 256 {
            let Some(qp) = self.qps.get(&qpn) else { break };
            if qp.faults.stall {
                break;
            }
            if qp.state == QpState::Err && qp.delegate.as_ref().is_some_and(|d| d.d.outstanding() > 0) {
                // The delegate's QP flushes what it holds first; the WQEs
                // after them are flushed here once those are reported.
                break;
            }
            if qp.state == QpState::Err && qp.wire.as_ref().is_some_and(|w| w.req.outstanding() > 0) {
                // WQEs on the wire when the QP failed complete first, flushed.
                let mut actions = Vec::new();
                if let Some(w) = self.qps.get_mut(&qpn).and_then(|q| q.wire.as_mut()) {
                    w.req.flush(&mut actions);
                }
                done += actions.len();
                self.apply(qpn, actions);
                continue;
            }
            if qp.pending() == 0 {
                break;
            }
            match qp.state {
                QpState::Rts => {}
                QpState::Sqd => break, // drained: new WQEs wait for RTS
                _ => {
                    // Posting outside RTS, or after an error: the QP is (or
                    // goes) to ERR and every WQE completes with WR_FLUSH_ERR.
                    if qp.state != QpState::Err {
                        self.fail_qp(qpn, format!("WQE posted in state {:?}", qp.state));
                    }
                    if !self.flush_one(qpn) {
                        break;
                    }
                    done += 1;
                    continue;
                }
            }
            if let Some((since, tries)) = qp.rnr
                && since.elapsed() < self.rnr_timer * tries.max(1)
            {
                break; // waiting out the RNR timer
            }
            if !self.execute_one(qpn) {
                break;
            }
            done += 1;
        }
        done
    }

    /// Copy the WQE at the consumer index out of the ring (WQEBB by WQEBB,
    /// wrapping), as the HCA's fetch does. Returns the buffer and the
    /// WQEBBs it spans.
    fn fetch(&mut self, qpn: u32, wqe: &mut WqeBuf) -> Option<usize> {
        let qp = self.qps.get_mut(&qpn)?;
        if let Some((_, bf)) = qp.blueflame.take_if(|(i, _)| *i == qp.sq_ci as u16) {
            // The WQE came with its doorbell: no fetch from the ring.
            let bbs = bf.len().div_ceil(BB);
            wqe.extend_from_slice(&bf);
            wqe.resize(bbs * BB, 0);
            return Some(bbs);
        }
        let qp = self.qps.get(&qpn)?;
        let slot = |i: u32| qp.sq_slot_offset(i);
        // Read straight into the inline buffer: fixed-size moves, no memmove
        // or memset call, and no copy of a copy (a 64-byte value handed
        // through a `Result` is stored at an odd offset and read back with
        // loads the store buffer cannot forward).
        let mut inline = [0u8; 2 * BB];
        qp.mem.sq.read_bytes(slot(0), &mut inline[..BB]).ok()?;
        let ds = wqe_ds(&inline);
        *wqe = WqeBuf::from_buf_and_len(inline, BB);
        // A WQE spans at most the WQEBBs announced; a `ds` that claims more
        // is read only as far as the announced part (and fails validation).
        let bbs = wqebbs_for_ds(ds.max(1)).min(qp.pending() as usize).max(1);
        for i in 1..bbs {
            wqe.extend_from_slice(&qp.mem.sq.read_array::<BB>(slot(i as u32)).ok()?);
        }
        if let Some(t) = &mut self.trace {
            let shown = (ds * 16).clamp(16, bbs * BB);
            t.record(Kind::WQE_FETCH, qpn, 0, slot(0) as u64, &wqe[..shown]);
        }
        Some(bbs)
    }

    /// Flush the WQE at the consumer index with WR_FLUSH_ERR.
    fn flush_one(&mut self, qpn: u32) -> bool {
        let mut wqe = WqeBuf::new();
        let Some(bbs) = self.fetch(qpn, &mut wqe) else { return false };
        let ctrl = exec::ctrl_of(&wqe);
        let (opcode, wqe_counter) = (ctrl.opcode, ctrl.wqe_index);
        let qp = self.qps.get_mut(&qpn).expect("fetched above");
        qp.sq_ci = qp.sq_ci.wrapping_add(bbs as u32);
        self.wqe_flushed(qpn, opcode, wqe_counter);
        true
    }

    /// The WR_FLUSH_ERR CQE of a WQE the QP had not finished when it failed.
    pub(crate) fn wqe_flushed(&mut self, qpn: u32, opcode: WqeOpcode, wqe_counter: u16) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        let cqn = qp.send_cq;
        let c = Completion::Error(ErrorCompletion {
            opcode: CqeOpcode::REQ_ERR,
            syndrome: Syndrome::WR_FLUSH_ERR,
            vendor_err_synd: 0,
            hw_err_synd: 0,
            hw_synd_type: 0,
            wqe_opcode: opcode,
            qpn,
            wqe_counter,
        });
        self.complete(cqn, qpn, &c);
    }

    /// Execute the WQE at the consumer index.
    fn execute_one(&mut self, qpn: u32) -> bool {
        let mut buf = WqeBuf::new();
        let Some(bbs) = self.fetch(qpn, &mut buf) else { return false };
        let wqe = &buf[..];
        let ctrl = exec::ctrl_of(wqe);
        let outcome = exec::execute(self, qpn, wqe, &ctrl);
        self.finish(qpn, bbs, ctrl, outcome)
    }

    /// Act on what became of the WQE at the consumer index: complete it,
    /// fail it, wait out RNR, or hand it to the wire (the requester completes it).
    /// Returns whether the walk may go on to the next WQE.
    fn finish(&mut self, qpn: u32, bbs: usize, ctrl: CtrlFields, outcome: Outcome) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else { return false };
        // CQEs come in WQE order: a WQE that completes here (a NOP, a local
        // error) waits until the wire has answered for the ones before it.
        if matches!(outcome, Outcome::Done { .. } | Outcome::Error { .. })
            && (qp.wire.as_ref().is_some_and(|w| w.req.outstanding() > 0)
                || qp.delegate.as_ref().is_some_and(|d| d.d.outstanding() > 0))
        {
            return false;
        }
        match outcome {
            Outcome::Rnr => {
                let tries = qp.rnr.map_or(1, |(_, t)| t + 1);
                if qp.rnr_retry != 7 && tries > qp.rnr_retry {
                    qp.rnr = None;
                    self.error(qpn, bbs, ctrl, Syndrome::RNR_RETRY_EXC_ERR, 0, "receiver not ready, retries exhausted");
                } else {
                    qp.rnr = Some((qp.rnr.map_or(Instant::now(), |(s, _)| s), tries));
                    return false;
                }
            }
            Outcome::Sent => {
                // On the wire: the requester completes it when it is acknowledged.
                qp.rnr = None;
                qp.executed += 1;
                qp.sq_ci = qp.sq_ci.wrapping_add(bbs as u32);
            }
            Outcome::Busy => return false,
            Outcome::Done { byte_cnt } => {
                qp.rnr = None;
                qp.executed += 1;
                qp.sq_ci = qp.sq_ci.wrapping_add(bbs as u32);
                self.wqe_done(qpn, ctrl, byte_cnt);
            }
            Outcome::Error { syndrome, vendor, why } => {
                qp.rnr = None;
                self.error(qpn, bbs, ctrl, syndrome, vendor, &why);
            }
        }
        true
    }

    /// Complete the WQE at the consumer index with an error CQE and move
    /// the QP to ERR, as the HCA does.
    fn error(&mut self, qpn: u32, bbs: usize, ctrl: CtrlFields, syndrome: Syndrome, vendor: u8, why: &str) {
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        qp.executed += 1;
        qp.sq_ci = qp.sq_ci.wrapping_add(bbs as u32);
        self.wqe_failed(qpn, ctrl, syndrome, vendor, why);
    }

    /// The CQE of a WQE that completed, if its completion mode asks for one.
    pub(crate) fn wqe_done(&mut self, qpn: u32, ctrl: CtrlFields, byte_cnt: u32) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        let cqn = qp.send_cq;
        if matches!(ctrl.completion, CompletionMode::CQE_ALWAYS | CompletionMode::CQE_AND_EQE) {
            let c = Completion::Requester {
                wqe_opcode: ctrl.opcode,
                qpn,
                wqe_counter: ctrl.wqe_index,
                byte_cnt,
                timestamp: 0,
            };
            self.complete(cqn, qpn, &c);
        }
    }

    /// The error CQE of a WQE that failed; the QP goes to ERR.
    pub(crate) fn wqe_failed(&mut self, qpn: u32, ctrl: CtrlFields, syndrome: Syndrome, vendor: u8, why: &str) {
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        let report = !(ctrl.completion == CompletionMode::CQE_ON_FIRST_CQE_ERROR && qp.error_reported);
        qp.error_reported = true;
        let cqn = qp.send_cq;
        if let Some(t) = &mut self.trace {
            let msg = format!("{syndrome:?}: {why}");
            t.record(Kind::WQE_ERROR, qpn, 0, 0, msg.as_bytes());
        }
        if report {
            let c = Completion::Error(ErrorCompletion {
                opcode: CqeOpcode::REQ_ERR,
                syndrome,
                vendor_err_synd: vendor,
                hw_err_synd: 0,
                hw_synd_type: 0,
                wqe_opcode: ctrl.opcode,
                qpn,
                wqe_counter: ctrl.wqe_index,
            });
            self.complete(cqn, qpn, &c);
        }
        self.fail_qp(qpn, format!("{syndrome:?}: {why}"));
    }
}

/// The responder's view of this HCA ([`crate::respond`]): the target QP's
/// PD, state and receive queue, the MR table, its receive CQ, its error path.
impl crate::respond::Target for Hca {
    fn accepting(&self, qpn: u32) -> Result<crate::mr::Pd, crate::respond::Nak> {
        use crate::respond::Nak;
        match self.qps.get(&qpn) {
            Some(p) if p.state.can_receive() => Ok(p.pd),
            Some(p) => {
                Err(Nak::NoResponse(format!("peer QP {qpn:#x} is in {:?}: no response, retries exhausted", p.state)))
            }
            None => Err(Nak::NoResponse(format!("peer QP {qpn:#x} does not exist"))),
        }
    }

    fn mrs(&self) -> &MrTable {
        &self.mrs
    }

    fn connected(&self, qpn: u32, from: u32) -> bool {
        self.qps.get(&qpn).is_some_and(|q| q.peer == Some(from))
    }

    fn has_recv(&self, qpn: u32) -> bool {
        self.qps
            .get(&qpn)
            .is_some_and(|qp| qp.mem.dbrec.read_be32(RCV_DBR_OFFSET).is_ok_and(|head| head as u16 != qp.rq_ci as u16))
    }

    fn take_recv(&mut self, qpn: u32) -> Option<crate::respond::Recv> {
        let qp = self.qps.get_mut(&qpn)?;
        let head = qp.mem.dbrec.read_be32(RCV_DBR_OFFSET).ok()? as u16;
        if head == qp.rq_ci as u16 {
            return None;
        }
        let stride = qp.caps.rq_stride as usize;
        let base = (qp.rq_ci % qp.caps.rq_wqes) as usize * stride;
        let mut raw = vec![0u8; stride];
        qp.mem.rq.read_bytes(base, &mut raw).ok()?;
        let index = qp.rq_ci as u16;
        qp.rq_ci = qp.rq_ci.wrapping_add(1);
        let mut sges = Vec::new();
        for seg in raw.chunks_exact(mlx5_wqe_data_seg::SIZE) {
            let Ok(d) = <mlx5_wqe_data_seg as zerocopy::FromBytes>::read_from_bytes(seg) else { break };
            let (bc, lkey, addr) = (d.byte_count(), d.lkey(), d.addr());
            if lkey == marrow_mlx5::raw::MLX5_INVALID_LKEY {
                break;
            }
            sges.push((addr, bc, lkey));
        }
        if let Some(t) = &mut self.trace {
            t.record(Kind::RECV_WQE_FETCH, qpn, 0, base as u64, &raw);
        }
        Some(crate::respond::Recv { index, sges })
    }

    fn complete_recv(&mut self, qpn: u32, c: &Completion) {
        if let Some(cqn) = self.qps.get(&qpn).map(|q| q.recv_cq) {
            self.complete(cqn, qpn, c);
        }
    }

    fn fail(&mut self, qpn: u32, why: String) {
        self.fail_qp(qpn, why);
    }
}

/// The requester's view of this HCA ([`crate::exec`]).
impl exec::Initiator for Hca {
    fn prepare(&mut self, qpn: u32) -> Result<exec::Prepared, Outcome> {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return Err(Outcome::Error { syndrome: Syndrome::LOCAL_QP_OP_ERR, vendor: 0, why: "QP vanished".into() });
        };
        if let Some((k, syndrome, vendor)) = qp.faults.fail_wqe
            && k == qp.executed
        {
            qp.faults.fail_wqe = None;
            if let Some(t) = &mut self.trace {
                let msg = format!("injected {syndrome:?} (vendor {vendor:#04x}) on WQE #{k}");
                t.record(Kind::FAULT, qpn, 0, 0, msg.as_bytes());
            }
            return Err(Outcome::Error { syndrome, vendor, why: "injected fault".into() });
        }
        let wire = qp.wire.is_some() || qp.delegate.is_some();
        Ok(exec::Prepared { pd: qp.pd, sq_ci: qp.sq_ci as u16, peer: qp.peer, wire })
    }

    fn wire_post(&mut self, qpn: u32, msg: crate::rc::requester::Message, ctrl: CtrlFields, byte_cnt: u32) -> Outcome {
        Hca::wire_post(self, qpn, msg, ctrl, byte_cnt)
    }

    fn wire_buffer(&mut self, qpn: u32, len: usize) -> Vec<u8> {
        Hca::wire_buffer(self, qpn, len)
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
