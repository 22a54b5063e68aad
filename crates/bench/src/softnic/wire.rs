//! The RC transport's figures over loopback UDP (`marrow bench softnic
//! --wire udp`), each against a floor measured in the same run: two threads
//! on two sockets of the same loopback addresses moving datagrams of the
//! same sizes, with the same system calls (`send_to`, `recv_from`), in the
//! same shape (requests one way; one ACK-sized reply per message back).
//!
//! - 8 B RDMA_WRITE message rate: each WRITE is one 40-byte datagram (BTH,
//!   RETH, 8 bytes, ICRC) and its ACK one of 20 bytes (BTH, AETH, ICRC);
//! - 64 KiB RDMA_WRITE bandwidth at path MTU 4096: 16 datagrams of about
//!   4 KiB and one ACK per message.
//!
//! B's softnic is another process (`marrow softnic`, [`marrow_softnic::peer`]) when
//! the caller gives the executable, as `marrow bench softnic --wire udp`
//! does; otherwise both instances live in this process, each with its own
//! engine and port threads. Measured runs and floor runs take turns, and
//! while the floor runs the pair's engines are stopped (B's process with
//! SIGSTOP), so both see the same phases of a shared machine and the floor
//! has its cores to itself.

use super::figures::Figure;
use marrow_roce::opcode::{Operation, position, request_opcode};
use marrow_roce::packet::{Aeth, Packet, Reth};
use marrow_roce::raw::BthOpcode;
use marrow_softnic::pair::{Pair, PairConfig, PairWire};
use marrow_softnic::peer::PeerDaemon;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

const MTU: u32 = 4096;

fn addrs(n: u8) -> (Ipv4Addr, Ipv4Addr) {
    let net = (std::process::id() % 200) as u8 + 20;
    (Ipv4Addr::new(127, net, 240 + n, 1), Ipv4Addr::new(127, net, 240 + n, 2))
}

/// A pair on addresses `n`, B in `peer`'s process if there is one.
fn pair(n: u8, batch: usize, size: usize, peer: Option<&PeerDaemon>) -> Pair {
    let (a, b) = addrs(n);
    let mut w = PairWire::udp(a, b, 4791);
    w.attrs.path_mtu = MTU;
    w.b_daemon = peer.map(|d| d.socket.clone());
    let cfg = PairConfig { sq_wqebbs: batch as u32, ncqe: 64, buf_len: size, wire: Some(w), ..PairConfig::default() };
    // Engines back off when idle (no spinning): on a 2-core machine the
    // port threads need the cores.
    Pair::new(cfg).expect("a pair over loopback UDP")
}

/// Post `batch` WRITEs of `size` bytes, the last one signaled, and time them
/// until its CQE: every earlier one has been acknowledged by then.
fn time_writes(p: &mut Pair, batch: usize, size: usize) -> Duration {
    let start = Instant::now();
    super::post_writes(p, size, batch).expect("ring sized for the batch");
    // Poll with a nap between looks: a batch takes milliseconds, and on a
    // 2-core machine a spinning waiter takes a core from the ports (the
    // floor's receiver blocks in the kernel instead). Each look is a wakeup
    // that preempts a port or engine thread, so a batch of long messages
    // is looked at less often; a nap is a small part of its time.
    let nap = Duration::from_micros(if size > MTU as usize { 100 } else { 20 });
    let c = loop {
        if let Some(c) = p.a.scq.poll().expect("CQ") {
            break c;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "benchmark WRITEs: no CQE in 30 s");
        std::thread::sleep(nap);
    };
    match c {
        marrow_mlx5::cqe::Completion::Requester { wqe_counter, .. } => p.a.sq.complete_through(wqe_counter, 1),
        other => panic!("benchmark WRITEs failed: {other:?}"),
    }
    start.elapsed()
}

/// Datagram bytes of each packet of a `size`-byte WRITE at `MTU`, and of its ACK.
fn shape(size: usize) -> (Vec<usize>, usize) {
    let data = vec![0u8; size];
    let n = (size as u32).div_ceil(MTU).max(1) as usize;
    let mut sizes = Vec::new();
    for i in 0..n {
        let pos = position(i, n);
        let chunk = &data[(i * MTU as usize).min(size)..((i + 1) * MTU as usize).min(size)];
        let p = Packet {
            ack_req: pos.ends(),
            reth: pos.starts().then_some(Reth { va: 0, rkey: 0, len: size as u32 }),
            payload: chunk,
            ..Packet::bare(request_opcode(Operation::Write, pos, false), 0, 0)
        };
        sizes.push(p.wire_len() + 4);
    }
    let ack = Packet { aeth: Some(Aeth::ack(0)), ..Packet::bare(BthOpcode::ACKNOWLEDGE, 0, 0) };
    (sizes, ack.wire_len() + 4)
}

/// The floor: `msgs` messages of datagrams `sizes` from A to B, B answering
/// each message's last datagram with one of `reply` bytes, on sockets bound
/// like the ports (loopback addresses, buffers grown the same way). Timed
/// from the first send to the last reply received.
fn udp_floor(n: u8, msgs: usize, sizes: &[usize], reply: usize) -> Duration {
    let (ip_a, ip_b) = addrs(n);
    let a = UdpSocket::bind(SocketAddrV4::new(ip_a, 4792)).expect("bind A");
    let b = UdpSocket::bind(SocketAddrV4::new(ip_b, 4792)).expect("bind B");
    for s in [&a, &b] {
        marrow_softnic::rc::port::grow_buffers(s);
        s.set_read_timeout(Some(Duration::from_secs(2))).expect("timeout");
    }
    let (to_b, to_a) = (b.local_addr().expect("B"), a.local_addr().expect("A"));
    let per = sizes.len();
    let responder = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let ack = vec![0u8; reply];
        for i in 0..msgs * per {
            if b.recv_from(&mut buf).is_err() {
                return; // lost: the floor run shows it as slow, not hung
            }
            if i % per == per - 1 {
                let _ = b.send_to(&ack, to_a);
            }
        }
    });
    let rx = a.try_clone().expect("clone A");
    let start = Instant::now();
    let receiver = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        for _ in 0..msgs {
            if rx.recv_from(&mut buf).is_err() {
                break;
            }
        }
        start.elapsed()
    });
    let bufs: Vec<Vec<u8>> = sizes.iter().map(|&s| vec![0x5a; s]).collect();
    for _ in 0..msgs {
        for d in &bufs {
            let _ = a.send_to(d, to_b);
        }
    }
    let t = receiver.join().expect("receiver");
    let _ = responder.join();
    t
}

