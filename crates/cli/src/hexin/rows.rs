//! Where the hex of one dump line is, in each line-based dump format: the
//! offset the line gives (when it is one to check), the hex groups, and
//! whether the groups are words in the CPU's byte order.
//!
//! - xxd: `00000000: 0000 0508 ...  ascii`;
//! - `hexdump -C`: `00000000  00 11 22 ...  88 99 ...  |ascii|`, whose last
//!   line is the offset alone (the length of what was dumped);
//! - the kernel's `print_hex_dump` (lib/hexdump.c), in dmesg or journal
//!   lines: `[   12.345678] ` (and `[  T123] `, `<4>`, `... kernel: `)
//!   and an optional `driver 0000:3b:00.0: ` device prefix come off first;
//!   then `DUMP_PREFIX_OFFSET` (`%.8x: `), `DUMP_PREFIX_ADDRESS` (`%p: `,
//!   more than 8 digits) or `DUMP_PREFIX_NONE` (the groups alone). The
//!   kernel prints groups of 2, 4 and 8 bytes as `u16`/`u32`/`u64` values,
//!   so in the CPU's byte order: they are read as little-endian (x86, arm64).

use super::xxd_offset;

/// How a dump's lines are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dialect {
    Xxd,
    Hexdump,
    Kernel,
}

/// The parts of one dump line.
#[derive(Debug)]
pub(super) struct Row<'a> {
    /// The offset the line starts at, when the next one must follow it.
    /// `DUMP_PREFIX_ADDRESS` lines have none: `%p` is hashed unless the
    /// kernel runs with `no_hash_pointers`, so addresses need not follow.
    pub offset: Option<u64>,
    /// The hex groups (the ASCII column cut off).
    pub hex: &'a [u8],
    /// The 0-based column `hex` starts at.
    pub hex_col: usize,
    /// Groups of several bytes are little-endian words (print_hex_dump).
    pub little_endian_groups: bool,
    /// hexdump's closing line: the offset alone.
    pub end: bool,
}

/// What is wrong with a line, and the 0-based column.
pub(super) type RowError = (usize, String);

/// The parts of `l` (no line end; `lead` blanks before its text), or `None`
/// for a line that is not part of the dump (a kernel log message).
pub(super) fn split(d: Dialect, l: &[u8], lead: usize) -> Result<Option<Row<'_>>, RowError> {
    match d {
        Dialect::Xxd => xxd(l, lead).map(Some),
        Dialect::Hexdump => hexdump(l, lead).map(Some),
        Dialect::Kernel => Ok(kernel(l, lead)),
    }
}

/// The text before the ASCII column: it starts after two spaces (xxd and
/// print_hex_dump pad the hex to a fixed width, then leave at least two).
fn before_ascii(rest: &[u8]) -> &[u8] {
    match rest.windows(2).position(|w| w == b"  ") {
        Some(p) => &rest[..p],
        None => rest,
    }
}

fn xxd(l: &[u8], lead: usize) -> Result<Row<'_>, RowError> {
    let Some((off, colon)) = xxd_offset(&l[lead..]) else {
        return Err((lead, "expected an xxd line 'OFFSET: hex groups  ascii'".into()));
    };
    let mut col = lead + colon + 1;
    if l.get(col) == Some(&b' ') {
        col += 1;
    }
    Ok(Row { offset: Some(off), hex: before_ascii(&l[col..]), hex_col: col, little_endian_groups: false, end: false })
}

fn hex_digits(t: &[u8]) -> usize {
    t.iter().take_while(|b| b.is_ascii_hexdigit()).count()
}

fn parse_offset(digits: &[u8]) -> Option<u64> {
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

fn hexdump(l: &[u8], lead: usize) -> Result<Row<'_>, RowError> {
    let t = &l[lead..];
    let n = hex_digits(t);
    let bad = || (lead, "expected a hexdump -C line 'OFFSET  hex bytes  |ascii|'".to_string());
    let off = (1..=16).contains(&n).then(|| parse_offset(&t[..n])).flatten().ok_or_else(bad)?;
    let rest = &t[n..];
    if rest.trim_ascii().is_empty() {
        return Ok(Row { offset: Some(off), hex: &[], hex_col: lead + n, little_endian_groups: false, end: true });
    }
    if !rest.starts_with(b"  ") {
        return Err(bad());
    }
    let body = &rest[2..];
    // The ASCII column is between bars; the hex has a double space in its middle.
    let hex = match body.iter().position(|&b| b == b'|') {
        Some(p) => &body[..p],
        None => body,
    };
    Ok(Row { offset: Some(off), hex, hex_col: lead + n + 2, little_endian_groups: false, end: false })
}

