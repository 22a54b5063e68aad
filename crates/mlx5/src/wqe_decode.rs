//! Send WQE decoding: the segments of a WQE read back from bytes, as the
//! NIC (and `marrow decode`) walks them.
//!
//! The segment order per opcode is the one rdma-core's `_mlx5_post_send`
//! writes (`providers/mlx5/qp.c`); masked atomics follow NVSHMEM
//! `ibgda_device.cuh`. Any byte string is accepted: malformed WQEs give a
//! [`WqeDecodeError`] naming the offset, never a panic.

use crate::generated::mlx5::*;
use crate::wqe::{RemoteAddr, Sge, inline_seg_bytes, wqebbs_for_ds};
use zerocopy::FromBytes;

const DS: usize = MLX5_SEND_WQE_DS as usize;

/// What is wrong with a WQE's bytes, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // variant fields are named after the segment fields they carry
pub enum WqeDecodeError {
    /// Fewer bytes than a control segment.
    TooShort { have: usize },
    /// `ds` is zero: not even the control segment is counted.
    ZeroDs,
    /// `ds * 16` runs past the bytes given.
    DsBeyondBuffer { ds: u8, have: usize },
    /// A segment the opcode requires is missing at `offset`.
    MissingSegment { what: &'static str, offset: usize },
    /// An inline segment at `offset` claims more bytes than `ds` leaves.
    InlineOverrun { offset: usize, len: usize, room: usize },
    /// A masked atomic with an opmod other than 0x08 or 0x09.
    BadAtomicOpmod { opmod: u8 },
    /// An atomic whose local segment is not a plain data segment.
    AtomicLocalInline { offset: usize },
    /// More than one local data segment after an atomic.
    AtomicExtraSegments { offset: usize },
    /// The opcode is one this decoder (and the softnic) does not execute.
    UnsupportedOpcode { opcode: WqeOpcode },
}

impl core::fmt::Display for WqeDecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WqeDecodeError::TooShort { have } => write!(f, "{have} bytes: a WQE starts with a 16-byte control segment"),
            WqeDecodeError::ZeroDs => write!(f, "qpn_ds.ds is 0: a WQE has at least the control segment (ds >= 1)"),
            WqeDecodeError::DsBeyondBuffer { ds, have } => {
                write!(f, "qpn_ds.ds = {ds} ({} bytes) but only {have} bytes given", *ds as usize * DS)
            }
            WqeDecodeError::MissingSegment { what, offset } => {
                write!(f, "at {offset:#x}: the opcode needs a {what} but ds ends here")
            }
            WqeDecodeError::InlineOverrun { offset, len, room } => write!(
                f,
                "at {offset:#x}: inline segment of {len} bytes needs {} bytes, ds leaves {room}",
                inline_seg_bytes(*len)
            ),
            WqeDecodeError::BadAtomicOpmod { opmod } => {
                write!(f, "masked atomic opmod {opmod:#04x}: expected 0x08 (4-byte) or 0x09 (8-byte)")
            }
            WqeDecodeError::AtomicLocalInline { offset } => {
                write!(f, "at {offset:#x}: an atomic's local segment must be a data segment, found inline")
            }
            WqeDecodeError::AtomicExtraSegments { offset } => {
                write!(f, "at {offset:#x}: an atomic takes exactly one local data segment")
            }
            WqeDecodeError::UnsupportedOpcode { opcode } => write!(f, "opcode {opcode:?} is not decoded"),
        }
    }
}

impl core::error::Error for WqeDecodeError {}

