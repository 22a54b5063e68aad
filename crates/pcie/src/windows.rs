//! A PCI-to-PCI bridge's forwarding windows: PCI-to-PCI Bridge
//! Architecture 1.2 §3.2.5.6 (I/O base/limit, 16 or 32 bits), §3.2.5.8
//! (memory base/limit, 1 MiB granules) and §3.2.5.9-10 (prefetchable
//! memory, 32 or 64 bits). A window whose base is above its limit is
//! closed; lspci prints it `[disabled]`.

use crate::generated::pcie::pci_type1_header;
use crate::header::Config;

/// One window, inclusive at both ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub base: u64,
    pub limit: u64,
    /// 32-bit I/O or 64-bit prefetchable addressing (the type nibble).
    pub wide: bool,
}

impl Window {
    pub fn is_open(&self) -> bool {
        self.base <= self.limit
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeWindows {
    pub io: Window,
    pub memory: Window,
    pub prefetchable: Window,
}

/// An I/O window's granule: its base and limit registers carry address
/// bits 15:12 (§3.2.5.6), so it opens and closes on 4 KiB.
const IO_GRANULE_SHIFT: u32 = 12;
/// A memory window's granule, prefetchable or not: address bits 31:20 (§3.2.5.8).
const MEMORY_GRANULE_SHIFT: u32 = 20;
/// The addressing-capability nibble's code for 32-bit I/O and 64-bit
/// prefetchable windows, whose upper registers then count (§3.2.5.6, §3.2.5.9).
const WIDE_ADDRESSING: u8 = 1;

/// The last byte of a granule that starts at `base`.
const fn granule_end(base: u64, shift: u32) -> u64 {
    base | ((1 << shift) - 1)
}

impl Config<'_> {
    /// The windows of a type 1 header; `None` for other headers.
    pub fn bridge_windows(&self) -> Option<BridgeWindows> {
        if !self.is_bridge() {
            return None;
        }
        let h: pci_type1_header = self.view(0, 0).ok()?;
        let io_wide = h.io_range_type() == WIDE_ADDRESSING;
        let upper_io = |v: u16| if io_wide { u64::from(v) << u16::BITS } else { 0 };
        let io = Window {
            base: upper_io(h.io_base_upper16()) | (u64::from(h.io_range_addr()) << IO_GRANULE_SHIFT),
            limit: granule_end(
                upper_io(h.io_limit_upper16()) | (u64::from(h.io_limit_addr()) << IO_GRANULE_SHIFT),
                IO_GRANULE_SHIFT,
            ),
            wide: io_wide,
        };
        let memory = Window {
            base: u64::from(h.memory_range_addr()) << MEMORY_GRANULE_SHIFT,
            limit: granule_end(u64::from(h.memory_limit_addr()) << MEMORY_GRANULE_SHIFT, MEMORY_GRANULE_SHIFT),
            wide: false,
        };
        let pref_wide = h.pref_range_type() == WIDE_ADDRESSING;
        let upper = |v: u32| if pref_wide { u64::from(v) << u32::BITS } else { 0 };
        let prefetchable = Window {
            base: upper(h.pref_base_upper32()) | (u64::from(h.pref_range_addr()) << MEMORY_GRANULE_SHIFT),
            limit: granule_end(
                upper(h.pref_limit_upper32()) | (u64::from(h.pref_limit_addr()) << MEMORY_GRANULE_SHIFT),
                MEMORY_GRANULE_SHIFT,
            ),
            wide: pref_wide,
        };
        Some(BridgeWindows { io, memory, prefetchable })
    }
}
