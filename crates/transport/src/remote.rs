//! A PE in its own process, on the softnic daemon (`marrow softnic`): its QP,
//! CQ and buffer are created over the daemon's socket and mapped from the
//! memfds it returns; its GCRB is filled here. PEs of different processes
//! connect by exchanging [`PeInfo`] (through any launcher: here the test
//! harness's pipes) and then talk through the shared rings alone.

use crate::TransportError;
use crate::gcrb_page::{self, GcrbSetup};
use marrow_mmio::Region;
use marrow_softnic::client::{Client, RemoteCq, RemoteQp};
use marrow_softnic::{Access, QpCaps, QpState, Shm};
use std::path::Path;
use std::time::Duration;

/// What a peer needs to reach a PE: its QP and its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeInfo {
    /// QP number.
    pub qpn: u32,
    /// Buffer address (as registered).
    pub addr: u64,
    /// Remote key of the buffer.
    pub rkey: u32,
}

impl std::fmt::Display for PeInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.qpn, self.addr, self.rkey)
    }
}

impl std::str::FromStr for PeInfo {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let w: Vec<&str> = s.split_whitespace().collect();
        let [q, a, r] = w[..] else { return Err(format!("expected 'qpn addr rkey', got '{s}'")) };
        let p = |x: &str| x.parse::<u64>().map_err(|e| format!("'{x}': {e}"));
        Ok(PeInfo { qpn: p(q)? as u32, addr: p(a)?, rkey: p(r)? as u32 })
    }
}

/// This process's PE on the daemon.
#[derive(Debug)]
pub struct RemotePe {
    client: Client,
    /// This PE's number (its index in the key table).
    pub pe: usize,
    buf: Shm,
    lkey: u32,
    rkey: u32,
    qp: RemoteQp,
    cq: RemoteCq,
    page: Shm,
    timeout: Duration,
}

fn refused(e: marrow_softnic::client::ClientError) -> TransportError {
    TransportError::Daemon(e.to_string())
}

impl RemotePe {
    /// Create PE `pe` (0 or 1) with a `buf_len`-byte buffer on the daemon at `socket`.
    pub fn create(
        socket: &Path,
        pe: usize,
        buf_len: usize,
        sq_wqebbs: u32,
        timeout: Duration,
    ) -> Result<RemotePe, TransportError> {
        let mut client = Client::connect(socket).map_err(refused)?;
        let pd = client.alloc_pd().map_err(refused)?;
        let buf = Shm::create(&format!("pe{pe}"), buf_len)?;
        let (lkey, rkey) = client.reg_mr(pd, &buf, Access::all()).map_err(refused)?;
        let cq = client.create_cq(sq_wqebbs, false).map_err(refused)?;
        let qp = client.create_qp(pd, cq.cqn, cq.cqn, QpCaps { sq_wqebbs, ..QpCaps::default() }).map_err(refused)?;
        client.modify_qp(qp.qpn, QpState::Init, None).map_err(refused)?;
        let page = Shm::create(&format!("gcrb-pe{pe}"), marrow_gcrb::GCRB_PAGE_SIZE as usize)?;
        Ok(RemotePe { client, pe, buf, lkey, rkey, qp, cq, page, timeout })
    }

    /// What the peer needs.
    pub fn info(&self) -> PeInfo {
        PeInfo { qpn: self.qp.qpn, addr: self.buf.region().base_addr() as u64, rkey: self.rkey }
    }

    /// Connect to the peer (INIT→RTR→RTS) and fill the GCRB.
    pub fn connect(&mut self, peer: PeInfo) -> Result<(), TransportError> {
        self.client.modify_qp(self.qp.qpn, QpState::Rtr, Some(peer.qpn)).map_err(refused)?;
        self.client.modify_qp(self.qp.qpn, QpState::Rts, None).map_err(refused)?;
        let me = self.info();
        let mut keys = [(0u64, 0u32); 2];
        keys[self.pe] = (me.addr, me.rkey);
        keys[1 - self.pe] = (peer.addr, peer.rkey);
        let setup = GcrbSetup {
            qpn: self.qp.qpn,
            sq: (self.qp.sq.base_addr() as u64, (self.qp.sq.len() / 64) as u32),
            dbrec: self.qp.dbrec.base_addr() as u64,
            db: (self.qp.uar.base_addr() as u64 + u64::from(marrow_mlx5::raw::MLX5_BF_OFFSET), 8),
            cq: (self.cq.buf.base_addr() as u64, self.cq.ncqe, self.cq.dbrec.base_addr() as u64, false),
            local: (self.lkey, me.addr, self.buf.len() as u64),
            keys,
            timeout_ns: self.timeout.as_nanos() as u64,
            trace: true,
        };
        gcrb_page::fill(&self.page.region(), &setup)?;
        Ok(())
    }

    /// The GCRB page.
    pub fn page(&self) -> Region {
        self.page.region()
    }

    /// The buffer.
    pub fn buf(&self) -> Region {
        self.buf.region()
    }
}
