//! The PCI Express capability (ID 0x10): PCI Express Base 6.0 §7.5.3. Only
//! the registers peer-to-peer bring-up reads: the port type, payload and
//! read-request sizes, the link's capable and negotiated speed and width,
//! and AtomicOp completion/request (GPU-initiated atomics need them on the
//! whole path). Names follow Linux `PCI_EXP_*`.

use crate::cap_id::CapId;
use crate::generated::pcie::pci_exp_cap as X;
use crate::header::Config;
use core::fmt;

pub const PCI_EXP_FLAGS: usize = 0x02;
pub const PCI_EXP_DEVCAP: usize = 0x04;
pub const PCI_EXP_DEVCTL: usize = 0x08;
pub const PCI_EXP_DEVSTA: usize = 0x0a;
pub const PCI_EXP_LNKCAP: usize = 0x0c;
pub const PCI_EXP_LNKCTL: usize = 0x10;
pub const PCI_EXP_LNKSTA: usize = 0x12;
pub const PCI_EXP_DEVCAP2: usize = 0x24;
pub const PCI_EXP_DEVCTL2: usize = 0x28;
pub const PCI_EXP_LNKCAP2: usize = 0x2c;

pub const PCI_EXP_FLAGS_VERS: u16 = 0x000f;
pub const PCI_EXP_FLAGS_TYPE: u16 = 0x00f0;
pub const PCI_EXP_DEVCAP_PAYLOAD: u32 = 0x0000_0007;
pub const PCI_EXP_DEVCTL_PAYLOAD: u16 = 0x00e0;
pub const PCI_EXP_DEVCTL_READRQ: u16 = 0x7000;
pub const PCI_EXP_LNKCAP_SLS: u32 = 0x0000_000f;
pub const PCI_EXP_LNKCAP_MLW: u32 = 0x0000_03f0;
pub const PCI_EXP_LNKSTA_CLS: u16 = 0x000f;
pub const PCI_EXP_LNKSTA_NLW: u16 = 0x03f0;
pub const PCI_EXP_DEVCAP2_ATOMIC_ROUTE: u32 = 0x0000_0040;
pub const PCI_EXP_DEVCAP2_ATOMIC_COMP32: u32 = 0x0000_0080;
pub const PCI_EXP_DEVCAP2_ATOMIC_COMP64: u32 = 0x0000_0100;
pub const PCI_EXP_DEVCAP2_ATOMIC_COMP128: u32 = 0x0000_0200;
pub const PCI_EXP_DEVCTL2_ATOMIC_REQ: u16 = 0x0040;
pub const PCI_EXP_DEVCTL2_ATOMIC_EGRESS_BLOCK: u16 = 0x0080;

/// Device/Port Type (`PCI_EXP_FLAGS_TYPE` >> 4), §7.5.3.2. Open: unknown
/// values are kept.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PortType(pub u8);

impl PortType {
    pub const ENDPOINT: Self = Self(0x0);
    pub const LEG_END: Self = Self(0x1);
    pub const ROOT_PORT: Self = Self(0x4);
    pub const UPSTREAM: Self = Self(0x5);
    pub const DOWNSTREAM: Self = Self(0x6);
    pub const PCI_BRIDGE: Self = Self(0x7);
    pub const PCIE_BRIDGE: Self = Self(0x8);
    pub const RC_END: Self = Self(0x9);
    pub const RC_EC: Self = Self(0xa);

    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::ENDPOINT => "Endpoint",
            Self::LEG_END => "Legacy Endpoint",
            Self::ROOT_PORT => "Root Port",
            Self::UPSTREAM => "Upstream Port",
            Self::DOWNSTREAM => "Downstream Port",
            Self::PCI_BRIDGE => "PCIe to PCI/PCI-X Bridge",
            Self::PCIE_BRIDGE => "PCI/PCI-X to PCIe Bridge",
            Self::RC_END => "Root Complex Integrated Endpoint",
            Self::RC_EC => "Root Complex Event Collector",
            _ => return None,
        })
    }
    /// An endpoint with a link (§7.5.3.2: PCI Express or Legacy Endpoint).
    pub fn is_endpoint(self) -> bool {
        matches!(self, Self::ENDPOINT | Self::LEG_END)
    }
    /// A port whose link partner is below it (§7.5.3.2: Root Port,
    /// Downstream Port, PCI/PCI-X to PCI Express Bridge).
    pub fn faces_downstream(self) -> bool {
        matches!(self, Self::ROOT_PORT | Self::DOWNSTREAM | Self::PCIE_BRIDGE)
    }
    /// A function with the Root registers (§7.5.3.12: Root Ports and Root
    /// Complex Event Collectors).
    pub fn has_root_registers(self) -> bool {
        matches!(self, Self::ROOT_PORT | Self::RC_EC)
    }
    /// Whether this function has a link of its own (§7.5.3.6: integrated
    /// endpoints and event collectors do not).
    pub fn has_link(self) -> bool {
        !matches!(self, Self::RC_END | Self::RC_EC)
    }
}

