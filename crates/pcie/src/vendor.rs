//! Vendor-specific capabilities, decoded as their header plus the body's
//! bytes: the Vendor-Specific Extended Capability (VSEC, PCI Express Base
//! 6.0 §7.9.5, Linux `PCI_VNDR_HEADER`) whose VSEC ID means what the
//! function's vendor says it means, and the Vendor Specific capability in
//! the first 256 bytes (ID 0x09, PCI Local Bus 3.0 §6.8.4, PCIe §7.9.4)
//! with its length byte. Both give their own length, so the body is bounded
//! by it; a length that cannot hold the header, or runs past the dump (or
//! past 0x100 for the legacy one), is an error rather than a guess.

use crate::cap_id::{CapId, ExtCapId};
use crate::generated::pcie::{pci_vndr_cap, pci_vsec_cap};
use crate::header::{CONFIG_SPACE_LEGACY, Config};
use crate::regs::CapError;

pub const PCI_VNDR_HEADER: usize = 0x04;
/// `PCI_VNDR_HEADER_LEN(x)` is `(x >> 20) & 0xfff`.
pub const PCI_VSEC_HDR_LEN_SHIFT: u32 = 20;
/// The Vendor Specific capability's length byte (`PCI_CAP_FLAGS` in Linux).
pub const PCI_CAP_FLAGS: usize = 0x02;
/// Bytes before a VSEC's body: extended header and vendor-specific header.
pub const VSEC_HEADER_LEN: usize = 8;
/// Bytes before a Vendor Specific capability's body: ID, next, length.
pub const VNDR_HEADER_LEN: usize = 3;

/// One VSEC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vsec<'a> {
    pub offset: u16,
    /// The extended capability version.
    pub version: u8,
    pub id: u16,
    pub rev: u8,
    /// VSEC Length: bytes from the capability start, header included.
    pub len: u16,
    /// The bytes after the 8-byte header, up to `len`.
    pub body: Result<&'a [u8], CapError>,
}

/// One Vendor Specific capability in the first 256 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VendorCap<'a> {
    pub offset: u16,
    /// Capability Length: bytes from the capability start, header included.
    pub len: u8,
    /// The bytes after the 3-byte header, up to `len`.
    pub body: Result<&'a [u8], CapError>,
}

/// `len` bytes at `offset` minus a `header`, within `limit`.
fn body<'a>(
    bytes: &'a [u8],
    offset: u16,
    header: usize,
    len: usize,
    limit: usize,
    field: &'static str,
) -> Result<&'a [u8], CapError> {
    let start = usize::from(offset);
    if len < header {
        return Err(CapError::BadField { offset, field, value: len as u32 });
    }
    if start + len > limit {
        return Err(CapError::BadField { offset, field, value: len as u32 });
    }
    bytes.get(start + header..start + len).ok_or(CapError::Truncated { offset, need: len, len: bytes.len() })
}

impl<'a> Config<'a> {
    /// Every VSEC, in list order; an error for one whose header the dump cuts.
    pub fn vsecs(&self) -> impl Iterator<Item = Result<Vsec<'a>, CapError>> + 'a {
        let cfg = *self;
        self.ext_caps().filter_map(Result::ok).filter(|c| c.id == ExtCapId::VNDR).map(move |c| {
            let v: pci_vsec_cap = cfg.view(c.offset, usize::from(c.offset))?;
            let len = v.vsec_len();
            Ok(Vsec {
                offset: c.offset,
                version: c.version,
                id: v.vsec_id(),
                rev: v.vsec_rev(),
                len,
                body: body(
                    cfg.bytes(),
                    c.offset,
                    VSEC_HEADER_LEN,
                    usize::from(len),
                    crate::header::CONFIG_SPACE_EXTENDED,
                    "VSEC Length",
                ),
            })
        })
    }

    /// Every Vendor Specific capability (ID 0x09), in list order.
    pub fn vendor_caps(&self) -> impl Iterator<Item = Result<VendorCap<'a>, CapError>> + 'a {
        let cfg = *self;
        self.caps().filter_map(Result::ok).filter(|c| c.id == CapId::VNDR).map(move |c| {
            let v: pci_vndr_cap = cfg.view(c.offset, usize::from(c.offset))?;
            let len = v.vndr_len();
            Ok(VendorCap {
                offset: c.offset,
                len,
                body: body(
                    cfg.bytes(),
                    c.offset,
                    VNDR_HEADER_LEN,
                    usize::from(len),
                    CONFIG_SPACE_LEGACY,
                    "Capability Length",
                ),
            })
        })
    }
}
