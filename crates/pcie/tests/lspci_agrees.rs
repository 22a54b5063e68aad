//! Differential test: `lspci -F DUMP -vvv -nn` (Debian pciutils, an
//! implementation nobody here wrote) against this crate, on every real dump
//! in `tests/fixtures/pcie/`. Compared field by field where both print:
//! IDs, capability offsets, IDs and versions, link speed and width, ACS
//! capability and control bits, BAR addresses and flags.

mod common;
use common::{fixtures, text_dumps};
use marrow_pcie::acs::AcsBits;
use marrow_pcie::cap_id::{CapId, ExtCapId};
use marrow_pcie::dump::parse_lspci_text;
use marrow_pcie::{Bar, Config};
use zerocopy::FromBytes;
use std::path::Path;
use std::process::Command;

/// One device block of lspci's verbose output.
struct LspciDevice {
    address: String,
    title: String,
    lines: Vec<String>,
}

fn run_lspci(dump: &Path) -> Vec<LspciDevice> {
    let out = Command::new("lspci")
        .args(["-F"])
        .arg(dump)
        .args(["-vvv", "-nn"])
        .output()
        .expect("lspci not found: install Debian pciutils (scripts/install-test-deps.sh does)");
    assert!(out.status.success(), "lspci failed on {}", dump.display());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut devices: Vec<LspciDevice> = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('\t') {
            let (address, title) = line.split_once(' ').unwrap_or((line, ""));
            devices.push(LspciDevice {
                address: address.to_string(),
                title: title.to_string(),
                lines: Vec::new(),
            });
        } else {
            devices.last_mut().unwrap().lines.push(line.trim().to_string());
        }
    }
    devices
}

/// lspci's capability names (ls-caps.c) to IDs; `None` for a name we do not map.
fn std_cap_id(name: &str) -> Option<u8> {
    let table: &[(&str, CapId)] = &[
        ("Power Management version", CapId::PM),
        ("AGP version", CapId::AGP),
        ("Vital Product Data", CapId::VPD),
        ("Slot ID", CapId::SLOTID),
        ("MSI-X:", CapId::MSIX),
        ("MSI:", CapId::MSI),
        ("PCI-X", CapId::PCIX),
        ("HyperTransport", CapId::HT),
        ("Vendor Specific Information", CapId::VNDR),
        ("Debug port", CapId::DBG),
        ("Subsystem:", CapId::SSVID),
        ("Express", CapId::EXP),
        ("SATA HBA", CapId::SATA),
        ("PCI Advanced Features", CapId::AF),
    ];
    table.iter().find(|(p, _)| name.starts_with(p)).map(|(_, id)| id.0)
}

fn ext_cap_ids(name: &str) -> Option<&'static [u16]> {
    let table: &[(&str, &[u16])] = &[
        ("Null", &[ExtCapId::NULL.0]),
        ("Advanced Error Reporting", &[ExtCapId::ERR.0]),
        ("Virtual Channel", &[ExtCapId::VC.0, ExtCapId::VC9.0]),
        ("Device Serial Number", &[ExtCapId::DSN.0]),
        ("Power Budgeting", &[ExtCapId::PWR.0]),
        ("Root Complex Link", &[ExtCapId::RCLD.0]),
        ("Vendor Specific Information", &[ExtCapId::VNDR.0]),
        ("Access Control Services", &[ExtCapId::ACS.0]),
        ("Alternative Routing-ID Interpretation", &[ExtCapId::ARI.0]),
        ("Address Translation Service", &[ExtCapId::ATS.0]),
        ("Single Root I/O Virtualization", &[ExtCapId::SRIOV.0]),
        ("Multicast", &[ExtCapId::MCAST.0]),
        ("Page Request Interface", &[ExtCapId::PRI.0]),
        ("Physical Resizable BAR", &[ExtCapId::REBAR.0]),
        ("Latency Tolerance Reporting", &[ExtCapId::LTR.0]),
        ("Secondary PCI Express", &[ExtCapId::SECPCI.0]),
        ("Process Address Space ID", &[ExtCapId::PASID.0]),
        ("Downstream Port Containment", &[ExtCapId::DPC.0]),
        ("L1 PM Substates", &[ExtCapId::L1SS.0]),
        ("Precision Time Measurement", &[ExtCapId::PTM.0]),
        ("Designated Vendor-Specific", &[ExtCapId::DVSEC.0]),
        ("Data Link Feature", &[ExtCapId::DLF.0]),
        ("Physical Layer 16.0 GT/s", &[ExtCapId::PL_16GT.0]),
        ("Physical Layer 32.0 GT/s", &[ExtCapId::PL_32GT.0]),
    ];
    table.iter().find(|(p, _)| name.starts_with(p)).map(|(_, ids)| *ids)
}

