//! Lane Margining at the Receiver (extended capability 0x0027): PCI Express
//! Base 6.0 §7.7.7. The port capability and status (`pci_lmr_cap`), then a
//! control/status pair per lane (`pci_lmr_lane`, +0x08 + 4n) for as many
//! lanes as the link's Maximum Link Width (§7.7.7.4), bounded like the
//! other per-lane arrays. lspci 3.9 names the capability only.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_lmr_cap, pci_lmr_lane};
use crate::header::Config;
use crate::registers::Block;
use crate::regs::{CapError, LaneCount, lane_registers};
use alloc::vec::Vec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneMargining {
    pub offset: u16,
    pub port: Block,
    pub lanes: Vec<Block>,
    pub lane_count: LaneCount,
}

impl Config<'_> {
    /// The Lane Margining at the Receiver capability.
    pub fn lane_margining(&self) -> Option<Result<LaneMargining, CapError>> {
        let cap = self.find_ext_cap(ExtCapId::LMR)?;
        let base = usize::from(cap.offset);
        let read = || {
            let port = self.block(&pci_lmr_cap::LAYOUT, base, cap.offset)?;
            let (n, lane_count) = lane_registers(self, &cap, pci_lmr_cap::SIZE, pci_lmr_lane::SIZE)?;
            let lanes = (0..n)
                .map(|i| {
                    self.block(&pci_lmr_lane::LAYOUT, base + pci_lmr_cap::SIZE + i * pci_lmr_lane::SIZE, cap.offset)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(LaneMargining { offset: cap.offset, port, lanes, lane_count })
        };
        Some(read())
    }
}
