//! What the CPU computes for the demo to compare against: the data
//! patterns, the atomics' operands and results, and the first byte that
//! differs.

use super::table::size_text;

/// A fast per-iteration pattern (xorshift64), different for every seed.
pub(super) fn pattern_into(v: &mut Vec<u8>, seed: u64, len: usize) {
    v.clear();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
}

/// A small PRNG for atomic operands (splitmix64).
#[derive(Debug)]
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

pub(super) fn low_mask(w: u32) -> u64 {
    if w >= 64 { u64::MAX } else { (1u64 << w) - 1 }
}

/// Masked fetch-and-add computed field by field: `boundary` marks the most
/// significant bit of each field; each field adds modulo its own width.
pub fn masked_fa(old: u64, add: u64, boundary: u64, width: u32) -> u64 {
    let mut out = 0u64;
    let mut lo = 0u32;
    for i in 0..width {
        if (boundary >> i) & 1 == 1 || i == width - 1 {
            let w = i - lo + 1;
            let m = low_mask(w);
            let sum = ((old >> lo) & m).wrapping_add((add >> lo) & m) & m;
            out |= sum << lo;
            lo = i + 1;
        }
    }
    out
}

/// Masked compare-and-swap: the new value (the fetched value is always `old`).
pub fn masked_cs(old: u64, swap: u64, compare: u64, swap_mask: u64, compare_mask: u64) -> u64 {
    if (old ^ compare) & compare_mask == 0 { (old & !swap_mask) | (swap & swap_mask) } else { old }
}

/// The first differing byte of `got` against `want`, as a message.
pub(super) fn first_difference(got: &[u8], want: &[u8], base: usize, buf_addr: u64) -> Option<String> {
    let first = got.iter().zip(want).position(|(g, w)| g != w)?;
    let count = got.iter().zip(want).filter(|(g, w)| g != w).count();
    Some(format!(
        "byte {first:#x} of {} (buffer offset {:#x}, address {:#x}) is {:#04x}, expected {:#04x}; {count} of {} bytes differ",
        size_text(want.len()),
        base + first,
        buf_addr + (base + first) as u64,
        got[first],
        want[first],
        want.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_fa_by_fields() {
        // Two 16-bit fields: the carry out of the low field is dropped.
        assert_eq!(masked_fa(0x0001_ffff, 0x0001_0001, 0x8000_8000, 32), 0x0002_0000);
        assert_eq!(masked_fa(0x0001_ffff, 0x0001_0001, 0, 32), 0x0003_0000);
        assert_eq!(masked_fa(u64::MAX, 1, 0, 64), 0);
        // An 8-bit field then a 24-bit one: 0xff + 1 stays in the low field.
        assert_eq!(masked_fa(0x1ff, 1, 0x80, 32), 0x100);
        // Every bit a field: XOR.
        assert_eq!(masked_fa(0b1011, 0b0110, u64::MAX, 4), 0b1101);
    }

    #[test]
    fn masked_cs_masks() {
        assert_eq!(masked_cs(0x0002_0000, 0xabcd, 0x0002_0000, 0xffff, 0xffff_0000), 0x0002_abcd);
        assert_eq!(masked_cs(0x0003_0000, 0xabcd, 0x0002_0000, 0xffff, 0xffff_0000), 0x0003_0000);
    }

    #[test]
    fn mismatches_name_the_first_byte() {
        let want = [1u8, 2, 3, 4];
        assert_eq!(first_difference(&want, &want, 0, 0x1000), None);
        let d = first_difference(&[1, 2, 9, 8], &want, 0x40, 0x1000).unwrap();
        assert_eq!(
            d,
            "byte 0x2 of 4 B (buffer offset 0x42, address 0x1042) is 0x09, expected 0x03; 2 of 4 bytes differ"
        );
    }

    #[test]
    fn patterns_differ_per_seed() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        pattern_into(&mut a, 1, 100);
        pattern_into(&mut b, 2, 100);
        assert_eq!(a.len(), 100);
        assert_ne!(a, b);
    }
}
