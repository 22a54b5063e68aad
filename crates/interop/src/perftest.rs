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

use crate::InteropError;
use crate::host::Host;
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::prelude::*;
use marrow_mlx5::raw::MLX5_MKEY_INDEX_SHIFT;
use marrow_roce::raw::{BTH_PSN_MASK, bth};
use marrow_softnic::mr::Access;
use marrow_softnic::pair::Endpoint;
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

/// One side's keys (`struct pingpong_dest` in perftest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keys {
    /// LID: 0 on RoCE.
    pub lid: u16,
    /// RDMA READs and atomics this side accepts outstanding.
    pub out_reads: u16,
    /// QP number.
    pub qpn: u32,
    /// First PSN.
    pub psn: u32,
    /// rkey of the buffer.
    pub rkey: u32,
    /// The buffer's address for the peer.
    pub vaddr: u64,
    /// GID.
    pub gid: [u8; 16],
    /// SRQ number (0: none).
    pub srqn: u32,
}

impl Keys {
    /// The 108-byte message.
    pub fn to_wire(&self) -> [u8; KEY_LEN] {
        let mut t = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads,
            self.qpn & bth::DEST_QP_MASK,
            self.psn & BTH_PSN_MASK,
            self.rkey,
            self.vaddr
        );
        for b in self.gid {
            t.push_str(&format!("{b:02x}:"));
        }
        t.push_str(&format!("{:08x}:", self.srqn));
        let mut out = [0u8; KEY_LEN];
        out[..t.len()].copy_from_slice(t.as_bytes());
        out
    }

    /// Parse a key message: 23 hex fields, each ended by `:`.
    pub fn parse(msg: &[u8]) -> Result<Keys, InteropError> {
        let bad =
            |why: &str| InteropError::Exchange(format!("perftest keys: {why} in {:?}", String::from_utf8_lossy(msg)));
        let end = msg.iter().position(|&b| b == 0).ok_or_else(|| bad("no terminating NUL"))?;
        let text = std::str::from_utf8(&msg[..end]).map_err(|_| bad("not ASCII"))?;
        let f: Vec<&str> = text.split(':').collect();
        if f.len() != 24 || !f[23].is_empty() {
            return Err(bad("not 23 fields each ended by ':'"));
        }
        let hex = |s: &str| u64::from_str_radix(s, 16).map_err(|_| bad(&format!("field {s:?} is not hex")));
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = u8::try_from(hex(f[6 + i])?).map_err(|_| bad("a GID byte exceeds 0xff"))?;
        }
        Ok(Keys {
            lid: hex(f[0])? as u16,
            out_reads: hex(f[1])? as u16,
            qpn: hex(f[2])? as u32,
            psn: hex(f[3])? as u32,
            rkey: hex(f[4])? as u32,
            vaddr: hex(f[5])?,
            gid,
            srqn: hex(f[22])? as u32,
        })
    }
}

fn version_msg() -> [u8; 16] {
    let mut m = [0u8; 16];
    m[..VERSION.len()].copy_from_slice(VERSION.as_bytes());
    m
}

/// The `ibv_mtu` enum value of an MTU in bytes (1 = 256 … 5 = 4096).
pub fn mtu_enum(mtu: u32) -> u32 {
    match mtu {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        _ => 5,
    }
}

/// The socket, which end writes first, and the peer's version when the
/// connection attempt already exchanged it.
struct Conn {
    sock: TcpStream,
    client: bool,
    version: Option<[u8; 16]>,
}

