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
