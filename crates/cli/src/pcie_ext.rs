//! `decode --pcie`: extended capabilities (PCIe Base 6.0 §7.6 on) in lspci
//! 3.9's words (ls-ecaps.c), the spec's where lspci has none; extra arrays
//! (lanes, VC resources, Resizable BAR entries) go into the JSON too.

use crate::pcie_json;
use crate::pcie_out::{Out, block_checked, flags, pm, size_text, spec_block};
use marrow_pcie::cap_id::ExtCapId;
use marrow_pcie::{CapError, Config, ExtCap};
use serde_json::{Value, json};

fn err(o: &mut Out, e: &CapError) {
    o.error(2, e, Some(e.offset().into()));
}

/// lspci's AER flag names at their bits (PCIe 6.0 §7.8.4.2, §7.8.4.5).
const UE: &[(&str, u32)] = &[
    ("DLP", 4),
    ("SDES", 5),
    ("TLP", 12),
    ("FCP", 13),
    ("CmpltTO", 14),
    ("CmpltAbrt", 15),
    ("UnxCmplt", 16),
    ("RxOF", 17),
    ("MalfTLP", 18),
    ("ECRC", 19),
    ("UnsupReq", 20),
    ("ACSViol", 21),
];
/// Bits lspci 3.9 does not name (PCIe 6.0 §7.8.4.2, §7.8.4.5): printed after
/// its flags, under the spec's names, only when set.
const UE_MORE: &[(&str, u32)] =
    &[("UncorrIntErr", 22), ("BlockedTLP", 23), ("AtomicOpBlocked", 24), ("TLPBlockedErr", 25)];
const CE_MORE: &[(&str, u32)] = &[("CorrIntErr", 14), ("HeaderOF", 15)];
const CE: &[(&str, u32)] =
    &[("RxErr", 0), ("BadTLP", 6), ("BadDLLP", 7), ("Rollover", 8), ("Timeout", 12), ("AdvNonFatalErr", 13)];

fn bits(v: u32, t: &[(&str, u32)]) -> String {
    t.iter().map(|(n, b)| format!("{n}{}", pm(v >> b & 1 != 0))).collect::<Vec<_>>().join(" ")
}

/// The newer bits set in `v`, as `Name+` words.
fn newer_set(v: u32, more: &[(&str, u32)]) -> Vec<String> {
    more.iter().filter(|(_, b)| v >> b & 1 != 0).map(|(n, _)| format!("{n}+")).collect()
}

const ACS: &[(&str, u32)] = &[
    ("SrcValid", 0),
    ("TransBlk", 1),
    ("ReqRedir", 2),
    ("CmpltRedir", 3),
    ("UpstreamFwd", 4),
    ("EgressCtrl", 5),
    ("DirectTrans", 6),
];

