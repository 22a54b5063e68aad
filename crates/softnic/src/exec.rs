//! WQE execution and validation, as the HCA does it: every key, bound and
//! access right checked before a byte moves, and each failure answered with
//! the syndrome hardware uses (rdma-core `cq.c` `mlx5_handle_error_cqe`
//! maps them to `ibv_wc_status`; `ibv_poll_cq(3)` says what each means):
//!
//! | What went wrong | Syndrome |
//! |---|---|
//! | malformed WQE: bad opcode, `ds` inconsistent with the segments, wrong QPN or WQE index in the control segment | LOCAL_QP_OP_ERR |
//! | a local key that does not exist, is in another PD, does not cover the range, or lacks LOCAL_WRITE where the HCA writes | LOCAL_PROT_ERR |
//! | message over 2 GiB, atomic local buffer of the wrong size | LOCAL_LENGTH_ERR |
//! | remote key missing, out of range, or without the right | REMOTE_ACCESS_ERR |
//! | misaligned atomic, SEND longer than the receive buffer | REMOTE_INVAL_REQ_ERR |
//! | the responder failed on its receive buffer | REMOTE_OP_ERR |
//! | the peer QP is absent or not ready to receive (no ACK ever comes) | TRANSPORT_RETRY_EXC_ERR |
//! | no receive WQE at the peer, RNR retries exhausted | RNR_RETRY_EXC_ERR |
//!
//! On the responder: a receive buffer whose key fails gives LOCAL_PROT_ERR,
//! one too short LOCAL_LENGTH_ERR, and an RDMA_WRITE_IMM whose target fails
//! LOCAL_ACCESS_ERR ("a protection error occurred on a local data buffer
//! during the processing of a RDMA Write with Immediate", `ibv_poll_cq(3)`).
//!
//! The model executes WQEs of a QP one at a time and in order, so every
//! fence mode is satisfied by construction. Atomics operate on host-endian
//! memory (the NIC in host-endianness atomic mode).

use crate::hca::Hca;
use crate::mr::{Access, KeyFault};
use crate::trace::Kind;
use marrow_mlx5::cqe::{Completion, ErrorCompletion};
use marrow_mlx5::raw::{CqeOpcode, MLX5_INVALID_LKEY, Syndrome, WqeOpcode, mlx5_wqe_ctrl_seg};
use marrow_mlx5::wqe_decode::{AtomicArgs, CtrlFields, Local, ParsedWqe, WqeView};
use marrow_mmio::Region;
use std::sync::atomic::Ordering;
use zerocopy::{FromBytes, FromZeros};

/// Largest message (IBA: 2^31 bytes).
const MAX_MSG: u64 = 1 << 31;

/// What became of one WQE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Executed.
    Done {
        /// `byte_cnt` for the CQE.
        byte_cnt: u32,
    },
    /// Failed with a syndrome.
    Error {
        /// The syndrome.
        syndrome: Syndrome,
        /// Vendor syndrome.
        vendor: u8,
        /// Why, for the trace.
        why: String,
    },
    /// The peer has no receive WQE: retry after the RNR timer.
    Rnr,
}

fn err(syndrome: Syndrome, why: impl Into<String>) -> Outcome {
    Outcome::Error { syndrome, vendor: 0, why: why.into() }
}

/// The control fields of a fetched WQE (zeros where bytes are missing).
pub fn ctrl_of(wqe: &[u8]) -> CtrlFields {
    let c = mlx5_wqe_ctrl_seg::read_from_prefix(wqe).map(|(c, _)| c).unwrap_or_else(|_| mlx5_wqe_ctrl_seg::new_zeroed());
    CtrlFields::from_seg(&c)
}

/// A resolved local buffer.
enum Piece<'a> {
    Mem(Region, usize, usize),
    Inline(&'a [u8]),
}

impl Piece<'_> {
    fn len(&self) -> usize {
        match self {
            Piece::Mem(_, _, l) => *l,
            Piece::Inline(d) => d.len(),
        }
    }
}

