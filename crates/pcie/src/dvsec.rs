//! Designated Vendor-Specific Extended Capability (0x0023): PCI Express
//! Base 6.0 §7.9.6. Header 1 names the vendor whose definition applies,
//! the revision and the length; header 2 the vendor's DVSEC ID. The body
//! is the vendor's: a few well-known (vendor, ID) pairs are named (CXL's,
//! CXL 3.0 §8.1.1), none is decoded. Layout `pci_dvsec_cap`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_dvsec_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;
use alloc::vec::Vec;

/// CXL's vendor ID for DVSECs (CXL 3.0 §8.1.1).
pub const CXL_VENDOR_ID: u16 = 0x1e98;

/// One DVSEC header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dvsec {
    pub offset: u16,
    pub version: u8,
    pub vendor: u16,
    pub rev: u8,
    /// Length in bytes, header included.
    pub len: u16,
    pub id: u16,
    pub block: Block,
}

impl Dvsec {
    /// The DVSEC's name when its vendor publishes one (CXL 3.0 Table 8-2).
    pub fn name(&self) -> Option<&'static str> {
        if self.vendor != CXL_VENDOR_ID {
            return None;
        }
        Some(match self.id {
            0 => "CXL PCIe DVSEC for CXL Devices",
            2 => "CXL Non-CXL Function Map DVSEC",
            3 => "CXL Extensions DVSEC for Ports",
            4 => "CXL GPF DVSEC for CXL Ports",
            5 => "CXL GPF DVSEC for CXL Devices",
            7 => "CXL PCIe DVSEC for Flex Bus Port",
            8 => "CXL Register Locator DVSEC",
            9 => "CXL MLD DVSEC",
            0xa => "CXL PCIe DVSEC for Test Capability",
            _ => return None,
        })
    }
}

impl Config<'_> {
    /// Every DVSEC header, in list order; a length shorter than the header
    /// (0x0a bytes) is an error.
    pub fn dvsecs(&self) -> Vec<Result<Dvsec, CapError>> {
        self.ext_caps()
            .filter_map(Result::ok)
            .filter(|c| c.id == ExtCapId::DVSEC)
            .map(|c| {
                let block = self.block(&pci_dvsec_cap::LAYOUT, usize::from(c.offset), c.offset)?;
                let len = block.get("dvsec_len").unwrap_or(0) as u16;
                if usize::from(len) < pci_dvsec_cap::SIZE {
                    return Err(CapError::BadField { offset: c.offset, field: "DVSEC Length", value: len.into() });
                }
                Ok(Dvsec {
                    offset: c.offset,
                    version: c.version,
                    vendor: block.get("dvsec_vendor_id").unwrap_or(0) as u16,
                    rev: block.get("dvsec_rev").unwrap_or(0) as u8,
                    len,
                    id: block.get("dvsec_id").unwrap_or(0) as u16,
                    block,
                })
            })
            .collect()
    }
}
