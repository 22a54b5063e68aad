//! Single Root I/O Virtualization: PCI Express Base 6.0 §9.3.3 (Linux
//! `PCI_SRIOV_*`). A physical function (a ConnectX port, say) carries the
//! VF count, the routing-ID arithmetic that places its VFs on the bus, and
//! six VF BARs whose addresses are the base of VF 1's BAR; VF n's sits
//! n - 1 VF-BAR-sizes above it (§9.3.3.14). `marrow` cares because every
//! VF that does RDMA also needs its own path to the GPU.

use crate::cap_id::ExtCapId;
use crate::generated::pcie::pci_sriov_cap;
use crate::header::{Bar, Config, decode_bar};
use crate::regs::CapError;
use alloc::vec::Vec;

pub const PCI_SRIOV_CAP: usize = 0x04;
pub const PCI_SRIOV_CTRL: usize = 0x08;
pub const PCI_SRIOV_STATUS: usize = 0x0a;
pub const PCI_SRIOV_BAR: usize = 0x24;
pub const PCI_SRIOV_NUM_BARS: usize = 6;
pub const PCI_SRIOV_CAP_VFM: u32 = 0x0000_0001;
pub const PCI_SRIOV_CTRL_VFE: u16 = 0x0001;
pub const PCI_SRIOV_CTRL_VFM: u16 = 0x0002;
pub const PCI_SRIOV_CTRL_INTR: u16 = 0x0004;
pub const PCI_SRIOV_CTRL_MSE: u16 = 0x0008;
pub const PCI_SRIOV_CTRL_ARI: u16 = 0x0010;
pub const PCI_SRIOV_STATUS_VFM: u16 = 0x0001;
/// Linux's `PCI_EXT_CAP_SRIOV_SIZEOF`: the registers end at 0x40.
pub const PCI_EXT_CAP_SRIOV_SIZEOF: usize = 0x40;

/// A decoded SR-IOV capability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrIov {
    pub offset: u16,
    pub capabilities_raw: u32,
    pub vf_migration_capable: bool,
    pub ari_preserved: bool,
    pub vf_10bit_tag_capable: bool,
    /// VF Migration Interrupt Message Number (capabilities bits 31:21).
    pub migration_interrupt: u16,
    pub control_raw: u16,
    pub vf_enable: bool,
    pub vf_migration_enable: bool,
    pub vf_memory_space_enable: bool,
    pub ari_capable_hierarchy: bool,
    pub vf_10bit_tag_enable: bool,
    pub status_raw: u16,
    pub initial_vfs: u16,
    pub total_vfs: u16,
    pub num_vfs: u16,
    pub function_dependency_link: u8,
    /// First VF Offset and VF Stride, in routing IDs (§9.3.3.9, §9.3.3.10).
    pub first_vf_offset: u16,
    pub vf_stride: u16,
    pub vf_device_id: u16,
    /// Bit n: a page size of 4 KiB << n is supported.
    pub supported_page_sizes: u32,
    pub system_page_size: u32,
    /// The VF BARs as programmed (64-bit ones span two slots).
    pub vf_bars: Vec<Bar>,
    /// VF Migration State Array: BAR indicator and offset.
    pub migration_state_bir: u8,
    pub migration_state_offset: u32,
}

impl SrIov {
    /// The routing ID of VF `n` (1-based) of the PF at `pf_rid`: PF + First
    /// VF Offset + (n - 1) * VF Stride, modulo 2^16 (§9.3.3.9). `None` for
    /// VF 0 or one past TotalVFs.
    pub fn vf_routing_id(&self, pf_rid: u16, n: u16) -> Option<u16> {
        if n == 0 || n > self.total_vfs {
            return None;
        }
        let rid = u32::from(pf_rid) + u32::from(self.first_vf_offset) + u32::from(n - 1) * u32::from(self.vf_stride);
        Some(rid as u16)
    }

    /// The system page size in bytes, if exactly one bit is set (§9.3.3.13).
    pub fn system_page_bytes(&self) -> Option<u64> {
        (self.system_page_size.count_ones() == 1).then(|| 4096u64 << self.system_page_size.trailing_zeros())
    }

    /// Register values software must never leave: more VFs than TotalVFs,
    /// a system page size that is not one supported size.
    pub fn problems(&self) -> Vec<&'static str> {
        let mut p = Vec::new();
        if self.num_vfs > self.total_vfs {
            p.push("NumVFs is larger than TotalVFs");
        }
        if self.initial_vfs > self.total_vfs {
            p.push("InitialVFs is larger than TotalVFs");
        }
        if self.system_page_size.count_ones() != 1 || self.system_page_size & !self.supported_page_sizes != 0 {
            p.push("System Page Size is not exactly one of the Supported Page Sizes");
        }
        if self.num_vfs > 1 && self.vf_stride == 0 {
            p.push("VF Stride is 0 with more than one VF");
        }
        p
    }
}

impl Config<'_> {
    /// The SR-IOV capability; an error when the dump ends inside its 64 bytes.
    pub fn sriov(&self) -> Option<Result<SrIov, CapError>> {
        let cap = self.find_ext_cap(ExtCapId::SRIOV)?;
        Some(self.view::<pci_sriov_cap>(cap.offset, usize::from(cap.offset)).map(|v| {
            let b = v.sriov_bar();
            let mut raws = [0u32; PCI_SRIOV_NUM_BARS];
            for (i, r) in raws.iter_mut().enumerate() {
                *r = u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
            }
            let mut vf_bars = Vec::new();
            let mut slot = 0;
            while let Some((bar, used)) = decode_bar(&raws, slot) {
                vf_bars.push(bar);
                slot += used;
            }
            SrIov {
                offset: cap.offset,
                capabilities_raw: v.sriov_cap(),
                vf_migration_capable: v.sriov_cap_vfm(),
                ari_preserved: v.sriov_cap_ari_preserved(),
                vf_10bit_tag_capable: v.sriov_cap_10bit_tag(),
                migration_interrupt: v.sriov_cap_intr(),
                control_raw: v.sriov_ctrl(),
                vf_enable: v.sriov_ctrl_vfe(),
                vf_migration_enable: v.sriov_ctrl_vfm(),
                vf_memory_space_enable: v.sriov_ctrl_mse(),
                ari_capable_hierarchy: v.sriov_ctrl_ari(),
                vf_10bit_tag_enable: v.sriov_ctrl_10bit_tag(),
                status_raw: v.sriov_status(),
                initial_vfs: v.sriov_initial_vf(),
                total_vfs: v.sriov_total_vf(),
                num_vfs: v.sriov_num_vf(),
                function_dependency_link: v.sriov_func_link(),
                first_vf_offset: v.sriov_vf_offset(),
                vf_stride: v.sriov_vf_stride(),
                vf_device_id: v.sriov_vf_did(),
                supported_page_sizes: v.sriov_sup_pgsize(),
                system_page_size: v.sriov_sys_pgsize(),
                vf_bars,
                migration_state_bir: v.sriov_vfm_bir(),
                // The field is the offset's bits 31:3, in place.
                migration_state_offset: v.sriov_vfm_offset() << pci_sriov_cap::SRIOV_VFM_OFFSET_SHIFT,
            }
        }))
    }
}
