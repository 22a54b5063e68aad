//! `marrow`: command-line tools for the marrow mlx5 stack.

#![forbid(unsafe_code)]

mod args;
mod cmd;

use args::{BenchCmd, Cli, Cmd, DoctorArgs, InteropCmd, InteropHostArgs, SoftnicArgs, TraceCmd};
use clap::{CommandFactory, Parser};
use cmd::bench::{BenchOutput, run_bench_softnic};
use cmd::decode::run_decode;
use cmd::demo::run_demo;
use cmd::trace::{run_trace_show, run_trace_stats};
use marrow::bench_out::{self, Format};
use marrow::model::ErrorAt;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

/// Exit status of a run that found something wrong with its input.
const EXIT_BAD_INPUT: u8 = 2;
/// Exit status of a demo that failed (timeout, wrong completion, byte mismatch).
const EXIT_DEMO_FAILED: u8 = 1;
/// Missing hardware (no driver, no GPU, no ConnectX) is reported as bad input is.
const EXIT_MISSING_HARDWARE: u8 = 2;

/// `None` when `n` GPUs can be used; otherwise the exit status, the reason
/// on stderr (and as JSON on stdout with `--json`).
fn require_gpus(n: usize, f: Format) -> Option<ExitCode> {
    match marrow_transport::gpu::Gpu::require(n) {
        Ok(()) => None,
        Err(e) => Some(bench_out::fail(f, e, EXIT_MISSING_HARDWARE)),
    }
}

fn run_doctor(a: &DoctorArgs) -> ExitCode {
    let report = match marrow::doctor::run(&a.sysfs_root, &a.proc_root) {
        Ok(r) => r,
        Err(e) => {
            // `decode --json`'s convention: the error as JSON on stdout too.
            return fail(a.json, &ErrorAt { error: format!("marrow doctor: {e}"), offset: None });
        }
    };
    if a.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&report).expect("report serializes")));
    } else {
        out(&marrow::doctor::render_text(&report));
    }
    let all_ok = report.pairs.iter().all(|p| p.verdict == marrow::doctor::pair::Verdict::Ok);
    if all_ok { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn run_interop_host(a: &InteropHostArgs) -> ExitCode {
    let cable = match marrow::port_spec::parse(&format!("frames:{}", a.cable)) {
        Ok(marrow_softnic::rc::port::PortKind::Frames { bind, peer, ip, .. }) => marrow_interop::host::Cable {
            bind,
            peer,
            ip,
            pcap: a.pcap.clone(),
            faults: marrow_softnic::rc::port::WireFaults {
                seed: a.seed,
                drop: a.drop,
                reorder: a.reorder,
                ..Default::default()
            },
        },
        Ok(_) => unreachable!("a frames: spec parses as frames"),
        Err(e) => {
            eprintln!("error: --cable {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let mut o = std::io::stdout();
    match marrow::interop::host(&cable, a.trace.as_deref(), Duration::from_secs(a.deadline), &mut o) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: marrow interop host: {e}");
            ExitCode::from(1)
        }
    }
}

/// `MARROW_LOG` turns on the libraries' debug events (QP transitions,
/// devx mailboxes, daemon requests) on stderr, in tracing's filter syntax:
/// `debug`, or `marrow_softnic=debug,marrow_verbs=info`.
fn init_log() -> Result<(), String> {
    let Some(spec) = std::env::var_os("MARROW_LOG") else { return Ok(()) };
    let spec = spec.to_string_lossy();
    let filter = tracing_subscriber::EnvFilter::try_new(spec.as_ref())
        .map_err(|e| format!("MARROW_LOG={spec:?} is not a log filter (try debug, or marrow_softnic=debug): {e}"))?;
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(true).init();
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = init_log() {
        eprintln!("error: {e}");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    match cli.cmd {
        Cmd::Decode(a) => run_decode(&a),
        Cmd::Demo(a) => run_demo(&a),
        Cmd::Trace(TraceCmd::Show(a)) => run_trace_show(&a),
        Cmd::Trace(TraceCmd::Stats(a)) => run_trace_stats(&a),
        Cmd::Softnic(a) => run_softnic(&a),
        Cmd::Completions { shell } => {
            // Into memory first: the generator panics on a failed write.
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "marrow", &mut text);
            write_stdout(&text, "the completion script")
        }
        Cmd::Man => {
            let mut text = Vec::new();
            match clap_mangen::Man::new(Cli::command()).render(&mut text) {
                Ok(()) => write_stdout(&text, "the manual page"),
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "error: rendering the manual page: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Doctor(a) => run_doctor(&a),
        Cmd::Interop(InteropCmd::Steps) => {
            out(&marrow_interop::matrix::render(&marrow_interop::matrix::default_steps()));
            ExitCode::SUCCESS
        }
        Cmd::Interop(InteropCmd::Host(a)) => run_interop_host(&a),
        Cmd::Bench(BenchCmd::Mlx5(a)) => marrow::mlx5_bench::main(&a),
        Cmd::Bench(BenchCmd::Verbs(a)) => marrow::verbs_bench::main(&a),
        Cmd::Bench(BenchCmd::Softnic {
            runs,
            all,
            size,
            iters,
            lat_iters,
            json,
            csv,
            plot,
            peer,
            wire,
            one_process,
        }) => {
            use marrow_bench::softnic::sweep::SweepOptions;
            let sizes = match (all, size.is_empty()) {
                (true, _) => SweepOptions::all_sizes(),
                (false, true) => vec![8, 65536],
                (false, false) => size,
            };
            let sweep = SweepOptions { bw_iters: iters, lat_iters, ..SweepOptions::perftest(sizes) };
            run_bench_softnic(
                runs,
                wire.is_none().then_some(sweep),
                wire.is_some(),
                one_process,
                &BenchOutput { json, csv, plot, peers: peer },
            )
        }
        Cmd::Bench(BenchCmd::P2p { sweep, json, csv }) => {
            let f = Format::of(json, csv);
            if let Some(code) = require_gpus(2, f) {
                return code;
            }
            let (mut stdout, mut sink) = (std::io::stdout().lock(), std::io::sink());
            let o: &mut dyn Write = if f.is_text() { &mut stdout } else { &mut sink };
            writeln_or_exit(o, "marrow bench p2p: transport P2P between GPU 0 and GPU 1, one process each");
            match marrow_bench::p2p::launcher(o, sweep) {
                Ok(report) => {
                    let _ = writeln!(o, "all P2P checks passed");
                    let _ = o.flush();
                    bench_out::print(f, &report)
                }
                Err(e) => {
                    let _ = o.flush();
                    bench_out::fail(f, e, 1)
                }
            }
        }
        Cmd::Bench(BenchCmd::P2pPe { rank, socket, sweep }) => match marrow_bench::p2p::pe(rank, &socket, sweep) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("PE {rank}: {e}");
                ExitCode::from(1)
            }
        },
        Cmd::Bench(BenchCmd::Compare { runs, matching }) => match marrow::bench_compare::table(&runs, &matching) {
            Ok(table) => bench_out::write_stdout(&table),
            Err(e) => bench_out::fail(Format::Text, e, 2),
        },
        Cmd::Bench(BenchCmd::Gpu { json, csv, doca, doca_only, only, json_out }) => {
            let f = Format::of(json, csv);
            if let Some(code) = require_gpus(1, f) {
                return code;
            }
            let (mut stdout, mut sink) = (std::io::stdout().lock(), std::io::sink());
            let o: &mut dyn Write = if f.is_text() { &mut stdout } else { &mut sink };
            match marrow_bench::gpu::bench(
                o,
                only.unwrap_or_else(marrow_bench::gpu::Parts::all),
                doca.as_deref(),
                doca_only,
            ) {
                Ok(report) => {
                    let _ = o.flush();
                    if let Some(path) = &json_out {
                        let written = marrow_bench::figure_report::json(&report)
                            .map_err(|e| e.to_string())
                            .and_then(|j| std::fs::write(path, j).map_err(|e| format!("{}: {e}", path.display())));
                        if let Err(e) = written {
                            return bench_out::fail(f, format!("--json-out: {e}"), 1);
                        }
                    }
                    bench_out::print(f, &report)
                }
                Err(e) => {
                    let _ = o.flush();
                    bench_out::fail(f, e, 1)
                }
            }
        }
    }
}

/// Write `bytes` to stdout; a reader that left (`| head`) is not an error.
fn write_stdout(bytes: &[u8], what: &str) -> ExitCode {
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: writing {what}: {e}");
            ExitCode::from(1)
        }
    }
}

