//! The text of `marrow trace show`, written straight into one byte buffer
//! that is reused for every record: the same bytes that rendering
//! [`crate::trace::view`] with [`crate::trace::render_record_into`] gives,
//! without building the decode tree, a `String` per field or a `String` per
//! line. A long trace is mostly doorbells, doorbell records, healthy WQEs
//! and CQEs, and receive WQEs; those are written here. Everything else (rare
//! kinds, malformed or failing WQEs and CQEs, non-zero reserved bits,
//! error CQEs under `--full`) is left to the general path: [`write_record`] then returns
//! `None` and leaves the buffer as it found it. The tests hold both paths to
//! the same bytes.

use crate::fields::FIELD_ENUMS;
use crate::fields::{enum_lookup, hex_digits};
use crate::trace_shared::{Detail, Facts, KINDS};
use marrow_layout::{StructLayout, low_mask};
use marrow_mlx5::cqe::{Completion, decode_cqe};
use marrow_mlx5::doorbell::{DoorbellStyle, decode_uar_doorbell};
use marrow_mlx5::raw::{
    CqeOpcode, MLX5_INVALID_LKEY, MLX5_SEND_WQE_BB, MLX5_SEND_WQE_DS, WqeOpcode, mlx5_cqe64, mlx5_qp_dbrec,
    mlx5_uar_db, mlx5_wqe_atomic_seg, mlx5_wqe_ctrl_seg, mlx5_wqe_data_seg, mlx5_wqe_inl_data_seg,
    mlx5_wqe_masked_atomic_cs32_seg, mlx5_wqe_masked_atomic_cs64_data_seg, mlx5_wqe_masked_atomic_cs64_mask_seg,
    mlx5_wqe_masked_atomic_fa32_seg, mlx5_wqe_masked_atomic_fa64_seg, mlx5_wqe_raddr_seg,
};
use marrow_mlx5::wqe::inline_seg_bytes;
use marrow_mlx5::wqe_decode::{CtrlFields, Segment, WqeDecodeError, WqeView};
use marrow_softnic::trace::{Kind, Record};
use zerocopy::FromBytes;

mod numbers;
use numbers::{dec, dec_left, dec_right, enum_text, hex, hex_byte, opcode_name, pad, tabs};

const BB: usize = MLX5_SEND_WQE_BB as usize;
const DS: usize = MLX5_SEND_WQE_DS as usize;

/// Append record `index` as `trace show` prints it at `detail` to `o` and
/// return what the filter needs to know of it; `None`, with `o` as it was,
/// when the record is one for the general path.
pub(crate) fn write_record(o: &mut Vec<u8>, index: usize, r: &Record, detail: Detail) -> Option<Facts> {
    let start = o.len();
    let facts = write_inner(o, index, r, detail);
    if facts.is_none() {
        o.truncate(start);
    }
    facts
}

fn write_inner(o: &mut Vec<u8>, index: usize, r: &Record, detail: Detail) -> Option<Facts> {
    let full = detail == Detail::Full;
    match r.kind {
        Kind::DOORBELL | Kind::DOORBELL_DROPPED => {
            let arr = <[u8; 8]>::try_from(&r.bytes[..]).ok()?;
            header(o, index, r);
            doorbell(o, r.kind == Kind::DOORBELL_DROPPED, arr, full)
        }
        Kind::DBREC_READ => {
            let rec = mlx5_qp_dbrec::read_from_bytes(&r.bytes[..]).ok()?;
            header(o, index, r);
            o.extend_from_slice(b"QP doorbell record: rcv_wqe_counter ");
            hex(o, u64::from(rec.rcv_wqe_counter()), 4);
            o.extend_from_slice(b", send_wqe_counter ");
            hex(o, u64::from(rec.send_wqe_counter()), 4);
            o.push(b'\n');
            if full {
                let layout = &mlx5_qp_dbrec::LAYOUT;
                node_line(o, 1, 0, layout.name);
                struct_fields(o, 2, layout, &r.bytes, 0)?;
                o.extend_from_slice(b"\tsend_wqe_counter ");
                hex(o, u64::from(rec.send_wqe_counter()), 4);
                o.extend_from_slice(
                    b": the next free WQEBB (producer index after the last posted WQE, mod 2^16); rcv_wqe_counter ",
                );
                hex(o, u64::from(rec.rcv_wqe_counter()), 4);
                o.extend_from_slice(b": receive queue head\n");
            }
            Some(Facts::default())
        }
        Kind::WQE_FETCH | Kind::BLUEFLAME => {
            header(o, index, r);
            wqe(o, &r.bytes, detail != Detail::Brief)?;
            Some(Facts { wqe_opcode: (r.bytes.len() >= 4).then(|| WqeOpcode(r.bytes[3])), ..Facts::default() })
        }
        Kind::CQE_WRITE => {
            if r.bytes.len() != 64 {
                return None;
            }
            header(o, index, r);
            cqe(o, &r.bytes, detail)
        }
        Kind::RECV_WQE_FETCH => {
            header(o, index, r);
            recv(o, &r.bytes, detail)?;
            Some(Facts::default())
        }
        _ => None,
    }
}

