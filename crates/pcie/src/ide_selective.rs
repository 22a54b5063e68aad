//! Selective IDE Stream Register Block: PCI Express Base 6.0 §7.9.26.5.
//! One block per selective stream (Number of Selective IDE Streams
//! Supported + 1), packed after the link stream blocks: the stream's
//! Capability (§7.9.26.5.1), Control (§7.9.26.5.2) and Status
//! (§7.9.26.5.3) registers, the RID Association block (§7.9.26.5.4: a
//! requester ID range), then as many Address Association blocks
//! (§7.9.26.5.5: a 64-bit memory range, 1 MiB granular) as the stream's
//! own capability register counts. So each block's size, and where the
//! next one starts, is read from the block itself. Layouts
//! `pci_ide_sel_stream` and `pci_ide_addr_assoc` in `hw-specs/pcie.toml`.

use crate::generated::pcie::{pci_ide_addr_assoc, pci_ide_sel_stream};
use crate::header::Config;
use crate::registers::{Block, block_in_cap};
use crate::regs::CapError;
use crate::walk::ExtCap;
use alloc::vec::Vec;

/// One selective IDE stream's registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectiveStream {
    /// Capability, control, status and RID association (`pci_ide_sel_stream`).
    pub regs: Block,
    /// The address association blocks (`pci_ide_addr_assoc`), in order.
    pub addresses: Vec<Block>,
}

impl SelectiveStream {
    /// Bytes of the whole block, address associations included.
    pub fn size(&self) -> usize {
        pci_ide_sel_stream::SIZE + self.addresses.len() * pci_ide_addr_assoc::SIZE
    }
}

/// Where the lower registers' address bits 31:20 start, and the limit's
/// bits below them (§7.9.26.5.5.1).
const ADDRESS_LOW_SHIFT: u32 = 20;
const LIMIT_LOW_ONES: u64 = (1 << ADDRESS_LOW_SHIFT) - 1;

/// An address association's memory range, first and last byte: the lower
/// registers hold address bits 31:20, so the base's bits 19:0 are 0 and
/// the limit's all ones (§7.9.26.5.5.1).
pub fn address_range(a: &Block) -> (u64, u64) {
    let g = |n: &str| a.get(n).unwrap_or(0);
    // Registers 2 and 3 are whole-register values, not bit ranges.
    let upper = |n: &str| a.raw(n).unwrap_or(0);
    let base = upper("ide_addr3") << u32::BITS | g("ide_addr1_base_low") << ADDRESS_LOW_SHIFT;
    let limit = upper("ide_addr2") << u32::BITS | g("ide_addr1_limit_low") << ADDRESS_LOW_SHIFT | LIMIT_LOW_ONES;
    (base, limit)
}

/// The selective stream block at `at`: an error when its fixed registers
/// are outside the capability or the dump; else the stream with the
/// address blocks before the first one that is, and that one's error.
pub(crate) fn selective_stream(
    cfg: &Config<'_>,
    cap: &ExtCap,
    at: usize,
) -> Result<(SelectiveStream, Option<CapError>), CapError> {
    let regs = block_in_cap(cfg, cap, &pci_ide_sel_stream::LAYOUT, at)?;
    // A 4-bit count: at most 15 blocks, so this loop is bounded by the field.
    let count = regs.get("ide_sel_cap_addr_blocks").unwrap_or(0) as usize;
    let first = at + pci_ide_sel_stream::SIZE;
    let mut addresses = Vec::new();
    for n in 0..count {
        match block_in_cap(cfg, cap, &pci_ide_addr_assoc::LAYOUT, first + n * pci_ide_addr_assoc::SIZE) {
            Ok(b) => addresses.push(b),
            Err(e) => return Ok((SelectiveStream { regs, addresses }, Some(e))),
        }
    }
    Ok((SelectiveStream { regs, addresses }, None))
}
