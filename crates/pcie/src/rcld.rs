//! Root Complex Link Declaration (extended capability 0x0005): PCI
//! Express Base 6.0 §7.9.8. The Element Self Description (+0x04) gives the
//! element's type (3:0), the number of link entries (15:8), its component
//! ID (23:16) and port number (31:24); the link entries, 16 bytes each,
//! start at +0x10: Link Description (valid 0, type 1, associate RCRB 2,
//! target component 23:16, target port 31:24) and a 64-bit Link Address,
//! an RCRB's memory address (type 0) or a configuration space address
//! (type 1, §7.9.8.3.2: N in 2:0, function 14:12, device 19:15, bus from
//! bit 20 up, N bits wide, 8 when N is 0). Layouts `pci_rcld_cap` and
//! `pci_rcld_link` in `hw-specs/pcie.toml`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_rcld_cap, pci_rcld_link};
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;
use crate::routing_id::RoutingId;
use alloc::vec::Vec;

/// Where the first link entry starts (`PCI_RCLINK_LINK1`).
pub const PCI_RCLINK_LINK1: usize = 0x10;
/// Bytes of one link entry (`PCI_RCLINK_LINK_SIZE`).
pub const PCI_RCLINK_LINK_SIZE: usize = 0x10;

/// A Root Complex Link Declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcLink {
    pub header: Block,
    /// The link entries the dump holds, in order.
    pub links: Vec<Block>,
    /// Link entries the Element Self Description counts that the dump cuts.
    pub links_missing: usize,
}

/// A configuration-space Link Address (§7.9.8.3.2): N in bits 2:0 (0
/// means 8), then a routing ID from bit 12 (Function 14:12, Device 19:15)
/// whose Bus field is N bits wide.
const LINK_N_MASK: u64 = 0b111;
const LINK_ROUTING_ID_SHIFT: u32 = 12;
const LINK_BUS_SHIFT: u32 = 20;

/// A configuration-space Link Address as (bus, device, function).
pub fn config_address(addr: u64) -> (u64, u64, u64) {
    let n = match addr & LINK_N_MASK {
        0 => u8::BITS.into(),
        n => n,
    };
    let id = RoutingId((addr >> LINK_ROUTING_ID_SHIFT) as u16);
    (addr >> LINK_BUS_SHIFT & ((1 << n) - 1), id.device().into(), id.function().into())
}

impl Config<'_> {
    /// The Root Complex Link Declaration at `at` (an offset from the walk),
    /// with as many of its link entries as the dump holds.
    pub fn rc_link(&self, at: u16) -> Result<RcLink, CapError> {
        let base = usize::from(at);
        let header = self.block(&pci_rcld_cap::LAYOUT, base, at)?;
        let count = header.get("rcld_esd_link_entries").unwrap_or(0) as usize;
        let mut links = Vec::new();
        for i in 0..count {
            match self.block(&pci_rcld_link::LAYOUT, base + PCI_RCLINK_LINK1 + i * PCI_RCLINK_LINK_SIZE, at) {
                Ok(b) => links.push(b),
                Err(_) => break,
            }
        }
        let links_missing = count - links.len();
        Ok(RcLink { header, links, links_missing })
    }

    /// The first Root Complex Link Declaration.
    pub fn first_rc_link(&self) -> Option<Result<RcLink, CapError>> {
        Some(self.rc_link(self.find_ext_cap(ExtCapId::RCLD)?.offset))
    }
}
