//! A client of the softnic daemon: the control path over the socket, the
//! queues and registered memory mapped from the memfds it sends back.

use crate::mr::Access;
use crate::qp::{QpCaps, QpState};
use crate::shm::Shm;
use crate::wire::{self, Limits, PROTOCOL_VERSION, Reply, Request};
use marrow_mmio::Region;
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// What went wrong talking to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed.
    #[error("softnic daemon socket: {0}")]
    Io(#[from] std::io::Error),
    /// The daemon refused.
    #[error("softnic daemon refused: {0}")]
    Refused(String),
    /// The daemon closed the connection or answered out of protocol.
    #[error("softnic daemon protocol: {0}")]
    Protocol(String),
}

/// The longest a call waits for the daemon's reply.
pub const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// A connection to the daemon.
#[derive(Debug)]
pub struct Client {
    s: UnixStream,
    limits: Limits,
}

/// A CQ created through the daemon.
#[derive(Debug)]
pub struct RemoteCq {
    /// CQ number.
    pub cqn: u32,
    /// Entries.
    pub ncqe: u32,
    /// The ring.
    pub buf: Region,
    /// The doorbell record.
    pub dbrec: Region,
    _shm: Shm,
}

impl RemoteCq {
    /// The memfd the CQ is mapped from (sealed by the daemon: it cannot be
    /// shrunk or grown).
    pub fn memfd(&self) -> std::os::fd::BorrowedFd<'_> {
        self._shm.fd()
    }
}

/// A QP created through the daemon.
#[derive(Debug)]
pub struct RemoteQp {
    /// QP number.
    pub qpn: u32,
    /// Send queue ring.
    pub sq: Region,
    /// Receive queue ring.
    pub rq: Region,
    /// Doorbell record.
    pub dbrec: Region,
    /// UAR page.
    pub uar: Region,
    _queues: Shm,
    _uar: Shm,
}

impl Client {
    /// Connect to the daemon at `path` and exchange `Hello`s.
    pub fn connect(path: &Path) -> Result<Client, ClientError> {
        let s = UnixStream::connect(path)?;
        // Every call waits for one reply: a daemon that stops answering is
        // an error after this long, not a hang.
        s.set_read_timeout(Some(REPLY_TIMEOUT))?;
        let mut c = Client { s, limits: Limits::default() };
        match c.call(&Request::Hello { version: PROTOCOL_VERSION }, &[])?.0 {
            Reply::Hello { limits, .. } => c.limits = limits,
            r => return Err(ClientError::Protocol(format!("{r:?} in answer to Hello"))),
        }
        Ok(c)
    }

    /// What the daemon lets this client hold.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Free a protection domain.
    pub fn dealloc_pd(&mut self, pd: u32) -> Result<(), ClientError> {
        self.call(&Request::DeallocPd { pd }, &[]).map(|_| ())
    }

