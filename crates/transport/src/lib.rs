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
pub mod mlx5;
pub mod p2p;
pub mod p2p_relay;
pub mod remote;
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

/// An error code the device code returned (see `kernels/include/marrow/device.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceError(pub i32);

impl DeviceError {
    /// The syndrome, when an error CQE caused it.
    pub fn syndrome(&self) -> Option<marrow_mlx5::raw::Syndrome> {
        (self.0 <= -1000 && self.0 > -1256).then(|| marrow_mlx5::raw::Syndrome((-1000 - self.0) as u8))
    }
}

impl std::fmt::Display for DeviceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            -110 => write!(f, "a device-side wait timed out (the GCRB error block says which)"),
            -22 => write!(f, "the GCRB's magic or version is wrong"),
            -34 => write!(f, "offset outside the local window or PE outside the key table"),
            -95 => write!(f, "not built for this transport yet (an 8-byte value put on MLX5 needs inline WQEs)"),
            _ => match self.syndrome() {
                Some(s) => write!(f, "error CQE, syndrome {s:?}"),
                None => write!(f, "device error code {}", self.0),
            },
        }
    }
}

impl std::error::Error for DeviceError {}