pub fn render(o: &mut Out, cfg: &Config, c: &ExtCap, j: &mut Value) {
    match c.id {
        ExtCapId::NULL => o.line(
            2,
            if c.next == 0 {
                "marrow: no registers (hidden or removed capability)"
            } else {
                "marrow: no registers (hidden or removed capability), list continues"
            },
        ),
        ExtCapId::ERR => aer(o, cfg),
        ExtCapId::ACS => acs(o, cfg),
        ExtCapId::ATS => {
            if let Some(a) = cfg.ats() {
                o.line(2, format!("ATSCap: Invalidate Queue Depth: {:02x}", a.invalidate_queue_depth));
                o.line(2, format!("ATSCtl: Enable{}, Smallest Translation Unit: {:02x}", pm(a.enabled), a.stu));
            }
        }
        ExtCapId::PRI => {
            if let Some(p) = cfg.pri() {
                o.line(2, format!("PRICtl: Enable{} Reset{}", pm(p.enabled), pm(p.reset)));
                o.line(
                    2,
                    format!(
                        "PRISta: RF{} UPRGI{} Stopped{}",
                        pm(p.response_failure),
                        pm(p.unexpected_response),
                        pm(p.stopped)
                    ),
                );
                o.line(
                    2,
                    format!("Page Request Capacity: {:08x}, Page Request Allocation: {:08x}", p.capacity, p.allocation),
                );
            }
        }
        ExtCapId::PASID => {
            if let Some(p) = cfg.pasid() {
                o.line(
                    2,
                    format!(
                        "PASIDCap: Exec{} Priv{}, Max PASID Width: {:02x}",
                        pm(p.exec_supported),
                        pm(p.priv_supported),
                        p.max_width
                    ),
                );
                o.line(
                    2,
                    format!("PASIDCtl: Enable{} Exec{} Priv{}", pm(p.enabled), pm(p.exec_enabled), pm(p.priv_enabled)),
                );
            }
        }
        ExtCapId::LTR => {
            if let Some(t) = cfg.ltr() {
                let ns = |v: Option<u64>| v.map_or("reserved scale".to_string(), |n| format!("{n}ns"));
                o.line(2, format!("Max snoop latency: {}", ns(t.max_snoop_ns())));
                o.line(2, format!("Max no snoop latency: {}", ns(t.max_no_snoop_ns())));
            }
        }
        ExtCapId::DSN => {
            if let Some(sn) = cfg.serial_number() {
                let b = sn.to_be_bytes().iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join("-");
                o.line(2, format!("Device Serial Number {b}"));
            }
        }
        ExtCapId::REBAR => {
            let mut entries = Vec::new();
            for r in cfg.resizable_bars() {
                let sup: Vec<String> = r.supported().map(size_text).collect();
                o.line(
                    2,
                    format!(
                        "BAR {}: current size: {}, supported: {}",
                        r.bar_index,
                        size_text(r.current),
                        sup.join(" ")
                    ),
                );
                entries.push(
                    json!({ "bar": r.bar_index, "current": r.current, "supported": r.supported().collect::<Vec<_>>() }),
                );
            }
            j["bars"] = Value::Array(entries);
        }
        ExtCapId::L1SS => l1ss(o, cfg),
        ExtCapId::PTM => ptm(o, cfg),
        ExtCapId::ARI => {
            if let Some(b) = block_checked(o, cfg.ari()) {
                let g = |n: &str| b.get(n).unwrap_or(0);
                o.line(
                    2,
                    format!(
                        "ARICap: {}, Next Function: {}",
                        flags(&b, &[("MFVC", "ari_cap_mfvc"), ("ACS", "ari_cap_acs")]),
                        g("ari_cap_nfn")
                    ),
                );
                o.line(
                    2,
                    format!(
                        "ARICtl: {}, Function Group: {}",
                        flags(&b, &[("MFVC", "ari_ctrl_mfvc"), ("ACS", "ari_ctrl_acs")]),
                        g("ari_ctrl_fg")
                    ),
                );
            }
        }
        ExtCapId::DVSEC => {
            for d in cfg.dvsecs() {
                match d {
                    Ok(d) if d.offset == c.offset => o.line(
                        2,
                        format!(
                            "Designated Vendor-Specific: Vendor={:04x} ID={:04x} Rev={} Len={}{}",
                            d.vendor,
                            d.id,
                            d.rev,
                            d.len,
                            d.name()
                                .map(|n| format!(": {n} (body not decoded)"))
                                .unwrap_or(" (body not decoded)".into())
                        ),
                    ),
                    Ok(_) => {}
                    Err(e) => err(o, &e),
                }
            }
        }
        ExtCapId::DOE => {
            if let Some(r) = cfg.doe().find(|r| r.as_ref().map_or(true, |b| b.offset == c.offset))
                && let Some(b) = block_checked(o, Some(r))
            {
                {
                    o.line(2, format!("DOECap: {}", flags(&b, &[("IntSup", "doe_cap_int_sup")])));
                    o.line(3, format!("Interrupt Message Number {:03x}", b.get("doe_cap_irq").unwrap_or(0)));
                    o.line(2, format!("DOECtl: {}", flags(&b, &[("IntEn", "doe_ctrl_int_en")])));
                    o.line(
                        2,
                        format!(
                            "DOESta: {}",
                            flags(
                                &b,
                                &[
                                    ("Busy", "doe_status_busy"),
                                    ("IntSta", "doe_status_int_status"),
                                    ("Error", "doe_status_error"),
                                    ("ObjectReady", "doe_status_data_object_ready")
                                ]
                            )
                        ),
                    );
                }
            }
        }
        ExtCapId::VC | ExtCapId::VC9 => vc(o, cfg, j),
        ExtCapId::RCLD => crate::pcie_ext_rcld_mcast::rc_link(o, cfg, c, j),
        ExtCapId::MCAST => crate::pcie_ext_rcld_mcast::multicast(o, cfg, c),
        ExtCapId::LMR => match cfg.lane_margining() {
            Some(Ok(m)) => {
                spec_lines_of(o, &m.port);
                o.line(2, format!("lanes: {} ({:?})", m.lanes.len(), m.lane_count));
                for l in &m.lanes {
                    spec_lines_of(o, l);
                }
                j["lanes"] = Value::Array(m.lanes.iter().map(pcie_json::block).collect());
            }
            Some(Err(e)) => err(o, &e),
            None => {}
        },
        ExtCapId::DEV3 => {
            spec_block(o, cfg.device3());
        }
        ExtCapId::IDE => crate::pcie_ext_ide_vc::ide(o, cfg, j),
        _ => crate::pcie_ext_dpc_sriov_phy::render(o, cfg, c, j),
    }
}

