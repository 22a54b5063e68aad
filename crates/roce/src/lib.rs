//! RoCEv2 on the wire (InfiniBand Architecture Specification vol. 1 ch. 9
//! and Annex A17): the header layouts generated from `hw-specs/roce.toml`,
//! the ICRC, and a parser and builder of whole packets that never panics on
//! any bytes.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

/// Raw layouts generated from `hw-specs/roce.toml` by `cargo xtask codegen`.
#[allow(missing_docs)]
pub mod generated {
    // Written by `cargo xtask codegen`, whose `--check` keeps it byte for byte.
    #[rustfmt::skip]
    pub mod roce;
}

pub use generated::roce as raw;

pub mod frame;
pub mod icrc;
pub mod opcode;
pub mod packet;
pub mod psn;

pub use frame::{Addrs, Frame, FrameError};
pub use packet::{Aeth, AtomicEth, Packet, ParseError, Reth};
pub use raw::{AethNakCode, AethType, BthOpcode};

/// Take a header of type `T` off the front of `bytes`; `Err((need, have))`
/// when fewer bytes remain than it needs.
pub(crate) fn take<T: zerocopy::FromBytes + zerocopy::KnownLayout + zerocopy::Immutable>(
    bytes: &mut &[u8],
) -> Result<T, (usize, usize)> {
    let have = bytes.len();
    let (h, rest) = T::read_from_prefix(bytes).map_err(|_| (core::mem::size_of::<T>(), have))?;
    *bytes = rest;
    Ok(h)
}
