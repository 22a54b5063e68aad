//! Secondary PCI Express capability: PCI Express Base 6.0 §7.7.3. Ports
//! that run at 8.0 GT/s and up have it: Link Control 3 (software-requested
//! equalization), Lane Error Status (which lanes saw framing or block
//! errors: a bad lane of a x16 GPU link shows here before the link
//! retrains narrower), and the 8.0 GT/s transmitter presets per lane.
//! Linux's `pci_regs.h` names none of these registers.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_secpci_cap, pci_secpci_lane_eq};
use crate::header::Config;
use crate::regs::{CapError, LaneCount, lane_registers};
use alloc::vec::Vec;

/// Link Control 3, Lane Error Status, then one Lane Equalization Control
/// register per lane from here.
pub const SECPCI_LANE_EQ: usize = 0x0c;

/// One lane's 8.0 GT/s equalization presets (§7.7.3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneEq8 {
    pub dsp_tx_preset: u8,
    pub dsp_rx_hint: u8,
    pub usp_tx_preset: u8,
    pub usp_rx_hint: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecondaryPcie {
    pub offset: u16,
    pub link_control3: u32,
    pub perform_equalization: bool,
    pub eq_request_interrupt: bool,
    /// Enable Lower SKP OS Generation Vector (bit n: speed n + 1).
    pub lower_skp_os_generation: u8,
    /// Bit n set: lane n saw a lane error.
    pub lane_error_status: u32,
    pub lanes: Vec<LaneEq8>,
    pub lane_count: LaneCount,
}

impl SecondaryPcie {
    /// The lanes with an error bit set.
    pub fn lanes_in_error(&self) -> impl Iterator<Item = u8> + '_ {
        (0..32u8).filter(|l| self.lane_error_status & (1 << l) != 0)
    }
}

impl Config<'_> {
    pub fn secondary_pcie(&self) -> Option<Result<SecondaryPcie, CapError>> {
        let cap = self.find_ext_cap(ExtCapId::SECPCI)?;
        Some((|| {
            let base = usize::from(cap.offset);
            let v: pci_secpci_cap = self.view(cap.offset, base)?;
            let (n, lane_count) = lane_registers(self, &cap, SECPCI_LANE_EQ, 2)?;
            let mut lanes = Vec::with_capacity(n);
            for i in 0..n {
                let e: pci_secpci_lane_eq = self.view(cap.offset, base + SECPCI_LANE_EQ + 2 * i)?;
                lanes.push(LaneEq8 {
                    dsp_tx_preset: e.lane_eq_dsp_tx_preset(),
                    dsp_rx_hint: e.lane_eq_dsp_rx_hint(),
                    usp_tx_preset: e.lane_eq_usp_tx_preset(),
                    usp_rx_hint: e.lane_eq_usp_rx_hint(),
                });
            }
            Ok(SecondaryPcie {
                offset: cap.offset,
                link_control3: v.lnkctl3(),
                perform_equalization: v.lnkctl3_perform_eq(),
                eq_request_interrupt: v.lnkctl3_eq_irq_en(),
                lower_skp_os_generation: v.lnkctl3_skp_os_gen(),
                lane_error_status: v.lane_err_sta(),
                lanes,
                lane_count,
            })
        })())
    }
}
