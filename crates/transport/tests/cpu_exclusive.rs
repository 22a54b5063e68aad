//! Exclusive channels (`gcrb_config.flags.exclusive`, DOCA's EXCLUSIVE
//! sharing mode) run by CPU threads against the softnic: each owner keeps
//! its channel's heads in registers, so these check that the rings still
//! wrap, lazy doorbells still ring, blocking calls still wait for their own
//! CQE, and the heads stored back for the host agree with what happened.
//! The injected faults and the lazy batch rule on exclusive channels are
//! in `cpu_device.rs`, run in both modes.

use marrow_softnic::trace::Kind;
use marrow_transport::cpu::Device;
use marrow_transport::gcrb_page;
use marrow_transport::{Channel, World, WorldConfig};
use std::time::Duration;

fn exclusive_world(sq: u32, ncqe: u32, collapsed: bool, lazy: bool, channels: usize) -> World {
    exclusive_world_early(sq, ncqe, collapsed, lazy, false, channels)
}

fn exclusive_world_early(sq: u32, ncqe: u32, collapsed: bool, lazy: bool, early: bool, channels: usize) -> World {
    World::new(WorldConfig {
        sq_wqebbs: sq,
        ncqe,
        collapsed_cq: collapsed,
        lazy_nbi_doorbell: lazy,
        early_doorbell: early,
        exclusive: true,
        extra_channels: channels - 1,
        timeout: Duration::from_secs(5),
        ..WorldConfig::default()
    })
    .unwrap()
}

fn channels(w: &World) -> Vec<&Channel> {
    std::iter::once(&w.channels[0]).chain(&w.more).collect()
}

fn slot_value(t: usize, i: usize) -> u64 {
    ((t as u64) << 32) | (i as u64 * 2654435761 % 1_000_003)
}

#[test]
fn owners_on_channels_of_their_own_wrap_tiny_rings() {
    const OWNERS: usize = 4;
    const PER: usize = 300;
    for (sq, ncqe, collapsed) in [(1u32, 1u32, true), (2, 2, false), (4, 8, false), (64, 64, false)] {
        // Early doorbells ring twice per ring: the repeat, landing after
        // other posts moved the ring on, must neither re-run nor skip a WQE.
        for (lazy, early) in [(false, false), (true, false), (false, true), (true, true)] {
            let w = exclusive_world_early(sq, ncqe, collapsed, lazy, early, OWNERS);
            let chans = channels(&w);
            for t in 0..OWNERS {
                for i in 0..PER {
                    w.bufs[0].write_bytes((t * PER + i) * 8, &slot_value(t, i).to_le_bytes()).unwrap();
                }
            }
            std::thread::scope(|s| {
                for (t, ch) in chans.iter().enumerate() {
                    let dev = Device::new(ch);
                    s.spawn(move || {
                        Device::set_thread(t as u32);
                        let base = (t * PER * 8) as u64;
                        let what =
                            format!("sq {sq} ncqe {ncqe} collapsed {collapsed} lazy {lazy} early {early} owner {t}");
                        if t % 2 == 0 {
                            // One channel object for the whole burst: heads in its registers.
                            dev.put_burst(1, base, 8, PER as u32, 7)
                                .unwrap_or_else(|e| panic!("{what}: {e}\n{}", ch.report()));
                        } else {
                            // A channel object per call: each starts from the heads stored back.
                            for i in 0..PER as u64 {
                                let off = base + i * 8;
                                let r = if i % 5 == 4 { dev.put(1, off, off, 8) } else { dev.put_nbi(1, off, off, 8) };
                                r.unwrap_or_else(|e| panic!("{what} put {i}: {e}\n{}", ch.report()));
                            }
                            dev.quiet().unwrap_or_else(|e| panic!("{what} quiet: {e}\n{}", ch.report()));
                        }
                    });
                }
            });
            for t in 0..OWNERS {
                for i in 0..PER {
                    let mut got = [0u8; 8];
                    w.bufs[1].read_bytes((t * PER + i) * 8, &mut got).unwrap();
                    assert_eq!(u64::from_le_bytes(got), slot_value(t, i), "sq {sq} lazy {lazy} owner {t} put {i}");
                }
            }
            for ch in &chans {
                // Every put rung and completed. Lazy: quiet posted one
                // signaled NOP if it found an unrung (unsignaled) tail.
                let h = gcrb_page::heads(&ch.page()).unwrap();
                let n = h.resv_head();
                let nops = n - PER as u64;
                assert!(nops == 0 || (lazy && nops == 1), "sq {sq} lazy {lazy}: {nops} WQEBBs beyond the puts");
                assert_eq!(
                    (h.ready_head(), h.prod_idx(), h.cons_idx()),
                    (n, n, n),
                    "sq {sq} lazy {lazy} QP {:#x}",
                    ch.qpn
                );
                assert_eq!(gcrb_page::error(&ch.page()).unwrap().status(), 0);
            }
        }
    }
}