/// One segment of a WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // variant fields are named after the segment fields they carry
pub enum Segment<'a> {
    /// `mlx5_wqe_ctrl_seg`.
    Ctrl(mlx5_wqe_ctrl_seg),
    /// `mlx5_wqe_raddr_seg`.
    RemoteAddr(mlx5_wqe_raddr_seg),
    /// `mlx5_wqe_atomic_seg`.
    Atomic(mlx5_wqe_atomic_seg),
    /// `mlx5_wqe_masked_atomic_cs32_seg`.
    MaskedCs32(mlx5_wqe_masked_atomic_cs32_seg),
    /// `mlx5_wqe_masked_atomic_fa32_seg`.
    MaskedFa32(mlx5_wqe_masked_atomic_fa32_seg),
    /// `mlx5_wqe_masked_atomic_cs64_data_seg`.
    MaskedCs64Data(mlx5_wqe_masked_atomic_cs64_data_seg),
    /// `mlx5_wqe_masked_atomic_cs64_mask_seg`.
    MaskedCs64Mask(mlx5_wqe_masked_atomic_cs64_mask_seg),
    /// `mlx5_wqe_masked_atomic_fa64_seg`.
    MaskedFa64(mlx5_wqe_masked_atomic_fa64_seg),
    /// `mlx5_wqe_data_seg`.
    Data(mlx5_wqe_data_seg),
    /// `mlx5_wqe_inl_data_seg` and its payload (padding excluded).
    Inline { header: mlx5_wqe_inl_data_seg, data: &'a [u8] },
    /// 16 bytes of a WQE whose opcode this decoder does not walk.
    Opaque(&'a [u8]),
}

impl Segment<'_> {
    /// The spec name of the segment's layout.
    pub fn layout_name(&self) -> &'static str {
        match self {
            Segment::Ctrl(_) => "mlx5_wqe_ctrl_seg",
            Segment::RemoteAddr(_) => "mlx5_wqe_raddr_seg",
            Segment::Atomic(_) => "mlx5_wqe_atomic_seg",
            Segment::MaskedCs32(_) => "mlx5_wqe_masked_atomic_cs32_seg",
            Segment::MaskedFa32(_) => "mlx5_wqe_masked_atomic_fa32_seg",
            Segment::MaskedCs64Data(_) => "mlx5_wqe_masked_atomic_cs64_data_seg",
            Segment::MaskedCs64Mask(_) => "mlx5_wqe_masked_atomic_cs64_mask_seg",
            Segment::MaskedFa64(_) => "mlx5_wqe_masked_atomic_fa64_seg",
            Segment::Data(_) => "mlx5_wqe_data_seg",
            Segment::Inline { .. } => "mlx5_wqe_inl_data_seg",
            Segment::Opaque(_) => "unparsed",
        }
    }
}

/// The atomic operands of a decoded WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // variant fields are named after the segment fields they carry
pub enum AtomicArgs {
    /// `ATOMIC_CS`.
    Cs { compare: u64, swap: u64 },
    /// `ATOMIC_FA`.
    Fa { add: u64 },
    /// 4-byte `ATOMIC_MASKED_CS`.
    MaskedCs32 { swap: u32, compare: u32, swap_mask: u32, compare_mask: u32 },
    /// 4-byte `ATOMIC_MASKED_FA`.
    MaskedFa32 { add: u32, field_boundary: u32 },
    /// 8-byte `ATOMIC_MASKED_CS`.
    MaskedCs64 { swap: u64, compare: u64, swap_mask: u64, compare_mask: u64 },
    /// 8-byte `ATOMIC_MASKED_FA`.
    MaskedFa64 { add: u64, field_boundary: u64 },
}

impl AtomicArgs {
    /// Operand width in bytes.
    pub fn width(&self) -> u32 {
        match self {
            AtomicArgs::MaskedCs32 { .. } | AtomicArgs::MaskedFa32 { .. } => 4,
            _ => 8,
        }
    }
}

/// A local buffer of a decoded WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Local<'a> {
    /// A data segment.
    Sge(Sge),
    /// Inline payload.
    Inline(&'a [u8]),
}

/// The control segment's fields, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtrlFields {
    /// Opcode.
    pub opcode: WqeOpcode,
    /// Opcode modifier.
    pub opmod: u8,
    /// Producer index of the WQE.
    pub wqe_index: u16,
    /// QP number.
    pub qpn: u32,
    /// Size in 16-byte units.
    pub ds: u8,
    /// Fence mode.
    pub fence: FenceMode,
    /// Completion mode.
    pub completion: CompletionMode,
    /// Solicited event.
    pub solicited: bool,
    /// Immediate / invalidate key.
    pub imm: u32,
    /// Signature byte.
    pub signature: u8,
}

