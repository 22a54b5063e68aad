//! Every syndrome the softnic produces, from the WQE or condition that
//! produces it on hardware; the QP then goes to ERR and what follows is
//! flushed with WR_FLUSH_ERR.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, Side};
use marrow_softnic::{Access, AsyncEvent, Faults, ModifyQp, QpState};
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

fn pair() -> Pair {
    Pair::new(PairConfig::default()).unwrap()
}

fn sge_a(p: &Pair, off: u64, len: u32) -> Sge {
    Sge { addr: p.a.addr + off, length: len, lkey: p.a.lkey }
}

fn remote_b(p: &Pair, off: u64) -> RemoteAddr {
    RemoteAddr { raddr: p.b.addr + off, rkey: p.b.rkey }
}

fn post(op: WqeOp<'_>, p: &mut Pair) {
    p.a.sq.post(CtrlParams::signaled(0, 0), &op).unwrap();
    p.a.sq.ring().unwrap();
}

fn expect_error(p: &mut Pair, side: Side, recv: bool, syndrome: Syndrome) -> ErrorCompletion {
    match p.wait(side, recv, T).unwrap() {
        Completion::Error(e) => {
            assert_eq!(e.syndrome, syndrome, "{e}");
            e
        }
        c => panic!("expected {syndrome:?}, got {c:?}"),
    }
}

fn qp_state(p: &Pair, qpn: u32) -> QpState {
    p.nic.hca().qp(qpn).unwrap().state
}

/// After an error: the QP is in ERR and the next WQE is flushed.
fn assert_flushes_after(p: &mut Pair) {
    assert_eq!(qp_state(p, p.a.qpn), QpState::Err);
    post(WqeOp::Nop, p);
    let e = expect_error(p, Side::A, false, Syndrome::WR_FLUSH_ERR);
    assert_eq!(e.wqe_opcode, WqeOpcode::NOP);
}

fn raw_wqe(p: &Pair, opcode: u8, ds: u8) -> [u8; 64] {
    let mut w = [0u8; 64];
    let pi = p.a.sq.pi() as u16;
    w[0..4].copy_from_slice(&((u32::from(pi) << 8) | u32::from(opcode)).to_be_bytes());
    w[4..8].copy_from_slice(&((p.a.qpn << 8) | u32::from(ds)).to_be_bytes());
    w[11] = 0x08; // CQ_UPDATE
    w
}

#[test]
fn unknown_opcode_is_local_qp_op_err() {
    let mut p = pair();
    let w = raw_wqe(&p, 0x42, 1);
    p.a.sq.post_raw(&w).unwrap();
    p.a.sq.ring().unwrap();
    let e = expect_error(&mut p, Side::A, false, Syndrome::LOCAL_QP_OP_ERR);
    assert_eq!((e.wqe_opcode, e.qpn, e.wqe_counter), (WqeOpcode(0x42), p.a.qpn, 0));
    assert_flushes_after(&mut p);
}

#[test]
fn ds_inconsistent_with_segments_is_local_qp_op_err() {
    let mut p = pair();
    // RDMA_WRITE whose ds (1) leaves out the remote-address segment.
    let w = raw_wqe(&p, 0x08, 1);
    p.a.sq.post_raw(&w).unwrap();
    p.a.sq.ring().unwrap();
    expect_error(&mut p, Side::A, false, Syndrome::LOCAL_QP_OP_ERR);
    assert_flushes_after(&mut p);
}

#[test]
fn wrong_qpn_in_the_control_segment_is_local_qp_op_err() {
    let mut p = pair();
    // Ring with NVSHMEM's doorbell, which names this QP; rdma-core's would
    // carry the (wrong) control bytes and so ring the other QP.
    let m = p.nic.hca().qp(p.a.qpn).unwrap().mem.clone();
    p.a.sq = marrow_driver::SendQueue::new(m.sq, 64, m.dbrec, m.uar, p.a.qpn).with_index_qpn_doorbell();
    let mut w = raw_wqe(&p, 0x00, 1);
    w[4..8].copy_from_slice(&((p.b.qpn << 8) | 1).to_be_bytes());
    p.a.sq.post_raw(&w).unwrap();
    p.a.sq.ring().unwrap();
    expect_error(&mut p, Side::A, false, Syndrome::LOCAL_QP_OP_ERR);
}

#[test]
fn bad_lkey_is_local_prot_err_and_nothing_moves() {
    let mut p = pair();
    p.b.buf.fill(0, 64, 0xEE).unwrap();
    let s = [Sge { addr: p.a.addr, length: 8, lkey: 0xdead_0042 }];
    post(WqeOp::RdmaWrite { remote: remote_b(&p, 0), sgl: &s }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::LOCAL_PROT_ERR);
    let mut b = [0u8; 64];
    p.b.buf.read_bytes(0, &mut b).unwrap();
    assert_eq!(b, [0xEE; 64]);
    assert_flushes_after(&mut p);
}

