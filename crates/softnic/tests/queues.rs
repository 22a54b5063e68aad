//! Rings, CQ modes, QP states, fault injection and the trace.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, Side, WaitError};
use marrow_softnic::trace::{self, Kind};
use marrow_softnic::{AsyncEvent, CqMode, Faults, HcaError, ModifyQp, QpState};
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

fn remote_b(p: &Pair, off: u64) -> RemoteAddr {
    RemoteAddr { raddr: p.b.addr + off, rkey: p.b.rkey }
}

fn completion_counter(c: &Completion) -> u16 {
    match c {
        Completion::Requester { wqe_counter, .. } => *wqe_counter,
        c => panic!("{c:?}"),
    }
}

#[test]
fn rings_of_one_wqebb_wrap_thousands_of_times() {
    let mut p = Pair::new(PairConfig { sq_wqebbs: 1, ncqe: 1, ..PairConfig::default() }).unwrap();
    for i in 0..3000u32 {
        let data = i.to_ne_bytes();
        p.a.sq
            .post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWriteInline { remote: remote_b(&p, 0), data: &data })
            .unwrap();
        p.a.sq.ring().unwrap();
        let c = p.wait(Side::A, false, T).unwrap();
        assert_eq!(completion_counter(&c), i as u16);
        p.a.sq.complete_through(i as u16, 1);
        let mut got = [0u8; 4];
        p.b.buf.read_bytes(0, &mut got).unwrap();
        assert_eq!(got, data);
    }
}

#[test]
fn a_two_wqebb_wqe_wraps_across_the_end_of_a_two_wqebb_ring() {
    let mut p = Pair::new(PairConfig { sq_wqebbs: 2, ncqe: 2, ..PairConfig::default() }).unwrap();
    let l8 = Sge { addr: p.a.addr, length: 8, lkey: p.a.lkey };
    p.b.buf.write_bytes(8, &0u64.to_ne_bytes()).unwrap();
    for i in 0..500u64 {
        // A NOP (1 WQEBB) then a masked CS64 (2 WQEBBs, ds 5): every other
        // time the CS64 starts in the last slot and wraps to slot 0.
        p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
        p.a.sq.ring().unwrap();
        let c = p.wait(Side::A, false, T).unwrap();
        p.a.sq.complete_through(completion_counter(&c), 1);
        let op = WqeOp::MaskedCs64 {
            remote: remote_b(&p, 8),
            local: l8,
            swap: i + 1,
            compare: i,
            swap_mask: !0,
            compare_mask: !0,
        };
        let b = p.a.sq.post(CtrlParams::signaled(0, 0), &op).unwrap();
        assert_eq!(b.wqebbs, 2);
        p.a.sq.ring().unwrap();
        let c = p.wait(Side::A, false, T).unwrap();
        p.a.sq.complete_through(completion_counter(&c), 2);
        let mut v = [0u8; 8];
        p.b.buf.read_bytes(8, &mut v).unwrap();
        assert_eq!(u64::from_ne_bytes(v), i + 1, "iteration {i}");
    }
}

#[test]
fn owner_phase_holds_across_thousands_of_cq_passes() {
    let mut p = Pair::new(PairConfig { ncqe: 2, sq_wqebbs: 4, ..PairConfig::default() }).unwrap();
    for i in 0..6000u32 {
        p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
        p.a.sq.ring().unwrap();
        let c = p.wait(Side::A, false, T).unwrap();
        assert_eq!(completion_counter(&c), i as u16);
        p.a.sq.complete_through(i as u16, 1);
    }
    assert_eq!(p.a.scq.ci(), 6000);
}

#[test]
fn collapsed_cq_writes_every_cqe_into_slot_zero() {
    let mut p = Pair::new(PairConfig { cq_mode: CqMode::Collapsed, ncqe: 4, ..PairConfig::default() }).unwrap();
    let buf = p.nic.hca().cq(p.a.send_cqn).unwrap().buf;
    for i in 0..20u16 {
        p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
        p.a.sq.ring().unwrap();
        let c = p.wait(Side::A, false, T).unwrap();
        assert_eq!(completion_counter(&c), i);
        // NVSHMEM reads wqe_counter from slot 0 (ibgda_poll_cq).
        assert_eq!(buf.read_be32(60).unwrap() >> 16, u32::from(i));
        p.a.sq.complete_through(i, 1);
    }
    // Slots 1..3 still hold the 0xff fill: nothing was written there, and
    // no overflow was raised although the consumer index never moved.
    let mut rest = [0u8; 192];
    buf.read_bytes(64, &mut rest).unwrap();
    assert!(rest.iter().all(|&b| b == 0xff));
    assert!(p.nic.hca().take_events().is_empty());
}

