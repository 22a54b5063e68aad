//! Rendering a [`Report`]: indented text in the manner of `lspci -vvv`, or
//! JSON. Errors are not part of the text (the caller prints them on stderr);
//! they are part of the JSON.
//!
//! [`escape`] and [`escape_bytes`] are for every string that comes from
//! input (file and directory names, trace payload text, dump titles): a
//! terminal must show such text, never obey it.

use crate::fields::{enum_text, hex_digits};
use crate::model::{Bit, Decoded, Field, Kind, Node, Report, Value};
use marrow_mlx5::raw::MLX5_SEND_WQE_BB;
use std::fmt::Write;

const BB: usize = MLX5_SEND_WQE_BB as usize;

/// The report as text, one line per field and bit field.
pub fn render_text(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Kind: {} ({})", r.kind, r.reason);
    for (i, d) in r.items.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        item(&mut o, d);
    }
    o
}

/// The report as pretty-printed JSON: one object, or an array when there
/// are several items.
pub fn render_json(r: &Report) -> String {
    let j = match r.items.as_slice() {
        [one] => serde_json::to_string_pretty(one),
        many => serde_json::to_string_pretty(many),
    };
    j.unwrap_or_else(|e| serde_json::json!({ "error": e.to_string(), "offset": null }).to_string())
}

/// `marrow decode`'s output, written item by item as [`crate::decode::decode_stream`]
/// decodes them: the same text as [`render_text`] (after an `Input:` line),
/// or the same JSON as [`render_json`]; each item's errors go to `err` as
/// `error:` lines as it is written.
#[derive(Debug)]
pub struct DecodeWriter<W, E> {
    out: W,
    err: E,
    json: bool,
    /// The input's name and format, for the `Input:` line.
    source: String,
    format: &'static str,
    items: usize,
    /// JSON: the first item, held until a second shows whether to print an array.
    first: Option<Decoded>,
    /// Some item had errors.
    pub bad: bool,
}

impl<W: std::io::Write, E: std::io::Write> DecodeWriter<W, E> {
    /// A writer of text (or JSON) to `out` and errors to `err`, for an input
    /// called `source` (escaped already) written as `format`.
    pub fn new(out: W, err: E, json: bool, source: String, format: &'static str) -> Self {
        DecodeWriter { out, err, json, source, format, items: 0, first: None, bad: false }
    }

    /// All items are in: close the output.
    pub fn finish(&mut self) -> std::io::Result<()> {
        if self.json {
            match self.first.take() {
                Some(one) => writeln!(self.out, "{}", item_json(&one))?,
                None if self.items > 1 => writeln!(self.out, "\n]")?,
                None => {}
            }
        }
        self.out.flush()
    }

    /// The input broke off with `e` (after the items so far): in JSON an
    /// `{"error", "offset"}` object ends the output, in an array if items came before.
    pub fn fail(&mut self, e: &crate::model::ErrorAt) -> std::io::Result<()> {
        let obj = serde_json::json!({ "error": e.error, "offset": e.offset });
        if self.json {
            match (self.items, self.first.take()) {
                (0, _) => writeln!(self.out, "{obj}")?,
                (_, Some(one)) => {
                    write!(self.out, "[\n{},\n{}\n]\n", indented(&item_json(&one)), indented(&pretty(&obj)))?
                }
                _ => write!(self.out, ",\n{}\n]\n", indented(&pretty(&obj)))?,
            }
        }
        self.out.flush()?;
        writeln!(self.err, "error: {e}")
    }

    fn write_errors(&mut self, d: &Decoded) -> std::io::Result<()> {
        if d.errors.is_empty() {
            return Ok(());
        }
        self.bad = true;
        self.out.flush()?;
        for e in &d.errors {
            writeln!(self.err, "error: {e}")?;
        }
        Ok(())
    }
}

impl<W: std::io::Write, E: std::io::Write> crate::decode::Sink for DecodeWriter<W, E> {
    fn start(&mut self, kind: Kind, reason: &str, len: Option<usize>) -> std::io::Result<()> {
        if self.json {
            return Ok(());
        }
        let size = match len {
            Some(n) => format!("{n} bytes"),
            None => "decoded as it is read".to_owned(),
        };
        write!(self.out, "Input: {}, {size} ({})\nKind: {kind} ({reason})\n", self.source, self.format)
    }

    fn item(&mut self, d: Decoded) -> std::io::Result<()> {
        self.items += 1;
        if !self.json {
            if self.items > 1 {
                self.out.write_all(b"\n")?;
            }
            self.out.write_all(render_item(&d).as_bytes())?;
            return self.write_errors(&d);
        }
        self.write_errors(&d)?;
        match (self.items, self.first.take()) {
            (1, _) => self.first = Some(d),
            (_, Some(one)) => write!(self.out, "[\n{},\n{}", indented(&item_json(&one)), indented(&item_json(&d)))?,
            _ => write!(self.out, ",\n{}", indented(&item_json(&d)))?,
        }
        Ok(())
    }
}

fn pretty(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn item_json(d: &Decoded) -> String {
    serde_json::to_string_pretty(d)
        .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string(), "offset": null }).to_string())
}

