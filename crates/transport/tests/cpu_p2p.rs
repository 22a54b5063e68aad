//! Transport P2P run by CPU threads: the same device code that GPU threads
//! run between peer-mapped GPU windows, here between two shared-memory
//! windows of one process, so CI checks what the two-GPU run relies on:
//! windows and offsets, put/get bytes, atomics' fetched values, put_signal's
//! ordering, value puts, wait timeouts decoded into the GCRB.

use marrow_gcrb::{GcrbStatus, GcrbWait};
use marrow_softnic::Shm;
use marrow_transport::cpu::Device;
use marrow_transport::p2p_relay::{MemcpyEngine, Relay, RelayBounds, RelayError};
use marrow_transport::{DeviceError, DeviceStatus, gcrb_page, p2p};

const WIN: usize = 1 << 20;

/// Two windows and, for each PE, a GCRB that names both; with a relay,
/// PE 0's GCRB names a relay ring too.
struct Pair {
    wins: [Shm; 2],
    pages: [Shm; 2],
    ring: Shm,
}

impl Pair {
    fn new(timeout_ns: u64) -> Pair {
        Pair::build(timeout_ns, None)
    }

    /// PE 0 hands puts of at least `min_kib` KiB to a relay ring of
    /// `entries` descriptors (no relay thread yet: see `start_relay`).
    fn with_relay(timeout_ns: u64, entries: u32, min_kib: u32) -> Pair {
        Pair::build(timeout_ns, Some((entries, min_kib)))
    }

    fn build(timeout_ns: u64, relay: Option<(u32, u32)>) -> Pair {
        let wins = [Shm::create("p2p-w0", WIN).unwrap(), Shm::create("p2p-w1", WIN).unwrap()];
        let pages = [Shm::create("p2p-g0", 4096).unwrap(), Shm::create("p2p-g1", 4096).unwrap()];
        let ring = Shm::create("p2p-ring", 4096).unwrap();
        let keys =
            [(wins[0].region().base_addr() as u64, WIN as u64), (wins[1].region().base_addr() as u64, WIN as u64)];
        for pe in 0..2 {
            let relay = relay.filter(|_| pe == 0).map(|(entries, min_kib)| p2p::RelaySetup {
                ring: ring.region().base_addr() as u64,
                entries,
                min_kib,
            });
            let setup = p2p::P2pSetup { local: (keys[pe].0, WIN as u64), keys, timeout_ns, relay };
            p2p::fill(&pages[pe].region(), &setup).unwrap();
        }
        Pair { wins, pages, ring }
    }

    fn dev(&self, pe: usize) -> Device {
        Device::on_page(&self.pages[pe].region())
    }

    /// PE 0's relay thread, copying with memcpy.
    fn start_relay(&self, entries: u32) -> Relay {
        let win = |pe: usize| (self.wins[pe].region().base_addr() as u64, WIN as u64);
        let bounds = RelayBounds { src: win(0), dst: vec![win(0), win(1)] };
        let engine =
            MemcpyEngine { windows: vec![self.wins[0].region(), self.wins[1].region()], page: self.pages[0].region() };
        Relay::start(self.ring.region(), entries, bounds, Box::new(engine)).unwrap()
    }

    /// PE 0's (descriptors handed over, copies made).
    fn relay_heads(&self) -> (u64, u64) {
        let h = gcrb_page::heads(&self.pages[0].region()).unwrap();
        (h.resv_head(), h.cons_idx())
    }
}

/// `len` bytes of a pattern seeded `seed`.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed).wrapping_add((i >> 9) as u8)).collect()
}

#[test]
fn puts_and_gets_move_exactly_the_bytes_asked() {
    let w = Pair::new(1_000_000_000);
    let d0 = w.dev(0);
    d0.check_config().unwrap();
    for (len, roff, loff) in [(1u32, 0u64, 0u64), (15, 3, 1), (16, 16, 32), (4099, 8192, 100), (65536, 4096, 65536)] {
        let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(len as u8)).collect();
        w.wins[0].region().write_bytes(loff as usize, &data).unwrap();
        w.wins[1].region().fill(0, WIN, 0xEE).unwrap();
        d0.put(1, roff, loff, len).unwrap();
        let mut got = vec![0u8; len as usize + 2];
        w.wins[1]
            .region()
            .read_bytes(roff as usize - usize::from(roff > 0), &mut got[..len as usize + usize::from(roff > 0)])
            .unwrap();
        let body = if roff > 0 { &got[1..=len as usize] } else { &got[..len as usize] };
        assert_eq!(body, &data[..], "put of {len} B at {roff}");
        if roff > 0 {
            assert_eq!(got[0], 0xEE, "the byte before the put is untouched");
        }
        let mut after = [0u8; 1];
        w.wins[1].region().read_bytes(roff as usize + len as usize, &mut after).unwrap();
        assert_eq!(after, [0xEE], "the byte after the put is untouched");
        // And back: PE 1 gets it into its own window elsewhere.
        let d1 = w.dev(1);
        d1.get(1, roff, 512 * 1024, len).unwrap();
        let mut back = vec![0u8; len as usize];
        w.wins[1].region().read_bytes(512 * 1024, &mut back).unwrap();
        assert_eq!(back, data);
    }
}

