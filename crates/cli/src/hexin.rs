//! Reading the bytes to decode from text or binary input.
//!
//! - `xxd` dumps (`00000000: 0000 0008 ...  ascii`): the `offset:` prefix
//!   and the ASCII column (after two spaces) are dropped; the `*` line of
//!   `xxd -a` is filled with zeros up to the next offset;
//! - plain hex: whitespace- or comma-separated words of any even number of
//!   digits, optionally `0x`-prefixed, `#` comments to the end of the line;
//!   each word's bytes are taken in the order written (so big-endian words
//!   as printed are memory order);
//! - raw binary: input that is not text (a NUL, a control character or a
//!   non-ASCII byte).

use std::fmt;

/// How the input is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum InputFormat {
    /// Whitespace/comma separated hex words, `#` comments.
    Hex,
    /// `xxd` output.
    Xxd,
    /// The bytes themselves.
    Bin,
}

impl InputFormat {
    /// A few words for messages.
    pub fn describe(self) -> &'static str {
        match self {
            InputFormat::Hex => "plain hex",
            InputFormat::Xxd => "xxd dump",
            InputFormat::Bin => "raw binary",
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

/// Whether `raw` is text: printable ASCII, tabs and line ends only.
pub fn is_text(raw: &[u8]) -> bool {
    raw.iter().all(|&b| (0x20..0x7f).contains(&b) || matches!(b, b'\t' | b'\n' | b'\r'))
}

/// Guess the format: binary unless text; text whose first content line
/// starts with `HEX:` is an xxd dump; other text is plain hex.
pub fn detect(raw: &[u8]) -> InputFormat {
    if !is_text(raw) {
        return InputFormat::Bin;
    }
    let first = raw.split(|&b| b == b'\n').map(trim_ascii).find(|l| !l.is_empty() && !l.starts_with(b"#"));
    match first {
        Some(l) if xxd_offset(l).is_some() => InputFormat::Xxd,
        _ => InputFormat::Hex,
    }
}

/// Read the input: the format given, or the one [`detect`] picks.
pub fn read_input(raw: &[u8], forced: Option<InputFormat>) -> Result<(Vec<u8>, InputFormat), HexError> {
    let format = forced.unwrap_or_else(|| detect(raw));
    let bytes = match format {
        InputFormat::Bin => raw.to_vec(),
        InputFormat::Hex => parse_hex(raw)?,
        InputFormat::Xxd => parse_xxd(raw)?,
    };
    Ok((bytes, format))
}

fn trim_ascii(l: &[u8]) -> &[u8] {
    l.trim_ascii()
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

/// Lines of `raw` with their 1-based number and byte offset, `\r` dropped.
fn lines(raw: &[u8]) -> impl Iterator<Item = (usize, usize, &[u8])> {
    let mut at = 0;
    raw.split(|&b| b == b'\n').enumerate().map(move |(i, l)| {
        let start = at;
        at += l.len() + 1;
        (i + 1, start, l.strip_suffix(b"\r").unwrap_or(l))
    })
}

fn err(line: usize, line_start: usize, col0: usize, message: String) -> HexError {
    HexError { line, column: col0 + 1, offset: line_start + col0, message }
}

fn not_text(raw: &[u8]) -> Option<HexError> {
    let pos = raw.iter().position(|&b| !((0x20..0x7f).contains(&b) || matches!(b, b'\t' | b'\n' | b'\r')))?;
    let line = raw[..pos].iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = raw[..pos].iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    Some(err(line, line_start, pos - line_start, format!("byte {:#04x} is not text (use --input bin)", raw[pos])))
}

/// Parse the hex words of `text` (one line, comments removed) into `out`;
/// `col0` is where `text` starts in its line.
fn hex_words(text: &[u8], line: usize, line_start: usize, col0: usize, out: &mut Vec<u8>) -> Result<(), HexError> {
    let mut i = 0;
    while i < text.len() {
        if text[i].is_ascii_whitespace() || text[i] == b',' {
            i += 1;
            continue;
        }
        let start = i;
        while i < text.len() && !(text[i].is_ascii_whitespace() || text[i] == b',') {
            i += 1;
        }
        let word = &text[start..i];
        let shown = String::from_utf8_lossy(word);
        let (digits, skip) = match word {
            [b'0', b'x' | b'X', rest @ ..] => (rest, 2),
            _ => (word, 0),
        };
        if digits.is_empty() {
            return Err(err(line, line_start, col0 + start, format!("'{shown}' has no hex digits")));
        }
        if let Some(bad) = digits.iter().position(|b| !b.is_ascii_hexdigit()) {
            return Err(err(
                line,
                line_start,
                col0 + start + skip + bad,
                format!("'{}' in '{shown}' is not a hex digit", char::from(digits[bad])),
            ));
        }
        if !digits.len().is_multiple_of(2) {
            return Err(err(
                line,
                line_start,
                col0 + start,
                format!(
                    "'{shown}' has an odd number of hex digits ({}): write whole bytes, e.g. '0{}'",
                    digits.len(),
                    String::from_utf8_lossy(digits)
                ),
            ));
        }
        for pair in digits.chunks_exact(2) {
            let hi = hex_val(pair[0]);
            let lo = hex_val(pair[1]);
            out.push((hi << 4) | lo);
        }
    }
    Ok(())
}

fn hex_val(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        b'A'..=b'F' => b - b'A' + 10,
        _ => 0,
    }
}

/// Plain hex: words of an even number of digits, `0x` allowed, `#` comments.
pub fn parse_hex(raw: &[u8]) -> Result<Vec<u8>, HexError> {
    if let Some(e) = not_text(raw) {
        return Err(e);
    }
    let mut out = Vec::new();
    for (n, start, l) in lines(raw) {
        let code = match l.iter().position(|&b| b == b'#') {
            Some(p) => &l[..p],
            None => l,
        };
        if let Some(c) = code.iter().position(|&b| b == b':') {
            return Err(err(n, start, c, "':' in plain hex (is this an xxd dump? use --input xxd)".into()));
        }
        hex_words(code, n, start, 0, &mut out)?;
    }
    Ok(out)
}

/// An `xxd` dump: `OFFSET: hex groups  ascii`. Lines starting with `#` are
/// comments. A `*` line (`xxd -a`) stands for zero lines up to the next offset.
pub fn parse_xxd(raw: &[u8]) -> Result<Vec<u8>, HexError> {
    if let Some(e) = not_text(raw) {
        return Err(e);
    }
    let mut out = Vec::new();
    let mut base: Option<u64> = None;
    let mut skipped = false;
    for (n, start, l) in lines(raw) {
        let lead = l.len() - l.trim_ascii_start().len();
        let t = l.trim_ascii();
        if t.is_empty() || t.starts_with(b"#") {
            continue;
        }
        if t == b"*" {
            skipped = true;
            continue;
        }
        let Some((off, colon)) = xxd_offset(&l[lead..]) else {
            return Err(err(n, start, lead, "expected an xxd line 'OFFSET: hex groups  ascii'".into()));
        };
        let b = *base.get_or_insert(off);
        let have = b.saturating_add(out.len() as u64);
        if skipped && off > have && off - have <= 1 << 24 {
            out.resize(out.len() + (off - have) as usize, 0);
        } else if off != have {
            return Err(err(
                n,
                start,
                lead,
                format!("offset {off:#x} does not follow the previous line (expected {have:#x})"),
            ));
        }
        skipped = false;
        let col = lead + colon + 1;
        let rest = &l[col..];
        let (rest, col) = match rest.strip_prefix(b" ") {
            Some(r) => (r, col + 1),
            None => (rest, col),
        };
        let hex = match rest.windows(2).position(|w| w == b"  ") {
            Some(p) => &rest[..p],
            None => rest,
        };
        hex_words(hex, n, start, col, &mut out)?;
    }
    Ok(out)
}

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
            for f in [None, Some(InputFormat::Hex), Some(InputFormat::Xxd), Some(InputFormat::Bin)] {
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
        fn plain_hex_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..100), w in 1usize..9) {
            let text: Vec<String> = bytes.chunks(w).map(crate::model::hex_string).collect();
            prop_assert_eq!(parse_hex(text.join(" ").as_bytes()).unwrap(), bytes);
        }
    }
}
