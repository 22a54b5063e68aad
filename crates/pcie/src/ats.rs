//! Address translation for devices that cache IOMMU translations: ATS
//! (PCI Express Base 6.0 §10.5.1), Page Request Interface (§10.5.2) and
//! PASID (§7.8.8). A NIC with ATS enabled can DMA with translated addresses
//! that bypass the IOMMU on the path, which interacts with ACS Direct
//! Translated P2P on the bridges above it.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_ats_cap, pci_pasid_cap, pci_pri_cap};
use crate::header::Config;

pub const PCI_ATS_CAP: usize = 0x04;
pub const PCI_ATS_CTRL: usize = 0x06;
pub const PCI_ATS_CTRL_ENABLE: u16 = 0x8000;
pub const PCI_PRI_CTRL: usize = 0x04;
pub const PCI_PRI_STATUS: usize = 0x06;
pub const PCI_PRI_MAX_REQ: usize = 0x08;
pub const PCI_PRI_ALLOC_REQ: usize = 0x0c;
pub const PCI_PASID_CAP: usize = 0x04;
pub const PCI_PASID_CTRL: usize = 0x06;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ats {
    pub offset: u16,
    /// Invalidate Queue Depth (0 means 32).
    pub invalidate_queue_depth: u8,
    pub page_aligned_request: bool,
    pub global_invalidate: bool,
    pub enabled: bool,
    /// Smallest Translation Unit: 4 KiB << stu.
    pub stu: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pri {
    pub offset: u16,
    pub enabled: bool,
    pub reset: bool,
    pub response_failure: bool,
    pub unexpected_response: bool,
    pub stopped: bool,
    pub prg_response_pasid_required: bool,
    pub capacity: u32,
    pub allocation: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pasid {
    pub offset: u16,
    pub exec_supported: bool,
    pub priv_supported: bool,
    pub max_width: u8,
    pub enabled: bool,
    pub exec_enabled: bool,
    pub priv_enabled: bool,
}

impl Config<'_> {
    pub fn ats(&self) -> Option<Ats> {
        let cap = self.find_ext_cap(ExtCapId::ATS)?;
        let a: pci_ats_cap = self.view(cap.offset, usize::from(cap.offset)).ok()?;
        Some(Ats {
            offset: cap.offset,
            invalidate_queue_depth: a.ats_cap_qdep(),
            page_aligned_request: a.ats_cap_page_aligned(),
            global_invalidate: a.ats_cap_global_inval(),
            enabled: a.ats_ctrl_enable(),
            stu: a.ats_ctrl_stu(),
        })
    }

    pub fn pri(&self) -> Option<Pri> {
        let cap = self.find_ext_cap(ExtCapId::PRI)?;
        let p: pci_pri_cap = self.view(cap.offset, usize::from(cap.offset)).ok()?;
        Some(Pri {
            offset: cap.offset,
            enabled: p.pri_ctrl_enable(),
            reset: p.pri_ctrl_reset(),
            response_failure: p.pri_status_rf(),
            unexpected_response: p.pri_status_uprgi(),
            stopped: p.pri_status_stopped(),
            prg_response_pasid_required: p.pri_status_pasid(),
            capacity: p.pri_max_req(),
            allocation: p.pri_alloc_req(),
        })
    }

    pub fn pasid(&self) -> Option<Pasid> {
        let cap = self.find_ext_cap(ExtCapId::PASID)?;
        let p: pci_pasid_cap = self.view(cap.offset, usize::from(cap.offset)).ok()?;
        Some(Pasid {
            offset: cap.offset,
            exec_supported: p.pasid_cap_exec(),
            priv_supported: p.pasid_cap_priv(),
            max_width: p.pasid_cap_width(),
            enabled: p.pasid_ctrl_enable(),
            exec_enabled: p.pasid_ctrl_exec(),
            priv_enabled: p.pasid_ctrl_priv(),
        })
    }
}