#[test]
fn an_early_doorbell_runs_each_wqe_once_and_leaves_the_record_current() {
    const PUTS: usize = 50;
    let w = exclusive_world_early(64, 64, false, false, true, 1);
    w.nic.enable_trace(1 << 20);
    w.bufs[0].write_bytes(0, &[0x3C; PUTS * 8]).unwrap();
    let dev = Device::new(&w.channels[0]);
    for i in 0..PUTS as u64 {
        dev.put(1, i * 8, i * 8, 8).unwrap_or_else(|e| panic!("put {i}: {e}\n{}", w.channels[0].report()));
    }
    let mut got = [0u8; PUTS * 8];
    w.bufs[1].read_bytes(0, &mut got).unwrap();
    assert_eq!(got, [0x3C; PUTS * 8]);
    let (records, err) = marrow_softnic::trace::parse(&w.nic.trace_bytes().unwrap());
    assert!(err.is_none(), "{err:?}");
    let count = |k: Kind| records.iter().filter(|r| r.kind == k).count();
    // Two rings per put; the engine may find both, or only the second
    // where it overwrote the first before a scan (a register holds the last).
    let doorbells = count(Kind::DOORBELL);
    assert!((PUTS..=2 * PUTS).contains(&doorbells), "{doorbells} doorbells for {PUTS} puts");
    assert_eq!((count(Kind::WQE_FETCH), count(Kind::CQE_WRITE)), (PUTS, PUTS), "each WQE fetched and completed once");
    let h = gcrb_page::heads(&w.channels[0].page()).unwrap();
    let n = PUTS as u64;
    assert_eq!((h.resv_head(), h.prod_idx(), h.cons_idx()), (n, n, n));
    // The record reached the last index too (the recovery path's view).
    let q = w.nic.hca();
    let rec =
        q.qp(w.channels[0].qpn).unwrap().mem.dbrec.read_be32(4 * marrow_mlx5::raw::MLX5_SND_DBR as usize).unwrap();
    assert_eq!(rec, PUTS as u32);
}

