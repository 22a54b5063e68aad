//! `decode --pcie`: each capability in lspci's vocabulary (`Flag+ Flag-`,
//! lspci 3.9's register labels and units, ls-caps.c and ls-ecaps.c), and in
//! the spec's own field names where lspci decodes nothing (Lane Margining,
//! Device 3, IDE). Every capability also gives its registers as JSON
//! through the generated layouts, with what it could not decode as errors.

use crate::pcie_json;
use crate::pcie_out::{Out, pm};
use marrow_pcie::Config;
use marrow_pcie::cap_id::{CapId, ExtCapId};
use serde_json::{Value, json};

/// One capability of the first 256 bytes: text lines and its JSON.
pub fn standard(o: &mut Out, cfg: &Config, c: &marrow_pcie::Cap) -> Value {
    use marrow_pcie::generated::pcie::*;
    let layout = match c.id {
        CapId::PM => Some(&pci_pm_cap::LAYOUT),
        CapId::MSI => Some(&pci_msi_cap::LAYOUT),
        CapId::MSIX => Some(&pci_msix_cap::LAYOUT),
        CapId::VNDR => Some(&pci_vndr_cap::LAYOUT),
        CapId::SSVID => Some(&pci_ssvid_cap::LAYOUT),
        CapId::EA => Some(&pci_ea_cap::LAYOUT),
        CapId::VPD => Some(&pci_vpd_cap::LAYOUT),
        CapId::DBG => Some(&pci_dbg_cap::LAYOUT),
        CapId::SATA => Some(&pci_sata_cap::LAYOUT),
        CapId::AF => Some(&pci_af_cap::LAYOUT),
        _ => None,
    };
    let mut j = json!({ "offset": c.offset, "id": c.id.0, "name": c.id.to_string(), "next": c.next });
    match c.id {
        CapId::EXP => return crate::pcie_express::express(o, cfg, j),
        CapId::PM => power_management(o, cfg, c.offset),
        CapId::MSI => msi(o, cfg, c.offset),
        CapId::MSIX => msix(o, cfg, c.offset),
        CapId::SSVID => crate::pcie_caps_more::ssvid(o, cfg, c.offset),
        CapId::VPD => crate::pcie_caps_more::vpd(o, cfg, c.offset),
        CapId::DBG => crate::pcie_caps_more::debug_port(o, cfg, c.offset),
        CapId::SATA => crate::pcie_caps_more::sata(o, cfg, c.offset),
        CapId::AF => crate::pcie_caps_more::advanced_features(o, cfg, c.offset),
        CapId::EA => {
            if let Some(e) = crate::pcie_express::enhanced_allocation(o, cfg) {
                j["entries"] = e;
            }
        }
        CapId::VNDR => crate::pcie_caps_more::vendor(o, cfg, c.offset, &mut j),
        _ => o.line(2, "marrow: registers not decoded"),
    }
    if let Some(l) = layout {
        match cfg.block(l, usize::from(c.offset), c.offset) {
            Ok(b) => j["registers"] = pcie_json::block(&b)["registers"].clone(),
            Err(e) => j["error"] = pcie_json::error(e, Some(c.offset.into())),
        }
    }
    j
}

fn power_management(o: &mut Out, cfg: &Config, at: u16) {
    let Some(p) = cfg.power_management() else {
        o.line(1, format!("Capabilities: [{at:02x}] Power Management"));
        o.error(2, "Power Management registers run past the end of the dump", None);
        return;
    };
    o.line(1, format!("Capabilities: [{at:02x}] Power Management version {}", p.version));
    // PMC bits 15:11 are PME from D0 (bit 11), D1, D2, D3hot, D3cold (bit 15): PM 1.2 §3.2.3.
    let s = |i: u8| pm(p.pme_support & (1 << i) != 0);
    o.line(
        2,
        format!(
            "Flags: PMEClk{} DSI{} D1{} D2{} AuxCurrent={}mA PME(D0{},D1{},D2{},D3hot{},D3cold{})",
            pm(p.pme_clock),
            pm(p.dsi),
            pm(p.d1),
            pm(p.d2),
            p.aux_current_ma,
            s(0),
            s(1),
            s(2),
            s(3),
            s(4)
        ),
    );
    o.line(
        2,
        format!(
            "Status: D{} NoSoftRst{} PME-Enable{} DSel={} DScale={} PME{}",
            p.power_state,
            pm(p.no_soft_reset),
            pm(p.pme_enable),
            p.data_select,
            p.data_scale,
            pm(p.pme_status)
        ),
    );
}

