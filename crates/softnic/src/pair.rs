//! Two connected RC endpoints on one softnic, each with its own send and
//! receive CQs, a registered buffer, and the CPU initiator's queue
//! handles. What tests, `marrow demo` and the benchmarks start from.

use crate::SoftNic;
use crate::client::{Client, ClientError};
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

/// A pair whose endpoints sit on two softnic instances joined by RoCEv2
/// over UDP ([`crate::rc`]), instead of one.
#[derive(Clone, Debug)]
pub struct PairWire {
    /// A's address (a loopback address, 127.0.0.0/8, on one machine).
    pub ip_a: std::net::Ipv4Addr,
    /// B's address.
    pub ip_b: std::net::Ipv4Addr,
    /// The UDP port both bind (4791 where nothing else holds it).
    pub udp_port: u16,
    /// Path MTU, timeouts, retries; `port`, `dgid` and the PSNs are filled in.
    pub attrs: crate::rc::WireAttrs,
    /// Faults on what each side sends (B's generator seeded `seed + 1`).
    pub faults: crate::rc::port::WireFaults,
    /// Capture A's port: every frame A sends and receives.
    pub pcap: Option<std::path::PathBuf>,
    /// First PSN A sends (B's is fixed): near 2^24 to see the PSNs wrap.
    pub sq_psn_a: u32,
    /// Whole Ethernet frames between the two sockets (the form QEMU's
    /// `-netdev dgram` uses), with ARP, instead of RoCEv2 datagrams.
    pub frames: bool,
    /// B's softnic is another process: the daemon listening on this socket
    /// (`marrow softnic --socket PATH --port udp:IP_B:UDP_PORT`), whose
    /// port 0 is B's. B's queues and buffer are mapped here from the
    /// daemon's memfds, as any client maps them; `faults` then apply to
    /// A's side only.
    pub b_daemon: Option<std::path::PathBuf>,
}

impl PairWire {
    /// RoCEv2 between `ip_a` and `ip_b` on `udp_port`, rdma-core's usual
    /// attributes, no faults, no capture.
    pub fn udp(ip_a: std::net::Ipv4Addr, ip_b: std::net::Ipv4Addr, udp_port: u16) -> PairWire {
        PairWire {
            ip_a,
            ip_b,
            udp_port,
            attrs: crate::rc::WireAttrs::new(0, ip_b),
            faults: crate::rc::port::WireFaults::default(),
            pcap: None,
            sq_psn_a: 0xff_fff0, // layout-ok: a PSN 16 below the 24-bit wrap, so the wrap is crossed early
            frames: false,
            b_daemon: None,
        }
    }
}

/// Sizes of a pair.
#[derive(Clone, Debug)]
pub struct PairConfig {
    /// Send queue WQEBBs.
    pub sq_wqebbs: u32,
    /// Receive queue WQEs.
    pub rq_wqes: u32,
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
    /// Put B on a second softnic across a RoCEv2 wire.
    pub wire: Option<PairWire>,
}

