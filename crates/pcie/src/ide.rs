//! Integrity and Data Encryption (extended capability 0x0030): PCI Express
//! Base 6.0 §7.9.26. The IDE Capability and IDE Control registers
//! (`pci_ide_cap` in `hw-specs/pcie.toml`), then the stream register
//! blocks their counts size: the link streams (`ide_link`, §7.9.26.4) and
//! the selective streams (`ide_selective`, §7.9.26.5). The capability has
//! no length field, so the walk is bounded by the next capability (when it
//! lies above) or the end of extended configuration space, and by the dump.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::{pci_ide_cap, pci_ide_link_stream};
use crate::header::Config;
use crate::ide_link::{PCI_IDE_LINK_STREAM_0, link_streams};
use crate::ide_selective::{SelectiveStream, selective_stream};
use crate::registers::Block;
use crate::regs::CapError;
use alloc::vec::Vec;

/// The IDE stream register blocks (link and selective) are decoded, by
/// [`Config::ide_streams`].
pub const STREAM_BLOCKS_DECODED: bool = true;

/// An IDE capability with its stream register blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdeStreams {
    pub offset: u16,
    /// IDE Capability and IDE Control.
    pub ide: Block,
    /// Link IDE stream blocks (`pci_ide_link_stream`), one per link TC.
    pub link: Vec<Block>,
    /// Selective IDE stream blocks, in order; the last one may lack
    /// address blocks when `stopped` says where they ran out.
    pub selective: Vec<SelectiveStream>,
    /// Why the walk stopped before every block the counts promise: the
    /// first block that runs past the capability's end or the dump's.
    pub stopped: Option<CapError>,
}

impl IdeStreams {
    /// Selective streams the IDE Capability says there are (0 without
    /// Selective IDE Streams Supported).
    pub fn selective_count(&self) -> usize {
        selective_stream_count(&self.ide)
    }
}

fn selective_stream_count(ide: &Block) -> usize {
    if ide.flag("ide_cap_selective") { ide.get("ide_cap_sel_streams").unwrap_or(0) as usize + 1 } else { 0 }
}

impl Config<'_> {
    /// The IDE capability's capability and control registers.
    pub fn ide(&self) -> Option<Result<Block, CapError>> {
        self.ext_block(ExtCapId::IDE, &pci_ide_cap::LAYOUT)
    }

    /// The IDE capability with every stream register block it counts: an
    /// error when its own registers are cut; where a stream block is, in
    /// `stopped`, after the blocks that could be read.
    pub fn ide_streams(&self) -> Option<Result<IdeStreams, CapError>> {
        let cap = self.find_ext_cap(ExtCapId::IDE)?;
        let ide = match self.block(&pci_ide_cap::LAYOUT, usize::from(cap.offset), cap.offset) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let (link, mut stopped) = link_streams(self, &cap, &ide);
        let mut selective = Vec::new();
        if stopped.is_none() {
            // Selective blocks start after every link block, whose count
            // is fixed by the IDE Capability whether or not a stream is on.
            let mut at = usize::from(cap.offset) + PCI_IDE_LINK_STREAM_0 + link.len() * pci_ide_link_stream::SIZE;
            for _ in 0..selective_stream_count(&ide) {
                match selective_stream(self, &cap, at) {
                    Ok((s, None)) => {
                        at += s.size();
                        selective.push(s);
                    }
                    Ok((s, Some(e))) => {
                        selective.push(s);
                        stopped = Some(e);
                        break;
                    }
                    Err(e) => {
                        stopped = Some(e);
                        break;
                    }
                }
            }
        }
        Some(Ok(IdeStreams { offset: cap.offset, ide, link, selective, stopped }))
    }
}
