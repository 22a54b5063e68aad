//! The device code (`kernels/include/marrow/device.h`) run by CPU threads
//! against the softnic: many threads, tiny rings that force wraparound, every
//! operation checked against values computed here, and every injected fault
//! ending in a decoded error, never a hang.

use marrow_gcrb::{GcrbStatus, GcrbWait};
use marrow_mlx5::raw::Syndrome;
use marrow_softnic::Faults;
use marrow_transport::cpu::Device;
use marrow_transport::gcrb_page;
use marrow_transport::{DeviceError, DeviceStatus, World, WorldConfig};
use std::time::Duration;

fn world(sq: u32, ncqe: u32, collapsed: bool) -> World {
    world_with(WorldConfig { sq_wqebbs: sq, ncqe, collapsed_cq: collapsed, ..WorldConfig::default() })
}

fn world_with(cfg: WorldConfig) -> World {
    World::new(WorldConfig { timeout: Duration::from_secs(5), ..cfg }).unwrap()
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8) * 2
}

/// Many threads put into disjoint slots of PE 1 through PE 0's channel.
fn many_threads_put(sq: u32, ncqe: u32, collapsed: bool) {
    many_threads_put_in(&world(sq, ncqe, collapsed));
}

fn many_threads_put_in(w: &World) {
    let dev = Device::new(&w.channels[0]);
    dev.check_config().unwrap();
    let n = threads();
    let per = 200usize;
    let ch0 = &w.channels[0];
    std::thread::scope(|s| {
        for t in 0..n {
            let buf = w.bufs[0];
            s.spawn(move || {
                Device::set_thread(t as u32);
                for i in 0..per {
                    let slot = (t * per + i) * 16;
                    let val = [(t as u8) ^ (i as u8); 16];
                    buf.write_bytes(slot, &val).unwrap();
                    let r = if i % 3 == 0 {
                        dev.put(1, slot as u64, slot as u64, 16)
                    } else {
                        dev.put_nbi(1, slot as u64, slot as u64, 16)
                    };
                    r.unwrap_or_else(|e| panic!("thread {t} op {i}: {e}\n{}", ch0.report()));
                }
            });
        }
    });
    dev.quiet().unwrap_or_else(|e| panic!("{e}\n{}", w.channels[0].report()));
    for t in 0..n {
        for i in 0..per {
            let mut got = [0u8; 16];
            w.bufs[1].read_bytes((t * per + i) * 16, &mut got).unwrap();
            assert_eq!(got, [(t as u8) ^ (i as u8); 16], "thread {t} op {i}");
        }
    }
    let h = gcrb_page::heads(&w.channels[0].page()).unwrap();
    let total = (n * per) as u64;
    // Lazy doorbells: each quiet that found WQEs unrung posted one NOP.
    let nops = h.resv_head() - total;
    let lazy = gcrb_page::config(&w.channels[0].page()).unwrap().lazy_nbi_doorbell();
    assert!(nops == 0 || (lazy && nops <= n as u64 + 1), "{nops} extra WQEBBs");
    let all = total + nops;
    assert_eq!((h.resv_head(), h.ready_head(), h.prod_idx(), h.cons_idx()), (all, all, all, all));
    assert_poll_state_agrees(&h);
    assert_ready_marks_clear(&w.channels[0].page());
    if gcrb_page::config(&w.channels[0].page()).unwrap().cq_mode() == 0 {
        // Every shared WQE is signaled: one CQE each.
        assert_eq!(h.cq_ci(), all, "CQEs consumed");
    }
}

/// Every ready mark a poster set was claimed, and cleared, by a holder of
/// the chain: none is left once nothing is in flight.
fn assert_ready_marks_clear(page: &marrow_mmio::Region) {
    let mut marks = [0u8; marrow_gcrb::GCRB_READY_MARK_BITS as usize / 8];
    page.read_bytes(marrow_gcrb::GCRB_OFF_READY_MARKS as usize, &mut marks).unwrap();
    let set: Vec<usize> = (0..marks.len() * 8).filter(|b| marks[b / 8] >> (b % 8) & 1 == 1).collect();
    assert!(set.is_empty(), "ready marks still set for WQEBBs (mod {}): {set:?}", marks.len() * 8);
}

/// The poller's word, freed, names the same position as the heads the
/// host reads: cons_idx modulo 2^32 and the CQEs consumed modulo 2^31.
fn assert_poll_state_agrees(h: &marrow_gcrb::gcrb_heads) {
    let w = h.poll_state();
    assert_eq!(w & 1, 0, "poll_state {w:#x} is still held");
    assert_eq!(w >> 32, h.cons_idx() & 0xffff_ffff, "poll_state {w:#x}, cons_idx {}", h.cons_idx());
    assert_eq!((w >> 1) & 0x7fff_ffff, h.cq_ci() & 0x7fff_ffff, "poll_state {w:#x}, cq_ci {}", h.cq_ci());
}

/// The GCRB page offset of gcrb_heads field `name`.
fn head_field(name: &str) -> usize {
    marrow_gcrb::GCRB_OFF_HEADS as usize + marrow_gcrb::gcrb_heads::LAYOUT.field(name).unwrap().offset
}

