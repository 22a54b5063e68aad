//! Capability IDs: PCI Code and ID Assignment Specification 1.11 §2
//! (capabilities) and §3 (extended capabilities). The names match Linux
//! `<linux/pci_regs.h>` (`PCI_CAP_ID_*`, `PCI_EXT_CAP_ID_*`), which the
//! oracle test compares against. IDs are read from devices, so they are
//! open types: an unknown ID keeps its value and prints as such.

use core::fmt;

/// A capability ID (byte 0 of a capability in the first 256 bytes).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CapId(pub u8);

/// An extended capability ID (bits 15:0 of the header at 0x100 and up).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExtCapId(pub u16);

macro_rules! ids {
    ($ty:ident, $( $name:ident = $value:literal, $text:literal; )*) => {
        impl $ty {
            $( pub const $name: $ty = $ty($value); )*
            /// Every ID this crate names, for tables and the oracle test.
            pub const KNOWN: &'static [($ty, &'static str, &'static str)] =
                &[ $( ($ty($value), stringify!($name), $text), )* ];
            /// The constant's name (`EXP`, `ACS`), if the ID is known.
            pub fn name(self) -> Option<&'static str> {
                Self::KNOWN.iter().find(|k| k.0 == self).map(|k| k.1)
            }
            /// What the capability is, in words.
            pub fn describe(self) -> Option<&'static str> {
                Self::KNOWN.iter().find(|k| k.0 == self).map(|k| k.2)
            }
        }
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}({:#x})", n, self.0),
                    None => write!(f, "{}({:#x})", stringify!($ty), self.0),
                }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.describe() {
                    Some(d) => write!(f, "{d}"),
                    None => write!(f, "unknown capability {:#x}", self.0),
                }
            }
        }
    };
}

ids! { CapId,
    PM = 0x01, "Power Management";
    AGP = 0x02, "Accelerated Graphics Port";
    VPD = 0x03, "Vital Product Data";
    SLOTID = 0x04, "Slot Identification";
    MSI = 0x05, "MSI";
    CHSWP = 0x06, "CompactPCI Hot Swap";
    PCIX = 0x07, "PCI-X";
    HT = 0x08, "HyperTransport";
    VNDR = 0x09, "Vendor Specific";
    DBG = 0x0a, "Debug port";
    CCRC = 0x0b, "CompactPCI Central Resource Control";
    SHPC = 0x0c, "PCI Standard Hot-Plug Controller";
    SSVID = 0x0d, "Bridge Subsystem Vendor ID";
    AGP3 = 0x0e, "AGP 8x";
    SECDEV = 0x0f, "Secure Device";
    EXP = 0x10, "PCI Express";
    MSIX = 0x11, "MSI-X";
    SATA = 0x12, "SATA Data/Index Configuration";
    AF = 0x13, "PCI Advanced Features";
    EA = 0x14, "Enhanced Allocation";
}

ids! { ExtCapId,
    NULL = 0x00, "Null";
    ERR = 0x01, "Advanced Error Reporting";
    VC = 0x02, "Virtual Channel";
    DSN = 0x03, "Device Serial Number";
    PWR = 0x04, "Power Budgeting";
    RCLD = 0x05, "Root Complex Link Declaration";
    RCILC = 0x06, "Root Complex Internal Link Control";
    RCEC = 0x07, "Root Complex Event Collector";
    MFVC = 0x08, "Multi-Function Virtual Channel";
    VC9 = 0x09, "Virtual Channel (MFVC present)";
    RCRB = 0x0a, "Root Complex Register Block";
    VNDR = 0x0b, "Vendor Specific";
    CAC = 0x0c, "Configuration Access Correlation";
    ACS = 0x0d, "Access Control Services";
    ARI = 0x0e, "Alternative Routing-ID Interpretation";
    ATS = 0x0f, "Address Translation Service";
    SRIOV = 0x10, "Single Root I/O Virtualization";
    MRIOV = 0x11, "Multi-Root I/O Virtualization";
    MCAST = 0x12, "Multicast";
    PRI = 0x13, "Page Request Interface";
    REBAR = 0x15, "Resizable BAR";
    DPA = 0x16, "Dynamic Power Allocation";
    TPH = 0x17, "TPH Requester";
    LTR = 0x18, "Latency Tolerance Reporting";
    SECPCI = 0x19, "Secondary PCI Express";
    PMUX = 0x1a, "Protocol Multiplexing";
    PASID = 0x1b, "Process Address Space ID";
    DPC = 0x1d, "Downstream Port Containment";
    L1SS = 0x1e, "L1 PM Substates";
    PTM = 0x1f, "Precision Time Measurement";
    DVSEC = 0x23, "Designated Vendor-Specific";
    DLF = 0x25, "Data Link Feature";
    PL_16GT = 0x26, "Physical Layer 16.0 GT/s";
    LMR = 0x27, "Lane Margining at the Receiver";
    PL_32GT = 0x2a, "Physical Layer 32.0 GT/s";
    DOE = 0x2e, "Data Object Exchange";
    DEV3 = 0x2f, "Device 3";
    IDE = 0x30, "Integrity and Data Encryption";
}
