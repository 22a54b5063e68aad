//! `decode --pcie`: Root Complex Link Declaration (PCIe 6.0 §7.9.8) and
//! Multicast (§7.9.11) in lspci 3.9's words (ls-ecaps.c `cap_rclink`,
//! `cap_multicast`), link entries into the JSON too.

use crate::pcie_json;
use crate::pcie_out::{Out, pm};
use marrow_pcie::cap_id::CapId;
use marrow_pcie::generated::pcie::{pci_exp_cap, pci_mcast_cap as M};
use marrow_pcie::registers::Block;
use marrow_pcie::{Config, ExtCap};
use serde_json::Value;

fn g(b: &Block, name: &str) -> u64 {
    b.get(name).unwrap_or(0)
}

/// Element Self Description and each link entry.
pub fn rc_link(o: &mut Out, cfg: &Config, c: &ExtCap, j: &mut Value) {
    let r = match cfg.rc_link(c.offset) {
        Ok(r) => r,
        Err(e) => return o.error(2, e, Some(c.offset.into())),
    };
    // lspci looks Element Type up by the register's whole low byte (bits
    // 7:4 are reserved), so a reserved bit set prints as `??n` there too.
    let elt = r.header.raw("rcld_esd").unwrap_or(0) as u8;
    let elt = ["Config", "Egress", "Internal"].get(elt as usize).map_or(format!("??{elt}"), |s| s.to_string());
    o.line(
        2,
        format!(
            "Desc:\tPortNumber={:02x} ComponentID={:02x} EltType={elt}",
            g(&r.header, "rcld_esd_port_number"),
            g(&r.header, "rcld_esd_component_id")
        ),
    );
    for (i, l) in r.links.iter().enumerate() {
        let config = l.flag("rcld_link_type");
        o.line(
            2,
            format!(
                "Link{i}:\tDesc:\tTargetPort={:02x} TargetComponent={:02x} AssocRCRB{} LinkType={} LinkValid{}",
                g(l, "rcld_link_target_port"),
                g(l, "rcld_link_target_component"),
                pm(l.flag("rcld_link_assoc_rcrb")),
                if config { "Config" } else { "MemMapped" },
                pm(l.flag("rcld_link_valid"))
            ),
        );
        let addr = l.raw("rcld_link_addr").unwrap_or(0);
        if config {
            let (bus, dev, func) = marrow_pcie::rcld::config_address(addr);
            o.line(3, format!("Addr:\t{bus:02x}:{dev:02x}.{func}  CfgSpace={addr:016x}"));
        } else {
            o.line(3, format!("Addr:\t{addr:016x}"));
        }
    }
    if r.links_missing > 0 {
        o.line(2, format!("Link{}:\t<unreadable>", r.links.len()));
        o.line(2, format!("marrow: {} link entries past the end of the dump", r.links_missing));
    }
    j["links"] = Value::Array(r.links.iter().map(pcie_json::block).collect());
}

/// The PCI Express port type (§7.5.3.2) lspci passes to its extended
/// capabilities: `None` without a PCI Express capability.
fn port_type(cfg: &Config) -> Option<u16> {
    let e = cfg.find_cap(CapId::EXP)?;
    let flags = cfg.read_u16(usize::from(e.offset) + pci_exp_cap::FLAGS_OFF)?;
    Some(flags >> pci_exp_cap::FLAGS_TYPE_SHIFT & pci_exp_cap::FLAGS_TYPE_MASK)
}

/// `1 << n` as lspci's C `int` gives it on x86-64 (the shift count taken
/// mod 32, a 32-bit signed result).
fn c_shift(n: u64) -> i32 {
    1i32.wrapping_shl(n as u32)
}

pub fn multicast(o: &mut Out, cfg: &Config, c: &ExtCap) {
    let b = match cfg.multicast(c.offset) {
        Ok(b) => b,
        Err(e) => return o.error(2, e, Some(c.offset.into())),
    };
    let t = port_type(cfg);
    let endpoint = matches!(t, Some(0 | 9));
    let port = matches!(t, Some(4..=6));
    let mut cap = format!("McastCap: MaxGroups {}", g(&b, "mcast_cap_max_group") + 1);
    if endpoint {
        let ws = g(&b, "mcast_cap_win_size");
        cap += &format!(", WindowSz {ws} ({} bytes)", c_shift(ws));
    }
    let ctl =
        format!("McastCtl: NumGroups {}, Enable{}", g(&b, "mcast_ctrl_num_group") + 1, pm(b.flag("mcast_ctrl_enable")));
    if port {
        o.line(2, format!("{cap}, ECRCRegen{}", pm(b.flag("mcast_cap_ecrc"))));
        o.line(2, ctl);
    } else {
        // lspci 3.9 ends the McastCap line only for switch and root ports:
        // elsewhere McastCtl follows on the same line, and so it does here.
        o.line(2, format!("{cap}\t\t{ctl}"));
    }
    let r = |n: &str| b.raw(n).unwrap_or(0);
    o.line(
        2,
        format!(
            "McastBAR: IndexPos {}, BaseAddr {:016x}",
            g(&b, "mcast_bar_index_pos"),
            r("mcast_bar") & (M::MCAST_BAR_BASE_MASK << M::MCAST_BAR_BASE_SHIFT)
        ),
    );
    o.line(2, format!("McastReceiveVec:      {:016x}", r("mcast_rcv")));
    o.line(2, format!("McastBlockAllVec:     {:016x}", r("mcast_block")));
    o.line(2, format!("McastBlockUntransVec: {:016x}", r("mcast_block_untrans")));
    if endpoint {
        return;
    }
    let size = g(&b, "mcast_ovl_size");
    let bytes = if size >= 6 { format!("({} bytes)", c_shift(size)) } else { "(disabled)".to_string() };
    o.line(
        2,
        format!(
            "McastOverlayBAR: OverlaySize {size} {bytes}, BaseAddr {:016x}",
            r("mcast_ovl_bar") & (M::MCAST_OVL_BASE_MASK << M::MCAST_OVL_BASE_SHIFT)
        ),
    );
}
