//! Registers read through the `LAYOUT` tables generated from
//! `hw-specs/pcie.toml`: a capability's fields by their spec names, with
//! their absolute config-space offsets and every bit range the spec file
//! names. This is how `decode --pcie --json` gives every field without a
//! second table, and how a capability with no typed decoder still prints
//! in the spec's own vocabulary (PCI Express Base 6.0 §7.6.3 gives the
//! header each extended capability starts with; the rest is per layout).

use crate::header::Config;
use crate::regs::CapError;
use alloc::vec::Vec;
use marrow_layout::{BitLayout, FieldLayout, StructLayout};

/// One register as read: the field of its layout, where it sits in config
/// space, and its value (little endian, as config space is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Register {
    pub layout: &'static FieldLayout,
    /// Absolute config-space offset.
    pub offset: u16,
    pub raw: u64,
}

impl Register {
    pub fn name(&self) -> &'static str {
        self.layout.name
    }
    /// Width in bytes (1, 2, 4 or 8).
    pub fn size(&self) -> usize {
        self.layout.size
    }
    /// The value of the bit range `bits` names, if this register has it.
    pub fn get(&self, bits: &str) -> Option<u64> {
        self.layout.bits.iter().find(|b| b.name == bits).map(|b| b.extract(self.raw))
    }
    /// Every named bit range with its value, most significant first.
    pub fn fields(&self) -> impl Iterator<Item = (&'static BitLayout, u64)> + '_ {
        self.layout.bits.iter().map(|b| (b, b.extract(self.raw)))
    }
}

/// The registers of one layout instance (a capability, a per-lane entry,
/// an Enhanced Allocation entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub layout: &'static StructLayout,
    /// Absolute config-space offset of the layout's byte 0.
    pub offset: u16,
    pub registers: Vec<Register>,
}

impl Block {
    pub fn register(&self, name: &str) -> Option<&Register> {
        self.registers.iter().find(|r| r.name() == name)
    }
    /// The bit range `bits` of whichever register names it.
    pub fn get(&self, bits: &str) -> Option<u64> {
        self.registers.iter().find_map(|r| r.get(bits))
    }
    /// A one-bit field as a flag (false when absent).
    pub fn flag(&self, bits: &str) -> bool {
        self.get(bits).is_some_and(|v| v != 0)
    }
    /// A whole register's value (false-free: `None` when absent).
    pub fn raw(&self, register: &str) -> Option<u64> {
        self.register(register).map(|r| r.raw)
    }
}

impl Config<'_> {
    /// The whole `layout` at `at`, for the capability at `cap`; an error
    /// when the dump ends inside it.
    pub fn block(&self, layout: &'static StructLayout, at: usize, cap: u16) -> Result<Block, CapError> {
        self.block_prefix(layout, at, cap, layout.size)
    }

    /// The registers of `layout` at `at` that lie within its first `len`
    /// bytes (a version 1 PCI Express capability stops at Root Status);
    /// reserved fields and byte arrays wider than 8 bytes are left out.
    pub fn block_prefix(
        &self,
        layout: &'static StructLayout,
        at: usize,
        cap: u16,
        len: usize,
    ) -> Result<Block, CapError> {
        let len = len.min(layout.size);
        let end = at.saturating_add(len);
        if end > self.len() {
            return Err(CapError::Truncated {
                offset: cap,
                need: end.saturating_sub(usize::from(cap)),
                len: self.len(),
            });
        }
        let bytes = &self.bytes()[at..end];
        let registers = layout
            .fields
            .iter()
            .filter(|f| !f.reserved && f.size <= 8 && f.offset + f.size <= len)
            .filter_map(|f| Some(Register { layout: f, offset: (at + f.offset) as u16, raw: f.read(bytes)? }))
            .collect();
        Ok(Block { layout, offset: at as u16, registers })
    }
}

impl Config<'_> {
    /// The first extended capability `id`, read as `layout`: `None` when
    /// absent, an error when the dump ends inside it.
    pub fn ext_block(
        &self,
        id: crate::cap_id::ExtCapId,
        layout: &'static StructLayout,
    ) -> Option<Result<Block, CapError>> {
        let cap = self.find_ext_cap(id)?;
        Some(self.block(layout, usize::from(cap.offset), cap.offset))
    }

    /// The first capability `id` in the first 256 bytes, read as `layout`.
    pub fn cap_block(
        &self,
        id: crate::cap_id::CapId,
        layout: &'static StructLayout,
    ) -> Option<Result<Block, CapError>> {
        let cap = self.find_cap(id)?;
        Some(self.block(layout, usize::from(cap.offset), cap.offset))
    }
}

/// `layout` at `at`, inside the capability `cap` (see [`crate::regs::span_in_cap`]).
pub(crate) fn block_in_cap(
    cfg: &Config<'_>,
    cap: &crate::walk::ExtCap,
    layout: &'static marrow_layout::StructLayout,
    at: usize,
) -> Result<Block, CapError> {
    crate::regs::span_in_cap(cfg, cap, at, layout.size)?;
    cfg.block(layout, at, cap.offset)
}
