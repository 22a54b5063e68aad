//! Address translation for devices that cache IOMMU translations: ATS
//! (PCI Express Base 6.0 §10.5.1), Page Request Interface (§10.5.2) and
//! PASID (§7.8.8). A NIC with ATS enabled can DMA with translated addresses
//! that bypass the IOMMU on the path, which interacts with ACS Direct
//! Translated P2P on the bridges above it.

use crate::cap_id::ExtCapId;
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
        let b = usize::from(cap.offset);
        let c = self.read_u16(b + PCI_ATS_CAP)?;
        let t = self.read_u16(b + PCI_ATS_CTRL)?;
        Some(Ats {
            offset: cap.offset,
            invalidate_queue_depth: (c & 0x1f) as u8,
            page_aligned_request: c & (1 << 5) != 0,
            global_invalidate: c & (1 << 6) != 0,
            enabled: t & PCI_ATS_CTRL_ENABLE != 0,
            stu: (t & 0x1f) as u8,
        })
    }

    pub fn pri(&self) -> Option<Pri> {
        let cap = self.find_ext_cap(ExtCapId::PRI)?;
        let b = usize::from(cap.offset);
        let ctl = self.read_u16(b + PCI_PRI_CTRL)?;
        let sta = self.read_u16(b + PCI_PRI_STATUS)?;
        Some(Pri {
            offset: cap.offset,
            enabled: ctl & 1 != 0,
            reset: ctl & 2 != 0,
            response_failure: sta & 1 != 0,
            unexpected_response: sta & 2 != 0,
            stopped: sta & (1 << 8) != 0,
            prg_response_pasid_required: sta & (1 << 15) != 0,
            capacity: self.read_u32(b + PCI_PRI_MAX_REQ)?,
            allocation: self.read_u32(b + PCI_PRI_ALLOC_REQ)?,
        })
    }

    pub fn pasid(&self) -> Option<Pasid> {
        let cap = self.find_ext_cap(ExtCapId::PASID)?;
        let b = usize::from(cap.offset);
        let c = self.read_u16(b + PCI_PASID_CAP)?;
        let t = self.read_u16(b + PCI_PASID_CTRL)?;
        Some(Pasid {
            offset: cap.offset,
            exec_supported: c & 2 != 0,
            priv_supported: c & 4 != 0,
            max_width: ((c >> 8) & 0x1f) as u8,
            enabled: t & 1 != 0,
            exec_enabled: t & 2 != 0,
            priv_enabled: t & 4 != 0,
        })
    }
}
