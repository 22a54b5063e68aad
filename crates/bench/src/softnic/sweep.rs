//! perftest's `-a` on the device model: RDMA_WRITE bandwidth and latency
//! for every power of two from 2 B to 8 MiB, the engine running in the
//! calling thread ([`marrow_softnic::SoftNic::scan`]), so the figure is the
//! model's own cost and not a scheduler's.
//!
//! Floors, timed in the same run, alternating with the measurement at each
//! size, on the same shared memory:
//! - bandwidth: `memcpy` of the message between the same two registered
//!   buffers, as many times;
//! - latency: what one WRITE moves at least: read the 64 B WQE from the
//!   ring, copy the message, write a 64 B CQE.
//!
//! Before each size the target is zeroed and the source filled with a
//! pattern of that size; the row counts only if every target byte then
//! equals the source's.

use crate::error::BenchError;
use crate::latency::Latency;
use crate::report::{BwRow, LatRow, MB, Report};
use marrow_softnic::QpState;
use marrow_softnic::cq::CqMode;
use marrow_softnic::pair::{Pair, PairConfig};
use std::time::{Duration, Instant};

/// WQEBBs of the ring: the bandwidth batch.
const RING: u32 = 256;
/// How long one batch or one WRITE may take before the sweep reports the
/// engine's state instead of waiting on.
const DEADLINE: Duration = Duration::from_secs(20);
/// Bandwidth iterations at any size, however few bytes `bw_bytes` allows.
const MIN_BW_ITERS: usize = 16;

/// What to sweep.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Message sizes, in bytes.
    pub sizes: Vec<usize>,
    /// Bandwidth iterations per size (perftest's default: 5000), fewer
    /// for large sizes: at most `bw_bytes` in all, and never under 16.
    pub bw_iters: usize,
    /// Bytes one bandwidth row moves at most.
    pub bw_bytes: usize,
    /// Latency samples per size (perftest's default: 1000).
    pub lat_iters: usize,
}

impl SweepOptions {
    /// perftest's `-a`: 2 B to 8 MiB.
    pub fn all_sizes() -> Vec<usize> {
        (1..=23).map(|k| 1usize << k).collect()
    }

    /// perftest's defaults over `sizes`.
    pub fn perftest(sizes: Vec<usize>) -> SweepOptions {
        SweepOptions { sizes, bw_iters: 5000, bw_bytes: 256 << 20, lat_iters: 1000 }
    }
}

/// Run the sweep; `progress` hears each size as it finishes.
pub fn sweep(o: &SweepOptions, progress: &mut dyn FnMut(&str)) -> Result<Report, BenchError> {
    let max = o.sizes.iter().copied().max().ok_or_else(|| BenchError::BadInput("no message size to sweep".into()))?;
    if o.sizes.iter().any(|&s| s == 0 || s > 1 << 30) {
        return Err(BenchError::BadInput("message sizes must be 1 B to 1 GiB".into()));
    }
    let cfg =
        PairConfig { sq_wqebbs: RING, ncqe: 64, buf_len: max, cq_mode: CqMode::Collapsed, ..PairConfig::default() };
    let mut p = Pair::unstarted(cfg)?;
    let mut r = Report {
        bench: "softnic, 1 engine thread".into(),
        operation: "RDMA_Write".into(),
        bandwidth_floor: "memcpy of the message between the same registered buffers".into(),
        latency_floor: "read 64 B WQE + copy the message + write 64 B CQE, same shared memory".into(),
        ..Report::default()
    };
    for &size in &o.sizes {
        let iters = o.bw_iters.min((o.bw_bytes / size).max(MIN_BW_ITERS)).max(1);
        prepare(&p, size)?;
        let bw = bandwidth(&mut p, size, iters)?;
        check(&p, size)?;
        let floor = bandwidth_floor(&p, size, iters)?;
        r.bandwidth.push(BwRow { floor_bw_average_mb_s: floor, ratio: bw.bw_average_mb_s / floor, ..bw });
        prepare(&p, size)?;
        let lat = latency(&mut p, size, o.lat_iters.max(1))?;
        check(&p, size)?;
        let floor = latency_floor(&p, size, o.lat_iters.max(1))?;
        let floor_t = floor.summary().t_typical_us;
        let t = lat.summary();
        r.latency.push(LatRow {
            bytes: size as u64,
            iterations: lat.len(),
            t,
            floor_t_typical_us: floor_t,
            ratio: t.t_typical_us / floor_t,
        });
        progress(&format!("{size} B done"));
    }
    Ok(r)
}

/// Target zeroed, source a pattern that differs per size.
fn prepare(p: &Pair, size: usize) -> Result<(), BenchError> {
    p.b.buf.fill(0, size, 0)?;
    let pattern: Vec<u8> = (0..size).map(|i| (i as u32).wrapping_mul(31).wrapping_add(size as u32) as u8 | 1).collect();
    p.a.buf.write_bytes(0, &pattern)?;
    Ok(())
}

/// Every target byte equals the source's.
fn check(p: &Pair, size: usize) -> Result<(), BenchError> {
    let (mut src, mut dst) = (vec![0u8; size], vec![0u8; size]);
    p.a.buf.read_bytes(0, &mut src)?;
    p.b.buf.read_bytes(0, &mut dst)?;
    match src.iter().zip(&dst).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(offset) => Err(BenchError::Data { size, offset, got: dst[offset], want: src[offset] }),
    }
}

