//! `marrow demo --gpu`: GPU threads run the device code (put, get, atomics)
//! against the softnic, whose rings, doorbells and CQs are host memory mapped
//! into the GPU. Every byte and every fetched value is checked on the CPU;
//! injected faults come back as errors with the GCRB decoded; latency and
//! bandwidth are reported against floors measured in the same run.

use crate::error::BenchError;
use crate::figure_report::{Collect, FigureReport};
use crate::gpu_rows;
use crate::latency::Latency;
use crate::placement;
use marrow_softnic::Faults;
use marrow_transport::gpu::{DeviceGcrb, Gpu, Grid, PingPongRing, RwKernel};
use marrow_transport::{DeviceError, World, WorldConfig};
use std::io::Write;
use std::time::{Duration, Instant};

type Res<T> = Result<T, BenchError>;

/// One register trace record as a line of text, for the fault checks' traces.
pub type RenderRecord<'a> = &'a dyn Fn(usize, &marrow_softnic::trace::Record) -> String;

/// A failed check, said in words.
fn check<T>(msg: String) -> Res<T> {
    Err(BenchError::Check(msg))
}

/// CQ entries for a 1024-WQEBB send queue. The softnic, like hardware,
/// checks for overflow against the consumer index in the CQ doorbell
/// record, which GPU threads update with stores that reach host memory
/// later than their own view of it: with a CQ no deeper than the send
/// queue, that lag alone can look like an overflow (seen on the H200 with
/// 132 x 128 threads). NVSHMEM sidesteps it with collapsed, overrun-ignoring
/// CQs; here the CQ is 4 times deeper.
const CQ_DEPTH: u32 = 4096;

struct Rig<'g> {
    gpu: &'g Gpu,
    world: World,
    /// PE 0's GCRB, in GPU memory.
    gcrb: DeviceGcrb,
    /// PE 0's extra channels' GCRBs, in GPU memory.
    more: Vec<DeviceGcrb>,
    registered: Vec<marrow_driver::Region>,
    /// Send queue depth of every channel.
    sq_wqebbs: u32,
}

fn rig(gpu: &Gpu, cfg: WorldConfig) -> Res<Rig<'_>> {
    rig_on(gpu, World::new(cfg)?, cfg.sq_wqebbs)
}

/// The rig of a world already built (its channels of `sq_wqebbs` WQEBBs).
fn rig_on(gpu: &Gpu, world: World, sq_wqebbs: u32) -> Res<Rig<'_>> {
    // A GPU round trip is microseconds: keep the engines spinning meanwhile.
    world.nic.set_idle_spin(Duration::from_secs(1));
    if let Some(n) = &world.nic_b {
        n.set_idle_spin(Duration::from_secs(1));
    }
    let registered = world.shared_regions();
    for r in &registered {
        gpu.register(r)?;
    }
    let gcrb = gpu.upload(&world.channels[0].page())?;
    let more = world.more.iter().map(|c| gpu.upload(&c.page()).map_err(BenchError::from)).collect::<Res<Vec<_>>>()?;
    Ok(Rig { gpu, world, gcrb, more, registered, sq_wqebbs })
}

impl Drop for Rig<'_> {
    fn drop(&mut self) {
        // The memory is unmapped next: unregister it first, so a later
        // mapping at the same address can be registered.
        let _ = self.gpu.stream.synchronize();
        for r in &self.registered {
            let _ = self.gpu.unregister(r);
        }
    }
}

impl Rig<'_> {
    fn page(&self, pe: usize) -> u64 {
        assert_eq!(pe, 0, "the demo drives PE 0's channel");
        self.gcrb.addr
    }

    /// Run an rw kernel from PE 0 to PE 1; the rc of every thread.
    fn launch_rw(&self, k: RwKernel, grid: u32, block: u32, len: u32, iters: u32) -> Res<Vec<i32>> {
        self.gpu.rw(k, self.page(0), 1, len, iters, Grid { blocks: grid, threads: block }).map_err(BenchError::from)
    }

    /// The GCRB, copied back from the GPU and decoded.
    fn report(&self) -> String {
        match self.gpu.download(&self.gcrb, &self.world.channels[0].page()) {
            Ok(()) => self.world.channels[0].report(),
            Err(err) => format!("(GCRB not readable: {err})"),
        }
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2654435761) ^ seed) as u8).collect()
}

fn check_rc(r: &Rig, what: &str, rc: &[i32]) -> Res<()> {
    if let Some((i, c)) = rc.iter().enumerate().find(|(_, c)| **c != 0) {
        return check(format!("{what}: thread {i} returned {} ({})\n{}", c, DeviceError(*c), r.report()));
    }
    Ok(())
}

fn puts(r: &Rig, o: &mut dyn Write) -> Res<()> {
    let (a, b) = (r.world.bufs[0], r.world.bufs[1]);
    for len in [8usize, 4096, 65536, 1 << 20, 64 << 20] {
        let data = pattern(len, len as u64);
        a.write_bytes(0, &data)?;
        b.fill(0, len, 0)?;
        let t = Instant::now();
        let rc = r.launch_rw(RwKernel::Put, 1, 1, len as u32, 1)?;
        let dt = t.elapsed();
        check_rc(r, "put", &rc)?;
        let mut got = vec![0u8; len];
        b.read_bytes(0, &mut got)?;
        if got != data {
            let at = got.iter().zip(&data).position(|(x, y)| x != y).unwrap_or(0);
            return check(format!("put of {len} B: byte {at} differs"));
        }
        writeln!(
            o,
            "  put {:>9} B from 1 thread: every byte checked ({:.1} ms launch to sync)",
            len,
            dt.as_secs_f64() * 1e3
        )?;
    }
    for (grid, block, kernel) in [
        (1u32, 1u32, RwKernel::Put),
        (1, 32, RwKernel::Put),
        (8, 128, RwKernel::Put),
        (132, 128, RwKernel::Put),
        (132, 128, RwKernel::PutWarp),
        // Partial warps: the lanes that call together post as one group.
        (1, 20, RwKernel::Put),
        (3, 50, RwKernel::Put),
    ] {
        let (len, iters) = (64u32, 2u32);
        let total = (grid * block * iters * len) as usize;
        let data = pattern(total, grid as u64 * 7 + block as u64);
        a.write_bytes(0, &data)?;
        b.fill(0, total, 0)?;
        let t = Instant::now();
        let rc = r.launch_rw(kernel, grid, block, len, iters)?;
        let dt = t.elapsed();
        let kernel = kernel.name();
        check_rc(r, kernel, &rc)?;
        let mut got = vec![0u8; total];
        b.read_bytes(0, &mut got)?;
        if got != data {
            return check(format!("{kernel} {grid}x{block}: bytes differ"));
        }
        let wqes = grid * block * iters;
        writeln!(
            o,
            "  {kernel:<24} grid {grid:>3} x {block:>3}: {wqes:>6} puts of {len} B, every byte checked, {:.0} puts/s",
            wqes as f64 / dt.as_secs_f64()
        )?;
    }
    Ok(())
}