#[test]
fn local_range_outside_the_mr_is_local_prot_err() {
    let mut p = pair();
    let len = p.a.buf.len() as u64;
    let s = [sge_a(&p, len - 4, 8)];
    post(WqeOp::RdmaWrite { remote: remote_b(&p, 0), sgl: &s }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::LOCAL_PROT_ERR);
}

#[test]
fn read_into_memory_without_local_write_is_local_prot_err() {
    let mut p = pair();
    let ro = marrow_softnic::Shm::create("ro", 4096).unwrap();
    let region = ro.region();
    let (lkey, _) = {
        let mut hca = p.nic.hca();
        let pd = hca.qp(p.a.qpn).unwrap().pd;
        hca.reg_mr(pd, region.base_addr() as u64, region, Access::REMOTE_READ)
    };
    let s = [Sge { addr: region.base_addr() as u64, length: 8, lkey }];
    post(WqeOp::RdmaRead { remote: remote_b(&p, 0), sgl: &s }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::LOCAL_PROT_ERR);
}

#[test]
fn atomic_with_wrong_local_length_is_local_length_err() {
    let mut p = pair();
    // The builder refuses this, so patch a built WQE: data segment byte_count 4.
    let mut w = [0u8; 64];
    let op = WqeOp::AtomicFa { remote: remote_b(&p, 0), local: sge_a(&p, 0, 8), add: 1 };
    let ctrl = CtrlParams::signaled(p.a.sq.pi() as u16, p.a.qpn);
    build_wqe(&ctrl, &op, &mut w).unwrap();
    w[48..52].copy_from_slice(&4u32.to_be_bytes());
    p.a.sq.post_raw(&w).unwrap();
    p.a.sq.ring().unwrap();
    expect_error(&mut p, Side::A, false, Syndrome::LOCAL_LENGTH_ERR);
}

#[test]
fn bad_rkey_range_or_right_is_remote_access_err() {
    // A key that does not exist.
    let mut p = pair();
    let s = [sge_a(&p, 0, 8)];
    post(WqeOp::RdmaWrite { remote: RemoteAddr { raddr: p.b.addr, rkey: 0x1234_5600 }, sgl: &s }, &mut p);
    let e = expect_error(&mut p, Side::A, false, Syndrome::REMOTE_ACCESS_ERR);
    assert_eq!(e.wqe_opcode, WqeOpcode::RDMA_WRITE);
    assert_flushes_after(&mut p);

    // A range past the end of the remote MR.
    let mut p = pair();
    let end = p.b.buf.len() as u64;
    let s = [sge_a(&p, 0, 16)];
    post(WqeOp::RdmaWrite { remote: remote_b(&p, end - 8), sgl: &s }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::REMOTE_ACCESS_ERR);

    // An MR without REMOTE_WRITE.
    let mut p =
        Pair::new(PairConfig { access: Access::LOCAL_WRITE | Access::REMOTE_READ, ..PairConfig::default() }).unwrap();
    let s = [sge_a(&p, 0, 8)];
    post(WqeOp::RdmaWrite { remote: remote_b(&p, 0), sgl: &s }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::REMOTE_ACCESS_ERR);
    // ...but READ is allowed on it.
    let mut p =
        Pair::new(PairConfig { access: Access::LOCAL_WRITE | Access::REMOTE_READ, ..PairConfig::default() }).unwrap();
    let s = [sge_a(&p, 0, 8)];
    post(WqeOp::RdmaRead { remote: remote_b(&p, 0), sgl: &s }, &mut p);
    assert!(matches!(p.wait(Side::A, false, T).unwrap(), Completion::Requester { .. }));
}

#[test]
fn misaligned_atomic_is_remote_inval_req_err() {
    let mut p = pair();
    post(WqeOp::AtomicFa { remote: remote_b(&p, 4), local: sge_a(&p, 0, 8), add: 1 }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::REMOTE_INVAL_REQ_ERR);
}

#[test]
fn send_longer_than_the_receive_is_remote_inval_req_with_local_length_at_the_responder() {
    let mut p = pair();
    p.b.rq.post(&[Sge { addr: p.b.addr, length: 8, lkey: p.b.lkey }]).unwrap();
    let s = [sge_a(&p, 0, 9)];
    post(WqeOp::Send { sgl: &s }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::REMOTE_INVAL_REQ_ERR);
    let e = expect_error(&mut p, Side::B, true, Syndrome::LOCAL_LENGTH_ERR);
    assert_eq!(e.opcode, CqeOpcode::RESP_ERR);
    assert_eq!(qp_state(&p, p.b.qpn), QpState::Err);
}

