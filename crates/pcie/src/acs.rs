//! Access Control Services: PCI Express Base 6.0 §7.7.8. The capability
//! register (+0x04) says what a port can do; the control register (+0x06)
//! what is on. Request Redirect and Completion Redirect on a switch port
//! send peer-to-peer traffic up to the root complex (Linux
//! `drivers/pci/p2pdma.c`; `docs/SOURCES.md` §3.2), which is what
//! `marrow doctor` looks for.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_acs_cap;
use crate::header::Config;
use bitflags::bitflags;

pub const PCI_ACS_CAP: usize = 0x04;
pub const PCI_ACS_CTRL: usize = 0x06;
pub const PCI_ACS_EGRESS_CTL_V: usize = 0x08;

bitflags! {
    /// ACS capability and control bits (the same positions in both registers).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct AcsBits: u16 {
        /// Source Validation (`PCI_ACS_SV`).
        const SV = 0x0001;
        /// Translation Blocking (`PCI_ACS_TB`).
        const TB = 0x0002;
        /// P2P Request Redirect (`PCI_ACS_RR`).
        const RR = 0x0004;
        /// P2P Completion Redirect (`PCI_ACS_CR`).
        const CR = 0x0008;
        /// Upstream Forwarding (`PCI_ACS_UF`).
        const UF = 0x0010;
        /// P2P Egress Control (`PCI_ACS_EC`).
        const EC = 0x0020;
        /// Direct Translated P2P (`PCI_ACS_DT`).
        const DT = 0x0040;
        /// Enhanced Capability (PCIe 4.0+); bits 15:8 of the capability
        /// register are the egress control vector size, not flags.
        const ENHANCED = 0x0080;
    }
}

/// The control bits Linux p2pdma treats as fatal for peer-to-peer on any
/// bridge of the path (`pci_bridge_has_acs_redir`: RR, CR or EC), and that
/// `marrow doctor` clears in its fix.
pub const P2P_REDIRECT: AcsBits = AcsBits::RR.union(AcsBits::CR).union(AcsBits::EC);

/// A decoded ACS capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acs {
    pub offset: u16,
    /// What the port implements.
    pub capability: AcsBits,
    /// What is enabled (`ACSCtl`).
    pub control: AcsBits,
    /// Egress control vector size (capability bits 15:8); 0 means 256.
    pub egress_vector_bits: u16,
    /// The raw control register, including bits not named above.
    pub control_raw: u16,
}

impl Acs {
    /// Whether peer-to-peer requests are redirected to the root complex.
    pub fn redirects_p2p(&self) -> bool {
        self.control.intersects(AcsBits::RR | AcsBits::CR)
    }
}

impl Config<'_> {
    /// The ACS capability, if the function has one and the dump holds it.
    pub fn acs(&self) -> Option<Acs> {
        let cap = self.find_ext_cap(ExtCapId::ACS)?;
        let base = usize::from(cap.offset);
        let cap_raw = self.read_u16(base + PCI_ACS_CAP)?;
        let control_raw = self.read_u16(base + PCI_ACS_CTRL)?;
        let vector = (cap_raw >> pci_acs_cap::ACS_CAP_EGRESS_BITS_SHIFT) & pci_acs_cap::ACS_CAP_EGRESS_BITS_MASK;
        Some(Acs {
            offset: cap.offset,
            // Truncating drops the capability's egress vector size (15:8).
            capability: AcsBits::from_bits_truncate(cap_raw),
            // The control register's bit 7 is not Enhanced Capability (PCIe
            // 4.0 made it I/O Request Blocking Enable): only 6:0 read as these flags.
            control: AcsBits::from_bits_truncate(control_raw).difference(AcsBits::ENHANCED),
            egress_vector_bits: if vector == 0 { 256 } else { vector },
            control_raw,
        })
    }
}

/// Byte offset of the Egress Control Vector Size (capability bits 15:8).
pub const PCI_ACS_EGRESS_BITS: usize = 0x05;

/// The ACS Egress Control Vector (§7.7.8.4): present when the capability
/// has P2P Egress Control. Bit n set blocks peer-to-peer requests this port
/// would route to port (or function) n; what n numbers is implementation
/// specific for switches, function numbers for multi-function devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EgressControl {
    pub offset: u16,
    /// Egress Control Vector Size in bits (the field's 0 means 256).
    pub bits: u16,
    /// The vector, `bits.div_ceil(32)` dwords from +0x08; the rest 0.
    pub words: [u32; 8],
}

impl EgressControl {
    /// The ports (or functions) whose peer-to-peer traffic is blocked.
    pub fn blocked(&self) -> impl Iterator<Item = u16> + '_ {
        (0..self.bits).filter(|n| self.words[usize::from(n / 32)] & (1 << (n % 32)) != 0)
    }
}

impl Config<'_> {
    /// The egress control vector, when ACS has P2P Egress Control; an error
    /// when the dump ends before the vector's last dword.
    pub fn acs_egress_control(&self) -> Option<Result<EgressControl, crate::regs::CapError>> {
        use crate::generated::pcie::pci_acs_cap;
        let cap = self.find_ext_cap(ExtCapId::ACS)?;
        let base = usize::from(cap.offset);
        let v: pci_acs_cap = match self.view(cap.offset, base) {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        if !v.acs_cap_ec() {
            return None;
        }
        let bits = match v.acs_cap_egress_bits() {
            0 => 256,
            n => u16::from(n),
        };
        let mut words = [0u32; 8];
        for (i, w) in words.iter_mut().enumerate().take(usize::from(bits.div_ceil(32))) {
            let at = base + PCI_ACS_EGRESS_CTL_V + 4 * i;
            match self.read_u32(at) {
                Some(x) => *w = x,
                None => {
                    return Some(Err(crate::regs::CapError::Truncated {
                        offset: cap.offset,
                        need: at + 4 - base,
                        len: self.len(),
                    }));
                }
            }
        }
        // Bits past the vector size are reserved: keep them out.
        if bits % 32 != 0 {
            words[usize::from(bits / 32)] &= (1u32 << (bits % 32)) - 1;
        }
        Some(Ok(EgressControl { offset: cap.offset, bits, words }))
    }
}
