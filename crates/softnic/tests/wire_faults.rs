//! The RC transport under a bad wire: 1 % of packets dropped, 1 %
//! duplicated and 1 % reordered in both directions (and 0.2 % corrupted,
//! 0.2 % delayed 2 ms), and 10^4 mixed
//! operations (WRITE, READ, SEND, FETCH_ADD, COMPARE_SWAP; 8 B to 1 MiB)
//! all complete with every byte and every fetched value checked, no atomic
//! executed twice. Then the peer disappears: a WRITE ends in
//! TRANSPORT_RETRY_EXC_ERR after `retry_cnt` retransmissions, in the time
//! the `timeout` attribute gives, and the trace says so.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, PairWire, Side};
use marrow_softnic::rc::port::WireFaults;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);
const COUNTER: usize = (2 << 20) - 64;
const SWAPPED: usize = COUNTER + 8;

fn wire(n: u8) -> PairWire {
    let net = (std::process::id() % 200) as u8 + 20;
    PairWire::udp(Ipv4Addr::new(127, net, 210 + n, 1), Ipv4Addr::new(127, net, 210 + n, 2), 4791)
}

fn done(p: &mut Pair, s: Side, recv: bool, what: &str) -> u32 {
    match p.wait(s, recv, T) {
        Ok(Completion::Requester { byte_cnt, wqe_counter, .. }) => {
            // Every WQE here is one WQEBB; its slot is free again.
            p.a.sq.complete_through(wqe_counter, 1);
            byte_cnt
        }
        Ok(Completion::Responder { byte_cnt, wqe_counter, .. }) => {
            p.b.rq.complete(wqe_counter);
            byte_cnt
        }
        other => panic!("{what}: {other:?}"),
    }
}

