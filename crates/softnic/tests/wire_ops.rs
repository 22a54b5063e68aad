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
