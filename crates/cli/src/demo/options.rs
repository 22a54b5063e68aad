//! What `marrow demo` is asked to run, and the faults it can arm.

use super::DEFAULT_TRACE_CAP;
use std::path::PathBuf;
use std::time::Duration;

/// What `marrow demo` runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// A shorter run (a few iterations per row).
    pub quick: bool,
    /// Where the register trace is written.
    pub trace_out: PathBuf,
    /// The trace's byte cap.
    pub trace_cap: usize,
    /// How long each completion may take.
    pub timeout: Duration,
    /// A fault to arm on QP A before the run, to see how the demo fails.
    pub inject: Option<Inject>,
    /// Put B on a second softnic, reached over RoCEv2 on loopback UDP.
    pub wire: bool,
    /// Write every RoCEv2 frame A's port sends and receives here (with `wire`).
    pub pcap: Option<PathBuf>,
    /// With `wire`: run B's softnic as another process, this `marrow`
    /// executable's `softnic` daemon; `None` keeps both in this process.
    pub softnic_exe: Option<PathBuf>,
}

/// A fault `marrow demo --inject` arms on QP A (through the softnic's fault injection).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// The engine stops serving QP A: the first wait times out.
    Stall,
    /// WQE number N (0-based) of QP A fails with REMOTE_ACCESS_ERR.
    FailWqe(u64),
    /// The next doorbell of QP A is lost.
    DropDoorbell,
}

/// `stall`, `drop-doorbell` or `fail-wqe:N`.
pub fn parse_inject(s: &str) -> Result<Inject, String> {
    match s {
        "stall" => Ok(Inject::Stall),
        "drop-doorbell" => Ok(Inject::DropDoorbell),
        _ => match s.strip_prefix("fail-wqe:") {
            Some(n) => crate::trace::parse_num(n).map(Inject::FailWqe),
            None => Err(format!("unknown fault '{s}': stall, drop-doorbell or fail-wqe:N")),
        },
    }
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            quick: false,
            trace_out: PathBuf::from("marrow-demo.trace"),
            trace_cap: DEFAULT_TRACE_CAP,
            timeout: Duration::from_secs(5),
            inject: None,
            wire: false,
            pcap: None,
            softnic_exe: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_by_name() {
        assert_eq!(parse_inject("fail-wqe:0x10"), Ok(Inject::FailWqe(16)));
        assert_eq!(parse_inject("stall"), Ok(Inject::Stall));
        assert!(parse_inject("boom").is_err());
    }
}