impl Conn {
    fn xchg(&mut self, mine: &[u8], theirs: &mut [u8], what: &str) -> Result<(), InteropError> {
        let e = |dir: &'static str| {
            let what = what.to_string();
            move |err: std::io::Error| InteropError::Exchange(format!("{dir} {what}: {err}"))
        };
        if self.client {
            self.sock.write_all(mine).map_err(e("writing"))?;
            self.sock.read_exact(theirs).map_err(e("reading"))?;
        } else {
            self.sock.read_exact(theirs).map_err(e("reading"))?;
            self.sock.write_all(mine).map_err(e("writing"))?;
        }
        Ok(())
    }

    fn keys(&mut self, k: &Keys, what: &str) -> Result<Keys, InteropError> {
        let mut m = [0u8; KEY_LEN];
        self.xchg(&k.to_wire(), &mut m, what)?;
        Keys::parse(&m)
    }

    /// Versions, system data and MTU; returns the MTU both use.
    fn preamble(&mut self, mtu: u32) -> Result<u32, InteropError> {
        let v = match self.version {
            Some(v) => v,
            None => {
                let mut v = [0u8; 16];
                self.xchg(&version_msg(), &mut v, "the version")?;
                v
            }
        };
        let theirs = String::from_utf8_lossy(&v[..v.iter().position(|&b| b == 0).unwrap_or(16)]).to_string();
        if theirs.parse::<f64>().map_or(true, |x| x < 5.70) {
            return Err(InteropError::Exchange(format!("perftest version {theirs:?}: marrow speaks 5.70 and later")));
        }
        let mut b4 = [0u8; 4];
        self.xchg(&(CYCLE as u32).to_be_bytes(), &mut b4, "the cycle buffer size")?;
        if u32::from_be_bytes(b4) as usize > CYCLE {
            return Err(InteropError::Exchange(format!("the peer's cycle buffer is {} bytes", u32::from_be_bytes(b4))));
        }
        self.xchg(&64u32.to_be_bytes(), &mut b4, "the cache line size")?;
        let mut m = [0u8; 2];
        let want = mtu_enum(mtu);
        self.xchg(&[b'0' + want as u8, 0], &mut m, "the MTU")?;
        let theirs = u32::from(m[0].wrapping_sub(b'0'));
        let got = if (1..=5).contains(&theirs) { want.min(theirs) } else { want };
        Ok(128 << got)
    }

    fn reports(&mut self, mine: [u64; 5]) -> Result<[u64; 5], InteropError> {
        let mut out = [0u64; 5];
        for (i, v) in mine.iter().enumerate() {
            let mut b = [0u8; 8];
            self.xchg(&v.to_be_bytes(), &mut b, "a report value")?;
            out[i] = u64::from_be_bytes(b);
        }
        Ok(out)
    }

    fn close(&mut self, k: &Keys) -> Result<(), InteropError> {
        self.keys(k, "the closing keys")?;
        self.sock.write_all(b"done\0").map_err(InteropError::io("writing \"done\""))?;
        // Read the peer's "done" before closing, so ours is not reset away.
        let mut d = [0u8; 5];
        let _ = self.sock.read_exact(&mut d);
        Ok(())
    }
}

/// The buffer: perftest's two halves (the second is the target peers
/// see), then a guard.
struct Layout {
    half: usize,
}

impl Layout {
    fn new(size: usize) -> Layout {
        Layout { half: size.max(CYCLE) }
    }
    fn len(&self) -> usize {
        2 * self.half + 64
    }
    fn target(&self) -> usize {
        self.half
    }
}

struct Side<'a> {
    host: &'a mut Host,
    ep: Endpoint,
    opts: Options,
    lay: Layout,
    me: Keys,
}

fn fill_random(len: usize, seed: u64) -> Vec<u8> {
    let mut r = fastrand::Rng::with_seed(seed);
    (0..len).map(|_| r.u8(..)).collect()
}