/// Parses `+`/`-` flags such as `SrcValid+ TransBlk-` into register bits.
/// lspci prints them in bit order 0..6 (PCIe 6.0 §7.7.8.2), so the position
/// here is the bit: independent of this crate's constants.
fn acs_flags(line: &str) -> u16 {
    let names = ["SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"];
    let mut bits = 0;
    for word in line.split_whitespace() {
        for (bit, name) in names.iter().enumerate() {
            if word == format!("{name}+") {
                bits |= 1 << bit;
            }
        }
    }
    bits
}

/// `Speed 8GT/s (ok), Width x4 (ok)` → ("8GT/s", 4).
fn speed_width(line: &str) -> Option<(String, u8)> {
    let speed = line.split("Speed ").nth(1)?.split([',', ' ']).next()?.to_string();
    let width = line.split("Width x").nth(1)?.split([',', ' ']).next()?.parse().ok()?;
    Some((speed, width))
}

#[test]
fn lspci_agrees_on_every_fixture() {
    let mut mismatches = Vec::new();
    let mut compared = [0usize; 9]; // functions, caps, ext caps, links, acs, bars, aer, msi/msi-x, PM/ATS/PRI/PASID/LTR/DSN lines
    for dump in text_dumps() {
        let text = std::fs::read_to_string(&dump).unwrap();
        let ours = parse_lspci_text(&text).unwrap_or_else(|e| panic!("{}: {e}", dump.display()));
        let theirs = run_lspci(&dump);
        let name = dump.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(ours.len(), theirs.len(), "{name}: function count");
        for (f, l) in ours.iter().zip(&theirs) {
            let at = format!("{name} {}", f.address);
            assert!(l.address.ends_with(&f.address) || f.address.ends_with(&l.address), "{at}: order");
            let cfg = Config::new(&f.bytes).unwrap_or_else(|e| panic!("{at}: {e}"));
            compared[0] += 1;
            let ids = format!("[{:04x}:{:04x}]", cfg.vendor_id(), cfg.device_id());
            if !l.title.contains(&ids) {
                mismatches.push(format!("{at}: lspci title {:?} lacks {ids}", l.title));
            }
            compare_caps(&at, &cfg, l, &mut mismatches, &mut compared);
            compare_link(&at, &cfg, l, &mut mismatches, &mut compared);
            compare_acs(&at, &cfg, l, &mut mismatches, &mut compared);
            compare_bars(&at, &cfg, l, &mut mismatches, &mut compared);
            compare_rebar(&at, &cfg, l, &mut mismatches);
            compare_aer(&at, &cfg, l, &mut mismatches, &mut compared);
            compare_msi(&at, &cfg, l, &mut mismatches, &mut compared);
            compare_small_caps(&at, &cfg, l, &mut mismatches, &mut compared);
        }
    }
    eprintln!(
        "compared {} functions, {} capabilities, {} extended capabilities, {} links, {} ACS, {} BARs, {} AER, {} MSI/MSI-X, {} PM/ATS/PRI/PASID/LTR/DSN lines",
        compared[0], compared[1], compared[2], compared[3], compared[4], compared[5], compared[6], compared[7], compared[8]
    );
    assert!(mismatches.is_empty(), "{} mismatches:\n{}", mismatches.len(), mismatches.join("\n"));
    assert!(compared[2] > 40 && compared[4] >= 8 && compared[3] > 20 && compared[6] >= 19 && compared[7] > 30 && compared[8] > 80, "too little compared: {compared:?}");
}

