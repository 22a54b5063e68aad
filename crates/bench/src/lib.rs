//! marrow's benchmarks. Every figure is a ratio to a floor measured in the
//! same run on the same memory, so a slower or busier machine moves both.
//!
//! - [`report`]: the rows, in perftest's columns (`ib_write_bw`'s
//!   `#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]`,
//!   `ib_write_lat`'s `t_min t_max t_typical t_avg t_stdev 99% 99.9%`), each
//!   with its floor and ratio; serde for `--json`;
//! - [`latency`]: latencies kept in an HDR histogram;
//! - [`render`]: perftest-style text and CSV;
//! - [`perftest`]: perftest's own result tables, read back as peer curves;
//! - [`plot`]: latency and bandwidth against message size, floor and peers
//!   on the same axes (SVG);
//! - [`softnic`]: the device model's benchmarks (`marrow bench softnic`);
//! - [`gpu`]: `marrow demo --gpu` and `marrow bench gpu`, the device code
//!   in GPU threads against the softnic;
//! - [`p2p`]: `marrow bench p2p`, transport P2P between two GPUs;
//! - [`figure_report`]: those benchmarks' figures (and `bench mlx5`'s) as
//!   typed rows, for `--json` and `--csv`;
//! - [`compare`]: `marrow bench compare`, runs of several builds taken by
//!   turns, figure by figure.

pub mod compare;
pub mod error;
pub mod figure_report;
pub mod gpu;
pub mod gpu_rows;
pub mod latency;
pub mod p2p;
pub mod perftest;
pub mod placement;
pub mod plot;
pub mod render;
pub mod report;
pub mod softnic;

pub use error::BenchError;
pub use figure_report::FigureReport;
pub use report::Report;