fn spec_lines_of(o: &mut Out, b: &marrow_pcie::registers::Block) {
    spec_block(o, Some(Ok(b.clone())));
}

fn aer(o: &mut Out, cfg: &Config) {
    let Some(a) = cfg.aer() else { return };
    let regs = [
        ("UESta", a.uncor_status.bits(), UE, UE_MORE),
        ("UEMsk", a.uncor_mask.bits(), UE, UE_MORE),
        ("UESvrt", a.uncor_severity.bits(), UE, UE_MORE),
        ("CESta", a.cor_status.bits(), CE, CE_MORE),
        ("CEMsk", a.cor_mask.bits(), CE, CE_MORE),
    ];
    for (name, v, named, _) in regs {
        o.line(2, format!("{name}: {}", bits(v, named)));
    }
    // Bits lspci 3.9 has no name for, on a line of their own so that
    // lspci's lines stay as lspci prints them.
    let newer: Vec<String> = regs
        .iter()
        .filter_map(|(name, v, _, more)| {
            let set = newer_set(*v, more);
            (!set.is_empty()).then(|| format!("{name} {}", set.join(" ")))
        })
        .collect();
    if !newer.is_empty() {
        o.line(2, format!("marrow: AER bits lspci 3.9 does not name: {}", newer.join("; ")));
    }
    let bit = |shift: u32| pm(a.cap_control >> shift & 1 != 0);
    use marrow_pcie::generated::pcie::pci_aer_cap as C;
    o.line(
        2,
        format!(
            "AERCap: First Error Pointer: {:02x}, ECRCGenCap{} ECRCGenEn{} ECRCChkCap{} ECRCChkEn{}",
            a.first_error_pointer(),
            bit(C::ERR_CAP_ECRC_GENCAP_SHIFT),
            bit(C::ERR_CAP_ECRC_GENEN_SHIFT),
            bit(C::ERR_CAP_ECRC_CHKCAP_SHIFT),
            bit(C::ERR_CAP_ECRC_CHKEN_SHIFT)
        ),
    );
    o.line(
        3,
        format!(
            "MultHdrRecCap{} MultHdrRecEn{} TLPPfxPres{} HdrLogCap{}",
            bit(C::ERR_CAP_MULT_HDR_REC_CAP_SHIFT),
            bit(C::ERR_CAP_MULT_HDR_REC_EN_SHIFT),
            bit(C::ERR_CAP_TLP_PREFIX_LOG_SHIFT),
            bit(C::ERR_CAP_CTO_HDR_LOG_CAP_SHIFT)
        ),
    );
    o.line(2, format!("HeaderLog: {}", a.header_log.iter().map(|w| format!("{w:08x}")).collect::<Vec<_>>().join(" ")));
    if a.header_log != [0; 4] {
        match crate::pcie_tlp::tlp(&a.header_log) {
            // marrow's own reading of the log, marked so it is not taken for lspci's.
            Ok(r) => r.text.lines().for_each(|l| o.line(3, format!("marrow: HeaderLog TLP: {}", l.trim()))),
            Err(e) => o.line(3, format!("marrow: HeaderLog TLP: not a TLP header: {e}")),
        }
    }
    let is_root = cfg.express().is_some_and(|e| e.port_type.has_root_registers());
    if let (true, Some(Ok(b))) =
        (is_root, cfg.ext_block(ExtCapId::ERR, &marrow_pcie::generated::pcie::pci_aer_cap::LAYOUT))
    {
        o.line(
            2,
            format!(
                "RootCmd: {}",
                flags(
                    &b,
                    &[
                        ("CERptEn", "root_cmd_cor_en"),
                        ("NFERptEn", "root_cmd_nonfatal_en"),
                        ("FERptEn", "root_cmd_fatal_en")
                    ]
                )
            ),
        );
        o.line(
            2,
            format!(
                "RootSta: {}",
                flags(
                    &b,
                    &[
                        ("CERcvd", "root_cor_rcv"),
                        ("MultCERcvd", "root_multi_cor_rcv"),
                        ("UERcvd", "root_uncor_rcv"),
                        ("MultUERcvd", "root_multi_uncor_rcv"),
                    ]
                ),
            ),
        );
        o.line(
            3,
            format!(
                " {} IntMsg {}",
                flags(
                    &b,
                    &[
                        ("FirstFatal", "root_first_fatal"),
                        ("NonFatalMsg", "root_nonfatal_rcv"),
                        ("FatalMsg", "root_fatal_rcv"),
                    ]
                ),
                b.get("root_int_msg").unwrap_or(0)
            ),
        );
        o.line(
            2,
            format!(
                "ErrorSrc: ERR_COR: {:04x} ERR_FATAL/NONFATAL: {:04x}",
                b.get("err_src_cor").unwrap_or(0),
                b.get("err_src_uncor").unwrap_or(0)
            ),
        );
    }
}