fn compare_caps(at: &str, cfg: &Config, l: &LspciDevice, bad: &mut Vec<String>, n: &mut [usize; 9]) {
    let mut lspci_std = Vec::new();
    let mut lspci_ext = Vec::new();
    for line in &l.lines {
        let Some(rest) = line.strip_prefix("Capabilities: [") else { continue };
        let (inside, name) = rest.split_once("] ").unwrap_or((rest.trim_end_matches(']'), ""));
        let mut words = inside.split(' ');
        let offset = u16::from_str_radix(words.next().unwrap(), 16).unwrap();
        let version = words.next().map(|v| v.trim_start_matches('v').parse::<u8>().unwrap());
        if offset >= 0x100 {
            lspci_ext.push((offset, version.unwrap_or(0), name.to_string()));
        } else {
            lspci_std.push((offset, name.to_string()));
        }
    }
    let ours: Vec<_> = cfg.caps().collect();
    if ours.len() != lspci_std.len() {
        bad.push(format!("{at}: {} capabilities, lspci {}: {ours:?} vs {lspci_std:?}", ours.len(), lspci_std.len()));
    }
    for (o, (off, name)) in ours.iter().zip(&lspci_std) {
        n[1] += 1;
        match o {
            Ok(cap) if cap.offset == *off => match std_cap_id(name) {
                Some(id) if id == cap.id.0 => {}
                Some(id) => bad.push(format!("{at}: cap [{off:x}] {:?}, lspci says {id:#x} ({name})", cap.id)),
                None => bad.push(format!("{at}: cap [{off:x}] {:?}: lspci name {name:?} not mapped", cap.id)),
            },
            other => bad.push(format!("{at}: cap {other:?}, lspci [{off:x}] {name}")),
        }
    }
    // lspci walks extended capabilities only behind a PCI Express capability.
    if cfg.find_cap(CapId::EXP).is_none() {
        return;
    }
    let ours: Vec<_> = cfg.ext_caps().collect();
    if ours.len() != lspci_ext.len() {
        bad.push(format!("{at}: {} ext capabilities, lspci {}: {ours:?} vs {lspci_ext:?}", ours.len(), lspci_ext.len()));
    }
    for (o, (off, version, name)) in ours.iter().zip(&lspci_ext) {
        n[2] += 1;
        match o {
            Ok(cap) if cap.offset == *off && cap.version == *version => match ext_cap_ids(name) {
                Some(ids) if ids.contains(&cap.id.0) => {}
                Some(ids) => bad.push(format!("{at}: ext [{off:x}] {:?}, lspci says {ids:x?} ({name})", cap.id)),
                None => bad.push(format!("{at}: ext [{off:x}] {:?}: lspci name {name:?} not mapped", cap.id)),
            },
            other => bad.push(format!("{at}: ext {other:?}, lspci [{off:x} v{version}] {name}")),
        }
    }
}

fn compare_link(at: &str, cfg: &Config, l: &LspciDevice, bad: &mut Vec<String>, n: &mut [usize; 9]) {
    let cap_line = l.lines.iter().find(|s| s.starts_with("LnkCap:"));
    let sta_line = l.lines.iter().find(|s| s.starts_with("LnkSta:"));
    let exp = cfg.express();
    match (cap_line, sta_line, exp.and_then(|e| e.link_capable.zip(e.link_status))) {
        (Some(c), Some(s), Some((cap, sta))) => {
            n[3] += 1;
            let ours_cap = (cap.speed.gts().unwrap_or("unknown").to_string(), cap.width);
            let ours_sta = (sta.speed.gts().unwrap_or("unknown").to_string(), sta.width);
            if speed_width(c) != Some(ours_cap.clone()) {
                bad.push(format!("{at}: LnkCap ours {ours_cap:?}, lspci {c:?}"));
            }
            if speed_width(s) != Some(ours_sta.clone()) {
                bad.push(format!("{at}: LnkSta ours {ours_sta:?}, lspci {s:?}"));
            }
            let port = exp.unwrap().port_number.unwrap();
            if !c.contains(&format!("Port #{port},")) {
                bad.push(format!("{at}: port number ours {port}, lspci {c:?}"));
            }
        }
        (None, None, None) => {}
        (c, s, ours) => bad.push(format!("{at}: link ours {ours:?}, lspci {c:?} {s:?}")),
    }
}

