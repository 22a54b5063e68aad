//! A decoded record as `marrow trace show` prints it: the text columns,
//! or one JSON object.

use super::view::View;
use crate::model::hex_string;
use crate::trace_shared::KINDS;
use marrow_softnic::trace::{Kind, Record};
use serde_json::{Value as Json, json};
use std::fmt::Write as _;

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
