//! Runs the engine-rate benchmark long enough to profile (`perf record`).
fn main() {
    let f = marrow_bench::softnic::figures::engine_rate(4096, 300);
    println!("{:.3e} WQE/s (floor {:.3e})", f.rate, f.floor);
}
