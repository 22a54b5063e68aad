//! `marrow decode --pcie`: configuration-space dumps (`lspci -x`, `-xxx`,
//! `-xxxx` text, or a raw 64..4096-byte binary such as sysfs `config`)
//! decoded through `marrow-pcie`: header, BARs, both capability lists, the
//! PCI Express link and ACS. Broken capability chains are printed as
//! errors where the walk stopped.

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
        if text.contains("TLP Header") {
            return Err("TLP header decoding is not built yet (issue 5: crates/pcie has no TLP module); \
                        --pcie reads configuration-space dumps only"
                .into());
        }
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
