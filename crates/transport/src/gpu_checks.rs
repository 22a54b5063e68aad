//! The checks GPU threads run on a channel whose peer is reached over a
//! NIC (the mlx5 backend's `bench mlx5 --gpu`, the verbs bench's `--gpu`):
//! a put of `n` bytes and a get of them back, every byte compared; 8 x 128
//! threads putting 4 x 64 B each; then the 8 B blocking put's latency on
//! the GPU clock. The caller owns the GCRB in GPU memory and reports a
//! failing return code with its decoded state.

use crate::gpu::{Gpu, Grid, RwKernel};
use crate::gpu_memory::DeviceGcrb;
use marrow_mmio::Region;

/// What went wrong, for the caller to word in its own error type.
#[derive(Debug)]
pub enum GpuCheckError {
    /// CUDA refused a launch or a copy.
    Cuda(crate::TransportError),
    /// The device code returned `rc` (a `marrow::E_*` code) in `what`.
    Device { what: String, rc: i32 },
    /// Bytes came back different, or the buffer could not be reached.
    Check(String),
}

/// What the GPU threads did: the lines to print and the latency.
#[derive(Debug)]
pub struct GpuChecked {
    /// One line per check passed and the latency.
    pub lines: Vec<String>,
    /// Mean 8 B blocking put, µs on the GPU clock.
    pub put8_us: f64,
}

/// Run the checks on the channel of `dg`, whose local window is `buf`
/// (its first `n` bytes are overwritten). Each passed check's line starts
/// with `passed` (the caller's convention: `ok - `, or nothing).
pub fn run(
    gpu: &Gpu,
    dg: &DeviceGcrb,
    buf: &Region,
    n: usize,
    iters: u32,
    passed: &str,
) -> Result<GpuChecked, GpuCheckError> {
    let bounds = |e: marrow_mmio::OutOfBounds| GpuCheckError::Check(format!("buffer: {e:?}"));
    let device = |what: &str, rc: i32| GpuCheckError::Device { what: what.into(), rc };
    let p: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(29).wrapping_add(3)).collect();
    buf.write_bytes(0, &p).map_err(bounds)?;
    let rc = gpu.rw(RwKernel::Put, dg.addr, 1, n as u32, 1, Grid::ONE).map_err(GpuCheckError::Cuda)?;
    if rc[0] != 0 {
        return Err(device("GPU put", rc[0]));
    }
    buf.fill(0, n, 0).map_err(bounds)?;
    let rc = gpu.rw(RwKernel::Get, dg.addr, 1, n as u32, 1, Grid::ONE).map_err(GpuCheckError::Cuda)?;
    if rc[0] != 0 {
        return Err(device("GPU get", rc[0]));
    }
    let mut back = vec![0u8; n];
    buf.read_bytes(0, &mut back).map_err(bounds)?;
    if let Some(i) = (0..n).find(|&i| back[i] != p[i]) {
        return Err(GpuCheckError::Check(format!(
            "GPU put then get: byte {i} came back {:#04x}, put {:#04x}",
            back[i], p[i]
        )));
    }
    let mut lines = vec![format!("{passed}GPU thread: put {n} B and got it back: every byte matches")];
    let grid = Grid { blocks: 8, threads: 128 };
    let rcs = gpu.rw(RwKernel::Put, dg.addr, 1, 64, 4, grid).map_err(GpuCheckError::Cuda)?;
    if let Some((t, rc)) = rcs.iter().enumerate().find(|(_, rc)| **rc != 0) {
        return Err(device(&format!("GPU thread {t} of 8 x 128"), *rc));
    }
    lines.push(format!("{passed}GPU 8 x 128 threads x 4 puts of 64 B: all completed"));
    let timed = gpu.put_latency(dg.addr, 1, iters).map_err(GpuCheckError::Cuda)?;
    if timed.rc != 0 {
        return Err(device("GPU put latency", timed.rc));
    }
    let put8_us = timed.total_ns as f64 / f64::from(iters.max(1)) / 1e3;
    lines.push(format!("GPU 8 B blocking put x{iters}: {put8_us:.2} us each (GPU clock)"));
    Ok(GpuChecked { lines, put8_us })
}
