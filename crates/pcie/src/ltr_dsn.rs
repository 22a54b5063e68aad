//! Two small extended capabilities: Latency Tolerance Reporting (PCI
//! Express Base 6.0 §7.8.2) and Device Serial Number (§7.9.3).

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_ltr_cap as L;
use crate::header::Config;

pub const PCI_LTR_MAX_SNOOP_LAT: usize = 0x04;
pub const PCI_LTR_MAX_NOSNOOP_LAT: usize = 0x06;
/// DSN: lower dword of the serial number, then the upper (Linux has no names).
pub const DSN_LOWER: usize = 0x04;
pub const DSN_UPPER: usize = 0x08;

/// Each step of an LTR scale multiplies by 32 (§7.8.2.2).
const LTR_SCALE_LOG2: u32 = 5;
/// The largest scale the spec defines (2^25 ns); 6 and 7 are reserved.
const LTR_SCALE_MAX: u32 = 5;

/// An LTR latency register: its value scaled by 32^scale ns, `None` for a
/// reserved scale. Snoop and no-snoop registers share the layout.
pub fn ltr_latency_ns(reg: u16) -> Option<u64> {
    let scale = u32::from((reg >> L::MAX_SNOOP_SCALE_SHIFT) & L::MAX_SNOOP_SCALE_MASK);
    let value = (reg >> L::MAX_SNOOP_VALUE_SHIFT) & L::MAX_SNOOP_VALUE_MASK;
    (scale <= LTR_SCALE_MAX).then(|| u64::from(value) << (LTR_SCALE_LOG2 * scale))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ltr {
    pub offset: u16,
    pub max_snoop_raw: u16,
    pub max_no_snoop_raw: u16,
}

impl Ltr {
    pub fn max_snoop_ns(&self) -> Option<u64> {
        ltr_latency_ns(self.max_snoop_raw)
    }
    pub fn max_no_snoop_ns(&self) -> Option<u64> {
        ltr_latency_ns(self.max_no_snoop_raw)
    }
}

impl Config<'_> {
    pub fn ltr(&self) -> Option<Ltr> {
        let cap = self.find_ext_cap(ExtCapId::LTR)?;
        let b = usize::from(cap.offset);
        Some(Ltr {
            offset: cap.offset,
            max_snoop_raw: self.read_u16(b + PCI_LTR_MAX_SNOOP_LAT)?,
            max_no_snoop_raw: self.read_u16(b + PCI_LTR_MAX_NOSNOOP_LAT)?,
        })
    }

    /// The 64-bit serial number: upper dword at +8, lower at +4.
    pub fn serial_number(&self) -> Option<u64> {
        let cap = self.find_ext_cap(ExtCapId::DSN)?;
        let b = usize::from(cap.offset);
        Some((u64::from(self.read_u32(b + DSN_UPPER)?) << u32::BITS) | u64::from(self.read_u32(b + DSN_LOWER)?))
    }
}
