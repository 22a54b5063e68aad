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

use crate::decode::completion_line;
use crate::trace::{Detail, render_record, view};
use marrow_bench::latency::{Latency, LatencySummary};
use marrow_mlx5::prelude::*;
use marrow_softnic::Faults;
use marrow_softnic::pair::{Endpoint, Pair, PairConfig, PairWire, Side, WaitError};
use marrow_softnic::peer::PeerDaemon;
use marrow_softnic::trace::{self as st, Kind};
use std::fmt;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

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

/// What `marrow demo` runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// A shorter run (a few iterations per row).
    pub quick: bool,
    /// Where the register trace is written.
    pub trace_out: PathBuf,
    /// The trace's byte cap.
    pub trace_cap: usize,
    /// How long each completion may take.
    pub timeout: Duration,
    /// A fault to arm on QP A before the run, to see how the demo fails.
    pub inject: Option<Inject>,
    /// Put B on a second softnic, reached over RoCEv2 on loopback UDP.
    pub wire: bool,
    /// Write every RoCEv2 frame A's port sends and receives here (with `wire`).
    pub pcap: Option<PathBuf>,
    /// With `wire`: run B's softnic as another process, this `marrow`
    /// executable's `softnic` daemon; `None` keeps both in this process.
    pub softnic_exe: Option<PathBuf>,
}

/// A fault `marrow demo --inject` arms on QP A (through the softnic's fault injection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// The engine stops serving QP A: the first wait times out.
    Stall,
    /// WQE number N (0-based) of QP A fails with REMOTE_ACCESS_ERR.
    FailWqe(u64),
    /// The next doorbell of QP A is lost.
    DropDoorbell,
}

/// `stall`, `drop-doorbell` or `fail-wqe:N`.
pub fn parse_inject(s: &str) -> Result<Inject, String> {
    match s {
        "stall" => Ok(Inject::Stall),
        "drop-doorbell" => Ok(Inject::DropDoorbell),
        _ => match s.strip_prefix("fail-wqe:") {
            Some(n) => crate::trace::parse_num(n).map(Inject::FailWqe),
            None => Err(format!("unknown fault '{s}': stall, drop-doorbell or fail-wqe:N")),
        },
    }
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            quick: false,
            trace_out: PathBuf::from("marrow-demo.trace"),
            trace_cap: DEFAULT_TRACE_CAP,
            timeout: Duration::from_secs(5),
            inject: None,
            wire: false,
            pcap: None,
            softnic_exe: None,
        }
    }
}

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

/// One row of the table: latencies of every operation of one kind and size.
#[derive(Clone, Debug)]
pub struct Row {
    /// Operation.
    pub op: &'static str,
    /// Bytes per operation.
    pub size: usize,
    /// Post-to-completion time of each operation.
    pub lat: Latency,
    /// Time with operations outstanding, in ns (what the rate is computed over).
    pub busy_ns: u64,
}

impl Row {
    fn new(op: &'static str, size: usize) -> Self {
        Row { op, size, lat: Latency::new(), busy_ns: 0 }
    }

    fn add(&mut self, lat: Duration) {
        self.lat.record(lat);
        self.busy_ns += lat.as_nanos() as u64;
    }

    /// Operations.
    pub fn ops(&self) -> usize {
        self.lat.len() as usize
    }

    /// Payload bytes moved.
    pub fn bytes(&self) -> u64 {
        (self.ops() * self.size) as u64
    }
}

/// `1 KiB`, `64 B`…
pub fn size_text(n: usize) -> String {
    match n {
        _ if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        _ if n >= 1 << 10 && n.is_multiple_of(1 << 10) => format!("{} KiB", n >> 10),
        _ => format!("{n} B"),
    }
}

/// `512 B`, `1.5 MiB`: one decimal past a KiB.
fn bytes_text(n: u64) -> String {
    bytesize::ByteSize(n).display().iec().to_string()
}

/// One row as `--json` gives it: the table's columns, plus perftest's
/// latency columns (`marrow_bench`'s, in µs).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct RowSummary {
    /// Operation.
    pub op: String,
    /// Bytes per operation.
    pub bytes: u64,
    /// Operations.
    pub ops: u64,
    /// Payload bytes moved.
    pub total_bytes: u64,
    /// Latency columns.
    #[serde(flatten)]
    pub t: LatencySummary,
    /// Operations per second while operations were outstanding.
    pub ops_per_s: f64,
    /// Payload MiB per second over the same time.
    pub mib_per_s: f64,
}

