//! The command line of `marrow`: every subcommand and its arguments, as
//! clap parses them, and the parsers of their numbers. `main.rs` runs what
//! they ask for.

use clap::{Args, Parser, Subcommand};
use marrow::demo::DEFAULT_TRACE_CAP;
use marrow::hexin::InputFormat;
use marrow::model::Kind;
use marrow::trace::{OpcodeMatch, parse_kind, parse_opcode};
use marrow_softnic::trace::Kind as RecordKind;
use std::path::PathBuf;

/// The package version and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("MARROW_GIT_COMMIT"), ")");

#[derive(Parser, Debug)]
#[command(name = "marrow", version = VERSION, about = "Tools for GPU-initiated RDMA on mlx5 (ConnectX) NICs")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
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
pub(crate) enum InteropCmd {
    /// Run marrow's side of every step of the interop matrix, in order,
    /// against a guest that runs the tools' side (`cargo xtask interop test`).
    Host(InteropHostArgs),
    /// Print the matrix, one `ID TOOL GUEST_ROLE SIZE ITERS MTU` line per
    /// step: what the guest's script reads.
    Steps,
}

#[derive(Args, Debug)]
pub(crate) struct InteropHostArgs {
    /// The frame port: `BIND_IP:PORT,PEER_IP:PORT,IP`: the host socket QEMU's
    /// `-netdev dgram` `remote` names, QEMU's `local` socket, and the
    /// softnic's IPv4 address on the guest's Ethernet.
    #[arg(long, value_name = "SPEC")]
    pub(crate) cable: String,
    /// Write every frame to this pcap.
    #[arg(long, value_name = "FILE")]
    pub(crate) pcap: Option<PathBuf>,
    /// Write the softnic's register trace here at the end.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// In the steps with wire faults: drop this fraction of the packets the softnic sends.
    #[arg(long, default_value_t = 0.01)]
    pub(crate) drop: f64,
    /// In the steps with wire faults: reorder this fraction of the packets the softnic sends.
    #[arg(long, default_value_t = 0.01)]
    pub(crate) reorder: f64,
    /// Seed of the fault generator.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Seconds each step may take to connect (the guest boots meanwhile).
    #[arg(long, default_value_t = 300)]
    pub(crate) deadline: u64,
}

#[derive(Subcommand, Debug)]
pub(crate) enum BenchCmd {
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
pub(crate) struct SoftnicArgs {
    /// Socket to listen on (a stale one is replaced; a live daemon's, or a
    /// file that is not a socket, is refused). Removed on SIGTERM, SIGINT
    /// and SIGHUP.
    #[arg(long, default_value = "/tmp/marrow-softnic.sock")]
    pub(crate) socket: std::path::PathBuf,
    /// Engine threads polling doorbells.
    #[arg(long, default_value_t = 1)]
    pub(crate) engines: usize,
    /// Record a register trace (at most 256 MiB) and replace this file with it
    /// every --trace-every seconds and on SIGTERM/SIGINT/SIGHUP (written to a
    /// temporary file and renamed, so a reader never sees half a trace).
    #[arg(long)]
    pub(crate) trace: Option<std::path::PathBuf>,
    /// Seconds between trace file rewrites.
    #[arg(long, default_value_t = 1)]
    pub(crate) trace_every: u64,
    /// Attach a RoCEv2 wire port (repeatable; numbered from 0 in order), for QPs
    /// whose peer is another softnic or any RoCEv2 stack: `udp:IP:PORT` (RoCEv2
    /// datagrams) or `frames:IP:PORT,PEER_IP:PEER_PORT,MAC_IP` (whole Ethernet frames
    /// to and from one socket, as QEMU's -netdev dgram carries them; the port is
    /// MAC_IP on that Ethernet).
    #[arg(long = "port", value_name = "SPEC", value_parser = marrow::port_spec::parse)]
    pub(crate) ports: Vec<marrow_softnic::rc::port::PortKind>,
    /// Write every frame the wire ports send and receive to this pcap (Ethernet,
    /// nanosecond timestamps). With several ports, port N writes FILE.N.
    #[arg(long, value_name = "FILE")]
    pub(crate) pcap: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Exit status: 0 when every operation completed and every byte and value matched; 1 on a
timeout (the message gives the decoded QP and CQ state), an unexpected completion, or a
mismatch (the message says where). The trace is written in every case.")]
pub(crate) struct DemoArgs {
    /// A shorter run: a few iterations per operation and size.
    #[arg(long)]
    pub(crate) quick: bool,

    /// Print the run as JSON instead of the text: the softnic demo's rows,
    /// checks and trace counts; with --gpu, the GPU figures (schema in the README).
    #[arg(long, conflicts_with = "csv")]
    pub(crate) json: bool,

    /// With --gpu: print the GPU figures as CSV, one row per figure, instead of the text.
    #[arg(long, requires = "gpu")]
    pub(crate) csv: bool,

    /// Run the device code in GPU threads (needs an NVIDIA GPU, its driver and NVRTC).
    #[arg(long)]
    pub(crate) gpu: bool,

    /// Where to write the register trace.
    #[arg(long, value_name = "PATH", default_value = "marrow-demo.trace")]
    pub(crate) trace_out: PathBuf,

    /// Most bytes the trace may take (later records are dropped and counted); decimal or 0x hex.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_TRACE_CAP as u64, value_parser = parse_u64)]
    pub(crate) trace_cap: u64,