fn local_fault(f: KeyFault, lkey: u32) -> Outcome {
    err(Syndrome::LOCAL_PROT_ERR, format!("lkey {lkey:#x}: {f:?}"))
}

/// Local buffers of one WQE; most WQEs have one or two, so no allocation.
type Pieces<'a> = smallvec::SmallVec<[Piece<'a>; 4]>;

/// Resolve the local segments of `p` against the requester's PD.
fn locals<'a>(hca: &Hca, pd: crate::mr::Pd, p: &ParsedWqe<'a>, need: Access) -> Result<(Pieces<'a>, u64), Outcome> {
    let mut out = Pieces::new();
    let mut total = 0u64;
    for l in p.locals() {
        match l {
            Local::Sge(s) => {
                if s.length == 0 {
                    continue;
                }
                let (r, off) = hca.mrs.local(pd, s.lkey, s.addr, s.length.into(), need).map_err(|f| local_fault(f, s.lkey))?;
                out.push(Piece::Mem(r, off, s.length as usize));
                total += u64::from(s.length);
            }
            Local::Inline(d) => {
                if !need.is_empty() {
                    return Err(err(Syndrome::LOCAL_QP_OP_ERR, "inline data where the HCA must write"));
                }
                total += d.len() as u64;
                out.push(Piece::Inline(d));
            }
        }
    }
    if total > MAX_MSG {
        return Err(err(Syndrome::LOCAL_LENGTH_ERR, format!("message of {total} bytes exceeds 2^31")));
    }
    Ok((out, total))
}