fn compare_acs(at: &str, cfg: &Config, l: &LspciDevice, bad: &mut Vec<String>, n: &mut [usize; 9]) {
    let cap_line = l.lines.iter().find(|s| s.starts_with("ACSCap:"));
    let ctl_line = l.lines.iter().find(|s| s.starts_with("ACSCtl:"));
    let ours = if cfg.find_cap(CapId::EXP).is_some() { cfg.acs() } else { None };
    match (cap_line, ctl_line, ours) {
        (Some(c), Some(t), Some(acs)) => {
            n[4] += 1;
            let lspci_cap = acs_flags(c);
            let lspci_ctl = acs_flags(t);
            if lspci_cap != (acs.capability - AcsBits::ENHANCED).bits() {
                bad.push(format!("{at}: ACSCap ours {:?}, lspci {c:?}", acs.capability));
            }
            if lspci_ctl != acs.control.bits() {
                bad.push(format!("{at}: ACSCtl ours {:?}, lspci {t:?}", acs.control));
            }
        }
        (None, None, None) => {}
        (c, t, ours) => bad.push(format!("{at}: ACS ours {ours:?}, lspci {c:?} {t:?}")),
    }
}

fn compare_bars(at: &str, cfg: &Config, l: &LspciDevice, bad: &mut Vec<String>, n: &mut [usize; 9]) {
    for line in &l.lines {
        // `Region 0: Memory at f7e00000 (64-bit, non-prefetchable)`, `Region 4: I/O ports at e000`
        let Some(rest) = line.strip_prefix("Region ") else { continue };
        let (index, rest) = rest.split_once(": ").unwrap();
        let index: u8 = index.parse().unwrap();
        let Some(addr) = rest.split(" at ").nth(1).and_then(|a| a.split(' ').next()) else { continue };
        let Ok(addr) = u64::from_str_radix(addr, 16) else { continue }; // `<unassigned>`, `<ignored>`
        let Some(bar) = cfg.bars().find(|b| b.index() == index) else {
            bad.push(format!("{at}: lspci {line:?}, we have no BAR {index}"));
            continue;
        };
        n[5] += 1;
        let ok = match bar {
            Bar::Io { address, .. } => rest.starts_with("I/O ports") && u64::from(address) == addr,
            Bar::Mem32 { address, prefetchable, .. } => {
                rest.starts_with("Memory")
                    && u64::from(address) == addr
                    && rest.contains("32-bit")
                    && rest.contains(if prefetchable { ", prefetchable" } else { "non-prefetchable" })
            }
            Bar::Mem64 { address, prefetchable, .. } => {
                rest.starts_with("Memory")
                    && address == addr
                    && rest.contains("64-bit")
                    && rest.contains(if prefetchable { ", prefetchable" } else { "non-prefetchable" })
            }
            _ => false,
        };
        if !ok {
            bad.push(format!("{at}: BAR ours {bar:?}, lspci {line:?}"));
        }
    }
}

/// The raw binaries are the same bytes as their lspci text forms.
#[test]
fn binary_dumps_match_their_text_forms() {
    let root = fixtures();
    let pairs = [
        ("h200-vm/10de_2335_h200_00-06.0.config", "h200-vm/10de_2335_h200_00-06.0.lspci-x.txt"),
        ("pcics/8086_2030.config", "pcics/8086_2030.lspci-x.txt"),
    ];
    for (bin, txt) in pairs {
        let bytes = std::fs::read(root.join(bin)).unwrap();
        let text = parse_lspci_text(&std::fs::read_to_string(root.join(txt)).unwrap()).unwrap();
        assert_eq!(text.len(), 1);
        assert_eq!(text[0].bytes, bytes, "{bin}");
    }
}