/// MSI as lspci's `cap_msi` prints it: the message address and data, and
/// the mask and pending bits where the function has per-vector masking
/// (PCI Local Bus 3.0 §6.8.1: the layout depends on 64bit and Maskable).
fn msi(o: &mut Out, cfg: &Config, at: u16) {
    let Some(m) = cfg.msi() else {
        o.line(1, format!("Capabilities: [{at:02x}] MSI"));
        return;
    };
    o.line(
        1,
        format!(
            "Capabilities: [{at:02x}] MSI: Enable{} Count={}/{} Maskable{} 64bit{}",
            pm(m.enabled),
            m.vectors_enabled,
            m.vectors_capable,
            pm(m.per_vector_mask),
            pm(m.addr_64bit)
        ),
    );
    let base = usize::from(at);
    let r32 = |off: usize| cfg.read_u32(base + off);
    let r16 = |off: usize| cfg.read_u16(base + off);
    let (addr, data, mask_at) = if m.addr_64bit {
        (r32(8).zip(r32(4)).map(|(hi, lo)| format!("{hi:08x}{lo:08x}")), r16(12), 16)
    } else {
        (r32(4).map(|lo| format!("{lo:08x}")), r16(8), 12)
    };
    match addr.zip(data) {
        Some((addr, data)) => o.line(2, format!("Address: {addr}  Data: {data:04x}")),
        None => o.error(2, "MSI message address and data run past the end of the dump", Some(at.into())),
    }
    if m.per_vector_mask {
        match r32(mask_at).zip(r32(mask_at + 4)) {
            Some((mask, pending)) => o.line(2, format!("Masking: {mask:08x}  Pending: {pending:08x}")),
            None => o.error(2, "MSI mask and pending bits run past the end of the dump", Some(at.into())),
        }
    }
}

fn msix(o: &mut Out, cfg: &Config, at: u16) {
    let Some(m) = cfg.msix() else {
        o.line(1, format!("Capabilities: [{at:02x}] MSI-X"));
        return;
    };
    o.line(
        1,
        format!(
            "Capabilities: [{at:02x}] MSI-X: Enable{} Count={} Masked{}",
            pm(m.enabled),
            m.table_size,
            pm(m.function_masked)
        ),
    );
    o.line(2, format!("Vector table: BAR={} offset={:08x}", m.table_bir, m.table_offset));
    o.line(2, format!("PBA: BAR={} offset={:08x}", m.pba_bir, m.pba_offset));
}

/// One extended capability: text lines and its JSON.
pub fn extended(o: &mut Out, cfg: &Config, c: &marrow_pcie::ExtCap) -> Value {
    use marrow_pcie::generated::pcie::*;
    let mut j =
        json!({ "offset": c.offset, "id": c.id.0, "name": c.id.to_string(), "version": c.version, "next": c.next });
    let layout = match c.id {
        ExtCapId::ERR => Some(&pci_aer_cap::LAYOUT),
        ExtCapId::ACS => Some(&pci_acs_cap::LAYOUT),
        ExtCapId::ATS => Some(&pci_ats_cap::LAYOUT),
        ExtCapId::PRI => Some(&pci_pri_cap::LAYOUT),
        ExtCapId::PASID => Some(&pci_pasid_cap::LAYOUT),
        ExtCapId::LTR => Some(&pci_ltr_cap::LAYOUT),
        ExtCapId::DSN => Some(&pci_dsn_cap::LAYOUT),
        ExtCapId::L1SS => Some(&pci_l1ss_cap::LAYOUT),
        ExtCapId::DPC => Some(&pci_dpc_cap::LAYOUT),
        ExtCapId::SRIOV => Some(&pci_sriov_cap::LAYOUT),
        ExtCapId::SECPCI => Some(&pci_secpci_cap::LAYOUT),
        ExtCapId::DLF => Some(&pci_dlf_cap::LAYOUT),
        ExtCapId::PL_16GT => Some(&pci_pl16_cap::LAYOUT),
        ExtCapId::PL_32GT => Some(&pci_pl32_cap::LAYOUT),
        ExtCapId::VNDR => Some(&pci_vsec_cap::LAYOUT),
        ExtCapId::REBAR => Some(&pci_rebar_cap::LAYOUT),
        ExtCapId::PTM => Some(&pci_ptm_cap::LAYOUT),
        ExtCapId::ARI => Some(&pci_ari_cap::LAYOUT),
        ExtCapId::DVSEC => Some(&pci_dvsec_cap::LAYOUT),
        ExtCapId::DOE => Some(&pci_doe_cap::LAYOUT),
        ExtCapId::VC | ExtCapId::VC9 => Some(&pci_vc_cap::LAYOUT),
        ExtCapId::LMR => Some(&pci_lmr_cap::LAYOUT),
        ExtCapId::DEV3 => Some(&pci_dev3_cap::LAYOUT),
        ExtCapId::IDE => Some(&pci_ide_cap::LAYOUT),
        ExtCapId::RCLD => Some(&pci_rcld_cap::LAYOUT),
        ExtCapId::MCAST => Some(&pci_mcast_cap::LAYOUT),
        _ => None,
    };
    crate::pcie_ext::render(o, cfg, c, &mut j);
    if let Some(l) = layout {
        match cfg.block(l, usize::from(c.offset), c.offset) {
            Ok(b) => j["registers"] = pcie_json::block(&b)["registers"].clone(),
            Err(e) => j["error"] = pcie_json::error(e, Some(c.offset.into())),
        }
    }
    j
}
