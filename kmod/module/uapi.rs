// SPDX-License-Identifier: GPL-2.0 OR MIT OR Apache-2.0
//! The user-space ABI of `/dev/marrow`: ioctl numbers, argument layouts, flag
//! bits and the mmap offset convention, defined once.
//!
//! This file is compiled twice: into the kernel module (`mod uapi;` in
//! `marrow.rs`, built by kbuild) and into the guest test program
//! (`#[path]`-included by `kmod/guest`). It therefore uses `core` only: no
//! `kernel` crate, no `std`, no `unsafe`. Argument structs travel as
//! little-endian byte arrays (`to_bytes`/`from_bytes`) so that neither side
//! needs an unsafe `FromBytes` impl; the layout is the `#[repr(C)]` one
//! below, checked by the size assertions at the end.

/// The ioctl "type" byte: `'M'` (Documentation/userspace-api/ioctl/ioctl-number.rst
/// lists 'M' for several drivers; the number space is per-device, so a
/// private misc device may reuse it).
pub const MARROW_IOC_TYPE: u32 = b'M' as u32;

// The ioctl encoding of include/uapi/asm-generic/ioctl.h (x86 uses the
// generic one): nr in bits 0-7, type in 8-15, size in 16-29, direction in 30-31.
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = 8;
const IOC_SIZESHIFT: u32 = 16;
const IOC_DIRSHIFT: u32 = 30;
/// `_IOC_NONE`: no argument.
const IOC_NONE: u32 = 0;
/// `_IOC_WRITE`: user space writes the argument (the kernel reads it).
const IOC_WRITE: u32 = 1;
/// `_IOC_READ`: user space reads the argument (the kernel writes it).
const IOC_READ: u32 = 2;

const fn ioc(dir: u32, nr: u32, size: usize) -> u32 {
    (dir << IOC_DIRSHIFT) | ((size as u32) << IOC_SIZESHIFT) | (MARROW_IOC_TYPE << IOC_TYPESHIFT) | (nr << IOC_NRSHIFT)
}

/// `_IOWR('M', 1, struct marrow_window)`: declare a window (CAP_SYS_ADMIN
/// only, else `EPERM`). The kernel writes the new window's index into `index`.
pub const MARROW_IOC_ADD_WINDOW: u32 = ioc(IOC_READ | IOC_WRITE, 1, MarrowWindow::SIZE);
/// `_IOW('M', 2, __u32)`: select the window that this open file's mmap
/// offsets below [`MARROW_MMAP_ALLOC_BASE`] refer to.
pub const MARROW_IOC_SELECT_WINDOW: u32 = ioc(IOC_WRITE, 2, 4);
/// `_IOWR('M', 3, struct marrow_window)`: describe window `index` (any user).
pub const MARROW_IOC_WINDOW_INFO: u32 = ioc(IOC_READ | IOC_WRITE, 3, MarrowWindow::SIZE);
/// `_IOWR('M', 4, struct marrow_alloc)`: allocate DMA-coherent queue memory
/// for the device of window `window`; returns its mmap offset and bus address.
pub const MARROW_IOC_ALLOC: u32 = ioc(IOC_READ | IOC_WRITE, 4, MarrowAlloc::SIZE);

/// `_IO('M', nr)`: a command without an argument. The module defines none,
/// so every such number is `ENOTTY`; the guest test asks with one.
pub const fn marrow_io(nr: u32) -> u32 {
    ioc(IOC_NONE, nr, 0)
}

/// Window flag: the window may be mapped writable (else read-only).
pub const MARROW_WIN_WRITE: u32 = 1 << 0;
/// Window flag: map write-combined (BlueFlame pages); else uncached (UC-).
pub const MARROW_WIN_WC: u32 = 1 << 1;
/// Every window flag the module knows; any other bit is `EINVAL`.
pub const MARROW_WIN_FLAGS: u32 = MARROW_WIN_WRITE | MARROW_WIN_WC;
/// Windows the module holds at most (`ENOSPC` beyond).
pub const MARROW_MAX_WINDOWS: usize = 16;

