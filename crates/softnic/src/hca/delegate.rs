//! The engine's side of a delegated QP (`crate::delegate`): messages
//! handed to the delegate, and what it reports turned into CQEs and
//! receive completions, as for a QP on the model's own wire.

use super::{Hca, HcaError};
use crate::delegate::{Delegate, DelegateQp, Event};
use crate::respond::{self, Nak, Src};
use crate::trace::Kind;
use std::collections::VecDeque;

impl Hca {
    /// Hand QP `qpn`'s messages to `d` from now on (a QP in RTR or RTS,
    /// connected by [`crate::ModifyQp::rtr`] to the delegate's peer QP).
    pub fn set_delegate(&mut self, qpn: u32, d: Box<dyn Delegate>) -> Result<(), HcaError> {
        let qp = self.qp_mut(qpn)?;
        qp.delegate = Some(DelegateQp { d, held: VecDeque::new() });
        Ok(())
    }

    /// Poll `qpn`'s delegate and act on what it reports; returns the events.
    pub(crate) fn poll_delegate(&mut self, qpn: u32) -> usize {
        let mut events = Vec::new();
        let Some(d) = self.qps.get_mut(&qpn).and_then(|q| q.delegate.as_mut()) else { return 0 };
        d.d.poll(&mut events);
        let n = events.len();
        for e in events {
            self.delegate_event(qpn, e);
        }
        // Arrivals that waited for a receive WQE, in order, while one is there.
        while let Some(d) = self.qps.get_mut(&qpn).and_then(|q| q.delegate.as_mut()) {
            let Some(e) = d.held.pop_front() else { break };
            if !self.deliver(qpn, &e) {
                if let Some(d) = self.qps.get_mut(&qpn).and_then(|q| q.delegate.as_mut()) {
                    d.held.push_front(e);
                }
                break;
            }
        }
        n
    }

    fn delegate_event(&mut self, qpn: u32, e: Event) {
        match e {
            Event::Done { ctrl, byte_cnt } => self.wqe_done(qpn, ctrl, byte_cnt),
            Event::Failed { ctrl, syndrome, vendor, why } => self.wqe_failed(qpn, ctrl, syndrome, vendor, &why),
            Event::Flushed { ctrl } => self.wqe_flushed(qpn, ctrl.opcode, ctrl.wqe_index),
            Event::Fatal(why) => {
                if let Some(t) = &mut self.trace {
                    t.record(Kind::WQE_ERROR, qpn, 0, 0, why.as_bytes());
                }
                self.fail_qp(qpn, why);
            }
            arrival => {
                let waiting = self.qps.get(&qpn).and_then(|q| q.delegate.as_ref()).is_some_and(|d| !d.held.is_empty());
                if (waiting || !self.deliver(qpn, &arrival))
                    && let Some(d) = self.qps.get_mut(&qpn).and_then(|q| q.delegate.as_mut())
                {
                    d.held.push_back(arrival);
                }
            }
        }
    }

    /// Land an arrival in the next receive WQE of `qpn`; false when there
    /// is none yet (it waits, as a ConnectX's RNR NAK would make the sender).
    fn deliver(&mut self, qpn: u32, e: &Event) -> bool {
        let r = match e {
            Event::Received { data, imm } => respond::send(self, qpn, Src::Bytes(data), *imm),
            Event::WriteImm { len, imm } => respond::write_imm_done(self, qpn, *len, *imm),
            _ => Ok(()),
        };
        match r {
            Ok(()) => true,
            Err(Nak::Rnr) => false,
            Err(n) => {
                let why = format!("arrival on the delegate's QP refused: {n:?}");
                if let Some(t) = &mut self.trace {
                    t.record(Kind::WQE_ERROR, qpn, 0, 0, why.as_bytes());
                }
                self.fail_qp(qpn, why);
                true
            }
        }
    }
}
