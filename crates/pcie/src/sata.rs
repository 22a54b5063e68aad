//! Serial ATA Data/Index Configuration (capability 0x12): Serial ATA AHCI
//! 1.3.1 §2.4. SATACR0 holds the revision (MAJREV 23:20, MINREV 19:16);
//! SATACR1 (+0x04) says where the index/data register pair is: BARLOC
//! (3:0) 4-9 for the BAR at 0x10-0x24, 15 for config space right after
//! SATACR1, and BAROFST (23:4) its offset in dwords. Layout `pci_sata_cap`
//! in `hw-specs/pcie.toml`.

use crate::generated::pcie::pci_sata_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

/// BARLOC value for "the index/data pair follows SATACR1 in config space".
pub const SATA_BARLOC_IN_CONFIG: u64 = 0xf;

impl Config<'_> {
    /// The SATA capability's registers at `at` (an offset from the walk).
    pub fn sata(&self, at: u16) -> Result<Block, CapError> {
        self.block(&pci_sata_cap::LAYOUT, usize::from(at), at)
    }
}