fn summary(op: &str, size: u64, lat: &Latency, ops: usize, bytes: u64, busy_ns: u64) -> RowSummary {
    let secs = busy_ns as f64 / 1e9;
    let rate = if secs > 0.0 { ops as f64 / secs } else { 0.0 };
    let mibs = if secs > 0.0 { bytes as f64 / secs / f64::from(1u32 << 20) } else { 0.0 };
    RowSummary {
        op: op.into(),
        bytes: size,
        ops: ops as u64,
        total_bytes: bytes,
        t: lat.summary(),
        ops_per_s: rate,
        mib_per_s: mibs,
    }
}

impl Row {
    /// The row's figures.
    pub fn summary(&self) -> RowSummary {
        summary(self.op, self.size as u64, &self.lat, self.ops(), self.bytes(), self.busy_ns)
    }
}

fn table_cells(size: String, r: &RowSummary) -> [String; 9] {
    [
        r.op.to_string(),
        size,
        r.ops.to_string(),
        bytes_text(r.total_bytes),
        format!("{:.1}", r.t.t_typical_us),
        format!("{:.1}", r.t.p99_us),
        format!("{:.1}", r.t.t_max_us),
        format!("{:.0}", r.ops_per_s),
        format!("{:.1}", r.mib_per_s),
    ]
}

/// The totals line's figures: every row's samples in one histogram.
pub fn total(rows: &[Row]) -> RowSummary {
    let mut all = Latency::new();
    for r in rows {
        all.add(&r.lat);
    }
    let ops = rows.iter().map(Row::ops).sum();
    let bytes = rows.iter().map(Row::bytes).sum();
    let busy = rows.iter().map(|r| r.busy_ns).sum();
    summary("total", 0, &all, ops, bytes, busy)
}