// -------------------------------------------------------------- columns

/// The columns before the summary ([`crate::trace::render_record_into`]'s).
fn header(o: &mut Vec<u8>, index: usize, r: &Record) {
    // Room for the columns and a summary, so that the pushes below do not grow it.
    o.reserve(256);
    o.push(b'#');
    dec_left(o, index as u64, 6);
    o.push(b' ');
    dec_right(o, r.t_ns, 12);
    o.extend_from_slice(b" ns  ");
    o.extend_from_slice(&kind_column(r.kind));
    let at = o.len();
    if r.qpn == u32::MAX {
        o.extend_from_slice(b"QP -");
    } else {
        o.extend_from_slice(b"QP ");
        hex(o, u64::from(r.qpn), 6);
    }
    pad(o, at, 11);
    o.push(b' ');
    let at = o.len();
    place(o, r);
    pad(o, at, 14);
    o.push(b' ');
}

/// The kind column and the space after it, for every kind byte, worked
/// out once: a fixed-size copy per record instead of a name and its padding.
fn kind_column(k: Kind) -> [u8; 17] {
    static COLUMNS: std::sync::OnceLock<Vec<[u8; 17]>> = std::sync::OnceLock::new();
    let cols = COLUMNS.get_or_init(|| {
        (0..=u8::MAX)
            .map(|k| {
                let mut v = Vec::new();
                if KINDS.contains(&Kind(k)) {
                    v.extend_from_slice(Kind(k).name().as_bytes());
                } else {
                    v.extend_from_slice(b"kind-");
                    hex(&mut v, u64::from(k), 2);
                }
                pad(&mut v, 0, 16);
                let mut col = [b' '; 17];
                // Every name fits the 16 columns (a test checks).
                let n = v.len().min(16);
                col[..n].copy_from_slice(&v[..n]);
                col
            })
            .collect()
    });
    cols[usize::from(k.0)]
}

/// [`crate::trace::place`].
fn place(o: &mut Vec<u8>, r: &Record) {
    match r.kind {
        Kind::DOORBELL | Kind::DOORBELL_DROPPED | Kind::BLUEFLAME => {
            o.extend_from_slice(b"uar+");
            hex(o, r.addr, 3);
        }
        Kind::DBREC_READ => {
            o.extend_from_slice(b"dbrec+");
            hex(o, r.addr, 1);
        }
        Kind::WQE_FETCH => {
            o.extend_from_slice(b"sq+");
            hex(o, r.addr, 4);
        }
        Kind::RECV_WQE_FETCH => {
            o.extend_from_slice(b"rq+");
            hex(o, r.addr, 4);
        }
        Kind::CQE_WRITE => {
            o.extend_from_slice(b"cq ");
            hex(o, u64::from(r.obj), 1);
            o.push(b'+');
            hex(o, r.addr, 4);
        }
        Kind::CQ_OVERFLOW => {
            o.extend_from_slice(b"cq ");
            hex(o, u64::from(r.obj), 1);
        }
        Kind::QP_STATE | Kind::FAULT | Kind::WQE_ERROR => o.push(b'-'),
        _ => {
            o.extend_from_slice(b"obj ");
            hex(o, u64::from(r.obj), 1);
            o.extend_from_slice(b" addr ");
            hex(o, r.addr, 1);
        }
    }
}

// ------------------------------------------------------------ doorbells

