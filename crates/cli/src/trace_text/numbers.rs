//! The trace text's number and padding writers: what `format!` would
//! write, without its machinery (the text of a million records is written
//! through these).

// The number writers below work out all digits at once in a register (no
// loop of dependent divisions), copy a fixed 16 bytes and cut the vector
// back to the digits: a copy of a few bytes of unknown length is a call to
// memmove, pushing byte by byte re-checks the capacity each time, and
// digits stored byte by byte into an array then copied wide stall on store
// forwarding.

const BYTES_01: u128 = 0x0101_0101_0101_0101_0101_0101_0101_0101;

/// `v` as `{:#0w$x}` formats it with `w = digits + 2`: `0x`, then at least `digits` hex digits.
// Inlined into every caller: most calls have a constant `digits` and a
// value of 32 bits or less, so what is left is the short path below.
#[inline(always)]
pub(super) fn hex(o: &mut Vec<u8>, v: u64, digits: usize) {
    let n = ((64 - v.leading_zeros()).div_ceil(4).max(1) as usize).max(digits);
    if n <= 8 {
        hex_short(o, v, n);
    } else {
        hex_long(o, v, n);
    }
}

/// [`hex`] of `n <= 8` digits: the same steps as [`hex_long`] in one register.
#[inline(always)]
fn hex_short(o: &mut Vec<u8>, v: u64, n: usize) {
    let mut x = v;
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    x = x.swap_bytes();
    let letters = ((x + 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101;
    x += 0x3030_3030_3030_3030 + letters * 0x27;
    // "0x", then the digits: one 16-byte copy.
    let text = u128::from(u16::from_le_bytes(*b"0x")) | (u128::from(x >> (8 * (8 - n))) << 16);
    let at = o.len();
    o.extend_from_slice(&text.to_le_bytes());
    o.truncate(at + 2 + n);
}

/// [`hex`] of more than 8 digits.
#[inline(never)]
fn hex_long(o: &mut Vec<u8>, v: u64, n: usize) {
    if n > 16 {
        o.extend_from_slice(b"0x");
        o.extend(std::iter::repeat_n(b'0', n - 16));
        let at = o.len();
        hex(o, v, 16);
        o.drain(at..at + 2);
        return;
    }
    // Nibble i of `v` to byte i, in four spreading steps.
    let mut x = u128::from(v);
    x = (x | (x << 32)) & 0x0000_0000_ffff_ffff_0000_0000_ffff_ffff;
    x = (x | (x << 16)) & 0x0000_ffff_0000_ffff_0000_ffff_0000_ffff;
    x = (x | (x << 8)) & 0x00ff_00ff_00ff_00ff_00ff_00ff_00ff_00ff;
    x = (x | (x << 4)) & 0x0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f_0f0f;
    // Most significant digit first in memory, then each nibble to its
    // character: '0' + d, and 'a' - 10 + d for d >= 10 (d + 6 carries into bit 4).
    x = x.swap_bytes();
    let letters = ((x + 6 * BYTES_01) >> 4) & BYTES_01;
    x += 0x30 * BYTES_01 + letters * 0x27;
    let at = o.len();
    o.extend_from_slice(b"0x");
    o.extend_from_slice(&(x >> (8 * (16 - n))).to_le_bytes());
    o.truncate(at + 2 + n);
}

/// The 8 decimal digits of `y < 10^8` (leading zeros included), one a
/// byte, most significant first in memory, as numbers 0 to 9.
#[inline(always)]
fn digits8(y: u64) -> u64 {
    // Halves of 4 digits in the two 32-bit lanes, then pairs in 16-bit
    // lanes, then digits in bytes; each step divides every lane at once by
    // a multiplication that is exact for the lane's range.
    let mut x = (y / 10_000) | ((y % 10_000) << 32);
    let q = ((x * 10_486) >> 20) & 0x0000_007f_0000_007f;
    x = q | ((x - q * 100) << 16);
    let q = ((x * 103) >> 10) & 0x000f_000f_000f_000f;
    q | ((x - q * 10) << 8)
}

/// The decimal digits of `v` as characters, most significant first in
/// memory, and how many; `None` past 16 digits.
#[inline(always)]
fn dec_digits(v: u64) -> Option<(u128, usize)> {
    if v >= 10_000_000_000_000_000 {
        return None;
    }
    let n = v.checked_ilog10().map_or(1, |l| l as usize + 1);
    if n <= 8 {
        let x = digits8(v) + 0x3030_3030_3030_3030;
        return Some((u128::from(x >> (8 * (8 - n))), n));
    }
    let x = u128::from(digits8(v / 100_000_000)) | (u128::from(digits8(v % 100_000_000)) << 64);
    Some(((x + 0x30 * BYTES_01) >> (8 * (16 - n)), n))
}

/// `v` as `{}` formats it.
#[inline(always)]
pub(super) fn dec(o: &mut Vec<u8>, v: u64) {
    if v < 10 {
        o.push(b'0' + v as u8);
        return;
    }
    match dec_digits(v) {
        Some((w, n)) => {
            let at = o.len();
            o.extend_from_slice(&w.to_le_bytes());
            o.truncate(at + n);
        }
        None => o.extend_from_slice(v.to_string().as_bytes()),
    }
}

/// `v` as `{:<width}` formats it.
pub(super) fn dec_left(o: &mut Vec<u8>, v: u64, width: usize) {
    let at = o.len();
    dec(o, v);
    spaces(o, width.saturating_sub(o.len() - at));
}

/// `v` as `{:>width}` formats it.
pub(super) fn dec_right(o: &mut Vec<u8>, v: u64, width: usize) {
    let n = v.checked_ilog10().map_or(1, |l| l as usize + 1);
    spaces(o, width.saturating_sub(n));
    dec(o, v);
}

/// `n` spaces.
#[inline(always)]
fn spaces(o: &mut Vec<u8>, n: usize) {
    if n <= 16 {
        let at = o.len();
        o.extend_from_slice(&[b' '; 16]);
        o.truncate(at + n);
    } else {
        o.extend(std::iter::repeat_n(b' ', n));
    }
}

/// [`crate::fields::enum_text`]: `NAME (0x08)`, or `unknown 0x42`.
pub(super) fn enum_text(o: &mut Vec<u8>, name: Option<&str>, v: u64, digits: usize) {
    match name {
        Some(n) => {
            o.extend_from_slice(n.as_bytes());
            o.extend_from_slice(b" (");
            hex(o, v, digits);
            o.push(b')');
        }
        None => {
            o.extend_from_slice(b"unknown ");
            hex(o, v, 2);
        }
    }
}

/// An opcode as its `Display` writes it: the name, or `unknown 0x42`.
pub(super) fn opcode_name(o: &mut Vec<u8>, name: Option<&str>, v: u8) {
    match name {
        Some(n) => o.extend_from_slice(n.as_bytes()),
        None => {
            o.extend_from_slice(b"unknown ");
            hex(o, u64::from(v), 2);
        }
    }
}

/// Spaces after what was appended since `from`, up to `width` bytes (the
/// columns hold ASCII only, so bytes are characters).
pub(super) fn pad(o: &mut Vec<u8>, from: usize, width: usize) {
    spaces(o, width.saturating_sub(o.len() - from));
}

pub(super) fn tabs(o: &mut Vec<u8>, depth: usize) {
    o.extend(std::iter::repeat_n(b'\t', depth));
}

/// A byte as two lower-case hex digits, no prefix.
pub(super) fn hex_byte(o: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    o.push(HEX[usize::from(b >> 4)]);
    o.push(HEX[usize::from(b & 0xf)]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_as_format_writes_them() {
        let edges = [9_999_999_999_999_999, 10_000_000_000_000_000, 10_000_000_000_000_001];
        for v in [0u64, 1, 9, 10, 15, 16, 255, 256, 0xfff, 0x1000, 99_999, 1 << 40, u64::MAX - 1, u64::MAX]
            .into_iter()
            .chain(edges)
        {
            for digits in [1usize, 2, 3, 4, 6, 8, 16, 18] {
                let mut o = b"x".to_vec();
                hex(&mut o, v, digits);
                assert_eq!(String::from_utf8(o).unwrap(), format!("x{v:#0w$x}", w = digits + 2));
            }
            for width in [0usize, 6, 12, 25] {
                let (mut l, mut r, mut d) = (Vec::new(), Vec::new(), Vec::new());
                dec_left(&mut l, v, width);
                dec_right(&mut r, v, width);
                dec(&mut d, v);
                assert_eq!(String::from_utf8(l).unwrap(), format!("{v:<width$}"));
                assert_eq!(String::from_utf8(r).unwrap(), format!("{v:>width$}"));
                assert_eq!(String::from_utf8(d).unwrap(), format!("{v}"));
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_number_as_format_writes_it(v in proptest::num::u64::ANY, small in 0u64..100_000_000, digits in 1usize..17, width in 0usize..20) {
            for v in [v, small, v >> (v % 64)] {
                let (mut h, mut l, mut r) = (Vec::new(), Vec::new(), Vec::new());
                hex(&mut h, v, digits);
                dec_left(&mut l, v, width);
                dec_right(&mut r, v, width);
                proptest::prop_assert_eq!(String::from_utf8(h).unwrap(), format!("{v:#0w$x}", w = digits + 2));
                proptest::prop_assert_eq!(String::from_utf8(l).unwrap(), format!("{v:<width$}"));
                proptest::prop_assert_eq!(String::from_utf8(r).unwrap(), format!("{v:>width$}"));
            }
        }
    }

    #[test]
    fn bytes_as_format_writes_them() {
        for b in 0..=u8::MAX {
            let mut o = Vec::new();
            hex_byte(&mut o, b);
            assert_eq!(String::from_utf8(o).unwrap(), format!("{b:02x}"));
        }
    }
}
