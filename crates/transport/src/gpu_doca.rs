//! A peer's device code on the softnic's rings: DOCA GPUNetIO's device
//! verbs, as NCCL 2.28 ships them (`include/nccl_device/gin/gdaki/
//! doca_gpunetio`), compiled outside marrow by `scripts/doca_peer/build.sh`
//! (nvcc, the installed headers) into a CUBIN that this module loads.
//! `scripts/doca_peer/doca_peer.cu` fills DOCA's `doca_gpu_dev_verbs_qp`
//! from a [`DocaQueue`] (as DOCA's host side fills one for a QP it made)
//! and calls DOCA's own put, warp put and CQ poll; the launch wrappers
//! below match its kernels' signatures. So `marrow bench gpu --doca`
//! times DOCA's code and marrow's on the same kind of send queues,
//! doorbells and CQs, in one run.

use crate::TransportError;
use crate::gpu::{Gpu, Grid, Timed, cuda};
use cudarc::driver::{CudaModule, CudaSlice, DeviceRepr, PushKernelArg};
use cudarc::nvrtc::Ptx;
use marrow_gcrb::{gcrb_config, gcrb_key};
use std::path::Path;
use std::sync::Arc;

/// One QP for DOCA's device code: `struct doca_peer_queue` in
/// `scripts/doca_peer/doca_peer.cu`, field for field. Device addresses of
/// registered host memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DocaQueue {
    /// The send queue (64-byte WQEBBs).
    pub sq_base: u64,
    /// The QP's doorbell record (receive word, then send word).
    pub dbrec_addr: u64,
    /// The doorbell register.
    pub db_addr: u64,
    /// The owner-bit CQ, created with `oi` (DOCA never writes its record).
    pub cq_base: u64,
    /// The CQ's doorbell record.
    pub cq_dbrec_addr: u64,
    /// QP number.
    pub qpn: u32,
    /// WQEBBs of the send queue: a power of two DOCA's 16-bit count holds.
    pub sq_wqebbs: u32,
    /// CQEs: a power of two, at least `sq_wqebbs` (one CQE per WQE).
    pub cq_ncqe: u32,
    reserved: u32,
}

// SAFETY: #[repr(C)], plain integers, no padding (5 u64 then 4 u32), the
// layout of `struct doca_peer_queue` that the kernels read (both sides
// assert its size).
unsafe impl DeviceRepr for DocaQueue {}
const _: () = assert!(size_of::<DocaQueue>() == 56, "struct doca_peer_queue is 56 bytes");

impl DocaQueue {
    /// The queue a marrow channel's GCRB describes; refused where DOCA's
    /// device code cannot run on it as it stands: a collapsed CQ, a CQ that
    /// keeps a doorbell record (DOCA never writes it, so the CQ would
    /// overflow), or counts DOCA's fields do not hold.
    pub fn of(cfg: &gcrb_config) -> Result<DocaQueue, TransportError> {
        let (sq, ncqe) = (cfg.sq_wqebbs(), cfg.cq_ncqe());
        if cfg.cq_mode() != 0 {
            return Err(TransportError::Config("DOCA's CQ poll needs an owner-bit CQ, not a collapsed one".into()));
        }
        if !cfg.cq_overrun_ignore() {
            return Err(TransportError::Config(
                "DOCA never writes the CQ doorbell record: the CQ must be created with oi (WorldConfig::cq_overrun_ignore)"
                    .into(),
            ));
        }
        if !sq.is_power_of_two() || sq > 32768 || !ncqe.is_power_of_two() || ncqe < sq {
            return Err(TransportError::Config(format!(
                "DOCA's QP holds a power-of-two send queue of at most 32768 WQEBBs and a CQ at least as deep: {sq} WQEBBs, {ncqe} CQEs"
            )));
        }
        Ok(DocaQueue {
            sq_base: cfg.sq_base(),
            dbrec_addr: cfg.dbrec_addr(),
            db_addr: cfg.db_addr(),
            cq_base: cfg.cq_base(),
            cq_dbrec_addr: cfg.cq_dbrec_addr(),
            qpn: cfg.qpn(),
            sq_wqebbs: sq,
            cq_ncqe: ncqe,
            reserved: 0,
        })
    }
}

