//! Fault injection, per QP: what upper layers use to test their error paths
//! (a dropped or late doorbell, a failing WQE, a stalled engine, a CQ
//! overflow) without waiting for hardware to misbehave.

use marrow_mlx5::raw::Syndrome;
use std::time::Duration;

/// Faults armed on one QP. Each one-shot fault disarms itself when it fires.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Ignore the next N doorbells of this QP, as if the MMIO write was lost.
    pub drop_doorbells: u32,
    /// Act on each doorbell only after this delay.
    pub delay_doorbell: Option<Duration>,
    /// Fail the WQE with this 0-based execution count, with this syndrome
    /// and vendor syndrome, instead of executing it.
    pub fail_wqe: Option<(u64, Syndrome, u8)>,
    /// Do not process this QP at all while set: a hung engine.
    pub stall: bool,
    /// Overflow the send CQ on the next CQE.
    pub overflow_cq: bool,
}