/// The column after what dmesg, journalctl or syslog put before a kernel
/// message: `<4>` (dmesg -r), up to two `[...]` groups (the timestamp, in
/// seconds or `-T` time, and the `CONFIG_PRINTK_CALLER` id), or everything
/// up to ` kernel: ` (journalctl, /var/log/kern.log).
pub(super) fn after_log_prefix(l: &[u8], mut i: usize) -> usize {
    if let Some(end) = journal_prefix_end(l) {
        i = i.max(end);
    }
    if l.get(i) == Some(&b'<')
        && let Some(close) = l[i..].iter().take(5).position(|&b| b == b'>')
        && close > 1
        && l[i + 1..i + close].iter().all(u8::is_ascii_digit)
    {
        i += close + 1;
    }
    for _ in 0..2 {
        if l.get(i) != Some(&b'[') {
            break;
        }
        // A timestamp is short: a `[` further on is the message's.
        let Some(close) = l[i..].iter().take(64).position(|&b| b == b']') else { break };
        i += close + 1;
        while l.get(i) == Some(&b' ') {
            i += 1;
        }
    }
    i
}

/// The end of a journalctl or syslog prefix (`Dec 02 06:54:24 node7 kernel: `):
/// a ` kernel: ` after a time of day, in a prefix that is not a dump line
/// itself (an xxd or hexdump line whose ASCII column shows a log).
fn journal_prefix_end(l: &[u8]) -> Option<usize> {
    let p = l.windows(9).take(96).position(|w| w == b" kernel: ")?;
    let prefix = &l[..p];
    let time = prefix
        .windows(8)
        .any(|w| w.iter().enumerate().all(|(k, b)| if k == 2 || k == 5 { *b == b':' } else { b.is_ascii_digit() }));
    (time && !prefix.contains(&b'|') && xxd_offset(prefix).is_none()).then_some(p + 9)
}

/// Whether `l` starts like a dmesg or journal line of the kernel.
pub(super) fn is_kernel_log(l: &[u8]) -> bool {
    after_log_prefix(l, 0) > 0
}

fn is_bdf(b: &[u8]) -> bool {
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter().enumerate().all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The column after `dev_printk`'s `driver 0000:3b:00.0: ` (and
/// `netdev_printk`'s `driver 0000:3b:00.0 eth0: `), if the text at `i` has one.
fn after_device_prefix(l: &[u8], i: usize) -> usize {
    let t = &l[i..];
    let Some(sp) = t.iter().take(64).position(|&b| b == b' ') else { return i };
    if !t.get(sp + 1..sp + 13).is_some_and(is_bdf) {
        return i;
    }
    let after = &t[sp + 13..];
    if after.starts_with(b": ") {
        return i + sp + 15;
    }
    // A netdev name: one word, then `: `.
    if let Some(name) = after.strip_prefix(b" ")
        && let Some(colon) = name.iter().take(32).position(|&b| b == b':')
        && colon > 0
        && !name[..colon].contains(&b' ')
        && name.get(colon + 1) == Some(&b' ')
    {
        return i + sp + 14 + colon + 2;
    }
    i
}

/// What `%p` prints before the random key of pointer hashing is ready.
const PTRVAL: &[u8] = b"(____ptrval____)";

/// Whether every word of `hex` is a print_hex_dump group: 2, 4, 8 or 16 digits.
fn all_groups(hex: &[u8]) -> bool {
    let mut words = hex.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty()).peekable();
    words.peek().is_some() && words.all(|w| matches!(w.len(), 2 | 4 | 8 | 16) && w.iter().all(u8::is_ascii_hexdigit))
}

/// A print_hex_dump line, or `None` for other kernel messages, which dmesg
/// pastes carry around a dump (`mlx5_0:dump_cqe:275:(pid 0): dump error cqe`).
fn kernel(l: &[u8], lead: usize) -> Option<Row<'_>> {
    let col = after_device_prefix(l, after_log_prefix(l, lead));
    let t = &l[col..];
    let n = hex_digits(t);
    let prefix = if t.starts_with(PTRVAL) {
        Some((None, PTRVAL.len()))
    } else if n > 0 && t.get(n) == Some(&b':') {
        // DUMP_PREFIX_OFFSET prints `%.8x`; DUMP_PREFIX_ADDRESS prints `%p`, 16 digits on 64-bit.
        Some(((n <= 8).then(|| parse_offset(&t[..n])).flatten(), n))
    } else {
        None
    };
    let (offset, hex_col) = match prefix {
        Some((offset, len)) if t.get(len) == Some(&b':') && matches!(t.get(len + 1), None | Some(b' ')) => {
            (offset, col + len + 2)
        }
        _ => (None, col),
    };
    let hex = before_ascii(l.get(hex_col..).unwrap_or(&[]));
    if prefix.is_none() && !all_groups(hex) {
        return None;
    }
    Some(Row { offset, hex, hex_col, little_endian_groups: true, end: false })
}

/// Whether `l` is a `hexdump -C` data line: an offset, two spaces, and the
/// ASCII column between bars (plain hex words never have the bar).
pub(super) fn is_hexdump_line(l: &[u8]) -> bool {
    let n = hex_digits(l);
    n >= 7 && l[n..].starts_with(b"  ") && l.contains(&b'|')
}

/// Whether `l` starts with a print_hex_dump address (`DUMP_PREFIX_ADDRESS`):
/// more digits than xxd's and the kernel's 8-digit offsets.
pub(super) fn is_kernel_address_line(l: &[u8]) -> bool {
    let n = hex_digits(l);
    (l.starts_with(PTRVAL) && l.get(PTRVAL.len()) == Some(&b':')) || (n > 8 && l.get(n) == Some(&b':'))
}
