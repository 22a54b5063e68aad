//! L1 PM Substates (extended capability 0x001e): PCI Express Base 6.0
//! §7.8.3. Capabilities (which substates, common-mode restore time, port
//! T_POWER_ON), Control 1 (enables, T_COMMON_MODE, LTR L1.2 threshold) and
//! Control 2 (T_POWER_ON); layout `pci_l1ss_cap` in `hw-specs/pcie.toml`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_l1ss_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

/// T_POWER_ON in microseconds from its scale and value fields
/// (§7.8.3.2: scale 0 2 us, 1 10 us, 2 100 us, 3 reserved).
pub fn t_power_on_us(scale: u64, value: u64) -> Option<u64> {
    [2, 10, 100].get(scale as usize).map(|s| s * value)
}

/// The LTR L1.2 threshold in nanoseconds (§7.8.3.3: value × 32^scale ns,
/// scales above 5 reserved).
pub fn ltr_l12_threshold_ns(scale: u64, value: u64) -> Option<u64> {
    (scale <= 5).then(|| value << (5 * scale))
}

impl Config<'_> {
    /// The L1 PM Substates capability's registers.
    pub fn l1ss(&self) -> Option<Result<Block, CapError>> {
        self.ext_block(ExtCapId::L1SS, &pci_l1ss_cap::LAYOUT)
    }
}
