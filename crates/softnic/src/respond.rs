//! The responder half of RC: what the HCA owning the target QP does with an
//! incoming request (InfiniBand Architecture Specification vol. 1 §9.7,
//! "Reliable service", responder side). The requester half calls these
//! directly when the peer QP lives in the same model, and the RC
//! transport's responder ([`crate::rc::responder`]) when the request came
//! over a RoCEv2 wire. Either way the responder validates everything
//! against its own tables.
//!
//! The responder is given what it needs of the HCA and nothing more: the
//! [`Target`] QP's PD and state, its receive queue, the MR table, its
//! receive CQ and the way to the error state. `Hca` provides them
//! (`crate::hca`); this module does not know the rest of it.

use crate::mr::{Access, KeyFault, Loc, MrTable, Pd, Piece};
use marrow_mlx5::cqe::{Completion, ErrorCompletion};
use marrow_mlx5::raw::{CqeOpcode, Syndrome, WqeOpcode};
use marrow_mlx5::wqe::RemoteAddr;
use marrow_mlx5::wqe_decode::AtomicArgs;
use marrow_mmio::Region;
use serde::{Deserialize, Serialize};
use std::sync::atomic::Ordering;

/// A negative acknowledgement: why the responder refused a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Nak {
    /// Remote access error: bad rkey, range or rights (NAK code "remote access error").
    Access(String),
    /// Invalid request: misaligned atomic, message longer than the receive.
    InvalReq(String),
    /// Remote operational error: the responder failed on its own buffers.
    RemoteOp(String),
    /// Receiver not ready: no receive WQE posted.
    Rnr,
    /// No response at all: the QP is absent or not ready to receive.
    NoResponse(String),
}

impl Nak {
    /// The requester's syndrome (`None` for RNR, which is retried).
    pub fn syndrome(&self) -> Option<(Syndrome, &str)> {
        match self {
            Nak::Access(w) => Some((Syndrome::REMOTE_ACCESS_ERR, w)),
            Nak::InvalReq(w) => Some((Syndrome::REMOTE_INVAL_REQ_ERR, w)),
            Nak::RemoteOp(w) => Some((Syndrome::REMOTE_OP_ERR, w)),
            Nak::NoResponse(w) => Some((Syndrome::TRANSPORT_RETRY_EXC_ERR, w)),
            Nak::Rnr => None,
        }
    }
}

/// The bytes a WRITE or SEND carries: local memory, or a wire buffer.
#[derive(Debug)]
pub enum Src<'a, 'b> {
    /// Resolved local buffers of a requester in the same model.
    Pieces(&'b [Piece<'a>]),
    /// Bytes that came over a RoCEv2 wire.
    Bytes(&'b [u8]),
}

