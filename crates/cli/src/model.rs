//! The decode tree: what `marrow decode` found, in a form both the text
//! printer ([`crate::print`]) and the JSON output consume, so there is one
//! decode path.

use serde::{Serialize, Serializer};

/// What the bytes were decoded as.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// Pick from the length and contents.
    Auto,
    /// One or more send WQEs, back to back.
    Wqe,
    /// 64-byte CQEs (`mlx5_cqe64`, or `mlx5_err_cqe` for error opcodes).
    Cqe,
    /// 64-byte CQEs shown with the `mlx5_err_cqe` layout whatever the opcode.
    ErrCqe,
    /// A 128-byte CQE: 64 bytes of inline scatter data, then the `mlx5_cqe64`.
    Cqe128,
    /// An 8-byte QP doorbell record.
    QpDbrec,
    /// An 8-byte CQ doorbell record.
    CqDbrec,
    /// The 8 bytes of a send doorbell stored to the UAR.
    UarDb,
}

impl Kind {
    /// The name `--kind` takes.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Auto => "auto",
            Kind::Wqe => "wqe",
            Kind::Cqe => "cqe",
            Kind::ErrCqe => "err-cqe",
            Kind::Cqe128 => "cqe128",
            Kind::QpDbrec => "qp-dbrec",
            Kind::CqDbrec => "cq-dbrec",
            Kind::UarDb => "uar-db",
        }
    }

    /// Every kind but `auto`.
    pub const CONCRETE: &'static [Kind] =
        &[Kind::Wqe, Kind::Cqe, Kind::ErrCqe, Kind::Cqe128, Kind::QpDbrec, Kind::CqDbrec, Kind::UarDb];
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A field's value: a number for fields of up to 8 bytes, a hex string for
/// wider byte arrays.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Value {
    /// Fields of 1 to 8 bytes, read in the field's byte order.
    Num(u64),
    /// Wider byte arrays, as lowercase hex in memory order.
    Bytes(String),
}

/// One bit field of a field, from the layout's `bits`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Bit {
    /// Spec name.
    pub name: &'static str,
    /// Most significant bit.
    pub hi: u8,
    /// Least significant bit.
    pub lo: u8,
    /// Extracted value.
    pub value: u64,
    /// Open enumeration the value belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enumeration: Option<&'static str>,
    /// The enumeration's name for the value, or `unknown 0x..`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_str: Option<String>,
    /// A reserved bit range (`reserved_at_*`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reserved: bool,
}

impl Bit {
    /// Width in bits.
    pub fn width(&self) -> u32 {
        u32::from(self.hi.saturating_sub(self.lo)) + 1
    }
}

/// One field of a layout, read from the bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Field {
    /// Spec name.
    pub name: &'static str,
    /// Byte offset within the decoded item (the WQE, the CQE…).
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// The value.
    pub value: Value,
    /// Reserved by the spec.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reserved: bool,
    /// Enumeration of the whole field, when it has no bit fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enumeration: Option<&'static str>,
    /// The enumeration's name for the value, or `unknown 0x..`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_str: Option<String>,
    /// Bit fields, most significant first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bits: Vec<Bit>,
}

/// Bytes shown as a hex dump (inline WQE data, unparsed segments).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Payload {
    /// Byte offset of the first byte within the decoded item.
    pub offset: usize,
    /// Number of bytes.
    pub len: usize,
    /// The bytes.
    #[serde(serialize_with = "hex_bytes", rename = "hex")]
    pub bytes: Vec<u8>,
}

/// One segment or structure, at an offset, decoded with one layout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Node {
    /// Byte offset within the decoded item.
    pub offset: usize,
    /// Layout name (`mlx5_wqe_raddr_seg`), or `unparsed`.
    pub layout: &'static str,
    /// The WQEBB the segment starts in (WQEs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqebb: Option<usize>,
    /// Fields in offset order.
    pub fields: Vec<Field>,
    /// Raw bytes shown as a hex dump.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<Payload>,
    /// Remarks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Things that look wrong but do not stop the decode (non-zero reserved bits).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An error and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ErrorAt {
    /// What is wrong.
    pub error: String,
    /// Byte offset in the input, when it points somewhere.
    pub offset: Option<usize>,
}

impl std::fmt::Display for ErrorAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{} (input offset {o:#05x})", self.error),
            None => f.write_str(&self.error),
        }
    }
}

/// One decoded item: a WQE, a CQE, a doorbell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Decoded {
    /// What it was decoded as.
    pub kind: Kind,
    /// Why that kind.
    pub reason: String,
    /// Byte offset of the item in the input.
    pub offset: usize,
    /// Bytes of input the item covers.
    pub length: usize,
    /// The header line.
    pub summary: String,
    /// WQEBBs (WQEs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wqebbs: Option<usize>,
    /// The segments / structures, in offset order.
    pub segments: Vec<Node>,
    /// Item-level remarks (`Completion: …`, trailing bytes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Decode errors; an item with errors was decoded only in part.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorAt>,
}

impl Decoded {
    /// An empty item of `kind` at input offset `offset`.
    pub fn new(kind: Kind, reason: &str, offset: usize) -> Self {
        Decoded {
            kind,
            reason: reason.to_owned(),
            offset,
            length: 0,
            summary: String::new(),
            wqebbs: None,
            segments: Vec::new(),
            notes: Vec::new(),
            errors: Vec::new(),
        }
    }
}

/// Everything one `marrow decode` run found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The kind decoded (never `auto`).
    pub kind: Kind,
    /// Why that kind.
    pub reason: String,
    /// The items, in input order.
    pub items: Vec<Decoded>,
}

impl Report {
    /// All errors of all items.
    pub fn errors(&self) -> impl Iterator<Item = &ErrorAt> {
        self.items.iter().flat_map(|i| i.errors.iter())
    }
}

/// Lowercase hex of `bytes`, no separators.
pub fn hex_string(bytes: &[u8]) -> String {
    hex::encode(bytes)
}

fn hex_bytes<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&hex_string(bytes))
}
