//! `marrow`: command-line tools for the marrow mlx5 stack.
//!
//! `marrow decode` reads WQEs, CQEs, doorbell records and UAR doorbell
//! values from hex, xxd or raw bytes and prints them field by field, with
//! the field names of `hw-specs/mlx5.toml` (through the generated `LAYOUT`
//! tables of `marrow-mlx5`).
//!
//! `marrow demo` runs two RC endpoints on the embedded softnic device model
//! through every operation, checks every byte, and prints latencies and the
//! register trace; `marrow trace show` decodes a trace file.
//!
//! The pieces are library modules so that tests can drive them:
//! [`hexin`] parses input, [`decode`] builds a [`model::Report`], and
//! [`print`](mod@print) renders it as text or JSON; [`demo`] and [`trace`] are the
//! other two commands.
#![forbid(unsafe_code)]

pub mod bench_compare;
pub mod bench_out;
pub mod columns;
pub mod decode;
pub mod demo;
pub mod doctor;
pub mod fields;
pub mod hexin;
pub mod interop;
pub mod mlx5_bench;
pub mod model;
pub mod pcie_bridge;
pub mod pcie_caps;
pub mod pcie_caps_more;
pub mod pcie_decode;
pub mod pcie_express;
pub mod pcie_ext;
pub mod pcie_ext_dpc_sriov_phy;
pub mod pcie_ext_ide_vc;
pub mod pcie_ext_rcld_mcast;
pub mod pcie_header;
pub mod pcie_json;
pub mod pcie_out;
pub mod pcie_titles;
pub mod pcie_tlp;
pub mod port_spec;
pub mod print;
pub mod trace;
mod trace_shared;
pub mod trace_stats;
mod trace_text;
pub mod verbs_bench;
