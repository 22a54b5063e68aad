//! One signaled 8 B RDMA_WRITE's round trip from a CPU poster through a
//! softnic engine thread (post, doorbell, the engine's fetch, execution and
//! CQE, the poster's poll), against a ping-pong between two threads through
//! the same kind of shared memory: how much the engine adds to a doorbell's
//! answer, the part of a GPU put's latency that is the softnic's
//! (docs/PERFORMANCE.md). Percentiles over 19000 round trips:
//!   cargo run --release -p marrow-bench --example engine_latency
use marrow_mlx5::wqe::{CtrlParams, RemoteAddr, Sge, WqeOp};
use marrow_softnic::pair::{Pair, PairConfig, Side};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One line of percentiles, in ns.
fn report(what: &str, v: &mut [u64]) {
    v.sort_unstable();
    let at = |p: f64| v[((v.len() - 1) as f64 * p) as usize];
    println!("{what} ns: p10 {} p50 {} p90 {} p99 {}", at(0.1), at(0.5), at(0.9), at(0.99));
}

fn main() {
    let n = 20000;
    let cfg = PairConfig { sq_wqebbs: 256, ncqe: 1024, ..PairConfig::default() };
    let mut p = Pair::unstarted(cfg).expect("pair");
    p.nic.start(1);
    p.nic.set_idle_spin(Duration::from_secs(5));
    let sgl = [Sge { addr: p.a.addr, length: 8, lkey: p.a.lkey }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey }, sgl: &sgl };
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        p.a.sq.post(CtrlParams::signaled(0, 0), &op).expect("post");
        p.a.sq.ring().expect("ring");
        // Pair::wait polls (scanning nothing: the engine thread runs) and
        // reports the QP and CQ decoded if nothing comes.
        let c = p.wait(Side::A, false, Duration::from_secs(5)).expect("the CQE");
        p.a.sq.complete_through(c.wqe_counter(), 1);
        if i >= 1000 {
            lat.push(t.elapsed().as_nanos() as u64);
        }
    }
    report("put round trip", &mut lat);
    drop(p);
    // Floor: ping-pong between two threads through shared memory.
    let shm = marrow_softnic::Shm::create("pp", 4096).expect("shm");
    let region = shm.region();
    let ping = region.atomic_u64(0).unwrap();
    let pong = region.atomic_u64(64).unwrap();
    let stop = AtomicBool::new(false);
    let mut lat = Vec::with_capacity(n);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut last = 0;
            while !stop.load(Ordering::Relaxed) {
                let v = ping.load(Ordering::Acquire);
                if v != last {
                    pong.store(v, Ordering::Release);
                    last = v;
                }
                std::hint::spin_loop();
            }
        });
        for i in 1..=n as u64 {
            let t = Instant::now();
            ping.store(i, Ordering::Release);
            // The clock read as Pair::wait reads it: a read per poll would
            // make the floor slower than the put's wait.
            let mut polls = 0u32;
            while pong.load(Ordering::Acquire) != i {
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(Pair::POLLS_PER_LOOK) {
                    assert!(t.elapsed() < Duration::from_secs(5), "no pong for ping {i} in 5 s");
                }
                std::hint::spin_loop();
            }
            if i > 1000 {
                lat.push(t.elapsed().as_nanos() as u64);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    report("ping-pong", &mut lat);
}
