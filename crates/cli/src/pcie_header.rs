//! The header block of `decode --pcie`, everything before `Capabilities:`,
//! line for line as `lspci -F DUMP -vvv -n` (pciutils 3.9) prints it.
//! lspci reads a dump through libpci's generic fill, which knows no sizes,
//! no OS resources and no IRQ routing, so what it prints is a function of
//! the header registers alone: lspci.c `show_verbose`, `show_bases`,
//! `show_rom`, `show_range` and `show_htype1`, with lib/generic.c pairing
//! 64-bit BARs. What marrow knows beyond that (the upper half of a 64-bit
//! BAR, Enhanced Allocation resources, impossible BARs) goes on `marrow:`
//! lines. Registers are read by their `hw-specs/pcie.toml` names.

use crate::pcie_out::{Out, devsel, flags, pm, rom};
use marrow_pcie::Config;
use marrow_pcie::generated::pcie::{pci_bar_io, pci_bar_mem, pci_type0_header as T0, pci_type1_header};
use marrow_pcie::header::{
    PCI_BASE_ADDRESS_0, PCI_HEADER_TYPE_BRIDGE, PCI_HEADER_TYPE_CARDBUS, PCI_HEADER_TYPE_NORMAL,
};
use marrow_pcie::registers::Block;
use serde_json::{Value, json};
use zerocopy::FromBytes;

/// PCI Code and ID Assignment §1.7: class 06 (bridge), subclass 04 (PCI-to-PCI).
const CLASS_BRIDGE: u8 = 0x06;
const CLASS_BRIDGE_PCI: u16 = 0x0604;
/// lspci prints an interrupt pin as the byte `'A' + pin - 1` (INTA is 1).
const PIN_BEFORE_A: u64 = b'A' as u64 - 1;
/// `bar_mem_type` values (PCI 3.0 §6.2.5.1).
const MEM_TYPE_32: u8 = 0;
const MEM_TYPE_1M: u8 = 1;
const MEM_TYPE_64: u8 = 2;

fn mem(raw: u32) -> pci_bar_mem {
    pci_bar_mem::read_from_bytes(&raw.to_le_bytes()).expect("4 bytes")
}
fn io(raw: u32) -> pci_bar_io {
    pci_bar_io::read_from_bytes(&raw.to_le_bytes()).expect("4 bytes")
}

fn reg(h: &Block, name: &str) -> u64 {
    h.raw(name).unwrap_or(0)
}

/// The header lines; `false` when lspci stops after them (an unknown
/// header type: it prints nothing else, capabilities included).
pub fn header(o: &mut Out, cfg: &Config, j: &mut Value) -> bool {
    let h = cfg.header_block();
    j["header"] = crate::pcie_json::block(&h);
    let htype = cfg.header_type();
    let class = cfg.class_subclass();
    subsystem(o, cfg, j);
    let invalid = match htype {
        PCI_HEADER_TYPE_NORMAL => class == CLASS_BRIDGE_PCI,
        PCI_HEADER_TYPE_BRIDGE | PCI_HEADER_TYPE_CARDBUS => cfg.base_class() != CLASS_BRIDGE,
        _ => {
            // lspci reads nothing of a header it does not know but the
            // Interrupt Line libpci filled in (its pin unread: `?`).
            o.line(1, format!("!!! Unknown header type {htype:02x}"));
            let line = reg(&h, "interrupt_line");
            if line != 0 {
                o.line(1, format!("Interrupt: pin ? routed to IRQ {line}"));
            }
            return false;
        }
    };
    if invalid {
        o.line(1, format!("!!! Invalid class {class:04x} for header type {htype:02x}"));
    }
    control_status(o, cfg, &h);
    latency_interrupt_bist(o, cfg, &h, j);
    regions(o, cfg, &h, j);
    match htype {
        PCI_HEADER_TYPE_NORMAL => rom(o, &h, "rom_address", j),
        PCI_HEADER_TYPE_BRIDGE => crate::pcie_bridge::bridge(o, cfg, &h, j),
        _ => crate::pcie_bridge::cardbus(o, cfg, &h, j),
    }
    true
}

/// lspci prints a Subsystem line when the subsystem vendor is neither 0
/// nor 0xffff (not implemented, or not read); `-n` gives the IDs as here.
fn subsystem(o: &mut Out, cfg: &Config, j: &mut Value) {
    let ids = match cfg.header_type() {
        PCI_HEADER_TYPE_BRIDGE => cfg.bridge_subsystem().and_then(Result::ok).map(|s| (s.vendor, s.device)),
        _ => cfg.subsystem(),
    };
    if let Some((v, d)) = ids {
        if v != 0 && v != u16::MAX {
            o.line(1, format!("Subsystem: {v:04x}:{d:04x}"));
        }
        j["subsystem"] = json!({ "vendor_id": v, "device_id": d });
    }
}

