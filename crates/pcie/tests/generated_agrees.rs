//! The layouts generated from hw-specs/pcie.toml (zerocopy views) and the
//! hand-written decoders read the same values from every real dump. Both
//! are checked against outside oracles elsewhere (lspci, pci_regs.h); this
//! ties the spec file to the code that `decode --pcie` and `doctor` run.

mod common;
use marrow_pcie::cap_id::{CapId, ExtCapId};
use marrow_pcie::dump::parse_lspci_text;
use marrow_pcie::generated::pcie::{
    pci_acs_cap, pci_aer_cap, pci_ats_cap, pci_dsn_cap, pci_exp_cap, pci_ltr_cap, pci_msi_cap, pci_msix_cap,
    pci_pasid_cap, pci_pm_cap, pci_pri_cap, pci_rebar_cap, pci_type0_header, pci_type1_header,
};
use marrow_pcie::{Bar, Config};
use zerocopy::FromBytes;

fn all_functions() -> Vec<Vec<u8>> {
    let out: Vec<Vec<u8>> = common::text_dumps()
        .iter()
        .flat_map(|p| parse_lspci_text(&std::fs::read_to_string(p).unwrap()).unwrap())
        .map(|f| f.bytes)
        .collect();
    assert!(out.len() >= 74);
    out
}

#[test]
fn generated_views_equal_the_decoders() {
    let (mut exp_n, mut acs_n, mut aer_n, mut msix_n) = (0, 0, 0, 0);
    for bytes in all_functions() {
        let cfg = Config::new(&bytes).unwrap();
        if cfg.header_type() == 0 {
            let h = pci_type0_header::ref_from_prefix(&bytes).unwrap().0;
            assert_eq!((h.vendor_id(), h.device_id()), (cfg.vendor_id(), cfg.device_id()));
            assert_eq!(h.class_code(), cfg.class());
            assert_eq!(h.status_cap_list(), cfg.capability_pointer().is_some());
            if let Some(Bar::Mem32 { index: 0, address, prefetchable }) = cfg.bars().next() {
                assert_eq!(h.base_address_0() & !0xf, address);
                assert_eq!(h.bar_prefetch(), prefetchable);
            }
        } else if cfg.header_type() == 1 {
            let h = pci_type1_header::ref_from_prefix(&bytes).unwrap().0;
            assert_eq!(Some((h.primary_bus(), h.secondary_bus(), h.subordinate_bus())), cfg.bus_numbers());
        }
        if let (Some(cap), Some(e)) = (cfg.find_cap(CapId::EXP), cfg.express())
            && let Ok((v, _)) = pci_exp_cap::ref_from_prefix(&bytes[usize::from(cap.offset)..])
        {
            exp_n += 1;
            assert_eq!(v.flags_type(), e.port_type.0);
            assert_eq!(128u32 << v.devctl_readrq(), e.max_read_request);
            if let (Some(c), Some(s)) = (e.link_capable, e.link_status) {
                assert_eq!((v.lnkcap_sls(), v.lnkcap_mlw()), (c.speed.0, c.width));
                assert_eq!((v.lnksta_cls(), v.lnksta_nlw()), (s.speed.0, s.width));
            }
        }
        if let (Some(cap), Some(a)) = (cfg.find_ext_cap(ExtCapId::ACS), cfg.acs()) {
            let v = pci_acs_cap::ref_from_prefix(&bytes[usize::from(cap.offset)..]).unwrap().0;
            acs_n += 1;
            assert_eq!(v.acs_ctrl(), a.control_raw);
            assert_eq!(v.acs_ctrl_rr() || v.acs_ctrl_cr(), a.redirects_p2p());
        }
        if let (Some(cap), Some(a)) = (cfg.find_ext_cap(ExtCapId::ERR), cfg.aer()) {
            let v = pci_aer_cap::ref_from_prefix(&bytes[usize::from(cap.offset)..]).unwrap().0;
            aer_n += 1;
            assert_eq!(v.uncor_mask(), a.uncor_mask.bits());
            assert_eq!(v.uncor_sever(), a.uncor_severity.bits());
            assert_eq!(v.err_cap_fep(), a.first_error_pointer());
        }
        if let (Some(cap), Some(m)) = (cfg.find_cap(CapId::MSIX), cfg.msix()) {
            let v = pci_msix_cap::ref_from_prefix(&bytes[usize::from(cap.offset)..]).unwrap().0;
            msix_n += 1;
            assert_eq!(v.msix_qsize() + 1, m.table_size);
            assert_eq!((v.msix_table_offset() << 3, v.msix_table_bir()), (m.table_offset, m.table_bir));
            assert_eq!(v.msix_enable(), m.enabled);
        }
    }
    assert!(exp_n > 25 && acs_n >= 8 && aer_n >= 19 && msix_n >= 8, "{exp_n} {acs_n} {aer_n} {msix_n}");
}

