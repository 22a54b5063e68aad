//! The softnic backend: two PEs, each with a symmetric buffer registered on
//! a softnic, and a channel (RC QP + CQ + GCRB) from each PE to the other.
//! Both PEs are in this process on one softnic; or on two softnics linked
//! by RoCEv2 ([`WorldConfig::wire`]); or PE 1 is another process, a softnic
//! daemon across the wire ([`World::over_wire`] with a [`WirePeer`]).

use crate::gcrb_page::{self, GcrbSetup};
use marrow_mmio::Region;
use marrow_softnic::client::{Client, RemoteCq, RemoteQp};
use marrow_softnic::{Access, CqMode, Faults, ModifyQp, QpCaps, QpState, Shm, SoftNic};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Sizes and limits of a world.
#[derive(Clone, Copy, Debug)]
pub struct WorldConfig {
    /// Bytes of each PE's symmetric buffer.
    pub buf_len: usize,
    /// Send queue WQEBBs per channel.
    pub sq_wqebbs: u32,
    /// CQ entries per channel.
    pub ncqe: u32,
    /// Collapsed CQs (NVSHMEM's mode) instead of owner-bit rings.
    pub collapsed_cq: bool,
    /// Timeout of every device-side wait.
    pub timeout: Duration,
    /// Device trace of every post, doorbell and CQE (errors and timeouts
    /// are traced regardless).
    pub trace: bool,
    /// `flags.lazy_nbi_doorbell`: put_nbi rings only per batch (DeepEP's
    /// rule), quiet posts a NOP to ring the rest.
    pub lazy_nbi_doorbell: bool,
    /// `flags.early_doorbell`: where a caller waits for the CQE, ring as
    /// soon as the WQEs are fenced, then write the doorbell record and ring
    /// again (DOCA's early ringing), so the NIC starts one system-scope
    /// fence sooner. On by default: a blocking call then waits one fence
    /// less for its CQE (`marrow bench gpu` measures both settings).
    pub early_doorbell: bool,
    /// More channels from PE 0 to PE 1 (QP pairs of their own, as NVSHMEM
    /// gives warps or CTAs QPs of their own), in [`World::more`].
    pub extra_channels: usize,
    /// `flags.exclusive` on every channel: each has one owner (a thread, or
    /// the lanes of one warp calling together) that keeps the heads in its
    /// registers (DOCA's EXCLUSIVE sharing mode). Give each owner a channel.
    /// The owner is the lanes that make the device `Channel` together; a
    /// call by only some of them is refused with `E_BAD_CONFIG`.
    pub exclusive: bool,
    /// Create the channels' owner-bit CQs with the PRM's `oi` (overrun
    /// ignore), as DOCA creates its CQs, where a CQ holds a send queue's
    /// worth (`ncqe >= sq_wqebbs`): the device code then never writes
    /// their doorbell record (`flags.cq_overrun_ignore`). Only for CQs on a
    /// softnic in this process; a daemon's CQs keep their record.
    pub cq_overrun_ignore: bool,
    /// `flags.gpu_scope_fences`: a post's fences (WQE before doorbell
    /// record, record before doorbell) at GPU scope, as DOCA's one-sided
    /// verbs fence by default. Enough where the send queue and its record
    /// live in GPU memory; a softnic's rings are host memory, where the
    /// PTX memory model promises nothing for it, so a world sets it only to
    /// compare with DOCA, which fences so there too (`bench gpu --doca`).
    /// Off by default. The CPU device code has one scope and ignores it.
    pub gpu_scope_fences: bool,
    /// PE 1 on a second softnic, reached from PE 0 over RoCEv2 on loopback
    /// UDP (`marrow_softnic::rc`): the device code's WQEs then cross a
    /// wire, packets, ACKs and all.
    pub wire: bool,
}

