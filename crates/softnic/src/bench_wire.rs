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
//! Both softnic instances live in this process, each with its own engine
//! and port threads, as two processes would run them.

use crate::bench::Figure;
use crate::pair::{Pair, PairConfig, PairWire};
use marrow_mlx5::raw::CompletionMode;
use marrow_mlx5::wqe::{CtrlParams, RemoteAddr, Sge, WqeOp};
use marrow_roce::opcode::{Operation, position, request_opcode};
use marrow_roce::packet::{Aeth, Packet, Reth};
use marrow_roce::raw::BthOpcode;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

const MTU: u32 = 4096;

fn addrs(n: u8) -> (Ipv4Addr, Ipv4Addr) {
    let net = (std::process::id() % 200) as u8 + 20;
    (Ipv4Addr::new(127, net, 240 + n, 1), Ipv4Addr::new(127, net, 240 + n, 2))
}

fn pair(n: u8, batch: usize, size: usize) -> Pair {
    let (a, b) = addrs(n);
    let mut w = PairWire::udp(a, b, 4791);
    w.attrs.path_mtu = MTU;
    let cfg = PairConfig { sq_wqebbs: batch as u32, ncqe: 64, buf_len: size, wire: Some(w), ..PairConfig::default() };
    // Engines back off when idle (no spinning): on a 2-core machine the
    // port threads need the cores.
    Pair::new(cfg).expect("a pair over loopback UDP")
}

/// Post `batch` WRITEs of `size` bytes, the last one signaled, and time them
/// until its CQE: every earlier one has been acknowledged by then.
fn time_writes(p: &mut Pair, batch: usize, size: usize) -> Duration {
    let sgl = [Sge { addr: p.a.addr, length: size as u32, lkey: p.a.lkey }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey }, sgl: &sgl };
    let quiet = CtrlParams { completion: CompletionMode::CQE_ON_CQE_ERROR, ..CtrlParams::signaled(0, 0) };
    let start = Instant::now();
    for i in 0..batch {
        let c = if i + 1 == batch { CtrlParams::signaled(0, 0) } else { quiet };
        p.a.sq.post(c, &op).expect("ring sized for the batch");
    }
    p.a.sq.ring().expect("doorbell");
    // Poll with a nap between looks: a batch takes milliseconds, and on a
    // 2-core machine a spinning waiter takes a core from the ports (the
    // floor's receiver blocks in the kernel instead).
    let c = loop {
        if let Some(c) = p.a.scq.poll().expect("CQ") {
            break c;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "benchmark WRITEs: no CQE in 30 s");
        std::thread::sleep(Duration::from_micros(20));
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
        crate::rc::port::grow_buffers(s);
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

fn best_of<F: FnMut() -> Duration>(runs: usize, mut f: F) -> Duration {
    (0..runs).map(|_| f()).min().unwrap_or_default()
}

/// 8-byte RDMA_WRITEs per second across the wire, and the floor.
pub fn wire_rate(batch: usize, runs: usize) -> Figure {
    let mut p = pair(0, batch, 4096);
    let t = best_of(runs, || time_writes(&mut p, batch, 8));
    drop(p);
    let (sizes, ack) = shape(8);
    let tf = best_of(runs, || udp_floor(0, batch, &sizes, ack));
    Figure {
        name: "8 B RDMA_WRITE over RoCEv2/UDP loopback",
        rate: batch as f64 / t.as_secs_f64(),
        floor: batch as f64 / tf.as_secs_f64(),
        unit: "msg/s",
        floor_name: "40 B datagram out, 20 B back, send_to/recv_from, 2 threads",
        target: ">= 0.5x floor",
    }
}

/// 64 KiB RDMA_WRITE bandwidth across the wire at MTU 4096, and the floor.
pub fn wire_bandwidth(size: usize, batch: usize, runs: usize) -> Figure {
    let mut p = pair(1, batch, size);
    p.a.buf.fill(0, size, 0x5a).expect("fill");
    let t = best_of(runs, || time_writes(&mut p, batch, size));
    drop(p);
    let (sizes, ack) = shape(size);
    let tf = best_of(runs, || udp_floor(1, batch, &sizes, ack));
    Figure {
        name: "64 KiB RDMA_WRITE over RoCEv2/UDP, MTU 4096",
        rate: (batch * size) as f64 / t.as_secs_f64(),
        floor: (batch * size) as f64 / tf.as_secs_f64(),
        unit: "B/s",
        floor_name: "the same datagrams (16 x ~4 KiB + 20 B back), 2 threads",
        target: ">= 0.8x floor",
    }
}
