//! Compiles the device code (`kernels/include/marrow/device.h`) for the CPU,
//! so CPU threads run the same posting and polling protocol as GPU threads.

fn main() {
    let kernels = concat!(env!("CARGO_MANIFEST_DIR"), "/../../kernels");
    cc::Build::new()
        .cpp(true)
        .file(format!("{kernels}/cpu/device_cpu.cpp"))
        .file(format!("{kernels}/cpu/device_cpu_general.cpp"))
        .include(format!("{kernels}/include"))
        .flag("-std=c++17")
        .opt_level(2)
        .warnings_into_errors(true)
        .compile("marrow_device_cpu");
    println!("cargo:rerun-if-changed={kernels}/cpu");
    println!("cargo:rerun-if-changed={kernels}/include");
}