fn gets(r: &Rig, o: &mut dyn Write) -> Res<()> {
    let (a, b) = (r.world.bufs[0], r.world.bufs[1]);
    for len in [8usize, 4096, 1 << 20, 64 << 20] {
        let data = pattern(len, 99 + len as u64);
        b.write_bytes(0, &data)?;
        a.fill(0, len, 0)?;
        let rc = r.launch_rw(RwKernel::Get, 1, 1, len as u32, 1)?;
        check_rc(r, "get", &rc)?;
        let mut got = vec![0u8; len];
        a.read_bytes(0, &mut got)?;
        if got != data {
            return check(format!("get of {len} B: bytes differ"));
        }
        writeln!(o, "  get {:>9} B from 1 thread: every byte checked", len)?;
    }
    let (len, iters, grid, block) = (256u32, 2u32, 132u32, 64u32);
    let total = (grid * block * iters * len) as usize;
    let data = pattern(total, 5);
    b.write_bytes(0, &data)?;
    a.fill(0, total, 0)?;
    let rc = r.launch_rw(RwKernel::Get, grid, block, len, iters)?;
    check_rc(r, "get grid", &rc)?;
    let mut got = vec![0u8; total];
    a.read_bytes(0, &mut got)?;
    if got != data {
        return Err("grid gets: bytes differ".into());
    }
    writeln!(o, "  get grid {grid} x {block}: {} gets of {len} B, every byte checked", grid * block * iters)?;
    Ok(())
}

fn atomics(r: &Rig, o: &mut dyn Write) -> Res<()> {
    let b = r.world.bufs[1];
    let (grid, block, iters) = (66u32, 64u32, 2u32);
    let n = (grid * block * iters) as usize;
    let roff = 1u64 << 20;
    b.write_bytes(roff as usize, &0u64.to_ne_bytes())?;
    let (page, pe, result_base) = (r.page(0), 1u32, 2u64 << 20);
    let (rc, mut olds) = r.gpu.fetch_add(page, pe, roff, iters, result_base, Grid { blocks: grid, threads: block })?;
    check_rc(r, "fetch_add", &rc)?;
    olds.sort_unstable();
    if olds != (0..n as u64).collect::<Vec<_>>() {
        return Err("fetch_add: the fetched values are not 0..n, each once".into());
    }
    let mut v = [0u8; 8];
    b.read_bytes(roff as usize, &mut v)?;
    if u64::from_ne_bytes(v) != n as u64 {
        return check(format!("fetch_add: final value {} != {n}", u64::from_ne_bytes(v)));
    }
    writeln!(o, "  fetch_add grid {grid} x {block} x {iters}: every fetched value 0..{n} exactly once, final {n}")?;

    for (compare, expect_swap) in [(7u64, false), (n as u64, true)] {
        let (swap, loff) = (0xabcdu64, 3u64 << 20);
        let (rc, old) = r.gpu.compare_swap(page, pe, roff, compare, swap, loff)?;
        check_rc(r, "compare_swap", &[rc])?;
        b.read_bytes(roff as usize, &mut v)?;
        let now = u64::from_ne_bytes(v);
        let want = if expect_swap { swap } else { n as u64 };
        if old != n as u64 || now != want {
            return check(format!("compare_swap(compare {compare}): old {old}, memory {now}"));
        }
    }
    writeln!(o, "  compare_swap: a failed compare leaves memory, a hit swaps; old values as computed")?;
    Ok(())
}

/// Where a blocking put's time goes, from the device trace (GPU clock) of a
/// channel with `flags.trace` on: the last puts' POST -> DOORBELL -> CQE ->
/// next POST gaps. Tracing costs time itself, so the latency figure comes
/// from an untraced channel (`latency`). `flags` gives the channel's kind
/// (exclusive, early doorbells); sizes, timeout and tracing are set here.
fn latency_breakdown(gpu: &Gpu, o: &mut dyn Write, c: &mut Collect, flags: WorldConfig) -> Res<()> {
    let exclusive = flags.exclusive;
    let cfg = WorldConfig {
        buf_len: 1 << 20,
        sq_wqebbs: 1024,
        ncqe: CQ_DEPTH,
        timeout: Duration::from_secs(10),
        trace: true,
        ..flags
    };
    let r = rig(gpu, cfg)?;
    let iters = 200u32;
    let timed = r.gpu.put_latency(r.page(0), 1, iters)?;
    check_rc(&r, "put latency (traced)", &[timed.rc])?;
    r.gpu.download(&r.gcrb, &r.world.channels[0].page())?;
    let t = marrow_transport::gcrb_page::trace(&r.world.channels[0].page());
    let (mut sums, mut n) = ([0u64; 3], 0u64);
    for w in t.windows(4) {
        if w[0].event() == 1 && w[1].event() == 2 && w[2].event() == 3 && w[3].event() == 1 {
            sums[0] += w[1].t_ns() - w[0].t_ns();
            sums[1] += w[2].t_ns() - w[1].t_ns();
            sums[2] += w[3].t_ns() - w[2].t_ns();
            n += 1;
        }
    }
    if n == 0 {
        return Err("the traced channel recorded no POST -> DOORBELL -> CQE -> POST sequence".into());
    }
    let mean = |x: u64| x as f64 / n as f64 / 1e3;
    writeln!(
        o,
        "  traced {} channel{}: {:.2} us per put; per put (mean of the last {n} in the device trace): WQE written -> doorbell rung {:.2} us, doorbell -> CQE consumed {:.2} us, CQE -> next WQE written {:.2} us",
        if exclusive { "exclusive" } else { "shared" },
        if flags.early_doorbell { ", early doorbells (the trace's doorbell is the second ring)" } else { "" },
        timed.total_ns as f64 / iters as f64 / 1e3,
        mean(sums[0]),
        mean(sums[1]),
        mean(sums[2])
    )?;
    let steps = [mean(sums[0]), mean(sums[1]), mean(sums[2])];
    gpu_rows::breakdown(exclusive, timed.total_ns as f64 / iters as f64 / 1e3, n, steps)
        .into_iter()
        .for_each(|x| c.add(x));
    Ok(())
}

