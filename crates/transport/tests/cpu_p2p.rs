//! Transport P2P run by CPU threads: the same device code that GPU threads
//! run between peer-mapped GPU windows, here between two shared-memory
//! windows of one process, so CI checks what the two-GPU run relies on:
//! windows and offsets, put/get bytes, atomics' fetched values, put_signal's
//! ordering, value puts, wait timeouts decoded into the GCRB.

use marrow_gcrb::{GcrbStatus, GcrbWait};
use marrow_softnic::Shm;
use marrow_transport::cpu::Device;
use marrow_transport::{DeviceError, gcrb_page, p2p};

const WIN: usize = 1 << 20;

/// Two windows and, for each PE, a GCRB that names both.
struct Pair {
    wins: [Shm; 2],
    pages: [Shm; 2],
}

impl Pair {
    fn new(timeout_ns: u64) -> Pair {
        let wins = [Shm::create("p2p-w0", WIN).unwrap(), Shm::create("p2p-w1", WIN).unwrap()];
        let pages = [Shm::create("p2p-g0", 4096).unwrap(), Shm::create("p2p-g1", 4096).unwrap()];
        let keys = [(wins[0].region().base_addr() as u64, WIN as u64), (wins[1].region().base_addr() as u64, WIN as u64)];
        for pe in 0..2 {
            let setup = p2p::P2pSetup { local: (keys[pe].0, WIN as u64), keys, timeout_ns };
            p2p::fill(&pages[pe].region(), &setup).unwrap();
        }
        Pair { wins, pages }
    }

    fn dev(&self, pe: usize) -> Device {
        Device::on_page(&self.pages[pe].region())
    }
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
        w.wins[1].region().read_bytes(roff as usize - usize::from(roff > 0), &mut got[..len as usize + usize::from(roff > 0)]).unwrap();
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
    assert_eq!(d0.wait_until_ge(8, 1), Err(DeviceError(-110)));
    let err = gcrb_page::error(&w.pages[0].region()).unwrap();
    assert_eq!(GcrbStatus(err.status()), GcrbStatus::TIMEOUT);
    assert_eq!(GcrbWait(err.wait()), GcrbWait::SIGNAL);
    assert!(err.elapsed_ns() >= 50_000_000);
    // Sticky: the channel reports it rather than going on.
    assert_eq!(d0.put(1, 0, 0, 8), Ok(()), "P2P puts do not consult the status");
    assert_eq!(d0.quiet(), Err(DeviceError(-110)));
}

#[test]
fn windows_are_enforced() {
    let w = Pair::new(1_000_000_000);
    let d0 = w.dev(0);
    assert_eq!(d0.put(1, 0, WIN as u64 - 4, 8), Err(DeviceError(-34)), "source past the local window");
    assert_eq!(d0.put(2, 0, 0, 8), Err(DeviceError(-34)), "PE outside the key table");
    assert_eq!(d0.put(1, WIN as u64 - 4, 0, 8), Err(DeviceError(-34)), "destination past the peer's window");
    assert_eq!(d0.get(1, WIN as u64, 0, 1), Err(DeviceError(-34)), "source past the peer's window");
    assert_eq!(d0.fetch_add(1, WIN as u64 - 4, 1, 0), Err(DeviceError(-34)), "atomic word past the peer's window");
    assert_eq!(d0.put(1, WIN as u64 - 8, 0, 8), Ok(()), "the last 8 bytes are in");
    assert_eq!(d0.fetch_add(1, 0, 1, WIN as u64), Err(DeviceError(-34)), "result slot past the window");
}

#[test]
fn value_puts_are_refused_on_mlx5_by_name() {
    let world = marrow_transport::World::new(marrow_transport::WorldConfig::default()).unwrap();
    let e = Device::new(&world.channels[0]).p(1, 0, 5).unwrap_err();
    assert_eq!(e, DeviceError(-95));
    assert!(e.to_string().contains("inline"), "{e}");
}
