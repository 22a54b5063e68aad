//! The softnic backend: PEs in one process, each with a symmetric buffer
//! registered on one softnic, and a channel (RC QP + CQ + GCRB) from each PE
//! to the other.

use crate::gcrb_page::{self, GcrbSetup};
use marrow_mmio::Region;
use marrow_softnic::{Access, CqMode, Faults, ModifyQp, QpCaps, QpState, Shm, SoftNic};
use std::sync::Arc;
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
    /// `flags.early_doorbell`: ring as soon as the WQEs are fenced, then
    /// write the doorbell record and ring again (DOCA's early ringing), so
    /// the NIC starts one system-scope fence sooner.
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
    /// PE 1 on a second softnic, reached from PE 0 over RoCEv2 on loopback
    /// UDP (`marrow_softnic::rc`): the device code's WQEs then cross a
    /// wire, packets, ACKs and all.
    pub wire: bool,
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
            early_doorbell: false,
            extra_channels: 0,
            exclusive: false,
            wire: false,
        }
    }
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
    /// PE 1's device model, with `WorldConfig::wire`.
    pub nic_b: Option<SoftNic>,
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
        Self::build(cfg, None)
    }

    /// As [`World::new`], but each PE's symmetric buffer is device memory
    /// (a GPU's, say) at the given device address: the softnic moves data
    /// in and out of it through [`marrow_softnic::DeviceMemory`] copies.
    pub fn with_device_buffers(
        cfg: WorldConfig,
        bufs: [(std::sync::Arc<dyn marrow_softnic::DeviceMemory>, u64); 2],
    ) -> Result<World, crate::TransportError> {
        Self::build(cfg, Some(bufs))
    }

    fn build(
        cfg: WorldConfig,
        device: Option<[(std::sync::Arc<dyn marrow_softnic::DeviceMemory>, u64); 2]>,
    ) -> Result<World, crate::TransportError> {
        let mut nic = SoftNic::new();
        let mut nic_b = cfg.wire.then(SoftNic::new);
        let nics = [&nic, nic_b.as_ref().unwrap_or(&nic)];
        // With a wire, each softnic gets a port on a loopback address of this
        // process's own, a new pair for every world.
        static WORLDS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
        let n = WORLDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let net = (std::process::id() % 200) as u8 + 20;
        let ips = [std::net::Ipv4Addr::new(127, net, n, 129), std::net::Ipv4Addr::new(127, net, n, 130)];
        if cfg.wire {
            for pe in 0..2 {
                let bind = std::net::SocketAddrV4::new(ips[pe], 4791);
                nics[pe].attach_port(marrow_softnic::rc::port::PortKind::Udp { bind }, Default::default())?;
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
        let mut channels = Vec::new();
        let mut more = Vec::new();
        for k in 0..pairs {
            // The first pair serves both PEs; the extra ones PE 0.
            for pe in 0..if k == 0 { 2 } else { 1 } {
                let page = Arc::new(Shm::create(&format!("gcrb{pe}.{k}"), marrow_gcrb::GCRB_PAGE_SIZE as usize)?);
                let setup = {
                    let hca = nics[pe].hca();
                    let q = hca.qp(qpns[k][pe])?;
                    let c = hca.cq(cqs[k][pe])?;
                    GcrbSetup {
                        qpn: qpns[k][pe],
                        sq: (q.mem.sq.base_addr() as u64, cfg.sq_wqebbs),
                        dbrec: q.mem.dbrec.base_addr() as u64,
                        db: (q.mem.uar.base_addr() as u64 + u64::from(marrow_mlx5::raw::MLX5_BF_OFFSET), 8),
                        cq: (c.buf.base_addr() as u64, c.ncqe, c.dbrec.base_addr() as u64, cfg.collapsed_cq),
                        local: match &device {
                            Some(d) => (lkeys[pe], d[pe].1, d[pe].0.len() as u64),
                            None => (lkeys[pe], bufs[pe].base_addr() as u64, cfg.buf_len as u64),
                        },
                        keys,
                        timeout_ns: cfg.timeout.as_nanos() as u64,
                        trace: cfg.trace,
                    }
                };
                gcrb_page::fill(&page.region(), &setup)?;
                gcrb_page::edit_config(&page.region(), |c| {
                    c.set_lazy_nbi_doorbell(cfg.lazy_nbi_doorbell);
                    c.set_early_doorbell(cfg.early_doorbell);
                    c.set_exclusive(cfg.exclusive);
                })?;
                let ch = Channel { qpn: qpns[k][pe], cqn: cqs[k][pe], page };
                if k == 0 { channels.push(ch) } else { more.push(ch) }
            }
        }
        nic.start(1);
        if let Some(n) = &mut nic_b {
            n.start(1);
        }
        let channels: [Channel; 2] = channels.try_into().map_err(|_| crate::TransportError::Missing("channels"))?;
        Ok(World { nic, nic_b, channels, more, bufs, _shm: shm })
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
        let owned = self.channels.iter().enumerate().chain(self.more.iter().map(|c| (0, c)));
        for (pe, c) in owned {
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
        Ok(self.nic_of(pe).hca().set_faults(self.channels[pe].qpn, faults)?)
    }
}
