//! Power Management capability (ID 0x01): PCI Bus Power Management
//! Interface 1.2 §3.2, PCI Express Base 6.0 §7.5.2 (Linux `PCI_PM_*`).

use crate::cap_id::CapId;
use crate::generated::pcie::pci_pm_cap;
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
        let p: pci_pm_cap = self.view(cap.offset, usize::from(cap.offset)).ok()?;
        Some(PowerManagement {
            offset: cap.offset,
            version: p.pmc_version(),
            pme_clock: p.pmc_pme_clock(),
            dsi: p.pmc_dsi(),
            aux_current_ma: AUX_CURRENT_MA[usize::from(p.pmc_aux_current())],
            d1: p.pmc_d1(),
            d2: p.pmc_d2(),
            pme_support: p.pmc_pme_support(),
            power_state: p.pm_ctrl_state(),
            no_soft_reset: p.pm_ctrl_no_soft_reset(),
            pme_enable: p.pm_ctrl_pme_enable(),
            data_select: p.pm_ctrl_data_sel(),
            data_scale: p.pm_ctrl_data_scale(),
            pme_status: p.pm_ctrl_pme_status(),
        })
    }
}
