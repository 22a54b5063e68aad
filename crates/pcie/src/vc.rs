//! Virtual Channel (extended capability 0x0002, or 0x0009 when the
//! function also has MFVC): PCI Express Base 6.0 §7.9.1. The port
//! registers (`pci_vc_cap`) and one resource block per VC (`pci_vc_res`:
//! VC0 at +0x10, then every 12 bytes; Extended VC Count more), and the
//! arbitration tables their offsets point to (`vc_arb`, §7.9.1.9-10).

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_vc_cap, pci_vc_res};
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;
use crate::vc_arb::{ArbTable, port_arb_table, vc_arb_table};
use alloc::vec::Vec;

/// Offset of VC0's resource registers (`PCI_VC_RES_CAP`).
pub const PCI_VC_RES_CAP: usize = 0x10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualChannel {
    pub offset: u16,
    pub port: Block,
    /// VC0 first; `vc_cap1_evcc` more after it (at most 8 in all).
    pub resources: Vec<Block>,
    /// The VC Arbitration Table, when Port VC Capability 2 points to one.
    pub vc_arb_table: Option<Result<ArbTable, CapError>>,
    /// Each resource's Port Arbitration Table, in `resources` order.
    pub port_arb_tables: Vec<Option<Result<ArbTable, CapError>>>,
}

impl Config<'_> {
    /// The first Virtual Channel capability (either ID).
    pub fn virtual_channel(&self) -> Option<Result<VirtualChannel, CapError>> {
        let cap = self.ext_caps().filter_map(Result::ok).find(|c| c.id == ExtCapId::VC || c.id == ExtCapId::VC9)?;
        let base = usize::from(cap.offset);
        let read = || {
            let port = self.block(&pci_vc_cap::LAYOUT, base, cap.offset)?;
            let count = port.get("vc_cap1_evcc").unwrap_or(0) as usize + 1;
            let resources = (0..count)
                .map(|n| self.block(&pci_vc_res::LAYOUT, base + PCI_VC_RES_CAP + n * pci_vc_res::SIZE, cap.offset))
                .collect::<Result<Vec<_>, _>>()?;
            let vc_arb_table = vc_arb_table(self, &cap, &port);
            let port_arb_tables = resources.iter().map(|r| port_arb_table(self, &cap, &port, r)).collect();
            Ok(VirtualChannel { offset: cap.offset, port, resources, vc_arb_table, port_arb_tables })
        };
        Some(read())
    }
}