/// Where DOCA's puts go: PE `pe`'s window at `roff`, from the local window
/// at `loff`, as a channel's GCRB maps them. `struct doca_peer_window` in
/// `scripts/doca_peer/doca_peer.cu`, field for field; the kernels take it
/// by value.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocaWindow {
    /// Remote address: the target PE's window plus the offset.
    pub raddr: u64,
    /// Local address: the local window plus the offset.
    pub laddr: u64,
    /// The remote window's rkey, big-endian.
    pub rkey_be: u32,
    /// The local window's lkey, big-endian.
    pub lkey_be: u32,
}

// SAFETY: #[repr(C)], plain integers, no padding (2 u64 then 2 u32), the
// layout of `struct doca_peer_window` that the kernels take by value (both
// sides assert its size).
unsafe impl DeviceRepr for DocaWindow {}
const _: () = assert!(size_of::<DocaWindow>() == 24, "struct doca_peer_window is 24 bytes");

impl DocaWindow {
    /// `key` is the GCRB's entry for the target PE. DOCA takes keys
    /// already big-endian (`DOCA_GPUNETIO_VERBS_MKEY_SWAPPED`).
    pub fn of(cfg: &gcrb_config, key: &gcrb_key, roff: u64, loff: u64) -> DocaWindow {
        DocaWindow {
            raddr: key.raddr() + roff,
            laddr: cfg.local_base() + loff,
            rkey_be: key.rkey().to_be(),
            lkey_be: cfg.local_lkey().to_be(),
        }
    }
}

/// DOCA's sharing mode for a run: one owner per QP, or any thread of the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocaSharing {
    /// `DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE`: plain accesses.
    Exclusive,
    /// `DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU`: atomics, the ready
    /// chain, the doorbell lock.
    Gpu,
}

/// The peer's kernels, loaded, and its QPs in GPU memory.
#[derive(Debug)]
pub struct DocaPeer {
    module: Arc<CudaModule>,
    qps: CudaSlice<u8>,
    count: usize,
}

