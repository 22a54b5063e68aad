//! `decode --pcie`: the PCI Express capability (PCIe Base 6.0 §7.5.3) and
//! Enhanced Allocation (PCI EA ECN) in lspci 3.9's words (ls-caps.c
//! `cap_express_*`, `cap_ea`), every register also as JSON.

use crate::pcie_json;
use crate::pcie_out::{Out, block_checked, flags, pm, word};
use marrow_pcie::Config;
use marrow_pcie::express::PortType;
use serde_json::{Value, json};

fn payload(n: u64) -> u64 {
    128 << n
}

/// The port type as lspci's `cap_express` names it; the types that can
/// have a slot say whether they do.
fn port_title(port: PortType, slot: bool) -> String {
    let s = pm(slot);
    match port {
        PortType::ROOT_PORT => format!("Root Port (Slot{s})"),
        PortType::DOWNSTREAM => format!("Downstream Port (Slot{s})"),
        PortType::PCI_BRIDGE => "PCI-Express to PCI/PCI-X Bridge".to_string(),
        PortType::PCIE_BRIDGE => format!("PCI/PCI-X to PCI-Express Bridge (Slot{s})"),
        other => other.name().map_or_else(|| format!("Unknown type {}", other.0), str::to_string),
    }
}

/// ASPM Support in Link Capabilities: bit 0 L0s, bit 1 L1 (§7.5.3.6).
const ASPM_L0S: u64 = 0b01;
const ASPM_L1: u64 = 0b10;
/// Link Capabilities 2's Supported Link Speeds Vector, a bit a speed
/// (§7.5.3.18); its bit 6 is reserved.
const SLS_2_5GT: u64 = 1 << 0;
const SLS_5GT: u64 = 1 << 1;
const SLS_8GT: u64 = 1 << 2;
const SLS_16GT: u64 = 1 << 3;
const SLS_32GT: u64 = 1 << 4;
const SLS_64GT: u64 = 1 << 5;
const SLS_RESERVED: u64 = 1 << 6;

/// lspci's `latency_l0s` and `latency_l1` (DevCap and LnkCap, §7.5.3.3 and §7.5.3.6).
const L0S: [&str; 8] = ["<64ns", "<128ns", "<256ns", "<512ns", "<1us", "<2us", "<4us", "unlimited"];
const L1: [&str; 8] = ["<1us", "<2us", "<4us", "<8us", "<16us", "<32us", "<64us", "unlimited"];

/// A power limit `value` × 10^-`scale` W (§7.5.3.3 Captured Slot Power
/// Limit Value and Scale) in the shortest decimal, as lspci's `%g` prints it;
/// with scale 0, F0h and up mean 250 W, 275 W, … (the spec's table).
fn watts(value: u64, scale: u64) -> String {
    // Scale 0 with values from F0h are steps of 25 W above 250 W.
    const STEPS_FROM: u64 = 0xf0;
    if scale == 0 && value >= STEPS_FROM {
        return format!("{}W", 250 + 25 * (value - STEPS_FROM));
    }
    let scale = scale.min(3) as u32;
    let div = 10u64.pow(scale);
    let (whole, frac) = (value / div, value % div);
    if frac == 0 {
        return format!("{whole}W");
    }
    let digits = format!("{frac:0width$}", width = scale as usize);
    format!("{whole}.{}W", digits.trim_end_matches('0'))
}

