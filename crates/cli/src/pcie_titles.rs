//! `decode --pcie`: each extended capability's title as lspci 3.9 writes it
//! on the `Capabilities:` line (ls-ecaps.c), so the two outputs line up.
//! Where lspci decodes nothing it says `<?>`; an ID it does not know is
//! `Extended Capability ID 0x..`, and marrow names it on a line of its own
//! (`marrow: …`), as it does every line lspci has no counterpart for.

use marrow_pcie::cap_id::ExtCapId;
use marrow_pcie::{Config, ExtCap};

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
        // §7.9.5: VSEC ID 15:0, Rev 19:16, Length 31:20 of the dword after the header.
        ExtCapId::VNDR => {
            let h = dw(4);
            let title = format!(
                "Vendor Specific Information: ID={:04x} Rev={} Len={:03x} <?>",
                h & 0xffff,
                h >> 16 & 0xf,
                h >> 20
            );
            return (title, None);
        }
        // §7.9.6: DVSEC Vendor 15:0, Revision 19:16, Length 31:20; ID 15:0 of the next dword.
        ExtCapId::DVSEC => {
            let (h1, h2) = (dw(4), dw(8));
            let title = format!(
                "Designated Vendor-Specific: Vendor={:04x} ID={:04x} Rev={} Len={} <?>",
                h1 & 0xffff,
                h2 & 0xffff,
                h1 >> 16 & 0xf,
                h1 >> 20
            );
            return (title, None);
        }
        other => return (format!("Extended Capability ID {:#x}", other.0), Some(other.to_string())),
    };
    (fixed.to_string(), None)
}
