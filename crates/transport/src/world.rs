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

/// Two PEs on one softnic.
#[derive(Debug)]
pub struct World {
    /// The device model.
    pub nic: SoftNic,
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
        let pairs = 1 + cfg.extra_channels;
        let (bufs, shm, keys, qpns, cqs, lkeys) = {
            let mut hca = nic.hca();
            let pd = hca.alloc_pd();
            let shm = [Arc::new(Shm::create("pe0", cfg.buf_len)?), Arc::new(Shm::create("pe1", cfg.buf_len)?)];
            let bufs = [shm[0].region().sub(0, cfg.buf_len)?, shm[1].region().sub(0, cfg.buf_len)?];
            let mut keys = [(0u64, 0u32); 2];
            let mut lkeys = [0u32; 2];
            for pe in 0..2 {
                let (addr, (l, r)) = match &device {
                    Some(d) => (d[pe].1, hca.reg_device_mr(pd, d[pe].1, d[pe].0.clone(), Access::all())),
                    None => (
                        bufs[pe].base_addr() as u64,
                        hca.reg_mr(pd, bufs[pe].base_addr() as u64, bufs[pe], Access::all()),
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
                    cqs[k][pe] = hca.create_cq(cfg.ncqe, mode)?;
                    let rcq = hca.create_cq(16, CqMode::Normal)?;
                    qpns[k][pe] =
                        hca.create_qp(pd, cqs[k][pe], rcq, QpCaps { sq_wqebbs: cfg.sq_wqebbs, ..QpCaps::default() })?;
                }
                for pe in 0..2 {
                    hca.modify_qp(qpns[k][pe], ModifyQp::to(QpState::Init))?;
                    hca.modify_qp(qpns[k][pe], ModifyQp::rtr(qpns[k][1 - pe]))?;
                    hca.modify_qp(qpns[k][pe], ModifyQp::to(QpState::Rts))?;
                }
            }
            (bufs, shm, keys, qpns, cqs, lkeys)
        };
        let mut channels = Vec::new();
        let mut more = Vec::new();
        for k in 0..pairs {
            // The first pair serves both PEs; the extra ones PE 0.
            for pe in 0..if k == 0 { 2 } else { 1 } {
                let page = Arc::new(Shm::create(&format!("gcrb{pe}.{k}"), marrow_gcrb::GCRB_PAGE_SIZE as usize)?);
                let setup = {
                    let hca = nic.hca();
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
        let channels: [Channel; 2] = channels.try_into().map_err(|_| crate::TransportError::Missing("channels"))?;
        Ok(World { nic, channels, more, bufs, _shm: shm })
    }

    /// Every shared region the device code touches: PE buffers, GCRB pages,
    /// queues, doorbell records, UAR pages, CQs (what a GPU must map).
    pub fn shared_regions(&self) -> Vec<Region> {
        let mut v: Vec<Region> = self._shm.iter().map(|s| s.region()).collect();
        v.extend(self.channels.iter().chain(&self.more).map(|c| c.page()));
        let hca = self.nic.hca();
        for c in self.channels.iter().chain(&self.more) {
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
        Ok(self.nic.hca().set_faults(self.channels[pe].qpn, faults)?)
    }
}
