//! Bridge Subsystem Vendor ID (capability 0x0d): PCI-to-PCI Bridge
//! Architecture 1.2 §3.2.5.13. Type 1 headers have no subsystem IDs of
//! their own; a bridge that has them carries this capability
//! (`PCI_SSVID_VENDOR_ID` +4, `PCI_SSVID_DEVICE_ID` +6).

use crate::cap_id::CapId;
use crate::generated::pcie::pci_ssvid_cap;
use crate::header::Config;
use crate::regs::CapError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeSubsystem {
    pub offset: u16,
    pub vendor: u16,
    pub device: u16,
}

impl Config<'_> {
    /// The bridge's subsystem IDs from its SSVID capability.
    pub fn bridge_subsystem(&self) -> Option<Result<BridgeSubsystem, CapError>> {
        let cap = self.find_cap(CapId::SSVID)?;
        Some(self.view::<pci_ssvid_cap>(cap.offset, usize::from(cap.offset)).map(|v| BridgeSubsystem {
            offset: cap.offset,
            vendor: v.ssvid_vendor_id(),
            device: v.ssvid_device_id(),
        }))
    }
}
