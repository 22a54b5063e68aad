//! One client connection: its requests, what it owns, and the end of it.
//!
//! A session owns every PD, MR, CQ and QP it made. A request that names an
//! object the session does not own is refused, whoever owns it, with the
//! same words as for an object that does not exist, so object numbers say
//! nothing about other clients. The one exception is the destination QP of
//! `ModifyQp`: connecting to another client's QP is what the daemon is for,
//! and that QP executes requests only once it is connected back (RC).
//!
//! When the connection ends, for any reason, the session destroys what it
//! owns: QPs first (peers then find no QP and their retries run out), then
//! CQs and MRs, whose memory is unmapped once the model no longer names it.

use super::Options;
use super::admission::{Admission, Ticket};
use crate::SoftNic;
use crate::hca::{AsyncEvent, HcaError, ModifyQp};
use crate::mr::{Access, Pd};
use crate::qp::QpCaps;
use crate::shm::Shm;
use crate::wire::{self, Limits, PROTOCOL_VERSION, Reply, Request};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// The largest register trace a client may ask the daemon to keep.
const MAX_TRACE_CAP: usize = 256 << 20;

/// A memory region a session registered, and the mapping behind it.
#[derive(Debug)]
struct OwnedMr {
    pd: u32,
    len: u64,
    _shm: Arc<Shm>,
}

/// A QP a session made, and what it holds of the session's budget.
#[derive(Debug)]
struct OwnedQp {
    pd: u32,
    entries: u64,
}

/// What one connection owns.
#[derive(Debug)]
struct Session<'n> {
    nic: &'n SoftNic,
    limits: Limits,
    /// Who is on the other end, for the log.
    who: String,
    greeted: bool,
    pds: BTreeSet<u32>,
    mrs: BTreeMap<u32, OwnedMr>,
    cqs: BTreeMap<u32, u64>,
    qps: BTreeMap<u32, OwnedQp>,
}

/// What a request is answered with: the reply and the memfds sent with it.
type Answer = (Reply, Vec<OwnedFd>);

fn refused(why: impl Into<String>) -> Answer {
    (Reply::Error(why.into()), Vec::new())
}

fn ok(r: Reply) -> Answer {
    (r, Vec::new())
}

/// Serve one connection until it ends, then destroy what it made.
pub(super) fn run(nic: &SoftNic, s: UnixStream, opts: &Options, door: &Admission, mut ticket: Ticket) {
    let who = peer_name(&s);
    let mut session = Session {
        nic,
        limits: opts.limits,
        who,
        greeted: false,
        pds: BTreeSet::new(),
        mrs: BTreeMap::new(),
        cqs: BTreeMap::new(),
        qps: BTreeMap::new(),
    };
    let _ = s.set_read_timeout(Some(opts.handshake_timeout));
    loop {
        let (req, fds) = match wire::recv::<Request>(&s) {
            Ok(Some(m)) => m,
            Ok(None) => break,
            Err(e) => {
                let why = match e.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                        format!("no Hello within {:?}", opts.handshake_timeout)
                    }
                    _ => e.to_string(),
                };
                // Out of protocol: say why, then close (the stream may be
                // mid-message, so nothing after this could be parsed).
                let _ = wire::send(&s, &Reply::Error(format!("{why}; closing the connection")), &[]);
                break;
            }
        };
        let hello = matches!(req, Request::Hello { .. });
        if !session.greeted
            && matches!(req, Request::Hello { version } if version == PROTOCOL_VERSION)
            && let Err(why) = door.greet(&mut ticket)
        {
            let _ = wire::send(&s, &Reply::Error(why), &[]);
            break;
        }
        let asked = tracing::enabled!(tracing::Level::DEBUG).then(|| format!("{req:?}"));
        let (reply, out) = session.handle(req, fds);
        if let Some(asked) = asked {
            tracing::debug!(client = %session.who, request = %asked, reply = ?reply, fds = out.len(), "daemon request");
        }
        let raw: Vec<i32> = out.iter().map(|f| f.as_raw_fd()).collect();
        // A connection that is still not greeted sent something else, or a
        // Hello of another version: it has been told why; close it.
        let failed_handshake = !session.greeted;
        if wire::send(&s, &reply, &raw).is_err() || failed_handshake {
            break;
        }
        if hello {
            let _ = s.set_read_timeout(None);
        }
    }
    session.end();
    door.leave(ticket);
}