/// lspci's size text (ls-ecaps.c): MB below 1 GB, then GB, then TB.
fn lspci_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 40 => format!("{}TB", b >> 40),
        b if b >= 1 << 30 => format!("{}GB", b >> 30),
        b => format!("{}MB", b >> 20),
    }
}

fn compare_rebar(at: &str, cfg: &Config, l: &LspciDevice, bad: &mut Vec<String>) {
    // `BAR 0: current size: 256MB, supported: 256MB 512MB 1GB 2GB 4GB`
    let theirs: Vec<&String> = l.lines.iter().filter(|s| s.starts_with("BAR ") && s.contains("current size")).collect();
    let ours: Vec<String> = cfg
        .resizable_bars()
        .map(|r| {
            let sup: Vec<String> = r.supported().map(lspci_size).collect();
            format!("BAR {}: current size: {}, supported: {}", r.bar_index, lspci_size(r.current), sup.join(" "))
        })
        .collect();
    let theirs: Vec<String> = theirs.iter().map(|s| s.trim().to_string()).collect();
    if ours != theirs {
        bad.push(format!("{at}: Resizable BAR ours {ours:?}, lspci {theirs:?}"));
    }
}

/// lspci's AER flag names at their bit positions (PCIe 6.0 §7.8.4.2, §7.8.4.5).
const UE_BITS: &[(&str, u32)] = &[
    ("DLP", 4), ("SDES", 5), ("TLP", 12), ("FCP", 13), ("CmpltTO", 14), ("CmpltAbrt", 15),
    ("UnxCmplt", 16), ("RxOF", 17), ("MalfTLP", 18), ("ECRC", 19), ("UnsupReq", 20), ("ACSViol", 21),
    ("UncorrIntErr", 22), ("BlockedTLP", 23), ("AtomicOpBlocked", 24), ("TLPBlockedErr", 25),
];
const CE_BITS: &[(&str, u32)] = &[
    ("RxErr", 0), ("BadTLP", 6), ("BadDLLP", 7), ("Rollover", 8), ("Timeout", 12),
    ("AdvNonFatalErr", 13), ("CorrIntErr", 14), ("HeaderOF", 15),
];

/// Checks every `Name+`/`Name-` of an lspci line against bits of `ours`.
fn check_flags(at: &str, line: &str, table: &[(&str, u32)], ours: u32, bad: &mut Vec<String>) {
    for word in line.split_whitespace() {
        let (name, on) = match word.strip_suffix('+') {
            Some(n) => (n, true),
            None => match word.strip_suffix('-') {
                Some(n) => (n, false),
                None => continue,
            },
        };
        if let Some((_, bit)) = table.iter().find(|(n, _)| *n == name)
            && (ours >> bit) & 1 != u32::from(on) {
                bad.push(format!("{at}: {name} ours {}, lspci {line:?}", (ours >> bit) & 1));
            }
    }
}

fn compare_aer(at: &str, cfg: &Config, l: &LspciDevice, bad: &mut Vec<String>, n: &mut [usize; 9]) {
    let line = |p: &str| l.lines.iter().find(|s| s.starts_with(p));
    let ours = if cfg.find_cap(CapId::EXP).is_some() { cfg.aer() } else { None };
    let (Some(aer), Some(uesta)) = (ours, line("UESta:")) else {
        if ours.is_some() != line("UESta:").is_some() {
            bad.push(format!("{at}: AER ours {ours:?}, lspci {:?}", line("UESta:")));
        }
        return;
    };
    n[6] += 1;
    check_flags(at, uesta, UE_BITS, aer.uncor_status.bits(), bad);
    check_flags(at, line("UEMsk:").unwrap(), UE_BITS, aer.uncor_mask.bits(), bad);
    check_flags(at, line("UESvrt:").unwrap(), UE_BITS, aer.uncor_severity.bits(), bad);
    check_flags(at, line("CESta:").unwrap(), CE_BITS, aer.cor_status.bits(), bad);
    check_flags(at, line("CEMsk:").unwrap(), CE_BITS, aer.cor_mask.bits(), bad);
    if let Some(hl) = line("HeaderLog:") {
        let theirs: Vec<u32> = hl.split_whitespace().skip(1).map(|w| u32::from_str_radix(w, 16).unwrap()).collect();
        if theirs != aer.header_log {
            bad.push(format!("{at}: HeaderLog ours {:08x?}, lspci {hl:?}", aer.header_log));
        }
    }
    if let Some(c) = line("AERCap:") {
        let fep = c.split("First Error Pointer: ").nth(1).and_then(|s| s.get(..2)).map(|h| u8::from_str_radix(h, 16).unwrap());
        if fep != Some(aer.first_error_pointer()) {
            bad.push(format!("{at}: First Error Pointer ours {}, lspci {c:?}", aer.first_error_pointer()));
        }
    }
}