/// A doorbell's line and, at [`Detail::Full`], its fields and the decoder's note.
fn doorbell(o: &mut Vec<u8>, dropped: bool, arr: [u8; 8], full: bool) -> Option<Facts> {
    if dropped {
        o.extend_from_slice(b"dropped by fault injection: ");
    }
    let u = decode_uar_doorbell(arr);
    o.extend_from_slice(b"QPN ");
    hex(o, u64::from(u.qpn), 6);
    o.extend_from_slice(b", wqe_index ");
    hex(o, u64::from(u.wqe_index), 4);
    match u.style {
        DoorbellStyle::RdmaCore => {
            o.extend_from_slice(b", ");
            enum_text(o, u.opcode.name(), u64::from(u.opcode.0), 2);
            o.extend_from_slice(b" ds ");
            dec(o, u64::from(u.ds));
            o.extend_from_slice(b" (rdma-core style: the last WQE's control bytes)\n");
        }
        DoorbellStyle::IndexAndQpn => o.extend_from_slice(b" (NVSHMEM/DOCA style: next free WQEBB)\n"),
    }
    if full {
        let layout = &mlx5_uar_db::LAYOUT;
        node_line(o, 1, 0, layout.name);
        struct_fields(o, 2, layout, &arr, 0)?;
        match u.style {
            DoorbellStyle::IndexAndQpn => {
                o.extend_from_slice(b"\tDoorbell: NVSHMEM/DOCA style {BE32(pi << 8), BE32(qpn << 8)}: producer index ");
                hex(o, u64::from(u.wqe_index), 4);
            }
            DoorbellStyle::RdmaCore => {
                o.extend_from_slice(b"\tDoorbell: rdma-core style (first 8 bytes of the last WQE's control segment): ");
                enum_text(o, u.opcode.name(), u64::from(u.opcode.0), 2);
                o.extend_from_slice(b" ds ");
                dec(o, u64::from(u.ds));
                o.extend_from_slice(b", wqe_index ");
                hex(o, u64::from(u.wqe_index), 4);
            }
        }
        o.extend_from_slice(b" on QPN ");
        hex(o, u64::from(u.qpn), 6);
        o.push(b'\n');
    }
    Some(Facts { is_error: dropped, ..Facts::default() })
}

// ----------------------------------------------------------------- WQEs

/// [`crate::decode`]'s WQE summary line of a WQE at input offset 0.
fn wqe_summary(o: &mut Vec<u8>, c: &CtrlFields) {
    let ds = usize::from(c.ds);
    o.extend_from_slice(b"WQE: ");
    enum_text(o, c.opcode.name(), u64::from(c.opcode.0), 2);
    o.extend_from_slice(b", ds ");
    dec(o, ds as u64);
    o.extend_from_slice(b" (");
    dec(o, (ds * DS) as u64);
    o.extend_from_slice(b" bytes), ");
    let n = (ds * DS).div_ceil(BB);
    dec(o, n as u64);
    o.extend_from_slice(if n == 1 { b" WQEBB" } else { b" WQEBBs" });
    o.extend_from_slice(b", QPN ");
    hex(o, u64::from(c.qpn), 6);
    o.extend_from_slice(b", wqe_index ");
    hex(o, u64::from(c.wqe_index), 4);
    if c.opmod != 0 {
        o.extend_from_slice(b", opmod ");
        hex(o, u64::from(c.opmod), 2);
    }
}

/// A fetched WQE: its summary and, at [`Detail::Normal`], its segments
/// WQEBB by WQEBB, as `marrow decode` prints them. `None` for a WQE the
/// decoder reports an error for or warns about.
fn wqe(o: &mut Vec<u8>, bytes: &[u8], normal: bool) -> Option<()> {
    let c = if normal {
        let (ctrl, _) = mlx5_wqe_ctrl_seg::read_from_prefix(bytes).ok()?;
        CtrlFields::from_seg(&ctrl)
    } else {
        crate::decode::wqe_line_fields(bytes)?
    };
    wqe_summary(o, &c);
    o.push(b'\n');
    if !normal {
        return Some(());
    }
    let view = WqeView::new(bytes).ok()?;
    let wqe = view.bytes();
    let mut next_bb = 0;
    let mut prev: Option<usize> = None;
    for item in view.segments() {
        let (off, seg) = item.ok()?;
        let bb = off / BB;
        while next_bb <= bb {
            wqebb_line(o, next_bb);
            if next_bb < bb {
                continuation(o, prev);
            }
            next_bb += 1;
        }
        segment(o, off, &seg, wqe)?;
        prev = Some(off);
    }
    let count = view.wqebbs().max(next_bb);
    while next_bb < count {
        wqebb_line(o, next_bb);
        continuation(o, prev);
        next_bb += 1;
    }
    match view.parse() {
        Ok(_) => {}
        Err(WqeDecodeError::UnsupportedOpcode { opcode }) => {
            o.extend_from_slice(b"\topcode ");
            opcode_name(o, opcode.name(), opcode.0);
            if opcode.is_known() {
                o.extend_from_slice(b": the segments after the control segment are not decoded (shown raw)\n");
            } else {
                o.extend_from_slice(
                    b" is not a send WQE opcode the spec names: the segments after the control segment are shown raw\n",
                );
            }
        }
        Err(_) => return None,
    }
    let length = bytes.len().min(view.wqebbs() * BB);
    if length > wqe.len() {
        o.extend_from_slice(b"\t");
        dec(o, (length - wqe.len()) as u64);
        o.extend_from_slice(b" trailing bytes ignored (beyond ds)\n");
    }
    Some(())
}

