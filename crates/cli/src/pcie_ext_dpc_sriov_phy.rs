//! `decode --pcie`: DPC (PCIe 6.0 §7.9.14), SR-IOV (§9.3.3), Secondary
//! PCI Express (§7.7.3), Data Link Feature (§7.7.4), Physical Layer 16 and
//! 32 GT/s (§7.7.5, §7.7.6) and vendor-specific extended capabilities
//! (§7.9.5): summaries with lspci's flag names where lspci prints them.

use crate::pcie_out::{Out, pm, size_text, word};
use marrow_pcie::cap_id::ExtCapId;
use marrow_pcie::generated::pcie::pci_sriov_cap;
use marrow_pcie::header::{
    PCI_BASE_ADDRESS_MEM_MASK, PCI_BASE_ADDRESS_MEM_PREFETCH, PCI_BASE_ADDRESS_MEM_TYPE_64,
    PCI_BASE_ADDRESS_MEM_TYPE_MASK,
};
use marrow_pcie::sriov::PCI_SRIOV_NUM_BARS;
use marrow_pcie::{Bar, Config, ExtCap};
use serde_json::Value;
use std::fmt::Write;

/// At most this many body bytes of a vendor-specific capability are printed.
const VENDOR_BODY_MAX: usize = 64;

pub fn hex_body(body: &[u8]) -> String {
    let shown: Vec<String> = body.iter().take(VENDOR_BODY_MAX).map(|b| format!("{b:02x}")).collect();
    let more = body.len().saturating_sub(VENDOR_BODY_MAX);
    if more > 0 { format!("{} (+{more} bytes)", shown.join(" ")) } else { shown.join(" ") }
}

/// The summary lines of `c`, with each `error:` also recorded.
pub fn render(o: &mut Out, cfg: &Config, c: &ExtCap, _j: &mut Value) {
    let mut s = String::new();
    old_caps(&mut s, cfg, c.id, c.offset);
    if s.is_empty()
        && !matches!(
            c.id,
            ExtCapId::DPC
                | ExtCapId::SRIOV
                | ExtCapId::SECPCI
                | ExtCapId::DLF
                | ExtCapId::PL_16GT
                | ExtCapId::PL_32GT
                | ExtCapId::VNDR
        )
    {
        o.line(2, "marrow: registers not decoded");
        return;
    }
    // DPC and SR-IOV print lspci's lines from the registers as they are;
    // marrow's reading of them (and its checks) follow, marked as its own.
    let lspci = match c.id {
        ExtCapId::DPC => dpc_lines(o, cfg),
        ExtCapId::SRIOV => sriov_lines(o, cfg, c.offset),
        _ => false,
    };
    for l in s.lines() {
        let depth = if l.starts_with("    ") { 3 } else { 2 };
        let l = l.trim();
        let l = if lspci { format!("marrow: {l}") } else { l.to_string() };
        if let Some((_, e)) = l.split_once("error: ") {
            o.errors.push((e.to_string(), Some(c.offset.into())));
        }
        o.line(depth, l);
    }
}

/// DPC as lspci 3.9's `cap_dpc` prints it (PCIe 6.0 §7.9.14.2-5), from the
/// registers as they are, whatever they hold.
fn dpc_lines(o: &mut Out, cfg: &Config) -> bool {
    let Some(Ok(b)) = cfg.ext_block(ExtCapId::DPC, &marrow_pcie::generated::pcie::pci_dpc_cap::LAYOUT) else {
        return false;
    };
    let g = |n: &str| b.get(n).unwrap_or(0);
    let f = |n: &str| pm(b.flag(n));
    o.line(
        2,
        format!(
            "DpcCap: INT Msg #{}, RPExt{} PoisonedTLP{} SwTrigger{} RP PIO Log {}, DL_ActiveErr{}",
            g("dpc_cap_irq"),
            f("dpc_cap_rp_ext"),
            f("dpc_cap_poison"),
            f("dpc_cap_sw_trigger"),
            g("dpc_cap_rp_pio_log_size"),
            f("dpc_cap_dl_active")
        ),
    );
    o.line(
        2,
        format!(
            "DpcCtl: Trigger:{:x} Cmpl{} INT{} ErrCor{} PoisonedTLP{} SwTrigger{} DL_ActiveErr{}",
            g("dpc_ctl_en"),
            f("dpc_ctl_cpl"),
            f("dpc_ctl_int_en"),
            f("dpc_ctl_err_cor"),
            f("dpc_ctl_poison"),
            f("dpc_ctl_sw_trigger"),
            f("dpc_ctl_dl_active")
        ),
    );
    o.line(
        2,
        format!(
            "DpcSta: Trigger{} Reason:{:02x} INT{} RPBusy{} TriggerExt:{:02x} RP PIO ErrPtr:{:02x}",
            f("dpc_status_trigger"),
            g("dpc_status_trigger_rsn"),
            f("dpc_status_interrupt"),
            f("dpc_status_rp_busy"),
            g("dpc_status_trigger_rsn_ext"),
            g("dpc_status_rp_pio_fep")
        ),
    );
    o.line(2, format!("Source: {:04x}", b.register("dpc_source_id").map_or(0, |r| r.raw)));
    true
}

