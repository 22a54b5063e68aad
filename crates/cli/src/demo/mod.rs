//! `marrow demo`: two RC endpoints on the embedded softnic device model,
//! driven by the CPU initiator through every operation: RDMA_WRITE and
//! RDMA_READ of 8 B to 1 MiB, inline writes, a batch of writes behind one
//! doorbell, ATOMIC_FA, ATOMIC_CS, the masked atomics and SEND/receive.
//!
//! Every byte that moves is checked: each iteration writes a fresh pattern,
//! the destination is compared byte for byte after the completion (and the
//! 8 bytes after it must be untouched), every fetched atomic value is
//! compared with the value computed on the CPU. Every completion is awaited
//! with a timeout; a timeout, an unexpected completion or a mismatch ends
//! the demo with an error (exit status 1), after the trace recorded so far
//! is written out.

mod expect;
mod options;
mod rows;
mod session;
mod table;

pub use options::{DemoOptions, Inject, parse_inject};
pub use rows::SIZES;
use rows::{Plan, body};
use session::Demo;
use table::bytes_text;
pub use table::{Row, RowSummary, render_table, size_text, total};

use crate::trace::{Detail, render_record, view};
use marrow_mlx5::prelude::*;
use marrow_softnic::Faults;
use marrow_softnic::pair::{Pair, PairConfig, PairWire, WaitError};
use marrow_softnic::peer::PeerDaemon;
use marrow_softnic::trace::{self as st, Kind};
use std::fmt;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Instant;

/// Default trace cap: the trace file never exceeds this.
pub const DEFAULT_TRACE_CAP: usize = 64 << 20;

/// Bytes registered on each side.
const BUF_LEN: usize = 4 << 20;
/// RDMA_WRITE: source on A, destination on B (also inline writes).
const WR: usize = 0;
/// RDMA_READ: source on B, destination on A.
const RD: usize = 1 << 20;
/// SEND source on the sender.
const SEND_SRC: usize = 2 << 20;
/// Receive buffers.
const RECV: usize = (2 << 20) + (512 << 10);
/// Atomic targets on B, fetched values on A.
const ATOM: usize = 3 << 20;
/// Bytes after each destination that must stay untouched.
const GUARD: [u8; 8] = [0xde, 0xad, 0xbe, 0xef, 0x5a, 0xfe, 0x6a, 0x4d];
/// Bytes an atomic's local buffer is poisoned with before the operation.
const POISON: u8 = 0xa5;
/// Writes posted behind one doorbell in the batch row.
const BATCH: usize = 16;
/// SQ WQEBBs and CQ entries of each side.
const SQ_WQEBBS: u32 = 256;
const NCQE: u32 = 256;

/// Which operation, size and iteration something happened in.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// Row name.
    pub op: &'static str,
    /// Bytes per operation.
    pub size: usize,
    /// 0-based iteration.
    pub iter: usize,
}

impl fmt::Display for Ctx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} iteration {}", self.op, size_text(self.size), self.iter)
    }
}

/// Why the demo failed.
#[derive(Debug)]
pub enum DemoError {
    /// The pair could not be created.
    Setup(String),
    /// A WQE or receive could not be posted.
    Post {
        /// Where.
        ctx: Ctx,
        /// Why.
        error: String,
    },
    /// No completion in time (or one that could not be read).
    Wait {
        /// Where.
        ctx: Ctx,
        /// The wait's error, with the decoded QP and CQ state.
        error: WaitError,
    },
    /// A completion other than the one expected.
    Completion {
        /// Where.
        ctx: Ctx,
        /// What was expected and what came.
        detail: String,
    },
    /// Bytes or values that differ from what the CPU computed.
    Mismatch {
        /// Where.
        ctx: Ctx,
        /// Which bytes.
        detail: String,
    },
    /// The trace file could not be written.
    Io(String),
    /// The output could not be written.
    Output(std::io::Error),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoError::Setup(e) => write!(f, "creating the endpoints: {e}"),
            DemoError::Post { ctx, error } => write!(f, "{ctx}: posting: {error}"),
            DemoError::Wait { ctx, error } => write!(f, "{ctx}: {error}"),
            DemoError::Completion { ctx, detail } => write!(f, "{ctx}: {detail}"),
            DemoError::Mismatch { ctx, detail } => write!(f, "{ctx}: data mismatch: {detail}"),
            DemoError::Io(e) => f.write_str(e),
            DemoError::Output(e) => write!(f, "writing the output: {e}"),
        }
    }
}

