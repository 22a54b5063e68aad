//! hw-specs → Rust: zerocopy structs with big-endian fields, accessors,
//! const layout asserts, open enums and a `LAYOUT` description per struct.

use crate::spec::{Direction, Field, FieldType, Spec, Struct, uint_bits, uint_for_width};
use std::fmt::Write;

pub fn generate(spec: &Spec, header: &str) -> String {
    let mut o = String::new();
    for line in header.lines() {
        writeln!(o, "// {line}").unwrap();
    }
    o.push_str(
        "\n#![allow(non_camel_case_types)] // spec names (`mlx5_wqe_ctrl_seg`) are kept so one grep crosses Rust, C and docs\n\
         #![allow(clippy::all)]\n\
         #![allow(unused_imports)] // each spec uses a subset of the layout types\n\n\
         use marrow_layout::{BitLayout, Direction, Endian, FieldLayout, FieldOverflow, StructLayout};\n\
         use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};\n\
         #[allow(unused_imports)]\n\
         use zerocopy::byteorder::{big_endian, little_endian};\n\n",
    );
    o.push_str("// ------------------------------------------------------------------ constants\n\n");
    for c in &spec.consts {
        writeln!(o, "/// {}\n///\n/// Source: {}", c.doc, c.cite).unwrap();
        writeln!(o, "pub const {}: u32 = {};\n", c.name, hex_or_dec(c.value)).unwrap();
    }
    o.push_str("// --------------------------------------------------------------- enumerations\n\n");
    for e in &spec.enums {
        gen_enum(&mut o, e);
    }
    o.push_str("// -------------------------------------------------------------------- layouts\n\n");
    for s in &spec.structs {
        gen_struct(&mut o, spec, s);
    }
    writeln!(o, "/// Every layout of this spec, for tests and decoders.").unwrap();
    writeln!(o, "pub const ALL_LAYOUTS: &[&StructLayout] = &[").unwrap();
    for s in &spec.structs {
        writeln!(o, "    &{}::LAYOUT,", s.name).unwrap();
    }
    o.push_str("];\n");
    escape_doc_brackets(&o)
}

/// Spec prose writes bit ranges as `Tag[7:0]`, which rustdoc would read as
/// intra-doc links: escape `[` and `]` in doc comments, outside code spans.
fn escape_doc_brackets(o: &str) -> String {
    let mut out = String::with_capacity(o.len() + o.len() / 64);
    for line in o.split_inclusive('\n') {
        let Some(at) = line.find("///").filter(|&i| line[..i].trim().is_empty()) else {
            out.push_str(line);
            continue;
        };
        let (head, text) = line.split_at(at + 3);
        out.push_str(head);
        let mut in_code = false;
        for ch in text.chars() {
            match ch {
                '`' => in_code = !in_code,
                '[' | ']' if !in_code => out.push('\\'),
                _ => {}
            }
            out.push(ch);
        }
    }
    out
}

fn hex_or_dec(v: u64) -> String {
    if v >= 256 { format!("{v:#x}") } else { v.to_string() }
}

