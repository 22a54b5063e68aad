//! Link IDE Register Block: PCI Express Base 6.0 §7.9.26.4. When the IDE
//! Capability says Link IDE Stream Supported, one Link IDE Stream Control
//! (§7.9.26.4.1) and Status (§7.9.26.4.2) pair per link stream follows the
//! IDE Control register, one stream per traffic class the port supports
//! for link IDE (Number of TCs Supported for Link IDE + 1), 8 bytes each.
//! Layout `pci_ide_link_stream` in `hw-specs/pcie.toml`.

use crate::generated::pcie::{pci_ide_cap, pci_ide_link_stream};
use crate::header::Config;
use crate::registers::{Block, block_in_cap};
use crate::regs::CapError;
use crate::walk::ExtCap;
use alloc::vec::Vec;

/// Offset of the first Link IDE Stream block (`PCI_IDE_LINK_STREAM_0`).
pub const PCI_IDE_LINK_STREAM_0: usize = pci_ide_cap::SIZE;

/// How many link stream blocks `ide` (the capability's `pci_ide_cap`
/// block) says follow it: none without Link IDE Stream Supported.
pub fn link_stream_count(ide: &Block) -> usize {
    if ide.flag("ide_cap_link") { ide.get("ide_cap_link_tcs").unwrap_or(0) as usize + 1 } else { 0 }
}

/// The link stream blocks, in order, as far as they lie inside the
/// capability and the dump; the error says where the first one that does
/// not begins.
pub(crate) fn link_streams(cfg: &Config<'_>, cap: &ExtCap, ide: &Block) -> (Vec<Block>, Option<CapError>) {
    let base = usize::from(cap.offset) + PCI_IDE_LINK_STREAM_0;
    let mut out = Vec::new();
    for n in 0..link_stream_count(ide) {
        match block_in_cap(cfg, cap, &pci_ide_link_stream::LAYOUT, base + n * pci_ide_link_stream::SIZE) {
            Ok(b) => out.push(b),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}
