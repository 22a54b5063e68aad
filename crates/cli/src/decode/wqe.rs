//! A send WQE's decode tree: its control segment's summary, then each
//! segment as `marrow_mlx5::wqe_decode` walks it, fields read through the
//! generated layouts.

use super::{BB, DS, WQE_LOOKAHEAD};
use crate::fields::{enum_text, layout_by_name, struct_node};
use crate::model::{Decoded, ErrorAt, Kind, Node, Payload};
use marrow_layout::StructLayout;
use marrow_mlx5::raw::{mlx5_wqe_ctrl_seg, mlx5_wqe_inl_data_seg};
use marrow_mlx5::wqe::inline_seg_bytes;
use marrow_mlx5::wqe_decode::{CtrlFields, Segment, WqeDecodeError, WqeView};
use zerocopy::FromBytes;

// ------------------------------------------------------------------- WQEs

/// Where a WQE decode error points, relative to the WQE.
fn wqe_error_offset(e: &WqeDecodeError) -> usize {
    let qpn_ds = mlx5_wqe_ctrl_seg::LAYOUT.field("qpn_ds").map_or(4, |f| f.offset);
    match *e {
        WqeDecodeError::TooShort { .. } | WqeDecodeError::BadAtomicOpmod { .. } => 0,
        WqeDecodeError::UnsupportedOpcode { .. } => 0,
        WqeDecodeError::ZeroDs | WqeDecodeError::DsBeyondBuffer { .. } => qpn_ds,
        WqeDecodeError::MissingSegment { offset, .. }
        | WqeDecodeError::InlineOverrun { offset, .. }
        | WqeDecodeError::AtomicLocalInline { offset }
        | WqeDecodeError::AtomicExtraSegments { offset } => offset,
    }
}

fn wqe_error(e: &WqeDecodeError, base: usize) -> ErrorAt {
    ErrorAt { error: e.to_string(), offset: Some(base + wqe_error_offset(e)) }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 { format!("{n} {one}") } else { format!("{n} {one}s") }
}

fn wqe_summary(c: &CtrlFields, base: usize) -> String {
    let ds = usize::from(c.ds);
    let mut s = format!(
        "WQE: {}, ds {ds} ({} bytes), {}, QPN {:#08x}, wqe_index {:#06x}",
        enum_text(c.opcode.name(), u64::from(c.opcode.0), 2),
        ds * DS,
        plural((ds * DS).div_ceil(BB), "WQEBB"),
        c.qpn,
        c.wqe_index
    );
    if c.opmod != 0 {
        s.push_str(&format!(", opmod {:#04x}", c.opmod));
    }
    if base != 0 {
        s.push_str(&format!(", at input offset {base:#05x}"));
    }
    s
}

/// The summary line [`decode`](super::decode()) gives the WQE at the start of `bytes`, worked
/// out without building its decode tree; `None` when the WQE has an error or
/// is longer than one read of the decoder (then only [`decode`](super::decode()) says the same).
pub fn wqe_line(bytes: &[u8]) -> Option<String> {
    wqe_line_fields(bytes).map(|c| wqe_summary(&c, 0))
}

/// The control fields [`wqe_line`] words its line from, under the same
/// conditions (`None` when it gives `None`).
pub fn wqe_line_fields(bytes: &[u8]) -> Option<CtrlFields> {
    if bytes.len() > WQE_LOOKAHEAD {
        return None;
    }
    let view = WqeView::new(bytes).ok()?;
    if view.segments().any(|s| s.is_err()) {
        return None;
    }
    match view.parse() {
        Ok(_) | Err(WqeDecodeError::UnsupportedOpcode { .. }) => {}
        Err(_) => return None,
    }
    Some(view.ctrl_fields())
}