impl WorldConfig {
    /// Whether the channels' CQs are made with `oi`: asked for, and deep
    /// enough that no CQE can land in a slot its consumer has not read.
    fn overrun_ignore_fits(&self) -> bool {
        self.cq_overrun_ignore && self.ncqe >= self.sq_wqebbs
    }
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            buf_len: 1 << 20,
            sq_wqebbs: 64,
            ncqe: 64,
            collapsed_cq: false,
            timeout: Duration::from_secs(2),
            trace: true,
            lazy_nbi_doorbell: false,
            early_doorbell: true,
            extra_channels: 0,
            exclusive: false,
            cq_overrun_ignore: true,
            gpu_scope_fences: false,
            wire: false,
        }
    }
}

/// PE 1 as another process: a softnic daemon (`marrow softnic --socket
/// SOCKET --port udp:IP:4791`) whose port 0 is PE 1's end of the wire.
/// PE 1's buffer is a memfd made here and registered with the daemon, so
/// both processes map the same bytes; its queues are the daemon's memfds,
/// mapped here for the CPU device code.
#[derive(Clone, Debug)]
pub struct WirePeer {
    /// The daemon's socket.
    pub socket: PathBuf,
    /// The IPv4 address of the daemon's port 0 (a loopback address).
    pub ip: Ipv4Addr,
}

/// How a world with a wire reaches it.
#[derive(Clone, Debug, Default)]
pub struct WireOptions {
    /// PE 1 in another process; `None`: on a second softnic here.
    pub peer: Option<WirePeer>,
    /// Capture PE 0's port (every frame sent and received) to this pcap.
    pub pcap: Option<PathBuf>,
}

/// What a world holds of a PE 1 that is another process.
#[derive(Debug)]
struct Peer {
    client: Mutex<Client>,
    _qps: Vec<RemoteQp>,
    _cqs: Vec<RemoteCq>,
}

/// Where one PE's queues of one channel are, for its GCRB page.
struct Queues {
    qpn: u32,
    cqn: u32,
    sq: u64,
    dbrec: u64,
    uar: u64,
    cq: (u64, u32, u64),
    /// The CQ ignores overrun (the PRM's `oi`), so the device code may leave
    /// its doorbell record alone.
    cq_overrun_ignore: bool,
}

/// One PE's channel to the other PE.
#[derive(Debug)]
pub struct Channel {
    /// The QP.
    pub qpn: u32,
    /// Its send CQ.
    pub cqn: u32,
    page: Arc<Shm>,
}

impl Channel {
    /// The GCRB page.
    pub fn page(&self) -> Region {
        self.page.region()
    }

    /// The decoded GCRB state (error, heads, trace) for a person.
    pub fn report(&self) -> String {
        gcrb_page::report(&self.page())
    }
}

/// Two PEs on one softnic, or on two linked by a RoCEv2 wire.
#[derive(Debug)]
pub struct World {
    /// The device model (PE 0's, with `WorldConfig::wire`).
    pub nic: SoftNic,
    /// PE 1's device model, with `WorldConfig::wire` and no [`WirePeer`].
    pub nic_b: Option<SoftNic>,
    peer: Option<Peer>,
    /// PE 0's and PE 1's channels (each to the other PE).
    pub channels: [Channel; 2],
    /// PE 0's extra channels to PE 1 (`WorldConfig::extra_channels`).
    pub more: Vec<Channel>,
    /// The symmetric buffers.
    pub bufs: [Region; 2],
    _shm: [Arc<Shm>; 2],
}

impl World {
    /// Build the world and start one softnic engine thread.
    pub fn new(cfg: WorldConfig) -> Result<World, crate::TransportError> {
        Self::build(cfg, None, &WireOptions::default())
    }

    /// As [`World::new`] with PE 1 across a RoCEv2 wire (`cfg.wire` is
    /// implied), reached as `wire` says: PE 1 on a second softnic here or
    /// in another process, PE 0's port captured or not.
    pub fn over_wire(cfg: WorldConfig, wire: &WireOptions) -> Result<World, crate::TransportError> {
        Self::build(WorldConfig { wire: true, ..cfg }, None, wire)
    }

