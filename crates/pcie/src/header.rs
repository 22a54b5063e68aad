//! The configuration header: PCI Local Bus 3.0 §6.1 (type 0) and PCI-to-PCI
//! Bridge Architecture 1.2 §3.2 (type 1). Offsets are Linux's `PCI_*` names
//! from `<linux/pci_regs.h>`, checked by `tests/oracle`.

use crate::generated::pcie::pci_type0_header;
use core::fmt;

pub const PCI_VENDOR_ID: usize = 0x00;
pub const PCI_DEVICE_ID: usize = 0x02;
pub const PCI_COMMAND: usize = 0x04;
pub const PCI_STATUS: usize = 0x06;
pub const PCI_CLASS_REVISION: usize = 0x08;
pub const PCI_HEADER_TYPE: usize = 0x0e;
pub const PCI_BASE_ADDRESS_0: usize = 0x10;
pub const PCI_PRIMARY_BUS: usize = 0x18;
pub const PCI_SECONDARY_BUS: usize = 0x19;
pub const PCI_SUBORDINATE_BUS: usize = 0x1a;
pub const PCI_SUBSYSTEM_VENDOR_ID: usize = 0x2c;
pub const PCI_SUBSYSTEM_ID: usize = 0x2e;
pub const PCI_CAPABILITY_LIST: usize = 0x34;
/// CardBus bridges (type 2) keep their capability pointer here instead.
pub const PCI_CB_CAPABILITY_LIST: usize = 0x14;
/// And their subsystem IDs past the 64-byte header.
pub const PCI_CB_SUBSYSTEM_VENDOR_ID: usize = 0x40;
pub const PCI_CB_SUBSYSTEM_ID: usize = 0x42;

/// `PCI_STATUS` bit 4: the capability list at 0x34 is valid.
pub const PCI_STATUS_CAP_LIST: u16 = 0x10;
/// `PCI_HEADER_TYPE` bits 6:0; bit 7 is multi-function.
pub const PCI_HEADER_TYPE_MASK: u8 = 0x7f;
pub const PCI_HEADER_TYPE_NORMAL: u8 = 0;
pub const PCI_HEADER_TYPE_BRIDGE: u8 = 1;
pub const PCI_HEADER_TYPE_CARDBUS: u8 = 2;

pub const PCI_BASE_ADDRESS_SPACE_IO: u32 = 0x01;
pub const PCI_BASE_ADDRESS_MEM_TYPE_MASK: u32 = 0x06;
pub const PCI_BASE_ADDRESS_MEM_TYPE_64: u32 = 0x04;
pub const PCI_BASE_ADDRESS_MEM_PREFETCH: u32 = 0x08;
pub const PCI_BASE_ADDRESS_MEM_MASK: u32 = !0x0f;
pub const PCI_BASE_ADDRESS_IO_MASK: u32 = !0x03;

/// Size of the conventional (PCI 3.0) space and of the PCIe extended space.
pub const CONFIG_SPACE_LEGACY: usize = 256;
pub const CONFIG_SPACE_EXTENDED: usize = 4096;
/// The smallest dump that holds a whole header.
pub const HEADER_LEN: usize = 64;

/// A dump that cannot be a configuration space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// Fewer bytes than the 64-byte header.
    TooShort { len: usize },
    /// More bytes than a function's 4 KiB.
    TooLong { len: usize },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { len } => {
                write!(f, "config dump of {len} bytes is shorter than the {HEADER_LEN}-byte header")
            }
            Self::TooLong { len } => {
                write!(f, "config dump of {len} bytes is longer than a function's {CONFIG_SPACE_EXTENDED} bytes")
            }
        }
    }
}

/// One function's configuration space, as read (64 to 4096 bytes). Reads past
/// the end return `None`, never panic.
#[derive(Clone, Copy)]
pub struct Config<'a> {
    bytes: &'a [u8],
}

impl fmt::Debug for Config<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Config {{ {:04x}:{:04x} class {:06x}, {} bytes }}",
            self.vendor_id(),
            self.device_id(),
            self.class(),
            self.len()
        )
    }
}