impl Src<'_, '_> {
    /// Bytes in total.
    pub fn len(&self) -> usize {
        match self {
            Src::Pieces(p) => p.iter().map(Piece::len).sum(),
            Src::Bytes(b) => b.len(),
        }
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copy `n` bytes starting at byte `from` of the source to `dst`, `at`
    /// bytes in. A failed copy is the responder's own failure: a remote
    /// operational error for the requester, never a success.
    fn copy_range(&self, mut from: usize, mut n: usize, dst: &Loc, mut at: usize) -> Result<(), Nak> {
        let op = |e: String| Nak::RemoteOp(format!("responder memory: {e}"));
        match (self, dst) {
            (Src::Bytes(b), _) => {
                let src = b.get(from..from + n).ok_or_else(|| op("copy past the source".into()))?;
                dst.write(at, src).map_err(op)?;
            }
            (Src::Pieces(pieces), _) => {
                for p in pieces.iter() {
                    if n == 0 {
                        break;
                    }
                    let l = p.len();
                    if from >= l {
                        from -= l;
                        continue;
                    }
                    let k = (l - from).min(n);
                    match (p, dst) {
                        (Piece::Mem(r, o, _), Loc::Host(dr, doff)) => {
                            Region::copy(r, o + from, dr, doff + at, k).map_err(|e| op(e.to_string()))?;
                        }
                        (Piece::Inline(d), _) => {
                            dst.write(at, &d[from..from + k]).map_err(op)?;
                        }
                        _ => {
                            // Device memory on either side: stage through the host.
                            let mut buf = vec![0u8; k];
                            p.read(from, &mut buf).map_err(op)?;
                            dst.write(at, &buf).map_err(op)?;
                        }
                    }
                    at += k;
                    n -= k;
                    from = 0;
                }
            }
        }
        Ok(())
    }
}

/// What a responder needs of the HCA that owns the target QP.
pub trait Target {
    /// The QP's PD, if the QP exists and accepts requests; otherwise the
    /// silence a requester then times out on.
    fn accepting(&self, qpn: u32) -> Result<Pd, Nak>;
    /// The memory registrations, for rkeys and receive lkeys.
    fn mrs(&self) -> &MrTable;
    /// Whether QP `qpn` is connected to QP `from` of the same model (RC:
    /// a responder executes requests only from the QP it is connected to).
    fn connected(&self, qpn: u32, from: u32) -> bool;
    /// Whether the QP has a receive WQE posted (a SEND's first packet needs one).
    fn has_recv(&self, qpn: u32) -> bool;
    /// Consume the QP's next receive WQE, or `None` when none is posted.
    fn take_recv(&mut self, qpn: u32) -> Option<Recv>;
    /// Write `c` to the QP's receive CQ.
    fn complete_recv(&mut self, qpn: u32, c: &Completion);
    /// Move the QP to the error state.
    fn fail(&mut self, qpn: u32, why: String);
}

/// A receive WQE of the responder, consumed.
#[derive(Debug)]
pub struct Recv {
    /// Its index (the CQE's `wqe_counter`).
    pub index: u16,
    /// Its scatter entries: address, byte count, lkey.
    pub sges: Vec<(u64, u32, u32)>,
}

fn access_nak(f: KeyFault, rkey: u32) -> Nak {
    Nak::Access(format!("rkey {rkey:#x}: {f:?}"))
}

/// The last packet of a multi-packet RDMA_WRITE_IMM: consume a receive
/// WQE and complete it with the whole message's length.
pub fn write_imm_done(t: &mut impl Target, peer: u32, total: u32, imm: u32) -> Result<(), Nak> {
    t.accepting(peer)?;
    let rv = t.take_recv(peer).ok_or(Nak::Rnr)?;
    let c = Completion::Responder {
        opcode: CqeOpcode::RESP_WR_IMM,
        qpn: peer,
        wqe_counter: rv.index,
        byte_cnt: total,
        imm: Some(imm),
    };
    t.complete_recv(peer, &c);
    Ok(())
}

/// A responder-side error: error CQE on the responder's receive CQ, QP to ERR.
fn responder_error(t: &mut impl Target, peer: u32, index: u16, syndrome: Syndrome, why: &str) {
    let c = Completion::Error(ErrorCompletion {
        opcode: CqeOpcode::RESP_ERR,
        syndrome,
        vendor_err_synd: 0,
        hw_err_synd: 0,
        hw_synd_type: 0,
        wqe_opcode: WqeOpcode(0),
        qpn: peer,
        wqe_counter: index,
    });
    t.complete_recv(peer, &c);
    t.fail(peer, format!("responder {syndrome:?}: {why}"));
}

/// RDMA_WRITE (with `imm`: RDMA_WRITE_IMM, which consumes a receive WQE).
pub fn write(
    t: &mut impl Target,
    peer: u32,
    remote: RemoteAddr,
    src: Src<'_, '_>,
    imm: Option<u32>,
) -> Result<(), Nak> {
    let pd = t.accepting(peer)?;
    let total = src.len();
    let target = t.mrs().remote(pd, remote.rkey, remote.raddr, total as u64, Access::REMOTE_WRITE);
    let recv = match imm {
        Some(_) => Some(t.take_recv(peer).ok_or(Nak::Rnr)?),
        None => None,
    };
    let dst = match target {
        Ok(t) => t,
        Err(f) => {
            if let Some(rv) = &recv {
                responder_error(t, peer, rv.index, Syndrome::LOCAL_ACCESS_ERR, "RDMA_WRITE_IMM target");
            }
            return Err(access_nak(f, remote.rkey));
        }
    };
    if let Err(e) = src.copy_range(0, total, &dst, 0) {
        if let Some(rv) = &recv {
            responder_error(t, peer, rv.index, Syndrome::LOCAL_PROT_ERR, "RDMA_WRITE_IMM data did not land");
        }
        return Err(e);
    }
    if let Some(rv) = recv {
        let c = Completion::Responder {
            opcode: CqeOpcode::RESP_WR_IMM,
            qpn: peer,
            wqe_counter: rv.index,
            byte_cnt: total as u32,
            imm,
        };
        t.complete_recv(peer, &c);
    }
    Ok(())
}

/// SEND (with `imm`: SEND_IMM): scatter into the next receive WQE.
pub fn send(t: &mut impl Target, peer: u32, src: Src<'_, '_>, imm: Option<u32>) -> Result<(), Nak> {
    let pd = t.accepting(peer)?;
    let total = src.len();
    let rv = t.take_recv(peer).ok_or(Nak::Rnr)?;
    let mut dst = Vec::new();
    let mut room = 0usize;
    for &(addr, len, lkey) in &rv.sges {
        if len == 0 {
            continue;
        }
        match t.mrs().local(pd, lkey, addr, len.into(), Access::LOCAL_WRITE) {
            Ok(loc) => dst.push((loc, len as usize)),
            Err(f) => {
                responder_error(t, peer, rv.index, Syndrome::LOCAL_PROT_ERR, &format!("lkey {lkey:#x}: {f:?}"));
                return Err(Nak::RemoteOp(format!("responder QP {peer:#x}: receive lkey {lkey:#x} {f:?}")));
            }
        }
        room += len as usize;
    }
    if total > room {
        responder_error(t, peer, rv.index, Syndrome::LOCAL_LENGTH_ERR, "receive buffer too short");
        return Err(Nak::InvalReq(format!("SEND of {total} bytes, receive WQE {} holds {room}", rv.index)));
    }
    let mut from = 0;
    for (loc, len) in dst {
        let n = len.min(total - from);
        if n == 0 {
            break;
        }
        if let Err(e) = src.copy_range(from, n, &loc, 0) {
            responder_error(
                t,
                peer,
                rv.index,
                Syndrome::LOCAL_PROT_ERR,
                "SEND data did not land in the receive buffer",
            );
            return Err(e);
        }
        from += n;
    }
    let c = Completion::Responder {
        opcode: if imm.is_some() { CqeOpcode::RESP_SEND_IMM } else { CqeOpcode::RESP_SEND },
        qpn: peer,
        wqe_counter: rv.index,
        byte_cnt: total as u32,
        imm,
    };
    t.complete_recv(peer, &c);
    Ok(())
}

/// RDMA_READ: where the requested bytes are.
pub fn read(t: &mut impl Target, peer: u32, remote: RemoteAddr, total: u64) -> Result<Loc, Nak> {
    let pd = t.accepting(peer)?;
    t.mrs().remote(pd, remote.rkey, remote.raddr, total, Access::REMOTE_READ).map_err(|f| access_nak(f, remote.rkey))
}

/// Masked fetch-and-add: add lane by lane, a carry stopping at every bit
/// set in `boundary` (the most significant bit of each field).
pub fn masked_add(old: u64, add: u64, boundary: u64, width: u32) -> u64 {
    let (mut out, mut carry) = (0u64, 0u64);
    for i in 0..width {
        let s = ((old >> i) & 1) + ((add >> i) & 1) + carry;
        out |= (s & 1) << i;
        carry = if (boundary >> i) & 1 == 1 { 0 } else { s >> 1 };
    }
    out
}

/// An atomic: the old value, after the operation was applied atomically.
pub fn atomic(t: &mut impl Target, peer: u32, remote: RemoteAddr, args: AtomicArgs) -> Result<u64, Nak> {
    let pd = t.accepting(peer)?;
    let width = args.width();
    if !remote.raddr.is_multiple_of(u64::from(width)) {
        return Err(Nak::InvalReq(format!("atomic at {:#x} is not {width}-byte aligned", remote.raddr)));
    }
    let (rr, roff) = match t
        .mrs()
        .remote(pd, remote.rkey, remote.raddr, width.into(), Access::REMOTE_ATOMIC)
        .map_err(|f| access_nak(f, remote.rkey))?
    {
        Loc::Host(r, off) => (r, off),
        Loc::Device(..) => {
            // A NIC's atomics on GPU memory are PCIe atomics the copy engine
            // this model reaches device memory through cannot perform.
            return Err(Nak::InvalReq("atomics on device memory are not modelled".into()));
        }
    };
    let misaligned = || Nak::InvalReq("atomic target misaligned in memory".into());
    if width == 8 {
        let a = rr.atomic_u64(roff).map_err(|_| misaligned())?;
        let f = |old: u64| match args {
            AtomicArgs::Cs { compare, swap } => (old == compare).then_some(swap),
            AtomicArgs::Fa { add } => Some(old.wrapping_add(add)),
            AtomicArgs::MaskedCs64 { swap, compare, swap_mask, compare_mask } => {
                (old & compare_mask == compare & compare_mask).then_some((old & !swap_mask) | (swap & swap_mask))
            }
            AtomicArgs::MaskedFa64 { add, field_boundary } => Some(masked_add(old, add, field_boundary, 64)),
            _ => None,
        };
        Ok(match a.fetch_update(Ordering::AcqRel, Ordering::Acquire, f) {
            Ok(v) | Err(v) => v,
        })
    } else {
        let a = rr.atomic_u32(roff).map_err(|_| misaligned())?;
        let f = |old: u32| match args {
            AtomicArgs::MaskedCs32 { swap, compare, swap_mask, compare_mask } => {
                (old & compare_mask == compare & compare_mask).then_some((old & !swap_mask) | (swap & swap_mask))
            }
            AtomicArgs::MaskedFa32 { add, field_boundary } => {
                Some(masked_add(old.into(), add.into(), field_boundary.into(), 32) as u32)
            }
            _ => None,
        };
        Ok(match a.fetch_update(Ordering::AcqRel, Ordering::Acquire, f) {
            Ok(v) | Err(v) => v.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::masked_add;

    #[test]
    fn masked_add_stops_carries_at_field_boundaries() {
        // Two 16-bit fields in 32 bits: 0xffff + 1 does not carry into the upper field.
        assert_eq!(masked_add(0x0001_ffff, 0x0001_0001, 0x8000_8000, 32), 0x0002_0000);
        // No boundary: one 32-bit add.
        assert_eq!(masked_add(0x0001_ffff, 0x0001_0001, 0, 32), 0x0003_0000);
        assert_eq!(masked_add(u64::MAX, 1, 0, 64), 0);
    }
}