    /// As [`World::new`], but each PE's symmetric buffer is device memory
    /// (a GPU's, say) at the given device address: the softnic moves data
    /// in and out of it through [`marrow_softnic::DeviceMemory`] copies.
    pub fn with_device_buffers(
        cfg: WorldConfig,
        bufs: [(std::sync::Arc<dyn marrow_softnic::DeviceMemory>, u64); 2],
    ) -> Result<World, crate::TransportError> {
        Self::build(cfg, Some(bufs), &WireOptions::default())
    }

    fn build(
        cfg: WorldConfig,
        device: Option<[(std::sync::Arc<dyn marrow_softnic::DeviceMemory>, u64); 2]>,
        wire: &WireOptions,
    ) -> Result<World, crate::TransportError> {
        if let Some(peer) = &wire.peer {
            if device.is_some() {
                return Err(crate::TransportError::Config(
                    "PE 1 in another process has its buffer in host memory shared with it, not device memory".into(),
                ));
            }
            return Self::build_with_peer(cfg, peer, wire.pcap.clone());
        }
        let mut nic = SoftNic::new();
        let mut nic_b = cfg.wire.then(SoftNic::new);
        let nics = [&nic, nic_b.as_ref().unwrap_or(&nic)];
        let ips = loopback_pair();
        if cfg.wire {
            for pe in 0..2 {
                let bind = std::net::SocketAddrV4::new(ips[pe], 4791);
                let opts = marrow_softnic::rc::port::PortOptions {
                    pcap: if pe == 0 { wire.pcap.clone() } else { None },
                    ..Default::default()
                };
                nics[pe].attach_port(marrow_softnic::rc::port::PortKind::Udp { bind }, opts)?;
            }
        }
        let pairs = 1 + cfg.extra_channels;
        // One statement per lock: without a wire both name the same softnic.
        let pd0 = nics[0].hca().alloc_pd();
        let pd1 = if cfg.wire { nics[1].hca().alloc_pd() } else { pd0 };
        let pds = [pd0, pd1];
        let shm = [Arc::new(Shm::create("pe0", cfg.buf_len)?), Arc::new(Shm::create("pe1", cfg.buf_len)?)];
        let bufs = [shm[0].region().sub(0, cfg.buf_len)?, shm[1].region().sub(0, cfg.buf_len)?];
        let mut keys = [(0u64, 0u32); 2];
        let mut lkeys = [0u32; 2];
        for pe in 0..2 {
            let mut hca = nics[pe].hca();
            let (addr, (l, r)) = match &device {
                Some(d) => (d[pe].1, hca.reg_device_mr(pds[pe], d[pe].1, d[pe].0.clone(), Access::all())),
                None => (
                    bufs[pe].base_addr() as u64,
                    hca.reg_mr(pds[pe], bufs[pe].base_addr() as u64, bufs[pe], Access::all()),
                ),
            };
            keys[pe] = (addr, r);
            lkeys[pe] = l;
        }
        let mode = if cfg.collapsed_cq { CqMode::Collapsed } else { CqMode::Normal };
        // Pair k: PE 0's QP qpns[k][0] connected to PE 1's qpns[k][1].
        let mut qpns = vec![[0u32; 2]; pairs];
        let mut cqs = vec![[0u32; 2]; pairs];
        for k in 0..pairs {
            for pe in 0..2 {
                let mut hca = nics[pe].hca();
                cqs[k][pe] = hca.create_cq(cfg.ncqe, mode)?;
                hca.set_cq_overrun_ignore(cqs[k][pe], cfg.overrun_ignore_fits())?;
                let rcq = hca.create_cq(16, CqMode::Normal)?;
                qpns[k][pe] =
                    hca.create_qp(pds[pe], cqs[k][pe], rcq, QpCaps { sq_wqebbs: cfg.sq_wqebbs, ..QpCaps::default() })?;
            }
            for pe in 0..2 {
                let wire = cfg.wire.then(|| marrow_softnic::rc::WireAttrs::new(0, ips[1 - pe]));
                let mut hca = nics[pe].hca();
                hca.modify_qp(qpns[k][pe], ModifyQp::to(QpState::Init))?;
                hca.modify_qp(qpns[k][pe], ModifyQp { wire, ..ModifyQp::rtr(qpns[k][1 - pe]) })?;
                hca.modify_qp(qpns[k][pe], ModifyQp { wire, ..ModifyQp::to(QpState::Rts) })?;
            }
        }
        let mut queues = Vec::new();
        for k in 0..pairs {
            // The first pair serves both PEs; the extra ones PE 0.
            for pe in 0..if k == 0 { 2 } else { 1 } {
                queues.push((k, pe, local_queues(nics[pe], qpns[k][pe], cqs[k][pe])?));
            }
        }
        let local = |pe: usize| match &device {
            Some(d) => (lkeys[pe], d[pe].1, d[pe].0.len() as u64),
            None => (lkeys[pe], bufs[pe].base_addr() as u64, cfg.buf_len as u64),
        };
        let (channels, more) = channels(&cfg, queues, local, keys)?;
        nic.start(1);
        if let Some(n) = &mut nic_b {
            n.start(1);
        }
        Ok(World { nic, nic_b, peer: None, channels, more, bufs, _shm: shm })
    }

