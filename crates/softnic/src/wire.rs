//! The daemon's control protocol: length-prefixed JSON messages on a Unix
//! stream socket, shared-memory file descriptors passed alongside with
//! `SCM_RIGHTS`. Only the control path crosses the socket; the data path
//! (rings, doorbells, CQEs, registered memory) is the shared memory itself.
//! `docs/SOFTNIC_PROTOCOL.md` describes every message, the handshake, the
//! limits and the errors.

use crate::cq::CqMode;
use crate::fault::Faults;
use crate::qp::QpState;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

/// The protocol version this build speaks; a client's [`Request::Hello`]
/// must name it.
pub const PROTOCOL_VERSION: u32 = 2;

/// A request from a client.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    /// The first request of every connection: the version the client speaks.
    Hello {
        /// [`PROTOCOL_VERSION`] of the client's build.
        version: u32,
    },
    /// Allocate a protection domain.
    AllocPd,
    /// Free a protection domain; refused while an MR or QP is in it.
    DeallocPd {
        /// The PD.
        pd: u32,
    },
    /// Deregister a memory region (by its lkey); the daemon unmaps the memfd.
    DeregMr {
        /// Its lkey.
        lkey: u32,
    },
    /// Destroy a CQ; refused while a QP uses it.
    DestroyCq {
        /// The CQ.
        cqn: u32,
    },
    /// Destroy a QP, in any state.
    DestroyQp {
        /// The QP.
        qpn: u32,
    },
    /// The asynchronous events of the client's objects since the last call
    /// (QP fatal errors, CQ overflows).
    TakeEvents,
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
    /// The handshake's answer: the daemon's version and the limits each
    /// client has.
    Hello {
        /// [`PROTOCOL_VERSION`] of the daemon's build.
        version: u32,
        /// What one client may hold.
        limits: Limits,
    },
    /// Events, each described for a person.
    Events(Vec<String>),
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

/// What one client may hold at once; a request beyond any of them is
/// refused with an [`Reply::Error`] that names the limit.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Limits {
    /// PDs, MRs, CQs and QPs together.
    pub objects: u32,
    /// Bytes of client memory registered (the daemon maps each MR's bytes).
    pub mapped_bytes: u64,
    /// CQ entries, summed over the client's CQs (64 bytes each).
    pub cq_entries: u64,
    /// Send queue WQEBBs and receive queue WQEs, summed over its QPs.
    pub qp_entries: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { objects: 4096, mapped_bytes: 64 << 30, cq_entries: 1 << 22, qp_entries: 1 << 21 }
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

/// The largest message either side accepts: far above any request's JSON
/// (a few hundred bytes), so a length beyond it is a peer out of protocol,
/// and refused before anything is allocated for it.
pub const MAX_MSG: usize = 64 << 10;

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
        let e = format!("a message of {len} bytes: more than the protocol's {MAX_MSG}");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    let msg = serde_json::from_slice(&body).map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not a message of the protocol: {e}"))
    })?;
    Ok(Some((msg, fds)))
}

/// How many whole messages `bytes` holds, back to back, each a `T`; the
/// first byte that is not one is an error naming its offset.
pub fn count_frames<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<usize, String> {
    let (mut at, mut n) = (0, 0);
    while at < bytes.len() {
        match parse_frame::<T>(&bytes[at..]) {
            Ok(Some((_, used))) => (at, n) = (at + used, n + 1),
            Ok(None) => return Err(format!("a message cut short at byte {at}")),
            Err(e) => return Err(format!("byte {at}: {e}")),
        }
    }
    Ok(n)
}

/// A message's bytes as [`send`] frames them (for tests and fuzzing).
pub fn frame<T: Serialize>(msg: &T) -> Vec<u8> {
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut buf = (body.len() as u32).to_le_bytes().to_vec();
    buf.extend_from_slice(&body);
    buf
}

/// Parse one framed message from `bytes` as [`recv`] would (no descriptors):
/// the message and the bytes it used, `Ok(None)` when more bytes are needed.
pub fn parse_frame<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<Option<(T, usize)>, String> {
    let Some(len) = bytes.get(..4) else { return Ok(None) };
    let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
    if len > MAX_MSG {
        return Err(format!("a message of {len} bytes: more than the protocol's {MAX_MSG}"));
    }
    let Some(body) = bytes.get(4..4 + len) else { return Ok(None) };
    let msg = serde_json::from_slice(body).map_err(|e| format!("not a message of the protocol: {e}"))?;
    Ok(Some((msg, 4 + len)))
}