#[test]
fn lazy_puts_are_signaled_only_where_they_ring() {
    // 40 lazy puts on a ring of 1024: the 32nd crosses the batch boundary
    // and rings; quiet's NOP rings the other 8. Only those two WQEs ask
    // for a CQE (rdma-core's selective signaling); in rdma-core doorbell
    // style a doorbell carries its ringing WQE's control bytes.
    let w = exclusive_world(1024, 4096, false, true, 1);
    gcrb_page::edit_config(&w.channels[0].page(), |c| {
        c.set_db_ctrl_bytes(true);
    })
    .unwrap();
    w.nic.enable_trace(1 << 20);
    w.bufs[0].write_bytes(0, &[0x5A; 320]).unwrap();
    Device::new(&w.channels[0]).put_burst(1, 0, 8, 40, 0).unwrap_or_else(|e| panic!("{e}\n{}", w.channels[0].report()));
    let mut got = [0u8; 320];
    w.bufs[1].read_bytes(0, &mut got).unwrap();
    assert_eq!(got, [0x5A; 320]);
    let (records, err) = marrow_softnic::trace::parse(&w.nic.trace_bytes().unwrap());
    assert!(err.is_none(), "{err:?}");
    let doorbells: Vec<_> = records
        .iter()
        .filter(|r| r.kind == Kind::DOORBELL)
        .map(|d| marrow_mlx5::doorbell::decode_uar_doorbell(d.bytes[..8].try_into().unwrap()))
        .collect();
    // The UAR is memory the engine scans: a second doorbell before its
    // scan overwrites the first, as a register would hold only the last.
    let last = doorbells.last().map(|d| (d.opcode, d.wqe_index));
    assert_eq!(last, Some((marrow_mlx5::raw::WqeOpcode::NOP, 40)), "{doorbells:?}");
    if doorbells.len() == 2 {
        assert_eq!((doorbells[0].opcode, doorbells[0].wqe_index), (marrow_mlx5::raw::WqeOpcode::RDMA_WRITE, 31));
    }
    assert!(doorbells.len() <= 2, "{doorbells:?}");
    // The send queue as the NIC read it: CQ_UPDATE (fm_ce_se bits 3:2 = 2) on WQEs 31 and 40 only.
    let hca = w.nic.hca();
    let q = hca.qp(w.channels[0].qpn).unwrap();
    let signaled: Vec<u64> = (0..41u64)
        .filter(|i| {
            let mut ctrl = [0u8; 16];
            q.mem.sq.read_bytes(*i as usize * 64, &mut ctrl).unwrap();
            (ctrl[11] >> 2) & 3 == 2
        })
        .collect();
    assert_eq!(signaled, vec![31, 40]);
    let cqes = records.iter().filter(|r| r.kind == Kind::CQE_WRITE).count();
    assert_eq!(cqes, 2, "one CQE per signaled WQE");
}

#[test]
fn blocking_calls_on_an_exclusive_channel_agree_with_the_cpu() {
    let w = exclusive_world(4, 4, false, false, 1);
    let dev = Device::new(&w.channels[0]);
    let pattern: Vec<u8> = (0..4096).map(|i| (i * 13 % 251) as u8).collect();
    w.bufs[1].write_bytes(8192, &pattern).unwrap();
    dev.get(1, 8192, 0, 4096).unwrap();
    let mut got = vec![0u8; 4096];
    w.bufs[0].read_bytes(0, &mut got).unwrap();
    assert_eq!(got, pattern);
    w.bufs[1].write_bytes(512, &5u64.to_ne_bytes()).unwrap();
    for k in 0..10u64 {
        assert_eq!(dev.fetch_add(1, 512, 3, 4096).unwrap(), 5 + 3 * k);
    }
    assert_eq!(dev.compare_swap(1, 512, 1, 9, 4096).unwrap(), 35, "a failed compare returns the value");
    assert_eq!(dev.compare_swap(1, 512, 35, 9, 4096).unwrap(), 35);
    w.bufs[0].write_bytes(0, &[0xC3; 256]).unwrap();
    dev.put_signal(1, 0, 0, 256, 1024, 2, 2048).unwrap();
    dev.quiet().unwrap();
    let mut data = [0u8; 256];
    w.bufs[1].read_bytes(0, &mut data).unwrap();
    assert_eq!(data, [0xC3; 256]);
    let mut v = [0u8; 8];
    w.bufs[1].read_bytes(512, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 9);
    w.bufs[1].read_bytes(1024, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 2);
    // 1 get, 10 + 2 atomics, a put and its signal: 15 WQEBBs through a ring of 4.
    let h = gcrb_page::heads(&w.channels[0].page()).unwrap();
    assert_eq!((h.resv_head(), h.prod_idx(), h.cons_idx()), (15, 15, 15));
}