impl<'a> Side<'a> {
    fn new(host: &'a mut Host, opts: Options) -> Result<Side<'a>, InteropError> {
        let lay = Layout::new(opts.size);
        let access = if opts.deny { Access::LOCAL_WRITE } else { opts.test.access() };
        let ep = host.endpoint_with(lay.len(), access)?;
        ep.buf.fill(0, lay.len(), POISON).map_err(|e| InteropError::Setup(e.to_string()))?;
        // READ responses are not acknowledged, so no send window bounds
        // them: the reads a peer may have outstanding are the burst. Keep
        // it within the window the requester keeps (crate::host::SEND_WINDOW_BYTES).
        let out_reads = (crate::host::SEND_WINDOW_BYTES as usize / opts.size.max(1)).clamp(1, 16) as u16;
        let me = Keys {
            lid: 0,
            out_reads,
            qpn: ep.qpn,
            psn: fastrand::u32(..=BTH_PSN_MASK),
            rkey: ep.rkey,
            vaddr: ep.addr + lay.target() as u64,
            gid: host.gid(),
            srqn: 0,
        };
        Ok(Side { host, ep, opts, lay, me })
    }

    fn connect(&mut self, peer: &Keys, mtu: u32) -> Result<(), InteropError> {
        let mut a = self.host.attrs(peer.gid, mtu, self.me.psn, peer.psn);
        a.max_rd_atomic = peer.out_reads.clamp(1, 16) as u8;
        a.max_dest_rd_atomic = self.me.out_reads as u8;
        self.host.connect(&self.ep, peer.qpn, a)
    }

    fn read(&self, off: usize, len: usize) -> Result<Vec<u8>, InteropError> {
        let mut v = vec![0u8; len];
        self.ep.buf.read_bytes(off, &mut v).map_err(|e| InteropError::Setup(e.to_string()))?;
        Ok(v)
    }

    /// The 8 bytes at `off` as the atomics see them: host order (rxe's
    /// responder and the softnic's both operate on host-order memory).
    fn u64_at(&self, off: usize) -> Result<u64, InteropError> {
        let b = self.read(off, 8)?;
        Ok(u64::from_ne_bytes(b.try_into().expect("8 bytes")))
    }

    /// Post one WQE; returns (wqe index, WQEBBs).
    fn post(&mut self, op: &WqeOp<'_>) -> Result<(u16, u32), InteropError> {
        let index = self.ep.sq.pi() as u16;
        let b = self
            .ep
            .sq
            .post(CtrlParams::signaled(0, 0), op)
            .map_err(|e| InteropError::Setup(format!("posting: {e}")))?;
        self.ep.sq.ring().map_err(|e| InteropError::Setup(format!("ringing: {e}")))?;
        Ok((index, u32::from(b.wqebbs)))
    }

    /// Wait for the requester completion of (index, wqebbs).
    fn complete(&mut self, index: u16, wqebbs: u32, opcode: WqeOpcode, i: usize) -> Result<(), InteropError> {
        match self.host.wait(&mut self.ep, false, self.opts.timeout, &format!("operation {i}"))? {
            Completion::Requester { wqe_opcode, wqe_counter, .. } if wqe_opcode == opcode && wqe_counter == index => {
                self.ep.sq.complete_through(index, wqebbs);
                Ok(())
            }
            other => Err(InteropError::Completion(format!(
                "operation {i}: expected the {opcode:?} completion of WQE {index:#06x}; got {other:?}"
            ))),
        }
    }
}

/// Where perftest's client puts operation `i` (`run_iter_bw`): the same
/// bytes for messages over half the cycle buffer, else a stride of the size
/// rounded up to 64 that wraps within the cycle buffer.
fn offset(size: usize, i: usize) -> usize {
    if size > CYCLE / 2 {
        return 0;
    }
    let step = size.next_multiple_of(64);
    (i % (CYCLE / step)) * step
}

/// marrow as client: post the test's operations against the guest's buffer.
fn run_client(s: &mut Side<'_>, peer: &Keys) -> Result<(usize, String), InteropError> {
    let (size, iters) = (s.opts.size, s.opts.iters);
    // Flip the key's index bits, keep its variant: an rkey no MR has.
    let rkey = if s.opts.bad_rkey { peer.rkey ^ BAD_RKEY_FLIP } else { peer.rkey };
    if s.opts.bad_rkey {
        let remote = RemoteAddr { raddr: peer.vaddr, rkey };
        let sgl = [Sge { addr: s.ep.addr, length: size as u32, lkey: s.ep.lkey }];
        s.post(&WqeOp::RdmaWrite { remote, sgl: &sgl })?;
        return match s.host.wait(&mut s.ep, false, s.opts.timeout, "the write with a wrong rkey")? {
            Completion::Error(e) if e.syndrome == Syndrome::REMOTE_ACCESS_ERR => Ok((
                1,
                format!(
                    "RDMA_WRITE with rkey {rkey:#x} (rxe's is {:#x}) ended in an error CQE, syndrome {:#04x} \
                     (REMOTE_ACCESS_ERR), vendor syndrome {:#04x}",
                    peer.rkey, e.syndrome.0, e.vendor_err_synd
                ),
            )),
            other => {
                Err(InteropError::Completion(format!("a wrong rkey must give REMOTE_ACCESS_ERR (0x13); got {other:?}")))
            }
        };
    }
    match s.opts.test {
        Test::WriteLat | Test::ReadLat => {
            Err(InteropError::Setup("the latency tests run their own loops (write_lat, read_lat)".into()))
        }
        Test::WriteBw | Test::ReadBw => {
            let read = s.opts.test == Test::ReadBw;
            let src = fill_random(s.lay.half, u64::from(s.me.psn));
            s.ep.buf.write_bytes(0, &src).map_err(|e| InteropError::Setup(e.to_string()))?;
            let mut inflight = std::collections::VecDeque::new();
            let mut first: std::collections::HashMap<usize, Vec<u8>> = std::collections::HashMap::new();
            for i in 0..iters + WINDOW {
                if i < iters {
                    let off = offset(size, i);
                    let remote = RemoteAddr { raddr: peer.vaddr + off as u64, rkey };
                    let sgl = [Sge { addr: s.ep.addr + off as u64, length: size as u32, lkey: s.ep.lkey }];
                    let op = if read {
                        WqeOp::RdmaRead { remote, sgl: &sgl }
                    } else {
                        WqeOp::RdmaWrite { remote, sgl: &sgl }
                    };
                    inflight.push_back((i, off, s.post(&op)?));
                }
                if inflight.len() >= WINDOW || (i >= iters && !inflight.is_empty()) {
                    let (n, off, (index, bbs)) = inflight.pop_front().expect("not empty");
                    let opcode = if read { WqeOpcode::RDMA_READ } else { WqeOpcode::RDMA_WRITE };
                    s.complete(index, bbs, opcode, n)?;
                    if read {
                        // Later reads into the same bytes may land after this
                        // completion: compare only once nothing else targets them.
                        let got = s.read(off, size)?;
                        if let Some(want) = first.get(&off) {
                            if inflight.iter().all(|(_, o, _)| *o != off) && &got != want {
                                return Err(InteropError::Mismatch(format!(
                                    "READ {n} of the guest's bytes at +{off:#x} differs from the first READ of them"
                                )));
                            }
                        } else if inflight.iter().all(|(_, o, _)| *o != off) {
                            first.insert(off, got);
                        }
                    }
                }
            }
            Ok((
                iters,
                if read {
                    format!("{iters} RDMA_READs of {size} B, every re-read of the same guest bytes identical")
                } else {
                    format!("{iters} RDMA_WRITEs of {size} B completed")
                },
            ))
        }
        Test::SendBw => {
            let src = fill_random(size, 7);
            s.ep.buf.write_bytes(0, &src).map_err(|e| InteropError::Setup(e.to_string()))?;
            let mut inflight = std::collections::VecDeque::new();
            for i in 0..iters + WINDOW {
                if i < iters {
                    let sgl = [Sge { addr: s.ep.addr, length: size as u32, lkey: s.ep.lkey }];
                    inflight.push_back((i, s.post(&WqeOp::Send { sgl: &sgl })?));
                }
                if inflight.len() >= WINDOW || (i >= iters && !inflight.is_empty()) {
                    let (n, (index, bbs)) = inflight.pop_front().expect("not empty");
                    s.complete(index, bbs, WqeOpcode::SEND, n)?;
                }
            }
            Ok((iters, format!("{iters} SENDs of {size} B completed")))
        }
        Test::AtomicFa => {
            // One address: RC executes in order, so the fetched values are a chain.
            let remote = RemoteAddr { raddr: peer.vaddr, rkey };
            let mut inflight = std::collections::VecDeque::new();
            let mut prev: Option<u64> = None;
            for i in 0..iters + WINDOW {
                if i < iters {
                    let slot = 8 * (i % WINDOW);
                    let local = Sge { addr: s.ep.addr + slot as u64, length: 8, lkey: s.ep.lkey };
                    inflight.push_back((i, slot, s.post(&WqeOp::AtomicFa { remote, local, add: 1 })?));
                }
                if inflight.len() >= WINDOW || (i >= iters && !inflight.is_empty()) {
                    let (n, slot, (index, bbs)) = inflight.pop_front().expect("not empty");
                    s.complete(index, bbs, WqeOpcode::ATOMIC_FA, n)?;
                    let got = s.u64_at(slot)?;
                    if let Some(p) = prev.filter(|p| p.wrapping_add(1) != got) {
                        return Err(InteropError::Mismatch(format!("FETCH_ADD {n} fetched {got:#x} after {p:#x}")));
                    }
                    prev = Some(got);
                }
            }
            Ok((
                iters,
                format!("{iters} FETCH_ADDs of 1, the fetched values one chain ending at {:#x}", prev.unwrap_or(0)),
            ))
        }
        Test::AtomicCs => {
            // One at a time: each compares with the value the last one left.
            let remote = RemoteAddr { raddr: peer.vaddr, rkey };
            let local = Sge { addr: s.ep.addr, length: 8, lkey: s.ep.lkey };
            let mut expect: Option<u64> = None;
            for i in 0..iters {
                let (compare, swap) = match expect {
                    None => (0, 0),
                    Some(v) => (v, v.wrapping_add(1)),
                };
                let (index, bbs) = s.post(&WqeOp::AtomicCs { remote, local, compare, swap })?;
                s.complete(index, bbs, WqeOpcode::ATOMIC_CS, i)?;
                let got = s.u64_at(0)?;
                if let Some(v) = expect.filter(|v| *v != got) {
                    return Err(InteropError::Mismatch(format!(
                        "CMP_AND_SWAP {i} fetched {got:#x}, the last swap left {v:#x}"
                    )));
                }
                expect = Some(if i == 0 || got != compare { got } else { swap });
            }
            Ok((iters, format!("{iters} CMP_AND_SWAPs, each swapping the value the last one left")))
        }
    }
}

/// marrow as server: check what the guest's operations did.
fn check_server(s: &mut Side<'_>, posted_recvs: usize) -> Result<(usize, String), InteropError> {
    let (size, iters, t) = (s.opts.size, s.opts.iters, s.lay.target());
    if s.opts.deny {
        let state = s.host.nic.hca().qp(s.ep.qpn).map(|q| format!("{:?}", q.state)).unwrap_or_default();
        let untouched = s.read(t, s.lay.half)?.iter().all(|&b| b == POISON);
        if !untouched {
            return Err(InteropError::Mismatch("the guest changed a buffer it has no rights to".into()));
        }
        return Ok((0, format!("the buffer without remote rights is untouched; QP {state}")));
    }
    let guard = s.read(2 * s.lay.half, 64)?;
    if guard.iter().any(|&b| b != POISON) || s.read(0, s.lay.half)?.iter().any(|&b| b != POISON) {
        return Err(InteropError::Mismatch("bytes outside the target changed".into()));
    }
    match s.opts.test {
        Test::WriteBw => {
            let got = s.read(t, size)?;
            let poisoned = got.iter().filter(|&&b| b == POISON).count();
            // The guest writes rand() bytes: about 1 in 256 equals the poison.
            if poisoned * 16 > size.max(16) {
                return Err(InteropError::Mismatch(format!(
                    "{poisoned} of the {size} target bytes still hold the poison: the writes did not land"
                )));
            }
            Ok((
                iters,
                format!(
                    "the first {size} target bytes written ({poisoned} equal the poison, as chance has it), nothing outside the target"
                ),
            ))
        }
        Test::ReadBw | Test::ReadLat => {
            let want = fill_random(s.lay.half, 99);
            if s.read(t, s.lay.half)? != want {
                return Err(InteropError::Mismatch("READs changed the target".into()));
            }
            Ok((iters, "the target read, unchanged, nothing outside it touched".into()))
        }
        Test::AtomicFa | Test::AtomicCs => {
            // perftest strides its atomics over the cycle buffer, 64 bytes apart.
            let mut sum = 0u64;
            for k in 0..CYCLE / 64 {
                let v = s.u64_at(t + 64 * k)?;
                let rest = s.read(t + 64 * k + 8, 56)?;
                if rest.iter().any(|&b| b != 0) {
                    return Err(InteropError::Mismatch(format!("bytes beside atomic slot {k} changed")));
                }
                sum = sum.wrapping_add(v);
            }
            let want = if s.opts.test == Test::AtomicFa { iters as u64 } else { 0 };
            if sum != want {
                return Err(InteropError::Mismatch(format!("the atomic slots sum to {sum}, {want} expected")));
            }
            Ok((
                iters,
                if want > 0 {
                    format!("the guest's {iters} FETCH_ADDs of 1 sum to {sum} over the 64 slots it strides")
                } else {
                    "the CMP_AND_SWAPs of 0 left every slot 0".into()
                },
            ))
        }
        Test::SendBw => Ok((posted_recvs, format!("{iters} SENDs of {size} B received whole"))),
        Test::WriteLat => Ok((iters, String::new())),
    }
}

/// Prepare the server's target for the guest's operations.
fn prepare_server(s: &mut Side<'_>) -> Result<(), InteropError> {
    let t = s.lay.target();
    match s.opts.test {
        Test::ReadBw | Test::ReadLat => s.ep.buf.write_bytes(t, &fill_random(s.lay.half, 99)),
        // Atomic slots start at 0.
        Test::AtomicFa | Test::AtomicCs => s.ep.buf.fill(t, CYCLE, 0),
        _ => Ok(()),
    }
    .map_err(|e| InteropError::Setup(e.to_string()))
}

/// The server's receives for `ib_send_bw`: every SEND arrives whole.
fn receive_sends(s: &mut Side<'_>) -> Result<usize, InteropError> {
    let opts = s.opts;
    let sge = [Sge { addr: s.ep.addr + s.lay.target() as u64, length: opts.size as u32, lkey: s.ep.lkey }];
    let mut posted = opts.iters.min(512);
    for i in 0..opts.iters {
        match s.host.wait(&mut s.ep, true, opts.timeout, &format!("receive {i}"))? {
            Completion::Responder { opcode: CqeOpcode::RESP_SEND, byte_cnt, wqe_counter, .. }
                if byte_cnt as usize == opts.size =>
            {
                s.ep.rq.complete(wqe_counter);
                if posted < opts.iters {
                    s.ep.rq.post(&sge).map_err(|e| InteropError::Setup(e.to_string()))?;
                    posted += 1;
                }
            }
            other => {
                return Err(InteropError::Completion(format!(
                    "receive {i}: expected RESP_SEND of {} B; got {other:?}",
                    opts.size
                )));
            }
        }
    }
    Ok(opts.iters)
}

/// `ib_write_lat`'s ping-pong (`run_iter_lat_write`): each side writes
/// its `size` bytes into the other's target with a counter in the last
/// byte, and waits for the peer's counter to reach the next value in the
/// last byte of its own target. The server writes first. The tool zeroes
/// its buffer, so each arrival must be zeros and the counter.
fn write_lat(s: &mut Side<'_>, peer: &Keys, server: bool) -> Result<(usize, String), InteropError> {
    let (size, iters, t) = (s.opts.size, s.opts.iters, s.lay.target());
    s.ep.buf.fill(0, s.lay.len(), 0).map_err(|e| InteropError::Setup(e.to_string()))?;
    let remote = RemoteAddr { raddr: peer.vaddr, rkey: peer.rkey };
    let sgl = [Sge { addr: s.ep.addr, length: size as u32, lkey: s.ep.lkey }];
    let mut rcnt = 0u8;
    for scnt in 1..=iters {
        if !(server && scnt == 1) {
            rcnt = rcnt.wrapping_add(1);
            let t0 = Instant::now();
            while s.read(t + size - 1, 1)?[0] != rcnt {
                if t0.elapsed() > s.opts.timeout {
                    return Err(InteropError::Timeout(format!(
                        "ping {scnt}: the guest's write with counter {rcnt} did not arrive in {:?}",
                        s.opts.timeout
                    )));
                }
                std::hint::spin_loop();
            }
            let got = s.read(t, size)?;
            if got[..size - 1].iter().any(|&b| b != 0) {
                return Err(InteropError::Mismatch(format!("ping {scnt}: the guest's zeros arrived changed")));
            }
        }
        s.ep.buf.write_bytes(size - 1, &[scnt as u8]).map_err(|e| InteropError::Setup(e.to_string()))?;
        let (index, bbs) = s.post(&WqeOp::RdmaWrite { remote, sgl: &sgl })?;
        s.complete(index, bbs, WqeOpcode::RDMA_WRITE, scnt)?;
    }
    if server {
        // The server's last turn: the client's final write.
        rcnt = rcnt.wrapping_add(1);
        let t0 = Instant::now();
        while s.read(t + size - 1, 1)?[0] != rcnt {
            if t0.elapsed() > s.opts.timeout {
                return Err(InteropError::Timeout("the guest's last write did not arrive".into()));
            }
            std::hint::spin_loop();
        }
    }
    Ok((iters, format!("{iters} round trips of {size} B, every arrival the guest's zeros and the next counter")))
}

/// `ib_read_lat`'s client: one RDMA READ of the same bytes at a time;
/// every read must return what the first did.
fn read_lat(s: &mut Side<'_>, peer: &Keys) -> Result<(usize, String), InteropError> {
    let (size, iters) = (s.opts.size, s.opts.iters);
    let remote = RemoteAddr { raddr: peer.vaddr, rkey: peer.rkey };
    let sgl = [Sge { addr: s.ep.addr, length: size as u32, lkey: s.ep.lkey }];
    let mut first: Option<Vec<u8>> = None;
    for i in 0..iters {
        let (index, bbs) = s.post(&WqeOp::RdmaRead { remote, sgl: &sgl })?;
        s.complete(index, bbs, WqeOpcode::RDMA_READ, i)?;
        let got = s.read(0, size)?;
        match &first {
            Some(f) if *f != got => {
                return Err(InteropError::Mismatch(format!("READ {i} of the guest's bytes differs from the first")));
            }
            Some(_) => {}
            None => first = Some(got),
        }
    }
    Ok((iters, format!("{iters} RDMA_READs of {size} B, one at a time, all returning the same guest bytes")))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_as_perftest_writes_them() {
        // What ib_write_bw on rxe printed in the guest as its local address
        // (QPN 0x0018, PSN 0x7bcd10, RKey 0x00093c, VAddr 0x007f05ddf5b000,
        // GID ::ffff:10.77.0.2), in KEY_PRINT_FMT_GID.
        let text = "0000:0080:000018:7bcd10:0000093c:00007f05ddf5b000:\
                    00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:02:00000000:";
        let mut m = [0u8; KEY_LEN];
        m[..text.len()].copy_from_slice(text.as_bytes());
        assert_eq!(text.len() + 1, KEY_LEN);
        let k = Keys::parse(&m).unwrap();
        assert_eq!((k.qpn, k.psn, k.rkey, k.vaddr, k.out_reads), (0x18, 0x7bcd10, 0x93c, 0x7f05_ddf5_b000, 0x80));
        assert_eq!(k.gid[10..], [0xff, 0xff, 10, 77, 0, 2]);
        assert_eq!(k.to_wire(), m);
        let mut short = m;
        short[text.len() - 1] = 0;
        assert!(Keys::parse(&short).is_err(), "the SRQ field must end with ':'");
        assert!(Keys::parse(&[b'0'; KEY_LEN]).is_err());
    }

    #[test]
    fn mtus_and_strides_follow_perftest() {
        assert_eq!([256, 512, 1024, 2048, 4096].map(mtu_enum), [1, 2, 3, 4, 5]);
        assert_eq!(offset(65536, 7), 0);
        assert_eq!(offset(8, 1), 64);
        assert_eq!(offset(8, 64), 0, "wraps within the cycle buffer");
        assert_eq!(offset(100, 1), 128);
    }
}
