//! `marrow bench verbs`: two ranks over the verbs proxy on any RDMA device.
//! Rank 0 runs the device code (device.h on a CPU thread) against rank 1's
//! buffer; rank 1 serves (its proxy answers nothing: the verbs device does)
//! and checks what landed.
//!
//! | Check | How |
//! |---|---|
//! | gets | rank 1 fills its upper half with a pattern before connecting; rank 0 gets every size, 8 B to 1 MiB, and compares every byte |
//! | puts | rank 0 puts a pattern of every size, gets it back and compares; rank 1 checks the last (1 MiB) one byte for byte |
//! | atomics | fetch-and-adds of 1..=n: each returns the sum so far; compare-and-swaps i→i+1 each return i; one with a stale compare returns the value and swaps nothing; rank 1 checks both words |
//! | sends | on the second channel, the CPU initiator (`marrow_driver`) posts SENDs of 8 B to 1 MiB (one with immediate), an inline SEND, an RDMA WRITE with immediate and an inline RDMA WRITE; rank 1 posts mlx5 receive WQEs and checks each receive CQE (opcode, length, immediate) and every byte |
//! | figures | 8 B put (blocking: put + quiet) latency, and the message rate of 8 B non-blocking puts then one quiet |
//!
//! Fault modes, each passing only when the device code gets the error CQE
//! a ConnectX would write: `bad-rkey` (a put with a wrong rkey:
//! REMOTE_ACCESS_ERR 0x13, and rank 1's QP goes to ERR, IBA's class C
//! responder error), `vanished-peer` (rank 1 exits after connecting: the
//! put's retries run out, TRANSPORT_RETRY_EXC_ERR 0x15).

pub use super::bench_run::{Figure, Run};
use super::{CpuChannel, ProxyError, ProxyRank, RankOpts};
use crate::cpu::Device;
use crate::gcrb_page;
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::raw::CqeOpcode;
use marrow_mlx5::raw::Syndrome;
use marrow_mlx5::wqe::{CtrlParams, RemoteAddr, Sge, WqeOp};
use marrow_softnic::QpState;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// What a run does beyond connecting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every operation checked, then the figures.
    Check,
    /// A put with a wrong rkey must fail with REMOTE_ACCESS_ERR.
    BadRkey,
    /// Rank 1 leaves after connecting: rank 0's put must fail with TRANSPORT_RETRY_EXC_ERR.
    VanishedPeer,
}

/// The run's settings.
#[derive(Clone, Debug)]
pub struct BenchOpts {
    /// Device, peer, timeouts.
    pub rank: RankOpts,
    /// What to run.
    pub mode: Mode,
    /// Timed 8 B put+quiet iterations.
    pub iters: u32,
    /// 8 B non-blocking puts for the message rate.
    pub burst: u32,
    /// Rank 0 first runs the device code in GPU threads ([`super::bench_gpu`]).
    pub gpu: bool,
}

const MIB: usize = 1 << 20;
/// Rank 1's get source (filled before connecting).
const GET_OFF: usize = 2 * MIB;
/// Where rank 0's puts land on rank 1, and rank 0's local source.
const PUT_OFF: usize = 0;
/// Rank 0's landing area for gets.
const LAND_OFF: usize = MIB;
/// The atomic words on rank 1, and rank 0's result word.
const ATOM_OFF: usize = 3 * MIB;
/// The message-rate burst's slots, 8 B each, one per put (`put_burst`
/// does not wrap): up to the done flag, clear of everything rank 1 checks.
const BURST_OFF: usize = 3 * MIB + 64 * 1024;
/// The done flag on rank 1.
const FLAG_OFF: usize = 4 * MIB - 8;
const DONE: u64 = 0x4d41_5252_4f57_2121; // "MARROW!!"
/// Rank 1's receive buffer.
const RECV_OFF: usize = MIB;
/// Where the RDMA WRITE with immediate and the inline RDMA WRITE land on rank 1.
const WIMM_OFF: usize = 3 * MIB + 8192;
const WINL_OFF: usize = 3 * MIB + 16384;
const SEND_SIZES: [usize; 5] = [8, 64, 4096, 65536, MIB];
const SEND_IMM: u32 = 0x1234_5678;
const WRITE_IMM: u32 = 0xfeed_beef;
const INLINE_SEND: usize = 48;
const WIMM_LEN: usize = 256;
const INLINE_WRITE: usize = 40;
const SIZES: [usize; 7] = [8, 64, 512, 4096, 32768, 262_144, MIB];
const ATOMICS: u64 = 32;

