//! QPs whose transport is outside the model. The engine treats such a QP as
//! any other: it finds its doorbells in the UAR page, fetches, validates and
//! decodes its WQEs (`crate::hca`, `crate::exec`) and writes every CQE in
//! the mlx5 layout. What it would put on a RoCEv2 wire it hands to a
//! [`Delegate`] instead: the verbs proxy (`marrow_transport::verbs_proxy`)
//! posts each message on a verbs RC QP of any RDMA device and reports its
//! completions back here, so device code that writes mlx5 WQEs and polls
//! mlx5 CQEs runs over any RDMA NIC (NVSHMEM's IBRC idea: a CPU proxy).
//!
//! Completions come back in WQE order (an RC send queue completes in order,
//! IBA vol. 1 §10.8.3); the engine writes the CQE each WQE asked for. A
//! message that arrives at the delegate's QP (a SEND, an RDMA WRITE with
//! immediate) is handed back as an [`Event`] and lands in the next receive
//! WQE of the model's QP, with the responder CQE a ConnectX writes.

use crate::rc::requester::Message;
use marrow_mlx5::raw::Syndrome;
use marrow_mlx5::wqe_decode::CtrlFields;

/// Why a delegate did not take a message.
#[derive(Debug)]
pub enum Refused {
    /// As many messages outstanding as it may have: try again later.
    Busy,
    /// Never: the WQE completes with this syndrome (`why` for the trace).
    Error(Syndrome, String),
}

/// What a delegate reports from its completion queue.
#[derive(Debug)]
pub enum Event {
    /// The WQE completed.
    Done {
        /// Its control fields.
        ctrl: CtrlFields,
        /// `byte_cnt` for the CQE.
        byte_cnt: u32,
    },
    /// The WQE failed: the error CQE, and the QP goes to ERR.
    Failed {
        /// Its control fields.
        ctrl: CtrlFields,
        /// The syndrome a ConnectX would report.
        syndrome: Syndrome,
        /// Vendor syndrome (the provider's `vendor_err`, low byte).
        vendor: u8,
        /// Why, for the trace.
        why: String,
    },
    /// The WQE was flushed (it was outstanding when the QP failed).
    Flushed {
        /// Its control fields.
        ctrl: CtrlFields,
    },
    /// A SEND (with immediate) arrived: the bytes for the next receive WQE.
    Received {
        /// The message.
        data: Vec<u8>,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// An RDMA WRITE with immediate landed (its data is already in memory):
    /// it consumes the next receive WQE.
    WriteImm {
        /// Bytes written.
        len: u32,
        /// Immediate data.
        imm: u32,
    },
    /// The delegate's QP failed outside any WQE (a receive error).
    Fatal(String),
}

/// A transport for one QP of the model.
pub trait Delegate: Send + std::fmt::Debug {
    /// Post the message of WQE `ctrl` (`byte_cnt` for its CQE).
    fn post(&mut self, msg: Message, ctrl: CtrlFields, byte_cnt: u32) -> Result<(), Refused>;
    /// Append what completed since the last call, in order.
    fn poll(&mut self, out: &mut Vec<Event>);
    /// Messages posted and not yet reported.
    fn outstanding(&self) -> usize;
}

/// A QP's delegate and the arrivals waiting for a receive WQE.
#[derive(Debug)]
pub struct DelegateQp {
    /// The transport.
    pub d: Box<dyn Delegate>,
    /// Arrivals no receive WQE has taken yet, oldest first.
    pub held: std::collections::VecDeque<Event>,
}

impl crate::hca::Hca {
    /// Hand QP `qpn`'s messages to `d` from now on (a QP in RTR or RTS,
    /// connected by [`crate::ModifyQp::rtr`] to the delegate's peer QP).
    pub fn set_delegate(&mut self, qpn: u32, d: Box<dyn Delegate>) -> Result<(), crate::HcaError> {
        let qp = self.qp_mut(qpn)?;
        qp.delegate = Some(DelegateQp { d, held: std::collections::VecDeque::new() });
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
                    t.record(crate::trace::Kind::WQE_ERROR, qpn, 0, 0, why.as_bytes());
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
        use crate::respond::{self, Nak, Src};
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
                    t.record(crate::trace::Kind::WQE_ERROR, qpn, 0, 0, why.as_bytes());
                }
                self.fail_qp(qpn, why);
                true
            }
        }
    }
}
