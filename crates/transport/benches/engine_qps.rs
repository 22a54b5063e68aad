//! `cargo bench -p marrow-transport --bench engine_qps`: the 8 B blocking
//! put from a CPU thread running the device code, while the engine also
//! serves 31 or 255 idle QPs, each as a ratio to the 1-QP figure of the
//! same run (the CPU twin of `marrow bench gpu`'s QP rows). Rounds take
//! turns between the QP counts, and the median of each is kept.

use marrow_transport::cpu::Device;
use marrow_transport::{World, WorldConfig};
use std::time::Instant;

const COUNTS: [usize; 3] = [1, 32, 256];
const PUTS: u32 = 2000;
const ROUNDS: usize = 15;

fn world(qps: usize) -> World {
    World::new(WorldConfig { extra_channels: qps - 1, sq_wqebbs: 1024, ncqe: 1024, trace: false, ..Default::default() })
        .expect("a softnic world")
}

/// Mean ns of one blocking put over `PUTS` puts.
fn round(w: &World) -> f64 {
    let dev = Device::new(&w.channels[0]);
    let t = Instant::now();
    for _ in 0..PUTS {
        dev.put(1, 0, 0, 8).unwrap_or_else(|e| panic!("{e}\n{}", w.channels[0].report()));
    }
    t.elapsed().as_nanos() as f64 / f64::from(PUTS)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let worlds: Vec<World> = COUNTS.iter().map(|&n| world(n)).collect();
    for w in &worlds {
        round(w); // warm up
    }
    let mut ns = vec![Vec::new(); COUNTS.len()];
    for _ in 0..ROUNDS {
        for (k, w) in worlds.iter().enumerate() {
            ns[k].push(round(w));
        }
    }
    let m: Vec<f64> = ns.iter_mut().map(|v| median(v)).collect();
    for (k, n) in COUNTS.iter().enumerate() {
        println!(
            "8 B blocking put, CPU device code, {n:>3} QPs on the engine: {:>8.0} ns  ratio to 1 QP {:.2}",
            m[k],
            m[k] / m[0]
        );
    }
}
