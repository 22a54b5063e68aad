//! `ibv_rc_pingpong`'s protocol (rdma-core `libibverbs/examples/rc_pingpong.c`),
//! with the softnic as the other end.
//!
//! The tool posts receives of `size` bytes into its one buffer, sends that
//! same buffer, and sends again only when both its last send and a receive
//! completed. So each message it sends carries the bytes of the message it
//! last received: marrow sends a fresh pattern every iteration and checks
//! that the next message from the tool is exactly that pattern. The tool's
//! first message, as client, is its initial fill (`memset(buf, 0x7b, size)`).
//!
//! As server (the tool is the client): accept, read the tool's address,
//! connect the QP (it must be ready to receive before answering), answer,
//! read `"done"`; then `iters` times: receive, check, send the next pattern.
//! As client (the tool is the server): connect, send the address, read the
//! tool's (it connects its QP before answering), connect ours, write
//! `"done"`; then `iters` times: send a pattern, receive, check it came back.

use crate::InteropError;
use crate::exchange::{DONE, Dest, MSG_LEN};
use crate::host::Host;
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::prelude::*;
use marrow_roce::raw::BTH_PSN_MASK;
use marrow_softnic::pair::Endpoint;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The fill `rc_pingpong` gives its buffer before the first send.
pub const FIRST_FILL: u8 = 0x7b;

/// A run's parameters: the tool's `-s`, `-n` and `-m`.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Bytes per message.
    pub size: usize,
    /// Exchanges.
    pub iters: usize,
    /// Path MTU.
    pub mtu: u32,
    /// The longest any one completion or socket step may take.
    pub timeout: Duration,
    /// The whole exchange's deadline (connection retries included).
    pub deadline: Duration,
}

/// What a run did.
#[derive(Clone, Debug)]
pub struct Report {
    /// Messages received and checked.
    pub checked: usize,
    /// Payload bytes received and checked.
    pub bytes: u64,
    /// The tool's address.
    pub peer: Dest,
    /// Ours.
    pub local: Dest,
    /// Time from the first send or receive to the last completion.
    pub elapsed: Duration,
}

const RECV_OFF: usize = 0;

fn send_off(size: usize) -> usize {
    size.next_multiple_of(4096)
}

fn buf_len(size: usize) -> usize {
    2 * send_off(size.max(1))
}

/// The pattern of iteration `i`: never the tool's first fill, so an echo
/// of the wrong message cannot pass.
fn pattern(seed: u64, i: usize, size: usize) -> Vec<u8> {
    // Iterations spread apart by the 64-bit golden ratio (splitmix64's step).
    const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rng = fastrand::Rng::with_seed(seed ^ (i as u64).wrapping_mul(GOLDEN));
    let mut v: Vec<u8> = (0..size).map(|_| rng.u8(..)).collect();
    if let Some(b) = v.first_mut() {
        *b = if *b == FIRST_FILL { !FIRST_FILL } else { *b };
    }
    v
}

struct Session<'a> {
    host: &'a Host,
    ep: Endpoint,
    opts: Options,
    seed: u64,
}

impl Session<'_> {
    fn post_recv(&mut self) -> Result<(), InteropError> {
        let sge = [Sge { addr: self.ep.addr + RECV_OFF as u64, length: self.opts.size as u32, lkey: self.ep.lkey }];
        self.ep.rq.post(&sge).map(|_| ()).map_err(|e| InteropError::Setup(format!("posting a receive: {e}")))
    }

    fn send(&mut self, i: usize) -> Result<Vec<u8>, InteropError> {
        let data = pattern(self.seed, i, self.opts.size);
        let off = send_off(self.opts.size);
        self.ep.buf.write_bytes(off, &data).map_err(|e| InteropError::Setup(e.to_string()))?;
        let sgl = [Sge { addr: self.ep.addr + off as u64, length: self.opts.size as u32, lkey: self.ep.lkey }];
        let index = self.ep.sq.pi() as u16;
        let built = self
            .ep
            .sq
            .post(CtrlParams::signaled(0, 0), &WqeOp::Send { sgl: &sgl })
            .map_err(|e| InteropError::Setup(format!("posting SEND {i}: {e}")))?;
        self.ep.sq.ring().map_err(|e| InteropError::Setup(format!("ringing for SEND {i}: {e}")))?;
        match self.host.wait(&mut self.ep, false, self.opts.timeout, &format!("SEND {i}"))? {
            Completion::Requester { wqe_opcode: WqeOpcode::SEND, wqe_counter, byte_cnt, .. }
                if wqe_counter == index && byte_cnt as usize == self.opts.size =>
            {
                self.ep.sq.complete_through(index, u32::from(built.wqebbs));
                Ok(data)
            }
            other => Err(InteropError::Completion(format!(
                "SEND {i}: expected the SEND completion of WQE {index:#06x} with byte_cnt {}; got {other:?}",
                self.opts.size
            ))),
        }
    }

    /// Wait for a receive and check it holds `want`; repost it.
    fn receive(&mut self, i: usize, want: &[u8]) -> Result<(), InteropError> {
        let c = self.host.wait(&mut self.ep, true, self.opts.timeout, &format!("receive {i}"))?;
        match c {
            Completion::Responder { opcode: CqeOpcode::RESP_SEND, byte_cnt, wqe_counter, .. }
                if byte_cnt as usize == self.opts.size =>
            {
                self.ep.rq.complete(wqe_counter);
            }
            other => {
                return Err(InteropError::Completion(format!(
                    "receive {i}: expected RESP_SEND with byte_cnt {}; got {other:?}",
                    self.opts.size
                )));
            }
        }
        let mut got = vec![0u8; self.opts.size];
        self.ep.buf.read_bytes(RECV_OFF, &mut got).map_err(|e| InteropError::Setup(e.to_string()))?;
        if let Some(at) = got.iter().zip(want).position(|(g, w)| g != w) {
            return Err(InteropError::Mismatch(format!(
                "message {i}: byte {at} is {:#04x}, the tool must have sent {:#04x} (of {} bytes)",
                got[at], want[at], self.opts.size
            )));
        }
        self.post_recv()
    }
}