fn get_pattern(i: usize) -> u8 {
    (i as u8).wrapping_mul(13).wrapping_add((i >> 8) as u8).wrapping_add(5) // layout-ok: a byte pattern
}

fn send_pattern(size: usize, i: usize) -> u8 {
    (i as u8).wrapping_mul(7).wrapping_add((i >> 8) as u8).wrapping_add(size as u8).wrapping_add(0x40) // layout-ok: a byte pattern
}

/// The next CQE of `cq`, or an error after `timeout`.
fn wait_cqe(cq: &mut marrow_driver::CqPoller, timeout: Duration, what: &str) -> Result<Completion, ProxyError> {
    let t0 = Instant::now();
    loop {
        match cq.poll() {
            Ok(Some(c)) => return Ok(c),
            Ok(None) => {}
            Err(e) => return Err(ProxyError::Check(format!("{what}: {e}"))),
        }
        if t0.elapsed() > timeout {
            return Err(ProxyError::Check(format!("{what}: no CQE within {timeout:?}")));
        }
        std::thread::yield_now();
    }
}

/// Post `op` on the CPU channel, ring, and wait for its requester CQE.
fn post_wait(c: &mut CpuChannel, op: &WqeOp<'_>, timeout: Duration, what: &str) -> Result<(), ProxyError> {
    let post = |e: marrow_driver::PostError| ProxyError::Check(format!("{what}: {e}"));
    let index = c.sq.pi() as u16;
    let built = c.sq.post(CtrlParams::signaled(0, 0), op).map_err(post)?;
    c.sq.ring().map_err(post)?;
    match wait_cqe(&mut c.scq, timeout, what)? {
        Completion::Requester { wqe_counter, .. } if wqe_counter == index => {
            c.sq.complete_through(wqe_counter, u32::from(built.wqebbs));
            Ok(())
        }
        other => Err(ProxyError::Check(format!("{what}: expected the requester CQE of WQE {index}, got {other:?}"))),
    }
}

fn put_pattern(size: usize, i: usize) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add((i >> 8) as u8).wrapping_add(size.trailing_zeros() as u8) // layout-ok: a byte pattern
}

