//! Transaction Layer Packet headers: PCI Express Base 6.0 §2.2 (non-Flit
//! mode). Header dwords are big-endian on the wire and in AER's header log;
//! this module takes and gives them as `u32` values in that order (the way
//! the kernel prints `TLP Header: 4a000001 ...`).
//!
//! DW0 (§2.2.1):
//!
//! ```text
//! Fmt[31:29] Type[28:24] T9[23] TC[22:20] T8[19] Attr[2] (IDO)[18] LN[17]
//! TH[16] TD[15] EP[14] Attr[1:0] (RO, NS)[13:12] AT[11:10] Length[9:0]
//! ```
//!
//! T9/T8 are tag bits 9 and 8 (10-bit tags, §2.2.6.2).
//!
//! Every field's place is the generated `SHIFT`/`MASK` of its dword in
//! `hw-specs/pcie.toml` (`tlp_dw0`, `tlp_request_dw1`, `tlp_address_dw`,
//! `tlp_config_dw2`, `tlp_completion_dw1`/`dw2`, `tlp_message_dw1`).

use crate::generated::pcie::{
    tlp_address_dw as Addr, tlp_completion_dw1 as CplDw1, tlp_completion_dw2 as CplDw2, tlp_config_dw2 as CfgDw2,
    tlp_dw0 as Dw0, tlp_message_dw1 as MsgDw1, tlp_request_dw1 as ReqDw1,
};
use bitflags::bitflags;
use core::fmt;

/// A field of a header dword, shifted down.
const fn field(dw: u32, shift: u32, mask: u32) -> u32 {
    (dw >> shift) & mask
}

/// `v` in its field's place, truncated to the field.
const fn place(v: u32, shift: u32, mask: u32) -> u32 {
    (v & mask) << shift
}

/// A field left where it sits in the dword (an address's or a register's
/// low bits, which are the dword's own).
const fn in_place(dw: u32, shift: u32, mask: u32) -> u32 {
    dw & (mask << shift)
}

/// Where T9 and T8 sit in the 10-bit tag (§2.2.6.2); `Tag[7:0]` is the
/// rest, carried in DW1 (DW2 of completions).
const TAG_T9_BIT: u32 = 9;
const TAG_T8_BIT: u32 = 8;

/// Fmt field: header size and whether data follows (§2.2.1, Table 2-2).
pub const FMT_3DW: u8 = 0b000;
pub const FMT_4DW: u8 = 0b001;
pub const FMT_3DW_DATA: u8 = 0b010;
pub const FMT_4DW_DATA: u8 = 0b011;
pub const FMT_PREFIX: u8 = 0b100;
/// The Fmt bit that says data follows the header.
const FMT_WITH_DATA: u8 = 0b010;

/// Message types are `10rrr` (§2.2.1, Table 2-3), `rrr` the routing.
const MSG_TYPE_MASK: u8 = 0b11000;
const MSG_TYPE: u8 = 0b10000;
const MSG_ROUTING_MASK: u8 = 0b00111;

/// A prefix's Type: bit 4 end-end (1) or local (0), bits 3:0 which prefix
/// (§2.2.1.1).
const PREFIX_END_END: u8 = 0b1_0000;
const PREFIX_WHICH: u8 = 0b0_1111;

/// The 4 KB boundary memory requests must not cross (§2.2.7).
const BOUNDARY_4K: u64 = 0x1000;

bitflags! {
    /// The Attr bits, in the positions cocotbext-pcie and the spec's
    /// `Attr[2:0]` use: NS = `Attr[0]`, RO = `Attr[1]`, IDO = `Attr[2]`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Attr: u8 {
        const NS = 0b001;
        const RO = 0b010;
        const IDO = 0b100;
    }
}

/// What a Fmt/Type pair means (§2.2.1, Table 2-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlpKind {
    MemRead,
    MemReadLocked,
    MemWrite,
    IoRead,
    IoWrite,
    CfgRead0,
    CfgWrite0,
    CfgRead1,
    CfgWrite1,
    /// Msg (no data) with its routing subfield `r[2:0]`.
    Msg {
        routing: u8,
    },
    /// MsgD (with data).
    MsgData {
        routing: u8,
    },
    Cpl,
    CplData,
    CplLocked,
    CplLockedData,
    FetchAdd,
    Swap,
    Cas,
    /// A TLP prefix (Fmt 100b).
    Prefix,
    /// A Fmt/Type pair the spec reserves.
    Reserved,
}

