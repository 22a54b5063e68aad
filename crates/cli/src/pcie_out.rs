//! What every `decode --pcie` printer writes with: the function's text,
//! JSON and errors as they fill (`Out`) and the finished report, lspci's
//! `Flag+ Flag-` and value words, a capability's registers or the error
//! instead of them, and the header words more than one printer uses (BARs,
//! sizes, DEVSEL timing, the expansion ROM). The printers (`pcie_header`,
//! `pcie_bridge`, `pcie_caps` and the capability files, `pcie_tlp`) use
//! this module and not each other's helpers, so the dispatch from
//! `pcie_decode` down to them runs one way.

use marrow_pcie::header::PCI_BASE_ADDRESS_0;
use marrow_pcie::registers::Block;
use marrow_pcie::{Bar, CapError};
use serde_json::{Value, json};
use std::fmt::Write;

/// Text, JSON and errors of one function, filled capability by capability.
#[derive(Debug)]
pub struct Out {
    pub text: String,
    pub errors: Vec<(String, Option<u64>)>,
    /// Whether the dump names this function device 0 function 0 (or names
    /// no address): lspci prints an endpoint's LnkCap2 and LnkCtl2 only there.
    pub function0: bool,
}

impl Out {
    pub fn line(&mut self, indent: usize, s: impl AsRef<str>) {
        let _ = writeln!(self.text, "{}{}", "\t".repeat(indent), s.as_ref());
    }
    pub fn error(&mut self, indent: usize, e: impl std::fmt::Display, offset: Option<u64>) {
        self.line(indent, format!("error: {e}"));
        self.errors.push((e.to_string(), offset));
    }
}