/// Decode the WQE at the start of `bytes` (input offset `base`).
pub(super) fn decode_wqe(bytes: &[u8], base: usize, reason: &str) -> Decoded {
    let mut d = Decoded::new(Kind::Wqe, reason, base);
    let Ok((ctrl, _)) = mlx5_wqe_ctrl_seg::read_from_prefix(bytes) else {
        let e = WqeDecodeError::TooShort { have: bytes.len() };
        d.summary = format!("WQE: {} bytes, too short for a control segment", bytes.len());
        d.length = bytes.len();
        d.errors.push(wqe_error(&e, base));
        return d;
    };
    let c = CtrlFields::from_seg(&ctrl);
    d.summary = wqe_summary(&c, base);
    let view = match WqeView::new(bytes) {
        Ok(v) => v,
        Err(e) => {
            // Show the control segment that did decode, then the error.
            let mut n = struct_node(&mlx5_wqe_ctrl_seg::LAYOUT, bytes, 0);
            n.wqebb = Some(0);
            d.segments.push(n);
            d.length = bytes.len().min(BB);
            d.errors.push(wqe_error(&e, base));
            return d;
        }
    };
    let ds_bytes = view.bytes().len();
    let wqebbs = view.wqebbs();
    d.wqebbs = Some(wqebbs);
    d.length = bytes.len().min(wqebbs * BB);
    for item in view.segments() {
        match item {
            Ok((off, seg)) => d.segments.push(segment_node(off, &seg, view.bytes())),
            Err(e) => {
                d.errors.push(wqe_error(&e, base));
                break;
            }
        }
    }
    if d.errors.is_empty() {
        match view.parse() {
            Ok(_) => {}
            Err(WqeDecodeError::UnsupportedOpcode { opcode }) => {
                if opcode.is_known() {
                    d.notes.push(format!(
                        "opcode {opcode}: the segments after the control segment are not decoded (shown raw)"
                    ));
                } else {
                    d.notes.push(format!(
                        "opcode {opcode} is not a send WQE opcode the spec names: the segments after the control segment are shown raw"
                    ));
                }
            }
            Err(e) => d.errors.push(wqe_error(&e, base)),
        }
    }
    if d.length > ds_bytes {
        d.notes.push(format!("{} trailing bytes ignored (beyond ds)", d.length - ds_bytes));
    }
    d
}

fn layout_node(layout: &'static StructLayout, wqe: &[u8], off: usize) -> Node {
    let end = off.saturating_add(layout.size).min(wqe.len());
    struct_node(layout, wqe.get(off..end).unwrap_or(&[]), off)
}

/// The node for one segment of a WQE whose bytes (`ds * 16`) are `wqe`.
fn segment_node(off: usize, seg: &Segment<'_>, wqe: &[u8]) -> Node {
    let wqebb = off / BB;
    let mut n = match *seg {
        Segment::Inline { data, .. } => {
            let mut n = layout_node(&mlx5_wqe_inl_data_seg::LAYOUT, wqe, off);
            let hdr = mlx5_wqe_inl_data_seg::LAYOUT.size;
            let seg_len = inline_seg_bytes(data.len());
            n.payload = Some(Payload { offset: off + hdr, len: data.len(), bytes: data.to_vec() });
            n.notes.push(format!(
                "inline data: {} bytes; segment {seg_len} bytes [{off:#05x}-{:#05x}]",
                data.len(),
                off + seg_len - 1
            ));
            let pad = wqe.get(off + hdr + data.len()..off + seg_len).unwrap_or(&[]);
            if pad.iter().any(|b| *b != 0) {
                n.warnings.push(format!("inline padding non-zero ({} bytes after the data)", pad.len()));
            }
            let last = (off + seg_len - 1) / BB;
            if last != wqebb {
                n.notes.push(format!("spans WQEBB {wqebb} to WQEBB {last}"));
            }
            n
        }
        Segment::Opaque(raw) => Node {
            offset: off,
            layout: seg.layout_name(),
            payload: Some(Payload { offset: off, len: raw.len(), bytes: raw.to_vec() }),
            ..Node::default()
        },
        _ => match layout_by_name(seg.layout_name()) {
            Some(l) => layout_node(l, wqe, off),
            None => Node {
                offset: off,
                layout: seg.layout_name(),
                notes: vec!["no layout of this name in the spec".into()],
                ..Node::default()
            },
        },
    };
    n.wqebb = Some(wqebb);
    n
}