impl CtrlFields {
    /// Decode a control segment.
    pub fn from_seg(c: &mlx5_wqe_ctrl_seg) -> Self {
        CtrlFields {
            opcode: c.opcode(),
            opmod: c.opmod(),
            wqe_index: c.wqe_index(),
            qpn: c.qpn(),
            ds: c.ds(),
            fence: c.fm(),
            completion: c.ce(),
            solicited: c.se(),
            imm: c.imm(),
            signature: c.signature(),
        }
    }
}

/// A WQE whose control segment and `ds` were checked against the bytes.
#[derive(Clone, Copy, Debug)]
pub struct WqeView<'a> {
    bytes: &'a [u8],
    ctrl: mlx5_wqe_ctrl_seg,
}

/// A fully decoded WQE, as the NIC executes it.
#[derive(Clone, Copy, Debug)]
pub struct ParsedWqe<'a> {
    /// Control fields.
    pub ctrl: CtrlFields,
    /// The remote buffer (RDMA and atomics).
    pub remote: Option<RemoteAddr>,
    /// Atomic operands.
    pub atomic: Option<AtomicArgs>,
    /// Local data and inline segments, in order.
    locals: &'a [u8],
}

impl<'a> WqeView<'a> {
    /// Check the control segment and that `ds` fits the bytes given. Bytes
    /// past `ds * 16` (the rest of the last WQEBB) are ignored.
    pub fn new(bytes: &'a [u8]) -> Result<Self, WqeDecodeError> {
        let (ctrl, _) =
            mlx5_wqe_ctrl_seg::read_from_prefix(bytes).map_err(|_| WqeDecodeError::TooShort { have: bytes.len() })?;
        let ds = ctrl.ds();
        if ds == 0 {
            return Err(WqeDecodeError::ZeroDs);
        }
        if ds as usize * DS > bytes.len() {
            return Err(WqeDecodeError::DsBeyondBuffer { ds, have: bytes.len() });
        }
        Ok(WqeView { bytes: &bytes[..ds as usize * DS], ctrl })
    }

    /// The raw control segment.
    pub fn ctrl(&self) -> &mlx5_wqe_ctrl_seg {
        &self.ctrl
    }

    /// The decoded control fields.
    pub fn ctrl_fields(&self) -> CtrlFields {
        CtrlFields::from_seg(&self.ctrl)
    }

    /// The WQE's bytes (`ds * 16`).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// WQEBBs occupied.
    pub fn wqebbs(&self) -> usize {
        wqebbs_for_ds(self.ctrl.ds() as usize)
    }