#[test]
fn atomics_fetch_what_was_there() {
    let w = Pair::new(1_000_000_000);
    let threads = 8u64;
    let per = 500u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let d = w.dev((t % 2) as usize);
            s.spawn(move || {
                let mut olds = Vec::new();
                for _ in 0..per {
                    olds.push(d.fetch_add(0, 64, 1, 128 + t * 8).unwrap());
                }
                olds
            });
        }
    });
    let mut counter = [0u8; 8];
    w.wins[0].region().read_bytes(64, &mut counter).unwrap();
    assert_eq!(u64::from_le_bytes(counter), threads * per);
    let d1 = w.dev(1);
    assert_eq!(d1.compare_swap(0, 64, 7, 99, 256).unwrap(), threads * per, "a failed compare returns the value");
    assert_eq!(d1.compare_swap(0, 64, threads * per, 99, 256).unwrap(), threads * per);
    w.wins[0].region().read_bytes(64, &mut counter).unwrap();
    assert_eq!(u64::from_le_bytes(counter), 99);
    let mut landed = [0u8; 8];
    w.wins[1].region().read_bytes(256, &mut landed).unwrap();
    assert_eq!(u64::from_le_bytes(landed), threads * per, "the fetched value lands in the local window too");
}

#[test]
fn put_signal_data_is_there_when_the_signal_is() {
    let w = Pair::new(2_000_000_000);
    let data: Vec<u8> = (0..60_000u32).map(|i| (i * 7 + (i >> 11)) as u8).collect();
    w.wins[0].region().write_bytes(0, &data).unwrap();
    std::thread::scope(|s| {
        let d1 = w.dev(1);
        let waiter = s.spawn(move || {
            for round in 1..=20u64 {
                d1.wait_until_ge(4096 * 64, round).unwrap();
            }
        });
        let d0 = w.dev(0);
        for _ in 0..20 {
            d0.put_signal(1, 0, 0, data.len() as u32, 4096 * 64, 1, 4096 * 65).unwrap();
        }
        d0.quiet().unwrap();
        waiter.join().unwrap();
    });
    let mut got = vec![0u8; data.len()];
    w.wins[1].region().read_bytes(0, &mut got).unwrap();
    assert_eq!(got, data);
}

#[test]
fn value_puts_ping_pong() {
    let w = Pair::new(2_000_000_000);
    let (d0, d1) = (w.dev(0), w.dev(1));
    std::thread::scope(|s| {
        s.spawn(move || {
            for i in 1..=200u64 {
                d1.wait_until_ge(8, i).unwrap();
                d1.p(0, 8, i).unwrap();
            }
        });
        for i in 1..=200u64 {
            d0.p(1, 8, i).unwrap();
            d0.wait_until_ge(8, i).unwrap();
        }
    });
}

#[test]
fn a_wait_nobody_answers_times_out_decoded() {
    let w = Pair::new(50_000_000);
    let d0 = w.dev(0);
    assert_eq!(d0.wait_until_ge(8, 1), Err(DeviceError::of(DeviceStatus::TIMEOUT)));
    let err = gcrb_page::error(&w.pages[0].region()).unwrap();
    assert_eq!(GcrbStatus(err.status()), GcrbStatus::TIMEOUT);
    assert_eq!(GcrbWait(err.wait()), GcrbWait::SIGNAL);
    assert!(err.elapsed_ns() >= 50_000_000);
    // Sticky: the channel reports it rather than going on.
    assert_eq!(d0.put(1, 0, 0, 8), Ok(()), "P2P puts do not consult the status");
    assert_eq!(d0.quiet(), Err(DeviceError::of(DeviceStatus::TIMEOUT)));
}

