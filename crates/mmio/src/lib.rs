//! Access to memory a device reads and writes: [`region::Region`] for
//! bounds-checked volatile, atomic and bulk access without Rust references,
//! and [`barrier`] for the four barriers a driver needs, named by purpose.
//!
//! Every access to device-shared memory in marrow goes through this crate;
//! `unsafe` elsewhere is FFI and mapping code only (the list is in
//! `docs/ARCHITECTURE.md` §5). Every block carries a `SAFETY:` argument.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod barrier;
pub mod region;

pub use region::{Access, OutOfBounds, Prefetch, Region, TraceHook};

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use core::ptr::NonNull;
    use std::boxed::Box;
    use std::sync::Mutex;
    use std::vec::Vec;

    /// A fake device window: heap memory, 8-byte aligned.
    fn window(words: usize) -> (Box<[u64]>, Region) {
        let mut mem = std::vec![0xA5A5_A5A5_A5A5_A5A5u64; words].into_boxed_slice();
        let base = NonNull::new(mem.as_mut_ptr() as *mut u8).unwrap();
        // SAFETY: the box outlives the region in every test (returned together).
        let r = unsafe { Region::new(base, words * 8) };
        (mem, r)
    }

    #[test]
    fn big_endian_words_land_in_memory_order() {
        let (mem, r) = window(2);
        r.write_be32(4, 0x0000_1234).unwrap();
        let bytes: Vec<u8> = mem.iter().flat_map(|w| w.to_ne_bytes()).collect();
        assert_eq!(&bytes[..8], &[0xA5, 0xA5, 0xA5, 0xA5, 0, 0, 0x12, 0x34]);
        assert_eq!(r.read_be32(4).unwrap(), 0x1234);
    }

    #[test]
    fn out_of_bounds_and_misaligned_accesses_are_refused() {
        let (_mem, r) = window(2);
        assert_eq!(r.read_be32(14), Err(OutOfBounds { offset: 14, len: 4, size: 16 }));
        assert!(r.read_be32(2).is_err(), "misaligned word");
        assert!(r.write_8bytes(4, [0; 8]).is_err(), "misaligned doorbell");
        assert!(r.write_bytes(usize::MAX, &[1]).is_err(), "overflowing offset");
        assert!(r.sub(8, 9).is_err());
        let s = r.sub(8, 8).unwrap();
        s.write_8bytes(0, [1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(r.read_8bytes(8).unwrap(), [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn a_prefetch_is_bounds_checked_and_changes_nothing() {
        let (mem, r) = window(2);
        let before: Vec<u64> = mem.to_vec();
        r.prefetch(0, Prefetch::Read).unwrap();
        r.prefetch(15, Prefetch::Write).unwrap();
        assert_eq!(r.prefetch(16, Prefetch::Read), Err(OutOfBounds { offset: 16, len: 1, size: 16 }));
        assert_eq!(mem.to_vec(), before);
        assert_eq!(r.read_8bytes(8).unwrap(), [0xA5; 8]);
    }

    #[test]
    fn swap_consumes_a_doorbell() {
        let (_mem, r) = window(1);
        r.write_8bytes(0, [9; 8]).unwrap();
        assert_eq!(r.swap_8bytes(0, [0; 8]).unwrap(), [9; 8]);
        assert_eq!(r.read_8bytes(0).unwrap(), [0; 8]);
    }

    type Seen = Vec<(u32, Access, usize, Vec<u8>)>;
    static SEEN: Mutex<Seen> = Mutex::new(Vec::new());
    fn hook(tag: u32, a: Access, off: usize, b: &[u8]) {
        SEEN.lock().unwrap().push((tag, a, off, b.to_vec()));
    }

    #[test]
    fn traced_windows_report_every_access() {
        let (_mem, r) = window(1);
        let t = r.traced(7, hook);
        t.write_be32(0, 5).unwrap();
        t.read_u8(3).unwrap();
        let seen = SEEN.lock().unwrap();
        assert_eq!(seen[0], (7, Access::Write, 0, std::vec![0, 0, 0, 5]));
        assert_eq!(seen[1], (7, Access::Read, 3, std::vec![5]));
    }
}
