//! Fill a kernel cache where no GPU is: compile marrow's kernels for an
//! architecture with NVRTC alone and keep the PTX where a GPU run with the
//! same NVRTC and options looks for it (`marrow_transport::kernel_cache`).
//!
//! `cargo run -p marrow-transport --example kernel_cache_fill -- sm_90 [DIR]`
//! (DIR defaults to the cache a GPU run would use here).

use marrow_transport::{gpu, kernel_cache};
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(arch), dir) = (args.next(), args.next()) else {
        eprintln!("usage: kernel_cache_fill sm_XY [DIR]");
        std::process::exit(2);
    };
    let Some(dir) = dir.map(PathBuf::from).or_else(kernel_cache::dir) else {
        eprintln!("kernel_cache_fill: no DIR given and no cache directory ({}=off, or no HOME)", kernel_cache::ENV);
        std::process::exit(2);
    };
    match gpu::precompile(&arch, &dir) {
        Ok((file, secs)) => {
            let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
            println!("{arch}: {bytes} bytes of PTX in {secs:.1} s, kept in {}", file.display());
        }
        Err(e) => {
            eprintln!("kernel_cache_fill: {e}");
            std::process::exit(1);
        }
    }
}
