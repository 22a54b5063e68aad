//! The verbs proxy backend: the device code's mlx5 rings in host memory,
//! served by a host thread that drives a verbs RC QP of any provider (rxe,
//! EFA, eRDMA, or a ConnectX through plain verbs). NVSHMEM's IBRC does the
//! same with its own proxy format; here the device code is unchanged: it
//! writes mlx5 WQEs, rings an mlx5 doorbell and polls mlx5 CQEs, and the
//! proxy looks to it like a ConnectX.
//!
//! The host thread is the softnic's engine (`marrow_softnic::hca`): the
//! same doorbell scan, WQE fetch, validation and decoding, and CQE writer
//! the softnic uses for its own QPs, with the QP's transport delegated
//! ([`marrow_softnic::delegate`]) to [`delegate::VerbsDelegate`], which
//! posts `ibv_send_wr`s and turns `ibv_wc`s back into CQEs
//! ([`status`] maps the statuses to syndromes).
//!
//! | Piece | Where |
//! |---|---|
//! | libibverbs alone, any provider: device, PD, MR (host; dma-buf where the provider has it), CQ, RC QP, post/poll | `marrow_verbs::any` |
//! | bootstrap (TCP rendezvous; MPI under mpirun) | `marrow_verbs::bootstrap` |
//! | one rank: verbs endpoint + softnic QP in host memory + GCRB | [`ProxyRank`] |
//! | or the softnic's own QP on a RoCEv2 port, no verbs device ([`RankOpts::wire`]) | [`ProxyRank`] |
//! | the two-rank run (`marrow bench verbs`) | [`mod@bench`] |
//! | rank 0's device code in GPU threads first (`--gpu`) | [`bench_gpu`] |
//!
//! What the device code cannot have on a verbs QP: masked atomics (verbs
//! names only compare-and-swap and fetch-and-add). [`ProxyRank::connect`]
//! refuses a channel asked for them ([`RankOpts::masked_atomics`]); a
//! masked-atomic WQE posted anyway completes with LOCAL_QP_OP_ERR.

pub mod bench;
pub mod bench_gpu;
pub mod bench_run;
pub mod delegate;
pub mod status;

use crate::gcrb_page::{self, GcrbSetup};
use delegate::{Sizes, VerbsDelegate};
use marrow_mmio::Region;
use marrow_softnic::{Access, CqMode, ModifyQp, QpCaps, QpState, Shm, SoftNic};
use marrow_verbs::any::Endpoint;
use marrow_verbs::bootstrap::Root;
use marrow_verbs::group::Group;
use marrow_verbs::qp::{RC_ACCESS, RcEndpoint};
use std::sync::Arc;
use std::time::Duration;