/// Post `n` WRITEs of `size` (the last signaled), ring once, and run the
/// engine until all executed; the time from the first post.
fn batch(p: &mut Pair, size: usize, n: usize, what: &str) -> Result<Duration, BenchError> {
    let start = Instant::now();
    super::post_writes(p, size, n).map_err(|e| BenchError::Post { what: what.into(), detail: format!("{e:?}") })?;
    let target = p.a.sq.pi();
    loop {
        p.nic.scan();
        let (ci, state) = p.nic.hca().qp(p.a.qpn).map(|q| (q.sq_ci, q.state))?;
        if ci == target && state == QpState::Rts {
            break;
        }
        if state != QpState::Rts || start.elapsed() > DEADLINE {
            let events = format!("{:?}", p.nic.hca().take_events());
            return Err(BenchError::Stalled {
                what: what.into(),
                posted: target,
                done: ci,
                waited: start.elapsed(),
                state: format!("{state:?}"),
                events,
            });
        }
    }
    let t = start.elapsed();
    // The collapsed CQ needs no consumer; the ring needs its slots back.
    let pi = p.a.sq.pi();
    p.a.sq.complete_through(pi.wrapping_sub(1) as u16, 1);
    Ok(t)
}

fn bandwidth(p: &mut Pair, size: usize, iters: usize) -> Result<BwRow, BenchError> {
    let (mut left, mut total, mut peak) = (iters, Duration::ZERO, 0.0f64);
    while left > 0 {
        let n = left.min(RING as usize);
        let t = batch(p, size, n, &format!("{size} B RDMA_WRITE bandwidth"))?;
        peak = peak.max((n * size) as f64 / t.as_secs_f64());
        total += t;
        left -= n;
    }
    let secs = total.as_secs_f64();
    Ok(BwRow {
        bytes: size as u64,
        iterations: iters as u64,
        bw_peak_mb_s: peak / MB,
        bw_average_mb_s: (iters * size) as f64 / secs / MB,
        msg_rate_mpps: iters as f64 / secs / 1e6,
        floor_bw_average_mb_s: 0.0,
        ratio: 0.0,
    })
}

fn bandwidth_floor(p: &Pair, size: usize, iters: usize) -> Result<f64, BenchError> {
    let start = Instant::now();
    for _ in 0..iters {
        marrow_mmio::Region::copy(&p.a.buf, 0, &p.b.buf, 0, size)?;
        std::hint::black_box(&p.b.buf);
    }
    Ok((iters * size) as f64 / start.elapsed().as_secs_f64() / MB)
}

fn latency(p: &mut Pair, size: usize, iters: usize) -> Result<Latency, BenchError> {
    let mut l = Latency::new();
    let what = format!("{size} B RDMA_WRITE latency");
    for _ in 0..iters {
        l.record(batch(p, size, 1, &what)?);
    }
    Ok(l)
}

fn latency_floor(p: &Pair, size: usize, iters: usize) -> Result<Latency, BenchError> {
    let (sq, cq) = {
        let hca = p.nic.hca();
        (hca.qp(p.a.qpn)?.mem.sq, hca.cq(p.a.send_cqn)?.buf)
    };
    let mut l = Latency::new();
    let mut wqe = [0u8; 64];
    for i in 0..iters {
        let start = Instant::now();
        sq.read_bytes((i % RING as usize) * 64, &mut wqe)?;
        std::hint::black_box(&mut wqe);
        marrow_mmio::Region::copy(&p.a.buf, 0, &p.b.buf, 0, size)?;
        wqe[63] = i as u8;
        cq.write_bytes(0, &wqe)?;
        l.record(start.elapsed());
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_sweep_moves_every_byte_and_fills_every_column() {
        let o = SweepOptions { sizes: vec![2, 4096, 1 << 20], bw_iters: 300, bw_bytes: 8 << 20, lat_iters: 50 };
        let r = sweep(&o, &mut |_| {}).unwrap();
        assert_eq!(r.bandwidth.iter().map(|b| b.bytes).collect::<Vec<_>>(), [2, 4096, 1 << 20]);
        assert_eq!(r.latency.len(), 3);
        for b in &r.bandwidth {
            assert!(b.bw_peak_mb_s >= b.bw_average_mb_s * 0.999 && b.bw_average_mb_s > 0.0, "{b:?}");
            assert!(b.floor_bw_average_mb_s > 0.0 && b.ratio > 0.0, "{b:?}");
            assert!((b.msg_rate_mpps * 1e6 * b.bytes as f64 / MB - b.bw_average_mb_s).abs() < b.bw_average_mb_s * 1e-6);
        }
        // 1 MiB: bw_bytes allows 8 messages, but every size gets at least 16.
        assert_eq!(r.bandwidth[2].iterations, MIN_BW_ITERS as u64);
        for l in &r.latency {
            assert_eq!(l.iterations, 50);
            assert!(l.t.t_min_us <= l.t.t_typical_us && l.t.t_typical_us <= l.t.t_max_us, "{l:?}");
        }
    }

    #[test]
    fn no_size_or_a_zero_size_is_refused() {
        let o = SweepOptions::perftest(vec![]);
        assert!(matches!(sweep(&o, &mut |_| {}), Err(BenchError::BadInput(_))));
        let o = SweepOptions::perftest(vec![0]);
        assert!(matches!(sweep(&o, &mut |_| {}), Err(BenchError::BadInput(_))));
    }
}
