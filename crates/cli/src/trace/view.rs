//! One record decoded: its summary line, its details at the level asked
//! for, and the flags the filter tests, by the same decode tree as
//! `marrow decode`.

use crate::decode::{Options, decode};
use crate::fields::{enum_text, struct_node};
use crate::model::{Decoded, Kind as DecodeKind, hex_string};
use crate::print::{render_item, render_node};
use crate::trace_shared::Detail;
use crate::trace_shared::Facts;
use marrow_mlx5::cqe::{Completion, decode_cqe};
use marrow_mlx5::doorbell::{DoorbellStyle, decode_uar_doorbell};
use marrow_mlx5::raw::{CqeOpcode, MLX5_INVALID_LKEY, WqeOpcode, mlx5_cqe64, mlx5_qp_dbrec, mlx5_wqe_data_seg};
use marrow_softnic::QpState;
use marrow_softnic::trace::{Kind, Record};
use serde_json::{Value as Json, json};
use std::fmt::Write as _;
use zerocopy::FromBytes;

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
    /// An error record (see [`Filter::errors`](super::Filter::errors)).
    pub is_error: bool,
    /// The WQE opcode: of a fetched WQE, or of the WQE a requester or error CQE completes.
    pub wqe_opcode: Option<WqeOpcode>,
    /// The CQE opcode of a CQE.
    pub cqe_opcode: Option<CqeOpcode>,
    /// Extra JSON members.
    pub extra: Vec<(&'static str, Json)>,
}

impl View {
    pub(super) fn facts(&self) -> Facts {
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
