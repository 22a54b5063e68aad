//! perftest's own result tables, read back as peer curves for the plot
//! (`marrow bench softnic -a --plot F.svg --peer FILE`).
//!
//! perftest (github.com/linux-rdma/perftest, `src/perftest_parameters.h`,
//! `RESULT_FMT` and `RESULT_FMT_LAT`, printed by `print_report_bw` and
//! `print_report_lat`) ends each test with a table: a header line starting
//! `#bytes`, one row per message size (one with `-s`, the sweep with `-a`),
//! then a dashed line. The bandwidth tests' columns are `#bytes
//! #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]`
//! (`[Gb/sec]` with `--report_gbits`); the latency tests' `#bytes
//! #iterations t_min[usec] t_max[usec] t_typical[usec] t_avg[usec]
//! t_stdev[usec] 99% percentile[usec] 99.9% percentile[usec]`. The test's
//! title (`RDMA_Write BW Test`) and `Device : mlx5_0` come before the table.
//!
//! Columns are found by name, so older perftests with fewer columns read
//! too. A value perftest could not measure (`inf`, `-nan`: a clock it
//! could not calibrate, as under QEMU's TCG) is left out of the curve.
//! Lines may carry a prefix before `#bytes` (a log's `# `); rows then
//! carry the same prefix.

use crate::report::Series;
use crate::{plot, report::MB};

/// One table of a perftest run.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The test's title line (`RDMA_Write BW Test`), or "" when absent.
    pub title: String,
    /// `Device : …` from the parameters block, or "" when absent.
    pub device: String,
    /// The column the curve takes (`BW average[MB/sec]`, `t_typical[usec]`).
    pub column: String,
    /// The quantity, as [`plot::LATENCY`] or [`plot::BANDWIDTH`].
    pub quantity: &'static str,
    /// The curve's column in each row, and its factor to the quantity's unit.
    col: usize,
    factor: f64,
    /// Every header cell, as perftest printed it.
    pub header: Vec<String>,
    /// Every row, a number per header cell (`inf` and `nan` kept).
    pub rows: Vec<Vec<f64>>,
}

impl Table {
    /// (message size, value in the quantity's unit) of every row with a
    /// whole size and a finite value.
    pub fn points(&self) -> Vec<(u64, f64)> {
        self.sized().map(|(b, v)| (b, v * self.factor)).filter(|p| p.1.is_finite()).collect()
    }

    /// Rows whose value perftest printed as `inf` or `nan`.
    pub fn unmeasured(&self) -> usize {
        self.sized().filter(|(_, v)| !v.is_finite()).count()
    }

    fn sized(&self) -> impl Iterator<Item = (u64, f64)> + '_ {
        self.rows
            .iter()
            .filter(|r| r[0].is_finite() && r[0] >= 1.0 && r[0].fract() == 0.0)
            .map(|r| (r[0] as u64, r[self.col]))
    }

    /// The first row's value in the column whose name starts with `name`
    /// (`t_typical`, `MsgRate`), if the table has both.
    pub fn first(&self, name: &str) -> Option<f64> {
        let c = self.header.iter().position(|h| h.starts_with(name))?;
        self.rows.first().and_then(|r| r.get(c)).copied()
    }
}

/// The first row's `name` column of the first table that has one, as a
/// measured figure: an error says when perftest printed no such table or
/// measured nothing there (`inf`, `nan` or 0: its TSC calibration failed,
/// as under QEMU's TCG).
pub fn first_figure(text: &str, name: &str) -> Result<f64, String> {
    let all = tables(text).map_err(|e| e.to_string())?;
    let v = all.iter().find_map(|t| t.first(name)).ok_or_else(|| format!("no perftest table with {name}"))?;
    if !v.is_finite() || v <= 0.0 {
        return Err(format!(
            "perftest measured nothing ({name} = {v}: its TSC calibration failed, \"Correlation coefficient\" in its output)"
        ));
    }
    Ok(v)
}

/// Why a file holds no table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PerftestError {
    /// No `#bytes` header with a bandwidth or latency column.
    #[error(
        "no perftest result table (a line with `#bytes` and `BW average[MB/sec]`, `BW average[Gb/sec]`, \
         `t_typical[usec]` or `t_avg[usec]`)"
    )]
    NoTable,
}

/// The bandwidth and latency columns the curve may take, best first, with
/// the factor to the quantity's unit (MB/sec as perftest's, 2^20 bytes).
const COLUMNS: [(&str, &str, f64); 4] = [
    ("BW average[MB/sec]", plot::BANDWIDTH, 1.0),
    ("BW average[Gb/sec]", plot::BANDWIDTH, 1e9 / 8.0 / MB),
    ("t_typical[usec]", plot::LATENCY, 1.0),
    ("t_avg[usec]", plot::LATENCY, 1.0),
];

/// Every result table in `text`, in order. Never panics, on any text.
pub fn tables(text: &str) -> Result<Vec<Table>, PerftestError> {
    let lines: Vec<&str> = text.lines().map(|l| l.trim_end_matches('\r')).collect();
    let mut out = Vec::new();
    let (mut title, mut device) = (String::new(), String::new());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if let Some(t) = title_of(line) {
            (title, device) = (t, String::new());
            continue;
        }
        if let Some(d) = device_of(line) {
            device = d;
            continue;
        }
        let Some(at) = line.find("#bytes") else { continue };
        let header = header_columns(&line[at..]);
        let Some((col, name, quantity, factor)) =
            COLUMNS.iter().find_map(|&(name, q, f)| header.iter().position(|h| h == name).map(|c| (c, name, q, f)))
        else {
            continue;
        };
        let mut table = Table {
            title: title.clone(),
            device: device.clone(),
            column: name.into(),
            quantity,
            col,
            factor,
            header: header.clone(),
            rows: Vec::new(),
        };
        while let Some(row) = lines.get(i).and_then(|l| row_values(l.get(at..).unwrap_or(""), header.len())) {
            i += 1;
            table.rows.push(row);
        }
        out.push(table);
    }
    if out.is_empty() { Err(PerftestError::NoTable) } else { Ok(out) }
}