/// Time the floor with `p`'s engines stopped (B's process, if it is one,
/// stopped by SIGSTOP), so that no idle engine of the pair wakes up on the
/// floor's cores.
fn floor_alone(p: &mut Pair, peer: Option<&PeerDaemon>, floor: impl FnOnce() -> Duration) -> Duration {
    use nix::sys::signal::{Signal, kill};
    let pid = peer.map(|d| nix::unistd::Pid::from_raw(d.child.id() as i32));
    p.nic.stop();
    if let Some(b) = &mut p.nic_b {
        b.stop();
    }
    if let Some(pid) = pid {
        let _ = kill(pid, Signal::SIGSTOP);
    }
    let t = floor();
    if let Some(pid) = pid {
        let _ = kill(pid, Signal::SIGCONT);
    }
    p.nic.start(1);
    if let Some(b) = &mut p.nic_b {
        b.start(1);
    }
    t
}

/// The best of `runs` timings of `measured` and of `floor`, taken in turn
/// (one of each per round), so that both see the same phases of a shared
/// machine: a burst of other work slows the rounds it falls in, not only
/// the one side that happened to run then.
fn best_of_interleaved(
    runs: usize,
    p: &mut Pair,
    peer: Option<&PeerDaemon>,
    mut measured: impl FnMut(&mut Pair) -> Duration,
    mut floor: impl FnMut() -> Duration,
) -> (Duration, Duration) {
    let (mut m, mut f) = (Duration::MAX, Duration::MAX);
    for _ in 0..runs.max(1) {
        m = m.min(measured(p));
        f = f.min(floor_alone(p, peer, &mut floor));
    }
    (m, f)
}

/// B's softnic: `marrow softnic` started from `exe` at B's address of pair
/// `n`, or `None` (B in this process) without an executable.
fn peer(n: u8, exe: Option<&Path>) -> Result<Option<PeerDaemon>, String> {
    exe.map(|exe| PeerDaemon::start(exe, addrs(n).1, 4791)).transpose()
}

/// What one figure measures: pair `n`, `batch` WRITEs of `size` bytes.
struct Run {
    n: u8,
    batch: usize,
    size: usize,
    runs: usize,
}

/// The best interleaved timings of `run` across the wire and of its floor,
/// and whether B was another process.
fn measure(run: &Run, exe: Option<&Path>) -> Result<(Duration, Duration, bool), String> {
    let Run { n, batch, size, runs } = *run;
    let d = peer(n, exe)?;
    let mut p = pair(n, batch, size.max(4096), d.as_ref());
    p.a.buf.fill(0, size, 0x5a).expect("fill");
    time_writes(&mut p, batch, size); // warm: spare buffers, pages, caches
    let (sizes, ack) = shape(size);
    let (t, tf) = best_of_interleaved(
        runs,
        &mut p,
        d.as_ref(),
        |p| time_writes(p, batch, size),
        || udp_floor(n, batch, &sizes, ack),
    );
    Ok((t, tf, d.is_some()))
}

/// 8-byte RDMA_WRITEs per second across the wire, and the floor; B in a
/// `marrow softnic` started from `exe`, if given.
pub fn wire_rate(batch: usize, runs: usize, exe: Option<&Path>) -> Result<Figure, String> {
    let (t, tf, two) = measure(&Run { n: 0, batch, size: 8, runs }, exe)?;
    Ok(Figure {
        name: if two {
            "8 B RDMA_WRITE over RoCEv2/UDP loopback, 2 processes"
        } else {
            "8 B RDMA_WRITE over RoCEv2/UDP loopback, 1 process"
        },
        rate: batch as f64 / t.as_secs_f64(),
        floor: batch as f64 / tf.as_secs_f64(),
        unit: "msg/s",
        floor_name: "40 B datagram out, 20 B back, send_to/recv_from, 2 threads",
        target: ">= 0.5x floor",
    })
}

/// 64 KiB RDMA_WRITE bandwidth across the wire at MTU 4096, and the floor;
/// B in a `marrow softnic` started from `exe`, if given.
pub fn wire_bandwidth(size: usize, batch: usize, runs: usize, exe: Option<&Path>) -> Result<Figure, String> {
    let (t, tf, two) = measure(&Run { n: 1, batch, size, runs }, exe)?;
    Ok(Figure {
        name: if two {
            "64 KiB RDMA_WRITE over RoCEv2/UDP, MTU 4096, 2 processes"
        } else {
            "64 KiB RDMA_WRITE over RoCEv2/UDP, MTU 4096, 1 process"
        },
        rate: (batch * size) as f64 / t.as_secs_f64(),
        floor: (batch * size) as f64 / tf.as_secs_f64(),
        unit: "B/s",
        floor_name: "the same datagrams (16 x ~4 KiB + 20 B back), 2 threads",
        target: ">= 0.8x floor",
    })
}
