//! Run-time descriptions of the layouts that `cargo xtask codegen` generates
//! from `hw-specs/*.toml`.
//!
//! Every generated struct carries a [`StructLayout`] so that tests can compare
//! it with an outside oracle (rdma-core's `mlx5dv.h`, Linux's `pci_regs.h`)
//! and decoders can print fields by their spec names without a second table.
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use core::fmt;

/// Which side writes a layout. The device model (softnic) plays the device,
/// so raw types are readable and writable both ways; the direction says who
/// produces the bytes on real hardware, and therefore which values must be
/// treated as untrusted and kept open (unknown codes preserved).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Software writes, the device reads (WQE segments, doorbells).
    HostToDevice,
    /// The device writes, software reads (CQEs).
    DeviceToHost,
    /// Both sides write (shared control blocks).
    Both,
}

/// Byte order of a field as stored in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endian {
    /// Big endian (network order): every mlx5 multi-byte field.
    Big,
    /// Little endian: PCIe configuration space.
    Little,
    /// A single byte or a byte array.
    None,
}

/// A bit range `hi:lo` inside a field, as the spec writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BitLayout {
    /// Spec name of the bit field.
    pub name: &'static str,
    /// Most significant bit, inclusive.
    pub hi: u8,
    /// Least significant bit, inclusive.
    pub lo: u8,
    /// Name of the open enumeration the value belongs to, if any.
    pub enumeration: Option<&'static str>,
    /// One-line description.
    pub doc: &'static str,
}

impl BitLayout {
    /// Width in bits.
    pub const fn width(&self) -> u32 {
        (self.hi - self.lo) as u32 + 1
    }

    /// Extract this bit range from the field's value.
    pub const fn extract(&self, field: u64) -> u64 {
        get_bits(field, self.hi as u32, self.lo as u32)
    }
}

/// One field of a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldLayout {
    /// Spec name (`opmod_idx_opcode`, `qpn_ds`, `op_own`…).
    pub name: &'static str,
    /// Byte offset from the start of the struct.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// Byte order.
    pub endian: Endian,
    /// Reserved: written as zero, ignored when read.
    pub reserved: bool,
    /// Bit fields, most significant first.
    pub bits: &'static [BitLayout],
    /// One-line description.
    pub doc: &'static str,
    /// Where the layout comes from.
    pub cite: &'static str,
}

impl FieldLayout {
    /// Read the field from `bytes` (the whole struct) as an unsigned integer.
    /// Returns `None` for byte arrays wider than 8 bytes or short input.
    pub fn read(&self, bytes: &[u8]) -> Option<u64> {
        let raw = bytes.get(self.offset..self.offset + self.size)?;
        if self.size > 8 {
            return None;
        }
        let mut v = 0u64;
        match self.endian {
            Endian::Little => {
                for b in raw.iter().rev() {
                    v = (v << u8::BITS) | u64::from(*b);
                }
            }
            Endian::Big | Endian::None => {
                for b in raw {
                    v = (v << u8::BITS) | u64::from(*b);
                }
            }
        }
        Some(v)
    }
}

/// A whole layout: a struct generated from `hw-specs/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StructLayout {
    /// Spec name (`mlx5_wqe_ctrl_seg`).
    pub name: &'static str,
    /// Size in bytes.
    pub size: usize,
    /// Who writes it.
    pub direction: Direction,
    /// Fields in offset order; they tile the struct with no gap.
    pub fields: &'static [FieldLayout],
    /// One-line description.
    pub doc: &'static str,
    /// Where the layout comes from.
    pub cite: &'static str,
}

impl StructLayout {
    /// Look a field up by its spec name.
    pub fn field(&self, name: &str) -> Option<&'static FieldLayout> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// A value does not fit the bit field it was written to. Setters of fields
/// narrower than their Rust type return this instead of masking silently.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldOverflow {
    /// Spec name of the bit field.
    pub field: &'static str,
    /// Width of the field in bits.
    pub width: u32,
    /// The value that did not fit.
    pub value: u64,
}

impl fmt::Display for FieldOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "value {:#x} does not fit the {}-bit field `{}`", self.value, self.width, self.field)
    }
}

impl core::error::Error for FieldOverflow {}

/// Mask of `width` low bits (`width` ≤ 64).
pub const fn low_mask(width: u32) -> u64 {
    if width >= 64 { u64::MAX } else { (1u64 << width) - 1 }
}

/// Bits `hi:lo` of `v`.
pub const fn get_bits(v: u64, hi: u32, lo: u32) -> u64 {
    (v >> lo) & low_mask(hi - lo + 1)
}

/// `v` with bits `hi:lo` replaced by `field`; `Err` when `field` is too wide.
pub const fn set_bits(v: u64, hi: u32, lo: u32, field: u64, name: &'static str) -> Result<u64, FieldOverflow> {
    let width = hi - lo + 1;
    let mask = low_mask(width);
    if field & !mask != 0 {
        return Err(FieldOverflow { field: name, width, value: field });
    }
    Ok((v & !(mask << lo)) | (field << lo))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_get_bits_round_trip() {
        let v = set_bits(0xffff_ffff, 23, 8, 0x1234, "wqe_index").unwrap();
        assert_eq!(v, 0xff12_34ff);
        assert_eq!(get_bits(v, 23, 8), 0x1234);
        assert_eq!(get_bits(v, 31, 24), 0xff);
    }

    #[test]
    fn set_bits_refuses_overflow_instead_of_masking() {
        let e = set_bits(0, 5, 0, 64, "ds").unwrap_err();
        assert_eq!(e, FieldOverflow { field: "ds", width: 6, value: 64 });
        assert_eq!(set_bits(0, 5, 0, 63, "ds"), Ok(63));
    }

    #[test]
    fn full_width_masks() {
        assert_eq!(low_mask(64), u64::MAX);
        assert_eq!(get_bits(u64::MAX, 63, 0), u64::MAX);
    }
}
