//! Reading a capability's registers through the layouts generated from
//! `hw-specs/pcie.toml`, and the error a present but unreadable capability
//! gives. Decoders return `None` for a capability that is absent and
//! `Some(Err(_))` for one that is present but cannot be what it says (the
//! dump ends inside it, or a length or count field is impossible), so a
//! tool can tell "not there" from "broken" (PCI Express Base 6.0 §7.6.3
//! gives the extended header every one of them starts with).

use crate::header::Config;
use core::fmt;
use zerocopy::{FromBytes, Immutable, KnownLayout};

/// Why a capability that is present could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapError {
    /// The dump ends before the registers at `offset..offset + need` do.
    Truncated { offset: u16, need: usize, len: usize },
    /// A length, size or count field no such capability can have.
    BadField { offset: u16, field: &'static str, value: u32 },
    /// A register block the capability's own fields place at `at..at + len`
    /// runs past `end`, where the capability must stop: the next capability
    /// above it, or the end of extended configuration space.
    Overrun { offset: u16, at: usize, len: usize, end: usize },
}

impl CapError {
    /// The offset of the capability the error is about.
    pub fn offset(&self) -> u16 {
        match *self {
            Self::Truncated { offset, .. } | Self::BadField { offset, .. } | Self::Overrun { offset, .. } => offset,
        }
    }
}

impl fmt::Display for CapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated { offset, need, len } => {
                write!(f, "capability at {offset:#x} needs {need} bytes but the dump ends at {len:#x}")
            }
            Self::BadField { offset, field, value } => {
                write!(f, "capability at {offset:#x}: {field} {value:#x} is impossible")
            }
            Self::Overrun { offset, at, len, end } => write!(
                f,
                "capability at {offset:#x}: the {len}-byte block at {at:#x} runs past the capability's end at {end:#x}"
            ),
        }
    }
}

impl<'a> Config<'a> {
    /// The generated view `T` of the bytes at `offset`, copied out; an error
    /// naming the capability at `cap` when the dump ends inside it.
    pub fn view<T: FromBytes + KnownLayout + Immutable>(&self, cap: u16, offset: usize) -> Result<T, CapError> {
        let need = core::mem::size_of::<T>();
        let truncated =
            CapError::Truncated { offset: cap, need: offset.saturating_sub(usize::from(cap)) + need, len: self.len() };
        let bytes = self.bytes().get(offset..).ok_or(truncated)?;
        T::read_from_prefix(bytes).map(|(v, _)| v).map_err(|_| truncated)
    }
}

/// Where a per-lane register count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneCount {
    /// The PCI Express capability's Maximum Link Width (LnkCap bits 9:4),
    /// which §7.7.3.4, §7.7.5.9 and §7.7.6.9 say sizes the lane arrays.
    LinkWidth,
    /// No usable link width: as many registers as fit before the next
    /// capability (or the end of the dump), at most [`MAX_LANES`].
    Bounded,
}

/// The widest link PCI Express defines (x32).
pub const MAX_LANES: usize = 32;

/// How many `stride`-byte per-lane registers start at `cap + first`, and
/// where that number came from. An error when the link width says more
/// lanes than the dump holds.
pub(crate) fn lane_registers(
    cfg: &Config<'_>,
    cap: &crate::walk::ExtCap,
    first: usize,
    stride: usize,
) -> Result<(usize, LaneCount), CapError> {
    let start = usize::from(cap.offset) + first;
    let width = cfg
        .express()
        .and_then(|e| e.link_capable)
        .map(|l| usize::from(l.width))
        .filter(|w| (1..=MAX_LANES).contains(w));
    if let Some(w) = width {
        let end = start + w * stride;
        if end > cfg.len() {
            return Err(CapError::Truncated {
                offset: cap.offset,
                need: end - usize::from(cap.offset),
                len: cfg.len(),
            });
        }
        return Ok((w, LaneCount::LinkWidth));
    }
    // The next capability may sit below this one (§7.6.3 fixes no order):
    // then only the end of the dump bounds the array.
    let end = match usize::from(cap.next) {
        n if n > start => n.min(cfg.len()),
        _ => cfg.len(),
    };
    Ok(((end.saturating_sub(start) / stride).min(MAX_LANES), LaneCount::Bounded))
}

/// The end of extended configuration space (PCI Express Base 6.0 §7.2.2).
pub const EXT_CONFIG_END: usize = 4096;

/// Where the extended capability `cap` must end: at the next capability
/// when that lies above it (§7.6.3 fixes no order, so one below bounds
/// nothing), else at the end of extended configuration space.
pub fn ext_cap_end(cap: &crate::walk::ExtCap) -> usize {
    match usize::from(cap.next) {
        n if n > usize::from(cap.offset) => n,
        _ => EXT_CONFIG_END,
    }
}

/// Whether `at..at + len` lies inside the capability `cap` and the dump:
/// an `Overrun` when it passes the capability's end, `Truncated` when the
/// dump ends first.
pub(crate) fn span_in_cap(cfg: &Config<'_>, cap: &crate::walk::ExtCap, at: usize, len: usize) -> Result<(), CapError> {
    let end = ext_cap_end(cap);
    let stop = at.saturating_add(len);
    if stop > end {
        return Err(CapError::Overrun { offset: cap.offset, at, len, end });
    }
    if stop > cfg.len() {
        return Err(CapError::Truncated { offset: cap.offset, need: stop - usize::from(cap.offset), len: cfg.len() });
    }
    Ok(())
}
