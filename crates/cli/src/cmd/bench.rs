//! `marrow bench softnic`: the benchmark run, and its figures written as
//! text, JSON, CSV or a plot.

use crate::{EXIT_BAD_INPUT, writeln_or_exit};
use marrow::bench_out::{self, Format};
use std::path::PathBuf;
use std::process::ExitCode;

/// How `bench softnic` prints and what it draws.
pub(crate) struct BenchOutput {
    pub(crate) json: bool,
    pub(crate) csv: bool,
    pub(crate) plot: Option<PathBuf>,
    /// perftest outputs to draw beside ours.
    pub(crate) peers: Vec<PathBuf>,
}

pub(crate) fn run_bench_softnic(
    runs: usize,
    sweep: Option<marrow_bench::softnic::sweep::SweepOptions>,
    wire: bool,
    one_process: bool,
    out: &BenchOutput,
) -> ExitCode {
    use marrow_bench::softnic::{figures, sweep as sw, wire as bench_wire};
    use marrow_bench::{BenchError, Report};
    let f = Format::of(out.json, out.csv);
    // The plot's path is checked before minutes of measuring.
    if let Some(p) = &out.plot
        && let Err(e) = std::fs::File::create(p)
    {
        return bench_out::fail(f, format!("writing the plot to {}: {e}", p.display()), EXIT_BAD_INPUT);
    }
    // So are the peers' files: read and parsed before any measuring.
    let mut peers = Vec::new();
    for p in &out.peers {
        let name = p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned());
        match std::fs::read_to_string(p)
            .map_err(|e| e.to_string())
            .and_then(|text| marrow_bench::perftest::peer_series(&text, &name).map_err(|e| e.to_string()))
        {
            Ok(series) => peers.extend(series),
            Err(e) => return bench_out::fail(f, format!("--peer {}: {e}", p.display()), EXIT_BAD_INPUT),
        }
    }
    let runs = runs.max(1);
    let report = (|| -> Result<Report, BenchError> {
        if wire {
            // Each run moves whole batches through sockets: fewer runs suffice.
            let runs = runs.min(21);
            let exe = match (one_process, std::env::current_exe()) {
                (true, _) => None,
                (false, Ok(exe)) => Some(exe),
                (false, Err(e)) => {
                    return Err(BenchError::Wire(format!(
                        "finding this program to start B's softnic: {e} (--one-process runs without it)"
                    )));
                }
            };
            let f = [
                bench_wire::wire_rate(1024, runs, exe.as_deref()).map_err(|e| BenchError::Wire(e.to_string()))?,
                bench_wire::wire_bandwidth(64 << 10, 64, runs, exe.as_deref())
                    .map_err(|e| BenchError::Wire(e.to_string()))?,
            ];
            return Ok(Report {
                bench: "softnic --wire udp".into(),
                figures: f.iter().map(Into::into).collect(),
                ..Report::default()
            });
        }
        let mut r = match &sweep {
            Some(o) => {
                // On stderr, and drawn only on a terminal: stdout stays the report.
                let bar = indicatif::ProgressBar::new(o.sizes.len() as u64);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} sizes {msg}",
                    )
                    .expect("a constant template"),
                );
                let r = sw::sweep(o, &mut |msg| {
                    bar.inc(1);
                    bar.set_message(msg.to_owned());
                });
                bar.finish_and_clear();
                r?
            }
            None => Report::default(),
        };
        r.figures = figures::rows(runs);
        r.peers = peers;
        Ok(r)
    })();
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            let code = if matches!(e, BenchError::BadInput(_)) { EXIT_BAD_INPUT } else { 1 };
            return bench_out::fail(f, e, code);
        }
    };
    let printed = if out.json {
        serde_json::to_string_pretty(&report).map_err(|e| e.to_string()).map(|s| s + "\n")
    } else if out.csv {
        marrow_bench::render::csv(&report).map_err(|e| e.to_string())
    } else {
        Ok(marrow_bench::render::text(&report))
    };
    match printed {
        Ok(s) => writeln_or_exit(&mut std::io::stdout().lock(), s.trim_end()),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    }
    if let Some(p) = &out.plot {
        if let Err(e) = marrow_bench::plot::svg(&report, p) {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
        eprintln!("plot written to {}", p.display());
    }
    ExitCode::SUCCESS
}
