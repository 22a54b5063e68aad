//! `marrow decode --pcie`: configuration-space dumps (`lspci -x`, `-xxx`,
//! `-xxxx` text, or a raw 64..4096-byte binary such as sysfs `config`)
//! decoded through `marrow-pcie`: header, BARs, both capability lists, the
//! PCI Express link and ACS, and every capability marrow-pcie decodes (PM,
//! MSI/MSI-X, AER, ATS/PRI/PASID, LTR, DSN, Resizable BAR, DPC, SR-IOV,
//! Secondary PCIe, Data Link Feature, Physical Layer 16/32 GT/s, the ACS
//! egress vector, vendor-specific headers with a bounded hex body). Broken
//! capability chains are printed as errors where the walk stopped; a
//! capability that is present but malformed prints an `error:` line. TLP headers (1 to 4 hex dwords, or the
//! `TLP Header:` line of a kernel AER message) are decoded field by field,
//! with the header rules they break.

use marrow_pcie::dump::{DumpedFunction, parse_lspci_text};
use marrow_pcie::{Bar, Config};
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
    let _ = writeln!(o, "{} {}", f.address, crate::print::escape(&f.title));
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
                    "  ext cap [{:03x} v{}] {:?} {} (next {:03x}){}",
                    c.offset,
                    c.version,
                    c.id,
                    c.id,
                    c.next,
                    // §7.6.3: ID 0 is a placeholder; VMMs put one where they hide a capability.
                    match (c.id == marrow_pcie::cap_id::ExtCapId::NULL, c.next) {
                        (false, _) => "",
                        (true, 0) => ": no registers (hidden or removed capability)",
                        (true, _) => ": no registers (hidden or removed capability), list continues",
                    }
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
        let _ = writeln!(
            o,
            "  PASID [{:03x}]: {}, {} bits",
            p.offset,
            if p.enabled { "enabled" } else { "disabled" },
            p.max_width
        );
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
        let _ = writeln!(
            o,
            "  LTR [{:03x}]: max snoop {}, max no-snoop {}",
            t.offset,
            ns(t.max_snoop_ns()),
            ns(t.max_no_snoop_ns())
        );
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
        let _ = writeln!(
            o,
            "  Resizable BAR{}: current {}, supported {}",
            r.bar_index,
            size_text(r.current),
            sup.join(" ")
        );
    }
    new_caps(o, cfg);
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

/// At most this many body bytes of a vendor-specific capability are printed.
const VENDOR_BODY_MAX: usize = 64;

fn hex_body(body: &[u8]) -> String {
    let shown: Vec<String> = body.iter().take(VENDOR_BODY_MAX).map(|b| format!("{b:02x}")).collect();
    let more = body.len().saturating_sub(VENDOR_BODY_MAX);
    if more > 0 { format!("{} (+{more} bytes)", shown.join(" ")) } else { shown.join(" ") }
}

fn pm(b: bool) -> char {
    if b { '+' } else { '-' }
}

