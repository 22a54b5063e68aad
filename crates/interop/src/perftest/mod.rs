//! perftest's protocol (linux-rdma/perftest, `src/perftest_communication.c`
//! and each tool's `main`), for `ib_write_bw`, `ib_read_bw`, `ib_send_bw`
//! and `ib_atomic_bw` over its own TCP exchange (no `-R`), RC, RoCE with a
//! GID. The version Debian 12 ships (4.5+0.17, which reports "6.06") was
//! read from its binaries; upstream's source gives the names.
//!
//! On the socket, every exchange is one fixed-size message each way, the
//! client writing first:
//!
//! 1. versions: 16 bytes, a NUL-padded string (`exchange_versions`);
//! 2. system data: the cycle buffer (page size) and the cache line size,
//!    each a 4-byte big-endian integer (`check_sys_data`);
//! 3. the MTU: `"%d"` of the `ibv_mtu` enum with its NUL, 2 bytes; each side
//!    takes the smaller (`check_mtu`);
//! 4. the QP keys ("K" below), 108 bytes: `%04x:%04x:%06x:%06x:%08x:%016llx:`
//!    (LID, outstanding reads, QPN, PSN, rkey, buffer address), the GID as
//!    16 `%02x:`, then the SRQ number `%08x:` (`KEY_PRINT_FMT_GID`);
//! 5. K, connect the QP, K, K; for `ib_send_bw` the server posts its
//!    receives and a fourth K tells the client they are there;
//! 6. the client runs the test while the server waits in the next K (the
//!    bandwidth tests but send then exchange five 8-byte big-endian
//!    report values: size, iterations, peak and average MB/s, Mpps);
//! 7. closing: K, then each side writes `"done"` with its NUL.
//!
//! The server's buffer is passive in the write, read and atomic tests, so
//! marrow checks what it can see: as client, that every RDMA READ of the
//! same bytes returns the same bytes and that fetch-and-add and
//! compare-and-swap return the exact chain of values; as server, that the
//! guest's writes covered the target and nothing outside it, that READs
//! left the target unchanged, that the guest's adds sum to its iteration
//! count, and that every SEND arrived whole.

mod client;
mod server;
mod side;
mod wire;

use client::{read_lat, run_client, write_lat};
use server::{check_server, prepare_server, receive_sends};
use side::Side;
use wire::{Conn, version_msg};
pub use wire::{Keys, mtu_enum};

use crate::InteropError;
use crate::host::Host;
use marrow_mlx5::prelude::*;
use marrow_mlx5::raw::MLX5_MKEY_INDEX_SHIFT;
use marrow_softnic::mr::Access;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Sixteen bits of an mkey's index flipped, its variant byte kept: a
/// key no MR holds, for `--bad-rkey`.
const BAD_RKEY_FLIP: u32 = 0xffff << MLX5_MKEY_INDEX_SHIFT;

/// The version marrow reports: the Debian 12 tools' own, so they pick the
/// message sizes above (they refuse peers below 5.70).
pub const VERSION: &str = "6.06";
/// Bytes of the key message, NUL included (`KEY_MSG_SIZE_GID`).
pub const KEY_LEN: usize = 108;
/// perftest's cycle buffer: the page size.
const CYCLE: usize = 4096;
/// Bytes poisoned around targets, to see writes that stray.
const POISON: u8 = 0xa5;
/// WQEs marrow keeps outstanding as client.
const WINDOW: usize = 32;

/// Which tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// `ib_write_bw`.
    WriteBw,
    /// `ib_read_bw`.
    ReadBw,
    /// `ib_send_bw`.
    SendBw,
    /// `ib_atomic_bw -A FETCH_AND_ADD`.
    AtomicFa,
    /// `ib_atomic_bw -A CMP_AND_SWAP`.
    AtomicCs,
    /// `ib_write_lat`.
    WriteLat,
    /// `ib_read_lat`.
    ReadLat,
}

impl Test {
    /// Whether the test waits in a key exchange after the data and swaps
    /// reports (all but `ib_send_bw`, whose server counts its receives).
    fn exchanges_reports(self) -> bool {
        !matches!(self, Test::SendBw | Test::WriteLat | Test::ReadLat)
    }

    /// The latency tools exchange keys twice before connecting.
    fn is_latency(self) -> bool {
        matches!(self, Test::WriteLat | Test::ReadLat)
    }

    fn access(self) -> Access {
        match self {
            Test::WriteBw | Test::WriteLat => Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            Test::ReadBw | Test::ReadLat => Access::LOCAL_WRITE | Access::REMOTE_READ,
            Test::SendBw => Access::LOCAL_WRITE,
            Test::AtomicFa | Test::AtomicCs => Access::LOCAL_WRITE | Access::REMOTE_ATOMIC,
        }
    }
}

/// A run's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// The tool.
    pub test: Test,
    /// Bytes per message (8 for atomics).
    pub size: usize,
    /// Iterations (`-n`).
    pub iters: usize,
    /// Path MTU offered (`-m`).
    pub mtu: u32,
    /// The longest one completion or socket step may take.
    pub timeout: Duration,
    /// The connection's deadline.
    pub deadline: Duration,
    /// As server: register the buffer without the rights the test needs,
    /// so the guest's operations must fail with a remote access error.
    pub deny: bool,
    /// As client: use a wrong rkey for the guest's buffer, so the first
    /// operation must end in a REMOTE_ACCESS_ERR CQE (syndrome 0x13).
    pub bad_rkey: bool,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Report {
    /// Operations marrow checked (its own completions, or the guest's
    /// effects it verified).
    pub checked: usize,
    /// What was checked, in words.
    pub what: String,
    /// The guest's keys.
    pub peer: Keys,
    /// Ours.
    pub local: Keys,
}