impl fmt::Debug for PortType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "PortType({:#x})", self.0),
        }
    }
}

/// A link speed code (`LNKCAP_SLS`, `LNKSTA_CLS`), §7.5.3.6 and §7.5.3.18.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LinkSpeed(pub u8);

impl LinkSpeed {
    /// Transfer rate in GT/s as text, the way `lspci` prints it.
    pub fn gts(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "2.5GT/s",
            2 => "5GT/s",
            3 => "8GT/s",
            4 => "16GT/s",
            5 => "32GT/s",
            6 => "64GT/s",
            _ => return None,
        })
    }
}

impl fmt::Debug for LinkSpeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.gts() {
            Some(s) => write!(f, "{s}"),
            None => write!(f, "LinkSpeed({})", self.0),
        }
    }
}

/// Speed and width of a link, capable or negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    pub speed: LinkSpeed,
    pub width: u8,
}

/// The decoded PCI Express capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Express {
    pub offset: u16,
    pub version: u8,
    pub port_type: PortType,
    /// Max payload the function supports, bytes.
    pub max_payload_supported: u32,
    /// Max payload programmed, bytes.
    pub max_payload: u32,
    /// Max read request programmed, bytes.
    pub max_read_request: u32,
    /// `None` for functions with no link, or a dump that stops short.
    pub link_capable: Option<Link>,
    pub link_status: Option<Link>,
    pub port_number: Option<u8>,
    /// DevCap2 (version 2 capabilities only).
    pub devcap2: Option<u32>,
    pub devctl2: Option<u16>,
}

impl Express {
    pub fn atomic_completer_64(&self) -> bool {
        self.devcap2.is_some_and(|d| d & PCI_EXP_DEVCAP2_ATOMIC_COMP64 != 0)
    }
    pub fn atomic_requester_enabled(&self) -> bool {
        self.devctl2.is_some_and(|d| d & PCI_EXP_DEVCTL2_ATOMIC_REQ != 0)
    }
}

impl Config<'_> {
    /// The PCI Express capability; `None` for conventional PCI functions.
    pub fn express(&self) -> Option<Express> {
        let cap = self.find_cap(CapId::EXP)?;
        let base = usize::from(cap.offset);
        let flags = self.read_u16(base + PCI_EXP_FLAGS)?;
        let devcap = self.read_u32(base + PCI_EXP_DEVCAP)?;
        let devctl = self.read_u16(base + PCI_EXP_DEVCTL)?;
        let port_type = PortType(((flags & PCI_EXP_FLAGS_TYPE) >> X::FLAGS_TYPE_SHIFT) as u8);
        let version = (flags & PCI_EXP_FLAGS_VERS) as u8;
        let (mut link_capable, mut link_status, mut port_number) = (None, None, None);
        if port_type.has_link()
            && let (Some(lnkcap), Some(lnksta)) =
                (self.read_u32(base + PCI_EXP_LNKCAP), self.read_u16(base + PCI_EXP_LNKSTA))
        {
            link_capable = Some(Link {
                speed: LinkSpeed((lnkcap & PCI_EXP_LNKCAP_SLS) as u8),
                width: ((lnkcap & PCI_EXP_LNKCAP_MLW) >> X::LNKCAP_MLW_SHIFT) as u8,
            });
            link_status = Some(Link {
                speed: LinkSpeed((lnksta & PCI_EXP_LNKSTA_CLS) as u8),
                width: ((lnksta & PCI_EXP_LNKSTA_NLW) >> X::LNKSTA_NLW_SHIFT) as u8,
            });
            port_number = Some((lnkcap >> X::LNKCAP_PORT_SHIFT) as u8);
        }
        let v2 = version >= 2;
        Some(Express {
            offset: cap.offset,
            version,
            port_type,
            max_payload_supported: 128 << (devcap & PCI_EXP_DEVCAP_PAYLOAD),
            max_payload: 128 << ((devctl & PCI_EXP_DEVCTL_PAYLOAD) >> X::DEVCTL_PAYLOAD_SHIFT),
            max_read_request: 128 << ((devctl & PCI_EXP_DEVCTL_READRQ) >> X::DEVCTL_READRQ_SHIFT),
            link_capable,
            link_status,
            port_number,
            devcap2: if v2 { self.read_u32(base + PCI_EXP_DEVCAP2) } else { None },
            devctl2: if v2 { self.read_u16(base + PCI_EXP_DEVCTL2) } else { None },
        })
    }
}
