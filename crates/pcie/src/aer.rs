//! Advanced Error Reporting: PCI Express Base 6.0 §7.8.4 (Linux
//! `PCI_ERR_*`). The header log holds the first four dwords of the TLP that
//! caused the first error, which `tlp::TlpHeader::decode` reads.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_aer_cap;
use crate::header::Config;
use bitflags::bitflags;

pub const PCI_ERR_UNCOR_STATUS: usize = 0x04;
pub const PCI_ERR_UNCOR_MASK: usize = 0x08;
pub const PCI_ERR_UNCOR_SEVER: usize = 0x0c;
pub const PCI_ERR_COR_STATUS: usize = 0x10;
pub const PCI_ERR_COR_MASK: usize = 0x14;
pub const PCI_ERR_CAP: usize = 0x18;
pub const PCI_ERR_HEADER_LOG: usize = 0x1c;
pub const PCI_ERR_ROOT_COMMAND: usize = 0x2c;
pub const PCI_ERR_ROOT_STATUS: usize = 0x30;
pub const PCI_ERR_ROOT_ERR_SRC: usize = 0x34;

bitflags! {
    /// Uncorrectable error bits (status, mask and severity share them, §7.8.4.2).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Uncorrectable: u32 {
        const UND = 0x0000_0001;
        const DLP = 0x0000_0010;
        const SURPDN = 0x0000_0020;
        const POISON_TLP = 0x0000_1000;
        const FCP = 0x0000_2000;
        const COMP_TIME = 0x0000_4000;
        const COMP_ABORT = 0x0000_8000;
        const UNX_COMP = 0x0001_0000;
        const RX_OVER = 0x0002_0000;
        const MALF_TLP = 0x0004_0000;
        const ECRC = 0x0008_0000;
        const UNSUP = 0x0010_0000;
        const ACSV = 0x0020_0000;
        const INTN = 0x0040_0000;
        const MCBTLP = 0x0080_0000;
        const ATOMEG = 0x0100_0000;
        const TLPPRE = 0x0200_0000;
        const _ = !0;
    }
}

bitflags! {
    /// Correctable error bits (status and mask, §7.8.4.5).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Correctable: u32 {
        const RCVR = 0x0000_0001;
        const BAD_TLP = 0x0000_0040;
        const BAD_DLLP = 0x0000_0080;
        const REP_ROLL = 0x0000_0100;
        const REP_TIMER = 0x0000_1000;
        const ADV_NFAT = 0x0000_2000;
        const INTERNAL = 0x0000_4000;
        const LOG_OVER = 0x0000_8000;
        const _ = !0;
    }
}

/// A decoded AER capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aer {
    pub offset: u16,
    pub version: u8,
    pub uncor_status: Uncorrectable,
    pub uncor_mask: Uncorrectable,
    /// Set bits are fatal, clear bits non-fatal.
    pub uncor_severity: Uncorrectable,
    pub cor_status: Correctable,
    pub cor_mask: Correctable,
    /// Capabilities and Control: First Error Pointer 4:0, ECRC and
    /// multiple-header bits above.
    pub cap_control: u32,
    pub header_log: [u32; 4],
}

impl Aer {
    pub fn first_error_pointer(&self) -> u8 {
        ((self.cap_control >> pci_aer_cap::ERR_CAP_FEP_SHIFT) & pci_aer_cap::ERR_CAP_FEP_MASK) as u8
    }
}

impl Config<'_> {
    pub fn aer(&self) -> Option<Aer> {
        let cap = self.find_ext_cap(ExtCapId::ERR)?;
        let b = usize::from(cap.offset);
        let r = |o: usize| self.read_u32(b + o);
        Some(Aer {
            offset: cap.offset,
            version: cap.version,
            uncor_status: Uncorrectable::from_bits_retain(r(PCI_ERR_UNCOR_STATUS)?),
            uncor_mask: Uncorrectable::from_bits_retain(r(PCI_ERR_UNCOR_MASK)?),
            uncor_severity: Uncorrectable::from_bits_retain(r(PCI_ERR_UNCOR_SEVER)?),
            cor_status: Correctable::from_bits_retain(r(PCI_ERR_COR_STATUS)?),
            cor_mask: Correctable::from_bits_retain(r(PCI_ERR_COR_MASK)?),
            cap_control: r(PCI_ERR_CAP)?,
            header_log: [
                r(PCI_ERR_HEADER_LOG)?,
                r(PCI_ERR_HEADER_LOG + 4)?,
                r(PCI_ERR_HEADER_LOG + 8)?,
                r(PCI_ERR_HEADER_LOG + 12)?,
            ],
        })
    }
}