impl TlpKind {
    pub fn from_fmt_type(fmt: u8, ty: u8) -> Self {
        match (fmt, ty) {
            (FMT_PREFIX, _) => Self::Prefix,
            (FMT_3DW | FMT_4DW, 0b00000) => Self::MemRead,
            (FMT_3DW | FMT_4DW, 0b00001) => Self::MemReadLocked,
            (FMT_3DW_DATA | FMT_4DW_DATA, 0b00000) => Self::MemWrite,
            (FMT_3DW, 0b00010) => Self::IoRead,
            (FMT_3DW_DATA, 0b00010) => Self::IoWrite,
            (FMT_3DW, 0b00100) => Self::CfgRead0,
            (FMT_3DW_DATA, 0b00100) => Self::CfgWrite0,
            (FMT_3DW, 0b00101) => Self::CfgRead1,
            (FMT_3DW_DATA, 0b00101) => Self::CfgWrite1,
            (FMT_4DW, t) if t & MSG_TYPE_MASK == MSG_TYPE => Self::Msg { routing: t & MSG_ROUTING_MASK },
            (FMT_4DW_DATA, t) if t & MSG_TYPE_MASK == MSG_TYPE => Self::MsgData { routing: t & MSG_ROUTING_MASK },
            (FMT_3DW, 0b01010) => Self::Cpl,
            (FMT_3DW_DATA, 0b01010) => Self::CplData,
            (FMT_3DW, 0b01011) => Self::CplLocked,
            (FMT_3DW_DATA, 0b01011) => Self::CplLockedData,
            (FMT_3DW_DATA | FMT_4DW_DATA, 0b01100) => Self::FetchAdd,
            (FMT_3DW_DATA | FMT_4DW_DATA, 0b01101) => Self::Swap,
            (FMT_3DW_DATA | FMT_4DW_DATA, 0b01110) => Self::Cas,
            _ => Self::Reserved,
        }
    }

    /// The spec's short name (`MRd`, `CplD`, `FetchAdd`…).
    pub fn mnemonic(self) -> &'static str {
        match self {
            Self::MemRead => "MRd",
            Self::MemReadLocked => "MRdLk",
            Self::MemWrite => "MWr",
            Self::IoRead => "IORd",
            Self::IoWrite => "IOWr",
            Self::CfgRead0 => "CfgRd0",
            Self::CfgWrite0 => "CfgWr0",
            Self::CfgRead1 => "CfgRd1",
            Self::CfgWrite1 => "CfgWr1",
            Self::Msg { .. } => "Msg",
            Self::MsgData { .. } => "MsgD",
            Self::Cpl => "Cpl",
            Self::CplData => "CplD",
            Self::CplLocked => "CplLk",
            Self::CplLockedData => "CplDLk",
            Self::FetchAdd => "FetchAdd",
            Self::Swap => "Swap",
            Self::Cas => "CAS",
            Self::Prefix => "Prefix",
            Self::Reserved => "reserved",
        }
    }
}

/// What a TLP prefix (Fmt 100b) is, by its Type field (§2.2.1.1, Table
/// 2-3): bit 4 says local (0) or end-end (1), bits 3:0 the prefix.
pub fn prefix_name(ty: u8) -> &'static str {
    match (ty & PREFIX_END_END != 0, ty & PREFIX_WHICH) {
        (false, 0b0000) => "local MR-IOV",
        (false, 0b1110) => "local VendPrefixL0",
        (false, 0b1111) => "local VendPrefixL1",
        (false, _) => "local, type not named here",
        (_, 0b0000) => "end-end ExtTPH",
        (_, 0b0001) => "end-end PASID",
        (_, 0b1110) => "end-end VendPrefixE0",
        (_, 0b1111) => "end-end VendPrefixE1",
        _ => "end-end, type not named here",
    }
}

/// A TLP prefix dword (§2.2.1.1): Fmt 100b, a Type, and 24 bits of the
/// prefix's own below the Type (where a header's DW0 carries T9 to Length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub ty: u8,
    pub contents: u32,
}