/// Pretty JSON one level in, as an element of a pretty array. (JSON strings
/// hold no raw line breaks, so indenting by lines is safe.)
fn indented(json: &str) -> String {
    json.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// One decoded item as text: its summary line, then its segments and
/// notes indented by tabs (what [`render_text`] prints for each item).
pub fn render_item(d: &Decoded) -> String {
    let mut o = String::new();
    item(&mut o, d);
    o
}

/// One structure as text, its fields indented by tabs below its header line.
pub fn render_node(n: &Node) -> String {
    let mut o = String::new();
    node(&mut o, 0, n);
    o
}

fn line(o: &mut String, depth: usize, s: &str) {
    for _ in 0..depth {
        o.push('\t');
    }
    o.push_str(s);
    o.push('\n');
}

fn item(o: &mut String, d: &Decoded) {
    line(o, 0, &d.summary);
    if d.kind == Kind::Wqe {
        let last_seg = d.segments.iter().filter_map(|n| n.wqebb).max().map_or(0, |w| w + 1);
        let count = d.wqebbs.unwrap_or(0).max(last_seg);
        for bb in 0..count {
            let (lo, hi) = (bb * BB, bb * BB + BB - 1);
            line(o, 1, &format!("WQEBB {bb} [{lo:#05x}-{hi:#05x}]"));
            let mut any = false;
            for n in d.segments.iter().filter(|n| n.wqebb == Some(bb)) {
                node(o, 2, n);
                any = true;
            }
            let prev = d.segments.iter().rfind(|n| n.offset < lo);
            if let (false, Some(prev)) = (any, prev) {
                line(o, 2, &format!("(continuation of the segment at {:#05x})", prev.offset));
            }
        }
    } else {
        for n in &d.segments {
            node(o, 1, n);
        }
    }
    for n in &d.notes {
        line(o, 1, n);
    }
}

fn node(o: &mut String, depth: usize, n: &Node) {
    line(o, depth, &format!("[{:#05x}] {}", n.offset, n.layout));
    for f in n.fields.iter().filter(|f| !f.reserved) {
        field(o, depth + 1, f);
    }
    if let Some(p) = &n.payload {
        line(o, depth + 1, &format!("payload ({} bytes at {:#05x}):", p.len, p.offset));
        dump(o, depth + 2, p.offset, &p.bytes);
    }
    for s in &n.notes {
        line(o, depth + 1, s);
    }
    for w in &n.warnings {
        line(o, depth + 1, &format!("!! {w}"));
    }
}

fn field(o: &mut String, depth: usize, f: &Field) {
    match &f.value {
        Value::Num(v) => {
            let shown = match &f.name_str {
                Some(s) if !s.starts_with("unknown ") => enum_text(Some(s), *v, f.size * 2),
                Some(s) => s.clone(),
                None => format!("{v:#0w$x}", w = f.size * 2 + 2),
            };
            line(o, depth, &format!("{} {shown}", f.name));
            for b in f.bits.iter().filter(|b| !b.reserved) {
                line(o, depth + 1, &format!("{} {}", b.name, bit_value(b)));
            }
        }
        Value::Bytes(hex) => {
            let bytes: Vec<u8> = hex
                .as_bytes()
                .chunks(2)
                .filter_map(|c| std::str::from_utf8(c).ok().and_then(|s| u8::from_str_radix(s, 16).ok()))
                .collect();
            if bytes.iter().all(|b| *b == 0) {
                line(o, depth, &format!("{} ({} bytes, all zero)", f.name, f.size));
            } else {
                line(o, depth, &format!("{} ({} bytes):", f.name, f.size));
                dump(o, depth + 1, f.offset, &bytes);
            }
        }
    }
}

fn bit_value(b: &Bit) -> String {
    let digits = hex_digits(b.width());
    match &b.name_str {
        Some(s) if !s.starts_with("unknown ") => enum_text(Some(s), b.value, digits),
        Some(s) => s.clone(),
        None if b.width() == 1 => b.value.to_string(),
        None => format!("{:#0w$x}", b.value, w = digits + 2),
    }
}

/// A hex dump, 16 bytes a line, offsets from `start`.
fn dump(o: &mut String, depth: usize, start: usize, bytes: &[u8]) {
    if !bytes.is_empty() && bytes.iter().all(|b| *b == 0) && bytes.len() > 16 {
        line(o, depth, &format!("{start:#05x}: {} zero bytes", bytes.len()));
        return;
    }
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let mut hex = String::new();
        for (j, b) in chunk.iter().enumerate() {
            if j > 0 {
                hex.push(' ');
            }
            let _ = write!(hex, "{b:02x}");
        }
        let ascii: String =
            chunk.iter().map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' }).collect();
        line(o, depth, &format!("{:#05x}: {hex:<47}  {ascii}", start + i * 16));
    }
}