fn compare_msi(at: &str, cfg: &Config, l: &LspciDevice, bad: &mut Vec<String>, n: &mut [usize; 9]) {
    let cap_line = |p: &str| l.lines.iter().find(|s| s.starts_with("Capabilities: [") && s.contains(p));
    if let Some(line) = cap_line("] MSI: ") {
        n[7] += 1;
        match cfg.msi() {
            Some(m) => {
                let want = format!(
                    "MSI: Enable{} Count={}/{} Maskable{} 64bit{}",
                    pm(m.enabled), m.vectors_enabled, m.vectors_capable, pm(m.per_vector_mask), pm(m.addr_64bit)
                );
                if !line.ends_with(&want) {
                    bad.push(format!("{at}: ours {want:?}, lspci {line:?}"));
                }
            }
            None => bad.push(format!("{at}: no MSI decoded, lspci {line:?}")),
        }
    }
    if let Some(line) = cap_line("] MSI-X: ") {
        n[7] += 1;
        match cfg.msix() {
            Some(m) => {
                let want = format!("MSI-X: Enable{} Count={} Masked{}", pm(m.enabled), m.table_size, pm(m.function_masked));
                let table = format!("Vector table: BAR={} offset={:08x}", m.table_bir, m.table_offset);
                let pba = format!("PBA: BAR={} offset={:08x}", m.pba_bir, m.pba_offset);
                if !line.ends_with(&want) || !l.lines.contains(&table) || !l.lines.contains(&pba) {
                    bad.push(format!("{at}: ours {want:?} {table:?} {pba:?}, lspci {line:?}"));
                }
            }
            None => bad.push(format!("{at}: no MSI-X decoded, lspci {line:?}")),
        }
    }
}

fn pm(b: bool) -> char {
    if b { '+' } else { '-' }
}

