//! `marrow bench gpu --doca CUBIN`: DOCA GPUNetIO's device verbs, as NCCL
//! 2.28 ships them (built into CUBIN by `scripts/doca_peer/build.sh`), and
//! marrow's device code on the same softnic, timed side by side in one run:
//! the blocking 8 B put and the posting rates, in DOCA's two sharing modes
//! against marrow's two kinds of channel. Both sides get QPs of their own
//! from one world, so one engine serves both and every ring is the same
//! kind of host memory. DOCA's bytes are checked where they land.

use super::latency::{fmt_quantiles, quantiles_us};
use super::{Res, Rig, bench_config, check, check_rc, rig};
use crate::figure_report::Collect;
use crate::gpu_rows;
use marrow_transport::gcrb_page;
use marrow_transport::gpu::{Gpu, Grid, Timed};
use marrow_transport::gpu_doca::{DocaPeer, DocaQueue, DocaSharing, DocaWindow};
use marrow_transport::{DeviceError, WorldConfig};
use std::io::Write;
use std::path::Path;

/// QPs each side gets for the posting runs (NVSHMEM and DOCA users give
/// warps QPs of their own in the same way).
const QPS: usize = 32;
/// Blocking puts per latency run, and runs per side, alternating.
const LATENCY_ITERS: u32 = 2000;
const LATENCY_ROUNDS: usize = 5;
/// Where DOCA's puts go in both windows: apart from marrow's (offset 0).
const DOCA_OFF: u64 = 4096;

/// Both sides on shared channels / DOCA's GPU sharing mode, then on
/// exclusive channels / DOCA's EXCLUSIVE mode.
pub(super) fn doca(gpu: &Gpu, o: &mut dyn Write, c: &mut Collect, cubin: &Path) -> Res<()> {
    writeln!(o, "against {} (CUBIN {}):", gpu_rows::DOCA_PEER, cubin.display())?;
    for exclusive in [false, true] {
        let (mode, sharing) = if exclusive {
            ("exclusive channel / DOCA EXCLUSIVE", DocaSharing::Exclusive)
        } else {
            ("shared channel / DOCA GPU sharing", DocaSharing::Gpu)
        };
        c.section(format!("against DOCA, {mode}"));
        let r = rig(gpu, WorldConfig { exclusive, extra_channels: 2 * QPS - 1, ..bench_config() })?;
        let side = DocaSide::new(&r, cubin)?;
        latency(&r, &side, o, c, mode, sharing)?;
        rates(&r, &side, o, c, mode, sharing)?;
    }
    Ok(())
}

/// DOCA's QPs (the world's last `QPS` channels, which marrow's code never
/// touches) and where its puts go.
struct DocaSide {
    peer: DocaPeer,
    window: DocaWindow,
    timeout_ns: u64,
}

impl DocaSide {
    fn new(r: &Rig, cubin: &Path) -> Res<DocaSide> {
        let channels = &r.world.more[QPS - 1..];
        let configs = channels
            .iter()
            .map(|ch| gcrb_page::config(&ch.page()).ok_or("a channel's GCRB config is unreadable"))
            .collect::<Result<Vec<_>, _>>()?;
        let queues = configs.iter().map(DocaQueue::of).collect::<Result<Vec<_>, _>>()?;
        let key = gcrb_page::key(&channels[0].page(), 1).ok_or("the GCRB has no key for PE 1")?;
        let peer = r.gpu.doca_peer(cubin, &queues)?;
        let window = DocaWindow::of(&configs[0], &key, DOCA_OFF, DOCA_OFF);
        Ok(DocaSide { peer, window, timeout_ns: configs[0].timeout_ns() })
    }
}

/// A DOCA kernel's result codes: 0, or what its wait returned.
fn check_doca(what: &str, rc: &[i32]) -> Res<()> {
    match rc.iter().enumerate().find(|(_, c)| **c != 0) {
        None => Ok(()),
        Some((i, &c)) => check(format!(
            "DOCA's {what}: thread {i} returned {c} ({})",
            match c {
                -5 => "-EIO: DOCA's poll found an error CQE".to_string(),
                -110 => "-ETIMEDOUT: no CQE within the channel's timeout".to_string(),
                _ => DeviceError(c).to_string(),
            }
        )),
    }
}