fn gen_enum(o: &mut String, e: &crate::spec::Enum) {
    let r = &e.repr;
    writeln!(o, "/// {}\n///\n/// Source: {}\n///", e.doc, e.cite).unwrap();
    writeln!(o, "/// An open type: values the spec does not name are kept, never rejected.").unwrap();
    writeln!(
        o,
        "#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, FromBytes, IntoBytes, KnownLayout, Immutable)]"
    )
    .unwrap();
    writeln!(o, "#[repr(transparent)]\npub struct {}(pub {r});\n", e.name).unwrap();
    writeln!(o, "impl {} {{", e.name).unwrap();
    for v in &e.values {
        let doc = v.doc.as_deref().unwrap_or("");
        let cite = v.cite.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
        let lit = e.rust_literal(v.value);
        writeln!(o, "    /// `{}{}` = {lit}. {doc}{cite}", e.c_prefix, v.name).unwrap();
        writeln!(o, "    pub const {}: Self = Self({lit});", v.name).unwrap();
    }
    writeln!(o, "    /// Every named value, in spec order.").unwrap();
    write!(o, "    pub const ALL: &'static [Self] = &[").unwrap();
    for v in &e.values {
        write!(o, "Self::{}, ", v.name).unwrap();
    }
    writeln!(o, "];\n").unwrap();
    writeln!(o, "    /// The spec name, or `None` for a value the spec does not define.").unwrap();
    writeln!(o, "    pub const fn name(self) -> Option<&'static str> {{\n        match self.0 {{").unwrap();
    for v in &e.values {
        writeln!(o, "            {} => Some(\"{}\"),", e.rust_literal(v.value), v.name).unwrap();
    }
    writeln!(o, "            _ => None,\n        }}\n    }}\n").unwrap();
    writeln!(o, "    /// True when the spec names this value.").unwrap();
    writeln!(o, "    pub const fn is_known(self) -> bool {{\n        self.name().is_some()\n    }}\n}}\n").unwrap();
    // Status codes read in decimal (-110 is ETIMEDOUT); register values in hex.
    let num = if e.is_signed() { "{}" } else { "{:#04x}" };
    writeln!(
        o,
        "impl core::fmt::Debug for {n} {{\n    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {{\n        match self.name() {{\n            Some(s) => write!(f, \"{{s}}({num})\", self.0),\n            None => write!(f, \"{n}::Unknown({num})\", self.0),\n        }}\n    }}\n}}\n",
        n = e.name
    )
    .unwrap();
    writeln!(
        o,
        "impl core::fmt::Display for {n} {{\n    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {{\n        match self.name() {{\n            Some(s) => f.write_str(s),\n            None => write!(f, \"unknown {num}\", self.0),\n        }}\n    }}\n}}\n",
        n = e.name
    )
    .unwrap();
    writeln!(o, "impl From<{r}> for {n} {{\n    fn from(v: {r}) -> Self {{\n        Self(v)\n    }}\n}}\n", n = e.name)
        .unwrap();
}

fn rust_field_type(f: &Field) -> String {
    match f.ty {
        FieldType::U8 => "u8".into(),
        FieldType::Be16 => "big_endian::U16".into(),
        FieldType::Be32 => "big_endian::U32".into(),
        FieldType::Be64 => "big_endian::U64".into(),
        FieldType::Le16 => "little_endian::U16".into(),
        FieldType::Le32 => "little_endian::U32".into(),
        FieldType::Le64 => "little_endian::U64".into(),
        FieldType::Bytes => format!("[u8; {}]", f.size()),
    }
}

fn endian_name(f: &Field) -> &'static str {
    match f.ty {
        FieldType::U8 | FieldType::Bytes => "None",
        t if t.is_little() => "Little",
        _ => "Big",
    }
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::HostToDevice => "HostToDevice",
        Direction::DeviceToHost => "DeviceToHost",
        Direction::Both => "Both",
    }
}

