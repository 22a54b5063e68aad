//! The Expansion ROM base address register: PCI Local Bus 3.0 §6.2.5.2
//! (type 0 at 0x30, `PCI_ROM_ADDRESS`) and PCI-to-PCI Bridge 1.2 §3.2.5.14
//! (type 1 at 0x38, `PCI_ROM_ADDRESS1`). Bits 31:11 are the address, bit 0
//! the decode enable; CardBus bridges have none.

use crate::generated::pcie::{pci_type0_header, pci_type1_header};
use crate::header::{Config, PCI_HEADER_TYPE_BRIDGE, PCI_HEADER_TYPE_NORMAL};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpansionRom {
    /// Where the register is.
    pub register: u16,
    pub address: u32,
    pub enabled: bool,
}

impl Config<'_> {
    /// The expansion ROM register; `None` when the header has none or it
    /// reads 0 (no ROM, or unassigned).
    pub fn expansion_rom(&self) -> Option<ExpansionRom> {
        let (register, raw) = match self.header_type() {
            PCI_HEADER_TYPE_NORMAL => {
                (pci_type0_header::ROM_ADDRESS_OFF, self.view::<pci_type0_header>(0, 0).ok()?.rom_address())
            }
            PCI_HEADER_TYPE_BRIDGE => {
                (pci_type1_header::ROM_ADDRESS1_OFF, self.view::<pci_type1_header>(0, 0).ok()?.rom_address1())
            }
            _ => return None,
        };
        // Types 0 and 1 lay the register out alike.
        use pci_type0_header as R;
        (raw != 0).then_some(ExpansionRom {
            register: register as u16,
            address: raw & (R::ROM_ADDRESS_MASK_MASK << R::ROM_ADDRESS_MASK_SHIFT),
            enabled: (raw >> R::ROM_ADDRESS_ENABLE_SHIFT) & R::ROM_ADDRESS_ENABLE_MASK != 0,
        })
    }
}