/// The blocking put, alternating marrow's and DOCA's runs; each side's
/// best run by median, and DOCA's bytes read back where they landed.
fn latency(r: &Rig, d: &DocaSide, o: &mut dyn Write, c: &mut Collect, mode: &str, sharing: DocaSharing) -> Res<()> {
    let pattern = 0x5a17_d0ca_0000_0000u64.to_le_bytes();
    r.world.bufs[0].write_bytes(DOCA_OFF as usize, &pattern)?;
    r.world.bufs[1].write_bytes(DOCA_OFF as usize, &[0u8; 8])?;
    let (mut marrow, mut doca): (Option<Timed>, Option<Timed>) = (None, None);
    let median = |t: &Timed| quantiles_us(&t.each_ns)[1];
    for _ in 0..LATENCY_ROUNDS {
        let m = r.gpu.put_latency(r.page(0), 1, LATENCY_ITERS)?;
        check_rc(r, "put latency", &[m.rc])?;
        let p = r.gpu.doca_put_latency(&d.peer, sharing, d.window, LATENCY_ITERS, d.timeout_ns)?;
        check_doca("put latency", &[p.rc])?;
        if marrow.as_ref().is_none_or(|b| median(&m) < median(b)) {
            marrow = Some(m);
        }
        if doca.as_ref().is_none_or(|b| median(&p) < median(b)) {
            doca = Some(p);
        }
    }
    let (marrow, doca) = (marrow.ok_or("no latency run")?, doca.ok_or("no latency run")?);
    let mut landed = [0u8; 8];
    r.world.bufs[1].read_bytes(DOCA_OFF as usize, &mut landed)?;
    crate::error::same_bytes("DOCA's puts at PE 1", &landed, &pattern)?;
    let (mq, dq) = (quantiles_us(&marrow.each_ns), quantiles_us(&doca.each_ns));
    writeln!(
        o,
        "  {mode}: 8 B blocking put + completion, median of the best of {LATENCY_ROUNDS} runs of {LATENCY_ITERS}: marrow {:.2} us, DOCA {:.2} us; ratio {:.3} (target <= 1.0); p10 / p50 / p90 / p99: marrow {}, DOCA {} us; DOCA's bytes checked at PE 1",
        mq[1],
        dq[1],
        mq[1] / dq[1],
        fmt_quantiles(mq),
        fmt_quantiles(dq)
    )?;
    c.add(gpu_rows::doca_latency(mode, mq[1], dq[1]));
    Ok(())
}

/// Posting rates on the same launch shapes, best of 9 runs each,
/// alternating; every put waited for at the end of its run.
fn rates(r: &Rig, d: &DocaSide, o: &mut dyn Write, c: &mut Collect, mode: &str, sharing: DocaSharing) -> Res<()> {
    let warp = Grid { blocks: 1, threads: 32 };
    let gpu_wide = Grid { blocks: 132, threads: 128 };
    let mut runs = vec![("1 thread", Grid::ONE, false, 1024u32, 1usize), ("1 warp, warp put", warp, true, 256, 1)];
    // An exclusive QP has one owner: a whole GPU shares.
    if sharing == DocaSharing::Gpu {
        runs.push(("whole GPU 132 x 128, warp put, 1 QP", gpu_wide, true, 1, 1));
        runs.push(("whole GPU 132 x 128, warp put, 32 QPs (warp w on QP w mod 32)", gpu_wide, true, 1, QPS));
    }
    let pages: Vec<u64> = std::iter::once(r.page(0)).chain(r.more[..QPS - 1].iter().map(|g| g.addr)).collect();
    for (label, grid, warp, iters, qps) in runs {
        let puts = grid.size() as u64 * u64::from(iters);
        let (mut marrow, mut doca) = (u64::MAX, u64::MAX);
        for _ in 0..9 {
            let (rc, ns) = r.gpu.post_rate(&pages[..qps], 1, iters, warp, grid)?;
            check_rc(r, "post rate", &rc)?;
            marrow = marrow.min(ns.max(1));
            let (rc, ns) = r.gpu.doca_post_rate(&d.peer, qps, sharing, warp, d.window, iters, grid, d.timeout_ns)?;
            check_doca("post rate", &rc)?;
            doca = doca.min(ns.max(1));
        }
        let rate = |ns: u64| puts as f64 / (ns as f64 / 1e9);
        let (m, p) = (rate(marrow), rate(doca));
        writeln!(
            o,
            "  {mode}: 8 B posting, {label}: marrow {m:.3e} puts/s, DOCA {p:.3e} /s; ratio {:.3} (target >= 1.0)",
            m / p
        )?;
        c.add(gpu_rows::doca_rate(&format!("{mode}, {label}"), m, p));
    }
    Ok(())
}
