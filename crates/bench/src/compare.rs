//! `marrow bench compare`: builds measured by turns, figure by figure.
//!
//! A change to the device code is judged by turns on one machine: the
//! builds (or one build's knob settings) run one after the other, several
//! rounds, and each run's `--json` report is kept. The same build's figures
//! move by 5-10% from run to run with the machine's state, so one run of
//! each says little; the rounds side by side show whether a difference is
//! larger than that spread. This reads the reports back and sets each
//! figure's rounds side by side, one column per build, with how many of
//! them met the figure's target.

use crate::error::BenchError;
use crate::figure_report::{FigureReport, Row};
use std::collections::HashMap;

/// One build's runs: its label and its reports, one per round, in order.
#[derive(Debug, Clone)]
pub struct Runs {
    /// What the column is called (`head`, `main`, `POLLS_FIRST=0`).
    pub label: String,
    /// Its reports, round by round.
    pub reports: Vec<FigureReport>,
}

/// One build's values of one figure.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cell {
    /// A value per round that measured the figure: its ratio where it has
    /// one, else the measured value.
    pub values: Vec<f64>,
    /// Rounds whose ratio met the target.
    pub met: usize,
    /// Rounds with a verdict on the target.
    pub judged: usize,
}

/// One figure across the builds.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The part of the run it belongs to.
    pub section: String,
    /// The figure, in the text output's words.
    pub figure: String,
    /// `ratio` where the values are ratios to the floor, else the unit.
    pub unit: String,
    /// The target for the ratio, where there is one.
    pub target: Option<String>,
    /// One cell per build, in the order the builds were given.
    pub cells: Vec<Cell>,
}

/// A figure's key: its section, its name, and which of that name's rows in
/// one report it is (a run may print the same figure more than once).
type Key<'a> = (&'a str, &'a str, usize);

fn keyed(report: &FigureReport) -> impl Iterator<Item = (Key<'_>, &Row)> {
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    report.rows.iter().map(move |row| {
        let n = seen.entry((&row.section, &row.figure)).or_default();
        let key = (row.section.as_str(), row.figure.as_str(), *n);
        *n += 1;
        (key, row)
    })
}

/// The figures of `runs` side by side, in the order they were first
/// measured. Every report must come from the same command; labels must
/// differ; each build needs at least one report.
pub fn compare(runs: &[Runs]) -> Result<Vec<Line>, BenchError> {
    let bench = match runs.iter().flat_map(|r| r.reports.first()).next() {
        Some(first) => first.bench.clone(),
        None => return Err(BenchError::Check("bench compare: no reports to compare".into())),
    };
    for (i, r) in runs.iter().enumerate() {
        if r.reports.is_empty() {
            return Err(BenchError::Check(format!("bench compare: {:?} has no report", r.label)));
        }
        if runs[..i].iter().any(|o| o.label == r.label) {
            return Err(BenchError::Check(format!("bench compare: the label {:?} is given twice", r.label)));
        }
        if let Some(other) = r.reports.iter().find(|x| x.bench != bench) {
            return Err(BenchError::Check(format!(
                "bench compare: {:?} has a report of `{}`, the first one is of `{bench}`",
                r.label, other.bench
            )));
        }
    }
    // Where each figure's line is, by key.
    let mut line_of: HashMap<Key, usize> = HashMap::new();
    let mut lines: Vec<Line> = Vec::new();
    for (col, r) in runs.iter().enumerate() {
        for report in &r.reports {
            for (key, row) in keyed(report) {
                let at = *line_of.entry(key).or_insert_with(|| {
                    lines.push(Line {
                        section: row.section.clone(),
                        figure: row.figure.clone(),
                        unit: if row.ratio.is_some() { "ratio".into() } else { row.measured_unit.clone() },
                        target: row.target.clone(),
                        cells: vec![Cell::default(); runs.len()],
                    });
                    lines.len() - 1
                });
                let cell = &mut lines[at].cells[col];
                cell.values.push(row.ratio.unwrap_or(row.measured));
                if let Some(met) = row.target_met {
                    cell.judged += 1;
                    cell.met += usize::from(met);
                }
            }
        }
    }
    Ok(lines)
}

