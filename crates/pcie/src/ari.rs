//! Alternative Routing-ID Interpretation (extended capability 0x000e): PCI
//! Express Base 6.0 §7.8.8. The capability (+0x04) says which function
//! groups are supported and the next function number in the ARI chain;
//! control (+0x06) enables them. Layout `pci_ari_cap` in `hw-specs/pcie.toml`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_ari_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

impl Config<'_> {
    /// The ARI capability's registers.
    pub fn ari(&self) -> Option<Result<Block, CapError>> {
        self.ext_block(ExtCapId::ARI, &pci_ari_cap::LAYOUT)
    }
}