/// The words for a field's value `v` from the spec's table of them; `??`
/// for a value the table lacks (none, for a table as long as the field
/// has values).
pub fn word(table: &[&'static str], v: u64) -> &'static str {
    usize::try_from(v).ok().and_then(|i| table.get(i)).copied().unwrap_or("??")
}

pub fn pm(b: bool) -> char {
    if b { '+' } else { '-' }
}

/// `Label+ Label-…` for one-bit fields of `b`, named as lspci names them.
pub fn flags(b: &Block, list: &[(&str, &str)]) -> String {
    list.iter().map(|(label, bit)| format!("{label}{}", pm(b.flag(bit)))).collect::<Vec<_>>().join(" ")
}

fn cap_error_offset(e: &CapError) -> u64 {
    e.offset().into()
}

/// A capability's registers, or the error instead of them.
fn block_or_error(o: &mut Out, r: Option<Result<Block, CapError>>) -> Option<Block> {
    match r? {
        Ok(b) => Some(b),
        Err(e) => {
            let at = cap_error_offset(&e);
            o.error(2, e, Some(at));
            None
        }
    }
}

/// Registers of `b` in spec names, for capabilities lspci does not decode.
fn spec_lines(o: &mut Out, b: &Block) {
    for r in b.registers.iter().filter(|r| r.name() != "ext_cap_header") {
        let fields: Vec<String> = r.fields().map(|(f, v)| format!("{}={v:#x}", f.name)).collect();
        o.line(2, format!("{} [{:03x}] {:#x}: {}", r.name(), r.offset, r.raw, fields.join(" ")));
    }
}

/// Lines of registers lspci has no decode for, in spec names (used by
/// the Lane Margining, Device 3 and IDE renderers).
pub fn spec_block(o: &mut Out, r: Option<Result<Block, CapError>>) -> Option<Block> {
    let b = block_or_error(o, r)?;
    spec_lines(o, &b);
    Some(b)
}

pub fn block_checked(o: &mut Out, r: Option<Result<Block, CapError>>) -> Option<Block> {
    block_or_error(o, r)
}

/// The decoded text, its JSON, and the errors found (each with the
/// config-space offset it concerns, when there is one). Clean when empty.
#[derive(Debug)]
pub struct PcieReport {
    pub text: String,
    pub json: Value,
    pub errors: Vec<(String, Option<u64>)>,
}

impl PcieReport {
    pub fn clean(&self) -> bool {
        self.errors.is_empty()
    }
}

/// A BAR as lspci words it.
pub fn bar_text(bar: &Bar) -> String {
    let pf = |p: bool| if p { "prefetchable" } else { "non-prefetchable" };
    match *bar {
        Bar::Io { address: 0, .. } => "I/O ports at <unassigned>".into(),
        Bar::Mem32 { address: 0, prefetchable, .. } => format!("Memory at <unassigned> (32-bit, {})", pf(prefetchable)),
        Bar::Mem64 { address: 0, prefetchable, .. } => format!("Memory at <unassigned> (64-bit, {})", pf(prefetchable)),
        Bar::Io { address, .. } => format!("I/O ports at {address:x}"),
        Bar::Mem32 { address, prefetchable, .. } => format!("Memory at {address:08x} (32-bit, {})", pf(prefetchable)),
        Bar::Mem64 { address, prefetchable, .. } => format!("Memory at {address:x} (64-bit, {})", pf(prefetchable)),
        Bar::Mem64InLastSlot { .. } => "error: 64-bit BAR in the last slot (no room for its upper half)".into(),
        Bar::ReservedType { raw, .. } => format!("error: reserved memory type 0b11 (raw {raw:#010x})"),
    }
}

pub fn bar_json(bar: &Bar) -> Value {
    let (kind, pf) = match *bar {
        Bar::Io { .. } => ("io", false),
        Bar::Mem32 { prefetchable, .. } => ("mem32", prefetchable),
        Bar::Mem64 { prefetchable, .. } => ("mem64", prefetchable),
        Bar::Mem64InLastSlot { .. } => ("mem64_in_last_slot", false),
        Bar::ReservedType { .. } => ("reserved_type", false),
    };
    json!({ "index": bar.index(), "offset": PCI_BASE_ADDRESS_0 + 4 * usize::from(bar.index()), "kind": kind,
            "address": bar.address(), "prefetchable": pf })
}

/// Bytes as MiB, GiB or TiB, whichever is whole (lspci's `256MB` style).
pub fn size_text(b: u64) -> String {
    match b {
        b if b >= 1 << 40 && b % (1 << 40) == 0 => format!("{}TB", b / (1 << 40)),
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GB", b / (1 << 30)),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MB", b / (1 << 20)),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KB", b / (1 << 10)),
        b => format!("{b}B"),
    }
}

pub fn devsel(v: u64) -> &'static str {
    word(&["fast", "medium", "slow"], v)
}

/// lspci.c `show_rom` from a dump: the register as libpci reads it (all
/// ones is "none"), `<ignored>` when only the raw register has address
/// bits, `[disabled]` by its enable bit, else `[disabled by cmd]` by
/// Command's memory enable (PCI 3.0 §6.2.5.2).
pub fn rom(o: &mut Out, h: &Block, name: &str, j: &mut Value) {
    let Some(r) = h.register(name) else { return };
    let flg = r.raw;
    let rom = if flg == u64::from(u32::MAX) { 0 } else { flg };
    if rom == 0 && flg == 0 {
        return;
    }
    let addr = |v: u64| r.layout.bits.iter().find(|b| b.name == "rom_address_mask").map_or(0, |b| b.extract(v) << b.lo);
    let at = if addr(rom) != 0 {
        format!("{:08x}", addr(rom))
    } else if addr(flg) != 0 {
        "<ignored>".into()
    } else {
        "<unassigned>".into()
    };
    let enabled = r.get("rom_address_enable") == Some(1);
    let state = match (enabled, h.flag("command_memory")) {
        (false, _) => " [disabled]",
        (true, false) => " [disabled by cmd]",
        (true, true) => "",
    };
    o.line(1, format!("Expansion ROM at {at}{state}"));
    j["expansion_rom"] = json!({ "offset": r.offset, "address": addr(rom), "enabled": enabled });
}
