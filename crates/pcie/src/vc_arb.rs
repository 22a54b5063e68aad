//! The Virtual Channel capability's arbitration tables: PCI Express Base
//! 6.0 §7.9.1.9 (VC Arbitration Table, at capability + 16 × VC Arb Table
//! Offset of Port VC Capability 2) and §7.9.1.10 (a Port Arbitration Table
//! per VC resource, at capability + 16 × its Port Arbitration Table
//! Offset). An offset of 0 means no table. A VC table entry is 4 bits (VC
//! ID in 2:0); a port table entry is Port Arbitration Table Entry Size
//! bits (Port VC Capability 1, 1 << n). Phase 0 sits in the low bits of
//! the table's first dword. The table's length is that of the largest
//! table-based scheme the capability supports (as Linux `pci_vc.c` sizes
//! it to save and restore), since the registers exist whichever scheme is
//! selected; the selected scheme's phase count is kept beside it. Layouts
//! `pci_vc_arb_dword` and `pci_vc_pat{1,2,4,8}_dword` in `hw-specs/pcie.toml`.

use crate::generated::pcie::{
    pci_vc_arb_dword, pci_vc_pat1_dword, pci_vc_pat2_dword, pci_vc_pat4_dword, pci_vc_pat8_dword,
};
use crate::header::Config;
use crate::registers::Block;
use crate::regs::{CapError, span_in_cap};
use crate::walk::ExtCap;
use alloc::vec::Vec;
use marrow_layout::StructLayout;

/// Table offsets count 16-byte units (§7.9.1.3, §7.9.1.6).
pub const TABLE_OFFSET_UNIT: usize = 16;

/// Phases of each arbitration scheme by its bit in the capability fields
/// (and its value in the select fields): bit 0 is hardware-fixed
/// arbitration, which has no table; then WRR with 32, 64 and 128 phases,
/// time-based WRR with 128, WRR with 256 (the last two port arbitration only).
const PHASES: [usize; 6] = [0, 32, 64, 128, 128, 256];

/// One arbitration table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArbTable {
    /// Absolute config-space offset of the first entry.
    pub offset: u16,
    /// Bits per entry: 4 for the VC table, 1, 2, 4 or 8 for a port table.
    pub entry_bits: u8,
    /// Entries the table holds.
    pub phases: usize,
    /// Entries the selected scheme uses, when it is a table-based one.
    pub selected_phases: Option<usize>,
    /// The table's dwords through the generated layout.
    pub dwords: Vec<Block>,
    /// The bits of an entry that carry its value (VC ID 2:0 in the VC table).
    value_mask: u8,
}

impl ArbTable {
    /// Every entry in phase order: a VC ID (VC table) or a port number.
    pub fn entries(&self) -> Vec<u8> {
        let bits = u32::from(self.entry_bits);
        let per = 32 / bits as usize;
        let mask = ((1u64 << bits) - 1) as u8 & self.value_mask;
        self.dwords
            .iter()
            .flat_map(|d| {
                let raw = d.registers.first().map_or(0, |r| r.raw);
                (0..per).map(move |k| (raw >> (k as u32 * bits)) as u8 & mask)
            })
            .collect()
    }
}

/// The largest table scheme whose bit is set in `cap` (`None`: none).
fn largest(cap: u64, schemes: usize) -> Option<usize> {
    (1..schemes).rev().find(|&b| cap >> b & 1 != 0).map(|b| PHASES[b])
}

/// The phases of a select value, when it names a table scheme.
fn selected(select: u64, schemes: usize) -> Option<usize> {
    PHASES.get(select as usize).copied().filter(|&p| p != 0 && (select as usize) < schemes)
}

#[allow(clippy::too_many_arguments)]
fn read_table(
    cfg: &Config<'_>,
    cap: &ExtCap,
    units: u64,
    phases: usize,
    selected_phases: Option<usize>,
    entry_bits: u8,
    value_mask: u8,
    layout: &'static StructLayout,
) -> Result<ArbTable, CapError> {
    let at = usize::from(cap.offset) + units as usize * TABLE_OFFSET_UNIT;
    let len = phases * usize::from(entry_bits) / 8;
    span_in_cap(cfg, cap, at, len)?;
    let dwords = (0..len / 4).map(|i| cfg.block(layout, at + 4 * i, cap.offset)).collect::<Result<Vec<_>, _>>()?;
    Ok(ArbTable { offset: at as u16, entry_bits, phases, selected_phases, dwords, value_mask })
}

/// The VC Arbitration Table of the VC capability `cap` whose port
/// registers are `port` (`pci_vc_cap`): `None` when its offset is 0 or the
/// port supports no table-based VC arbitration.
pub(crate) fn vc_arb_table(cfg: &Config<'_>, cap: &ExtCap, port: &Block) -> Option<Result<ArbTable, CapError>> {
    let units = port.get("vc_cap2_arb_off").filter(|&u| u != 0)?;
    // VC arbitration schemes are bits 0-3 only (§7.9.1.3).
    let phases = largest(port.get("vc_cap2_arb_cap").unwrap_or(0), 4)?;
    let sel = selected(port.get("vc_ctrl_arb_select").unwrap_or(0), 4);
    Some(read_table(cfg, cap, units, phases, sel, 4, 0x7, &pci_vc_arb_dword::LAYOUT))
}

/// The Port Arbitration Table of the VC resource `res` (`pci_vc_res`):
/// `None` when its offset is 0 or it supports no table-based arbitration.
pub(crate) fn port_arb_table(
    cfg: &Config<'_>,
    cap: &ExtCap,
    port: &Block,
    res: &Block,
) -> Option<Result<ArbTable, CapError>> {
    let units = res.get("vc_res_pat_offset").filter(|&u| u != 0)?;
    let phases = largest(res.get("vc_res_pat_cap").unwrap_or(0), 6)?;
    let sel = selected(res.get("vc_res_arb_select").unwrap_or(0), 6);
    let (bits, layout) = match port.get("vc_cap1_arb_size").unwrap_or(0) {
        0 => (1, &pci_vc_pat1_dword::LAYOUT),
        1 => (2, &pci_vc_pat2_dword::LAYOUT),
        2 => (4, &pci_vc_pat4_dword::LAYOUT),
        _ => (8, &pci_vc_pat8_dword::LAYOUT),
    };
    // A port number may fill its whole entry.
    Some(read_table(cfg, cap, units, phases, sel, bits, u8::MAX, layout))
}