/// DPC, SR-IOV, Secondary PCIe, DLF, Physical Layer 16/32 GT/s,
/// vendor-specific capabilities and the ACS egress vector. A capability
/// that is present but malformed prints an `error:` line in its place.
fn new_caps(o: &mut String, cfg: &Config) {
    let err = |o: &mut String, name: &str, e: &marrow_pcie::CapError| {
        let _ = writeln!(o, "  {name}: error: {e}");
    };
    match cfg.dpc() {
        Some(Ok(d)) => {
            let en =
                ["off", "on ERR_FATAL", "on ERR_NONFATAL or ERR_FATAL", "reserved"][usize::from(d.trigger_enable & 3)];
            let _ = writeln!(
                o,
                "  DPC [{:03x}]: trigger {en}; RPExt{} PoisonedTLP{} SwTrigger{} RP PIO Log {} DL_ActiveErr{}, INT Msg #{}",
                d.offset,
                pm(d.rp_extensions),
                pm(d.poisoned_tlp_blocking),
                pm(d.sw_trigger_supported),
                d.rp_pio_log_size,
                pm(d.dl_active_err_cor_supported),
                d.interrupt_message
            );
            if d.triggered {
                let _ = writeln!(
                    o,
                    "    TRIGGERED: {} (reason {}, ext {}), source {:02x}:{:02x}.{}{}; the link stays down until software clears DPC Trigger Status",
                    d.trigger_reason_text(),
                    d.trigger_reason,
                    d.trigger_reason_ext,
                    d.source_id >> 8,
                    (d.source_id >> 3) & 0x1f,
                    d.source_id & 7,
                    if d.rp_busy { ", RP busy" } else { "" }
                );
            } else {
                let _ = writeln!(
                    o,
                    "    not triggered (control {:#06x}, status {:#06x}, source {:04x})",
                    d.control_raw, d.status_raw, d.source_id
                );
            }
            if d.flit_mode && d.rp_extensions {
                let _ = writeln!(
                    o,
                    "    Flit Mode: RP PIO log size {} dwords, its Flit Mode layout is not decoded",
                    d.rp_pio_log_size
                );
            }
            if let Some(r) = d.rp_pio {
                let _ = writeln!(
                    o,
                    "    RP PIO: status {:#010x} mask {:#010x} severity {:#010x} SysError {:#010x} exception {:#010x}, first error pointer {}",
                    r.status, r.mask, r.severity, r.syserror, r.exception, d.rp_pio_first_error
                );
                if r.status != 0 {
                    let _ = writeln!(o, "    RP PIO header log {:08x?}", r.header_log);
                }
                if r.prefix_dwords > 0 {
                    let _ = writeln!(
                        o,
                        "    RP PIO TLP prefix log {:08x?}",
                        &r.tlp_prefix_log[..usize::from(r.prefix_dwords)]
                    );
                }
            }
        }
        Some(Err(e)) => err(o, "DPC", &e),
        None => {}
    }
    match cfg.sriov() {
        Some(Ok(s)) => {
            let _ = writeln!(
                o,
                "  SR-IOV [{:03x}]: VFs {} of {} (initial {}), VF Enable{} MSE{} ARIHierarchy{} Migration{}, VF device {:04x}, first VF offset {}, stride {}, function link {:02x}",
                s.offset,
                s.num_vfs,
                s.total_vfs,
                s.initial_vfs,
                pm(s.vf_enable),
                pm(s.vf_memory_space_enable),
                pm(s.ari_capable_hierarchy),
                pm(s.vf_migration_enable),
                s.vf_device_id,
                s.first_vf_offset,
                s.vf_stride,
                s.function_dependency_link
            );
            let _ = writeln!(
                o,
                "    page sizes: supported {:#010x}, system {:#010x}{}",
                s.supported_page_sizes,
                s.system_page_size,
                s.system_page_bytes().map(|b| format!(" ({})", size_text(b))).unwrap_or_default()
            );
            for bar in &s.vf_bars {
                if !matches!(bar, Bar::Mem32 { address: 0, prefetchable: false, .. }) {
                    let _ = writeln!(o, "    VF BAR{} {}", bar.index(), bar_text(bar));
                }
            }
            for p in s.problems() {
                let _ = writeln!(o, "    warning: {p}");
            }
        }
        Some(Err(e)) => err(o, "SR-IOV", &e),
        None => {}
    }
    match cfg.secondary_pcie() {
        Some(Ok(s)) => {
            let lanes: Vec<String> = s.lanes_in_error().map(|l| l.to_string()).collect();
            let _ = writeln!(
                o,
                "  Secondary PCIe [{:03x}]: LnkCtl3 PerformEqu{} LnkEquIntrruptEn{}, lane errors: {}",
                s.offset,
                pm(s.perform_equalization),
                pm(s.eq_request_interrupt),
                if lanes.is_empty() { "none".to_string() } else { format!("lanes {}", lanes.join(" ")) }
            );
            let presets: Vec<String> =
                s.lanes.iter().map(|l| format!("{}/{}", l.dsp_tx_preset, l.usp_tx_preset)).collect();
            let _ = writeln!(
                o,
                "    8GT/s Tx presets DSP/USP per lane ({} lanes, {:?}): {}",
                s.lanes.len(),
                s.lane_count,
                presets.join(" ")
            );
        }
        Some(Err(e)) => err(o, "Secondary PCIe", &e),
        None => {}
    }
    match cfg.data_link_feature() {
        Some(Ok(d)) => {
            let _ = writeln!(
                o,
                "  Data Link Feature [{:03x}]: exchange {}, local features {:#08x} (scaled flow control {}), remote {}",
                d.offset,
                if d.exchange_enable { "enabled" } else { "disabled" },
                d.local_features,
                if d.local_scaled_flow_control() { "yes" } else { "no" },
                if d.remote_valid { format!("{:#08x}", d.remote_features) } else { "not received".to_string() }
            );
        }
        Some(Err(e)) => err(o, "Data Link Feature", &e),
        None => {}
    }
    let eq = |e: &marrow_pcie::pl16::EqStatus| {
        format!(
            "EqComplete{} Phase1{} Phase2{} Phase3{} EqRequest{}",
            pm(e.complete),
            pm(e.phase1),
            pm(e.phase2),
            pm(e.phase3),
            pm(e.request)
        )
    };
    let presets = |l: &[marrow_pcie::pl16::LanePresets]| {
        l.iter().map(|p| format!("{}/{}", p.dsp_tx_preset, p.usp_tx_preset)).collect::<Vec<_>>().join(" ")
    };
    match cfg.physical_layer_16gt() {
        Some(Ok(p)) => {
            let _ = writeln!(
                o,
                "  Physical Layer 16GT/s [{:03x}]: {}; data parity mismatch lanes: local {:#x}, retimer 1 {:#x}, retimer 2 {:#x}",
                p.offset,
                eq(&p.equalization),
                p.local_parity_mismatch,
                p.first_retimer_parity_mismatch,
                p.second_retimer_parity_mismatch
            );
            let _ = writeln!(
                o,
                "    Tx presets DSP/USP per lane ({} lanes, {:?}): {}",
                p.lanes.len(),
                p.lane_count,
                presets(&p.lanes)
            );
        }
        Some(Err(e)) => err(o, "Physical Layer 16GT/s", &e),
        None => {}
    }
    match cfg.physical_layer_32gt() {
        Some(Ok(p)) => {
            let _ = writeln!(
                o,
                "  Physical Layer 32GT/s [{:03x}]: {}; EqBypass{} NoEqNeeded{} ModifiedTS modes {:03b} (selected {}), precoding {}",
                p.offset,
                eq(&p.equalization),
                pm(p.eq_bypass_supported),
                pm(p.no_eq_needed_supported),
                p.modified_ts_modes,
                p.modified_ts_mode_selected,
                if p.precoding_on { "on" } else { "off" }
            );
            let _ = writeln!(
                o,
                "    Tx presets DSP/USP per lane ({} lanes, {:?}): {}",
                p.lanes.len(),
                p.lane_count,
                presets(&p.lanes)
            );
        }
        Some(Err(e)) => err(o, "Physical Layer 32GT/s", &e),
        None => {}
    }
    match cfg.acs_egress_control() {
        Some(Ok(e)) => {
            let blocked: Vec<String> = e.blocked().map(|n| n.to_string()).collect();
            let _ = writeln!(
                o,
                "  ACS egress control vector [{:03x}] ({} bits): {}",
                e.offset,
                e.bits,
                if blocked.is_empty() {
                    "nothing blocked".to_string()
                } else {
                    format!("blocked {}", blocked.join(" "))
                }
            );
        }
        Some(Err(e)) => err(o, "ACS egress control vector", &e),
        None => {}
    }
    for v in cfg.vendor_caps() {
        match v {
            Ok(v) => match v.body {
                Ok(b) => {
                    let _ = writeln!(o, "  Vendor Specific [{:02x}]: length {}, body {}", v.offset, v.len, hex_body(b));
                }
                Err(e) => {
                    let _ = writeln!(o, "  Vendor Specific [{:02x}]: length {}: error: {e}", v.offset, v.len);
                }
            },
            Err(e) => err(o, "Vendor Specific", &e),
        }
    }
    for v in cfg.vsecs() {
        match v {
            Ok(v) => match v.body {
                Ok(b) => {
                    let _ = writeln!(
                        o,
                        "  VSEC [{:03x}]: ID {:04x} rev {} length {:#x}, body {}",
                        v.offset,
                        v.id,
                        v.rev,
                        v.len,
                        hex_body(b)
                    );
                }
                Err(e) => {
                    let _ = writeln!(
                        o,
                        "  VSEC [{:03x}]: ID {:04x} rev {} length {:#x}: error: {e}",
                        v.offset, v.id, v.rev, v.len
                    );
                }
            },
            Err(e) => err(o, "VSEC", &e),
        }
    }
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
            .map(|w| {
                u32::from_str_radix(w.trim_start_matches("0x"), 16).map_err(|e| format!("TLP header word {w:?}: {e}"))
            })
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn terminal_safe(text: &str) -> bool {
        !text.chars().any(|c| (c.is_control() && c != '\n') || crate::print::is_format_char(c))
    }

    /// `lspci -x` text of one function: its address line, then 16-byte rows.
    fn lspci_text(title: &str, bytes: &[u8]) -> String {
        let mut t = format!("00:02.0 {title}\n");
        for (i, row) in bytes.chunks(16).enumerate() {
            let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
            t.push_str(&format!("{:02x}: {}\n", i * 16, hex.join(" ")));
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn any_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..5000)) {
            if let Ok(r) = decode(&raw) {
                prop_assert!(terminal_safe(&r.text), "{:?}", r.text);
            }
        }

        #[test]
        fn lspci_text_never_panics_and_its_title_is_escaped(
            title in "[\\x00-\\x09\\x0b-\\x{ff}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}]{0,30}",
            bytes in proptest::collection::vec(any::<u8>(), 64..512),
        ) {
            let text = lspci_text(&title, &bytes);
            if let Ok(r) = decode(text.as_bytes()) {
                prop_assert!(terminal_safe(&r.text), "{:?}", r.text);
            }
        }

        #[test]
        fn tlp_words_never_panic(words in proptest::collection::vec(any::<u32>(), 1..5), aer in any::<bool>()) {
            let hex: Vec<String> = words.iter().map(|w| format!("{w:08x}")).collect();
            let text = if aer { format!("pcieport: AER: TLP Header: {}", hex.join(" ")) } else { hex.join(" ") };
            let _ = decode(text.as_bytes());
        }
    }
}