/// lspci 3.9's names of the DevCap2 and DevCtl2 codes (§7.5.3.15, §7.5.3.16).
fn timeout_ranges(v: u64) -> &'static str {
    match v {
        0 => "Not Supported",
        1 => "Range A",
        2 => "Range B",
        3 => "Range AB",
        6 => "Range BC",
        7 => "Range ABC",
        14 => "Range BCD",
        15 => "Range ABCD",
        _ => "Unknown",
    }
}
fn timeout_value(v: u64) -> &'static str {
    match v {
        0 => "50us to 50ms",
        1 => "50us to 100us",
        2 => "1ms to 10ms",
        5 => "16ms to 55ms",
        6 => "65ms to 210ms",
        9 => "260ms to 900ms",
        10 => "1s to 3.5s",
        13 => "4s to 13s",
        14 => "17s to 64s",
        _ => "Unknown",
    }
}
fn obff_cap(v: u64) -> &'static str {
    word(&["Not Supported", "Via message", "Via WAKE#", "Via message/WAKE#"], v)
}
fn obff_ctl(v: u64) -> &'static str {
    word(&["Disabled", "Via message A", "Via message B", "Via WAKE#"], v)
}
fn emergency_power(v: u64) -> &'static str {
    word(&["Not Supported", "Dev Specific", "Form Factor Dev Specific", "Reserved"], v)
}
fn ln_cls(v: u64) -> &'static str {
    word(&["Not Supported", "64byte cachelines", "128byte cachelines", "Reserved"], v)
}