fn run(host: &mut Host, mut conn: Conn, opts: Options) -> Result<Report, InteropError> {
    let test = opts.test;
    let mtu = conn.preamble(opts.mtu)?;
    let mut s = Side::new(host, opts)?;
    if !conn.client {
        prepare_server(&mut s)?;
    }
    let me = s.me;
    // 5. K (the latency tools exchange once more first), connect, K, K.
    let mut peer = conn.keys(&me, "the keys")?;
    if test.is_latency() {
        peer = conn.keys(&me, "the keys (per QP)")?;
    }
    s.connect(&peer, mtu)?;
    conn.keys(&me, "the keys (second time)")?;
    conn.keys(&me, "the keys after RTR")?;
    if test == Test::SendBw {
        if !conn.client {
            let sge = [Sge { addr: s.ep.addr + s.lay.target() as u64, length: opts.size as u32, lkey: s.ep.lkey }];
            for _ in 0..opts.iters.min(512) {
                s.ep.rq.post(&sge).map_err(|e| InteropError::Setup(format!("posting a receive: {e}")))?;
            }
        }
        conn.keys(&me, "the keys after the receives")?;
    }
    // The server waits in the next exchange for the whole client run.
    let wait_in_keys =
        |conn: &mut Conn| conn.sock.set_read_timeout(Some(opts.deadline)).map_err(InteropError::io("socket"));
    if opts.deny && !conn.client {
        // The guest's first operation is NAKed and its tool exits: the
        // connection ends instead of the next exchange.
        wait_in_keys(&mut conn)?;
        let ended = conn.keys(&me, "the keys after the test").is_err();
        let (checked, what) = check_server(&mut s, 0)?;
        if !ended {
            return Err(InteropError::Exchange("the guest went on as if its operations had rights".into()));
        }
        return Ok(Report { checked, what, peer, local: me });
    }
    // 6. The test.
    let t0 = Instant::now();
    let (checked, what) = match (test, conn.client) {
        (Test::WriteLat, client) => write_lat(&mut s, &peer, !client)?,
        (Test::ReadLat, true) => read_lat(&mut s, &peer)?,
        (_, true) => run_client(&mut s, &peer)?,
        (Test::SendBw, false) => (receive_sends(&mut s)?, String::new()),
        (_, false) => (0, String::new()),
    };
    if test.exchanges_reports() {
        if !conn.client {
            wait_in_keys(&mut conn)?;
        }
        conn.keys(&me, "the keys after the test")?;
        let elapsed = t0.elapsed().as_secs_f64().max(1e-9);
        let mbs = (opts.size * opts.iters) as f64 / elapsed / f64::from(1 << 20);
        let mpps = opts.iters as f64 / elapsed / 1e6;
        conn.reports([opts.size as u64, opts.iters as u64, mbs.to_bits(), mbs.to_bits(), mpps.to_bits()])?;
    }
    // 7. Closing (ib_write_lat just exits).
    if test != Test::WriteLat {
        if !conn.client {
            wait_in_keys(&mut conn)?;
        }
        conn.close(&me)?;
    }
    let (checked, what) = match (test, conn.client) {
        (Test::WriteLat, _) | (_, true) => (checked, what),
        (_, false) => check_server(&mut s, checked)?,
    };
    Ok(Report { checked, what, peer, local: me })
}

/// marrow as the server of a perftest client on `listener`.
pub fn serve(host: &mut Host, listener: &TcpListener, opts: Options) -> Result<Report, InteropError> {
    let sock = crate::host::accept(listener, opts.deadline, opts.timeout)?;
    run(host, Conn { sock, client: false, version: None }, opts)
}

/// marrow as the client of a perftest server at `server`, retrying until
/// it listens. Through QEMU's user-mode forwarding the host connects at
/// once; a guest not yet listening shows as a connection closed before
/// the version arrives.
pub fn connect(host: &mut Host, server: SocketAddr, opts: Options) -> Result<Report, InteropError> {
    let start = Instant::now();
    loop {
        // The version exchange tells a guest that listens from one that
        // does not yet (the connection closes before its answer).
        let attempt = || -> Result<Conn, InteropError> {
            let mut sock = TcpStream::connect_timeout(&server, opts.timeout)
                .map_err(|e| InteropError::Exchange(format!("connecting to {server}: {e}")))?;
            sock.set_read_timeout(Some(opts.timeout)).map_err(InteropError::io("socket"))?;
            sock.write_all(&version_msg()).map_err(|e| InteropError::Exchange(format!("writing the version: {e}")))?;
            let mut v = [0u8; 16];
            sock.read_exact(&mut v).map_err(|e| InteropError::Exchange(format!("reading the version: {e}")))?;
            Ok(Conn { sock, client: true, version: Some(v) })
        };
        match attempt() {
            Ok(conn) => return run(host, conn, opts),
            Err(_) if start.elapsed() < opts.deadline => std::thread::sleep(Duration::from_millis(250)),
            Err(e) => return Err(e),
        }
    }
}