/// Run one rank.
pub fn run(o: &BenchOpts, say: &mut dyn FnMut(&str)) -> Result<Run, ProxyError> {
    if o.rank.buf_len < 4 * MIB {
        return Err(ProxyError::Setup(format!("the buffer must be at least 4 MiB, not {}", o.rank.buf_len)));
    }
    let burst_room = (FLAG_OFF - BURST_OFF) / 8;
    if o.burst as usize > burst_room {
        return Err(ProxyError::Refused(format!(
            "a burst of {} puts: its 8 B slots would run past the {burst_room} that fit before the done flag",
            o.burst
        )));
    }
    let prefill = |rank: usize, buf: &marrow_mmio::Region| -> Result<(), ProxyError> {
        if rank == 1 {
            let g: Vec<u8> = (0..MIB).map(get_pattern).collect();
            buf.write_bytes(GET_OFF, &g)?;
        }
        Ok(())
    };
    let gpu = if o.gpu { Some(super::bench_gpu::open(say)?) } else { None };
    let r = ProxyRank::connect(&o.rank, prefill, say)?;
    let mut run = Run { rank: r.rank, device: r.device.clone(), ..Run::default() };
    match (r.rank, o.mode) {
        (0, Mode::Check) => {
            if let Some(gpu) = &gpu {
                super::bench_gpu::run(gpu, &r, o.iters, &mut run)?;
            }
            rank0_check(o, &r, &mut run)?
        }
        (0, Mode::BadRkey) => rank0_fault(o, &r, &mut run, Syndrome::REMOTE_ACCESS_ERR)?,
        (0, Mode::VanishedPeer) => rank0_fault(o, &r, &mut run, Syndrome::TRANSPORT_RETRY_EXC_ERR)?,
        (_, Mode::Check) => rank1_check(o, &r, &mut run)?,
        (_, Mode::BadRkey) => {
            // IBA class C: the responder's QP goes to ERR after the bad
            // write; its posted receives are flushed, which the proxy reports.
            let t0 = Instant::now();
            while r.qp_state() != Some(QpState::Err) {
                if t0.elapsed() > o.rank.timeout {
                    return Err(ProxyError::Check(format!(
                        "rank 1: its QP did not go to ERR within {:?} after rank 0's bad-rkey write (state {:?})",
                        o.rank.timeout,
                        r.qp_state()
                    )));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = writeln!(run.text, "rank 1: its QP went to ERR after rank 0's bad-rkey write (IBA class C)");
        }
        (_, Mode::VanishedPeer) => {
            let _ = writeln!(run.text, "rank 1: connected, now leaving without a word (the vanished peer)");
        }
    }
    Ok(run)
}

fn device(r: &ProxyRank) -> Result<Device, ProxyError> {
    let d = Device::on_page(&r.page.region());
    d.check_config().map_err(|e| ProxyError::Check(format!("GCRB: {e}")))?;
    Ok(d)
}

fn rank0_check(o: &BenchOpts, r: &ProxyRank, run: &mut Run) -> Result<(), ProxyError> {
    let d = device(r)?;
    let page = r.page.region();
    let dev =
        |what: String, e: crate::DeviceError| ProxyError::Check(format!("{what}: {e}\n{}", gcrb_page::report(&page)));
    let buf = &r.buf;
    // Gets of rank 1's pattern, every size.
    for &n in &SIZES {
        buf.fill(LAND_OFF, n, 0)?;
        d.get(1, GET_OFF as u64, LAND_OFF as u64, n as u32).map_err(|e| dev(format!("get {n} B"), e))?;
        let mut back = vec![0u8; n];
        buf.read_bytes(LAND_OFF, &mut back)?;
        if let Some(i) = (0..n).find(|&i| back[i] != get_pattern(i)) {
            return Err(ProxyError::Check(format!(
                "get {n} B: byte {i} is {:#04x}, rank 1 holds {:#04x}",
                back[i],
                get_pattern(i)
            )));
        }
    }
    let _ = writeln!(run.text, "ok - gets of {} sizes, 8 B to 1 MiB: every byte matches rank 1's", SIZES.len());
    // Puts of every size, each read back.
    for &n in &SIZES {
        let p: Vec<u8> = (0..n).map(|i| put_pattern(n, i)).collect();
        buf.write_bytes(PUT_OFF, &p)?;
        d.put(1, PUT_OFF as u64, PUT_OFF as u64, n as u32).map_err(|e| dev(format!("put {n} B"), e))?;
        buf.fill(LAND_OFF, n, 0)?;
        d.get(1, PUT_OFF as u64, LAND_OFF as u64, n as u32).map_err(|e| dev(format!("get back {n} B"), e))?;
        let mut back = vec![0u8; n];
        buf.read_bytes(LAND_OFF, &mut back)?;
        if let Some(i) = (0..n).find(|&i| back[i] != p[i]) {
            return Err(ProxyError::Check(format!(
                "put {n} B: byte {i} read back {:#04x}, put {:#04x}",
                back[i], p[i]
            )));
        }
    }
    let _ = writeln!(run.text, "ok - puts of {} sizes, 8 B to 1 MiB, each read back byte for byte", SIZES.len());
    // Atomics.
    let (fa, cs) = (ATOM_OFF as u64, ATOM_OFF as u64 + 8);
    let result = (ATOM_OFF + 64) as u64;
    let mut sum = 0u64;
    for k in 1..=ATOMICS {
        let old = d.fetch_add(1, fa, k, result).map_err(|e| dev(format!("fetch_add #{k}"), e))?;
        if old != sum {
            return Err(ProxyError::Check(format!("fetch_add #{k} returned {old}, the sum so far is {sum}")));
        }
        sum += k;
    }
    for i in 0..ATOMICS {
        let old = d.compare_swap(1, cs, i, i + 1, result).map_err(|e| dev(format!("compare_swap {i}"), e))?;
        if old != i {
            return Err(ProxyError::Check(format!("compare_swap {i}->{}: returned {old}", i + 1)));
        }
    }
    let stale = d.compare_swap(1, cs, 0, 999, result).map_err(|e| dev("stale compare_swap".into(), e))?;
    if stale != ATOMICS {
        return Err(ProxyError::Check(format!("a compare_swap with a stale compare returned {stale}, not {ATOMICS}")));
    }
    let _ = writeln!(
        run.text,
        "ok - {ATOMICS} fetch-and-adds (each returned the sum so far), {ATOMICS} compare-and-swaps and a stale one (returned {stale}, swapped nothing)"
    );
    rank0_sends(o, r, run)?;
    // Figures.
    let mut lat = Vec::with_capacity(o.iters as usize);
    for i in 0..o.iters {
        let t = Instant::now();
        d.put(1, BURST_OFF as u64 + u64::from(i % 64) * 8, 0, 8).map_err(|e| dev("timed put".into(), e))?;
        lat.push(t.elapsed());
    }
    lat.sort();
    let pct = |p: f64| lat.get(((lat.len().max(1) as f64 - 1.0) * p) as usize).copied().unwrap_or_default();
    let _ = writeln!(run.text, "8 B put+quiet x{}: p50 {:?} p99 {:?} max {:?}", o.iters, pct(0.5), pct(0.99), pct(1.0));
    run.figures.push(Figure { name: "put8_lat_p50".into(), value: pct(0.5).as_secs_f64() * 1e6, unit: "us" });
    let mean = lat.iter().sum::<Duration>() / lat.len().max(1) as u32;
    run.figures.push(Figure { name: "put8_lat_mean".into(), value: mean.as_secs_f64() * 1e6, unit: "us" });
    let t = Instant::now();
    d.put_burst(1, BURST_OFF as u64, 8, o.burst, 0).map_err(|e| dev("put burst".into(), e))?;
    let el = t.elapsed();
    let rate = f64::from(o.burst) / el.as_secs_f64();
    let _ = writeln!(run.text, "8 B put_nbi x{} then quiet: {el:?}, {:.0} msg/s", o.burst, rate);
    run.figures.push(Figure { name: "put8_rate".into(), value: rate, unit: "msg/s" });
    // Tell rank 1 what to check, then the done flag last (the QP is in order).
    let last = SIZES[SIZES.len() - 1];
    buf.write_bytes(0, &DONE.to_le_bytes())?;
    // The last put's pattern is at PUT_OFF on rank 1; the flag comes from our word 0,
    // which the pattern no longer needs.
    d.put(1, FLAG_OFF as u64, 0, 8).map_err(|e| dev("done flag".into(), e))?;
    let _ = writeln!(run.text, "rank 0: done flag sent; rank 1 checks the {last}-byte put and the atomic words");
    Ok(())
}

fn rank0_sends(o: &BenchOpts, r: &ProxyRank, run: &mut Run) -> Result<(), ProxyError> {
    let t = o.rank.timeout;
    let mut c = r.cpu.lock().unwrap_or_else(|p| p.into_inner());
    let base = r.buf.base_addr() as u64;
    let lkey = c.lkey;
    let peer = c.peer;
    for &n in &SEND_SIZES {
        let p: Vec<u8> = (0..n).map(|i| send_pattern(n, i)).collect();
        r.buf.write_bytes(LAND_OFF, &p)?;
        let sgl = [Sge { addr: base + LAND_OFF as u64, length: n as u32, lkey }];
        let op = if n == 4096 { WqeOp::SendImm { sgl: &sgl, imm: SEND_IMM } } else { WqeOp::Send { sgl: &sgl } };
        post_wait(&mut c, &op, t, &format!("SEND {n} B"))?;
    }
    let inline: Vec<u8> = (0..INLINE_SEND).map(|i| send_pattern(INLINE_SEND, i)).collect();
    post_wait(&mut c, &WqeOp::SendInline { data: &inline }, t, "inline SEND")?;
    let p: Vec<u8> = (0..WIMM_LEN).map(|i| send_pattern(WIMM_LEN, i)).collect();
    r.buf.write_bytes(LAND_OFF, &p)?;
    let sgl = [Sge { addr: base + LAND_OFF as u64, length: WIMM_LEN as u32, lkey }];
    let remote = RemoteAddr { raddr: peer.addr + WIMM_OFF as u64, rkey: peer.rkey };
    post_wait(&mut c, &WqeOp::RdmaWriteImm { remote, sgl: &sgl, imm: WRITE_IMM }, t, "RDMA WRITE with immediate")?;
    let data: Vec<u8> = (0..INLINE_WRITE).map(|i| send_pattern(INLINE_WRITE, i)).collect();
    let remote = RemoteAddr { raddr: peer.addr + WINL_OFF as u64, rkey: peer.rkey };
    post_wait(&mut c, &WqeOp::RdmaWriteInline { remote, data: &data }, t, "inline RDMA WRITE")?;
    let _ = writeln!(
        run.text,
        "ok - CPU-initiator channel: {} SENDs of 8 B to 1 MiB (one with immediate), an inline SEND, an RDMA WRITE with immediate and an inline RDMA WRITE completed",
        SEND_SIZES.len()
    );
    Ok(())
}

/// Rank 1's side of the sends: each arrival in a receive WQE, checked.
fn rank1_receives(o: &BenchOpts, r: &ProxyRank, run: &mut Run) -> Result<(), ProxyError> {
    let t = o.rank.timeout * 4;
    let mut c = r.cpu.lock().unwrap_or_else(|p| p.into_inner());
    let base = r.buf.base_addr() as u64;
    let lkey = c.lkey;
    let mut expect: Vec<(CqeOpcode, usize, Option<u32>)> =
        SEND_SIZES
            .iter()
            .map(|&n| {
                if n == 4096 { (CqeOpcode::RESP_SEND_IMM, n, Some(SEND_IMM)) } else { (CqeOpcode::RESP_SEND, n, None) }
            })
            .collect();
    expect.push((CqeOpcode::RESP_SEND, INLINE_SEND, None));
    expect.push((CqeOpcode::RESP_WR_IMM, WIMM_LEN, Some(WRITE_IMM)));
    for (k, &(op, n, imm)) in expect.iter().enumerate() {
        r.buf.fill(RECV_OFF, MIB, 0)?;
        let index =
            c.rq.post(&[Sge { addr: base + RECV_OFF as u64, length: MIB as u32, lkey }])
                .map_err(|e| ProxyError::Check(format!("receive WQE: {e}")))?;
        let got = wait_cqe(&mut c.rcq, t, &format!("receive #{k} ({op:?}, {n} B)"))?;
        let ok = matches!(got, Completion::Responder { opcode, wqe_counter, byte_cnt, imm: i, .. }
            if opcode == op && wqe_counter == index && byte_cnt as usize == n && i == imm);
        if !ok {
            return Err(ProxyError::Check(format!(
                "receive #{k}: expected {op:?} of {n} B (immediate {imm:x?}) in receive WQE {index}, got {got:?}"
            )));
        }
        c.rq.complete(index);
        let (at, what) =
            if op == CqeOpcode::RESP_WR_IMM { (WIMM_OFF, "RDMA WRITE with immediate") } else { (RECV_OFF, "SEND") };
        let mut b = vec![0u8; n];
        r.buf.read_bytes(at, &mut b)?;
        if let Some(i) = (0..n).find(|&i| b[i] != send_pattern(n, i)) {
            return Err(ProxyError::Check(format!(
                "{what} of {n} B: byte {i} is {:#04x}, sent {:#04x}",
                b[i],
                send_pattern(n, i)
            )));
        }
    }
    let _ = writeln!(
        run.text,
        "ok - rank 1: {} receive CQEs (SENDs of 8 B to 1 MiB, with immediate, inline; an RDMA WRITE with immediate), opcode, length, immediate and every byte as sent",
        expect.len()
    );
    Ok(())
}

fn rank1_check(o: &BenchOpts, r: &ProxyRank, run: &mut Run) -> Result<(), ProxyError> {
    rank1_receives(o, r, run)?;
    let t0 = Instant::now();
    while u64::from_le_bytes(r.buf.read_array::<8>(FLAG_OFF)?) != DONE {
        if t0.elapsed() > o.rank.timeout * 4 {
            return Err(ProxyError::Check(format!("rank 1: rank 0's done flag never came (QP {:?})", r.qp_state())));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let last = SIZES[SIZES.len() - 1];
    let mut got = vec![0u8; last];
    r.buf.read_bytes(PUT_OFF, &mut got)?;
    if let Some(i) = (0..last).find(|&i| got[i] != put_pattern(last, i)) {
        return Err(ProxyError::Check(format!(
            "rank 1: byte {i} of rank 0's {last}-byte put is {:#04x}, expected {:#04x}",
            got[i],
            put_pattern(last, i)
        )));
    }
    let fa = u64::from_le_bytes(r.buf.read_array::<8>(ATOM_OFF)?);
    let cs = u64::from_le_bytes(r.buf.read_array::<8>(ATOM_OFF + 8)?);
    let sum = ATOMICS * (ATOMICS + 1) / 2;
    if fa != sum || cs != ATOMICS {
        return Err(ProxyError::Check(format!(
            "rank 1: atomic words {fa} and {cs}, expected {sum} (fetch-and-adds) and {ATOMICS} (compare-and-swaps)"
        )));
    }
    let mut w = vec![0u8; INLINE_WRITE];
    r.buf.read_bytes(WINL_OFF, &mut w)?;
    if let Some(i) = (0..INLINE_WRITE).find(|&i| w[i] != send_pattern(INLINE_WRITE, i)) {
        return Err(ProxyError::Check(format!("rank 1: byte {i} of the inline RDMA WRITE is {:#04x}", w[i])));
    }
    let _ = writeln!(
        run.text,
        "ok - rank 1: rank 0's {last}-byte put and inline RDMA WRITE arrived intact; atomic words {fa} and {cs} as the operations require"
    );
    Ok(())
}

fn rank0_fault(o: &BenchOpts, r: &ProxyRank, run: &mut Run, want: Syndrome) -> Result<(), ProxyError> {
    let d = device(r)?;
    let page = r.page.region();
    if want == Syndrome::REMOTE_ACCESS_ERR {
        // A key rank 1 never registered: rxe's keys are index << 8 | key byte.
        gcrb_page::set_key(&page, 1, r.peer.addr, r.peer.rkey ^ 0x00ab_cd00)?; // layout-ok: a wrong rkey on purpose
    } else {
        // Give rank 1 time to leave: its QP is gone, nothing answers.
        std::thread::sleep(Duration::from_secs(2));
    }
    let _ = o;
    r.buf.write_bytes(0, &[0x5a; 64])?; // layout-ok: a fill pattern
    match d.put(1, 0, 0, 64) {
        Ok(()) => Err(ProxyError::Check(format!("the put completed; {want:?} was expected"))),
        Err(e) if e.syndrome() == Some(want) => {
            let _ = writeln!(
                run.text,
                "ok - the device code got an error CQE with syndrome {:#04x} ({want:?}): {e}\n{}",
                want.0,
                gcrb_page::report(&page)
            );
            Ok(())
        }
        Err(e) => Err(ProxyError::Check(format!(
            "expected {want:?} ({:#04x}), the device code got {e}\n{}",
            want.0,
            gcrb_page::report(&page)
        ))),
    }
}
