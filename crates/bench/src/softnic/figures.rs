//! Benchmarks of the device model, each against a floor measured in the
//! same run on the same shared memory (`marrow bench softnic`, `cargo bench`).
//!
//! - engine rate: 8-byte RDMA_WRITEs executed per second by one engine
//!   thread (the calling thread, running [`marrow_softnic::SoftNic::scan`]), against the
//!   floor of reading each 64-byte WQE and writing a 64-byte CQE through the
//!   same mappings;
//! - bandwidth: 64 KiB RDMA_WRITEs against `memcpy` of 64 KiB between the
//!   same two registered buffers.

use crate::report::FigureRow;
use marrow_mlx5::raw::CompletionMode;
use marrow_mlx5::wqe::{CtrlParams, RemoteAddr, Sge, WqeOp};
use marrow_softnic::cq::CqMode;
use marrow_softnic::pair::{Pair, PairConfig};
use std::time::{Duration, Instant};

/// One measured figure and its floor.
#[derive(Clone, Debug)]
pub struct Figure {
    /// What was measured.
    pub name: &'static str,
    /// The measured rate (operations or bytes per second).
    pub rate: f64,
    /// The floor's rate, same unit.
    pub floor: f64,
    /// Unit of `rate` and `floor`.
    pub unit: &'static str,
    /// What the floor is.
    pub floor_name: &'static str,
    /// The target ratio (rate / floor) or absolute rate the issue sets.
    pub target: &'static str,
}

impl Figure {
    /// `rate / floor`.
    pub fn ratio(&self) -> f64 {
        self.rate / self.floor
    }
}

fn best_of<F: FnMut() -> Duration>(runs: usize, mut f: F) -> Duration {
    (0..runs).map(|_| f()).min().unwrap_or_default()
}

/// Post `n` WQEs (ring permitting) and time one thread scanning until all executed.
fn time_engine(p: &mut Pair, n: usize, op: &WqeOp<'_>, signal_every: usize) -> Duration {
    let quiet = CtrlParams { completion: CompletionMode::CQE_ON_CQE_ERROR, ..CtrlParams::signaled(0, 0) };
    for i in 0..n {
        let c = if (i + 1) % signal_every == 0 { CtrlParams::signaled(0, 0) } else { quiet };
        p.a.sq.post(c, op).expect("ring sized for the batch");
    }
    p.a.sq.ring().expect("doorbell");
    let target = p.a.sq.pi();
    let start = Instant::now();
    loop {
        p.nic.scan();
        if p.nic.hca().qp(p.a.qpn).map(|q| q.sq_ci).unwrap_or(target) == target {
            break;
        }
    }
    let t = start.elapsed();
    // A figure only counts if every WQE executed: no error, no flush.
    let state = p.nic.hca().qp(p.a.qpn).map(|q| q.state).ok();
    assert_eq!(state, Some(marrow_softnic::QpState::Rts), "benchmark WQEs failed: {:?}", p.nic.hca().take_events());
    // Retire everything: the collapsed CQ needs no consumer, the ring does.
    let pi = p.a.sq.pi();
    p.a.sq.complete_through(pi.wrapping_sub(1) as u16, 1);
    t
}

/// 8-byte RDMA_WRITEs per second on one engine thread, and the floor.
pub fn engine_rate(batch: usize, runs: usize) -> Figure {
    let cfg = PairConfig { sq_wqebbs: batch as u32, ncqe: 64, cq_mode: CqMode::Collapsed, ..PairConfig::default() };
    let mut p = Pair::unstarted(cfg).expect("pair");
    let sgl = [Sge { addr: p.a.addr, length: 8, lkey: p.a.lkey }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey }, sgl: &sgl };
    // Every WQE signaled: each writes a CQE, as the floor does.
    let t = best_of(runs, || time_engine(&mut p, batch, &op, 1));
    let rate = batch as f64 / t.as_secs_f64();

    // Floor: read each 64-byte WQEBB from the same ring, write a 64-byte
    // CQE into the same CQ, through the same mappings.
    let (sq, cq) = {
        let hca = p.nic.hca();
        (hca.qp(p.a.qpn).expect("qp").mem.sq, hca.cq(p.a.send_cqn).expect("cq").buf)
    };
    let tf = best_of(runs, || {
        let start = Instant::now();
        let mut wqe = [0u8; 64];
        for i in 0..batch {
            sq.read_bytes(i * 64, &mut wqe).expect("in ring");
            std::hint::black_box(&mut wqe);
            wqe[63] = i as u8;
            cq.write_bytes(0, &wqe).expect("in cq");
        }
        start.elapsed()
    });
    let floor = batch as f64 / tf.as_secs_f64();
    Figure {
        name: "8 B RDMA_WRITE executed, 1 engine thread",
        rate,
        floor,
        unit: "WQE/s",
        floor_name: "read 64 B WQE + write 64 B CQE, same shared memory",
        target: ">= 10 M WQE/s",
    }
}

