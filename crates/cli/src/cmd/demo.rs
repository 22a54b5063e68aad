//! `marrow demo`: the CPU initiator's demo, or with `--gpu` the device
//! code's checks and benchmarks, with a spinner while it runs.

use super::trace::render_brief;
use crate::args::DemoArgs;
use crate::{EXIT_BAD_INPUT, EXIT_DEMO_FAILED, require_gpus, writeln_or_exit};
use marrow::bench_out::{self, Format};
use marrow::demo::DemoOptions;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

pub(crate) fn run_demo(a: &DemoArgs) -> ExitCode {
    if a.gpu {
        let f = Format::of(a.json, a.csv);
        if let Some(code) = require_gpus(1, f) {
            return code;
        }
        if a.pcap.is_some() && a.wire.is_none() {
            return bench_out::fail(f, "--pcap captures the RoCEv2 wire: it needs --wire udp", EXIT_BAD_INPUT);
        }
        let (mut stdout, mut sink) = (std::io::stdout().lock(), std::io::sink());
        let o: &mut dyn Write = if f.is_text() { &mut stdout } else { &mut sink };
        let result = match a.wire {
            Some(_) => match std::env::current_exe() {
                Ok(exe) => marrow_bench::gpu::run_wire(o, &exe, a.pcap.clone()),
                Err(e) => Err(marrow_bench::BenchError::Output(std::io::Error::new(
                    e.kind(),
                    format!("finding this program to start the peer softnic: {e}"),
                ))),
            },
            None => with_spinner(!f.is_text(), "marrow demo --gpu: the checks, then the benchmarks", || {
                marrow_bench::gpu::run(o, &render_brief)
            }),
        };
        let _ = o.flush();
        return match result {
            Ok(report) => bench_out::print(f, &report),
            Err(e) => bench_out::fail(f, e, 1),
        };
    }
    let opts = DemoOptions {
        quick: a.quick,
        trace_out: a.trace_out.clone(),
        trace_cap: usize::try_from(a.trace_cap).unwrap_or(usize::MAX),
        timeout: Duration::from_millis(a.timeout_ms),
        inject: a.inject,
        wire: a.wire.is_some(),
        pcap: a.pcap.clone(),
        softnic_exe: std::env::current_exe().ok(),
    };
    let mut o = std::io::stdout().lock();
    let mut sink = std::io::sink();
    let text: &mut dyn Write = if a.json { &mut sink } else { &mut o };
    match with_spinner(a.json, "marrow demo: puts, gets, sends and atomics, every byte checked", || {
        marrow::demo::run(&opts, text)
    }) {
        Ok(report) if a.json => match serde_json::to_string_pretty(&report) {
            Ok(j) => {
                writeln_or_exit(&mut o, &j);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: the report as JSON: {e}");
                ExitCode::from(1)
            }
        },
        Ok(_) => ExitCode::SUCCESS,
        // `marrow demo | head`: the reader left; not an error.
        Err(marrow::demo::DemoError::Output(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = o.flush();
            let _ = writeln!(std::io::stderr().lock(), "error: {e}");
            ExitCode::from(EXIT_DEMO_FAILED)
        }
    }
}

/// A spinner with the elapsed time on stderr while `work` runs, for a run
/// whose text is not shown (`--json`, `--csv`: stdout gets the report only
/// at the end); drawn only when stderr is a terminal, as indicatif decides.
fn with_spinner<T>(show: bool, what: &str, work: impl FnOnce() -> T) -> T {
    if !show {
        return work();
    }
    let s = indicatif::ProgressBar::new_spinner();
    s.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("a constant template"),
    );
    s.set_message(what.to_owned());
    s.enable_steady_tick(Duration::from_millis(120));
    let r = work();
    s.finish_and_clear();
    r
}