    /// [`World::over_wire`] with PE 1 in the daemon `peer`: PE 0's objects
    /// on a softnic here, PE 1's made through the daemon's socket.
    fn build_with_peer(
        cfg: WorldConfig,
        peer: &WirePeer,
        pcap: Option<PathBuf>,
    ) -> Result<World, crate::TransportError> {
        let d = |e: marrow_softnic::client::ClientError| crate::TransportError::Daemon(e.to_string());
        let mut nic = SoftNic::new();
        let ip0 = loopback_pair()[0];
        let bind = std::net::SocketAddrV4::new(ip0, 4791);
        let opts = marrow_softnic::rc::port::PortOptions { pcap, ..Default::default() };
        let port = nic.attach_port(marrow_softnic::rc::port::PortKind::Udp { bind }, opts)?;
        let mut client = Client::connect(&peer.socket).map_err(d)?;
        let shm = [Arc::new(Shm::create("pe0", cfg.buf_len)?), Arc::new(Shm::create("pe1", cfg.buf_len)?)];
        let bufs = [shm[0].region().sub(0, cfg.buf_len)?, shm[1].region().sub(0, cfg.buf_len)?];
        let pd0 = nic.hca().alloc_pd();
        let pd1 = client.alloc_pd().map_err(d)?;
        let (l0, r0) = nic.hca().reg_mr(pd0, bufs[0].base_addr() as u64, bufs[0], Access::all());
        let (l1, r1) = client.reg_mr(pd1, &shm[1], Access::all()).map_err(d)?;
        let keys = [(bufs[0].base_addr() as u64, r0), (bufs[1].base_addr() as u64, r1)];
        let mode = if cfg.collapsed_cq { CqMode::Collapsed } else { CqMode::Normal };
        let caps = QpCaps { sq_wqebbs: cfg.sq_wqebbs, ..QpCaps::default() };
        let (mut queues, mut rqps, mut rcqs) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..1 + cfg.extra_channels {
            let (qpn0, cqn0) = {
                let mut hca = nic.hca();
                let cq = hca.create_cq(cfg.ncqe, mode)?;
                hca.set_cq_overrun_ignore(cq, cfg.overrun_ignore_fits())?;
                let rcq = hca.create_cq(16, CqMode::Normal)?;
                (hca.create_qp(pd0, cq, rcq, caps)?, cq)
            };
            let cq1 = client.create_cq(cfg.ncqe, cfg.collapsed_cq).map_err(d)?;
            let rcq1 = client.create_cq(16, false).map_err(d)?;
            let qp1 = client.create_qp(pd1, cq1.cqn, rcq1.cqn, caps).map_err(d)?;
            {
                let mut hca = nic.hca();
                let w = Some(marrow_softnic::rc::WireAttrs::new(port, peer.ip));
                hca.modify_qp(qpn0, ModifyQp::to(QpState::Init))?;
                hca.modify_qp(qpn0, ModifyQp { wire: w, ..ModifyQp::rtr(qp1.qpn) })?;
                hca.modify_qp(qpn0, ModifyQp { wire: w, ..ModifyQp::to(QpState::Rts) })?;
            }
            let w = marrow_softnic::rc::WireAttrs::new(0, ip0);
            client.modify_qp(qp1.qpn, QpState::Init, None).map_err(d)?;
            client.modify_qp_wire(qp1.qpn, QpState::Rtr, Some(qpn0), w).map_err(d)?;
            client.modify_qp_wire(qp1.qpn, QpState::Rts, None, w).map_err(d)?;
            queues.push((k, 0, local_queues(&nic, qpn0, cqn0)?));
            if k == 0 {
                let q = Queues {
                    qpn: qp1.qpn,
                    cqn: cq1.cqn,
                    sq: qp1.sq.base_addr() as u64,
                    dbrec: qp1.dbrec.base_addr() as u64,
                    uar: qp1.uar.base_addr() as u64,
                    cq: (cq1.buf.base_addr() as u64, cq1.ncqe, cq1.dbrec.base_addr() as u64),
                    cq_overrun_ignore: false,
                };
                queues.push((k, 1, q));
            }
            rqps.push(qp1);
            rcqs.extend([cq1, rcq1]);
        }
        let lkeys = [l0, l1];
        let local = |pe: usize| (lkeys[pe], bufs[pe].base_addr() as u64, cfg.buf_len as u64);
        let (channels, more) = channels(&cfg, queues, local, keys)?;
        nic.start(1);
        let peer = Peer { client: Mutex::new(client), _qps: rqps, _cqs: rcqs };
        Ok(World { nic, nic_b: None, peer: Some(peer), channels, more, bufs, _shm: shm })
    }

