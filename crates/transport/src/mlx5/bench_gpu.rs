//! `marrow bench mlx5 --gpu`, rank 0: the device code in GPU threads on a
//! real ConnectX QP. rdma-core's send queue, CQ and doorbell records are
//! host memory registered with CUDA (same addresses); the doorbell is the
//! UAR mapped into the GPU when the driver allows it, else a host mailbox a
//! CPU proxy forwards to the UAR (gpu_map). The GCRB goes to GPU memory.
//! Checked: a put and a get of the same bytes, 8 x 128 threads putting,
//! then 8-byte put latency on the GPU clock. Afterwards the channel is
//! handed back to the CPU path (heads from the GPU, the CPU's doorbell),
//! which runs its own checks and tells rank 1 it is done.
//!
//! Not run on the development machines: no NIC (and no GPU on the one
//! that has none). Without a NIC it never gets here: `bench::run` stops at
//! opening the device, with the error naming what is missing.

use super::Mlx5Error;
use super::gpu_map;
use super::setup::{Doorbell, gcrb_setup};
use crate::gcrb_page;
use crate::gpu::Gpu;
use crate::gpu_checks::GpuCheckError;
use marrow_mmio::Region;
use marrow_softnic::Shm;
use marrow_verbs::device::DvQueues;
use marrow_verbs::proxy::DoorbellProxy;
use std::fmt::Write as _;

fn cuda(e: impl std::fmt::Display) -> Mlx5Error {
    Mlx5Error::Cuda(e.to_string())
}

/// What rank 0 needs from the CPU path's setup.
#[derive(Debug)]
pub struct GpuRank0<'a> {
    /// The QP's queues as `mlx5dv_init_obj` gave them.
    pub dv: &'a DvQueues,
    /// Rank 0's registered buffer.
    pub buf: &'a Region,
    /// The GCRB page (host), refilled here for the GPU and handed back.
    pub page: &'a Region,
    /// (lkey, address, length) of the local window.
    pub local: (u32, u64, u64),
    /// Both PEs' windows: (address, rkey).
    pub keys: [(u64, u32); 2],
    /// Bytes of the checked put.
    pub n: usize,
    /// Timed puts.
    pub iters: u32,
}

/// Run the GPU part; returns the lines to print, and adds its figures.
pub fn run(
    r: &GpuRank0,
    say: &mut dyn FnMut(&str),
    figures: &mut Vec<super::bench_run::Figure>,
) -> Result<String, Mlx5Error> {
    let gpu = Gpu::open().map_err(cuda)?;
    say(&format!("GPU: {} ({}), {}", gpu.name, gpu.arch, gpu.kernels));
    let dv = r.dv;
    let mailbox = Shm::create("mlx5-mailbox", 4096).map_err(cuda)?;
    gpu.register(r.buf).map_err(cuda)?;
    gpu.register(&mailbox.region()).map_err(cuda)?;
    let queues = [
        (dv.sq_buf, (dv.sq_wqe_cnt * dv.sq_stride) as usize),
        (dv.dbrec, 8),
        (dv.cq_buf, (dv.cqe_cnt * dv.cqe_size) as usize),
        (dv.cq_dbrec, 8),
    ];
    let pages = gpu_map::register_host(&gpu, &queues)?;
    let (db, mode, why) = gpu_map::choose_doorbell(&gpu, dv, mailbox.region().base_addr() as u64);
    say(&format!("doorbell mode: {mode:?}: {why}"));
    let proxy = match db {
        Doorbell::Mailbox(_) => Some(DoorbellProxy::start(mailbox.region().sub(0, 8)?, gpu_map::uar_register(dv)?)?),
        _ => None,
    };
    let result = checks(&gpu, r, db, figures);
    let _ = gpu.stream.synchronize();
    if let Some(p) = proxy {
        say(&format!("doorbells forwarded by the CPU proxy: {}", p.stop()));
    }
    gpu_map::unregister_host(&gpu, &pages);
    let _ = gpu.unregister(&mailbox.region());
    let _ = gpu.unregister(r.buf);
    result
}

fn checks(
    gpu: &Gpu,
    r: &GpuRank0,
    db: Doorbell,
    figures: &mut Vec<super::bench_run::Figure>,
) -> Result<String, Mlx5Error> {
    let setup = gcrb_setup(r.dv, db, r.local, r.keys, 2_000_000_000, false)?;
    gcrb_page::fill(r.page, &setup)?;
    let dg = gpu.upload(r.page).map_err(cuda)?;
    let fail = |what: &str, rc: i32| -> Mlx5Error {
        let _ = gpu.download(&dg, r.page);
        Mlx5Error::Queue(format!(
            "{what}: device code returned {rc} ({})\n{}",
            crate::DeviceError(rc),
            gcrb_page::report(r.page)
        ))
    };
    let checked = crate::gpu_checks::run(gpu, &dg, r.buf, r.n, r.iters, "").map_err(|e| match e {
        GpuCheckError::Device { what, rc } => fail(&what, rc),
        GpuCheckError::Cuda(e) => cuda(e),
        GpuCheckError::Check(m) => Mlx5Error::Queue(m),
    })?;
    let mut out = String::new();
    for l in &checked.lines {
        let _ = writeln!(out, "{l}");
    }
    figures.push(super::bench_run::Figure {
        section: "GPU threads",
        name: format!("GPU 8 B blocking put x{} (GPU clock)", r.iters),
        value: checked.put8_us,
        unit: "us",
    });
    // Hand the channel back to the CPU path: the heads as the GPU left
    // them (the NIC's indices continue from there), the CPU's doorbell.
    gpu.download(&dg, r.page).map_err(cuda)?;
    let cpu = gcrb_setup(r.dv, Doorbell::Uar, r.local, r.keys, 2_000_000_000, false)?;
    gcrb_page::edit_config(r.page, |c| {
        c.set_db_addr(cpu.db.0).set_db_size(cpu.db.1);
    })?;
    Ok(out)
}
