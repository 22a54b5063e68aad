//! Packet sequence numbers: 24 bits, wrapping (InfiniBand Architecture
//! Specification vol. 1 §9.7.1). Two PSNs are compared by their distance
//! modulo 2^24, read as a signed 24-bit number, so a PSN up to 2^23 ahead
//! is "later" and one up to 2^23 behind is "earlier".

use crate::raw::BTH_PSN_MASK;

/// `psn + n`, wrapped to 24 bits.
pub fn add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & BTH_PSN_MASK
}

/// `psn - 1`, wrapped to 24 bits: the PSN before it.
pub fn prev(psn: u32) -> u32 {
    psn.wrapping_sub(1) & BTH_PSN_MASK
}

/// The bits of a 32-bit word above a PSN.
const ABOVE: u32 = BTH_PSN_MASK.leading_zeros();

/// How far `a` is ahead of `b` (negative: behind), in packets: the 24-bit
/// distance, sign-extended.
pub fn diff(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << ABOVE) as i32) >> ABOVE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psns_wrap_at_24_bits() {
        assert_eq!(add(0xff_fffe, 3), 1);
        assert_eq!((prev(0), prev(1)), (0xff_ffff, 0));
        assert_eq!(diff(1, 0xff_ffff), 2);
        assert_eq!(diff(0xff_ffff, 1), -2);
        assert_eq!(diff(5, 5), 0);
        assert_eq!(diff(0x7f_ffff, 0), 0x7f_ffff);
        assert_eq!(diff(0x80_0000, 0), -0x80_0000);
    }
}