/// Channel 0's CQ ring (`cq_base`, `cq_ncqe` 64-byte slots), in the host
/// memory registered with the GPU.
fn cq_ring(r: &Rig) -> Res<marrow_driver::Region> {
    let cfg =
        marrow_transport::gcrb_page::config(&r.world.channels[0].page()).ok_or("channel 0's GCRB has no config")?;
    let (base, len) = (cfg.cq_base() as usize, cfg.cq_ncqe() as usize * 64);
    let holder = r
        .registered
        .iter()
        .find(|m| m.base_addr() <= base && base + len <= m.base_addr() + m.len())
        .ok_or_else(|| format!("channel 0's CQ ring {base:#x}+{len:#x} is in no registered region"))?;
    Ok(holder.sub(base - holder.base_addr(), len)?)
}

/// The slot of channel 0's CQ ring that its next CQE lands in: the GCRB's
/// CQ consumer count, copied back from the GPU, modulo the ring's `slots`.
fn cq_slot(r: &Rig, slots: u32) -> Res<u32> {
    let page = r.world.channels[0].page();
    r.gpu.download(&r.gcrb, &page)?;
    let heads = marrow_transport::gcrb_page::heads(&page).ok_or("channel 0's GCRB has no heads")?;
    Ok((heads.cq_ci() % u64::from(slots)) as u32)
}

/// The 10th, 50th, 90th and 99th percentiles of `ns`, in microseconds.
fn quantiles_us(ns: &[u64]) -> [f64; 4] {
    let mut l = Latency::new();
    ns.iter().for_each(|&v| l.record(Duration::from_nanos(v)));
    [0.1, 0.5, 0.9, 0.99].map(|q| l.quantile_us(q))
}

fn fmt_quantiles(q: [f64; 4]) -> String {
    q.map(|v| format!("{v:.2}")).join(" / ")
}

/// A ping-pong floor: the faster flavour's best run, each flavour's best
/// mean, and where the answering thread ran, first and last.
struct Floor {
    ns: f64,
    flavours: [f64; 2],
    each: Vec<u64>,
    answered_on: (Option<usize>, Option<usize>),
}

/// Ping-pong with a CPU thread through host memory: the GPU writes i (1 to
/// `iters`) to `ping`, a page of its own as the doorbell is; the CPU
/// answers i in slot (`first` + i) % `walk` of the 64-byte slots of
/// `pong`. Both flavours (release/acquire, plain), best of 3 each. The
/// slots are zeroed before each run: a slot still holding its value from
/// the run before would answer before the CPU did.
fn pingpong_floor(
    r: &Rig,
    ping: &marrow_driver::Region,
    pong: &marrow_driver::Region,
    first: u32,
    iters: u32,
) -> Res<Floor> {
    let walk = u32::try_from(pong.len() / 64).map_err(|_| "the pong ring is too long to walk")?;
    if walk == 0 {
        return Err("the pong ring has no 64-byte slot".into());
    }
    let ping_word = ping.atomic_u64(0)?;
    let slot = |v: u64| pong.atomic_u64(((u64::from(first) + v) % u64::from(walk)) as usize * 64);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut flavours, mut each) = ([f64::MAX; 2], [Vec::new(), Vec::new()]);
    let mut answered_on = (None, None);
    std::thread::scope(|s| -> Res<()> {
        let responder = s.spawn(|| {
            let first_cpu = placement::current_cpu();
            let mut last = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let v = ping_word.load(std::sync::atomic::Ordering::Acquire);
                if v != last {
                    if let Ok(w) = slot(v) {
                        w.store(v, std::sync::atomic::Ordering::Release);
                    }
                    last = v;
                }
                std::hint::spin_loop();
            }
            (first_cpu, placement::current_cpu())
        });
        let (pp, pg, to) = (ping.base_addr() as u64, pong.base_addr() as u64, 5_000_000_000u64);
        // Each run counts from 1 again and the CPU thread answers any
        // change of the ping, so runs chain; it is idle between them (it
        // answered the last ping of the run before).
        let mut run = || -> Res<()> {
            for round in 0..6 {
                let lean = usize::from(round % 2 == 1);
                pong.fill(0, pong.len(), 0)?;
                let timed = r.gpu.pingpong(PingPongRing { ping: pp, pong: pg, walk, first }, iters, to, lean == 1)?;
                if timed.rc != 0 {
                    return Err("ping-pong floor timed out".into());
                }
                let mean = timed.total_ns as f64 / iters as f64;
                if mean < flavours[lean] {
                    (flavours[lean], each[lean]) = (mean, timed.each_ns);
                }
            }
            Ok(())
        };
        let res = run();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        answered_on = responder.join().map_err(|_| "the ping-pong responder panicked")?;
        res
    })?;
    let faster = usize::from(flavours[1] < flavours[0]);
    Ok(Floor { ns: flavours[faster], flavours, each: std::mem::take(&mut each[faster]), answered_on })
}