/// The latency table, with a totals line below a rule.
pub fn render_table(rows: &[Row]) -> String {
    use crate::columns::{Align::Left, Align::Right, Columns};
    let figures = ["size", "ops", "bytes", "p50 µs", "p99 µs", "max µs", "ops/s", "MiB/s"].map(|h| (h, Right));
    let mut t = Columns::new(&[[("operation", Left)].as_slice(), &figures].concat());
    for r in rows {
        t.row(table_cells(size_text(r.size), &r.summary()));
    }
    t.row(table_cells(String::new(), &total(rows)));
    let mut lines = t.lines("");
    let rule = "-".repeat(lines.iter().map(|l| l.chars().count()).max().unwrap_or(0));
    // Under the header, and above the totals line.
    lines.insert(lines.len() - 1, rule.clone());
    lines.insert(1, rule);
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A fast per-iteration pattern (xorshift64), different for every seed.
fn pattern_into(v: &mut Vec<u8>, seed: u64, len: usize) {
    v.clear();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
}

/// A small PRNG for atomic operands (splitmix64).
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

fn low_mask(w: u32) -> u64 {
    if w >= 64 { u64::MAX } else { (1u64 << w) - 1 }
}

/// Masked fetch-and-add computed field by field: `boundary` marks the most
/// significant bit of each field; each field adds modulo its own width.
pub fn masked_fa(old: u64, add: u64, boundary: u64, width: u32) -> u64 {
    let mut out = 0u64;
    let mut lo = 0u32;
    for i in 0..width {
        if (boundary >> i) & 1 == 1 || i == width - 1 {
            let w = i - lo + 1;
            let m = low_mask(w);
            let sum = ((old >> lo) & m).wrapping_add((add >> lo) & m) & m;
            out |= sum << lo;
            lo = i + 1;
        }
    }
    out
}

/// Masked compare-and-swap: the new value (the fetched value is always `old`).
pub fn masked_cs(old: u64, swap: u64, compare: u64, swap_mask: u64, compare_mask: u64) -> u64 {
    if (old ^ compare) & compare_mask == 0 { (old & !swap_mask) | (swap & swap_mask) } else { old }
}

/// The first differing byte of `got` against `want`, as a message.
fn first_difference(got: &[u8], want: &[u8], base: usize, buf_addr: u64) -> Option<String> {
    let first = got.iter().zip(want).position(|(g, w)| g != w)?;
    let count = got.iter().zip(want).filter(|(g, w)| g != w).count();
    Some(format!(
        "byte {first:#x} of {} (buffer offset {:#x}, address {:#x}) is {:#04x}, expected {:#04x}; {count} of {} bytes differ",
        size_text(want.len()),
        base + first,
        buf_addr + (base + first) as u64,
        got[first],
        want[first],
        want.len()
    ))
}

struct Demo {
    p: Pair,
    timeout: Duration,
    /// Completions polled, send and receive.
    cqes: u64,
    src: Vec<u8>,
    scratch: Vec<u8>,
}

fn ep(p: &Pair, s: Side) -> &Endpoint {
    if s == Side::A { &p.a } else { &p.b }
}

fn other(s: Side) -> Side {
    if s == Side::A { Side::B } else { Side::A }
}

impl Demo {
    fn sge(&self, s: Side, off: usize, len: usize) -> Sge {
        let e = ep(&self.p, s);
        Sge { addr: e.addr + off as u64, length: len as u32, lkey: e.lkey }
    }

    fn remote(&self, s: Side, off: usize) -> RemoteAddr {
        let e = ep(&self.p, s);
        RemoteAddr { raddr: e.addr + off as u64, rkey: e.rkey }
    }

    fn write(&self, s: Side, off: usize, data: &[u8], ctx: Ctx) -> Result<(), DemoError> {
        ep(&self.p, s).buf.write_bytes(off, data).map_err(|e| DemoError::Post { ctx, error: e.to_string() })
    }

    fn read(&mut self, s: Side, off: usize, len: usize, ctx: Ctx) -> Result<(), DemoError> {
        self.scratch.resize(len, 0);
        ep(&self.p, s).buf.read_bytes(off, &mut self.scratch).map_err(|e| DemoError::Post { ctx, error: e.to_string() })
    }

    /// Compare `len` bytes at `off` of side `s` with `self.src`, and the guard after them.
    fn check_src(&mut self, s: Side, off: usize, ctx: Ctx) -> Result<(), DemoError> {
        let len = self.src.len();
        self.read(s, off, len, ctx)?;
        let addr = ep(&self.p, s).addr;
        if let Some(d) = first_difference(&self.scratch, &self.src, off, addr) {
            return Err(DemoError::Mismatch { ctx, detail: format!("side {s:?}: {d}") });
        }
        self.check_guard(s, off + len, ctx)
    }

    fn set_guard(&self, s: Side, off: usize, ctx: Ctx) -> Result<(), DemoError> {
        if off + GUARD.len() <= BUF_LEN { self.write(s, off, &GUARD, ctx) } else { Ok(()) }
    }

    fn check_guard(&mut self, s: Side, off: usize, ctx: Ctx) -> Result<(), DemoError> {
        if off + GUARD.len() > BUF_LEN {
            return Ok(());
        }
        self.read(s, off, GUARD.len(), ctx)?;
        if self.scratch != GUARD {
            return Err(DemoError::Mismatch {
                ctx,
                detail: format!(
                    "side {s:?}: the 8 bytes after the destination (offset {off:#x}) changed: {:02x?}, were {GUARD:02x?}",
                    self.scratch
                ),
            });
        }
        Ok(())
    }

    fn read_u64(&mut self, s: Side, off: usize, width: usize, ctx: Ctx) -> Result<u64, DemoError> {
        self.read(s, off, width, ctx)?;
        let mut b = [0u8; 8];
        b[..width].copy_from_slice(&self.scratch[..width]);
        // Atomics operate on host-order memory; a 4-byte value is the low half.
        Ok(if width == 4 { u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])) } else { u64::from_ne_bytes(b) })
    }

    fn write_u64(&self, s: Side, off: usize, width: usize, v: u64, ctx: Ctx) -> Result<(), DemoError> {
        if width == 4 {
            self.write(s, off, &(v as u32).to_ne_bytes(), ctx)
        } else {
            self.write(s, off, &v.to_ne_bytes(), ctx)
        }
    }

    /// Post one WQE on side `s`; returns its wqe_index and WQEBBs.
    fn post(&mut self, s: Side, params: CtrlParams, op: &WqeOp<'_>, ctx: Ctx) -> Result<(u16, u32), DemoError> {
        let sq = &mut self.p.side(s).sq;
        let index = sq.pi() as u16;
        let b = sq.post(params, op).map_err(|e| DemoError::Post { ctx, error: e.to_string() })?;
        Ok((index, u32::from(b.wqebbs)))
    }

    fn ring(&mut self, s: Side, ctx: Ctx) -> Result<(), DemoError> {
        self.p.side(s).sq.ring().map_err(|e| DemoError::Post { ctx, error: e.to_string() })
    }

    /// Post, ring and wait for the requester completion.
    fn one(&mut self, s: Side, op: &WqeOp<'_>, byte_cnt: usize, ctx: Ctx) -> Result<Duration, DemoError> {
        let t0 = Instant::now();
        let (index, bbs) = self.post(s, CtrlParams::signaled(0, 0), op, ctx)?;
        self.ring(s, ctx)?;
        self.wait_req(s, op.opcode_opmod().0, index, bbs, byte_cnt, ctx)?;
        Ok(t0.elapsed())
    }

    fn wait(&mut self, s: Side, recv: bool, ctx: Ctx) -> Result<Completion, DemoError> {
        let c = self.p.wait(s, recv, self.timeout).map_err(|error| DemoError::Wait { ctx, error })?;
        self.cqes += 1;
        Ok(c)
    }

    /// Wait for the requester completion of the WQE at `index` and free its slots.
    fn wait_req(
        &mut self,
        s: Side,
        opcode: WqeOpcode,
        index: u16,
        wqebbs: u32,
        byte_cnt: usize,
        ctx: Ctx,
    ) -> Result<(), DemoError> {
        let c = self.wait(s, false, ctx)?;
        match c {
            Completion::Requester { wqe_opcode, wqe_counter, byte_cnt: b, .. }
                if wqe_opcode == opcode && wqe_counter == index && b as usize == byte_cnt =>
            {
                self.p.side(s).sq.complete_through(index, wqebbs);
                Ok(())
            }
            other => Err(DemoError::Completion {
                ctx,
                detail: format!(
                    "expected the requester completion of {opcode} at wqe_counter {index:#06x} with byte_cnt {byte_cnt}; got {}",
                    completion_line(&other)
                ),
            }),
        }
    }

    /// Wait for the receive completion of receive WQE `index`.
    fn wait_recv(&mut self, s: Side, index: u16, byte_cnt: usize, ctx: Ctx) -> Result<(), DemoError> {
        let c = self.wait(s, true, ctx)?;
        match c {
            Completion::Responder { opcode: CqeOpcode::RESP_SEND, wqe_counter, byte_cnt: b, .. }
                if wqe_counter == index && b as usize == byte_cnt =>
            {
                self.p.side(s).rq.complete(wqe_counter);
                Ok(())
            }
            other => Err(DemoError::Completion {
                ctx,
                detail: format!(
                    "expected a RESP_SEND completion of receive WQE {index:#06x} with byte_cnt {byte_cnt}; got {}",
                    completion_line(&other)
                ),
            }),
        }
    }

    /// RDMA_WRITE (A's bytes into B) or RDMA_READ (B's bytes into A), always
    /// posted by A: fill the source, guard the byte after the destination,
    /// run, check every byte.
    fn rdma(&mut self, rows: &mut Vec<Row>, size: usize, n: usize, seed: u64, read: bool) -> Result<(), DemoError> {
        let (name, off, from, to) =
            if read { ("RDMA_READ", RD, Side::B, Side::A) } else { ("RDMA_WRITE", WR, Side::A, Side::B) };
        let mut row = Row::new(name, size);
        for iter in 0..n {
            let ctx = Ctx { op: row.op, size, iter };
            pattern_into(&mut self.src, seed ^ ((size as u64) << 24) ^ iter as u64, size);
            self.write(from, off, &self.src, ctx)?;
            self.set_guard(to, off + size, ctx)?;
            let sgl = [self.sge(Side::A, off, size)];
            let remote = self.remote(Side::B, off);
            let op = if read { WqeOp::RdmaRead { remote, sgl: &sgl } } else { WqeOp::RdmaWrite { remote, sgl: &sgl } };
            row.add(self.one(Side::A, &op, size, ctx)?);
            self.check_src(to, off, ctx)?;
        }
        rows.push(row);
        Ok(())
    }

    fn inline_write(&mut self, rows: &mut Vec<Row>, size: usize, n: usize, seed: u64) -> Result<(), DemoError> {
        let mut row = Row::new("RDMA_WRITE inline", size);
        for iter in 0..n {
            let ctx = Ctx { op: row.op, size, iter };
            pattern_into(&mut self.src, seed ^ ((size as u64) << 24) ^ iter as u64, size);
            self.set_guard(Side::B, WR + size, ctx)?;
            let data = std::mem::take(&mut self.src);
            let op = WqeOp::RdmaWriteInline { remote: self.remote(Side::B, WR), data: &data };
            let r = self.one(Side::A, &op, size, ctx);
            self.src = data;
            row.add(r?);
            self.check_src(Side::B, WR, ctx)?;
        }
        rows.push(row);
        Ok(())
    }

    /// `BATCH` inline 8-byte writes behind one doorbell, only the last
    /// signaled: the CQE of the last completes them all (`complete_through`).
    fn batched_writes(&mut self, rows: &mut Vec<Row>, batches: usize, seed: u64) -> Result<(), DemoError> {
        const SIZE: usize = 8;
        let mut row = Row::new("RDMA_WRITE inline, 16 per doorbell", SIZE);
        let quiet = CtrlParams { completion: CompletionMode::CQE_ON_CQE_ERROR, ..CtrlParams::signaled(0, 0) };
        let mut posted = [Instant::now(); BATCH];
        let mut datas = [[0u8; SIZE]; BATCH];
        for iter in 0..batches {
            let ctx = Ctx { op: row.op, size: SIZE, iter };
            self.set_guard(Side::B, WR + BATCH * SIZE, ctx)?;
            let mut last = (0, 0);
            for j in 0..BATCH {
                pattern_into(&mut self.src, seed ^ ((iter * BATCH + j) as u64), SIZE);
                datas[j].copy_from_slice(&self.src);
                let op = WqeOp::RdmaWriteInline { remote: self.remote(Side::B, WR + j * SIZE), data: &datas[j] };
                let params = if j + 1 == BATCH { CtrlParams::signaled(0, 0) } else { quiet };
                posted[j] = Instant::now();
                last = self.post(Side::A, params, &op, ctx)?;
            }
            self.ring(Side::A, ctx)?;
            self.wait_req(Side::A, WqeOpcode::RDMA_WRITE, last.0, last.1, SIZE, ctx)?;
            let done = Instant::now();
            for t in posted {
                row.lat.record(done - t);
            }
            row.busy_ns += (done - posted[0]).as_nanos() as u64;
            self.src = datas.concat();
            self.check_src(Side::B, WR, ctx)?;
        }
        rows.push(row);
        Ok(())
    }

    fn fetch_add(
        &mut self,
        rows: &mut Vec<Row>,
        checks: &mut Vec<String>,
        n: usize,
        rng: &mut Rng,
    ) -> Result<(), DemoError> {
        let mut row = Row::new("ATOMIC_FA", 8);
        let target = ATOM;
        // Start below 2^64 so that the sum wraps around half way.
        let start = 0u64.wrapping_sub((n as u64 / 2) << 23);
        let mut expect = start;
        self.write_u64(Side::B, target, 8, start, Ctx { op: row.op, size: 8, iter: 0 })?;
        let local = self.sge(Side::A, ATOM, 8);
        for iter in 0..n {
            let ctx = Ctx { op: row.op, size: 8, iter };
            let add = rng.next() >> 40; // 24 bits: 2^23 on average
            self.write(Side::A, ATOM, &[POISON; 8], ctx)?;
            let op = WqeOp::AtomicFa { remote: self.remote(Side::B, target), local, add };
            row.add(self.one(Side::A, &op, 8, ctx)?);
            let old = self.read_u64(Side::A, ATOM, 8, ctx)?;
            if old != expect {
                return Err(DemoError::Mismatch {
                    ctx,
                    detail: format!("fetched {old:#018x}, the running sum is {expect:#018x} (add {add:#x})"),
                });
            }
            expect = expect.wrapping_add(add);
        }
        let ctx = Ctx { op: row.op, size: 8, iter: n };
        let fin = self.read_u64(Side::B, target, 8, ctx)?;
        if fin != expect {
            return Err(DemoError::Mismatch {
                ctx,
                detail: format!("final value {fin:#018x}, expected {expect:#018x}"),
            });
        }
        checks.push(format!(
            "ATOMIC_FA: {n} adds from {start:#018x} (wrapping past 2^64); every fetched value was the running sum; final {fin:#018x}"
        ));
        rows.push(row);
        Ok(())
    }

    fn compare_swap(
        &mut self,
        rows: &mut Vec<Row>,
        checks: &mut Vec<String>,
        n: usize,
        rng: &mut Rng,
    ) -> Result<(), DemoError> {
        let (mut hit, mut miss) = (Row::new("ATOMIC_CS swapped", 8), Row::new("ATOMIC_CS compare failed", 8));
        let target = ATOM + 8;
        let mut cur = rng.next();
        self.write_u64(Side::B, target, 8, cur, Ctx { op: hit.op, size: 8, iter: 0 })?;
        let local = self.sge(Side::A, ATOM, 8);
        for i in 0..2 * n {
            let succeed = i % 2 == 0;
            let row = if succeed { &mut hit } else { &mut miss };
            let ctx = Ctx { op: row.op, size: 8, iter: i / 2 };
            let swap = rng.next();
            let compare = if succeed { cur } else { cur ^ (1 << (rng.next() % 64)) };
            self.write(Side::A, ATOM, &[POISON; 8], ctx)?;
            let op = WqeOp::AtomicCs { remote: self.remote(Side::B, target), local, compare, swap };
            row.add(self.one(Side::A, &op, 8, ctx)?);
            let old = self.read_u64(Side::A, ATOM, 8, ctx)?;
            let now = self.read_u64(Side::B, target, 8, ctx)?;
            let want = if succeed { swap } else { cur };
            if old != cur || now != want {
                return Err(DemoError::Mismatch {
                    ctx,
                    detail: format!(
                        "compare {compare:#018x} swap {swap:#018x} on {cur:#018x}: fetched {old:#018x}, memory {now:#018x}; expected fetched {cur:#018x}, memory {want:#018x}"
                    ),
                });
            }
            cur = want;
        }
        checks.push(format!(
            "ATOMIC_CS: {n} swaps and {n} failed compares; every fetched value and every memory value as computed"
        ));
        rows.push(hit);
        rows.push(miss);
        Ok(())
    }

    fn masked(
        &mut self,
        rows: &mut Vec<Row>,
        checks: &mut Vec<String>,
        cs: bool,
        width: usize,
        n: usize,
        rng: &mut Rng,
    ) -> Result<(), DemoError> {
        let name = if cs { "ATOMIC_MASKED_CS" } else { "ATOMIC_MASKED_FA" };
        let mut row = Row::new(name, width);
        let target = ATOM + if width == 4 { 16 } else { 24 };
        let wmask = low_mask(width as u32 * 8);
        let mut cur = rng.next() & wmask;
        self.write_u64(Side::B, target, width, cur, Ctx { op: name, size: width, iter: 0 })?;
        let local = self.sge(Side::A, ATOM, width);
        let remote = self.remote(Side::B, target);
        let mut swapped = 0;
        for iter in 0..n {
            let ctx = Ctx { op: name, size: width, iter };
            let (a, b, c, d) = (rng.next() & wmask, rng.next() & wmask, rng.next() & wmask, rng.next() & wmask);
            let (op, want, what) = if cs {
                // Half the compares are made to match on the compared bits.
                let compare = if rng.next() & 1 == 0 { cur ^ (b & !d) } else { b };
                let want = masked_cs(cur, a, compare, c, d);
                swapped += usize::from((cur ^ compare) & d == 0);
                let op = if width == 4 {
                    WqeOp::MaskedCs32 {
                        remote,
                        local,
                        swap: a as u32,
                        compare: compare as u32,
                        swap_mask: c as u32,
                        compare_mask: d as u32,
                    }
                } else {
                    WqeOp::MaskedCs64 { remote, local, swap: a, compare, swap_mask: c, compare_mask: d }
                };
                (op, want, format!("swap {a:#x} compare {compare:#x} swap_mask {c:#x} compare_mask {d:#x}"))
            } else {
                let boundary = match rng.next() % 4 {
                    0 => 0,
                    1 => 0x8000_8000_8000_8000 & wmask,
                    2 => 0x8080_8080_8080_8080 & wmask,
                    _ => b,
                };
                let want = masked_fa(cur, a, boundary, width as u32 * 8);
                let op = if width == 4 {
                    WqeOp::MaskedFa32 { remote, local, add: a as u32, field_boundary: boundary as u32 }
                } else {
                    WqeOp::MaskedFa64 { remote, local, add: a, field_boundary: boundary }
                };
                (op, want, format!("add {a:#x} field_boundary {boundary:#x}"))
            };
            self.write(Side::A, ATOM, &[POISON; 8][..width], ctx)?;
            row.add(self.one(Side::A, &op, width, ctx)?);
            let old = self.read_u64(Side::A, ATOM, width, ctx)?;
            let now = self.read_u64(Side::B, target, width, ctx)?;
            if old != cur || now != want {
                return Err(DemoError::Mismatch {
                    ctx,
                    detail: format!(
                        "{what} on {cur:#x}: fetched {old:#x}, memory {now:#x}; computed: fetched {cur:#x}, memory {want:#x}"
                    ),
                });
            }
            cur = want;
        }
        checks.push(if cs {
            format!(
                "{name} {width} B: {n} operations ({swapped} matched the compare mask), each checked against the CPU"
            )
        } else {
            format!(
                "{name} {width} B: {n} operations with 1-, 8-, 16-bit and random fields, each checked against the CPU"
            )
        });
        rows.push(row);
        Ok(())
    }

    /// SEND from `from` into a receive posted at the other side; the
    /// latency is from the post of the SEND to the receive completion.
    fn send_one(&mut self, from: Side, size: usize, seed: u64, ctx: Ctx) -> Result<Duration, DemoError> {
        let to = other(from);
        let rsge = [self.sge(to, RECV, 64 << 10)];
        let rindex = self.p.side(to).rq.post(&rsge).map_err(|e| DemoError::Post { ctx, error: e.to_string() })?;
        pattern_into(&mut self.src, seed, size);
        self.write(from, SEND_SRC, &self.src, ctx)?;
        self.set_guard(to, RECV + size, ctx)?;
        let sgl = [self.sge(from, SEND_SRC, size)];
        let op = WqeOp::Send { sgl: &sgl };
        let t0 = Instant::now();
        let (index, bbs) = self.post(from, CtrlParams::signaled(0, 0), &op, ctx)?;
        self.ring(from, ctx)?;
        self.wait_req(from, WqeOpcode::SEND, index, bbs, size, ctx)?;
        self.wait_recv(to, rindex, size, ctx)?;
        let dt = t0.elapsed();
        self.check_src(to, RECV, ctx)?;
        Ok(dt)
    }

    fn send_recv(&mut self, rows: &mut Vec<Row>, size: usize, n: usize, seed: u64) -> Result<(), DemoError> {
        let mut row = Row::new("SEND/RECV (A→B, B→A)", size);
        for iter in 0..n {
            let ctx = Ctx { op: row.op, size, iter };
            let s = seed ^ ((size as u64) << 24) ^ ((iter as u64) << 1);
            row.add(self.send_one(Side::A, size, s, ctx)?);
            row.add(self.send_one(Side::B, size, s | 1, ctx)?);
        }
        rows.push(row);
        Ok(())
    }
}

