//! Reading the bytes to decode from text or binary input.
//!
//! - `xxd` dumps (`00000000: 0000 0008 ...  ascii`): the `offset:` prefix
//!   and the ASCII column (after two spaces) are dropped; the `*` line of
//!   `xxd -a` is filled with zeros up to the next offset;
//! - plain hex: whitespace- or comma-separated words of any even number of
//!   digits, optionally `0x`-prefixed, `#` comments to the end of the line;
//!   each word's bytes are taken in the order written (so big-endian words
//!   as printed are memory order);
//!   `od -An -tx1` output is plain hex (its `*` lines, without offsets,
//!   cannot be restored: `od -v` prints every line);
//! - `hexdump -C` dumps (`00000000  00 11 ...  |ascii|`): the offset and
//!   the `|ascii|` column are dropped, `*` lines are filled with zeros up to
//!   the next offset (the closing offset-only line included);
//! - the kernel's `print_hex_dump` output, as dmesg, `journalctl -k` or
//!   kern.log show it (see `hexin/rows.rs`): the log and device prefixes, the
//!   offset or address and the ASCII column are dropped, and lines that are
//!   not part of the dump (the messages around it) are skipped. Groups of
//!   2, 4 or 8 bytes are printed as the CPU's words; they are read as
//!   little-endian (x86, arm64), so `3412` is the bytes `12 34`;
//! - raw binary: input that is not text (a NUL, a control character or a
//!   non-ASCII byte).
//!
//! [`ByteReader`] reads any of them a chunk at a time, so that what it holds
//! does not grow with the input: a dump line is at most [`MAX_XXD_LINE`]
//! bytes, and the `*` lines of one input stand for at most [`MAX_ZERO_FILL`]
//! zero bytes in all (and are never allocated: the zeros are handed out as
//! they are read). [`read_input`] reads a whole input held in memory.

mod rows;

use rows::Dialect;

use std::fmt;
use std::io::{self, BufRead, Read};

/// The longest dump line read (xxd, hexdump, kernel): `xxd -c 256` lines
/// are about 1 KiB, dmesg lines of a 32-byte print_hex_dump row about 150.
pub const MAX_XXD_LINE: usize = 64 << 10;
/// The most zero bytes the `*` lines of one xxd or hexdump input may stand for, in all.
pub const MAX_ZERO_FILL: u64 = 16 << 20;
/// Most bytes of a word kept to quote it in a message.
const QUOTED_WORD: usize = 64;

/// How the input is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum InputFormat {
    /// Whitespace/comma separated hex words, `#` comments (`od -An -tx1` too).
    #[value(alias = "od")]
    Hex,
    /// `xxd` output.
    Xxd,
    /// `hexdump -C` output.
    Hexdump,
    /// The kernel's `print_hex_dump`, alone or in dmesg/journal lines.
    #[value(alias = "dmesg")]
    Kernel,
    /// The bytes themselves.
    Bin,
}

impl InputFormat {
    /// A few words for messages.
    pub fn describe(self) -> &'static str {
        match self {
            InputFormat::Hex => "plain hex",
            InputFormat::Xxd => "xxd dump",
            InputFormat::Hexdump => "hexdump -C dump",
            InputFormat::Kernel => "kernel hex dump",
            InputFormat::Bin => "raw binary",
        }
    }

    /// The format with an article, for "is not valid ...".
    pub fn noun(self) -> &'static str {
        match self {
            InputFormat::Hex => "hex",
            InputFormat::Xxd => "an xxd dump",
            InputFormat::Hexdump => "a hexdump -C dump",
            InputFormat::Kernel => "a kernel hex dump",
            InputFormat::Bin => "raw binary",
        }
    }

    fn dialect(self) -> Option<Dialect> {
        match self {
            InputFormat::Xxd => Some(Dialect::Xxd),
            InputFormat::Hexdump => Some(Dialect::Hexdump),
            InputFormat::Kernel => Some(Dialect::Kernel),
            InputFormat::Hex | InputFormat::Bin => None,
        }
    }
}

/// Text that is not valid hex, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HexError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (bytes).
    pub column: usize,
    /// Byte offset in the input.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for HexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for HexError {}

