//! `marrow`: command-line tools for the marrow mlx5 stack.

mod args;

use args::{
    BenchCmd, Cli, Cmd, DecodeArgs, DemoArgs, DoctorArgs, InteropCmd, InteropHostArgs, SoftnicArgs, TraceCmd,
    TraceShowArgs, TraceStatsArgs,
};
use clap::{CommandFactory, Parser};
use marrow::bench_out::{self, Format};
use marrow::decode::{Options, StreamError, decode_stream};
use marrow::demo::DemoOptions;
use marrow::hexin::InputFormat;
use marrow::model::ErrorAt;
use marrow::print::DecodeWriter;
use marrow::trace::{Detail, Filter, ShowOptions};
use std::io::{Read, Write};
use std::path::PathBuf;
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

/// Success, or where a trace is damaged (`message`, file offset) and how many
/// records came before it, on stderr, as bad input.
fn damage_exit(name: &str, damage: Option<(&str, usize)>, records_before: impl std::fmt::Display) -> ExitCode {
    match damage {
        None => ExitCode::SUCCESS,
        Some((message, offset)) => {
            let _ = writeln!(
                std::io::stderr().lock(),
                "error: {name}: {message} (file offset {offset:#x}); the {records_before} records before it were read"
            );
            ExitCode::from(EXIT_BAD_INPUT)
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

/// How `bench softnic` prints and what it draws.
struct BenchOutput {
    json: bool,
    csv: bool,
    plot: Option<PathBuf>,
    /// perftest outputs to draw beside ours.
    peers: Vec<PathBuf>,
}

fn run_bench_softnic(
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

fn run_demo(a: &DemoArgs) -> ExitCode {
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

/// A trace file, buffered, with its name escaped for the terminal; a file
/// that cannot be opened is said on stderr, as bad input.
fn open_trace(path: &std::path::Path) -> Result<(String, std::io::BufReader<std::fs::File>), ExitCode> {
    let name = marrow::print::escape_path(path);
    match std::fs::File::open(path) {
        Ok(f) => Ok((name, std::io::BufReader::with_capacity(1 << 16, f))),
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "error: cannot read {name}: {e}");
            Err(ExitCode::from(EXIT_BAD_INPUT))
        }
    }
}

fn run_trace_stats(a: &TraceStatsArgs) -> ExitCode {
    let (name, file) = match open_trace(&a.file) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let s = marrow::trace_stats::stats(file);
    let text = if a.json {
        format!("{}\n", marrow::trace_stats::render_json(&s, &name))
    } else {
        marrow::trace_stats::render_text(&s, &name)
    };
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "error: writing the output: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    }
    damage_exit(&name, s.damage.as_ref().map(|d| (d.message.as_str(), d.offset)), s.records)
}

fn run_trace_show(a: &TraceShowArgs) -> ExitCode {
    let (name, file) = match open_trace(&a.file) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let opts = ShowOptions {
        filter: Filter {
            qps: a.qp.clone(),
            opcodes: a.opcode.clone(),
            errors: a.errors,
            kinds: a.kind.clone(),
            limit: a.limit,
            since: a.since,
            until: a.until,
            around: a.around.map(|n| Filter::around(n, a.context)),
        },
        detail: if a.brief {
            Detail::Brief
        } else if a.full {
            Detail::Full
        } else {
            Detail::Normal
        },
        json: a.json,
        tail: a.tail,
    };
    let mut o = std::io::BufWriter::new(std::io::stdout().lock());
    let shown = match marrow::trace::show(file, &opts, &mut o) {
        Ok(s) => s,
        // `marrow trace show ... | head`: the reader left; not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "error: writing the output: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    if !a.json {
        let _ = writeln!(o, "{}", marrow::trace::trailer(&shown, &name, a.limit));
    }
    let _ = o.flush();
    damage_exit(&name, shown.damage.as_ref().map(|d| (d.message.as_str(), d.offset)), shown.total)
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

/// Bytes of `decode`'s input read before deciding what it is: an input that
/// ends within them is decoded whole, with its length known up front.
const DECODE_WINDOW: usize = 64 << 10;
/// The most `decode --pcie` reads: a configuration space is at most 4 KiB,
/// and an `lspci -xxxx` dump of every function of a large host a few MiB.
const MAX_PCIE_INPUT: u64 = 64 << 20;

/// The input file (or standard input) and its name for messages.
fn open_source(file: Option<&PathBuf>) -> Result<(Box<dyn Read>, String), ErrorAt> {
    match file {
        Some(p) if p.as_os_str() != "-" => {
            let name = marrow::print::escape_path(p);
            let f = std::fs::File::open(p)
                .map_err(|e| ErrorAt { error: format!("cannot read {name}: {e}"), offset: None })?;
            Ok((Box::new(f), name))
        }
        _ => Ok((Box::new(std::io::stdin()), "<stdin>".into())),
    }
}

/// All of `src` for `decode --pcie`, or an error naming the cap it passes.
fn read_pcie_input(src: impl Read, cap: u64, source: &str) -> Result<Vec<u8>, ErrorAt> {
    let mut raw = Vec::new();
    src.take(cap + 1)
        .read_to_end(&mut raw)
        .map_err(|e| ErrorAt { error: format!("cannot read {source}: {e}"), offset: None })?;
    if raw.len() as u64 > cap {
        return Err(ErrorAt {
            error: format!("{source} is longer than {cap} bytes ({} MiB), the most decode --pcie reads", cap >> 20),
            offset: None,
        });
    }
    Ok(raw)
}

/// The bytes of `decode`'s input, read through [`marrow::hexin::ByteReader`],
/// with its errors worded for the command line.
struct DecodeInput<R> {
    reader: marrow::hexin::ByteReader<R>,
    source: String,
    format: InputFormat,
    forced: bool,
    /// Reading failed (the error names the input already).
    failed: bool,
}

impl<R: std::io::BufRead> marrow::decode::Source for DecodeInput<R> {
    fn read_into(&mut self, buf: &mut Vec<u8>, max: usize) -> Result<usize, ErrorAt> {
        self.failed = true;
        let n = self.reader.read_into(buf, max).map_err(|e| match e {
            marrow::hexin::InputError::Io(e) => {
                ErrorAt { error: format!("cannot read {}: {e}", self.source), offset: None }
            }
            marrow::hexin::InputError::Hex(e) => {
                let hint = if self.forced { "" } else { " (to read the input as raw bytes, use --input bin)" };
                let what = self.format.noun();
                ErrorAt { error: format!("{} is not valid {what}: {e}{hint}", self.source), offset: Some(e.offset) }
            }
        })?;
        self.failed = false;
        Ok(n)
    }
}

fn run_decode_pcie(src: impl Read, source: &str, json: bool) -> ExitCode {
    let raw = match read_pcie_input(src, MAX_PCIE_INPUT, source) {
        Ok(r) => r,
        Err(e) => return fail(json, &e),
    };
    match marrow::pcie_decode::decode(&raw) {
        Ok(r) => {
            if json {
                let mut j = r.json.clone();
                j["input"] = serde_json::json!(source);
                j["bytes"] = serde_json::json!(raw.len());
                j["errors"] = r.errors.iter().map(|(e, at)| serde_json::json!({ "error": e, "offset": at })).collect();
                out(&format!("{}\n", serde_json::to_string_pretty(&j).expect("report serializes")));
            } else {
                out(&format!("Input: {source}, {} bytes\n{}", raw.len(), r.text));
            }
            // The decode is on stdout; what is wrong with the input goes to stderr, as `decode`'s does.
            for (e, at) in &r.errors {
                let at = at.map(|a| format!(" (offset {a:#x})")).unwrap_or_default();
                let _ = writeln!(std::io::stderr().lock(), "error: {source}: {}{at}", marrow::print::escape(e));
            }
            if r.clean() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_BAD_INPUT) }
        }
        Err(e) => fail(json, &ErrorAt { error: format!("{source}: {}", marrow::print::escape(&e)), offset: None }),
    }
}

fn run_decode(a: &DecodeArgs) -> ExitCode {
    let (src, source) = match open_source(a.file.as_ref()) {
        Ok(r) => r,
        Err(e) => return fail(a.json, &e),
    };
    if a.pcie {
        return run_decode_pcie(src, &source, a.json);
    }
    // The format is told from the start of the input, which is then read again.
    let mut src = std::io::BufReader::with_capacity(DECODE_WINDOW, src);
    let mut start = Vec::new();
    if let Err(e) = (&mut src).take(DECODE_WINDOW as u64).read_to_end(&mut start) {
        return fail(a.json, &ErrorAt { error: format!("cannot read {source}: {e}"), offset: None });
    }
    let format = a.input.unwrap_or_else(|| marrow::hexin::detect(&start));
    let reader = marrow::hexin::ByteReader::new(std::io::Cursor::new(start).chain(src), format);
    let mut input = DecodeInput { reader, source: source.clone(), format, forced: a.input.is_some(), failed: false };
    let opts = Options { kind: a.kind, ownership: a.ci.zip(a.ncqe) };
    let stdout = std::io::BufWriter::new(std::io::stdout().lock());
    let mut w = DecodeWriter::new(stdout, std::io::stderr(), a.json, source, format.describe());
    let done = match decode_stream(&mut input, &opts, DECODE_WINDOW, &mut w) {
        Ok(()) => w.finish(),
        Err(StreamError::Input(e)) => {
            // Errors of the decode (not of reading) do not name the input yet.
            let e = if input.failed { e } else { ErrorAt { error: format!("{}: {}", input.source, e.error), ..e } };
            let _ = w.fail(&e);
            return ExitCode::from(EXIT_BAD_INPUT);
        }
        Err(StreamError::Output(e)) => Err(e),
    };
    match done {
        Ok(()) if w.bad => ExitCode::from(EXIT_BAD_INPUT),
        Ok(()) => ExitCode::SUCCESS,
        // `marrow decode ... | head`: the reader left; not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr().lock(), "error: writing the output: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// A register trace record as `trace show --brief` prints it: the GPU
/// demo's fault checks show their traces this way.
fn render_brief(i: usize, rec: &marrow_softnic::trace::Record) -> String {
    let v = marrow::trace::view(rec, marrow::trace::Detail::Brief);
    marrow::trace::render_record(i, rec, &v)
}
