//! A link between two softnic instances, usually in two processes: the
//! model's stand-in for the wire. A requester whose peer QP lives behind a
//! link sends the request (with the payload of a WRITE or SEND), keeps the
//! WQE outstanding, and completes it when the responder's ACK (with the
//! bytes of a READ or the old value of an atomic) or NAK comes back
//! (InfiniBand Architecture Specification vol. 1 §9.7: one outstanding
//! request per QP here, responses in order).
//!
//! Frames on the socket: `json_len:u32le json data_len:u32le data`, the
//! JSON being a [`LinkMsg`]. A writer thread owns the socket's sending side,
//! so nothing blocks on the socket while the model's lock is held.

use crate::exec::Outcome;
use crate::hca::Hca;
use crate::mr::Loc;
use crate::respond::{self, Nak, Src};
use marrow_mlx5::wqe::RemoteAddr;
use marrow_mlx5::wqe_decode::AtomicArgs;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::sync::mpsc::Sender;

/// A request's operation.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum ReqOp {
    /// RDMA_WRITE(_IMM); the payload is the frame's data.
    Write {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate (RDMA_WRITE_IMM).
        imm: Option<u32>,
    },
    /// SEND(_IMM); the payload is the frame's data.
    Send {
        /// Immediate (SEND_IMM).
        imm: Option<u32>,
    },
    /// RDMA_READ of `len` bytes.
    Read {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Bytes.
        len: u64,
    },
    /// An atomic: `kind` 0 CS, 1 FA, 2 masked CS32, 3 masked FA32, 4 masked CS64, 5 masked FA64.
    Atomic {
        /// Remote address.
        raddr: u64,
        /// Remote key.
        rkey: u32,
        /// Which atomic.
        kind: u8,
        /// Operands, in the order of [`AtomicArgs`]' fields.
        v: [u64; 4],
    },
}

/// A message on a link.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum LinkMsg {
    /// A request from `src_qpn` to `dst_qpn`.
    Req {
        /// Request id, echoed in the response.
        id: u64,
        /// Requester QP.
        src_qpn: u32,
        /// Responder QP.
        dst_qpn: u32,
        /// What to do.
        op: ReqOp,
    },
    /// The response to request `id` of `dst_qpn` (the requester). On success
    /// the frame's data is the READ's bytes or the atomic's old value (u64le).
    Resp {
        /// Request id.
        id: u64,
        /// Requester QP.
        dst_qpn: u32,
        /// ACK or NAK.
        result: Result<(), Nak>,
    },
}

/// Where a response's bytes go on the requester.
#[derive(Debug)]
pub enum Sink {
    /// Nothing comes back (WRITE, SEND).
    None,
    /// A READ's bytes, scattered over these (where, length).
    Read(Vec<(Loc, usize)>),
    /// An atomic's old value.
    Atomic {
        /// Where it goes.
        at: Loc,
        /// Operand width.
        width: u32,
    },
}

/// The wire form of an atomic.
pub fn atomic_op(remote: RemoteAddr, args: AtomicArgs) -> ReqOp {
    let (kind, v) = match args {
        AtomicArgs::Cs { compare, swap } => (0, [compare, swap, 0, 0]),
        AtomicArgs::Fa { add } => (1, [add, 0, 0, 0]),
        AtomicArgs::MaskedCs32 { swap, compare, swap_mask, compare_mask } => {
            (2, [swap.into(), compare.into(), swap_mask.into(), compare_mask.into()])
        }
        AtomicArgs::MaskedFa32 { add, field_boundary } => (3, [add.into(), field_boundary.into(), 0, 0]),
        AtomicArgs::MaskedCs64 { swap, compare, swap_mask, compare_mask } => {
            (4, [swap, compare, swap_mask, compare_mask])
        }
        AtomicArgs::MaskedFa64 { add, field_boundary } => (5, [add, field_boundary, 0, 0]),
    };
    ReqOp::Atomic { raddr: remote.raddr, rkey: remote.rkey, kind, v }
}

fn atomic_args(kind: u8, v: [u64; 4]) -> Option<AtomicArgs> {
    Some(match kind {
        0 => AtomicArgs::Cs { compare: v[0], swap: v[1] },
        1 => AtomicArgs::Fa { add: v[0] },
        2 => AtomicArgs::MaskedCs32 {
            swap: v[0] as u32,
            compare: v[1] as u32,
            swap_mask: v[2] as u32,
            compare_mask: v[3] as u32,
        },
        3 => AtomicArgs::MaskedFa32 { add: v[0] as u32, field_boundary: v[1] as u32 },
        4 => AtomicArgs::MaskedCs64 { swap: v[0], compare: v[1], swap_mask: v[2], compare_mask: v[3] },
        5 => AtomicArgs::MaskedFa64 { add: v[0], field_boundary: v[1] },
        _ => return None,
    })
}

/// Encode a frame.
pub fn frame(msg: &LinkMsg, data: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(msg).unwrap_or_default();
    let mut f = Vec::with_capacity(8 + json.len() + data.len());
    f.extend_from_slice(&(json.len() as u32).to_le_bytes());
    f.extend_from_slice(&json);
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    f.extend_from_slice(data);
    f
}

