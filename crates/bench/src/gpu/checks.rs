//! `marrow demo --gpu`'s checks: puts, gets and atomics with every byte
//! and fetched value compared on the CPU, GPU memory as data buffers,
//! injected faults that must come back as errors with the GCRB decoded
//! (never a hang), exclusive channels' rules, and a peer across the wire.

use super::{CQ_DEPTH, RenderRecord, Res, Rig, check, check_rc, checked_config, rig};
use crate::error::{BenchError, same_bytes};
use marrow_softnic::Faults;
use marrow_transport::gpu::{Gpu, Grid, RwKernel};
use marrow_transport::{DeviceError, DeviceStatus, World, WorldConfig};
use std::io::Write;
use std::time::{Duration, Instant};

/// A byte pattern for `len` bytes that differs with `seed`.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    (0..len).map(|i| ((i as u64).wrapping_mul(2654435761) ^ seed) as u8).collect()
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
        same_bytes(&format!("put of {len} B"), &got, &data)?;
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
        same_bytes(&format!("{kernel} {grid}x{block}"), &got, &data)?;
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
        same_bytes(&format!("get of {len} B"), &got, &data)?;
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
    same_bytes("grid gets", &got, &data)?;
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

pub(super) fn faults(gpu: &Gpu, o: &mut dyn Write, exclusive: bool, render: RenderRecord) -> Res<()> {
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
pub(super) fn early_doorbell_covers_a_drop(gpu: &Gpu, o: &mut dyn Write, render: RenderRecord) -> Res<()> {
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
    match DeviceStatus(rc[0]) {
        DeviceStatus::OK => {
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
        DeviceStatus::TIMEOUT => {
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
                DeviceError::of(other),
                r.report()
            ));
        }
    }
    softnic_trace(&r, o, render)
}

/// Data buffers in GPU memory: the softnic reaches them through the GPU's
/// copy engine (a NIC would DMA them peer to peer).
pub(super) fn gpu_memory(gpu: &Gpu, o: &mut dyn Write) -> Res<()> {
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
        same_bytes(&format!("put of {size} B between GPU buffers"), &got, &data)?;
        let back = pattern(size, 5 + size as u64);
        b1.write(0, &back)?;
        let rc = r.launch_rw(RwKernel::Get, 1, 1, size as u32, 1)?;
        check_rc(&r, "get between GPU buffers", &rc)?;
        b0.read(0, &mut got)?;
        same_bytes(&format!("get of {size} B between GPU buffers"), &got, &back)?;
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
    same_bytes("grid puts between GPU buffers", &got, &data)?;
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
pub(super) fn exclusive_checks(gpu: &Gpu, o: &mut dyn Write) -> Res<()> {
    let r = rig(gpu, WorldConfig { exclusive: true, ..checked_config() })?;
    let (a, b) = (r.world.bufs[0], r.world.bufs[1]);
    for len in [8usize, 4096, 1 << 20, 64 << 20] {
        let data = pattern(len, 11 + len as u64);
        a.write_bytes(0, &data)?;
        b.fill(0, len, 0)?;
        check_rc(&r, "exclusive put", &r.launch_rw(RwKernel::Put, 1, 1, len as u32, 1)?)?;
        let mut got = vec![0u8; len];
        b.read_bytes(0, &mut got)?;
        same_bytes(&format!("exclusive put of {len} B"), &got, &data)?;
        let back = pattern(len, 12 + len as u64);
        b.write_bytes(0, &back)?;
        check_rc(&r, "exclusive get", &r.launch_rw(RwKernel::Get, 1, 1, len as u32, 1)?)?;
        a.read_bytes(0, &mut got)?;
        same_bytes(&format!("exclusive get of {len} B"), &got, &back)?;
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
    same_bytes("exclusive put_nbi_warp", &got, &data)?;
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
    if rc.iter().any(|c| DeviceStatus(*c) != DeviceStatus::BAD_CONFIG) {
        return check(format!(
            "part of a warp on an exclusive channel: expected E_BAD_CONFIG on every lane, got {rc:?}"
        ));
    }
    let report = bad_config_report(&r, "part of a warp on an exclusive channel")?;
    writeln!(
        o,
        "  20 lanes of a warp posting together: refused on every lane with E_BAD_CONFIG (-EINVAL); host decoded:"
    )?;
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
    if DeviceStatus(rc[32]) != DeviceStatus::BAD_CONFIG {
        return check(format!(
            "lane 0 alone on a warp's exclusive channel: expected E_BAD_CONFIG, got {}\n{}",
            rc[32],
            r.report()
        ));
    }
    check_rc(&r, "the warp's put after the lone lane's refusal", &rc[..32])?;
    let mut got = vec![0u8; data.len()];
    b.read_bytes(0, &mut got)?;
    same_bytes("the warp's put after the lone lane's refusal", &got, &data)?;
    bad_config_report(&r, "lane 0 alone on a warp's exclusive channel")?;
    writeln!(
        o,
        "  lane 0 alone on its warp's channel: refused with E_BAD_CONFIG (-EINVAL), nothing written; the warp's 32 puts after it: every byte checked"
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

/// Puts, gets and atomics from PE 0 to PE 1, every byte and value checked.
pub(super) fn data_checks(r: &Rig, o: &mut dyn Write, path: &str) -> Res<()> {
    writeln!(o, "puts (PE 0 -> PE 1 {path}):")?;
    puts(r, o)?;
    writeln!(o, "gets:")?;
    gets(r, o)?;
    writeln!(o, "atomics:")?;
    atomics(r, o)
}

/// What only a PE 1 in another process shows. PE 1's buffer is registered
/// only with that process, so every byte the checks above read there was
/// written by it. Its own channel, driven by the CPU device code here
/// through the daemon's queues mapped here, puts back across the wire into
/// PE 0's buffer, and the daemon's register trace shows the doorbell and
/// the WQE it fetched.
pub(super) fn peer_checks(r: &Rig, o: &mut dyn Write) -> Res<()> {
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
    same_bytes("PE 1 (the other process) put 4 KiB to PE 0: the bytes at PE 0", &got, &want)?;
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
