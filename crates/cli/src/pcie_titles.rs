//! `decode --pcie`: each extended capability's title as lspci 3.9 writes it
//! on the `Capabilities:` line (ls-ecaps.c), so the two outputs line up.
//! Where lspci decodes nothing it says `<?>`; an ID it does not know is
//! `Extended Capability ID 0x..`, and marrow names it on a line of its own
//! (`marrow: …`), as it does every line lspci has no counterpart for.

use marrow_pcie::cap_id::ExtCapId;
use marrow_pcie::generated::pcie::{pci_dvsec_cap, pci_vsec_cap};
use marrow_pcie::{Config, ExtCap};
use zerocopy::FromZeros;

/// The title of `c`, and the spec's name where lspci 3.9 has none.
pub fn extended(cfg: &Config, c: &ExtCap) -> (String, Option<String>) {
    let at = usize::from(c.offset);
    let dw = |off: usize| cfg.read_u32(at + off).unwrap_or(0);
    let fixed = match c.id {
        ExtCapId::NULL => "Null",
        ExtCapId::ERR => "Advanced Error Reporting",
        ExtCapId::VC | ExtCapId::VC9 => "Virtual Channel",
        ExtCapId::PWR => "Power Budgeting <?>",
        ExtCapId::RCLD => "Root Complex Link",
        ExtCapId::RCILC => "Root Complex Internal Link <?>",
        ExtCapId::RCEC => "Root Complex Event Collector Endpoint Association",
        ExtCapId::MFVC => "Multi-Function Virtual Channel <?>",
        ExtCapId::RCRB => "Root Complex Register Block <?>",
        ExtCapId::ACS => "Access Control Services",
        ExtCapId::ARI => "Alternative Routing-ID Interpretation (ARI)",
        ExtCapId::ATS => "Address Translation Service (ATS)",
        ExtCapId::SRIOV => "Single Root I/O Virtualization (SR-IOV)",
        ExtCapId::MRIOV => "Multi-Root I/O Virtualization <?>",
        ExtCapId::MCAST => "Multicast",
        ExtCapId::PRI => "Page Request Interface (PRI)",
        ExtCapId::REBAR => "Physical Resizable BAR",
        ExtCapId::DPA => "Dynamic Power Allocation <?>",
        ExtCapId::TPH => "Transaction Processing Hints",
        ExtCapId::LTR => "Latency Tolerance Reporting",
        ExtCapId::SECPCI => "Secondary PCI Express",
        ExtCapId::PMUX => "Protocol Multiplexing <?>",
        ExtCapId::PASID => "Process Address Space ID (PASID)",
        ExtCapId::DPC => "Downstream Port Containment",
        ExtCapId::L1SS => "L1 PM Substates",
        ExtCapId::PTM => "Precision Time Measurement",
        ExtCapId::DLF => "Data Link Feature <?>",
        ExtCapId::PL_16GT => "Physical Layer 16.0 GT/s <?>",
        ExtCapId::LMR => "Lane Margining at the Receiver <?>",
        ExtCapId::DOE => "Data Object Exchange",
        // The serial number's upper dword, then its lower, most significant byte first.
        ExtCapId::DSN => {
            let b: Vec<String> =
                dw(8).to_be_bytes().iter().chain(dw(4).to_be_bytes().iter()).map(|b| format!("{b:02x}")).collect();
            return (format!("Device Serial Number {}", b.join("-")), None);
        }
        // §7.9.5: the Vendor-Specific Header after the capability header.
        // A dump that ends inside it reads as zeros, as lspci's does.
        ExtCapId::VNDR => {
            let v: pci_vsec_cap = cfg.view(c.offset, at).unwrap_or_else(|_| FromZeros::new_zeroed());
            let title = format!(
                "Vendor Specific Information: ID={:04x} Rev={} Len={:03x} <?>",
                v.vsec_id(),
                v.vsec_rev(),
                v.vsec_len()
            );
            return (title, None);
        }
        // §7.9.6: DVSEC Headers 1 and 2.
        ExtCapId::DVSEC => {
            let d: pci_dvsec_cap = cfg.view(c.offset, at).unwrap_or_else(|_| FromZeros::new_zeroed());
            let title = format!(
                "Designated Vendor-Specific: Vendor={:04x} ID={:04x} Rev={} Len={} <?>",
                d.dvsec_vendor_id(),
                d.dvsec_id(),
                d.dvsec_rev(),
                d.dvsec_len()
            );
            return (title, None);
        }
        other => return (format!("Extended Capability ID {:#x}", other.0), Some(other.to_string())),
    };
    (fixed.to_string(), None)
}
