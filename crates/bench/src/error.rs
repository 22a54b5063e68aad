//! What can stop a benchmark. A figure is reported only when every
//! operation it timed completed and its data arrived.

use std::path::PathBuf;
use std::time::Duration;

/// Why a benchmark produced no report.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The device model refused a resource (QP, CQ, MR).
    #[error("softnic: {0}")]
    Softnic(#[from] marrow_softnic::hca::HcaError),
    /// A WQE could not be posted (the ring, the doorbell record).
    #[error("posting {what}: {detail}")]
    Post {
        /// What was being posted.
        what: String,
        /// The driver's reason.
        detail: String,
    },
    /// The engine stopped short: its QP left RTS, or the deadline passed.
    #[error("{what}: {done} of {posted} WQEs executed after {waited:?}; QP state {state}; events {events}")]
    Stalled {
        /// What was being timed.
        what: String,
        /// WQEBBs posted.
        posted: u32,
        /// WQEBBs executed.
        done: u32,
        /// How long the benchmark waited.
        waited: Duration,
        /// The QP's state.
        state: String,
        /// The device's asynchronous events, decoded.
        events: String,
    },
    /// A completed transfer whose bytes are not the source's.
    #[error("{size} B RDMA_WRITE completed but byte {offset} of the target is {got:#04x}, the source's {want:#04x}")]
    Data {
        /// Message size.
        size: usize,
        /// First differing byte.
        offset: usize,
        /// What the target holds.
        got: u8,
        /// What the source holds.
        want: u8,
    },
    /// A registered buffer access out of bounds.
    #[error("buffer: {0:?}")]
    Bounds(marrow_mmio::OutOfBounds),
    /// An output file could not be written.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The CSV writer failed.
    #[error("CSV: {0}")]
    Csv(#[from] csv::Error),
    /// The plot could not be drawn.
    #[error("plot {path}: {detail}")]
    Plot {
        /// The file.
        path: PathBuf,
        /// plotters' reason.
        detail: String,
    },
    /// The RC transport benchmark over UDP failed.
    #[error("{0}")]
    Wire(String),
    /// Options that cannot run.
    #[error("{0}")]
    BadInput(String),
    /// The transport refused (no GPU, NVRTC, a channel, a world).
    #[error("{0}")]
    Transport(#[from] marrow_transport::TransportError),
    /// The copy-engine relay between two GPUs failed.
    #[error("{0}")]
    Relay(#[from] marrow_transport::p2p_relay::RelayError),
    /// Writing the report, or talking to the other PE.
    #[error("{0}")]
    Output(#[from] std::io::Error),
    /// A check failed: bytes that did not arrive, a thread's error code, a
    /// value out of its bounds, said with the decoded state.
    #[error("{0}")]
    Check(String),
}

impl From<&str> for BenchError {
    fn from(s: &str) -> Self {
        BenchError::Check(s.into())
    }
}

impl From<String> for BenchError {
    fn from(s: String) -> Self {
        BenchError::Check(s)
    }
}

impl From<marrow_mmio::OutOfBounds> for BenchError {
    fn from(e: marrow_mmio::OutOfBounds) -> Self {
        BenchError::Bounds(e)
    }
}

/// Bytes read back against the bytes that should have arrived: Ok, or a
/// failed check naming `what`, the first byte that differs and how many do.
pub fn same_bytes(what: &str, got: &[u8], want: &[u8]) -> Result<(), BenchError> {
    if got == want {
        return Ok(());
    }
    if got.len() != want.len() {
        return Err(BenchError::Check(format!("{what}: read back {} B, expected {} B", got.len(), want.len())));
    }
    let first = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
    let count = got.iter().zip(want).filter(|(g, w)| g != w).count();
    Err(BenchError::Check(format!(
        "{what}: byte {first:#x} is {:#04x}, expected {:#04x}; {count} of {} bytes differ",
        got[first],
        want[first],
        want.len()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_names_the_first_difference_and_the_count() {
        assert!(same_bytes("put", &[1, 2, 3], &[1, 2, 3]).is_ok());
        let e = same_bytes("put of 4 B", &[1, 9, 3, 7], &[1, 2, 3, 4]).unwrap_err().to_string();
        assert_eq!(e, "put of 4 B: byte 0x1 is 0x09, expected 0x02; 2 of 4 bytes differ");
        let e = same_bytes("get", &[1], &[1, 2]).unwrap_err().to_string();
        assert_eq!(e, "get: read back 1 B, expected 2 B");
    }
}
