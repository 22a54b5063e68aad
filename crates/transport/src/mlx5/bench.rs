//! Two ranks, one RC QP each, on real ConnectX NICs: the host-memory
//! backend (step 1) end to end. Each rank opens its mlx5 device, creates the
//! CQ and QP through verbs, registers a host buffer, exchanges
//! [`RcEndpoint`]s through the bootstrap, connects, fills a GCRB from
//! `mlx5dv_init_obj`, and rank 0 runs the device code (device.h on a CPU
//! thread: host doorbell mode) against rank 1's buffer: puts checked byte
//! for byte, then put+quiet latency.
//!
//! Not run on the development machines (no NIC): without one it stops at
//! [`super::open`] with the error naming what is missing.

pub use super::bench_run::{Figure, Run};
use super::setup::{Doorbell, gcrb_setup};
use super::{Mlx5Error, open};
use crate::cpu::Device;
use crate::gcrb_page;
use marrow_softnic::Shm;
use marrow_verbs::bootstrap::Root;
use marrow_verbs::device::{Context, Pd, RcQp};
use marrow_verbs::group::Group;
use marrow_verbs::qp::{RC_ACCESS, RcEndpoint};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How to find the peer and which device to use.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    /// RDMA device (`mlx5_0`); the first mlx5 device when `None`.
    pub device: Option<String>,
    /// Port.
    pub port: u8,
    /// GID index (RoCE).
    pub gid_index: u8,
    /// Rank 0: listen here and print the token (`0.0.0.0:18515`).
    pub listen: Option<String>,
    /// Rank 1: the token rank 0 printed (`host:port:id`). With neither
    /// `listen` nor `connect`, the launcher's exchange
    /// ([`Group::launched`]: MPI under mpirun, else
    /// `MARROW_BOOTSTRAP`).
    pub connect: Option<String>,
    /// Rendezvous id rank 0 expects (a fresh one when `None`).
    pub id: Option<String>,
    /// Timed put+quiet iterations.
    pub iters: usize,
    /// Message size.
    pub size: u32,
    /// sysfs and procfs roots (for the probe and error messages).
    pub roots: (PathBuf, PathBuf),
    /// Rank 0 also runs the device code in GPU threads (bench_gpu) before
    /// the CPU-thread checks.
    pub gpu: bool,
}

