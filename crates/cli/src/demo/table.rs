//! The demo's latency table: one row per operation and size, perftest's
//! latency columns, and the rate over the time operations were outstanding.

use marrow_bench::latency::{Latency, LatencySummary};
use std::time::Duration;

/// One row of the table: latencies of every operation of one kind and size.
#[derive(Clone, Debug)]
pub struct Row {
    /// Operation.
    pub op: &'static str,
    /// Bytes per operation.
    pub size: usize,
    /// Post-to-completion time of each operation.
    pub lat: Latency,
    /// Time with operations outstanding, in ns (what the rate is computed over).
    pub busy_ns: u64,
}

impl Row {
    pub(super) fn new(op: &'static str, size: usize) -> Self {
        Row { op, size, lat: Latency::new(), busy_ns: 0 }
    }

    pub(super) fn add(&mut self, lat: Duration) {
        self.lat.record(lat);
        self.busy_ns += lat.as_nanos() as u64;
    }

    /// Operations.
    pub fn ops(&self) -> usize {
        self.lat.len() as usize
    }

    /// Payload bytes moved.
    pub fn bytes(&self) -> u64 {
        (self.ops() * self.size) as u64
    }
}

/// `1 KiB`, `64 B`…
pub fn size_text(n: usize) -> String {
    match n {
        _ if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        _ if n >= 1 << 10 && n.is_multiple_of(1 << 10) => format!("{} KiB", n >> 10),
        _ => format!("{n} B"),
    }
}

/// `512 B`, `1.5 MiB`: one decimal past a KiB.
pub(super) fn bytes_text(n: u64) -> String {
    bytesize::ByteSize(n).display().iec().to_string()
}

/// One row as `--json` gives it: the table's columns, plus perftest's
/// latency columns (`marrow_bench`'s, in µs).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct RowSummary {
    /// Operation.
    pub op: String,
    /// Bytes per operation.
    pub bytes: u64,
    /// Operations.
    pub ops: u64,
    /// Payload bytes moved.
    pub total_bytes: u64,
    /// Latency columns.
    #[serde(flatten)]
    pub t: LatencySummary,
    /// Operations per second while operations were outstanding.
    pub ops_per_s: f64,
    /// Payload MiB per second over the same time.
    pub mib_per_s: f64,
}

fn summary(op: &str, size: u64, lat: &Latency, ops: usize, bytes: u64, busy_ns: u64) -> RowSummary {
    let secs = busy_ns as f64 / 1e9;
    let rate = if secs > 0.0 { ops as f64 / secs } else { 0.0 };
    let mibs = if secs > 0.0 { bytes as f64 / secs / f64::from(1u32 << 20) } else { 0.0 };
    RowSummary {
        op: op.into(),
        bytes: size,
        ops: ops as u64,
        total_bytes: bytes,
        t: lat.summary(),
        ops_per_s: rate,
        mib_per_s: mibs,
    }
}

impl Row {
    /// The row's figures.
    pub fn summary(&self) -> RowSummary {
        summary(self.op, self.size as u64, &self.lat, self.ops(), self.bytes(), self.busy_ns)
    }
}

fn table_cells(size: String, r: &RowSummary) -> [String; 9] {
    [
        r.op.to_string(),
        size,
        r.ops.to_string(),
        bytes_text(r.total_bytes),
        format!("{:.1}", r.t.t_typical_us),
        format!("{:.1}", r.t.p99_us),
        format!("{:.1}", r.t.t_max_us),
        format!("{:.0}", r.ops_per_s),
        format!("{:.1}", r.mib_per_s),
    ]
}

/// The totals line's figures: every row's samples in one histogram.
pub fn total(rows: &[Row]) -> RowSummary {
    let mut all = Latency::new();
    for r in rows {
        all.add(&r.lat);
    }
    let ops = rows.iter().map(Row::ops).sum();
    let bytes = rows.iter().map(Row::bytes).sum();
    let busy = rows.iter().map(|r| r.busy_ns).sum();
    summary("total", 0, &all, ops, bytes, busy)
}

/// The latency table, with a totals line below a rule.
pub fn render_table(rows: &[Row]) -> String {
    use crate::columns::{Align::Left, Align::Right, Columns};
    let figures = ["size", "ops", "bytes", "p50 µs", "p99 µs", "max µs", "ops/s", "MiB/s"].map(|h| (h, Right));
    let mut t = Columns::new(&[[("operation", Left)].as_slice(), &figures].concat());
    for r in rows {
        t.row(table_cells(size_text(r.size), &r.summary()));
    }
    t.row(table_cells(String::new(), &total(rows)));
    let mut lines = t.lines("");
    let rule = "-".repeat(lines.iter().map(|l| l.chars().count()).max().unwrap_or(0));
    // Under the header, and above the totals line.
    lines.insert(lines.len() - 1, rule.clone());
    lines.insert(1, rule);
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_summarise_their_samples_and_sizes_read_as_units() {
        let mut r = Row::new("RDMA_WRITE", 8);
        for us in 1..=100 {
            r.add(Duration::from_micros(us));
        }
        let s = r.summary();
        let near = |a: f64, b: f64| (a - b).abs() < b * 2e-3;
        assert!(near(s.t.t_typical_us, 50.0) && near(s.t.p99_us, 99.0) && near(s.t.t_max_us, 100.0), "{s:?}");
        assert_eq!((s.ops, s.total_bytes), (100, 800));
        // ops/s over the time outstanding: 100 operations in 5050 µs.
        assert!(near(s.ops_per_s, 100.0 / 5050e-6), "{s:?}");
        let t = total(&[r.clone(), r]);
        assert_eq!((t.ops, t.total_bytes), (200, 1600));
        assert_eq!(size_text(8), "8 B");
        assert_eq!(size_text(4096), "4 KiB");
        assert_eq!(size_text(1 << 20), "1 MiB");
    }

    #[test]
    fn byte_counts_keep_one_decimal_past_a_kib() {
        // The text the demo printed before it used bytesize.
        for (n, want) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1536, "1.5 KiB"),
            (3 << 20, "3.0 MiB"),
            ((5 << 30) + (1 << 29), "5.5 GiB"),
        ] {
            assert_eq!(bytes_text(n), want);
        }
    }
}
