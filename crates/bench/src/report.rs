//! A benchmark's results: perftest's rows, each with the floor measured in
//! the same run and the ratio, plus single figures. This is the `--json`
//! schema (documented in the README); field names carry their units.
//!
//! Units as perftest's: MB/sec is 2^20 bytes per second (its default
//! `format_factor` 0x100000), Mpps 10^6 messages per second, latencies in
//! microseconds.

use crate::latency::LatencySummary;
use serde::{Deserialize, Serialize};

/// Bytes in perftest's MB.
pub const MB: f64 = (1u64 << 20) as f64;

/// Everything one benchmark run measured.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// Which benchmark (`softnic`, `softnic --wire udp`, …).
    pub bench: String,
    /// The operation timed, in perftest's words (`RDMA_Write`).
    pub operation: String,
    /// What the bandwidth rows' floor is.
    pub bandwidth_floor: String,
    /// What the latency rows' floor is.
    pub latency_floor: String,
    /// `ib_write_bw`-style rows, by message size.
    pub bandwidth: Vec<BwRow>,
    /// `ib_write_lat`-style rows, by message size.
    pub latency: Vec<LatRow>,
    /// Single figures with their floors (engine rate, trace cost, …).
    pub figures: Vec<FigureRow>,
    /// Other stacks' curves to draw beside ours (empty unless a peer ran).
    #[serde(default)]
    pub peers: Vec<Series>,
}

/// One bandwidth row.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct BwRow {
    /// Message size.
    pub bytes: u64,
    /// Messages timed.
    pub iterations: u64,
    /// The best batch's bandwidth.
    pub bw_peak_mb_s: f64,
    /// All bytes over all time.
    pub bw_average_mb_s: f64,
    /// Messages per second, average.
    pub msg_rate_mpps: f64,
    /// The floor's average bandwidth, same size and iterations.
    pub floor_bw_average_mb_s: f64,
    /// `bw_average / floor_bw_average`: 1 is the floor's speed.
    pub ratio: f64,
}

/// One latency row.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct LatRow {
    /// Message size.
    pub bytes: u64,
    /// Samples.
    pub iterations: u64,
    /// perftest's columns.
    #[serde(flatten)]
    pub t: LatencySummary,
    /// The floor's median, same size and iterations.
    pub floor_t_typical_us: f64,
    /// `t_typical / floor_t_typical`: 1 is the floor's latency, above is slower.
    pub ratio: f64,
}

/// A single figure against its floor.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct FigureRow {
    /// What was measured.
    pub name: String,
    /// The measured rate.
    pub measured: f64,
    /// The floor's rate, same unit.
    pub floor: f64,
    /// `measured / floor`.
    pub ratio: f64,
    /// Unit of both.
    pub unit: String,
    /// What the floor is.
    pub floor_name: String,
    /// The target the project set.
    pub target: String,
}

/// A named curve: (message size, value) points.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// `latency_us` or `bandwidth_mb_s`.
    pub quantity: String,
    /// Points by size.
    pub points: Vec<(u64, f64)>,
}