impl<'a> Config<'a> {
    pub fn new(bytes: &'a [u8]) -> Result<Self, ConfigError> {
        if bytes.len() < HEADER_LEN {
            return Err(ConfigError::TooShort { len: bytes.len() });
        }
        if bytes.len() > CONFIG_SPACE_EXTENDED {
            return Err(ConfigError::TooLong { len: bytes.len() });
        }
        Ok(Self { bytes })
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Runs every decoder of this crate over the space and drops the
    /// results: what the fuzz target and the property tests feed arbitrary
    /// bytes, in one place so that a new decoder joins both at once.
    #[doc(hidden)]
    pub fn decode_all(&self) {
        let _ = (self.caps().count(), self.ext_caps().count());
        let _ = (self.express(), self.acs(), self.bars().count(), self.bus_numbers(), self.subsystem());
        let _ = (self.aer(), self.msi(), self.msix(), self.power_management(), self.ats(), self.pri(), self.pasid());
        let _ = (self.ltr().map(|l| (l.max_snoop_ns(), l.max_no_snoop_ns())), self.serial_number());
        let _ = self.resizable_bars().map(|r| r.supported().count()).sum::<usize>();
        let _ = (self.dpc(), self.sriov(), self.secondary_pcie(), self.data_link_feature());
        let _ = (self.physical_layer_16gt(), self.physical_layer_32gt());
        let _ = self.acs_egress_control().map(|e| e.map(|e| e.blocked().count()));
        let _ = (self.vsecs().count(), self.vendor_caps().count());
        let _ = (self.ptm(), self.ari(), self.dvsecs(), self.doe().count(), self.device3(), self.ide());
        let _ = self.ide_streams();
        let _ = (self.virtual_channel(), self.lane_margining(), self.enhanced_allocation(), self.bridge_subsystem());
        let _ = (self.expansion_rom(), self.bridge_windows(), self.header_block(), self.express_block());
        let _ = (self.l1ss(), self.capabilities_not_dumped(), self.first_rc_link());
        for c in self.caps().filter_map(Result::ok) {
            let at = c.offset;
            let _ = (self.vpd(at), self.debug_port(at), self.sata(at), self.advanced_features(at), self.virtio_cap(at));
        }
        for c in self.ext_caps().filter_map(Result::ok) {
            let _ = (self.rc_link(c.offset), self.multicast(c.offset));
        }
    }
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// Whether the dump reaches the extended space (0x100 and up).
    pub fn has_extended_space(&self) -> bool {
        self.bytes.len() > CONFIG_SPACE_LEGACY
    }

    pub fn read_u8(&self, offset: usize) -> Option<u8> {
        self.bytes.get(offset).copied()
    }
    pub fn read_u16(&self, offset: usize) -> Option<u16> {
        let b = self.bytes.get(offset..offset.checked_add(2)?)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn read_u32(&self, offset: usize) -> Option<u32> {
        let b = self.bytes.get(offset..offset.checked_add(4)?)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    // The header is always present (checked in `new`), so these cannot miss.
    fn hdr_u8(&self, offset: usize) -> u8 {
        self.bytes[offset]
    }
    fn hdr_u16(&self, offset: usize) -> u16 {
        u16::from_le_bytes([self.bytes[offset], self.bytes[offset + 1]])
    }
    fn hdr_u32(&self, offset: usize) -> u32 {
        u32::from_le_bytes([self.bytes[offset], self.bytes[offset + 1], self.bytes[offset + 2], self.bytes[offset + 3]])
    }

    pub fn vendor_id(&self) -> u16 {
        self.hdr_u16(PCI_VENDOR_ID)
    }
    pub fn device_id(&self) -> u16 {
        self.hdr_u16(PCI_DEVICE_ID)
    }
    pub fn command(&self) -> u16 {
        self.hdr_u16(PCI_COMMAND)
    }
    pub fn status(&self) -> u16 {
        self.hdr_u16(PCI_STATUS)
    }
    pub fn revision(&self) -> u8 {
        self.hdr_u8(PCI_CLASS_REVISION)
    }
    /// Base class, subclass and programming interface (24 bits).
    pub fn class(&self) -> u32 {
        self.hdr_u32(PCI_CLASS_REVISION) >> pci_type0_header::CLASS_CODE_SHIFT
    }
    /// Base class and subclass, without the programming interface: what
    /// Linux's `PCI_CLASS_*` names (`PCI_CLASS_BRIDGE_PCI` 0x0604).
    pub fn class_subclass(&self) -> u16 {
        (self.class() >> u8::BITS) as u16
    }
    /// The base class alone (`PCI_BASE_CLASS_*`: 0x02 network, 0x06 bridge).
    pub fn base_class(&self) -> u8 {
        (self.class_subclass() >> u8::BITS) as u8
    }
    pub fn header_type(&self) -> u8 {
        self.hdr_u8(PCI_HEADER_TYPE) & PCI_HEADER_TYPE_MASK
    }
    pub fn is_multifunction(&self) -> bool {
        (self.hdr_u8(PCI_HEADER_TYPE) >> pci_type0_header::HEADER_MULTIFUNCTION_SHIFT)
            & pci_type0_header::HEADER_MULTIFUNCTION_MASK
            != 0
    }
    pub fn is_bridge(&self) -> bool {
        self.header_type() == PCI_HEADER_TYPE_BRIDGE
    }
    /// Subsystem vendor and device: a type 0 header's at 0x2c, a CardBus
    /// bridge's at 0x40 (when the dump reaches it). Type 1 bridges keep
    /// theirs in the SSVID capability ([`Config::bridge_subsystem`]).
    pub fn subsystem(&self) -> Option<(u16, u16)> {
        match self.header_type() {
            PCI_HEADER_TYPE_NORMAL => Some((self.hdr_u16(PCI_SUBSYSTEM_VENDOR_ID), self.hdr_u16(PCI_SUBSYSTEM_ID))),
            PCI_HEADER_TYPE_CARDBUS => {
                Some((self.read_u16(PCI_CB_SUBSYSTEM_VENDOR_ID)?, self.read_u16(PCI_CB_SUBSYSTEM_ID)?))
            }
            _ => None,
        }
    }
    /// Primary, secondary and subordinate bus numbers of a bridge.
    pub fn bus_numbers(&self) -> Option<(u8, u8, u8)> {
        self.is_bridge()
            .then(|| (self.hdr_u8(PCI_PRIMARY_BUS), self.hdr_u8(PCI_SECONDARY_BUS), self.hdr_u8(PCI_SUBORDINATE_BUS)))
    }
    /// Where the header keeps its capability pointer: 0x34, or 0x14 in a
    /// CardBus bridge (`PCI_CB_CAPABILITY_LIST`).
    pub fn capability_pointer_offset(&self) -> usize {
        if self.header_type() == PCI_HEADER_TYPE_CARDBUS { PCI_CB_CAPABILITY_LIST } else { PCI_CAPABILITY_LIST }
    }
    /// The first capability pointer, if `PCI_STATUS_CAP_LIST` says there is a list.
    pub fn capability_pointer(&self) -> Option<u8> {
        (self.status() & PCI_STATUS_CAP_LIST != 0).then(|| self.hdr_u8(self.capability_pointer_offset()))
    }
    /// The status register says there is a capability list but the dump
    /// holds only the 64-byte header (`lspci -x` run without root): the
    /// list cannot be read, which is not an error in the device. lspci
    /// prints `Capabilities: <access denied>`.
    pub fn capabilities_not_dumped(&self) -> bool {
        self.capability_pointer().is_some_and(|p| p != 0) && self.len() <= HEADER_LEN
    }

    /// Number of BAR slots: six in a type 0 header, two in a bridge, one
    /// (the socket/ExCa base at 0x10) in a CardBus bridge, none else.
    pub fn bar_slots(&self) -> usize {
        match self.header_type() {
            PCI_HEADER_TYPE_NORMAL => 6,
            PCI_HEADER_TYPE_BRIDGE => 2,
            PCI_HEADER_TYPE_CARDBUS => 1,
            _ => 0,
        }
    }

    /// The BARs, a 64-bit one taking two slots. A dump holds the programmed
    /// address, not the size: sizing needs the all-ones write, which a
    /// dump cannot do, so sizes come from sysfs `resource` instead.
    pub fn bars(&self) -> Bars<'a> {
        Bars { config: *self, slot: 0 }
    }
}

/// One base address register as programmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bar {
    /// I/O space; `address` 0 means unassigned.
    Io { index: u8, address: u32 },
    /// Memory space below 4 GiB.
    Mem32 { index: u8, address: u32, prefetchable: bool },
    /// Memory space, 64-bit, spanning slots `index` and `index + 1`.
    Mem64 { index: u8, address: u64, prefetchable: bool },
    /// A 64-bit BAR in the last slot: its upper half would be outside the BARs.
    Mem64InLastSlot { index: u8 },
    /// Memory type 0b11, reserved by PCI 3.0 §6.2.5.1.
    ReservedType { index: u8, raw: u32 },
}

impl Bar {
    pub fn index(&self) -> u8 {
        match *self {
            Bar::Io { index, .. }
            | Bar::Mem32 { index, .. }
            | Bar::Mem64 { index, .. }
            | Bar::Mem64InLastSlot { index }
            | Bar::ReservedType { index, .. } => index,
        }
    }
    /// The address, `None` when the BAR cannot hold one.
    pub fn address(&self) -> Option<u64> {
        match *self {
            Bar::Io { address, .. } | Bar::Mem32 { address, .. } => Some(address.into()),
            Bar::Mem64 { address, .. } => Some(address),
            _ => None,
        }
    }
}

/// Iterator over a header's BARs.
#[derive(Debug, Clone)]
pub struct Bars<'a> {
    config: Config<'a>,
    slot: usize,
}