/// Read one frame; `Ok(None)` at end of stream.
pub fn read_frame(r: &mut impl Read) -> std::io::Result<Option<(LinkMsg, Vec<u8>)>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let jl = u32::from_le_bytes(len) as usize;
    if jl > 1 << 16 {
        return Err(std::io::Error::other(format!("link frame header of {jl} bytes")));
    }
    let mut json = vec![0u8; jl];
    r.read_exact(&mut json)?;
    r.read_exact(&mut len)?;
    let dl = u32::from_le_bytes(len) as usize;
    if dl > 1 << 31 {
        return Err(std::io::Error::other(format!("link frame payload of {dl} bytes")));
    }
    let mut data = vec![0u8; dl];
    r.read_exact(&mut data)?;
    let msg = serde_json::from_slice(&json).map_err(std::io::Error::other)?;
    Ok(Some((msg, data)))
}

/// Write frames handed over by the model until the channel closes.
pub fn writer(mut w: impl Write, rx: std::sync::mpsc::Receiver<Vec<u8>>) {
    for f in rx {
        if w.write_all(&f).is_err() {
            break;
        }
    }
}

/// Send a request for `src_qpn` over `link`; the WQE stays outstanding.
#[allow(clippy::too_many_arguments)]
pub fn request(
    hca: &mut Hca,
    link: u32,
    src_qpn: u32,
    dst_qpn: u32,
    op: ReqOp,
    data: Vec<u8>,
    sink: Sink,
    byte_cnt: u32,
) -> Outcome {
    let id = hca.next_request_id();
    let f = frame(&LinkMsg::Req { id, src_qpn, dst_qpn, op }, &data);
    match hca.link_sender(link) {
        Some(tx) if tx.send(f).is_ok() => Outcome::Pending { id, sink, byte_cnt },
        _ => Outcome::Error {
            syndrome: marrow_mlx5::raw::Syndrome::TRANSPORT_RETRY_EXC_ERR,
            vendor: 0,
            why: format!("link {link} to QP {dst_qpn:#x} is down"),
        },
    }
}

/// The responder side of a request that came over `link`: the response frame.
pub fn respond(hca: &mut Hca, link: u32, id: u64, src_qpn: u32, dst_qpn: u32, op: ReqOp, data: &[u8]) -> Vec<u8> {
    // The responder QP must be connected to this requester through this link.
    let connected = hca.qps.get(&dst_qpn).is_some_and(|q| q.peer == Some(src_qpn) && q.peer_link == Some(link));
    let mut out = Vec::new();
    let result = if !connected {
        Err(Nak::NoResponse(format!("QP {dst_qpn:#x} is not connected to QP {src_qpn:#x} on link {link}")))
    } else {
        match op {
            ReqOp::Write { raddr, rkey, imm } => {
                respond::write(hca, dst_qpn, RemoteAddr { raddr, rkey }, Src::Bytes(data), imm)
            }
            ReqOp::Send { imm } => respond::send(hca, dst_qpn, Src::Bytes(data), imm),
            ReqOp::Read { raddr, rkey, len } => {
                respond::read(hca, dst_qpn, RemoteAddr { raddr, rkey }, len).map(|src| {
                    out.resize(len as usize, 0);
                    let _ = src.read(0, &mut out);
                })
            }
            ReqOp::Atomic { raddr, rkey, kind, v } => match atomic_args(kind, v) {
                Some(args) => respond::atomic(hca, dst_qpn, RemoteAddr { raddr, rkey }, args).map(|old| {
                    out.extend_from_slice(&old.to_le_bytes());
                }),
                None => Err(Nak::InvalReq(format!("unknown atomic kind {kind}"))),
            },
        }
    };
    frame(&LinkMsg::Resp { id, dst_qpn: src_qpn, result }, &out)
}

/// Deliver a response's bytes into the requester's buffers.
pub fn deliver(sink: &Sink, data: &[u8]) {
    match sink {
        Sink::None => {}
        Sink::Read(dst) => {
            let mut at = 0;
            for (loc, len) in dst {
                if at + len > data.len() {
                    break;
                }
                let _ = loc.write(0, &data[at..at + len]);
                at += len;
            }
        }
        Sink::Atomic { at, width } => {
            let old = u64::from_le_bytes(data.get(..8).and_then(|b| b.try_into().ok()).unwrap_or([0; 8]));
            crate::exec::write_old(at, *width, old);
        }
    }
}

/// The model's senders, one per link.
pub type Senders = Vec<Option<Sender<Vec<u8>>>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let msg = LinkMsg::Req { id: 7, src_qpn: 0x100, dst_qpn: 0x101, op: ReqOp::Send { imm: Some(3) } };
        let f = frame(&msg, b"payload");
        let (m, d) = read_frame(&mut &f[..]).unwrap().unwrap();
        assert_eq!((m, d), (msg, b"payload".to_vec()));
        assert!(read_frame(&mut &f[..5]).is_err() || read_frame(&mut &f[..5]).unwrap().is_none());
        assert!(read_frame(&mut &[][..]).unwrap().is_none());
    }

    #[test]
    fn atomics_survive_the_wire() {
        let r = RemoteAddr { raddr: 8, rkey: 1 };
        for a in [
            AtomicArgs::Cs { compare: 1, swap: 2 },
            AtomicArgs::Fa { add: 3 },
            AtomicArgs::MaskedCs32 { swap: 1, compare: 2, swap_mask: 3, compare_mask: 4 },
            AtomicArgs::MaskedFa32 { add: 5, field_boundary: 6 },
            AtomicArgs::MaskedCs64 { swap: 1, compare: 2, swap_mask: 3, compare_mask: 4 },
            AtomicArgs::MaskedFa64 { add: 7, field_boundary: 8 },
        ] {
            let ReqOp::Atomic { kind, v, .. } = atomic_op(r, a) else { panic!() };
            assert_eq!(atomic_args(kind, v), Some(a));
        }
    }
}
