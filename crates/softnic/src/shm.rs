//! Shared memory that the model, client processes and (on a GPU machine,
//! through `cudaHostRegister`) the GPU can all map: a memfd mapped
//! `MAP_SHARED`. `cuMemHostRegister` accepts such memory and a GPU's stores
//! into it are seen by another process (`docs/SOURCES.md` §2.5).
//!
//! Every memfd made here is sealed against shrinking and growing
//! (`F_SEAL_SHRINK | F_SEAL_GROW`, then `F_SEAL_SEAL`, memfd_create(2)):
//! a process that maps memory another process holds would take SIGBUS on
//! its next access if the holder could truncate the file under it. The
//! daemon maps clients' memfds only with [`Shm::from_sealed`], which
//! refuses a file that can still shrink.

use marrow_mmio::Region;
use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
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
        use nix::sys::memfd::MemFdCreateFlag as F;
        let fd: OwnedFd = nix::sys::memfd::memfd_create(&cname, F::MFD_CLOEXEC | F::MFD_ALLOW_SEALING)?;
        let file = File::from(fd);
        file.set_len(len as u64)?;
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
        fcntl(file.as_raw_fd(), FcntlArg::F_ADD_SEALS(seals))?;
        Self::map(file, len)
    }

    /// Map the first `len` bytes of an existing file (a memfd received from
    /// another process, or a file this process trusts, such as the memory
    /// QEMU shares with a guest).
    pub fn from_file(file: File, len: usize) -> std::io::Result<Shm> {
        let actual = file.metadata()?.len();
        if actual < len as u64 {
            return Err(std::io::Error::other(format!("shared file is {actual} bytes, {len} expected")));
        }
        Self::map(file, len)
    }

    /// [`Shm::from_file`] for a file another process holds: refused unless
    /// it is sealed against shrinking (`F_SEAL_SHRINK`), so that it cannot
    /// be truncated under this mapping.
    pub fn from_sealed(file: File, len: usize) -> std::io::Result<Shm> {
        let seals = fcntl(file.as_raw_fd(), FcntlArg::F_GET_SEALS).map_err(|e| {
            std::io::Error::other(format!("the file carries no seals ({e}): pass a memfd made with MFD_ALLOW_SEALING"))
        })?;
        if !SealFlag::from_bits_truncate(seals).contains(SealFlag::F_SEAL_SHRINK) {
            return Err(std::io::Error::other(
                "the memfd is not sealed with F_SEAL_SHRINK: it could be truncated under the mapping",
            ));
        }
        Self::from_file(file, len)
    }

    fn map(file: File, len: usize) -> std::io::Result<Shm> {
        if len == 0 {
            return Err(std::io::Error::other("a shared mapping of 0 bytes"));
        }
        // Only the bytes asked for: a client's sparse file of any size then
        // costs the daemon no more address space than it registered.
        let map = MmapOptions::new().len(len).map_raw(&file)?;
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
