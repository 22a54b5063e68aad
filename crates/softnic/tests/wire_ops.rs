//! Every opcode of `ops.rs` again, with the responder on a second softnic
//! instance reached through RoCEv2 over loopback UDP: the same WQEs, CQEs
//! and bytes, now carried by the RC transport (`marrow_softnic::rc`). The
//! masked atomics, which have no wire form, are refused with
//! LOCAL_QP_OP_ERR.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, PairWire, Side};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// Across the wire.
const WIRE: bool = true;

/// A pair on its own two loopback addresses, so tests run side by side.
fn pair() -> Pair {
    static NEXT: AtomicU8 = AtomicU8::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let net = (std::process::id() % 200) as u8 + 20;
    let wire = PairWire::udp(Ipv4Addr::new(127, net, n, 1), Ipv4Addr::new(127, net, n, 2), 4791);
    Pair::new(PairConfig { wire: Some(wire), ..PairConfig::default() }).unwrap()
}

include!("ops/cases.rs");

/// A write with a wrong rkey: the responder NAKs with remote access error,
/// the requester's WQE ends in REMOTE_ACCESS_ERR, and both QPs are in ERR
/// afterwards (IBA 9.9.3.1 class C at the responder, as Linux rxe's
/// `do_class_ac_error`; the requester's QP after an error CQE).
#[test]
fn a_wrong_rkey_is_naked_and_both_qps_end_in_error() {
    use marrow_softnic::qp::QpState;
    let mut p = pair();
    let bad = RemoteAddr { rkey: p.b.rkey ^ 0x5a00, ..remote(&p, Side::B, 0) };
    let src = sge(&p, Side::A, 0, 64);
    post(WqeOp::RdmaWrite { remote: bad, sgl: &[src] }, &mut p);
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::REMOTE_ACCESS_ERR, "{e:?}"),
        c => panic!("expected REMOTE_ACCESS_ERR, got {c:?}"),
    }
    let state = |p: &Pair, s: Side| {
        let qpn = if s == Side::A { p.a.qpn } else { p.b.qpn };
        p.nic_of(s).hca().qp(qpn).unwrap().state
    };
    let t0 = std::time::Instant::now();
    while state(&p, Side::B) != QpState::Err && t0.elapsed() < T {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!((state(&p, Side::A), state(&p, Side::B)), (QpState::Err, QpState::Err));
}
