//! Device 3 (extended capability 0x002f): PCI Express Base 6.0 §7.7.9.
//! Device Capabilities 3 (14-bit tags, DMWr routing, L0p), Device Control 3
//! and Device Status 3. lspci 3.9 names the capability only, so the text
//! uses the spec's field names. Layout `pci_dev3_cap` in `hw-specs/pcie.toml`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_dev3_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

impl Config<'_> {
    /// The Device 3 capability's registers.
    pub fn device3(&self) -> Option<Result<Block, CapError>> {
        self.ext_block(ExtCapId::DEV3, &pci_dev3_cap::LAYOUT)
    }
}