/// A value as the tables print it: ratios to three decimals, rates in
/// scientific notation, times and bandwidths to two decimals.
fn value(unit: &str, v: f64) -> String {
    if unit == "ratio" {
        format!("{v:.3}")
    } else if v.abs() >= 1e4 {
        format!("{v:.3e}")
    } else {
        format!("{v:.2}")
    }
}

/// One cell: the rounds' values, then how many met the target.
fn cell_text(unit: &str, c: &Cell) -> String {
    if c.values.is_empty() {
        return "–".into();
    }
    let values: Vec<String> = c.values.iter().map(|&v| value(unit, v)).collect();
    let mut s = values.join(" / ");
    if c.judged > 0 {
        s += &format!(" ({}/{} met)", c.met, c.judged);
    }
    s
}

/// Text as one Markdown cell: its own `|` would end the cell, and a line
/// break the row.
fn in_cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The lines as a Markdown table, one column per build; `matching` keeps
/// the lines whose section or figure contains one of its words (all when
/// it is empty).
pub fn markdown(labels: &[String], lines: &[Line], matching: &[String]) -> String {
    let mut out = format!("| Section | Figure (unit, target) | {} |\n", labels.join(" | "));
    out += &format!("|---|---|{}\n", "---|".repeat(labels.len()));
    let keep = |l: &Line| matching.is_empty() || matching.iter().any(|m| l.section.contains(m) || l.figure.contains(m));
    for l in lines.iter().filter(|l| keep(l)) {
        let target = l.target.as_deref().map(|t| format!(", {t}")).unwrap_or_default();
        let cells: Vec<String> = l.cells.iter().map(|c| cell_text(&l.unit, c)).collect();
        out += &format!(
            "| {} | {} ({}{target}) | {} |\n",
            in_cell(&l.section),
            in_cell(&l.figure),
            l.unit,
            cells.join(" | ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure_report::{Collect, MEASURED_OVER_FLOOR, Target};
    use proptest::prelude::*;

    /// A `bench gpu`-shaped report: a posting ratio, a latency, and a
    /// figure printed twice in one section.
    fn run(ratio: f64, us: f64) -> FigureReport {
        let mut c = Collect::new("bench gpu", "H100");
        c.section("shared");
        c.add(
            Row::new("(a) 8 B put_nbi posting, whole GPU, put_nbi_warp", ratio * 1.5e8, "puts/s")
                .floor(1.5e8, "puts/s", "the same stores", ratio, MEASURED_OVER_FLOOR)
                .target(Target::AtLeast(1.0)),
        );
        c.add(Row::new("traced put, WQE written -> doorbell rung", us, "us"));
        c.add(Row::new("traced put, WQE written -> doorbell rung", us + 1.0, "us"));
        c.report
    }

    fn runs(label: &str, reports: Vec<FigureReport>) -> Runs {
        Runs { label: label.into(), reports }
    }

    #[test]
    fn rounds_stand_side_by_side_per_build() {
        let lines = compare(&[
            runs("head", vec![run(0.98, 1.2), run(1.02, 1.3)]),
            runs("main", vec![run(1.15, 1.1), run(1.2, 1.0)]),
        ])
        .unwrap();
        assert_eq!(lines.len(), 3, "{lines:?}");
        let rate = &lines[0];
        assert_eq!((rate.unit.as_str(), rate.target.as_deref()), ("ratio", Some(">= 1")));
        assert_eq!(rate.cells[0], Cell { values: vec![0.98, 1.02], met: 1, judged: 2 });
        assert_eq!(rate.cells[1], Cell { values: vec![1.15, 1.2], met: 2, judged: 2 });
        // The figure printed twice is two lines, each with its own values.
        assert_eq!(lines[1].cells[0].values, [1.2, 1.3]);
        assert_eq!(lines[2].cells[0].values, [2.2, 2.3]);
        assert_eq!((lines[1].unit.as_str(), lines[1].target.as_deref()), ("us", None));
    }

    #[test]
    fn the_table_says_rounds_and_verdicts() {
        let labels = ["head".to_string(), "main".to_string()];
        let lines =
            compare(&[runs("head", vec![run(0.98, 1.2), run(1.02, 1.3)]), runs("main", vec![run(1.15, 1.1)])]).unwrap();
        let t = markdown(&labels, &lines, &[]);
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows[0], "| Section | Figure (unit, target) | head | main |");
        assert_eq!(rows[1], "|---|---|---|---|");
        assert_eq!(
            rows[2],
            "| shared | (a) 8 B put_nbi posting, whole GPU, put_nbi_warp (ratio, >= 1) | 0.980 / 1.020 (1/2 met) | 1.150 (1/1 met) |"
        );
        assert_eq!(rows[3], "| shared | traced put, WQE written -> doorbell rung (us) | 1.20 / 1.30 | 1.10 |");
        // Only the lines asked for.
        let only = markdown(&labels, &lines, &["put_nbi_warp".to_string()]);
        assert_eq!(only.lines().count(), 3, "{only}");
    }

    #[test]
    fn a_figure_one_build_lacks_shows_a_dash() {
        let mut short = run(1.0, 1.0);
        short.rows.truncate(1);
        let lines = compare(&[runs("a", vec![run(1.0, 1.0)]), runs("b", vec![short])]).unwrap();
        let t = markdown(&["a".into(), "b".into()], &lines, &[]);
        assert!(t.lines().nth(3).unwrap().ends_with("| 1.00 | – |"), "{t}");
    }

    #[test]
    fn mixed_commands_twice_a_label_or_nothing_is_refused() {
        let mut other = run(1.0, 1.0);
        other.bench = "bench p2p".into();
        let e = compare(&[runs("a", vec![run(1.0, 1.0)]), runs("b", vec![other])]).unwrap_err().to_string();
        assert!(e.contains("\"b\" has a report of `bench p2p`, the first one is of `bench gpu`"), "{e}");
        let e = compare(&[runs("a", vec![run(1.0, 1.0)]), runs("a", vec![run(1.0, 1.0)])]).unwrap_err().to_string();
        assert!(e.contains("the label \"a\" is given twice"), "{e}");
        let e = compare(&[runs("a", vec![])]).unwrap_err().to_string();
        assert!(e.contains("no reports"), "{e}");
        let e = compare(&[runs("a", vec![run(1.0, 1.0)]), runs("b", vec![])]).unwrap_err().to_string();
        assert!(e.contains("\"b\" has no report"), "{e}");
    }

    fn any_row() -> impl Strategy<Value = Row> {
        let text = "[a-c|\\\n -]{0,4}";
        (text, text, any::<f64>(), proptest::option::of(any::<f64>()), proptest::option::of(any::<bool>())).prop_map(
            |(section, figure, measured, ratio, met)| {
                let mut r = Row::new(figure, measured, "us").in_section(&section);
                r.ratio = ratio;
                r.target = met.map(|_| ">= 1".into());
                r.target_met = met;
                r
            },
        )
    }

    proptest! {
        /// Any rows (NaN, infinities, `|` in names, repeated figures, rows
        /// one build lacks): no panic, one line per distinct figure, every
        /// row counted once, and a table row per line.
        #[test]
        fn any_reports_make_a_table(builds in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any_row(), 0..8), 1..3), 1..4)) {
            let runs: Vec<Runs> = builds
                .into_iter()
                .enumerate()
                .map(|(i, reports)| Runs {
                    label: format!("b{i}"),
                    reports: reports.into_iter().map(|rows| FigureReport { bench: "bench gpu".into(), device: String::new(), rows }).collect(),
                })
                .collect();
            let lines = compare(&runs).unwrap();
            let mut keys = std::collections::HashSet::new();
            for r in &runs {
                for report in &r.reports {
                    keys.extend(keyed(report).map(|(k, _)| k));
                }
            }
            prop_assert_eq!(lines.len(), keys.len());
            for (col, r) in runs.iter().enumerate() {
                let rows: usize = r.reports.iter().map(|x| x.rows.len()).sum();
                prop_assert_eq!(lines.iter().map(|l| l.cells[col].values.len()).sum::<usize>(), rows);
            }
            let labels: Vec<String> = runs.iter().map(|r| r.label.clone()).collect();
            prop_assert_eq!(markdown(&labels, &lines, &[]).lines().count(), lines.len() + 2);
        }
    }
}
