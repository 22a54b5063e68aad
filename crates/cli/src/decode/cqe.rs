//! A CQE's decode tree (64 and 128 bytes, error CQEs included), the
//! one-line text of a completion, and the notes on its owner bit.

use crate::fields::{enum_text, struct_node};
use crate::model::{Decoded, ErrorAt, Kind, Node, Payload};
use marrow_mlx5::cqe::{Completion, CqeError, CqePoll, decode_cqe, owner_bit_for, poll_cqe};
use marrow_mlx5::raw::{CqeOpcode, MLX5_CQE128_CQE64_OFFSET, WqeOpcode, mlx5_cqe64, mlx5_cqe128, mlx5_err_cqe};
use zerocopy::FromBytes;

// ------------------------------------------------------------------- CQEs

fn is_err_opcode(op: CqeOpcode) -> bool {
    op == CqeOpcode::REQ_ERR || op == CqeOpcode::RESP_ERR
}

/// The CQE structure at `off` of the item, with the layout its opcode (or
/// `force_err`) calls for, plus the notes that go with it.
fn cqe64_node(cqe: &[u8], off: usize, force_err: bool) -> (Node, Vec<String>) {
    let mut notes = Vec::new();
    let Ok(q) = mlx5_cqe64::read_from_bytes(cqe) else {
        return (Node { offset: off, layout: "unparsed", ..Node::default() }, notes);
    };
    let op = q.opcode();
    let layout = if is_err_opcode(op) || force_err { &mlx5_err_cqe::LAYOUT } else { &mlx5_cqe64::LAYOUT };
    if is_err_opcode(op) && !force_err {
        notes.push(format!("op_own.opcode is {op}: fields shown with the mlx5_err_cqe layout"));
    } else if force_err && !is_err_opcode(op) {
        notes.push(format!("op_own.opcode is {op}, not an error opcode; mlx5_err_cqe layout used as asked"));
    }
    (struct_node(layout, cqe, off), notes)
}

fn cqe_summary(cqe: &[u8], base: usize) -> String {
    let Ok(q) = mlx5_cqe64::read_from_bytes(cqe) else {
        return "CQE".into();
    };
    let (op, fmt) = (q.opcode(), q.format());
    let mut s = format!(
        "CQE: {}, format {}, owner {}, QPN {:#08x}, wqe_counter {:#06x}",
        enum_text(op.name(), u64::from(op.0), 1),
        enum_text(fmt.name(), u64::from(fmt.0), 1),
        u8::from(q.owner()),
        q.qpn(),
        q.wqe_counter()
    );
    if base != 0 {
        s.push_str(&format!(", at input offset {base:#05x}"));
    }
    s
}

/// The `Completion:` line for a decoded CQE.
pub fn completion_line(c: &Completion) -> String {
    let op8 = |o: WqeOpcode| enum_text(o.name(), u64::from(o.0), 2);
    match *c {
        Completion::Requester { wqe_opcode, qpn, wqe_counter, byte_cnt, timestamp } => format!(
            "Completion: requester, WQE {} on QPN {qpn:#08x} at wqe_counter {wqe_counter:#06x}, byte_cnt {byte_cnt}, timestamp {timestamp:#x}",
            op8(wqe_opcode)
        ),
        Completion::Responder { opcode, qpn, wqe_counter, byte_cnt, imm } => {
            let mut s = format!(
                "Completion: responder {opcode} on QPN {qpn:#08x}, wqe_counter {wqe_counter:#06x}, byte_cnt {byte_cnt}"
            );
            if let Some(imm) = imm {
                s.push_str(&format!(", imm {imm:#010x}"));
            }
            s
        }
        Completion::Error(e) => format!(
            "Completion: error {} syndrome {} vendor_err_synd {:#04x} hw_err_synd {:#04x} hw_synd_type {:#04x}, WQE {} on QPN {:#08x} at wqe_counter {:#06x}",
            e.opcode,
            enum_text(e.syndrome.name(), u64::from(e.syndrome.0), 2),
            e.vendor_err_synd,
            e.hw_err_synd,
            e.hw_synd_type,
            op8(e.wqe_opcode),
            e.qpn,
            e.wqe_counter
        ),
        Completion::Other { opcode, qpn, wqe_counter } => {
            let mut s = format!(
                "Completion: {} on QPN {qpn:#08x}, wqe_counter {wqe_counter:#06x}",
                enum_text(opcode.name(), u64::from(opcode.0), 1)
            );
            if opcode == CqeOpcode::INVALID {
                s.push_str(" (opcode INVALID: the slot has not been written by hardware)");
            }
            s
        }
    }
}

