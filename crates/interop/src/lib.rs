//! marrow's side of rdma-core's own tools. A RoCEv2 peer that nobody here
//! wrote (Linux Soft-RoCE, `drivers/infiniband/sw/rxe`, driven by
//! `ibv_rc_pingpong` in a QEMU guest) exchanges traffic with a softnic
//! endpoint whose work requests the CPU initiator posts; every byte that
//! arrives is checked.
//!
//! - [`exchange`]: the out-of-band line rdma-core's pingpong examples swap
//!   over TCP (`LID:QPN:PSN:GID`);
//! - [`host`]: the softnic with one raw Ethernet frame port (the far end of
//!   the guest's virtio-net NIC), and RC endpoints on it with waits that time
//!   out with the QP's decoded state;
//! - [`pingpong`]: `ibv_rc_pingpong`'s protocol, as server and as client;
//! - [`perftest`]: perftest's (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`,
//!   `ib_atomic_bw`), as server and as client;
//! - [`matrix`]: the steps `cargo xtask interop test` runs, shared by the
//!   guest's script and the host.

pub mod exchange;
pub mod host;
pub mod matrix;
pub mod perftest;
pub mod pingpong;

/// What went wrong on marrow's side of a step.
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    /// A socket or file failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The peer's out-of-band message was not what the tool sends.
    #[error("connection exchange: {0}")]
    Exchange(String),
    /// The softnic refused a setup step.
    #[error("softnic setup: {0}")]
    Setup(String),
    /// Nothing arrived in time.
    #[error("{0}")]
    Timeout(String),
    /// A completion other than the one expected.
    #[error("completion: {0}")]
    Completion(String),
    /// Data that arrived differs from what the peer must have sent.
    #[error("data check: {0}")]
    Mismatch(String),
}

impl InteropError {
    /// An I/O error with what was being done.
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> InteropError {
        let what = what.into();
        move |source| InteropError::Io { what, source }
    }
}