#[test]
fn windows_are_enforced() {
    let w = Pair::new(1_000_000_000);
    let d0 = w.dev(0);
    assert_eq!(
        d0.put(1, 0, WIN as u64 - 4, 8),
        Err(DeviceError::of(DeviceStatus::RANGE)),
        "source past the local window"
    );
    assert_eq!(d0.put(2, 0, 0, 8), Err(DeviceError::of(DeviceStatus::RANGE)), "PE outside the key table");
    assert_eq!(
        d0.put(1, WIN as u64 - 4, 0, 8),
        Err(DeviceError::of(DeviceStatus::RANGE)),
        "destination past the peer's window"
    );
    assert_eq!(d0.get(1, WIN as u64, 0, 1), Err(DeviceError::of(DeviceStatus::RANGE)), "source past the peer's window");
    assert_eq!(
        d0.fetch_add(1, WIN as u64 - 4, 1, 0),
        Err(DeviceError::of(DeviceStatus::RANGE)),
        "atomic word past the peer's window"
    );
    assert_eq!(d0.put(1, WIN as u64 - 8, 0, 8), Ok(()), "the last 8 bytes are in");
    assert_eq!(
        d0.fetch_add(1, 0, 1, WIN as u64),
        Err(DeviceError::of(DeviceStatus::RANGE)),
        "result slot past the window"
    );
}

#[test]
fn value_puts_are_refused_on_mlx5_by_name() {
    let world = marrow_transport::World::new(marrow_transport::WorldConfig::default()).unwrap();
    let e = Device::new(&world.channels[0]).p(1, 0, 5).unwrap_err();
    assert_eq!(e, DeviceError::of(DeviceStatus::UNSUPPORTED));
    assert!(e.to_string().contains("inline"), "{e}");
}

#[test]
fn large_puts_go_through_the_relay_and_small_ones_stay_stores() {
    let w = Pair::with_relay(2_000_000_000, 4, 4);
    let relay = w.start_relay(4);
    let d0 = w.dev(0);
    d0.check_config().unwrap();
    // Blocking: the bytes are there when put returns.
    let big = pattern(10_000, 1);
    w.wins[0].region().write_bytes(0, &big).unwrap();
    d0.put(1, 4096, 0, big.len() as u32).unwrap();
    let mut got = vec![0u8; big.len()];
    w.wins[1].region().read_bytes(4096, &mut got).unwrap();
    assert_eq!(got, big, "a blocking relayed put is complete when it returns");
    assert_eq!(w.relay_heads(), (1, 1));
    // Under relay_min_kib: the thread's own stores, no descriptor.
    d0.put(1, 0, 0, 4095).unwrap();
    assert_eq!(w.relay_heads(), (1, 1), "a 4095-byte put is not relayed");
    // Ten non-blocking puts through a ring of 4: the posts wait for room.
    for i in 0..10u64 {
        let data = pattern(8192, i as u8);
        w.wins[0].region().write_bytes(65536 + i as usize * 8192, &data).unwrap();
    }
    for i in 0..10u64 {
        d0.put_nbi(1, 131072 + i * 8192, 65536 + i * 8192, 8192).unwrap();
    }
    d0.quiet().unwrap();
    assert_eq!(w.relay_heads(), (11, 11), "quiet waits for every copy handed over");
    for i in 0..10u64 {
        let mut got = vec![0u8; 8192];
        w.wins[1].region().read_bytes(131072 + i as usize * 8192, &mut got).unwrap();
        assert_eq!(got, pattern(8192, i as u8), "relayed put {i}");
    }
    // A put to itself is relayed too (PE 0's window is in the key table).
    d0.put(0, 512 * 1024, 0, big.len() as u32).unwrap();
    let mut own = vec![0u8; big.len()];
    w.wins[0].region().read_bytes(512 * 1024, &mut own).unwrap();
    assert_eq!(own, big, "a relayed put to this PE");
    assert_eq!(relay.stop(), Ok(12));
}

#[test]
fn relayed_put_signals_come_after_their_data() {
    const SIG: u64 = WIN as u64 - 4096;
    let w = Pair::with_relay(2_000_000_000, 2, 16);
    let _relay = w.start_relay(2);
    let rounds = 12u64;
    let len = 60_000usize;
    std::thread::scope(|s| {
        let d1 = w.dev(1);
        let win1 = w.wins[1].region();
        let waiter = s.spawn(move || {
            for r in 1..=rounds {
                d1.wait_until_ge(SIG, r).unwrap();
                let mut got = vec![0u8; len];
                win1.read_bytes((r as usize - 1) * 65536, &mut got).unwrap();
                assert_eq!(got, pattern(len, r as u8), "round {r}: the data is there when the signal is");
            }
        });
        let d0 = w.dev(0);
        for r in 1..=rounds {
            let off = (r - 1) * 65536;
            w.wins[0].region().write_bytes(off as usize, &pattern(len, r as u8)).unwrap();
            d0.put_signal(1, off, off, len as u32, SIG, 1, SIG).unwrap();
        }
        waiter.join().unwrap();
    });
    assert_eq!(w.relay_heads(), (rounds, rounds));
}

