//! Every opcode of `ops.rs` again across a raw Ethernet cable: each softnic
//! exchanges whole Ethernet/IPv4/UDP frames with the other over a UDP
//! socket, the form QEMU's `-netdev dgram` carries a virtual NIC's frames
//! in, and learns the other's MAC by ARP before the first RoCEv2 frame.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, PairWire, Side};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// Across the wire.
const WIRE: bool = true;

fn pair() -> Pair {
    static NEXT: AtomicU8 = AtomicU8::new(100);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let net = (std::process::id() % 200) as u8 + 20;
    let mut wire = PairWire::udp(Ipv4Addr::new(127, net, n, 1), Ipv4Addr::new(127, net, n, 2), 4791);
    wire.frames = true;
    // The first frame waits for ARP and goes again after the ACK timeout
    // (14: 67 ms). With 10 (4 ms) a loaded 2-core CI machine once let 8 of
    // them pass without an ACK: TRANSPORT_RETRY_EXC_ERR in the middle of the run.
    wire.attrs.timeout = 14;
    Pair::new(PairConfig { wire: Some(wire), ..PairConfig::default() }).unwrap()
}

include!("ops/cases.rs");

#[test]
fn arp_is_answered_before_the_first_frame() {
    let mut p = pair();
    post(WqeOp::RdmaWriteInline { remote: remote(&p, Side::B, 0), data: b"arp" }, &mut p);
    expect_ok(&mut p, WqeOpcode::RDMA_WRITE, 3);
    let (a, b) = (p.nic.port_counters(0).unwrap(), p.nic_of(Side::B).port_counters(0).unwrap());
    assert!(b.arp_replies >= 1, "B answered A's ARP request: {b:?}");
    assert_eq!((a.rx_bad_icrc, a.rx_malformed, b.rx_bad_icrc, b.rx_malformed), (0, 0, 0, 0), "{a:?} {b:?}");
}
