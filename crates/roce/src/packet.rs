//! One InfiniBand transport packet, from the BTH to the end of its pad
//! (the ICRC is the frame's business, `crate::frame`): parsed from any
//! bytes without panicking, and built back to bytes.

use crate::opcode::{self, Layout, Operation, Position};
use crate::raw::{AethNakCode, AethType, BthOpcode, aeth, atmack, atmeth, bth, immdt, reth};
use alloc::vec::Vec;
use core::fmt;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// The remote buffer of an RDMA WRITE or READ (RETH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length of the whole message.
    pub len: u32,
}

/// An atomic's target and operands (AtomicETH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AtomicEth {
    /// Virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap (COMPARE_SWAP) or add (FETCH_ADD) data.
    pub swap_add: u64,
    /// Compare data (COMPARE_SWAP).
    pub comp: u64,
}

/// An acknowledgement's syndrome and MSN (AETH).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aeth {
    /// ACK, RNR NAK or NAK.
    pub ack_type: AethType,
    /// Credits (ACK), timer code (RNR NAK) or NAK code (NAK): 5 bits.
    pub value: u8,
    /// Message sequence number: 24 bits.
    pub msn: u32,
}

impl Aeth {
    /// A positive ACK with no credit information.
    pub fn ack(msn: u32) -> Aeth {
        Aeth { ack_type: AethType::ACK, value: crate::raw::AETH_CREDITS_INVALID as u8, msn }
    }

    /// A NAK with `code`.
    pub fn nak(code: AethNakCode, msn: u32) -> Aeth {
        Aeth { ack_type: AethType::NAK, value: code.0, msn }
    }

    /// An RNR NAK asking the requester to wait `timer` (an IBA timer code).
    pub fn rnr(timer: u8, msn: u32) -> Aeth {
        Aeth { ack_type: AethType::RNR_NAK, value: timer & aeth::SYNDROME_VALUE_MASK as u8, msn }
    }
}

/// One transport packet. `payload` excludes the pad.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// OpCode.
    pub opcode: BthOpcode,
    /// Solicited event.
    pub se: bool,
    /// Partition key.
    pub p_key: u16,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
    /// RETH, where the opcode has one.
    pub reth: Option<Reth>,
    /// AtomicETH, where the opcode has one.
    pub atomic: Option<AtomicEth>,
    /// AETH, where the opcode has one.
    pub aeth: Option<Aeth>,
    /// AtomicAckETH's original data, where the opcode has one.
    pub atomic_ack: Option<u64>,
    /// Immediate data, where the opcode has one.
    pub imm: Option<u32>,
    /// Payload bytes, without the pad.
    pub payload: &'a [u8],
}

/// Why bytes are not a packet this model accepts. Every variant is a
/// counted drop at the receiver, never a panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// Fewer bytes than a header needs.
    Truncated {
        /// The header.
        what: &'static str,
        /// Bytes it needs from where it starts.
        need: usize,
        /// Bytes there are.
        have: usize,
    },
    /// An opcode of another transport class, or one this model does not carry.
    UnsupportedOpcode(u8),
    /// TVer other than 0.
    TransportVersion(u8),
    /// PadCnt larger than what follows the headers.
    Pad {
        /// PadCnt.
        pad_cnt: u8,
        /// Bytes after the headers.
        rest: usize,
    },
    /// Bytes after the headers of an opcode that carries no payload.
    UnexpectedPayload {
        /// The opcode.
        opcode: BthOpcode,
        /// How many.
        len: usize,
    },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Truncated { what, need, have } => write!(f, "{what} needs {need} bytes, {have} left"),
            ParseError::UnsupportedOpcode(op) => write!(f, "opcode {op:#04x} is not an RC opcode this model carries"),
            ParseError::TransportVersion(v) => write!(f, "BTH TVer {v}, only 0 is defined"),
            ParseError::Pad { pad_cnt, rest } => write!(f, "PadCnt {pad_cnt} with {rest} bytes after the headers"),
            ParseError::UnexpectedPayload { opcode, len } => {
                write!(f, "{} carries no payload, {len} bytes follow its headers", opcode_name(*opcode))
            }
        }
    }
}

/// An opcode's name, or its number.
pub fn opcode_name(op: BthOpcode) -> &'static str {
    op.name().unwrap_or("unknown opcode")
}

/// Take a header of type `T` off the front of `bytes`.
fn take<T: FromBytes + zerocopy::KnownLayout + zerocopy::Immutable>(
    what: &'static str,
    bytes: &mut &[u8],
) -> Result<T, ParseError> {
    crate::take(bytes).map_err(|(need, have)| ParseError::Truncated { what, need, have })
}

impl Packet<'static> {
    /// A packet of `opcode` to `dest_qp` at `psn`, default P_Key, no flags,
    /// no extended header and no payload: what a sender fills in.
    pub fn bare(opcode: BthOpcode, dest_qp: u32, psn: u32) -> Packet<'static> {
        Packet {
            opcode,
            se: false,
            p_key: crate::raw::IB_DEFAULT_PKEY_FULL as u16,
            dest_qp,
            ack_req: false,
            psn,
            reth: None,
            atomic: None,
            aeth: None,
            atomic_ack: None,
            imm: None,
            payload: &[],
        }
    }
}