/// A failure of the verbs proxy.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// rdma-core refused or is missing.
    #[error(transparent)]
    Verbs(#[from] marrow_verbs::VerbsError),
    /// The softnic engine refused an object.
    #[error("softnic: {0}")]
    Hca(#[from] marrow_softnic::HcaError),
    /// Setting a rank up failed.
    #[error("{0}")]
    Setup(String),
    /// What the device code cannot have over verbs.
    #[error("refused: {0}")]
    Refused(String),
    /// A check of the run failed.
    #[error("{0}")]
    Check(String),
    /// The GCRB page.
    #[error("{0}")]
    Window(#[from] marrow_mmio::OutOfBounds),
}

/// How one rank finds its device and its peer.
#[derive(Clone, Debug)]
pub struct RankOpts {
    /// RDMA device (`rxe0`); the first listed when `None`.
    pub device: Option<String>,
    /// Port.
    pub port: u8,
    /// GID index; the port's RoCE v2 GID with an IPv4 address when `None`.
    pub gid_index: Option<u8>,
    /// Rank 0: listen here (`127.0.0.1:18900`) and print the token.
    pub listen: Option<String>,
    /// Rank 1: rank 0's token (`host:port:id`). Neither: the launcher's
    /// exchange (MPI under mpirun, else `MARROW_BOOTSTRAP`).
    pub connect: Option<String>,
    /// The rendezvous id rank 0 expects.
    pub id: Option<String>,
    /// Bytes of each rank's symmetric buffer.
    pub buf_len: usize,
    /// Timeout of every device-side wait and of the bootstrap.
    pub timeout: Duration,
    /// The local ACK timeout code (4.096 µs × 2^t) and retry count of the verbs QP.
    pub ack_timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// The channel is asked for masked atomics (refused: verbs has none).
    pub masked_atomics: bool,
    /// Instead of a verbs device, this rank's QPs are the softnic's own on
    /// a RoCEv2 wire port: the device code's WQEs go on the wire as the
    /// softnic executes them, with no proxy, to a peer rank of any stack.
    pub wire: Option<WirePort>,
}

/// A rank on the softnic's RoCEv2 port ([`RankOpts::wire`]).
#[derive(Clone, Debug)]
pub struct WirePort {
    /// The port: RoCEv2 datagrams on UDP, or Ethernet frames to QEMU's
    /// `-netdev dgram` (`marrow softnic --port`'s forms).
    pub kind: marrow_softnic::rc::port::PortKind,
    /// Capture every frame here (pcap).
    pub pcap: Option<std::path::PathBuf>,
    /// Path MTU in bytes: the peer's, which the endpoint record does not
    /// carry (a verbs rank uses its port's active MTU; rxe on a 9000-byte
    /// netdev, 4096). Linux rxe refuses a first or middle packet shorter
    /// than its own path MTU.
    pub path_mtu: u32,
    /// Packets in flight beyond the last acknowledged (see
    /// [`marrow_softnic::rc::WireAttrs::send_window`]).
    pub send_window: u32,
}

impl Default for RankOpts {
    fn default() -> Self {
        RankOpts {
            device: None,
            port: 1,
            gid_index: None,
            listen: None,
            connect: None,
            id: None,
            buf_len: 4 << 20,
            timeout: Duration::from_secs(60),
            ack_timeout: 14,
            // 6, not rc_pingpong's 7: Linux rxe takes retry_cnt 7 as "retry
            // forever" (drivers/infiniband/sw/rxe/rxe_comp.c, rxe_completer,
            // COMPST_ERROR_RETRY: `if (qp->comp.retry_cnt != 7)
            // qp->comp.retry_cnt--`), so a vanished peer would never end in
            // TRANSPORT_RETRY_EXC_ERR there. 6 retries of 67 ms each: ~0.5 s.
            retry_cnt: 6,
            masked_atomics: false,
            wire: None,
        }
    }
}

/// The second channel, driven by the CPU initiator (`marrow_driver`), which
/// writes the WQEs device.h has no call for (SEND, SEND with immediate,
/// RDMA WRITE with immediate, inline data) into the same kind of mlx5 ring,
/// served by the same proxy.
#[derive(Debug)]
pub struct CpuChannel {
    /// Its softnic QP.
    pub qpn: u32,
    /// Send queue.
    pub sq: marrow_driver::SendQueue,
    /// Send CQ.
    pub scq: marrow_driver::CqPoller,
    /// Receive queue.
    pub rq: marrow_driver::RecvQueue,
    /// Receive CQ.
    pub rcq: marrow_driver::CqPoller,
    /// The softnic lkey of the symmetric buffer.
    pub lkey: u32,
    /// The peer's endpoint for this channel (its QP, and the buffer's rkey on that QP's PD).
    pub peer: RcEndpoint,
}

/// One rank: its verbs endpoint (inside the engine), its softnic QP whose
/// rings the device code writes, its symmetric buffer and GCRB page.
#[derive(Debug)]
pub struct ProxyRank {
    /// This rank (0 or 1).
    pub rank: usize,
    /// The engine (the proxy thread) and the QP's rings.
    pub nic: SoftNic,
    /// The softnic QP the device code posts on.
    pub qpn: u32,
    /// Its send CQ.
    pub cqn: u32,
    /// The verbs QP carrying it.
    pub verbs_qpn: u32,
    /// The peer's endpoint (the device code's channel).
    pub peer: RcEndpoint,
    /// The CPU initiator's channel.
    pub cpu: std::sync::Mutex<CpuChannel>,
    /// The symmetric buffer.
    pub buf: Region,
    /// The GCRB page.
    pub page: Shm,
    /// What was opened, for a person.
    pub describe: String,
    /// The device's name and the GID index in use.
    pub device: (String, u8),
    /// The symmetric buffer's mapping (`buf` is a window of it).
    buf_shm: Shm,
}

impl ProxyRank {
    /// Open the device, register the buffer, exchange endpoints, connect,
    /// start the proxy, and meet the peer once more (the barrier). With
    /// [`RankOpts::wire`], the softnic's own QPs instead of a verbs device.
    /// `prefill` fills the buffer before the peer can reach it. `say` gets
    /// progress lines.
    pub fn connect(
        o: &RankOpts,
        prefill: impl FnOnce(usize, &Region) -> Result<(), ProxyError>,
        say: &mut dyn FnMut(&str),
    ) -> Result<ProxyRank, ProxyError> {
        if o.masked_atomics {
            return Err(ProxyError::Refused(
                "masked atomics: verbs has only IBV_WR_ATOMIC_CMP_AND_SWP and IBV_WR_ATOMIC_FETCH_AND_ADD; \
                 a channel over the verbs proxy cannot offer them (the mlx5 direct path on a ConnectX can)"
                    .into(),
            ));
        }
        if let Some(w) = &o.wire {
            return Self::connect_wire(o, w, prefill, say);
        }
        let ibv = Arc::new(marrow_verbs::Ibverbs::load()?);
        let sizes = Sizes::default();
        let open =
            || Endpoint::open(ibv.clone(), o.device.as_deref(), o.port, o.gid_index, sizes.send_wr, sizes.recv_slots);
        // Channel 0: the device code's; channel 1: the CPU initiator's
        // (SENDs, RDMA WRITE with immediate, inline WQEs: device.h posts none).
        let mut eps = [open()?, open()?];
        let device = (eps[0].name.clone(), eps[0].gid_index);
        let describe = format!(
            "{} port {} ({:?}, active MTU code {}), GID[{}] {} ({}), verbs QPs {:#x} {:#x}",
            eps[0].name,
            eps[0].port,
            eps[0].link,
            eps[0].port_attr.active_mtu,
            eps[0].gid_index,
            gid_text(&eps[0].gid),
            eps[0].gid_reason,
            eps[0].qpn,
            eps[1].qpn
        );
        say(&describe);
        let (buf_shm, buf) = symmetric_buffer(o)?;
        let psn = first_psn();
        let mut me = [RcEndpoint::sample(0); 2];
        for (k, ep) in eps.iter_mut().enumerate() {
            // SAFETY: `buf_shm` is kept in the rank, declared after `nic`
            // (which owns the endpoints and their MRs), so it is unmapped after them.
            let (_, rkey) = unsafe { ep.reg(buf.base_addr() as *mut u8, o.buf_len, RC_ACCESS)? };
            me[k] = ep.endpoint(psn + k as u32, buf.base_addr() as u64, o.buf_len as u64, rkey);
        }
        let params = eps[0].params(o.ack_timeout, o.retry_cnt);
        let [ep0, ep1] = eps;
        let mut ds = [VerbsDelegate::new(ep0, sizes)?, VerbsDelegate::new(ep1, sizes)?];
        let x = exchange(o, &me, say)?;
        let (rank, peers) = (x.rank, x.peers);
        prefill(rank, &buf)?;
        for (k, d) in ds.iter_mut().enumerate() {
            d.endpoint().connect(&params, psn + k as u32, &peers[k])?;
            d.post_receives()?;
        }
        say(&format!(
            "rank {rank}: verbs QPs {:#x} {:#x} RTS, connected to QPs {:#x} {:#x} (endpoints by {})",
            me[0].qpn,
            me[1].qpn,
            peers[0].qpn,
            peers[1].qpn,
            x.group.via()
        ));
        let verbs_qpn = me[0].qpn;
        let nic = SoftNic::new();
        let rings = {
            let mut hca = nic.hca();
            let pd = hca.alloc_pd();
            let (lkey, _) = hca.reg_mr(pd, buf.base_addr() as u64, buf, Access::all());
            let mut rings = [Rings::default(); 2];
            for (k, d) in ds.into_iter().enumerate() {
                rings[k] = Rings::create(&mut hca, pd)?;
                hca.modify_qp(rings[k].qpn, ModifyQp::to(QpState::Init))?;
                hca.modify_qp(rings[k].qpn, ModifyQp::rtr(peers[k].qpn))?;
                hca.modify_qp(rings[k].qpn, ModifyQp::to(QpState::Rts))?;
                hca.set_delegate(rings[k].qpn, Box::new(d))?;
            }
            (rings, lkey)
        };
        Self::finish(o, nic, rings, Finish { x, me: me[0], buf, buf_shm, describe, device, verbs_qpn }, say)
    }

    /// [`ProxyRank::connect`] on the softnic's wire port: the symmetric
    /// buffer registered with the softnic, its two QPs' endpoints (QPN,
    /// `::ffff:IP` GID, PSN, rkey) exchanged as a verbs rank's are, and the
    /// QPs taken to RTS with the wire attributes; the engine thread then
    /// executes the device code's WQEs onto the wire itself.
    fn connect_wire(
        o: &RankOpts,
        w: &WirePort,
        prefill: impl FnOnce(usize, &Region) -> Result<(), ProxyError>,
        say: &mut dyn FnMut(&str),
    ) -> Result<ProxyRank, ProxyError> {
        use marrow_softnic::rc::port::PortOptions;
        let ip = w.kind.ip();
        let (buf_shm, buf) = symmetric_buffer(o)?;
        let nic = SoftNic::new();
        let port = nic
            .attach_port(w.kind, PortOptions { pcap: w.pcap.clone(), ..PortOptions::default() })
            .map_err(|e| ProxyError::Setup(format!("attaching the softnic's wire port {:?}: {e}", w.kind)))?;
        let psn = first_psn();
        let gid = marrow_softnic::rc::ipv4_mapped(ip);
        let (rings, lkey, me) = {
            let mut hca = nic.hca();
            let pd = hca.alloc_pd();
            let (lkey, rkey) = hca.reg_mr(pd, buf.base_addr() as u64, buf, Access::all());
            let mut rings = [Rings::default(); 2];
            let mut me = [RcEndpoint::sample(0); 2];
            for k in 0..2 {
                rings[k] = Rings::create(&mut hca, pd)?;
                let (addr, len) = (buf.base_addr() as u64, o.buf_len as u64);
                me[k] = RcEndpoint { qpn: rings[k].qpn, lid: 0, gid, psn: psn + k as u32, rkey, addr, len };
            }
            (rings, lkey, me)
        };
        let describe = format!(
            "softnic wire port {port} ({:?}), GID ::ffff:{ip}, path MTU {}, QPs {:#x} {:#x}",
            w.kind, w.path_mtu, me[0].qpn, me[1].qpn
        );
        say(&describe);
        let x = exchange(o, &me, say)?;
        let (rank, peers) = (x.rank, x.peers);
        prefill(rank, &buf)?;
        {
            let mut hca = nic.hca();
            for k in 0..2 {
                let attrs = marrow_softnic::rc::WireAttrs {
                    dgid: peers[k].gid,
                    sq_psn: psn + k as u32,
                    rq_psn: peers[k].psn,
                    path_mtu: w.path_mtu,
                    timeout: o.ack_timeout,
                    retry_cnt: o.retry_cnt,
                    send_window: w.send_window,
                    ..marrow_softnic::rc::WireAttrs::new(port, ip)
                };
                let qpn = rings[k].qpn;
                hca.modify_qp(qpn, ModifyQp::to(QpState::Init))?;
                hca.modify_qp(qpn, ModifyQp { wire: Some(attrs), ..ModifyQp::rtr(peers[k].qpn) })?;
                hca.modify_qp(qpn, ModifyQp { wire: Some(attrs), ..ModifyQp::to(QpState::Rts) })?;
            }
        }
        say(&format!(
            "rank {rank}: softnic QPs {:#x} {:#x} RTS on the wire, connected to QPs {:#x} {:#x} (endpoints by {})",
            me[0].qpn,
            me[1].qpn,
            peers[0].qpn,
            peers[1].qpn,
            x.group.via()
        ));
        let device = (format!("softnic wire port {port}"), 0);
        let f = Finish { x, me: me[0], buf, buf_shm, describe, device, verbs_qpn: me[0].qpn };
        Self::finish(o, nic, (rings, lkey), f, say)
    }

    /// The GCRB page over channel 0's rings, the CPU initiator over channel
    /// 1's, the engine started, and the peer met at the barrier.
    fn finish(
        o: &RankOpts,
        mut nic: SoftNic,
        (rings, lkey): ([Rings; 2], u32),
        f: Finish,
        say: &mut dyn FnMut(&str),
    ) -> Result<ProxyRank, ProxyError> {
        let (setup, cpu) = {
            let hca = nic.hca();
            let q = hca.qp(rings[0].qpn)?;
            let c = hca.cq(rings[0].cq)?;
            let mut keys = [(0u64, 0u32); 2];
            keys[f.x.rank] = (f.me.addr, f.me.rkey);
            keys[1 - f.x.rank] = (f.x.peers[0].addr, f.x.peers[0].rkey);
            let setup = GcrbSetup {
                qpn: rings[0].qpn,
                sq: (q.mem.sq.base_addr() as u64, 64),
                dbrec: q.mem.dbrec.base_addr() as u64,
                db: (q.mem.uar.base_addr() as u64 + u64::from(marrow_mlx5::raw::MLX5_BF_OFFSET), 8),
                cq: (c.buf.base_addr() as u64, c.ncqe, c.dbrec.base_addr() as u64, false),
                local: (lkey, f.buf.base_addr() as u64, o.buf_len as u64),
                keys,
                timeout_ns: o.timeout.as_nanos() as u64,
                trace: false,
            };
            let qpn = rings[1].qpn;
            let q = hca.qp(qpn)?;
            let (sc, rc) = (hca.cq(rings[1].cq)?, hca.cq(rings[1].rcq)?);
            let cpu = CpuChannel {
                qpn,
                sq: marrow_driver::SendQueue::new(q.mem.sq, 64, q.mem.dbrec, q.mem.uar, qpn),
                scq: marrow_driver::CqPoller::new(sc.buf, sc.ncqe, sc.dbrec, marrow_driver::CqMode::Normal),
                rq: marrow_driver::RecvQueue::new(q.mem.rq, q.caps.rq_wqes, q.caps.rq_stride as usize, q.mem.dbrec),
                rcq: marrow_driver::CqPoller::new(rc.buf, rc.ncqe, rc.dbrec, marrow_driver::CqMode::Normal),
                lkey,
                peer: f.x.peers[1],
            };
            (setup, cpu)
        };
        let page = Shm::create("verbs-proxy-gcrb", marrow_gcrb::GCRB_PAGE_SIZE as usize)
            .map_err(|e| ProxyError::Setup(format!("GCRB page: {e}")))?;
        gcrb_page::fill(&page.region(), &setup)?;
        nic.start(1);
        f.x.group.barrier(o.timeout)?;
        say(&format!("rank {}: the peer is ready too (endpoints by {}, then a barrier)", f.x.rank, f.x.group.via()));
        Ok(ProxyRank {
            rank: f.x.rank,
            nic,
            qpn: rings[0].qpn,
            cqn: rings[0].cq,
            verbs_qpn: f.verbs_qpn,
            peer: f.x.peers[0],
            cpu: std::sync::Mutex::new(cpu),
            buf: f.buf,
            page,
            describe: f.describe,
            device: f.device,
            buf_shm: f.buf_shm,
        })
    }

    /// The softnic QP's state (ERR once the verbs QP reported an error).
    pub fn qp_state(&self) -> Option<QpState> {
        self.nic.hca().qp(self.qpn).ok().map(|q| q.state)
    }
}

/// One channel's softnic objects: its QP and the QP's send and receive CQs.
#[derive(Clone, Copy, Debug, Default)]
struct Rings {
    qpn: u32,
    cq: u32,
    rcq: u32,
}

impl Rings {
    fn create(hca: &mut marrow_softnic::hca::Hca, pd: marrow_softnic::mr::Pd) -> Result<Rings, ProxyError> {
        let cq = hca.create_cq(64, CqMode::Normal)?;
        let rcq = hca.create_cq(64, CqMode::Normal)?;
        let qpn = hca.create_qp(pd, cq, rcq, QpCaps { sq_wqebbs: 64, ..QpCaps::default() })?;
        Ok(Rings { qpn, cq, rcq })
    }
}

/// What either kind of rank brings to [`ProxyRank::finish`].
struct Finish {
    x: Exchanged,
    me: RcEndpoint,
    buf: Region,
    buf_shm: Shm,
    describe: String,
    device: (String, u8),
    verbs_qpn: u32,
}

fn symmetric_buffer(o: &RankOpts) -> Result<(Shm, Region), ProxyError> {
    let shm = Shm::create("verbs-proxy-buf", o.buf_len).map_err(|e| ProxyError::Setup(format!("buffer: {e}")))?;
    let buf = shm.region().sub(0, o.buf_len)?;
    Ok((shm, buf))
}

/// A first PSN that differs between processes (24 bits).
fn first_psn() -> u32 {
    (std::process::id().wrapping_mul(2654435761)) & marrow_mlx5::raw::qpc::NEXT_SEND_PSN_MASK
}

/// The two ranks' endpoints, by the exchange `o` names: this rank, the
/// peer's two endpoints, and the group, kept to meet again.
fn exchange(o: &RankOpts, me: &[RcEndpoint; 2], say: &mut dyn FnMut(&str)) -> Result<Exchanged, ProxyError> {
    let group = match (&o.listen, &o.connect) {
        (Some(addr), None) => {
            let root = Root::bind(addr, o.id.clone())?;
            let host = addr.rsplit_once(':').map_or("HOST", |(h, _)| h);
            say(&format!("rank 0 waiting; on the peer run: marrow bench verbs --connect {}", root.token(host)));
            Group::root(root, 2)
        }
        (None, Some(token)) => Group::peer(token, 1, 2),
        (None, None) => {
            let g = Group::launched(|k| std::env::var(k).ok())?;
            if g.size() != 2 {
                return Err(ProxyError::Setup(format!("the launcher started {} ranks; this runs exactly 2", g.size())));
            }
            g
        }
        (Some(_), Some(_)) => return Err(ProxyError::Setup("give --listen or --connect, not both".into())),
    };
    let all = group.allgather(me, o.timeout)?;
    let rank = group.rank();
    let peers = all.get(1 - rank).copied().ok_or_else(|| ProxyError::Setup("the exchange returned no peer".into()))?;
    Ok(Exchanged { rank, peers, group })
}

/// The endpoints exchanged, and the ranks kept met: after connecting, each
/// rank waits at [`Group::barrier`] until both QPs are in RTS with their
/// receives posted and both engines running, so that a first request cannot
/// reach a peer QP still in INIT, which drops it (a slow peer then runs the
/// requester's retries out: seen under QEMU's TCG, TRANSPORT_RETRY_EXC_ERR on
/// the first RDMA READ).
struct Exchanged {
    rank: usize,
    peers: [RcEndpoint; 2],
    group: Group,
}

fn gid_text(g: &[u8; 16]) -> String {
    match marrow_verbs::gids::ipv4_of(g) {
        Some(ip) => format!("::ffff:{ip}"),
        None => g.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":"),
    }
}
