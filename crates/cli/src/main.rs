//! `marrow`: command-line tools for the marrow mlx5 stack.

use clap::{Args, CommandFactory, Parser, Subcommand};
use marrow::bench_out::{self, Format};
use marrow::decode::{Options, StreamError, decode_stream};
use marrow::demo::{DEFAULT_TRACE_CAP, DemoOptions};
use marrow::hexin::InputFormat;
use marrow::model::{ErrorAt, Kind};
use marrow::print::DecodeWriter;
use marrow::trace::{Detail, Filter, OpcodeMatch, ShowOptions, parse_kind, parse_opcode};
use marrow_softnic::trace::Kind as RecordKind;
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

/// The package version and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("MARROW_GIT_COMMIT"), ")");

#[derive(Parser, Debug)]
#[command(name = "marrow", version = VERSION, about = "Tools for GPU-initiated RDMA on mlx5 (ConnectX) NICs")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Decode a send WQE, CQE, doorbell record or UAR doorbell field by field.
    Decode(DecodeArgs),
    /// Run two RC endpoints on the embedded softnic through every operation,
    /// check every byte, print latencies and the register trace.
    Demo(DemoArgs),
    /// Read softnic register traces.
    #[command(subcommand)]
    Trace(TraceCmd),
    /// Print a completion script for SHELL (bash, zsh, fish, elvish,
    /// powershell) to stdout, e.g. `marrow completions bash >
    /// /etc/bash_completion.d/marrow`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to stdout: `marrow man | man -l -`.
    Man,
    /// Run the softnic device model as a daemon serving client processes
    /// over a Unix socket (control path only; data moves through shared memory).
    Softnic(SoftnicArgs),
    /// Check the PCIe path between every GPU and RDMA NIC: tree and links,
    /// path class, ACS on each bridge, ATS, IOMMU, driver settings; a verdict
    /// per pair with the reason and the fix.
    Doctor(DoctorArgs),
    /// Benchmarks, each reported as a ratio to a floor measured in the same run.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// The softnic as the RoCEv2 peer of rdma-core's own tools on Linux rxe.
    #[command(subcommand)]
    Interop(InteropCmd),
}

#[derive(Subcommand, Debug)]
enum InteropCmd {
    /// Run marrow's side of every step of the interop matrix, in order,
    /// against a guest that runs the tools' side (`cargo xtask interop test`).
    Host(InteropHostArgs),
    /// Print the matrix, one `ID TOOL GUEST_ROLE SIZE ITERS MTU` line per
    /// step: what the guest's script reads.
    Steps,
}