/// SR-IOV as lspci 3.9's `cap_sriov` prints it (PCIe 6.0 §9.3.3): VF BARs
/// are memory only, a 64-bit one takes the next BAR as its upper half.
fn sriov_lines(o: &mut Out, cfg: &Config, at: u16) -> bool {
    let Some(Ok(b)) = cfg.ext_block(ExtCapId::SRIOV, &marrow_pcie::generated::pcie::pci_sriov_cap::LAYOUT) else {
        return false;
    };
    let g = |n: &str| b.get(n).unwrap_or(0);
    let f = |n: &str| pm(b.flag(n));
    let raw = |n: &str| b.register(n).map_or(0, |r| r.raw);
    o.line(
        2,
        format!(
            "IOVCap: Migration{} 10BitTagReq{} Interrupt Message Number: {:03x}",
            f("sriov_cap_vfm"),
            f("sriov_cap_10bit_tag"),
            g("sriov_cap_intr")
        ),
    );
    o.line(
        2,
        format!(
            "IOVCtl: Enable{} Migration{} Interrupt{} MSE{} ARIHierarchy{} 10BitTagReq{}",
            f("sriov_ctrl_vfe"),
            f("sriov_ctrl_vfm"),
            f("sriov_ctrl_intr"),
            f("sriov_ctrl_mse"),
            f("sriov_ctrl_ari"),
            f("sriov_ctrl_10bit_tag")
        ),
    );
    o.line(2, format!("IOVSta: Migration{}", f("sriov_status_vfm")));
    o.line(
        2,
        format!(
            "Initial VFs: {}, Total VFs: {}, Number of VFs: {}, Function Dependency Link: {:02x}",
            raw("sriov_initial_vf"),
            raw("sriov_total_vf"),
            raw("sriov_num_vf"),
            raw("sriov_func_link")
        ),
    );
    o.line(
        2,
        format!(
            "VF offset: {}, stride: {}, Device ID: {:04x}",
            raw("sriov_vf_offset"),
            raw("sriov_vf_stride"),
            raw("sriov_vf_did")
        ),
    );
    o.line(
        2,
        format!(
            "Supported Page Size: {:08x}, System Page Size: {:08x}",
            raw("sriov_sup_pgsize"),
            raw("sriov_sys_pgsize")
        ),
    );
    // §9.3.3.14: the VF BARs, laid out as a memory BAR of the header.
    let bar = |i: usize| cfg.read_u32(usize::from(at) + pci_sriov_cap::SRIOV_BAR_OFF + 4 * i).unwrap_or(0);
    let mut i = 0;
    while i < PCI_SRIOV_NUM_BARS {
        let lo = bar(i);
        let ty = lo & PCI_BASE_ADDRESS_MEM_TYPE_MASK;
        let is_64 = ty == PCI_BASE_ADDRESS_MEM_TYPE_64;
        // As lspci does, a 64-bit BAR 5 takes the next dword (the VF
        // Migration State register) as its upper half; marrow says so.
        let hi = if is_64 { bar(i + 1) } else { 0 };
        if hi != 0 || lo & PCI_BASE_ADDRESS_MEM_MASK != 0 {
            let high = if hi != 0 { format!("{hi:08x}") } else { String::new() };
            o.line(
                2,
                format!(
                    "Region {i}: Memory at {high}{:08x} ({}-bit, {}prefetchable)",
                    lo & PCI_BASE_ADDRESS_MEM_MASK,
                    if ty == 0 { 32 } else { 64 },
                    if lo & PCI_BASE_ADDRESS_MEM_PREFETCH != 0 { "" } else { "non-" }
                ),
            );
        }
        if is_64 && i == PCI_SRIOV_NUM_BARS - 1 {
            o.line(
                2,
                "marrow: VF BAR5 says 64-bit, but no VF BAR follows it (§9.3.3.14); its upper half above is 0x3c",
            );
        }
        i += if is_64 { 2 } else { 1 };
    }
    let vfm = raw("sriov_vfm");
    if vfm != 0 {
        use pci_sriov_cap as S;
        let (offset, bir) = (
            vfm & u64::from(S::SRIOV_VFM_OFFSET_MASK << S::SRIOV_VFM_OFFSET_SHIFT),
            (vfm >> S::SRIOV_VFM_BIR_SHIFT) & u64::from(S::SRIOV_VFM_BIR_MASK),
        );
        o.line(2, format!("VF Migration: offset: {offset:08x}, BIR: {bir}"));
    }
    true
}