    /// Deregister the memory region with `lkey`.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), ClientError> {
        self.call(&Request::DeregMr { lkey }, &[]).map(|_| ())
    }

    /// Destroy a CQ (its mapping here stays until the [`RemoteCq`] is dropped).
    pub fn destroy_cq(&mut self, cqn: u32) -> Result<(), ClientError> {
        self.call(&Request::DestroyCq { cqn }, &[]).map(|_| ())
    }

    /// Destroy a QP (its mappings here stay until the [`RemoteQp`] is dropped).
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), ClientError> {
        self.call(&Request::DestroyQp { qpn }, &[]).map(|_| ())
    }

    /// The events of this client's objects since the last call.
    pub fn take_events(&mut self) -> Result<Vec<String>, ClientError> {
        match self.call(&Request::TakeEvents, &[])?.0 {
            Reply::Events(e) => Ok(e),
            r => Err(ClientError::Protocol(format!("{r:?}"))),
        }
    }

    /// Send `req` as it is, for tests that speak the protocol badly on purpose.
    pub fn raw_call(&mut self, req: &Request, fds: &[i32]) -> Result<Reply, ClientError> {
        self.call(req, fds).map(|r| r.0)
    }

    fn call(&mut self, req: &Request, fds: &[i32]) -> Result<(Reply, Vec<OwnedFd>), ClientError> {
        wire::send(&self.s, req, fds)?;
        match wire::recv::<Reply>(&self.s)? {
            Some((Reply::Error(e), _)) => Err(ClientError::Refused(e)),
            Some(r) => Ok(r),
            None => Err(ClientError::Protocol("connection closed".into())),
        }
    }

    /// Allocate a protection domain.
    pub fn alloc_pd(&mut self) -> Result<u32, ClientError> {
        match self.call(&Request::AllocPd, &[])?.0 {
            Reply::Pd(pd) => Ok(pd),
            r => Err(ClientError::Protocol(format!("{r:?}"))),
        }
    }

    /// Register `shm` (mapped here at its region's address); returns (lkey, rkey).
    pub fn reg_mr(&mut self, pd: u32, shm: &Shm, access: Access) -> Result<(u32, u32), ClientError> {
        let req = Request::RegMr { pd, addr: shm.region().base_addr() as u64, len: shm.len(), access: access.bits() };
        match self.call(&req, &[shm.fd().as_raw_fd()])?.0 {
            Reply::Mr { lkey, rkey } => Ok((lkey, rkey)),
            r => Err(ClientError::Protocol(format!("{r:?}"))),
        }
    }

    /// Create a CQ and map it.
    pub fn create_cq(&mut self, ncqe: u32, collapsed: bool) -> Result<RemoteCq, ClientError> {
        let (reply, mut fds) = self.call(&Request::CreateCq { ncqe, collapsed }, &[])?;
        let Reply::Cq { cqn, ncqe, ring, dbrec, len } = reply else {
            return Err(ClientError::Protocol(format!("{reply:?}")));
        };
        let fd = fds.pop().ok_or_else(|| ClientError::Protocol("CreateCq reply without a memfd".into()))?;
        let shm = Shm::from_sealed(File::from(fd), len)?;
        let r = shm.region();
        let e = |e: marrow_mmio::OutOfBounds| ClientError::Protocol(e.to_string());
        Ok(RemoteCq { cqn, ncqe, buf: r.sub(0, ring).map_err(e)?, dbrec: r.sub(dbrec, 8).map_err(e)?, _shm: shm })
    }

    /// Create a QP and map its queues and UAR page.
    pub fn create_qp(&mut self, pd: u32, send_cq: u32, recv_cq: u32, caps: QpCaps) -> Result<RemoteQp, ClientError> {
        let req = Request::CreateQp {
            pd,
            send_cq,
            recv_cq,
            sq_wqebbs: caps.sq_wqebbs,
            rq_wqes: caps.rq_wqes,
            rq_stride: caps.rq_stride,
        };
        let (reply, fds) = self.call(&req, &[])?;
        let Reply::Qp { qpn, sq, rq, dbrec, len } = reply else {
            return Err(ClientError::Protocol(format!("{reply:?}")));
        };
        let mut fds = fds.into_iter();
        let (Some(qfd), Some(ufd)) = (fds.next(), fds.next()) else {
            return Err(ClientError::Protocol("CreateQp reply without two memfds".into()));
        };
        let queues = Shm::from_sealed(File::from(qfd), len)?;
        let uar = Shm::from_sealed(File::from(ufd), 4096)?;
        let q = queues.region();
        let e = |e: marrow_mmio::OutOfBounds| ClientError::Protocol(e.to_string());
        Ok(RemoteQp {
            qpn,
            sq: q.sub(sq.0, sq.1).map_err(e)?,
            rq: q.sub(rq.0, rq.1).map_err(e)?,
            dbrec: q.sub(dbrec, 8).map_err(e)?,
            uar: uar.region(),
            _queues: queues,
            _uar: uar,
        })
    }

    /// Modify a QP.
    pub fn modify_qp(&mut self, qpn: u32, state: QpState, dest_qpn: Option<u32>) -> Result<(), ClientError> {
        let req = Request::ModifyQp { qpn, state: state as u8, dest_qpn, rnr_retry: None, wire: None };
        self.call(&req, &[]).map(|_| ())
    }

    /// Modify a QP whose peer is across one of the daemon's wire ports.
    pub fn modify_qp_wire(
        &mut self,
        qpn: u32,
        state: QpState,
        dest_qpn: Option<u32>,
        wire: crate::rc::WireAttrs,
    ) -> Result<(), ClientError> {
        let req = Request::ModifyQp { qpn, state: state as u8, dest_qpn, rnr_retry: None, wire: Some(wire) };
        self.call(&req, &[]).map(|_| ())
    }

    /// A CQ's producer index and whether it overflowed.
    pub fn query_cq(&mut self, cqn: u32) -> Result<(u32, bool), ClientError> {
        match self.call(&Request::QueryCq { cqn }, &[])?.0 {
            Reply::CqState { pi, overflowed } => Ok((pi, overflowed)),
            r => Err(ClientError::Protocol(format!("{r:?}"))),
        }
    }

    /// Start recording a register trace of at most `cap` bytes in the daemon.
    pub fn enable_trace(&mut self, cap: usize) -> Result<(), ClientError> {
        self.call(&Request::EnableTrace { cap }, &[]).map(|_| ())
    }

    /// The daemon's register trace so far.
    pub fn trace_bytes(&mut self) -> Result<Vec<u8>, ClientError> {
        let (reply, mut fds) = self.call(&Request::Trace, &[])?;
        let Reply::Trace { len } = reply else { return Err(ClientError::Protocol(format!("{reply:?}"))) };
        let fd = fds.pop().ok_or_else(|| ClientError::Protocol("Trace reply without a memfd".into()))?;
        let shm = Shm::from_sealed(File::from(fd), len)?;
        let mut out = vec![0u8; len];
        shm.region().read_bytes(0, &mut out).map_err(|e| ClientError::Protocol(e.to_string()))?;
        Ok(out)
    }

    /// A QP's state and how many WQEBBs the device executed.
    pub fn query_qp(&mut self, qpn: u32) -> Result<(QpState, u32), ClientError> {
        match self.call(&Request::QueryQp { qpn }, &[])?.0 {
            Reply::QpState { state, sq_ci } => {
                Ok((QpState::from_u8(state).ok_or_else(|| ClientError::Protocol(format!("state {state}")))?, sq_ci))
            }
            r => Err(ClientError::Protocol(format!("{r:?}"))),
        }
    }
}
