//! `marrow trace show`: a softnic register trace (`docs/TRACE.md`), one
//! line per record, with the WQEs, CQEs and doorbells decoded by the same
//! decode tree as `marrow decode` ([`crate::decode`], [`crate::print`]).
//!
//! Everything here takes untrusted bytes: a damaged file prints the records
//! before the damage and reports where it is; nothing panics.

use crate::decode::{Options, decode};
use crate::fields::{enum_text, struct_node};
use crate::model::{Decoded, Kind as DecodeKind, hex_string};
use crate::print::{render_item, render_node};
use crate::trace_shared::Facts;
pub use crate::trace_shared::{Detail, KINDS};
use marrow_mlx5::cqe::{Completion, decode_cqe};
use marrow_mlx5::doorbell::{DoorbellStyle, decode_uar_doorbell};
use marrow_mlx5::raw::{CqeOpcode, MLX5_INVALID_LKEY, WqeOpcode, mlx5_cqe64, mlx5_qp_dbrec, mlx5_wqe_data_seg};
use marrow_softnic::QpState;
use marrow_softnic::trace::{self as st, Kind, Record, TraceError};
use serde_json::{Value as Json, json};
use std::fmt::Write as _;
use std::io::Write;
use zerocopy::FromBytes;

/// A record kind from its name (`wqe-fetch`, `WQE_FETCH`) or number.
pub fn parse_kind(s: &str) -> Result<Kind, String> {
    let norm = s.trim().to_ascii_lowercase().replace('_', "-");
    if let Some(k) = KINDS.iter().find(|k| k.name() == norm) {
        return Ok(*k);
    }
    if let Ok(n) = parse_num(&norm).and_then(|n| u8::try_from(n).map_err(|e| e.to_string())) {
        return Ok(Kind(n));
    }
    let names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
    Err(format!("unknown record kind '{s}'; kinds: {}", names.join(", ")))
}

/// A decimal or `0x` hex number.
pub fn parse_num(s: &str) -> Result<u64, String> {
    let s = s.trim();
    clap_num::maybe_hex::<u64>(s).map_err(|e| format!("'{s}': {e}"))
}

/// What `--opcode` matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpcodeMatch {
    /// A send WQE opcode: WQE fetches of it, and requester or error CQEs of such a WQE.
    Wqe(WqeOpcode),
    /// A CQE opcode (`RESP_SEND`, `REQ_ERR`…): CQEs with it.
    Cqe(CqeOpcode),
}

/// An opcode by its spec name (a WQE opcode such as `RDMA_WRITE`, or a CQE
/// opcode such as `RESP_SEND`), or a WQE opcode by number.
pub fn parse_opcode(s: &str) -> Result<OpcodeMatch, String> {
    let up = s.trim().to_ascii_uppercase().replace('-', "_");
    if let Some(op) = WqeOpcode::ALL.iter().find(|o| o.name() == Some(up.as_str())) {
        return Ok(OpcodeMatch::Wqe(*op));
    }
    if let Some(op) = CqeOpcode::ALL.iter().find(|o| o.name() == Some(up.as_str())) {
        return Ok(OpcodeMatch::Cqe(*op));
    }
    if let Ok(n) = parse_num(s).and_then(|n| u8::try_from(n).map_err(|e| e.to_string())) {
        return Ok(OpcodeMatch::Wqe(WqeOpcode(n)));
    }
    let names: Vec<&str> = WqeOpcode::ALL.iter().filter_map(|o| o.name()).collect();
    Err(format!("unknown opcode '{s}'; WQE opcodes: {} (or a CQE opcode such as RESP_SEND, REQ_ERR)", names.join(", ")))
}

/// Which records to show. Within one filter any value matches; all filters must match.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these QPs.
    pub qps: Vec<u32>,
    /// Only WQE fetches and CQEs of these opcodes.
    pub opcodes: Vec<OpcodeMatch>,
    /// Only errors: error CQEs, WQE_ERROR, FAULT, CQ_OVERFLOW, QP_STATE to ERR, dropped doorbells.
    pub errors: bool,
    /// Only these kinds.
    pub kinds: Vec<Kind>,
    /// At most this many records.
    pub limit: Option<usize>,
    /// Only records at or after this `t_ns`.
    pub since: Option<u64>,
    /// Only records at or before this `t_ns`.
    pub until: Option<u64>,
    /// Only records numbered in this range (first, last; inclusive): `--around N --context K`.
    pub around: Option<(usize, usize)>,
}

impl Filter {
    /// The record numbers `--around n --context k` names.
    pub fn around(n: usize, k: usize) -> (usize, usize) {
        (n.saturating_sub(k), n.saturating_add(k))
    }

    /// Whether the test needs the record decoded (`--errors`, `--opcode`).
    fn needs_view(&self) -> bool {
        self.errors || !self.opcodes.is_empty()
    }

    /// The tests that need only the record header, done before any decoding.
    fn header_passes(&self, index: usize, r: &Record) -> bool {
        self.around.is_none_or(|(a, b)| (a..=b).contains(&index))
            && self.since.is_none_or(|t| r.t_ns >= t)
            && self.until.is_none_or(|t| r.t_ns <= t)
            && (self.qps.is_empty() || self.qps.contains(&r.qpn))
            && (self.kinds.is_empty() || self.kinds.contains(&r.kind))
            && (!self.errors || may_be_error(r))
            && (self.opcodes.is_empty() || matches!(r.kind, Kind::WQE_FETCH | Kind::BLUEFLAME | Kind::CQE_WRITE))
    }
}

