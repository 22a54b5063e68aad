//! MSI and MSI-X capabilities: PCI Express Base 6.0 §7.7.1 and §7.7.2
//! (Linux `PCI_MSI_*`, `PCI_MSIX_*`). Only the control words and the MSI-X
//! table/PBA locators: the vectors themselves live in device memory.

use crate::cap_id::CapId;
use crate::generated::pcie::pci_msi_cap;
use crate::header::Config;

pub const PCI_MSI_FLAGS: usize = 0x02;
pub const PCI_MSI_FLAGS_ENABLE: u16 = 0x0001;
pub const PCI_MSI_FLAGS_QMASK: u16 = 0x000e;
pub const PCI_MSI_FLAGS_QSIZE: u16 = 0x0070;
pub const PCI_MSI_FLAGS_64BIT: u16 = 0x0080;
pub const PCI_MSI_FLAGS_MASKBIT: u16 = 0x0100;

pub const PCI_MSI_ADDRESS_LO: usize = 0x04;

pub const PCI_MSIX_FLAGS: usize = 0x02;
pub const PCI_MSIX_FLAGS_QSIZE: u16 = 0x07ff;
pub const PCI_MSIX_FLAGS_MASKALL: u16 = 0x4000;
pub const PCI_MSIX_FLAGS_ENABLE: u16 = 0x8000;
pub const PCI_MSIX_TABLE: usize = 0x04;
pub const PCI_MSIX_PBA: usize = 0x08;
pub const PCI_MSIX_TABLE_BIR: u32 = 0x0000_0007;
pub const PCI_MSIX_TABLE_OFFSET: u32 = 0xffff_fff8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msi {
    pub offset: u16,
    pub enabled: bool,
    /// Vectors the function asks for (2^Multiple Message Capable).
    pub vectors_capable: u16,
    /// Vectors software granted (2^Multiple Message Enable).
    pub vectors_enabled: u16,
    pub addr_64bit: bool,
    pub per_vector_mask: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsiX {
    pub offset: u16,
    pub enabled: bool,
    pub function_masked: bool,
    /// Table Size field + 1.
    pub table_size: u16,
    pub table_bir: u8,
    pub table_offset: u32,
    pub pba_bir: u8,
    pub pba_offset: u32,
}

impl Config<'_> {
    pub fn msi(&self) -> Option<Msi> {
        let cap = self.find_cap(CapId::MSI)?;
        let flags = self.read_u16(usize::from(cap.offset) + PCI_MSI_FLAGS)?;
        Some(Msi {
            offset: cap.offset,
            enabled: flags & PCI_MSI_FLAGS_ENABLE != 0,
            vectors_capable: 1 << ((flags & PCI_MSI_FLAGS_QMASK) >> pci_msi_cap::MSI_FLAGS_QMASK_SHIFT),
            vectors_enabled: 1 << ((flags & PCI_MSI_FLAGS_QSIZE) >> pci_msi_cap::MSI_FLAGS_QSIZE_SHIFT),
            addr_64bit: flags & PCI_MSI_FLAGS_64BIT != 0,
            per_vector_mask: flags & PCI_MSI_FLAGS_MASKBIT != 0,
        })
    }

    pub fn msix(&self) -> Option<MsiX> {
        let cap = self.find_cap(CapId::MSIX)?;
        let base = usize::from(cap.offset);
        let flags = self.read_u16(base + PCI_MSIX_FLAGS)?;
        let table = self.read_u32(base + PCI_MSIX_TABLE)?;
        let pba = self.read_u32(base + PCI_MSIX_PBA)?;
        Some(MsiX {
            offset: cap.offset,
            enabled: flags & PCI_MSIX_FLAGS_ENABLE != 0,
            function_masked: flags & PCI_MSIX_FLAGS_MASKALL != 0,
            table_size: (flags & PCI_MSIX_FLAGS_QSIZE) + 1,
            table_bir: (table & PCI_MSIX_TABLE_BIR) as u8,
            table_offset: table & PCI_MSIX_TABLE_OFFSET,
            pba_bir: (pba & PCI_MSIX_TABLE_BIR) as u8,
            pba_offset: pba & PCI_MSIX_TABLE_OFFSET,
        })
    }
}
