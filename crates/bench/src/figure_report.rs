//! The figures of `bench gpu`, `demo --gpu`, `bench p2p` and `bench mlx5`
//! as typed rows, for `--json` and `--csv` (the schema is in the README).
//! Their text output is written beside the rows, line for line as before:
//! it is read against old run logs.
//!
//! A row is collected after its measurement, never inside a timed loop, so
//! collecting costs the figures nothing.

use crate::error::BenchError;
use serde::{Deserialize, Serialize};

/// Everything one run measured, in the order it was measured.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct FigureReport {
    /// Which command (`bench gpu`, `demo --gpu`, `bench p2p`, `bench mlx5`).
    pub bench: String,
    /// What ran it (the GPU's name and architecture, the RDMA device).
    pub device: String,
    /// One row per figure.
    pub rows: Vec<Row>,
}

/// One figure: what was measured, against what, and the target.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Row {
    /// The part of the run (`shared`, `exclusive`, `shared, lazy put_nbi doorbells`, …).
    pub section: String,
    /// What was measured, in the text output's words.
    pub figure: String,
    /// The measured value.
    pub measured: f64,
    /// Its unit (`us`, `ns`, `puts/s`, `GB/s`).
    pub measured_unit: String,
    /// The floor measured in the same run, where the figure has one.
    pub floor: Option<f64>,
    /// The floor's unit.
    pub floor_unit: Option<String>,
    /// What the floor is.
    pub floor_name: Option<String>,
    /// The ratio the text prints, where it prints one.
    pub ratio: Option<f64>,
    /// How the ratio is taken (`measured / floor`, `floor / measured`).
    pub ratio_of: Option<String>,
    /// The project's target for the ratio (`<= 1.3`, `>= 0.8`).
    pub target: Option<String>,
    /// Whether the ratio meets the target; none without a target.
    pub target_met: Option<bool>,
}

/// A target for a ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// The ratio may be at most this (latency: slower than the floor by this much).
    AtMost(f64),
    /// The ratio must be at least this (rates, bandwidth).
    AtLeast(f64),
}

impl Target {
    /// As the text prints it after `target`.
    pub fn text(self) -> String {
        match self {
            Target::AtMost(v) => format!("<= {v}"),
            Target::AtLeast(v) => format!(">= {v}"),
        }
    }

    /// Whether `ratio` meets it.
    pub fn met(self, ratio: f64) -> bool {
        match self {
            Target::AtMost(v) => ratio <= v,
            Target::AtLeast(v) => ratio >= v,
        }
    }
}

impl Row {
    /// A figure without a floor; the section is set when it is collected.
    pub fn new(figure: impl Into<String>, measured: f64, unit: &str) -> Row {
        Row {
            section: String::new(),
            figure: figure.into(),
            measured,
            measured_unit: unit.into(),
            floor: None,
            floor_unit: None,
            floor_name: None,
            ratio: None,
            ratio_of: None,
            target: None,
            target_met: None,
        }
    }

    /// The floor and the ratio as the text computes it (`ratio_of` says how).
    pub fn floor(mut self, floor: f64, unit: &str, name: impl Into<String>, ratio: f64, ratio_of: &str) -> Row {
        self.floor = Some(floor);
        self.floor_unit = Some(unit.into());
        self.floor_name = Some(name.into());
        self.ratio = Some(ratio);
        self.ratio_of = Some(ratio_of.into());
        self
    }

    /// The target for the ratio, and whether it is met (not without a ratio).
    pub fn target(mut self, t: Target) -> Row {
        self.target = Some(t.text());
        self.target_met = self.ratio.map(|r| t.met(r));
        self
    }

    /// In a section of its own choosing (rows made in another process).
    pub fn in_section(mut self, section: &str) -> Row {
        self.section = section.into();
        self
    }
}