#[test]
fn receive_with_a_bad_lkey_is_remote_op_err_and_local_prot_at_the_responder() {
    let mut p = pair();
    p.b.rq.post(&[Sge { addr: p.b.addr, length: 64, lkey: 0x0bad_0042 }]).unwrap();
    let s = [sge_a(&p, 0, 8)];
    post(WqeOp::Send { sgl: &s }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::REMOTE_OP_ERR);
    expect_error(&mut p, Side::B, true, Syndrome::LOCAL_PROT_ERR);
}

#[test]
fn write_imm_to_a_bad_rkey_is_local_access_err_at_the_responder() {
    let mut p = pair();
    p.b.rq.post(&[]).unwrap();
    let s = [sge_a(&p, 0, 8)];
    post(WqeOp::RdmaWriteImm { remote: RemoteAddr { raddr: p.b.addr, rkey: 7 }, sgl: &s, imm: 1 }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::REMOTE_ACCESS_ERR);
    expect_error(&mut p, Side::B, true, Syndrome::LOCAL_ACCESS_ERR);
}

#[test]
fn peer_not_ready_is_transport_retry_exc_err() {
    let mut p = pair();
    p.nic.hca().modify_qp(p.b.qpn, ModifyQp::to(QpState::Reset)).unwrap();
    post(WqeOp::RdmaWriteInline { remote: remote_b(&p, 0), data: &[1] }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::TRANSPORT_RETRY_EXC_ERR);
}

#[test]
fn send_without_a_receive_is_rnr_retry_exc_err_after_the_retries() {
    let mut p = pair();
    p.nic.hca().modify_qp(p.a.qpn, ModifyQp { rnr_retry: Some(3), ..ModifyQp::to(QpState::Rts) }).unwrap();
    post(WqeOp::SendInline { data: b"x" }, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::RNR_RETRY_EXC_ERR);
}

#[test]
fn a_receive_posted_during_rnr_retries_lets_the_send_through() {
    let mut p = pair();
    post(WqeOp::SendInline { data: b"late" }, &mut p);
    std::thread::sleep(Duration::from_millis(5));
    p.b.rq.post(&[Sge { addr: p.b.addr, length: 8, lkey: p.b.lkey }]).unwrap();
    assert!(matches!(p.wait(Side::A, false, T).unwrap(), Completion::Requester { .. }));
}

#[test]
fn posting_outside_rts_flushes_with_wr_flush_err() {
    let mut p = pair();
    p.nic.hca().modify_qp(p.a.qpn, ModifyQp::to(QpState::Reset)).unwrap();
    p.nic.hca().modify_qp(p.a.qpn, ModifyQp::to(QpState::Init)).unwrap();
    // The ring restarts at index 0 after RESET; so does a fresh send queue.
    let m = p.nic.hca().qp(p.a.qpn).unwrap().mem.clone();
    p.a.sq = marrow_driver::SendQueue::new(m.sq, 64, m.dbrec, m.uar, p.a.qpn);
    post(WqeOp::Nop, &mut p);
    expect_error(&mut p, Side::A, false, Syndrome::WR_FLUSH_ERR);
    assert_eq!(qp_state(&p, p.a.qpn), QpState::Err);
    let events = p.nic.hca().take_events();
    assert!(events.iter().any(|e| matches!(e, AsyncEvent::QpFatal { qpn, .. } if *qpn == p.a.qpn)));
}

#[test]
fn injected_failures_carry_the_given_syndrome() {
    for (k, syndrome, vendor) in [
        (0u64, Syndrome::TRANSPORT_RETRY_EXC_ERR, 0x81u8),
        (2, Syndrome::RNR_RETRY_EXC_ERR, 0x82),
        (1, Syndrome(0x77), 0),
    ] {
        let mut p = pair();
        p.nic.hca().set_faults(p.a.qpn, Faults { fail_wqe: Some((k, syndrome, vendor)), ..Faults::default() }).unwrap();
        for _ in 0..k {
            post(WqeOp::Nop, &mut p);
            assert!(matches!(p.wait(Side::A, false, T).unwrap(), Completion::Requester { .. }));
        }
        post(WqeOp::Nop, &mut p);
        let e = expect_error(&mut p, Side::A, false, syndrome);
        assert_eq!((e.vendor_err_synd, e.wqe_counter), (vendor, k as u16));
        assert_flushes_after(&mut p);
    }
}

#[test]
fn errors_are_reported_even_when_unsignaled() {
    let mut p = pair();
    let quiet = CtrlParams { completion: CompletionMode::CQE_ON_CQE_ERROR, ..CtrlParams::signaled(0, 0) };
    let s = [Sge { addr: p.a.addr, length: 8, lkey: 1 }];
    p.a.sq.post(quiet, &WqeOp::RdmaWrite { remote: remote_b(&p, 0), sgl: &s }).unwrap();
    p.a.sq.ring().unwrap();
    expect_error(&mut p, Side::A, false, Syndrome::LOCAL_PROT_ERR);
}