fn acs(o: &mut Out, cfg: &Config) {
    let Some(a) = cfg.acs() else { return };
    o.line(2, format!("ACSCap: {}", bits(a.capability.bits().into(), ACS)));
    o.line(2, format!("ACSCtl: {}", bits(a.control_raw.into(), ACS)));
    o.line(
        2,
        format!(
            "marrow: peer-to-peer: {}",
            if a.redirects_p2p() {
                "redirected to the root complex (ReqRedir/CmpltRedir on)"
            } else {
                "not redirected"
            }
        ),
    );
    match cfg.acs_egress_control() {
        Some(Ok(e)) => {
            let blocked: Vec<String> = e.blocked().map(|n| n.to_string()).collect();
            o.line(
                2,
                format!(
                    "Egress control vector ({} bits): {}",
                    e.bits,
                    if blocked.is_empty() {
                        "nothing blocked".to_string()
                    } else {
                        format!("blocked {}", blocked.join(" "))
                    }
                ),
            );
        }
        Some(Err(e)) => err(o, &e),
        None => {}
    }
}

fn l1ss(o: &mut Out, cfg: &Config) {
    let Some(b) = block_checked(o, cfg.l1ss()) else { return };
    let g = |n: &str| b.get(n).unwrap_or(0);
    let us = |v: Option<u64>| v.map_or("<error>".to_string(), |v| format!("{v}us"));
    o.line(
        2,
        format!(
            "L1SubCap: {}",
            flags(
                &b,
                &[
                    ("PCI-PM_L1.2", "l1ss_cap_pcipm_l1_2"),
                    ("PCI-PM_L1.1", "l1ss_cap_pcipm_l1_1"),
                    ("ASPM_L1.2", "l1ss_cap_aspm_l1_2"),
                    ("ASPM_L1.1", "l1ss_cap_aspm_l1_1"),
                    ("L1_PM_Substates", "l1ss_cap_l1_pm_ss"),
                ]
            )
        ),
    );
    o.line(
        3,
        format!(
            "PortCommonModeRestoreTime={}us PortTPowerOnTime={}",
            g("l1ss_cap_cm_restore_time"),
            us(marrow_pcie::l1ss::t_power_on_us(g("l1ss_cap_p_pwr_on_scale"), g("l1ss_cap_p_pwr_on_value")))
        ),
    );
    o.line(
        2,
        format!(
            "L1SubCtl1: {}",
            flags(
                &b,
                &[
                    ("PCI-PM_L1.2", "l1ss_ctl1_pcipm_l1_2"),
                    ("PCI-PM_L1.1", "l1ss_ctl1_pcipm_l1_1"),
                    ("ASPM_L1.2", "l1ss_ctl1_aspm_l1_2"),
                    ("ASPM_L1.1", "l1ss_ctl1_aspm_l1_1"),
                ]
            )
        ),
    );
    let th = marrow_pcie::l1ss::ltr_l12_threshold_ns(g("l1ss_ctl1_ltr_l12_th_scale"), g("l1ss_ctl1_ltr_l12_th_value"));
    o.line(
        3,
        format!(
            "T_CommonMode={}us LTR1.2_Threshold={}",
            g("l1ss_ctl1_cm_restore_time"),
            th.map_or("<error>".to_string(), |n| format!("{n}ns"))
        ),
    );
    o.line(
        2,
        format!(
            "L1SubCtl2: T_PwrOn={}",
            us(marrow_pcie::l1ss::t_power_on_us(g("l1ss_ctl2_t_pwr_on_scale"), g("l1ss_ctl2_t_pwr_on_value")))
        ),
    );
}

