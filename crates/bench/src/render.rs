//! A [`Report`] as perftest-style text, and as CSV.
//!
//! The text keeps perftest's column headers and order, so an engineer's
//! eye (and scripts that cut columns) finds them where `ib_write_bw` and
//! `ib_write_lat` put them; the floor and the ratio follow as extra columns.

use crate::error::BenchError;
use crate::report::Report;
use serde::Serialize;
use std::fmt::Write as _;

const RULE: &str = "---------------------------------------------------------------------------------------";

/// perftest's layout.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_text(&mut s, r);
    s
}

fn write_text(s: &mut String, r: &Report) -> std::fmt::Result {
    if !r.bandwidth.is_empty() {
        writeln!(s, "{RULE}")?;
        writeln!(s, "                    {} BW Test ({})", r.operation, r.bench)?;
        writeln!(s, " floor: {}", r.bandwidth_floor)?;
        writeln!(s, "{RULE}")?;
        writeln!(
            s,
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]   floor BW average[MB/sec]   ratio"
        )?;
        for b in &r.bandwidth {
            writeln!(
                s,
                " {:<10} {:<14} {:<18.2} {:<20.2} {:<15.6} {:<26.2} {:.3}",
                b.bytes,
                b.iterations,
                b.bw_peak_mb_s,
                b.bw_average_mb_s,
                b.msg_rate_mpps,
                b.floor_bw_average_mb_s,
                b.ratio
            )?;
        }
        writeln!(s, "{RULE}")?;
    }
    if !r.latency.is_empty() {
        writeln!(s, "{RULE}")?;
        writeln!(s, "                    {} Latency Test ({})", r.operation, r.bench)?;
        writeln!(s, " floor: {}", r.latency_floor)?;
        writeln!(s, "{RULE}")?;
        writeln!(
            s,
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]   floor t_typical[usec]   ratio"
        )?;
        for l in &r.latency {
            let t = &l.t;
            writeln!(
                s,
                " {:<6} {:<13} {:<14.2} {:<12.2} {:<18.2} {:<14.2} {:<15.2} {:<22.2} {:<24.2} {:<23.2} {:.3}",
                l.bytes,
                l.iterations,
                t.t_min_us,
                t.t_max_us,
                t.t_typical_us,
                t.t_avg_us,
                t.t_stdev_us,
                t.p99_us,
                t.p99_9_us,
                l.floor_t_typical_us,
                l.ratio
            )?;
        }
        writeln!(s, "{RULE}")?;
    }
    if !r.figures.is_empty() {
        writeln!(s, "{:<58} {:>12} {:>12} {:>7}  {:<16} floor", "figure", "measured", "floor", "ratio", "target")?;
        for f in &r.figures {
            writeln!(
                s,
                "{:<58} {:>12.3e} {:>12.3e} {:>7.3}  {:<16} {} ({})",
                f.name, f.measured, f.floor, f.ratio, f.target, f.floor_name, f.unit
            )?;
        }
    }
    for p in &r.peers {
        let sizes: Vec<String> = p.points.iter().map(|(b, _)| b.to_string()).collect();
        writeln!(s, "peer curve: {} ({}; {} sizes: {})", p.name, p.quantity, p.points.len(), sizes.join(" "))?;
    }
    Ok(())
}

/// One CSV row; a row kind leaves the other kinds' columns empty.
#[derive(Serialize, Default)]
struct CsvRow<'a> {
    kind: &'a str,
    name: &'a str,
    bytes: Option<u64>,
    iterations: Option<u64>,
    bw_peak_mb_s: Option<f64>,
    bw_average_mb_s: Option<f64>,
    msg_rate_mpps: Option<f64>,
    floor_bw_average_mb_s: Option<f64>,
    t_min_us: Option<f64>,
    t_max_us: Option<f64>,
    t_typical_us: Option<f64>,
    t_avg_us: Option<f64>,
    t_stdev_us: Option<f64>,
    p99_us: Option<f64>,
    p99_9_us: Option<f64>,
    floor_t_typical_us: Option<f64>,
    measured: Option<f64>,
    floor: Option<f64>,
    unit: &'a str,
    ratio: f64,
}

/// Every row in one table with a `kind` column (`bw`, `lat`, `figure`).
pub fn csv(r: &Report) -> Result<String, BenchError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for b in &r.bandwidth {
        w.serialize(CsvRow {
            kind: "bw",
            name: &r.operation,
            bytes: Some(b.bytes),
            iterations: Some(b.iterations),
            bw_peak_mb_s: Some(b.bw_peak_mb_s),
            bw_average_mb_s: Some(b.bw_average_mb_s),
            msg_rate_mpps: Some(b.msg_rate_mpps),
            floor_bw_average_mb_s: Some(b.floor_bw_average_mb_s),
            unit: "MB/sec",
            ratio: b.ratio,
            ..CsvRow::default()
        })?;
    }
    for l in &r.latency {
        w.serialize(CsvRow {
            kind: "lat",
            name: &r.operation,
            bytes: Some(l.bytes),
            iterations: Some(l.iterations),
            t_min_us: Some(l.t.t_min_us),
            t_max_us: Some(l.t.t_max_us),
            t_typical_us: Some(l.t.t_typical_us),
            t_avg_us: Some(l.t.t_avg_us),
            t_stdev_us: Some(l.t.t_stdev_us),
            p99_us: Some(l.t.p99_us),
            p99_9_us: Some(l.t.p99_9_us),
            floor_t_typical_us: Some(l.floor_t_typical_us),
            unit: "usec",
            ratio: l.ratio,
            ..CsvRow::default()
        })?;
    }
    for f in &r.figures {
        w.serialize(CsvRow {
            kind: "figure",
            name: &f.name,
            measured: Some(f.measured),
            floor: Some(f.floor),
            unit: &f.unit,
            ratio: f.ratio,
            ..CsvRow::default()
        })?;
    }
    let bytes = w.into_inner().map_err(|e| BenchError::Csv(e.into_error().into()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