fn wqebb_line(o: &mut Vec<u8>, bb: usize) {
    o.extend_from_slice(b"\tWQEBB ");
    dec(o, bb as u64);
    o.extend_from_slice(b" [");
    hex(o, (bb * BB) as u64, 3);
    o.push(b'-');
    hex(o, (bb * BB + BB - 1) as u64, 3);
    o.extend_from_slice(b"]\n");
}

fn continuation(o: &mut Vec<u8>, prev: Option<usize>) {
    if let Some(p) = prev {
        o.extend_from_slice(b"\t\t(continuation of the segment at ");
        hex(o, p as u64, 3);
        o.extend_from_slice(b")\n");
    }
}

/// The generated layout of a segment the walk names by a layout.
fn segment_layout(seg: &Segment<'_>) -> Option<&'static StructLayout> {
    Some(match seg {
        Segment::Ctrl(_) => &mlx5_wqe_ctrl_seg::LAYOUT,
        Segment::RemoteAddr(_) => &mlx5_wqe_raddr_seg::LAYOUT,
        Segment::Atomic(_) => &mlx5_wqe_atomic_seg::LAYOUT,
        Segment::MaskedCs32(_) => &mlx5_wqe_masked_atomic_cs32_seg::LAYOUT,
        Segment::MaskedFa32(_) => &mlx5_wqe_masked_atomic_fa32_seg::LAYOUT,
        Segment::MaskedCs64Data(_) => &mlx5_wqe_masked_atomic_cs64_data_seg::LAYOUT,
        Segment::MaskedCs64Mask(_) => &mlx5_wqe_masked_atomic_cs64_mask_seg::LAYOUT,
        Segment::MaskedFa64(_) => &mlx5_wqe_masked_atomic_fa64_seg::LAYOUT,
        Segment::Data(_) => &mlx5_wqe_data_seg::LAYOUT,
        Segment::Inline { .. } | Segment::Opaque(_) => return None,
    })
}

/// The bytes of `layout` at `off` in `wqe`, cut at its end.
fn layout_bytes<'a>(layout: &StructLayout, wqe: &'a [u8], off: usize) -> &'a [u8] {
    let end = off.saturating_add(layout.size).min(wqe.len());
    wqe.get(off..end).unwrap_or(&[])
}

/// One segment at depth 2, as [`crate::print`] prints its node.
fn segment(o: &mut Vec<u8>, off: usize, seg: &Segment<'_>, wqe: &[u8]) -> Option<()> {
    node_line(o, 2, off, seg.layout_name());
    match *seg {
        Segment::Inline { data, .. } => {
            let layout = &mlx5_wqe_inl_data_seg::LAYOUT;
            struct_fields(o, 3, layout, layout_bytes(layout, wqe, off), off)?;
            let hdr = layout.size;
            let seg_len = inline_seg_bytes(data.len());
            let padding = wqe.get(off + hdr + data.len()..off + seg_len).unwrap_or(&[]);
            if padding.iter().any(|b| *b != 0) {
                return None;
            }
            payload(o, 3, off + hdr, data);
            tabs(o, 3);
            o.extend_from_slice(b"inline data: ");
            dec(o, data.len() as u64);
            o.extend_from_slice(b" bytes; segment ");
            dec(o, seg_len as u64);
            o.extend_from_slice(b" bytes [");
            hex(o, off as u64, 3);
            o.push(b'-');
            hex(o, (off + seg_len - 1) as u64, 3);
            o.extend_from_slice(b"]\n");
            let (first, last) = (off / BB, (off + seg_len - 1) / BB);
            if last != first {
                tabs(o, 3);
                o.extend_from_slice(b"spans WQEBB ");
                dec(o, first as u64);
                o.extend_from_slice(b" to WQEBB ");
                dec(o, last as u64);
                o.push(b'\n');
            }
        }
        Segment::Opaque(raw) => payload(o, 3, off, raw),
        _ => {
            let layout = segment_layout(seg)?;
            struct_fields(o, 3, layout, layout_bytes(layout, wqe, off), off)?;
        }
    }
    Some(())
}

