//! The configuration header and the PCI Express capability as named
//! registers (PCI Local Bus 3.0 §6.1, PCI-to-PCI Bridge 1.2 §3.2, the
//! CardBus header of Linux `PCI_CB_*`, PCI Express Base 6.0 §7.5.3): Command
//! and Status flags, the bridge registers, and every Device, Link, Slot and
//! Root register through the layouts generated from `hw-specs/pcie.toml`.

use crate::cap_id::CapId;
use crate::generated::pcie::{pci_cardbus_header, pci_exp_cap, pci_type0_header, pci_type1_header};
use crate::header::{Config, PCI_HEADER_TYPE_BRIDGE, PCI_HEADER_TYPE_CARDBUS};
use crate::registers::Block;
use crate::regs::CapError;

/// A version 1 PCI Express capability ends after Root Status (§7.5.3,
/// PCIe 1.1): the "2" registers are not there.
pub const PCI_CAP_EXP_ENDPOINT_SIZEOF_V1: usize = 0x24;

impl Config<'_> {
    /// The header as named registers: type 0, type 1 or CardBus by the
    /// header type (any other reads as type 0, as lspci does). A CardBus
    /// header is 72 bytes: a 64-byte dump gives the registers it holds.
    pub fn header_block(&self) -> Block {
        let layout = match self.header_type() {
            PCI_HEADER_TYPE_BRIDGE => &pci_type1_header::LAYOUT,
            PCI_HEADER_TYPE_CARDBUS => &pci_cardbus_header::LAYOUT,
            _ => &pci_type0_header::LAYOUT,
        };
        // Config::new guarantees the 64 bytes every layout's prefix needs.
        let len = layout.size.min(self.len());
        self.block_prefix(layout, 0, 0, len).unwrap_or(Block { layout, offset: 0, registers: alloc::vec::Vec::new() })
    }

    /// The PCI Express capability's registers, as far as its version has
    /// them; an error when the dump ends inside them.
    pub fn express_block(&self) -> Option<Result<Block, CapError>> {
        let cap = self.find_cap(CapId::EXP)?;
        let base = usize::from(cap.offset);
        let version = self
            .read_u16(base + pci_exp_cap::FLAGS_OFF)
            .map_or(0, |f| (f >> pci_exp_cap::FLAGS_VERS_SHIFT) & pci_exp_cap::FLAGS_VERS_MASK);
        let len = if version >= 2 { pci_exp_cap::SIZE } else { PCI_CAP_EXP_ENDPOINT_SIZEOF_V1 };
        Some(self.block_prefix(&pci_exp_cap::LAYOUT, base, cap.offset, len))
    }
}