/// False for records [`view`] never marks as errors, decided without
/// decoding them, so `--errors` skips the decode of a healthy trace's records.
fn may_be_error(r: &Record) -> bool {
    match r.kind {
        Kind::DOORBELL_DROPPED | Kind::QP_STATE | Kind::CQ_OVERFLOW | Kind::FAULT | Kind::WQE_ERROR => true,
        Kind::CQE_WRITE => mlx5_cqe64::ref_from_bytes(&r.bytes)
            .is_ok_and(|c| matches!(c.opcode(), CqeOpcode::REQ_ERR | CqeOpcode::RESP_ERR)),
        _ => false,
    }
}

/// Options of `marrow trace show`.
#[derive(Clone, Debug, Default)]
pub struct ShowOptions {
    /// Which records.
    pub filter: Filter,
    /// How much of each.
    pub detail: Detail,
    /// JSON Lines instead of text.
    pub json: bool,
    /// Print only the last N records that pass the filter (held in a ring of N).
    pub tail: Option<usize>,
}

/// Where a trace file is damaged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// What is wrong.
    pub message: String,
    /// Byte offset in the file.
    pub offset: usize,
}

/// What [`show`] printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    /// Records read before the end, the damage or the limit.
    pub total: usize,
    /// Records printed.
    pub shown: usize,
    /// Records that passed the filter (more than `shown` under `--tail`).
    pub matched: usize,
    /// The damage, for a malformed or truncated file.
    pub damage: Option<Damage>,
    /// Bytes of the file read.
    pub bytes: usize,
    /// Reading stopped at [`Filter::limit`] or past [`Filter::around`], before the end of the file.
    pub limited: bool,
}

/// A parse error as a message and a file offset.
pub fn damage_of(e: &TraceError) -> Damage {
    let offset = match *e {
        TraceError::BadMagic => 0,
        TraceError::BadVersion(_) => 8,
        TraceError::Truncated { offset, .. } | TraceError::Read { offset, .. } => offset,
    };
    Damage { message: e.to_string(), offset }
}

/// `ibv_qp_state` names.
pub fn qp_state_name(v: u8) -> String {
    match QpState::from_u8(v) {
        Some(QpState::Reset) => "RESET".into(),
        Some(QpState::Init) => "INIT".into(),
        Some(QpState::Rtr) => "RTR".into(),
        Some(QpState::Rts) => "RTS".into(),
        Some(QpState::Sqd) => "SQD".into(),
        Some(QpState::Sqe) => "SQE".into(),
        Some(QpState::Err) => "ERR".into(),
        None => format!("unknown {v:#04x}"),
    }
}

/// One record, decoded.
#[derive(Clone, Debug)]
pub struct View {
    /// The line after the common columns.
    pub summary: String,
    /// Lines under it (without indentation), at the detail asked for.
    pub details: Vec<String>,
    /// The decode tree, for WQEs, CQEs, doorbells and doorbell records.
    pub decoded: Option<Decoded>,
    /// An error record (see [`Filter::errors`]).
    pub is_error: bool,
    /// The WQE opcode: of a fetched WQE, or of the WQE a requester or error CQE completes.
    pub wqe_opcode: Option<WqeOpcode>,
    /// The CQE opcode of a CQE.
    pub cqe_opcode: Option<CqeOpcode>,
    /// Extra JSON members.
    pub extra: Vec<(&'static str, Json)>,
}

impl View {
    fn facts(&self) -> Facts {
        Facts { is_error: self.is_error, wqe_opcode: self.wqe_opcode, cqe_opcode: self.cqe_opcode }
    }