#[test]
fn the_poll_word_widens_past_2_to_the_32_wqebbs_and_2_to_the_31_cqes() {
    // The heads start 2^16 short of where poll_state's fields wrap (cons at
    // 2^32, the CQEs at 2^31): a multiple of 2^16 and of the ring sizes,
    // where the softnic's own 16-bit counters (which start at 0) line up.
    let w = world_with(WorldConfig { sq_wqebbs: 64, ncqe: 64, ..WorldConfig::default() });
    let (cons0, ci0) = ((1u64 << 32) - (1 << 16), (1u64 << 31) - (1 << 16));
    let page = w.channels[0].page();
    for name in ["resv_head", "ready_head", "prod_idx", "cons_idx"] {
        page.write_8bytes(head_field(name), cons0.to_le_bytes()).unwrap();
    }
    page.write_8bytes(head_field("cq_ci"), ci0.to_le_bytes()).unwrap();
    let word = ((cons0 & 0xffff_ffff) << 32) | ((ci0 & 0x7fff_ffff) << 1);
    page.write_8bytes(head_field("poll_state"), word.to_le_bytes()).unwrap();
    let dev = Device::new(&w.channels[0]);
    dev.check_config().unwrap();
    let (n, per) = (4usize, 17_000usize);
    std::thread::scope(|s| {
        for t in 0..n {
            let dev = &dev;
            let ch0 = &w.channels[0];
            s.spawn(move || {
                Device::set_thread(t as u32);
                for i in 0..per {
                    let slot = ((t * per + i) % 4096) as u64 * 8;
                    let r = if i % 64 == 0 { dev.put(1, slot, slot, 8) } else { dev.put_nbi(1, slot, slot, 8) };
                    r.unwrap_or_else(|e| panic!("thread {t} op {i}: {e}\n{}", ch0.report()));
                }
            });
        }
    });
    dev.quiet().unwrap_or_else(|e| panic!("{e}\n{}", w.channels[0].report()));
    let h = gcrb_page::heads(&page).unwrap();
    let total = (n * per) as u64;
    assert!(cons0 + total > 1 << 32 && ci0 + total > 1 << 31);
    assert_eq!((h.resv_head(), h.cons_idx(), h.cq_ci()), (cons0 + total, cons0 + total, ci0 + total));
    assert_poll_state_agrees(&h);
    assert_ready_marks_clear(&page);
}

#[test]
fn many_threads_share_a_ring_of_two() {
    many_threads_put(2, 2, false);
}

#[test]
fn many_threads_share_a_ring_of_one_with_a_collapsed_cq() {
    many_threads_put(1, 1, true);
}

#[test]
fn many_threads_on_a_deeper_ring() {
    many_threads_put(64, 64, false);
}

/// Each thread posts a burst from one Channel object, as a GPU thread's
/// loop does: when its own last turn of the ready chain left ready_head
/// where its next reservation starts, it takes that turn without loading
/// the chain (view_at in post_shared.h); the other threads' posts
/// interleave between its own. Every byte and head checked.
#[test]
fn bursts_from_one_channel_object_per_thread_share_a_ring() {
    const PER: usize = 150;
    // Untraced too: a traced post takes the general path, an untraced one
    // the fast path when its turn is its own (encoder.h).
    for (sq, ncqe, trace) in [(2, 2, true), (4, 8, true), (64, 64, true), (2, 2, false), (4, 8, false), (64, 64, false)]
    {
        let w = world_with(WorldConfig { sq_wqebbs: sq, ncqe, trace, ..WorldConfig::default() });
        let dev = Device::new(&w.channels[0]);
        let n = threads();
        let pattern = |t: usize, i: usize| (t as u64) << 32 | (i as u64 * 0x9e37) | 1;
        std::thread::scope(|s| {
            for t in 0..n {
                let (dev, buf, ch0) = (&dev, w.bufs[0], &w.channels[0]);
                s.spawn(move || {
                    Device::set_thread(t as u32);
                    for i in 0..PER {
                        buf.write_bytes((t * PER + i) * 8, &pattern(t, i).to_le_bytes()).unwrap();
                    }
                    dev.put_burst(1, (t * PER * 8) as u64, 8, PER as u32, 5)
                        .unwrap_or_else(|e| panic!("ring of {sq}, traced {trace}, thread {t}: {e}\n{}", ch0.report()));
                });
            }
        });
        for t in 0..n {
            for i in 0..PER {
                let mut got = [0u8; 8];
                w.bufs[1].read_bytes((t * PER + i) * 8, &mut got).unwrap();
                assert_eq!(u64::from_le_bytes(got), pattern(t, i), "ring of {sq}, traced {trace}, thread {t} put {i}");
            }
        }
        let h = gcrb_page::heads(&w.channels[0].page()).unwrap();
        let all = (n * PER) as u64;
        assert_eq!(
            (h.resv_head(), h.ready_head(), h.prod_idx(), h.cons_idx()),
            (all, all, all, all),
            "ring of {sq}, traced {trace}"
        );
        assert_poll_state_agrees(&h);
        assert_ready_marks_clear(&w.channels[0].page());
    }
}

#[test]
fn get_and_atomics_agree_with_the_cpu() {
    get_and_atomics_in(&world(4, 4, false));
}

fn get_and_atomics_in(w: &World) {
    let dev = Device::new(&w.channels[0]);
    let pattern: Vec<u8> = (0..4096).map(|i| (i * 7 % 251) as u8).collect();
    w.bufs[1].write_bytes(8192, &pattern).unwrap();
    dev.get(1, 8192, 0, 4096).unwrap();
    let mut got = vec![0u8; 4096];
    w.bufs[0].read_bytes(0, &mut got).unwrap();
    assert_eq!(got, pattern);

    // Concurrent fetch-and-adds: every old value distinct, the sum exact.
    w.bufs[1].write_bytes(64, &0u64.to_ne_bytes()).unwrap();
    let n = threads();
    let olds = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..n {
            let olds = &olds;
            s.spawn(move || {
                Device::set_thread(t as u32);
                for _ in 0..100 {
                    // Each thread gets its own result slot.
                    let old = dev.fetch_add(1, 64, 1, 4096 + t as u64 * 8).unwrap();
                    olds.lock().unwrap().push(old);
                }
            });
        }
    });
    let mut olds = olds.into_inner().unwrap();
    olds.sort();
    assert_eq!(olds, (0..(n as u64 * 100)).collect::<Vec<_>>());
    let mut v = [0u8; 8];
    w.bufs[1].read_bytes(64, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), n as u64 * 100);

    assert_eq!(dev.compare_swap(1, 64, 7, 9, 4096).unwrap(), n as u64 * 100, "a failed compare returns the value");
    assert_eq!(dev.compare_swap(1, 64, n as u64 * 100, 9, 4096).unwrap(), n as u64 * 100);
    w.bufs[1].read_bytes(64, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 9);
}

#[test]
fn put_signal_lands_data_then_signal() {
    put_signal_in(&world(8, 8, false));
}

