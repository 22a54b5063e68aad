//! Enhanced Allocation (capability 0x14): the PCI Enhanced Allocation ECN
//! (2014, PCI Local Bus 3.0 §6.9). Functions whose resources sit at fixed
//! addresses describe them here and hardwire their BARs to 0; each entry
//! says which BAR (or ROM, VF BAR, bridge window) it stands for, its
//! properties, base and maximum offset, 32 or 64 bits each. Entries start
//! at +4 (+8 in a type 1 header, after the fixed bus numbers) and each is
//! 4 + 4 × Entry Size bytes long (Linux `pci_ea_read`, lspci `cap_ea`).

use crate::cap_id::CapId;
use crate::generated::pcie::{pci_ea_bridge, pci_ea_cap, pci_ea_entry, pci_ea_entry as E};
use crate::header::{CONFIG_SPACE_LEGACY, Config};
use crate::registers::Block;
use crate::regs::CapError;
use alloc::vec::Vec;

/// One entry as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EaEntry {
    pub offset: u16,
    pub enable: bool,
    pub writable: bool,
    /// Entry Size: dwords after DW0.
    pub size_dw: u8,
    /// BAR Equivalent Indicator.
    pub bei: u8,
    pub primary: u8,
    pub secondary: u8,
    pub base: u64,
    /// Max Offset with its low two bits, which read as ones (the last byte).
    pub max_offset: u64,
    pub base_is_64: bool,
    pub max_offset_is_64: bool,
    /// DW0, Base and MaxOffset through `pci_ea_entry`.
    pub block: Block,
}

impl EaEntry {
    /// The BAR this entry stands for, when it is one of the six.
    pub fn bar(&self) -> Option<u8> {
        (self.bei <= 5).then_some(self.bei)
    }
}

/// What a BAR Equivalent Indicator names (ECN Table 6-6).
pub fn bei_text(bei: u8) -> &'static str {
    match bei {
        0..=5 => "BAR",
        6 => "resource behind function",
        7 => "not indicated",
        8 => "expansion ROM",
        9..=14 => "VF BAR",
        _ => "reserved",
    }
}

/// Primary/secondary properties (ECN Table 6-7), in lspci's words.
pub fn property_text(p: u8) -> &'static str {
    match p {
        0x00 => "memory space, non-prefetchable",
        0x01 => "memory space, prefetchable",
        0x02 => "I/O space",
        0x03 => "VF memory space, prefetchable",
        0x04 => "VF memory space, non-prefetchable",
        0x05 => "allocation behind bridge, non-prefetchable memory",
        0x06 => "allocation behind bridge, prefetchable memory",
        0x07 => "allocation behind bridge, I/O space",
        0xfd => "memory space resource unavailable for use",
        0xfe => "I/O space resource unavailable for use",
        0xff => "entry unavailable for use",
        _ => "reserved",
    }
}

/// The decoded capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnhancedAllocation {
    pub offset: u16,
    pub header: Block,
    /// Fixed secondary and subordinate bus numbers (type 1 functions).
    pub bridge_buses: Option<Block>,
    pub entries: Vec<EaEntry>,
}

impl Config<'_> {
    /// The Enhanced Allocation capability; an error when an entry runs past
    /// the dump or the first 256 bytes.
    pub fn enhanced_allocation(&self) -> Option<Result<EnhancedAllocation, CapError>> {
        let cap = self.find_cap(CapId::EA)?;
        Some(self.read_ea(cap.offset))
    }

    fn read_ea(&self, offset: u16) -> Result<EnhancedAllocation, CapError> {
        let base = usize::from(offset);
        let header = self.block(&pci_ea_cap::LAYOUT, base, offset)?;
        let mut at = base + pci_ea_cap::SIZE;
        let bridge_buses = if self.is_bridge() {
            let b = self.block(&pci_ea_bridge::LAYOUT, at, offset)?;
            at += pci_ea_bridge::SIZE;
            Some(b)
        } else {
            None
        };
        let count = header.get("ea_num_ent_count").unwrap_or(0);
        let mut entries = Vec::new();
        let dword = |at: usize| {
            if at + 4 > CONFIG_SPACE_LEGACY.min(self.len()) {
                return Err(CapError::Truncated { offset, need: at + 4 - base, len: self.len() });
            }
            Ok(u64::from(self.read_u32(at).unwrap_or(0)))
        };
        for _ in 0..count {
            let dw0 = dword(at)?;
            let size_dw = ((dw0 >> E::EA_ES_SHIFT) & u64::from(E::EA_ES_MASK)) as u8;
            let end = at + 4 + 4 * usize::from(size_dw);
            // An entry too short for Base and MaxOffset cannot describe a range.
            if size_dw < 2 {
                return Err(CapError::BadField { offset, field: "EA Entry Size", value: size_dw.into() });
            }
            let lo_base = dword(at + 4)?;
            let lo_max = dword(at + 8)?;
            let mut next = at + 12;
            // Base and MaxOffset say whether an upper dword follows (PCI_EA_IS_64).
            let (base_is_64, max_is_64) = (
                (lo_base >> E::EA_BASE_IS_64_SHIFT) & u64::from(E::EA_BASE_IS_64_MASK) != 0,
                (lo_max >> E::EA_MAX_OFFSET_IS_64_SHIFT) & u64::from(E::EA_MAX_OFFSET_IS_64_MASK) != 0,
            );
            let mut hi = |is_64: bool| -> Result<u64, CapError> {
                if !is_64 {
                    return Ok(0);
                }
                if next + 4 > end {
                    return Err(CapError::BadField { offset, field: "EA Entry Size", value: size_dw.into() });
                }
                let v = dword(next)?;
                next += 4;
                Ok(v)
            };
            let base_hi = hi(base_is_64)?;
            let max_hi = hi(max_is_64)?;
            let block = self.block(&pci_ea_entry::LAYOUT, at, offset)?;
            let f = |name: &str| block.get(name).unwrap_or(0);
            entries.push(EaEntry {
                offset: at as u16,
                enable: f("ea_enable") != 0,
                writable: f("ea_writable") != 0,
                size_dw,
                bei: f("ea_bei") as u8,
                primary: f("ea_pp") as u8,
                secondary: f("ea_sp") as u8,
                base: (base_hi << u32::BITS) | (f("ea_base_addr") << E::EA_BASE_ADDR_SHIFT),
                // The field is MaxOffset[31:2]; the offset of the last byte has bits 1:0 set.
                max_offset: (max_hi << u32::BITS)
                    | (f("ea_max_offset_addr") << E::EA_MAX_OFFSET_ADDR_SHIFT)
                    | ((1 << E::EA_MAX_OFFSET_ADDR_SHIFT) - 1),
                base_is_64,
                max_offset_is_64: max_is_64,
                block,
            });
            at = end;
        }
        Ok(EnhancedAllocation { offset, header, bridge_buses, entries })
    }
}
