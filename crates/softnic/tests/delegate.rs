//! A QP whose transport is a delegate (`marrow_softnic::delegate`, what the
//! verbs proxy plugs into): the engine decodes the WQE and hands over the
//! message, writes the CQE only when the delegate reports the completion,
//! keeps CQEs in WQE order, retries a busy delegate, fails the QP on an
//! error and flushes after it, and lands arrivals in receive WQEs (waiting
//! for one when none is posted).

use marrow_mlx5::prelude::*;
use marrow_softnic::QpState;
use marrow_softnic::delegate::{Delegate, Event, Refused};
use marrow_softnic::pair::{Pair, PairConfig, Side};
use marrow_softnic::rc::requester::Message;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(5);

/// What the fake transport saw and what it will report.
#[derive(Debug, Default)]
struct State {
    posted: Vec<(Message, u16)>,
    outstanding: VecDeque<marrow_mlx5::wqe_decode::CtrlFields>,
    events: Vec<Event>,
    busy_once: bool,
}

#[derive(Debug, Clone, Default)]
struct Fake(Arc<Mutex<State>>);

impl Delegate for Fake {
    fn post(&mut self, msg: Message, ctrl: marrow_mlx5::wqe_decode::CtrlFields, _byte_cnt: u32) -> Result<(), Refused> {
        let mut s = self.0.lock().unwrap();
        if std::mem::take(&mut s.busy_once) {
            return Err(Refused::Busy);
        }
        s.posted.push((msg, ctrl.wqe_index));
        s.outstanding.push_back(ctrl);
        Ok(())
    }
    fn poll(&mut self, out: &mut Vec<Event>) {
        out.append(&mut self.0.lock().unwrap().events);
    }
    fn outstanding(&self) -> usize {
        // Posted and not yet reported: a completion still waiting for `poll` counts.
        let s = self.0.lock().unwrap();
        s.outstanding.len()
            + s.events
                .iter()
                .filter(|e| matches!(e, Event::Done { .. } | Event::Failed { .. } | Event::Flushed { .. }))
                .count()
    }
}

impl Fake {
    /// Report the oldest outstanding WQE as `f(ctrl)`.
    fn complete(&self, f: impl FnOnce(marrow_mlx5::wqe_decode::CtrlFields) -> Event) {
        let mut s = self.0.lock().unwrap();
        let c = s.outstanding.pop_front().expect("something outstanding");
        s.events.push(f(c));
    }
    fn posted(&self) -> usize {
        self.0.lock().unwrap().posted.len()
    }
    fn wait_posted(&self, n: usize) {
        let t0 = Instant::now();
        while self.posted() < n {
            assert!(t0.elapsed() < T, "the engine handed over {} messages, not {n}", self.posted());
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

fn setup() -> (Pair, Fake) {
    let p = Pair::new(PairConfig::default()).unwrap();
    let f = Fake::default();
    p.nic.hca().set_delegate(p.a.qpn, Box::new(f.clone())).unwrap();
    (p, f)
}

fn post(p: &mut Pair, op: WqeOp<'_>) -> u16 {
    let i = p.a.sq.pi() as u16;
    p.a.sq.post(CtrlParams::signaled(0, 0), &op).unwrap();
    p.a.sq.ring().unwrap();
    i
}

#[test]
fn the_message_goes_to_the_delegate_and_the_cqe_waits_for_its_completion() {
    let (mut p, f) = setup();
    p.a.buf.write_bytes(0, b"sixteen bytes!!!").unwrap();
    let sgl = [Sge { addr: p.a.addr, length: 16, lkey: p.a.lkey }];
    let remote = RemoteAddr { raddr: 0x1234_0000, rkey: 0xabcd };
    f.0.lock().unwrap().busy_once = true;
    let i = post(&mut p, WqeOp::RdmaWrite { remote, sgl: &sgl });
    f.wait_posted(1);
    {
        let s = f.0.lock().unwrap();
        match &s.posted[0] {
            (Message::Write { remote: r, imm: None, data }, idx) => {
                assert_eq!((*r, &data[..], *idx), (remote, &b"sixteen bytes!!!"[..], i));
            }
            other => panic!("{other:?}"),
        }
    }
    // Nothing completes until the delegate says so.
    assert!(p.wait(Side::A, false, Duration::from_millis(50)).is_err());
    // A second WQE is handed over while the first is outstanding.
    let i2 = post(&mut p, WqeOp::RdmaRead { remote, sgl: &sgl });
    f.wait_posted(2);
    f.complete(|ctrl| Event::Done { ctrl, byte_cnt: 16 });
    f.complete(|ctrl| Event::Done { ctrl, byte_cnt: 16 });
    for want in [i, i2] {
        match p.wait(Side::A, false, T).unwrap() {
            Completion::Requester { wqe_counter, .. } => assert_eq!(wqe_counter, want),
            c => panic!("{c:?}"),
        }
    }
}

#[test]
fn a_failure_writes_the_error_cqe_and_later_wqes_are_flushed_in_order() {
    let (mut p, f) = setup();
    let sgl = [Sge { addr: p.a.addr, length: 8, lkey: p.a.lkey }];
    let remote = RemoteAddr { raddr: 0x1000, rkey: 1 };
    post(&mut p, WqeOp::RdmaWrite { remote, sgl: &sgl });
    post(&mut p, WqeOp::RdmaWrite { remote, sgl: &sgl });
    f.wait_posted(2);
    f.complete(|ctrl| Event::Failed { ctrl, syndrome: Syndrome::REMOTE_ACCESS_ERR, vendor: 0x88, why: "test".into() });
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Error(e) => assert_eq!((e.syndrome, e.vendor_err_synd), (Syndrome::REMOTE_ACCESS_ERR, 0x88)),
        c => panic!("{c:?}"),
    }
    assert_eq!(p.nic.hca().qp(p.a.qpn).unwrap().state, QpState::Err);
    // A NOP posted now waits behind the second write, which the delegate flushes first.
    post(&mut p, WqeOp::Nop);
    assert!(p.wait(Side::A, false, Duration::from_millis(50)).is_err(), "the NOP's flush overtook the write's");
    f.complete(|ctrl| Event::Flushed { ctrl });
    for op in [WqeOpcode::RDMA_WRITE, WqeOpcode::NOP] {
        match p.wait(Side::A, false, T).unwrap() {
            Completion::Error(e) => assert_eq!((e.syndrome, e.wqe_opcode), (Syndrome::WR_FLUSH_ERR, op)),
            c => panic!("{c:?}"),
        }
    }
}

#[test]
fn an_arrival_waits_for_a_receive_wqe_then_lands_in_it() {
    let (mut p, f) = setup();
    f.0.lock().unwrap().events.push(Event::Received { data: b"hello".to_vec(), imm: Some(7) });
    // No receive WQE yet: nothing completes.
    assert!(p.wait(Side::A, true, Duration::from_millis(100)).is_err());
    let index = p.a.rq.post(&[Sge { addr: p.a.addr + 4096, length: 64, lkey: p.a.lkey }]).unwrap();
    match p.wait(Side::A, true, T).unwrap() {
        Completion::Responder { opcode, wqe_counter, byte_cnt, imm, .. } => {
            assert_eq!((opcode, wqe_counter, byte_cnt, imm), (CqeOpcode::RESP_SEND_IMM, index, 5, Some(7)));
        }
        c => panic!("{c:?}"),
    }
    assert_eq!(p.a.buf.read_array::<5>(4096).unwrap(), *b"hello");
}