fn writeln_or_exit(o: &mut dyn Write, s: &str) {
    if writeln!(o, "{s}").is_err() {
        std::process::exit(1);
    }
}

fn run_softnic(a: &SoftnicArgs) -> ExitCode {
    use marrow_softnic::daemon::process::{self, ProcessError, ProcessOptions};
    let opts = ProcessOptions {
        socket: a.socket.clone(),
        engines: a.engines,
        trace: a.trace.clone(),
        trace_every: Duration::from_secs(a.trace_every.max(1)),
        ports: a.ports.clone(),
        pcap: a.pcap.clone(),
    };
    // A status line must never stop the daemon: stderr may be a closed pipe.
    match process::run(&opts, |line| {
        let _ = writeln!(std::io::stderr(), "marrow softnic: {line}");
    }) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(if matches!(e, ProcessError::BadInput(_)) { EXIT_BAD_INPUT } else { 1 })
        }
    }
}

/// Write to stdout; a closed pipe (`marrow decode ... | head`) is not an error.
fn out(s: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(s.as_bytes()).and_then(|()| o.flush());
}

/// Write an `error:` line to stderr.
fn err_line(e: &ErrorAt) {
    let _ = writeln!(std::io::stderr().lock(), "error: {e}");
}

/// Print a run-level error (no decode at all) and return the exit status.
fn fail(json: bool, e: &ErrorAt) -> ExitCode {
    if json {
        out(&format!("{}\n", serde_json::json!({ "error": e.error, "offset": e.offset })));
    }
    err_line(e);
    ExitCode::from(EXIT_BAD_INPUT)
}
