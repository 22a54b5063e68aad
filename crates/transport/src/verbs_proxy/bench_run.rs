//! What one rank of `marrow bench verbs` reports: its device, lines and
//! figures. The CPU part (`bench.rs`) and the GPU part (`bench_gpu.rs`)
//! both add to it.

/// One figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// What.
    pub name: String,
    /// Value.
    pub value: f64,
    /// Unit.
    pub unit: &'static str,
}

/// What a rank did.
#[derive(Clone, Debug, Default)]
pub struct Run {
    /// This rank.
    pub rank: usize,
    /// The device and GID index it ran on.
    pub device: (String, u8),
    /// Lines to print.
    pub text: String,
    /// Figures (rank 0).
    pub figures: Vec<Figure>,
}
