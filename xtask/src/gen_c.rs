//! hw-specs → one C/C++/CUDA header per spec.
//!
//! The header compiles as C11, C++17, CUDA (nvcc) and NVRTC (which has no
//! standard headers, hence the `__CUDACC_RTC__` branch). Multi-byte fields
//! are declared with their C width and hold big-endian bytes, as rdma-core's
//! `__be32` fields do; `_OFF` macros give each named field's byte offset
//! (asserted against `offsetof` where the compiler has it), `_SHIFT`/`_MASK`
//! macros each bit range. An
//! X-macro lists every field so a C test can compute `offsetof` with the C
//! compiler and compare it with Rust's `offset_of!`.

use crate::spec::{FieldType, Spec};
use std::fmt::Write;

pub fn generate(spec: &Spec, header: &str) -> String {
    let p = spec.spec.c_prefix.to_uppercase();
    let guard = format!("{p}GENERATED_{}_H", spec.spec.name.to_uppercase());
    let mut o = String::new();
    o.push_str("/*\n");
    for line in header.lines() {
        writeln!(o, " * {line}").unwrap();
    }
    o.push_str(" */\n");
    writeln!(o, "#ifndef {guard}\n#define {guard}\n").unwrap();
    o.push_str(PRELUDE);

    o.push_str("\n/* ---------------------------------------------------------------- constants */\n\n");
    for c in &spec.consts {
        writeln!(o, "/* {} ({}) */", c.doc, c.cite).unwrap();
        writeln!(o, "#define {p}{} {:#x}u", c.name, c.value).unwrap();
    }

    o.push_str("\n/* ------------------------------------------------------------- enumerations */\n");
    for e in &spec.enums {
        writeln!(o, "\n/* {}: {} ({}) */", e.name, e.doc, e.cite).unwrap();
        for v in &e.values {
            writeln!(o, "#define {p}{}{} {}", e.c_prefix, v.name, e.c_literal(v.value)).unwrap();
        }
    }

    o.push_str("\n/* ------------------------------------------------------------------ layouts */\n");
    for s in &spec.structs {
        let cname = format!("{}{}", spec.spec.c_prefix, s.name);
        let up = s.name.to_uppercase();
        writeln!(o, "\n/* {} ({}) */", s.doc, s.cite).unwrap();
        // The attribute goes before the name: NVRTC ignores one after the
        // closing brace ("attribute does not apply to any entity").
        let attr = match s.align {
            Some(a) => format!("__attribute__((packed, aligned({a})))"),
            None => "__attribute__((packed))".to_string(),
        };
        writeln!(o, "struct {attr} {cname} {{").unwrap();
        for f in &s.fields {
            let (ty, arr) = match f.ty {
                FieldType::U8 => ("uint8_t", String::new()),
                FieldType::Be16 | FieldType::Le16 => ("uint16_t", String::new()),
                FieldType::Be32 | FieldType::Le32 => ("uint32_t", String::new()),
                FieldType::Be64 | FieldType::Le64 => ("uint64_t", String::new()),
                FieldType::Bytes => ("uint8_t", format!("[{}]", f.size())),
            };
            let endian = match f.ty {
                FieldType::U8 | FieldType::Bytes => "",
                t if t.is_little() => " le",
                _ => " be",
            };
            let bits: Vec<String> = f.bits.iter().map(|b| format!("{} {}", b.bits, b.name)).collect();
            let bits = if bits.is_empty() { String::new() } else { format!(": {}", bits.join(", ")) };
            writeln!(o, "    {ty} {}{arr}; /* {:#04x}{endian}{bits} */", f.name, f.offset).unwrap();
        }
        writeln!(o, "}};").unwrap();
        writeln!(o, "#define {p}{up}_SIZE {}u", s.size).unwrap();
        // Byte offsets by name: NVRTC has no offsetof, and device code
        // must not spell a field's place as a number.
        for f in s.fields.iter().filter(|f| !f.reserved) {
            writeln!(o, "#define {p}{up}_{}_OFF {:#x}u", f.name.to_uppercase(), f.offset).unwrap();
        }
        writeln!(o, "MARROW_STATIC_ASSERT(sizeof(struct {cname}) == {}, \"{cname} size\");", s.size).unwrap();
        for f in &s.fields {
            let at = if f.reserved { f.offset.to_string() } else { format!("{p}{up}_{}_OFF", f.name.to_uppercase()) };
            writeln!(o, "MARROW_ASSERT_OFFSET(struct {cname}, {}, {at});", f.name).unwrap();
        }
        for f in &s.fields {
            for b in f.bits.iter().filter(|b| !b.is_reserved()) {
                let (hi, lo) = b.range().expect("validated");
                let mask = if hi - lo + 1 >= 64 { u64::MAX } else { (1u64 << (hi - lo + 1)) - 1 };
                let bn = b.name.to_uppercase();
                writeln!(o, "#define {p}{up}_{bn}_SHIFT {lo}u /* {}[{hi}:{lo}] */", f.name).unwrap();
                writeln!(o, "#define {p}{up}_{bn}_MASK {mask:#x}u").unwrap();
            }
        }
    }

    writeln!(o, "\n/* Every (struct, field) pair, for layout tests: X(struct, field). */").unwrap();
    writeln!(o, "#define {p}{}_LAYOUT_FIELDS(X) \\", spec.spec.name.to_uppercase()).unwrap();
    for s in &spec.structs {
        for f in &s.fields {
            writeln!(o, "    X({}, {}) \\", s.name, f.name).unwrap();
        }
    }
    o.push_str("    /* end */\n");
    writeln!(o, "\n#endif /* {guard} */").unwrap();
    o
}

const PRELUDE: &str = r#"#ifndef MARROW_GENERATED_PRELUDE
#define MARROW_GENERATED_PRELUDE
#if defined(__CUDACC_RTC__)
/* NVRTC ships no standard headers. */
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
/* NVRTC knows neither offsetof nor __builtin_offsetof: offsets are checked
 * where a host compiler reads this header (tests/oracle, nvcc), sizes here. */
#define MARROW_STATIC_ASSERT(c, m) static_assert(c, m)
#define MARROW_ASSERT_OFFSET(t, f, o)
#elif defined(__cplusplus)
#include <cstddef>
#include <cstdint>
#define MARROW_OFFSETOF(t, f) offsetof(t, f)
#define MARROW_STATIC_ASSERT(c, m) static_assert(c, m)
#define MARROW_ASSERT_OFFSET(t, f, o) static_assert(offsetof(t, f) == (o), #t "." #f " offset")
#else
#include <stddef.h>
#include <stdint.h>
#define MARROW_OFFSETOF(t, f) offsetof(t, f)
#define MARROW_STATIC_ASSERT(c, m) _Static_assert(c, m)
#define MARROW_ASSERT_OFFSET(t, f, o) _Static_assert(offsetof(t, f) == (o), #t "." #f " offset")
#endif
#endif /* MARROW_GENERATED_PRELUDE */
"#;
