//! Vital Product Data (capability 0x03): PCI Local Bus 3.0 §6.4 and
//! Appendix I. The capability is a window, not the data: software writes
//! an address to VPD Address (+0x02, bits 14:0) and waits for the F flag
//! (bit 15) before reading VPD Data (+0x04), so a config-space dump holds
//! the window's last state only, never the VPD itself. Layout
//! `pci_vpd_cap` in `hw-specs/pcie.toml`.

use crate::generated::pcie::pci_vpd_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

impl Config<'_> {
    /// The VPD capability's registers at `at` (an offset from the walk).
    pub fn vpd(&self, at: u16) -> Result<Block, CapError> {
        self.block(&pci_vpd_cap::LAYOUT, usize::from(at), at)
    }
}