/// Not an extended capability ID: [`old_caps`] called for a Vendor
/// Specific capability of the first 256 bytes.
const VENDOR_STD: ExtCapId = ExtCapId(u16::MAX);

/// DPC, SR-IOV, Secondary PCIe, DLF, Physical Layer 16/32 GT/s,
/// vendor-specific capabilities and the ACS egress vector. A capability
/// that is present but malformed prints an `error:` line in its place.
fn old_caps(o: &mut String, cfg: &Config, id: ExtCapId, at: u16) {
    let err = |o: &mut String, name: &str, e: &marrow_pcie::CapError| {
        let _ = writeln!(o, "  {name}: error: {e}");
    };
    if id == ExtCapId::DPC {
        match cfg.dpc() {
            Some(Ok(d)) => {
                let en =
                    word(&["off", "on ERR_FATAL", "on ERR_NONFATAL or ERR_FATAL", "reserved"], d.trigger_enable.into());
                let _ = writeln!(
                    o,
                    "  DPC [{:03x}]: trigger {en}; RPExt{} PoisonedTLP{} SwTrigger{} RP PIO Log {} DL_ActiveErr{}, INT Msg #{}",
                    d.offset,
                    pm(d.rp_extensions),
                    pm(d.poisoned_tlp_blocking),
                    pm(d.sw_trigger_supported),
                    d.rp_pio_log_size,
                    pm(d.dl_active_err_cor_supported),
                    d.interrupt_message
                );
                if d.triggered {
                    let _ = writeln!(
                        o,
                        "    TRIGGERED: {} (reason {}, ext {}), source {}{}; the link stays down until software clears DPC Trigger Status",
                        d.trigger_reason_text(),
                        d.trigger_reason,
                        d.trigger_reason_ext,
                        marrow_pcie::routing_id::RoutingId(d.source_id),
                        if d.rp_busy { ", RP busy" } else { "" }
                    );
                } else {
                    let _ = writeln!(
                        o,
                        "    not triggered (control {:#06x}, status {:#06x}, source {:04x})",
                        d.control_raw, d.status_raw, d.source_id
                    );
                }
                if d.flit_mode && d.rp_extensions {
                    let _ = writeln!(
                        o,
                        "    Flit Mode: RP PIO log size {} dwords, its Flit Mode layout is not decoded",
                        d.rp_pio_log_size
                    );
                }
                if let Some(r) = d.rp_pio {
                    let _ = writeln!(
                        o,
                        "    RP PIO: status {:#010x} mask {:#010x} severity {:#010x} SysError {:#010x} exception {:#010x}, first error pointer {}",
                        r.status, r.mask, r.severity, r.syserror, r.exception, d.rp_pio_first_error
                    );
                    if r.status != 0 {
                        let _ = writeln!(o, "    RP PIO header log {:08x?}", r.header_log);
                    }
                    if r.prefix_dwords > 0 {
                        let _ = writeln!(
                            o,
                            "    RP PIO TLP prefix log {:08x?}",
                            &r.tlp_prefix_log[..usize::from(r.prefix_dwords)]
                        );
                    }
                }
            }
            Some(Err(e)) => err(o, "DPC", &e),
            None => {}
        }
    }
    if id == ExtCapId::SRIOV {
        match cfg.sriov() {
            Some(Ok(s)) => {
                let _ = writeln!(
                    o,
                    "  SR-IOV [{:03x}]: VFs {} of {} (initial {}), VF Enable{} MSE{} ARIHierarchy{} Migration{}, VF device {:04x}, first VF offset {}, stride {}, function link {:02x}",
                    s.offset,
                    s.num_vfs,
                    s.total_vfs,
                    s.initial_vfs,
                    pm(s.vf_enable),
                    pm(s.vf_memory_space_enable),
                    pm(s.ari_capable_hierarchy),
                    pm(s.vf_migration_enable),
                    s.vf_device_id,
                    s.first_vf_offset,
                    s.vf_stride,
                    s.function_dependency_link
                );
                let _ = writeln!(
                    o,
                    "    page sizes: supported {:#010x}, system {:#010x}{}",
                    s.supported_page_sizes,
                    s.system_page_size,
                    s.system_page_bytes().map(|b| format!(" ({})", size_text(b))).unwrap_or_default()
                );
                for bar in &s.vf_bars {
                    if !matches!(bar, Bar::Mem32 { address: 0, prefetchable: false, .. }) {
                        let _ = writeln!(o, "    VF BAR{} {}", bar.index(), crate::pcie_out::bar_text(bar));
                    }
                }
                for p in s.problems() {
                    let _ = writeln!(o, "    warning: {p}");
                }
            }
            Some(Err(e)) => err(o, "SR-IOV", &e),
            None => {}
        }
    }
    if id == ExtCapId::SECPCI {
        match cfg.secondary_pcie() {
            Some(Ok(s)) => {
                // lspci's cap_sec: LnkCtl3 and the lanes in error.
                let lanes: Vec<String> = s.lanes_in_error().map(|l| l.to_string()).collect();
                let _ = writeln!(
                    o,
                    "LnkCtl3: LnkEquIntrruptEn{} PerformEqu{}",
                    pm(s.eq_request_interrupt),
                    pm(s.perform_equalization)
                );
                if lanes.is_empty() {
                    let _ = writeln!(o, "LaneErrStat: 0");
                } else {
                    let _ = writeln!(o, "LaneErrStat: LaneErr at lane: {}", lanes.join(" "));
                }
                let presets: Vec<String> =
                    s.lanes.iter().map(|l| format!("{}/{}", l.dsp_tx_preset, l.usp_tx_preset)).collect();
                let _ = writeln!(
                    o,
                    "marrow: 8GT/s Tx presets DSP/USP per lane ({} lanes, {:?}): {}",
                    s.lanes.len(),
                    s.lane_count,
                    presets.join(" ")
                );
            }
            Some(Err(e)) => err(o, "Secondary PCIe", &e),
            None => {}
        }
    }
    if id == ExtCapId::DLF {
        match cfg.data_link_feature() {
            Some(Ok(d)) => {
                let _ = writeln!(
                    o,
                    "  Data Link Feature [{:03x}]: exchange {}, local features {:#08x} (scaled flow control {}), remote {}",
                    d.offset,
                    if d.exchange_enable { "enabled" } else { "disabled" },
                    d.local_features,
                    if d.local_scaled_flow_control() { "yes" } else { "no" },
                    if d.remote_valid { format!("{:#08x}", d.remote_features) } else { "not received".to_string() }
                );
            }
            Some(Err(e)) => err(o, "Data Link Feature", &e),
            None => {}
        }
    }
    let eq = |e: &marrow_pcie::pl16::EqStatus| {
        format!(
            "EqComplete{} Phase1{} Phase2{} Phase3{} EqRequest{}",
            pm(e.complete),
            pm(e.phase1),
            pm(e.phase2),
            pm(e.phase3),
            pm(e.request)
        )
    };
    let presets = |l: &[marrow_pcie::pl16::LanePresets]| {
        l.iter().map(|p| format!("{}/{}", p.dsp_tx_preset, p.usp_tx_preset)).collect::<Vec<_>>().join(" ")
    };
    if id == ExtCapId::PL_16GT {
        match cfg.physical_layer_16gt() {
            Some(Ok(p)) => {
                let _ = writeln!(
                    o,
                    "  Physical Layer 16GT/s [{:03x}]: {}; data parity mismatch lanes: local {:#x}, retimer 1 {:#x}, retimer 2 {:#x}",
                    p.offset,
                    eq(&p.equalization),
                    p.local_parity_mismatch,
                    p.first_retimer_parity_mismatch,
                    p.second_retimer_parity_mismatch
                );
                let _ = writeln!(
                    o,
                    "    Tx presets DSP/USP per lane ({} lanes, {:?}): {}",
                    p.lanes.len(),
                    p.lane_count,
                    presets(&p.lanes)
                );
            }
            Some(Err(e)) => err(o, "Physical Layer 16GT/s", &e),
            None => {}
        }
    }
    if id == ExtCapId::PL_32GT {
        match cfg.physical_layer_32gt() {
            Some(Ok(p)) => {
                let _ = writeln!(
                    o,
                    "  Physical Layer 32GT/s [{:03x}]: {}; EqBypass{} NoEqNeeded{} ModifiedTS modes {:03b} (selected {}), precoding {}",
                    p.offset,
                    eq(&p.equalization),
                    pm(p.eq_bypass_supported),
                    pm(p.no_eq_needed_supported),
                    p.modified_ts_modes,
                    p.modified_ts_mode_selected,
                    if p.precoding_on { "on" } else { "off" }
                );
                let _ = writeln!(
                    o,
                    "    Tx presets DSP/USP per lane ({} lanes, {:?}): {}",
                    p.lanes.len(),
                    p.lane_count,
                    presets(&p.lanes)
                );
            }
            Some(Err(e)) => err(o, "Physical Layer 32GT/s", &e),
            None => {}
        }
    }
    if id == ExtCapId::NULL {
        match cfg.acs_egress_control() {
            Some(Ok(e)) => {
                let blocked: Vec<String> = e.blocked().map(|n| n.to_string()).collect();
                let _ = writeln!(
                    o,
                    "  ACS egress control vector [{:03x}] ({} bits): {}",
                    e.offset,
                    e.bits,
                    if blocked.is_empty() {
                        "nothing blocked".to_string()
                    } else {
                        format!("blocked {}", blocked.join(" "))
                    }
                );
            }
            Some(Err(e)) => err(o, "ACS egress control vector", &e),
            None => {}
        }
    }
    if id == VENDOR_STD {
        for v in cfg.vendor_caps().filter(|v| v.as_ref().map_or(true, |v| v.offset == at)) {
            match v {
                Ok(v) => match v.body {
                    Ok(b) => {
                        let _ = writeln!(
                            o,
                            "  marrow: Vendor Specific [{:02x}]: length {}, body {}",
                            v.offset,
                            v.len,
                            hex_body(b)
                        );
                    }
                    Err(e) => {
                        let _ =
                            writeln!(o, "  marrow: Vendor Specific [{:02x}]: length {}: error: {e}", v.offset, v.len);
                    }
                },
                Err(e) => err(o, "Vendor Specific", &e),
            }
        }
    }
    if id == ExtCapId::VNDR {
        for v in cfg.vsecs().filter(|v| v.as_ref().map_or(true, |v| v.offset == at)) {
            match v {
                Ok(v) => match v.body {
                    Ok(b) => {
                        let _ = writeln!(
                            o,
                            "  marrow: VSEC [{:03x}]: ID {:04x} rev {} length {:#x}, body {}",
                            v.offset,
                            v.id,
                            v.rev,
                            v.len,
                            hex_body(b)
                        );
                    }
                    Err(e) => {
                        let _ = writeln!(
                            o,
                            "  marrow: VSEC [{:03x}]: ID {:04x} rev {} length {:#x}: error: {e}",
                            v.offset, v.id, v.rev, v.len
                        );
                    }
                },
                Err(e) => err(o, "VSEC", &e),
            }
        }
    }
}

/// A Vendor Specific capability (ID 0x09) of the first 256 bytes.
pub fn vendor_std(o: &mut Out, cfg: &Config, at: u16) {
    let mut s = String::new();
    old_caps(&mut s, cfg, VENDOR_STD, at);
    for l in s.lines() {
        let l = l.trim();
        if let Some((_, e)) = l.split_once("error: ") {
            o.errors.push((e.to_string(), Some(at.into())));
        }
        o.line(2, l);
    }
}
