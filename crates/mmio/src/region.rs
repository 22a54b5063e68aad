//! A window of memory shared with a device (or a device model in another
//! thread or process): queues, doorbell records, doorbell pages, data.
//!
//! The rule (vm-memory's, and the kernel's for `__iomem`): never a Rust
//! reference into such memory, since the other side may change it at any
//! time. Every access goes through a raw pointer, bounds-checked against the
//! window: volatile loads and stores for registers and control words,
//! atomics for shared counters, and plain copies for bulk data whose
//! ownership the queue protocol hands over (the poster does not touch a
//! buffer while its WQE is outstanding).

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// An access outside the window, or misaligned where alignment is required.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfBounds {
    /// Offset asked for.
    pub offset: usize,
    /// Bytes asked for.
    pub len: usize,
    /// Size of the window.
    pub size: usize,
}

impl core::fmt::Display for OutOfBounds {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "access of {} bytes at {:#x} is outside (or misaligned in) a window of {:#x} bytes",
            self.len, self.offset, self.size
        )
    }
}

impl core::error::Error for OutOfBounds {}

/// What a traced access did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
}

/// Called on every traced access with the window's tag, the offset and the
/// bytes (in memory order). A plain function pointer keeps the untraced path
/// to one predictable branch.
pub type TraceHook = fn(tag: u32, access: Access, offset: usize, bytes: &[u8]);

/// A bounds-checked window of device-shared memory.
#[derive(Clone, Copy, Debug)]
pub struct Region {
    base: NonNull<u8>,
    len: usize,
    tag: u32,
    hook: Option<TraceHook>,
}

// SAFETY: a Region is an address range, not a borrow; every access through
// it is volatile, atomic, or a copy the queue protocol makes exclusive, so
// sharing the handle between threads adds no data race that sharing the
// memory with the device did not already have to handle.
unsafe impl Send for Region {}
// SAFETY: as above; `&Region` gives no access that `Region` does not.
unsafe impl Sync for Region {}

impl Region {
    /// Wrap `len` bytes at `base`.
    ///
    /// # Safety
    ///
    /// `base..base+len` must stay mapped, readable and writable for as long
    /// as this `Region` or a copy of it is used, and must not be accessed
    /// through Rust references by anyone while it is.
    pub unsafe fn new(base: NonNull<u8>, len: usize) -> Self {
        Region { base, len, tag: 0, hook: None }
    }

    /// The same window, reporting accesses to `hook` under `tag`.
    pub fn traced(self, tag: u32, hook: TraceHook) -> Self {
        Region { tag, hook: Some(hook), ..self }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty window.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte, for handing to a device or a peer.
    pub fn base_addr(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// A sub-window `offset..offset+len`.
    pub fn sub(&self, offset: usize, len: usize) -> Result<Region, OutOfBounds> {
        self.check(offset, len, 1)?;
        // SAFETY: `check` proved `offset + len <= self.len`, so the pointer
        // stays inside the window this Region was created over.
        let base = unsafe { NonNull::new_unchecked(self.base.as_ptr().add(offset)) };
        Ok(Region { base, len, ..*self })
    }

    fn check(&self, offset: usize, len: usize, align: usize) -> Result<*mut u8, OutOfBounds> {
        let end = offset.checked_add(len);
        if end.is_none_or(|e| e > self.len) || !(self.base.as_ptr() as usize + offset).is_multiple_of(align) {
            return Err(OutOfBounds { offset, len, size: self.len });
        }
        // SAFETY: offset + len <= self.len, inside the mapped window.
        Ok(unsafe { self.base.as_ptr().add(offset) })
    }

    #[inline]
    fn trace(&self, access: Access, offset: usize, bytes: &[u8]) {
        if let Some(h) = self.hook {
            h(self.tag, access, offset, bytes);
        }
    }

    /// Volatile load of one byte.
    pub fn read_u8(&self, offset: usize) -> Result<u8, OutOfBounds> {
        let p = self.check(offset, 1, 1)?;
        // SAFETY: `p` is in bounds (checked) and the window is mapped (`new`).
        let v = unsafe { p.read_volatile() };
        self.trace(Access::Read, offset, &[v]);
        Ok(v)
    }

    /// Volatile store of one byte.
    pub fn write_u8(&self, offset: usize, v: u8) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 1, 1)?;
        self.trace(Access::Write, offset, &[v]);
        // SAFETY: as in `read_u8`.
        unsafe { p.write_volatile(v) };
        Ok(())
    }

