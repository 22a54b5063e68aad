//! Bounded walks of the capability list (PCI Local Bus 3.0 §6.7, pointer at
//! 0x34, entries in 0x40..0x100) and the extended capability list (PCI
//! Express Base 6.0 §7.6.3, headers from 0x100). Each walk remembers the
//! dwords it has visited, so a loop ends in `WalkError::Loop`; pointers out
//! of range and dumps that end early end in an error too. A Null extended
//! header (ID 0) with a live next pointer, which VMMs use to hide
//! capabilities (see the H200 fixture), is yielded and followed, as `lspci`
//! and Linux's `pci_find_next_ext_capability` do.

use crate::cap_id::{CapId, ExtCapId};
use crate::generated::pcie::pcie_ext_cap_header as H;
use crate::header::{CONFIG_SPACE_LEGACY, Config};
use core::fmt;

/// First offset a capability may live at: the header ends at 0x40.
pub const CAP_MIN: usize = 0x40;
/// The low two bits of a capability pointer are reserved (PCI 3.0 §6.7,
/// PCIe §7.6.3): capabilities are dword aligned, and walkers clear them.
const CAP_POINTER_RESERVED: u32 = 0b11;

/// A capability in the first 256 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    pub offset: u16,
    pub id: CapId,
    /// The next pointer as read, low two bits cleared as §6.7 requires.
    pub next: u8,
}

/// An extended capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtCap {
    pub offset: u16,
    pub id: ExtCapId,
    pub version: u8,
    pub next: u16,
}

/// Why a walk stopped early.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WalkError {
    /// The list reached `offset` a second time.
    Loop { offset: u16 },
    /// A pointer into the header (below 0x40) or past the legacy space.
    PointerOutOfRange { from: u16, to: u16 },
    /// An extended pointer below 0x100 (§7.6.3: it must be 0 or ≥ 0x100).
    ExtPointerOutOfRange { from: u16, to: u16 },
    /// The dump ends before the capability at `offset` does.
    Truncated { offset: u16, len: usize },
    /// A capability ID of 0xff: reads of absent config space return ones.
    AllOnes { offset: u16 },
}

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Loop { offset } => write!(f, "capability list loops back to {offset:#x}"),
            Self::PointerOutOfRange { from, to } => {
                write!(f, "capability at {from:#x} points to {to:#x}, outside 0x40..0x100")
            }
            Self::ExtPointerOutOfRange { from, to } => {
                write!(f, "extended capability at {from:#x} points to {to:#x}, below 0x100")
            }
            Self::Truncated { offset, len } => {
                write!(f, "capability at {offset:#x} runs past the end of the {len}-byte dump")
            }
            Self::AllOnes { offset } => {
                write!(f, "capability at {offset:#x} reads as 0xff (absent or broken chain)")
            }
        }
    }
}

/// A set of visited dword slots in 4 KiB of config space.
#[derive(Debug, Clone)]
struct Visited([u64; 16]);

impl Visited {
    /// Marks `offset`'s dword; false if it was already marked.
    fn insert(&mut self, offset: usize) -> bool {
        let slot = (offset / 4) % 1024;
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        let fresh = self.0[word] & bit == 0;
        self.0[word] |= bit;
        fresh
    }
}

/// Iterator over the capability list. After an error it yields nothing more.
#[derive(Debug, Clone)]
pub struct Caps<'a> {
    config: Config<'a>,
    /// Where the next capability is, and where its pointer came from.
    next: Option<(usize, usize)>,
    visited: Visited,
}

