//! PCI configuration space as bytes: the type 0/1 header and its BARs
//! (PCI Local Bus 3.0 §6.1, PCI-to-PCI Bridge 1.2 §3.2), the capability and
//! extended-capability lists (PCI Express Base 6.0 §7.5.1, §7.6), the PCI
//! Express capability's device and link registers (§7.5.3), ACS (§7.7.8),
//! and TLP headers (§2.2).
//!
//! Everything reads from a byte slice (a sysfs `config` file, an `lspci -x`
//! dump): config space is little-endian, and every read is bounds-checked,
//! so no input makes these decoders panic or loop (see `fuzz/`). Register
//! offsets and bits are cross-checked against Linux `<linux/pci_regs.h>` in
//! `tests/oracle`.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

/// Raw layouts generated from `hw-specs/pcie.toml` by `cargo xtask codegen`
/// (zerocopy structs with little-endian config-space fields and big-endian
/// TLP dwords; the same names in `kernels/include/marrow/generated/pcie.h`).
#[allow(missing_docs)]
pub mod generated {
    pub mod pcie;
}

pub mod acs;
pub mod ats;
pub mod aer;
pub mod cap_id;
pub mod dump;
pub mod express;
pub mod header;
pub mod ltr_dsn;
pub mod msi;
pub mod pm;
pub mod rebar;
pub mod tlp;
pub mod walk;

pub use header::{Bar, Config, ConfigError};
pub use walk::{Cap, ExtCap, WalkError};
