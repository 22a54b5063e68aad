//! `marrow decode --pcie`: configuration-space dumps (`lspci -x`, `-xxx`,
//! `-xxxx` text, or a raw 64..4096-byte binary such as sysfs `config`)
//! decoded through `marrow-pcie`: header, BARs, both capability lists, the
//! PCI Express link and ACS. Broken capability chains are printed as
//! errors where the walk stopped. TLP headers (1 to 4 hex dwords, or the
//! `TLP Header:` line of a kernel AER message) are decoded field by field,
//! with the header rules they break.

use marrow_pcie::{Bar, Config};
use marrow_pcie::dump::{DumpedFunction, parse_lspci_text};
use std::fmt::Write;

/// The decoded text, and whether every walk ended cleanly.
#[derive(Debug)]
pub struct PcieReport {
    pub text: String,
    pub clean: bool,
}

/// Reads the dump: `lspci -x` text when it parses as such, else raw bytes.
pub fn read_functions(raw: &[u8]) -> Result<Vec<DumpedFunction>, String> {
    if let Ok(text) = std::str::from_utf8(raw) {
        match parse_lspci_text(text) {
            Ok(f) => return Ok(f),
            // Text that is not a dump: say why rather than decoding its characters.
            Err(e) if text.chars().all(|c| c.is_ascii_graphic() || c.is_ascii_whitespace()) => {
                return Err(format!("not an lspci -x dump: {e}"));
            }
            Err(_) => {}
        }
    }
    Config::new(raw).map_err(|e| e.to_string())?;
    Ok(vec![DumpedFunction { address: "(binary)".into(), title: String::new(), bytes: raw.to_vec() }])
}

pub fn decode(raw: &[u8]) -> Result<PcieReport, String> {
    if let Some(dws) = std::str::from_utf8(raw).ok().and_then(tlp_dwords) {
        return tlp(&dws?);
    }
    let mut text = String::new();
    let mut clean = true;
    for f in read_functions(raw)? {
        let cfg = Config::new(&f.bytes).map_err(|e| format!("{}: {e}", f.address))?;
        clean &= function(&mut text, &f, &cfg);
    }
    Ok(PcieReport { text, clean })
}

fn bar_text(bar: &Bar) -> String {
    let pf = |p: bool| if p { "prefetchable" } else { "non-prefetchable" };
    match *bar {
        Bar::Io { address: 0, .. } | Bar::Mem32 { address: 0, .. } | Bar::Mem64 { address: 0, .. } => {
            format!("{} <unassigned>", kind_text(bar))
        }
        Bar::Io { address, .. } => format!("I/O at {address:#x}"),
        Bar::Mem32 { address, prefetchable, .. } => format!("memory at {address:#x} (32-bit, {})", pf(prefetchable)),
        Bar::Mem64 { address, prefetchable, .. } => format!("memory at {address:#x} (64-bit, {})", pf(prefetchable)),
        Bar::Mem64InLastSlot { .. } => "error: 64-bit BAR in the last slot (no room for its upper half)".into(),
        Bar::ReservedType { raw, .. } => format!("error: reserved memory type 0b11 (raw {raw:#010x})"),
    }
}