    fn new(summary: String) -> Self {
        View {
            summary,
            details: Vec::new(),
            decoded: None,
            is_error: false,
            wqe_opcode: None,
            cqe_opcode: None,
            extra: Vec::new(),
        }
    }
}

/// Text from a record's bytes: UTF-8, with what a terminal would obey
/// (controls, bidi and other format characters, bytes that are not UTF-8) escaped.
fn text_of(bytes: &[u8]) -> String {
    crate::print::escape_bytes(bytes)
}

fn try_decode(bytes: &[u8], kind: DecodeKind) -> Option<Decoded> {
    decode(bytes, &Options { kind, ownership: None }).ok().and_then(|r| r.items.into_iter().next())
}

/// The tree lines of a decoded item, without its summary line, one level less indented.
fn body_lines(d: &Decoded) -> Vec<String> {
    render_item(d).lines().skip(1).map(|l| l.strip_prefix('\t').unwrap_or(l).to_owned()).collect()
}

fn error_lines(d: &Decoded) -> Vec<String> {
    d.errors.iter().map(|e| format!("!! error: {e}")).collect()
}

fn hexdump_lines(bytes: &[u8], max: usize) -> Vec<String> {
    let mut out: Vec<String> = bytes
        .iter()
        .take(max)
        .collect::<Vec<_>>()
        .chunks(16)
        .enumerate()
        .map(|(i, c)| {
            let hex: Vec<String> = c.iter().map(|b| format!("{b:02x}")).collect();
            format!("{:#05x}: {}", i * 16, hex.join(" "))
        })
        .collect();
    if bytes.len() > max {
        out.push(format!("... {} more bytes", bytes.len() - max));
    }
    out
}

fn doorbell_view(r: &Record, detail: Detail, tree: bool) -> View {
    let dropped = r.kind == Kind::DOORBELL_DROPPED;
    let tree = tree || detail == Detail::Full;
    let arr = <[u8; 8]>::try_from(&r.bytes[..]);
    let d = if tree && arr.is_ok() { try_decode(&r.bytes, DecodeKind::UarDb) } else { None };
    let (Ok(arr), true) = (arr, d.is_some() || !tree) else {
        let mut v = View::new(format!("{} bytes (a doorbell is 8): {}", r.bytes.len(), hex_string(&r.bytes)));
        v.is_error = dropped;
        return v;
    };
    let u = decode_uar_doorbell(arr);
    let text = match u.style {
        DoorbellStyle::RdmaCore => format!(
            "QPN {:#08x}, wqe_index {:#06x}, {} ds {} (rdma-core style: the last WQE's control bytes)",
            u.qpn,
            u.wqe_index,
            enum_text(u.opcode.name(), u64::from(u.opcode.0), 2),
            u.ds
        ),
        DoorbellStyle::IndexAndQpn => {
            format!("QPN {:#08x}, wqe_index {:#06x} (NVSHMEM/DOCA style: next free WQEBB)", u.qpn, u.wqe_index)
        }
    };
    let mut v = View::new(if dropped { format!("dropped by fault injection: {text}") } else { text });
    v.is_error = dropped;
    if let (Detail::Full, Some(d)) = (detail, &d) {
        v.details = body_lines(d);
    }
    v.decoded = d;
    v
}

fn dbrec_view(r: &Record, detail: Detail, tree: bool) -> View {
    if !tree
        && detail != Detail::Full
        && let Ok(rec) = mlx5_qp_dbrec::read_from_bytes(&r.bytes[..])
    {
        // The summary the decoder gives, without building its tree.
        return View::new(format!(
            "QP doorbell record: rcv_wqe_counter {:#06x}, send_wqe_counter {:#06x}",
            rec.rcv_wqe_counter(),
            rec.send_wqe_counter()
        ));
    }
    let Some(d) = (r.bytes.len() == 8).then(|| try_decode(&r.bytes, DecodeKind::QpDbrec)).flatten() else {
        return View::new(format!("{} bytes (a QP doorbell record is 8): {}", r.bytes.len(), hex_string(&r.bytes)));
    };
    let mut v = View::new(d.summary.clone());
    if detail == Detail::Full {
        v.details = body_lines(&d);
    }
    v.decoded = Some(d);
    v
}

fn wqe_view(r: &Record, detail: Detail, tree: bool) -> View {
    let opcode = (r.bytes.len() >= 4).then(|| WqeOpcode(r.bytes[3]));
    if !tree
        && detail == Detail::Brief
        && let Some(line) = crate::decode::wqe_line(&r.bytes)
    {
        let mut v = View::new(line);
        v.wqe_opcode = opcode;
        return v;
    }
    let Some(d) = try_decode(&r.bytes, DecodeKind::Wqe) else {
        let mut v = View::new(format!("{} bytes, not a WQE", r.bytes.len()));
        v.wqe_opcode = opcode;
        return v;
    };
    let mut v = View::new(d.summary.clone());
    v.wqe_opcode = opcode;
    if detail != Detail::Brief {
        v.details = body_lines(&d);
    }
    v.details.extend(error_lines(&d));
    v.decoded = Some(d);
    v
}

fn cqe_view(r: &Record, detail: Detail, tree: bool) -> View {
    let not_a_cqe = || View::new(format!("{} bytes (a CQE is 64): {}", r.bytes.len(), hex_string(&r.bytes)));
    if r.bytes.len() != 64 {
        return not_a_cqe();
    }
    let tree = tree || detail != Detail::Brief;
    let mut d = if tree { try_decode(&r.bytes, DecodeKind::Cqe) } else { None };
    if tree && d.is_none() {
        return not_a_cqe();
    }
    let Ok(cqe) = mlx5_cqe64::ref_from_bytes(&r.bytes) else { return not_a_cqe() };
    let owner = u8::from(cqe.owner());
    let mut v = View::new(d.as_ref().map(|d| d.summary.clone()).unwrap_or_default());
    v.cqe_opcode = Some(cqe.opcode());
    let op8 = |o: WqeOpcode| enum_text(o.name(), u64::from(o.0), 2);
    match decode_cqe(&r.bytes) {
        Ok(Completion::Requester { wqe_opcode, wqe_counter, byte_cnt, .. }) => {
            v.wqe_opcode = Some(wqe_opcode);
            v.summary = format!(
                "CQE REQ: {} completed, wqe_counter {wqe_counter:#06x}, byte_cnt {byte_cnt}, owner {owner}",
                op8(wqe_opcode)
            );
        }
        Ok(Completion::Responder { opcode, wqe_counter, byte_cnt, imm, .. }) => {
            v.summary = format!("CQE {opcode}: receive WQE {wqe_counter:#06x}, byte_cnt {byte_cnt}");
            if let Some(imm) = imm {
                let _ = write!(v.summary, ", imm {imm:#010x}");
            }
            let _ = write!(v.summary, ", owner {owner}");
        }
        Ok(Completion::Error(e)) => {
            v.wqe_opcode = Some(e.wqe_opcode);
            v.is_error = true;
            v.summary = format!(
                "CQE {}: {} failed, syndrome {}, vendor_err_synd {:#04x}, wqe_counter {:#06x}, owner {owner}",
                e.opcode,
                op8(e.wqe_opcode),
                enum_text(e.syndrome.name(), u64::from(e.syndrome.0), 2),
                e.vendor_err_synd,
                e.wqe_counter
            );
        }
        _ => {
            // No completion to word it by: the decoder's summary, decoded now if it was not.
            if d.is_none() {
                d = try_decode(&r.bytes, DecodeKind::Cqe);
                match &d {
                    Some(dd) => v.summary = dd.summary.clone(),
                    None => return not_a_cqe(),
                }
            }
        }
    }
    if matches!(v.cqe_opcode, Some(CqeOpcode::REQ_ERR | CqeOpcode::RESP_ERR)) {
        v.is_error = true;
    }
    if let Some(d) = &d {
        match detail {
            Detail::Brief => {}
            Detail::Normal => {
                v.details.push(d.summary.clone());
                v.details.extend(d.notes.iter().cloned());
            }
            Detail::Full => {
                v.details.push(d.summary.clone());
                v.details.extend(body_lines(d));
            }
        }
        if detail != Detail::Brief {
            v.details.extend(error_lines(d));
        }
    }
    v.decoded = d;
    v
}

fn qp_state_view(r: &Record) -> View {
    let [old, new] = r.bytes[..] else {
        return View::new(format!("{} bytes (a state change is 2): {}", r.bytes.len(), hex_string(&r.bytes)));
    };
    let mut v = View::new(format!("{} ({old}) → {} ({new})", qp_state_name(old), qp_state_name(new)));
    v.is_error = new == QpState::Err as u8;
    v.extra.push(("qp_state", json!({ "from": qp_state_name(old), "to": qp_state_name(new) })));
    v
}

fn cq_overflow_view(r: &Record) -> View {
    let mut v = match r.bytes[..] {
        [a, b, c, d, e, f, g, h] => {
            let pi = u32::from_le_bytes([a, b, c, d]);
            let ci = u32::from_le_bytes([e, f, g, h]);
            View::new(format!("CQ {:#x} overflowed: producer index {pi}, consumer index {ci}", r.obj))
        }
        _ => View::new(format!("CQ {:#x} overflowed ({} bytes: {})", r.obj, r.bytes.len(), hex_string(&r.bytes))),
    };
    v.is_error = true;
    v
}

fn recv_view(r: &Record, detail: Detail) -> View {
    let mut entries = Vec::new();
    let mut total = 0u64;
    for (i, seg) in r.bytes.chunks_exact(mlx5_wqe_data_seg::SIZE).enumerate() {
        let Ok(d) = mlx5_wqe_data_seg::ref_from_bytes(seg) else { break };
        if d.lkey() == MLX5_INVALID_LKEY {
            break;
        }
        total += u64::from(d.byte_count());
        entries.push((i * mlx5_wqe_data_seg::SIZE, seg, d.byte_count(), d.lkey(), d.addr()));
    }
    let mut v = View::new(format!(
        "receive WQE: {} scatter entr{}, {total} bytes",
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" }
    ));
    for (off, seg, bc, lkey, addr) in entries {
        match detail {
            Detail::Brief => {}
            Detail::Normal => {
                v.details.push(format!("[{off:#05x}] addr {addr:#018x}, byte_count {bc}, lkey {lkey:#010x}"))
            }
            Detail::Full => {
                let n = struct_node(&mlx5_wqe_data_seg::LAYOUT, seg, off);
                v.details.extend(render_node(&n).lines().map(str::to_owned));
            }
        }
    }
    v
}

/// Decode one record.
pub fn view(r: &Record, detail: Detail) -> View {
    view_as(r, detail, true)
}

/// [`view`] at [`Detail::Brief`] for text: the same summary, error flag and
/// opcodes, without building the decode tree of doorbells, doorbell records
/// CQEs and error-free WQEs (`decoded` is then `None` for them), which the line alone does not need.
pub fn view_line(r: &Record) -> View {
    view_as(r, Detail::Brief, false)
}

fn view_as(r: &Record, detail: Detail, tree: bool) -> View {
    match r.kind {
        Kind::DOORBELL | Kind::DOORBELL_DROPPED => doorbell_view(r, detail, tree),
        Kind::DBREC_READ => dbrec_view(r, detail, tree),
        Kind::WQE_FETCH | Kind::BLUEFLAME => wqe_view(r, detail, tree),
        Kind::CQE_WRITE => cqe_view(r, detail, tree),
        Kind::QP_STATE => qp_state_view(r),
        Kind::CQ_OVERFLOW => cq_overflow_view(r),
        Kind::RECV_WQE_FETCH => recv_view(r, detail),
        Kind::FAULT | Kind::WQE_ERROR => {
            let text = text_of(&r.bytes);
            let mut v = View::new(text.clone());
            v.is_error = true;
            v.extra.push(("text", Json::String(text)));
            v
        }
        Kind(k) => {
            let mut v = View::new(format!("unknown record kind {k:#04x}, {} bytes", r.bytes.len()));
            if detail != Detail::Brief {
                v.details = hexdump_lines(&r.bytes, 256);
            }
            v
        }
    }
}

/// The object and offset a record's `obj` and `addr` name.
pub fn place(r: &Record) -> String {
    let mut o = String::new();
    write_place(&mut o, r);
    o
}

/// [`place`], appended to `o`.
fn write_place(o: &mut String, r: &Record) {
    let _ = match r.kind {
        Kind::DOORBELL | Kind::DOORBELL_DROPPED => write!(o, "uar+{:#05x}", r.addr),
        Kind::DBREC_READ => write!(o, "dbrec+{:#x}", r.addr),
        Kind::WQE_FETCH => write!(o, "sq+{:#06x}", r.addr),
        Kind::BLUEFLAME => write!(o, "uar+{:#05x}", r.addr),
        Kind::RECV_WQE_FETCH => write!(o, "rq+{:#06x}", r.addr),
        Kind::CQE_WRITE => write!(o, "cq {:#x}+{:#06x}", r.obj, r.addr),
        Kind::CQ_OVERFLOW => write!(o, "cq {:#x}", r.obj),
        Kind::QP_STATE | Kind::FAULT | Kind::WQE_ERROR => write!(o, "-"),
        _ => write!(o, "obj {:#x} addr {:#x}", r.obj, r.addr),
    };
}

/// Pad what was appended to `o` since `from` with spaces to `width`
/// characters, as `{:<width}` would: the columns are built in place,
/// without a string per column per record.
fn pad_from(o: &mut String, from: usize, width: usize) {
    let n = o[from..].chars().count();
    o.extend(std::iter::repeat_n(' ', width.saturating_sub(n)));
}

fn kind_text(k: Kind) -> String {
    if KINDS.contains(&k) { k.name().to_owned() } else { format!("kind-{:#04x}", k.0) }
}

/// Whether `r` (decoded as `v`) passes `f` (all but the limit).
pub fn matches(f: &Filter, index: usize, r: &Record, v: &View) -> bool {
    f.header_passes(index, r) && view_passes(f, r, v.facts())
}

/// The tests of `f` that need the decoded record.
fn view_passes(f: &Filter, r: &Record, v: Facts) -> bool {
    if f.errors && !v.is_error {
        return false;
    }
    if !f.opcodes.is_empty() {
        let hit = f.opcodes.iter().any(|m| match *m {
            OpcodeMatch::Wqe(op) => {
                matches!(r.kind, Kind::WQE_FETCH | Kind::BLUEFLAME | Kind::CQE_WRITE) && v.wqe_opcode == Some(op)
            }
            OpcodeMatch::Cqe(op) => r.kind == Kind::CQE_WRITE && v.cqe_opcode == Some(op),
        });
        if !hit {
            return false;
        }
    }
    true
}

/// The text of one record: the header line, then its details indented by a tab.
pub fn render_record(index: usize, r: &Record, v: &View) -> String {
    let mut o = String::new();
    render_record_into(&mut o, index, r, v);
    o
}

/// [`render_record`], appended to `o` (one buffer reused for every record).
pub fn render_record_into(o: &mut String, index: usize, r: &Record, v: &View) {
    let _ = write!(o, "#{index:<6} {:>12} ns  ", r.t_ns);
    let at = o.len();
    if KINDS.contains(&r.kind) {
        o.push_str(r.kind.name());
    } else {
        let _ = write!(o, "kind-{:#04x}", r.kind.0);
    }
    pad_from(o, at, 16);
    o.push(' ');
    let at = o.len();
    if r.qpn == u32::MAX {
        o.push_str("QP -");
    } else {
        let _ = write!(o, "QP {:#08x}", r.qpn);
    }
    pad_from(o, at, 11);
    o.push(' ');
    let at = o.len();
    write_place(o, r);
    pad_from(o, at, 14);
    o.push(' ');
    o.push_str(&v.summary);
    o.push('\n');
    for d in &v.details {
        o.push('\t');
        o.push_str(d);
        o.push('\n');
    }
}

/// One record as a JSON object.
pub fn record_json(index: usize, r: &Record, v: &View) -> Json {
    let mut j = json!({
        "index": index,
        "t_ns": r.t_ns,
        "kind": kind_text(r.kind),
        "qpn": if r.qpn == u32::MAX { Json::Null } else { json!(r.qpn) },
        "obj": r.obj,
        "addr": r.addr,
        "len": r.bytes.len(),
        "bytes": hex_string(&r.bytes),
        "summary": v.summary,
        "error": v.is_error,
    });
    if let Json::Object(m) = &mut j {
        if let Some(d) = &v.decoded {
            m.insert("decode".into(), serde_json::to_value(d).unwrap_or(Json::Null));
        }
        for (k, val) in &v.extra {
            m.insert((*k).into(), val.clone());
        }
    }
    j
}

/// Print the records of the trace file read from `src` that pass the
/// filter, each as soon as it is read: what is held is one record, whatever
/// the file's size, and reading stops once [`Filter::limit`] records are
/// shown. The damage of a malformed file is returned, not printed (in JSON it
/// also ends the output as `{"error", "offset"}`).
pub fn show(src: impl std::io::BufRead, opts: &ShowOptions, out: &mut dyn Write) -> std::io::Result<Shown> {
    let mut s = Shown { total: 0, shown: 0, matched: 0, damage: None, bytes: 0, limited: false };
    let mut reader = match st::Reader::new(src) {
        Ok(r) => r,
        Err(e) => {
            s.damage = Some(damage_of(&e));
            return finish(opts, out, s);
        }
    };
    let f = &opts.filter;
    // `--tail`: the last N records that passed, kept raw and decoded only when printed.
    let mut ring: std::collections::VecDeque<(usize, Record)> = std::collections::VecDeque::new();
    // Records are written into `buf` and it into `out` in blocks: one call
    // through `out` per block instead of one per record.
    let mut buf: Vec<u8> = Vec::with_capacity(OUT_BLOCK + OUT_BLOCK / 4);
    let mut text = String::new();
    let mut r = Record { t_ns: 0, kind: Kind(0), qpn: 0, obj: 0, addr: 0, bytes: Vec::new() };
    while f.limit.is_none_or(|l| s.shown < l) {
        if f.around.is_some_and(|(_, last)| s.total > last) {
            s.limited = true;
            break;
        }
        match reader.next_into_buffered(&mut r) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                s.damage = Some(damage_of(&e));
                break;
            }
        }
        let index = s.total;
        s.total += 1;
        if !f.header_passes(index, &r) {
            continue;
        }
        match opts.tail {
            Some(n) => {
                if f.needs_view() && !view_passes(f, &r, view_line(&r).facts()) {
                    continue;
                }
                s.matched += 1;
                if n == 0 {
                    continue;
                }
                // The record that leaves the ring lends its buffer to the one that enters.
                let mut slot = if ring.len() == n { ring.pop_front().map(|(_, old)| old) } else { None }
                    .unwrap_or_else(|| Record { bytes: Vec::with_capacity(r.bytes.len()), ..r.clone() });
                copy_record(&r, &mut slot);
                ring.push_back((index, slot));
            }
            None => {
                let at = buf.len();
                if view_passes(f, &r, print_record(index, &r, opts, &mut buf, &mut text)) {
                    s.matched += 1;
                    s.shown += 1;
                    if buf.len() >= OUT_BLOCK {
                        out.write_all(&buf)?;
                        buf.clear();
                    }
                } else {
                    buf.truncate(at);
                }
            }
        }
    }
    for (index, r) in &ring {
        print_record(*index, r, opts, &mut buf, &mut text);
        s.shown += 1;
        if buf.len() >= OUT_BLOCK {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    s.bytes = reader.offset();
    s.limited |= s.damage.is_none() && f.limit.is_some_and(|l| s.shown >= l);
    finish(opts, out, s)
}

/// The text output's last line: how many records were shown of how many read.
pub fn trailer(s: &Shown, file: &str, limit: Option<usize>) -> String {
    let (shown, total, bytes) = (s.shown, s.total, s.bytes);
    let what = if s.matched > s.shown {
        format!("last {shown} of {} matching records shown, of {total} records", s.matched)
    } else {
        format!("{shown} of {total} records shown")
    };
    match limit {
        Some(l) if s.limited && shown >= l => {
            format!("-- {what} (stopped at --limit {l}; {file}, {bytes} bytes read)")
        }
        _ if s.limited => format!("-- {what} (stopped after the --around window; {file}, {bytes} bytes read)"),
        _ if s.damage.is_some() => format!("-- {what} ({file}, {bytes} bytes read before the damage)"),
        _ => format!("-- {what} ({file}, {bytes} bytes)"),
    }
}

fn copy_record(from: &Record, to: &mut Record) {
    to.t_ns = from.t_ns;
    to.kind = from.kind;
    to.qpn = from.qpn;
    to.obj = from.obj;
    to.addr = from.addr;
    to.bytes.clear();
    to.bytes.extend_from_slice(&from.bytes);
}

/// Bytes of output gathered before they are written.
const OUT_BLOCK: usize = 64 << 10;

/// Append record `index` as [`show`] prints it to `buf` and return the
/// flags the filter tests. Text goes through [`crate::trace_text`] where it
/// covers the record, else through [`view`] and [`render_record_into`]
/// (`text` is their reused buffer).
fn print_record(index: usize, r: &Record, opts: &ShowOptions, buf: &mut Vec<u8>, text: &mut String) -> Facts {
    if !opts.json
        && let Some(facts) = crate::trace_text::write_record(buf, index, r, opts.detail)
    {
        return facts;
    }
    let v = if opts.detail == Detail::Brief && !opts.json { view_line(r) } else { view(r, opts.detail) };
    if opts.json {
        // Writing into a Vec cannot fail.
        let _ = writeln!(buf, "{}", record_json(index, r, &v));
    } else {
        text.clear();
        render_record_into(text, index, r, &v);
        buf.extend_from_slice(text.as_bytes());
    }
    v.facts()
}

fn finish(opts: &ShowOptions, out: &mut dyn Write, s: Shown) -> std::io::Result<Shown> {
    if let (true, Some(d)) = (opts.json, &s.damage) {
        writeln!(out, "{}", json!({ "error": d.message, "offset": d.offset }))?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use st::Recorder;

    fn file(records: &[(Kind, u32, u32, u64, Vec<u8>)]) -> Vec<u8> {
        let mut r = Recorder::new(1 << 20);
        for (k, q, o, a, b) in records {
            r.record(*k, *q, *o, *a, b);
        }
        r.bytes().to_vec()
    }

    fn text(bytes: &[u8], opts: &ShowOptions) -> (String, Shown) {
        let mut out = Vec::new();
        let s = show(bytes, opts, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), s)
    }

    #[test]
    fn names_parse() {
        assert_eq!(parse_kind("WQE_FETCH"), Ok(Kind::WQE_FETCH));
        assert_eq!(parse_kind("cqe-write"), Ok(Kind::CQE_WRITE));
        assert!(parse_kind("bogus").is_err());
        assert_eq!(parse_opcode("rdma_write"), Ok(OpcodeMatch::Wqe(WqeOpcode::RDMA_WRITE)));
        assert_eq!(parse_opcode("RESP_SEND"), Ok(OpcodeMatch::Cqe(CqeOpcode::RESP_SEND)));
        assert_eq!(parse_opcode("0x10"), Ok(OpcodeMatch::Wqe(WqeOpcode::RDMA_READ)));
        assert!(parse_opcode("WRITE").is_err());
        assert_eq!(qp_state_name(3), "RTS");
        assert_eq!(qp_state_name(6), "ERR");
    }

    #[test]
    fn numbers_parse_in_decimal_or_with_0x() {
        assert_eq!(parse_num("0x1F"), Ok(31));
        assert_eq!(parse_num("0X1f"), Ok(31));
        assert_eq!(parse_num(" 42 "), Ok(42));
        assert_eq!(parse_num("18446744073709551615"), Ok(u64::MAX));
        for bad in ["", "0x", "-1", "1f", "0x1g", "18446744073709551616", "0x1_0"] {
            assert!(parse_num(bad).is_err_and(|e| e.contains(bad.trim())), "{bad:?}");
        }
    }

    #[test]
    fn state_changes_and_errors() {
        let f = file(&[
            (Kind::QP_STATE, 0x100, 0, 0, vec![3, 6]),
            (Kind::QP_STATE, 0x100, 0, 0, vec![1, 2]),
            (Kind::WQE_ERROR, 0x100, 0, 0, b"REMOTE_ACCESS_ERR: bad\nkey".to_vec()),
            (Kind::DBREC_READ, 0x100, 0, 0, vec![0, 0, 0, 0, 0, 0, 0, 1]),
        ]);
        let (t, s) = text(&f, &ShowOptions::default());
        assert_eq!((s.total, s.shown, s.damage), (4, 4, None));
        assert!(t.contains("RTS (3) → ERR (6)"), "{t}");
        assert!(t.contains("bad\\nkey"), "{t}");
        assert!(t.contains("send_wqe_counter 0x0001"), "{t}");
        let opts = ShowOptions { filter: Filter { errors: true, ..Filter::default() }, ..ShowOptions::default() };
        let (t, s) = text(&f, &opts);
        assert_eq!(s.shown, 2, "{t}");
    }

    #[test]
    fn truncated_reports_the_offset() {
        let f = file(&[(Kind::FAULT, 1, 0, 0, b"x".to_vec()), (Kind::FAULT, 1, 0, 0, b"y".to_vec())]);
        let (t, s) = text(&f[..f.len() - 1], &ShowOptions::default());
        assert_eq!(s.shown, 1);
        assert_eq!(s.damage.unwrap().offset, 16 + 33);
        assert!(t.contains("fault") && t.contains(" x\n"), "{t}");
    }

    fn any_record() -> impl Strategy<Value = (Kind, u32, u32, u64, Vec<u8>)> {
        let sized = prop_oneof![Just(0usize), Just(2), Just(8), Just(16), Just(48), Just(64), Just(128), 0usize..300];
        (0u8..12, prop_oneof![Just(0x100u32), Just(u32::MAX), any::<u32>()], any::<u32>(), any::<u64>(), sized)
            .prop_flat_map(|(k, q, o, a, n)| {
                proptest::collection::vec(any::<u8>(), n).prop_map(move |b| (Kind(k), q, o, a, b))
            })
    }

    fn every_way(bytes: &[u8]) {
        for detail in [Detail::Brief, Detail::Normal, Detail::Full] {
            for json in [false, true] {
                let opts = ShowOptions {
                    filter: Filter {
                        opcodes: vec![OpcodeMatch::Wqe(WqeOpcode::RDMA_WRITE), OpcodeMatch::Cqe(CqeOpcode::REQ_ERR)],
                        ..Filter::default()
                    },
                    detail,
                    json,
                    tail: Some(3),
                };
                let mut out = Vec::new();
                let _ = show(bytes, &opts, &mut out);
                let opts = ShowOptions { filter: Filter::default(), detail, json, tail: None };
                let mut out = Vec::new();
                let s = show(bytes, &opts, &mut out).unwrap();
                if json {
                    for l in String::from_utf8(out).unwrap().lines() {
                        serde_json::from_str::<Json>(l).unwrap();
                    }
                }
                let _ = s;
            }
        }
    }

    /// Where [`crate::trace_text`] writes a record, it writes what the
    /// general path prints, and the same flags.
    fn text_is_the_general_text(index: usize, r: &Record) -> Result<(), TestCaseError> {
        for detail in [Detail::Brief, Detail::Normal, Detail::Full] {
            let mut buf = b"before".to_vec();
            let v = if detail == Detail::Brief { view_line(r) } else { view(r, detail) };
            match crate::trace_text::write_record(&mut buf, index, r, detail) {
                Some(facts) => {
                    prop_assert_eq!(String::from_utf8(buf).unwrap(), format!("before{}", render_record(index, r, &v)));
                    prop_assert_eq!(facts, v.facts());
                }
                None => prop_assert_eq!(&buf[..], b"before"),
            }
        }
        Ok(())
    }

    /// WQEs of every opcode the builder makes, CQEs of every completion,
    /// doorbells and receive WQEs: records the direct writer takes.
    fn healthy_record() -> impl Strategy<Value = Record> {
        use marrow_mlx5::prelude::*;
        let wqe =
            (0usize..14, any::<u16>(), 0u32..0x0100_0000, any::<u64>(), proptest::collection::vec(any::<u8>(), 1..120))
                .prop_map(|(op, idx, qpn, x, data)| {
                    let sge = [
                        Sge { addr: x, length: 8, lkey: x as u32 },
                        Sge { addr: !x, length: data.len() as u32, lkey: 7 },
                    ];
                    let remote = RemoteAddr { raddr: x.rotate_left(7), rkey: (x >> 9) as u32 };
                    let local = Sge { addr: x, length: 8, lkey: 3 };
                    let local4 = Sge { addr: x, length: 4, lkey: 3 };
                    let (a, b) = (x as u32, (x >> 32) as u32);
                    let ops = [
                        WqeOp::Nop,
                        WqeOp::RdmaWrite { remote, sgl: &sge },
                        WqeOp::RdmaWriteImm { remote, sgl: &sge[..1], imm: a },
                        WqeOp::RdmaWriteInline { remote, data: &data },
                        WqeOp::Send { sgl: &sge },
                        WqeOp::SendImm { sgl: &sge, imm: b },
                        WqeOp::SendInline { data: &data },
                        WqeOp::RdmaRead { remote, sgl: &sge[..1] },
                        WqeOp::AtomicCs { remote, local, compare: x, swap: !x },
                        WqeOp::AtomicFa { remote, local, add: x },
                        WqeOp::MaskedCs32 {
                            remote,
                            local: local4,
                            swap: a,
                            compare: b,
                            swap_mask: !a,
                            compare_mask: !b,
                        },
                        WqeOp::MaskedFa32 { remote, local: local4, add: a, field_boundary: b },
                        WqeOp::MaskedCs64 {
                            remote,
                            local,
                            swap: x,
                            compare: !x,
                            swap_mask: x >> 3,
                            compare_mask: x << 5,
                        },
                        WqeOp::MaskedFa64 { remote, local, add: x, field_boundary: !x },
                    ];
                    let mut out = vec![0u8; 1024];
                    let bytes = match build_wqe(&CtrlParams::signaled(idx, qpn), &ops[op], &mut out) {
                        Ok(b) => out[..usize::from(b.ds) * 16].to_vec(),
                        Err(_) => out[..64].to_vec(),
                    };
                    Record { t_ns: x >> 20, kind: Kind::WQE_FETCH, qpn, obj: 0, addr: u64::from(idx) * 64, bytes }
                });
        let cqe = (0usize..3, any::<u16>(), 0u32..0x0100_0000, any::<u32>(), any::<u8>(), any::<bool>()).prop_map(
            |(which, counter, qpn, n, op, owner)| {
                let c = match which {
                    0 => Completion::Requester {
                        wqe_opcode: WqeOpcode(op % 0x20),
                        qpn,
                        wqe_counter: counter,
                        byte_cnt: n,
                        timestamp: u64::from(n) << 7,
                    },
                    1 => Completion::Responder {
                        opcode: [CqeOpcode::RESP_SEND, CqeOpcode::RESP_SEND_IMM, CqeOpcode::RESP_WR_IMM]
                            [usize::from(op % 3)],
                        qpn,
                        wqe_counter: counter,
                        byte_cnt: n,
                        imm: Some(n.rotate_left(3)),
                    },
                    _ => Completion::Error(ErrorCompletion {
                        opcode: if op & 1 == 0 { CqeOpcode::REQ_ERR } else { CqeOpcode::RESP_ERR },
                        syndrome: Syndrome(op),
                        vendor_err_synd: op ^ 0x5a,
                        hw_err_synd: 0,
                        hw_synd_type: 0,
                        wqe_opcode: WqeOpcode(op >> 3),
                        qpn,
                        wqe_counter: counter,
                    }),
                };
                let bytes = encode_cqe(&c, owner).map(|b| b.to_vec()).unwrap_or_default();
                Record {
                    t_ns: u64::from(n),
                    kind: Kind::CQE_WRITE,
                    qpn,
                    obj: 0x80,
                    addr: u64::from(counter) * 64,
                    bytes,
                }
            },
        );
        let other = (
            prop_oneof![
                Just(Kind::DOORBELL),
                Just(Kind::DOORBELL_DROPPED),
                Just(Kind::DBREC_READ),
                Just(Kind::RECV_WQE_FETCH)
            ],
            any::<[u8; 8]>(),
            0usize..4,
            any::<u64>(),
        )
            .prop_map(|(kind, db, entries, x)| {
                let bytes = if kind == Kind::RECV_WQE_FETCH {
                    let mut b = Vec::new();
                    for i in 0..entries {
                        b.extend_from_slice(&(x as u32 >> i).to_be_bytes());
                        b.extend_from_slice(&(0x11 + i as u32).to_be_bytes());
                        b.extend_from_slice(&x.rotate_left(i as u32).to_be_bytes());
                    }
                    b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 0]);
                    b.resize(64, 0);
                    b
                } else {
                    db.to_vec()
                };
                Record { t_ns: x, kind, qpn: x as u32 & 0xffff, obj: 0, addr: 0x800, bytes }
            });
        prop_oneof![wqe, cqe, other]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn direct_text_is_the_general_text(r in healthy_record(), index in 0usize..10_000_000, flip in proptest::option::of((any::<prop::sample::Index>(), any::<u8>()))) {
            text_is_the_general_text(index, &r)?;
            // A changed byte somewhere makes some records malformed or
            // warned about: either path must still print the same.
            if let (Some((at, x)), false) = (flip, r.bytes.is_empty()) {
                let mut r = r;
                let i = at.index(r.bytes.len());
                r.bytes[i] ^= x;
                text_is_the_general_text(index, &r)?;
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            every_way(&bytes);
            let mut f = st::MAGIC.to_vec();
            f.extend_from_slice(&1u32.to_le_bytes());
            f.extend_from_slice(&[0; 4]);
            f.extend_from_slice(&bytes);
            every_way(&f);
        }

        #[test]
        fn arbitrary_records_never_panic(recs in proptest::collection::vec(any_record(), 0..12), cut in any::<prop::sample::Index>()) {
            let f = file(&recs);
            for (i, r) in st::parse(&f).0.iter().enumerate() {
                text_is_the_general_text(i, r)?;
            }
            for r in st::parse(&f).0 {
                let (line, full) = (view_line(&r), view(&r, Detail::Brief));
                prop_assert_eq!(&line.summary, &full.summary);
                prop_assert_eq!(&line.details, &full.details);
                prop_assert_eq!((line.is_error, line.wqe_opcode, line.cqe_opcode), (full.is_error, full.wqe_opcode, full.cqe_opcode));
            }
            every_way(&f);
            every_way(&f[..cut.index(f.len() + 1)]);
        }
    }
}
