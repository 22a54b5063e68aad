//! Data Object Exchange (extended capability 0x002e): PCI Express Base 6.0
//! §7.9.24. Capabilities, control, status and the two mailboxes; reading a
//! dump cannot exchange objects (that needs mailbox writes), so only the
//! registers are decoded. Layout `pci_doe_cap` in `hw-specs/pcie.toml`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_doe_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

impl Config<'_> {
    /// Every DOE instance (a function may have several), in list order.
    pub fn doe(&self) -> impl Iterator<Item = Result<Block, CapError>> + '_ {
        self.ext_caps()
            .filter_map(Result::ok)
            .filter(|c| c.id == ExtCapId::DOE)
            .map(|c| self.block(&pci_doe_cap::LAYOUT, usize::from(c.offset), c.offset))
    }
}
