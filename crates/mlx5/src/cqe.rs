//! Completion queue entries: ownership and typed completions.
//!
//! Ownership follows rdma-core `providers/mlx5/cq.c` `get_sw_cqe`: software
//! owns CQE number `n` of a ring of `ncqe` entries when its opcode is not
//! INVALID and `(op_own & 1) == !!(n & ncqe)`. The payload must be read only
//! after that check, behind a `from_device` barrier (`udma_from_device_barrier`);
//! this module works on a copy the caller made after that barrier.

use crate::generated::mlx5::*;
use zerocopy::FromBytes;

/// A good or failed completion, decoded from a 64-byte CQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// A send-queue WQE completed (`MLX5_CQE_REQ`).
    Requester {
        /// The opcode of the WQE that completed (`sop_drop_qpn[31:24]`).
        wqe_opcode: WqeOpcode,
        /// QP number.
        qpn: u32,
        /// `wqe_index` of the completed WQE.
        wqe_counter: u16,
        /// Bytes (meaningful for RDMA_READ; 8 for atomics).
        byte_cnt: u32,
        /// Completion timestamp.
        timestamp: u64,
    },
    /// A receive completed (`MLX5_CQE_RESP_*`).
    Responder {
        /// RESP_SEND, RESP_SEND_IMM, RESP_WR_IMM or RESP_SEND_INV.
        opcode: CqeOpcode,
        /// QP number.
        qpn: u32,
        /// Receive WQE counter.
        wqe_counter: u16,
        /// Bytes received.
        byte_cnt: u32,
        /// Immediate data, for the `*_IMM` opcodes.
        imm: Option<u32>,
    },
    /// An error CQE (`MLX5_CQE_REQ_ERR` or `MLX5_CQE_RESP_ERR`).
    Error(ErrorCompletion),
    /// Any other opcode (RESIZE_CQ, NO_PACKET, SIG_ERR, unknown codes), kept raw.
    Other {
        /// The CQE opcode.
        opcode: CqeOpcode,
        /// QP number from `sop_drop_qpn`.
        qpn: u32,
        /// `wqe_counter`.
        wqe_counter: u16,
    },
}

impl Completion {
    /// The `wqe_counter` the CQE reports.
    pub fn wqe_counter(&self) -> u16 {
        match *self {
            Completion::Requester { wqe_counter, .. }
            | Completion::Responder { wqe_counter, .. }
            | Completion::Other { wqe_counter, .. } => wqe_counter,
            Completion::Error(e) => e.wqe_counter,
        }
    }

    /// The QP the CQE belongs to.
    pub fn qpn(&self) -> u32 {
        match *self {
            Completion::Requester { qpn, .. } | Completion::Responder { qpn, .. } | Completion::Other { qpn, .. } => {
                qpn
            }
            Completion::Error(e) => e.qpn,
        }
    }
}

/// A decoded error CQE (`mlx5_err_cqe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorCompletion {
    /// REQ_ERR or RESP_ERR.
    pub opcode: CqeOpcode,
    /// The syndrome, named when the spec names it, kept raw otherwise.
    pub syndrome: Syndrome,
    /// Vendor syndrome, raw.
    pub vendor_err_synd: u8,
    /// Hardware syndrome (extended error CQE).
    pub hw_err_synd: u8,
    /// Hardware syndrome type (extended error CQE).
    pub hw_synd_type: u8,
    /// Opcode of the failed WQE.
    pub wqe_opcode: WqeOpcode,
    /// QP number.
    pub qpn: u32,
    /// `wqe_index` of the failed WQE.
    pub wqe_counter: u16,
}

impl core::fmt::Display for ErrorCompletion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} on QP {:#x}: syndrome {:?}, vendor_err_synd {:#04x}, hw_err_synd {:#04x}, hw_synd_type {:#04x}, WQE {:?} at wqe_counter {:#06x}",
            self.opcode,
            self.qpn,
            self.syndrome,
            self.vendor_err_synd,
            self.hw_err_synd,
            self.hw_synd_type,
            self.wqe_opcode,
            self.wqe_counter
        )
    }
}

