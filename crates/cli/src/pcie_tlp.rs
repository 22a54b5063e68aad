//! `decode --pcie` given TLP header dwords (PCIe Base 6.0 §2.2): from the
//! kernel's AER `TLP Header:` line or text that is only hex dwords. TLP
//! prefixes (Fmt 100b, §2.2.1.1) are named and the header after them
//! decoded; a header's broken rules are flagged, and dwords past the
//! header are reported, not dropped.

use crate::pcie_out::PcieReport;
use marrow_pcie::routing_id::RoutingId;
use marrow_pcie::tlp::{Body, Prefix, TlpHeader, TlpKind, prefix_name, routing_name};
use serde_json::json;
use std::fmt::Write;

/// The most prefixes a TLP may carry before its header (§2.2.10.2: four
/// End-End; Local prefixes come before them).
const MAX_PREFIXES: usize = 8;

/// TLP header dwords from the kernel's AER line, or from text that is only
/// hex words (no `:` row offsets, no `bus:dev.fn` title). `None` when the
/// text is neither (a config dump, or binary).
pub fn tlp_dwords(text: &str) -> Option<Result<Vec<u32>, String>> {
    let words: Vec<&str> = match text.find("TLP Header:") {
        Some(at) => text[at + "TLP Header:".len()..].lines().next().unwrap_or("").split_whitespace().collect(),
        None => {
            let w: Vec<&str> = text.split_whitespace().collect();
            let dword = |s: &&str| s.len() == 8 && s.chars().all(|c| c.is_ascii_hexdigit());
            // TLP words: the first is a dword and no word is a dump row's `OFF:`.
            if w.is_empty() || !dword(&w[0]) || w.iter().any(|s| s.contains(':')) {
                return None;
            }
            w
        }
    };
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let hex = w.trim_start_matches("0x");
        if hex.len() != 8 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Some(Err(format!("TLP header word {} {w:?} is not a hex dword (8 hex digits)", i + 1)));
        }
        out.push(u32::from_str_radix(hex, 16).unwrap_or(0));
    }
    if out.is_empty() {
        return Some(Err("TLP Header: line holds no dwords".into()));
    }
    Some(Ok(out))
}