/// Completion and ownership lines for the 64-byte CQE `cqe64`.
fn completion_notes(d: &mut Decoded, full: &[u8], cqe64: &[u8], cqe64_off: usize, own: Option<(u32, u32)>) {
    match decode_cqe(full) {
        Ok(c) => d.notes.push(completion_line(&c)),
        Err(CqeError::Compressed) => d.notes.push(format!("Completion: not decoded: {}", CqeError::Compressed)),
        Err(e) => d.errors.push(ErrorAt { error: e.to_string(), offset: Some(d.offset) }),
    }
    let Some((n, ncqe)) = own else { return };
    let (owner, opcode) =
        mlx5_cqe64::ref_from_bytes(cqe64).map_or((0, CqeOpcode(0)), |c| (u8::from(c.owner()), c.opcode()));
    let expected = owner_bit_for(n, ncqe);
    match poll_cqe(cqe64, n, ncqe) {
        Ok(CqePoll::Ready(_)) => d.notes.push(format!(
            "Ownership: software owns this CQE at consumer index {n} (CQ of {ncqe}, slot {}: owner bit {}, expected {expected})",
            n % ncqe,
            owner
        )),
        Ok(CqePoll::NotReady) => {
            let why = if opcode == CqeOpcode::INVALID {
                "opcode INVALID".to_owned()
            } else {
                format!("owner bit {owner}, software expects {expected}")
            };
            d.notes.push(format!(
                "Ownership: hardware owns it at consumer index {n} (CQ of {ncqe}, slot {}: {why})",
                n % ncqe
            ));
        }
        Err(e) => d.errors.push(ErrorAt { error: e.to_string(), offset: Some(d.offset + cqe64_off) }),
    }
}

pub(super) fn decode_cqe64_item(
    cqe: &[u8],
    base: usize,
    force_err: bool,
    own: Option<(u32, u32)>,
    reason: &str,
) -> Decoded {
    let kind = if force_err { Kind::ErrCqe } else { Kind::Cqe };
    let mut d = Decoded::new(kind, reason, base);
    d.length = cqe.len();
    d.summary = cqe_summary(cqe, base);
    let (node, notes) = cqe64_node(cqe, 0, force_err);
    d.segments.push(node);
    d.notes.extend(notes);
    completion_notes(&mut d, cqe, cqe, 0, own);
    d
}

pub(super) fn decode_cqe128(bytes: &[u8], own: Option<(u32, u32)>, reason: &str) -> Decoded {
    let mut d = Decoded::new(Kind::Cqe128, reason, 0);
    d.length = bytes.len();
    let at = mlx5_cqe128::LAYOUT.field("cqe64").map_or(MLX5_CQE128_CQE64_OFFSET as usize, |f| f.offset);
    let (inline, cqe64) = bytes.split_at(at.min(bytes.len()));
    d.summary = cqe_summary(cqe64, 0).replacen("CQE:", "CQE128:", 1);
    let name = mlx5_cqe128::LAYOUT.field("inline_data").map_or("inline_data", |f| f.name);
    d.segments.push(Node {
        offset: 0,
        layout: name,
        payload: Some(Payload { offset: 0, len: inline.len(), bytes: inline.to_vec() }),
        notes: vec!["inline scatter data (responder CQEs of small receives)".into()],
        ..Node::default()
    });
    let (node, notes) = cqe64_node(cqe64, at, false);
    d.segments.push(node);
    d.notes.extend(notes);
    completion_notes(&mut d, bytes, cqe64, at, own);
    d
}