    /// Walk the segments. Each item is `(offset, segment)`; a malformed
    /// segment ends the walk with an error.
    pub fn segments(&self) -> Segments<'a> {
        Segments { bytes: self.bytes, at: 0, plan: plan_for(self.ctrl.opcode(), self.ctrl.opmod()), fixed: None }
    }

    /// Decode the whole WQE as the NIC would execute it. Reads the fixed
    /// segments in place (no per-segment values are built: this is the
    /// device model's hot path) and checks every local segment.
    pub fn parse(&self) -> Result<ParsedWqe<'a>, WqeDecodeError> {
        self.parse_with(self.ctrl_fields())
    }

    /// [`WqeView::parse`] with the control fields already decoded (they
    /// must be this WQE's: the device model decodes them once per WQE).
    pub fn parse_with(&self, ctrl: CtrlFields) -> Result<ParsedWqe<'a>, WqeDecodeError> {
        let op = ctrl.opcode;
        let known = [
            WqeOpcode::NOP,
            WqeOpcode::RDMA_WRITE,
            WqeOpcode::RDMA_WRITE_IMM,
            WqeOpcode::SEND,
            WqeOpcode::SEND_IMM,
            WqeOpcode::RDMA_READ,
            WqeOpcode::ATOMIC_CS,
            WqeOpcode::ATOMIC_FA,
            WqeOpcode::ATOMIC_MASKED_CS,
            WqeOpcode::ATOMIC_MASKED_FA,
        ];
        if !known.contains(&op) {
            return Err(WqeDecodeError::UnsupportedOpcode { opcode: op });
        }
        let (plan, has_locals) = plan_for(op, ctrl.opmod)?;
        let b = self.bytes;
        let fixed_end = DS * (1 + plan.len());
        if fixed_end > b.len() {
            let missing = plan[b.len() / DS - 1];
            return Err(WqeDecodeError::MissingSegment { what: missing.name(), offset: b.len() });
        }
        let be64 =
            |o: usize| u64::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3], b[o + 4], b[o + 5], b[o + 6], b[o + 7]]);
        let be32 = |o: usize| u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        // Fixed segment `i` starts after the control segment and the `i`
        // before it; each field is read at its generated offset in place
        // (no segment value is built: this is the device model's hot path).
        let seg = |i: usize| DS * (1 + i);
        let remote = plan.first().map(|_| RemoteAddr {
            raddr: be64(seg(0) + mlx5_wqe_raddr_seg::RADDR_OFF),
            rkey: be32(seg(0) + mlx5_wqe_raddr_seg::RKEY_OFF),
        });
        let atomic = match plan.get(1) {
            Some(Fixed::Atomic) if op == WqeOpcode::ATOMIC_CS => Some(AtomicArgs::Cs {
                compare: be64(seg(1) + mlx5_wqe_atomic_seg::COMPARE_OFF),
                swap: be64(seg(1) + mlx5_wqe_atomic_seg::SWAP_ADD_OFF),
            }),
            Some(Fixed::Atomic) => Some(AtomicArgs::Fa { add: be64(seg(1) + mlx5_wqe_atomic_seg::SWAP_ADD_OFF) }),
            Some(Fixed::Cs32) => Some(AtomicArgs::MaskedCs32 {
                swap: be32(seg(1) + mlx5_wqe_masked_atomic_cs32_seg::SWAP_DATA_OFF),
                compare: be32(seg(1) + mlx5_wqe_masked_atomic_cs32_seg::COMPARE_DATA_OFF),
                swap_mask: be32(seg(1) + mlx5_wqe_masked_atomic_cs32_seg::SWAP_MASK_OFF),
                compare_mask: be32(seg(1) + mlx5_wqe_masked_atomic_cs32_seg::COMPARE_MASK_OFF),
            }),
            Some(Fixed::Fa32) => Some(AtomicArgs::MaskedFa32 {
                add: be32(seg(1) + mlx5_wqe_masked_atomic_fa32_seg::ADD_DATA_OFF),
                field_boundary: be32(seg(1) + mlx5_wqe_masked_atomic_fa32_seg::FIELD_BOUNDARY_OFF),
            }),
            // The data segment, then the mask segment (plan_for).
            Some(Fixed::Cs64Data) => Some(AtomicArgs::MaskedCs64 {
                swap: be64(seg(1) + mlx5_wqe_masked_atomic_cs64_data_seg::SWAP_OFF),
                compare: be64(seg(1) + mlx5_wqe_masked_atomic_cs64_data_seg::COMPARE_OFF),
                swap_mask: be64(seg(2) + mlx5_wqe_masked_atomic_cs64_mask_seg::SWAP_MASK_OFF),
                compare_mask: be64(seg(2) + mlx5_wqe_masked_atomic_cs64_mask_seg::COMPARE_MASK_OFF),
            }),
            Some(Fixed::Fa64) => Some(AtomicArgs::MaskedFa64 {
                add: be64(seg(1) + mlx5_wqe_masked_atomic_fa64_seg::ADD_DATA_OFF),
                field_boundary: be64(seg(1) + mlx5_wqe_masked_atomic_fa64_seg::FIELD_BOUNDARY_OFF),
            }),
            _ => None,
        };
        let locals = if has_locals { &b[fixed_end..] } else { &b[b.len()..] };
        // Every local segment must fit what ds leaves.
        let mut at = 0;
        while at < locals.len() {
            let bc = u32::from_be_bytes([locals[at], locals[at + 1], locals[at + 2], locals[at + 3]]);
            if bc & MLX5_INLINE_SEG != 0 {
                let len = (bc & MLX5_WQE_INLINE_SEG_BYTE_COUNT_MASK) as usize;
                let room = locals.len() - at;
                if inline_seg_bytes(len) > room {
                    return Err(WqeDecodeError::InlineOverrun { offset: fixed_end + at, len, room });
                }
                at += inline_seg_bytes(len);
            } else {
                at += DS;
            }
        }
        let parsed = ParsedWqe { ctrl, remote, atomic, locals };
        if atomic.is_some() {
            let mut it = parsed.locals();
            match it.next() {
                Some(Local::Sge(_)) => {}
                Some(Local::Inline(_)) => return Err(WqeDecodeError::AtomicLocalInline { offset: fixed_end }),
                None => return Err(WqeDecodeError::MissingSegment { what: "local data segment", offset: fixed_end }),
            }
            if it.next().is_some() {
                return Err(WqeDecodeError::AtomicExtraSegments { offset: fixed_end + DS });
            }
        }
        Ok(parsed)
    }
}

