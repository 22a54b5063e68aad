//! Rendering a [`Report`]: indented text in the manner of `lspci -vvv`, or
//! JSON. Errors are not part of the text (the caller prints them on stderr);
//! they are part of the JSON.

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

#[cfg(test)]
mod tests {
    use super::*;

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