pub fn express(o: &mut Out, cfg: &Config, mut j: Value) -> Value {
    let at = j["offset"].as_u64().unwrap_or(0);
    let block = cfg.express_block();
    if !matches!(block, Some(Ok(_))) {
        o.line(1, format!("Capabilities: [{at:02x}] PCI Express"));
    }
    let Some(b) = block_checked(o, block) else { return j };
    let g = |n: &str| b.get(n).unwrap_or(0);
    let port = PortType(g("flags_type") as u8);
    o.line(
        1,
        format!(
            "Capabilities: [{at:02x}] Express (v{}) {}, MSI {:02x}",
            g("flags_vers"),
            port_title(port, b.flag("flags_slot")),
            g("flags_irq")
        ),
    );
    // Which fields lspci shows depends on the port type, as in its cap_express_dev.
    let endpoint = port.is_endpoint();
    let upstream_ish = endpoint || port == PortType::UPSTREAM || port == PortType::PCI_BRIDGE;
    let latency = if endpoint {
        format!(", Latency L0s {}, L1 {}", word(&L0S, g("devcap_l0s")), word(&L1, g("devcap_l1")))
    } else {
        String::new()
    };
    o.line(
        2,
        format!(
            "DevCap: MaxPayload {} bytes, PhantFunc {}{latency}",
            payload(g("devcap_payload")),
            (1u64 << g("devcap_phantom")) - 1
        ),
    );
    let mut cap = vec![("ExtTag", "devcap_ext_tag")];
    if upstream_ish {
        cap.extend([("AttnBtn", "devcap_atn_but"), ("AttnInd", "devcap_atn_ind"), ("PwrInd", "devcap_pwr_ind")]);
    }
    cap.push(("RBE", "devcap_rber"));
    // Function Level Reset belongs to endpoints, integrated ones included.
    let flr_capable_type = endpoint || port == PortType::RC_END;
    if flr_capable_type {
        cap.push(("FLReset", "devcap_flr"));
    }
    let mut line = flags(&b, &cap);
    if port == PortType::ENDPOINT || port == PortType::UPSTREAM || port == PortType::PCI_BRIDGE {
        line += &format!(" SlotPowerLimit {}", watts(g("devcap_pwr_val"), g("devcap_pwr_scl")));
    }
    o.line(3, line);
    o.line(
        2,
        format!(
            "DevCtl: {}",
            flags(
                &b,
                &[
                    ("CorrErr", "devctl_cere"),
                    ("NonFatalErr", "devctl_nfere"),
                    ("FatalErr", "devctl_fere"),
                    ("UnsupReq", "devctl_urre")
                ]
            )
        ),
    );
    o.line(
        3,
        flags(
            &b,
            &[
                ("RlxdOrd", "devctl_relax_en"),
                ("ExtTag", "devctl_ext_tag"),
                ("PhantFunc", "devctl_phantom"),
                ("AuxPwr", "devctl_auxpm"),
                ("NoSnoop", "devctl_nosnp_en"),
            ],
        ) + &if port == PortType::PCI_BRIDGE {
            format!(" BrConfRtry{}", pm(b.flag("devctl_bcr_flr")))
        } else if flr_capable_type && b.flag("devcap_flr") {
            format!(" FLReset{}", pm(b.flag("devctl_bcr_flr")))
        } else {
            String::new()
        },
    );
    o.line(
        3,
        format!("MaxPayload {} bytes, MaxReadReq {} bytes", payload(g("devctl_payload")), payload(g("devctl_readrq"))),
    );
    o.line(
        2,
        format!(
            "DevSta: {}",
            flags(
                &b,
                &[
                    ("CorrErr", "devsta_ced"),
                    ("NonFatalErr", "devsta_nfed"),
                    ("FatalErr", "devsta_fed"),
                    ("UnsupReq", "devsta_urd"),
                    ("AuxPwr", "devsta_auxpd"),
                    ("TransPend", "devsta_trpnd"),
                ]
            )
        ),
    );
    if port.has_link() {
        let speed = |v: u64| marrow_pcie::express::LinkSpeed(v as u8).gts().unwrap_or("unknown");
        let aspm = g("lnkcap_aspms");
        let mut exit = Vec::new();
        if aspm & ASPM_L0S != 0 {
            exit.push(format!("L0s {}", word(&L0S, g("lnkcap_l0sel"))));
        }
        if aspm & ASPM_L1 != 0 {
            exit.push(format!("L1 {}", word(&L1, g("lnkcap_l1el"))));
        }
        let exit = if exit.is_empty() { String::new() } else { format!(", Exit Latency {}", exit.join(", ")) };
        o.line(
            2,
            format!(
                "LnkCap: Port #{}, Speed {}, Width x{}, ASPM {}{exit}",
                g("lnkcap_port"),
                speed(g("lnkcap_sls")),
                g("lnkcap_mlw"),
                word(&["not supported", "L0s", "L1", "L0s L1"], aspm)
            ),
        );
        o.line(
            3,
            flags(
                &b,
                &[
                    ("ClockPM", "lnkcap_clkpm"),
                    ("Surprise", "lnkcap_sderc"),
                    ("LLActRep", "lnkcap_dlllarc"),
                    ("BwNot", "lnkcap_lbnc"),
                    ("ASPMOptComp", "lnkcap_aspm_opt"),
                ],
            ),
        );
        // lspci shows the RCB only where the spec defines it for the port type.
        let rcb = if port == PortType::ROOT_PORT || endpoint || port == PortType::PCI_BRIDGE {
            format!(" RCB {} bytes,", if b.flag("lnkctl_rcb") { 128 } else { 64 })
        } else {
            String::new()
        };
        o.line(
            2,
            format!(
                "LnkCtl: ASPM {};{rcb} {}",
                word(&["Disabled", "L0s Enabled", "L1 Enabled", "L0s L1 Enabled"], g("lnkctl_aspmc")),
                flags(&b, &[("Disabled", "lnkctl_ld"), ("CommClk", "lnkctl_ccc")])
            ),
        );
        o.line(
            3,
            flags(
                &b,
                &[
                    ("ExtSynch", "lnkctl_es"),
                    ("ClockPM", "lnkctl_clkreq_en"),
                    ("AutWidDis", "lnkctl_hawd"),
                    ("BWInt", "lnkctl_lbmie"),
                    ("AutBWInt", "lnkctl_labie"),
                ],
            ),
        );
        // lspci 3.9's link_compare: above LnkCap is "overdriven" on any
        // function; below it is "downgraded" except on ports that face
        // downstream, whose partner may be narrower or slower.
        let faces_down = port.faces_downstream();
        let compare = |sta: u64, cap: u64| match sta.cmp(&cap) {
            std::cmp::Ordering::Greater => " (overdriven)",
            std::cmp::Ordering::Less if !faces_down => " (downgraded)",
            _ => "",
        };
        o.line(
            2,
            format!(
                "LnkSta: Speed {}{}, Width x{}{}",
                speed(g("lnksta_cls")),
                compare(g("lnksta_cls"), g("lnkcap_sls")),
                g("lnksta_nlw"),
                compare(g("lnksta_nlw"), g("lnkcap_mlw"))
            ),
        );
        o.line(
            3,
            flags(
                &b,
                &[
                    ("TrErr", "lnksta_te"),
                    ("Train", "lnksta_lt"),
                    ("SlotClk", "lnksta_slc"),
                    ("DLActive", "lnksta_dllla"),
                    ("BWMgmt", "lnksta_lbms"),
                    ("ABWMgmt", "lnksta_labs"),
                ],
            ),
        );
    }
    if b.flag("flags_slot") {
        o.line(
            2,
            format!(
                "SltCap: {}",
                flags(
                    &b,
                    &[
                        ("AttnBtn", "sltcap_abp"),
                        ("PwrCtrl", "sltcap_pcp"),
                        ("MRL", "sltcap_mrlsp"),
                        ("AttnInd", "sltcap_aip"),
                        ("PwrInd", "sltcap_pip"),
                        ("HotPlug", "sltcap_hpc"),
                        ("Surprise", "sltcap_hps"),
                    ]
                )
            ),
        );
        o.line(
            3,
            format!(
                "Slot #{}, PowerLimit {}; {}",
                g("sltcap_psn"),
                watts(g("sltcap_splv"), g("sltcap_spls")),
                flags(&b, &[("Interlock", "sltcap_eip"), ("NoCompl", "sltcap_nccs")])
            ),
        );
        o.line(
            2,
            format!(
                "SltCtl: Enable: {}",
                flags(
                    &b,
                    &[
                        ("AttnBtn", "sltctl_abpe"),
                        ("PwrFlt", "sltctl_pfde"),
                        ("MRL", "sltctl_mrlsce"),
                        ("PresDet", "sltctl_pdce"),
                        ("CmdCplt", "sltctl_ccie"),
                        ("HPIrq", "sltctl_hpie"),
                        ("LinkChg", "sltctl_dllsce"),
                    ]
                )
            ),
        );
        let ind = |v: u64| word(&["Unknown", "On", "Blink", "Off"], v);
        o.line(
            3,
            format!(
                "Control: AttnInd {}, PwrInd {}, {}",
                ind(g("sltctl_aic")),
                ind(g("sltctl_pic")),
                flags(&b, &[("Power", "sltctl_pcc"), ("Interlock", "sltctl_eic")])
            ),
        );
        o.line(
            2,
            format!(
                "SltSta: Status: {}",
                flags(
                    &b,
                    &[
                        ("AttnBtn", "sltsta_abp"),
                        ("PowerFlt", "sltsta_pfd"),
                        ("MRL", "sltsta_mrlss"),
                        ("CmdCplt", "sltsta_cc"),
                        ("PresDet", "sltsta_pds"),
                        ("Interlock", "sltsta_eis"),
                    ]
                )
            ),
        );
        o.line(
            3,
            format!(
                "Changed: {}",
                flags(&b, &[("MRL", "sltsta_mrlsc"), ("PresDet", "sltsta_pdc"), ("LinkState", "sltsta_dllsc")])
            ),
        );
    }
    if port.has_root_registers() {
        o.line(2, format!("RootCap: {}", flags(&b, &[("CRSVisible", "rtcap_crsvis")])));
        o.line(
            2,
            format!(
                "RootCtl: {}",
                flags(
                    &b,
                    &[
                        ("ErrCorrectable", "rtctl_secee"),
                        ("ErrNon-Fatal", "rtctl_senfee"),
                        ("ErrFatal", "rtctl_sefee"),
                        ("PMEIntEna", "rtctl_pmeie"),
                        ("CRSVisible", "rtctl_crssve"),
                    ]
                )
            ),
        );
        o.line(
            2,
            format!(
                "RootSta: PME ReqID {:04x}, {}",
                g("rtsta_pme_rid"),
                flags(&b, &[("PMEStatus", "rtsta_pme"), ("PMEPending", "rtsta_pending")])
            ),
        );
    }
    if b.register("devcap2").is_some() {
        dev2(o, cfg, &b, port);
        if port.has_link() {
            link2(o, &b, port);
        }
    }
    j["registers"] = pcie_json::block(&b)["registers"].clone();
    j
}

