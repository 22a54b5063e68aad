//! `marrow bench verbs --gpu`, rank 0: the device code in GPU threads on
//! the rank's channel, before the CPU thread's checks. The channel's rings
//! (send queue, doorbell record, the doorbell page the engine scans, the
//! CQ) and the symmetric buffer are host memory, registered with CUDA at
//! their own addresses; the GCRB goes to GPU memory for the run and comes
//! back with its heads, so the CPU path continues where the GPU left the
//! ring. Whatever the rank's transport (a verbs QP through the proxy, or
//! the softnic's own QP on the wire), the GPU's WQEs take it to rank 1.
//!
//! Checked: a put and a get of the same bytes, 8 x 128 threads putting,
//! then the 8 B blocking put's latency on the GPU clock. The regions GPU
//! threads write on rank 1 ([0, 256 KiB)) are rewritten by the CPU checks
//! that follow, which rank 1 verifies.

use super::bench_run::{Figure, Run};
use super::{ProxyError, ProxyRank};
use crate::gcrb_page;
use crate::gpu::Gpu;
use crate::gpu_checks::GpuCheckError;
use marrow_mmio::Region;
use std::fmt::Write as _;
use std::time::Duration;

/// The GPU, opened before the rank connects: without one the run is
/// refused before the peer is involved.
pub fn open(say: &mut dyn FnMut(&str)) -> Result<Gpu, ProxyError> {
    let gpu = Gpu::open().map_err(|e| ProxyError::Refused(format!("--gpu: {e}")))?;
    say(&format!("GPU: {} ({}), {}", gpu.name, gpu.arch, gpu.kernels));
    Ok(gpu)
}

/// Run the GPU part on `r` (rank 0), adding its lines and figure to `run`.
pub fn run(gpu: &Gpu, r: &ProxyRank, iters: u32, run: &mut Run) -> Result<(), ProxyError> {
    // An idle engine backs off between scans; for the GPU's round trips
    // through host memory it spins (and keeps spinning for the CPU part).
    r.nic.set_idle_spin(Duration::from_secs(1));
    let regions = r.host_regions()?;
    let mut registered = Vec::new();
    let result = (|| {
        for reg in &regions {
            gpu.register(reg).map_err(gpu_err)?;
            registered.push(reg);
        }
        checks(gpu, r, iters, run)
    })();
    let _ = gpu.stream.synchronize();
    for reg in registered {
        let _ = gpu.unregister(reg);
    }
    result
}

fn gpu_err(e: crate::TransportError) -> ProxyError {
    ProxyError::Check(format!("GPU: {e}"))
}

fn checks(gpu: &Gpu, r: &ProxyRank, iters: u32, run: &mut Run) -> Result<(), ProxyError> {
    let page = r.page.region();
    let dg = gpu.upload(&page).map_err(gpu_err)?;
    let fail = |what: &str, rc: i32| -> ProxyError {
        let _ = gpu.download(&dg, &page);
        ProxyError::Check(format!(
            "{what}: device code returned {rc} ({})\n{}",
            crate::DeviceError(rc),
            gcrb_page::report(&page)
        ))
    };
    let checked = crate::gpu_checks::run(gpu, &dg, &r.buf, 64 << 10, iters, "ok - ").map_err(|e| match e {
        GpuCheckError::Device { what, rc } => fail(&what, rc),
        GpuCheckError::Cuda(e) => gpu_err(e),
        GpuCheckError::Check(m) => ProxyError::Check(m),
    })?;
    for l in &checked.lines {
        let _ = writeln!(run.text, "{l}");
    }
    run.figures.push(Figure { name: "gpu_put8_lat_mean".into(), value: checked.put8_us, unit: "us" });
    // The heads as the GPU left them: the CPU path continues from there.
    gpu.download(&dg, &page).map_err(gpu_err)
}

impl ProxyRank {
    /// The host memory GPU threads touch on this rank's channel 0: the
    /// symmetric buffer, the QP's queues and doorbell page, its CQ.
    fn host_regions(&self) -> Result<Vec<Region>, ProxyError> {
        let hca = self.nic.hca();
        let q = hca.qp(self.qpn)?;
        let c = hca.cq(self.cqn)?;
        Ok(vec![self.buf_shm.region(), q.mem.queues.region(), q.mem.uar_page.region(), c.shm.region()])
    }
}