fn put_signal_in(w: &World) {
    let dev = Device::new(&w.channels[0]);
    w.bufs[0].write_bytes(0, &[0xAB; 256]).unwrap();
    w.bufs[1].write_bytes(1024, &0u64.to_ne_bytes()).unwrap();
    dev.put_signal(1, 0, 0, 256, 1024, 1, 2048).unwrap();
    dev.quiet().unwrap();
    let mut got = [0u8; 256];
    w.bufs[1].read_bytes(0, &mut got).unwrap();
    assert_eq!(got, [0xAB; 256]);
    let mut sig = [0u8; 8];
    w.bufs[1].read_bytes(1024, &mut sig).unwrap();
    assert_eq!(u64::from_ne_bytes(sig), 1);
}

#[test]
fn offsets_outside_the_window_are_refused() {
    let w = world(4, 4, false);
    let dev = Device::new(&w.channels[0]);
    let len = w.bufs[0].len() as u64;
    assert_eq!(dev.put(1, 0, len - 4, 8), Err(DeviceError::of(DeviceStatus::RANGE)));
    assert_eq!(dev.put(7, 0, 0, 8), Err(DeviceError::of(DeviceStatus::RANGE)));
}

/// A small world whose waits time out fast; each fault test runs on a
/// shared channel and on an exclusive one (heads in the owner's registers),
/// and both must end in the same decoded error.
fn fast_timeout_world(exclusive: bool) -> World {
    World::new(WorldConfig {
        sq_wqebbs: 4,
        ncqe: 4,
        timeout: Duration::from_millis(100),
        exclusive,
        ..WorldConfig::default()
    })
    .unwrap()
}

const MODES: [bool; 2] = [false, true];

#[test]
fn a_dropped_doorbell_ends_in_a_decoded_timeout() {
    for exclusive in MODES {
        // One ring per post: an early doorbell's repeat would cover the drop
        // (the next test).
        let w = World::new(WorldConfig {
            sq_wqebbs: 4,
            ncqe: 4,
            timeout: Duration::from_millis(100),
            exclusive,
            early_doorbell: false,
            ..WorldConfig::default()
        })
        .unwrap();
        w.set_faults(0, Faults { drop_doorbells: 1, ..Faults::default() }).unwrap();
        let dev = Device::new(&w.channels[0]);
        let e = dev.put(1, 0, 0, 8).unwrap_err();
        assert_eq!(e, DeviceError::of(DeviceStatus::TIMEOUT));
        let err = gcrb_page::error(&w.channels[0].page()).unwrap();
        assert_eq!(GcrbStatus(err.status()), GcrbStatus::TIMEOUT);
        assert_eq!(GcrbWait(err.wait()), GcrbWait::CQ);
        assert_eq!((err.resv_head(), err.ready_head(), err.prod_idx(), err.cons_idx()), (1, 1, 1, 0));
        let report = w.channels[0].report();
        assert!(report.contains("TIMEOUT") && report.contains("wait CQ") && report.contains("cons_idx 0"), "{report}");
        // The error sticks: the channel reports it instead of going on.
        assert_eq!(dev.put(1, 0, 0, 8), Err(DeviceError::of(DeviceStatus::TIMEOUT)));
    }
}

#[test]
fn an_early_doorbell_dropped_is_covered_by_its_repeat_or_times_out_decoded() {
    // DOCA rings before the doorbell record and again after it, so a NIC
    // that misses the first still gets the second. Whether the engine sees
    // one doorbell or two depends on its scans (the second overwrites the
    // first in the register), so either outcome is right: the put lands,
    // or a decoded timeout names the CQ wait. Never a hang, never twice.
    for exclusive in MODES {
        let w = World::new(WorldConfig {
            sq_wqebbs: 4,
            ncqe: 4,
            timeout: Duration::from_millis(100),
            exclusive,
            early_doorbell: true,
            ..WorldConfig::default()
        })
        .unwrap();
        w.set_faults(0, Faults { drop_doorbells: 1, ..Faults::default() }).unwrap();
        w.bufs[0].write_bytes(0, &[0x77; 8]).unwrap();
        let dev = Device::new(&w.channels[0]);
        match dev.put(1, 0, 0, 8) {
            Ok(()) => {
                let mut got = [0u8; 8];
                w.bufs[1].read_bytes(0, &mut got).unwrap();
                assert_eq!(got, [0x77; 8]);
                let h = gcrb_page::heads(&w.channels[0].page()).unwrap();
                assert_eq!((h.prod_idx(), h.cons_idx()), (1, 1));
            }
            Err(e) => {
                assert_eq!(e, DeviceError::of(DeviceStatus::TIMEOUT));
                let err = gcrb_page::error(&w.channels[0].page()).unwrap();
                assert_eq!((GcrbStatus(err.status()), GcrbWait(err.wait())), (GcrbStatus::TIMEOUT, GcrbWait::CQ));
            }
        }
    }
}

#[test]
fn a_stalled_engine_ends_in_a_decoded_timeout() {
    for exclusive in MODES {
        let w = fast_timeout_world(exclusive);
        w.set_faults(0, Faults { stall: true, ..Faults::default() }).unwrap();
        let e = Device::new(&w.channels[0]).get(1, 0, 0, 8).unwrap_err();
        assert_eq!(e, DeviceError::of(DeviceStatus::TIMEOUT));
        assert!(w.channels[0].report().contains("wait CQ"));
    }
}

#[test]
fn an_error_cqe_comes_back_with_its_syndrome() {
    for exclusive in MODES {
        let w = fast_timeout_world(exclusive);
        w.set_faults(0, Faults { fail_wqe: Some((1, Syndrome::REMOTE_ACCESS_ERR, 0x88)), ..Faults::default() })
            .unwrap();
        let dev = Device::new(&w.channels[0]);
        dev.put(1, 0, 0, 8).unwrap();
        let e = dev.put(1, 0, 0, 8).unwrap_err();
        assert_eq!(e.syndrome(), Some(Syndrome::REMOTE_ACCESS_ERR), "{e}");
        let err = gcrb_page::error(&w.channels[0].page()).unwrap();
        assert_eq!(GcrbStatus(err.status()), GcrbStatus::CQE_ERROR);
        assert_eq!((err.syndrome(), err.vendor_err_synd(), err.wqe_counter()), (0x13, 0x88, 1));
        let report = w.channels[0].report();
        assert!(report.contains("REMOTE_ACCESS_ERR") && report.contains("vendor_err_synd 0x88"), "{report}");
    }
}