/// Gather `pieces` into `dst` at `off`.
fn gather(pieces: &[Piece<'_>], dst: &Region, mut off: usize) {
    for p in pieces {
        match p {
            Piece::Mem(r, o, l) => {
                let _ = Region::copy(r, *o, dst, off, *l);
            }
            Piece::Inline(d) => {
                let _ = dst.write_bytes(off, d);
            }
        }
        off += p.len();
    }
}

/// Scatter `src` at `off` into `pieces`.
fn scatter(src: &Region, mut off: usize, pieces: &[Piece<'_>]) {
    for p in pieces {
        if let Piece::Mem(r, o, l) = p {
            let _ = Region::copy(src, off, r, *o, *l);
        }
        off += p.len();
    }
}

/// The peer of a requester, checked ready to receive.
fn peer_of(hca: &Hca, qpn: u32) -> Result<u32, Outcome> {
    let qp = hca.qps.get(&qpn).ok_or_else(|| err(Syndrome::LOCAL_QP_OP_ERR, "QP vanished"))?;
    let peer = qp.peer.ok_or_else(|| err(Syndrome::TRANSPORT_RETRY_EXC_ERR, "QP has no peer"))?;
    match hca.qps.get(&peer) {
        Some(p) if p.state.can_receive() => Ok(peer),
        Some(p) => Err(err(
            Syndrome::TRANSPORT_RETRY_EXC_ERR,
            format!("peer QP {peer:#x} is in {:?}: no response, retries exhausted", p.state),
        )),
        None => Err(err(Syndrome::TRANSPORT_RETRY_EXC_ERR, format!("peer QP {peer:#x} does not exist"))),
    }
}

/// A receive WQE of the peer, consumed.
struct Recv {
    index: u16,
    sges: Vec<(u64, u32, u32)>,
}

/// Take the next receive WQE of `peer`, or `None` when none is posted.
fn take_recv(hca: &mut Hca, peer: u32) -> Option<Recv> {
    let qp = hca.qps.get_mut(&peer)?;
    let head = qp.mem.dbrec.read_be32(0).ok()? as u16;
    if head == qp.rq_ci as u16 {
        return None;
    }
    let stride = qp.caps.rq_stride as usize;
    let base = (qp.rq_ci % qp.caps.rq_wqes) as usize * stride;
    let mut raw = vec![0u8; stride];
    qp.mem.rq.read_bytes(base, &mut raw).ok()?;
    let index = qp.rq_ci as u16;
    qp.rq_ci = qp.rq_ci.wrapping_add(1);
    let mut sges = Vec::new();
    for seg in raw.chunks_exact(16) {
        let bc = u32::from_be_bytes([seg[0], seg[1], seg[2], seg[3]]);
        let lkey = u32::from_be_bytes([seg[4], seg[5], seg[6], seg[7]]);
        let addr = u64::from_be_bytes(seg[8..16].try_into().unwrap_or([0; 8]));
        if lkey == MLX5_INVALID_LKEY {
            break;
        }
        sges.push((addr, bc, lkey));
    }
    if let Some(t) = &mut hca.trace {
        t.record(Kind::RECV_WQE_FETCH, peer, 0, base as u64, &raw);
    }
    Some(Recv { index, sges })
}

/// A responder-side error: error CQE on the peer's receive CQ, peer to ERR.
fn responder_error(hca: &mut Hca, peer: u32, index: u16, syndrome: Syndrome, why: &str) {
    let Some(qp) = hca.qps.get(&peer) else { return };
    let cqn = qp.recv_cq;
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
    hca.complete(cqn, peer, &c);
    hca.fail_qp(peer, format!("responder {syndrome:?}: {why}"));
}

/// Execute the WQE `wqe` fetched from `qpn`'s send queue.
pub fn execute(hca: &mut Hca, qpn: u32, wqe: &[u8]) -> Outcome {
    let Some(qp) = hca.qps.get_mut(&qpn) else { return err(Syndrome::LOCAL_QP_OP_ERR, "QP vanished") };
    if let Some((k, syndrome, vendor)) = qp.faults.fail_wqe
        && k == qp.executed
    {
        qp.faults.fail_wqe = None;
        if let Some(t) = &mut hca.trace {
            let msg = format!("injected {syndrome:?} (vendor {vendor:#04x}) on WQE #{k}");
            t.record(Kind::FAULT, qpn, 0, 0, msg.as_bytes());
        }
        return Outcome::Error { syndrome, vendor, why: "injected fault".into() };
    }
    let (pd, sq_ci) = (qp.pd, qp.sq_ci as u16);
    let view = match WqeView::new(wqe) {
        Ok(v) => v,
        Err(e) => return err(Syndrome::LOCAL_QP_OP_ERR, e.to_string()),
    };
    let ctrl = view.ctrl_fields();
    if ctrl.qpn != qpn {
        return err(Syndrome::LOCAL_QP_OP_ERR, format!("control segment names QPN {:#x}", ctrl.qpn));
    }
    if ctrl.wqe_index != sq_ci {
        return err(
            Syndrome::LOCAL_QP_OP_ERR,
            format!("wqe_index {:#06x} in the WQEBB the producer index is {sq_ci:#06x}", ctrl.wqe_index),
        );
    }
    let p = match view.parse() {
        Ok(p) => p,
        Err(e) => return err(Syndrome::LOCAL_QP_OP_ERR, e.to_string()),
    };
    let result = match ctrl.opcode {
        WqeOpcode::NOP => Ok(Outcome::Done { byte_cnt: 0 }),
        WqeOpcode::RDMA_WRITE | WqeOpcode::RDMA_WRITE_IMM => rdma_write(hca, qpn, pd, &p),
        WqeOpcode::SEND | WqeOpcode::SEND_IMM => send(hca, qpn, pd, &p),
        WqeOpcode::RDMA_READ => rdma_read(hca, qpn, pd, &p),
        _ => atomic(hca, qpn, pd, &p),
    };
    result.unwrap_or_else(|o| o)
}

fn remote_fault(f: KeyFault, rkey: u32) -> Outcome {
    err(Syndrome::REMOTE_ACCESS_ERR, format!("rkey {rkey:#x}: {f:?}"))
}

fn rdma_write(hca: &mut Hca, qpn: u32, pd: crate::mr::Pd, p: &ParsedWqe<'_>) -> Result<Outcome, Outcome> {
    let (pieces, total) = locals(hca, pd, p, Access::empty())?;
    let peer = peer_of(hca, qpn)?;
    let imm = p.ctrl.opcode == WqeOpcode::RDMA_WRITE_IMM;
    let remote = p.remote.unwrap_or_default();
    let ppd = hca.qps[&peer].pd;
    let target = hca.mrs.remote(ppd, remote.rkey, remote.raddr, total, Access::REMOTE_WRITE);
    let recv = if imm {
        match take_recv(hca, peer) {
            Some(r) => Some(r),
            None => return Ok(Outcome::Rnr),
        }
    } else {
        None
    };
    let (r, off) = match target {
        Ok(t) => t,
        Err(f) => {
            if let Some(rv) = &recv {
                responder_error(hca, peer, rv.index, Syndrome::LOCAL_ACCESS_ERR, "RDMA_WRITE_IMM target");
            }
            return Err(remote_fault(f, remote.rkey));
        }
    };
    if total > 0 {
        gather(&pieces, &r, off);
    }
    if let Some(rv) = recv {
        let cqn = hca.qps[&peer].recv_cq;
        let c = Completion::Responder {
            opcode: CqeOpcode::RESP_WR_IMM,
            qpn: peer,
            wqe_counter: rv.index,
            byte_cnt: total as u32,
            imm: Some(p.ctrl.imm),
        };
        hca.complete(cqn, peer, &c);
    }
    Ok(Outcome::Done { byte_cnt: total as u32 })
}

fn send(hca: &mut Hca, qpn: u32, pd: crate::mr::Pd, p: &ParsedWqe<'_>) -> Result<Outcome, Outcome> {
    let (pieces, total) = locals(hca, pd, p, Access::empty())?;
    let peer = peer_of(hca, qpn)?;
    let Some(rv) = take_recv(hca, peer) else { return Ok(Outcome::Rnr) };
    let ppd = hca.qps[&peer].pd;
    // Resolve the receive buffers; a bad key is the responder's error.
    let mut dst = Vec::new();
    let mut room = 0u64;
    for &(addr, len, lkey) in &rv.sges {
        if len == 0 {
            continue;
        }
        match hca.mrs.local(ppd, lkey, addr, len.into(), Access::LOCAL_WRITE) {
            Ok((r, off)) => dst.push((r, off, len as usize)),
            Err(f) => {
                responder_error(hca, peer, rv.index, Syndrome::LOCAL_PROT_ERR, &format!("lkey {lkey:#x}: {f:?}"));
                return Err(err(Syndrome::REMOTE_OP_ERR, format!("responder QP {peer:#x}: receive lkey {lkey:#x} {f:?}")));
            }
        }
        room += u64::from(len);
    }
    if total > room {
        responder_error(hca, peer, rv.index, Syndrome::LOCAL_LENGTH_ERR, "receive buffer too short");
        return Err(err(
            Syndrome::REMOTE_INVAL_REQ_ERR,
            format!("SEND of {total} bytes, receive WQE {} holds {room}", rv.index),
        ));
    }
    // Copy piece by piece into the scatter list.
    let mut di = 0;
    let mut doff = 0usize;
    for piece in &pieces {
        let mut left = piece.len();
        let mut soff = 0usize;
        while left > 0 && di < dst.len() {
            let (r, o, l) = dst[di];
            let n = left.min(l - doff);
            match piece {
                Piece::Mem(sr, so, _) => {
                    let _ = Region::copy(sr, so + soff, &r, o + doff, n);
                }
                Piece::Inline(d) => {
                    let _ = r.write_bytes(o + doff, &d[soff..soff + n]);
                }
            }
            left -= n;
            soff += n;
            doff += n;
            if doff == l {
                di += 1;
                doff = 0;
            }
        }
    }
    let imm = p.ctrl.opcode == WqeOpcode::SEND_IMM;
    let cqn = hca.qps[&peer].recv_cq;
    let c = Completion::Responder {
        opcode: if imm { CqeOpcode::RESP_SEND_IMM } else { CqeOpcode::RESP_SEND },
        qpn: peer,
        wqe_counter: rv.index,
        byte_cnt: total as u32,
        imm: imm.then_some(p.ctrl.imm),
    };
    hca.complete(cqn, peer, &c);
    Ok(Outcome::Done { byte_cnt: total as u32 })
}

fn rdma_read(hca: &mut Hca, qpn: u32, pd: crate::mr::Pd, p: &ParsedWqe<'_>) -> Result<Outcome, Outcome> {
    let (pieces, total) = locals(hca, pd, p, Access::LOCAL_WRITE)?;
    let peer = peer_of(hca, qpn)?;
    let remote = p.remote.unwrap_or_default();
    let ppd = hca.qps[&peer].pd;
    let (r, off) =
        hca.mrs.remote(ppd, remote.rkey, remote.raddr, total, Access::REMOTE_READ).map_err(|f| remote_fault(f, remote.rkey))?;
    scatter(&r, off, &pieces);
    Ok(Outcome::Done { byte_cnt: total as u32 })
}

/// Masked fetch-and-add: add lane by lane, a carry stopping at every bit
/// set in `boundary` (the most significant bit of each field).
fn masked_add(old: u64, add: u64, boundary: u64, width: u32) -> u64 {
    let (mut out, mut carry) = (0u64, 0u64);
    for i in 0..width {
        let s = ((old >> i) & 1) + ((add >> i) & 1) + carry;
        out |= (s & 1) << i;
        carry = if (boundary >> i) & 1 == 1 { 0 } else { s >> 1 };
    }
    out
}

fn atomic(hca: &mut Hca, qpn: u32, pd: crate::mr::Pd, p: &ParsedWqe<'_>) -> Result<Outcome, Outcome> {
    let Some(args) = p.atomic else { return Err(err(Syndrome::LOCAL_QP_OP_ERR, "atomic without operands")) };
    let width = args.width();
    let local = match p.locals().next() {
        Some(Local::Sge(s)) => s,
        _ => return Err(err(Syndrome::LOCAL_QP_OP_ERR, "atomic without a local data segment")),
    };
    if local.length != width {
        return Err(err(Syndrome::LOCAL_LENGTH_ERR, format!("atomic local buffer of {} bytes, operand is {width}", local.length)));
    }
    let (lr, loff) =
        hca.mrs.local(pd, local.lkey, local.addr, width.into(), Access::LOCAL_WRITE).map_err(|f| local_fault(f, local.lkey))?;
    let peer = peer_of(hca, qpn)?;
    let remote = p.remote.unwrap_or_default();
    if !remote.raddr.is_multiple_of(u64::from(width)) {
        return Err(err(Syndrome::REMOTE_INVAL_REQ_ERR, format!("atomic at {:#x} is not {width}-byte aligned", remote.raddr)));
    }
    let ppd = hca.qps[&peer].pd;
    let (rr, roff) = hca
        .mrs
        .remote(ppd, remote.rkey, remote.raddr, width.into(), Access::REMOTE_ATOMIC)
        .map_err(|f| remote_fault(f, remote.rkey))?;
    let misaligned = || err(Syndrome::REMOTE_INVAL_REQ_ERR, "atomic target misaligned in memory");
    let old: u64 = if width == 8 {
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
        match a.fetch_update(Ordering::AcqRel, Ordering::Acquire, f) {
            Ok(v) | Err(v) => v,
        }
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
        match a.fetch_update(Ordering::AcqRel, Ordering::Acquire, f) {
            Ok(v) | Err(v) => v.into(),
        }
    };
    // The old value lands in the local buffer, in host order like the target.
    let (b8, b4) = (old.to_ne_bytes(), (old as u32).to_ne_bytes());
    let _ = lr.write_bytes(loff, if width == 8 { &b8[..] } else { &b4[..] });
    Ok(Outcome::Done { byte_cnt: width })
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
