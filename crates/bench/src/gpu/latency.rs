//! The 8 B blocking put against a GPU<->CPU ping-pong through host memory:
//! the traced breakdown of a put, the floor walking a CQ-sized ring (and the
//! put's own CQ slots), each put's and each round trip's percentiles, and
//! the same put with many QPs on the engine.

use super::{CQ_DEPTH, Res, Rig, bench_config, check_rc, rig};
use crate::figure_report::Collect;
use crate::gpu_rows;
use crate::latency::Latency;
use crate::placement;
use marrow_transport::WorldConfig;
use marrow_transport::gpu::{Gpu, PingPongRing};
use std::io::Write;
use std::time::Duration;

/// Where a blocking put's time goes, from the device trace (GPU clock) of a
/// channel with `flags.trace` on: the last puts' POST -> DOORBELL -> CQE ->
/// next POST gaps. Tracing costs time itself, so the latency figure comes
/// from an untraced channel (`latency`). `flags` gives the channel's kind
/// (exclusive, early doorbells); sizes, timeout and tracing are set here.
pub(super) fn latency_breakdown(gpu: &Gpu, o: &mut dyn Write, c: &mut Collect, flags: WorldConfig) -> Res<()> {
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
    let cfg = r.config()?;
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
pub(super) fn quantiles_us(ns: &[u64]) -> [f64; 4] {
    let mut l = Latency::new();
    ns.iter().for_each(|&v| l.record(Duration::from_nanos(v)));
    [0.1, 0.5, 0.9, 0.99].map(|q| l.quantile_us(q))
}

/// Quantiles as the text prints them: µs to two decimals, ` / ` between.
pub(super) fn fmt_quantiles(q: [f64; 4]) -> String {
    q.map(|v| format!("{v:.2}")).join(" / ")
}

/// A ping-pong floor: each flavour's best mean (release/acquire, plain),
/// the faster flavour's best run, and where the answering thread ran,
/// first and last.
struct Floor {
    flavours: [f64; 2],
    each: Vec<u64>,
    answered_on: (Option<usize>, Option<usize>),
}

impl Floor {
    /// The floor: the faster flavour's mean, in ns.
    fn ns(&self) -> f64 {
        self.flavours[0].min(self.flavours[1])
    }
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
    Ok(Floor { flavours, each: std::mem::take(&mut each[faster]), answered_on })
}

/// 8-byte blocking put latency against a GPU<->CPU ping-pong through host
/// memory, the pong walking a CQ-sized ring of its own. A GPU read of host
/// memory takes longer on some pages than on others, each page keeping its
/// level (scripts/gpu_probe/pingpong_pages.cu, figures in
/// docs/PERFORMANCE.md), so a floor on one line would be one page's draw,
/// while the puts read their CQEs from dozens of pages. A second floor
/// walks the very CQ slots the best run of puts read, for comparison.
pub(super) fn latency(r: &Rig, o: &mut dyn Write, c: &mut Collect) -> Res<(f64, f64)> {
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
    // The target is the channel's own, as its GCRB page says.
    let exclusive = r.config()?.exclusive();
    let target = gpu_rows::blocking_put_target(exclusive);
    let moved = if floor.answered_on.0 != floor.answered_on.1 {
        format!(", then {}", placement::describe(floor.answered_on.1))
    } else {
        String::new()
    };
    writeln!(
        o,
        "  8 B blocking put + completion: {:.2} us; GPU<->CPU ping-pong floor (the pong walking a CQ-sized ring) {:.2} us (release/acquire {:.2}, plain {:.2}); ratio {:.2} (target {}); ping answered on {}{moved}; engine threads last on {}",
        put_ns / 1e3,
        floor.ns() / 1e3,
        floor.flavours[0] / 1e3,
        floor.flavours[1] / 1e3,
        put_ns / floor.ns(),
        target.text(),
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
        on_cq.ns() / 1e3,
        put_ns / on_cq.ns()
    )?;
    gpu_rows::blocking_put(exclusive, put_ns, floor.flavours, put_q[1], floor_q[1]).into_iter().for_each(|x| c.add(x));
    c.add(gpu_rows::floor_on_cq(put_ns, on_cq.ns()));
    Ok((put_ns, floor.ns()))
}

/// Unregisters a region when dropped.
struct Unregister<'g>(&'g Gpu, marrow_driver::Region);

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        let _ = self.0.unregister(&self.1);
    }
}

/// The 8 B blocking put with 1, 32 and 256 QPs on the engine (the extra
/// ones idle, as in NVSHMEM- and DeepEP-style setups with a QP per warp or
/// per peer): the engine's scan visits every QP, so this shows what each
/// costs the one in use. Each ratio is to the 1-QP figure of the same run.
pub(super) fn engine_qps(gpu: &Gpu, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
    writeln!(
        o,
        "the engine with many QPs (8 B blocking put on one, the rest idle; ratio to 1 QP, target {}):",
        gpu_rows::ENGINE_QPS_TARGET.text()
    )?;
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
