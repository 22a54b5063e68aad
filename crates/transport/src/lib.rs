//! marrow's host side: backends, registered memory, channels (QP + CQ +
//! GCRB), and running the device code.
//!
//! Backends: the softnic (here and now); the mlx5 hardware backend
//! ([`mlx5`], over rdma-core loaded at run time by `marrow-verbs`; it needs
//! a ConnectX, so on other machines it returns an error naming what is
//! missing); the GPU peer-to-peer backend ([`p2p`]). The device code runs
//! on CPU threads through [`cpu::Device`] (the same
//! `kernels/include/marrow/device.h` that the GPU runs) and on the GPU
//! through [`gpu::Gpu`] (cudarc, loaded at run time).

pub mod cpu;
pub mod gcrb_page;
pub mod gpu;
pub mod gpu_checks;
pub mod gpu_doca;
pub mod gpu_memory;
pub mod kernel_cache;
pub mod mlx5;
pub mod p2p;
pub mod p2p_relay;
pub mod remote;
pub mod verbs_proxy;
pub mod world;

pub use world::{Channel, WireOptions, WirePeer, World, WorldConfig};

/// A failure of the host side.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Something this build does not have yet.
    #[error("not built yet: {0}")]
    Missing(&'static str),
    /// Something this machine does not have.
    #[error("unavailable on this machine: {0}")]
    Unavailable(&'static str),
    /// The device model refused.
    #[error("softnic: {0}")]
    Softnic(#[from] marrow_softnic::HcaError),
    /// Shared memory.
    #[error("shared memory: {0}")]
    Io(#[from] std::io::Error),
    /// A window access.
    #[error("{0}")]
    Window(#[from] marrow_mmio::OutOfBounds),
    /// The softnic daemon refused or failed.
    #[error("softnic daemon: {0}")]
    Daemon(String),
    /// A configuration the device code would refuse.
    #[error("configuration: {0}")]
    Config(String),
    /// The CUDA driver or NVRTC refused.
    #[error("CUDA: {0}")]
    Cuda(String),
}

/// An error code the device code returned: a [`DeviceStatus`] other than
/// `OK` (`hw-specs/gcrb.toml`, generated for the device code and here).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceError(pub i32);

pub use marrow_gcrb::DeviceStatus;

impl DeviceError {
    /// The error `status` names.
    pub const fn of(status: DeviceStatus) -> DeviceError {
        DeviceError(status.0)
    }

    /// The syndrome, when an error CQE caused it (`E_CQE_BASE - syndrome`).
    pub fn syndrome(&self) -> Option<marrow_mlx5::raw::Syndrome> {
        let base = DeviceStatus::CQE_BASE.0;
        (self.0 <= base && self.0 > base - 256).then(|| marrow_mlx5::raw::Syndrome((base - self.0) as u8))
    }
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match DeviceStatus(self.0) {
            DeviceStatus::TIMEOUT => {
                write!(f, "E_TIMEOUT: a device-side wait timed out (the GCRB error block says which)")
            }
            DeviceStatus::BAD_CONFIG => write!(
                f,
                "E_BAD_CONFIG: the GCRB's magic or version is wrong, or an exclusive channel was called by only some of its owner's lanes"
            ),
            DeviceStatus::RANGE => write!(
                f,
                "E_RANGE: an offset outside the local window, a PE outside the key table, or a length a WQE cannot carry"
            ),
            DeviceStatus::UNSUPPORTED => write!(
                f,
                "E_UNSUPPORTED: not built for this transport yet (an 8-byte value put on MLX5 needs inline WQEs)"
            ),
            _ => match self.syndrome() {
                Some(s) => write!(f, "error CQE, syndrome {s:?}"),
                None => write!(f, "device error code {}", self.0),
            },
        }
    }
}

impl std::error::Error for DeviceError {}