/// Why bytes are not a CQE this crate can decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // variant fields are named after the segment fields they carry
pub enum CqeError {
    /// Not 64 bytes.
    WrongSize { have: usize },
    /// A compressed CQE (format 3): a mini-CQE array, not decoded here.
    Compressed,
    /// The ring size is not a power of two.
    RingNotPowerOfTwo { ncqe: u32 },
}

impl core::fmt::Display for CqeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CqeError::WrongSize { have } => write!(f, "{have} bytes: a CQE is 64 (or 128 with the cqe64 at +64)"),
            CqeError::Compressed => write!(f, "op_own.format is COMPRESSED (3): mini-CQE arrays are not decoded"),
            CqeError::RingNotPowerOfTwo { ncqe } => write!(f, "CQ of {ncqe} entries: the size must be a power of two"),
        }
    }
}

impl core::error::Error for CqeError {}

/// The state of one CQ slot as seen by software.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqePoll {
    /// Still owned by hardware (owner bit of the previous pass, or INVALID).
    NotReady,
    /// Software owns it.
    Ready(Completion),
}

/// The byte NVSHMEM fills a collapsed CQ with before first use (`memset`
/// of 0xff in its IBGDA setup): every op_own then reads as opcode INVALID,
/// so a poller can tell the slot was never written.
pub const COLLAPSED_CQ_FILL: u8 = 0xff;

/// Whether software owns CQE number `n` (the consumer index, not reduced
/// modulo the ring) of a ring of `ncqe` entries, given its `op_own` byte.
pub fn sw_owns(op_own: u8, n: u32, ncqe: u32) -> bool {
    let opcode = (op_own >> mlx5_cqe64::OPCODE_SHIFT) & mlx5_cqe64::OPCODE_MASK;
    let owner = (op_own >> mlx5_cqe64::OWNER_SHIFT) & mlx5_cqe64::OWNER_MASK;
    opcode != CqeOpcode::INVALID.0 && (owner != 0) == (n & ncqe != 0)
}

/// The owner bit the device writes into CQE number `n` of a ring of `ncqe`.
pub fn owner_bit_for(n: u32, ncqe: u32) -> u8 {
    u8::from(n & ncqe != 0)
}

/// Poll slot `n % ncqe`'s bytes: ownership first, then the decode.
pub fn poll_cqe(bytes: &[u8], n: u32, ncqe: u32) -> Result<CqePoll, CqeError> {
    if !ncqe.is_power_of_two() {
        return Err(CqeError::RingNotPowerOfTwo { ncqe });
    }
    let cqe = mlx5_cqe64::ref_from_bytes(bytes).map_err(|_| CqeError::WrongSize { have: bytes.len() })?;
    if !sw_owns(cqe.op_own(), n, ncqe) {
        return Ok(CqePoll::NotReady);
    }
    decode_cqe(bytes).map(CqePoll::Ready)
}