impl std::error::Error for DemoError {}

/// before its fetch to its CQE (at most `max` records).
pub fn first_write_excerpt(records: &[st::Record], qpn: u32, max: usize) -> Option<(usize, usize)> {
    let fetch = records
        .iter()
        .position(|r| r.kind == Kind::WQE_FETCH && r.qpn == qpn && r.bytes.get(3) == Some(&WqeOpcode::RDMA_WRITE.0))?;
    let index = u16::from_be_bytes([records[fetch].bytes[1], records[fetch].bytes[2]]);
    let start = records[..fetch].iter().rposition(|r| r.kind == Kind::DOORBELL && r.qpn == qpn).unwrap_or(fetch);
    let end = records[fetch..]
        .iter()
        .position(|r| {
            r.kind == Kind::CQE_WRITE
                && r.qpn == qpn
                && r.bytes.len() == 64
                && decode_cqe(&r.bytes).is_ok_and(|c| c.wqe_counter() == index)
        })
        .map_or(fetch, |p| fetch + p);
    Some((start, end.min(start + max - 1)))
}

/// The check every data row makes.
const EVERY_BYTE: &str = "RDMA_WRITE, RDMA_READ, inline and SEND/RECV: a fresh pattern every iteration, every \
                          destination byte compared, the 8 bytes after each destination untouched";

/// What `marrow demo --json` prints: the table, the checks and the trace.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct DemoReport {
    /// QP A's number.
    pub qp_a: u32,
    /// QP B's number.
    pub qp_b: u32,
    /// How A and B are connected.
    pub link: String,
    /// One entry per table row.
    pub rows: Vec<RowSummary>,
    /// Every row's samples together.
    pub total: RowSummary,
    /// The checks that passed, beyond every destination byte compared.
    pub checks: Vec<String>,
    /// The register trace.
    pub trace: TraceSummary,
    /// Seconds the whole run took.
    pub wall_s: f64,
}

/// The demo's trace, counted by kind.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct TraceSummary {
    /// Where it was written.
    pub path: PathBuf,
    /// Bytes written.
    pub bytes: u64,
    /// Records.
    pub records: u64,
    /// Doorbell writes.
    pub doorbells: u64,
    /// Doorbell record reads.
    pub dbrec_reads: u64,
    /// Send WQE fetches.
    pub wqe_fetches: u64,
    /// Receive WQE fetches.
    pub recv_wqe_fetches: u64,
    /// CQE writes (A's; with B's over the wire too).
    pub cqe_writes: u64,
    /// Completions that fell past the trace's cap.
    pub dropped_completions: u64,
}