/// The EA entries as text and JSON.
pub fn enhanced_allocation(o: &mut Out, cfg: &Config) -> Option<Value> {
    match cfg.enhanced_allocation()? {
        Ok(ea) => {
            o.line(2, format!("Enhanced Allocation (EA): NumEntries={}", ea.entries.len()));
            let mut entries = Vec::new();
            for (i, e) in ea.entries.iter().enumerate() {
                o.line(
                    2,
                    format!("Entry {i}: Enable{} Writable{} EntrySize={}", pm(e.enable), pm(e.writable), e.size_dw),
                );
                let bei = match e.bei {
                    n @ 0..=5 => format!("BAR {n}"),
                    n @ 9..=14 => format!("VF-BAR {}", n - 9),
                    n => format!("{} ({n})", marrow_pcie::ea::bei_text(n)),
                };
                o.line(3, format!("BAR Equivalent Indicator: {bei}"));
                o.line(3, format!("PrimaryProperties: {}", marrow_pcie::ea::property_text(e.primary)));
                o.line(3, format!("SecondaryProperties: {}", marrow_pcie::ea::property_text(e.secondary)));
                o.line(3, format!("Base: {:x}", e.base));
                o.line(3, format!("MaxOffset: {:x}", e.max_offset));
                let mut v = pcie_json::block(&e.block);
                v["base"] = json!(e.base);
                v["max_offset"] = json!(e.max_offset);
                entries.push(v);
            }
            Some(Value::Array(entries))
        }
        Err(e) => {
            let at = e.offset();
            o.error(2, e, Some(at.into()));
            None
        }
    }
}

