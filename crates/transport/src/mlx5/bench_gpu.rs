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
use crate::gpu::{Gpu, Grid, RwKernel};
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
    figures: &mut Vec<super::bench::Figure>,
) -> Result<String, Mlx5Error> {
    let gpu = Gpu::open().map_err(cuda)?;
    say(&format!("GPU: {} ({})", gpu.name, gpu.arch));
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

fn checks(gpu: &Gpu, r: &GpuRank0, db: Doorbell, figures: &mut Vec<super::bench::Figure>) -> Result<String, Mlx5Error> {
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
    let mut out = String::new();
    let pattern = |i: usize| (i as u8).wrapping_mul(29).wrapping_add(3);
    let n = r.n;
    for i in 0..n {
        r.buf.write_u8(i, pattern(i))?;
    }
    // Put our [0, n) to the peer's [0, n), clear ours, get it back.
    let rc = gpu.rw(RwKernel::Put, dg.addr, 1, n as u32, 1, Grid::ONE).map_err(cuda)?;
    if rc[0] != 0 {
        return Err(fail("GPU put", rc[0]));
    }
    r.buf.fill(0, n, 0)?;
    let rc = gpu.rw(RwKernel::Get, dg.addr, 1, n as u32, 1, Grid::ONE).map_err(cuda)?;
    if rc[0] != 0 {
        return Err(fail("GPU get", rc[0]));
    }
    let mut back = vec![0u8; n];
    r.buf.read_bytes(0, &mut back)?;
    if let Some(i) = (0..n).find(|&i| back[i] != pattern(i)) {
        return Err(Mlx5Error::Queue(format!(
            "GPU put then get: byte {i} came back {:#04x}, put {:#04x}",
            back[i],
            pattern(i)
        )));
    }
    let _ = writeln!(out, "GPU thread: put {n} B and got it back: every byte matches");
    let grid = Grid { blocks: 8, threads: 128 };
    let rcs = gpu.rw(RwKernel::Put, dg.addr, 1, 64, 4, grid).map_err(cuda)?;
    if let Some((t, rc)) = rcs.iter().enumerate().find(|(_, rc)| **rc != 0) {
        return Err(fail(&format!("GPU thread {t} of 8 x 128"), *rc));
    }
    let _ = writeln!(out, "GPU 8 x 128 threads x 4 puts of 64 B: all completed");
    let (rc, ns) = gpu.put_latency(dg.addr, 1, r.iters).map_err(cuda)?;
    if rc != 0 {
        return Err(fail("GPU put latency", rc));
    }
    let _ = writeln!(
        out,
        "GPU 8 B blocking put x{}: {:.2} us each (GPU clock)",
        r.iters,
        ns as f64 / f64::from(r.iters.max(1)) / 1e3
    );
    figures.push(super::bench::Figure {
        section: "GPU threads",
        name: format!("GPU 8 B blocking put x{} (GPU clock)", r.iters),
        value: ns as f64 / f64::from(r.iters.max(1)) / 1e3,
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