/// `measured / floor`, the usual way round.
pub const MEASURED_OVER_FLOOR: &str = "measured / floor";
/// `floor / measured`: where the floor is the slower path (`bench gpu`'s (c)).
pub const FLOOR_OVER_MEASURED: &str = "floor / measured";

/// Rows as a run makes them, each in the section current when it came.
#[derive(Debug, Default)]
pub struct Collect {
    section: String,
    /// The report so far.
    pub report: FigureReport,
}

impl Collect {
    /// A run of `bench` on `device`.
    pub fn new(bench: &str, device: impl Into<String>) -> Collect {
        Collect {
            section: String::new(),
            report: FigureReport { bench: bench.into(), device: device.into(), rows: Vec::new() },
        }
    }

    /// The section the next rows belong to.
    pub fn section(&mut self, s: impl Into<String>) {
        self.section = s.into();
    }

    /// The current section.
    pub fn current(&self) -> &str {
        &self.section
    }

    /// Add a row in the current section, unless it names one of its own.
    pub fn add(&mut self, mut row: Row) {
        if row.section.is_empty() {
            row.section.clone_from(&self.section);
        }
        self.report.rows.push(row);
    }
}

/// The report as JSON, pretty, with a final newline.
pub fn json(r: &FigureReport) -> Result<String, BenchError> {
    serde_json::to_string_pretty(r).map(|s| s + "\n").map_err(|e| BenchError::Check(format!("the report as JSON: {e}")))
}