/// Iterations per row.
#[derive(Clone, Copy, Debug)]
struct Plan {
    quick: bool,
    /// Across a RoCEv2 wire: the masked atomics, which have none, are skipped.
    wire: bool,
}

impl Plan {
    fn n(self, full: usize, quick: usize) -> usize {
        if self.quick { quick } else { full }
    }

    fn per_size(self, size: usize) -> usize {
        match size {
            0..=64 => self.n(5000, 100),
            65..=4096 => self.n(2000, 50),
            4097..=65536 => self.n(1000, 10),
            _ => self.n(200, 3),
        }
    }
}

/// Sizes of the RDMA_WRITE and RDMA_READ rows.
pub const SIZES: [usize; 5] = [8, 64, 4 << 10, 64 << 10, 1 << 20];

fn body(d: &mut Demo, plan: Plan, rows: &mut Vec<Row>, checks: &mut Vec<String>) -> Result<(), DemoError> {
    let mut rng = Rng(0x6d61_7272_6f77);
    for size in SIZES {
        d.rdma(rows, size, plan.per_size(size), 0x1000_0000_0000, false)?;
    }
    for size in [8, 64] {
        d.inline_write(rows, size, plan.per_size(size), 0x2000_0000_0000)?;
    }
    d.batched_writes(rows, plan.n(500, 10), 0x3000_0000_0000)?;
    for size in SIZES {
        d.rdma(rows, size, plan.per_size(size), 0x4000_0000_0000, true)?;
    }
    d.fetch_add(rows, checks, plan.n(5000, 100), &mut rng)?;
    d.compare_swap(rows, checks, plan.n(2000, 50), &mut rng)?;
    if plan.wire {
        checks.push("masked atomics skipped: RoCEv2 has no wire form for them (a wire QP refuses them)".into());
    } else {
        for (cs, width) in [(false, 4), (false, 8), (true, 4), (true, 8)] {
            d.masked(rows, checks, cs, width, plan.n(2000, 50), &mut rng)?;
        }
    }
    for size in [64, 4 << 10] {
        d.send_recv(rows, size, plan.per_size(size) / 2, 0x5000_0000_0000)?;
    }
    Ok(())
}