/// The views for PM, ATS, PRI, PASID, LTR and DSN against their decoders.
#[test]
fn generated_small_cap_views_equal_the_decoders() {
    let mut seen = [0usize; 6];
    let at = |bytes: &[u8], off: u16| bytes[usize::from(off)..].to_vec();
    for bytes in all_functions() {
        let cfg = Config::new(&bytes).unwrap();
        if let Some(p) = cfg.power_management() {
            let b = at(&bytes, p.offset);
            let v = pci_pm_cap::ref_from_prefix(&b).unwrap().0;
            seen[0] += 1;
            assert_eq!(
                (v.pmc_version(), v.pmc_d1(), v.pmc_d2(), v.pmc_pme_support()),
                (p.version, p.d1, p.d2, p.pme_support)
            );
            assert_eq!(
                (v.pm_ctrl_state(), v.pm_ctrl_no_soft_reset(), v.pm_ctrl_pme_status()),
                (p.power_state, p.no_soft_reset, p.pme_status)
            );
        }
        if let Some(a) = cfg.ats() {
            let b = at(&bytes, a.offset);
            let v = pci_ats_cap::ref_from_prefix(&b).unwrap().0;
            seen[1] += 1;
            assert_eq!(
                (v.ats_cap_qdep(), v.ats_ctrl_stu(), v.ats_ctrl_enable()),
                (a.invalidate_queue_depth, a.stu, a.enabled)
            );
        }
        if let Some(p) = cfg.pri() {
            let b = at(&bytes, p.offset);
            let v = pci_pri_cap::ref_from_prefix(&b).unwrap().0;
            seen[2] += 1;
            assert_eq!(
                (v.pri_ctrl_enable(), v.pri_status_stopped(), v.pri_max_req(), v.pri_alloc_req()),
                (p.enabled, p.stopped, p.capacity, p.allocation)
            );
        }
        if let Some(p) = cfg.pasid() {
            let b = at(&bytes, p.offset);
            let v = pci_pasid_cap::ref_from_prefix(&b).unwrap().0;
            seen[3] += 1;
            assert_eq!(
                (v.pasid_cap_width(), v.pasid_cap_exec(), v.pasid_ctrl_enable()),
                (p.max_width, p.exec_supported, p.enabled)
            );
        }
        if let Some(t) = cfg.ltr() {
            let b = at(&bytes, t.offset);
            let v = pci_ltr_cap::ref_from_prefix(&b).unwrap().0;
            seen[4] += 1;
            assert_eq!((v.max_snoop_lat(), v.max_nosnoop_lat()), (t.max_snoop_raw, t.max_no_snoop_raw));
            assert_eq!(Some(u64::from(v.max_snoop_value()) << (5 * v.max_snoop_scale())), t.max_snoop_ns());
        }
        if let (Some(sn), Some(cap)) = (cfg.serial_number(), cfg.find_ext_cap(ExtCapId::DSN)) {
            let b = at(&bytes, cap.offset);
            let v = pci_dsn_cap::ref_from_prefix(&b).unwrap().0;
            seen[5] += 1;
            assert_eq!((u64::from(v.serial_upper()) << 32) | u64::from(v.serial_lower()), sn);
        }
    }
    assert!(seen.iter().all(|&n| n >= 1) && seen[0] > 20, "{seen:?}");
}

/// MSI (hand-written decoder) against `pci_msi_cap`; the Resizable BAR
/// decoder reads through `pci_rebar_entry`, checked here against the first
/// entry's `pci_rebar_cap` view and raw dwords.
#[test]
fn msi_and_rebar_views_equal_the_decoders() {
    let (mut msi_n, mut rebar_n) = (0, 0);
    for bytes in all_functions() {
        let cfg = Config::new(&bytes).unwrap();
        if let (Some(cap), Some(m)) = (cfg.find_cap(CapId::MSI), cfg.msi()) {
            let v = pci_msi_cap::ref_from_prefix(&bytes[usize::from(cap.offset)..]).unwrap().0;
            msi_n += 1;
            assert_eq!(
                (v.msi_flags_enable(), 1u16 << v.msi_flags_qmask(), 1u16 << v.msi_flags_qsize()),
                (m.enabled, m.vectors_capable, m.vectors_enabled)
            );
            assert_eq!((v.msi_flags_64bit(), v.msi_flags_maskbit()), (m.addr_64bit, m.per_vector_mask));
        }
        if let Some(cap) = cfg.find_ext_cap(ExtCapId::REBAR) {
            let at = usize::from(cap.offset);
            let v = pci_rebar_cap::ref_from_prefix(&bytes[at..]).unwrap().0;
            let r: Vec<_> = cfg.resizable_bars().collect();
            rebar_n += 1;
            assert_eq!(r.len(), usize::from(v.rebar_ctrl_nbar()).clamp(1, 6));
            assert_eq!((r[0].bar_index, r[0].supported_mask), (v.rebar_ctrl_bar_idx(), v.rebar_cap_sizes()));
            for (i, e) in r.iter().enumerate() {
                let raw_cap = cfg.read_u32(at + 4 + 8 * i).unwrap();
                let raw_ctl = cfg.read_u32(at + 8 + 8 * i).unwrap();
                assert_eq!((e.supported_mask, u32::from(e.bar_index)), (raw_cap >> 4, raw_ctl & 7));
                assert_eq!(e.current, 1u64 << (((raw_ctl >> 8) & 0x3f) + 20));
            }
        }
    }
    assert!(msi_n >= 20 && rebar_n >= 1, "{msi_n} {rebar_n}");
}