fn control_status(o: &mut Out, cfg: &Config, h: &Block) {
    o.line(
        1,
        format!(
            "Control: {}",
            flags(
                h,
                &[
                    ("I/O", "command_io"),
                    ("Mem", "command_memory"),
                    ("BusMaster", "command_master"),
                    ("SpecCycle", "command_special"),
                    ("MemWINV", "command_invalidate"),
                    ("VGASnoop", "command_vga_palette"),
                    ("ParErr", "command_parity"),
                    ("Stepping", "command_wait"),
                    ("SERR", "command_serr"),
                    ("FastB2B", "command_fast_back"),
                    ("DisINTx", "command_intx_disable"),
                ]
            )
        ),
    );
    // The CardBus layout names no Status bits: read them as type 0's.
    let st = cfg.status();
    let sb = |shift: u32| pm(st >> shift & 1 != 0);
    o.line(
        1,
        format!(
            "Status: Cap{} 66MHz{} UDF{} FastB2B{} ParErr{} DEVSEL={} >TAbort{} <TAbort{} <MAbort{} >SERR{} <PERR{} INTx{}",
            sb(T0::STATUS_CAP_LIST_SHIFT),
            sb(T0::STATUS_66MHZ_SHIFT),
            sb(T0::STATUS_UDF_SHIFT),
            sb(T0::STATUS_FAST_BACK_SHIFT),
            sb(T0::STATUS_PARITY_SHIFT),
            devsel(u64::from(st >> T0::STATUS_DEVSEL_SHIFT & T0::STATUS_DEVSEL_MASK)),
            sb(T0::STATUS_SIG_TARGET_ABORT_SHIFT),
            sb(T0::STATUS_REC_TARGET_ABORT_SHIFT),
            sb(T0::STATUS_REC_MASTER_ABORT_SHIFT),
            sb(T0::STATUS_SIG_SYSTEM_ERROR_SHIFT),
            sb(T0::STATUS_DETECTED_PARITY_SHIFT),
            sb(T0::STATUS_INTX_SHIFT)
        ),
    );
}

/// `Latency:` only for a bus master; MIN_GNT and MAX_LAT (type 0 only) in
/// units of 250 ns (PCI 3.0 §6.2.4). `Interrupt:` when the pin or the
/// line is non-zero: from a dump, libpci's IRQ is the Interrupt Line.
fn latency_interrupt_bist(o: &mut Out, cfg: &Config, h: &Block, j: &mut Value) {
    let type0 = cfg.header_type() == PCI_HEADER_TYPE_NORMAL;
    if h.flag("command_master") {
        let mut s = format!("Latency: {}", reg(h, "latency_timer"));
        let (min_gnt, max_lat) = if type0 { (reg(h, "min_gnt"), reg(h, "max_lat")) } else { (0, 0) };
        let parts: Vec<String> = [(min_gnt, "min"), (max_lat, "max")]
            .iter()
            .filter(|(v, _)| *v != 0)
            .map(|(v, w)| format!("{}ns {w}", v * 250))
            .collect();
        if !parts.is_empty() {
            s += &format!(" ({})", parts.join(", "));
        }
        let cls = reg(h, "cache_line_size");
        if cls != 0 {
            s += &format!(", Cache Line Size: {} bytes", cls * 4);
        }
        o.line(1, s);
    }
    let (pin, line) = (reg(h, "interrupt_pin"), reg(h, "interrupt_line"));
    if pin != 0 || line != 0 {
        // lspci prints the byte 'A' + pin - 1; past '~' that is not text.
        let c = match pin {
            0 => '?',
            p => char::from((PIN_BEFORE_A + p) as u8),
        };
        if c.is_ascii_graphic() {
            o.line(1, format!("Interrupt: pin {c} routed to IRQ {line}"));
        } else {
            o.line(1, format!("Interrupt: pin ? routed to IRQ {line}"));
            o.line(
                1,
                format!(
                    "marrow: interrupt pin {pin:#04x} is not INTA-INTD (lspci prints the byte {:#04x})",
                    PIN_BEFORE_A + pin
                ),
            );
        }
    }
    let offset = h.register("interrupt_line").map(|r| r.offset);
    j["interrupt"] = json!({ "offset": offset, "line": line, "pin": pin });
    if h.flag("bist_capable") {
        if h.flag("bist_start") {
            o.line(1, "BIST is running");
        } else {
            o.line(1, format!("BIST result: {:02x}", h.get("bist_code").unwrap_or(0)));
        }
    }
}

/// The BAR registers as read, `None` past the dump.
fn bar_raws(cfg: &Config) -> Vec<u32> {
    (0..cfg.bar_slots()).map(|i| cfg.read_u32(PCI_BASE_ADDRESS_0 + 4 * i).unwrap_or(0)).collect()
}