impl Default for PairConfig {
    fn default() -> Self {
        PairConfig {
            sq_wqebbs: 64,
            rq_wqes: 64,
            ncqe: 64,
            cq_mode: CqMode::Normal,
            buf_len: 1 << 20,
            access: Access::all(),
            trace: None,
            wire: None,
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
    /// The daemon's mappings behind the queues, when the endpoint's softnic
    /// is another process.
    _remote: Option<Arc<RemoteParts>>,
}

/// The queue and CQ mappings of an endpoint created through the daemon.
#[derive(Debug)]
struct RemoteParts {
    _qp: crate::client::RemoteQp,
    _cqs: [crate::client::RemoteCq; 2],
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
    /// The device model (A's, when the pair crosses a wire).
    pub nic: SoftNic,
    /// B's device model, when the pair crosses a wire in this process.
    pub nic_b: Option<SoftNic>,
    /// The connection to B's softnic, when it is another process
    /// ([`PairWire::b_daemon`]).
    pub client_b: Option<std::sync::Mutex<Client>>,
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
    Endpoint::create(nic, pd, cfg, name)
}

impl Endpoint {
    /// One RC endpoint on `nic` in `pd`, sized by `cfg` (its `wire` and
    /// `trace` are not used), in RESET: what [`Pair`] makes two of, and what
    /// a peer that is not a softnic (Linux rxe, rdma-core's tools) is
    /// connected to with [`Endpoint::connect_wire`].
    pub fn create(nic: &SoftNic, pd: crate::mr::Pd, cfg: &PairConfig, name: &str) -> Result<Endpoint, HcaError> {
        let mut hca = nic.hca();
        let send_cqn = hca.create_cq(cfg.ncqe, cfg.cq_mode)?;
        let recv_cqn = hca.create_cq(cfg.ncqe, CqMode::Normal)?;
        let caps = QpCaps { sq_wqebbs: cfg.sq_wqebbs, rq_wqes: cfg.rq_wqes, ..QpCaps::default() };
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
        Ok(Endpoint { qpn, send_cqn, recv_cqn, sq, scq, rq, rcq, buf, addr, lkey, rkey, shm, _remote: None })
    }

    /// One RC endpoint on the softnic daemon `client` talks to (another
    /// process), in RESET.
    pub fn create_remote(client: &mut Client, cfg: &PairConfig, name: &str) -> Result<Endpoint, ClientError> {
        let pd = client.alloc_pd()?;
        let scq = client.create_cq(cfg.ncqe, cfg.cq_mode == CqMode::Collapsed)?;
        let rcq = client.create_cq(cfg.ncqe, false)?;
        let caps = QpCaps { sq_wqebbs: cfg.sq_wqebbs, rq_wqes: cfg.rq_wqes, ..QpCaps::default() };
        let qp = client.create_qp(pd, scq.cqn, rcq.cqn, caps)?;
        let shm = Arc::new(Shm::create(name, cfg.buf_len)?);
        let (lkey, rkey) = client.reg_mr(pd, &shm, cfg.access)?;
        let buf = shm.region().sub(0, cfg.buf_len).map_err(|e| ClientError::Protocol(e.to_string()))?;
        Ok(Endpoint {
            qpn: qp.qpn,
            send_cqn: scq.cqn,
            recv_cqn: rcq.cqn,
            sq: SendQueue::new(qp.sq, caps.sq_wqebbs, qp.dbrec, qp.uar, qp.qpn),
            scq: CqPoller::new(scq.buf, scq.ncqe, scq.dbrec, cfg.cq_mode),
            rq: RecvQueue::new(qp.rq, caps.rq_wqes, caps.rq_stride as usize, qp.dbrec),
            rcq: CqPoller::new(rcq.buf, rcq.ncqe, rcq.dbrec, CqMode::Normal),
            addr: buf.base_addr() as u64,
            buf,
            lkey,
            rkey,
            shm,
            _remote: Some(Arc::new(RemoteParts { _qp: qp, _cqs: [scq, rcq] })),
        })
    }

    /// RESET→INIT→RTR→RTS towards `dest_qpn`, reached over a wire port with `attrs`.
    pub fn connect_wire(&self, nic: &SoftNic, dest_qpn: u32, attrs: crate::rc::WireAttrs) -> Result<(), HcaError> {
        let mut hca = nic.hca();
        hca.modify_qp(self.qpn, ModifyQp::to(QpState::Init))?;
        hca.modify_qp(self.qpn, ModifyQp { wire: Some(attrs), ..ModifyQp::rtr(dest_qpn) })?;
        hca.modify_qp(self.qpn, ModifyQp { wire: Some(attrs), ..ModifyQp::to(QpState::Rts) })
    }
}

impl Pair {
    /// Create, connect (RESET→INIT→RTR→RTS both ways) and start one engine thread.
    pub fn new(cfg: PairConfig) -> Result<Pair, HcaError> {
        let mut pair = Self::unstarted(cfg)?;
        pair.nic.start(1);
        if let Some(n) = &mut pair.nic_b {
            n.start(1);
        }
        Ok(pair)
    }

    /// As [`Pair::new`] without an engine thread: drive it with `nic.scan()`.
    pub fn unstarted(cfg: PairConfig) -> Result<Pair, HcaError> {
        if let Some(w) = cfg.wire.clone() {
            return Self::over_wire(cfg, w);
        }
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
        Ok(Pair { nic, nic_b: None, client_b: None, a, b })
    }

    fn over_wire(cfg: PairConfig, w: PairWire) -> Result<Pair, HcaError> {
        use crate::rc::port::{PortKind, PortOptions};
        use std::net::SocketAddrV4;
        let na = SoftNic::new();
        if let Some(cap) = cfg.trace {
            na.enable_trace(cap);
        }
        let pd_a = na.hca().alloc_pd();
        let a = endpoint(&na, pd_a, &cfg, "buf-a")?;
        let (sa, sb) = (SocketAddrV4::new(w.ip_a, w.udp_port), SocketAddrV4::new(w.ip_b, w.udp_port));
        let mac = crate::rc::port::udp_mac;
        let (ka, kb) = if w.frames {
            (
                PortKind::Frames { bind: sa, peer: sb, mac: mac(w.ip_a), ip: w.ip_a },
                PortKind::Frames { bind: sb, peer: sa, mac: mac(w.ip_b), ip: w.ip_b },
            )
        } else {
            (PortKind::Udp { bind: sa }, PortKind::Udp { bind: sb })
        };
        let pa = na.attach_port(ka, PortOptions { pcap: w.pcap.clone(), faults: w.faults })?;
        let sq_psn_b = 0x12_3456; // layout-ok: an arbitrary start PSN, unlike A's
        let attrs_a = crate::rc::WireAttrs {
            port: pa,
            dgid: crate::rc::ipv4_mapped(w.ip_b),
            sq_psn: w.sq_psn_a,
            rq_psn: sq_psn_b,
            ..w.attrs
        };
        let attrs_b = |port| crate::rc::WireAttrs {
            port,
            dgid: crate::rc::ipv4_mapped(w.ip_a),
            sq_psn: sq_psn_b,
            rq_psn: w.sq_psn_a,
            ..w.attrs
        };
        if let Some(path) = &w.b_daemon {
            let mut client = Client::connect(path)?;
            if let Some(cap) = cfg.trace {
                client.enable_trace(cap)?;
            }
            let b = Endpoint::create_remote(&mut client, &cfg, "buf-b")?;
            a.connect_wire(&na, b.qpn, attrs_a)?;
            let wb = attrs_b(0);
            client.modify_qp(b.qpn, QpState::Init, None)?;
            client.modify_qp_wire(b.qpn, QpState::Rtr, Some(a.qpn), wb)?;
            client.modify_qp_wire(b.qpn, QpState::Rts, None, wb)?;
            return Ok(Pair { nic: na, nic_b: None, client_b: Some(std::sync::Mutex::new(client)), a, b });
        }
        let nb = SoftNic::new();
        if let Some(cap) = cfg.trace {
            nb.enable_trace(cap);
        }
        let pd_b = nb.hca().alloc_pd();
        let b = endpoint(&nb, pd_b, &cfg, "buf-b")?;
        let fb = crate::rc::port::WireFaults { seed: w.faults.seed.wrapping_add(1), ..w.faults };
        let pb = nb.attach_port(kb, PortOptions { pcap: None, faults: fb })?;
        a.connect_wire(&na, b.qpn, attrs_a)?;
        b.connect_wire(&nb, a.qpn, attrs_b(pb))?;
        Ok(Pair { nic: na, nic_b: Some(nb), client_b: None, a, b })
    }

    /// B's register trace: from B's model here, or from the daemon that is
    /// B's softnic. `None` when none is recorded.
    pub fn trace_b(&self) -> Option<Vec<u8>> {
        if let Some(n) = &self.nic_b {
            return n.trace_bytes();
        }
        let c = self.client_b.as_ref()?;
        c.lock().unwrap_or_else(|p| p.into_inner()).trace_bytes().ok()
    }

    /// Start recording B's register trace (A's: `nic.enable_trace`).
    pub fn enable_trace_b(&self, cap: usize) -> Result<(), HcaError> {
        if let Some(n) = &self.nic_b {
            n.enable_trace(cap);
        }
        if let Some(c) = &self.client_b {
            c.lock().unwrap_or_else(|p| p.into_inner()).enable_trace(cap)?;
        }
        Ok(())
    }

    /// The device model side `s` lives on (A's for a B in another process).
    pub fn nic_of(&self, s: Side) -> &SoftNic {
        match (s, &self.nic_b) {
            (Side::B, Some(n)) => n,
            _ => &self.nic,
        }
    }

    /// An endpoint.
    pub fn side(&mut self, s: Side) -> &mut Endpoint {
        match s {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Polls of a CQ between two reads of the clock in [`Pair::wait`]: a
    /// read on every poll took about as long as the poll itself, so a CQE
    /// was seen up to a clock read late. A ping-pong floor measured beside
    /// a wait polls the same way.
    pub const POLLS_PER_LOOK: u32 = 64;

    /// Wait for the next CQE on a send (`recv = false`) or receive CQ, at
    /// most `timeout`; a timeout reports the QP and CQ state.
    pub fn wait(&mut self, s: Side, recv: bool, timeout: Duration) -> Result<Completion, WaitError> {
        let start = Instant::now();
        let threads = !self.nic.engines.is_empty();
        // The clock is read every POLLS_PER_LOOK polls until the wait has
        // been long, then on every poll, each followed by a yield.
        let mut polls = 0u32;
        let mut long = false;
        loop {
            if !threads {
                self.nic.scan();
                if let Some(n) = &self.nic_b {
                    n.scan();
                }
            }
            let ep = self.side(s);
            let poller = if recv { &mut ep.rcq } else { &mut ep.scq };
            if let Some(c) = poller.poll().map_err(WaitError::Poll)? {
                return Ok(c);
            }
            polls = polls.wrapping_add(1);
            if long || polls.is_multiple_of(Self::POLLS_PER_LOOK) {
                let waited = start.elapsed();
                if waited > timeout {
                    return Err(self.timeout(s, recv, waited).into());
                }
                long = waited > Duration::from_micros(200);
                if long {
                    std::thread::yield_now();
                }
            }
            std::hint::spin_loop();
        }
    }

    fn timeout(&mut self, s: Side, recv: bool, waited: Duration) -> WaitTimeout {
        let (qpn, cqn, sq_pi, cq_ci) = {
            let ep = self.side(s);
            let cqn = if recv { ep.recv_cqn } else { ep.send_cqn };
            let ci = if recv { ep.rcq.ci() } else { ep.scq.ci() };
            (ep.qpn, cqn, ep.sq.pi(), ci)
        };
        let ((state, sq_ci), (cq_pi, overflowed)) = match (s, &self.client_b) {
            (Side::B, Some(c)) => {
                let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
                (c.query_qp(qpn).unwrap_or((QpState::Err, 0)), c.query_cq(cqn).unwrap_or((0, false)))
            }
            _ => {
                let hca = self.nic_of(s).hca();
                (
                    hca.qp(qpn).map(|q| (q.state, q.sq_ci)).unwrap_or((QpState::Err, 0)),
                    hca.cq(cqn).map(|c| (c.pi, c.overflowed)).unwrap_or((0, false)),
                )
            }
        };
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
