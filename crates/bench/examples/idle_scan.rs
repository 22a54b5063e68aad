//! How long the engine takes to look at its QPs when none has work: the
//! period at which it looks at a doorbell register again, so on average
//! half of it is how late a doorbell is seen. Five rounds of 2 × 10^6
//! scans of one pair's two QPs, in this thread (no engine thread):
//!   cargo run --release -p marrow-bench --example idle_scan
use marrow_softnic::pair::{Pair, PairConfig};
use std::time::Instant;

fn main() {
    let p = Pair::unstarted(PairConfig::default()).expect("pair");
    let n = 2_000_000;
    for round in 0..5 {
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(p.nic.scan());
        }
        println!("round {round}: {:.1} ns per idle scan of 2 QPs", t.elapsed().as_nanos() as f64 / n as f64);
    }
}