/// libpci's generic fill (lib/generic.c) from the BAR registers: the
/// address of each slot, 0 for a slot it skips (0 or all ones) and for
/// the upper half of a 64-bit BAR, whose address goes to the lower slot.
/// Returns the addresses and, per slot, the slot it is the upper half of.
fn libpci_bases(raws: &[u32]) -> (Vec<u64>, Vec<Option<usize>>) {
    let mut pos = vec![0u64; raws.len()];
    let mut upper = vec![None; raws.len()];
    let mut i = 0;
    while i < raws.len() {
        let x = raws[i];
        if x != 0 && x != u32::MAX {
            let m = mem(x);
            if m.bar_space_io() || m.bar_mem_type() != MEM_TYPE_64 {
                pos[i] = x.into();
            } else if i + 1 < raws.len() {
                pos[i] = u64::from(x) | u64::from(raws[i + 1]) << u32::BITS;
                upper[i + 1] = Some(i);
                i += 1;
            }
        }
        i += 1;
    }
    (pos, upper)
}

/// `Region N:` lines as lspci.c `show_bases` prints them from a dump: a
/// slot that reads 0 or all ones (and has no address from a 64-bit pair)
/// is left out; the upper half of a 64-bit BAR is printed as a BAR of its
/// own, its dword read as flags; `[disabled]` follows the Command register.
fn regions(o: &mut Out, cfg: &Config, h: &Block, j: &mut Value) {
    let raws = bar_raws(cfg);
    let (pos, upper) = libpci_bases(&raws);
    let (io_on, mem_on) = (h.flag("command_io"), h.flag("command_memory"));
    let ea = cfg.enhanced_allocation().and_then(Result::ok);
    for (i, &raw) in raws.iter().enumerate() {
        let flg = if raw == u32::MAX { 0 } else { raw };
        if let Some(e) = ea.as_ref().and_then(|e| e.entries.iter().find(|x| x.bar() == Some(i as u8))) {
            // §6.9 (EA ECN): the BAR reads 0; the resource is the EA entry's,
            // which libpci learns only from the OS.
            o.line(
                1,
                format!(
                    "marrow: Region {i}: Enhanced Allocation resource at {:x}, size {}",
                    e.base,
                    crate::pcie_out::size_text(e.max_offset + 1)
                ),
            );
        }
        if pos[i] == 0 && flg == 0 {
            continue;
        }
        let text = if io(flg).bar_space_io() {
            let a = u64::from(io(pos[i] as u32).bar_io_address()) << pci_bar_io::BAR_IO_ADDRESS_SHIFT;
            let at = if a != 0 || io_on { format!("{a:04x}") } else { "<unassigned>".into() };
            format!("I/O ports at {at}{}", if io_on { "" } else { " [disabled]" })
        } else {
            let m = mem(flg);
            // The lower dword's address bits and, for a 64-bit pair, the upper dword.
            let a = (pos[i] & !u64::from(u32::MAX))
                | u64::from(mem(pos[i] as u32).bar_mem_address()) << pci_bar_mem::BAR_MEM_ADDRESS_SHIFT;
            let at = if a != 0 { format!("{a:08x}") } else { "<unassigned>".into() };
            let width = match m.bar_mem_type() {
                MEM_TYPE_32 => "32-bit",
                MEM_TYPE_1M => "low-1M",
                MEM_TYPE_64 => "64-bit",
                _ => "type 3",
            };
            let pf = if m.bar_prefetch() { "" } else { "non-" };
            format!("Memory at {at} ({width}, {pf}prefetchable){}", if mem_on { "" } else { " [disabled]" })
        };
        o.line(1, format!("Region {i}: {text}"));
        if let Some(low) = upper[i] {
            o.line(1, format!("marrow: Region {i} is the upper half of 64-bit Region {low}, not a BAR"));
        }
    }
    let mut bars = Vec::new();
    for bar in cfg.bars() {
        let at = PCI_BASE_ADDRESS_0 as u64 + 4 * u64::from(bar.index());
        let problem = match bar {
            marrow_pcie::Bar::Mem64InLastSlot { .. } => {
                Some("64-bit BAR in the last slot (no room for its upper half)".to_string())
            }
            marrow_pcie::Bar::ReservedType { raw, .. } => Some(format!("reserved memory type 0b11 (raw {raw:#010x})")),
            _ => None,
        };
        if let Some(p) = problem {
            o.line(1, format!("marrow: error: Region {}: {p}", bar.index()));
            o.errors.push((p, Some(at)));
        }
        bars.push(crate::pcie_out::bar_json(&bar));
    }
    j["bars"] = Value::Array(bars);
}

/// The type 1 header as the generated struct, for its bit accessors.
pub fn type1(cfg: &Config) -> Option<pci_type1_header> {
    cfg.view(0, 0).ok()
}
