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

use super::bench::{Figure, Run};
use super::{ProxyError, ProxyRank};
use crate::gcrb_page;
use crate::gpu::{Gpu, Grid, RwKernel};
use marrow_mmio::Region;
use std::fmt::Write as _;
use std::time::Duration;

/// The GPU, opened before the rank connects: without one the run is
/// refused before the peer is involved.
pub fn open(say: &mut dyn FnMut(&str)) -> Result<Gpu, ProxyError> {
    let gpu = Gpu::open().map_err(|e| ProxyError::Refused(format!("--gpu: {e}")))?;
    say(&format!("GPU: {} ({})", gpu.name, gpu.arch));
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
    let n = 64usize << 10;
    let pattern = |i: usize| (i as u8).wrapping_mul(29).wrapping_add(3);
    let p: Vec<u8> = (0..n).map(pattern).collect();
    r.buf.write_bytes(0, &p)?;
    let rc = gpu.rw(RwKernel::Put, dg.addr, 1, n as u32, 1, Grid::ONE).map_err(gpu_err)?;
    if rc[0] != 0 {
        return Err(fail("GPU put", rc[0]));
    }
    r.buf.fill(0, n, 0)?;
    let rc = gpu.rw(RwKernel::Get, dg.addr, 1, n as u32, 1, Grid::ONE).map_err(gpu_err)?;
    if rc[0] != 0 {
        return Err(fail("GPU get", rc[0]));
    }
    let mut back = vec![0u8; n];
    r.buf.read_bytes(0, &mut back)?;
    if let Some(i) = (0..n).find(|&i| back[i] != p[i]) {
        return Err(ProxyError::Check(format!(
            "GPU put then get: byte {i} came back {:#04x}, put {:#04x}",
            back[i], p[i]
        )));
    }
    let _ = writeln!(run.text, "ok - GPU thread: put {n} B and got it back: every byte matches");
    let grid = Grid { blocks: 8, threads: 128 };
    let rcs = gpu.rw(RwKernel::Put, dg.addr, 1, 64, 4, grid).map_err(gpu_err)?;
    if let Some((t, rc)) = rcs.iter().enumerate().find(|(_, rc)| **rc != 0) {
        return Err(fail(&format!("GPU thread {t} of 8 x 128"), *rc));
    }
    let _ = writeln!(run.text, "ok - GPU 8 x 128 threads x 4 puts of 64 B: all completed");
    let (rc, ns) = gpu.put_latency(dg.addr, 1, iters).map_err(gpu_err)?;
    if rc != 0 {
        return Err(fail("GPU put latency", rc));
    }
    let us = ns as f64 / f64::from(iters.max(1)) / 1e3;
    let _ = writeln!(run.text, "GPU 8 B blocking put x{iters}: {us:.2} us each (GPU clock)");
    run.figures.push(Figure { name: "gpu_put8_lat_mean".into(), value: us, unit: "us" });
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
        Ok(vec![self._buf.region(), q.mem.queues.region(), q.mem.uar_page.region(), c.shm.region()])
    }
}
