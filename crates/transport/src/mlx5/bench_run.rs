//! What one rank of `marrow bench mlx5` reports: its lines and figures.
//! The CPU part (`bench.rs`) and the GPU part (`bench_gpu.rs`) both add
//! to it.

/// One figure a run measured (none of them has a floor yet).
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Which part of the run: the device code on a CPU thread, or in GPU threads.
    pub section: &'static str,
    /// What was measured, in the text's words.
    pub name: String,
    /// The value.
    pub value: f64,
    /// Its unit.
    pub unit: &'static str,
}

/// What one rank did: the lines to print, and the figures in them.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// The lines to print.
    pub text: String,
    /// The device and port the rank ran on.
    pub device: String,
    /// The figures, in the order measured (rank 0 only).
    pub figures: Vec<Figure>,
}