impl Prefix {
    /// The prefix `dw` is, or `None` when its Fmt is not 100b.
    pub fn of(dw: u32) -> Option<Self> {
        (field(dw, Dw0::FMT_SHIFT, Dw0::FMT_MASK) as u8 == FMT_PREFIX).then(|| Self {
            ty: field(dw, Dw0::TLP_TYPE_SHIFT, Dw0::TLP_TYPE_MASK) as u8,
            contents: dw & ((1 << Dw0::TLP_TYPE_SHIFT) - 1),
        })
    }
}

/// Message routing `r[2:0]` (§2.2.8, Table 2-20).
pub fn routing_name(r: u8) -> &'static str {
    match r {
        0b000 => "routed to Root Complex",
        0b001 => "routed by address",
        0b010 => "routed by ID",
        0b011 => "broadcast from Root Complex",
        0b100 => "local, terminate at receiver",
        0b101 => "gathered and routed to Root Complex",
        _ => "reserved routing",
    }
}

/// Completion Status (§2.2.9, Table 2-34). Open: reserved codes are kept.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CplStatus(pub u8);

impl CplStatus {
    pub const SC: Self = Self(0b000);
    pub const UR: Self = Self(0b001);
    pub const CRS: Self = Self(0b010);
    pub const CA: Self = Self(0b100);

    /// Whether the spec defines this code.
    pub fn is_defined(self) -> bool {
        matches!(self, Self::SC | Self::UR | Self::CRS | Self::CA)
    }
}

impl fmt::Debug for CplStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::SC => write!(f, "SC (successful)"),
            Self::UR => write!(f, "UR (unsupported request)"),
            Self::CRS => write!(f, "CRS (configuration retry)"),
            Self::CA => write!(f, "CA (completer abort)"),
            Self(v) => write!(f, "reserved status {v:#05b}"),
        }
    }
}

/// The dwords after DW0, by header kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Memory, I/O and AtomicOp requests (§2.2.7): DW1 Requester ID, `Tag[7:0]`,
    /// Last/First DW BE; then `Address[31:2]` (3DW) or `Address[63:2]` (4DW), `PH[1:0]`.
    Request { requester_id: u16, last_be: u8, first_be: u8, address: u64, ph: u8 },
    /// Configuration requests (§2.2.7): DW2 is the target's Bus/Device/Function
    /// and the register's byte address (Extended Register Number, Register Number).
    Config { requester_id: u16, last_be: u8, first_be: u8, target_id: u16, register: u16 },
    /// Completions (§2.2.9).
    Completion {
        completer_id: u16,
        status: CplStatus,
        bcm: bool,
        /// Byte Count as carried: 0 means 4096.
        byte_count: u16,
        requester_id: u16,
        lower_address: u8,
    },
    /// Messages (§2.2.8): DW1 Requester ID, `Tag[7:0]`, Message Code; DW2/DW3
    /// depend on the code and routing.
    Message { requester_id: u16, code: u8, dw2: u32, dw3: u32 },
    /// A prefix or reserved type: the header's dwords after DW0 as read
    /// (zero beyond the header size its Fmt gives).
    Raw { dws: [u32; 3] },
}

/// A decoded TLP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TlpHeader {
    pub fmt: u8,
    /// The 5-bit Type field.
    pub ty: u8,
    pub tc: u8,
    pub attr: Attr,
    pub ln: bool,
    pub th: bool,
    pub td: bool,
    pub ep: bool,
    pub at: u8,
    /// Length as carried (10 bits; 0 means 1024 DW for TLPs with data).
    pub length: u16,
    /// The 10-bit tag (T9, T8 from DW0 and `Tag[7:0]`); 0 for messages' T9/T8 unused.
    pub tag: u16,
    pub body: Body,
}

