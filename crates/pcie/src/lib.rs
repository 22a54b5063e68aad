//! PCI configuration space as bytes: the type 0/1 header and its BARs
//! (PCI Local Bus 3.0 §6.1, PCI-to-PCI Bridge 1.2 §3.2), the capability and
//! extended-capability lists (PCI Express Base 6.0 §7.5.1, §7.6), the PCI
//! Express capability's device and link registers (§7.5.3), ACS (§7.7.8),
//! the other capabilities a GPU/NIC path carries (PM, MSI/MSI-X, AER, ATS,
//! PRI, PASID, LTR, DSN, Resizable BAR, DPC, SR-IOV, Secondary PCI Express,
//! Data Link Feature, Physical Layer 16.0 and 32.0 GT/s, vendor-specific,
//! PTM, ARI, DVSEC, DOE, Virtual Channel with its arbitration tables, L1
//! PM Substates, Lane Margining, Device 3, IDE with its stream blocks,
//! Enhanced Allocation, SSVID, VPD, Debug Port, SATA, PCI Advanced
//! Features, virtio structures, Root Complex Link Declaration, Multicast),
//! the expansion ROM and bridge windows, every register also as named
//! fields through the generated layouts (`registers`),
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
    // Written by `cargo xtask codegen`, whose `--check` keeps it byte for byte.
    #[rustfmt::skip]
    pub mod pcie;
}

pub mod acs;
pub mod aer;
pub mod af;
pub mod ari;
pub mod ats;
pub mod cap_id;
pub mod dbg;
pub mod dev3;
pub mod dlf;
pub mod doe;
pub mod dpc;
pub mod dump;
pub mod dvsec;
pub mod ea;
pub mod express;
pub mod header;
pub mod header_regs;
pub mod ide;
pub mod ide_link;
pub mod ide_selective;
pub mod l1ss;
pub mod ltr_dsn;
pub mod margining;
pub mod mcast;
pub mod msi;
pub mod pl16;
pub mod pl32;
pub mod pm;
pub mod ptm;
pub mod rcld;
pub mod rebar;
pub mod registers;
pub mod regs;
pub mod rom;
pub mod routing_id;
pub mod sata;
pub mod secpci;
pub mod sriov;
pub mod ssvid;
pub mod tlp;
pub mod vc;
pub mod vc_arb;
pub mod vendor;
pub mod virtio;
pub mod vpd;
pub mod walk;
pub mod windows;

pub use header::{Bar, Config, ConfigError};
pub use regs::CapError;
pub use walk::{Cap, ExtCap, WalkError};