/// PM, ATS, PRI, PASID, LTR and DSN: our decode printed the way lspci 3.9
/// prints it (ls-caps.c, ls-ecaps.c), line for line. Each `(prefix, ours)`
/// must match the lspci line with that prefix, or both be absent.
fn compare_small_caps(at: &str, cfg: &Config, l: &LspciDevice, bad: &mut Vec<String>, n: &mut [usize; 9]) {
    let mut want: Vec<(&str, Option<String>)> = Vec::new();
    let pm_ = cfg.power_management();
    want.push(("Flags: PMEClk", pm_.map(|p| {
        let s = |i: u8| pm(p.pme_support & (1 << i) != 0);
        format!(
            "Flags: PMEClk{} DSI{} D1{} D2{} AuxCurrent={}mA PME(D0{},D1{},D2{},D3hot{},D3cold{})",
            pm(p.pme_clock), pm(p.dsi), pm(p.d1), pm(p.d2), p.aux_current_ma, s(0), s(1), s(2), s(3), s(4)
        )
    })));
    want.push(("Status: D", pm_.map(|p| {
        format!(
            "Status: D{} NoSoftRst{} PME-Enable{} DSel={} DScale={} PME{}",
            p.power_state, pm(p.no_soft_reset), pm(p.pme_enable), p.data_select, p.data_scale, pm(p.pme_status)
        )
    })));
    // lspci decodes extended capabilities only behind a PCI Express capability.
    let ext = cfg.find_cap(CapId::EXP).is_some();
    let ats = cfg.ats().filter(|_| ext);
    want.push(("ATSCap:", ats.map(|a| format!("ATSCap: Invalidate Queue Depth: {:02x}", a.invalidate_queue_depth))));
    want.push(("ATSCtl:", ats.map(|a| format!("ATSCtl: Enable{}, Smallest Translation Unit: {:02x}", pm(a.enabled), a.stu))));
    let pri = cfg.pri().filter(|_| ext);
    want.push(("PRICtl:", pri.map(|p| format!("PRICtl: Enable{} Reset{}", pm(p.enabled), pm(p.reset)))));
    want.push(("PRISta:", pri.map(|p| format!("PRISta: RF{} UPRGI{} Stopped{}", pm(p.response_failure), pm(p.unexpected_response), pm(p.stopped)))));
    want.push(("Page Request Capacity:", pri.map(|p| format!("Page Request Capacity: {:08x}, Page Request Allocation: {:08x}", p.capacity, p.allocation))));
    let pasid = cfg.pasid().filter(|_| ext);
    want.push(("PASIDCap:", pasid.map(|p| format!("PASIDCap: Exec{} Priv{}, Max PASID Width: {:02x}", pm(p.exec_supported), pm(p.priv_supported), p.max_width))));
    want.push(("PASIDCtl:", pasid.map(|p| format!("PASIDCtl: Enable{} Exec{} Priv{}", pm(p.enabled), pm(p.exec_enabled), pm(p.priv_enabled)))));
    let ltr = cfg.ltr().filter(|_| ext);
    want.push(("Max snoop latency:", ltr.map(|t| format!("Max snoop latency: {}ns", t.max_snoop_ns().unwrap()))));
    want.push(("Max no snoop latency:", ltr.map(|t| format!("Max no snoop latency: {}ns", t.max_no_snoop_ns().unwrap()))));
    // L1 PM Substates through the view generated from hw-specs/pcie.toml.
    let l1ss = cfg.find_ext_cap(ExtCapId::L1SS).filter(|_| ext).and_then(|c| {
        marrow_pcie::generated::pcie::pci_l1ss_cap::read_from_prefix(&cfg.bytes()[usize::from(c.offset)..]).ok().map(|(v, _)| v)
    });
    want.push(("L1SubCap:", l1ss.map(|v| {
        format!(
            "L1SubCap: PCI-PM_L1.2{} PCI-PM_L1.1{} ASPM_L1.2{} ASPM_L1.1{} L1_PM_Substates{}",
            pm(v.l1ss_cap_pcipm_l1_2()), pm(v.l1ss_cap_pcipm_l1_1()), pm(v.l1ss_cap_aspm_l1_2()), pm(v.l1ss_cap_aspm_l1_1()), pm(v.l1ss_cap_l1_pm_ss())
        )
    })));
    let dsn = cfg.serial_number().filter(|_| ext);
    let dsn_line = l.lines.iter().find(|s| s.contains("] Device Serial Number ")).map(|s| s.split("] ").nth(1).unwrap().to_string());
    match (dsn, dsn_line) {
        (Some(v), Some(theirs)) => {
            n[8] += 1;
            let b = v.to_be_bytes();
            let ours = format!("Device Serial Number {}", b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join("-"));
            if ours != theirs {
                bad.push(format!("{at}: ours {ours:?}, lspci {theirs:?}"));
            }
        }
        (None, None) => {}
        (o, t) => bad.push(format!("{at}: DSN ours {o:x?}, lspci {t:?}")),
    }
    for (prefix, ours) in want {
        let theirs = l.lines.iter().find(|s| s.starts_with(prefix)).map(|s| s.replace('\t', " "));
        match (ours, theirs) {
            (Some(o), Some(t)) => {
                n[8] += 1;
                if o != t {
                    bad.push(format!("{at}: ours {o:?}, lspci {t:?}"));
                }
            }
            (None, None) => {}
            (o, t) => bad.push(format!("{at}: {prefix} ours {o:?}, lspci {t:?}")),
        }
    }
}