fn gen_struct(o: &mut String, spec: &Spec, s: &Struct) {
    let n = &s.name;
    writeln!(o, "/// {}\n///\n/// Source: {}\n///", s.doc, s.cite).unwrap();
    writeln!(o, "/// Direction: {}. Size: {} bytes.", direction_name(s.direction), s.size).unwrap();
    writeln!(o, "#[derive(Clone, Copy, PartialEq, Eq, Hash, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]")
        .unwrap();
    writeln!(o, "#[repr(C)]\npub struct {n} {{").unwrap();
    for f in &s.fields {
        writeln!(o, "    {}: {},", f.name, rust_field_type(f)).unwrap();
    }
    writeln!(o, "}}\n").unwrap();

    writeln!(o, "const _: () = assert!(core::mem::size_of::<{n}>() == {});", s.size).unwrap();
    for f in &s.fields {
        writeln!(o, "const _: () = assert!(core::mem::offset_of!({n}, {}) == {});", f.name, f.offset).unwrap();
    }
    o.push('\n');

    writeln!(o, "impl {n} {{").unwrap();
    writeln!(o, "    /// Size in bytes.\n    pub const SIZE: usize = {};\n", s.size).unwrap();
    gen_place_consts(o, s);
    writeln!(o, "    /// The layout as data, for decoders and oracle tests.").unwrap();
    writeln!(o, "    pub const LAYOUT: StructLayout = StructLayout {{").unwrap();
    writeln!(o, "        name: \"{n}\",\n        size: {},", s.size).unwrap();
    writeln!(o, "        direction: Direction::{},", direction_name(s.direction)).unwrap();
    writeln!(o, "        doc: {:?},\n        cite: {:?},", s.doc, s.cite).unwrap();
    writeln!(o, "        fields: &[").unwrap();
    for f in &s.fields {
        writeln!(o, "            FieldLayout {{").unwrap();
        writeln!(
            o,
            "                name: \"{}\",\n                offset: {},\n                size: {},",
            f.name,
            f.offset,
            f.size()
        )
        .unwrap();
        writeln!(o, "                endian: Endian::{},\n                reserved: {},", endian_name(f), f.reserved)
            .unwrap();
        writeln!(o, "                doc: {:?},\n                cite: {:?},", f.doc, f.cite).unwrap();
        writeln!(o, "                bits: &[").unwrap();
        for b in &f.bits {
            let (hi, lo) = b.range().expect("validated");
            let en = b.enumeration.as_deref().map(|e| format!("Some(\"{e}\")")).unwrap_or("None".into());
            writeln!(
                o,
                "                    BitLayout {{ name: \"{}\", hi: {hi}, lo: {lo}, enumeration: {en}, doc: {:?} }},",
                b.name, b.doc
            )
            .unwrap();
        }
        writeln!(o, "                ],\n            }},").unwrap();
    }
    writeln!(o, "        ],\n    }};\n").unwrap();

    for f in &s.fields {
        gen_field_accessors(o, spec, f);
    }
    writeln!(o, "}}\n").unwrap();

    writeln!(o, "impl core::fmt::Debug for {n} {{").unwrap();
    writeln!(o, "    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {{").unwrap();
    writeln!(o, "        f.debug_struct(\"{n}\")").unwrap();
    for f in s.fields.iter().filter(|f| !f.reserved) {
        match f.ty {
            FieldType::Bytes => writeln!(o, "            .field(\"{0}\", &self.{0})", f.name).unwrap(),
            FieldType::U8 => {
                writeln!(o, "            .field(\"{0}\", &format_args!(\"{{:#04x}}\", self.{0}))", f.name).unwrap()
            }
            _ => writeln!(
                o,
                "            .field(\"{0}\", &format_args!(\"{{:#0{1}x}}\", self.{0}.get()))",
                f.name,
                f.size() * 2 + 2
            )
            .unwrap(),
        }
    }
    writeln!(o, "            .finish()\n    }}\n}}\n").unwrap();
}

/// Each named field's byte offset and each bit range's shift and (unshifted)
/// mask, under the names the C header gives them (`MARROW_MLX5_CQE64_OP_OWN_OFF`
/// is `mlx5_cqe64::OP_OWN_OFF`), for code that works on raw words.
fn gen_place_consts(o: &mut String, s: &Struct) {
    for f in s.fields.iter().filter(|f| !f.reserved) {
        let up = f.name.to_uppercase();
        writeln!(o, "    /// Byte offset of `{}`.\n    pub const {up}_OFF: usize = {:#x};\n", f.name, f.offset)
            .unwrap();
        if f.ty == FieldType::Bytes {
            continue;
        }
        let word = uint_for_width((f.size() * 8) as u32);
        for b in f.bits.iter().filter(|b| !b.is_reserved()) {
            let (hi, lo) = b.range().expect("validated");
            let width = hi - lo + 1;
            let mask = if width >= 64 { u64::MAX } else { (1u64 << width) - 1 };
            let bn = b.name.to_uppercase();
            writeln!(
                o,
                "    /// Shift of `{}[{hi}:{lo}]` ({}).\n    pub const {bn}_SHIFT: u32 = {lo};\n",
                f.name, b.name
            )
            .unwrap();
            writeln!(
                o,
                "    /// Mask of `{}` once shifted down.\n    pub const {bn}_MASK: {word} = {mask:#x};\n",
                b.name
            )
            .unwrap();
        }
    }
}

