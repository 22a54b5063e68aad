//! The CPU initiator: a send queue that posts WQEs and rings the doorbell in
//! rdma-core's order, a receive queue, and a CQ poller. It drives any mlx5
//! device whose rings it is given as [`Region`]s: the softnic, or a
//! ConnectX through rdma-core's `mlx5dv_init_obj` buffers.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cq;
mod rq;
mod sq;

pub use cq::{CqMode, CqPoller, PollError};
pub use rq::{RecvError, RecvQueue};
pub use sq::{PostError, SendQueue};

pub use marrow_mmio::Region;
