//! Posting rates against the store floor (the same stores and fences into
//! the same send queue, no protocol), put bandwidth against cuMemcpy, and
//! the compute -> put loop against the CPU-initiated path.

use super::{Res, Rig, check, check_rc};
use crate::figure_report::Collect;
use crate::gpu_rows::{self, Posters};
use marrow_transport::gpu::{Grid, RwKernel};
use std::io::Write;
use std::time::{Duration, Instant};

/// Who posts with `grid` on `channels` channels: a thread, a warp, or more.
fn posters(grid: Grid, channels: usize) -> Posters {
    match grid.size() {
        1 => Posters::Thread,
        2..=32 => Posters::Warp,
        _ => Posters::WholeGpu { channels },
    }
}

/// (a) posting rate against the floor of the same stores and fences into
/// the same kind of memory, both timed on the GPU clock over the posting
/// loop alone; (d) put bandwidth against cuMemcpy.
///
/// The channels' mode (exclusive, lazy doorbells) is channel 0's, as its
/// GCRB page says.
pub(super) fn rates(r: &Rig, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
    let cfg = r.config()?;
    let (exclusive, lazy) = (cfg.exclusive(), cfg.lazy_nbi_doorbell());
    // The floor rings as often as the posts do: per post; lazy, per 32
    // WQEBBs, which for a warp posting together is every post of the group
    // (one warp instruction of the floor stores 32 WQEs).
    let ring_every = |g: Grid| if lazy && g.threads < 32 { 32 } else { 1 };
    let wqebbs = r.sq_wqebbs;
    // The floor's WQE stores go into channel 0's own send queue, the very
    // pages the posts write ("into the same memory"): where a host page
    // lies decides a fence's wait, and a fresh region for the floor alone
    // made its figure move by 10% between runs while the posts' did not.
    // Safe: the engine reads a slot only after a doorbell names it, the
    // floor rings none, and each run's posts rewrite their slots first.
    let base = cfg.sq_base();
    // Its doorbell record and doorbell are scratch words on the pages of
    // the real ones, which the engine would read: the word after the QP's
    // doorbell record (the record is 8 bytes of a 64-byte block the
    // softnic allocates) and the first word of its UAR page, whose
    // doorbell registers are the BlueFlame ones at MLX5_BF_OFFSET, the
    // only offsets the softnic reads. On a scratch page of its own the
    // floor's rate took one of two levels from run to run whatever the
    // posts' rate did; here the two move together (docs/PERFORMANCE.md).
    let (dbrec, db) = (cfg.dbrec_addr() + 8, cfg.db_addr() - u64::from(marrow_mlx5::raw::MLX5_BF_OFFSET));
    // The shared protocol's steps one at a time (an exclusive post has none of them).
    if !exclusive {
        let mut prof = [u64::MAX; 6];
        for _ in 0..3 {
            for (p, v) in prof.iter_mut().zip(r.gpu.post_profile(base, wqebbs, dbrec, db, 256)?) {
                *p = (*p).min(v);
            }
        }
        writeln!(
            o,
            "  post profile, 1 thread, ns per post: floor {}; + atomic add {}; + ready chain (relaxed store) {}; store a release {}; + snapshots {}; release before the doorbell record instead {}",
            prof[0], prof[1], prof[2], prof[3], prof[4], prof[5]
        )?;
        gpu_rows::post_profile(prof).into_iter().for_each(|x| c.add(x));
    }
    let one = [r.page(0)];
    let all: Vec<u64> = std::iter::once(r.page(0)).chain(r.more.iter().map(|g| g.addr)).collect();
    let many = format!("whole GPU, {} channels (warp w on channel w mod {})", all.len(), all.len());
    let mut runs = vec![
        ("1 thread", Grid::ONE, false, 1024u32, &one[..]),
        ("1 warp", Grid { blocks: 1, threads: 32 }, false, 256, &one[..]),
        ("1 warp, put_nbi_warp", Grid { blocks: 1, threads: 32 }, true, 256, &one[..]),
    ];
    // An exclusive channel has one owner: the whole GPU shares channels.
    if !exclusive {
        runs.push(("whole GPU 132 x 128", Grid { blocks: 132, threads: 128 }, false, 1, &one[..]));
        runs.push(("whole GPU, put_nbi_warp", Grid { blocks: 132, threads: 128 }, true, 1, &one[..]));
    }
    if all.len() > 1 {
        runs.push((many.as_str(), Grid { blocks: 132, threads: 128 }, false, 1, &all[..]));
    }
    for (label, grid, warp, iters, pages) in runs {
        let target = gpu_rows::posting_target(exclusive, lazy, posters(grid, pages.len()), warp);
        let puts = grid.size() as u64 * u64::from(iters);
        if puts > u64::from(wqebbs) {
            return check(format!("rate run {label}: {puts} puts exceed the {wqebbs}-WQEBB send queue"));
        }
        // Best of 9 each, interleaved, so both see the same machine state:
        // single runs of either move by 5-10% between runs of the command.
        let (mut best, mut floor_best) = (u64::MAX, u64::MAX);
        // The floor walks the ring from run to run as the posts do.
        for trial in 0..9u64 {
            let (rc, ns) = r.gpu.post_rate(pages, 1, iters, warp, grid)?;
            check_rc(r, "post rate", &rc)?;
            best = best.min(ns.max(1));
            let first = (trial * puts % u64::from(wqebbs)) as u32;
            floor_best = floor_best
                .min(r.gpu.store_floor(base, wqebbs, first, dbrec, db, iters, ring_every(grid), grid)?.max(1));
        }
        let rate = puts as f64 / (best as f64 / 1e9);
        let floor = puts as f64 / (floor_best as f64 / 1e9);
        let rings = if ring_every(grid) > 1 {
            ", fences and doorbell once per 32 WQEs as a lone lazy poster rings"
        } else {
            ""
        };
        writeln!(
            o,
            "  (a) 8 B put_nbi posting, {} channel, {label}: {rate:.3e} puts/s; floor (the same stores and fences, the WQEs into the same send queue{}, no protocol) {floor:.3e} /s; ratio {:.3} (target {})",
            if exclusive { "exclusive" } else { "shared" },
            rings,
            rate / floor,
            target.text()
        )?;
        c.add(gpu_rows::posting(exclusive, label, rings, rate, floor, target));
    }
    let (a, b) = (r.world.bufs[0], r.world.bufs[1]);
    for len in [64usize << 10, 1 << 20, 16 << 20, 64 << 20] {
        let iters = ((64usize << 20) / len).min(64) as u32;
        let t = Instant::now();
        let rc = r.gpu.rw(RwKernel::Put, r.page(0), 1, len as u32, iters, Grid::ONE)?;
        let dt = t.elapsed();
        check_rc(r, "put bandwidth", &rc)?;
        let bw = (len * iters as usize) as f64 / dt.as_secs_f64();
        let mut best = Duration::MAX;
        for _ in 0..3 {
            best = best.min(r.gpu.memcpy(&b, &a, len * iters as usize)?);
        }
        let floor = (len * iters as usize) as f64 / best.as_secs_f64();
        writeln!(
            o,
            "  (d) put {:>6} KiB x {iters:>2}: {:.2} GB/s; cuMemcpy host->host of the same bytes {:.2} GB/s; ratio {:.2}",
            len >> 10,
            bw / 1e9,
            floor / 1e9,
            bw / floor
        )?;
        c.add(gpu_rows::put_bandwidth(len, iters, bw, floor));
    }
    Ok(())
}

