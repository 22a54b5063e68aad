//! Reading a structure field by field from its generated `LAYOUT`: the spec
//! names, offsets and bit ranges come from `hw-specs/mlx5.toml` through
//! `marrow_mlx5::raw`, never from a table of our own.

use crate::model::{Bit, Field, Node, Value, hex_string};
use marrow_layout::{StructLayout, low_mask};
use marrow_mlx5::raw::{
    ALL_LAYOUTS, CompletionMode, CqeFormat, CqeOpcode, FenceMode, Syndrome, VendorSyndrome, WqeOpcode,
};

/// Whole-byte fields whose value is one of the spec's enumerations. The spec
/// attaches enumerations to bit fields only; these fields have none, so the
/// link is made here (layout, field, enumeration).
pub(crate) const FIELD_ENUMS: &[(&str, &str, &str)] = &[("mlx5_err_cqe", "syndrome", "Syndrome")];

/// The layout generated for `name`.
pub fn layout_by_name(name: &str) -> Option<&'static StructLayout> {
    ALL_LAYOUTS.iter().copied().find(|l| l.name == name)
}

/// `Some(name)` when the enumeration names `v`, `Some(None)` when it does
/// not, `None` when the enumeration itself is unknown to this tool.
pub fn enum_lookup(enumeration: &str, v: u64) -> Option<Option<&'static str>> {
    let b = u8::try_from(v).ok()?;
    Some(match enumeration {
        "WqeOpcode" => WqeOpcode(b).name(),
        "CqeOpcode" => CqeOpcode(b).name(),
        "CqeFormat" => CqeFormat(b).name(),
        "Syndrome" => Syndrome(b).name(),
        "VendorSyndrome" => VendorSyndrome(b).name(),
        "FenceMode" => FenceMode(b).name(),
        "CompletionMode" => CompletionMode(b).name(),
        _ => return None,
    })
}

/// `NAME (0x08)` for a named value, `unknown 0x42` otherwise; `digits` is
/// the hex width of the field.
pub fn enum_text(name: Option<&str>, v: u64, digits: usize) -> String {
    match name {
        Some(n) => format!("{n} ({v:#0w$x})", w = digits + 2),
        None => format!("unknown {v:#04x}"),
    }
}

/// Hex digits needed for `bits` bits.
pub fn hex_digits(bits: u32) -> usize {
    (bits.max(1) as usize).div_ceil(4)
}

fn enum_name_str(enumeration: Option<&'static str>, v: u64, digits: usize) -> Option<String> {
    let e = enumeration?;
    let named = enum_lookup(e, v)?;
    Some(match named {
        Some(n) => n.to_owned(),
        None => enum_text(None, v, digits),
    })
}

