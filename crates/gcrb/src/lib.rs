//! The GPU comm register block (GCRB): one 4 KiB page per channel that the
//! host fills and the device code reads and updates. Layout generated from
//! `hw-specs/gcrb.toml` for Rust and for the device code
//! (`kernels/include/marrow/generated/gcrb.h`).
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// Raw layouts generated from `hw-specs/gcrb.toml` by `cargo xtask codegen`.
#[allow(missing_docs)]
pub mod generated {
    // Written by `cargo xtask codegen`, whose `--check` keeps it byte for byte.
    #[rustfmt::skip]
    pub mod gcrb;
}

pub use generated::gcrb::*;

const _: () = assert!(GCRB_OFF_HEADS as usize >= GCRB_OFF_CONFIG as usize + gcrb_config::SIZE);
const _: () = assert!(GCRB_OFF_ERROR as usize >= GCRB_OFF_HEADS as usize + gcrb_heads::SIZE);
const _: () = assert!(GCRB_OFF_KEYS as usize >= GCRB_OFF_ERROR as usize + gcrb_error::SIZE);
const _: () = assert!(GCRB_OFF_READY_MARKS as usize >= GCRB_OFF_KEYS as usize + GCRB_KEYS as usize * gcrb_key::SIZE);
const _: () = assert!(GCRB_READY_MARK_BITS.is_multiple_of(64) && GCRB_OFF_READY_MARKS.is_multiple_of(8));
const _: () = assert!(GCRB_OFF_TRACE as usize >= GCRB_OFF_READY_MARKS as usize + GCRB_READY_MARK_BITS as usize / 8);
const _: () =
    assert!(GCRB_PAGE_SIZE as usize == GCRB_OFF_TRACE as usize + GCRB_TRACE_ENTRIES as usize * gcrb_trace_entry::SIZE);