pub fn tlp(dws: &[u32]) -> Result<PcieReport, String> {
    let mut o = String::new();
    let prefixes = dws.iter().take_while(|d| Prefix::of(**d).is_some()).count();
    if prefixes > MAX_PREFIXES {
        return Err(format!("{prefixes} TLP prefixes in a row, more than a TLP carries ({MAX_PREFIXES})"));
    }
    for (p, Prefix { ty, contents }) in dws[..prefixes].iter().filter_map(|&p| Some((p, Prefix::of(p)?))) {
        let _ = writeln!(o, "TLP prefix {p:08x}: Type {ty:05b} ({}), contents {contents:06x}", prefix_name(ty));
    }
    let rest = &dws[prefixes..];
    if rest.is_empty() {
        return Err(format!(
            "{} TLP prefix dword{} and no header after {}: a prefix (Fmt 100b) precedes the TLP header it belongs to",
            prefixes,
            if prefixes == 1 { "" } else { "s" },
            if prefixes == 1 { "it" } else { "them" }
        ));
    }
    let h = TlpHeader::decode(rest).map_err(|e| e.to_string())?;
    let kind = h.kind();
    let n = TlpHeader::header_dws(h.fmt);
    if rest.len() > 4 {
        return Err(format!("{} dwords after the prefixes: a TLP header is at most 4 dwords", rest.len()));
    }
    let _ = writeln!(
        o,
        "TLP {} (Fmt {:03b} Type {:05b}), {} DW header{}",
        kind.mnemonic(),
        h.fmt,
        h.ty,
        n,
        if h.has_data() { format!(", {} DW of data", h.length_dw()) } else { format!(", Length {}", h.length) }
    );
    let _ = writeln!(
        o,
        "  TC {} Attr NS{} RO{} IDO{} TH {} TD {} EP {} LN {} AT {} Tag {:#05x}",
        h.tc,
        crate::pcie_out::pm(h.attr.contains(marrow_pcie::tlp::Attr::NS)),
        crate::pcie_out::pm(h.attr.contains(marrow_pcie::tlp::Attr::RO)),
        crate::pcie_out::pm(h.attr.contains(marrow_pcie::tlp::Attr::IDO)),
        h.th as u8,
        h.td as u8,
        h.ep as u8,
        h.ln as u8,
        h.at,
        h.tag
    );
    match h.body {
        Body::Request { requester_id, last_be, first_be, address, ph } => {
            let _ = writeln!(
                o,
                "  Requester {} Address {address:#x} PH {ph} First DW BE {first_be:04b} Last DW BE {last_be:04b}",
                bdf(requester_id)
            );
        }
        Body::Config { requester_id, last_be, first_be, target_id, register } => {
            let _ = writeln!(
                o,
                "  Requester {} Target {} Register {register:#05x} First DW BE {first_be:04b} Last DW BE {last_be:04b}",
                bdf(requester_id),
                bdf(target_id)
            );
        }
        Body::Completion { completer_id, status, bcm, byte_count, requester_id, lower_address } => {
            let _ = writeln!(
                o,
                "  Completer {} Status {status:?} BCM {} Byte Count {} Requester {} Lower Address {lower_address:#04x}",
                bdf(completer_id),
                bcm as u8,
                if byte_count == 0 { 4096 } else { byte_count },
                bdf(requester_id)
            );
        }
        Body::Message { requester_id, code, dw2, dw3 } => {
            let routing = match kind {
                TlpKind::Msg { routing } | TlpKind::MsgData { routing } => routing_name(routing),
                _ => "",
            };
            let _ = writeln!(
                o,
                "  Requester {} Message Code {code:#04x} ({routing}) DW2 {dw2:#010x} DW3 {dw3:#010x}",
                bdf(requester_id)
            );
        }
        Body::Raw { dws } => {
            let shown: Vec<String> = dws[..n.saturating_sub(1)].iter().map(|d| format!("{d:08x}")).collect();
            let _ = writeln!(o, "  dwords after DW0: {}", shown.join(" "));
        }
    }
    let mut errors = Vec::new();
    // AER logs four dwords whatever the header size: a zero fourth dword
    // after a 3 DW header is the log's padding, anything else is reported.
    let trailing = &rest[n.min(rest.len())..];
    if trailing.iter().any(|d| *d != 0) {
        let t: Vec<String> = trailing.iter().map(|d| format!("{d:08x}")).collect();
        let msg = format!("{} dword(s) after the {n} DW header are not part of it: {}", trailing.len(), t.join(" "));
        let _ = writeln!(o, "  warning: {msg}");
        errors.push((msg, Some((4 * (prefixes + n)) as u64)));
    }
    let bad = h.malformed();
    let names: Vec<&str> = bad.iter_names().map(|(n, _)| n).collect();
    if !bad.is_empty() {
        let _ = writeln!(o, "  malformed: {}", names.join(" "));
        errors.push((format!("malformed TLP: {}", names.join(" ")), Some((4 * prefixes) as u64)));
    }
    let json = json!({
        "tlp": {
            "prefixes": dws[..prefixes],
            "fmt": h.fmt, "type": h.ty, "kind": kind.mnemonic(), "header_dws": n,
            "tc": h.tc, "attr": h.attr.bits(), "th": h.th, "td": h.td, "ep": h.ep, "ln": h.ln, "at": h.at,
            "length": h.length, "tag": h.tag, "body": body_json(&h.body),
            "dwords": rest, "malformed": names,
        }
    });
    Ok(PcieReport { text: o, json, errors })
}

/// The fields after DW0 by name, as the text prints them: IDs as numbers and
/// as `bus:dev.fn`, the completion status as its code and its name.
fn body_json(b: &Body) -> serde_json::Value {
    match *b {
        Body::Request { requester_id, last_be, first_be, address, ph } => json!({
            "form": "request", "requester_id": requester_id, "requester": bdf(requester_id),
            "address": address, "ph": ph, "first_dw_be": first_be, "last_dw_be": last_be,
        }),
        Body::Config { requester_id, last_be, first_be, target_id, register } => json!({
            "form": "config", "requester_id": requester_id, "requester": bdf(requester_id),
            "target_id": target_id, "target": bdf(target_id), "register": register,
            "first_dw_be": first_be, "last_dw_be": last_be,
        }),
        Body::Completion { completer_id, status, bcm, byte_count, requester_id, lower_address } => json!({
            "form": "completion", "completer_id": completer_id, "completer": bdf(completer_id),
            "status": status.0, "status_name": format!("{status:?}"), "status_defined": status.is_defined(),
            "bcm": bcm, "byte_count": if byte_count == 0 { 4096 } else { byte_count },
            "requester_id": requester_id, "requester": bdf(requester_id), "lower_address": lower_address,
        }),
        Body::Message { requester_id, code, dw2, dw3 } => json!({
            "form": "message", "requester_id": requester_id, "requester": bdf(requester_id),
            "code": code, "dw2": dw2, "dw3": dw3,
        }),
        Body::Raw { dws } => json!({ "form": "raw", "dws": dws }),
    }
}

/// A Requester/Completer ID as `bus:device.function`.
fn bdf(id: u16) -> String {
    RoutingId(id).to_string()
}