#[test]
fn cq_overflow_is_detected_and_fails_the_qp() {
    let mut p = Pair::new(PairConfig { ncqe: 2, ..PairConfig::default() }).unwrap();
    for _ in 0..3 {
        p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    }
    p.a.sq.ring().unwrap();
    // Nobody polls: the third CQE finds the ring full.
    let deadline = std::time::Instant::now() + T;
    while !p.nic.hca().cq(p.a.send_cqn).unwrap().overflowed {
        assert!(std::time::Instant::now() < deadline, "no overflow detected");
        std::thread::yield_now();
    }
    let events = p.nic.hca().take_events();
    assert!(events.contains(&AsyncEvent::CqOverflow { cqn: p.a.send_cqn }), "{events:?}");
    assert_eq!(p.nic.hca().qp(p.a.qpn).unwrap().state, QpState::Err);
    // The two CQEs that fit are intact.
    assert_eq!(completion_counter(&p.wait(Side::A, false, T).unwrap()), 0);
    assert_eq!(completion_counter(&p.wait(Side::A, false, T).unwrap()), 1);
}

#[test]
fn an_overrun_ignore_cq_never_overflows_and_overwrites_a_pass_later() {
    // DOCA's CQs: owner-bit CQEs, `oi` set, the doorbell record never
    // written. Five CQEs into a ring of two, nobody consuming: on hardware
    // the QP keeps going, and so must the model.
    let mut p = Pair::new(PairConfig { ncqe: 2, sq_wqebbs: 8, ..PairConfig::default() }).unwrap();
    p.nic.hca().set_cq_overrun_ignore(p.a.send_cqn, true).unwrap();
    for _ in 0..5 {
        p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    }
    p.a.sq.ring().unwrap();
    let deadline = std::time::Instant::now() + T;
    while p.nic.hca().cq(p.a.send_cqn).unwrap().pi < 5 {
        assert!(std::time::Instant::now() < deadline, "CQEs stopped at {}", p.nic.hca().cq(p.a.send_cqn).unwrap().pi);
        std::thread::yield_now();
    }
    assert!(p.nic.hca().take_events().is_empty());
    let hca = p.nic.hca();
    let cq = hca.cq(p.a.send_cqn).unwrap();
    assert!(!cq.overflowed);
    assert_eq!(hca.qp(p.a.qpn).unwrap().state, QpState::Rts);
    // Slot 0 holds the fifth CQE (wqe_counter 4), slot 1 the fourth (3),
    // each with the owner bit of its pass (pass 2 and pass 1).
    let mut cqe = [0u8; 64];
    for (slot, counter, owner) in [(0usize, 4u16, 0u8), (1, 3, 1)] {
        cq.buf.read_bytes(slot * 64, &mut cqe).unwrap();
        assert_eq!(u16::from_be_bytes([cqe[60], cqe[61]]), counter, "slot {slot}'s wqe_counter");
        assert_eq!(cqe[63] & 1, owner, "slot {slot}'s owner bit");
    }
}

#[test]
fn injected_cq_overflow() {
    let mut p = Pair::new(PairConfig::default()).unwrap();
    p.nic.hca().set_faults(p.a.qpn, Faults { overflow_cq: true, ..Faults::default() }).unwrap();
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    p.a.sq.ring().unwrap();
    let err = p.wait(Side::A, false, Duration::from_millis(200)).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("CQ overflowed") && msg.contains("Err"), "{msg}");
}

#[test]
fn qp_state_machine_refuses_illegal_transitions() {
    let p = Pair::unstarted(PairConfig::default()).unwrap();
    let mut hca = p.nic.hca();
    let q = p.a.qpn;
    // RTS → RTR is not in IBA's diagram.
    assert!(matches!(hca.modify_qp(q, ModifyQp::to(QpState::Rtr)), Err(HcaError::BadTransition { .. })));
    hca.modify_qp(q, ModifyQp::to(QpState::Reset)).unwrap();
    assert!(matches!(hca.modify_qp(q, ModifyQp::to(QpState::Rts)), Err(HcaError::BadTransition { .. })));
    hca.modify_qp(q, ModifyQp::to(QpState::Init)).unwrap();
    assert!(matches!(hca.modify_qp(q, ModifyQp::to(QpState::Rtr)), Err(HcaError::NoPeer { .. })));
    hca.modify_qp(q, ModifyQp::rtr(p.b.qpn)).unwrap();
    hca.modify_qp(q, ModifyQp::to(QpState::Rts)).unwrap();
    hca.modify_qp(q, ModifyQp::to(QpState::Sqd)).unwrap();
    hca.modify_qp(q, ModifyQp::to(QpState::Rts)).unwrap();
    hca.modify_qp(q, ModifyQp::to(QpState::Err)).unwrap();
    assert!(matches!(hca.modify_qp(q, ModifyQp::to(QpState::Rts)), Err(HcaError::BadTransition { .. })));
    assert!(matches!(hca.modify_qp(0x9999, ModifyQp::to(QpState::Init)), Err(HcaError::NoSuch { .. })));
    assert!(matches!(hca.create_cq(3, CqMode::Normal), Err(HcaError::BadSize { .. })));
}