#[test]
fn a_cq_overflow_ends_in_a_decoded_timeout() {
    for exclusive in MODES {
        let w = fast_timeout_world(exclusive);
        w.set_faults(0, Faults { overflow_cq: true, ..Faults::default() }).unwrap();
        let e = Device::new(&w.channels[0]).put(1, 0, 0, 8).unwrap_err();
        assert_eq!(e, DeviceError::of(DeviceStatus::TIMEOUT));
        let report = w.channels[0].report();
        assert!(report.contains("TIMEOUT"), "{report}");
        assert!(w.nic.hca().cq(w.channels[0].cqn).unwrap().overflowed);
    }
}

#[test]
fn a_bad_gcrb_is_refused() {
    let w = fast_timeout_world(false);
    w.channels[0].page().write_bytes(0, &[0; 4]).unwrap();
    assert_eq!(Device::new(&w.channels[0]).check_config(), Err(DeviceError::of(DeviceStatus::BAD_CONFIG)));
    // Rings are indexed with masks: a size that is not a power of two is refused.
    for (sq, ncqe) in [(3u32, 4u32), (4, 6), (0, 4)] {
        let w = fast_timeout_world(false);
        edit_config(&w, |c| {
            c.set_sq_wqebbs(sq).set_cq_ncqe(ncqe);
        });
        assert_eq!(
            Device::new(&w.channels[0]).check_config(),
            Err(DeviceError::of(DeviceStatus::BAD_CONFIG)),
            "sq {sq} ncqe {ncqe}"
        );
        assert_eq!(GcrbStatus(gcrb_page::error(&w.channels[0].page()).unwrap().status()), GcrbStatus::BAD_CONFIG);
    }
    assert_eq!(Device::new(&fast_timeout_world(false).channels[0]).check_config(), Ok(()));
}

/// Change PE 0's `gcrb_config` (the host owns it until device code runs).
fn edit_config(w: &World, edit: impl FnOnce(&mut marrow_gcrb::gcrb_config)) {
    gcrb_page::edit_config(&w.channels[0].page(), edit).unwrap();
}

#[test]
fn doorbells_in_rdma_core_style_carry_the_last_control_segment() {
    // flags.db_ctrl_bytes: the doorbell is the last WQE's first 8 bytes, as
    // rdma-core's post_send writes it; the softnic decodes both styles.
    let w = world(4, 16, false);
    edit_config(&w, |c| {
        c.set_db_ctrl_bytes(true);
    });
    w.nic.enable_trace(1 << 16);
    let dev = Device::new(&w.channels[0]);
    for i in 0..10u64 {
        w.bufs[0].write_bytes(i as usize * 8, &(i * 3 + 1).to_le_bytes()).unwrap();
        dev.put(1, i * 8, i * 8, 8).unwrap_or_else(|e| panic!("{e}\n{}", w.channels[0].report()));
    }
    for i in 0..10u64 {
        let mut got = [0u8; 8];
        w.bufs[1].read_bytes(i as usize * 8, &mut got).unwrap();
        assert_eq!(u64::from_le_bytes(got), i * 3 + 1);
    }
    let (records, err) = marrow_softnic::trace::parse(&w.nic.trace_bytes().unwrap());
    assert!(err.is_none(), "{err:?}");
    let doorbells: Vec<_> = records.iter().filter(|r| r.kind == marrow_softnic::trace::Kind::DOORBELL).collect();
    assert_eq!(doorbells.len(), 10, "a blocking put rings once");
    for (i, d) in doorbells.iter().enumerate() {
        let db = marrow_mlx5::doorbell::decode_uar_doorbell(d.bytes[..8].try_into().unwrap());
        assert_eq!(db.style, marrow_mlx5::doorbell::DoorbellStyle::RdmaCore, "{db:?}");
        assert_eq!((db.opcode, db.wqe_index, db.ds), (marrow_mlx5::raw::WqeOpcode::RDMA_WRITE, i as u16, 3), "{db:?}");
    }
}

#[test]
fn the_trace_flag_decides_what_the_device_traces() {
    use marrow_gcrb::GcrbEvent;
    for trace in [true, false] {
        let w = World::new(WorldConfig {
            sq_wqebbs: 4,
            ncqe: 4,
            timeout: Duration::from_millis(100),
            trace,
            ..WorldConfig::default()
        })
        .unwrap();
        let dev = Device::new(&w.channels[0]);
        dev.put(1, 0, 0, 8).unwrap();
        let events =
            || gcrb_page::trace(&w.channels[0].page()).iter().map(|e| GcrbEvent(e.event())).collect::<Vec<_>>();
        let ok_events = if trace { vec![GcrbEvent::POST, GcrbEvent::DOORBELL, GcrbEvent::CQE] } else { vec![] };
        assert_eq!(events(), ok_events);
        // Errors and timeouts are traced either way.
        w.set_faults(0, Faults { drop_doorbells: 1, ..Faults::default() }).unwrap();
        assert_eq!(dev.put(1, 0, 0, 8), Err(DeviceError::of(DeviceStatus::TIMEOUT)));
        assert_eq!(events().last(), Some(&GcrbEvent::TIMEOUT), "trace {trace}");
    }
}

#[test]
fn early_doorbells_on_tiny_rings_neither_hang_nor_lose_puts() {
    // Each holder of the ready chain rings twice; a repeat that lands after
    // later holders moved the ring on is behind the NIC and ignored.
    for sq in [1u32, 2, 4] {
        many_threads_put_in(&world_with(WorldConfig {
            sq_wqebbs: sq,
            ncqe: sq.max(2),
            early_doorbell: true,
            ..WorldConfig::default()
        }));
    }
}

#[test]
fn lazy_doorbells_on_tiny_rings_neither_hang_nor_lose_puts() {
    // A ring of 1, 2 and 4 WQEBBs: every put waits for room, which only
    // completions of unrung WQEs could make; the half-full rule rings them.
    for sq in [1u32, 2, 4] {
        many_threads_put_in(&world_with(WorldConfig {
            sq_wqebbs: sq,
            ncqe: sq.max(2),
            lazy_nbi_doorbell: true,
            ..WorldConfig::default()
        }));
    }
}

