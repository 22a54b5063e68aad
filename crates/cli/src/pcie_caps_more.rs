//! `decode --pcie`: the smaller capabilities of the first 256 bytes in
//! lspci 3.9's words (ls-caps.c `cap_vpd`, `cap_debug_port`,
//! `cap_sata_hba`, `cap_af`, `cap_ssvid`; ls-caps-vendor.c for virtio),
//! each on its `Capabilities:` line and the lines under it. What marrow
//! adds of its own starts with `marrow:`.

use crate::pcie_json;
use crate::pcie_out::{Out, pm};
use marrow_pcie::Config;
use marrow_pcie::registers::Block;
use serde_json::Value;

fn title(o: &mut Out, at: u16, t: impl AsRef<str>) {
    o.line(1, format!("Capabilities: [{at:02x}] {}", t.as_ref()));
}

fn g(b: &Block, name: &str) -> u64 {
    b.get(name).unwrap_or(0)
}

/// Vital Product Data: lspci reads the VPD through the capability's
/// address/data window, which a dump cannot answer, so from a dump it says
/// `Not readable`; so does marrow, for the same reason.
pub fn vpd(o: &mut Out, cfg: &Config, at: u16) {
    title(o, at, "Vital Product Data");
    o.line(2, "Not readable");
    match cfg.vpd(at) {
        Ok(b) => o.line(
            2,
            format!(
                "marrow: the VPD is read through VPD Address/Data, not held in config space; VPD Address {:#06x} F{}, VPD Data {:#010x}",
                g(&b, "vpd_addr_addr"),
                pm(b.flag("vpd_addr_f")),
                b.raw("vpd_data").unwrap_or(0)
            ),
        ),
        Err(e) => o.error(2, e, Some(at.into())),
    }
}

/// Debug Port: `Debug port: BAR=n offset=oooo` on the title line.
pub fn debug_port(o: &mut Out, cfg: &Config, at: u16) {
    match cfg.debug_port(at) {
        Ok(b) => {
            title(o, at, format!("Debug port: BAR={} offset={:04x}", g(&b, "dbg_port_bar"), g(&b, "dbg_port_offset")))
        }
        Err(e) => {
            title(o, at, "Debug port");
            o.error(2, e, Some(at.into()));
        }
    }
}

/// SATA Data/Index Configuration: the revision and where the index/data
/// pair is (BARLOC 4-9: BAR 0-5; 15: config space), BAROFST as the raw
/// dword offset, as lspci prints it.
pub fn sata(o: &mut Out, cfg: &Config, at: u16) {
    match cfg.sata(at) {
        Ok(b) => {
            let loc = g(&b, "sata_cr1_barloc");
            let place = match loc {
                4..=9 => format!("BAR{} Offset={:08x}", loc - 4, g(&b, "sata_cr1_barofst")),
                marrow_pcie::sata::SATA_BARLOC_IN_CONFIG => "InCfgSpace".to_string(),
                n => format!("BAR??{n}"),
            };
            title(o, at, format!("SATA HBA v{}.{} {place}", g(&b, "sata_cr0_majrev"), g(&b, "sata_cr0_minrev")));
        }
        Err(e) => {
            // The revision byte alone, when the rest of the capability is cut.
            use marrow_pcie::generated::pcie::pci_sata_cap as S;
            let rev = cfg.read_u8(usize::from(at) + S::SATA_CR0_REV_OFF).unwrap_or(0);
            let (major, minor) = (
                (rev >> S::SATA_CR0_MAJREV_SHIFT) & S::SATA_CR0_MAJREV_MASK,
                (rev >> S::SATA_CR0_MINREV_SHIFT) & S::SATA_CR0_MINREV_MASK,
            );
            title(o, at, format!("SATA HBA v{major}.{minor}"));
            o.error(2, e, Some(at.into()));
        }
    }
}

/// PCI Advanced Features: AFCap, AFCtrl and AFStatus.
pub fn advanced_features(o: &mut Out, cfg: &Config, at: u16) {
    title(o, at, "PCI Advanced Features");
    match cfg.advanced_features(at) {
        Ok(b) => {
            o.line(2, format!("AFCap: TP{} FLR{}", pm(b.flag("af_cap_tp")), pm(b.flag("af_cap_flr"))));
            o.line(2, format!("AFCtrl: FLR{}", pm(b.flag("af_ctrl_flr"))));
            o.line(2, format!("AFStatus: TP{}", pm(b.flag("af_status_tp"))));
        }
        Err(e) => o.error(2, e, Some(at.into())),
    }
}

/// Bridge Subsystem Vendor ID: lspci names the subsystem from pci.ids,
/// which marrow does not carry; marrow prints the IDs as `lspci -n` does.
pub fn ssvid(o: &mut Out, cfg: &Config, at: u16) {
    match cfg.bridge_subsystem() {
        Some(Ok(s)) => title(o, at, format!("Subsystem: {:04x}:{:04x}", s.vendor, s.device)),
        Some(Err(e)) => {
            title(o, at, "Subsystem");
            o.error(2, e, Some(at.into()));
        }
        None => title(o, at, "Subsystem"),
    }
}

/// Vendor Specific: a virtio device's structure capabilities decoded
/// (`VirtIO: <type>` and `BAR= offset= size=`), any other as its length
/// and `<?>`, as lspci 3.9 does; the body's bytes follow as marrow's own.
pub fn vendor(o: &mut Out, cfg: &Config, at: u16, j: &mut Value) {
    let len = cfg.read_u8(usize::from(at) + 2).unwrap_or(0);
    if let Some(Ok(v)) = cfg.virtio_cap(at) {
        let b = &v.block;
        let r = |n: &str| b.raw(n).unwrap_or(0);
        let t = r("cfg_type");
        title(
            o,
            at,
            format!(
                "Vendor Specific Information: VirtIO: {}",
                marrow_pcie::virtio::cfg_type_name(t).unwrap_or("<unknown>")
            ),
        );
        let mult = v
            .notify_multiplier
            .as_ref()
            .map_or(String::new(), |m| format!(" multiplier={:08x}", m.raw("notify_off_multiplier").unwrap_or(0)));
        o.line(2, format!("BAR={} offset={:08x} size={:08x}{mult}", r("bar"), r("offset"), r("length")));
        j["virtio"] = pcie_json::block(b);
        if let Some(m) = &v.notify_multiplier {
            j["virtio_notify_multiplier"] = pcie_json::block(m);
        }
        return;
    }
    title(o, at, format!("Vendor Specific Information: Len={len:02x} <?>"));
    crate::pcie_ext_dpc_sriov_phy::vendor_std(o, cfg, at);
}
