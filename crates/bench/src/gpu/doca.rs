//! `marrow bench gpu --doca CUBIN`: DOCA GPUNetIO's device verbs, as NCCL
//! 2.28 ships them (built into CUBIN by `scripts/doca_peer/build.sh`), and
//! marrow's device code on the same softnic, timed side by side in one run:
//! the blocking 8 B put and the posting rates, in DOCA's two sharing modes
//! against marrow's two kinds of channel. DOCA fences its posts at GPU
//! scope where marrow fences at system scope (the softnic's rings are host
//! memory), so marrow runs twice: as it is, and with
//! `flags.gpu_scope_fences`, DOCA's scope. Every side gets QPs of its own
//! from one world, so one engine serves all and every ring is the same
//! kind of host memory. DOCA's bytes are checked where they land.

use super::latency::{fmt_quantiles, quantiles_us};
use super::{Res, Rig, bench_config, check, check_rc, rig_on};
use crate::figure_report::Collect;
use crate::gpu_rows;
use marrow_transport::gcrb_page;
use marrow_transport::gpu::{Gpu, Grid, Timed};
use marrow_transport::gpu_doca::{DocaPeer, DocaQueue, DocaSharing, DocaWindow};
use marrow_transport::{DeviceError, World, WorldConfig};
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

/// Shared channels against DOCA's GPU sharing mode, then exclusive
/// channels against its EXCLUSIVE mode.
pub(super) fn doca(gpu: &Gpu, o: &mut dyn Write, c: &mut Collect, cubin: &Path) -> Res<()> {
    writeln!(o, "against {} (CUBIN {}):", gpu_rows::DOCA_PEER, cubin.display())?;
    for exclusive in [false, true] {
        let (mode, sharing) = if exclusive {
            ("exclusive channel / DOCA EXCLUSIVE", DocaSharing::Exclusive)
        } else {
            ("shared channel / DOCA GPU sharing", DocaSharing::Gpu)
        };
        c.section(format!("against DOCA, {mode}"));
        // Channels [0, QPS): marrow; [QPS, 2 QPS): marrow at GPU scope;
        // [2 QPS, 3 QPS): DOCA.
        let cfg = WorldConfig { exclusive, extra_channels: 3 * QPS - 1, ..bench_config() };
        let world = World::new(cfg)?;
        for ch in &world.more[QPS - 1..2 * QPS - 1] {
            gcrb_page::edit_config(&ch.page(), |c| {
                c.set_gpu_scope_fences(true);
            })?;
        }
        let r = rig_on(gpu, world, cfg.sq_wqebbs)?;
        let first: Vec<u64> = std::iter::once(r.page(0)).chain(r.more[..QPS - 1].iter().map(|g| g.addr)).collect();
        let marrow = [
            Marrow { name: "marrow", pages: first },
            Marrow { name: "marrow GPU-scope", pages: r.more[QPS - 1..2 * QPS - 1].iter().map(|g| g.addr).collect() },
        ];
        let x = Compare { doca: DocaSide::new(&r, cubin)?, r: &r, marrow, mode, sharing };
        latency(&x, o, c)?;
        rates(&x, o, c)?;
    }
    Ok(())
}

/// One mode's comparison: the rig, marrow's two kinds of channel, DOCA's
/// QPs, and DOCA's sharing mode.
struct Compare<'a> {
    r: &'a Rig<'a>,
    marrow: [Marrow; 2],
    doca: DocaSide,
    mode: &'static str,
    sharing: DocaSharing,
}

