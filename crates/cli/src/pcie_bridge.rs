//! The bridge part of `decode --pcie`'s header block, as `lspci -F DUMP
//! -vvv` (pciutils 3.9, lspci.c `show_htype1`, `show_range` and
//! `show_htype2`) prints it: a type 1 header's buses, its three windows
//! (PCI-to-PCI Bridge 1.2 §3.2.5.6-10), Secondary Status (§3.2.5.7),
//! ROM and Bridge Control (§3.2.5.18); a CardBus bridge's buses, windows
//! and control (Linux `PCI_CB_*`). Register and bit names are
//! `hw-specs/pcie.toml`'s.

use crate::pcie_out::{Out, devsel, flags, pm};
use marrow_pcie::Config;
use marrow_pcie::generated::pcie::{pci_cardbus_header as CB, pci_type1_header as T1};
use marrow_pcie::registers::Block;
use marrow_pcie::windows::Window;
use serde_json::{Value, json};

fn reg(h: &Block, name: &str) -> u64 {
    h.raw(name).unwrap_or(0)
}

/// lspci.c `show_size`: the largest of K, M, G, T that divides, the count
/// printed as a C `unsigned`; nothing for 0 (a window of all 2^64 bytes).
pub fn lspci_size(mut x: u64) -> String {
    if x == 0 {
        return String::new();
    }
    let suffix = ["", "K", "M", "G", "T"];
    let mut i = 0;
    while i < 4 && x.is_multiple_of(1024) {
        x /= 1024;
        i += 1;
    }
    format!(" [size={}{}]", x as u32, suffix[i])
}

/// lspci.c `show_range` at -vvv: the range always, its size when open,
/// `[disabled]` when the base is above the limit, then the width.
fn range(o: &mut Out, label: &str, w: &Window, bits: usize) {
    let digits = bits.div_ceil(4);
    let state = if w.is_open() { lspci_size((w.limit - w.base).wrapping_add(1)) } else { " [disabled]".into() };
    o.line(1, format!("{label}: {:0digits$x}-{:0digits$x}{state} [{bits}-bit]", w.base, w.limit));
}

/// A type 1 header after its BARs.
pub fn bridge(o: &mut Out, cfg: &Config, h: &Block, j: &mut Value) {
    let (p, s, sub, lat) =
        (reg(h, "primary_bus"), reg(h, "secondary_bus"), reg(h, "subordinate_bus"), reg(h, "sec_latency_timer"));
    o.line(1, format!("Bus: primary={p:02x}, secondary={s:02x}, subordinate={sub:02x}, sec-latency={lat}"));
    j["buses"] =
        json!({ "offset": T1::PRIMARY_BUS_OFF, "primary": p, "secondary": s, "subordinate": sub, "sec_latency": lat });
    windows(o, cfg, h, j);
    let ss = |b: &str| pm(h.flag(b));
    o.line(
        1,
        format!(
            "Secondary status: 66MHz{} FastB2B{} ParErr{} DEVSEL={} >TAbort{} <TAbort{} <MAbort{} <SERR{} <PERR{}",
            ss("sec_status_66mhz"),
            ss("sec_status_fast_back"),
            ss("sec_status_parity"),
            devsel(h.get("sec_status_devsel").unwrap_or(0)),
            ss("sec_status_sig_target_abort"),
            ss("sec_status_rec_target_abort"),
            ss("sec_status_rec_master_abort"),
            ss("sec_status_rec_system_error"),
            ss("sec_status_detected_parity"),
        ),
    );
    crate::pcie_out::rom(o, h, "rom_address1", j);
    let bc = [
        ("Parity", "bridge_ctl_parity"),
        ("SERR", "bridge_ctl_serr"),
        ("NoISA", "bridge_ctl_isa"),
        ("VGA", "bridge_ctl_vga"),
        ("VGA16", "bridge_ctl_vga16"),
        ("MAbort", "bridge_ctl_master_abort"),
        (">Reset", "bridge_ctl_bus_reset"),
        ("FastB2B", "bridge_ctl_fast_back"),
    ];
    o.line(1, format!("BridgeCtl: {}", flags(h, &bc)));
    let timers = [
        ("PriDiscTmr", "bridge_ctl_pri_discard"),
        ("SecDiscTmr", "bridge_ctl_sec_discard"),
        ("DiscTmrStat", "bridge_ctl_discard_status"),
        ("DiscTmrSERREn", "bridge_ctl_discard_serr"),
    ];
    o.line(2, flags(h, &timers));
}