/// Run one rank; returns the lines to print and the figures.
pub fn run(o: &BenchOpts, say: &mut dyn FnMut(&str)) -> Result<Run, Mlx5Error> {
    let opened = open(&o.roots.0, &o.roots.1)?;
    say(&format!(
        "rdma-core: {} and {}; mlx5 devices: {}",
        opened.verbs.paths.0,
        opened.verbs.paths.1,
        opened.devices.join(", ")
    ));
    say(&format!(
        "doorbell mode: host (device code on a CPU thread); with a GPU this host would use {:?}: {}",
        opened.probe.mode, opened.probe.mode_reason
    ));
    let ctx = Context::open(opened.verbs.clone(), o.device.as_deref(), o.port, o.gid_index, false)?;
    say(&format!(
        "{} port {}: {:?}, LID {:#x}, GID[{}] {}",
        ctx.name,
        ctx.port,
        ctx.link,
        ctx.port_attr.lid,
        ctx.gid_index,
        gid_text(&ctx.gid)
    ));
    let pd = Pd::alloc(&ctx)?;
    let len = 1usize << 20;
    let buf = Shm::create("mlx5-bench", len).map_err(|e| Mlx5Error::Queue(format!("buffer: {e}")))?;
    let region = buf.region();
    // SAFETY: `buf` outlives the MR (declared before it, dropped after).
    let mr = unsafe { pd.reg_host(region.base_addr() as *mut u8, len, RC_ACCESS)? };
    let (lkey, rkey) = mr.keys();
    let qp = RcQp::create(&ctx, &pd, 64, 64)?;
    say(&format!(
        "QP {:#x}: SQ {} WQEBBs x {} B at {:#x}, dbrec {:#x}, BlueFlame {:#x} ({} B); CQ {:#x}: {} x {} B",
        qp.dv.qpn,
        qp.dv.sq_wqe_cnt,
        qp.dv.sq_stride,
        qp.dv.sq_buf,
        qp.dv.dbrec,
        qp.dv.bf_reg,
        qp.dv.bf_size,
        qp.dv.cqn,
        qp.dv.cqe_cnt,
        qp.dv.cqe_size
    ));
    let psn = (std::process::id() ^ 0x5a5a) & marrow_mlx5::raw::qpc::NEXT_SEND_PSN_MASK; // layout-ok: a per-process first PSN
    let me = RcEndpoint {
        qpn: qp.dv.qpn,
        lid: ctx.port_attr.lid,
        gid: ctx.gid,
        psn,
        rkey,
        addr: region.base_addr() as u64,
        len: len as u64,
    };
    let timeout = Duration::from_secs(120);
    let group = match (&o.listen, &o.connect) {
        (Some(addr), None) => {
            let root = Root::bind(addr, o.id.clone())?;
            let host = hostname();
            say(&format!("rank 0 waiting; on the peer run: marrow bench mlx5 --connect {}", root.token(&host)));
            Group::root(root, 2)
        }
        (None, Some(token)) => Group::peer(token, 1, 2),
        // Under a launcher: MPI_Allgather under mpirun when libmpi loads,
        // else the TCP rendezvous at MARROW_BOOTSTRAP.
        (None, None) => {
            let g = Group::launched(|k| std::env::var(k).ok())?;
            if g.size() != 2 {
                return Err(Mlx5Error::Queue(format!(
                    "the launcher started {} ranks; marrow bench mlx5 runs exactly 2",
                    g.size()
                )));
            }
            say(&format!("rank {} of 2: endpoints exchanged by {}", g.rank(), g.via()));
            g
        }
        (Some(_), Some(_)) => {
            return Err(Mlx5Error::Queue("give --listen ADDR on rank 0 or --connect TOKEN on rank 1, not both".into()));
        }
    };
    let (rank, all) = (group.rank(), group.allgather(&me, timeout)?);
    let peer = all[1 - rank];
    qp.connect(&ctx.rc_params(), psn, &peer)?;
    // Both QPs in RTS before either posts: a request reaching a QP still in
    // INIT is dropped and costs the requester a retry timeout.
    group.barrier(timeout)?;
    say(&format!("rank {rank}: QP {:#x} RTS, connected to QP {:#x}", qp.dv.qpn, peer.qpn));
    let mut keys = [(0u64, 0u32); 2];
    keys[rank] = (me.addr, me.rkey);
    keys[1 - rank] = (peer.addr, peer.rkey);
    let setup = gcrb_setup(&qp.dv, Doorbell::Uar, (lkey, me.addr, me.len), keys, 2_000_000_000, false)?;
    let page = Shm::create("mlx5-gcrb", marrow_gcrb::GCRB_PAGE_SIZE as usize)
        .map_err(|e| Mlx5Error::Queue(format!("GCRB page: {e}")))?;
    gcrb_page::fill(&page.region(), &setup)?;
    let mut out = String::new();
    let mut figures = Vec::new();
    let half = len / 2;
    let n = o.size.clamp(8, (half / 2) as u32) as usize;
    let pattern = |i: usize| (i as u8).wrapping_mul(31).wrapping_add(7);
    const DONE: u64 = 0x4d41_5252_4f57_2121; // "MARROW!!"
    let flag_off = len - 8;
    if rank == 0 && o.gpu {
        let g = super::bench_gpu::GpuRank0 {
            dv: &qp.dv,
            buf: &region,
            page: &page.region(),
            local: (lkey, me.addr, me.len),
            keys,
            n,
            iters: u32::try_from(o.iters).unwrap_or(u32::MAX),
        };
        out.push_str(&super::bench_gpu::run(&g, say, &mut figures)?);
    }
    if rank == 0 {
        let d = Device::on_page(&page.region());
        d.check_config().map_err(|e| Mlx5Error::Queue(format!("GCRB: {e}")))?;
        let dev = |what: &str, e: crate::DeviceError| {
            Mlx5Error::Queue(format!("{what}: {e}\n{}", gcrb_page::report(&page.region())))
        };
        // Correctness: put a pattern into rank 1's upper half, quiet, read
        // it back with a get into our upper half, compare.
        for i in 0..n {
            region.write_u8(i, pattern(i))?;
        }
        d.put(1, half as u64, 0, n as u32).map_err(|e| dev("put", e))?;
        d.get(1, half as u64, half as u64, n as u32).map_err(|e| dev("get", e))?;
        let mut back = vec![0u8; n];
        region.read_bytes(half, &mut back)?;
        if let Some(i) = (0..n).find(|&i| back[i] != pattern(i)) {
            return Err(Mlx5Error::Queue(format!("byte {i} read back {:#04x}, put {:#04x}", back[i], pattern(i))));
        }
        let _ = writeln!(out, "put {n} B and read it back with a get: every byte matches");
        // Nanoseconds, three significant digits; it grows to any duration.
        let mut lat = hdrhistogram::Histogram::<u64>::new(3).map_err(|e| Mlx5Error::Queue(e.to_string()))?;
        for _ in 0..o.iters {
            let t = Instant::now();
            d.put(1, (half + n) as u64, 0, 8).map_err(|e| dev("put", e))?;
            lat.saturating_record(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
        }
        let pct = |p: f64| {
            let ns = if p >= 1.0 { lat.max() } else { lat.value_at_quantile(p) };
            std::time::Duration::from_nanos(if lat.is_empty() { 0 } else { ns })
        };
        let _ = writeln!(out, "8 B put+quiet x{}: p50 {:?} p99 {:?} max {:?}", o.iters, pct(0.5), pct(0.99), pct(1.0));
        for (what, p) in [("p50", 0.5), ("p99", 0.99), ("max", 1.0)] {
            figures.push(Figure {
                section: "CPU thread",
                name: format!("8 B put+quiet x{}: {what}", o.iters),
                value: pct(p).as_secs_f64() * 1e6,
                unit: "us",
            });
        }
        // Tell rank 1 we are done (after every put completed: quiet above).
        region.write_bytes(0, &DONE.to_le_bytes())?;
        d.put(1, flag_off as u64, 0, 8).map_err(|e| dev("done flag", e))?;
    } else {
        // Serve until rank 0's done flag lands, then check its pattern.
        let t0 = Instant::now();
        while u64::from_le_bytes(region.read_array::<8>(flag_off)?) != DONE {
            if t0.elapsed() > timeout {
                return Err(Mlx5Error::Queue(format!("rank 0's done flag never arrived in {timeout:?}")));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut got = vec![0u8; n];
        region.read_bytes(half, &mut got)?;
        match (0..n).find(|&i| got[i] != pattern(i)) {
            None => {
                let _ = writeln!(out, "rank 1: rank 0's {n}-byte put arrived intact");
            }
            Some(i) => {
                return Err(Mlx5Error::Queue(format!(
                    "rank 1: byte {i} is {:#04x}, expected {:#04x}",
                    got[i],
                    pattern(i)
                )));
            }
        }
    }
    drop(qp);
    drop(mr);
    Ok(Run { text: out, device: format!("{} port {}", ctx.name, ctx.port), figures })
}

fn gid_text(g: &[u8; 16]) -> String {
    g.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_else(|_| "HOST".into())
}