/// The records of the first RDMA_WRITE WQE on `qpn`: from the doorbell
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

/// Run the demo, printing as it goes. The trace is written even when the
/// demo fails, for inspection.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_fa_by_fields() {
        // Two 16-bit fields: the carry out of the low field is dropped.
        assert_eq!(masked_fa(0x0001_ffff, 0x0001_0001, 0x8000_8000, 32), 0x0002_0000);
        assert_eq!(masked_fa(0x0001_ffff, 0x0001_0001, 0, 32), 0x0003_0000);
        assert_eq!(masked_fa(u64::MAX, 1, 0, 64), 0);
        // An 8-bit field then a 24-bit one: 0xff + 1 stays in the low field.
        assert_eq!(masked_fa(0x1ff, 1, 0x80, 32), 0x100);
        // Every bit a field: XOR.
        assert_eq!(masked_fa(0b1011, 0b0110, u64::MAX, 4), 0b1101);
    }

    #[test]
    fn masked_cs_masks() {
        assert_eq!(masked_cs(0x0002_0000, 0xabcd, 0x0002_0000, 0xffff, 0xffff_0000), 0x0002_abcd);
        assert_eq!(masked_cs(0x0003_0000, 0xabcd, 0x0002_0000, 0xffff, 0xffff_0000), 0x0003_0000);
    }

    #[test]
    fn rows_summarise_their_samples_and_sizes_read_as_units() {
        let mut r = Row::new("RDMA_WRITE", 8);
        for us in 1..=100 {
            r.add(Duration::from_micros(us));
        }
        let s = r.summary();
        let near = |a: f64, b: f64| (a - b).abs() < b * 2e-3;
        assert!(near(s.t.t_typical_us, 50.0) && near(s.t.p99_us, 99.0) && near(s.t.t_max_us, 100.0), "{s:?}");
        assert_eq!((s.ops, s.total_bytes), (100, 800));
        // ops/s over the time outstanding: 100 operations in 5050 µs.
        assert!(near(s.ops_per_s, 100.0 / 5050e-6), "{s:?}");
        let t = total(&[r.clone(), r]);
        assert_eq!((t.ops, t.total_bytes), (200, 1600));
        assert_eq!(size_text(8), "8 B");
        assert_eq!(size_text(4096), "4 KiB");
        assert_eq!(size_text(1 << 20), "1 MiB");
    }

    #[test]
    fn byte_counts_keep_one_decimal_past_a_kib() {
        // The text the demo printed before it used bytesize.
        for (n, want) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1536, "1.5 KiB"),
            (3 << 20, "3.0 MiB"),
            ((5 << 30) + (1 << 29), "5.5 GiB"),
        ] {
            assert_eq!(bytes_text(n), want);
        }
    }

    #[test]
    fn mismatches_name_the_first_byte() {
        let want = [1u8, 2, 3, 4];
        assert_eq!(first_difference(&want, &want, 0, 0x1000), None);
        let d = first_difference(&[1, 2, 9, 8], &want, 0x40, 0x1000).unwrap();
        assert_eq!(
            d,
            "byte 0x2 of 4 B (buffer offset 0x42, address 0x1042) is 0x09, expected 0x03; 2 of 4 bytes differ"
        );
        assert_eq!(parse_inject("fail-wqe:0x10"), Ok(Inject::FailWqe(16)));
        assert_eq!(parse_inject("stall"), Ok(Inject::Stall));
        assert!(parse_inject("boom").is_err());
    }

    #[test]
    fn patterns_differ_per_seed() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        pattern_into(&mut a, 1, 100);
        pattern_into(&mut b, 2, 100);
        assert_eq!(a.len(), 100);
        assert_ne!(a, b);
    }
}