#[test]
fn lazy_doorbells_ring_per_batch_and_quiet_rings_the_rest() {
    // Shared and exclusive alike: the ring per batch, and quiet's NOP.
    for exclusive in MODES {
        let w = world_with(WorldConfig {
            sq_wqebbs: 1024,
            ncqe: 4096,
            lazy_nbi_doorbell: true,
            exclusive,
            ..WorldConfig::default()
        });
        let dev = Device::new(&w.channels[0]);
        let heads = || gcrb_page::heads(&w.channels[0].page()).unwrap();
        for i in 0..40u64 {
            w.bufs[0].write_bytes(i as usize * 8, &(i + 1).to_le_bytes()).unwrap();
            dev.put_nbi(1, i * 8, i * 8, 8).unwrap();
            // prod_idx: what was announced to the NIC. Nothing until the 32nd
            // put crosses the batch boundary, then nothing more until quiet.
            let want = if i + 1 < 32 { 0 } else { 32 };
            assert_eq!(
                (heads().resv_head(), heads().prod_idx()),
                (i + 1, want),
                "exclusive {exclusive}: after put {}",
                i + 1
            );
        }
        dev.quiet().unwrap_or_else(|e| panic!("{e}\n{}", w.channels[0].report()));
        for i in 0..40u64 {
            let mut got = [0u8; 8];
            w.bufs[1].read_bytes(i as usize * 8, &mut got).unwrap();
            assert_eq!(u64::from_le_bytes(got), i + 1);
        }
        let h = heads();
        assert_eq!(
            (h.resv_head(), h.prod_idx(), h.cons_idx()),
            (41, 41, 41),
            "exclusive {exclusive}: 40 puts and quiet's NOP, all rung and done"
        );
    }
    // Without the flag every lone put_nbi rings.
    let w = world_with(WorldConfig { sq_wqebbs: 1024, ncqe: 4096, ..WorldConfig::default() });
    let dev = Device::new(&w.channels[0]);
    dev.put_nbi(1, 0, 0, 8).unwrap();
    assert_eq!(gcrb_page::heads(&w.channels[0].page()).unwrap().prod_idx(), 1);
}

#[test]
fn channels_of_their_own_post_side_by_side() {
    // PE 0 with four channels (QP pairs) to PE 1: threads spread over them,
    // each channel's ready chain and doorbells independent of the others.
    let w = world_with(WorldConfig { sq_wqebbs: 4, ncqe: 16, extra_channels: 3, ..WorldConfig::default() });
    let chans: Vec<&marrow_transport::Channel> = std::iter::once(&w.channels[0]).chain(&w.more).collect();
    assert_eq!(chans.len(), 4);
    let per = 100usize;
    std::thread::scope(|s| {
        for (t, ch) in chans.iter().enumerate().flat_map(|(i, c)| [(2 * i, *c), (2 * i + 1, *c)]) {
            let (dev, buf) = (Device::new(ch), w.bufs[0]);
            s.spawn(move || {
                Device::set_thread(t as u32);
                for i in 0..per {
                    let slot = (t * per + i) * 8;
                    buf.write_bytes(slot, &((t * per + i) as u64).to_le_bytes()).unwrap();
                    dev.put_nbi(1, slot as u64, slot as u64, 8)
                        .unwrap_or_else(|e| panic!("thread {t}: {e}\n{}", ch.report()));
                }
                dev.quiet().unwrap();
            });
        }
    });
    for v in 0..8 * per {
        let mut got = [0u8; 8];
        w.bufs[1].read_bytes(v * 8, &mut got).unwrap();
        assert_eq!(u64::from_le_bytes(got), v as u64);
    }
    for ch in chans {
        let h = gcrb_page::heads(&ch.page()).unwrap();
        assert_eq!((h.resv_head(), h.cons_idx()), (2 * per as u64, 2 * per as u64), "QP {:#x}", ch.qpn);
    }
}

/// PE 1 on a second softnic across RoCEv2 on loopback UDP: the device
/// code's WQEs are carried by the RC transport, ACKs and all.
fn wire_world(sq: u32, ncqe: u32) -> World {
    world_with(WorldConfig { sq_wqebbs: sq, ncqe, wire: true, ..WorldConfig::default() })
}

#[test]
fn many_threads_put_across_the_wire_on_a_ring_of_four() {
    many_threads_put_in(&wire_world(4, 4));
}

#[test]
fn get_and_atomics_agree_with_the_cpu_across_the_wire() {
    get_and_atomics_in(&wire_world(4, 4));
}

#[test]
fn put_signal_lands_data_then_signal_across_the_wire() {
    put_signal_in(&wire_world(8, 8));
}

#[test]
fn a_lazy_quiet_epoch_posts_one_nop_however_many_threads_call_it() {
    // Every thread puts (lazily: fewer than a batch, nothing rung), then
    // every thread calls quiet at once, as each thread of a GPU grid does.
    // One NOP rings and covers them all; before quiet_claim, each thread
    // that saw the tail unrung posted its own.
    let w = world_with(WorldConfig { sq_wqebbs: 1024, ncqe: 4096, lazy_nbi_doorbell: true, ..WorldConfig::default() });
    let dev = Device::new(&w.channels[0]);
    let n = threads().max(8);
    let rounds = 20u64;
    let heads = || gcrb_page::heads(&w.channels[0].page()).unwrap();
    let mut nops = 0;
    for r in 0..rounds {
        let before = heads().resv_head();
        let start = std::sync::Barrier::new(n);
        std::thread::scope(|s| {
            for t in 0..n {
                let start = &start;
                s.spawn(move || {
                    let off = (t * 8) as u64;
                    dev.put_nbi(1, off, off, 8).unwrap();
                    start.wait();
                    dev.quiet().unwrap();
                });
            }
        });
        let h = heads();
        let posted = h.resv_head() - before - n as u64;
        assert_eq!((h.prod_idx(), h.cons_idx()), (h.resv_head(), h.resv_head()), "round {r}: all rung and done");
        nops += posted;
    }
    assert!(nops <= rounds, "{n} threads' quiets posted {nops} NOPs in {rounds} epochs (at most one each)");
    assert!(nops >= 1, "no quiet posted a NOP: the lazy tail was rung some other way");
}

