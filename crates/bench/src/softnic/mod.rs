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
