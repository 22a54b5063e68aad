//! `cargo bench -p marrow-bench --bench softnic`: the device model's figures, each as a
//! ratio to a floor measured in the same run (see `marrow_bench::softnic::figures`).

fn main() {
    let figures = [
        marrow_bench::softnic::figures::engine_rate(4096, 301),
        marrow_bench::softnic::figures::write_bandwidth(64 << 10, 256, 51),
    ];
    for f in &figures {
        println!(
            "{:<44} {:>14.3e} {:<6} floor {:>14.3e} ({})  ratio {:.2}  target {}",
            f.name,
            f.rate,
            f.unit,
            f.floor,
            f.floor_name,
            f.ratio(),
            f.target
        );
    }
    let (off, on) = marrow_bench::softnic::figures::trace_cost(4096, 301);
    println!("trace off {off:.3e} WQE/s, trace on {on:.3e} WQE/s");
}
