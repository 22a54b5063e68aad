//! `marrow`: command-line tools for the marrow mlx5 stack.
//!
//! `marrow decode` reads WQEs, CQEs, doorbell records and UAR doorbell
//! values from hex, xxd or raw bytes and prints them field by field, with
//! the field names of `hw-specs/mlx5.toml` (through the generated `LAYOUT`
//! tables of `marrow-mlx5`).
//!
//! The pieces are library modules so that tests can drive them:
//! [`hexin`] parses input, [`decode`] builds a [`model::Report`], and
//! [`print`] renders it as text or JSON.
#![forbid(unsafe_code)]

pub mod decode;
pub mod fields;
pub mod hexin;
pub mod model;
pub mod print;
