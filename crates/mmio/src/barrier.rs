//! Memory barriers named by purpose, after rdma-core `util/udma_barrier.h`
//! ("each narrow use is given a name and the proper name should be used in
//! the provider as a form of documentation").
//!
//! The functions are generated from `hw-specs/barrier.toml`, the table the
//! device code compiled for the CPU (`kernels/include/marrow/barriers.h`,
//! through `generated/barrier.h`) takes its barriers from too; the table
//! with every instruction is `docs/hw/barrier.md`.

#[path = "generated/barrier.rs"]
mod generated;

pub use generated::{from_device, to_device, wc_flush, wc_start};