impl Gpu {
    /// Load the CUBIN `scripts/doca_peer/build.sh` made and set up one
    /// DOCA QP per queue, every index at 0 (fresh softnic QPs).
    pub fn doca_peer(&self, cubin: &Path, queues: &[DocaQueue]) -> Result<DocaPeer, TransportError> {
        if !cubin.is_file() {
            return Err(TransportError::Config(format!(
                "{}: no such file (build it with scripts/doca_peer/build.sh on a machine with nvcc and NCCL 2.28's headers)",
                cubin.display()
            )));
        }
        if queues.is_empty() {
            return Err(TransportError::Missing("a queue for DOCA's device code"));
        }
        let module = self.ctx.load_module(Ptx::from_file(cubin)).map_err(cuda)?;
        let mut size = self.stream.alloc_zeros::<u64>(1).map_err(cuda)?;
        let f = module.load_function("doca_peer_qp_size").map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&mut size);
        // SAFETY: matches doca_peer_qp_size (u64*).
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        let qp_size = self.stream.clone_dtoh(&size).map_err(cuda)?[0] as usize;
        if qp_size == 0 || qp_size > 4096 {
            return Err(TransportError::Config(format!("doca_peer_qp_size says {qp_size} bytes: not DOCA's QP")));
        }
        let qps = self.stream.alloc_zeros::<u8>(qp_size * queues.len()).map_err(cuda)?;
        let dq = self.stream.clone_htod(queues).map_err(cuda)?;
        let n = queues.len() as u32;
        let f = module.load_function("doca_peer_init").map_err(cuda)?;
        let mut b = self.stream.launch_builder(&f);
        b.arg(&qps).arg(&dq).arg(&n);
        // SAFETY: matches doca_peer_init (doca_gpu_dev_verbs_qp*, const doca_peer_queue*, u32):
        // `qps` holds n QPs of the size the same module reported, `dq` n queues.
        unsafe { b.launch(Grid { blocks: n.div_ceil(32), threads: 32 }.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        Ok(DocaPeer { module, qps, count: queues.len() })
    }

    /// DOCA's blocking 8-byte put on QP 0: `iters` puts by one thread,
    /// each followed by DOCA's CQ poll for its CQE, with `timeout_ns` per
    /// wait (-ETIMEDOUT in `rc` past it).
    pub fn doca_put_latency(
        &self,
        peer: &DocaPeer,
        sharing: DocaSharing,
        w: DocaWindow,
        iters: u32,
        timeout_ns: u64,
    ) -> Result<Timed, TransportError> {
        let f = peer.module.load_function("doca_peer_put_latency").map_err(cuda)?;
        let mut t = self.timed_outputs(iters)?;
        let shared = u32::from(sharing == DocaSharing::Gpu);
        let mut b = self.stream.launch_builder(&f);
        b.arg(&peer.qps)
            .arg(&shared)
            .arg(&w)
            .arg(&iters)
            .arg(&timeout_ns)
            .arg(&mut t.ns)
            .arg(&mut t.each)
            .arg(&mut t.rc);
        // SAFETY: matches doca_peer_put_latency (qp*, u32, doca_peer_window, u32, u64, u64*, u64*, int*);
        // QP 0 was set up by doca_peer_init; `each` holds `iters` values.
        unsafe { b.launch(Grid::ONE.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        self.timed(&t)
    }

    /// DOCA's posting rate on `grid`: every thread posts `iters` 8-byte
    /// puts on QP (warp index % `qps`), with the warp put where `warp`;
    /// then each waits for its last CQE. Every thread's result code and
    /// the posting span in GPU-clock ns.
    #[allow(clippy::too_many_arguments)]
    pub fn doca_post_rate(
        &self,
        peer: &DocaPeer,
        qps: usize,
        sharing: DocaSharing,
        warp: bool,
        w: DocaWindow,
        iters: u32,
        grid: Grid,
        timeout_ns: u64,
    ) -> Result<(Vec<i32>, u64), TransportError> {
        if qps == 0 || qps > peer.count {
            return Err(TransportError::Config(format!("{qps} QPs asked of a DOCA peer set up with {}", peer.count)));
        }
        if warp && !grid.threads.is_multiple_of(32) {
            return Err(TransportError::Config("DOCA's warp put needs whole warps".into()));
        }
        let f = peer.module.load_function("doca_peer_post_rate").map_err(cuda)?;
        let mut rc = self.stream.alloc_zeros::<i32>(grid.size()).map_err(cuda)?;
        let mut span = self.stream.clone_htod(&[u64::MAX, 0]).map_err(cuda)?;
        let (nqps, shared, warp) = (qps as u32, u32::from(sharing == DocaSharing::Gpu), u32::from(warp));
        let mut b = self.stream.launch_builder(&f);
        b.arg(&peer.qps)
            .arg(&nqps)
            .arg(&shared)
            .arg(&warp)
            .arg(&w)
            .arg(&iters)
            .arg(&timeout_ns)
            .arg(&mut span)
            .arg(&mut rc);
        // SAFETY: matches doca_peer_post_rate (qp*, u32, u32, u32, doca_peer_window, u32, u64, u64*, int*);
        // QPs 0..nqps were set up by doca_peer_init; `rc` holds one value per thread.
        unsafe { b.launch(grid.config()) }.map_err(cuda)?;
        self.stream.synchronize().map_err(cuda)?;
        let span = self.stream.clone_dtoh(&span).map_err(cuda)?;
        Ok((self.stream.clone_dtoh(&rc).map_err(cuda)?, span[1].saturating_sub(span[0])))
    }
}
