//! Resizable BAR: PCI Express Base 6.0 §7.8.6 (Linux `PCI_REBAR_*`). For
//! each resizable BAR a capability register (+0x04 + 8·n: bit k of 31:4
//! means 2^(k+20) bytes is supported, bit 4 = 1 MiB) and a control register
//! (+0x08 + 8·n: BAR index 2:0, number of resizable BARs 7:5 in the first
//! entry, current size 13:8 as 2^(k+20) bytes, and sizes from 256 TiB up in
//! 31:16). A GPU's 256 GiB BAR1 only maps whole through this capability,
//! which is why `marrow doctor` prints it. Read through the generated views
//! `pci_rebar_cap` and `pci_rebar_entry`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_rebar_cap, pci_rebar_entry};
use crate::header::Config;

pub const PCI_REBAR_CAP: usize = 0x04;
pub const PCI_REBAR_CTRL: usize = 0x08;
pub const PCI_REBAR_CAP_SIZES: u32 = 0x00ff_fff0;
pub const PCI_REBAR_CTRL_BAR_IDX: u32 = 0x0000_0007;
pub const PCI_REBAR_CTRL_NBAR_MASK: u32 = 0x0000_00e0;
pub const PCI_REBAR_CTRL_NBAR_SHIFT: u32 = 5;
pub const PCI_REBAR_CTRL_BAR_SHIFT: u32 = 8;
/// Bytes per entry.
pub const REBAR_ENTRY: usize = 8;

/// One resizable BAR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResizableBar {
    pub bar_index: u8,
    /// Current size in bytes.
    pub current: u64,
    /// Supported sizes as a mask: bit n set means 2^(n+20) bytes (1 MiB up to
    /// 128 TiB from the capability register's bits 31:4).
    pub supported_mask: u32,
    /// Sizes from the control register's bits 31:16: bit n means 2^(n+48)
    /// bytes (256 TiB and up).
    pub supported_hi: u16,
}

impl ResizableBar {
    /// Supported sizes in bytes, smallest first.
    pub fn supported(&self) -> impl Iterator<Item = u64> + '_ {
        let lo = (0..28).filter(|n| self.supported_mask & (1 << n) != 0).map(|n| 1u64 << (n + 20));
        let hi = (0..16).filter(|n| self.supported_hi & (1 << n) != 0).map(|n| 1u64 << (n + 48));
        lo.chain(hi)
    }
}

impl Config<'_> {
    /// The Resizable BAR entries (at most six), in capability order. The
    /// count field of entry 0 is clamped to 1..=6 (§7.8.6.3 allows no other).
    pub fn resizable_bars(&self) -> impl Iterator<Item = ResizableBar> + '_ {
        let cap = self.find_ext_cap(ExtCapId::REBAR);
        let head = cap.and_then(|c| self.view::<pci_rebar_cap>(c.offset, usize::from(c.offset)).ok());
        let count = head.map(|h| usize::from(h.rebar_ctrl_nbar()).clamp(1, 6)).unwrap_or(0);
        (0..count).filter_map(move |i| {
            let c = cap?;
            let e: pci_rebar_entry =
                self.view(c.offset, usize::from(c.offset) + PCI_REBAR_CAP + REBAR_ENTRY * i).ok()?;
            Some(ResizableBar {
                bar_index: e.entry_ctrl_bar_idx(),
                current: 1u64 << (u32::from(e.entry_ctrl_bar_size()) + 20).min(63),
                supported_mask: e.entry_cap_sizes(),
                supported_hi: e.entry_ctrl_sizes_hi(),
            })
        })
    }
}