/// "pid N (uid U)" from the socket's peer credentials, for the log.
fn peer_name(s: &UnixStream) -> String {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    match getsockopt(s, PeerCredentials) {
        Ok(c) => format!("pid {} (uid {})", c.pid(), c.uid()),
        Err(_) => "a client".into(),
    }
}

impl Session<'_> {
    fn objects(&self) -> usize {
        self.pds.len() + self.mrs.len() + self.cqs.len() + self.qps.len()
    }

    fn room_for_one_more(&self) -> Result<(), Answer> {
        if self.objects() >= self.limits.objects as usize {
            return Err(refused(format!(
                "this client holds {} objects, the limit (PDs, MRs, CQs and QPs together)",
                self.limits.objects
            )));
        }
        Ok(())
    }

    fn own_pd(&self, pd: u32) -> Result<(), Answer> {
        if self.pds.contains(&pd) { Ok(()) } else { Err(refused(format!("no PD {pd:#x}"))) }
    }

    fn own_cq(&self, cqn: u32) -> Result<(), Answer> {
        if self.cqs.contains_key(&cqn) {
            Ok(())
        } else {
            Err(refused(HcaError::NoSuch { what: "CQ", id: cqn }.to_string()))
        }
    }

    fn own_qp(&self, qpn: u32) -> Result<(), Answer> {
        if self.qps.contains_key(&qpn) {
            Ok(())
        } else {
            Err(refused(HcaError::NoSuch { what: "QP", id: qpn }.to_string()))
        }
    }

    fn owns_event(&self, e: &AsyncEvent) -> bool {
        match e {
            AsyncEvent::CqOverflow { cqn } => self.cqs.contains_key(cqn),
            AsyncEvent::QpFatal { qpn, .. } => self.qps.contains_key(qpn),
        }
    }

    fn handle(&mut self, req: Request, fds: Vec<OwnedFd>) -> Answer {
        if !self.greeted {
            return self.hello(&req);
        }
        let r = match req {
            Request::Hello { .. } => Err(refused("Hello was already sent on this connection")),
            Request::AllocPd => self.alloc_pd(),
            Request::DeallocPd { pd } => self.dealloc_pd(pd),
            Request::RegMr { pd, addr, len, access } => self.reg_mr(pd, addr, len, access, fds),
            Request::DeregMr { lkey } => self.dereg_mr(lkey),
            Request::CreateCq { ncqe, collapsed } => self.create_cq(ncqe, collapsed),
            Request::DestroyCq { cqn } => self.destroy_cq(cqn),
            Request::CreateQp { pd, send_cq, recv_cq, sq_wqebbs, rq_wqes, rq_stride } => {
                self.create_qp(pd, [send_cq, recv_cq], QpCaps { sq_wqebbs, rq_wqes, rq_stride })
            }
            Request::DestroyQp { qpn } => self.destroy_qp(qpn),
            Request::ModifyQp { qpn, state, dest_qpn, rnr_retry, wire } => self.own_qp(qpn).and_then(|()| {
                let state = wire::qp_state(state).map_err(refused)?;
                let m = ModifyQp { state, dest_qpn, rnr_retry, wire };
                self.nic.hca().modify_qp(qpn, m).map(|()| ok(Reply::Ok)).map_err(|e| refused(e.to_string()))
            }),
            Request::QueryQp { qpn } => self.own_qp(qpn).and_then(|()| {
                let hca = self.nic.hca();
                let q = hca.qp(qpn).map_err(|e| refused(e.to_string()))?;
                Ok(ok(Reply::QpState { state: q.state as u8, sq_ci: q.sq_ci }))
            }),
            Request::QueryCq { cqn } => self.own_cq(cqn).and_then(|()| {
                let hca = self.nic.hca();
                let c = hca.cq(cqn).map_err(|e| refused(e.to_string()))?;
                Ok(ok(Reply::CqState { pi: c.pi, overflowed: c.overflowed }))
            }),
            ref r @ Request::SetFaults { qpn, .. } => self.own_qp(qpn).and_then(|()| {
                let faults = r.faults().unwrap_or_default();
                self.nic.hca().set_faults(qpn, faults).map(|()| ok(Reply::Ok)).map_err(|e| refused(e.to_string()))
            }),
            Request::TakeEvents => {
                let events = self.nic.hca().take_events_where(|e| self.owns_event(e));
                Ok(ok(Reply::Events(events.iter().map(|e| format!("{e:?}")).collect())))
            }
            Request::EnableTrace { cap } => {
                if cap > MAX_TRACE_CAP {
                    Err(refused(format!("a trace of {cap} bytes: at most {MAX_TRACE_CAP}")))
                } else {
                    self.nic.enable_trace(cap);
                    Ok(ok(Reply::Ok))
                }
            }
            Request::Trace => self.trace(),
        };
        r.unwrap_or_else(|e| e)
    }

    fn hello(&mut self, req: &Request) -> Answer {
        match *req {
            Request::Hello { version } if version == PROTOCOL_VERSION => {
                self.greeted = true;
                ok(Reply::Hello { version: PROTOCOL_VERSION, limits: self.limits })
            }
            Request::Hello { version } => refused(format!(
                "protocol version {version}: this daemon speaks version {PROTOCOL_VERSION} (docs/SOFTNIC_PROTOCOL.md)"
            )),
            _ => refused(format!("the first request must be Hello {{ version: {PROTOCOL_VERSION} }}")),
        }
    }

    fn alloc_pd(&mut self) -> Result<Answer, Answer> {
        self.room_for_one_more()?;
        let pd = self.nic.hca().alloc_pd().0;
        self.pds.insert(pd);
        Ok(ok(Reply::Pd(pd)))
    }

    fn dealloc_pd(&mut self, pd: u32) -> Result<Answer, Answer> {
        self.own_pd(pd)?;
        let users = self.mrs.values().filter(|m| m.pd == pd).count() + self.qps.values().filter(|q| q.pd == pd).count();
        if users > 0 {
            return Err(refused(format!("PD {pd:#x} is in use by {users} MR(s) and QP(s)")));
        }
        self.pds.remove(&pd);
        Ok(ok(Reply::Ok))
    }

    fn reg_mr(&mut self, pd: u32, addr: u64, len: usize, access: u32, mut fds: Vec<OwnedFd>) -> Result<Answer, Answer> {
        self.own_pd(pd)?;
        self.room_for_one_more()?;
        let access = Access::from_bits(access).ok_or_else(|| refused(format!("unknown access bits {access:#x}")))?;
        if len == 0 {
            return Err(refused("an MR of 0 bytes"));
        }
        if addr.checked_add(len as u64).is_none() {
            return Err(refused(format!("an MR of {len} bytes at {addr:#x} wraps past the end of the address space")));
        }
        let mapped: u64 = self.mrs.values().map(|m| m.len).sum();
        if mapped + len as u64 > self.limits.mapped_bytes {
            return Err(refused(format!(
                "{len} more bytes registered would pass this client's limit of {} (it holds {mapped})",
                self.limits.mapped_bytes
            )));
        }
        let fd = fds.pop().ok_or_else(|| refused("RegMr needs the memfd passed with SCM_RIGHTS"))?;
        let shm = Shm::from_sealed(File::from(fd), len).map_err(|e| refused(format!("the client's memory: {e}")))?;
        let shm = Arc::new(shm);
        let region = shm.region().sub(0, len).map_err(|e| refused(e.to_string()))?;
        let (lkey, rkey) = self.nic.hca().reg_mr(Pd(pd), addr, region, access);
        self.mrs.insert(lkey, OwnedMr { pd, len: len as u64, _shm: shm });
        Ok(ok(Reply::Mr { lkey, rkey }))
    }

    fn dereg_mr(&mut self, lkey: u32) -> Result<Answer, Answer> {
        if !self.mrs.contains_key(&lkey) {
            return Err(refused(format!("no MR with lkey {lkey:#x}")));
        }
        self.nic.hca().dereg_mr(lkey).map_err(|e| refused(e.to_string()))?;
        // The model no longer names the memory: now it may be unmapped.
        self.mrs.remove(&lkey);
        Ok(ok(Reply::Ok))
    }

    fn create_cq(&mut self, ncqe: u32, collapsed: bool) -> Result<Answer, Answer> {
        self.room_for_one_more()?;
        let held: u64 = self.cqs.values().sum();
        if held + u64::from(ncqe) > self.limits.cq_entries {
            return Err(refused(format!(
                "{ncqe} more CQ entries would pass this client's limit of {} (it holds {held})",
                self.limits.cq_entries
            )));
        }
        let mut hca = self.nic.hca();
        let cqn = hca.create_cq(ncqe, wire::cq_mode(collapsed)).map_err(|e| refused(e.to_string()))?;
        let cq = hca.cq(cqn).map_err(|e| refused(e.to_string()))?;
        let (ring, _) = crate::cq::cq_layout(ncqe);
        let (len, fd) = (cq.shm.len(), cq.shm.fd().try_clone_to_owned());
        let fd = match fd {
            Ok(fd) => fd,
            Err(e) => {
                let _ = hca.destroy_cq(cqn);
                return Err(refused(e.to_string()));
            }
        };
        self.cqs.insert(cqn, u64::from(ncqe));
        Ok((Reply::Cq { cqn, ncqe, ring, dbrec: ring, len }, vec![fd]))
    }

    fn destroy_cq(&mut self, cqn: u32) -> Result<Answer, Answer> {
        self.own_cq(cqn)?;
        self.nic.hca().destroy_cq(cqn).map_err(|e| refused(e.to_string()))?;
        self.cqs.remove(&cqn);
        Ok(ok(Reply::Ok))
    }

    fn create_qp(&mut self, pd: u32, cqs: [u32; 2], caps: QpCaps) -> Result<Answer, Answer> {
        self.own_pd(pd)?;
        self.own_cq(cqs[0])?;
        self.own_cq(cqs[1])?;
        self.room_for_one_more()?;
        let entries = u64::from(caps.sq_wqebbs) + u64::from(caps.rq_wqes);
        let held: u64 = self.qps.values().map(|q| q.entries).sum();
        if held + entries > self.limits.qp_entries {
            return Err(refused(format!(
                "{entries} more queue entries would pass this client's limit of {} (it holds {held})",
                self.limits.qp_entries
            )));
        }
        let mut hca = self.nic.hca();
        let qpn = hca.create_qp(Pd(pd), cqs[0], cqs[1], caps).map_err(|e| refused(e.to_string()))?;
        let m = &hca.qp(qpn).map_err(|e| refused(e.to_string()))?.mem;
        let (sq, rq, dbrec) = m.offsets;
        let reply = Reply::Qp { qpn, sq: (sq, m.sq.len()), rq: (rq, m.rq.len()), dbrec, len: m.queues.len() };
        let fds = (m.queues.fd().try_clone_to_owned(), m.uar_page.fd().try_clone_to_owned());
        match fds {
            (Ok(a), Ok(b)) => {
                self.qps.insert(qpn, OwnedQp { pd, entries });
                Ok((reply, vec![a, b]))
            }
            (Err(e), _) | (_, Err(e)) => {
                let _ = hca.destroy_qp(qpn);
                Err(refused(e.to_string()))
            }
        }
    }

    fn destroy_qp(&mut self, qpn: u32) -> Result<Answer, Answer> {
        self.own_qp(qpn)?;
        self.nic.hca().destroy_qp(qpn).map_err(|e| refused(e.to_string()))?;
        self.qps.remove(&qpn);
        Ok(ok(Reply::Ok))
    }

    /// The daemon's register trace, only the records of this session's QPs
    /// and CQs: another client's WQEs (its addresses and keys) stay its own.
    fn trace(&self) -> Result<Answer, Answer> {
        let bytes = self.nic.trace_bytes().ok_or_else(|| refused("no trace is being recorded (EnableTrace)"))?;
        let mine = |r: &crate::trace::Record| {
            self.qps.contains_key(&r.qpn) || (r.qpn == u32::MAX && self.cqs.contains_key(&r.obj))
        };
        let bytes = crate::trace::retain(&bytes, mine);
        let shm = Shm::create("trace", bytes.len()).map_err(|e| refused(format!("a memfd for the trace: {e}")))?;
        shm.region().write_bytes(0, &bytes).map_err(|e| refused(e.to_string()))?;
        let fd = shm.fd().try_clone_to_owned().map_err(|e| refused(e.to_string()))?;
        Ok((Reply::Trace { len: bytes.len() }, vec![fd]))
    }

    /// Destroy everything the session made (the connection has ended).
    fn end(mut self) {
        let mut hca = self.nic.hca();
        for qpn in self.qps.keys() {
            let _ = hca.destroy_qp(*qpn);
        }
        for cqn in self.cqs.keys() {
            let _ = hca.destroy_cq(*cqn);
        }
        for lkey in self.mrs.keys() {
            let _ = hca.dereg_mr(*lkey);
        }
        let left = hca.take_events_where(|e| self.owns_event(e)).len();
        drop(hca);
        let made = (self.qps.len(), self.cqs.len(), self.mrs.len(), self.pds.len());
        if made != (0, 0, 0, 0) || left > 0 {
            eprintln!(
                "marrow softnic: {} disconnected; destroyed its {} QP(s), {} CQ(s), {} MR(s), {} PD(s); {left} event(s) untaken",
                self.who, made.0, made.1, made.2, made.3
            );
        }
        // The model no longer names the memory: unmap it.
        self.mrs.clear();
    }
}