/// The consumer index a CQ's doorbell record holds (`dbrec[MLX5_CQ_SET_CI]`).
fn cq_record(w: &World) -> u32 {
    let hca = w.nic.hca();
    let cq = hca.cq(w.channels[0].cqn).unwrap();
    cq.dbrec.read_be32(4 * marrow_mlx5::raw::MLX5_CQ_SET_CI as usize).unwrap()
}

#[test]
fn an_overrun_ignoring_cq_is_never_handed_its_doorbell_record() {
    // (oi asked for, sq, ncqe) -> whether the channel uses it.
    for (oi, sq, ncqe, used) in [(true, 64, 64, true), (false, 64, 64, false), (true, 64, 16, false)] {
        let w = world_with(WorldConfig { sq_wqebbs: sq, ncqe, cq_overrun_ignore: oi, ..WorldConfig::default() });
        let cfg = gcrb_page::config(&w.channels[0].page()).unwrap();
        assert_eq!(cfg.cq_overrun_ignore(), used, "oi {oi} sq {sq} ncqe {ncqe}");
        assert_eq!(w.nic.hca().cq(w.channels[0].cqn).unwrap().overrun_ignore, used);
        // Many more CQEs than the CQ holds, from several threads.
        many_threads_put_in(&w);
        let ci = gcrb_page::heads(&w.channels[0].page()).unwrap().cq_ci();
        assert!(ci > 4 * u64::from(ncqe), "only {ci} CQEs");
        let record = cq_record(&w);
        if used {
            // Still the zero the softnic made it with.
            assert_eq!(record, 0, "the device wrote the record of an oi CQ");
        } else {
            // Updated in batches (a deeper CQ) or on every CQE.
            assert!(record > 0 && u64::from(record) <= ci, "record {record}, ci {ci}");
        }
        assert!(!w.nic.hca().cq(w.channels[0].cqn).unwrap().overflowed);
    }
}

/// Write the whole window of ready marks: the mark of WQEBB `b` (mod the
/// window) set where `set(b)`.
fn write_ready_marks(page: &marrow_mmio::Region, set: impl Fn(u64) -> bool) {
    let bits = marrow_gcrb::GCRB_READY_MARK_BITS as u64;
    let mut marks = vec![0u8; bits as usize / 8];
    for b in (0..bits).filter(|&b| set(b)) {
        marks[b as usize / 8] |= 1 << (b % 8);
    }
    page.write_bytes(marrow_gcrb::GCRB_OFF_READY_MARKS as usize, &marks).unwrap();
}

fn ready_mark(page: &marrow_mmio::Region, wqebb: u64) -> bool {
    let bit = wqebb % marrow_gcrb::GCRB_READY_MARK_BITS as u64;
    let mut byte = [0u8];
    page.read_bytes(marrow_gcrb::GCRB_OFF_READY_MARKS as usize + bit as usize / 8, &mut byte).unwrap();
    byte[0] >> (bit % 8) & 1 == 1
}

/// How far one claim may reach, in this build's defaults
/// (MARROW_RUN_SCAN_CHUNKS × MARROW_RUN_SCAN_WORDS words of 64 marks),
/// counted from the start of the word the claim starts in.
const CLAIM_REACH: u64 = 4 * 8 * 64;

#[test]
fn a_claim_takes_a_long_run_across_its_chunks_and_clears_it() {
    let w = world(1024, 1024, false);
    let page = w.channels[0].page();
    let dev = Device::new(&w.channels[0]);
    // A run of 1500 from bit 37 of a word crosses two chunk boundaries; the
    // WQEBB after it is clear, the one after that set (another group's,
    // not yet reachable): the claim stops at the gap and leaves it.
    let (from, n) = (37u64, 1500u64);
    write_ready_marks(&page, |b| (from..from + n).contains(&b) || b == from + n + 1);
    assert_eq!(dev.claim_run(from), from + n);
    assert!((from..from + n).all(|b| !ready_mark(&page, b)), "the run's marks are cleared");
    assert!(ready_mark(&page, from + n + 1), "the mark past the gap is kept");
    assert!(!ready_mark(&page, from - 1), "nothing before `from` was set");
}

#[test]
fn a_claim_stops_at_its_reach_and_the_next_claim_goes_on() {
    let w = world(1024, 1024, false);
    let page = w.channels[0].page();
    let dev = Device::new(&w.channels[0]);
    // Every mark set: the claim ends where its chunks end, counted from the
    // word `from` lies in, and leaves the rest for the next turn; the
    // window wraps, so the second claim runs past the marks' last word.
    let bits = marrow_gcrb::GCRB_READY_MARK_BITS as u64;
    let from = bits - 100;
    write_ready_marks(&page, |_| true);
    let end = dev.claim_run(from);
    assert_eq!(end, from / 64 * 64 + CLAIM_REACH);
    assert!((from..end).all(|b| !ready_mark(&page, b)));
    assert!(ready_mark(&page, end) && ready_mark(&page, from - 1));
    assert_eq!(dev.claim_run(end), end + CLAIM_REACH);
    // A claim from a clear mark takes nothing.
    assert_eq!(dev.claim_run(from), from);
}