fn exchange_err(what: &str) -> impl FnOnce(std::io::Error) -> InteropError + '_ {
    move |e| InteropError::Exchange(format!("{what}: {e}"))
}

fn setup<'a>(host: &'a mut Host, opts: Options) -> Result<Session<'a>, InteropError> {
    if opts.size == 0 || opts.size > 1 << 20 {
        return Err(InteropError::Setup(format!("size {} is not in 1..=1 MiB", opts.size)));
    }
    let ep = host.endpoint(buf_len(opts.size))?;
    let seed = fastrand::u64(..);
    let mut s = Session { host, ep, opts, seed };
    for _ in 0..opts.iters.clamp(1, 32) {
        s.post_recv()?;
    }
    Ok(s)
}

fn local(s: &Session<'_>, psn: u32) -> Dest {
    Dest { lid: 0, qpn: s.ep.qpn, psn, gid: s.host.gid() }
}

/// marrow as the server: accept one `ibv_rc_pingpong <host>` on `listener`.
pub fn serve(host: &mut Host, listener: &TcpListener, opts: Options) -> Result<Report, InteropError> {
    let mut sock = crate::host::accept(listener, opts.deadline, opts.timeout)?;
    let mut msg = [0u8; MSG_LEN];
    sock.read_exact(&mut msg).map_err(exchange_err("reading the client's address"))?;
    let peer = Dest::parse(&msg)?;
    let psn = fastrand::u32(..=BTH_PSN_MASK);
    let mut s = setup(host, opts)?;
    let me = local(&s, psn);
    s.host.connect(&s.ep, peer.qpn, s.host.attrs(peer.gid, opts.mtu, psn, peer.psn))?;
    sock.write_all(&me.to_wire()).map_err(exchange_err("writing our address"))?;
    let mut done = [0u8; DONE.len()];
    sock.read_exact(&mut done).map_err(exchange_err("reading the client's \"done\""))?;
    if &done != DONE {
        return Err(InteropError::Exchange(format!("expected \"done\", got {done:02x?}")));
    }
    let t0 = Instant::now();
    let mut want = vec![FIRST_FILL; opts.size];
    for i in 0..opts.iters {
        s.receive(i, &want)?;
        want = s.send(i)?;
    }
    Ok(Report { checked: opts.iters, bytes: (opts.iters * opts.size) as u64, peer, local: me, elapsed: t0.elapsed() })
}

/// marrow as the client of an `ibv_rc_pingpong` server at `server`,
/// retrying the connection until the server listens (or the deadline).
pub fn connect(host: &mut Host, server: SocketAddr, opts: Options) -> Result<Report, InteropError> {
    let start = Instant::now();
    let psn = fastrand::u32(..=BTH_PSN_MASK);
    let mut s = setup(host, opts)?;
    let me = local(&s, psn);
    // Through QEMU's user-mode forwarding the host side connects at once;
    // a guest that is not listening yet shows as a closed connection.
    let (mut sock, peer) = loop {
        let attempt = || -> Result<(TcpStream, Dest), InteropError> {
            let mut sock = TcpStream::connect_timeout(&server, opts.timeout).map_err(exchange_err("connecting"))?;
            sock.set_read_timeout(Some(opts.timeout)).map_err(InteropError::io("socket"))?;
            sock.write_all(&me.to_wire()).map_err(exchange_err("writing our address"))?;
            let mut msg = [0u8; MSG_LEN];
            sock.read_exact(&mut msg).map_err(exchange_err("reading the server's address"))?;
            Ok((sock, Dest::parse(&msg)?))
        };
        match attempt() {
            Ok(x) => break x,
            Err(e) if start.elapsed() < opts.deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(250));
            }
            Err(e) => return Err(e),
        }
    };
    s.host.connect(&s.ep, peer.qpn, s.host.attrs(peer.gid, opts.mtu, psn, peer.psn))?;
    sock.write_all(DONE).map_err(exchange_err("writing \"done\""))?;
    let t0 = Instant::now();
    for i in 0..opts.iters {
        let sent = s.send(i)?;
        s.receive(i, &sent)?;
    }
    Ok(Report { checked: opts.iters, bytes: (opts.iters * opts.size) as u64, peer, local: me, elapsed: t0.elapsed() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_never_start_as_the_first_fill_and_differ_per_iteration() {
        for i in 0..300 {
            let p = pattern(7, i, 16);
            assert_ne!(p[0], FIRST_FILL);
            assert_ne!(p, pattern(7, i + 1, 16));
        }
        assert_eq!(buf_len(1), 8192);
        assert_eq!(send_off(65536), 65536);
    }
}