/// 8-byte blocking put latency against a GPU<->CPU ping-pong through host
/// memory, the pong walking a CQ-sized ring of its own. A GPU read of host
/// memory takes longer on some pages than on others, each page keeping its
/// level (scripts/gpu_probe/pingpong_pages.cu, figures in
/// docs/PERFORMANCE.md), so a floor on one line would be one page's draw,
/// while the puts read their CQEs from dozens of pages. A second floor
/// walks the very CQ slots the best run of puts read, for comparison.
fn latency(r: &Rig, o: &mut dyn Write, c: &mut Collect) -> Res<(f64, f64)> {
    let cq = cq_ring(r)?;
    let slots = u32::try_from(cq.len() / 64).map_err(|_| "the CQ ring is too long to walk")?;
    let iters = 2000u32;
    let (mut put_ns, mut put_each, mut put_first) = (f64::MAX, Vec::new(), 0);
    for _ in 0..3 {
        let first = cq_slot(r, slots)?;
        let timed = r.gpu.put_latency(r.page(0), 1, iters)?;
        check_rc(r, "put latency", &[timed.rc])?;
        let mean = timed.total_ns as f64 / iters as f64;
        if mean < put_ns {
            (put_ns, put_each, put_first) = (mean, timed.each_ns, first);
        }
    }

    const PONG: usize = 4096;
    let shm = marrow_softnic::Shm::create("pingpong", PONG + CQ_DEPTH as usize * 64)?;
    let region = shm.region();
    r.gpu.register(&region)?;
    let _unregister = Unregister(r.gpu, region);
    let (ping, ring) = (region.sub(0, PONG)?, region.sub(PONG, CQ_DEPTH as usize * 64)?);
    let floor = pingpong_floor(r, &ping, &ring, 0, iters)?;
    // The put's own CQ slots: ping i answered where put i found its CQE.
    // The channel is idle; the ring's bytes go back as they were.
    let mut cqes = vec![0u8; cq.len()];
    cq.read_bytes(0, &mut cqes)?;
    let on_cq = pingpong_floor(r, &ping, &cq, (put_first + slots - 1) % slots, iters);
    cq.write_bytes(0, &cqes)?;
    let on_cq = on_cq?;

    let engines = placement::threads_named("softnic-engine")
        .into_iter()
        .map(|(_, cpu)| placement::describe(Some(cpu)))
        .collect::<Vec<_>>()
        .join(", ");
    let moved = if floor.answered_on.0 != floor.answered_on.1 {
        format!(", then {}", placement::describe(floor.answered_on.1))
    } else {
        String::new()
    };
    writeln!(
        o,
        "  8 B blocking put + completion: {:.2} us; GPU<->CPU ping-pong floor (the pong walking a CQ-sized ring) {:.2} us (release/acquire {:.2}, plain {:.2}); ratio {:.2} (target <= 1.3); ping answered on {}{moved}; engine threads last on {}",
        put_ns / 1e3,
        floor.ns / 1e3,
        floor.flavours[0] / 1e3,
        floor.flavours[1] / 1e3,
        put_ns / floor.ns,
        placement::describe(floor.answered_on.0),
        if engines.is_empty() { "none found".to_string() } else { engines },
    )?;
    // The means hide how they are made: a round trip whose first read of
    // host memory left before the answer was written pays a whole read
    // round trip more.
    let (put_q, floor_q, cq_q) = (quantiles_us(&put_each), quantiles_us(&floor.each), quantiles_us(&on_cq.each));
    writeln!(
        o,
        "    each of the best runs' {iters}, p10 / p50 / p90 / p99: put {}; floor {}; floor on the put's own CQ slots {} us (mean {:.2}: ratio {:.2})",
        fmt_quantiles(put_q),
        fmt_quantiles(floor_q),
        fmt_quantiles(cq_q),
        on_cq.ns / 1e3,
        put_ns / on_cq.ns
    )?;
    gpu_rows::blocking_put(put_ns, floor.flavours, put_q[1], floor_q[1]).into_iter().for_each(|x| c.add(x));
    c.add(gpu_rows::floor_on_cq(put_ns, on_cq.ns));
    Ok((put_ns, floor.ns))
}

/// Unregisters a region when dropped.
struct Unregister<'g>(&'g Gpu, marrow_driver::Region);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        let _ = self.0.unregister(&self.1);
    }
}