fn node_line(o: &mut Vec<u8>, depth: usize, offset: usize, layout: &str) {
    tabs(o, depth);
    o.push(b'[');
    hex(o, offset as u64, 3);
    o.extend_from_slice(b"] ");
    o.extend_from_slice(layout.as_bytes());
    o.push(b'\n');
}

fn payload(o: &mut Vec<u8>, depth: usize, offset: usize, bytes: &[u8]) {
    tabs(o, depth);
    o.extend_from_slice(b"payload (");
    dec(o, bytes.len() as u64);
    o.extend_from_slice(b" bytes at ");
    hex(o, offset as u64, 3);
    o.extend_from_slice(b"):\n");
    dump(o, depth + 1, offset, bytes);
}

/// [`crate::print`]'s hex dump: 16 bytes a line, offsets from `start`.
fn dump(o: &mut Vec<u8>, depth: usize, start: usize, bytes: &[u8]) {
    if !bytes.is_empty() && bytes.iter().all(|b| *b == 0) && bytes.len() > 16 {
        tabs(o, depth);
        hex(o, start as u64, 3);
        o.extend_from_slice(b": ");
        dec(o, bytes.len() as u64);
        o.extend_from_slice(b" zero bytes\n");
        return;
    }
    for (i, chunk) in bytes.chunks(16).enumerate() {
        tabs(o, depth);
        hex(o, (start + i * 16) as u64, 3);
        o.extend_from_slice(b": ");
        let at = o.len();
        for (j, b) in chunk.iter().enumerate() {
            if j > 0 {
                o.push(b' ');
            }
            hex_byte(o, *b);
        }
        pad(o, at, 47);
        o.extend_from_slice(b"  ");
        o.extend(chunk.iter().map(|&b| if b.is_ascii_graphic() || b == b' ' { b } else { b'.' }));
        o.push(b'\n');
    }
}

/// The fields of `layout` read from `bytes` (the structure's own bytes),
/// at `depth`, as [`crate::print`] prints [`crate::fields::struct_node`]'s
/// node. `None` where that node would carry a warning (a field the bytes
/// do not cover, non-zero reserved bits), which the general path prints.
fn struct_fields(
    o: &mut Vec<u8>,
    depth: usize,
    layout: &'static StructLayout,
    bytes: &[u8],
    offset: usize,
) -> Option<()> {
    for f in layout.fields {
        let raw = bytes.get(f.offset..f.offset.checked_add(f.size)?)?;
        if f.reserved {
            // Printed nowhere; only its warning would be, for non-zero bits.
            if raw.iter().any(|b| *b != 0) {
                return None;
            }
            continue;
        }
        let Some(v) = f.read(bytes) else {
            tabs(o, depth);
            o.extend_from_slice(f.name.as_bytes());
            o.extend_from_slice(b" (");
            dec(o, f.size as u64);
            if raw.iter().all(|b| *b == 0) {
                o.extend_from_slice(b" bytes, all zero)\n");
            } else {
                o.extend_from_slice(b" bytes):\n");
                dump(o, depth + 1, offset + f.offset, raw);
            }
            continue;
        };
        if f.bits.is_empty() && FIELD_ENUMS.iter().any(|(l, n, _)| *l == layout.name && *n == f.name) {
            return None;
        }
        tabs(o, depth);
        o.extend_from_slice(f.name.as_bytes());
        o.push(b' ');
        hex(o, v, f.size * 2);
        o.push(b'\n');
        let mut covered = 0u64;
        for b in f.bits {
            let bv = b.extract(v);
            covered |= low_mask(b.width()) << b.lo;
            if b.name.starts_with("reserved") {
                if bv != 0 {
                    return None;
                }
                continue;
            }
            tabs(o, depth + 1);
            o.extend_from_slice(b.name.as_bytes());
            o.push(b' ');
            let digits = hex_digits(b.width());
            match b.enumeration.and_then(|e| enum_lookup(e, bv)) {
                Some(Some(n)) if !n.starts_with("unknown ") => enum_text(o, Some(n), bv, digits),
                Some(Some(n)) => o.extend_from_slice(n.as_bytes()),
                Some(None) => enum_text(o, None, bv, digits),
                None if b.width() == 1 => dec(o, bv),
                None => hex(o, bv, digits),
            }
            o.push(b'\n');
        }
        let width = (f.size * 8).min(64) as u32;
        if !f.bits.is_empty() && v & low_mask(width) & !covered != 0 {
            return None;
        }
    }
    Some(())
}