/// DevCap2 and DevCtl2 as lspci 3.9 lays them out (`cap_express_dev2`):
/// which fields appear depends on the port type and, for the AtomicOp
/// completer bits, on whether the function has a memory BAR.
fn dev2(o: &mut Out, cfg: &Config, b: &marrow_pcie::registers::Block, port: PortType) {
    let g = |n: &str| b.get(n).unwrap_or(0);
    let f = |n: &str| pm(b.flag(n));
    let root = port == PortType::ROOT_PORT;
    let down = port == PortType::DOWNSTREAM;
    let switch_or_root = root || down || port == PortType::UPSTREAM;
    let has_mem_bar = cfg.bars().any(|bar| {
        matches!(bar, marrow_pcie::Bar::Mem32 { address, .. } if address != 0)
            || matches!(bar, marrow_pcie::Bar::Mem64 { address, .. } if address != 0)
    });
    o.line(
        2,
        format!(
            "DevCap2: Completion Timeout: {}, TimeoutDis{} NROPrPrP{} LTR{}",
            timeout_ranges(g("devcap2_comp_tmout_ranges")),
            f("devcap2_comp_tmout_dis"),
            f("devcap2_nroprprp"),
            f("devcap2_ltr")
        ),
    );
    let mut prefix = format!(
        "10BitTagComp{} 10BitTagReq{} OBFF {}, ExtFmt{} EETLPPrefix{}",
        f("devcap2_tag10_comp"),
        f("devcap2_tag10_req"),
        obff_cap(g("devcap2_obff")),
        f("devcap2_ext_fmt"),
        f("devcap2_ee_prefix")
    );
    if b.flag("devcap2_ee_prefix") {
        let n = g("devcap2_max_ee_prefix");
        prefix += &format!(", MaxEETLPPrefixes {}", if n == 0 { 4 } else { n });
    }
    o.line(3, format!(" {prefix}"));
    o.line(
        3,
        format!(
            " EmergencyPowerReduction {}, EmergencyPowerReductionInit{}",
            emergency_power(g("devcap2_emer_pwr")),
            f("devcap2_emer_pwr_init")
        ),
    );
    let mut last = format!(" FRS{}", f("devcap2_frs"));
    if root {
        last += &format!(" LN System CLS {},", ln_cls(g("devcap2_ln_cls")));
    }
    // The two TPH bits as one code: Extended TPH without TPH is not a
    // combination the spec allows, and lspci prints nothing for it.
    let tph_valid = b.flag("devcap2_tph_comp") || !b.flag("devcap2_ext_tph_comp");
    if (root || port == PortType::ENDPOINT) && tph_valid {
        last += &format!(" TPHComp{} ExtTPHComp{}", f("devcap2_tph_comp"), f("devcap2_ext_tph_comp"));
    }
    if root || down {
        last += &format!(" ARIFwd{}", f("devcap2_ari"));
    }
    o.line(3, last);
    if switch_or_root || has_mem_bar {
        let mut atomics = String::from(" AtomicOpsCap:");
        if switch_or_root {
            atomics += &format!(" Routing{}", f("devcap2_atomic_route"));
        }
        if root || has_mem_bar {
            atomics += &format!(
                " 32bit{} 64bit{} 128bitCAS{}",
                f("devcap2_atomic_comp32"),
                f("devcap2_atomic_comp64"),
                f("devcap2_atomic_comp128")
            );
        }
        o.line(3, atomics);
    }
    let mut ctl = format!(
        "DevCtl2: Completion Timeout: {}, TimeoutDis{} LTR{} 10BitTagReq{} OBFF {},",
        timeout_value(g("devctl2_comp_timeout")),
        f("devctl2_comp_tmout_dis"),
        f("devctl2_ltr_en"),
        f("devctl2_tag10_req_en"),
        obff_ctl(g("devctl2_obff"))
    );
    if root || down {
        ctl += &format!(" ARIFwd{}", f("devctl2_ari"));
    }
    o.line(2, ctl);
    let requester = root || port == PortType::ENDPOINT || port == PortType::RC_END || port == PortType::LEG_END;
    if switch_or_root || requester {
        let mut atomics = String::from(" AtomicOpsCtl:");
        if requester {
            atomics += &format!(" ReqEn{}", f("devctl2_atomic_req"));
        }
        if switch_or_root {
            atomics += &format!(" EgressBlck{}", f("devctl2_atomic_egress_block"));
        }
        o.line(3, atomics);
    }
}