/// The tables of `text` as curves to draw beside ours, each named for
/// where it came from (`source`, a file name) and what it measured.
/// A name that repeats (a server's and a client's table, one test run at
/// several sizes) gets the table's number in the file: `#2`, `#3`, ….
pub fn peer_series(text: &str, source: &str) -> Result<Vec<Series>, PerftestError> {
    let mut out: Vec<Series> = Vec::new();
    for (n, t) in tables(text)?.into_iter().enumerate() {
        let what: Vec<&str> = [t.title.as_str(), t.device.as_str()].into_iter().filter(|s| !s.is_empty()).collect();
        let what = if what.is_empty() { t.column.clone() } else { what.join(", ") };
        let mut name = format!("perftest {what} ({source})");
        if out.iter().any(|s| s.name == name) {
            name = format!("perftest {what} ({source} #{})", n + 1);
        }
        out.push(Series { name, quantity: t.quantity.into(), points: t.points() });
    }
    Ok(out)
}

/// Header cells: separated by two or more blanks, a tab, or a blank before
/// `#`, since the names hold single spaces (`BW peak[MB/sec]`,
/// `99% percentile[usec]`).
fn header_columns(h: &str) -> Vec<String> {
    let mut cols = Vec::new();
    let mut cell = String::new();
    let mut blanks = 0;
    for c in h.chars() {
        if c == ' ' || c == '\t' {
            blanks += if c == '\t' { 2 } else { 1 };
            continue;
        }
        // `#bytes #iterations` in the latency header: one blank, then `#`.
        if (blanks >= 2 || (blanks == 1 && c == '#')) && !cell.is_empty() {
            cols.push(std::mem::take(&mut cell));
        } else if blanks == 1 {
            cell.push(' ');
        }
        blanks = 0;
        cell.push(c);
    }
    if !cell.is_empty() {
        cols.push(cell);
    }
    cols
}

/// A row: exactly `n` numbers (perftest's `inf` and `-nan` included).
fn row_values(line: &str, n: usize) -> Option<Vec<f64>> {
    let v: Vec<f64> = line.split_whitespace().map(|w| w.parse::<f64>().ok()).collect::<Option<_>>()?;
    (v.len() == n && n >= 2).then_some(v)
}

/// `RDMA_Write BW Test`, `Send Latency Test`, … (after any prefix).
fn title_of(line: &str) -> Option<String> {
    let t = line.trim_start_matches(['#', ' ', '\t']).trim();
    (t.ends_with(" Test") && !t.contains(':') && t.len() < 80).then(|| t.to_owned())
}

/// `Dual-port : OFF  Device : rxe0` (tabs between) holds the device name.
fn device_of(line: &str) -> Option<String> {
    let after = &line[line.find("Device ")? + "Device ".len()..];
    let name = after.trim_start().strip_prefix(':')?.split_whitespace().next()?;
    Some(name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `-a` sweep in `RESULT_FMT`'s layout, with `--report_gbits`.
    const GBITS: &str = "\
                    RDMA_Write BW Test
 Dual-port       : OFF          Device         : mlx5_0
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 2          5000             0.08               0.08               5.0
 4          5000             0.16               0.16               5.0
---------------------------------------------------------------------------------------
";

    #[test]
    fn gbits_are_read_in_perftests_mb() {
        let t = tables(GBITS).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].title.as_str(), t[0].device.as_str()), ("RDMA_Write BW Test", "mlx5_0"));
        assert_eq!(t[0].points().len(), 2);
        assert_eq!(t[0].points()[0].0, 2);
        assert!((t[0].points()[1].1 - 0.16e9 / 8.0 / MB).abs() < 1e-9);
    }

    #[test]
    fn the_header_splits_on_runs_of_blanks() {
        assert_eq!(
            header_columns("#bytes #iterations    t_min[usec]   99% percentile[usec]\t99.9% percentile[usec] "),
            ["#bytes", "#iterations", "t_min[usec]", "99% percentile[usec]", "99.9% percentile[usec]"]
        );
    }

    #[test]
    fn the_first_figure_is_read_by_column_name() {
        let lat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]\n 8       1000          2.13           9.54         2.20                2.25\n";
        assert_eq!(first_figure(lat, "t_typical"), Ok(2.20));
        let bw = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 8          5000             9.42               9.38               1.229000\n";
        assert_eq!(first_figure(bw, "MsgRate"), Ok(1.229));
        assert!(first_figure(bw, "t_typical").is_err());
        assert!(first_figure("nothing", "MsgRate").is_err());
        let inf = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]\n 8       1000          inf            inf          inf\n";
        assert!(first_figure(inf, "t_typical").unwrap_err().contains("TSC calibration"));
    }

    #[test]
    fn text_without_a_table_is_refused() {
        assert_eq!(tables("ib_write_bw: command not found\n"), Err(PerftestError::NoTable));
        assert_eq!(tables(" #bytes  #iterations  foo\n 8 1 2\n"), Err(PerftestError::NoTable));
    }

    proptest::proptest! {
        #[test]
        fn any_text_reads_without_panicking(s in "(\\PC|\n|\t| #bytes|  BW average\\[MB/sec\\]|[0-9. ]{1,12}){0,40}") {
            let _ = tables(&s);
        }
    }
}
