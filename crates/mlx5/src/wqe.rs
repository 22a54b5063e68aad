//! Send WQE composition: control, remote-address, atomic, data and inline
//! segments packed into 64-byte WQEBBs.
//!
//! Follows rdma-core `providers/mlx5/qp.c` `_mlx5_post_send` (segment order,
//! `ds` in 16-byte units, producer advance of `DIV_ROUND_UP(ds*16, 64)`) and
//! the limits of Linux `include/linux/mlx5/qp.h` (6-bit `ds`, at most
//! `MLX5_SEND_WQE_MAX_WQEBBS` blocks). Masked atomics follow NVSHMEM's
//! `ibgda_device.cuh` (opmod 0x08 / 0x09).

use crate::generated::mlx5::*;
use zerocopy::{FromZeros, IntoBytes};

/// A local scatter/gather entry: what `mlx5_wqe_data_seg` carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Sge {
    /// Local virtual address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the memory region.
    pub lkey: u32,
}

/// A remote buffer: what `mlx5_wqe_raddr_seg` carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub raddr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// The operation a send WQE performs, with its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // variant fields are named after the segment fields they carry
pub enum WqeOp<'a> {
    /// `NOP`: a control segment alone.
    Nop,
    /// `RDMA_WRITE` from a gather list.
    RdmaWrite { remote: RemoteAddr, sgl: &'a [Sge] },
    /// `RDMA_WRITE_IMM`; `imm` is delivered to the responder's CQE. It is the
    /// host value, stored big endian (rdma-core's `imm_data` is this value
    /// after `htobe32`, which its helpers then store unchanged).
    RdmaWriteImm { remote: RemoteAddr, sgl: &'a [Sge], imm: u32 },
    /// `RDMA_WRITE` with the payload inline in the WQE.
    RdmaWriteInline { remote: RemoteAddr, data: &'a [u8] },
    /// `SEND` from a gather list, consuming one receive WQE at the peer.
    Send { sgl: &'a [Sge] },
    /// `SEND_IMM`.
    SendImm { sgl: &'a [Sge], imm: u32 },
    /// `SEND` with the payload inline.
    SendInline { data: &'a [u8] },
    /// `RDMA_READ` into a scatter list.
    RdmaRead { remote: RemoteAddr, sgl: &'a [Sge] },
    /// `ATOMIC_CS`: 8-byte compare-and-swap; the old value lands in `local`.
    AtomicCs { remote: RemoteAddr, local: Sge, compare: u64, swap: u64 },
    /// `ATOMIC_FA`: 8-byte fetch-and-add; the old value lands in `local`.
    AtomicFa { remote: RemoteAddr, local: Sge, add: u64 },
    /// `ATOMIC_MASKED_CS`, 4 bytes (opmod 0x08).
    MaskedCs32 { remote: RemoteAddr, local: Sge, swap: u32, compare: u32, swap_mask: u32, compare_mask: u32 },
    /// `ATOMIC_MASKED_FA`, 4 bytes (opmod 0x08).
    MaskedFa32 { remote: RemoteAddr, local: Sge, add: u32, field_boundary: u32 },
    /// `ATOMIC_MASKED_CS`, 8 bytes (opmod 0x09): two segments.
    MaskedCs64 { remote: RemoteAddr, local: Sge, swap: u64, compare: u64, swap_mask: u64, compare_mask: u64 },
    /// `ATOMIC_MASKED_FA`, 8 bytes (opmod 0x09).
    MaskedFa64 { remote: RemoteAddr, local: Sge, add: u64, field_boundary: u64 },
}

impl WqeOp<'_> {
    /// The opcode and opcode modifier this operation is posted with.
    pub fn opcode_opmod(&self) -> (WqeOpcode, u8) {
        let ext4 = MLX5_ATOMIC_OPMOD_EXT_4B as u8;
        let ext8 = MLX5_ATOMIC_OPMOD_EXT_8B as u8;
        match self {
            WqeOp::Nop => (WqeOpcode::NOP, 0),
            WqeOp::RdmaWrite { .. } | WqeOp::RdmaWriteInline { .. } => (WqeOpcode::RDMA_WRITE, 0),
            WqeOp::RdmaWriteImm { .. } => (WqeOpcode::RDMA_WRITE_IMM, 0),
            WqeOp::Send { .. } | WqeOp::SendInline { .. } => (WqeOpcode::SEND, 0),
            WqeOp::SendImm { .. } => (WqeOpcode::SEND_IMM, 0),
            WqeOp::RdmaRead { .. } => (WqeOpcode::RDMA_READ, 0),
            WqeOp::AtomicCs { .. } => (WqeOpcode::ATOMIC_CS, 0),
            WqeOp::AtomicFa { .. } => (WqeOpcode::ATOMIC_FA, 0),
            WqeOp::MaskedCs32 { .. } => (WqeOpcode::ATOMIC_MASKED_CS, ext4),
            WqeOp::MaskedFa32 { .. } => (WqeOpcode::ATOMIC_MASKED_FA, ext4),
            WqeOp::MaskedCs64 { .. } => (WqeOpcode::ATOMIC_MASKED_CS, ext8),
            WqeOp::MaskedFa64 { .. } => (WqeOpcode::ATOMIC_MASKED_FA, ext8),
        }
    }

    fn remote(&self) -> Option<RemoteAddr> {
        match *self {
            WqeOp::RdmaWrite { remote, .. }
            | WqeOp::RdmaWriteImm { remote, .. }
            | WqeOp::RdmaWriteInline { remote, .. }
            | WqeOp::RdmaRead { remote, .. }
            | WqeOp::AtomicCs { remote, .. }
            | WqeOp::AtomicFa { remote, .. }
            | WqeOp::MaskedCs32 { remote, .. }
            | WqeOp::MaskedFa32 { remote, .. }
            | WqeOp::MaskedCs64 { remote, .. }
            | WqeOp::MaskedFa64 { remote, .. } => Some(remote),
            WqeOp::Nop | WqeOp::Send { .. } | WqeOp::SendImm { .. } | WqeOp::SendInline { .. } => None,
        }
    }

    fn imm(&self) -> u32 {
        match *self {
            WqeOp::RdmaWriteImm { imm, .. } | WqeOp::SendImm { imm, .. } => imm,
            _ => 0,
        }
    }

    /// The atomic operand segments (1 or 2) and the local length the
    /// operation must return into.
    fn atomic_segments(&self) -> Option<([[u8; 16]; 2], usize, u32)> {
        let mut segs = [[0u8; 16]; 2];
        let (n, len) = match *self {
            WqeOp::AtomicCs { compare, swap, .. } => {
                let mut s = mlx5_wqe_atomic_seg::new_zeroed();
                s.set_swap_add(swap).set_compare(compare);
                segs[0].copy_from_slice(s.as_bytes());
                (1, MLX5_ATOMIC_SIZE)
            }
            WqeOp::AtomicFa { add, .. } => {
                let mut s = mlx5_wqe_atomic_seg::new_zeroed();
                s.set_swap_add(add).set_compare(0);
                segs[0].copy_from_slice(s.as_bytes());
                (1, MLX5_ATOMIC_SIZE)
            }
            WqeOp::MaskedCs32 { swap, compare, swap_mask, compare_mask, .. } => {
                let mut s = mlx5_wqe_masked_atomic_cs32_seg::new_zeroed();
                s.set_swap_data(swap).set_compare_data(compare).set_swap_mask(swap_mask).set_compare_mask(compare_mask);
                segs[0].copy_from_slice(s.as_bytes());
                (1, 4)
            }
            WqeOp::MaskedFa32 { add, field_boundary, .. } => {
                let mut s = mlx5_wqe_masked_atomic_fa32_seg::new_zeroed();
                s.set_add_data(add).set_field_boundary(field_boundary);
                segs[0].copy_from_slice(s.as_bytes());
                (1, 4)
            }
            WqeOp::MaskedCs64 { swap, compare, swap_mask, compare_mask, .. } => {
                let mut d = mlx5_wqe_masked_atomic_cs64_data_seg::new_zeroed();
                d.set_swap(swap).set_compare(compare);
                let mut m = mlx5_wqe_masked_atomic_cs64_mask_seg::new_zeroed();
                m.set_swap_mask(swap_mask).set_compare_mask(compare_mask);
                segs[0].copy_from_slice(d.as_bytes());
                segs[1].copy_from_slice(m.as_bytes());
                (2, 8)
            }
            WqeOp::MaskedFa64 { add, field_boundary, .. } => {
                let mut s = mlx5_wqe_masked_atomic_fa64_seg::new_zeroed();
                s.set_add_data(add).set_field_boundary(field_boundary);
                segs[0].copy_from_slice(s.as_bytes());
                (1, 8)
            }
            _ => return None,
        };
        Some((segs, n, len))
    }

    fn local_atomic(&self) -> Option<Sge> {
        match *self {
            WqeOp::AtomicCs { local, .. }
            | WqeOp::AtomicFa { local, .. }
            | WqeOp::MaskedCs32 { local, .. }
            | WqeOp::MaskedFa32 { local, .. }
            | WqeOp::MaskedCs64 { local, .. }
            | WqeOp::MaskedFa64 { local, .. } => Some(local),
            _ => None,
        }
    }

    fn sgl(&self) -> &[Sge] {
        match self {
            WqeOp::RdmaWrite { sgl, .. }
            | WqeOp::RdmaWriteImm { sgl, .. }
            | WqeOp::Send { sgl }
            | WqeOp::SendImm { sgl, .. }
            | WqeOp::RdmaRead { sgl, .. } => sgl,
            _ => &[],
        }
    }

    fn inline(&self) -> Option<&[u8]> {
        match self {
            WqeOp::RdmaWriteInline { data, .. } | WqeOp::SendInline { data } => Some(data),
            _ => None,
        }
    }
}

/// Control-segment parameters common to every WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtrlParams {
    /// Producer index of the WQE's first WQEBB, modulo 2^16.
    pub wqe_index: u16,
    /// QP number (24 bits).
    pub qpn: u32,
    /// Fence mode.
    pub fence: FenceMode,
    /// When a CQE is generated.
    pub completion: CompletionMode,
    /// Solicited event.
    pub solicited: bool,
}

impl CtrlParams {
    /// A signaled WQE with no fence: what most posts use.
    pub fn signaled(wqe_index: u16, qpn: u32) -> Self {
        CtrlParams { wqe_index, qpn, fence: FenceMode::NONE, completion: CompletionMode::CQE_ALWAYS, solicited: false }
    }
}

/// What was built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltWqe {
    /// The opcode posted.
    pub opcode: WqeOpcode,
    /// WQE size in 16-byte units, as written in `qpn_ds`.
    pub ds: u8,
    /// WQEBBs the WQE occupies: the producer advances by this much.
    pub wqebbs: u8,
}

impl BuiltWqe {
    /// Bytes of WQE content (`ds * 16`).
    pub fn len(&self) -> usize {
        self.ds as usize * MLX5_SEND_WQE_DS as usize
    }

    /// Never true: every WQE has a control segment.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// Why a WQE cannot be built. Each is something the hardware would refuse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // variant fields are named after the segment fields they carry
pub enum WqeError {
    /// The inline payload does not fit one WQE (`max` is the most this WQE could carry).
    InlineTooLong { len: usize, max: usize },
    /// More segments than the 6-bit `ds` (63 units, under 16 WQEBBs) can describe.
    TooManySegments { ds: usize },
    /// An atomic's local buffer must be exactly the operand size; zero-length atomics are refused.
    AtomicLength { expected: u32, got: u32 },
    /// A gather entry of 2 GiB or more: bit 31 of `byte_count` would mark it inline.
    SgeTooLong { length: u32 },
    /// The QP number does not fit 24 bits.
    QpnOutOfRange { qpn: u32 },
    /// The output buffer is shorter than the WQE.
    BufferTooSmall { need: usize, have: usize },
}

impl core::fmt::Display for WqeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WqeError::InlineTooLong { len, max } => {
                write!(f, "inline payload of {len} bytes exceeds the {max} bytes one WQE can carry")
            }
            WqeError::TooManySegments { ds } => write!(
                f,
                "WQE needs {ds} 16-byte units; ds is 6 bits (max {MLX5_WQE_CTRL_DS_MAX}) and a WQE spans at most {MLX5_SEND_WQE_MAX_WQEBBS} WQEBBs"
            ),
            WqeError::AtomicLength { expected, got } => {
                write!(f, "atomic local buffer is {got} bytes; the operation returns exactly {expected}")
            }
            WqeError::SgeTooLong { length } => {
                write!(f, "gather entry of {length:#x} bytes: bit 31 of byte_count is the inline flag")
            }
            WqeError::QpnOutOfRange { qpn } => write!(f, "QPN {qpn:#x} does not fit 24 bits"),
            WqeError::BufferTooSmall { need, have } => write!(f, "WQE needs {need} bytes, buffer has {have}"),
        }
    }
}

impl core::error::Error for WqeError {}

const DS: usize = MLX5_SEND_WQE_DS as usize;
const INLINE_HDR: usize = 4;

/// Bytes an inline segment of `len` payload bytes occupies (padded to 16).
pub const fn inline_seg_bytes(len: usize) -> usize {
    (INLINE_HDR + len).div_ceil(DS) * DS
}

/// WQEBBs occupied by a WQE of `ds` 16-byte units.
pub const fn wqebbs_for_ds(ds: usize) -> usize {
    (ds * DS).div_ceil(MLX5_SEND_WQE_BB as usize)
}

/// Compose the WQE for `op` into the start of `out`, writing exactly
/// `ds * 16` bytes (inline padding is zeroed; bytes after the WQE, up to the
/// end of its last WQEBB, are left as they were, as rdma-core leaves them).
/// Nothing is written when an error is returned.
pub fn build_wqe(ctrl: &CtrlParams, op: &WqeOp<'_>, out: &mut [u8]) -> Result<BuiltWqe, WqeError> {
    if ctrl.qpn > mlx5_wqe_ctrl_seg::QPN_MASK {
        return Err(WqeError::QpnOutOfRange { qpn: ctrl.qpn });
    }
    let atomic = op.atomic_segments();
    if let (Some((_, _, want)), Some(local)) = (atomic, op.local_atomic())
        && local.length != want
    {
        return Err(WqeError::AtomicLength { expected: want, got: local.length });
    }
    // Size first: ctrl, raddr, atomic operands, then local data or inline.
    let fixed = 1 + usize::from(op.remote().is_some()) + atomic.map_or(0, |(_, n, _)| n);
    let tail = match (op.inline(), op.local_atomic()) {
        (Some(data), _) => {
            let max_units = MLX5_WQE_CTRL_DS_MAX as usize - fixed;
            let max = (max_units * DS - INLINE_HDR).min(MLX5_WQE_INLINE_SEG_BYTE_COUNT_MASK as usize);
            if data.len() > max {
                return Err(WqeError::InlineTooLong { len: data.len(), max });
            }
            inline_seg_bytes(data.len()) / DS
        }
        (None, Some(_)) => 1,
        (None, None) => {
            if let Some(bad) = op.sgl().iter().find(|s| s.length & MLX5_INLINE_SEG != 0) {
                return Err(WqeError::SgeTooLong { length: bad.length });
            }
            op.sgl().iter().filter(|s| s.length != 0).count()
        }
    };
    let ds = fixed + tail;
    if ds > MLX5_WQE_CTRL_DS_MAX as usize || wqebbs_for_ds(ds) > MLX5_SEND_WQE_MAX_WQEBBS as usize {
        return Err(WqeError::TooManySegments { ds });
    }
    let need = ds * DS;
    if out.len() < need {
        return Err(WqeError::BufferTooSmall { need, have: out.len() });
    }

    let (opcode, opmod) = op.opcode_opmod();
    let mut c = mlx5_wqe_ctrl_seg::new_zeroed();
    c.set_opmod(opmod).set_wqe_index(ctrl.wqe_index).set_opcode(opcode);
    // Both checked above: qpn fits 24 bits, ds ≤ 63.
    let _ = c.set_qpn(ctrl.qpn);
    let _ = c.set_ds(ds as u8);
    let _ = c.set_fm(ctrl.fence);
    let _ = c.set_ce(ctrl.completion);
    c.set_se(ctrl.solicited).set_imm(op.imm());
    let mut at = put(out, 0, c.as_bytes());

    if let Some(r) = op.remote() {
        let mut s = mlx5_wqe_raddr_seg::new_zeroed();
        s.set_raddr(r.raddr).set_rkey(r.rkey);
        at = put(out, at, s.as_bytes());
    }
    if let Some((segs, n, _)) = atomic {
        for s in &segs[..n] {
            at = put(out, at, s);
        }
    }
    if let Some(data) = op.inline() {
        let mut h = mlx5_wqe_inl_data_seg::new_zeroed();
        h.set_byte_count(MLX5_INLINE_SEG | data.len() as u32);
        let end = at + inline_seg_bytes(data.len());
        at = put(out, at, h.as_bytes());
        at = put(out, at, data);
        out[at..end].fill(0);
        at = end;
    } else if let Some(local) = op.local_atomic() {
        at = put(out, at, data_seg(&local).as_bytes());
    } else {
        // Zero-length entries are skipped, as rdma-core's _mlx5_post_send does.
        for sge in op.sgl().iter().filter(|s| s.length != 0) {
            at = put(out, at, data_seg(sge).as_bytes());
        }
    }
    debug_assert_eq!(at, need);
    Ok(BuiltWqe { opcode, ds: ds as u8, wqebbs: wqebbs_for_ds(ds) as u8 })
}

fn data_seg(sge: &Sge) -> mlx5_wqe_data_seg {
    let mut d = mlx5_wqe_data_seg::new_zeroed();
    d.set_byte_count(sge.length).set_lkey(sge.lkey).set_addr(sge.addr);
    d
}

fn put(out: &mut [u8], at: usize, bytes: &[u8]) -> usize {
    out[at..at + bytes.len()].copy_from_slice(bytes);
    at + bytes.len()
}