/// Decode a 64-byte CQE (or a 128-byte one, whose cqe64 sits at +64)
/// without an ownership check.
pub fn decode_cqe(bytes: &[u8]) -> Result<Completion, CqeError> {
    let bytes = match bytes.len() {
        64 => bytes,
        128 => &bytes[MLX5_CQE128_CQE64_OFFSET as usize..],
        have => return Err(CqeError::WrongSize { have }),
    };
    let cqe = mlx5_cqe64::ref_from_bytes(bytes).map_err(|_| CqeError::WrongSize { have: bytes.len() })?;
    if cqe.format() == CqeFormat::COMPRESSED {
        return Err(CqeError::Compressed);
    }
    let opcode = cqe.opcode();
    Ok(match opcode {
        CqeOpcode::REQ => Completion::Requester {
            wqe_opcode: cqe.sop(),
            qpn: cqe.qpn(),
            wqe_counter: cqe.wqe_counter(),
            byte_cnt: cqe.byte_cnt(),
            timestamp: cqe.timestamp(),
        },
        CqeOpcode::RESP_SEND | CqeOpcode::RESP_SEND_IMM | CqeOpcode::RESP_WR_IMM | CqeOpcode::RESP_SEND_INV => {
            Completion::Responder {
                opcode,
                qpn: cqe.qpn(),
                wqe_counter: cqe.wqe_counter(),
                byte_cnt: cqe.byte_cnt(),
                imm: matches!(opcode, CqeOpcode::RESP_SEND_IMM | CqeOpcode::RESP_WR_IMM).then(|| cqe.imm_inval_pkey()),
            }
        }
        CqeOpcode::REQ_ERR | CqeOpcode::RESP_ERR => {
            let e = mlx5_err_cqe::ref_from_bytes(bytes).map_err(|_| CqeError::WrongSize { have: bytes.len() })?;
            Completion::Error(ErrorCompletion {
                opcode,
                syndrome: Syndrome(e.syndrome()),
                vendor_err_synd: e.vendor_err_synd(),
                hw_err_synd: e.hw_err_synd(),
                hw_synd_type: e.hw_synd_type(),
                wqe_opcode: e.s_wqe_opcode(),
                qpn: e.qpn(),
                wqe_counter: e.wqe_counter(),
            })
        }
        _ => Completion::Other { opcode, qpn: cqe.qpn(), wqe_counter: cqe.wqe_counter() },
    })
}

/// Encode a completion into a 64-byte CQE with the given owner bit, as the
/// device writes it. Fields a [`Completion`] does not carry are zero.
/// Values wider than their fields (a QPN over 24 bits) are refused.
pub fn encode_cqe(c: &Completion, owner: bool) -> Result<[u8; 64], marrow_layout::FieldOverflow> {
    // The setters write into `out` itself. A CQE built beside it and then
    // copied in is read back with wide loads right after its narrow field
    // stores, which the store buffer cannot forward; the device model
    // encodes a CQE per signaled WQE, so that stall was on its hot path.
    let mut out = [0u8; 64];
    match *c {
        Completion::Requester { wqe_opcode, qpn, wqe_counter, byte_cnt, timestamp } => {
            let q: &mut mlx5_cqe64 = zerocopy::transmute_mut!(&mut out);
            q.set_sop(wqe_opcode).set_qpn(qpn)?;
            q.set_wqe_counter(wqe_counter).set_byte_cnt(byte_cnt).set_timestamp(timestamp);
            q.set_opcode(CqeOpcode::REQ)?;
            q.set_owner(owner);
        }
        Completion::Responder { opcode, qpn, wqe_counter, byte_cnt, imm } => {
            let q: &mut mlx5_cqe64 = zerocopy::transmute_mut!(&mut out);
            q.set_qpn(qpn)?;
            q.set_wqe_counter(wqe_counter).set_byte_cnt(byte_cnt).set_imm_inval_pkey(imm.unwrap_or(0));
            q.set_opcode(opcode)?;
            q.set_owner(owner);
        }
        Completion::Error(e) => {
            let q: &mut mlx5_err_cqe = zerocopy::transmute_mut!(&mut out);
            q.set_syndrome(e.syndrome.0).set_vendor_err_synd(e.vendor_err_synd);
            q.set_hw_err_synd(e.hw_err_synd).set_hw_synd_type(e.hw_synd_type);
            q.set_s_wqe_opcode(e.wqe_opcode).set_qpn(e.qpn)?;
            q.set_wqe_counter(e.wqe_counter);
            q.set_opcode(e.opcode)?;
            q.set_owner(owner);
        }
        Completion::Other { opcode, qpn, wqe_counter } => {
            let q: &mut mlx5_cqe64 = zerocopy::transmute_mut!(&mut out);
            q.set_qpn(qpn)?;
            q.set_wqe_counter(wqe_counter);
            q.set_opcode(opcode)?;
            q.set_owner(owner);
        }
    }
    Ok(out)
}
