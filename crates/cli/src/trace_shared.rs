//! What the two renderers of `marrow trace show` share: the general path
//! (`crate::trace`, through the decode tree) and the fast path
//! (`crate::trace_text`, straight into a byte buffer) agree on the record
//! kinds the format defines, how much to print of each, and what the
//! filter needs to know of a record.

use marrow_mlx5::raw::{CqeOpcode, WqeOpcode};
use marrow_softnic::trace::Kind;

/// Every record kind the format defines.
pub const KINDS: &[Kind] = &[
    Kind::DOORBELL,
    Kind::DOORBELL_DROPPED,
    Kind::DBREC_READ,
    Kind::WQE_FETCH,
    Kind::CQE_WRITE,
    Kind::QP_STATE,
    Kind::CQ_OVERFLOW,
    Kind::FAULT,
    Kind::RECV_WQE_FETCH,
    Kind::WQE_ERROR,
    Kind::BLUEFLAME,
];

/// How much to print per record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Detail {
    /// One line per record.
    Brief,
    /// WQEs field by field, the completion line of CQEs, receive scatter lists.
    #[default]
    Normal,
    /// Also every field of CQEs, doorbells and doorbell records.
    Full,
}

/// What the filter's tests that need the decoded record look at (a [`crate::trace::View`]'s flags).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// [`crate::trace::View::is_error`].
    pub is_error: bool,
    /// [`crate::trace::View::wqe_opcode`].
    pub wqe_opcode: Option<WqeOpcode>,
    /// [`crate::trace::View::cqe_opcode`].
    pub cqe_opcode: Option<CqeOpcode>,
}