#[test]
fn sqd_holds_new_wqes_until_rts() {
    let mut p = Pair::new(PairConfig::default()).unwrap();
    p.nic.hca().modify_qp(p.a.qpn, ModifyQp::to(QpState::Sqd)).unwrap();
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    p.a.sq.ring().unwrap();
    assert!(matches!(p.wait(Side::A, false, Duration::from_millis(50)), Err(WaitError::Timeout(_))));
    p.nic.hca().modify_qp(p.a.qpn, ModifyQp::to(QpState::Rts)).unwrap();
    assert_eq!(completion_counter(&p.wait(Side::A, false, T).unwrap()), 0);
}

#[test]
fn a_dropped_doorbell_times_out_with_the_decoded_state_then_the_next_one_works() {
    let mut p = Pair::new(PairConfig::default()).unwrap();
    p.nic.enable_trace(1 << 20);
    p.nic.hca().set_faults(p.a.qpn, Faults { drop_doorbells: 1, ..Faults::default() }).unwrap();
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    p.a.sq.ring().unwrap();
    let err = p.wait(Side::A, false, Duration::from_millis(100)).unwrap_err();
    let WaitError::Timeout(t) = err else { panic!("{err}") };
    assert_eq!((t.state, t.sq_pi, t.sq_ci, t.cq_pi), (QpState::Rts, 1, 0, 0));
    assert!(t.to_string().contains("send queue posted 1 WQEBBs, device consumed 0"), "{t}");
    // Ringing again (with the same producer index) recovers.
    p.a.sq.ring().unwrap();
    assert_eq!(completion_counter(&p.wait(Side::A, false, T).unwrap()), 0);
    let (recs, e) = trace::parse(&p.nic.trace_bytes().unwrap());
    assert!(e.is_none());
    assert_eq!(recs.iter().filter(|r| r.kind == Kind::DOORBELL_DROPPED).count(), 1);
    assert_eq!(recs.iter().filter(|r| r.kind == Kind::DOORBELL).count(), 2);
}

#[test]
fn a_delayed_doorbell_completes_later() {
    let mut p = Pair::new(PairConfig::default()).unwrap();
    p.nic
        .hca()
        .set_faults(p.a.qpn, Faults { delay_doorbell: Some(Duration::from_millis(30)), ..Faults::default() })
        .unwrap();
    let start = std::time::Instant::now();
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    p.a.sq.ring().unwrap();
    p.wait(Side::A, false, T).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(30));
}

#[test]
fn a_stalled_engine_times_out_then_resumes() {
    let mut p = Pair::new(PairConfig::default()).unwrap();
    p.nic.hca().set_faults(p.a.qpn, Faults { stall: true, ..Faults::default() }).unwrap();
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    p.a.sq.ring().unwrap();
    assert!(matches!(p.wait(Side::A, false, Duration::from_millis(50)), Err(WaitError::Timeout(_))));
    p.nic.hca().set_faults(p.a.qpn, Faults::default()).unwrap();
    p.wait(Side::A, false, T).unwrap();
}

#[test]
fn the_trace_records_every_register_event_with_its_bytes() {
    let mut p = Pair::new(PairConfig::default()).unwrap();
    p.nic.enable_trace(1 << 20);
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWriteInline { remote: remote_b(&p, 0), data: b"abc" }).unwrap();
    p.a.sq.ring().unwrap();
    p.wait(Side::A, false, T).unwrap();
    let (recs, e) = trace::parse(&p.nic.trace_bytes().unwrap());
    assert!(e.is_none());
    let kinds: Vec<Kind> = recs.iter().map(|r| r.kind).collect();
    assert_eq!(kinds, vec![Kind::DOORBELL, Kind::DBREC_READ, Kind::WQE_FETCH, Kind::CQE_WRITE]);
    // The doorbell is rdma-core's: the WQE's first 8 control bytes.
    let wqe = WqeView::new(&recs[2].bytes).unwrap().parse().unwrap();
    assert_eq!(wqe.ctrl.opcode, WqeOpcode::RDMA_WRITE);
    assert_eq!(recs[0].bytes[..], recs[2].bytes[..8]);
    assert_eq!(recs[0].addr, 0x800);
    assert_eq!(recs[1].bytes[4..8], [0, 0, 0, 1]);
    match decode_cqe(&recs[3].bytes).unwrap() {
        Completion::Requester { wqe_opcode, .. } => assert_eq!(wqe_opcode, WqeOpcode::RDMA_WRITE),
        c => panic!("{c:?}"),
    }
    assert!(recs.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
}