/// (c) compute -> put -> compute: one GPU kernel that computes and puts,
/// against the CPU-initiated loop (kernel ends, the host posts the put
/// through the same device code on CPU threads, the next kernel starts).
pub(super) fn loop_bench(r: &Rig, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
    for work in [100u32, 1000] {
        loop_once(r, o, c, work)?;
    }
    Ok(())
}

fn loop_once(r: &Rig, o: &mut dyn Write, c: &mut Collect, work: u32) -> Res<()> {
    let iters = 500u32;
    let (rc, ns) = r.gpu.compute_put(r.page(0), 1, iters, work)?;
    check_rc(r, "compute_put", &[rc])?;
    let per = |x: u64| x as f64 / iters as f64;
    let gpu_iter = per(ns[0]);
    // CPU-initiated, on PE 1's channel (its GCRB in host memory) to PE 0:
    // the kernel leaves its result in PE 1's buffer, as the GPU-initiated
    // kernel does in PE 0's, and the host puts it from there.
    let dev = marrow_transport::cpu::Device::new(&r.world.channels[1]);
    let local = r.world.bufs[1].base_addr() as u64;
    let t = Instant::now();
    for i in 0..iters as u64 {
        let off = (i % 1024) * 8;
        r.gpu.compute_once(work, local + off)?;
        dev.put_nbi(0, off, off, 8).map_err(|x| format!("CPU put: {x}\n{}", r.world.channels[1].report()))?;
    }
    dev.quiet().map_err(|x| format!("CPU quiet: {x}\n{}", r.world.channels[1].report()))?;
    let cpu_iter = t.elapsed().as_nanos() as f64 / iters as f64;
    writeln!(
        o,
        "  (c) compute({work}) -> 8 B put_nbi, per round, quiet at the end: GPU-initiated {:.2} us (compute {:.2}, result store and post {:.2}), CPU-initiated (kernel ends, host posts, next launch) {:.2} us; CPU/GPU {:.2} (target >= 8)",
        gpu_iter / 1e3,
        per(ns[1]) / 1e3,
        per(ns[2]) / 1e3,
        cpu_iter / 1e3,
        cpu_iter / gpu_iter
    )?;
    gpu_rows::compute_loop(work, gpu_iter, cpu_iter, per(ns[1]), per(ns[2])).into_iter().for_each(|x| c.add(x));
    Ok(())
}
