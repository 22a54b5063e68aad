//! Precision Time Measurement (extended capability 0x001f): PCI Express
//! Base 6.0 §7.9.15. Capability (+0x04: requester, responder, root, local
//! clock granularity) and control (+0x08: enable, root select, effective
//! granularity); the registers are `pci_ptm_cap` in `hw-specs/pcie.toml`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_ptm_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

/// A granularity field (§7.9.15.2): 0 not implemented (capability) or
/// unknown (control), 0xff more than 254 ns, otherwise nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    Unimplemented,
    Ns(u8),
    Above254Ns,
}

impl Granularity {
    pub fn from_field(v: u64) -> Self {
        match v as u8 {
            0 => Self::Unimplemented,
            u8::MAX => Self::Above254Ns,
            n => Self::Ns(n),
        }
    }
}

impl Config<'_> {
    /// The PTM capability's registers.
    pub fn ptm(&self) -> Option<Result<Block, CapError>> {
        self.ext_block(ExtCapId::PTM, &pci_ptm_cap::LAYOUT)
    }
}