#[test]
fn successive_doorbells_alternate_blueflame_halves() {
    let mut p = Pair::new(PairConfig::default()).unwrap();
    p.nic.enable_trace(1 << 20);
    for _ in 0..2 {
        p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
        p.a.sq.ring().unwrap();
        p.wait(Side::A, false, T).unwrap();
    }
    let (recs, _) = trace::parse(&p.nic.trace_bytes().unwrap());
    let addrs: Vec<u64> = recs.iter().filter(|r| r.kind == Kind::DOORBELL).map(|r| r.addr).collect();
    assert_eq!(addrs, vec![0x800, 0x900]);
}

#[test]
fn a_blueflame_write_carries_the_whole_wqe() {
    let mut p = Pair::new(PairConfig { trace: Some(1 << 20), ..PairConfig::default() }).unwrap();
    let data = b"by blueflame";
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWriteInline { remote: remote_b(&p, 64), data }).unwrap();
    // Spoil the ring's copy: the model must execute the bytes that came
    // through the BlueFlame register, not fetch these.
    let sq = p.nic.hca().qp(p.a.qpn).unwrap().mem.sq;
    sq.fill(16, 48, 0xEE).unwrap();
    p.a.sq.ring_blueflame().unwrap();
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Requester { wqe_opcode, byte_cnt, .. } => {
            assert_eq!((wqe_opcode, byte_cnt), (WqeOpcode::RDMA_WRITE, 12))
        }
        c => panic!("{c:?}"),
    }
    let mut got = [0u8; 12];
    p.b.buf.read_bytes(64, &mut got).unwrap();
    assert_eq!(&got, data);
    let (recs, _) = trace::parse(&p.nic.trace_bytes().unwrap());
    let bf: Vec<_> = recs.iter().filter(|r| r.kind == Kind::BLUEFLAME).collect();
    assert_eq!(bf.len(), 1);
    assert!(!recs.iter().any(|r| r.kind == Kind::WQE_FETCH), "no fetch from the ring");
    let wqe = WqeView::new(&bf[0].bytes).unwrap().parse().unwrap();
    assert_eq!(wqe.ctrl.opcode, WqeOpcode::RDMA_WRITE);
    // The register was cleared behind it: the next 8-byte doorbell is plain.
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    p.a.sq.ring().unwrap();
    assert_eq!(completion_counter(&p.wait(Side::A, false, T).unwrap()), 1);
}

mod garbage {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Any bytes after a control segment that names this QP and index:
        /// the model answers with a completion (good or error), never panics,
        /// never hangs, and never writes outside a registered region.
        #[test]
        fn any_wqe_bytes_get_an_answer(opcode in any::<u8>(), opmod in any::<u8>(), ds in any::<u8>(), tail in prop::collection::vec(any::<u8>(), 48..240), keys in any::<bool>()) {
            let mut p = Pair::unstarted(PairConfig { buf_len: 1 << 16, ..PairConfig::default() }).unwrap();
            // A garbage SEND finds no receive: fail at once rather than retry forever.
            p.nic.hca().modify_qp(p.a.qpn, ModifyQp { rnr_retry: Some(0), ..ModifyQp::to(QpState::Rts) }).unwrap();
            let guard = marrow_softnic::Shm::create("guard", 1 << 16).unwrap();
            guard.region().fill(0, 1 << 16, 0x77).unwrap();
            let mut w = vec![0u8; 16];
            w[0] = opmod;
            w[3] = opcode;
            w[4..8].copy_from_slice(&((p.a.qpn << 8) | u32::from(ds & 0x3f)).to_be_bytes());
            w[11] = 0x08;
            w.extend_from_slice(&tail);
            if keys && w.len() >= 48 {
                // Plant real keys so some garbage reaches the data path.
                w[24..28].copy_from_slice(&p.b.rkey.to_be_bytes());
                w[36..40].copy_from_slice(&p.a.lkey.to_be_bytes());
            }
            w.truncate(w.len() / 64 * 64);
            p.a.sq.post_raw(&w).unwrap();
            p.a.sq.ring().unwrap();
            let c = p.wait(Side::A, false, T);
            prop_assert!(c.is_ok(), "{:?}", c.err());
            let mut g = vec![0u8; 1 << 16];
            guard.region().read_bytes(0, &mut g).unwrap();
            prop_assert!(g.iter().all(|&b| b == 0x77));
        }
    }
}