/// Unicode general category Cf (format characters: the bidi controls, zero
/// width characters, tag characters...), as of Unicode 16. A terminal lays
/// these out invisibly or reorders the text around them, so that what is shown
/// is not what the input says.
const FORMAT_CHARS: &[(char, char)] = &[
    ('\u{00ad}', '\u{00ad}'),
    ('\u{0600}', '\u{0605}'),
    ('\u{061c}', '\u{061c}'),
    ('\u{06dd}', '\u{06dd}'),
    ('\u{070f}', '\u{070f}'),
    ('\u{0890}', '\u{0891}'),
    ('\u{08e2}', '\u{08e2}'),
    ('\u{180e}', '\u{180e}'),
    ('\u{200b}', '\u{200f}'),
    ('\u{202a}', '\u{202e}'),
    ('\u{2060}', '\u{2064}'),
    ('\u{2066}', '\u{206f}'),
    ('\u{feff}', '\u{feff}'),
    ('\u{fff9}', '\u{fffb}'),
    ('\u{110bd}', '\u{110bd}'),
    ('\u{110cd}', '\u{110cd}'),
    ('\u{13430}', '\u{1343f}'),
    ('\u{1bca0}', '\u{1bca3}'),
    ('\u{1d173}', '\u{1d17a}'),
    ('\u{e0001}', '\u{e0001}'),
    ('\u{e0020}', '\u{e007f}'),
];

/// Whether `c` is a format character (general category Cf).
pub fn is_format_char(c: char) -> bool {
    FORMAT_CHARS.iter().any(|&(lo, hi)| (lo..=hi).contains(&c))
}

/// Whether `c` must not reach a terminal as it is: C0 and C1 controls, DEL,
/// format characters (bidi overrides and isolates among them), and the
/// backslash that starts an escape (so that escaped text reads back one way).
fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\\' || is_format_char(c)
}

fn push_escaped(o: &mut String, c: char) {
    match c {
        '\n' => o.push_str("\\n"),
        '\t' => o.push_str("\\t"),
        '\r' => o.push_str("\\r"),
        '\\' => o.push_str("\\\\"),
        c if u32::from(c) < 0x80 => {
            let _ = write!(o, "\\x{:02x}", u32::from(c));
        }
        c => {
            let _ = write!(o, "\\u{{{:04x}}}", u32::from(c));
        }
    }
}

/// `s` with what a terminal would obey escaped: `\n`, `\t`, `\r` and `\\`;
/// other C0 controls and DEL as `\xNN`; C1 controls and format characters
/// (U+200E, U+202E, U+2066...) as `\u{XXXX}`. Other text is kept as it is.
pub fn escape(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if needs_escape(c) {
            push_escaped(&mut o, c);
        } else {
            o.push(c);
        }
    }
    std::borrow::Cow::Owned(o)
}

/// Bytes that should be UTF-8 text, escaped as [`escape`] does; a byte
/// that is not part of valid UTF-8 is shown as `\xNN`.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut o = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        o.push_str(&escape(chunk.valid()));
        for byte in chunk.invalid() {
            let _ = write!(o, "\\x{byte:02x}");
        }
    }
    o
}

/// A path (a file or directory name from the command line or a directory
/// walk), escaped for a terminal.
pub fn escape_path(p: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    escape_bytes(p.as_os_str().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn controls_and_bidi_are_escaped() {
        assert_eq!(escape("plain 0000:03:00.0"), "plain 0000:03:00.0");
        assert_eq!(escape("a\x1b[31mred\x07"), "a\\x1b[31mred\\x07");
        assert_eq!(escape("line\nnext\ttab\r"), "line\\nnext\\ttab\\r");
        assert_eq!(escape("del\x7f c1\u{9b}"), "del\\x7f c1\\u{009b}");
        assert_eq!(escape("abc\u{202e}fed\u{2066}\u{2069}"), "abc\\u{202e}fed\\u{2066}\\u{2069}");
        assert_eq!(
            escape("\u{200e}\u{200f}\u{061c}\u{feff}\u{e0041}"),
            "\\u{200e}\\u{200f}\\u{061c}\\u{feff}\\u{e0041}"
        );
        assert_eq!(escape("back\\slash"), "back\\\\slash");
        assert_eq!(escape("µs é → 日本"), "µs é → 日本");
        assert_eq!(escape_bytes(b"ok\xff\xfe\x1b"), "ok\\xff\\xfe\\x1b");
    }

    proptest! {
        #[test]
        fn escaped_text_has_nothing_a_terminal_obeys(s in "\\PC*|[\\x00-\\x{ff}\\u{200b}-\\u{206f}]*", b in proptest::collection::vec(any::<u8>(), 0..64)) {
            for out in [escape(&s).into_owned(), escape_bytes(&b), escape_bytes(s.as_bytes())] {
                prop_assert!(!out.chars().any(|c| c.is_control() || is_format_char(c)), "{:?}", out);
            }
            prop_assert_eq!(escape_bytes(s.as_bytes()), escape(&s).into_owned());
        }
    }

    #[test]
    fn dump_lines() {
        let mut o = String::new();
        dump(&mut o, 0, 0x24, b"hello, world!\x00\x01\x02xyz");
        assert_eq!(
            o,
            "0x024: 68 65 6c 6c 6f 2c 20 77 6f 72 6c 64 21 00 01 02  hello, world!...\n\
             0x034: 78 79 7a                                         xyz\n"
        );
    }
}