    /// PE 1's register trace from the daemon that is PE 1 (`None`: PE 1
    /// is not another process, or the daemon records none).
    pub fn peer_trace(&self) -> Option<Vec<u8>> {
        let c = &self.peer.as_ref()?.client;
        c.lock().unwrap_or_else(|p| p.into_inner()).trace_bytes().ok()
    }

    /// Start recording PE 1's register trace in the daemon that is PE 1.
    pub fn enable_peer_trace(&self, cap: usize) -> Result<(), crate::TransportError> {
        let Some(p) = &self.peer else { return Ok(()) };
        let mut c = p.client.lock().unwrap_or_else(|p| p.into_inner());
        c.enable_trace(cap).map_err(|e| crate::TransportError::Daemon(e.to_string()))
    }

    /// Whether PE 1 is another process.
    pub fn peer_is_process(&self) -> bool {
        self.peer.is_some()
    }

    /// The softnic PE `pe`'s objects live on.
    pub fn nic_of(&self, pe: usize) -> &SoftNic {
        match (pe, &self.nic_b) {
            (1, Some(n)) => n,
            _ => &self.nic,
        }
    }

    /// Every shared region the device code touches: PE buffers, GCRB pages,
    /// queues, doorbell records, UAR pages, CQs (what a GPU must map).
    pub fn shared_regions(&self) -> Vec<Region> {
        let mut v: Vec<Region> = self._shm.iter().map(|s| s.region()).collect();
        v.extend(self.channels.iter().chain(&self.more).map(|c| c.page()));
        // Channel 1 is PE 1's; the others are PE 0's.
        // PE 1's queues in another process are its daemon's, mapped here for
        // the CPU device code only: the GPU drives PE 0.
        let owned = self.channels.iter().enumerate().chain(self.more.iter().map(|c| (0, c)));
        for (pe, c) in owned.filter(|(pe, _)| *pe == 0 || self.peer.is_none()) {
            let hca = self.nic_of(pe).hca();
            if let Ok(q) = hca.qp(c.qpn) {
                v.push(q.mem.queues.region());
                v.push(q.mem.uar_page.region());
            }
            if let Ok(cq) = hca.cq(c.cqn) {
                v.push(cq.shm.region());
            }
        }
        v
    }