/// LnkCap2, LnkCtl2 and LnkSta2 (§7.5.3.18-20) as lspci 3.9 prints them
/// (`cap_express_link2`): an endpoint other than device 0 function 0 shows
/// only LnkSta2, as its link's other registers are function 0's.
fn link2(o: &mut Out, b: &marrow_pcie::registers::Block, port: PortType) {
    let g = |n: &str| b.get(n).unwrap_or(0);
    let f = |n: &str| pm(b.flag(n));
    let endpoint = port.is_endpoint();
    let down = port == PortType::DOWNSTREAM;
    let deemph = |v: u64| if v & 1 == 0 { "-6dB" } else { "-3.5dB" };
    if !endpoint || o.function0 {
        // lspci 3.9 knows speeds up to 32 GT/s: a vector with the 64 GT/s
        // bit or the reserved one above it is "RsvdP" to it.
        let sls = g("lnkcap2_sls");
        let speeds = match sls {
            v if v & (SLS_64GT | SLS_RESERVED) != 0 => "RsvdP",
            v if v & SLS_32GT != 0 => "2.5-32GT/s",
            v if v & SLS_16GT != 0 => "2.5-16GT/s",
            v if v & SLS_8GT != 0 => "2.5-8GT/s",
            v if v & SLS_5GT != 0 => "2.5-5GT/s",
            v if v & SLS_2_5GT != 0 => "2.5GT/s",
            _ => "Unknown",
        };
        // An all-zero LnkCap2 (a v2 capability from before the register was
        // defined) is not printed, as lspci does.
        let lnkcap2 = b.register("lnkcap2").map_or(0, |r| r.raw);
        if lnkcap2 != 0 {
            o.line(
                2,
                format!(
                    "LnkCap2: Supported Link Speeds: {speeds}, Crosslink{} Retimer{} 2Retimers{} DRS{}",
                    f("lnkcap2_crosslink"),
                    f("lnkcap2_retimer"),
                    f("lnkcap2_two_retimers"),
                    f("lnkcap2_drs")
                ),
            );
        }
        let target = match g("lnkctl2_tls") {
            0 | 1 => "2.5GT/s",
            2 => "5GT/s",
            3 => "8GT/s",
            4 => "16GT/s",
            5 => "32GT/s",
            6 => "64GT/s",
            _ => "Unknown",
        };
        let mut ctl = format!(
            "LnkCtl2: Target Link Speed: {target}, EnterCompliance{} SpeedDis{}",
            f("lnkctl2_enter_comp"),
            f("lnkctl2_hasd")
        );
        if down {
            ctl += &format!(", Selectable De-emphasis: {}", deemph(g("lnkctl2_sel_deemph")));
        }
        o.line(2, ctl);
        let margin = match g("lnkctl2_tx_margin") {
            0 => "Normal Operating Range",
            1 => "800-1200mV(full-swing)/400-700mV(half-swing)",
            2..=5 => "200-400mV(full-swing)/100-200mV(half-swing)",
            _ => "Unknown",
        };
        o.line(
            3,
            format!(
                " Transmit Margin: {margin}, EnterModifiedCompliance{} ComplianceSOS{}",
                f("lnkctl2_mod_comp"),
                f("lnkctl2_comp_sos")
            ),
        );
        o.line(3, format!(" Compliance Preset/De-emphasis: {}", compliance_preset(g("lnkctl2_comp_preset"))));
    }
    o.line(
        2,
        format!(
            "LnkSta2: Current De-emphasis Level: {}, EqualizationComplete{} EqualizationPhase1{}",
            deemph(g("lnksta2_deemph")),
            f("lnksta2_eq_complete"),
            f("lnksta2_eq_phase1")
        ),
    );
    o.line(
        3,
        format!(
            " EqualizationPhase2{} EqualizationPhase3{} LinkEqualizationRequest{}",
            f("lnksta2_eq_phase2"),
            f("lnksta2_eq_phase3"),
            f("lnksta2_eq_req")
        ),
    );
    let crosslink =
        word(&["unsupported", "Upstream Port", "Downstream Port", "incomplete"], g("lnksta2_crosslink_res"));
    let mut last =
        format!(" Retimer{} 2Retimers{} CrosslinkRes: {crosslink}", f("lnksta2_retimer"), f("lnksta2_two_retimers"));
    // DRS (§6.22) belongs to ports that face downstream and support it.
    if port.faces_downstream() && b.flag("lnkcap2_drs") {
        let comp = match g("lnksta2_ds_comp") {
            0 => "Link Down - Not Determined",
            1 => "Link Down - Not Present",
            2 => "Link Down - Present",
            4 => "Link Up - Present",
            5 => "Link Up - Present and DRS Received",
            _ => "Reserved",
        };
        last += &format!(", DRS{}\n\t\t\t DownstreamComp: {comp}", f("lnksta2_drs_rcvd"));
    }
    o.line(3, last);
}

/// The Compliance Preset/De-emphasis code (§7.5.3.19, Table 4-16 presets
/// at 8 GT/s and above) in lspci's words.
fn compliance_preset(v: u64) -> &'static str {
    match v {
        0 => "-6dB de-emphasis, 0dB preshoot",
        1 => "-3.5dB de-emphasis, 0dB preshoot",
        2 => "-4.4dB de-emphasis, 0dB preshoot",
        3 => "-2.5dB de-emphasis, 0dB preshoot",
        4 => "0dB de-emphasis, 0dB preshoot",
        5 => "0dB de-emphasis, 1.9dB preshoot",
        6 => "0dB de-emphasis, 2.5dB preshoot",
        7 => "-6.0dB de-emphasis, 3.5dB preshoot",
        8 => "-3.5dB de-emphasis, 3.5dB preshoot",
        9 => "0dB de-emphasis, 3.5dB preshoot",
        _ => "Unknown",
    }
}
