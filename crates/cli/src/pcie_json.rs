//! The JSON form of `decode --pcie`: registers as `{name, offset, size,
//! raw, fields}` with every bit range `hw-specs/pcie.toml` names, blocks as
//! `{layout, offset, registers}`, errors as `{error, offset}` (the same
//! shape `decode --json` and `doctor --json` use). Schema: README.md,
//! "decode --pcie --json".

use marrow_pcie::registers::{Block, Register};
use serde_json::{Map, Value, json};

pub fn register(r: &Register) -> Value {
    let fields: Map<String, Value> = r.fields().map(|(b, v)| (b.name.to_string(), json!(v))).collect();
    json!({ "name": r.name(), "offset": r.offset, "size": r.size(), "raw": r.raw, "fields": fields })
}

pub fn block(b: &Block) -> Value {
    json!({
        "layout": b.layout.name,
        "offset": b.offset,
        "registers": b.registers.iter().map(register).collect::<Vec<_>>(),
    })
}

pub fn error(e: impl std::fmt::Display, offset: Option<u64>) -> Value {
    json!({ "error": e.to_string(), "offset": offset })
}