    /// How long to wait for each completion, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub(crate) timeout_ms: u64,

    /// Arm a fault on QP A to see a failure reported: stall (a hung engine: the wait
    /// times out), drop-doorbell (a lost doorbell: the wait times out), or fail-wqe:N
    /// (WQE N fails with REMOTE_ACCESS_ERR).
    #[arg(long, value_name = "FAULT", value_parser = marrow::demo::parse_inject)]
    pub(crate) inject: Option<marrow::demo::Inject>,

    /// Put endpoint B on a second softnic reached over a RoCEv2 wire: `udp`
    /// (RoCEv2 datagrams on loopback UDP, port 4791).
    #[arg(long, value_name = "KIND", value_parser = ["udp"])]
    pub(crate) wire: Option<String>,

    /// Write every frame A's wire port sends and receives to this pcap
    /// (Ethernet, nanosecond timestamps; open it in Wireshark). Needs --wire.
    #[arg(long, value_name = "FILE")]
    pub(crate) pcap: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum TraceCmd {
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
pub(crate) struct TraceStatsArgs {
    /// The trace file (written by `marrow demo` or `SoftNic::trace_bytes`).
    pub(crate) file: PathBuf,

    /// One JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
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
pub(crate) struct TraceShowArgs {
    /// The trace file (written by `marrow demo` or `SoftNic::trace_bytes`).
    pub(crate) file: PathBuf,

    /// Only records of this QP (decimal or 0x hex).
    #[arg(long, value_name = "QPN", value_parser = parse_u32)]
    pub(crate) qp: Vec<u32>,

    /// Only WQE fetches and CQEs of this opcode: a WQE opcode (RDMA_WRITE, ATOMIC_FA...) or a CQE opcode (RESP_SEND).
    #[arg(long, value_name = "NAME", value_parser = parse_opcode)]
    pub(crate) opcode: Vec<OpcodeMatch>,

    /// Only errors: error CQEs, WQE errors, injected faults, CQ overflows, QP state changes to ERR, dropped doorbells.
    #[arg(long)]
    pub(crate) errors: bool,

    /// Only records of this kind (wqe-fetch, cqe-write...).
    #[arg(long, value_name = "NAME", value_parser = parse_kind)]
    pub(crate) kind: Vec<RecordKind>,

    /// Show at most N records.
    #[arg(long, value_name = "N", conflicts_with = "tail")]
    pub(crate) limit: Option<usize>,

    /// Show only the last N records that pass the filters.
    #[arg(long, value_name = "N")]
    pub(crate) tail: Option<usize>,

    /// Only record number N (as printed, #N) and --context records either side.
    #[arg(long, value_name = "N")]
    pub(crate) around: Option<usize>,

    /// Records either side of --around.
    #[arg(long, value_name = "K", default_value_t = 5, requires = "around")]
    pub(crate) context: usize,

    /// Only records with t_ns at or after NS (decimal or 0x hex).
    #[arg(long, value_name = "NS", value_parser = marrow::trace::parse_num)]
    pub(crate) since: Option<u64>,

    /// Only records with t_ns at or before NS (decimal or 0x hex).
    #[arg(long, value_name = "NS", value_parser = marrow::trace::parse_num)]
    pub(crate) until: Option<u64>,

    /// JSON Lines instead of text.
    #[arg(long)]
    pub(crate) json: bool,

    /// One line per record.
    #[arg(long, conflicts_with = "full")]
    pub(crate) brief: bool,

    /// Every field of CQEs, doorbells and doorbell records too.
    #[arg(long)]
    pub(crate) full: bool,
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
pub(crate) struct DecodeArgs {
    /// Input file; standard input when absent or '-'.
    pub(crate) file: Option<PathBuf>,

    /// The input is a PCI configuration-space dump (`lspci -x/-xxx/-xxxx`
    /// text, or a raw sysfs `config` binary), not mlx5 bytes.
    #[arg(long, conflicts_with_all = ["ci", "ncqe", "input"])]
    pub(crate) pcie: bool,

    /// What the bytes are.
    #[arg(long, value_enum, default_value_t = Kind::Auto)]
    pub(crate) kind: Kind,

    /// How the input is written (default: detected).
    #[arg(long, value_enum)]
    pub(crate) input: Option<InputFormat>,

    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,

    /// CQEs: consumer index for an ownership check (with --ncqe); decimal or 0x hex.
    #[arg(long, requires = "ncqe", value_parser = parse_u32)]
    pub(crate) ci: Option<u32>,

    /// CQEs: number of entries of the CQ, a power of two (with --ci).
    #[arg(long, requires = "ci", value_parser = parse_u32)]
    pub(crate) ncqe: Option<u32>,
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
pub(crate) struct DoctorArgs {
    /// Root of the sysfs tree to read (a captured copy for offline checks).
    #[arg(long, default_value = "/sys")]
    pub(crate) sysfs_root: PathBuf,
    /// Root of the procfs tree (cmdline, driver/nvidia/params).
    #[arg(long, default_value = "/proc")]
    pub(crate) proc_root: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

fn parse_u32(s: &str) -> Result<u32, String> {
    clap_num::maybe_hex::<u32>(s).map_err(|e| format!("'{s}': {e}"))
}

fn parse_u64(s: &str) -> Result<u64, String> {
    marrow::trace::parse_num(s)
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