/// Bytes as MiB, GiB or TiB, whichever is whole.
pub fn size_text(b: u64) -> String {
    match b {
        b if b >= 1 << 40 && b % (1 << 40) == 0 => format!("{} TiB", b >> 40),
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

fn kind_text(bar: &Bar) -> &'static str {
    match bar {
        Bar::Io { .. } => "I/O",
        Bar::Mem64 { .. } => "memory (64-bit)",
        _ => "memory (32-bit)",
    }
}

fn function(o: &mut String, f: &DumpedFunction, cfg: &Config) -> bool {
    let mut clean = true;
    let _ = writeln!(o, "{} {}", f.address, f.title);
    let _ = writeln!(
        o,
        "  {:04x}:{:04x} class {:06x} rev {:02x}, header type {}{}, {} bytes",
        cfg.vendor_id(),
        cfg.device_id(),
        cfg.class(),
        cfg.revision(),
        cfg.header_type(),
        if cfg.is_multifunction() { " (multi-function)" } else { "" },
        cfg.len()
    );
    if let Some((v, d)) = cfg.subsystem() {
        let _ = writeln!(o, "  subsystem {v:04x}:{d:04x}");
    }
    if let Some((p, s, sub)) = cfg.bus_numbers() {
        let _ = writeln!(o, "  buses: primary {p:02x}, secondary {s:02x}, subordinate {sub:02x}");
    }
    for bar in cfg.bars() {
        let _ = writeln!(o, "  BAR{} {}", bar.index(), bar_text(&bar));
    }
    for cap in cfg.caps() {
        match cap {
            Ok(c) => {
                let _ = writeln!(o, "  cap [{:02x}] {:?} {} (next {:02x})", c.offset, c.id, c.id, c.next);
            }
            Err(e) => {
                clean = false;
                let _ = writeln!(o, "  error: {e}");
            }
        }
    }
    for cap in cfg.ext_caps() {
        match cap {
            Ok(c) => {
                let _ = writeln!(
                    o,
                    "  ext cap [{:03x} v{}] {:?} {} (next {:03x})",
                    c.offset, c.version, c.id, c.id, c.next
                );
            }
            Err(e) => {
                clean = false;
                let _ = writeln!(o, "  error: {e}");
            }
        }
    }
    if let Some(e) = cfg.express() {
        let _ = writeln!(
            o,
            "  PCI Express v{} {:?}: MaxPayload {} (supported {}), MaxReadReq {}",
            e.version, e.port_type, e.max_payload, e.max_payload_supported, e.max_read_request
        );
        if let (Some(c), Some(s)) = (e.link_capable, e.link_status) {
            let _ = writeln!(
                o,
                "    link: capable {:?} x{}, negotiated {:?} x{}{}",
                c.speed,
                c.width,
                s.speed,
                s.width,
                if s.speed < c.speed || s.width < c.width { " (below capability)" } else { "" }
            );
        }
        if e.devcap2.is_some() {
            let _ = writeln!(
                o,
                "    AtomicOp: 64-bit completer {}, requester {}",
                if e.atomic_completer_64() { "yes" } else { "no" },
                if e.atomic_requester_enabled() { "enabled" } else { "disabled" }
            );
        }
    }
    if let Some(p) = cfg.power_management() {
        let _ = writeln!(
            o,
            "  PM [{:02x}] v{}: D{} now, D1 {} D2 {}, PME from D0..D3cold {:05b}, aux {} mA",
            p.offset,
            p.version,
            p.power_state,
            if p.d1 { "yes" } else { "no" },
            if p.d2 { "yes" } else { "no" },
            p.pme_support,
            p.aux_current_ma
        );
    }
    if let Some(a) = cfg.ats() {
        let _ = writeln!(
            o,
            "  ATS [{:03x}]: {}, smallest translation unit {} KiB, invalidate queue depth {}",
            a.offset,
            if a.enabled { "enabled" } else { "disabled" },
            4u32 << a.stu,
            if a.invalidate_queue_depth == 0 { 32 } else { a.invalidate_queue_depth }
        );
    }
    if let Some(p) = cfg.pasid() {
        let _ = writeln!(o, "  PASID [{:03x}]: {}, {} bits", p.offset, if p.enabled { "enabled" } else { "disabled" }, p.max_width);
    }
    if let Some(p) = cfg.pri() {
        let _ = writeln!(
            o,
            "  PRI [{:03x}]: {}{}, capacity {}, allocation {}",
            p.offset,
            if p.enabled { "enabled" } else { "disabled" },
            if p.stopped { " (stopped)" } else { "" },
            p.capacity,
            p.allocation
        );
    }
    if let Some(t) = cfg.ltr() {
        let ns = |v: Option<u64>| v.map_or("reserved scale".to_string(), |n| format!("{n} ns"));
        let _ = writeln!(o, "  LTR [{:03x}]: max snoop {}, max no-snoop {}", t.offset, ns(t.max_snoop_ns()), ns(t.max_no_snoop_ns()));
    }
    if let Some(sn) = cfg.serial_number() {
        let _ = writeln!(o, "  serial number {sn:016x}");
    }
    if let Some(m) = cfg.msi() {
        let _ = writeln!(
            o,
            "  MSI [{:02x}]: {}, {} of {} vectors, {}-bit address{}",
            m.offset,
            if m.enabled { "enabled" } else { "disabled" },
            m.vectors_enabled,
            m.vectors_capable,
            if m.addr_64bit { 64 } else { 32 },
            if m.per_vector_mask { ", per-vector masking" } else { "" }
        );
    }
    if let Some(m) = cfg.msix() {
        let _ = writeln!(
            o,
            "  MSI-X [{:02x}]: {}{}, {} vectors, table BAR{} +{:#x}, PBA BAR{} +{:#x}",
            m.offset,
            if m.enabled { "enabled" } else { "disabled" },
            if m.function_masked { " (function masked)" } else { "" },
            m.table_size,
            m.table_bir,
            m.table_offset,
            m.pba_bir,
            m.pba_offset
        );
    }
    if let Some(a) = cfg.aer() {
        let _ = writeln!(
            o,
            "  AER [{:03x} v{}]: UESta {:?} UEMsk {:?} UESvrt {:?} CESta {:?} CEMsk {:?} First Error Pointer {:#04x}",
            a.offset,
            a.version,
            a.uncor_status,
            a.uncor_mask,
            a.uncor_severity,
            a.cor_status,
            a.cor_mask,
            a.first_error_pointer()
        );
        if a.header_log != [0; 4] {
            let _ = writeln!(o, "    header log {:08x?}:", a.header_log);
            // The logged TLP, decoded the way `--pcie` decodes an AER line.
            match tlp(&a.header_log) {
                Ok(r) => r.text.lines().for_each(|l| {
                    let _ = writeln!(o, "      {l}");
                }),
                Err(e) => {
                    let _ = writeln!(o, "      not a TLP header: {e}");
                }
            }
        }
    }
    for r in cfg.resizable_bars() {
        let sup: Vec<String> = r.supported().map(size_text).collect();
        let _ = writeln!(o, "  Resizable BAR{}: current {}, supported {}", r.bar_index, size_text(r.current), sup.join(" "));
    }
    if let Some(a) = cfg.acs() {
        let _ = writeln!(
            o,
            "  ACS [{:03x}]: capable {:?}, enabled {:?}; peer-to-peer {}",
            a.offset,
            a.capability,
            a.control,
            if a.redirects_p2p() {
                "redirected to the root complex (ReqRedir/CmpltRedir on)"
            } else {
                "not redirected"
            }
        );
    }
    clean
}

/// TLP header dwords from the kernel's AER line (`TLP Header: 4a000001
/// 01000004 ...`) or from text that is only 1 to 4 hex dwords. `None` when
/// the text is neither (a config dump, or binary).
fn tlp_dwords(text: &str) -> Option<Result<Vec<u32>, String>> {
    let words: Vec<&str> = match text.find("TLP Header:") {
        Some(at) => text[at + "TLP Header:".len()..].lines().next().unwrap_or("").split_whitespace().collect(),
        None => {
            let w: Vec<&str> = text.split_whitespace().collect();
            let dword = |s: &&str| s.len() == 8 && s.chars().all(|c| c.is_ascii_hexdigit());
            if w.is_empty() || w.len() > 4 || !w.iter().all(dword) {
                return None;
            }
            w
        }
    };
    Some(
        words
            .iter()
            .map(|w| u32::from_str_radix(w.trim_start_matches("0x"), 16).map_err(|e| format!("TLP header word {w:?}: {e}")))
            .collect(),
    )
}

fn tlp(dws: &[u32]) -> Result<PcieReport, String> {
    use marrow_pcie::tlp::{Body, TlpHeader, TlpKind, routing_name};
    let h = TlpHeader::decode(dws).map_err(|e| e.to_string())?;
    let kind = h.kind();
    let mut o = String::new();
    let bdf = |id: u16| format!("{:02x}:{:02x}.{}", id >> 8, (id >> 3) & 0x1f, id & 7);
    let _ = writeln!(
        o,
        "TLP {} (Fmt {:03b} Type {:05b}), {} DW header{}",
        kind.mnemonic(),
        h.fmt,
        h.ty,
        TlpHeader::header_dws(h.fmt),
        if h.has_data() { format!(", {} DW of data", h.length_dw()) } else { format!(", Length {}", h.length) }
    );
    let _ = writeln!(
        o,
        "  TC {} Attr {:?} TH {} TD {} EP {} LN {} AT {} Tag {:#05x}",
        h.tc, h.attr, h.th as u8, h.td as u8, h.ep as u8, h.ln as u8, h.at, h.tag
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
            let _ = writeln!(o, "  dwords after DW0: {dws:08x?}");
        }
    }
    let bad = h.malformed();
    if !bad.is_empty() {
        let _ = writeln!(o, "  malformed: {bad:?}");
    }
    Ok(PcieReport { text: o, clean: bad.is_empty() })
}