fn ptm(o: &mut Out, cfg: &Config) {
    use marrow_pcie::ptm::Granularity;
    let Some(b) = block_checked(o, cfg.ptm()) else { return };
    let gran = |v: u64, zero: &str| match Granularity::from_field(v) {
        Granularity::Unimplemented => zero.to_string(),
        Granularity::Ns(n) => format!("{n}ns"),
        Granularity::Above254Ns => "Greater than 254ns".to_string(),
    };
    o.line(
        2,
        format!(
            "PTMCap: Requester:{} Responder:{} Root:{}",
            pm(b.flag("ptm_cap_req")),
            pm(b.flag("ptm_cap_res")),
            pm(b.flag("ptm_cap_root"))
        ),
    );
    o.line(2, format!("PTMClockGranularity: {}", gran(b.get("ptm_cap_granularity").unwrap_or(0), "Unimplemented")));
    o.line(
        2,
        format!("PTMControl: Enabled:{} RootSelected:{}", pm(b.flag("ptm_ctrl_enable")), pm(b.flag("ptm_ctrl_root"))),
    );
    o.line(2, format!("PTMEffectiveGranularity: {}", gran(b.get("ptm_ctrl_granularity").unwrap_or(0), "Unknown")));
}

/// VC and port arbitration selections (§7.9.1.4, §7.9.1.7) in lspci's names.
fn arb_name(v: u64) -> &'static str {
    ["Fixed", "WRR32", "WRR64", "WRR128", "TWRR128", "WRR256"].get(v as usize).copied().unwrap_or("??")
}

