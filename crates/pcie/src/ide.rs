//! Integrity and Data Encryption (extended capability 0x0030): PCI Express
//! Base 6.0 §7.9.26. The IDE Capability and IDE Control registers; the link
//! and selective IDE stream register blocks that follow (§7.9.26.4 on) are
//! not decoded, and `stream_blocks_decoded` says so to callers. Layout
//! `pci_ide_cap` in `hw-specs/pcie.toml`.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_ide_cap;
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

/// The IDE stream register blocks (link and selective) are not decoded.
pub const STREAM_BLOCKS_DECODED: bool = false;

impl Config<'_> {
    /// The IDE capability's capability and control registers.
    pub fn ide(&self) -> Option<Result<Block, CapError>> {
        self.ext_block(ExtCapId::IDE, &pci_ide_cap::LAYOUT)
    }
}
