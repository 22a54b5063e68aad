//! The mlx5 hardware backend: the same device code and GCRB as the softnic,
//! driving a ConnectX through rdma-core (`marrow-verbs`, loaded at run time).
//!
//! | Piece | Where | Checked here (no NIC) |
//! |---|---|---|
//! | rdma-core FFI, QP transitions, devx mailboxes, bootstrap, CPU proxy, probe | `marrow-verbs` | yes: oracle against the real headers, DEVX_SET, unit tests |
//! | GCRB from `mlx5dv_qp`/`mlx5dv_cq` | [`setup`] | yes: decoded and run through the device code on CPU threads |
//! | UAR and dma-buf on the GPU | [`gpu_map`] | no (no GPU here): compiles; the refusal path picks the CPU proxy |
//! | Opening a device | [`open`] | only the failure: a clear error naming what is missing |
//! | Two ranks end to end (`marrow bench mlx5`) | [`mod@bench`] | no (needs two ConnectX ports) |
//!
//! Doorbell modes: the UAR mapped into the GPU (`cudaHostRegister(...,
//! IoMemory)`), or, when the driver refuses that mapping (the
//! `PeerMappingOverride` case), a host mailbox that a CPU thread forwards
//! ([`marrow_verbs::proxy::DoorbellProxy`]); with no GPU, CPU threads store
//! to the UAR themselves.

pub mod bench;
pub mod bench_gpu;
pub mod bench_run;
pub mod gpu_map;
pub mod setup;

use marrow_verbs::probe::{self, Probe};
use std::path::Path;

/// A failure of the mlx5 backend.
#[derive(Debug, thiserror::Error)]
pub enum Mlx5Error {
    /// rdma-core refused or is missing.
    #[error(transparent)]
    Verbs(#[from] marrow_verbs::VerbsError),
    /// A queue the device code cannot drive.
    #[error("the device code cannot use this queue: {0}")]
    Queue(String),
    /// CUDA refused a mapping.
    #[error("CUDA: {0}")]
    Cuda(String),
    /// The GCRB page.
    #[error("{0}")]
    Window(#[from] marrow_mmio::OutOfBounds),
}

/// What opening the backend found.
#[derive(Debug)]
pub struct Opened {
    /// rdma-core, loaded.
    pub verbs: std::sync::Arc<marrow_verbs::Verbs>,
    /// mlx5 devices libibverbs lists.
    pub devices: Vec<String>,
    /// The host probe: mode and reason.
    pub probe: Probe,
}

/// Load rdma-core, list the mlx5 devices and probe the host. On a machine
/// without a NIC this is the error `marrow bench mlx5` prints: which
/// library is missing, or that `/sys/class/infiniband` is empty.
pub fn open(sysfs: &Path, proc_root: &Path) -> Result<Opened, Mlx5Error> {
    let (verbs, devices) = marrow_verbs::open_checked(sysfs)?;
    let probe = probe::probe(sysfs, proc_root, is_root());
    Ok(Opened { verbs: std::sync::Arc::new(verbs), devices, probe })
}

/// Effective uid 0, from `/proc/self/status` (no libc call needed).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