fn vc(o: &mut Out, cfg: &Config, j: &mut Value) {
    match cfg.virtual_channel() {
        Some(Ok(v)) => {
            let p = &v.port;
            let g = |n: &str| p.get(n).unwrap_or(0);
            o.line(
                2,
                format!(
                    "Caps: LPEVC={} RefClk={} PATEntryBits={}",
                    g("vc_cap1_lpevc"),
                    if g("vc_cap1_ref_clk") == 0 { "100ns" } else { "??" },
                    1 << g("vc_cap1_arb_size")
                ),
            );
            let arb = g("vc_cap2_arb_cap");
            let f = |i: u32| pm(arb >> i & 1 != 0);
            o.line(2, format!("Arb: Fixed{} WRR32{} WRR64{} WRR128{}", f(0), f(1), f(2), f(3)));
            o.line(2, format!("Ctrl: ArbSelect={}", arb_name(g("vc_ctrl_arb_select"))));
            o.line(2, format!("Status: InProgress{}", pm(p.flag("vc_status_arb_table"))));
            // lspci 3.9 names the VC Arbitration Table so, at its absolute offset.
            let arb_off = g("vc_cap2_arb_off");
            if arb_off != 0 {
                o.line(2, format!("Port Arbitration Table [{:x}] <?>", u64::from(v.offset) + 16 * arb_off));
            }
            let t = v.vc_arb_table.as_ref();
            let table = crate::pcie_ext_ide_vc::arb_table(o, 2, "VC Arbitration Table", "VC IDs", t);
            j["vc_arbitration_table"] = table;
            let mut pat = Vec::new();
            for (i, r) in v.resources.iter().enumerate() {
                let g = |n: &str| r.get(n).unwrap_or(0);
                o.line(
                    2,
                    format!(
                        "VC{i}: Caps: PATOffset={:02x} MaxTimeSlots={} RejSnoopTrans{}",
                        g("vc_res_pat_offset"),
                        g("vc_res_max_time_slots") + 1,
                        pm(r.flag("vc_res_rej_snoop"))
                    ),
                );
                let a = g("vc_res_pat_cap");
                let f = |i: u32| pm(a >> i & 1 != 0);
                o.line(
                    3,
                    format!(
                        "Arb: Fixed{} WRR32{} WRR64{} WRR128{} TWRR128{} WRR256{}",
                        f(0),
                        f(1),
                        f(2),
                        f(3),
                        f(4),
                        f(5)
                    ),
                );
                o.line(
                    3,
                    format!(
                        "Ctrl: Enable{} ID={} ArbSelect={} TC/VC={:02x}",
                        pm(r.flag("vc_res_enable")),
                        g("vc_res_id"),
                        arb_name(g("vc_res_arb_select")),
                        g("vc_res_tc_map")
                    ),
                );
                o.line(
                    3,
                    format!(
                        "Status: NegoPending{} InProgress{}",
                        pm(r.flag("vc_res_nego_pending")),
                        pm(r.flag("vc_res_table_status"))
                    ),
                );
                // lspci prints this line and no table; marrow's follows on its own lines.
                if g("vc_res_pat_offset") != 0 {
                    o.line(3, "Port Arbitration Table <?>");
                }
                let t = v.port_arb_tables.get(i).and_then(Option::as_ref);
                pat.push(crate::pcie_ext_ide_vc::arb_table(o, 3, &format!("VC{i} Port Arbitration Table"), "ports", t));
            }
            j["resources"] = Value::Array(v.resources.iter().map(pcie_json::block).collect());
            j["port_arbitration_tables"] = Value::Array(pat);
        }
        Some(Err(e)) => err(o, &e),
        None => {}
    }
}