fn gen_field_accessors(o: &mut String, spec: &Spec, f: &Field) {
    let name = &f.name;
    let (hi_word, lo_word) = (f.size() * 8, 0);
    let _ = lo_word;
    match f.ty {
        FieldType::Bytes => {
            writeln!(o, "    /// {} ({}: bytes {:#x}..{:#x}).", f.doc, f.cite, f.offset, f.offset + f.size()).unwrap();
            writeln!(
                o,
                "    #[inline]\n    pub fn {name}(&self) -> &[u8; {}] {{\n        &self.{name}\n    }}\n",
                f.size()
            )
            .unwrap();
            if !f.reserved {
                writeln!(o, "    /// Set `{name}`.").unwrap();
                writeln!(
                    o,
                    "    #[inline]\n    pub fn set_{name}(&mut self, v: &[u8; {}]) -> &mut Self {{\n        self.{name} = *v;\n        self\n    }}\n",
                    f.size()
                )
                .unwrap();
            }
        }
        _ => {
            let t = uint_for_width(hi_word as u32);
            let (get, set) = if f.ty == FieldType::U8 {
                (format!("self.{name}"), format!("self.{name} = v"))
            } else {
                (format!("self.{name}.get()"), format!("self.{name}.set(v)"))
            };
            writeln!(o, "    /// {} ({}), offset {:#x}.", f.doc, f.cite, f.offset).unwrap();
            writeln!(o, "    #[inline]\n    pub fn {name}(&self) -> {t} {{\n        {get}\n    }}\n").unwrap();
            if !f.reserved {
                writeln!(o, "    /// Set the whole `{name}` word.").unwrap();
                writeln!(
                    o,
                    "    #[inline]\n    pub fn set_{name}(&mut self, v: {t}) -> &mut Self {{\n        {set};\n        self\n    }}\n"
                )
                .unwrap();
            }
            for b in f.bits.iter().filter(|b| !b.is_reserved()) {
                gen_bits_accessors(o, spec, f, t, b);
            }
        }
    }
}

fn gen_bits_accessors(o: &mut String, spec: &Spec, f: &Field, word: &str, b: &crate::spec::Bits) {
    let (hi, lo) = b.range().expect("validated");
    let width = hi - lo + 1;
    let fname = &f.name;
    let bname = &b.name;
    let raw_get = format!("marrow_layout::get_bits(self.{fname}() as u64, {hi}, {lo})");
    let (ty, conv_get, conv_set, ty_bits) = if let Some(e) = &b.enumeration {
        let en = spec.enum_by_name(e).expect("validated");
        (e.clone(), format!("{e}({raw_get} as {})", en.repr), "v.0 as u64".to_string(), uint_bits(&en.repr))
    } else if width == 1 {
        ("bool".to_string(), format!("{raw_get} != 0"), "v as u64".to_string(), 1)
    } else {
        let t = uint_for_width(width);
        (t.to_string(), format!("{raw_get} as {t}"), "v as u64".to_string(), uint_bits(t))
    };
    writeln!(o, "    /// `{fname}[{hi}:{lo}]`: {}.", b.doc).unwrap();
    writeln!(o, "    #[inline]\n    pub fn {bname}(&self) -> {ty} {{\n        {conv_get}\n    }}\n").unwrap();
    let set_expr = format!("marrow_layout::set_bits(self.{fname}() as u64, {hi}, {lo}, {conv_set}, \"{bname}\")");
    if ty_bits <= width {
        writeln!(o, "    /// Set `{fname}[{hi}:{lo}]` ({bname}).").unwrap();
        writeln!(
            o,
            "    #[inline]\n    pub fn set_{bname}(&mut self, v: {ty}) -> &mut Self {{\n        let w = match {set_expr} {{\n            Ok(w) => w,\n            Err(_) => unreachable!(),\n        }};\n        self.set_{fname}(w as {word})\n    }}\n"
        )
        .unwrap();
    } else {
        writeln!(
            o,
            "    /// Set `{fname}[{hi}:{lo}]` ({bname}); a value wider than {width} bits is refused, not masked."
        )
        .unwrap();
        writeln!(
            o,
            "    #[inline]\n    pub fn set_{bname}(&mut self, v: {ty}) -> Result<&mut Self, FieldOverflow> {{\n        let w = {set_expr}?;\n        Ok(self.set_{fname}(w as {word}))\n    }}\n"
        )
        .unwrap();
    }
}