/// marrow's `QPS` channels of one kind: as they are (system-scope posting
/// fences), or with `flags.gpu_scope_fences`, DOCA's scope.
struct Marrow {
    name: &'static str,
    pages: Vec<u64>,
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
        let channels = &r.world.more[2 * QPS - 1..];
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

/// A DOCA kernel's result codes: 0, or what its wait returned (the waits of
/// scripts/doca_peer/doca_peer.cu return Linux errno values, negated).
fn check_doca(what: &str, rc: &[i32]) -> Res<()> {
    match rc.iter().enumerate().find(|(_, c)| **c != 0) {
        None => Ok(()),
        Some((i, &c)) => check(format!(
            "DOCA's {what}: thread {i} returned {c} ({})",
            match nix::errno::Errno::from_raw(c.wrapping_neg()) {
                nix::errno::Errno::EIO => "-EIO: DOCA's poll found an error CQE".to_string(),
                nix::errno::Errno::ETIMEDOUT => "-ETIMEDOUT: no CQE within the channel's timeout".to_string(),
                _ => DeviceError(c).to_string(),
            }
        )),
    }
}

/// The blocking put, alternating marrow's runs (each kind) and DOCA's;
/// each side's best run by median, and DOCA's bytes read back where they
/// landed.
fn latency(x: &Compare, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
    let Compare { r, marrow, doca: d, mode, sharing } = x;
    let sharing = *sharing;
    let pattern = 0x5a17_d0ca_0000_0000u64.to_le_bytes();
    r.world.bufs[0].write_bytes(DOCA_OFF as usize, &pattern)?;
    r.world.bufs[1].write_bytes(DOCA_OFF as usize, &[0u8; 8])?;
    let median = |t: &Timed| quantiles_us(&t.each_ns)[1];
    let keep = |best: &mut Option<Timed>, t: Timed| {
        if best.as_ref().is_none_or(|b| median(&t) < median(b)) {
            *best = Some(t);
        }
    };
    let mut best: [Option<Timed>; 3] = [None, None, None];
    for _ in 0..LATENCY_ROUNDS {
        for (k, m) in marrow.iter().enumerate() {
            let t = r.gpu.put_latency(m.pages[0], 1, LATENCY_ITERS)?;
            check_rc(r, "put latency", &[t.rc])?;
            keep(&mut best[k], t);
        }
        let t = r.gpu.doca_put_latency(&d.peer, sharing, d.window, LATENCY_ITERS, d.timeout_ns)?;
        check_doca("put latency", &[t.rc])?;
        keep(&mut best[2], t);
    }
    let mut landed = [0u8; 8];
    r.world.bufs[1].read_bytes(DOCA_OFF as usize, &mut landed)?;
    crate::error::same_bytes("DOCA's puts at PE 1", &landed, &pattern)?;
    let [Some(m), Some(g), Some(p)] = best.map(|t| t.map(|t| quantiles_us(&t.each_ns))) else {
        return Err("no latency run".into());
    };
    writeln!(
        o,
        "  {mode}: 8 B blocking put + completion, median of the best of {LATENCY_ROUNDS} runs of {LATENCY_ITERS}: marrow {:.2} us, marrow GPU-scope {:.2} us, DOCA {:.2} us; ratios to DOCA {:.3}, {:.3} (target <= 1.0); p10 / p50 / p90 / p99: marrow {}, marrow GPU-scope {}, DOCA {} us; DOCA's bytes checked at PE 1",
        m[1],
        g[1],
        p[1],
        m[1] / p[1],
        g[1] / p[1],
        fmt_quantiles(m),
        fmt_quantiles(g),
        fmt_quantiles(p)
    )?;
    c.add(gpu_rows::doca_latency(&format!("{mode}, {}", marrow[0].name), m[1], p[1]));
    c.add(gpu_rows::doca_latency(&format!("{mode}, {}", marrow[1].name), g[1], p[1]));
    Ok(())
}

/// Posting rates on the same launch shapes, best of 9 runs each,
/// alternating; every put waited for at the end of its run.
fn rates(x: &Compare, o: &mut dyn Write, c: &mut Collect) -> Res<()> {
    let Compare { r, marrow, doca: d, mode, sharing } = x;
    let sharing = *sharing;
    let warp = Grid { blocks: 1, threads: 32 };
    let gpu_wide = Grid { blocks: 132, threads: 128 };
    let mut runs = vec![("1 thread", Grid::ONE, false, 1024u32, 1usize), ("1 warp, warp put", warp, true, 256, 1)];
    // An exclusive QP has one owner: a whole GPU shares.
    if sharing == DocaSharing::Gpu {
        runs.push(("whole GPU 132 x 128, warp put, 1 QP", gpu_wide, true, 1, 1));
        runs.push(("whole GPU 132 x 128, warp put, 32 QPs (warp w on QP w mod 32)", gpu_wide, true, 1, QPS));
    }
    for (label, grid, warp, iters, qps) in runs {
        let puts = grid.size() as u64 * u64::from(iters);
        // The best span of marrow as it is, at GPU scope, and of DOCA.
        let mut best = [u64::MAX; 3];
        for _ in 0..9 {
            for (k, m) in marrow.iter().enumerate() {
                let (rc, ns) = r.gpu.post_rate(&m.pages[..qps], 1, iters, warp, grid)?;
                check_rc(r, "post rate", &rc)?;
                best[k] = best[k].min(ns.max(1));
            }
            let (rc, ns) = r.gpu.doca_post_rate(&d.peer, qps, sharing, warp, d.window, iters, grid, d.timeout_ns)?;
            check_doca("post rate", &rc)?;
            best[2] = best[2].min(ns.max(1));
        }
        let [m, g, p] = best.map(|ns| puts as f64 / (ns as f64 / 1e9));
        writeln!(
            o,
            "  {mode}: 8 B posting, {label}: marrow {m:.3e} puts/s, marrow GPU-scope {g:.3e} /s, DOCA {p:.3e} /s; ratios to DOCA {:.3}, {:.3} (target >= 1.0)",
            m / p,
            g / p
        )?;
        c.add(gpu_rows::doca_rate(&format!("{mode}, {}, {label}", marrow[0].name), m, p));
        c.add(gpu_rows::doca_rate(&format!("{mode}, {}, {label}", marrow[1].name), g, p));
    }
    Ok(())
}
