//! Physical Layer 16.0 GT/s capability: PCI Express Base 6.0 §7.7.5
//! (Linux `PCI_PL_16GT_*`). Gen4 links equalize again at 16.0 GT/s; the
//! status register says whether each phase succeeded, the three parity
//! registers say which lanes saw data parity mismatches at this port and
//! at up to two retimers between it and its partner (a flaky riser or
//! retimer card shows here), and one byte per lane holds the transmitter
//! presets.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_pl_lane_eq, pci_pl16_cap};
use crate::header::Config;
use crate::regs::{CapError, LaneCount, lane_registers};
use alloc::vec::Vec;

pub const PCI_PL_16GT_LE_CTRL: usize = 0x20;
pub const PCI_PL_16GT_LE_CTRL_DSP_TX_PRESET_MASK: u8 = 0x0f;
pub const PCI_PL_16GT_LE_CTRL_USP_TX_PRESET_MASK: u8 = 0xf0;
pub const PCI_PL_16GT_LE_CTRL_USP_TX_PRESET_SHIFT: u8 = 4;

/// One lane's 16.0 or 32.0 GT/s transmitter presets (§7.7.5.9, §7.7.6.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LanePresets {
    pub dsp_tx_preset: u8,
    pub usp_tx_preset: u8,
}

/// Equalization status bits 4:0 shared by the 16.0 and 32.0 GT/s status
/// registers (§7.7.5.4, §7.7.6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EqStatus {
    pub complete: bool,
    pub phase1: bool,
    pub phase2: bool,
    pub phase3: bool,
    pub request: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalLayer16 {
    pub offset: u16,
    pub capabilities_raw: u32,
    pub control_raw: u32,
    pub status_raw: u32,
    pub equalization: EqStatus,
    /// Bit n set: lane n saw a data parity mismatch (§7.7.5.5 to §7.7.5.7).
    pub local_parity_mismatch: u32,
    pub first_retimer_parity_mismatch: u32,
    pub second_retimer_parity_mismatch: u32,
    pub lanes: Vec<LanePresets>,
    pub lane_count: LaneCount,
}

/// The per-lane presets of a 16.0 or 32.0 GT/s capability at `cap`.
pub(crate) fn lane_presets(
    cfg: &Config<'_>,
    cap: &crate::walk::ExtCap,
) -> Result<(Vec<LanePresets>, LaneCount), CapError> {
    let (n, count) = lane_registers(cfg, cap, PCI_PL_16GT_LE_CTRL, 1)?;
    let mut lanes = Vec::with_capacity(n);
    for i in 0..n {
        let e: pci_pl_lane_eq = cfg.view(cap.offset, usize::from(cap.offset) + PCI_PL_16GT_LE_CTRL + i)?;
        lanes.push(LanePresets {
            dsp_tx_preset: e.pl_lane_eq_dsp_tx_preset(),
            usp_tx_preset: e.pl_lane_eq_usp_tx_preset(),
        });
    }
    Ok((lanes, count))
}

impl Config<'_> {
    pub fn physical_layer_16gt(&self) -> Option<Result<PhysicalLayer16, CapError>> {
        let cap = self.find_ext_cap(ExtCapId::PL_16GT)?;
        Some((|| {
            let v: pci_pl16_cap = self.view(cap.offset, usize::from(cap.offset))?;
            let (lanes, lane_count) = lane_presets(self, &cap)?;
            Ok(PhysicalLayer16 {
                offset: cap.offset,
                capabilities_raw: v.pl16_cap(),
                control_raw: v.pl16_ctl(),
                status_raw: v.pl16_status(),
                equalization: EqStatus {
                    complete: v.pl16_status_eq_complete(),
                    phase1: v.pl16_status_eq_phase1(),
                    phase2: v.pl16_status_eq_phase2(),
                    phase3: v.pl16_status_eq_phase3(),
                    request: v.pl16_status_eq_request(),
                },
                local_parity_mismatch: v.pl16_local_parity(),
                first_retimer_parity_mismatch: v.pl16_first_retimer_parity(),
                second_retimer_parity_mismatch: v.pl16_second_retimer_parity(),
                lanes,
                lane_count,
            })
        })())
    }
}