/// 64 KiB RDMA_WRITE bandwidth against memcpy between the same buffers.
pub fn write_bandwidth(size: usize, batch: usize, runs: usize) -> Figure {
    let cfg =
        PairConfig { sq_wqebbs: batch as u32, buf_len: size, cq_mode: CqMode::Collapsed, ..PairConfig::default() };
    let mut p = Pair::unstarted(cfg).expect("pair");
    p.a.buf.fill(0, size, 0x5a).expect("fill");
    let sgl = [Sge { addr: p.a.addr, length: size as u32, lkey: p.a.lkey }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey }, sgl: &sgl };
    let t = best_of(runs, || time_engine(&mut p, batch, &op, batch));
    let rate = (batch * size) as f64 / t.as_secs_f64();
    let (src, dst) = (p.a.buf, p.b.buf);
    let tf = best_of(runs, || {
        let start = Instant::now();
        for _ in 0..batch {
            marrow_mmio::Region::copy(&src, 0, &dst, 0, size).expect("in bounds");
            std::hint::black_box(&dst);
        }
        start.elapsed()
    });
    let floor = (batch * size) as f64 / tf.as_secs_f64();
    Figure {
        name: "64 KiB RDMA_WRITE, 1 engine thread",
        rate,
        floor,
        unit: "B/s",
        floor_name: "memcpy 64 KiB between the same buffers",
        target: ">= 0.8x memcpy",
    }
}

/// Trace on against trace off for the engine rate: what tracing costs.
pub fn trace_cost(batch: usize, runs: usize) -> (f64, f64) {
    let mut rates = [0.0; 2];
    for (i, on) in [false, true].into_iter().enumerate() {
        let cfg = PairConfig {
            sq_wqebbs: batch as u32,
            cq_mode: CqMode::Collapsed,
            trace: on.then_some(1 << 30),
            ..PairConfig::default()
        };
        let mut p = Pair::unstarted(cfg).expect("pair");
        let sgl = [Sge { addr: p.a.addr, length: 8, lkey: p.a.lkey }];
        let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey }, sgl: &sgl };
        let t = best_of(runs, || time_engine(&mut p, batch, &op, 1));
        rates[i] = batch as f64 / t.as_secs_f64();
    }
    (rates[0], rates[1])
}

impl From<&Figure> for FigureRow {
    fn from(f: &Figure) -> Self {
        FigureRow {
            name: f.name.into(),
            measured: f.rate,
            floor: f.floor,
            ratio: f.ratio(),
            unit: f.unit.into(),
            floor_name: f.floor_name.into(),
            target: f.target.into(),
        }
    }
}

/// `bench softnic`'s figures as report rows: the engine rate, the 64 KiB
/// bandwidth and what tracing costs, each best of `runs`.
pub fn rows(runs: usize) -> Vec<FigureRow> {
    let mut v: Vec<FigureRow> =
        [engine_rate(4096, runs), write_bandwidth(64 << 10, 256, runs)].iter().map(Into::into).collect();
    let (off, on) = trace_cost(4096, runs);
    v.push(FigureRow {
        name: "8 B RDMA_WRITE executed, trace on".into(),
        measured: on,
        floor: off,
        ratio: on / off,
        unit: "WQE/s".into(),
        floor_name: "the same with the trace off".into(),
        target: "-".into(),
    });
    v
}
