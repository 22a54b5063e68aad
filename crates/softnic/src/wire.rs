//! The daemon's control protocol: length-prefixed JSON messages on a Unix
//! stream socket, shared-memory file descriptors passed alongside with
//! `SCM_RIGHTS`. Only the control path crosses the socket; the data path
//! (rings, doorbells, CQEs, registered memory) is the shared memory itself.

use crate::cq::CqMode;
use crate::fault::Faults;
use crate::qp::QpState;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// A request from a client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    /// Allocate a protection domain.
    AllocPd,
    /// Register the memfd passed with this message: `len` bytes mapped at
    /// `addr` in the client (the address its WQEs will use).
    RegMr {
        /// Protection domain.
        pd: u32,
        /// Client virtual address.
        addr: u64,
        /// Length.
        len: usize,
        /// `Access` bits.
        access: u32,
    },
    /// Create a CQ; the reply carries its memfd.
    CreateCq {
        /// Entries.
        ncqe: u32,
        /// True for collapsed mode.
        collapsed: bool,
    },
    /// Create a QP; the reply carries the queues' and the UAR page's memfds.
    CreateQp {
        /// Protection domain.
        pd: u32,
        /// Send CQ.
        send_cq: u32,
        /// Receive CQ.
        recv_cq: u32,
        /// Send queue WQEBBs.
        sq_wqebbs: u32,
        /// Receive WQEs.
        rq_wqes: u32,
        /// Receive WQE stride.
        rq_stride: u32,
    },
    /// Modify a QP.
    ModifyQp {
        /// The QP.
        qpn: u32,
        /// Target state (`ibv_qp_state` number).
        state: u8,
        /// Destination QP for INIT→RTR.
        dest_qpn: Option<u32>,
        /// RNR retry count.
        rnr_retry: Option<u32>,
        /// RoCEv2 attributes, for a QP whose peer is across one of the
        /// daemon's wire ports (`marrow softnic --port`).
        #[serde(default)]
        wire: Option<crate::rc::WireAttrs>,
    },
    /// Query a QP's state and consumer index.
    QueryQp {
        /// The QP.
        qpn: u32,
    },
    /// Query a CQ's producer index and overflow flag.
    QueryCq {
        /// The CQ.
        cqn: u32,
    },
    /// Start recording a register trace of at most `cap` bytes.
    EnableTrace {
        /// Byte cap.
        cap: usize,
    },
    /// The trace so far; the reply carries a memfd holding it.
    Trace,
    /// Arm faults.
    SetFaults {
        /// The QP.
        qpn: u32,
        /// Doorbells to drop.
        drop_doorbells: u32,
        /// Fail WQE k: (k, syndrome, vendor).
        fail_wqe: Option<(u64, u8, u8)>,
        /// Stall the QP.
        stall: bool,
        /// Overflow the send CQ.
        overflow_cq: bool,
    },
}

/// A reply.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Reply {
    /// A PD.
    Pd(u32),
    /// A memory registration.
    Mr {
        /// Local key.
        lkey: u32,
        /// Remote key.
        rkey: u32,
    },
    /// A CQ: number, entries, bytes of the ring and offset of the doorbell record.
    Cq {
        /// CQ number.
        cqn: u32,
        /// Entries.
        ncqe: u32,
        /// Ring bytes.
        ring: usize,
        /// Doorbell record offset.
        dbrec: usize,
        /// Mapping length.
        len: usize,
    },
    /// A QP: number and offsets in its queue mapping.
    Qp {
        /// QP number.
        qpn: u32,
        /// Send queue offset and length.
        sq: (usize, usize),
        /// Receive queue offset and length.
        rq: (usize, usize),
        /// Doorbell record offset.
        dbrec: usize,
        /// Queue mapping length.
        len: usize,
    },
    /// A QP's state.
    QpState {
        /// `ibv_qp_state` number.
        state: u8,
        /// WQEBBs executed.
        sq_ci: u32,
    },
    /// A CQ's state.
    CqState {
        /// CQEs the device produced.
        pi: u32,
        /// Whether it overflowed.
        overflowed: bool,
    },
    /// A trace of `len` bytes, in the memfd passed with the reply.
    Trace {
        /// Bytes.
        len: usize,
    },
    /// Done.
    Ok,
    /// Refused, and why.
    Error(String),
}

impl Request {
    /// Faults from a `SetFaults` request.
    pub fn faults(&self) -> Option<Faults> {
        match *self {
            Request::SetFaults { drop_doorbells, fail_wqe, stall, overflow_cq, .. } => Some(Faults {
                drop_doorbells,
                fail_wqe: fail_wqe.map(|(k, s, v)| (k, marrow_mlx5::raw::Syndrome(s), v)),
                stall,
                overflow_cq,
                delay_doorbell: None,
            }),
            _ => None,
        }
    }
}

/// The mode a `CreateCq` asks for.
pub fn cq_mode(collapsed: bool) -> CqMode {
    if collapsed { CqMode::Collapsed } else { CqMode::Normal }
}

/// A state number, checked.
pub fn qp_state(n: u8) -> Result<QpState, String> {
    QpState::from_u8(n).ok_or_else(|| format!("no QP state {n}"))
}

const MAX_MSG: usize = 1 << 20;

/// Send one message with optional file descriptors.
pub fn send<T: Serialize>(s: &UnixStream, msg: &T, fds: &[RawFd]) -> std::io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    let mut buf = (body.len() as u32).to_le_bytes().to_vec();
    buf.extend_from_slice(&body);
    let mut sent = 0;
    let cmsg = [ControlMessage::ScmRights(fds)];
    while sent < buf.len() {
        let iov = [IoSlice::new(&buf[sent..])];
        let c: &[ControlMessage<'_>] = if sent == 0 && !fds.is_empty() { &cmsg } else { &[] };
        sent += sendmsg::<()>(s.as_raw_fd(), &iov, c, MsgFlags::empty(), None).map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// Receive one message and the descriptors that came with it. `Ok(None)` at end of stream.
pub fn recv<T: for<'de> Deserialize<'de>>(s: &UnixStream) -> std::io::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut len = [0u8; 4];
    let mut fds = Vec::new();
    let n = {
        let mut iov = [IoSliceMut::new(&mut len)];
        let mut space = nix::cmsg_space!([RawFd; 4]);
        let msg = recvmsg::<()>(s.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)
            .map_err(std::io::Error::from)?;
        for c in msg.cmsgs().map_err(std::io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = c {
                // SAFETY: the kernel just installed these descriptors in
                // this process for us; nothing else owns them.
                fds.extend(raw.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
            }
        }
        msg.bytes
    };
    if n == 0 {
        return Ok(None);
    }
    let mut r = s;
    if n < 4 {
        r.read_exact(&mut len[n..])?;
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_MSG {
        return Err(std::io::Error::other(format!("message of {len} bytes exceeds {MAX_MSG}")));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    let msg = serde_json::from_slice(&body).map_err(std::io::Error::other)?;
    Ok(Some((msg, fds)))
}