/// (a) posting rate against the floor of the same stores and fences into
/// the same kind of memory, both timed on the GPU clock over the posting
/// loop alone; (d) put bandwidth against cuMemcpy.
fn rates(r: &Rig, o: &mut dyn Write, c: &mut Collect, exclusive: bool, lazy: bool) -> Res<()> {
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
    let cfg = marrow_transport::gcrb_page::config(&r.world.channels[0].page())
        .ok_or("channel 0's GCRB config is unreadable")?;
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
            "  (a) 8 B put_nbi posting, {} channel, {label}: {rate:.3e} puts/s; floor (the same stores and fences, the WQEs into the same send queue{}, no protocol) {floor:.3e} /s; ratio {:.3} (target >= 0.8)",
            if exclusive { "exclusive" } else { "shared" },
            rings,
            rate / floor
        )?;
        c.add(gpu_rows::posting(exclusive, label, rings, rate, floor));
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
fn loop_bench(r: &Rig, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
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

fn faults(gpu: &Gpu, o: &mut dyn Write, exclusive: bool, render: RenderRecord) -> Res<()> {
    let cases: [(&str, Faults); 4] = [
        ("dropped doorbell", Faults { drop_doorbells: 1, ..Faults::default() }),
        (
            "error CQE (REMOTE_ACCESS_ERR injected on WQE 0)",
            Faults { fail_wqe: Some((0, marrow_mlx5::raw::Syndrome::REMOTE_ACCESS_ERR, 0x88)), ..Faults::default() },
        ),
        ("stalled engine", Faults { stall: true, ..Faults::default() }),
        ("CQ overflow", Faults { overflow_cq: true, ..Faults::default() }),
    ];
    for (what, fault) in cases {
        let cfg = WorldConfig {
            buf_len: 1 << 20,
            sq_wqebbs: 64,
            ncqe: 64,
            timeout: Duration::from_millis(200),
            exclusive,
            // One ring per post where a doorbell is dropped: an early
            // doorbell's repeat would cover it (early_doorbell_covers_a_drop).
            early_doorbell: fault.drop_doorbells == 0,
            ..WorldConfig::default()
        };
        let r = rig(gpu, cfg)?;
        r.world.nic.enable_trace(1 << 20);
        r.world.set_faults(0, fault)?;
        let rc = r.launch_rw(RwKernel::Put, 1, 1, 8, 1)?;
        if rc[0] == 0 {
            return check(format!("{what}: the kernel reported success"));
        }
        writeln!(o, "  {what}: kernel returned {} ({}); host decoded:", rc[0], DeviceError(rc[0]))?;
        for line in r.report().lines() {
            writeln!(o, "      {line}")?;
        }
        // And what the NIC saw: the softnic's register trace, decoded.
        softnic_trace(&r, o, render)?;
    }
    Ok(())
}

/// The softnic's register trace of `r`, decoded, one line a record.
fn softnic_trace(r: &Rig, o: &mut dyn Write, render: RenderRecord) -> Res<()> {
    let (recs, _) = marrow_softnic::trace::parse(&r.world.nic.trace_bytes().unwrap_or_default());
    writeln!(o, "      softnic register trace ({} records):", recs.len())?;
    for (i, rec) in recs.iter().enumerate() {
        let line = render(i, rec);
        writeln!(o, "        {}", line.lines().next().unwrap_or(""))?;
    }
    Ok(())
}

/// DOCA's reason for ringing twice: a NIC that misses the early doorbell
/// gets the second. The softnic drops the first doorbell it finds. An
/// engine that scans between the two rings (a fence apart) finds two, and
/// the put completes; one that sleeps through both (an idle engine sleeps
/// 50 us, as on the H200 runs so far) finds one in the register, drops it,
/// and the put ends in a decoded timeout. A NIC's UAR would see two writes
/// either way. Both outcomes are right; anything else is an error.
fn early_doorbell_covers_a_drop(gpu: &Gpu, o: &mut dyn Write, render: RenderRecord) -> Res<()> {
    let cfg = WorldConfig {
        buf_len: 1 << 20,
        sq_wqebbs: 64,
        ncqe: 64,
        timeout: Duration::from_millis(200),
        exclusive: true,
        early_doorbell: true,
        ..WorldConfig::default()
    };
    let r = rig(gpu, cfg)?;
    r.world.nic.enable_trace(1 << 20);
    r.world.set_faults(0, Faults { drop_doorbells: 1, ..Faults::default() })?;
    let (a, b) = (r.world.bufs[0], r.world.bufs[1]);
    let data = pattern(8, 0xEA);
    a.write_bytes(0, &data)?;
    b.fill(0, 8, 0)?;
    let rc = r.launch_rw(RwKernel::Put, 1, 1, 8, 1)?;
    match rc[0] {
        0 => {
            let mut got = [0u8; 8];
            b.read_bytes(0, &mut got)?;
            if got[..] != data[..] {
                return check(format!(
                    "early doorbell with the first dropped: the put completed but PE 1 holds {got:02x?}, not {data:02x?}"
                ));
            }
            writeln!(
                o,
                "  first doorbell dropped: the second ring carried the put, which completed; the 8 bytes checked"
            )?;
        }
        -110 => {
            writeln!(
                o,
                "  first doorbell dropped: the engine found one doorbell (both rings landed between two of its scans; an idle engine sleeps 50 us) and dropped it; host decoded:"
            )?;
            for line in r.report().lines() {
                writeln!(o, "      {line}")?;
            }
        }
        other => {
            return check(format!(
                "early doorbell with the first dropped: kernel returned {other} ({})\n{}",
                DeviceError(other),
                r.report()
            ));
        }
    }
    softnic_trace(&r, o, render)
}

/// Data buffers in GPU memory: the softnic reaches them through the GPU's
/// copy engine (a NIC would DMA them peer to peer).
fn gpu_memory(gpu: &Gpu, o: &mut dyn Write) -> Res<()> {
    use marrow_softnic::DeviceMemory;
    use std::sync::Arc;
    let len = 16usize << 20;
    let b0 = Arc::new(gpu.buffer(len)?);
    let b1 = Arc::new(gpu.buffer(len)?);
    let cfg = WorldConfig {
        buf_len: 4096,
        sq_wqebbs: 1024,
        ncqe: CQ_DEPTH,
        timeout: Duration::from_secs(10),
        ..WorldConfig::default()
    };
    let world =
        World::with_device_buffers(cfg, [(b0.clone() as Arc<dyn DeviceMemory>, b0.addr), (b1.clone(), b1.addr)])?;
    world.nic.set_idle_spin(Duration::from_secs(1));
    let registered = world.shared_regions();
    for reg in &registered {
        gpu.register(reg)?;
    }
    let gcrb = gpu.upload(&world.channels[0].page())?;
    let r = Rig { gpu, world, gcrb, more: Vec::new(), registered, sq_wqebbs: cfg.sq_wqebbs };
    for size in [8usize, 4096, 1 << 20, 16 << 20] {
        let data = pattern(size, 77 + size as u64);
        b0.write(0, &data)?;
        b1.write(0, &vec![0u8; size])?;
        let rc = r.launch_rw(RwKernel::Put, 1, 1, size as u32, 1)?;
        check_rc(&r, "put between GPU buffers", &rc)?;
        let mut got = vec![0u8; size];
        b1.read(0, &mut got)?;
        if got != data {
            return check(format!("put of {size} B between GPU buffers: bytes differ"));
        }
        let back = pattern(size, 5 + size as u64);
        b1.write(0, &back)?;
        let rc = r.launch_rw(RwKernel::Get, 1, 1, size as u32, 1)?;
        check_rc(&r, "get between GPU buffers", &rc)?;
        b0.read(0, &mut got)?;
        if got != back {
            return check(format!("get of {size} B between GPU buffers: bytes differ"));
        }
        writeln!(o, "  put and get of {size:>8} B between GPU-memory buffers: every byte checked")?;
    }
    let (grid, block, plen, iters) = (8u32, 128u32, 64u32, 2u32);
    let total = (grid * block * iters * plen) as usize;
    let data = pattern(total, 3);
    b0.write(0, &data)?;
    b1.write(0, &vec![0u8; total])?;
    let rc = r.launch_rw(RwKernel::Put, grid, block, plen, iters)?;
    check_rc(&r, "grid put between GPU buffers", &rc)?;
    let mut got = vec![0u8; total];
    b1.read(0, &mut got)?;
    if got != data {
        return Err("grid puts between GPU buffers: bytes differ".into());
    }
    writeln!(
        o,
        "  grid {grid} x {block}: {} puts of {plen} B between GPU-memory buffers, every byte checked",
        grid * block * iters
    )?;
    Ok(())
}

/// An exclusive channel: one thread puts and gets every size, one warp
/// posts together (put_nbi_warp), one thread's fetch-and-adds come back in
/// order; part of a warp posting together is refused with a decoded error.
fn exclusive_checks(gpu: &Gpu, o: &mut dyn Write) -> Res<()> {
    let r = rig(gpu, WorldConfig { exclusive: true, ..checked_config() })?;
    let (a, b) = (r.world.bufs[0], r.world.bufs[1]);
    for len in [8usize, 4096, 1 << 20, 64 << 20] {
        let data = pattern(len, 11 + len as u64);
        a.write_bytes(0, &data)?;
        b.fill(0, len, 0)?;
        check_rc(&r, "exclusive put", &r.launch_rw(RwKernel::Put, 1, 1, len as u32, 1)?)?;
        let mut got = vec![0u8; len];
        b.read_bytes(0, &mut got)?;
        if got != data {
            return check(format!("exclusive put of {len} B: bytes differ"));
        }
        let back = pattern(len, 12 + len as u64);
        b.write_bytes(0, &back)?;
        check_rc(&r, "exclusive get", &r.launch_rw(RwKernel::Get, 1, 1, len as u32, 1)?)?;
        a.read_bytes(0, &mut got)?;
        if got != back {
            return check(format!("exclusive get of {len} B: bytes differ"));
        }
        writeln!(o, "  put and get of {len:>8} B from 1 thread: every byte checked")?;
    }
    let (len, iters) = (64u32, 40u32);
    let total = (32 * iters * len) as usize;
    let data = pattern(total, 21);
    a.write_bytes(0, &data)?;
    b.fill(0, total, 0)?;
    check_rc(&r, "exclusive put_nbi_warp", &r.launch_rw(RwKernel::PutWarp, 1, 32, len, iters)?)?;
    let mut got = vec![0u8; total];
    b.read_bytes(0, &mut got)?;
    if got != data {
        return Err("exclusive put_nbi_warp: bytes differ".into());
    }
    writeln!(
        o,
        "  put_nbi_warp, one warp x {iters}: {} puts of {len} B, every byte checked (the ring of 1024 wrapped)",
        32 * iters
    )?;
    let roff = 1u64 << 20;
    b.write_bytes(roff as usize, &0u64.to_ne_bytes())?;
    let (rc, olds) = r.gpu.fetch_add(r.page(0), 1, roff, 100, 2 << 20, Grid::ONE)?;
    check_rc(&r, "exclusive fetch_add", &rc)?;
    if olds != (0..100u64).collect::<Vec<_>>() {
        return check(format!("exclusive fetch_add: fetched {:?}..., not 0..100 in order", &olds[..olds.len().min(4)]));
    }
    writeln!(o, "  fetch_add x 100 from 1 thread: fetched 0..100 in order")?;
    lone_lane_check(gpu, o)?;
    // 20 lanes of one warp: a group that is not the whole warp.
    let rc = r.launch_rw(RwKernel::Put, 1, 20, 8, 1)?;
    if rc.iter().any(|c| *c != -22) {
        return check(format!("part of a warp on an exclusive channel: expected -22 on every lane, got {rc:?}"));
    }
    let report = bad_config_report(&r, "part of a warp on an exclusive channel")?;
    writeln!(o, "  20 lanes of a warp posting together: refused on every lane with -22 (EINVAL); host decoded:")?;
    for line in report.lines() {
        writeln!(o, "      {line}")?;
    }
    Ok(())
}

/// A warp owns an exclusive channel (it made the Channel together); lane 0
/// alone is refused before writing anything, and the warp's own put after
/// it lands every byte. On a channel of its own: the refusal sticks for
/// later Channels on the page.
fn lone_lane_check(gpu: &Gpu, o: &mut dyn Write) -> Res<()> {
    let r = rig(gpu, WorldConfig { exclusive: true, ..checked_config() })?;
    let (a, b) = (r.world.bufs[0], r.world.bufs[1]);
    let data = pattern(32 * 8, 31);
    a.write_bytes(0, &data)?;
    b.fill(0, data.len(), 0)?;
    let rc = r.gpu.lone_lane(r.page(0), 1)?;
    if rc[32] != -22 {
        return check(format!(
            "lane 0 alone on a warp's exclusive channel: expected -22, got {}\n{}",
            rc[32],
            r.report()
        ));
    }
    check_rc(&r, "the warp's put after the lone lane's refusal", &rc[..32])?;
    let mut got = vec![0u8; data.len()];
    b.read_bytes(0, &mut got)?;
    if got != data {
        return Err("the warp's put after the lone lane's refusal: bytes differ".into());
    }
    bad_config_report(&r, "lane 0 alone on a warp's exclusive channel")?;
    writeln!(
        o,
        "  lane 0 alone on its warp's channel: refused with -22 (EINVAL), nothing written; the warp's 32 puts after it: every byte checked"
    )?;
    Ok(())
}

/// The decoded GCRB after a refused call, which must say BAD_CONFIG.
fn bad_config_report(r: &Rig, what: &str) -> Res<String> {
    let report = r.report();
    if !report.contains("BAD_CONFIG") {
        return check(format!("{what}: the GCRB does not say BAD_CONFIG:\n{report}"));
    }
    Ok(report)
}

/// The correctness runs: a traced channel, so an error report shows what
/// the device did last.
fn checked_config() -> WorldConfig {
    WorldConfig {
        buf_len: 80 << 20,
        sq_wqebbs: 1024,
        ncqe: CQ_DEPTH,
        timeout: Duration::from_secs(10),
        trace: true,
        ..WorldConfig::default()
    }
}

/// The benchmarks: untraced channels whose send queues hold every put of a
/// posting-rate run (132 x 128 threads), so posting never waits for the
/// engine; CQs 4 times deeper, as for `CQ_DEPTH`.
fn bench_config() -> WorldConfig {
    WorldConfig {
        buf_len: 80 << 20,
        sq_wqebbs: 32768,
        ncqe: 4 * 32768,
        timeout: Duration::from_secs(10),
        trace: false,
        ..WorldConfig::default()
    }
}

/// PE 0's channels for the posting-rate runs. Only there: the engine scans
/// every QP, so extra ones would slow the latency runs' doorbells.
const RATE_CHANNELS: usize = 32;

/// Puts, gets and atomics from PE 0 to PE 1, every byte and value checked.
fn data_checks(r: &Rig, o: &mut dyn Write, path: &str) -> Res<()> {
    writeln!(o, "puts (PE 0 -> PE 1 {path}):")?;
    puts(r, o)?;
    writeln!(o, "gets:")?;
    gets(r, o)?;
    writeln!(o, "atomics:")?;
    atomics(r, o)
}

/// Run everything; an error names what failed with the decoded GCRB.
/// `marrow demo --gpu`: every check, then the benchmarks; `render` prints
/// one register trace record (the CLI's `trace show` line). The text goes
/// to `o`; the benchmarks' figures come back as rows.
pub fn run(o: &mut dyn Write, render: RenderRecord) -> Res<FigureReport> {
    let gpu = Gpu::open()?;
    let mut c = Collect::new("demo --gpu", format!("{} ({})", gpu.name, gpu.arch));
    writeln!(o, "marrow demo --gpu: {} ({}), kernels compiled by this machine's NVRTC", gpu.name, gpu.arch)?;
    data_checks(&rig(&gpu, checked_config())?, o, "through the softnic")?;
    writeln!(o, "GPU memory as data buffers (moved by the softnic through the GPU's copy engine):")?;
    gpu_memory(&gpu, o)?;
    writeln!(o, "injected faults (each must come back as an error, never a hang):")?;
    faults(&gpu, o, false, render)?;
    writeln!(o, "exclusive channels (flags.exclusive):")?;
    exclusive_checks(&gpu, o)?;
    writeln!(o, "injected faults on an exclusive channel:")?;
    faults(&gpu, o, true, render)?;
    writeln!(o, "a dropped doorbell on an exclusive channel with early doorbells (flags.early_doorbell rings twice):")?;
    early_doorbell_covers_a_drop(&gpu, o, render)?;
    benchmarks(&gpu, o, &mut c)?;
    writeln!(o, "all GPU checks passed")?;
    Ok(c.report)
}

/// `marrow demo --gpu --wire udp`: the device code in GPU threads against a
/// softnic whose peer, PE 1, is another process (`marrow softnic`, started
/// from `softnic_exe`) across RoCEv2 on loopback UDP; the 8 B blocking-put
/// latency and the posting rate beside the same figures on the local path
/// (one softnic), same run. With `pcap`, PE 0's port is captured during the
/// data checks. The text goes to `o`; the figures come back as rows.
pub fn run_wire(
    o: &mut dyn Write,
    softnic_exe: &std::path::Path,
    pcap: Option<std::path::PathBuf>,
) -> Res<FigureReport> {
    let gpu = Gpu::open()?;
    let mut c = Collect::new("demo --gpu --wire udp", format!("{} ({})", gpu.name, gpu.arch));
    let pid = std::process::id();
    let ip = std::net::Ipv4Addr::new(127, 78, (pid % 250) as u8, 2);
    let daemon = marrow_softnic::peer::PeerDaemon::start(softnic_exe, ip, 4791)?;
    writeln!(
        o,
        "marrow demo --gpu --wire udp: {} ({}); PE 1 is another process (`marrow softnic`, pid {}, port udp:{ip}:4791), reached over RoCEv2 on loopback UDP",
        gpu.name,
        gpu.arch,
        daemon.child.id()
    )?;
    let peer = marrow_transport::WirePeer { socket: daemon.socket.clone(), ip };
    let wire = |pcap| marrow_transport::WireOptions { peer: Some(peer.clone()), pcap };
    let checked = checked_config();
    let world = World::over_wire(checked, &wire(pcap.clone()))?;
    world.enable_peer_trace(1 << 20)?;
    let r = rig_on(&gpu, world, checked.sq_wqebbs)?;
    data_checks(&r, o, "across the wire to the other process")?;
    peer_checks(&r, o)?;
    drop(r);
    if let Some(f) = &pcap {
        writeln!(o, "  PE 0's port captured to {} (during the data checks)", f.display())?;
    }
    for wire_on in [false, true] {
        let section = if wire_on { "across the wire" } else { "local path (one softnic), for comparison" };
        writeln!(o, "{section}:")?;
        c.section(section);
        let cfg = bench_config();
        let world = if wire_on { World::over_wire(cfg, &wire(None)) } else { World::new(cfg) };
        let r = rig_on(&gpu, world?, cfg.sq_wqebbs)?;
        latency(&r, o, &mut c)?;
        rates(&r, o, &mut c, false, false)?;
    }
    writeln!(o, "all GPU checks passed across the wire")?;
    Ok(c.report)
}

/// What only a PE 1 in another process shows. PE 1's buffer is registered
/// only with that process, so every byte the checks above read there was
/// written by it. Its own channel, driven by the CPU device code here
/// through the daemon's queues mapped here, puts back across the wire into
/// PE 0's buffer, and the daemon's register trace shows the doorbell and
/// the WQE it fetched.
fn peer_checks(r: &Rig, o: &mut dyn Write) -> Res<()> {
    let dev = marrow_transport::cpu::Device::new(&r.world.channels[1]);
    let (a, b) = (r.world.bufs[0], r.world.bufs[1]);
    let want = pattern(4096, 0x5eed);
    let off = 1 << 16;
    b.write_bytes(off, &want)?;
    dev.put_nbi(0, off as u64, off as u64, want.len() as u32)
        .map_err(|x| format!("PE 1 put: {x}\n{}", r.world.channels[1].report()))?;
    dev.quiet().map_err(|x| format!("PE 1 quiet: {x}\n{}", r.world.channels[1].report()))?;
    let mut got = vec![0u8; want.len()];
    a.read_bytes(off, &mut got)?;
    if got != want {
        return Err("PE 1 (the other process) put 4 KiB to PE 0: the bytes at PE 0 differ".into());
    }
    let bytes = r.world.peer_trace().ok_or("the peer softnic returned no register trace")?;
    let (recs, _) = marrow_softnic::trace::parse(&bytes);
    let qpn = r.world.channels[1].qpn;
    let seen = |k| recs.iter().filter(|x| x.kind == k && x.qpn == qpn).count();
    let (rings, fetches) = (seen(marrow_softnic::trace::Kind::DOORBELL), seen(marrow_softnic::trace::Kind::WQE_FETCH));
    if rings == 0 || fetches == 0 {
        return check(format!(
            "the peer softnic's register trace has {rings} doorbells and {fetches} WQE fetches on QP {qpn:#x} after its put"
        ));
    }
    writeln!(
        o,
        "  ok - PE 1's own channel (the other process's QP {qpn:#x}) put 4 KiB back across the wire, bytes checked; its trace: {rings} doorbell(s), {fetches} WQE fetch(es)"
    )
    .map_err(BenchError::from)
}

/// The 8 B blocking put with 1, 32 and 256 QPs on the engine (the extra
/// ones idle, as in NVSHMEM- and DeepEP-style setups with a QP per warp or
/// per peer): the engine's scan visits every QP, so this shows what each
/// costs the one in use. Each ratio is to the 1-QP figure of the same run.
fn engine_qps(gpu: &Gpu, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
    writeln!(o, "the engine with many QPs (8 B blocking put on one, the rest idle; ratio to 1 QP, target <= 1.1):")?;
    let outer = c.current().to_string();
    let mut one = None;
    for n in [1usize, 32, 256] {
        let cfg = WorldConfig { extra_channels: n - 1, sq_wqebbs: 1024, ncqe: 1024, ..bench_config() };
        let r = rig(gpu, cfg)?;
        write!(o, "  {n:>3} QP(s): ")?;
        c.section(format!("{outer}, {n} QP(s) on the engine"));
        let (put, _) = latency(&r, o, c)?;
        let base = *one.get_or_insert(put);
        writeln!(o, "        {n} QPs / 1 QP = {:.2}", put / base)?;
        c.add(gpu_rows::engine_qps(n, put, base));
    }
    c.section(outer);
    Ok(())
}

fn benchmarks(gpu: &Gpu, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
    c.section("shared");
    writeln!(
        o,
        "shared channels (any thread posts; reservation atomic, ready chain, CQ lock; early doorbells, the default):"
    )?;
    writeln!(o, "latency:")?;
    latency_breakdown(gpu, o, c, bench_config())?;
    let r = rig(gpu, bench_config())?;
    latency(&r, o, c)?;
    loop_bench(&r, o, c)?;
    drop(r);
    engine_qps(gpu, o, c)?;
    writeln!(o, "rates:")?;
    let r = rig(gpu, WorldConfig { extra_channels: RATE_CHANNELS - 1, ..bench_config() })?;
    rates(&r, o, c, false, false)?;
    drop(r);
    writeln!(
        o,
        "with lazy put_nbi doorbells (flags.lazy_nbi_doorbell: ring per 32 WQEBBs or a half-full ring, quiet posts a NOP; DeepEP's rule):"
    )?;
    c.section("shared, lazy put_nbi doorbells");
    let lazy = WorldConfig { lazy_nbi_doorbell: true, ..bench_config() };
    let r = rig(gpu, WorldConfig { extra_channels: RATE_CHANNELS - 1, ..lazy })?;
    rates(&r, o, c, false, true)?;
    drop(r);
    loop_bench(&rig(gpu, lazy)?, o, c)?;
    writeln!(
        o,
        "exclusive channels (flags.exclusive: one owner, a thread or a warp, keeps the heads in registers; DOCA's EXCLUSIVE mode; early doorbells, the default):"
    )?;
    c.section("exclusive");
    let exclusive = WorldConfig { exclusive: true, ..bench_config() };
    latency_breakdown(gpu, o, c, exclusive)?;
    let r = rig(gpu, exclusive)?;
    latency(&r, o, c)?;
    loop_bench(&r, o, c)?;
    rates(&r, o, c, true, false)?;
    drop(r);
    writeln!(
        o,
        "exclusive with lazy put_nbi doorbells (a put_nbi fences nothing until it rings; quiet rings the rest):"
    )?;
    c.section("exclusive, lazy put_nbi doorbells");
    let r = rig(gpu, WorldConfig { lazy_nbi_doorbell: true, ..exclusive })?;
    loop_bench(&r, o, c)?;
    rates(&r, o, c, true, true)?;
    drop(r);
    writeln!(
        o,
        "exclusive without early doorbells (flags.early_doorbell off: the record, a fence, then the one doorbell):"
    )?;
    c.section("exclusive, no early doorbells");
    let late = WorldConfig { early_doorbell: false, ..exclusive };
    latency_breakdown(gpu, o, c, late)?;
    let r = rig(gpu, late)?;
    latency(&r, o, c)?;
    rates(&r, o, c, true, false)?;
    drop(r);
    writeln!(o, "shared without early doorbells:")?;
    c.section("shared, no early doorbells");
    latency(&rig(gpu, WorldConfig { early_doorbell: false, ..bench_config() })?, o, c)?;
    Ok(())
}

/// `marrow bench gpu`: the GPU figures alone, each against its floor; the
/// text goes to `o`, the figures come back as rows.
pub fn bench(o: &mut dyn Write) -> Res<FigureReport> {
    let gpu = Gpu::open()?;
    writeln!(o, "marrow bench gpu: {} ({})", gpu.name, gpu.arch)?;
    let mut c = Collect::new("bench gpu", format!("{} ({})", gpu.name, gpu.arch));
    benchmarks(&gpu, o, &mut c)?;
    Ok(c.report)
}
