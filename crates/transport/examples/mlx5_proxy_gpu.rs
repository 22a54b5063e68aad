//! The mlx5 backend's CPU-proxy doorbell with the device code in GPU
//! threads, on the softnic (no NIC needed, a GPU needed): the GCRB's
//! doorbell is a host mailbox the GPU writes, a `DoorbellProxy` thread
//! forwards each doorbell to the softnic's UAR register. Puts from one and
//! from many GPU threads are checked byte for byte, then 8-byte put
//! latency through the proxy. Also reports whether CUDA accepts
//! `cuMemHostRegister(IOMEMORY)` on an ordinary page (not a real UAR: the
//! answer says nothing about a NIC's BAR, only how the call behaves).
//!
//! `cargo run --example mlx5_proxy_gpu -p marrow-transport`

use marrow_gcrb::{GCRB_OFF_CONFIG, gcrb_config};
use marrow_mlx5::raw::MLX5_BF_OFFSET;
use marrow_softnic::Shm;
use marrow_transport::gpu::{Gpu, Grid, RwKernel};
use marrow_transport::{World, WorldConfig};
use marrow_verbs::proxy::DoorbellProxy;
use std::time::{Duration, Instant};
use zerocopy::{FromBytes, IntoBytes};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| x.to_string();
    let gpu = Gpu::open().map_err(|x| e(&x))?;
    println!("GPU: {} ({})", gpu.name, gpu.arch);
    let w = World::new(WorldConfig {
        timeout: Duration::from_secs(5),
        sq_wqebbs: 256,
        ncqe: 4096,
        ..WorldConfig::default()
    })
    .map_err(|x| e(&x))?;
    w.nic.set_idle_spin(Duration::from_secs(1));
    let ch = &w.channels[0];
    let uar_db =
        w.nic.hca().qp(ch.qpn).map_err(|x| e(&x))?.mem.uar.sub(MLX5_BF_OFFSET as usize, 8).map_err(|x| e(&x))?;
    let mailbox = Shm::create("gpu-proxy-mailbox", 4096).map_err(|x| e(&x))?;
    let page = ch.page();
    let mut b = vec![0u8; gcrb_config::SIZE];
    page.read_bytes(GCRB_OFF_CONFIG as usize, &mut b).map_err(|x| e(&x))?;
    let mut c = gcrb_config::read_from_bytes(&b).map_err(|_| "gcrb_config".to_string())?;
    c.set_db_addr(mailbox.region().base_addr() as u64).set_db_size(8);
    page.write_bytes(GCRB_OFF_CONFIG as usize, c.as_bytes()).map_err(|x| e(&x))?;
    // The queues as the mlx5 backend registers rdma-core's (page ranges of
    // the SQ, doorbell records and CQ, merged: gpu_map::register_host); the
    // buffers, GCRB pages and mailbox as whole regions.
    let queue_ranges = [
        (c.sq_base(), c.sq_wqebbs() as usize * 64),
        (c.dbrec_addr(), 8),
        (c.cq_base(), c.cq_ncqe() as usize * 64),
        (c.cq_dbrec_addr(), 8),
    ];
    let queue_pages = marrow_transport::mlx5::gpu_map::register_host(&gpu, &queue_ranges).map_err(|x| e(&x))?;
    println!("queues registered as {} page range(s) at their host addresses", queue_pages.len());
    let mut regions: Vec<_> = w.bufs.to_vec();
    regions.extend(w.channels.iter().map(|ch| ch.page()));
    regions.push(mailbox.region());
    for r in &regions {
        gpu.register(r).map_err(|x| e(&x))?;
    }
    let proxy = DoorbellProxy::start(mailbox.region().sub(0, 8).map_err(|x| e(&x))?, uar_db).map_err(|x| e(&x))?;
    let gcrb = gpu.upload(&page).map_err(|x| e(&x))?;
    let (a, bb) = (w.bufs[0], w.bufs[1]);
    let result = (|| -> Result<(), String> {
        for len in [8usize, 4096, 65536] {
            let data: Vec<u8> = (0..len).map(|i| (i as u64).wrapping_mul(2654435761) as u8 ^ len as u8).collect();
            a.write_bytes(0, &data).map_err(|x| e(&x))?;
            bb.fill(0, len, 0).map_err(|x| e(&x))?;
            let rc = gpu
                .rw(RwKernel::Put, gcrb.addr, 1, len as u32, 1, Grid { blocks: 1, threads: 1 })
                .map_err(|x| e(&x))?;
            if rc.iter().any(|c| *c != 0) {
                return Err(format!("put {len} B: rc {rc:?}"));
            }
            let mut got = vec![0u8; len];
            bb.read_bytes(0, &mut got).map_err(|x| e(&x))?;
            if got != data {
                return Err(format!("put {len} B through the proxy: data differs"));
            }
            println!("put {len:>6} B from 1 GPU thread through the CPU proxy: every byte checked");
        }
        let t = Instant::now();
        let rc = gpu.rw(RwKernel::Put, gcrb.addr, 1, 64, 4, Grid { blocks: 8, threads: 128 }).map_err(|x| e(&x))?;
        if let Some((i, c)) = rc.iter().enumerate().find(|(_, c)| **c != 0) {
            return Err(format!("8x128 threads x4 puts: thread {i} rc {c}"));
        }
        println!(
            "8 x 128 GPU threads x 4 puts of 64 B through the proxy: all completed ({:.1} ms)",
            t.elapsed().as_secs_f64() * 1e3
        );
        let iters = 2000;
        let timed = gpu.put_latency(gcrb.addr, 1, iters).map_err(|x| e(&x))?;
        if timed.rc != 0 {
            return Err(format!("put_latency rc {}", timed.rc));
        }
        println!(
            "8 B blocking put through the CPU proxy: {:.2} us each (GPU clock, {iters} puts)",
            timed.total_ns as f64 / f64::from(iters) / 1e3
        );
        Ok(())
    })();
    let _ = gpu.stream.synchronize();
    let forwarded = proxy.stop();
    println!("doorbells forwarded by the proxy: {forwarded}");
    for r in &regions {
        let _ = gpu.unregister(r);
    }
    marrow_transport::mlx5::gpu_map::unregister_host(&gpu, &queue_pages);
    result?;
    // How CUDA answers IOMEMORY on ordinary memory (informational only).
    let plain = Shm::create("iomem-probe", 4096).map_err(|x| e(&x))?;
    let m = marrow_transport::mlx5::gpu_map::map_uar(&gpu, plain.region().base_addr() as *mut u8, 4096);
    let (mode, why) = marrow_transport::mlx5::gpu_map::mode_after(&m);
    println!(
        "cuMemHostRegister(IOMEMORY) on an ordinary memfd page: {} -> mode {mode:?} ({why})",
        match &m {
            Ok(d) => format!("accepted (device address {d:#x})"),
            Err(x) => format!("refused: {x}"),
        }
    );
    if m.is_ok() {
        let _ = gpu.unregister(&plain.region());
    }
    Ok(())
}
