//! PCI Advanced Features (capability 0x13): the Advanced Capabilities for
//! Conventional PCI ECN, which gives conventional PCI functions Function
//! Level Reset. AF Capabilities (+0x03) says whether the function has FLR
//! (bit 1) and the Transactions Pending bit (bit 0); AF Control (+0x04)
//! starts an FLR (bit 0); AF Status (+0x05) has Transactions Pending
//! (bit 0). Layout `pci_af_cap` in `hw-specs/pcie.toml`.

use crate::generated::pcie::pci_af_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

impl Config<'_> {
    /// The Advanced Features capability's registers at `at` (an offset from the walk).
    pub fn advanced_features(&self, at: u16) -> Result<Block, CapError> {
        self.block(&pci_af_cap::LAYOUT, usize::from(at), at)
    }
}