/// Why [`ByteReader`] could not go on.
#[derive(Debug)]
pub enum InputError {
    /// The input could not be read.
    Io(io::Error),
    /// The text is not valid hex or xxd.
    Hex(HexError),
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Io(e) => e.fmt(f),
            InputError::Hex(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for InputError {}

fn is_text_byte(b: u8) -> bool {
    (0x20..0x7f).contains(&b) || matches!(b, b'\t' | b'\n' | b'\r')
}

/// Whether `raw` is text: printable ASCII, tabs and line ends only.
pub fn is_text(raw: &[u8]) -> bool {
    raw.iter().all(|&b| is_text_byte(b))
}

/// Guess the format: binary unless text; then by the first content line:
/// a dmesg or journal line (`[   12.345678] ...`, `... kernel: ...`) or a
/// print_hex_dump address (`ffff888123456780: `) is a kernel dump;
/// `OFFSET  hex  |ascii|` is `hexdump -C`; `HEX:` is xxd (print_hex_dump's
/// `DUMP_PREFIX_OFFSET` lines look the same: without the dmesg prefix, give
/// `--input kernel` for groups of several bytes); other text is plain hex.
/// Given the start of a longer input, the guess is the start's.
pub fn detect(raw: &[u8]) -> InputFormat {
    if !is_text(raw) {
        return InputFormat::Bin;
    }
    let first = raw.split(|&b| b == b'\n').map(<[u8]>::trim_ascii).find(|l| !l.is_empty() && !l.starts_with(b"#"));
    match first {
        Some(l) if rows::is_kernel_log(l) || rows::is_kernel_address_line(l) => InputFormat::Kernel,
        Some(l) if rows::is_hexdump_line(l) => InputFormat::Hexdump,
        Some(l) if xxd_offset(l).is_some() => InputFormat::Xxd,
        _ => InputFormat::Hex,
    }
}

/// Read a whole input held in memory: the format given, or the one
/// [`detect`] picks.
pub fn read_input(raw: &[u8], forced: Option<InputFormat>) -> Result<(Vec<u8>, InputFormat), HexError> {
    let format = forced.unwrap_or_else(|| detect(raw));
    if format == InputFormat::Bin {
        return Ok((raw.to_vec(), format));
    }
    let mut r = ByteReader::new(raw, format);
    let mut out = Vec::new();
    loop {
        match r.read_into(&mut out, 1 << 16) {
            Ok(0) => return Ok((out, format)),
            Ok(_) => {}
            Err(InputError::Hex(e)) => return Err(e),
            // Reading a slice cannot fail.
            Err(InputError::Io(e)) => return Err(HexError { line: 0, column: 0, offset: 0, message: e.to_string() }),
        }
    }
}

/// Plain hex: words of an even number of digits, `0x` allowed, `#` comments.
pub fn parse_hex(raw: &[u8]) -> Result<Vec<u8>, HexError> {
    read_input(raw, Some(InputFormat::Hex)).map(|(b, _)| b)
}

/// An `xxd` dump: `OFFSET: hex groups  ascii`. Lines starting with `#` are
/// comments. A `*` line (`xxd -a`) stands for zero lines up to the next offset.
pub fn parse_xxd(raw: &[u8]) -> Result<Vec<u8>, HexError> {
    read_input(raw, Some(InputFormat::Xxd)).map(|(b, _)| b)
}

/// `hexdump -C` output: `OFFSET  hex bytes  |ascii|`, `*` lines, the closing offset.
pub fn parse_hexdump(raw: &[u8]) -> Result<Vec<u8>, HexError> {
    read_input(raw, Some(InputFormat::Hexdump)).map(|(b, _)| b)
}

/// print_hex_dump output, alone or in dmesg/journal lines; see `hexin/rows.rs`.
pub fn parse_kernel(raw: &[u8]) -> Result<Vec<u8>, HexError> {
    read_input(raw, Some(InputFormat::Kernel)).map(|(b, _)| b)
}

/// The offset of an xxd line (`0000abcd:`), if the line starts with one.
fn xxd_offset(line: &[u8]) -> Option<(u64, usize)> {
    let colon = line.iter().position(|&b| b == b':')?;
    let digits = &line[..colon];
    if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    let s = std::str::from_utf8(digits).ok()?;
    Some((u64::from_str_radix(s, 16).ok()?, colon))
}

/// A place in the input text: a line, where it starts, a 0-based column.
#[derive(Clone, Copy, Debug)]
struct At {
    line: usize,
    line_start: usize,
    col0: usize,
}

impl At {
    fn error(self, message: String) -> HexError {
        HexError { line: self.line, column: self.col0 + 1, offset: self.line_start + self.col0, message }
    }

    fn not_text(self, b: u8) -> HexError {
        self.error(format!("byte {b:#04x} is not text (use --input bin)"))
    }
}

/// One hex word being read, a byte at a time: its bytes go out as soon as
/// both digits are in; what is wrong with it is known at its end.
#[derive(Debug, Default)]
struct Word {
    start: Option<At>,
    len: usize,
    digits: usize,
    prefixed: bool,
    high: Option<u8>,
    bad: Option<(At, u8)>,
    quoted: Vec<u8>,
}

impl Word {
    fn push(&mut self, b: u8, at: At, out: &mut Vec<u8>) {
        if self.start.is_none() {
            self.start = Some(at);
        }
        if self.quoted.len() < QUOTED_WORD {
            self.quoted.push(b);
        }
        self.len += 1;
        if self.len == 2 && matches!(b, b'x' | b'X') && self.quoted.first() == Some(&b'0') {
            self.prefixed = true;
            self.digits = 0;
            self.high = None;
            return;
        }
        if self.bad.is_some() {
            return;
        }
        let Some(v) = hex_val(b) else {
            self.bad = Some((at, b));
            return;
        };
        self.digits += 1;
        match self.high.take() {
            Some(h) => out.push((h << 4) | v),
            None => self.high = Some(v),
        }
    }

    fn shown(&self) -> String {
        let more = if self.len > self.quoted.len() { "..." } else { "" };
        format!("{}{more}", String::from_utf8_lossy(&self.quoted))
    }

    /// The word is over: `Err` when it is not whole bytes of hex.
    fn end(&mut self) -> Result<(), HexError> {
        let word = std::mem::take(self);
        let Some(start) = word.start else { return Ok(()) };
        let shown = word.shown();
        if word.digits == 0 && word.bad.is_none() {
            return Err(start.error(format!("'{shown}' has no hex digits")));
        }
        if let Some((at, b)) = word.bad {
            return Err(at.error(format!("'{}' in '{shown}' is not a hex digit", char::from(b))));
        }
        if !word.digits.is_multiple_of(2) {
            let digits = shown.get(if word.prefixed { 2 } else { 0 }..).unwrap_or("");
            return Err(start.error(format!(
                "'{shown}' has an odd number of hex digits ({}): write whole bytes, e.g. '0{digits}'",
                word.digits
            )));
        }
        Ok(())
    }
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn is_separator(b: u8) -> bool {
    b.is_ascii_whitespace() || b == b','
}

/// Plain hex, read a byte at a time (a line may be as long as the input).
#[derive(Debug)]
struct HexText {
    line: usize,
    line_start: usize,
    pos: usize,
    comment: bool,
    word: Word,
}

impl HexText {
    fn new() -> Self {
        HexText { line: 1, line_start: 0, pos: 0, comment: false, word: Word::default() }
    }

    fn byte(&mut self, b: u8, out: &mut Vec<u8>) -> Result<(), HexError> {
        let at = At { line: self.line, line_start: self.line_start, col0: self.pos - self.line_start };
        self.pos += 1;
        if !is_text_byte(b) {
            return Err(at.not_text(b));
        }
        match b {
            b'\n' => {
                self.comment = false;
                self.line += 1;
                self.line_start = self.pos;
                self.word.end()
            }
            _ if self.comment => Ok(()),
            b'#' => {
                self.comment = true;
                self.word.end()
            }
            b':' => Err(at.error("':' in plain hex (is this an xxd dump? use --input xxd)".into())),
            b'*' => Err(at.error(
                "'*' in plain hex: od (or hexdump) left out repeated lines there, which cannot be restored \
                 without offsets; run od with -v"
                    .into(),
            )),
            _ if is_separator(b) => self.word.end(),
            _ => {
                self.word.push(b, at, out);
                Ok(())
            }
        }
    }
}

/// A line-based dump (xxd, hexdump -C, kernel), read a line at a time.
#[derive(Debug)]
struct LineText {
    dialect: Dialect,
    line: usize,
    line_start: usize,
    base: Option<u64>,
    /// Bytes given out so far, zeros of `*` lines included.
    produced: u64,
    skipped: bool,
    zeros_filled: u64,
    /// hexdump's closing offset line was read.
    ended: bool,
}

impl LineText {
    fn new(dialect: Dialect) -> Self {
        LineText {
            dialect,
            line: 0,
            line_start: 0,
            base: None,
            produced: 0,
            skipped: false,
            zeros_filled: 0,
            ended: false,
        }
    }

    /// One line (its `\n` removed): its bytes go to `out`, and the zeros a
    /// `*` line before it stands for are returned.
    fn line(&mut self, raw: &[u8], out: &mut Vec<u8>) -> Result<u64, HexError> {
        self.line += 1;
        let (line, line_start) = (self.line, self.line_start);
        let at = |col0| At { line, line_start, col0 };
        if let Some(p) = raw.iter().position(|&b| !is_text_byte(b)) {
            return Err(at(p).not_text(raw[p]));
        }
        let l = raw.strip_suffix(b"\r").unwrap_or(raw);
        let lead = l.len() - l.trim_ascii_start().len();
        let t = l.trim_ascii();
        if t.is_empty() || t.starts_with(b"#") {
            return Ok(0);
        }
        if t == b"*" {
            self.skipped = true;
            return Ok(0);
        }
        if self.ended {
            return Err(at(lead).error("a line after hexdump's closing offset line".into()));
        }
        let Some(row) = rows::split(self.dialect, l, lead).map_err(|(c, m)| at(c).error(m))? else {
            return Ok(0);
        };
        let zeros = match row.offset {
            Some(off) => {
                let have = self.base.get_or_insert(off).saturating_add(self.produced);
                if self.skipped && off > have {
                    self.zero_fill(off - have).map_err(|m| at(lead).error(m))?
                } else if off != have {
                    return Err(at(lead)
                        .error(format!("offset {off:#x} does not follow the previous line (expected {have:#x})")));
                } else {
                    0
                }
            }
            None if self.skipped => {
                return Err(at(lead).error("a '*' line before a line without an offset: its length is unknown".into()));
            }
            None => 0,
        };
        self.skipped = false;
        self.ended = row.end;
        let start = out.len();
        groups(row.hex, row.little_endian_groups, |i| at(row.hex_col + i), out)?;
        self.produced = self.produced.saturating_add(zeros).saturating_add((out.len() - start) as u64);
        Ok(zeros)
    }

    /// Checks the zeros a `*` line stands for against [`MAX_ZERO_FILL`].
    fn zero_fill(&mut self, gap: u64) -> Result<u64, String> {
        let total = self.zeros_filled.saturating_add(gap);
        if total > MAX_ZERO_FILL {
            return Err(format!(
                "the '*' line before this one stands for {gap:#x} zero bytes, which makes {total:#x} in all: \
                 the '*' lines of an input may stand for at most {MAX_ZERO_FILL:#x} bytes (16 MiB)"
            ));
        }
        self.zeros_filled = total;
        Ok(gap)
    }
}

/// The hex groups of one dump line into `out`; with `little_endian_groups`,
/// each group of several bytes is a word whose bytes are reversed.
fn groups(hex: &[u8], little_endian_groups: bool, at: impl Fn(usize) -> At, out: &mut Vec<u8>) -> Result<(), HexError> {
    let mut word = Word::default();
    let mut start = out.len();
    let end_group = |word: &mut Word, out: &mut Vec<u8>, start: &mut usize| -> Result<(), HexError> {
        let at = word.start;
        word.end()?;
        if little_endian_groups {
            let n = out.len() - *start;
            if let Some(at) = at
                && !matches!(n, 0 | 1 | 2 | 4 | 8)
            {
                return Err(at.error(format!(
                    "a group of {n} bytes: print_hex_dump prints groups of 1, 2, 4 or 8 bytes (2, 4, 8 or 16 digits)"
                )));
            }
            out[*start..].reverse();
        }
        *start = out.len();
        Ok(())
    };
    for (i, &b) in hex.iter().enumerate() {
        if is_separator(b) {
            end_group(&mut word, out, &mut start)?;
        } else {
            word.push(b, at(i), out);
        }
    }
    end_group(&mut word, out, &mut start)
}

#[derive(Debug)]
enum Text {
    Bin,
    Hex(HexText),
    Lines(LineText),
}

/// The bytes of an input in any [`InputFormat`], read a chunk at a time
/// from `src`: memory is bounded by the chunk asked for and one dump line.
#[derive(Debug)]
pub struct ByteReader<R> {
    src: R,
    text: Text,
    /// Bytes of the current dump line not handed out yet.
    pending: Vec<u8>,
    pending_at: usize,
    /// Zeros of a `*` line not handed out yet, given out before `pending`.
    zeros: u64,
    line: Vec<u8>,
    done: bool,
}

impl<R: BufRead> ByteReader<R> {
    /// A reader of `src`, written as `format`.
    pub fn new(src: R, format: InputFormat) -> Self {
        let text = match (format, format.dialect()) {
            (_, Some(d)) => Text::Lines(LineText::new(d)),
            (InputFormat::Hex, None) => Text::Hex(HexText::new()),
            _ => Text::Bin,
        };
        ByteReader { src, text, pending: Vec::new(), pending_at: 0, zeros: 0, line: Vec::new(), done: false }
    }

    /// Append up to `max` more bytes to `out`; `Ok(0)` at the end of the input.
    pub fn read_into(&mut self, out: &mut Vec<u8>, max: usize) -> Result<usize, InputError> {
        let start = out.len();
        while out.len() - start < max {
            let room = max - (out.len() - start);
            let got = match self.text {
                Text::Bin => read_bin(&mut self.src, out, room)?,
                Text::Hex(ref mut h) => read_hex(&mut self.src, h, out, room)?,
                Text::Lines(_) => self.read_lines(out, room)?,
            };
            if got == 0 {
                break;
            }
        }
        Ok(out.len() - start)
    }

    fn read_lines(&mut self, out: &mut Vec<u8>, room: usize) -> Result<usize, InputError> {
        loop {
            if self.zeros > 0 {
                let n = usize::try_from(self.zeros).unwrap_or(usize::MAX).min(room);
                out.resize(out.len() + n, 0);
                self.zeros -= n as u64;
                return Ok(n);
            }
            if self.pending_at < self.pending.len() {
                let n = (self.pending.len() - self.pending_at).min(room);
                out.extend_from_slice(&self.pending[self.pending_at..self.pending_at + n]);
                self.pending_at += n;
                return Ok(n);
            }
            if self.done {
                return Ok(0);
            }
            self.next_line()?;
        }
    }

    fn next_line(&mut self) -> Result<(), InputError> {
        let Text::Lines(x) = &mut self.text else { return Ok(()) };
        loop {
            self.line.clear();
            let n = (&mut self.src)
                .take(MAX_XXD_LINE as u64 + 1)
                .read_until(b'\n', &mut self.line)
                .map_err(InputError::Io)?;
            if n == 0 {
                self.done = true;
                return Ok(());
            }
            let body: &[u8] = match self.line.strip_suffix(b"\n") {
                Some(b) => b,
                None if self.line.len() <= MAX_XXD_LINE => &self.line,
                None => {
                    let at = At { line: x.line + 1, line_start: x.line_start, col0: MAX_XXD_LINE };
                    let m = format!("line longer than {MAX_XXD_LINE} bytes, the most a dump line may have");
                    return Err(InputError::Hex(at.error(m)));
                }
            };
            self.pending.clear();
            self.pending_at = 0;
            self.zeros = x.line(body, &mut self.pending).map_err(InputError::Hex)?;
            x.line_start += n;
            if self.zeros > 0 || !self.pending.is_empty() {
                return Ok(());
            }
        }
    }
}

fn read_bin<R: BufRead>(src: &mut R, out: &mut Vec<u8>, room: usize) -> Result<usize, InputError> {
    let buf = src.fill_buf().map_err(InputError::Io)?;
    let n = buf.len().min(room);
    out.extend_from_slice(&buf[..n]);
    src.consume(n);
    Ok(n)
}

/// Feeds input to `h` until `room` bytes came out or the input ends; the
/// count of input bytes used is returned (0 at the end).
fn read_hex<R: BufRead>(src: &mut R, h: &mut HexText, out: &mut Vec<u8>, room: usize) -> Result<usize, InputError> {
    let start = out.len();
    let buf = src.fill_buf().map_err(InputError::Io)?;
    if buf.is_empty() {
        h.word.end().map_err(InputError::Hex)?;
        return Ok(0);
    }
    let mut used = 0;
    for &b in buf {
        if out.len() - start >= room {
            break;
        }
        used += 1;
        h.byte(b, out).map_err(InputError::Hex)?;
    }
    src.consume(used);
    Ok(used)
}

#[cfg(test)]
mod dump_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_hex_words_in_written_order() {
        let t = b"# a comment\n00001208 00123403 # trailing\n0x0a0B,0Xff\n  c0ffee\n";
        assert_eq!(
            parse_hex(t).unwrap(),
            [0x00, 0x00, 0x12, 0x08, 0x00, 0x12, 0x34, 0x03, 0x0a, 0x0b, 0xff, 0xc0, 0xff, 0xee]
        );
        assert_eq!(detect(t), InputFormat::Hex);
    }

    #[test]
    fn plain_hex_errors_say_where() {
        let e = parse_hex(b"0000\n00g0\n").unwrap_err();
        assert_eq!((e.line, e.column, e.offset), (2, 3, 7));
        assert!(e.message.contains("'g'"), "{e}");
        let e = parse_hex(b"abc").unwrap_err();
        assert!(e.message.contains("odd number"), "{e}");
        let e = parse_hex(b"0x").unwrap_err();
        assert!(e.message.contains("no hex digits"), "{e}");
        let e = parse_hex(b"00 ff\x00").unwrap_err();
        assert!(e.message.contains("not text"), "{e}");
        assert_eq!((e.line, e.column), (1, 6));
    }

    #[test]
    fn xxd_strips_offsets_and_ascii() {
        let t = b"00000000: 0000 0508 0012 3403 0000 0008 0000 0000  ..........4.....\n\
                  00000010: 4142 2020 3a3a                           AB  ::\n";
        assert_eq!(detect(t), InputFormat::Xxd);
        let b = parse_xxd(t).unwrap();
        assert_eq!(b.len(), 22);
        assert_eq!(&b[..8], [0, 0, 5, 8, 0, 0x12, 0x34, 3]);
        assert_eq!(&b[16..], b"AB  ::");
    }

    #[test]
    fn xxd_autoskip_and_offsets() {
        let t = b"00000000: 0102 0304 0506 0708 0910 1112 1314 1516  ................\n*\n00000030: ffff  ..\n";
        let b = parse_xxd(t).unwrap();
        assert_eq!(b.len(), 0x32);
        assert!(b[0x10..0x30].iter().all(|&x| x == 0));
        let e = parse_xxd(b"00000000: 0102  ..\n00000010: 0304  ..\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("does not follow"), "{e}");
        let e = parse_xxd(b"00000000: 0102  ..\nnope\n").unwrap_err();
        assert_eq!(e.line, 2);
    }

    /// The shape of the 973-byte input that made `marrow decode` allocate
    /// 1 GiB: `*` lines one after another, each standing for 16 MiB of zeros.
    pub(crate) fn star_lines_input() -> Vec<u8> {
        let mut t = b"0:00\n".to_vec();
        for k in 1u64.. {
            let pair = format!("*\n{:x}:00\n", k * ((1 << 24) + 1));
            if t.len() + pair.len() > 973 - 2 {
                break;
            }
            t.extend_from_slice(pair.as_bytes());
        }
        t.push(b'#');
        t.resize(972, b'#');
        t.push(b'\n');
        t
    }

    #[test]
    fn star_lines_are_capped_in_all_not_allocated() {
        let t = star_lines_input();
        assert_eq!(t.len(), 973);
        let e = parse_xxd(&t).unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        assert!(e.message.contains("at most 0x1000000 bytes (16 MiB)"), "{e}");
        // Within the cap, the zeros are there.
        let b = parse_xxd(b"0:01\n*\n1000001:02\n").unwrap();
        assert_eq!((b.len(), b[0], b[b.len() - 1]), ((1 << 24) + 2, 1, 2));
        assert!(b[1..b.len() - 1].iter().all(|&z| z == 0));
    }

    #[test]
    fn long_xxd_lines_are_refused() {
        let mut t = b"00000000: 00".to_vec();
        t.resize(MAX_XXD_LINE + 10, b'0');
        let e = parse_xxd(&t).unwrap_err();
        assert!(e.message.contains("line longer than 65536 bytes"), "{e}");
        // Plain hex has no such cap: one long line is fine.
        let mut t = vec![b'a'; 4 << 20];
        t.push(b'\n');
        assert_eq!(parse_hex(&t).unwrap().len(), 2 << 20);
    }

    /// Reading a chunk at a time gives the bytes and the error reading all at once gives.
    pub(super) fn chunked(raw: &[u8], f: InputFormat, chunk: usize) -> Result<Vec<u8>, String> {
        let mut r = ByteReader::new(std::io::BufReader::with_capacity(7, raw), f);
        let mut out = Vec::new();
        loop {
            match r.read_into(&mut out, chunk) {
                Ok(0) => return Ok(out),
                Ok(n) => assert!(n <= chunk),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    #[test]
    fn binary_is_detected() {
        assert_eq!(detect(b"\x00\x00\x05\x08"), InputFormat::Bin);
        assert_eq!(detect("é".as_bytes()), InputFormat::Bin);
        assert_eq!(read_input(b"\x01\xff", None).unwrap(), (vec![1, 0xff], InputFormat::Bin));
        assert_eq!(read_input(b"0102", Some(InputFormat::Bin)).unwrap().0, b"0102");
        assert_eq!(read_input(b"", None).unwrap(), (vec![], InputFormat::Hex));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn any_string_never_panics(s in "\\PC*", raw in proptest::collection::vec(any::<u8>(), 0..200)) {
            for f in [None, Some(InputFormat::Hex), Some(InputFormat::Xxd), Some(InputFormat::Hexdump), Some(InputFormat::Kernel), Some(InputFormat::Bin)] {
                let _ = read_input(s.as_bytes(), f);
                let _ = read_input(&raw, f);
            }
        }

        #[test]
        fn hexish_strings_never_panic(s in "[0-9a-fA-FxX:*# ,\t\r\n.]{0,200}") {
            for f in [None, Some(InputFormat::Hex), Some(InputFormat::Xxd)] {
                let _ = read_input(s.as_bytes(), f);
            }
        }

        #[test]
        fn chunked_reads_agree_with_whole_reads(s in "[0-9a-fA-FxX:*# ,\t\r\n.]{0,300}", chunk in 1usize..40) {
            for f in [InputFormat::Hex, InputFormat::Xxd, InputFormat::Bin] {
                let whole = read_input(s.as_bytes(), Some(f)).map(|(b, _)| b).map_err(|e| e.to_string());
                prop_assert_eq!(chunked(s.as_bytes(), f, chunk), whole);
            }
        }

        #[test]
        fn xxd_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..300), chunk in 1usize..40) {
            let mut text = String::new();
            for (i, line) in bytes.chunks(16).enumerate() {
                let hex: Vec<String> = line.chunks(2).map(crate::model::hex_string).collect();
                text.push_str(&format!("{:08x}: {}  ................\n", i * 16, hex.join(" ")));
            }
            prop_assert_eq!(&parse_xxd(text.as_bytes()).unwrap(), &bytes);
            prop_assert_eq!(chunked(text.as_bytes(), InputFormat::Xxd, chunk).unwrap(), bytes);
        }

        #[test]
        fn plain_hex_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..100), w in 1usize..9) {
            let text: Vec<String> = bytes.chunks(w).map(crate::model::hex_string).collect();
            prop_assert_eq!(parse_hex(text.join(" ").as_bytes()).unwrap(), bytes);
        }
    }
}