impl Iterator for Bars<'_> {
    type Item = Bar;
    fn next(&mut self) -> Option<Bar> {
        let slots = self.config.bar_slots();
        let mut raws = [0u32; 6];
        for (i, r) in raws.iter_mut().enumerate().take(slots) {
            *r = self.config.hdr_u32(PCI_BASE_ADDRESS_0 + 4 * i);
        }
        let (bar, used) = decode_bar(&raws[..slots], self.slot)?;
        self.slot += used;
        Some(bar)
    }
}

/// Decodes the BAR in slot `slot` of `raws` (the BAR registers as read, in
/// order: a header's, or SR-IOV's VF BARs) and says how many slots it spans.
/// `None` past the last slot. PCI 3.0 §6.2.5.1.
pub fn decode_bar(raws: &[u32], slot: usize) -> Option<(Bar, usize)> {
    let raw = *raws.get(slot)?;
    let index = slot as u8;
    if raw & PCI_BASE_ADDRESS_SPACE_IO != 0 {
        return Some((Bar::Io { index, address: raw & PCI_BASE_ADDRESS_IO_MASK }, 1));
    }
    let prefetchable = raw & PCI_BASE_ADDRESS_MEM_PREFETCH != 0;
    let address = raw & PCI_BASE_ADDRESS_MEM_MASK;
    Some(match raw & PCI_BASE_ADDRESS_MEM_TYPE_MASK {
        PCI_BASE_ADDRESS_MEM_TYPE_64 => match raws.get(slot + 1) {
            None => (Bar::Mem64InLastSlot { index }, 1),
            Some(&high) => {
                (Bar::Mem64 { index, address: (u64::from(high) << u32::BITS) | u64::from(address), prefetchable }, 2)
            }
        },
        0b110 => (Bar::ReservedType { index, raw }, 1),
        // 0b000 (32-bit) and 0b010 (below 1 MiB, PCI 2.x): both 32-bit.
        _ => (Bar::Mem32 { index, address, prefetchable }, 1),
    })
}