#[test]
fn ten_thousand_mixed_operations_survive_drops_duplicates_and_reordering() {
    let mut w = wire(0);
    w.attrs.path_mtu = 4096;
    w.attrs.timeout = 12; // 16.8 ms: longer than a 1 MiB message takes to send
    w.faults = WireFaults {
        seed: 0x5eed,
        drop: 0.01,
        duplicate: 0.01,
        reorder: 0.01,
        corrupt: 0.002,
        delay_rate: 0.002,
        delay: Duration::from_millis(2),
        ..WireFaults::default()
    };
    let mut p = Pair::new(PairConfig { wire: Some(w), buf_len: 2 << 20, ..PairConfig::default() }).unwrap();
    let (ra, rb, lkey_a, lkey_b, rkey_b) = (p.a.addr, p.b.addr, p.a.lkey, p.b.lkey, p.b.rkey);
    let mut rng = fastrand::Rng::with_seed(7);
    let (mut fa, mut cs) = (0u64, 0u64);
    let mut counts = [0u32; 5];
    for i in 0..10_000u32 {
        let len = if i % 97 == 0 { 1 << 20 } else { 8usize << rng.u32(0..13) };
        let seed = rng.u8(..);
        let data: Vec<u8> = (0..len).map(|k| (k as u8).wrapping_mul(13) ^ seed).collect();
        let kind = rng.usize(0..5);
        counts[kind] += 1;
        let op_ctrl = CtrlParams::signaled(0, 0);
        match kind {
            0 => {
                p.a.buf.write_bytes(0, &data).unwrap();
                let sgl = [Sge { addr: ra, length: len as u32, lkey: lkey_a }];
                p.a.sq
                    .post(op_ctrl, &WqeOp::RdmaWrite { remote: RemoteAddr { raddr: rb, rkey: rkey_b }, sgl: &sgl })
                    .unwrap();
                p.a.sq.ring().unwrap();
                assert_eq!(done(&mut p, Side::A, false, "write"), len as u32);
                let mut got = vec![0; len];
                p.b.buf.read_bytes(0, &mut got).unwrap();
                assert!(got == data, "op {i}: WRITE of {len} bytes differs at the responder");
            }
            1 => {
                p.b.buf.write_bytes(0, &data).unwrap();
                let sgl = [Sge { addr: ra + (1 << 20), length: len.min(1 << 20) as u32, lkey: lkey_a }];
                let len = sgl[0].length as usize;
                p.a.sq
                    .post(op_ctrl, &WqeOp::RdmaRead { remote: RemoteAddr { raddr: rb, rkey: rkey_b }, sgl: &sgl })
                    .unwrap();
                p.a.sq.ring().unwrap();
                assert_eq!(done(&mut p, Side::A, false, "read"), len as u32);
                let mut got = vec![0; len];
                p.a.buf.read_bytes(1 << 20, &mut got).unwrap();
                assert!(got == data[..len], "op {i}: READ of {len} bytes differs at the requester");
            }
            2 => {
                let len = len.min(1 << 16);
                p.a.buf.write_bytes(0, &data[..len]).unwrap();
                p.b.rq.post(&[Sge { addr: rb + (1 << 20), length: 1 << 16, lkey: lkey_b }]).unwrap();
                let sgl = [Sge { addr: ra, length: len as u32, lkey: lkey_a }];
                p.a.sq.post(op_ctrl, &WqeOp::Send { sgl: &sgl }).unwrap();
                p.a.sq.ring().unwrap();
                assert_eq!(done(&mut p, Side::A, false, "send"), len as u32);
                assert_eq!(done(&mut p, Side::B, true, "receive"), len as u32);
                let mut got = vec![0; len];
                p.b.buf.read_bytes(1 << 20, &mut got).unwrap();
                assert!(got == data[..len], "op {i}: SEND of {len} bytes differs in the receive buffer");
            }
            3 => {
                let local = Sge { addr: ra + COUNTER as u64, length: 8, lkey: lkey_a };
                let remote = RemoteAddr { raddr: rb + COUNTER as u64, rkey: rkey_b };
                p.a.sq.post(op_ctrl, &WqeOp::AtomicFa { remote, local, add: 1 }).unwrap();
                p.a.sq.ring().unwrap();
                done(&mut p, Side::A, false, "fetch-add");
                let mut v = [0u8; 8];
                p.a.buf.read_bytes(COUNTER, &mut v).unwrap();
                assert_eq!(u64::from_ne_bytes(v), fa, "op {i}: FETCH_ADD fetched a value out of sequence");
                fa += 1;
            }
            _ => {
                let local = Sge { addr: ra + SWAPPED as u64, length: 8, lkey: lkey_a };
                let remote = RemoteAddr { raddr: rb + SWAPPED as u64, rkey: rkey_b };
                p.a.sq.post(op_ctrl, &WqeOp::AtomicCs { remote, local, compare: cs, swap: cs + 1 }).unwrap();
                p.a.sq.ring().unwrap();
                done(&mut p, Side::A, false, "compare-swap");
                let mut v = [0u8; 8];
                p.a.buf.read_bytes(SWAPPED, &mut v).unwrap();
                assert_eq!(u64::from_ne_bytes(v), cs, "op {i}: COMPARE_SWAP fetched a value out of sequence");
                cs += 1;
            }
        }
    }
    // Each atomic ran exactly once at the responder.
    let word = |off: usize| {
        let mut v = [0u8; 8];
        p.b.buf.read_bytes(off, &mut v).unwrap();
        u64::from_ne_bytes(v)
    };
    assert_eq!((word(COUNTER), word(SWAPPED)), (fa, cs));
    // Packets held back or delayed by the faults reach the far end within
    // 20 ms (the send threads' idle wait); let them land before counting.
    std::thread::sleep(Duration::from_millis(200));
    let (a, b) = (p.nic.port_counters(0).unwrap(), p.nic_of(Side::B).port_counters(0).unwrap());
    println!("ops (write, read, send, fetch-add, compare-swap): {counts:?}");
    println!("A's port: {a:?}");
    println!("B's port: {b:?}");
    for c in [a, b] {
        assert!(c.dropped > 0 && c.duplicated > 0 && c.reordered > 0 && c.corrupted > 0, "faults were applied: {c:?}");
    }
    // Corrupted packets were caught: by their ICRC, or, when the flipped bit
    // is in the BTH's QP number, as no QP connected to the sender. No intact
    // packet failed its ICRC: at most every corrupted one and its duplicate
    // did. (Not every corrupted packet need arrive: the kernel may drop a
    // datagram when a socket buffer is full, so there is no lower bound.)
    for (sent, got) in [(a, b), (b, a)] {
        assert!(got.rx_bad_icrc > 0 && got.rx_malformed == 0, "{got:?}");
        assert!(got.rx_bad_icrc + got.rx_no_qp <= 2 * sent.corrupted, "sent {sent:?}, received {got:?}");
    }
}

