//! marrow's mlx5 hardware backend, below the transport: rdma-core
//! (`libibverbs.so.1`, `libmlx5.so.1`) loaded at run time, and everything
//! around it that can be checked without a NIC.
//!
//! | Module | What |
//! |---|---|
//! | [`ffi`] | hand-declared `#[repr(C)]` structs and constants, checked against the real headers by `tests/oracle` |
//! | [`any`] | an RC endpoint on a device of any provider (rxe, EFA, eRDMA...) through libibverbs alone: PD, MR, CQ, RC QP, post and poll through the provider's ops (the verbs proxy's) |
//! | [`lib_load`] | `dlopen` of rdma-core; a typed error naming the package when it is absent |
//! | [`device`] | step 1: PD, CQ, RC QP on host memory, `mlx5dv_init_obj`, QP transitions, memory registration (host, dma-buf) |
//! | [`devx`] | step 2: devx CREATE_CQ/CREATE_QP/CREATE_UMEM command mailboxes built from the generated PRM layouts (GPU-memory queues) |
//! | [`qp`] | the RESET→INIT→RTR→RTS attribute sets as pure functions, checked against the kernel's table |
//! | [`bootstrap`] | rank/size from mpirun/srun/PMIx environments; the all-gather by MPI under mpirun, a TCP rendezvous by unique id otherwise |
//! | [`group`] | the ranks of a job kept met: all-gather again, barrier (TCP rendezvous or MPI) |
//! | [`mpi`] | `dlopen` of libmpi (Open MPI or MPICH): init, rank, size, `MPI_Allgather` of bytes |
//! | [`proxy`] | the CPU-proxy doorbell: GPU → host mailbox → a CPU thread → UAR |
//! | [`probe`] | sysfs/procfs: devices, link layers, the doorbell mode that would be chosen and why |
//! | [`hostfile`] | reading sysfs/procfs files bounded: regular files only, never blocking, never past their size |
//! | [`gids`] | sysfs: the GID table of each port (GID, RoCE type, netdev) and the index a RoCE QP should use |
//!
//! Nothing here runs against a NIC on the development machines (there is
//! none); the functions that need one return [`VerbsError`]s that name what
//! is missing.

pub mod any;
pub mod bootstrap;
pub mod device;
pub mod devx;
pub mod ffi;
pub mod gids;
pub mod group;
pub mod hostfile;
pub mod lib_load;
pub mod mpi;
pub mod probe;
pub mod proxy;
pub mod qp;

pub use lib_load::{Ibverbs, Verbs};

/// A failure of the mlx5 backend, each naming what is missing or refused.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    /// rdma-core's shared library is not installed (or not where the
    /// override points).
    #[error(
        "{lib} not found ({detail}): install rdma-core's runtime (apt install libibverbs1 ibverbs-providers; the {package} package provides it)"
    )]
    LibraryMissing {
        /// Library path or name tried.
        lib: String,
        /// Debian package that ships it.
        package: &'static str,
        /// The loader's message.
        detail: String,
    },
    /// The library is too old to have a symbol marrow calls.
    #[error(
        "{lib} has no {symbol} ({detail}): rdma-core is too old; marrow needs rdma-core 33 or newer (Debian 12 ships 44)"
    )]
    SymbolMissing {
        /// Library.
        lib: String,
        /// Symbol.
        symbol: &'static str,
        /// The loader's message.
        detail: String,
    },
    /// libibverbs lists no device, or none that mlx5 drives.
    #[error("no RDMA device: {0}")]
    NoDevice(String),
    /// The named device is not there.
    #[error("RDMA device {wanted} not found; present: {present}")]
    DeviceNotFound {
        /// Requested.
        wanted: String,
        /// Listed.
        present: String,
    },
    /// A verbs or mlx5dv call failed.
    #[error("{call} failed: {err}")]
    Call {
        /// Function.
        call: &'static str,
        /// errno.
        err: std::io::Error,
    },
    /// A devx command failed; the status and syndrome come from the firmware.
    #[error("devx {cmd} failed: {err} (firmware status {status:#x}, syndrome {syndrome:#x})")]
    Devx {
        /// Command.
        cmd: &'static str,
        /// errno.
        err: std::io::Error,
        /// `status` of the command output.
        status: u8,
        /// `syndrome` of the command output.
        syndrome: u32,
    },
    /// A queue the device code cannot use (stride, size…).
    #[error("unusable queue: {0}")]
    Queue(String),
    /// No libmpi could be opened (the bootstrap under mpirun wanted one).
    #[error(
        "libmpi not found (tried {tried}: {detail}): install Open MPI's runtime (apt install libopenmpi3 openmpi-bin) or MPICH's (apt install libmpich12 mpich), or point MARROW_MPI_LIB at a libmpi.so"
    )]
    MpiMissing {
        /// Libraries tried.
        tried: String,
        /// The loader's messages.
        detail: String,
    },
    /// Bootstrap failed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// A feature this rdma-core lacks.
    #[error("not supported by this rdma-core: {0}")]
    Unsupported(&'static str),
}

/// Load rdma-core and check there is an mlx5 device: the first thing
/// `marrow bench mlx5` and the transport do, and the error a machine without
/// a NIC gets (naming the library or the sysfs state).
pub fn open_checked(sysfs: &std::path::Path) -> Result<(Verbs, Vec<String>), VerbsError> {
    let v = Verbs::load()?;
    let devs = v.devices()?;
    let mlx5: Vec<String> = devs.iter().filter(|(_, m)| *m).map(|(n, _)| n.clone()).collect();
    if mlx5.is_empty() {
        let listed = if devs.is_empty() {
            "ibv_get_device_list returned 0 devices".to_string()
        } else {
            format!(
                "ibv_get_device_list returned {} but none is mlx5",
                devs.iter().map(|d| d.0.as_str()).collect::<Vec<_>>().join(", ")
            )
        };
        return Err(VerbsError::NoDevice(format!("{listed}; {}", probe::no_device_reason(sysfs))));
    }
    Ok((v, mlx5))
}