bitflags! {
    /// Header rules the TLP breaks (§2.2 "Malformed TLP" rules).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Malformed: u16 {
        /// A 4DW memory or AtomicOp request for an address below 4 GiB
        /// (§2.2.4.1: such addresses must use the 3DW format).
        const FOUR_DW_BELOW_4G = 1 << 0;
        /// A reserved Fmt/Type combination.
        const RESERVED_TYPE = 1 << 1;
        /// I/O or configuration request with Length ≠ 1, TC ≠ 0, Attr ≠ 0,
        /// or Last DW BE ≠ 0 (§2.2.7).
        const IO_CFG_FIELDS = 1 << 2;
        /// Length 1 with a non-zero Last DW BE (§2.2.5).
        const LAST_BE_ON_ONE_DW = 1 << 3;
        /// Length > 1 with a zero First DW BE or zero Last DW BE (§2.2.5).
        const ZERO_BE_ON_MULTI_DW = 1 << 4;
        /// An AtomicOp whose length is not 1, 2, 4 or 8 DW as its kind allows (§2.2.7).
        const ATOMIC_LENGTH = 1 << 5;
        /// A Completion Status the spec reserves (§2.2.9, Table 2-34: only
        /// SC, UR, CRS and CA are defined); receivers treat it as UR.
        const RESERVED_CPL_STATUS = 1 << 6;
        /// A memory request whose address and length cross a 4 KB boundary
        /// (§2.2.7: "must not specify an Address/Length combination which
        /// causes a Memory Space access to cross a 4-KB boundary").
        const CROSSES_4K = 1 << 7;
    }
}

/// Why dwords are not a TLP header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlpError {
    /// Fewer dwords than the Fmt field says the header has.
    Truncated { have: usize, need: usize },
}

impl fmt::Display for TlpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { have, need } => {
                write!(f, "TLP header needs {need} dwords by its Fmt field, got {have}")
            }
        }
    }
}

impl TlpHeader {
    pub fn kind(&self) -> TlpKind {
        TlpKind::from_fmt_type(self.fmt, self.ty)
    }
    /// Header size in dwords by Fmt (prefixes are one dword).
    pub fn header_dws(fmt: u8) -> usize {
        match fmt {
            FMT_3DW | FMT_3DW_DATA => 3,
            FMT_4DW | FMT_4DW_DATA => 4,
            _ => 1,
        }
    }
    pub fn has_data(&self) -> bool {
        self.fmt & FMT_WITH_DATA != 0 && self.fmt != FMT_PREFIX
    }
    /// Payload length in dwords (the field's 0 means 1024).
    pub fn length_dw(&self) -> u16 {
        if self.length == 0 { 1024 } else { self.length }
    }

