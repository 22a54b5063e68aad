//! Where the HCA meets the RC transport: WQEs handed to the requester,
//! packets from a port handed to the requester or responder of their QP,
//! and the requester's [`Action`]s carried out (packets onto the port,
//! CQEs into the send CQ).

use super::Hca;
use crate::clock::ScanClock;
use crate::delegate::Refused;
use crate::exec::Outcome;
use crate::qp::QpState;
use crate::rc::port::{Incoming, Outgoing};
use crate::rc::requester::{Action, Message};
use crate::trace::Kind;
use marrow_mlx5::wqe_decode::CtrlFields;
use marrow_roce::opcode::Operation;
use std::time::Instant;

impl Hca {
    /// Put the WQE `ctrl` of wire QP `qpn` on the wire as `msg`.
    pub(crate) fn wire_post(&mut self, qpn: u32, msg: Message, ctrl: CtrlFields, byte_cnt: u32) -> Outcome {
        if let Some(d) = self.qps.get_mut(&qpn).and_then(|q| q.delegate.as_mut()) {
            return match d.d.post(msg, ctrl, byte_cnt) {
                Ok(()) => Outcome::Sent,
                Err(Refused::Busy) => Outcome::Busy,
                Err(Refused::Error(syndrome, why)) => Outcome::Error { syndrome, vendor: 0, why },
            };
        }
        let rd_atomic = matches!(msg, Message::Read { .. } | Message::Atomic { .. });
        let Some(w) = self.qps.get_mut(&qpn).and_then(|q| q.wire.as_mut()) else {
            return Outcome::Error {
                syndrome: marrow_mlx5::raw::Syndrome::LOCAL_QP_OP_ERR,
                vendor: 0,
                why: "not a wire QP".into(),
            };
        };
        if !w.req.can_post(rd_atomic) {
            return Outcome::Busy;
        }
        let mut actions = Vec::new();
        w.req.post(Instant::now(), w.path.dest_qpn, msg, ctrl, byte_cnt, &mut actions);
        self.apply(qpn, actions);
        Outcome::Sent
    }

    /// A buffer for the next message of wire QP `qpn` to gather `len` bytes into.
    pub(crate) fn wire_buffer(&mut self, qpn: u32, len: usize) -> Vec<u8> {
        match self.qps.get_mut(&qpn).and_then(|q| q.wire.as_mut()) {
            Some(w) => w.req.buffer(len),
            None => Vec::new(),
        }
    }

    /// Carry out the requester's actions for `qpn`, in order.
    pub(crate) fn apply(&mut self, qpn: u32, actions: Vec<Action>) {
        for a in actions {
            match a {
                Action::Send(t) => self.wire_send(qpn, t),
                Action::Done { ctrl, byte_cnt } => self.wqe_done(qpn, ctrl, byte_cnt),
                Action::Failed { ctrl, syndrome, why } => {
                    if let Some(t) = &mut self.trace {
                        t.record(Kind::WQE_ERROR, qpn, 0, 0, format!("{syndrome:?}: {why}").as_bytes());
                    }
                    self.wqe_failed(qpn, ctrl, syndrome, 0, &why);
                }
                Action::Flushed { ctrl } => self.wqe_flushed(qpn, ctrl.opcode, ctrl.wqe_index),
            }
        }
    }

    /// Hand one transport packet of `qpn` to its port.
    fn wire_send(&mut self, qpn: u32, transport: Vec<u8>) {
        let Some(w) = self.qps.get(&qpn).and_then(|q| q.wire.as_ref()) else { return };
        let (port, dst_ip, dst_qpn) = (w.path.attrs.port, w.path.dest_ip, w.path.dest_qpn);
        let sent =
            self.ports.get(port as usize).and_then(|p| p.send(Outgoing { dst_ip, src_qpn: qpn, dst_qpn, transport }));
        if let Some(buf) = sent
            && let Some(w) = self.qps.get_mut(&qpn).and_then(|q| q.wire.as_mut())
        {
            w.req.recycle(buf);
        }
    }

    /// Run the requester timers of `qpn`; returns the actions taken.
    pub(crate) fn tick_wire(&mut self, qpn: u32, clock: &mut ScanClock) -> usize {
        let Some(qp) = self.qps.get_mut(&qpn) else { return 0 };
        if qp.delegate.is_some() {
            return self.poll_delegate(qpn);
        }
        if qp.state == QpState::Err {
            return 0;
        }
        let Some(w) = qp.wire.as_mut() else { return 0 };
        let mut actions = Vec::new();
        w.req.tick(clock.now(), w.path.dest_qpn, &mut actions);
        let n = actions.len();
        self.apply(qpn, actions);
        n
    }

    /// The QP that wire QP `dest_qp` on `port` is connected to (`None`: no such wire QP on that port).
    pub(crate) fn wire_peer(&self, port: u32, dest_qp: u32) -> Option<u32> {
        let w = self.qps.get(&dest_qp)?.wire.as_ref()?;
        (w.path.attrs.port == port).then_some(w.path.dest_qpn)
    }

    /// A packet that arrived on `port`.
    pub(crate) fn on_wire(&mut self, port: u32, inc: Incoming<'_>) {
        let p = &inc.packet;
        let qpn = p.dest_qp;
        let ok = self.qps.get(&qpn).is_some_and(|q| {
            q.state.can_receive()
                && q.wire.as_ref().is_some_and(|w| w.path.attrs.port == port && w.path.dest_ip == inc.src_ip)
        });
        if !ok {
            if let Some(s) = self.ports.get(port as usize) {
                s.stats.rx_no_qp.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            return;
        }
        let Some(mut w) = self.qps.get_mut(&qpn).and_then(|q| q.wire.take()) else { return };
        let request = matches!(
            p.kind(),
            Some((Operation::Write | Operation::Send | Operation::ReadRequest | Operation::Atomic, _))
        );
        if request {
            let mut out = Vec::new();
            w.resp.on_request(self, qpn, w.path.dest_qpn, p, &mut out);
            let fatal = w.resp.fatal.take();
            if let Some(q) = self.qps.get_mut(&qpn) {
                q.wire = Some(w);
            }
            for t in out {
                self.wire_send(qpn, t);
            }
            if let Some(why) = fatal {
                if let Some(t) = &mut self.trace {
                    t.record(Kind::WQE_ERROR, qpn, 0, 0, why.as_bytes());
                }
                self.fail_qp(qpn, why);
            }
        } else {
            let mut actions = Vec::new();
            w.req.on_packet(Instant::now(), w.path.dest_qpn, p, &mut actions);
            if let Some(q) = self.qps.get_mut(&qpn) {
                q.wire = Some(w);
            }
            self.apply(qpn, actions);
        }
    }
}