/// The fast path (`MARROW_FAST_PATH`, channel.h) held to the general path:
/// the same burst of puts from one thread, through the default build on one
/// channel and through the general path's build
/// (`kernels/cpu/device_cpu_general.cpp`) on a second channel of the same
/// PEs (same keys, same windows), leaves byte for byte the same WQEs but for
/// the QP number, the same doorbell record and the same heads, on shared
/// and exclusive channels, with and without early doorbells, rings that
/// wrap and fill, blocking puts among them or not. Untraced: a traced
/// channel always takes the general path.
#[test]
fn the_fast_path_writes_what_the_general_path_writes() {
    const COUNT: u32 = 150;
    for exclusive in [false, true] {
        for early_doorbell in [true, false] {
            for sq in [4u32, 64] {
                for blocking_every in [0u32, 5] {
                    let case = format!(
                        "exclusive {exclusive}, early {early_doorbell}, ring {sq}, blocking every {blocking_every}"
                    );
                    let w = world_with(WorldConfig {
                        sq_wqebbs: sq,
                        ncqe: sq,
                        exclusive,
                        early_doorbell,
                        extra_channels: 1,
                        // Traced posts take the general path (channel.h).
                        trace: false,
                        ..WorldConfig::default()
                    });
                    let pattern: Vec<u8> = (0..COUNT as usize * 8).map(|i| (i * 13 % 251) as u8).collect();
                    w.bufs[0].write_bytes(0, &pattern).unwrap();
                    let (fast, general) = (&w.channels[0], &w.more[0]);
                    let mut landed = Vec::new();
                    for (ch, general_path) in [(fast, false), (general, true)] {
                        w.bufs[1].fill(0, pattern.len(), 0).unwrap();
                        let dev = Device::new(ch);
                        let r = if general_path {
                            dev.put_burst_general(1, 0, 8, COUNT, blocking_every)
                        } else {
                            dev.put_burst(1, 0, 8, COUNT, blocking_every)
                        };
                        r.unwrap_or_else(|e| panic!("{case}, general path {general_path}: {e}\n{}", ch.report()));
                        let mut got = vec![0u8; pattern.len()];
                        w.bufs[1].read_bytes(0, &mut got).unwrap();
                        assert_eq!(got, pattern, "{case}, general path {general_path}: the data");
                        let hca = w.nic.hca();
                        let q = hca.qp(ch.qpn).unwrap();
                        let mut ring = vec![0u8; sq as usize * 64];
                        q.mem.sq.read_bytes(0, &mut ring).unwrap();
                        let mut dbrec = [0u8; 8];
                        q.mem.dbrec.read_bytes(0, &mut dbrec).unwrap();
                        let h = gcrb_page::heads(&ch.page()).unwrap();
                        let heads = (h.resv_head(), h.ready_head(), h.prod_idx(), h.cons_idx(), h.cq_ci());
                        landed.push((ch.qpn, ring, dbrec, heads));
                    }
                    let (b, a) = (landed.pop().unwrap(), landed.pop().unwrap());
                    for (k, (wa, wb)) in a.1.chunks(64).zip(b.1.chunks(64)).enumerate() {
                        // qpn_ds: the QP number above the segment count.
                        let qpn_ds = |w: &[u8]| u32::from_be_bytes(w[4..8].try_into().unwrap());
                        assert_eq!((qpn_ds(wa) >> 8, qpn_ds(wb) >> 8), (a.0, b.0), "{case}: WQEBB {k}'s QP numbers");
                        let strip = |w: &[u8]| [&w[..4], &w[7..]].concat();
                        assert_eq!(strip(wa), strip(wb), "{case}: WQEBB {k}, fast path then general path");
                    }
                    assert_eq!(a.2, b.2, "{case}: the doorbell records");
                    assert_eq!(a.3, b.3, "{case}: the heads (resv, ready, prod, cons, cq_ci)");
                    let all = u64::from(COUNT);
                    assert_eq!((a.3.0, a.3.1, a.3.2, a.3.3), (all, all, all, all), "{case}: every put completed");
                }
            }
        }
    }
}

/// Every window check refuses with `E_RANGE` and posts nothing; the ends
/// that fit exactly are posted. PEs 4 and 5 sit past the four keys the
/// device code caches, so their keys come from the table in memory: PE 4
/// is PE 1's window unbounded (the NIC checks its rkey), PE 5 the same
/// window's first page, checked by the device code.
#[test]
fn every_window_check_refuses_and_posts_nothing() {
    for exclusive in [false, true] {
        let w = world_with(WorldConfig { sq_wqebbs: 64, ncqe: 64, exclusive, ..WorldConfig::default() });
        let page = w.channels[0].page();
        let k1 = gcrb_page::key(&page, 1).unwrap();
        gcrb_page::set_window(&page, 4, k1.raddr(), k1.rkey(), 0).unwrap();
        gcrb_page::set_window(&page, 5, k1.raddr(), k1.rkey(), 1).unwrap();
        gcrb_page::edit_config(&page, |c| {
            c.set_key_count(6);
        })
        .unwrap();
        let dev = Device::new(&w.channels[0]);
        let len = w.bufs[0].len() as u64;
        let refused: [(&str, u32, u64, u64, u32); 9] = [
            ("a PE past the key table", 6, 0, 0, 8),
            ("a PE far past it", u32::MAX, 0, 0, 8),
            ("a remote end past the checked window", 5, 4096 - 4, 0, 8),
            ("a remote offset past the checked window", 5, 4097, 0, 0),
            ("a remote offset far past the checked window", 5, u64::MAX - 3, 0, 8),
            ("a local end past the window", 1, 0, len - 4, 8),
            ("a local offset past the window", 4, 0, len + 1, 0),
            ("a local offset that wraps with the length", 1, 0, u64::MAX - 3, 8),
            ("the inline bit in the length", 1, 0, 0, 0x8000_0008),
        ];
        for (what, pe, roff, loff, n) in refused {
            let before = gcrb_page::heads(&page).unwrap().resv_head();
            assert_eq!(
                dev.put_nbi(pe, roff, loff, n),
                Err(DeviceError::of(DeviceStatus::RANGE)),
                "{what} (exclusive {exclusive})"
            );
            dev.quiet().unwrap();
            assert_eq!(gcrb_page::heads(&page).unwrap().resv_head(), before, "{what} posted a WQE");
        }
        assert_eq!(gcrb_page::error(&page).unwrap().status(), GcrbStatus::OK.0, "a refusal is not sticky");
        // The ends that fit: PE 4 (the table's key, unbounded) and the last
        // 8 bytes of PE 5's one page land in PE 1's buffer.
        w.bufs[0].write_bytes(0, &[0x4a; 8]).unwrap();
        w.bufs[0].write_bytes(8, &[0x5b; 8]).unwrap();
        dev.put(4, 64, 0, 8).unwrap();
        dev.put(5, 4096 - 8, 8, 8).unwrap();
        let mut got = [0u8; 8];
        w.bufs[1].read_bytes(64, &mut got).unwrap();
        assert_eq!(got, [0x4a; 8], "PE 4's put (exclusive {exclusive})");
        w.bufs[1].read_bytes(4096 - 8, &mut got).unwrap();
        assert_eq!(got, [0x5b; 8], "PE 5's put (exclusive {exclusive})");
    }
}