impl<'a> ParsedWqe<'a> {
    /// The local data and inline segments, in order.
    pub fn locals(&self) -> impl Iterator<Item = Local<'a>> + 'a {
        let mut at = 0;
        let bytes = self.locals;
        core::iter::from_fn(move || {
            let (seg, next) = local_at(bytes, at)?;
            at = next;
            Some(seg)
        })
    }

    /// Total bytes of the local segments.
    pub fn local_len(&self) -> u64 {
        self.locals()
            .map(|l| match l {
                Local::Sge(s) => u64::from(s.length),
                Local::Inline(d) => d.len() as u64,
            })
            .sum()
    }
}

/// A local segment at `at` (already validated by [`Segments`]).
fn local_at(bytes: &[u8], at: usize) -> Option<(Local<'_>, usize)> {
    let head = bytes.get(at..at + DS)?;
    let bc = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    if bc & MLX5_INLINE_SEG != 0 {
        let len = (bc & MLX5_WQE_INLINE_SEG_BYTE_COUNT_MASK) as usize;
        let data = bytes.get(at + 4..at + 4 + len)?;
        Some((Local::Inline(data), at + inline_seg_bytes(len)))
    } else {
        let d = mlx5_wqe_data_seg::read_from_bytes(head).ok()?;
        Some((Local::Sge(Sge { addr: d.addr(), length: d.byte_count(), lkey: d.lkey() }), at + DS))
    }
}

/// Iterator over a WQE's segments.
#[derive(Clone, Debug)]
pub struct Segments<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The segment plan of the opcode, worked out once.
    plan: Result<(&'static [Fixed], bool), WqeDecodeError>,
    /// Fixed segments still expected after the control segment.
    fixed: Option<(&'static [Fixed], usize)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fixed {
    Raddr,
    Atomic,
    Cs32,
    Fa32,
    Cs64Data,
    Cs64Mask,
    Fa64,
}

impl Fixed {
    fn name(self) -> &'static str {
        match self {
            Fixed::Raddr => "remote address segment",
            _ => "atomic segment",
        }
    }
}

/// The fixed segments an opcode takes after the control segment, and
/// whether local data/inline segments follow.
fn plan_for(opcode: WqeOpcode, opmod: u8) -> Result<(&'static [Fixed], bool), WqeDecodeError> {
    use Fixed::*;
    Ok(match opcode {
        WqeOpcode::RDMA_WRITE | WqeOpcode::RDMA_WRITE_IMM | WqeOpcode::RDMA_READ => (&[Raddr], true),
        WqeOpcode::SEND | WqeOpcode::SEND_IMM | WqeOpcode::SEND_INVAL => (&[], true),
        WqeOpcode::ATOMIC_CS | WqeOpcode::ATOMIC_FA => (&[Raddr, Atomic], true),
        WqeOpcode::ATOMIC_MASKED_CS => match u32::from(opmod) {
            MLX5_ATOMIC_OPMOD_EXT_4B => (&[Raddr, Cs32], true),
            MLX5_ATOMIC_OPMOD_EXT_8B => (&[Raddr, Cs64Data, Cs64Mask], true),
            _ => return Err(WqeDecodeError::BadAtomicOpmod { opmod }),
        },
        WqeOpcode::ATOMIC_MASKED_FA => match u32::from(opmod) {
            MLX5_ATOMIC_OPMOD_EXT_4B => (&[Raddr, Fa32], true),
            MLX5_ATOMIC_OPMOD_EXT_8B => (&[Raddr, Fa64], true),
            _ => return Err(WqeDecodeError::BadAtomicOpmod { opmod }),
        },
        _ => (&[], false),
    })
}