#[test]
fn fence_keeps_a_later_store_behind_a_relayed_put() {
    let w = Pair::with_relay(2_000_000_000, 4, 4);
    let _relay = w.start_relay(4);
    let data = pattern(200_000, 9);
    w.wins[0].region().write_bytes(0, &data).unwrap();
    std::thread::scope(|s| {
        let d1 = w.dev(1);
        let win1 = w.wins[1].region();
        let reader = s.spawn(move || {
            d1.wait_until_ge(WIN as u64 - 8, 1).unwrap();
            let mut got = vec![0u8; data.len()];
            win1.read_bytes(0, &mut got).unwrap();
            got == pattern(200_000, 9)
        });
        let d0 = w.dev(0);
        d0.put_nbi(1, 0, 0, 200_000).unwrap();
        d0.fence();
        d0.p(1, WIN as u64 - 8, 1).unwrap();
        assert!(reader.join().unwrap(), "the flag stored after fence was seen before the relayed bytes");
    });
}

#[test]
fn without_a_relay_thread_waits_time_out_decoded() {
    let w = Pair::with_relay(30_000_000, 2, 4);
    let d0 = w.dev(0);
    // Two descriptors fit the ring; nobody takes them.
    d0.put_nbi(1, 0, 0, 8192).unwrap();
    d0.put_nbi(1, 8192, 8192, 8192).unwrap();
    // A third needs room that never comes.
    assert_eq!(d0.put_nbi(1, 16384, 16384, 8192), Err(DeviceError::of(DeviceStatus::TIMEOUT)));
    let page = w.pages[0].region();
    let err = gcrb_page::error(&page).unwrap();
    assert_eq!((GcrbStatus(err.status()), GcrbWait(err.wait())), (GcrbStatus::TIMEOUT, GcrbWait::RELAY));
    assert!(err.elapsed_ns() >= 30_000_000);
    let report = gcrb_page::report(&page);
    assert!(report.contains("wait RELAY"), "{report}");
    assert!(report.contains("3 handed over (resv_head), 0 copies made (cons_idx)"), "{report}");
    // Sticky: quiet reports it instead of waiting again.
    assert_eq!(d0.quiet(), Err(DeviceError::of(DeviceStatus::TIMEOUT)));
}

#[test]
fn the_relay_refuses_a_descriptor_outside_the_windows_and_copies_nothing() {
    let w = Pair::with_relay(2_000_000_000, 4, 4);
    // A descriptor the device code would never write: its destination is
    // PE 0's GCRB page, in no PE's window.
    let src = w.wins[0].region().base_addr() as u64;
    let dst = w.pages[0].region().base_addr() as u64;
    w.wins[0].region().fill(0, 4096, 0x5a).unwrap();
    let mut before = vec![0u8; 4096];
    w.pages[0].region().read_bytes(0, &mut before).unwrap();
    let mut d = vec![0u8; 32];
    for (i, v) in [1u64, dst, src, 4096].iter().enumerate() {
        d[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    w.ring.region().write_bytes(0, &d).unwrap();
    let relay = w.start_relay(4);
    let t = std::time::Instant::now();
    while relay.made() == 0 && t.elapsed() < std::time::Duration::from_millis(200) {
        std::thread::yield_now();
    }
    match relay.stop() {
        Err(RelayError::Refused { seq: 1, dst: d, len: 4096, why, .. }) => {
            assert_eq!(d, dst);
            assert!(why.contains("destination outside every PE's window"), "{why}");
        }
        other => panic!("the relay said {other:?}"),
    }
    let mut after = vec![0u8; 4096];
    w.pages[0].region().read_bytes(0, &mut after).unwrap();
    assert_eq!(after, before, "nothing copied, no copy counted");
}

#[test]
fn a_relay_ring_whose_size_is_not_a_power_of_two_is_refused() {
    let w = Pair::with_relay(1_000_000_000, 3, 4);
    assert_eq!(w.dev(0).check_config(), Err(DeviceError::of(DeviceStatus::BAD_CONFIG)));
    let bounds = RelayBounds { src: (0, 0), dst: vec![] };
    let engine = MemcpyEngine { windows: vec![], page: w.pages[0].region() };
    assert!(Relay::start(w.ring.region(), 3, bounds, Box::new(engine)).is_err());
}