#[derive(Args, Debug)]
struct InteropHostArgs {
    /// The frame port: `BIND_IP:PORT,PEER_IP:PORT,IP`: the host socket QEMU's
    /// `-netdev dgram` `remote` names, QEMU's `local` socket, and the
    /// softnic's IPv4 address on the guest's Ethernet.
    #[arg(long, value_name = "SPEC")]
    cable: String,
    /// Write every frame to this pcap.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Write the softnic's register trace here at the end.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// In the steps with wire faults: drop this fraction of the packets the softnic sends.
    #[arg(long, default_value_t = 0.01)]
    drop: f64,
    /// In the steps with wire faults: reorder this fraction of the packets the softnic sends.
    #[arg(long, default_value_t = 0.01)]
    reorder: f64,
    /// Seed of the fault generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Seconds each step may take to connect (the guest boots meanwhile).
    #[arg(long, default_value_t = 300)]
    deadline: u64,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// The softnic device model: RDMA_WRITE bandwidth and latency by
    /// message size in perftest's columns, the engine-rate figures, each
    /// against a floor measured in the same run.
    Softnic {
        /// Runs per figure; the best is kept.
        #[arg(long, default_value_t = 301)]
        runs: usize,
        /// Every message size from 2 B to 8 MiB, as perftest's `-a`.
        #[arg(short = 'a', long = "all", conflicts_with = "size")]
        all: bool,
        /// Message sizes to sweep (bytes; `0x` and K/M suffixes accepted), default 8 and 65536.
        #[arg(short = 's', long, value_parser = parse_size, value_delimiter = ',')]
        size: Vec<usize>,
        /// Bandwidth iterations per size (perftest's `-n`; fewer above 256 MiB in all).
        #[arg(short = 'n', long, default_value_t = 5000)]
        iters: usize,
        /// Latency samples per size.
        #[arg(long, default_value_t = 1000)]
        lat_iters: usize,
        /// Print the report as JSON (the schema in the README).
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print the report as CSV, one row per size and figure.
        #[arg(long)]
        csv: bool,
        /// Draw latency and bandwidth against message size, with the floor, into FILE (SVG).
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
        /// A perftest run's output (`ib_write_bw -a`, `ib_write_lat -a`, as
        /// perftest prints it, a log's prefix allowed): its tables become
        /// peer curves on the plot and `peers` in the JSON. Repeatable.
        #[arg(long, value_name = "FILE")]
        peer: Vec<PathBuf>,
        /// Measure the RC transport between two softnic instances instead:
        /// `udp` (RoCEv2 over loopback UDP), against two threads moving the
        /// same datagrams.
        #[arg(long, value_name = "KIND", value_parser = ["udp"], conflicts_with_all = ["all", "size", "plot", "peer"])]
        wire: Option<String>,
        /// With `--wire`: both softnic instances in this process, instead of
        /// B in a `marrow softnic` process of its own.
        #[arg(long, requires = "wire")]
        one_process: bool,
    },
    /// The ConnectX backend (rdma-core, two ranks): puts checked, put+quiet
    /// latency; without a NIC, says what is missing.
    Mlx5(marrow::mlx5_bench::Args),
    /// The verbs proxy on any RDMA device (rxe, EFA, eRDMA...), two ranks:
    /// gets, puts, atomics checked; 8 B put latency and message rate.
    Verbs(marrow::verbs_bench::Args),
    /// The GPU-initiated path (needs an NVIDIA GPU): put latency, posting
    /// rate, compute->put loop and bandwidth, each against its floor.
    Gpu {
        /// Print the figures as JSON (the schema in the README) instead of the text.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print the figures as CSV, one row per figure, instead of the text.
        #[arg(long)]
        csv: bool,
        /// Then time DOCA GPUNetIO's device verbs against marrow's on the
        /// same softnic: a CUBIN built by scripts/doca_peer/build.sh.
        #[arg(long, value_name = "CUBIN")]
        doca: Option<std::path::PathBuf>,
        /// With --doca: only the comparison with DOCA.
        #[arg(long, requires = "doca")]
        doca_only: bool,
        /// Only these measurements, comma-separated: latency (the blocking
        /// put against the ping-pong floor), qps (the same put with many QPs
        /// on the engine), rates (posting rates and bandwidth), loop
        /// (compute -> put -> compute). All of them by default.
        #[arg(long, value_name = "PARTS", value_parser = marrow_bench::gpu::Parts::parse)]
        only: Option<marrow_bench::gpu::Parts>,
        /// Also write the figures as JSON to FILE, the text still printed:
        /// one run gives both the log and the report `bench compare` reads.
        #[arg(long, value_name = "FILE")]
        json_out: Option<PathBuf>,
    },
    /// Runs of several builds taken by turns, figure by figure: each
    /// figure's rounds side by side, one column per build, with how many
    /// met the target, as a Markdown table.
    Compare {
        /// Runs: `LABEL=FILE` (a `--json` or `--json-out` report), or FILE,
        /// labelled by its name without the extension. The same label
        /// again is that build's next round.
        #[arg(required = true, value_name = "[LABEL=]FILE")]
        runs: Vec<String>,
        /// Only the figures whose section or name contains TEXT (repeatable).
        #[arg(long = "match", value_name = "TEXT")]
        matching: Vec<String>,
    },
    /// Transport P2P between two GPUs (one process each): every operation
    /// checked, then round trip and bandwidth against their floors.
    P2p {
        /// Also put 16 and 256 MiB with other launch shapes (blocks x
        /// threads), to see where the SM-driven put is fastest.
        #[arg(long)]
        sweep: bool,
        /// Print the figures as JSON (the schema in the README) instead of the text.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// Print the figures as CSV, one row per figure, instead of the text.
        #[arg(long)]
        csv: bool,
    },
    /// One PE of `bench p2p` (started by it).
    #[command(hide = true)]
    P2pPe {
        #[arg(long)]
        rank: u32,
        #[arg(long)]
        socket: std::path::PathBuf,
        #[arg(long)]
        sweep: bool,
    },
}