impl<'a> Iterator for Segments<'a> {
    type Item = Result<(usize, Segment<'a>), WqeDecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.at;
        if at == usize::MAX {
            return None; // an error ended the walk
        }
        if at >= self.bytes.len() {
            // A fixed segment the opcode needs but `ds` left out is an error.
            self.at = usize::MAX;
            let plan = match self.plan {
                Ok((plan, _)) => plan,
                Err(e) => return Some(Err(e)),
            };
            let i = self.fixed.map_or(0, |(_, i)| i);
            return plan.get(i).map(|f| Err(WqeDecodeError::MissingSegment { what: f.name(), offset: at }));
        }
        let chunk = &self.bytes[at..at + DS];
        if at == 0 {
            self.at = DS;
            return match mlx5_wqe_ctrl_seg::read_from_bytes(chunk) {
                Ok(c) => Some(Ok((0, Segment::Ctrl(c)))),
                Err(_) => None,
            };
        }
        let (plan, locals) = match self.plan {
            Ok(p) => p,
            Err(e) => {
                self.at = usize::MAX;
                return Some(Err(e));
            }
        };
        let i = match self.fixed {
            Some((_, i)) => i,
            None => 0,
        };
        if let Some(f) = plan.get(i) {
            self.fixed = Some((plan, i + 1));
            self.at = at + DS;
            // Every layout below is 16 bytes, the size of `chunk`.
            let seg = match f {
                Fixed::Raddr => mlx5_wqe_raddr_seg::read_from_bytes(chunk).map(Segment::RemoteAddr).ok(),
                Fixed::Atomic => mlx5_wqe_atomic_seg::read_from_bytes(chunk).map(Segment::Atomic).ok(),
                Fixed::Cs32 => mlx5_wqe_masked_atomic_cs32_seg::read_from_bytes(chunk).map(Segment::MaskedCs32).ok(),
                Fixed::Fa32 => mlx5_wqe_masked_atomic_fa32_seg::read_from_bytes(chunk).map(Segment::MaskedFa32).ok(),
                Fixed::Cs64Data => {
                    mlx5_wqe_masked_atomic_cs64_data_seg::read_from_bytes(chunk).map(Segment::MaskedCs64Data).ok()
                }
                Fixed::Cs64Mask => {
                    mlx5_wqe_masked_atomic_cs64_mask_seg::read_from_bytes(chunk).map(Segment::MaskedCs64Mask).ok()
                }
                Fixed::Fa64 => mlx5_wqe_masked_atomic_fa64_seg::read_from_bytes(chunk).map(Segment::MaskedFa64).ok(),
            };
            return seg.map(|s| Ok((at, s)));
        }
        self.fixed = Some((plan, i));
        if !locals {
            self.at = at + DS;
            return Some(Ok((at, Segment::Opaque(chunk))));
        }
        let bc = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        if bc & MLX5_INLINE_SEG != 0 {
            let len = (bc & MLX5_WQE_INLINE_SEG_BYTE_COUNT_MASK) as usize;
            let room = self.bytes.len() - at;
            if inline_seg_bytes(len) > room {
                self.at = usize::MAX;
                return Some(Err(WqeDecodeError::InlineOverrun { offset: at, len, room }));
            }
            let header = mlx5_wqe_inl_data_seg::read_from_bytes(&chunk[..4]).ok()?;
            self.at = at + inline_seg_bytes(len);
            Some(Ok((at, Segment::Inline { header, data: &self.bytes[at + 4..at + 4 + len] })))
        } else {
            self.at = at + DS;
            mlx5_wqe_data_seg::read_from_bytes(chunk).ok().map(|d| Ok((at, Segment::Data(d))))
        }
    }
}