/// The rows as CSV with a header; a missing value is an empty field.
pub fn csv(r: &FigureReport) -> Result<String, BenchError> {
    let mut w = csv::Writer::from_writer(Vec::new());
    for row in &r.rows {
        w.serialize(row)?;
    }
    if r.rows.is_empty() {
        // serialize writes the header with the first row: say the columns anyway.
        w.write_record(COLUMNS)?;
    }
    let bytes = w.into_inner().map_err(|e| BenchError::Csv(e.into_error().into()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The CSV's columns, in order: [`Row`]'s fields.
pub const COLUMNS: [&str; 11] = [
    "section",
    "figure",
    "measured",
    "measured_unit",
    "floor",
    "floor_unit",
    "floor_name",
    "ratio",
    "ratio_of",
    "target",
    "target_met",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures of the shapes `bench gpu` makes, synthetic.
    fn sample() -> FigureReport {
        let mut c = Collect::new("bench gpu", "NVIDIA H200 (sm_90)");
        c.section("shared");
        c.add(
            Row::new("8 B blocking put + completion", 1.9, "us")
                .floor(1.1, "us", "GPU<->CPU ping-pong through host memory", 1.9 / 1.1, MEASURED_OVER_FLOOR)
                .target(Target::AtMost(1.3)),
        );
        c.add(Row::new("traced put, WQE written -> doorbell rung", 0.25, "us"));
        c.section("exclusive");
        c.add(
            Row::new("(a) 8 B put_nbi posting, 1 thread", 4.0e7, "puts/s")
                .floor(4.5e7, "puts/s", "the same stores and fences, no protocol", 4.0e7 / 4.5e7, MEASURED_OVER_FLOOR)
                .target(Target::AtLeast(0.8)),
        );
        c.add(
            Row::new("(c) compute(100) -> 8 B put_nbi, GPU-initiated", 2.0, "us")
                .floor(30.0, "us", "CPU-initiated, \"kernel ends, host posts\"", 15.0, FLOOR_OVER_MEASURED)
                .target(Target::AtLeast(8.0)),
        );
        c.add(Row::new("p2p 8 B round trip", 2.5, "us").in_section("round trip"));
        c.report
    }

    #[test]
    fn targets_say_and_judge() {
        assert_eq!(Target::AtMost(1.3).text(), "<= 1.3");
        assert_eq!(Target::AtLeast(0.95).text(), ">= 0.95");
        // As the text prints its targets: `target >= 8`, not `>= 8.0`.
        assert_eq!(Target::AtLeast(8.0).text(), ">= 8");
        assert!(Target::AtMost(1.3).met(1.3) && !Target::AtMost(1.3).met(1.31));
        assert!(Target::AtLeast(8.0).met(8.0) && !Target::AtLeast(8.0).met(7.9));
        let no_ratio = Row::new("x", 1.0, "us").target(Target::AtMost(1.0));
        assert_eq!((no_ratio.target.as_deref(), no_ratio.target_met), (Some("<= 1"), None));
    }

    #[test]
    fn sections_follow_the_run() {
        let r = sample();
        let s: Vec<&str> = r.rows.iter().map(|x| x.section.as_str()).collect();
        assert_eq!(s, ["shared", "shared", "exclusive", "exclusive", "round trip"]);
        assert_eq!(r.rows[0].target_met, Some(false));
        assert_eq!(r.rows[2].target_met, Some(true));
        assert_eq!(r.rows[3].target_met, Some(true));
    }

    #[test]
    fn json_reads_back_field_for_field() {
        let r = sample();
        let text = json(&r).unwrap();
        let back: FigureReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["bench"], "bench gpu");
        assert_eq!(v["device"], "NVIDIA H200 (sm_90)");
        let row = &v["rows"][0];
        let keys: Vec<&str> = row.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want = COLUMNS.to_vec();
        want.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, want);
        assert_eq!(row["section"], "shared");
        assert_eq!(row["figure"], "8 B blocking put + completion");
        assert_eq!(row["measured"], 1.9);
        assert_eq!(row["measured_unit"], "us");
        assert_eq!(row["floor"], 1.1);
        assert_eq!(row["floor_unit"], "us");
        assert_eq!(row["floor_name"], "GPU<->CPU ping-pong through host memory");
        assert_eq!(row["ratio"], 1.9 / 1.1);
        assert_eq!(row["ratio_of"], "measured / floor");
        assert_eq!(row["target"], "<= 1.3");
        assert_eq!(row["target_met"], false);
        // A figure without a floor says so with nulls, not zeros.
        let bare = &v["rows"][1];
        for k in ["floor", "floor_unit", "floor_name", "ratio", "ratio_of", "target", "target_met"] {
            assert!(bare[k].is_null(), "{k}: {bare}");
        }
    }

    #[test]
    fn csv_reads_back_column_for_column() {
        let r = sample();
        let text = csv(&r).unwrap();
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let headers = rd.headers().unwrap().clone();
        assert_eq!(headers.iter().collect::<Vec<_>>(), COLUMNS);
        let recs: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        assert_eq!(recs.len(), r.rows.len());
        for (rec, row) in recs.iter().zip(&r.rows) {
            let text = |i: usize| rec[i].to_string();
            let num = |i: usize| (!rec[i].is_empty()).then(|| rec[i].parse::<f64>().unwrap());
            let opt = |i: usize| (!rec[i].is_empty()).then(|| text(i));
            assert_eq!(text(0), row.section);
            assert_eq!(text(1), row.figure);
            assert_eq!(num(2), Some(row.measured));
            assert_eq!(text(3), row.measured_unit);
            assert_eq!(num(4), row.floor);
            assert_eq!(opt(5), row.floor_unit);
            assert_eq!(opt(6), row.floor_name);
            assert_eq!(num(7), row.ratio);
            assert_eq!(opt(8), row.ratio_of);
            assert_eq!(opt(9), row.target);
            assert_eq!(opt(10).map(|b| b.parse::<bool>().unwrap()), row.target_met);
            // And as typed values again.
            let back: Row = rec.deserialize(Some(&headers)).unwrap();
            assert_eq!(&back, row);
        }
        // The quoted floor name survived the quoting.
        assert_eq!(&recs[3][6], "CPU-initiated, \"kernel ends, host posts\"");
    }

    #[test]
    fn an_empty_report_still_names_its_columns() {
        let text = csv(&FigureReport::default()).unwrap();
        assert_eq!(text.trim_end(), COLUMNS.join(","));
    }
}