    /// Decodes header dwords (as the kernel prints them).
    pub fn decode(dws: &[u32]) -> Result<Self, TlpError> {
        let dw0 = *dws.first().ok_or(TlpError::Truncated { have: 0, need: 1 })?;
        let fmt = field(dw0, Dw0::FMT_SHIFT, Dw0::FMT_MASK) as u8;
        let need = Self::header_dws(fmt);
        if dws.len() < need {
            return Err(TlpError::Truncated { have: dws.len(), need });
        }
        let ty = field(dw0, Dw0::TLP_TYPE_SHIFT, Dw0::TLP_TYPE_MASK) as u8;
        let mut attr = Attr::from_bits_truncate(field(dw0, Dw0::ATTR_SHIFT, Dw0::ATTR_MASK) as u8);
        attr.set(Attr::IDO, field(dw0, Dw0::ATTR2_SHIFT, Dw0::ATTR2_MASK) != 0);
        let tag_hi = field(dw0, Dw0::T9_SHIFT, Dw0::T9_MASK) << TAG_T9_BIT
            | field(dw0, Dw0::T8_SHIFT, Dw0::T8_MASK) << TAG_T8_BIT;
        let dw = |i: usize| dws.get(i).copied().unwrap_or(0);
        let kind = TlpKind::from_fmt_type(fmt, ty);
        let (tag_lo, body) = match kind {
            TlpKind::MemRead
            | TlpKind::MemReadLocked
            | TlpKind::MemWrite
            | TlpKind::IoRead
            | TlpKind::IoWrite
            | TlpKind::FetchAdd
            | TlpKind::Swap
            | TlpKind::Cas => {
                // A 4DW header carries Address[63:32] in DW2, the low
                // dword with PH in DW3; a 3DW header the low dword in DW2.
                let (high, low) = if need == 4 { (dw(2), dw(3)) } else { (0, dw(2)) };
                let b = Body::Request {
                    requester_id: field(dw(1), ReqDw1::REQUESTER_ID_SHIFT, ReqDw1::REQUESTER_ID_MASK) as u16,
                    last_be: field(dw(1), ReqDw1::LAST_BE_SHIFT, ReqDw1::LAST_BE_MASK) as u8,
                    first_be: field(dw(1), ReqDw1::FIRST_BE_SHIFT, ReqDw1::FIRST_BE_MASK) as u8,
                    address: u64::from(high) << u32::BITS
                        | u64::from(in_place(low, Addr::ADDRESS_LO_SHIFT, Addr::ADDRESS_LO_MASK)),
                    ph: field(low, Addr::PH_SHIFT, Addr::PH_MASK) as u8,
                };
                (field(dw(1), ReqDw1::TAG_SHIFT, ReqDw1::TAG_MASK), b)
            }
            TlpKind::CfgRead0 | TlpKind::CfgWrite0 | TlpKind::CfgRead1 | TlpKind::CfgWrite1 => {
                // The register's byte address is DW2's bits 11:2 as they stand.
                let register = in_place(dw(2), CfgDw2::EXT_REGISTER_SHIFT, CfgDw2::EXT_REGISTER_MASK)
                    | in_place(dw(2), CfgDw2::REGISTER_SHIFT, CfgDw2::REGISTER_MASK);
                let b = Body::Config {
                    requester_id: field(dw(1), ReqDw1::REQUESTER_ID_SHIFT, ReqDw1::REQUESTER_ID_MASK) as u16,
                    last_be: field(dw(1), ReqDw1::LAST_BE_SHIFT, ReqDw1::LAST_BE_MASK) as u8,
                    first_be: field(dw(1), ReqDw1::FIRST_BE_SHIFT, ReqDw1::FIRST_BE_MASK) as u8,
                    target_id: field(dw(2), CfgDw2::TARGET_ID_SHIFT, CfgDw2::TARGET_ID_MASK) as u16,
                    register: register as u16,
                };
                (field(dw(1), ReqDw1::TAG_SHIFT, ReqDw1::TAG_MASK), b)
            }
            TlpKind::Cpl | TlpKind::CplData | TlpKind::CplLocked | TlpKind::CplLockedData => {
                let b = Body::Completion {
                    completer_id: field(dw(1), CplDw1::COMPLETER_ID_SHIFT, CplDw1::COMPLETER_ID_MASK) as u16,
                    status: CplStatus(field(dw(1), CplDw1::CPL_STATUS_SHIFT, CplDw1::CPL_STATUS_MASK) as u8),
                    bcm: field(dw(1), CplDw1::BCM_SHIFT, CplDw1::BCM_MASK) != 0,
                    byte_count: field(dw(1), CplDw1::BYTE_COUNT_SHIFT, CplDw1::BYTE_COUNT_MASK) as u16,
                    requester_id: field(dw(2), CplDw2::REQUESTER_ID_SHIFT, CplDw2::REQUESTER_ID_MASK) as u16,
                    lower_address: field(dw(2), CplDw2::LOWER_ADDRESS_SHIFT, CplDw2::LOWER_ADDRESS_MASK) as u8,
                };
                (field(dw(2), CplDw2::TAG_SHIFT, CplDw2::TAG_MASK), b)
            }
            TlpKind::Msg { .. } | TlpKind::MsgData { .. } => {
                let b = Body::Message {
                    requester_id: field(dw(1), MsgDw1::REQUESTER_ID_SHIFT, MsgDw1::REQUESTER_ID_MASK) as u16,
                    code: field(dw(1), MsgDw1::MESSAGE_CODE_SHIFT, MsgDw1::MESSAGE_CODE_MASK) as u8,
                    dw2: dw(2),
                    dw3: dw(3),
                };
                (field(dw(1), MsgDw1::TAG_SHIFT, MsgDw1::TAG_MASK), b)
            }
            TlpKind::Prefix | TlpKind::Reserved => {
                // Only the dwords the Fmt field makes part of the header.
                let within = |i: usize| if i < need { dw(i) } else { 0 };
                (0, Body::Raw { dws: [within(1), within(2), within(3)] })
            }
        };
        Ok(Self {
            fmt,
            ty,
            tc: field(dw0, Dw0::TC_SHIFT, Dw0::TC_MASK) as u8,
            attr,
            ln: field(dw0, Dw0::LN_SHIFT, Dw0::LN_MASK) != 0,
            th: field(dw0, Dw0::TH_SHIFT, Dw0::TH_MASK) != 0,
            td: field(dw0, Dw0::TD_SHIFT, Dw0::TD_MASK) != 0,
            ep: field(dw0, Dw0::EP_SHIFT, Dw0::EP_MASK) != 0,
            at: field(dw0, Dw0::AT_SHIFT, Dw0::AT_MASK) as u8,
            length: field(dw0, Dw0::LENGTH_SHIFT, Dw0::LENGTH_MASK) as u16,
            tag: (tag_hi | tag_lo) as u16,
            body,
        })
    }

