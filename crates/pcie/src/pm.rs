//! Power Management capability (ID 0x01): PCI Bus Power Management
//! Interface 1.2 §3.2, PCI Express Base 6.0 §7.5.2 (Linux `PCI_PM_*`).

use crate::cap_id::CapId;
use crate::header::Config;

pub const PCI_PM_PMC: usize = 0x02;
pub const PCI_PM_CTRL: usize = 0x04;

/// Aux current by `PMC` bits 8:6, in mA (PM 1.2 Table 3-3).
pub const AUX_CURRENT_MA: [u16; 8] = [0, 55, 100, 160, 220, 270, 320, 375];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerManagement {
    pub offset: u16,
    pub version: u8,
    pub pme_clock: bool,
    pub dsi: bool,
    pub aux_current_ma: u16,
    pub d1: bool,
    pub d2: bool,
    /// PME support from D0, D1, D2, D3hot, D3cold (bits 0..4).
    pub pme_support: u8,
    /// Current power state, 0..3 = D0..D3hot.
    pub power_state: u8,
    pub no_soft_reset: bool,
    pub pme_enable: bool,
    pub data_select: u8,
    pub data_scale: u8,
    pub pme_status: bool,
}

impl Config<'_> {
    pub fn power_management(&self) -> Option<PowerManagement> {
        let cap = self.find_cap(CapId::PM)?;
        let b = usize::from(cap.offset);
        let pmc = self.read_u16(b + PCI_PM_PMC)?;
        let csr = self.read_u16(b + PCI_PM_CTRL)?;
        Some(PowerManagement {
            offset: cap.offset,
            version: (pmc & 0x7) as u8,
            pme_clock: pmc & (1 << 3) != 0,
            dsi: pmc & (1 << 5) != 0,
            aux_current_ma: AUX_CURRENT_MA[usize::from((pmc >> 6) & 0x7)],
            d1: pmc & (1 << 9) != 0,
            d2: pmc & (1 << 10) != 0,
            pme_support: (pmc >> 11) as u8,
            power_state: (csr & 0x3) as u8,
            no_soft_reset: csr & (1 << 3) != 0,
            pme_enable: csr & (1 << 8) != 0,
            data_select: ((csr >> 9) & 0xf) as u8,
            data_scale: ((csr >> 13) & 0x3) as u8,
            pme_status: csr & (1 << 15) != 0,
        })
    }
}
