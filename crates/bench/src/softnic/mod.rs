//! The device model's benchmarks (`marrow bench softnic`).
//!
//! - [`sweep`]: perftest's `-a` over one engine thread: RDMA_WRITE
//!   bandwidth and latency from 2 B to 8 MiB, each size against the floor
//!   of the memory traffic the engine must do at least;
//! - [`figures`]: the engine rate and 64 KiB bandwidth figures with their
//!   targets, and what tracing costs;
//! - [`wire`]: the RC transport between two instances over loopback UDP.

pub mod figures;
pub mod sweep;
pub mod wire;

use marrow_driver::PostError;
use marrow_mlx5::raw::CompletionMode;
use marrow_mlx5::wqe::{CtrlParams, RemoteAddr, Sge, WqeOp};
use marrow_softnic::pair::Pair;

/// Post `n` RDMA_WRITEs of `size` bytes from A's buffer to B's, only the
/// last signaled (its CQE completes them all), and ring once.
fn post_writes(p: &mut Pair, size: usize, n: usize) -> Result<(), PostError> {
    let sgl = [Sge { addr: p.a.addr, length: size as u32, lkey: p.a.lkey }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey }, sgl: &sgl };
    let quiet = CtrlParams { completion: CompletionMode::CQE_ON_CQE_ERROR, ..CtrlParams::signaled(0, 0) };
    for i in 0..n {
        p.a.sq.post(if i + 1 == n { CtrlParams::signaled(0, 0) } else { quiet }, &op)?;
    }
    p.a.sq.ring()
}