    /// Encodes into `out`; returns the number of header dwords written.
    /// Fields wider than their bit fields are truncated to them.
    pub fn encode(&self, out: &mut [u32; 4]) -> usize {
        let attr = u32::from(self.attr.bits());
        let tag = u32::from(self.tag);
        let dw0 = place(u32::from(self.fmt), Dw0::FMT_SHIFT, Dw0::FMT_MASK)
            | place(u32::from(self.ty), Dw0::TLP_TYPE_SHIFT, Dw0::TLP_TYPE_MASK)
            | place(tag >> TAG_T9_BIT, Dw0::T9_SHIFT, Dw0::T9_MASK)
            | place(u32::from(self.tc), Dw0::TC_SHIFT, Dw0::TC_MASK)
            | place(tag >> TAG_T8_BIT, Dw0::T8_SHIFT, Dw0::T8_MASK)
            | place(u32::from(self.attr.contains(Attr::IDO)), Dw0::ATTR2_SHIFT, Dw0::ATTR2_MASK)
            | place(u32::from(self.ln), Dw0::LN_SHIFT, Dw0::LN_MASK)
            | place(u32::from(self.th), Dw0::TH_SHIFT, Dw0::TH_MASK)
            | place(u32::from(self.td), Dw0::TD_SHIFT, Dw0::TD_MASK)
            | place(u32::from(self.ep), Dw0::EP_SHIFT, Dw0::EP_MASK)
            | place(attr, Dw0::ATTR_SHIFT, Dw0::ATTR_MASK)
            | place(u32::from(self.at), Dw0::AT_SHIFT, Dw0::AT_MASK)
            | place(u32::from(self.length), Dw0::LENGTH_SHIFT, Dw0::LENGTH_MASK);
        let n = Self::header_dws(self.fmt);
        *out = [dw0, 0, 0, 0];
        let request_dw1 = |requester_id: u16, last_be: u8, first_be: u8| {
            place(u32::from(requester_id), ReqDw1::REQUESTER_ID_SHIFT, ReqDw1::REQUESTER_ID_MASK)
                | place(tag, ReqDw1::TAG_SHIFT, ReqDw1::TAG_MASK)
                | place(u32::from(last_be), ReqDw1::LAST_BE_SHIFT, ReqDw1::LAST_BE_MASK)
                | place(u32::from(first_be), ReqDw1::FIRST_BE_SHIFT, ReqDw1::FIRST_BE_MASK)
        };
        match self.body {
            Body::Request { requester_id, last_be, first_be, address, ph } => {
                out[1] = request_dw1(requester_id, last_be, first_be);
                let low = in_place(address as u32, Addr::ADDRESS_LO_SHIFT, Addr::ADDRESS_LO_MASK)
                    | place(u32::from(ph), Addr::PH_SHIFT, Addr::PH_MASK);
                if n == 4 {
                    out[2] = (address >> u32::BITS) as u32;
                    out[3] = low;
                } else {
                    out[2] = low;
                }
            }
            Body::Config { requester_id, last_be, first_be, target_id, register } => {
                out[1] = request_dw1(requester_id, last_be, first_be);
                let register = u32::from(register);
                out[2] = place(u32::from(target_id), CfgDw2::TARGET_ID_SHIFT, CfgDw2::TARGET_ID_MASK)
                    | in_place(register, CfgDw2::EXT_REGISTER_SHIFT, CfgDw2::EXT_REGISTER_MASK)
                    | in_place(register, CfgDw2::REGISTER_SHIFT, CfgDw2::REGISTER_MASK);
            }
            Body::Completion { completer_id, status, bcm, byte_count, requester_id, lower_address } => {
                out[1] = place(u32::from(completer_id), CplDw1::COMPLETER_ID_SHIFT, CplDw1::COMPLETER_ID_MASK)
                    | place(u32::from(status.0), CplDw1::CPL_STATUS_SHIFT, CplDw1::CPL_STATUS_MASK)
                    | place(u32::from(bcm), CplDw1::BCM_SHIFT, CplDw1::BCM_MASK)
                    | place(u32::from(byte_count), CplDw1::BYTE_COUNT_SHIFT, CplDw1::BYTE_COUNT_MASK);
                out[2] = place(u32::from(requester_id), CplDw2::REQUESTER_ID_SHIFT, CplDw2::REQUESTER_ID_MASK)
                    | place(tag, CplDw2::TAG_SHIFT, CplDw2::TAG_MASK)
                    | place(u32::from(lower_address), CplDw2::LOWER_ADDRESS_SHIFT, CplDw2::LOWER_ADDRESS_MASK);
            }
            Body::Message { requester_id, code, dw2, dw3 } => {
                out[1] = place(u32::from(requester_id), MsgDw1::REQUESTER_ID_SHIFT, MsgDw1::REQUESTER_ID_MASK)
                    | place(tag, MsgDw1::TAG_SHIFT, MsgDw1::TAG_MASK)
                    | place(u32::from(code), MsgDw1::MESSAGE_CODE_SHIFT, MsgDw1::MESSAGE_CODE_MASK);
                out[2] = dw2;
                out[3] = dw3;
            }
            Body::Raw { dws } => out[1..].copy_from_slice(&dws),
        }
        n
    }

