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
//!
//! This is the requester half; the responder half is [`crate::respond`],
//! called directly for a peer in the same model, or the RC transport
//! ([`crate::rc`]) for a peer across a RoCEv2 wire. Both see the HCA only
//! through a trait of what they need ([`Initiator`], `respond::Target`):
//! the HCA calls them, they never reach into it.

use crate::mr::{Access, KeyFault, Loc, Piece};
use crate::rc::requester::Message;
use crate::respond::{self, Nak, Src};
use marrow_mlx5::raw::{Syndrome, WqeOpcode, mlx5_wqe_ctrl_seg};
use marrow_mlx5::wqe_decode::{AtomicArgs, CtrlFields, Local, ParsedWqe, WqeView};
use marrow_mmio::Region;
use zerocopy::{FromBytes, FromZeros};

/// Largest message (IBA: 2^31 bytes).
const MAX_MSG: u64 = 1 << 31;

/// What became of one WQE.
#[derive(Debug)]
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
    /// On the wire: the requester completes it when the peer answers.
    Sent,
    /// The wire QP has as much outstanding as it may: try again later.
    Busy,
}

fn err(syndrome: Syndrome, why: impl Into<String>) -> Outcome {
    Outcome::Error { syndrome, vendor: 0, why: why.into() }
}

fn nak(n: Nak) -> Outcome {
    match n.syndrome() {
        Some((s, why)) => err(s, why),
        None => Outcome::Rnr,
    }
}

/// The control fields of a fetched WQE (zeros where bytes are missing).
pub fn ctrl_of(wqe: &[u8]) -> CtrlFields {
    let c =
        mlx5_wqe_ctrl_seg::read_from_prefix(wqe).map(|(c, _)| c).unwrap_or_else(|_| mlx5_wqe_ctrl_seg::new_zeroed());
    CtrlFields::from_seg(&c)
}

fn local_fault(f: KeyFault, lkey: u32) -> Outcome {
    err(Syndrome::LOCAL_PROT_ERR, format!("lkey {lkey:#x}: {f:?}"))
}

/// Local buffers of one WQE; most WQEs have one or two, so no allocation.
type Pieces<'a> = smallvec::SmallVec<[Piece<'a>; 4]>;