/// The three windows, or lspci's `!!! Unknown ... range types` when base
/// and limit disagree on the type or name one the spec does not define
/// (I/O: 0 16-bit, 1 32-bit; memory: 0; prefetchable: 0 32-bit, 1 64-bit).
fn windows(o: &mut Out, cfg: &Config, h: &Block, j: &mut Value) {
    let Some(w) = cfg.bridge_windows() else { return };
    let ty = |base: &str, limit: &str, ok: &[u64]| {
        let (b, l) = (h.get(base).unwrap_or(0), h.get(limit).unwrap_or(0));
        (b == l && ok.contains(&b)).then_some(b)
    };
    match ty("io_range_type", "io_limit_type", &[0, 1]) {
        Some(t) => range(o, "I/O behind bridge", &w.io, if t == 1 { 32 } else { 16 }),
        None => o.line(1, format!("!!! Unknown I/O range types {:x}/{:x}", reg(h, "io_base"), reg(h, "io_limit"))),
    }
    match ty("memory_range_type", "memory_limit_type", &[0]) {
        Some(_) => range(o, "Memory behind bridge", &w.memory, 32),
        None => o.line(
            1,
            format!("!!! Unknown memory range types {:x}/{:x}", reg(h, "memory_base"), reg(h, "memory_limit")),
        ),
    }
    match ty("pref_range_type", "pref_limit_type", &[0, 1]) {
        Some(t) => range(o, "Prefetchable memory behind bridge", &w.prefetchable, if t == 1 { 64 } else { 32 }),
        None => o.line(
            1,
            format!(
                "!!! Unknown prefetchable memory range types {:x}/{:x}",
                reg(h, "pref_memory_base"),
                reg(h, "pref_memory_limit")
            ),
        ),
    }
    let wj = |w: &Window, offset: usize| json!({ "offset": offset, "base": w.base, "limit": w.limit, "open": w.is_open(), "wide": w.wide });
    j["windows"] = json!({
        "io": wj(&w.io, T1::IO_BASE_OFF),
        "memory": wj(&w.memory, T1::MEMORY_BASE_OFF),
        "prefetchable": wj(&w.prefetchable, T1::PREF_MEMORY_BASE_OFF),
    });
}

/// Linux `PCI_IO_RANGE_TYPE_32` and `PCI_CB_IO_RANGE_MASK`: a CardBus I/O
/// window is 32-bit when bit 0 of its base is set, dword-granular.
const CB_IO_RANGE_TYPE_32: u64 = 0x1;
const CB_IO_RANGE_MASK: u64 = !0x3;
/// A CardBus memory window's limit register names its last 4 KiB page.
const CB_MEMORY_PAGE_END: u32 = 0xfff;
/// The 128 bytes lspci needs to go past a CardBus bridge's windows.
const CB_HEADER_READ: usize = 128;

/// A CardBus header after its BAR (lspci.c `show_htype2` at -vvv).
pub fn cardbus(o: &mut Out, cfg: &Config, h: &Block, j: &mut Value) {
    let (p, s, sub, lat) =
        (reg(h, "cb_primary_bus"), reg(h, "cb_card_bus"), reg(h, "cb_subordinate_bus"), reg(h, "cb_latency_timer"));
    o.line(1, format!("Bus: primary={p:02x}, secondary={s:02x}, subordinate={sub:02x}, sec-latency={lat}"));
    j["buses"] = json!({ "offset": CB::CB_PRIMARY_BUS_OFF, "primary": p, "secondary": s, "subordinate": sub, "sec_latency": lat });
    let (mem_on, io_on) = (h.flag("command_memory"), h.flag("command_io"));
    for i in 0..2 {
        let base = reg(h, &format!("cb_memory_base_{i}")) as u32;
        let limit = (reg(h, &format!("cb_memory_limit_{i}")) as u32).wrapping_add(CB_MEMORY_PAGE_END);
        let pf = h.flag(&format!("cb_bridge_ctl_prefetch_mem{i}"));
        o.line(
            1,
            format!(
                "Memory window {i}: {base:08x}-{limit:08x}{}{}",
                if mem_on { "" } else { " [disabled]" },
                if pf { " (prefetchable)" } else { "" }
            ),
        );
    }
    for i in 0..2 {
        let (mut base, mut limit) = (reg(h, &format!("cb_io_base_{i}")), reg(h, &format!("cb_io_limit_{i}")));
        if base & CB_IO_RANGE_TYPE_32 == 0 {
            // A 16-bit window: the upper halves do not count.
            base &= u64::from(u16::MAX);
            limit &= u64::from(u16::MAX);
        }
        let (base, limit) = (base & CB_IO_RANGE_MASK, ((limit & CB_IO_RANGE_MASK) + 3) as u32);
        o.line(1, format!("I/O window {i}: {base:08x}-{limit:08x}{}", if io_on { "" } else { " [disabled]" }));
    }
    if h.flag("cb_sec_status_serr") {
        o.line(1, "Secondary status: SERR");
    }
    let bc = [
        ("Parity", "cb_bridge_ctl_parity"),
        ("SERR", "cb_bridge_ctl_serr"),
        ("ISA", "cb_bridge_ctl_isa"),
        ("VGA", "cb_bridge_ctl_vga"),
        ("MAbort", "cb_bridge_ctl_master_abort"),
        (">Reset", "cb_bridge_ctl_cb_reset"),
        ("16bInt", "cb_bridge_ctl_16bit_int"),
        ("PostWrite", "cb_bridge_ctl_post_writes"),
    ];
    o.line(1, format!("BridgeCtl: {}", flags(h, &bc)));
    if cfg.len() < CB_HEADER_READ {
        o.line(1, "<access denied to the rest>");
        return;
    }
    // lspci reads a word of the (32-bit) register: ExCA ports are 16-bit.
    let exca = reg(h, "cb_legacy_mode_base") as u16;
    if exca != 0 {
        o.line(1, format!("16-bit legacy interface ports at {exca:04x}"));
    }
}