impl<'a> Config<'a> {
    /// The capability list, or an empty walk if `PCI_STATUS_CAP_LIST` is clear.
    pub fn caps(&self) -> Caps<'a> {
        let next = self
            .capability_pointer()
            .map(|p| usize::from(p & !3))
            .filter(|&p| p != 0)
            .map(|p| (p, self.capability_pointer_offset()))
            // A header-only dump: the list is not in it (`capabilities_not_dumped`).
            .filter(|_| self.len() > crate::header::HEADER_LEN);
        Caps { config: *self, next, visited: Visited([0; 16]) }
    }

    /// The extended capability list; empty when the dump has no extended
    /// space or the dword at 0x100 is 0 or all ones (no list, §7.6.3).
    pub fn ext_caps(&self) -> ExtCaps<'a> {
        let next = self.has_extended_space().then_some((CONFIG_SPACE_LEGACY, 0));
        ExtCaps { config: *self, next, visited: Visited([0; 16]) }
    }

    /// The first capability with this ID, ignoring walk errors after it.
    pub fn find_cap(&self, id: CapId) -> Option<Cap> {
        self.caps().filter_map(Result::ok).find(|c| c.id == id)
    }

    /// The first extended capability with this ID.
    pub fn find_ext_cap(&self, id: ExtCapId) -> Option<ExtCap> {
        self.ext_caps().filter_map(Result::ok).find(|c| c.id == id)
    }
}

impl Iterator for Caps<'_> {
    type Item = Result<Cap, WalkError>;
    fn next(&mut self) -> Option<Self::Item> {
        let (offset, from) = self.next.take()?;
        let step = (|| {
            if !(CAP_MIN..CONFIG_SPACE_LEGACY).contains(&offset) {
                return Err(WalkError::PointerOutOfRange { from: from as u16, to: offset as u16 });
            }
            if !self.visited.insert(offset) {
                return Err(WalkError::Loop { offset: offset as u16 });
            }
            let (Some(id), Some(next)) = (self.config.read_u8(offset), self.config.read_u8(offset + 1)) else {
                return Err(WalkError::Truncated { offset: offset as u16, len: self.config.len() });
            };
            if id == u8::MAX {
                return Err(WalkError::AllOnes { offset: offset as u16 });
            }
            Ok(Cap { offset: offset as u16, id: CapId(id), next: next & !(CAP_POINTER_RESERVED as u8) })
        })();
        if let Ok(cap) = &step
            && cap.next != 0
        {
            self.next = Some((usize::from(cap.next), offset));
        }
        Some(step)
    }
}

/// Iterator over the extended capability list. After an error it yields nothing.
#[derive(Debug, Clone)]
pub struct ExtCaps<'a> {
    config: Config<'a>,
    next: Option<(usize, usize)>,
    visited: Visited,
}

impl Iterator for ExtCaps<'_> {
    type Item = Result<ExtCap, WalkError>;
    fn next(&mut self) -> Option<Self::Item> {
        let (offset, from) = self.next.take()?;
        if offset < CONFIG_SPACE_LEGACY {
            return Some(Err(WalkError::ExtPointerOutOfRange { from: from as u16, to: offset as u16 }));
        }
        let Some(header) = self.config.read_u32(offset) else {
            return Some(Err(WalkError::Truncated { offset: offset as u16, len: self.config.len() }));
        };
        // §7.6.3: a header of 0 at 0x100 means no list; all ones, no device.
        // lspci and Linux stop on either anywhere in the chain.
        if header == 0 || header == u32::MAX {
            return None;
        }
        if !self.visited.insert(offset) {
            return Some(Err(WalkError::Loop { offset: offset as u16 }));
        }
        let cap = ExtCap {
            offset: offset as u16,
            id: ExtCapId(((header >> H::EXT_CAP_ID_SHIFT) & H::EXT_CAP_ID_MASK) as u16),
            version: ((header >> H::EXT_CAP_VER_SHIFT) & H::EXT_CAP_VER_MASK) as u8,
            // As Linux's PCI_EXT_CAP_NEXT does.
            next: (((header >> H::EXT_CAP_NEXT_SHIFT) & H::EXT_CAP_NEXT_MASK) & !CAP_POINTER_RESERVED) as u16,
        };
        if cap.next != 0 {
            self.next = Some((usize::from(cap.next), offset));
        }
        Some(Ok(cap))
    }
}