/// mmap offsets at and above this (1 TiB) name queue-memory allocations;
/// below it, byte offsets into the selected window.
pub const MARROW_MMAP_ALLOC_BASE: u64 = 1 << 40;
/// Allocation `k` lives at `MARROW_MMAP_ALLOC_BASE + k * MARROW_MMAP_ALLOC_STRIDE`;
/// the stride bounds one allocation's size (4 GiB).
pub const MARROW_MMAP_ALLOC_STRIDE: u64 = 1 << 32;

/// `struct marrow_window` (32 bytes): a range of pages of one PCI BAR.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarrowWindow {
    /// PCI domain (segment).
    pub domain: u16,
    /// PCI bus.
    pub bus: u8,
    /// PCI device and function, `PCI_DEVFN(slot, func)` = slot << 3 | func.
    pub devfn: u8,
    /// BAR number, 0 to 5.
    pub bar: u32,
    /// `MARROW_WIN_*` bits.
    pub flags: u32,
    /// The window's index: written by ADD_WINDOW, read by WINDOW_INFO.
    pub index: u32,
    /// First page of the window, in 4 KiB pages from the BAR's start.
    pub pgoff: u64,
    /// Pages in the window (at least 1).
    pub npages: u64,
}

impl MarrowWindow {
    /// Bytes of the C struct.
    pub const SIZE: usize = 32;

    /// The struct as it lies in memory (x86_64 is little-endian).
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..2].copy_from_slice(&self.domain.to_le_bytes());
        b[2] = self.bus;
        b[3] = self.devfn;
        b[4..8].copy_from_slice(&self.bar.to_le_bytes());
        b[8..12].copy_from_slice(&self.flags.to_le_bytes());
        b[12..16].copy_from_slice(&self.index.to_le_bytes());
        b[16..24].copy_from_slice(&self.pgoff.to_le_bytes());
        b[24..32].copy_from_slice(&self.npages.to_le_bytes());
        b
    }

    /// The struct from its bytes.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(x)
        };
        MarrowWindow {
            domain: u16_at(0),
            bus: b[2],
            devfn: b[3],
            bar: u32_at(4),
            flags: u32_at(8),
            index: u32_at(12),
            pgoff: u64_at(16),
            npages: u64_at(24),
        }
    }
}

/// `struct marrow_alloc` (32 bytes): a DMA-coherent queue-memory allocation.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarrowAlloc {
    /// In: bytes, a non-zero multiple of 4096.
    pub bytes: u64,
    /// In: the window whose PCI device the memory is for (DMA mask, IOMMU).
    pub window: u32,
    /// Padding, must be 0.
    pub reserved: u32,
    /// Out: the mmap offset of the allocation.
    pub mmap_offset: u64,
    /// Out: the address the device uses for it (`dma_addr_t`).
    pub bus_addr: u64,
}

impl MarrowAlloc {
    /// Bytes of the C struct.
    pub const SIZE: usize = 32;

    /// The struct as it lies in memory.
    pub fn to_bytes(self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..8].copy_from_slice(&self.bytes.to_le_bytes());
        b[8..12].copy_from_slice(&self.window.to_le_bytes());
        b[12..16].copy_from_slice(&self.reserved.to_le_bytes());
        b[16..24].copy_from_slice(&self.mmap_offset.to_le_bytes());
        b[24..32].copy_from_slice(&self.bus_addr.to_le_bytes());
        b
    }

    /// The struct from its bytes.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> Self {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(x)
        };
        MarrowAlloc {
            bytes: u64_at(0),
            window: u32_at(8),
            reserved: u32_at(12),
            mmap_offset: u64_at(16),
            bus_addr: u64_at(24),
        }
    }
}

// The byte layouts above are the C layouts.
const _: () = assert!(core::mem::size_of::<MarrowWindow>() == MarrowWindow::SIZE);
const _: () = assert!(core::mem::size_of::<MarrowAlloc>() == MarrowAlloc::SIZE);