#[test]
fn a_vanished_peer_ends_in_transport_retry_exceeded_after_the_timeout() {
    let mut w = wire(1);
    w.attrs.timeout = 12; // 16.8 ms
    w.attrs.retry_cnt = 3;
    let mut p = Pair::new(PairConfig { wire: Some(w), trace: Some(1 << 20), ..PairConfig::default() }).unwrap();
    drop(p.nic_b.take());
    let sgl = [Sge { addr: p.a.addr, length: 64, lkey: p.a.lkey }];
    let remote = RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey };
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWrite { remote, sgl: &sgl }).unwrap();
    p.a.sq.ring().unwrap();
    let start = Instant::now();
    let e = match p.wait(Side::A, false, T).unwrap() {
        Completion::Error(e) => e,
        c => panic!("{c:?}"),
    };
    let took = start.elapsed();
    assert_eq!(e.syndrome, Syndrome::TRANSPORT_RETRY_EXC_ERR, "{e:?}");
    // The first try and 3 retries, each waiting 4.096 µs × 2^12.
    let timeout = Duration::from_nanos(4096 << 12);
    assert!(took >= timeout * 4 && took < timeout * 4 + Duration::from_secs(2), "took {took:?}");
    let counters = p.nic.port_counters(0).unwrap();
    assert_eq!(counters.tx, 4, "one send and 3 retransmissions: {counters:?}");
    let (recs, _) = marrow_softnic::trace::parse(&p.nic.trace_bytes().unwrap());
    let why: Vec<String> = recs
        .iter()
        .filter(|r| r.kind == marrow_softnic::trace::Kind::WQE_ERROR)
        .map(|r| String::from_utf8_lossy(&r.bytes).into_owned())
        .collect();
    assert!(why.iter().any(|w| w.contains("TRANSPORT_RETRY_EXC_ERR") && w.contains("3 retries")), "{why:?}");
}

#[test]
fn a_64_mib_write_and_read_go_through_the_send_window() {
    // 65536 packets at MTU 1024: far more than the far end's socket buffer
    // holds, so the requester's window and the READ's resumption carry it.
    let len = 64usize << 20;
    let mut p = Pair::new(PairConfig { wire: Some(wire(2)), buf_len: 2 * len, ..PairConfig::default() }).unwrap();
    let data: Vec<u8> = (0..len).map(|k| (k as u8).wrapping_mul(7) ^ (k >> 12) as u8).collect();
    p.a.buf.write_bytes(0, &data).unwrap();
    let (ra, rb) = (p.a.addr, p.b.addr);
    let sgl = [Sge { addr: ra, length: len as u32, lkey: p.a.lkey }];
    let remote = RemoteAddr { raddr: rb, rkey: p.b.rkey };
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWrite { remote, sgl: &sgl }).unwrap();
    p.a.sq.ring().unwrap();
    assert_eq!(done(&mut p, Side::A, false, "64 MiB write"), len as u32);
    let mut got = vec![0u8; len];
    p.b.buf.read_bytes(0, &mut got).unwrap();
    assert!(got == data, "the 64 MiB WRITE differs at the responder");
    let sgl = [Sge { addr: ra + len as u64, length: len as u32, lkey: p.a.lkey }];
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaRead { remote, sgl: &sgl }).unwrap();
    p.a.sq.ring().unwrap();
    assert_eq!(done(&mut p, Side::A, false, "64 MiB read"), len as u32);
    p.a.buf.read_bytes(len, &mut got).unwrap();
    assert!(got == data, "the 64 MiB READ differs at the requester");
}