    /// Arm softnic faults on PE `pe`'s QP.
    pub fn set_faults(&self, pe: usize, faults: Faults) -> Result<(), crate::TransportError> {
        if pe == 1 && self.peer.is_some() {
            return Err(crate::TransportError::Missing(
                "softnic faults on PE 1 in another process (arm them here on PE 0)",
            ));
        }
        Ok(self.nic_of(pe).hca().set_faults(self.channels[pe].qpn, faults)?)
    }
}

/// Two loopback addresses of this process's own, a new pair for every
/// world, so worlds side by side (and other processes' worlds) never meet.
fn loopback_pair() -> [Ipv4Addr; 2] {
    static WORLDS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    let n = WORLDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let net = (std::process::id() % 200) as u8 + 20;
    [Ipv4Addr::new(127, net, n, 129), Ipv4Addr::new(127, net, n, 130)]
}

/// Where QP `qpn` and CQ `cqn` of `nic` are mapped.
fn local_queues(nic: &SoftNic, qpn: u32, cqn: u32) -> Result<Queues, crate::TransportError> {
    let hca = nic.hca();
    let q = hca.qp(qpn)?;
    let c = hca.cq(cqn)?;
    Ok(Queues {
        qpn,
        cqn,
        sq: q.mem.sq.base_addr() as u64,
        dbrec: q.mem.dbrec.base_addr() as u64,
        uar: q.mem.uar.base_addr() as u64,
        cq: (c.buf.base_addr() as u64, c.ncqe, c.dbrec.base_addr() as u64),
        cq_overrun_ignore: c.overrun_ignore && c.mode == CqMode::Normal,
    })
}

/// The GCRB pages of `queues` (pair `k`, PE `pe`, where its queues are):
/// pair 0's two channels, and PE 0's extra ones. `local(pe)` is the lkey,
/// address and length of PE `pe`'s buffer; `keys` both PEs' (address, rkey).
fn channels(
    cfg: &WorldConfig,
    queues: Vec<(usize, usize, Queues)>,
    local: impl Fn(usize) -> (u32, u64, u64),
    keys: [(u64, u32); 2],
) -> Result<([Channel; 2], Vec<Channel>), crate::TransportError> {
    let mut channels = Vec::new();
    let mut more = Vec::new();
    for (k, pe, q) in queues {
        let page = Arc::new(Shm::create(&format!("gcrb{pe}.{k}"), marrow_gcrb::GCRB_PAGE_SIZE as usize)?);
        let setup = GcrbSetup {
            qpn: q.qpn,
            sq: (q.sq, cfg.sq_wqebbs),
            dbrec: q.dbrec,
            db: (q.uar + u64::from(marrow_mlx5::raw::MLX5_BF_OFFSET), 8),
            cq: (q.cq.0, q.cq.1, q.cq.2, cfg.collapsed_cq),
            local: local(pe),
            keys,
            timeout_ns: cfg.timeout.as_nanos() as u64,
            trace: cfg.trace,
        };
        gcrb_page::fill(&page.region(), &setup)?;
        gcrb_page::edit_config(&page.region(), |c| {
            c.set_lazy_nbi_doorbell(cfg.lazy_nbi_doorbell);
            c.set_early_doorbell(cfg.early_doorbell);
            c.set_exclusive(cfg.exclusive);
            c.set_cq_overrun_ignore(q.cq_overrun_ignore);
            c.set_gpu_scope_fences(cfg.gpu_scope_fences);
        })?;
        let ch = Channel { qpn: q.qpn, cqn: q.cqn, page };
        if k == 0 { channels.push(ch) } else { more.push(ch) }
    }
    let channels: [Channel; 2] = channels.try_into().map_err(|_| crate::TransportError::Missing("channels"))?;
    Ok((channels, more))
}