    /// The header rules this TLP breaks; empty when well formed.
    pub fn malformed(&self) -> Malformed {
        let mut m = Malformed::empty();
        let kind = self.kind();
        if kind == TlpKind::Reserved {
            m |= Malformed::RESERVED_TYPE;
        }
        let four_dw = Self::header_dws(self.fmt) == 4;
        match self.body {
            Body::Request { address, last_be, first_be, .. } => {
                if four_dw && address < (1 << 32) {
                    m |= Malformed::FOUR_DW_BELOW_4G;
                }
                let atomic = matches!(kind, TlpKind::FetchAdd | TlpKind::Swap | TlpKind::Cas);
                if matches!(kind, TlpKind::IoRead | TlpKind::IoWrite)
                    && (self.length != 1 || self.tc != 0 || !self.attr.is_empty() || last_be != 0)
                {
                    m |= Malformed::IO_CFG_FIELDS;
                }
                if atomic {
                    let ok: &[u16] = if kind == TlpKind::Cas { &[2, 4, 8] } else { &[1, 2] };
                    if !ok.contains(&self.length) {
                        m |= Malformed::ATOMIC_LENGTH;
                    }
                } else {
                    m |= be_rules(self.length_dw(), last_be, first_be);
                }
                let memory = matches!(kind, TlpKind::MemRead | TlpKind::MemReadLocked | TlpKind::MemWrite);
                if memory && address % BOUNDARY_4K + 4 * u64::from(self.length_dw()) > BOUNDARY_4K {
                    m |= Malformed::CROSSES_4K;
                }
            }
            Body::Config { last_be, .. } => {
                if self.length != 1 || self.tc != 0 || !self.attr.is_empty() || last_be != 0 {
                    m |= Malformed::IO_CFG_FIELDS;
                }
            }
            Body::Completion { status, .. } => {
                if !status.is_defined() {
                    m |= Malformed::RESERVED_CPL_STATUS;
                }
            }
            Body::Message { .. } | Body::Raw { .. } => {}
        }
        m
    }
}

/// Byte-enable rules of §2.2.5 for memory requests.
fn be_rules(length_dw: u16, last_be: u8, first_be: u8) -> Malformed {
    if length_dw == 1 && last_be != 0 {
        Malformed::LAST_BE_ON_ONE_DW
    } else if length_dw > 1 && (first_be == 0 || last_be == 0) {
        Malformed::ZERO_BE_ON_MULTI_DW
    } else {
        Malformed::empty()
    }
}
