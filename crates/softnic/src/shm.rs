//! Shared memory that the model, client processes and (on a GPU machine,
//! through `cudaHostRegister`) the GPU can all map: a memfd mapped
//! `MAP_SHARED`. `cuMemHostRegister` accepts such memory and a GPU's stores
//! into it are seen by another process (`docs/SOURCES.md` §2.5).

use marrow_mmio::Region;
use memmap2::MmapRaw;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

/// A memfd-backed, page-aligned, zero-filled shared mapping.
#[derive(Debug)]
pub struct Shm {
    file: File,
    map: MmapRaw,
    len: usize,
}

impl Shm {
    /// Create `len` bytes (rounded up to a page) named `name` in /proc/PID/fd.
    pub fn create(name: &str, len: usize) -> std::io::Result<Shm> {
        let page = 4096;
        let len = len.max(1).div_ceil(page) * page;
        let cname = std::ffi::CString::new(format!("marrow-{name}")).map_err(std::io::Error::other)?;
        let fd: OwnedFd = nix::sys::memfd::memfd_create(&cname, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)?;
        let file = File::from(fd);
        file.set_len(len as u64)?;
        Self::map(file, len)
    }

    /// Map an existing memfd received from another process.
    pub fn from_file(file: File, len: usize) -> std::io::Result<Shm> {
        let actual = file.metadata()?.len() as usize;
        if actual < len {
            return Err(std::io::Error::other(format!("shared file is {actual} bytes, {len} expected")));
        }
        Self::map(file, len)
    }

    fn map(file: File, len: usize) -> std::io::Result<Shm> {
        let map = MmapRaw::map_raw(&file)?;
        Ok(Shm { file, map, len })
    }

    /// The whole mapping as a device window.
    pub fn region(&self) -> Region {
        let base = NonNull::new(self.map.as_mut_ptr()).expect("mmap never returns null");
        // SAFETY: the mapping is `len` bytes, readable and writable, and
        // lives as long as `self`; owners keep the `Shm` alive (in an `Arc`)
        // for as long as any Region over it is in use, and no Rust
        // reference is ever made into it.
        unsafe { Region::new(base, self.len) }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: mappings are at least a page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The memfd, to pass to another process.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}
