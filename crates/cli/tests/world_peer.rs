//! A world whose PE 1 is another process: `marrow softnic` across RoCEv2 on
//! loopback UDP, driven by the same CPU device code as the GPU's (what
//! `marrow demo --gpu --wire udp` runs on a GPU). Every byte and fetched
//! value is read back from the memory the other process wrote.

use marrow_softnic::peer::PeerDaemon;
use marrow_transport::cpu::Device;
use marrow_transport::{WireOptions, WirePeer, World, WorldConfig};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

/// A world on a daemon at a loopback address of this test's own (`n`).
fn world(n: u8, pcap: Option<std::path::PathBuf>) -> (PeerDaemon, World) {
    let ip = Ipv4Addr::new(127, 79, (std::process::id() % 250) as u8, 2 + n);
    let d = PeerDaemon::start(Path::new(env!("CARGO_BIN_EXE_marrow")), ip, 4791).expect("the peer softnic");
    let cfg = WorldConfig { buf_len: 1 << 20, sq_wqebbs: 256, timeout: Duration::from_secs(5), ..Default::default() };
    let peer = WirePeer { socket: d.socket.clone(), ip };
    let w = World::over_wire(cfg, &WireOptions { peer: Some(peer), pcap }).expect("a world with PE 1 in the daemon");
    (d, w)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

#[test]
fn pe0_puts_gets_and_atomics_reach_the_other_process_and_pe1_puts_back() {
    let pcap = std::env::temp_dir().join(format!("marrow-world-peer-{}.pcap", std::process::id()));
    let (_d, w) = world(0, Some(pcap.clone()));
    assert!(w.peer_is_process());
    w.enable_peer_trace(1 << 20).expect("peer trace");
    let (a, b) = (w.bufs[0], w.bufs[1]);
    let dev = Device::new(&w.channels[0]);
    let report = |x| format!("{x}\n{}", w.channels[0].report());

    // A put of 64 KiB (64 packets at MTU 1024) lands in the daemon's mapping of PE 1's buffer.
    let want = pattern(64 << 10, 0x3c);
    a.write_bytes(0, &want).unwrap();
    dev.put(1, 4096, 0, want.len() as u32).map_err(report).unwrap();
    let mut got = vec![0u8; want.len()];
    b.read_bytes(4096, &mut got).unwrap();
    assert_eq!(got, want, "PE 1's bytes after PE 0's put");

    // A get reads what PE 1 holds.
    let far = pattern(8192, 0xa5);
    b.write_bytes(200 << 10, &far).unwrap();
    dev.get(1, 200 << 10, 300 << 10, far.len() as u32).map_err(report).unwrap();
    dev.quiet().map_err(report).unwrap();
    let mut got = vec![0u8; far.len()];
    a.read_bytes(300 << 10, &mut got).unwrap();
    assert_eq!(got, far, "PE 0's bytes after a get from PE 1");

    // Fetch-and-adds: each returns the value before it, and PE 1 holds the sum.
    b.write_8bytes(512 << 10, 1000u64.to_ne_bytes()).unwrap();
    for i in 0..10u64 {
        let old = dev.fetch_add(1, 512 << 10, 7, 600 << 10).map_err(report).unwrap();
        assert_eq!(old, 1000 + 7 * i, "fetch_add {i}'s fetched value");
    }
    assert_eq!(u64::from_ne_bytes(b.read_8bytes(512 << 10).unwrap()), 1070);

    // PE 1's own channel: the daemon's queues, mapped here, put back into PE 0.
    let back = pattern(4096, 0x77);
    b.write_bytes(700 << 10, &back).unwrap();
    let dev1 = Device::new(&w.channels[1]);
    dev1.put(0, 800 << 10, 700 << 10, back.len() as u32)
        .map_err(|x| format!("{x}\n{}", w.channels[1].report()))
        .unwrap();
    let mut got = vec![0u8; back.len()];
    a.read_bytes(800 << 10, &mut got).unwrap();
    assert_eq!(got, back, "PE 0's bytes after PE 1's put");

    // The daemon saw it all, and PE 0's port captured it.
    let trace = w.peer_trace().expect("the daemon's trace");
    let recs = marrow_softnic::trace::parse(&trace).0;
    let qpn = w.channels[1].qpn;
    let rang = recs.iter().any(|r| r.kind == marrow_softnic::trace::Kind::DOORBELL && r.qpn == qpn);
    assert!(rang, "the daemon's register trace has no doorbell on PE 1's QP {qpn:#x}");
    let c = w.nic.port_counters(0).expect("PE 0's port");
    assert!(c.tx > 64 && c.rx > 10, "PE 0's port counters: {c:?}");
    assert_eq!((c.rx_bad_icrc, c.rx_malformed, c.rx_no_qp), (0, 0, 0), "{c:?}");
    drop(w);
    let frames = std::fs::metadata(&pcap).map(|m| m.len()).unwrap_or(0);
    let _ = std::fs::remove_file(&pcap);
    assert!(frames > 64 * 1024, "the capture holds {frames} bytes, less than the put's payload");
}

#[test]
fn faults_on_a_pe1_in_another_process_are_refused_with_a_reason() {
    let (_d, w) = world(1, None);
    let err = w.set_faults(1, marrow_softnic::Faults::default()).unwrap_err().to_string();
    assert!(err.contains("another process"), "{err}");
}