// ----------------------------------------------------------------- CQEs

/// A CQE's line and, at [`Detail::Normal`], the decoder's summary and
/// completion line. `None` for CQEs without a completion to word them by.
fn cqe(o: &mut Vec<u8>, bytes: &[u8], detail: Detail) -> Option<Facts> {
    let (head, _) = mlx5_cqe64::ref_from_prefix(bytes).ok()?;
    let (owner, cqe_opcode) = (u64::from(head.owner()), head.opcode());
    let c = decode_cqe(bytes).ok()?;
    let mut facts = Facts { cqe_opcode: Some(cqe_opcode), ..Facts::default() };
    match c {
        Completion::Requester { wqe_opcode, wqe_counter, byte_cnt, .. } => {
            facts.wqe_opcode = Some(wqe_opcode);
            o.extend_from_slice(b"CQE REQ: ");
            enum_text(o, wqe_opcode.name(), u64::from(wqe_opcode.0), 2);
            o.extend_from_slice(b" completed, wqe_counter ");
            hex(o, u64::from(wqe_counter), 4);
            o.extend_from_slice(b", byte_cnt ");
            dec(o, u64::from(byte_cnt));
        }
        Completion::Responder { opcode, wqe_counter, byte_cnt, imm, .. } => {
            o.extend_from_slice(b"CQE ");
            opcode_name(o, opcode.name(), opcode.0);
            o.extend_from_slice(b": receive WQE ");
            hex(o, u64::from(wqe_counter), 4);
            o.extend_from_slice(b", byte_cnt ");
            dec(o, u64::from(byte_cnt));
            if let Some(imm) = imm {
                o.extend_from_slice(b", imm ");
                hex(o, u64::from(imm), 8);
            }
        }
        Completion::Error(e) => {
            facts.wqe_opcode = Some(e.wqe_opcode);
            facts.is_error = true;
            o.extend_from_slice(b"CQE ");
            opcode_name(o, e.opcode.name(), e.opcode.0);
            o.extend_from_slice(b": ");
            enum_text(o, e.wqe_opcode.name(), u64::from(e.wqe_opcode.0), 2);
            o.extend_from_slice(b" failed, syndrome ");
            enum_text(o, e.syndrome.name(), u64::from(e.syndrome.0), 2);
            o.extend_from_slice(b", vendor_err_synd ");
            hex(o, u64::from(e.vendor_err_synd), 2);
            o.extend_from_slice(b", wqe_counter ");
            hex(o, u64::from(e.wqe_counter), 4);
        }
        Completion::Other { .. } => return None,
    }
    o.extend_from_slice(b", owner ");
    dec(o, owner);
    o.push(b'\n');
    if matches!(cqe_opcode, CqeOpcode::REQ_ERR | CqeOpcode::RESP_ERR) {
        facts.is_error = true;
    }
    if detail != Detail::Brief {
        let q = mlx5_cqe64::read_from_bytes(bytes).ok()?;
        let (op, fmt) = (q.opcode(), q.format());
        o.extend_from_slice(b"\tCQE: ");
        enum_text(o, op.name(), u64::from(op.0), 1);
        o.extend_from_slice(b", format ");
        enum_text(o, fmt.name(), u64::from(fmt.0), 1);
        o.extend_from_slice(b", owner ");
        dec(o, u64::from(u8::from(q.owner())));
        o.extend_from_slice(b", QPN ");
        hex(o, u64::from(q.qpn()), 6);
        o.extend_from_slice(b", wqe_counter ");
        hex(o, u64::from(q.wqe_counter()), 4);
        o.push(b'\n');
        let err_layout = matches!(op, CqeOpcode::REQ_ERR | CqeOpcode::RESP_ERR);
        if detail == Detail::Full {
            // The error layout's syndrome is named through an enumeration
            // of the whole field, which the general path prints.
            if err_layout {
                return None;
            }
            let layout = &mlx5_cqe64::LAYOUT;
            node_line(o, 1, 0, layout.name);
            struct_fields(o, 2, layout, bytes, 0)?;
        }
        if err_layout {
            o.extend_from_slice(b"\top_own.opcode is ");
            opcode_name(o, op.name(), op.0);
            o.extend_from_slice(b": fields shown with the mlx5_err_cqe layout\n");
        }
        o.push(b'\t');
        completion(o, &c);
        o.push(b'\n');
    }
    Some(facts)
}

