//! Resizable BAR: PCI Express Base 6.0 §7.8.6. For each resizable BAR a
//! capability register (+0x04 + 8·i: bit n of 31:4 means 2^(n+16) bytes is
//! supported, bit 4 = 1 MiB) and a control register (+0x08 + 8·i: BAR index
//! 2:0, number of resizable BARs 7:5 in the first, current size 13:8 as
//! 2^(n+20) bytes).

use crate::cap_id::ExtCapId;
use crate::header::Config;

/// One resizable BAR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResizableBar {
    pub bar_index: u8,
    /// Current size in bytes.
    pub current: u64,
    /// Supported sizes as a mask: bit n set means 2^(n+20) bytes (1 MiB up to
    /// 128 TiB from the capability register's bits 31:4).
    pub supported_mask: u32,
}

impl ResizableBar {
    /// Supported sizes in bytes, smallest first.
    pub fn supported(&self) -> impl Iterator<Item = u64> + '_ {
        (0..28).filter(|n| self.supported_mask & (1 << n) != 0).map(|n| 1u64 << (n + 20))
    }
}

impl Config<'_> {
    /// The Resizable BAR entries (at most six), in capability order.
    pub fn resizable_bars(&self) -> impl Iterator<Item = ResizableBar> + '_ {
        let base = self.find_ext_cap(ExtCapId::REBAR).map(|c| usize::from(c.offset));
        let count = base
            .and_then(|b| self.read_u32(b + 8))
            .map(|ctl| ((ctl >> 5) & 0b111).clamp(1, 6) as usize)
            .unwrap_or(0);
        (0..count).filter_map(move |i| {
            let b = base? + 8 * i;
            let cap = self.read_u32(b + 4)?;
            let ctl = self.read_u32(b + 8)?;
            Some(ResizableBar {
                bar_index: (ctl & 0b111) as u8,
                current: 1u64 << (((ctl >> 8) & 0x3f) + 20).min(63),
                supported_mask: cap >> 4,
            })
        })
    }
}