#[derive(Args, Debug)]
struct SoftnicArgs {
    /// Socket to listen on (a stale one is replaced; a live daemon's, or a
    /// file that is not a socket, is refused). Removed on SIGTERM, SIGINT
    /// and SIGHUP.
    #[arg(long, default_value = "/tmp/marrow-softnic.sock")]
    socket: std::path::PathBuf,
    /// Engine threads polling doorbells.
    #[arg(long, default_value_t = 1)]
    engines: usize,
    /// Record a register trace (at most 256 MiB) and replace this file with it
    /// every --trace-every seconds and on SIGTERM/SIGINT/SIGHUP (written to a
    /// temporary file and renamed, so a reader never sees half a trace).
    #[arg(long)]
    trace: Option<std::path::PathBuf>,
    /// Seconds between trace file rewrites.
    #[arg(long, default_value_t = 1)]
    trace_every: u64,
    /// Attach a RoCEv2 wire port (repeatable; numbered from 0 in order), for QPs
    /// whose peer is another softnic or any RoCEv2 stack: `udp:IP:PORT` (RoCEv2
    /// datagrams) or `frames:IP:PORT,PEER_IP:PEER_PORT,MAC_IP` (whole Ethernet frames
    /// to and from one socket, as QEMU's -netdev dgram carries them; the port is
    /// MAC_IP on that Ethernet).
    #[arg(long = "port", value_name = "SPEC", value_parser = marrow::port_spec::parse)]
    ports: Vec<marrow_softnic::rc::port::PortKind>,
    /// Write every frame the wire ports send and receive to this pcap (Ethernet,
    /// nanosecond timestamps). With several ports, port N writes FILE.N.
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Exit status: 0 when every operation completed and every byte and value matched; 1 on a
timeout (the message gives the decoded QP and CQ state), an unexpected completion, or a
mismatch (the message says where). The trace is written in every case.")]
struct DemoArgs {
    /// A shorter run: a few iterations per operation and size.
    #[arg(long)]
    quick: bool,

    /// Print the run as JSON instead of the text: the softnic demo's rows,
    /// checks and trace counts; with --gpu, the GPU figures (schema in the README).
    #[arg(long, conflicts_with = "csv")]
    json: bool,

    /// With --gpu: print the GPU figures as CSV, one row per figure, instead of the text.
    #[arg(long, requires = "gpu")]
    csv: bool,

    /// Run the device code in GPU threads (needs an NVIDIA GPU, its driver and NVRTC).
    #[arg(long)]
    gpu: bool,

    /// Where to write the register trace.
    #[arg(long, value_name = "PATH", default_value = "marrow-demo.trace")]
    trace_out: PathBuf,

    /// Most bytes the trace may take (later records are dropped and counted); decimal or 0x hex.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_TRACE_CAP as u64, value_parser = parse_u64)]
    trace_cap: u64,

    /// How long to wait for each completion, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    timeout_ms: u64,

    /// Arm a fault on QP A to see a failure reported: stall (a hung engine: the wait
    /// times out), drop-doorbell (a lost doorbell: the wait times out), or fail-wqe:N
    /// (WQE N fails with REMOTE_ACCESS_ERR).
    #[arg(long, value_name = "FAULT", value_parser = marrow::demo::parse_inject)]
    inject: Option<marrow::demo::Inject>,

    /// Put endpoint B on a second softnic reached over a RoCEv2 wire: `udp`
    /// (RoCEv2 datagrams on loopback UDP, port 4791).
    #[arg(long, value_name = "KIND", value_parser = ["udp"])]
    wire: Option<String>,