/// Run the demo, printing as it goes. The trace is written even when the
/// demo fails, for inspection.
pub fn run(opts: &DemoOptions, out: &mut dyn Write) -> Result<DemoReport, DemoError> {
    let wall = Instant::now();
    if opts.pcap.is_some() && !opts.wire {
        return Err(DemoError::Setup("--pcap captures the RoCEv2 wire: it needs --wire udp".into()));
    }
    // Fail on an unwritable trace path now, not after the whole run.
    std::fs::write(&opts.trace_out, b"")
        .map_err(|e| DemoError::Io(format!("writing the trace to {}: {e}", opts.trace_out.display())))?;
    let mut daemon = None;
    let wire = match opts.wire {
        false => None,
        true => {
            // Two loopback addresses of this process's own, so runs side by side do not meet.
            let n = (std::process::id() % 250) as u8 + 1;
            let mut w = PairWire::udp(Ipv4Addr::new(127, 77, n, 1), Ipv4Addr::new(127, 77, n, 2), 4791);
            w.pcap = opts.pcap.clone();
            if let Some(exe) = &opts.softnic_exe {
                let d = PeerDaemon::start(exe, w.ip_b, w.udp_port).map_err(DemoError::Setup)?;
                w.b_daemon = Some(d.socket.clone());
                daemon = Some(d);
            }
            Some(w)
        }
    };
    let cfg = PairConfig { sq_wqebbs: SQ_WQEBBS, ncqe: NCQE, buf_len: BUF_LEN, wire, ..PairConfig::default() };
    let p = Pair::new(cfg).map_err(|e| DemoError::Setup(e.to_string()))?;
    p.nic.enable_trace(opts.trace_cap);
    p.enable_trace_b(opts.trace_cap).map_err(|e| DemoError::Setup(e.to_string()))?;
    if let Some(i) = opts.inject {
        let faults = match i {
            Inject::Stall => Faults { stall: true, ..Faults::default() },
            Inject::DropDoorbell => Faults { drop_doorbells: 1, ..Faults::default() },
            Inject::FailWqe(n) => Faults { fail_wqe: Some((n, Syndrome::REMOTE_ACCESS_ERR, 0)), ..Faults::default() },
        };
        p.nic.hca().set_faults(p.a.qpn, faults).map_err(|e| DemoError::Setup(e.to_string()))?;
    }
    let io = DemoError::Output;
    let two = match &daemon {
        Some(d) => format!("two softnic processes (B's: `marrow softnic`, pid {})", d.child.id()),
        None => "two softnic instances".into(),
    };
    let link = match &opts.pcap {
        Some(f) if opts.wire => format!(
            "on {two} linked by RoCEv2 over loopback UDP (path MTU 1024, capture in {}), 1 engine thread each",
            f.display()
        ),
        _ if opts.wire => format!("on {two} linked by RoCEv2 over loopback UDP (path MTU 1024), 1 engine thread each"),
        _ => "on the softnic device model with 1 engine thread".into(),
    };
    writeln!(
        out,
        "marrow demo{}: QP {:#x} (A) and QP {:#x} (B), RC, connected {link};\n\
         SQ {SQ_WQEBBS} WQEBBs, CQs of {NCQE} CQEs, {} registered per side; every completion awaited at most {:?}.\n",
        if opts.quick { " (quick)" } else { "" },
        p.a.qpn,
        p.b.qpn,
        size_text(BUF_LEN),
        opts.timeout
    )
    .map_err(io)?;
    let mut d = Demo { p, timeout: opts.timeout, cqes: 0, src: Vec::new(), scratch: Vec::new() };
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    let result = body(&mut d, Plan { quick: opts.quick, wire: opts.wire }, &mut rows, &mut checks);
    let trace = d.p.nic.trace_bytes().unwrap_or_default();
    let save = std::fs::write(&opts.trace_out, &trace)
        .map_err(|e| DemoError::Io(format!("writing the trace to {}: {e}", opts.trace_out.display())));
    let (records, _) = st::parse(&trace);
    if let Err(e) = result {
        if save.is_ok() {
            let _ = writeln!(
                out,
                "Stopped by an error. The trace so far ({} records) is in {}: `marrow trace show {} --errors`, or \
                 `--qp {:#x}` for the last records of QP A.",
                records.len(),
                opts.trace_out.display(),
                opts.trace_out.display(),
                d.p.a.qpn
            );
        }
        return Err(e);
    }
    save?;
    writeln!(out, "{}", render_table(&rows)).map_err(io)?;
    writeln!(
        out,
        "Latency: from the post of a WQE to its completion, one WQE outstanding (the 16-per-doorbell row: each WQE \
         from its post to the CQE of the last, unsignaled before it); SEND/RECV: to the receive completion.\n\
         ops/s and MiB/s: operations and payload over the time operations were outstanding.\n"
    )
    .map_err(io)?;
    writeln!(out, "Checks (all passed):").map_err(io)?;
    writeln!(out, "  {EVERY_BYTE}").map_err(io)?;
    for c in &checks {
        writeln!(out, "  {c}").map_err(io)?;
    }
    writeln!(out).map_err(io)?;

    if let Some((s, e)) = first_write_excerpt(&records, d.p.a.qpn, 12) {
        writeln!(out, "Register trace excerpt: the first RDMA_WRITE ({}), records #{s} to #{e}:", size_text(SIZES[0]))
            .map_err(io)?;
        for (i, r) in records.iter().enumerate().take(e + 1).skip(s) {
            out.write_all(render_record(i, r, &view(r, Detail::Normal)).as_bytes()).map_err(io)?;
        }
        writeln!(out).map_err(io)?;
    }

    let count = |k: Kind| records.iter().filter(|r| r.kind == k).count();
    writeln!(
        out,
        "Trace: {} records ({} doorbells, {} doorbell-record reads, {} WQE fetches, {} receive WQE fetches, {} CQE writes), \
         {} written to {}",
        records.len(),
        count(Kind::DOORBELL),
        count(Kind::DBREC_READ),
        count(Kind::WQE_FETCH),
        count(Kind::RECV_WQE_FETCH),
        count(Kind::CQE_WRITE),
        bytes_text(trace.len() as u64),
        opts.trace_out.display()
    )
    .map_err(io)?;
    let mut traced_cqes = count(Kind::CQE_WRITE) as u64;
    let mut trace_summary = TraceSummary {
        path: opts.trace_out.clone(),
        bytes: trace.len() as u64,
        records: records.len() as u64,
        doorbells: count(Kind::DOORBELL) as u64,
        dbrec_reads: count(Kind::DBREC_READ) as u64,
        wqe_fetches: count(Kind::WQE_FETCH) as u64,
        recv_wqe_fetches: count(Kind::RECV_WQE_FETCH) as u64,
        cqe_writes: 0,
        dropped_completions: 0,
    };
    if opts.wire {
        // B's model keeps its own trace: its receive completions are there.
        let b_trace = d.p.trace_b().unwrap_or_default();
        let b_out = opts.trace_out.with_extension("b.trace");
        std::fs::write(&b_out, &b_trace)
            .map_err(|e| DemoError::Io(format!("writing B's trace to {}: {e}", b_out.display())))?;
        let (b_records, _) = st::parse(&b_trace);
        let b_cqes = b_records.iter().filter(|r| r.kind == Kind::CQE_WRITE).count();
        traced_cqes += b_cqes as u64;
        writeln!(out, "  B's softnic: {} records ({b_cqes} CQE writes) in {}", b_records.len(), b_out.display())
            .map_err(io)?;
    }
    if traced_cqes < d.cqes {
        writeln!(
            out,
            "  The trace reached its cap of {}: {} of {} completions are in it, later records were dropped.",
            bytes_text(opts.trace_cap as u64),
            traced_cqes,
            d.cqes
        )
        .map_err(io)?;
    } else {
        writeln!(out, "  No records dropped (cap {}).", bytes_text(opts.trace_cap as u64)).map_err(io)?;
    }
    writeln!(out, "  Decode it with: marrow trace show {} --opcode RDMA_WRITE --limit 8", opts.trace_out.display())
        .map_err(io)?;
    writeln!(out, "\nWall time: {:.2} s", wall.elapsed().as_secs_f64()).map_err(io)?;
    trace_summary.cqe_writes = traced_cqes;
    trace_summary.dropped_completions = d.cqes.saturating_sub(traced_cqes);
    Ok(DemoReport {
        qp_a: d.p.a.qpn,
        qp_b: d.p.b.qpn,
        link,
        rows: rows.iter().map(Row::summary).collect(),
        total: total(&rows),
        checks: std::iter::once(EVERY_BYTE.to_string()).chain(checks).collect(),
        trace: trace_summary,
        wall_s: wall.elapsed().as_secs_f64(),
    })
}