/// Decode `bytes` (the structure's own bytes, from its offset 0) with
/// `layout`; `offset` is where the structure sits in the decoded item.
/// Fields the bytes do not cover are left out with a warning.
pub fn struct_node(layout: &'static StructLayout, bytes: &[u8], offset: usize) -> Node {
    let mut node = Node { offset, layout: layout.name, ..Node::default() };
    for f in layout.fields {
        let Some(raw) = f.offset.checked_add(f.size).and_then(|end| bytes.get(f.offset..end)) else {
            node.warnings.push(format!(
                "{} bytes given: field {} at +{:#x} ({} bytes) is missing",
                bytes.len(),
                f.name,
                f.offset,
                f.size
            ));
            continue;
        };
        let at = offset + f.offset;
        let num = f.read(bytes);
        let value = match num {
            Some(v) => Value::Num(v),
            None => Value::Bytes(hex_string(raw)),
        };
        if f.reserved && raw.iter().any(|b| *b != 0) {
            let shown = match num {
                Some(v) => format!("{v:#0w$x}", w = f.size * 2 + 2),
                None => hex_string(raw),
            };
            node.warnings.push(format!("reserved field non-zero: {} [{at:#05x}] = {shown}", f.name));
        }
        let mut field = Field {
            name: f.name,
            offset: at,
            size: f.size,
            value,
            reserved: f.reserved,
            enumeration: None,
            name_str: None,
            bits: Vec::new(),
        };
        if let Some(v) = num {
            let whole = FIELD_ENUMS.iter().find(|(l, n, _)| *l == layout.name && *n == f.name);
            if let (true, Some((_, _, e))) = (f.bits.is_empty(), whole) {
                field.enumeration = Some(e);
                field.name_str = enum_name_str(Some(e), v, f.size * 2);
            }
            let mut covered = 0u64;
            for b in f.bits {
                let bv = b.extract(v);
                covered |= low_mask(b.width()) << b.lo;
                let reserved = b.name.starts_with("reserved");
                if reserved && bv != 0 {
                    node.warnings
                        .push(format!("reserved field non-zero: {}.{} [{}:{}] = {bv:#x}", f.name, b.name, b.hi, b.lo));
                }
                field.bits.push(Bit {
                    name: b.name,
                    hi: b.hi,
                    lo: b.lo,
                    value: bv,
                    enumeration: b.enumeration,
                    name_str: enum_name_str(b.enumeration, bv, hex_digits(b.width())),
                    reserved,
                });
            }
            let width = (f.size * 8).min(64) as u32;
            let stray = v & low_mask(width) & !covered;
            if !f.bits.is_empty() && stray != 0 {
                node.warnings.push(format!(
                    "bits the spec does not define are non-zero: {} & {stray:#0w$x}",
                    f.name,
                    w = f.size * 2 + 2
                ));
            }
        }
        node.fields.push(field);
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use marrow_mlx5::raw::{mlx5_qp_dbrec, mlx5_wqe_ctrl_seg, mlx5_wqe_raddr_seg};

    #[test]
    fn every_layout_is_found_by_name() {
        for l in ALL_LAYOUTS {
            assert_eq!(layout_by_name(l.name).map(|x| x.name), Some(l.name));
        }
    }

    #[test]
    fn every_enumeration_in_the_layouts_is_known() {
        for l in ALL_LAYOUTS {
            for f in l.fields {
                for b in f.bits {
                    if let Some(e) = b.enumeration {
                        assert!(enum_lookup(e, 0).is_some(), "{}.{}.{}: enumeration {e}", l.name, f.name, b.name);
                    }
                }
            }
        }
        for (l, f, e) in FIELD_ENUMS {
            let layout = layout_by_name(l).unwrap();
            assert!(layout.field(f).is_some_and(|f| f.bits.is_empty() && f.size == 1), "{l}.{f}");
            assert!(enum_lookup(e, 0).is_some());
        }
    }

    #[test]
    fn ctrl_segment_fields_and_bits() {
        let bytes = [0x00, 0x00, 0x05, 0x08, 0x00, 0x12, 0x34, 0x03, 0, 0, 0, 0x08, 0, 0, 0, 0];
        let n = struct_node(&mlx5_wqe_ctrl_seg::LAYOUT, &bytes, 0);
        assert!(n.warnings.is_empty(), "{:?}", n.warnings);
        let f = &n.fields[0];
        assert_eq!((f.name, &f.value), ("opmod_idx_opcode", &Value::Num(0x0508)));
        let op = f.bits.iter().find(|b| b.name == "opcode").unwrap();
        assert_eq!((op.value, op.name_str.as_deref()), (8, Some("RDMA_WRITE")));
        let ds = n.fields[1].bits.iter().find(|b| b.name == "ds").unwrap();
        assert_eq!(ds.value, 3);
    }

    #[test]
    fn reserved_non_zero_is_warned() {
        let mut bytes = [0u8; 16];
        bytes[15] = 1;
        let n = struct_node(&mlx5_wqe_raddr_seg::LAYOUT, &bytes, 0x10);
        assert_eq!(n.warnings, ["reserved field non-zero: reserved_at_60 [0x01c] = 0x00000001"]);
        let mut db = [0u8; 8];
        db[4] = 0x80;
        let n = struct_node(&mlx5_qp_dbrec::LAYOUT, &db, 0);
        assert_eq!(n.warnings.len(), 1, "{:?}", n.warnings);
        assert!(n.warnings[0].contains("send_counter.reserved_at_20"));
    }

    #[test]
    fn short_bytes_leave_fields_out() {
        let n = struct_node(&mlx5_wqe_ctrl_seg::LAYOUT, &[0u8; 5], 0);
        assert_eq!(n.fields.len(), 1);
        assert!(!n.warnings.is_empty());
    }

    #[test]
    fn enum_text_forms() {
        assert_eq!(enum_text(Some("RDMA_WRITE"), 8, 2), "RDMA_WRITE (0x08)");
        assert_eq!(enum_text(None, 0x42, 2), "unknown 0x42");
        assert_eq!(enum_text(Some("NONE"), 0, 1), "NONE (0x0)");
    }
}
