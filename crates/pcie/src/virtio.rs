//! Virtio structure capabilities: VIRTIO 1.2 §4.1.4. A virtio PCI device
//! (vendor 0x1af4, device 0x1000-0x107f, §4.1.2) locates each of its
//! configuration structures with a Vendor Specific capability (ID 0x09)
//! laid out as `struct virtio_pci_cap`: cfg_type (+3), bar (+4), id (+5),
//! offset (+8) and length (+12) of the structure in that BAR; a notify
//! structure's capability (cfg_type 2) adds notify_off_multiplier at +16
//! (§4.1.4.4). Layouts `pci_virtio_cap` and `pci_virtio_notify_multiplier`
//! in `hw-specs/pcie.toml`.

use crate::generated::pcie::{pci_virtio_cap, pci_virtio_notify_multiplier};
use crate::header::Config;
use crate::registers::Block;
use crate::regs::CapError;

/// The smallest `virtio_pci_cap`, bytes.
pub const VIRTIO_CAP_LEN: usize = 16;
/// cfg_type of the notification structure (`VIRTIO_PCI_CAP_NOTIFY_CFG`).
pub const VIRTIO_PCI_CAP_NOTIFY_CFG: u64 = 2;

/// One virtio structure capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtioCap {
    pub block: Block,
    /// notify_off_multiplier, for a notify capability long enough to hold it.
    pub notify_multiplier: Option<Block>,
}

/// The name of a cfg_type (§4.1.4), as lspci 3.9 names the ones it knows.
pub fn cfg_type_name(t: u64) -> Option<&'static str> {
    Some(match t {
        1 => "CommonCfg",
        2 => "Notify",
        3 => "ISR",
        4 => "DeviceCfg",
        _ => return None,
    })
}

/// virtio's PCI vendor ID and the device IDs it uses, transitional and
/// modern (virtio 1.2 §4.1.2).
const VIRTIO_PCI_VENDOR_ID: u16 = 0x1af4;
const VIRTIO_PCI_DEVICE_IDS: core::ops::RangeInclusive<u16> = 0x1000..=0x107f;

impl Config<'_> {
    /// Whether the function is a virtio device (§4.1.2).
    pub fn is_virtio(&self) -> bool {
        self.vendor_id() == VIRTIO_PCI_VENDOR_ID && VIRTIO_PCI_DEVICE_IDS.contains(&self.device_id())
    }

    /// The Vendor Specific capability at `at` read as a virtio structure
    /// capability: `None` when the function is not a virtio device, an
    /// error when its length cannot hold one or runs past the dump.
    pub fn virtio_cap(&self, at: u16) -> Option<Result<VirtioCap, CapError>> {
        if !self.is_virtio() {
            return None;
        }
        let start = usize::from(at);
        let len = usize::from(self.read_u8(start + 2)?);
        if len < VIRTIO_CAP_LEN {
            return Some(Err(CapError::BadField { offset: at, field: "cap_len", value: len as u32 }));
        }
        if start + len > self.len() {
            return Some(Err(CapError::Truncated { offset: at, need: len, len: self.len() }));
        }
        Some(self.block(&pci_virtio_cap::LAYOUT, start, at).and_then(|block| {
            let notify = block.raw("cfg_type") == Some(VIRTIO_PCI_CAP_NOTIFY_CFG) && len >= VIRTIO_CAP_LEN + 4;
            let notify_multiplier = match notify {
                true => Some(self.block(&pci_virtio_notify_multiplier::LAYOUT, start + VIRTIO_CAP_LEN, at)?),
                false => None,
            };
            Ok(VirtioCap { block, notify_multiplier })
        }))
    }
}
