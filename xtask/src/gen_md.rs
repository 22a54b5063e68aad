//! hw-specs → a Markdown layout reference under `docs/hw/`.

use crate::spec::{Direction, FieldType, Spec};
use std::fmt::Write;

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

pub fn generate(spec: &Spec, header: &str) -> String {
    let mut o = String::new();
    writeln!(o, "<!--\n{header}-->\n").unwrap();
    writeln!(o, "# {}\n", spec.spec.title).unwrap();
    o.push_str("Every multi-byte field is stored in the byte order shown (be: big endian).\n");
    o.push_str("Bit ranges are `hi:lo` within the field's value. Sources:\n\n");
    for (tag, src) in &spec.spec.sources {
        writeln!(o, "- **{tag}**: {src}").unwrap();
    }
    o.push_str("\n## Constants\n\n| Name | Value | Meaning | Source |\n|---|---|---|---|\n");
    for c in &spec.consts {
        writeln!(o, "| `{}` | `{:#x}` | {} | {} |", c.name, c.value, cell(&c.doc), cell(&c.cite)).unwrap();
    }
    o.push_str("\n## Enumerations\n");
    for e in &spec.enums {
        writeln!(o, "\n### {}\n\n{} ({}). Open: unknown values are kept.\n", e.name, e.doc, e.cite).unwrap();
        o.push_str("| Name | Value | Note |\n|---|---|---|\n");
        for v in &e.values {
            let note = [v.doc.as_deref(), v.cite.as_deref()].into_iter().flatten().collect::<Vec<_>>().join("; ");
            writeln!(o, "| `{}{}` | `{}` | {} |", e.c_prefix, v.name, e.rust_literal(v.value), cell(&note)).unwrap();
        }
    }
    o.push_str("\n## Layouts\n");
    for s in &spec.structs {
        let dir = match s.direction {
            Direction::HostToDevice => "host → device",
            Direction::DeviceToHost => "device → host",
            Direction::Both => "both ways",
        };
        writeln!(o, "\n### `{}` ({} bytes, {dir})\n\n{} Source: {}.\n", s.name, s.size, s.doc, s.cite).unwrap();
        o.push_str("| Offset | Size | Field | Type | Bits | Meaning | Source |\n|---|---|---|---|---|---|---|\n");
        for f in &s.fields {
            let ty = match f.ty {
                FieldType::U8 => "u8".to_string(),
                FieldType::Be16 => "be16".into(),
                FieldType::Be32 => "be32".into(),
                FieldType::Be64 => "be64".into(),
                FieldType::Le16 => "le16".into(),
                FieldType::Le32 => "le32".into(),
                FieldType::Le64 => "le64".into(),
                FieldType::Bytes => format!("u8[{}]", f.size()),
            };
            let bits = f
                .bits
                .iter()
                .map(|b| {
                    let en = b.enumeration.as_deref().map(|e| format!(" ({e})")).unwrap_or_default();
                    format!("`{}` {}{en}", b.bits, b.name)
                })
                .collect::<Vec<_>>()
                .join("<br>");
            let name = if f.reserved { format!("*{}*", f.name) } else { format!("`{}`", f.name) };
            writeln!(
                o,
                "| `{:#04x}` | {} | {name} | {ty} | {bits} | {} | {} |",
                f.offset,
                f.size(),
                cell(&f.doc),
                cell(&f.cite)
            )
            .unwrap();
        }
    }
    o
}
