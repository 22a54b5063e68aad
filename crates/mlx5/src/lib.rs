//! mlx5 (ConnectX) send WQE, CQE and doorbell layouts, with a typed layer.
//!
//! Two levels, as smoltcp's `wire` does it:
//!
//! - [`generated::mlx5`]: raw layouts generated from `hw-specs/mlx5.toml`
//!   (zerocopy structs with big-endian fields, spec field names such as
//!   `opmod_idx_opcode`, `qpn_ds`, `op_own`, const layout asserts, open
//!   enums that keep unknown codes);
//! - a typed layer: [`wqe::build_wqe`] composes segments into WQEBBs,
//!   [`wqe_decode::WqeView`] walks them back, [`cqe`] checks ownership and
//!   yields a [`cqe::Completion`], [`doorbell`] builds doorbell records and
//!   UAR doorbell values.
//!
//! ```
//! use marrow_mlx5::prelude::*;
//!
//! // An 8-byte RDMA write, WQE index 5 on QP 0x1234.
//! let sge = [Sge { addr: 0x1000, length: 8, lkey: 0x11 }];
//! let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: 0x2000, rkey: 0x22 }, sgl: &sge };
//! let mut ring_slot = [0xA5u8; 64];
//! let built = build_wqe(&CtrlParams::signaled(5, 0x1234), &op, &mut ring_slot).unwrap();
//! assert_eq!((built.ds, built.wqebbs), (3, 1));
//!
//! // Read it back as the NIC does.
//! let parsed = WqeView::new(&ring_slot).unwrap().parse().unwrap();
//! assert_eq!(parsed.ctrl.opcode, WqeOpcode::RDMA_WRITE);
//! assert_eq!(parsed.remote.unwrap().raddr, 0x2000);
//!
//! // The doorbell record then carries the next free WQEBB: 5 + 1.
//! assert_eq!(qp_dbrec_send_word(5 + built.wqebbs as u16), [0, 0, 0, 6]);
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

/// Raw layouts generated from `hw-specs/mlx5.toml` by `cargo xtask codegen`.
#[allow(missing_docs)]
pub mod generated {
    // Written by `cargo xtask codegen`, whose `--check` keeps it byte for byte.
    #[rustfmt::skip]
    pub mod mlx5;
}

pub mod cqe;
pub mod doorbell;
pub mod wqe;
pub mod wqe_decode;

pub use generated::mlx5 as raw;

/// The types most users need.
pub mod prelude {
    pub use crate::cqe::{Completion, CqeError, CqePoll, ErrorCompletion, decode_cqe, encode_cqe, poll_cqe, sw_owns};
    pub use crate::doorbell::{
        DoorbellStyle, UarDoorbell, cq_dbrec_set_ci, decode_uar_doorbell, qp_dbrec, qp_dbrec_send_word,
        uar_doorbell_from_ctrl, uar_doorbell_index_qpn,
    };
    pub use crate::generated::mlx5::{CompletionMode, CqeFormat, CqeOpcode, FenceMode, Syndrome, WqeOpcode};
    pub use crate::wqe::{BuiltWqe, CtrlParams, RemoteAddr, Sge, WqeError, WqeOp, build_wqe};
    pub use crate::wqe_decode::{AtomicArgs, CtrlFields, Local, ParsedWqe, Segment, WqeDecodeError, WqeView};
}
