//! marrow-pcie's register offsets, bits and capability IDs against Linux's
//! `<linux/pci_regs.h>`, compiled by `cc` into a name → value table.

use marrow_pcie::acs::{self, AcsBits};
use marrow_pcie::cap_id::{CapId, ExtCapId};
use marrow_pcie::express::{self as exp, PortType};
use marrow_pcie::header as h;
use std::collections::BTreeMap;

fn linux() -> BTreeMap<String, u64> {
    marrow_oracle::linux_pci_regs().into_iter().collect()
}

#[test]
fn constants_match_linux_pci_regs_h() {
    let linux = linux();
    let mut ours: Vec<(String, u64)> = vec![
        ("PCI_VENDOR_ID".into(), h::PCI_VENDOR_ID as u64),
        ("PCI_DEVICE_ID".into(), h::PCI_DEVICE_ID as u64),
        ("PCI_COMMAND".into(), h::PCI_COMMAND as u64),
        ("PCI_STATUS".into(), h::PCI_STATUS as u64),
        ("PCI_CLASS_REVISION".into(), h::PCI_CLASS_REVISION as u64),
        ("PCI_HEADER_TYPE".into(), h::PCI_HEADER_TYPE as u64),
        ("PCI_BASE_ADDRESS_0".into(), h::PCI_BASE_ADDRESS_0 as u64),
        ("PCI_PRIMARY_BUS".into(), h::PCI_PRIMARY_BUS as u64),
        ("PCI_SECONDARY_BUS".into(), h::PCI_SECONDARY_BUS as u64),
        ("PCI_SUBORDINATE_BUS".into(), h::PCI_SUBORDINATE_BUS as u64),
        ("PCI_SUBSYSTEM_VENDOR_ID".into(), h::PCI_SUBSYSTEM_VENDOR_ID as u64),
        ("PCI_SUBSYSTEM_ID".into(), h::PCI_SUBSYSTEM_ID as u64),
        ("PCI_CAPABILITY_LIST".into(), h::PCI_CAPABILITY_LIST as u64),
        ("PCI_STATUS_CAP_LIST".into(), h::PCI_STATUS_CAP_LIST.into()),
        ("PCI_HEADER_TYPE_NORMAL".into(), h::PCI_HEADER_TYPE_NORMAL.into()),
        ("PCI_HEADER_TYPE_BRIDGE".into(), h::PCI_HEADER_TYPE_BRIDGE.into()),
        ("PCI_HEADER_TYPE_CARDBUS".into(), h::PCI_HEADER_TYPE_CARDBUS.into()),
        ("PCI_BASE_ADDRESS_SPACE_IO".into(), h::PCI_BASE_ADDRESS_SPACE_IO.into()),
        ("PCI_BASE_ADDRESS_MEM_TYPE_MASK".into(), h::PCI_BASE_ADDRESS_MEM_TYPE_MASK.into()),
        ("PCI_BASE_ADDRESS_MEM_TYPE_64".into(), h::PCI_BASE_ADDRESS_MEM_TYPE_64.into()),
        ("PCI_BASE_ADDRESS_MEM_PREFETCH".into(), h::PCI_BASE_ADDRESS_MEM_PREFETCH.into()),
        ("PCI_EXP_FLAGS".into(), exp::PCI_EXP_FLAGS as u64),
        ("PCI_EXP_DEVCAP".into(), exp::PCI_EXP_DEVCAP as u64),
        ("PCI_EXP_DEVCTL".into(), exp::PCI_EXP_DEVCTL as u64),
        ("PCI_EXP_DEVSTA".into(), exp::PCI_EXP_DEVSTA as u64),
        ("PCI_EXP_LNKCAP".into(), exp::PCI_EXP_LNKCAP as u64),
        ("PCI_EXP_LNKCTL".into(), exp::PCI_EXP_LNKCTL as u64),
        ("PCI_EXP_LNKSTA".into(), exp::PCI_EXP_LNKSTA as u64),
        ("PCI_EXP_DEVCAP2".into(), exp::PCI_EXP_DEVCAP2 as u64),
        ("PCI_EXP_DEVCTL2".into(), exp::PCI_EXP_DEVCTL2 as u64),
        ("PCI_EXP_LNKCAP2".into(), exp::PCI_EXP_LNKCAP2 as u64),
        ("PCI_EXP_FLAGS_VERS".into(), exp::PCI_EXP_FLAGS_VERS.into()),
        ("PCI_EXP_FLAGS_TYPE".into(), exp::PCI_EXP_FLAGS_TYPE.into()),
        ("PCI_EXP_DEVCAP_PAYLOAD".into(), exp::PCI_EXP_DEVCAP_PAYLOAD.into()),
        ("PCI_EXP_DEVCTL_PAYLOAD".into(), exp::PCI_EXP_DEVCTL_PAYLOAD.into()),
        ("PCI_EXP_DEVCTL_READRQ".into(), exp::PCI_EXP_DEVCTL_READRQ.into()),
        ("PCI_EXP_LNKCAP_SLS".into(), exp::PCI_EXP_LNKCAP_SLS.into()),
        ("PCI_EXP_LNKCAP_MLW".into(), exp::PCI_EXP_LNKCAP_MLW.into()),
        ("PCI_EXP_LNKSTA_CLS".into(), exp::PCI_EXP_LNKSTA_CLS.into()),
        ("PCI_EXP_LNKSTA_NLW".into(), exp::PCI_EXP_LNKSTA_NLW.into()),
        ("PCI_EXP_DEVCAP2_ATOMIC_ROUTE".into(), exp::PCI_EXP_DEVCAP2_ATOMIC_ROUTE.into()),
        ("PCI_EXP_DEVCAP2_ATOMIC_COMP32".into(), exp::PCI_EXP_DEVCAP2_ATOMIC_COMP32.into()),
        ("PCI_EXP_DEVCAP2_ATOMIC_COMP64".into(), exp::PCI_EXP_DEVCAP2_ATOMIC_COMP64.into()),
        ("PCI_EXP_DEVCAP2_ATOMIC_COMP128".into(), exp::PCI_EXP_DEVCAP2_ATOMIC_COMP128.into()),
        ("PCI_EXP_DEVCTL2_ATOMIC_REQ".into(), exp::PCI_EXP_DEVCTL2_ATOMIC_REQ.into()),
        ("PCI_EXP_DEVCTL2_ATOMIC_EGRESS_BLOCK".into(), exp::PCI_EXP_DEVCTL2_ATOMIC_EGRESS_BLOCK.into()),
        ("PCI_EXP_TYPE_ENDPOINT".into(), PortType::ENDPOINT.0.into()),
        ("PCI_EXP_TYPE_LEG_END".into(), PortType::LEG_END.0.into()),
        ("PCI_EXP_TYPE_ROOT_PORT".into(), PortType::ROOT_PORT.0.into()),
        ("PCI_EXP_TYPE_UPSTREAM".into(), PortType::UPSTREAM.0.into()),
        ("PCI_EXP_TYPE_DOWNSTREAM".into(), PortType::DOWNSTREAM.0.into()),
        ("PCI_EXP_TYPE_PCI_BRIDGE".into(), PortType::PCI_BRIDGE.0.into()),
        ("PCI_EXP_TYPE_PCIE_BRIDGE".into(), PortType::PCIE_BRIDGE.0.into()),
        ("PCI_EXP_TYPE_RC_END".into(), PortType::RC_END.0.into()),
        ("PCI_EXP_TYPE_RC_EC".into(), PortType::RC_EC.0.into()),
        ("PCI_ACS_CAP".into(), acs::PCI_ACS_CAP as u64),
        ("PCI_ACS_CTRL".into(), acs::PCI_ACS_CTRL as u64),
        ("PCI_ACS_EGRESS_CTL_V".into(), acs::PCI_ACS_EGRESS_CTL_V as u64),
        ("PCI_ACS_SV".into(), AcsBits::SV.bits().into()),
        ("PCI_ACS_TB".into(), AcsBits::TB.bits().into()),
        ("PCI_ACS_RR".into(), AcsBits::RR.bits().into()),
        ("PCI_ACS_CR".into(), AcsBits::CR.bits().into()),
        ("PCI_ACS_UF".into(), AcsBits::UF.bits().into()),
        ("PCI_ACS_EC".into(), AcsBits::EC.bits().into()),
        ("PCI_ACS_DT".into(), AcsBits::DT.bits().into()),
    ];
    use marrow_pcie::aer::{self, Correctable, Uncorrectable};
    use marrow_pcie::msi;
    for (name, v) in [
        ("PCI_MSI_FLAGS", msi::PCI_MSI_FLAGS as u64),
        ("PCI_MSI_FLAGS_ENABLE", msi::PCI_MSI_FLAGS_ENABLE.into()),
        ("PCI_MSI_FLAGS_QMASK", msi::PCI_MSI_FLAGS_QMASK.into()),
        ("PCI_MSI_FLAGS_QSIZE", msi::PCI_MSI_FLAGS_QSIZE.into()),
        ("PCI_MSI_FLAGS_64BIT", msi::PCI_MSI_FLAGS_64BIT.into()),
        ("PCI_MSI_FLAGS_MASKBIT", msi::PCI_MSI_FLAGS_MASKBIT.into()),
        ("PCI_MSIX_FLAGS", msi::PCI_MSIX_FLAGS as u64),
        ("PCI_MSIX_FLAGS_QSIZE", msi::PCI_MSIX_FLAGS_QSIZE.into()),
        ("PCI_MSIX_FLAGS_MASKALL", msi::PCI_MSIX_FLAGS_MASKALL.into()),
        ("PCI_MSIX_FLAGS_ENABLE", msi::PCI_MSIX_FLAGS_ENABLE.into()),
        ("PCI_MSIX_TABLE", msi::PCI_MSIX_TABLE as u64),
        ("PCI_MSIX_PBA", msi::PCI_MSIX_PBA as u64),
        ("PCI_MSIX_TABLE_BIR", msi::PCI_MSIX_TABLE_BIR.into()),
        ("PCI_MSIX_TABLE_OFFSET", msi::PCI_MSIX_TABLE_OFFSET.into()),
        ("PCI_ERR_UNCOR_STATUS", aer::PCI_ERR_UNCOR_STATUS as u64),
        ("PCI_ERR_UNCOR_MASK", aer::PCI_ERR_UNCOR_MASK as u64),
        ("PCI_ERR_UNCOR_SEVER", aer::PCI_ERR_UNCOR_SEVER as u64),
        ("PCI_ERR_COR_STATUS", aer::PCI_ERR_COR_STATUS as u64),
        ("PCI_ERR_COR_MASK", aer::PCI_ERR_COR_MASK as u64),
        ("PCI_ERR_CAP", aer::PCI_ERR_CAP as u64),
        ("PCI_ERR_HEADER_LOG", aer::PCI_ERR_HEADER_LOG as u64),
        ("PCI_ERR_ROOT_COMMAND", aer::PCI_ERR_ROOT_COMMAND as u64),
        ("PCI_ERR_ROOT_STATUS", aer::PCI_ERR_ROOT_STATUS as u64),
        ("PCI_ERR_ROOT_ERR_SRC", aer::PCI_ERR_ROOT_ERR_SRC as u64),
        ("PCI_PM_PMC", marrow_pcie::pm::PCI_PM_PMC as u64),
        ("PCI_PM_CTRL", marrow_pcie::pm::PCI_PM_CTRL as u64),
        ("PCI_ATS_CAP", marrow_pcie::ats::PCI_ATS_CAP as u64),
        ("PCI_ATS_CTRL", marrow_pcie::ats::PCI_ATS_CTRL as u64),
        ("PCI_ATS_CTRL_ENABLE", marrow_pcie::ats::PCI_ATS_CTRL_ENABLE.into()),
        ("PCI_PRI_CTRL", marrow_pcie::ats::PCI_PRI_CTRL as u64),
        ("PCI_PRI_STATUS", marrow_pcie::ats::PCI_PRI_STATUS as u64),
        ("PCI_PRI_MAX_REQ", marrow_pcie::ats::PCI_PRI_MAX_REQ as u64),
        ("PCI_PRI_ALLOC_REQ", marrow_pcie::ats::PCI_PRI_ALLOC_REQ as u64),
        ("PCI_PASID_CAP", marrow_pcie::ats::PCI_PASID_CAP as u64),
        ("PCI_PASID_CTRL", marrow_pcie::ats::PCI_PASID_CTRL as u64),
        ("PCI_LTR_MAX_SNOOP_LAT", marrow_pcie::ltr_dsn::PCI_LTR_MAX_SNOOP_LAT as u64),
        ("PCI_LTR_MAX_NOSNOOP_LAT", marrow_pcie::ltr_dsn::PCI_LTR_MAX_NOSNOOP_LAT as u64),
    ] {
        ours.push((name.into(), v));
    }
    use marrow_pcie::{acs as a, dlf, dpc, msi as m, pl16, rebar, sriov, vendor};
    for (name, v) in [
        ("PCI_EXP_DPC_RP_PIO_STATUS", dpc::PCI_EXP_DPC_RP_PIO_STATUS as u64),
        ("PCI_EXP_DPC_RP_PIO_HEADER_LOG", dpc::PCI_EXP_DPC_RP_PIO_HEADER_LOG as u64),
        ("PCI_EXP_DPC_RP_PIO_IMPSPEC_LOG", dpc::PCI_EXP_DPC_RP_PIO_IMPSPEC_LOG as u64),
        ("PCI_EXP_DPC_RP_PIO_TLPPREFIX_LOG", dpc::PCI_EXP_DPC_RP_PIO_TLPPREFIX_LOG as u64),
        ("PCI_EXP_DPC_CAP", dpc::PCI_EXP_DPC_CAP as u64),
        ("PCI_EXP_DPC_CTL", dpc::PCI_EXP_DPC_CTL as u64),
        ("PCI_EXP_DPC_STATUS", dpc::PCI_EXP_DPC_STATUS as u64),
        ("PCI_EXP_DPC_SOURCE_ID", dpc::PCI_EXP_DPC_SOURCE_ID as u64),
        ("PCI_EXP_DPC_IRQ", dpc::PCI_EXP_DPC_IRQ.into()),
        ("PCI_EXP_DPC_CAP_RP_EXT", dpc::PCI_EXP_DPC_CAP_RP_EXT.into()),
        ("PCI_EXP_DPC_CAP_POISONED_TLP", dpc::PCI_EXP_DPC_CAP_POISONED_TLP.into()),
        ("PCI_EXP_DPC_CAP_SW_TRIGGER", dpc::PCI_EXP_DPC_CAP_SW_TRIGGER.into()),
        ("PCI_EXP_DPC_RP_PIO_LOG_SIZE", dpc::PCI_EXP_DPC_RP_PIO_LOG_SIZE.into()),
        ("PCI_EXP_DPC_CAP_DL_ACTIVE", dpc::PCI_EXP_DPC_CAP_DL_ACTIVE.into()),
        ("PCI_EXP_DPC_CTL_EN_FATAL", dpc::PCI_EXP_DPC_CTL_EN_FATAL.into()),
        ("PCI_EXP_DPC_CTL_EN_NONFATAL", dpc::PCI_EXP_DPC_CTL_EN_NONFATAL.into()),
        ("PCI_EXP_DPC_CTL_INT_EN", dpc::PCI_EXP_DPC_CTL_INT_EN.into()),
        ("PCI_EXP_DPC_STATUS_TRIGGER", dpc::PCI_EXP_DPC_STATUS_TRIGGER.into()),
        ("PCI_EXP_DPC_STATUS_TRIGGER_RSN", dpc::PCI_EXP_DPC_STATUS_TRIGGER_RSN.into()),
        ("PCI_EXP_DPC_STATUS_INTERRUPT", dpc::PCI_EXP_DPC_STATUS_INTERRUPT.into()),
        ("PCI_EXP_DPC_RP_BUSY", dpc::PCI_EXP_DPC_RP_BUSY.into()),
        ("PCI_EXP_DPC_STATUS_TRIGGER_RSN_EXT", dpc::PCI_EXP_DPC_STATUS_TRIGGER_RSN_EXT.into()),
        ("PCI_EXP_DPC_RP_PIO_FEP", dpc::PCI_EXP_DPC_RP_PIO_FEP.into()),
        ("PCI_SRIOV_CAP", sriov::PCI_SRIOV_CAP as u64),
        ("PCI_SRIOV_CTRL", sriov::PCI_SRIOV_CTRL as u64),
        ("PCI_SRIOV_STATUS", sriov::PCI_SRIOV_STATUS as u64),
        ("PCI_SRIOV_BAR", sriov::PCI_SRIOV_BAR as u64),
        ("PCI_SRIOV_NUM_BARS", sriov::PCI_SRIOV_NUM_BARS as u64),
        ("PCI_SRIOV_CAP_VFM", sriov::PCI_SRIOV_CAP_VFM.into()),
        ("PCI_SRIOV_CTRL_VFE", sriov::PCI_SRIOV_CTRL_VFE.into()),
        ("PCI_SRIOV_CTRL_VFM", sriov::PCI_SRIOV_CTRL_VFM.into()),
        ("PCI_SRIOV_CTRL_INTR", sriov::PCI_SRIOV_CTRL_INTR.into()),
        ("PCI_SRIOV_CTRL_MSE", sriov::PCI_SRIOV_CTRL_MSE.into()),
        ("PCI_SRIOV_CTRL_ARI", sriov::PCI_SRIOV_CTRL_ARI.into()),
        ("PCI_SRIOV_STATUS_VFM", sriov::PCI_SRIOV_STATUS_VFM.into()),
        ("PCI_EXT_CAP_SRIOV_SIZEOF", sriov::PCI_EXT_CAP_SRIOV_SIZEOF as u64),
        ("PCI_DLF_CAP", dlf::PCI_DLF_CAP as u64),
        ("PCI_DLF_EXCHANGE_ENABLE", dlf::PCI_DLF_EXCHANGE_ENABLE.into()),
        ("PCI_PL_16GT_LE_CTRL", pl16::PCI_PL_16GT_LE_CTRL as u64),
        ("PCI_PL_16GT_LE_CTRL_DSP_TX_PRESET_MASK", pl16::PCI_PL_16GT_LE_CTRL_DSP_TX_PRESET_MASK.into()),
        ("PCI_PL_16GT_LE_CTRL_USP_TX_PRESET_MASK", pl16::PCI_PL_16GT_LE_CTRL_USP_TX_PRESET_MASK.into()),
        ("PCI_PL_16GT_LE_CTRL_USP_TX_PRESET_SHIFT", pl16::PCI_PL_16GT_LE_CTRL_USP_TX_PRESET_SHIFT.into()),
        ("PCI_VNDR_HEADER", vendor::PCI_VNDR_HEADER as u64),
        ("PCI_VSEC_HDR_LEN_SHIFT", vendor::PCI_VSEC_HDR_LEN_SHIFT.into()),
        ("PCI_CAP_FLAGS", vendor::PCI_CAP_FLAGS as u64),
        ("PCI_ACS_EGRESS_BITS", a::PCI_ACS_EGRESS_BITS as u64),
        ("PCI_REBAR_CAP", rebar::PCI_REBAR_CAP as u64),
        ("PCI_REBAR_CTRL", rebar::PCI_REBAR_CTRL as u64),
        ("PCI_REBAR_CAP_SIZES", rebar::PCI_REBAR_CAP_SIZES.into()),
        ("PCI_REBAR_CTRL_BAR_IDX", rebar::PCI_REBAR_CTRL_BAR_IDX.into()),
        ("PCI_REBAR_CTRL_NBAR_MASK", rebar::PCI_REBAR_CTRL_NBAR_MASK.into()),
        ("PCI_REBAR_CTRL_NBAR_SHIFT", rebar::PCI_REBAR_CTRL_NBAR_SHIFT.into()),
        ("PCI_REBAR_CTRL_BAR_SHIFT", rebar::PCI_REBAR_CTRL_BAR_SHIFT.into()),
        ("PCI_MSI_ADDRESS_LO", m::PCI_MSI_ADDRESS_LO as u64),
    ] {
        ours.push((name.into(), v));
    }
    // The AER bit names are Linux's minus the PCI_ERR_UNC_/PCI_ERR_COR_ prefix.
    for (name, flag) in Uncorrectable::all().iter_names() {
        ours.push((format!("PCI_ERR_UNC_{name}"), flag.bits().into()));
    }
    for (name, flag) in Correctable::all().iter_names() {
        ours.push((format!("PCI_ERR_COR_{name}"), flag.bits().into()));
    }
    // Every capability ID this crate names that Linux also names.
    for (id, name, _) in CapId::KNOWN {
        ours.push((format!("PCI_CAP_ID_{name}"), id.0.into()));
    }
    for (id, name, _) in ExtCapId::KNOWN {
        ours.push((format!("PCI_EXT_CAP_ID_{name}"), id.0.into()));
    }
    let mut checked = std::collections::BTreeSet::new();
    let mut wrong = Vec::new();
    for (name, value) in &ours {
        match linux.get(name) {
            Some(&l) if l == *value => {
                checked.insert(name.clone());
            }
            Some(&l) => wrong.push(format!("{name}: ours {value:#x}, Linux {l:#x}")),
            // IDs Debian 12's header (Linux 6.1) does not name: NULL, and
            // the PCI-SIG's newer PL_32GT (0x2a), Lane Margining at the
            // Receiver (0x27), Device 3 (0x2f) and IDE (0x30).
            None if [
                "PCI_EXT_CAP_ID_NULL",
                "PCI_EXT_CAP_ID_PL_32GT",
                "PCI_EXT_CAP_ID_LMR",
                "PCI_EXT_CAP_ID_DEV3",
                "PCI_EXT_CAP_ID_IDE",
            ]
            .contains(&name.as_str()) => {}
            None => wrong.push(format!("{name}: not in the harness table")),
        }
    }
    // hw-specs/pcie.toml: every field citing `LX PCI_NAME` sits at Linux's offset.
    for layout in marrow_pcie::generated::pcie::ALL_LAYOUTS {
        for f in layout.fields {
            let Some(name) =
                f.cite.split("LX ").nth(1).filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            else {
                continue;
            };
            match linux.get(name) {
                Some(&l) if l == f.offset as u64 => {
                    checked.insert(name.to_string());
                }
                Some(&l) => {
                    wrong.push(format!("hw-specs {}.{} at {:#x}, Linux {name} = {l:#x}", layout.name, f.name, f.offset))
                }
                None => {
                    wrong.push(format!("hw-specs {}.{} cites {name}, not in the harness table", layout.name, f.name))
                }
            }
        }
    }
    // hw-specs/pcie.toml bit ranges against Linux's masks: the generated
    // accessors (which the DPC, SR-IOV, DLF, PL and ReBAR decoders read
    // through) extract exactly the bits Linux names.
    let bit_masks: &[(&str, &str, &str)] = &[
        ("pci_dpc_cap", "dpc_cap_irq", "PCI_EXP_DPC_IRQ"),
        ("pci_dpc_cap", "dpc_cap_rp_ext", "PCI_EXP_DPC_CAP_RP_EXT"),
        ("pci_dpc_cap", "dpc_cap_poison", "PCI_EXP_DPC_CAP_POISONED_TLP"),
        ("pci_dpc_cap", "dpc_cap_sw_trigger", "PCI_EXP_DPC_CAP_SW_TRIGGER"),
        ("pci_dpc_cap", "dpc_cap_rp_pio_log_size", "PCI_EXP_DPC_RP_PIO_LOG_SIZE"),
        ("pci_dpc_cap", "dpc_cap_dl_active", "PCI_EXP_DPC_CAP_DL_ACTIVE"),
        ("pci_dpc_cap", "dpc_ctl_int_en", "PCI_EXP_DPC_CTL_INT_EN"),
        ("pci_dpc_cap", "dpc_status_trigger", "PCI_EXP_DPC_STATUS_TRIGGER"),
        ("pci_dpc_cap", "dpc_status_trigger_rsn", "PCI_EXP_DPC_STATUS_TRIGGER_RSN"),
        ("pci_dpc_cap", "dpc_status_interrupt", "PCI_EXP_DPC_STATUS_INTERRUPT"),
        ("pci_dpc_cap", "dpc_status_rp_busy", "PCI_EXP_DPC_RP_BUSY"),
        ("pci_dpc_cap", "dpc_status_trigger_rsn_ext", "PCI_EXP_DPC_STATUS_TRIGGER_RSN_EXT"),
        ("pci_dpc_cap", "dpc_status_rp_pio_fep", "PCI_EXP_DPC_RP_PIO_FEP"),
        ("pci_sriov_cap", "sriov_cap_vfm", "PCI_SRIOV_CAP_VFM"),
        ("pci_sriov_cap", "sriov_ctrl_vfe", "PCI_SRIOV_CTRL_VFE"),
        ("pci_sriov_cap", "sriov_ctrl_vfm", "PCI_SRIOV_CTRL_VFM"),
        ("pci_sriov_cap", "sriov_ctrl_intr", "PCI_SRIOV_CTRL_INTR"),
        ("pci_sriov_cap", "sriov_ctrl_mse", "PCI_SRIOV_CTRL_MSE"),
        ("pci_sriov_cap", "sriov_ctrl_ari", "PCI_SRIOV_CTRL_ARI"),
        ("pci_sriov_cap", "sriov_status_vfm", "PCI_SRIOV_STATUS_VFM"),
        ("pci_dlf_cap", "dlf_cap_exchange_enable", "PCI_DLF_EXCHANGE_ENABLE"),
        ("pci_pl_lane_eq", "pl_lane_eq_dsp_tx_preset", "PCI_PL_16GT_LE_CTRL_DSP_TX_PRESET_MASK"),
        ("pci_pl_lane_eq", "pl_lane_eq_usp_tx_preset", "PCI_PL_16GT_LE_CTRL_USP_TX_PRESET_MASK"),
        ("pci_rebar_cap", "rebar_ctrl_bar_idx", "PCI_REBAR_CTRL_BAR_IDX"),
        ("pci_rebar_cap", "rebar_ctrl_nbar", "PCI_REBAR_CTRL_NBAR_MASK"),
        ("pci_acs_cap", "acs_cap_ec", "PCI_ACS_EC"),
        ("pci_msi_cap", "msi_flags_enable", "PCI_MSI_FLAGS_ENABLE"),
        ("pci_msi_cap", "msi_flags_qmask", "PCI_MSI_FLAGS_QMASK"),
        ("pci_msi_cap", "msi_flags_qsize", "PCI_MSI_FLAGS_QSIZE"),
        ("pci_msi_cap", "msi_flags_64bit", "PCI_MSI_FLAGS_64BIT"),
        ("pci_msi_cap", "msi_flags_maskbit", "PCI_MSI_FLAGS_MASKBIT"),
        ("pci_pm_cap", "pmc_version", "PCI_PM_CAP_VER_MASK"),
        ("pci_pm_cap", "pmc_pme_clock", "PCI_PM_CAP_PME_CLOCK"),
        ("pci_pm_cap", "pmc_dsi", "PCI_PM_CAP_DSI"),
        ("pci_pm_cap", "pmc_aux_current", "PCI_PM_CAP_AUX_POWER"),
        ("pci_pm_cap", "pmc_d1", "PCI_PM_CAP_D1"),
        ("pci_pm_cap", "pmc_d2", "PCI_PM_CAP_D2"),
        ("pci_pm_cap", "pmc_pme_support", "PCI_PM_CAP_PME_MASK"),
        ("pci_pm_cap", "pm_ctrl_state", "PCI_PM_CTRL_STATE_MASK"),
        ("pci_pm_cap", "pm_ctrl_no_soft_reset", "PCI_PM_CTRL_NO_SOFT_RESET"),
        ("pci_pm_cap", "pm_ctrl_pme_enable", "PCI_PM_CTRL_PME_ENABLE"),
        ("pci_pm_cap", "pm_ctrl_data_sel", "PCI_PM_CTRL_DATA_SEL_MASK"),
        ("pci_pm_cap", "pm_ctrl_data_scale", "PCI_PM_CTRL_DATA_SCALE_MASK"),
        ("pci_pm_cap", "pm_ctrl_pme_status", "PCI_PM_CTRL_PME_STATUS"),
        ("pci_ats_cap", "ats_cap_qdep", "PCI_ATS_CAP_QDEP(~0)"),
        ("pci_ats_cap", "ats_cap_page_aligned", "PCI_ATS_CAP_PAGE_ALIGNED"),
        ("pci_ats_cap", "ats_ctrl_stu", "PCI_ATS_CTRL_STU(~0)"),
        ("pci_ats_cap", "ats_ctrl_enable", "PCI_ATS_CTRL_ENABLE"),
        ("pci_pri_cap", "pri_ctrl_enable", "PCI_PRI_CTRL_ENABLE"),
        ("pci_pri_cap", "pri_ctrl_reset", "PCI_PRI_CTRL_RESET"),
        ("pci_pri_cap", "pri_status_rf", "PCI_PRI_STATUS_RF"),
        ("pci_pri_cap", "pri_status_uprgi", "PCI_PRI_STATUS_UPRGI"),
        ("pci_pri_cap", "pri_status_stopped", "PCI_PRI_STATUS_STOPPED"),
        ("pci_pri_cap", "pri_status_pasid", "PCI_PRI_STATUS_PASID"),
        ("pci_pasid_cap", "pasid_cap_exec", "PCI_PASID_CAP_EXEC"),
        ("pci_pasid_cap", "pasid_cap_priv", "PCI_PASID_CAP_PRIV"),
        ("pci_pasid_cap", "pasid_ctrl_enable", "PCI_PASID_CTRL_ENABLE"),
        ("pci_pasid_cap", "pasid_ctrl_exec", "PCI_PASID_CTRL_EXEC"),
        ("pci_pasid_cap", "pasid_ctrl_priv", "PCI_PASID_CTRL_PRIV"),
        ("pci_ltr_cap", "max_snoop_value", "PCI_LTR_VALUE_MASK"),
        ("pci_ltr_cap", "max_snoop_scale", "PCI_LTR_SCALE_MASK"),
        ("pci_ltr_cap", "max_nosnoop_value", "PCI_LTR_VALUE_MASK"),
        ("pci_ltr_cap", "max_nosnoop_scale", "PCI_LTR_SCALE_MASK"),
        ("pci_ea_cap", "ea_num_ent_count", "PCI_EA_NUM_ENT_MASK"),
        ("pci_ea_entry", "ea_es", "PCI_EA_ES"),
        ("pci_ea_entry", "ea_bei", "PCI_EA_BEI"),
        ("pci_ea_entry", "ea_pp", "PCI_EA_PP"),
        ("pci_ea_entry", "ea_sp", "PCI_EA_SP"),
        ("pci_ea_entry", "ea_writable", "PCI_EA_WRITABLE"),
        ("pci_ea_entry", "ea_enable", "PCI_EA_ENABLE"),
        ("pci_ea_entry", "ea_base_is_64", "PCI_EA_IS_64"),
        ("pci_ea_entry", "ea_max_offset_is_64", "PCI_EA_IS_64"),
        ("pci_type0_header", "rom_address_enable", "PCI_ROM_ADDRESS_ENABLE"),
        ("pci_type0_header", "rom_address_mask", "PCI_ROM_ADDRESS_MASK"),
        ("pci_type1_header", "rom_address_mask", "PCI_ROM_ADDRESS_MASK"),
        ("pcie_ext_cap_header", "ext_cap_id", "PCI_EXT_CAP_ID(~0)"),
        ("pcie_ext_cap_header", "ext_cap_ver", "PCI_EXT_CAP_VER(~0)"),
        ("pci_aer_cap", "err_cap_fep", "PCI_ERR_CAP_FEP(~0)"),
        ("pci_aer_cap", "err_cap_ecrc_gencap", "PCI_ERR_CAP_ECRC_GENC"),
        ("pci_aer_cap", "err_cap_ecrc_genen", "PCI_ERR_CAP_ECRC_GENE"),
        ("pci_aer_cap", "err_cap_ecrc_chkcap", "PCI_ERR_CAP_ECRC_CHKC"),
        ("pci_aer_cap", "err_cap_ecrc_chken", "PCI_ERR_CAP_ECRC_CHKE"),
    ];
    for (layout, bit, lx) in bit_masks {
        let l = marrow_pcie::generated::pcie::ALL_LAYOUTS.iter().find(|l| l.name == *layout).unwrap();
        let b = l
            .fields
            .iter()
            .flat_map(|f| f.bits.iter())
            .find(|b| b.name == *bit)
            .unwrap_or_else(|| panic!("{layout}.{bit}"));
        // A macro that extracts (`PCI_EXT_CAP_VER(~0)`) gives the field
        // shifted down; a mask name gives it in place.
        let width = (1u64 << (b.hi - b.lo + 1)) - 1;
        let mask = if lx.ends_with("(~0)") { width } else { width << b.lo };
        match linux.get(*lx) {
            Some(&v) if v == mask => {
                checked.insert(lx.to_string());
            }
            other => wrong.push(format!("hw-specs {layout}.{bit} is mask {mask:#x}, Linux {lx} = {other:x?}")),
        }
    }
    // Linux's PCI_REBAR_CAP_SIZES (0x00fffff0) is 1 MiB..128 GiB only; the
    // spec's field is bits 31:4 (to 128 TiB): ours must cover Linux's.
    let rebar = marrow_pcie::generated::pcie::pci_rebar_cap::LAYOUT
        .fields
        .iter()
        .flat_map(|f| f.bits.iter())
        .find(|b| b.name == "rebar_cap_sizes")
        .unwrap();
    assert_eq!((rebar.hi, rebar.lo), (31, 4));
    assert_eq!(linux["PCI_REBAR_CAP_SIZES"] & !(0xffff_fff0u64), 0);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Every value the harness exports was compared.
    let unchecked: Vec<&String> = linux.keys().filter(|k| !checked.contains(*k)).collect();
    assert!(unchecked.is_empty(), "harness entries without a Rust counterpart: {unchecked:?}");
}

#[test]
fn routing_ids_split_as_linux_pci_slot_and_pci_func() {
    use marrow_pcie::routing_id::RoutingId;
    for id in 0..=u16::MAX {
        let r = RoutingId(id);
        let (bus, slot, func) = marrow_oracle::linux_split_id(id);
        assert_eq!(
            (u32::from(r.bus()), u32::from(r.device()), u32::from(r.function())),
            (bus, slot, func),
            "routing ID {id:#06x}"
        );
        assert_eq!(r.to_string(), format!("{bus:02x}:{slot:02x}.{func}"), "routing ID {id:#06x}");
    }
}
