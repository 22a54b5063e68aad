//! Physical Layer 32.0 GT/s capability: PCI Express Base 6.0 §7.7.6. Gen5
//! links (H100/H200 and ConnectX-7 run at 32.0 GT/s) equalize a third time;
//! besides the phase results this register set carries equalization
//! bypass, "no equalization needed", precoding, and the Modified TS data
//! that alternate protocols negotiate with. Linux's `pci_regs.h` in Debian
//! 12 does not know this capability yet.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_pl32_cap;
use crate::header::Config;
use crate::pl16::{EqStatus, LanePresets, lane_presets};
use crate::regs::{CapError, LaneCount};
use alloc::vec::Vec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhysicalLayer32 {
    pub offset: u16,
    pub capabilities_raw: u32,
    pub eq_bypass_supported: bool,
    pub no_eq_needed_supported: bool,
    /// Modified TS usage modes 0, 1, 2 supported (bits 0..2).
    pub modified_ts_modes: u8,
    pub control_raw: u32,
    pub eq_bypass_disabled: bool,
    pub no_eq_needed_disabled: bool,
    pub modified_ts_mode_selected: u8,
    pub status_raw: u32,
    pub equalization: EqStatus,
    pub modified_ts_received: bool,
    pub enhanced_link_control: u8,
    pub precoding_on: bool,
    pub precode_request: bool,
    pub no_eq_needed_received: bool,
    /// Received and transmitted Modified TS Data 1 and 2 (§7.7.6.5 to §7.7.6.8).
    pub received_modified_ts: [u32; 2],
    pub transmitted_modified_ts: [u32; 2],
    pub lanes: Vec<LanePresets>,
    pub lane_count: LaneCount,
}

impl Config<'_> {
    pub fn physical_layer_32gt(&self) -> Option<Result<PhysicalLayer32, CapError>> {
        let cap = self.find_ext_cap(ExtCapId::PL_32GT)?;
        Some((|| {
            let v: pci_pl32_cap = self.view(cap.offset, usize::from(cap.offset))?;
            let (lanes, lane_count) = lane_presets(self, &cap)?;
            Ok(PhysicalLayer32 {
                offset: cap.offset,
                capabilities_raw: v.pl32_cap(),
                eq_bypass_supported: v.pl32_cap_eq_bypass(),
                no_eq_needed_supported: v.pl32_cap_no_eq_needed(),
                // Bit N of the set: Modified TS Usage Mode N supported.
                modified_ts_modes: [v.pl32_cap_mts_mode0(), v.pl32_cap_mts_mode1(), v.pl32_cap_mts_mode2()]
                    .into_iter()
                    .enumerate()
                    .fold(0, |set, (n, on)| set | u8::from(on) << n),
                control_raw: v.pl32_ctl(),
                eq_bypass_disabled: v.pl32_ctl_eq_bypass_disable(),
                no_eq_needed_disabled: v.pl32_ctl_no_eq_needed_disable(),
                modified_ts_mode_selected: v.pl32_ctl_mts_mode(),
                status_raw: v.pl32_status(),
                equalization: EqStatus {
                    complete: v.pl32_status_eq_complete(),
                    phase1: v.pl32_status_eq_phase1(),
                    phase2: v.pl32_status_eq_phase2(),
                    phase3: v.pl32_status_eq_phase3(),
                    request: v.pl32_status_eq_request(),
                },
                modified_ts_received: v.pl32_status_mts_received(),
                enhanced_link_control: v.pl32_status_enh_link_ctl(),
                precoding_on: v.pl32_status_precoding_on(),
                precode_request: v.pl32_status_precode_request(),
                no_eq_needed_received: v.pl32_status_no_eq_needed_rx(),
                received_modified_ts: [v.pl32_rx_mts1(), v.pl32_rx_mts2()],
                transmitted_modified_ts: [v.pl32_tx_mts1(), v.pl32_tx_mts2()],
                lanes,
                lane_count,
            })
        })())
    }
}