    /// Write every frame A's wire port sends and receives to this pcap
    /// (Ethernet, nanosecond timestamps; open it in Wireshark). Needs --wire.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum TraceCmd {
    /// Decode a trace file: one line per record, WQEs, CQEs and doorbells decoded.
    Show(TraceShowArgs),
    /// Summarize a trace file: records by kind, QP and WQE opcode, the time
    /// span, doorbell-to-CQE latency per QP, and every error with its WQE.
    Stats(TraceStatsArgs),
}

#[derive(Args, Debug)]
#[command(after_help = "\
Latency pairs each send-queue CQE with the doorbell that announced its WQE (same QPN,
the CQE's wqe_counter within the WQE indices the doorbell announced); percentiles
are in ns of the trace's clock. Errors are listed with the WQE fetch they belong to
(the fetch of the same QP and WQE index, or the QP's last fetch for errors that
carry no index).

--json prints one JSON object (schema in docs/TRACE.md).

Exit status: 0 when the file is a whole trace; 2 when it is not a trace, or is
truncated or damaged (the figures cover the records before the damage, and an
'error:' line gives the file offset).")]
struct TraceStatsArgs {
    /// The trace file (written by `marrow demo` or `SoftNic::trace_bytes`).
    file: PathBuf,

    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Filters combine: a record is shown when it passes every filter given; a filter given
several times (--qp 0x100 --qp 0x101) passes any of its values.

Kinds: doorbell, doorbell-dropped, dbrec-read, wqe-fetch, cqe-write, qp-state,
cq-overflow, fault, recv-wqe-fetch, wqe-error.

--json prints one JSON object per record (JSON Lines); a damaged file ends with
{\"error\": ..., \"offset\": ...}.

Exit status: 0 when the file is a whole trace; 2 when it is not a trace, or is
truncated or damaged (the records before the damage are printed, then an 'error:'
line with the file offset).")]
struct TraceShowArgs {
    /// The trace file (written by `marrow demo` or `SoftNic::trace_bytes`).
    file: PathBuf,

    /// Only records of this QP (decimal or 0x hex).
    #[arg(long, value_name = "QPN", value_parser = parse_u32)]
    qp: Vec<u32>,

    /// Only WQE fetches and CQEs of this opcode: a WQE opcode (RDMA_WRITE, ATOMIC_FA...) or a CQE opcode (RESP_SEND).
    #[arg(long, value_name = "NAME", value_parser = parse_opcode)]
    opcode: Vec<OpcodeMatch>,

    /// Only errors: error CQEs, WQE errors, injected faults, CQ overflows, QP state changes to ERR, dropped doorbells.
    #[arg(long)]
    errors: bool,

    /// Only records of this kind (wqe-fetch, cqe-write...).
    #[arg(long, value_name = "NAME", value_parser = parse_kind)]
    kind: Vec<RecordKind>,

    /// Show at most N records.
    #[arg(long, value_name = "N", conflicts_with = "tail")]
    limit: Option<usize>,

    /// Show only the last N records that pass the filters.
    #[arg(long, value_name = "N")]
    tail: Option<usize>,

    /// Only record number N (as printed, #N) and --context records either side.
    #[arg(long, value_name = "N")]
    around: Option<usize>,

    /// Records either side of --around.
    #[arg(long, value_name = "K", default_value_t = 5, requires = "around")]
    context: usize,

    /// Only records with t_ns at or after NS (decimal or 0x hex).
    #[arg(long, value_name = "NS", value_parser = marrow::trace::parse_num)]
    since: Option<u64>,

    /// Only records with t_ns at or before NS (decimal or 0x hex).
    #[arg(long, value_name = "NS", value_parser = marrow::trace::parse_num)]
    until: Option<u64>,

    /// JSON Lines instead of text.
    #[arg(long)]
    json: bool,

    /// One line per record.
    #[arg(long, conflicts_with = "full")]
    brief: bool,

    /// Every field of CQEs, doorbells and doorbell records too.
    #[arg(long)]
    full: bool,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Input formats (detected unless --input is given):
  xxd      xxd output: '00000000: 0000 0508 0012 3403 ...  ascii' (-a '*' lines too)
  hexdump  hexdump -C output: '00000000  00 00 05 08 ...  |ascii|', '*' lines too
  kernel   print_hex_dump output, as pasted from dmesg, journalctl -k or kern.log
           (alias dmesg): '[   12.345678] ', 'driver 0000:3b:00.0: ' and
           'kernel: ' prefixes are dropped, then DUMP_PREFIX_OFFSET
           ('00000010: 00 11 ...'), DUMP_PREFIX_ADDRESS ('ffff888123456780: ...',
           hashed or not) or no prefix, 16 or 32 bytes a line, ASCII column or
           not; other log lines (mlx5's 'dump error cqe') are skipped. Groups of
           2, 4 or 8 bytes are the CPU's words, read as little-endian (x86,
           arm64): '03020100' is the bytes 00 01 02 03. Without the dmesg
           prefix such lines look like xxd's: give --input kernel
  hex      hex words of an even number of digits, separated by spaces, commas or
           lines, '0x' optional, '#' comments; each word's bytes are taken in the
           order written ('00001208' is the bytes 00 00 12 08); od -An -tx1 -v
           output is hex (alias od; without -v its '*' lines cannot be restored)
  bin      the raw bytes (any input that is not text)

With --kind auto: 8 bytes are a UAR doorbell; bytes starting with a valid
control segment of a known opcode are WQEs (several back to back are decoded
in turn); 64 bytes are a CQE, 128 a 128-byte CQE.

The input is decoded as it is read. One longer than 64 KiB is decoded as the
kind its start shows (or --kind): WQEs or CQEs one after another, printed as
they are decoded; damage further on ends the output with an error after the
items before it.

Exit status: 0 when everything decoded, 2 when the input is malformed.")]
struct DecodeArgs {
    /// Input file; standard input when absent or '-'.
    file: Option<PathBuf>,

    /// The input is a PCI configuration-space dump (`lspci -x/-xxx/-xxxx`
    /// text, or a raw sysfs `config` binary), not mlx5 bytes.
    #[arg(long, conflicts_with_all = ["ci", "ncqe", "input"])]
    pcie: bool,

    /// What the bytes are.
    #[arg(long, value_enum, default_value_t = Kind::Auto)]
    kind: Kind,

    /// How the input is written (default: detected).
    #[arg(long, value_enum)]
    input: Option<InputFormat>,

    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,

    /// CQEs: consumer index for an ownership check (with --ncqe); decimal or 0x hex.
    #[arg(long, requires = "ncqe", value_parser = parse_u32)]
    ci: Option<u32>,

    /// CQEs: number of entries of the CQ, a power of two (with --ci).
    #[arg(long, requires = "ci", value_parser = parse_u32)]
    ncqe: Option<u32>,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Path classes are nvidia-smi topo -m's: PIX (one PCIe switch), PXB (several bridges, no
host bridge), PHB (through the CPU's root complex), NODE (between host bridges of one NUMA
node), SYS (between NUMA nodes). Verdicts: ok, degraded, blocked.

The topology matrix shows these classes for every GPU and RDMA device pair, GPU-GPU
too, with NIC0: mlx5_0 (netdev eth0) legend lines; 'unknown' across host bridges where
a NUMA node is not known; NVLink (NV#) is not in sysfs. The GID table of each RDMA port
lists index, GID, type (RoCE v1, RoCE v2, IB/RoCE v1) and netdev, and recommends an
index: the RoCE v2 GID of an IPv4 address, else the first RoCE v2 GID.

Exit status: 0 when every pair is ok (or there is no pair), 1 when a pair is degraded or
blocked, 2 when the sysfs tree cannot be read.")]
struct DoctorArgs {
    /// Root of the sysfs tree to read (a captured copy for offline checks).
    #[arg(long, default_value = "/sys")]
    sysfs_root: PathBuf,
    /// Root of the procfs tree (cmdline, driver/nvidia/params).
    #[arg(long, default_value = "/proc")]
    proc_root: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
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

fn parse_u32(s: &str) -> Result<u32, String> {
    clap_num::maybe_hex::<u32>(s).map_err(|e| format!("'{s}': {e}"))
}

fn parse_u64(s: &str) -> Result<u64, String> {
    marrow::trace::parse_num(s)
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

/// A byte count: decimal or `0x` hex, with an optional K, M or G (binary) suffix.
fn parse_size(s: &str) -> Result<usize, String> {
    let (num, shift) = match s.trim().to_ascii_uppercase() {
        t if t.ends_with('K') => (t[..t.len() - 1].to_string(), 10),
        t if t.ends_with('M') => (t[..t.len() - 1].to_string(), 20),
        t if t.ends_with('G') => (t[..t.len() - 1].to_string(), 30),
        t => (t, 0),
    };
    let v = clap_num::maybe_hex::<usize>(&num).map_err(|e| format!("{s:?} is not a byte count: {e}"))?;
    v.checked_shl(shift).filter(|x| x >> shift == v).ok_or_else(|| format!("{s} bytes is too large"))
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
