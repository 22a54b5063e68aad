//! The hw-specs schema (documented in `hw-specs/README.md`) and its checks.
//!
//! Everything the generators rely on is validated here, once: fields tile
//! the struct with no gap or overlap, bit ranges fit their field and do not
//! overlap, reserved names match their mlx5_ifc-style bit offset, enum
//! references resolve, and no two accessors share a name.

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub spec: Meta,
    #[serde(default, rename = "const")]
    pub consts: Vec<Const>,
    #[serde(default, rename = "enum")]
    pub enums: Vec<Enum>,
    #[serde(default, rename = "struct")]
    pub structs: Vec<Struct>,
    /// CPU barriers by purpose: a spec of its own (no layouts), generated
    /// into functions rather than layouts (`gen_barrier.rs`).
    #[serde(default, rename = "barrier")]
    pub barriers: Vec<Barrier>,
}

/// One barrier, named by purpose, with the instruction each architecture
/// uses for it; an empty instruction is a compiler barrier only.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Barrier {
    pub name: String,
    /// The rdma-core macro with the same purpose.
    pub rdma_core: String,
    pub doc: String,
    pub x86_64: String,
    pub aarch64: String,
    pub cite: String,
}

impl Barrier {
    /// `(Rust target_arch, C predefined macro, instruction)` for every architecture with a row.
    pub fn arches(&self) -> [(&'static str, &'static str, &str); 2] {
        [("x86_64", "__x86_64__", self.x86_64.as_str()), ("aarch64", "__aarch64__", self.aarch64.as_str())]
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    pub name: String,
    pub title: String,
    pub c_prefix: String,
    pub rust_crate: String,
    pub sources: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Const {
    pub name: String,
    pub value: u64,
    pub doc: String,
    pub cite: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Enum {
    pub name: String,
    pub c_prefix: String,
    pub repr: String,
    pub doc: String,
    pub cite: String,
    pub values: Vec<EnumValue>,
}

impl Enum {
    /// A signed enum (`repr = "i32"`): status codes, written in decimal.
    pub fn is_signed(&self) -> bool {
        self.repr.starts_with('i')
    }

    /// `v` as a literal of this enum's Rust type: hex for unsigned, decimal for signed.
    pub fn rust_literal(&self, v: i64) -> String {
        if self.is_signed() { v.to_string() } else { format!("{v:#04x}") }
    }

    /// `v` as a C literal of this enum's type.
    pub fn c_literal(&self, v: i64) -> String {
        if self.is_signed() { format!("({v})") } else { format!("{v:#04x}u") }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnumValue {
    pub name: String,
    /// A TOML integer: negative only in a signed (`i32`) enum.
    pub value: i64,
    #[serde(default)]
    pub doc: Option<String>,
    #[serde(default)]
    pub cite: Option<String>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HostToDevice,
    DeviceToHost,
    Both,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Struct {
    pub name: String,
    pub size: usize,
    #[serde(default)]
    pub align: Option<usize>,
    pub direction: Direction,
    pub doc: String,
    pub cite: String,
    #[serde(rename = "field")]
    pub fields: Vec<Field>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    #[serde(rename = "type")]
    pub ty: FieldType,
    #[serde(default)]
    pub len: Option<usize>,
    #[serde(default)]
    pub reserved: bool,
    pub doc: String,
    pub cite: String,
    #[serde(default)]
    pub bits: Vec<Bits>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FieldType {
    U8,
    Be16,
    Be32,
    Be64,
    Le16,
    Le32,
    Le64,
    Bytes,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bits {
    pub name: String,
    pub bits: String,
    #[serde(default, rename = "enum")]
    pub enumeration: Option<String>,
    pub doc: String,
}

impl FieldType {
    /// Width in bytes of an integer field; `None` for byte arrays.
    pub fn int_size(self) -> Option<usize> {
        match self {
            FieldType::U8 => Some(1),
            FieldType::Be16 | FieldType::Le16 => Some(2),
            FieldType::Be32 | FieldType::Le32 => Some(4),
            FieldType::Be64 | FieldType::Le64 => Some(8),
            FieldType::Bytes => None,
        }
    }

    pub fn is_little(self) -> bool {
        matches!(self, FieldType::Le16 | FieldType::Le32 | FieldType::Le64)
    }
}

impl Field {
    pub fn size(&self) -> usize {
        self.ty.int_size().unwrap_or_else(|| self.len.unwrap_or(0))
    }
}

impl Bits {
    /// `(hi, lo)` parsed from `"hi:lo"`.
    pub fn range(&self) -> Result<(u32, u32)> {
        let (hi, lo) = self
            .bits
            .split_once(':')
            .with_context(|| format!("bits `{}` of `{}` is not hi:lo", self.bits, self.name))?;
        let hi: u32 = hi.trim().parse().context("hi is not a number")?;
        let lo: u32 = lo.trim().parse().context("lo is not a number")?;
        ensure!(hi >= lo, "bits `{}` of `{}`: hi < lo", self.bits, self.name);
        Ok((hi, lo))
    }

    pub fn is_reserved(&self) -> bool {
        self.name.starts_with("reserved_at_")
    }
}

/// Reserve the getter `name` and the setter `set_name`; false on a clash.
fn claim(taken: &mut BTreeSet<String>, name: &str) -> bool {
    let set = format!("set_{name}");
    if taken.contains(name) || taken.contains(&set) {
        return false;
    }
    taken.insert(name.to_string());
    taken.insert(set);
    true
}

/// Smallest unsigned Rust type that holds `bits` bits.
pub fn uint_for_width(bits: u32) -> &'static str {
    match bits {
        0..=8 => "u8",
        9..=16 => "u16",
        17..=32 => "u32",
        _ => "u64",
    }
}

pub fn uint_bits(ty: &str) -> u32 {
    match ty {
        "u8" => 8,
        "u16" => 16,
        "u32" => 32,
        _ => 64,
    }
}

impl Spec {
    pub fn parse(text: &str, path: &str) -> Result<Spec> {
        let spec: Spec = toml::from_str(text).with_context(|| format!("parsing {path}"))?;
        spec.validate().with_context(|| format!("validating {path}"))?;
        Ok(spec)
    }

    pub fn enum_by_name(&self, name: &str) -> Option<&Enum> {
        self.enums.iter().find(|e| e.name == name)
    }

    fn validate(&self) -> Result<()> {
        let mut names = BTreeSet::new();
        if !self.barriers.is_empty() {
            ensure!(
                self.consts.is_empty() && self.enums.is_empty() && self.structs.is_empty(),
                "a barrier spec holds barriers only"
            );
        }
        for b in &self.barriers {
            ensure!(names.insert(b.name.clone()), "duplicate name {}", b.name);
            for (arch, _, insn) in b.arches() {
                // One instruction of letters, digits and spaces: it is pasted
                // into asm!() and asm volatile() as a string literal.
                ensure!(
                    insn.chars().all(|c| c.is_ascii_alphanumeric() || c == ' '),
                    "barrier {} on {arch}: `{insn}` is not a plain instruction",
                    b.name
                );
            }
        }
        for c in &self.consts {
            ensure!(names.insert(c.name.clone()), "duplicate name {}", c.name);
            ensure!(c.value <= u64::from(u32::MAX), "const {} does not fit u32", c.name);
        }
        for e in &self.enums {
            ensure!(names.insert(e.name.clone()), "duplicate name {}", e.name);
            ensure!(["u8", "u16", "u32", "u64", "i32"].contains(&e.repr.as_str()), "enum {}: bad repr", e.name);
            let mut seen = BTreeSet::new();
            for v in &e.values {
                let fits = match e.repr.as_str() {
                    "i32" => i32::try_from(v.value).is_ok(),
                    r => v.value >= 0 && (v.value as u128) < 1u128 << uint_bits(r),
                };
                ensure!(fits, "enum {}: {} does not fit {}", e.name, v.name, e.repr);
                ensure!(seen.insert(v.value), "enum {}: value {} twice", e.name, v.value);
            }
        }
        for s in &self.structs {
            ensure!(names.insert(s.name.clone()), "duplicate name {}", s.name);
            self.validate_struct(s).with_context(|| format!("struct {}", s.name))?;
        }
        Ok(())
    }

    fn validate_struct(&self, s: &Struct) -> Result<()> {
        let mut at = 0usize;
        let mut accessors = BTreeSet::new();
        for f in &s.fields {
            ensure!(f.offset == at, "field {} at {:#x}, expected {:#x} (gap or overlap)", f.name, f.offset, at);
            match f.ty {
                FieldType::Bytes => ensure!(f.len.is_some_and(|l| l > 0), "bytes field {} needs len", f.name),
                _ => ensure!(f.len.is_none(), "field {}: len only for bytes", f.name),
            }
            if f.reserved {
                let want = format!("reserved_at_{:x}", f.offset * 8);
                ensure!(f.name == want, "reserved field {} should be named {want}", f.name);
                ensure!(f.bits.is_empty(), "reserved field {} has bits", f.name);
            } else {
                ensure!(!f.name.starts_with("reserved"), "field {} named reserved but not marked", f.name);
            }
            ensure!(claim(&mut accessors, &f.name), "accessor {} or set_{} clashes", f.name, f.name);
            let width = (f.size() * 8) as u32;
            let mut used = 0u128;
            for b in &f.bits {
                ensure!(f.ty != FieldType::Bytes, "bits on byte array {}", f.name);
                let (hi, lo) = b.range()?;
                ensure!(hi < width, "{}.{}: bit {hi} outside a {width}-bit field", f.name, b.name);
                let mask = ((1u128 << (hi - lo + 1)) - 1) << lo;
                ensure!(used & mask == 0, "{}.{} overlaps another bit field", f.name, b.name);
                used |= mask;
                if b.is_reserved() {
                    // mlx5_ifc numbering: bit 0 is the most significant bit of
                    // byte 0, so the name checks itself against the layout.
                    let want = format!("reserved_at_{:x}", f.offset * 8 + (width - 1 - hi) as usize);
                    ensure!(b.name == want, "{}: reserved bits {} should be named {want}", f.name, b.name);
                    ensure!(b.enumeration.is_none(), "reserved bits with an enum");
                } else {
                    ensure!(claim(&mut accessors, &b.name), "accessor {} or set_{} clashes", b.name, b.name);
                }
                if let Some(e) = &b.enumeration {
                    let en = self.enum_by_name(e).with_context(|| format!("{}.{}: no enum {e}", f.name, b.name))?;
                    ensure!(
                        !en.is_signed(),
                        "{}.{}: enum {e} is signed; bit fields take unsigned enums",
                        f.name,
                        b.name
                    );
                    ensure!(
                        uint_bits(&en.repr) > hi - lo,
                        "{}.{}: enum {e} is narrower than the field",
                        f.name,
                        b.name
                    );
                }
            }
            at += f.size();
        }
        if at != s.size {
            bail!("fields end at {at:#x}, struct size is {:#x}", s.size);
        }
        if let Some(a) = s.align {
            ensure!(a.is_power_of_two() && s.size.is_multiple_of(a), "align {a} does not divide size");
        }
        Ok(())
    }
}