/// Resolve the local segments of `p` against the requester's PD into `out`
/// (a caller's buffer: returning it would move a few hundred bytes per WQE).
fn locals<'a>(
    hca: &impl Initiator,
    pd: crate::mr::Pd,
    p: &ParsedWqe<'a>,
    need: Access,
    out: &mut Pieces<'a>,
) -> Result<u64, Outcome> {
    let mut total = 0u64;
    for l in p.locals() {
        match l {
            Local::Sge(s) => {
                if s.length == 0 {
                    continue;
                }
                match hca.mrs().local(pd, s.lkey, s.addr, s.length.into(), need).map_err(|f| local_fault(f, s.lkey))? {
                    Loc::Host(r, off) => out.push(Piece::Mem(r, off, s.length as usize)),
                    dev => out.push(Piece::Dev(dev, s.length as usize)),
                }
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
    Ok(total)
}

/// The bytes of `pieces`, gathered into `v` (for the wire, or device memory).
pub(crate) fn gather_into(pieces: &[Piece<'_>], mut v: Vec<u8>) -> Result<Vec<u8>, Outcome> {
    v.clear();
    v.resize(pieces.iter().map(Piece::len).sum(), 0);
    let mut at = 0;
    for p in pieces {
        p.read(0, &mut v[at..at + p.len()]).map_err(|e| err(Syndrome::LOCAL_PROT_ERR, format!("local read: {e}")))?;
        at += p.len();
    }
    Ok(v)
}

/// Scatter the bytes at `src` into `pieces`.
fn scatter(src: &Loc, pieces: &[Piece<'_>]) -> Result<(), String> {
    let mut off = 0;
    for p in pieces {
        match (src, p) {
            (Loc::Host(sr, so), Piece::Mem(r, o, l)) => {
                Region::copy(sr, so + off, r, *o, *l).map_err(|e| e.to_string())?;
            }
            _ => {
                // Device memory on either side: stage through the host.
                let mut buf = vec![0u8; p.len()];
                src.read(off, &mut buf)?;
                p.write(0, &buf)?;
            }
        }
        off += p.len();
    }
    Ok(())
}

/// Execute the WQE `wqe` fetched from `qpn`'s send queue; `ctrl` is its
/// control segment decoded ([`ctrl_of`]).
pub fn execute(hca: &mut impl Initiator, qpn: u32, wqe: &[u8], ctrl: &CtrlFields) -> Outcome {
    let Prepared { pd, sq_ci, peer, wire } = match hca.prepare(qpn) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let view = match WqeView::new(wqe) {
        Ok(v) => v,
        Err(e) => return err(Syndrome::LOCAL_QP_OP_ERR, e.to_string()),
    };
    if ctrl.qpn != qpn {
        return err(Syndrome::LOCAL_QP_OP_ERR, format!("control segment names QPN {:#x}", ctrl.qpn));
    }
    if ctrl.wqe_index != sq_ci {
        return err(
            Syndrome::LOCAL_QP_OP_ERR,
            format!("wqe_index {:#06x} in the WQEBB the producer index is {sq_ci:#06x}", ctrl.wqe_index),
        );
    }
    // Borrowed where it lies: moved out of its `Result`, the parsed WQE was
    // copied with loads the store buffer could not forward.
    let parsed = view.parse_with(*ctrl);
    let p = match &parsed {
        Ok(p) => p,
        Err(e) => return err(Syndrome::LOCAL_QP_OP_ERR, e.to_string()),
    };
    if ctrl.opcode == WqeOpcode::NOP {
        return Outcome::Done { byte_cnt: 0 };
    }
    let Some(peer) = peer else { return err(Syndrome::TRANSPORT_RETRY_EXC_ERR, "QP has no peer") };
    if !wire && !hca.connected(peer, qpn) {
        // An RC responder drops a request from a QP it is not connected
        // to; no ACK ever comes, so the requester's retries run out.
        return err(
            Syndrome::TRANSPORT_RETRY_EXC_ERR,
            format!("peer QP {peer:#x} is not connected to QP {qpn:#x}: it drops the request, no response"),
        );
    }
    let to = Peer { peer, wire };
    let result = match ctrl.opcode {
        WqeOpcode::RDMA_WRITE | WqeOpcode::RDMA_WRITE_IMM => rdma_write(hca, qpn, pd, p, to),
        WqeOpcode::SEND | WqeOpcode::SEND_IMM => send(hca, qpn, pd, p, to),
        WqeOpcode::RDMA_READ => rdma_read(hca, qpn, pd, p, to),
        _ => atomic(hca, qpn, pd, p, to),
    };
    result.unwrap_or_else(|o| o)
}

/// Where the responder is: a QP of this model, or one across a wire.
#[derive(Clone, Copy)]
struct Peer {
    peer: u32,
    wire: bool,
}

/// What the requester half needs of the HCA that owns the QP: the QP as
/// the WQE finds it, the wire for a peer across one, and the responder's
/// view ([`respond::Target`]) it hands to a peer in the same model. `Hca`
/// provides it (`crate::hca`); this module does not know the rest of it.
pub trait Initiator: respond::Target {
    /// The QP's PD, send-queue position and peer, for the next WQE; an
    /// injected failure of this WQE instead, consumed and traced.
    fn prepare(&mut self, qpn: u32) -> Result<Prepared, Outcome>;
    /// Hand `msg` to the QP's requester on the wire.
    fn wire_post(&mut self, qpn: u32, msg: Message, ctrl: CtrlFields, byte_cnt: u32) -> Outcome;
    /// A buffer for the next message of the wire QP to gather `len` bytes into.
    fn wire_buffer(&mut self, qpn: u32, len: usize) -> Vec<u8>;
}

/// A QP as the next WQE finds it.
#[derive(Clone, Copy, Debug)]
pub struct Prepared {
    /// Its PD.
    pub pd: crate::mr::Pd,
    /// The WQEBB the WQE must start at.
    pub sq_ci: u16,
    /// The connected QP, if any.
    pub peer: Option<u32>,
    /// Whether the peer is across a wire.
    pub wire: bool,
}

fn rdma_write(
    hca: &mut impl Initiator,
    qpn: u32,
    pd: crate::mr::Pd,
    p: &ParsedWqe<'_>,
    to: Peer,
) -> Result<Outcome, Outcome> {
    let mut pieces = Pieces::new();
    let total = locals(hca, pd, p, Access::empty(), &mut pieces)?;
    let remote = p.remote.unwrap_or_default();
    let imm = (p.ctrl.opcode == WqeOpcode::RDMA_WRITE_IMM).then_some(p.ctrl.imm);
    if to.wire {
        let msg = Message::Write { remote, imm, data: gather_into(&pieces, hca.wire_buffer(qpn, total as usize))? };
        return Ok(hca.wire_post(qpn, msg, p.ctrl, total as u32));
    }
    respond::write(hca, to.peer, remote, Src::Pieces(&pieces), imm).map_err(nak)?;
    Ok(Outcome::Done { byte_cnt: total as u32 })
}

fn send(
    hca: &mut impl Initiator,
    qpn: u32,
    pd: crate::mr::Pd,
    p: &ParsedWqe<'_>,
    to: Peer,
) -> Result<Outcome, Outcome> {
    let mut pieces = Pieces::new();
    let total = locals(hca, pd, p, Access::empty(), &mut pieces)?;
    let imm = (p.ctrl.opcode == WqeOpcode::SEND_IMM).then_some(p.ctrl.imm);
    if to.wire {
        let msg = Message::Send { imm, data: gather_into(&pieces, hca.wire_buffer(qpn, total as usize))? };
        return Ok(hca.wire_post(qpn, msg, p.ctrl, total as u32));
    }
    respond::send(hca, to.peer, Src::Pieces(&pieces), imm).map_err(nak)?;
    Ok(Outcome::Done { byte_cnt: total as u32 })
}

fn rdma_read(
    hca: &mut impl Initiator,
    qpn: u32,
    pd: crate::mr::Pd,
    p: &ParsedWqe<'_>,
    to: Peer,
) -> Result<Outcome, Outcome> {
    let mut pieces = Pieces::new();
    let total = locals(hca, pd, p, Access::LOCAL_WRITE, &mut pieces)?;
    let remote = p.remote.unwrap_or_default();
    if to.wire {
        let sink = pieces.iter().filter_map(|p| match p {
            Piece::Mem(r, o, l) => Some((Loc::Host(*r, *o), *l)),
            Piece::Dev(loc, l) => Some((loc.clone(), *l)),
            Piece::Inline(_) => None,
        });
        let msg = Message::Read { remote, len: total as u32, sink: sink.collect() };
        return Ok(hca.wire_post(qpn, msg, p.ctrl, total as u32));
    }
    let src = respond::read(hca, to.peer, remote, total).map_err(nak)?;
    scatter(&src, &pieces).map_err(|e| err(Syndrome::LOCAL_PROT_ERR, format!("RDMA_READ into local memory: {e}")))?;
    Ok(Outcome::Done { byte_cnt: total as u32 })
}

fn atomic(
    hca: &mut impl Initiator,
    qpn: u32,
    pd: crate::mr::Pd,
    p: &ParsedWqe<'_>,
    to: Peer,
) -> Result<Outcome, Outcome> {
    let Some(args) = p.atomic else { return Err(err(Syndrome::LOCAL_QP_OP_ERR, "atomic without operands")) };
    let width = args.width();
    let local = match p.locals().next() {
        Some(Local::Sge(s)) => s,
        _ => return Err(err(Syndrome::LOCAL_QP_OP_ERR, "atomic without a local data segment")),
    };
    if local.length != width {
        return Err(err(
            Syndrome::LOCAL_LENGTH_ERR,
            format!("atomic local buffer of {} bytes, operand is {width}", local.length),
        ));
    }
    let result = hca
        .mrs()
        .local(pd, local.lkey, local.addr, width.into(), Access::LOCAL_WRITE)
        .map_err(|f| local_fault(f, local.lkey))?;
    let remote = p.remote.unwrap_or_default();
    if to.wire {
        if !matches!(args, AtomicArgs::Cs { .. } | AtomicArgs::Fa { .. }) {
            let why = "masked atomics have no RoCEv2 wire form: IBA defines only COMPARE_SWAP and FETCH_ADD";
            return Err(err(Syndrome::LOCAL_QP_OP_ERR, why));
        }
        let msg = Message::Atomic { remote, args, result };
        return Ok(hca.wire_post(qpn, msg, p.ctrl, width));
    }
    let old = respond::atomic(hca, to.peer, remote, args).map_err(nak)?;
    // The old value lands in the local buffer, in host order like the target.
    let (b8, b4) = (old.to_ne_bytes(), (old as u32).to_ne_bytes());
    result
        .write(0, if width == 8 { &b8[..] } else { &b4[..] })
        .map_err(|e| err(Syndrome::LOCAL_PROT_ERR, format!("atomic result into local memory: {e}")))?;
    Ok(Outcome::Done { byte_cnt: width })
}
