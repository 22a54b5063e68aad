//! `decode --pcie`: the PCI Express capability (PCIe Base 6.0 §7.5.3) and
//! Enhanced Allocation (PCI EA ECN) in lspci 3.9's words (ls-caps.c
//! `cap_express_*`, `cap_ea`), every register also as JSON.

use crate::pcie_caps::{Out, block_checked, flags, pm};
use crate::pcie_json;
use marrow_pcie::Config;
use marrow_pcie::express::PortType;
use serde_json::{Value, json};

fn payload(n: u64) -> u64 {
    128 << n
}

pub fn express(o: &mut Out, cfg: &Config, mut j: Value) -> Value {
    let Some(b) = block_checked(o, cfg.express_block()) else { return j };
    let e = cfg.express();
    let g = |n: &str| b.get(n).unwrap_or(0);
    let port = PortType(g("flags_type") as u8);
    o.line(
        2,
        format!(
            "Express (v{}) {}{}, MSI {:02x}",
            g("flags_vers"),
            port.name().unwrap_or("Unknown type"),
            if b.flag("flags_slot") { " (Slot+)" } else { "" },
            g("flags_irq")
        ),
    );
    o.line(2, format!("DevCap: MaxPayload {} bytes, PhantFunc {}", payload(g("devcap_payload")), g("devcap_phantom")));
    o.line(
        3,
        flags(
            &b,
            &[
                ("ExtTag", "devcap_ext_tag"),
                ("AttnBtn", "devcap_atn_but"),
                ("AttnInd", "devcap_atn_ind"),
                ("PwrInd", "devcap_pwr_ind"),
                ("RBE", "devcap_rber"),
                ("FLReset", "devcap_flr"),
            ],
        ),
    );
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
                ("FLReset/BrConfRtry", "devctl_bcr_flr"),
            ],
        ),
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
        o.line(
            2,
            format!(
                "LnkCap: Port #{}, Speed {}, Width x{}, ASPM {}",
                g("lnkcap_port"),
                speed(g("lnkcap_sls")),
                g("lnkcap_mlw"),
                ["not supported", "L0s", "L1", "L0s L1"][g("lnkcap_aspms") as usize & 3]
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
        o.line(
            2,
            format!(
                "LnkCtl: ASPM {}; RCB {} bytes, {}",
                ["Disabled", "L0s Enabled", "L1 Enabled", "L0s L1 Enabled"][g("lnkctl_aspmc") as usize & 3],
                if b.flag("lnkctl_rcb") { 128 } else { 64 },
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
        let below = e
            .and_then(|e| e.link_capable.zip(e.link_status))
            .is_some_and(|(c, s)| s.speed < c.speed || s.width < c.width);
        o.line(
            2,
            format!(
                "LnkSta: Speed {}, Width x{}{}",
                speed(g("lnksta_cls")),
                g("lnksta_nlw"),
                if below { " (downgraded)" } else { "" }
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
        let scale = [1.0, 0.1, 0.01, 0.001][g("sltcap_spls") as usize & 3];
        o.line(
            3,
            format!(
                "Slot #{}, PowerLimit {:.3}W; {}",
                g("sltcap_psn"),
                g("sltcap_splv") as f64 * scale,
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
        let ind = |v: u64| ["Unknown", "On", "Blink", "Off"][v as usize & 3];
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
    if port == PortType::ROOT_PORT || port == PortType::RC_EC {
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
        o.line(
            2,
            format!(
                "DevCap2: Completion Timeout: Range {:04b}, {} 10BitTagComp{} 10BitTagReq{} ExtFmt{} EETLPPrefix{} FRS{} TPHComp{} ExtTPHComp{} ARIFwd{}",
                g("devcap2_comp_tmout_ranges"),
                flags(&b, &[("TimeoutDis", "devcap2_comp_tmout_dis"), ("NROPrPrP", "devcap2_nroprprp"), ("LTR", "devcap2_ltr")]),
                pm(b.flag("devcap2_tag10_comp")),
                pm(b.flag("devcap2_tag10_req")),
                pm(b.flag("devcap2_ext_fmt")),
                pm(b.flag("devcap2_ee_prefix")),
                pm(b.flag("devcap2_frs")),
                pm(b.flag("devcap2_tph_comp")),
                pm(b.flag("devcap2_ext_tph_comp")),
                pm(b.flag("devcap2_ari")),
            ),
        );
        o.line(
            3,
            format!(
                "AtomicOpsCap: {}",
                flags(
                    &b,
                    &[
                        ("Routing", "devcap2_atomic_route"),
                        ("32bit", "devcap2_atomic_comp32"),
                        ("64bit", "devcap2_atomic_comp64"),
                        ("128bitCAS", "devcap2_atomic_comp128"),
                    ]
                )
            ),
        );
        o.line(
            2,
            format!(
                "DevCtl2: {}",
                flags(
                    &b,
                    &[
                        ("TimeoutDis", "devctl2_comp_tmout_dis"),
                        ("LTR", "devctl2_ltr_en"),
                        ("10BitTagReq", "devctl2_tag10_req_en"),
                        ("ARIFwd", "devctl2_ari"),
                        ("IDOReq", "devctl2_ido_req_en"),
                        ("IDOCompl", "devctl2_ido_cmp_en"),
                    ]
                )
            ),
        );
        o.line(
            3,
            format!(
                "AtomicOpsCtl: {}",
                flags(&b, &[("ReqEn", "devctl2_atomic_req"), ("EgressBlck", "devctl2_atomic_egress_block")])
            ),
        );
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
            let at = match e {
                marrow_pcie::CapError::Truncated { offset, .. } | marrow_pcie::CapError::BadField { offset, .. } => {
                    offset
                }
            };
            o.error(2, e, Some(at.into()));
            None
        }
    }
}
