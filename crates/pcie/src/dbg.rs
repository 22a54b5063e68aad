//! Debug Port (capability 0x0a): EHCI 1.0 Appendix C.2.1. Bits 31:16 of
//! the capability's first dword say where an EHCI controller's debug port
//! registers are: BAR Number (15:13 of that word, 1-6 naming the BAR at
//! 0x10 + 4 * (n - 1)) and the offset within it (12:0). Layout
//! `pci_dbg_cap` in `hw-specs/pcie.toml`.

use crate::generated::pcie::pci_dbg_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

impl Config<'_> {
    /// The Debug Port capability's registers at `at` (an offset from the walk).
    pub fn debug_port(&self, at: u16) -> Result<Block, CapError> {
        self.block(&pci_dbg_cap::LAYOUT, usize::from(at), at)
    }
}