/// A wait's first CQE in straight-line code (`fast_first`: trace off, an
/// overrun-ignoring owner-bit CQ), on a shared channel and an exclusive
/// one, gives the general walk's answers: blocking calls across CQ wraps,
/// an error CQE's syndrome, a decoded timeout, and the heads for the host.
#[test]
fn the_fast_first_cqe_completes_fails_and_times_out_as_the_general_walk() {
    for exclusive in MODES {
        fast_first_cqe(exclusive);
    }
}

fn fast_first_cqe(exclusive: bool) {
    let world = |timeout| {
        World::new(WorldConfig {
            sq_wqebbs: 4,
            ncqe: 4,
            exclusive,
            trace: false,
            cq_overrun_ignore: true,
            early_doorbell: true,
            timeout,
            ..WorldConfig::default()
        })
        .unwrap()
    };
    // Completions: 3 passes over a CQ of 4, each put's bytes where they belong.
    let w = world(Duration::from_secs(5));
    let dev = Device::new(&w.channels[0]);
    for k in 0..12u64 {
        w.bufs[0].write_bytes(0, &k.to_ne_bytes()).unwrap();
        dev.put(1, 8 * k, 0, 8).unwrap();
        let mut got = [0u8; 8];
        w.bufs[1].read_bytes(8 * k as usize, &mut got).unwrap();
        assert_eq!(u64::from_ne_bytes(got), k, "exclusive {exclusive}: put {k}");
    }
    w.bufs[1].write_bytes(512, &7u64.to_ne_bytes()).unwrap();
    assert_eq!(dev.fetch_add(1, 512, 1, 4096).unwrap(), 7);
    let h = gcrb_page::heads(&w.channels[0].page()).unwrap();
    assert_eq!((h.resv_head(), h.prod_idx(), h.cons_idx(), h.cq_ci()), (13, 13, 13, 13), "exclusive {exclusive}");

    // An error CQE: the fast wait leaves it to the general walk, which decodes it.
    let w = world(Duration::from_millis(100));
    w.set_faults(0, Faults { fail_wqe: Some((1, Syndrome::REMOTE_ACCESS_ERR, 0x88)), ..Faults::default() }).unwrap();
    let dev = Device::new(&w.channels[0]);
    dev.put(1, 0, 0, 8).unwrap();
    let e = dev.put(1, 0, 0, 8).unwrap_err();
    assert_eq!(e.syndrome(), Some(Syndrome::REMOTE_ACCESS_ERR), "exclusive {exclusive}: {e}");
    let err = gcrb_page::error(&w.channels[0].page()).unwrap();
    assert_eq!(GcrbStatus(err.status()), GcrbStatus::CQE_ERROR);
    assert_eq!((err.syndrome(), err.vendor_err_synd(), err.wqe_counter()), (0x13, 0x88, 1), "exclusive {exclusive}");

    // A stalled engine: a decoded timeout naming the CQ wait and the heads.
    let w = world(Duration::from_millis(100));
    w.set_faults(0, Faults { stall: true, ..Faults::default() }).unwrap();
    let e = Device::new(&w.channels[0]).put(1, 0, 0, 8).unwrap_err();
    assert_eq!(e, DeviceError::of(DeviceStatus::TIMEOUT), "exclusive {exclusive}");
    let err = gcrb_page::error(&w.channels[0].page()).unwrap();
    assert_eq!((GcrbStatus(err.status()), GcrbWait(err.wait())), (GcrbStatus::TIMEOUT, GcrbWait::CQ));
    assert_eq!((err.resv_head(), err.prod_idx(), err.cons_idx()), (1, 1, 0), "exclusive {exclusive}");
    assert!(err.elapsed_ns() >= 100_000_000, "{}", w.channels[0].report());
}

#[test]
fn a_waiter_whose_cqe_another_poller_took_takes_a_cqe_that_is_there() {
    // The last poller took WQE 0's CQE and freed the poll word (cons 1, one
    // CQE consumed), but its cons_idx has not landed yet: cons_idx still
    // reads 0. A waiter for WQE 0 that takes the lock now sees from the
    // word that its CQE is gone (cons_idx is published again from it).
    // Untraced, the wait reads its first CQE in straight-line code (cq.h
    // fast_first), as on the GPU, and with cq.h's default
    // (MARROW_EARLY_LEAVE 0) takes a CQE that is there, a later poster's
    // for WQE 1, which shows as cons_idx 2; an empty slot leaves the word
    // as it was. Traced, the general walk reads no CQE for a passed target.
    for (early, trace, next) in
        [(false, false, false), (false, false, true), (true, false, false), (true, false, true), (true, true, true)]
    {
        let case = format!("early {early} trace {trace} next CQE {next}");
        let w = world_with(WorldConfig { early_doorbell: early, trace, ..WorldConfig::default() });
        let dev = Device::new(&w.channels[0]);
        dev.put(1, 0, 0, 8).unwrap_or_else(|e| panic!("{e}\n{}", w.channels[0].report()));
        let page = w.channels[0].page();
        let word = |cons: u64, ci: u64| (cons << 32) | (ci << 1);
        let h = gcrb_page::heads(&page).unwrap();
        assert_eq!((h.resv_head(), h.cons_idx(), h.poll_state()), (1, 1, word(1, 1)));
        page.write_8bytes(head_field("cons_idx"), 0u64.to_le_bytes()).unwrap();
        if next {
            let cqe = marrow_mlx5::cqe::encode_cqe(
                &marrow_mlx5::cqe::Completion::Requester {
                    wqe_opcode: marrow_mlx5::raw::WqeOpcode::RDMA_WRITE,
                    qpn: w.channels[0].qpn,
                    wqe_counter: 1,
                    byte_cnt: 8,
                    timestamp: 0,
                },
                false,
            )
            .unwrap();
            let hca = w.nic.hca();
            hca.cq(w.channels[0].cqn).unwrap().buf.write_bytes(marrow_mlx5::raw::MLX5_CQE_SIZE as usize, &cqe).unwrap();
        }
        // quiet's target is resv_head, 1: WQE 0, which the word says is done.
        dev.quiet().unwrap_or_else(|e| panic!("{case}: {e}\n{}", w.channels[0].report()));
        let h = gcrb_page::heads(&page).unwrap();
        let want = if next && !trace { (2, word(2, 2)) } else { (1, word(1, 1)) };
        assert_eq!((h.cons_idx(), h.poll_state()), want, "{case}: (cons_idx, poll_state)");
    }
}
