//! Multicast (extended capability 0x0012): PCI Express Base 6.0 §7.9.11.
//! Multicast Capability (+0x04: MC_Max_Group 5:0, MC_Window_Size_Requested
//! 13:8, MC_ECRC_Regeneration_Supported 15), Multicast Control (+0x06:
//! MC_Num_Group 5:0, MC_Enable 15), then 64-bit registers: MC_Base_Address
//! (+0x08, MC_Index_Position 5:0), MC_Receive (+0x10), MC_Block_All
//! (+0x18), MC_Block_Untranslated (+0x20) and, for switch and root ports,
//! MC_Overlay_BAR (+0x28, MC_Overlay_Size 5:0). Layout `pci_mcast_cap` in
//! `hw-specs/pcie.toml`.

use crate::generated::pcie::pci_mcast_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

impl Config<'_> {
    /// The Multicast capability's registers at `at` (an offset from the walk).
    pub fn multicast(&self, at: u16) -> Result<Block, CapError> {
        self.block(&pci_mcast_cap::LAYOUT, usize::from(at), at)
    }
}