impl<'a> Packet<'a> {
    /// Parse a transport packet: `bytes` runs from the BTH to the end of the
    /// pad (the ICRC already removed).
    pub fn parse(bytes: &'a [u8]) -> Result<Packet<'a>, ParseError> {
        let mut rest = bytes;
        let b: bth = take("BTH", &mut rest)?;
        let op = b.op();
        let (_, _, layout) = opcode::describe(op).ok_or(ParseError::UnsupportedOpcode(op.0))?;
        if b.tver() != 0 {
            return Err(ParseError::TransportVersion(b.tver()));
        }
        let mut p: Packet<'a> =
            Packet { se: b.se(), p_key: b.p_key(), ack_req: b.ack_req(), ..Packet::bare(op, b.dest_qp(), b.psn()) };
        if layout.reth {
            let r: reth = take("RETH", &mut rest)?;
            p.reth = Some(Reth { va: r.va(), rkey: r.rkey(), len: r.len() });
        }
        if layout.atmeth {
            let a: atmeth = take("AtomicETH", &mut rest)?;
            p.atomic = Some(AtomicEth { va: a.va(), rkey: a.rkey(), swap_add: a.swap_add(), comp: a.comp() });
        }
        if layout.aeth {
            let a: aeth = take("AETH", &mut rest)?;
            p.aeth = Some(Aeth { ack_type: a.ack_type(), value: a.syndrome_value(), msn: a.msn() });
        }
        if layout.atmack {
            let a: atmack = take("AtomicAckETH", &mut rest)?;
            p.atomic_ack = Some(a.orig());
        }
        if layout.immdt {
            let i: immdt = take("ImmDt", &mut rest)?;
            p.imm = Some(i.imm());
        }
        let pad = b.pad_cnt() as usize;
        if pad > rest.len() {
            return Err(ParseError::Pad { pad_cnt: b.pad_cnt(), rest: rest.len() });
        }
        if !layout.payload && rest.len() != pad {
            return Err(ParseError::UnexpectedPayload { opcode: op, len: rest.len() });
        }
        p.payload = &rest[..rest.len() - pad];
        Ok(p)
    }

    /// The operation and position of this packet's opcode.
    pub fn kind(&self) -> Option<(Operation, Position)> {
        opcode::describe(self.opcode).map(|(o, p, _)| (o, p))
    }

    /// The headers this packet's opcode carries.
    pub fn layout(&self) -> Layout {
        opcode::describe(self.opcode).map_or(Layout::default(), |(_, _, l)| l)
    }

    /// Bytes of the packet on the wire from the BTH to the end of the pad.
    pub fn wire_len(&self) -> usize {
        let l = self.layout();
        let headers = bth::SIZE
            + if l.reth { reth::SIZE } else { 0 }
            + if l.atmeth { atmeth::SIZE } else { 0 }
            + if l.aeth { aeth::SIZE } else { 0 }
            + if l.atmack { atmack::SIZE } else { 0 }
            + if l.immdt { immdt::SIZE } else { 0 };
        headers + if l.payload { self.payload.len().next_multiple_of(4) } else { 0 }
    }

    /// Append the packet's bytes (BTH to the end of the pad) to `out`. The
    /// headers written are the ones the opcode carries; a field the opcode
    /// has but `self` lacks is written as zeros. PSN and QPN are masked to
    /// their 24 bits.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let l = self.layout();
        let payload = if l.payload { self.payload } else { &[] };
        let pad = (4 - payload.len() % 4) % 4;
        let mut b = bth::new_zeroed();
        b.set_op(self.opcode).set_se(self.se).set_p_key(self.p_key).set_ack_req(self.ack_req);
        // Both fit: the masks make them 24 bits and pad < 4.
        let _ = b.set_dest_qp(self.dest_qp & crate::raw::BTH_PSN_MASK);
        let _ = b.set_psn(self.psn & crate::raw::BTH_PSN_MASK);
        let _ = b.set_pad_cnt(pad as u8);
        out.extend_from_slice(b.as_bytes());
        if l.reth {
            let r = self.reth.unwrap_or(Reth { va: 0, rkey: 0, len: 0 });
            let mut h = reth::new_zeroed();
            h.set_va(r.va).set_rkey(r.rkey).set_len(r.len);
            out.extend_from_slice(h.as_bytes());
        }
        if l.atmeth {
            let a = self.atomic.unwrap_or(AtomicEth { va: 0, rkey: 0, swap_add: 0, comp: 0 });
            let mut h = atmeth::new_zeroed();
            h.set_va(a.va).set_rkey(a.rkey).set_swap_add(a.swap_add).set_comp(a.comp);
            out.extend_from_slice(h.as_bytes());
        }
        if l.aeth {
            let a = self.aeth.unwrap_or(Aeth::ack(0));
            let mut h = aeth::new_zeroed();
            // Each fits its field once masked: 2, 5 and 24 bits.
            let _ = h.set_ack_type(AethType(a.ack_type.0 & aeth::ACK_TYPE_MASK as u8));
            let _ = h.set_syndrome_value(a.value & aeth::SYNDROME_VALUE_MASK as u8);
            let _ = h.set_msn(a.msn & crate::raw::BTH_PSN_MASK);
            out.extend_from_slice(h.as_bytes());
        }
        if l.atmack {
            let mut h = atmack::new_zeroed();
            h.set_orig(self.atomic_ack.unwrap_or(0));
            out.extend_from_slice(h.as_bytes());
        }
        if l.immdt {
            let mut h = immdt::new_zeroed();
            h.set_imm(self.imm.unwrap_or(0));
            out.extend_from_slice(h.as_bytes());
        }
        out.extend_from_slice(payload);
        out.extend_from_slice(&[0; 3][..pad]);
    }
}