    /// Volatile, naturally aligned 32-bit load of big-endian bytes (a
    /// doorbell-record word, a CQE field).
    pub fn read_be32(&self, offset: usize) -> Result<u32, OutOfBounds> {
        let p = self.check(offset, 4, 4)?;
        // SAFETY: in bounds and 4-byte aligned (checked).
        let raw = unsafe { (p as *const u32).read_volatile() };
        self.trace(Access::Read, offset, &raw.to_ne_bytes());
        Ok(u32::from_be(raw))
    }

    /// Volatile, naturally aligned 32-bit store as big-endian bytes: one
    /// single-copy-atomic store, as a doorbell record needs.
    pub fn write_be32(&self, offset: usize, v: u32) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 4, 4)?;
        let raw = v.to_be();
        self.trace(Access::Write, offset, &raw.to_ne_bytes());
        // SAFETY: in bounds and 4-byte aligned (checked).
        unsafe { (p as *mut u32).write_volatile(raw) };
        Ok(())
    }

    /// Volatile, naturally aligned 64-bit store of 8 bytes in memory order:
    /// one store, as an mlx5 UAR doorbell must be (rdma-core `mmio_write64_be`).
    pub fn write_8bytes(&self, offset: usize, bytes: [u8; 8]) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 8, 8)?;
        self.trace(Access::Write, offset, &bytes);
        // SAFETY: in bounds and 8-byte aligned (checked).
        unsafe { (p as *mut u64).write_volatile(u64::from_ne_bytes(bytes)) };
        Ok(())
    }

    /// Volatile, naturally aligned 64-bit load of 8 bytes in memory order.
    pub fn read_8bytes(&self, offset: usize) -> Result<[u8; 8], OutOfBounds> {
        let p = self.check(offset, 8, 8)?;
        // SAFETY: in bounds and 8-byte aligned (checked).
        let v = unsafe { (p as *const u64).read_volatile() }.to_ne_bytes();
        self.trace(Access::Read, offset, &v);
        Ok(v)
    }

    /// Atomically take 8 bytes and leave zeros: how a device model consumes
    /// a doorbell register without missing one written twice.
    pub fn swap_8bytes(&self, offset: usize, new: [u8; 8]) -> Result<[u8; 8], OutOfBounds> {
        let a = self.atomic_u64(offset)?;
        Ok(a.swap(u64::from_ne_bytes(new), Ordering::AcqRel).to_ne_bytes())
    }

    /// Copy bytes out of the window.
    pub fn read_bytes(&self, offset: usize, out: &mut [u8]) -> Result<(), OutOfBounds> {
        let p = self.check(offset, out.len(), 1)?;
        // SAFETY: the source is in bounds (checked) and `out` is a distinct
        // Rust buffer, so the ranges cannot overlap.
        unsafe { core::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        self.trace(Access::Read, offset, out);
        Ok(())
    }

    /// Copy `N` bytes out of the window; a fixed size compiles to a few
    /// vector moves instead of a `memmove` call (WQEBB fetches, CQEs).
    pub fn read_array<const N: usize>(&self, offset: usize) -> Result<[u8; N], OutOfBounds> {
        let p = self.check(offset, N, 1)?;
        // SAFETY: `N` bytes at `p` are in bounds (checked); `[u8; N]` has
        // alignment 1, so the unaligned read is the whole requirement.
        let v = unsafe { (p as *const [u8; N]).read_unaligned() };
        self.trace(Access::Read, offset, &v);
        Ok(v)
    }

    /// Copy `N` bytes into the window with fixed-size moves.
    pub fn write_array<const N: usize>(&self, offset: usize, data: &[u8; N]) -> Result<(), OutOfBounds> {
        let p = self.check(offset, N, 1)?;
        self.trace(Access::Write, offset, data);
        // SAFETY: as in `read_array`, for a store.
        unsafe { (p as *mut [u8; N]).write_unaligned(*data) };
        Ok(())
    }

    /// Copy bytes into the window.
    pub fn write_bytes(&self, offset: usize, data: &[u8]) -> Result<(), OutOfBounds> {
        let p = self.check(offset, data.len(), 1)?;
        self.trace(Access::Write, offset, data);
        // SAFETY: the destination is in bounds (checked) and `data` is a
        // distinct Rust buffer.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// Fill bytes of the window.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        let p = self.check(offset, len, 1)?;
        // SAFETY: in bounds (checked).
        unsafe { core::ptr::write_bytes(p, byte, len) };
        Ok(())
    }

    /// Copy `len` bytes from `src` at `src_off` to `dst` at `dst_off`: a DMA
    /// between two windows (which may be the same one; overlap is handled).
    pub fn copy(src: &Region, src_off: usize, dst: &Region, dst_off: usize, len: usize) -> Result<(), OutOfBounds> {
        let s = src.check(src_off, len, 1)?;
        let d = dst.check(dst_off, len, 1)?;
        if len <= 16 && (s as usize + len <= d as usize || d as usize + len <= s as usize) {
            // Small payloads (8-byte puts, atomics) are a few byte moves; a
            // `memmove` call would cost more than the copy.
            for i in 0..len {
                // SAFETY: `i < len`, inside both checked ranges, which do not overlap.
                unsafe { d.add(i).write(s.add(i).read()) };
            }
        } else {
            // SAFETY: both ranges are in bounds of mapped windows (checked);
            // `copy` allows overlap.
            unsafe { core::ptr::copy(s, d, len) };
        }
        if dst.hook.is_some() {
            dst.trace(Access::Write, dst_off, &[]);
        }
        Ok(())
    }

    /// The 64-bit word at `offset` as an atomic, for counters shared with a
    /// device model or another process. Atomics may alias concurrent
    /// mutation, so this transient reference is sound where a plain one is not.
    pub fn atomic_u64(&self, offset: usize) -> Result<&AtomicU64, OutOfBounds> {
        let p = self.check(offset, 8, 8)?;
        // SAFETY: in bounds and 8-byte aligned (checked); the memory is only
        // ever accessed atomically or volatilely, never through `&u64`.
        Ok(unsafe { AtomicU64::from_ptr(p as *mut u64) })
    }

    /// The 32-bit word at `offset` as an atomic.
    pub fn atomic_u32(&self, offset: usize) -> Result<&AtomicU32, OutOfBounds> {
        let p = self.check(offset, 4, 4)?;
        // SAFETY: as in `atomic_u64`, for 4 aligned bytes.
        Ok(unsafe { AtomicU32::from_ptr(p as *mut u32) })
    }

    /// Start bringing the cache line holding `offset` towards this CPU,
    /// for a load or (`Prefetch::Write`) a store soon after. A device model
    /// that has just seen a doorbell knows which lines it reads and writes
    /// next (the doorbell record, the WQE, the CQE slot), each last touched
    /// by the other side: asked for together, their misses overlap instead
    /// of following one another. A hint only: it changes no value any
    /// access returns, and on a CPU without the instruction it does nothing.
    pub fn prefetch(&self, offset: usize, intent: Prefetch) -> Result<(), OutOfBounds> {
        let p = self.check(offset, 1, 1)?;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch reads and writes nothing architecturally and
        // never faults, whatever the address; `p` is in bounds anyway.
        unsafe {
            match intent {
                Prefetch::Read => {
                    core::arch::asm!("prefetcht0 [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly))
                }
                Prefetch::Write => {
                    core::arch::asm!("prefetchw [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly))
                }
            }
        }
        #[cfg(target_arch = "aarch64")]
        // SAFETY: as on x86_64: PRFM is a hint that never faults.
        unsafe {
            match intent {
                Prefetch::Read => {
                    core::arch::asm!("prfm pldl1keep, [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly))
                }
                Prefetch::Write => {
                    core::arch::asm!("prfm pstl1keep, [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly))
                }
            }
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let _ = (p, intent);
        Ok(())
    }
}

/// What a prefetched line is wanted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefetch {
    /// A load: x86 `prefetcht0`, Arm `prfm pldl1keep`.
    Read,
    /// A store: x86 `prefetchw` (a NOP on CPUs without it), Arm `prfm pstl1keep`.
    Write,
}