/// [`crate::decode::completion_line`].
fn completion(o: &mut Vec<u8>, c: &Completion) {
    match *c {
        Completion::Requester { wqe_opcode, qpn, wqe_counter, byte_cnt, timestamp } => {
            o.extend_from_slice(b"Completion: requester, WQE ");
            enum_text(o, wqe_opcode.name(), u64::from(wqe_opcode.0), 2);
            o.extend_from_slice(b" on QPN ");
            hex(o, u64::from(qpn), 6);
            o.extend_from_slice(b" at wqe_counter ");
            hex(o, u64::from(wqe_counter), 4);
            o.extend_from_slice(b", byte_cnt ");
            dec(o, u64::from(byte_cnt));
            o.extend_from_slice(b", timestamp ");
            hex(o, timestamp, 1);
        }
        Completion::Responder { opcode, qpn, wqe_counter, byte_cnt, imm } => {
            o.extend_from_slice(b"Completion: responder ");
            opcode_name(o, opcode.name(), opcode.0);
            o.extend_from_slice(b" on QPN ");
            hex(o, u64::from(qpn), 6);
            o.extend_from_slice(b", wqe_counter ");
            hex(o, u64::from(wqe_counter), 4);
            o.extend_from_slice(b", byte_cnt ");
            dec(o, u64::from(byte_cnt));
            if let Some(imm) = imm {
                o.extend_from_slice(b", imm ");
                hex(o, u64::from(imm), 8);
            }
        }
        _ => o.extend_from_slice(crate::decode::completion_line(c).as_bytes()),
    }
}

// -------------------------------------------------------- receive WQEs

/// A receive WQE's line and, at [`Detail::Normal`], its scatter entries
/// (at [`Detail::Full`], field by field).
fn recv(o: &mut Vec<u8>, bytes: &[u8], detail: Detail) -> Option<()> {
    let entries = || {
        bytes
            .chunks_exact(mlx5_wqe_data_seg::SIZE)
            .map_while(|seg| mlx5_wqe_data_seg::ref_from_bytes(seg).ok().map(|d| (seg, d)))
            .take_while(|(_, d)| d.lkey() != MLX5_INVALID_LKEY)
    };
    let (n, total) = entries().fold((0u64, 0u64), |(n, t), (_, d)| (n + 1, t + u64::from(d.byte_count())));
    o.extend_from_slice(b"receive WQE: ");
    dec(o, n);
    o.extend_from_slice(if n == 1 { b" scatter entry, " } else { b" scatter entries, " });
    dec(o, total);
    o.extend_from_slice(b" bytes\n");
    if detail == Detail::Brief {
        return Some(());
    }
    for (i, (seg, d)) in entries().enumerate() {
        let at = i * mlx5_wqe_data_seg::SIZE;
        if detail == Detail::Full {
            let layout = &mlx5_wqe_data_seg::LAYOUT;
            node_line(o, 1, at, layout.name);
            struct_fields(o, 2, layout, seg, at)?;
            continue;
        }
        o.extend_from_slice(b"\t[");
        hex(o, at as u64, 3);
        o.extend_from_slice(b"] addr ");
        hex(o, d.addr(), 16);
        o.extend_from_slice(b", byte_count ");
        dec(o, u64::from(d.byte_count()));
        o.extend_from_slice(b", lkey ");
        hex(o, u64::from(d.lkey()), 8);
        o.push(b'\n');
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_name_fits_its_column() {
        for k in 0..=u8::MAX {
            let col = kind_column(Kind(k));
            let name = if KINDS.contains(&Kind(k)) { Kind(k).name().to_owned() } else { format!("kind-{k:#04x}") };
            assert_eq!(String::from_utf8(col.to_vec()).unwrap(), format!("{name:<16} "));
        }
    }
}
