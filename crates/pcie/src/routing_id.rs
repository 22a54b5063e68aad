//! Routing IDs: PCI Express Base 6.0 §2.2.4.2 (ID-based routing). A
//! Requester, Completer or DPC Error Source ID is the Bus Number in bits
//! 15:8, the Device Number in 7:3 and the Function Number in 2:0; Linux splits its `devfn` the same
//! way (`PCI_SLOT`, `PCI_FUNC` in `<linux/pci.h>`). With ARI (§6.13) the
//! device bits join the function's, but lspci and the kernel still print
//! such an ID as `bb:dd.f`, and so does [`RoutingId`]'s `Display`.

use core::fmt;

const BUS_SHIFT: u32 = 8;
const DEVICE_SHIFT: u32 = 3;
const DEVICE_MASK: u16 = 0x1f;
const FUNCTION_MASK: u16 = 0x7;

/// A 16-bit routing ID as carried in TLP headers and capability registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RoutingId(pub u16);

impl RoutingId {
    pub fn bus(self) -> u8 {
        (self.0 >> BUS_SHIFT) as u8
    }
    /// Device Number (Linux's `PCI_SLOT`).
    pub fn device(self) -> u8 {
        ((self.0 >> DEVICE_SHIFT) & DEVICE_MASK) as u8
    }
    /// Function Number without ARI (Linux's `PCI_FUNC`).
    pub fn function(self) -> u8 {
        (self.0 & FUNCTION_MASK) as u8
    }
}

/// `bb:dd.f`, as lspci and the kernel's messages print it.
impl fmt::Display for RoutingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus(), self.device(), self.function())
    }
}
