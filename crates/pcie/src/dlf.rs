//! Data Link Feature capability: PCI Express Base 6.0 §7.7.4 (Linux
//! `PCI_DLF_*`). Ports at 16.0 GT/s and up exchange a Data Link Feature
//! DLLP when the link comes up; bit 0 is Scaled Flow Control (§3.4.2), which
//! lets a port advertise more credits than the unscaled fields hold, the
//! rest are reserved. The capabilities register is what this port offers;
//! the status register what the partner offered.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_dlf_cap;
use crate::header::Config;
use crate::regs::CapError;

pub const PCI_DLF_CAP: usize = 0x04;
pub const DLF_STATUS: usize = 0x08;
pub const PCI_DLF_EXCHANGE_ENABLE: u32 = 0x8000_0000;
/// Feature bit 0: Scaled Flow Control.
pub const DLF_SCALED_FLOW_CONTROL: u32 = 0x0000_0001;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataLinkFeature {
    pub offset: u16,
    /// Local Data Link Feature Supported (bits 22:0).
    pub local_features: u32,
    pub exchange_enable: bool,
    /// Remote Data Link Feature Supported, meaningful when `remote_valid`.
    pub remote_features: u32,
    pub remote_valid: bool,
}

impl DataLinkFeature {
    pub fn local_scaled_flow_control(&self) -> bool {
        self.local_features & DLF_SCALED_FLOW_CONTROL != 0
    }
    /// Whether both ends use scaled flow control: both offer it and the
    /// partner's offer was received.
    pub fn scaled_flow_control_active(&self) -> bool {
        self.exchange_enable
            && self.remote_valid
            && self.local_scaled_flow_control()
            && self.remote_features & DLF_SCALED_FLOW_CONTROL != 0
    }
}

impl Config<'_> {
    pub fn data_link_feature(&self) -> Option<Result<DataLinkFeature, CapError>> {
        let cap = self.find_ext_cap(ExtCapId::DLF)?;
        Some(self.view::<pci_dlf_cap>(cap.offset, usize::from(cap.offset)).map(|v| DataLinkFeature {
            offset: cap.offset,
            local_features: v.dlf_cap_features(),
            exchange_enable: v.dlf_cap_exchange_enable(),
            remote_features: v.dlf_status_features(),
            remote_valid: v.dlf_status_valid(),
        }))
    }
}
