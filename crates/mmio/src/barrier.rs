//! Memory barriers named by purpose, after rdma-core `util/udma_barrier.h`
//! ("each narrow use is given a name and the proper name should be used in
//! the provider as a form of documentation").
//!
//! | Barrier | Orders | x86-64 | aarch64 |
//! |---|---|---|---|
//! | [`to_device`] | CPU stores to DMA memory (WQE) before a later store the device acts on (doorbell record) | compiler fence | `dmb oshst` |
//! | [`from_device`] | a load that saw device ownership (CQE owner bit) before loads of the payload | `lfence` | `dmb oshld` |
//! | [`wc_start`] | everything before the first store to a write-combining doorbell/BlueFlame page | `sfence` | `dmb oshst` |
//! | [`wc_flush`] | write-combining stores out of the CPU before anything after (e.g. a lock release) | `sfence` | `dsb st` |
//!
//! Other architectures fall back to a sequentially consistent fence, which
//! is stronger than each of these.

use core::sync::atomic::{Ordering, compiler_fence, fence};

/// Order prior stores to DMA-visible memory before later stores that tell
/// the device to read it (rdma-core `udma_to_device_barrier`).
#[inline(always)]
pub fn to_device() {
    #[cfg(target_arch = "x86_64")]
    // x86 keeps stores in program order; only the compiler may reorder them.
    compiler_fence(Ordering::SeqCst);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshst` is a barrier instruction with no memory operands.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
}

/// Order a load that observed device ownership before the loads of the data
/// it guards (rdma-core `udma_from_device_barrier`).
#[inline(always)]
pub fn from_device() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` has no memory operands and only orders loads.
    unsafe {
        core::arch::asm!("lfence", options(nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshld` is a barrier instruction with no memory operands.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
    compiler_fence(Ordering::SeqCst);
}

/// Before the first store to a write-combining page (rdma-core `mmio_wc_start`).
#[inline(always)]
pub fn wc_start() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no memory operands and only orders stores.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dmb oshst` is a barrier instruction with no memory operands.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
    compiler_fence(Ordering::SeqCst);
}

/// Push write-combining stores out before what follows (rdma-core `mmio_flush_writes`).
#[inline(always)]
pub fn wc_flush() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no memory operands and only orders stores.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `dsb st` is a barrier instruction with no memory operands.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
    compiler_fence(Ordering::SeqCst);
}

#[allow(unused_imports)]
use fence as _;
