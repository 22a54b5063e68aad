//! Capabilities are encodable through the layouts generated from
//! hw-specs/pcie.toml: a config space built with their setters in a buffer
//! poisoned with 0xA5 has the golden bytes the PCIe spec gives, leaves every
//! other byte alone, and decodes back through the hand-written decoders.

use marrow_pcie::Config;
use marrow_pcie::generated::pcie::{pci_acs_cap, pci_exp_cap, pci_type0_header, pcie_ext_cap_header};
use marrow_pcie::walk::WalkError;
use zerocopy::FromBytes;

#[test]
fn built_config_space_has_golden_bytes_and_decodes() {
    let mut b = vec![0xA5u8; 4096];
    {
        let h = pci_type0_header::mut_from_prefix(&mut b).unwrap().0;
        h.set_vendor_id(0x15b3).set_device_id(0x101d).set_status(0).set_status_cap_list(true);
        h.set_header_type(0).set_capability_list(0x40);
    }
    {
        let e = pci_exp_cap::mut_from_prefix(&mut b[0x40..]).unwrap().0;
        e.set_cap_id(0x10).set_cap_next(0).set_flags(0);
        e.set_flags_vers(2).unwrap().set_flags_type(0).unwrap();
        e.set_lnkcap(0).set_lnkcap_sls(5).unwrap().set_lnkcap_mlw(16).unwrap().set_lnkcap_port(3);
        e.set_lnksta(0).set_lnksta_cls(4).unwrap().set_lnksta_nlw(8).unwrap();
        // The 6-bit width field refuses 64 rather than truncating it.
        assert!(e.set_lnkcap_mlw(0x40).is_err());
    }
    {
        let x = pcie_ext_cap_header::mut_from_prefix(&mut b[0x100..]).unwrap().0;
        x.set_ext_cap_header(0).set_ext_cap_id(0x000d).set_ext_cap_ver(1).unwrap().set_ext_cap_next(0).unwrap();
        let a = pci_acs_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0;
        a.set_acs_cap(0).set_acs_cap_sv(true).set_acs_cap_rr(true).set_acs_cap_cr(true);
        a.set_acs_ctrl(0).set_acs_ctrl_rr(true).set_acs_ctrl_cr(true);
    }
    // Golden bytes, little endian, from PCIe 6.0 §7.6.3 and §7.7.8:
    // header 0x0001000d (ID 0x000d, version 1, next 0), cap 0x000d (SV|RR|CR), ctl 0x000c (RR|CR).
    assert_eq!(&b[0x100..0x108], &[0x0d, 0x00, 0x01, 0x00, 0x0d, 0x00, 0x0c, 0x00]);
    // LnkCap at 0x4c: speed 5, width 16 (bits 9:4), port 3 (bits 31:24) = 0x03000105.
    assert_eq!(&b[0x4c..0x50], &[0x05, 0x01, 0x00, 0x03]);
    assert_eq!(&b[0x00..0x02], &[0xb3, 0x15]);
    // Untouched bytes keep the poison.
    assert_eq!(b[0x108], 0xA5);
    assert_eq!(b[0x42 + 60], 0xA5);

    let cfg = Config::new(&b).unwrap();
    let e = cfg.express().unwrap();
    assert_eq!((e.version, e.port_number), (2, Some(3)));
    let (c, s) = (e.link_capable.unwrap(), e.link_status.unwrap());
    assert_eq!((c.speed.gts(), c.width, s.speed.gts(), s.width), (Some("32GT/s"), 16, Some("16GT/s"), 8));
    let acs = cfg.acs().unwrap();
    assert!(acs.redirects_p2p());
    assert_eq!(acs.control_raw, 0x000c);
    // The poisoned next pointer of the PCIe capability was set to 0: one capability.
    let caps: Vec<Result<_, WalkError>> = cfg.caps().collect();
    assert_eq!(caps.len(), 1);
}

// ---------------------------------------------------------------------------
// Every other capability with a layout in hw-specs/pcie.toml: built with the
// generated setters into 0xA5-poisoned config spaces, compared with golden
// bytes worked out by hand from the PCIe 6.0 register figures (the section
// is named at each), then decoded back through marrow-pcie's decoders.

use marrow_pcie::Bar;
use marrow_pcie::cap_id::ExtCapId;
use marrow_pcie::generated::pcie::{
    pci_aer_cap, pci_ats_cap, pci_dlf_cap, pci_dpc_cap, pci_dpc_rp_pio, pci_dsn_cap, pci_l1ss_cap, pci_ltr_cap,
    pci_msi_cap, pci_msix_cap, pci_pasid_cap, pci_pl_lane_eq, pci_pl16_cap, pci_pl32_cap, pci_pm_cap, pci_pri_cap,
    pci_rebar_cap, pci_rebar_entry, pci_secpci_cap, pci_secpci_lane_eq, pci_sriov_cap, pci_vndr_cap, pci_vsec_cap,
};
use marrow_pcie::regs::LaneCount;

/// A poisoned 4 KiB space: type 0 header with the capability list at
/// `first_cap`, nothing else set.
fn poisoned(first_cap: u8) -> Vec<u8> {
    let mut b = vec![0xA5u8; 4096];
    let h = pci_type0_header::mut_from_prefix(&mut b).unwrap().0;
    h.set_vendor_id(0x15b3).set_device_id(0x1021).set_status(0).set_status_cap_list(true);
    h.set_header_type(0).set_capability_list(first_cap);
    b
}

/// A PCI Express capability at 0x40 (Root Port, x`width` at 16 GT/s), last in the list.
fn with_express(width: u8) -> Vec<u8> {
    let mut b = poisoned(0x40);
    let e = pci_exp_cap::mut_from_prefix(&mut b[0x40..]).unwrap().0;
    e.set_cap_id(0x10).set_cap_next(0).set_flags(0);
    e.set_flags_vers(2).unwrap().set_flags_type(4).unwrap();
    e.set_lnkcap(0).set_lnkcap_sls(4).unwrap().set_lnkcap_mlw(width).unwrap();
    e.set_lnksta(0).set_lnksta_cls(4).unwrap().set_lnksta_nlw(width).unwrap();
    b
}

fn ext(b: &mut [u8], at: usize, id: u16, next: u16) {
    let x = pcie_ext_cap_header::mut_from_prefix(&mut b[at..]).unwrap().0;
    x.set_ext_cap_header(0).set_ext_cap_id(id).set_ext_cap_ver(1).unwrap().set_ext_cap_next(next).unwrap();
}

#[test]
fn pm_msi_msix_and_vendor_caps_golden() {
    let mut b = poisoned(0x40);
    {
        let p = pci_pm_cap::mut_from_prefix(&mut b[0x40..]).unwrap().0;
        p.set_cap_id(0x01).set_cap_next(0x50).set_pmc(0);
        p.set_pmc_version(3).unwrap().set_pmc_d1(true).set_pmc_pme_support(0b11001).unwrap();
        p.set_pm_ctrl(0).set_pm_ctrl_state(3).unwrap().set_pm_ctrl_no_soft_reset(true).set_pm_ctrl_pme_status(true);
        let m = pci_msi_cap::mut_from_prefix(&mut b[0x50..]).unwrap().0;
        m.set_cap_id(0x05).set_cap_next(0x60).set_msi_flags(0).set_msi_flags_enable(true);
        m.set_msi_flags_qmask(3)
            .unwrap()
            .set_msi_flags_qsize(1)
            .unwrap()
            .set_msi_flags_64bit(true)
            .set_msi_flags_maskbit(true);
        m.set_msi_address_lo(0xfee0_0000);
        let x = pci_msix_cap::mut_from_prefix(&mut b[0x60..]).unwrap().0;
        x.set_cap_id(0x11).set_cap_next(0x70).set_msix_flags(0).set_msix_qsize(63).unwrap().set_msix_enable(true);
        x.set_msix_table(0).set_msix_table_bir(0).unwrap().set_msix_table_offset(0x2000 >> 3).unwrap();
        x.set_msix_pba(0).set_msix_pba_bir(4).unwrap().set_msix_pba_offset(0x3000 >> 3).unwrap();
        let v = pci_vndr_cap::mut_from_prefix(&mut b[0x70..]).unwrap().0;
        v.set_cap_id(0x09).set_cap_next(0).set_vndr_len(8);
        b[0x73..0x78].copy_from_slice(b"mrrw!");
    }
    // PM 1.2 §3.2.3/§3.2.4: PMC 0xca03 (v3, D1, PME from D0/D3hot/D3cold), PMCSR 0x800b.
    assert_eq!(&b[0x40..0x46], &[0x01, 0x50, 0x03, 0xca, 0x0b, 0x80]);
    assert_eq!(&b[0x46..0x48], &[0xA5, 0xA5], "bridge extensions and data untouched");
    // §7.7.1.2: Message Control 0x0197 (enable, 8 requested, 2 granted, 64-bit, maskable).
    assert_eq!(&b[0x50..0x58], &[0x05, 0x60, 0x97, 0x01, 0x00, 0x00, 0xe0, 0xfe]);
    // §7.7.2: control 0x803f (64 vectors, enabled), table BAR0 +0x2000, PBA BAR4 +0x3000.
    assert_eq!(&b[0x60..0x6c], &[0x11, 0x70, 0x3f, 0x80, 0x00, 0x20, 0x00, 0x00, 0x04, 0x30, 0x00, 0x00]);
    assert_eq!(&b[0x70..0x73], &[0x09, 0x00, 0x08]);
    assert_eq!(b[0x78], 0xA5);

    let cfg = Config::new(&b).unwrap();
    let p = cfg.power_management().unwrap();
    assert_eq!(
        (p.version, p.d1, p.d2, p.pme_support, p.power_state, p.no_soft_reset, p.pme_status),
        (3, true, false, 0b11001, 3, true, true)
    );
    let m = cfg.msi().unwrap();
    assert_eq!(
        (m.enabled, m.vectors_capable, m.vectors_enabled, m.addr_64bit, m.per_vector_mask),
        (true, 8, 2, true, true)
    );
    let x = cfg.msix().unwrap();
    assert_eq!(
        (x.enabled, x.function_masked, x.table_size, x.table_bir, x.table_offset, x.pba_bir, x.pba_offset),
        (true, false, 64, 0, 0x2000, 4, 0x3000)
    );
    let v: Vec<_> = cfg.vendor_caps().collect();
    assert_eq!(v.len(), 1);
    let v = v[0].unwrap();
    assert_eq!((v.offset, v.len, v.body), (0x70, 8, Ok(&b"mrrw!"[..])));
    assert_eq!(cfg.caps().count(), 4);
}

#[test]
fn aer_ats_pri_pasid_ltr_dsn_l1ss_golden() {
    let mut b = with_express(4);
    ext(&mut b, 0x100, 0x0001, 0x140);
    {
        let a = pci_aer_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0;
        a.set_ext_cap_header(0x1402_0001);
        a.set_uncor_status(0x0010_1000).set_uncor_mask(0).set_uncor_sever(0x0006_2030);
        a.set_cor_status(0x40).set_cor_mask(0x2000);
        a.set_err_cap(0).set_err_cap_fep(20).unwrap().set_err_cap_ecrc_gencap(true).set_err_cap_ecrc_chkcap(true);
        a.set_header_log(&[0x01, 0x00, 0x00, 0x4a, 0x04, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]);
    }
    ext(&mut b, 0x140, 0x000f, 0x148);
    pci_ats_cap::mut_from_prefix(&mut b[0x140..])
        .unwrap()
        .0
        .set_ats_cap(0)
        .set_ats_cap_page_aligned(true)
        .set_ats_ctrl(0)
        .set_ats_ctrl_enable(true);
    ext(&mut b, 0x148, 0x0013, 0x158);
    {
        let p = pci_pri_cap::mut_from_prefix(&mut b[0x148..]).unwrap().0;
        p.set_pri_ctrl(0)
            .set_pri_ctrl_enable(true)
            .set_pri_status(0)
            .set_pri_status_stopped(true)
            .set_pri_status_pasid(true);
        p.set_pri_max_req(0x200).set_pri_alloc_req(0x20);
    }
    ext(&mut b, 0x158, 0x001b, 0x160);
    {
        let p = pci_pasid_cap::mut_from_prefix(&mut b[0x158..]).unwrap().0;
        p.set_pasid_cap(0).set_pasid_cap_exec(true).set_pasid_cap_priv(true).set_pasid_cap_width(20).unwrap();
        p.set_pasid_ctrl(0).set_pasid_ctrl_enable(true);
    }
    ext(&mut b, 0x160, 0x0018, 0x168);
    {
        let l = pci_ltr_cap::mut_from_prefix(&mut b[0x160..]).unwrap().0;
        l.set_max_snoop_lat(0).set_max_snoop_value(3).unwrap().set_max_snoop_scale(2).unwrap();
        l.set_max_nosnoop_lat(0).set_max_nosnoop_value(1).unwrap().set_max_nosnoop_scale(5).unwrap();
    }
    ext(&mut b, 0x168, 0x0003, 0x174);
    pci_dsn_cap::mut_from_prefix(&mut b[0x168..])
        .unwrap()
        .0
        .set_serial_lower(0x3322_1100)
        .set_serial_upper(0x7766_5544);
    ext(&mut b, 0x174, 0x001e, 0);
    {
        let l = pci_l1ss_cap::mut_from_prefix(&mut b[0x174..]).unwrap().0;
        l.set_l1ss_cap(0).set_l1ss_cap_pcipm_l1_2(true).set_l1ss_cap_aspm_l1_1(true).set_l1ss_cap_l1_pm_ss(true);
        l.set_l1ss_ctl1(0).set_l1ss_ctl2(0);
    }
    // §7.8.4: header (ID 1, v2, next 0x140), UE status UnsupReq|PoisonedTLP,
    // severity DLP|SDES|FCP|RxOF|MalfTLP, CE BadTLP, CE mask AdvNonFatal,
    // capabilities FEP 20 + ECRC generation/check capable.
    assert_eq!(
        &b[0x100..0x11c],
        &[
            0x01, 0x00, 0x02, 0x14, 0x00, 0x10, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x30, 0x20, 0x06, 0x00, 0x40, 0x00,
            0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0xb4, 0x00, 0x00, 0x00
        ]
    );
    assert_eq!(&b[0x12c..0x130], &[0xA5; 4], "root registers untouched");
    // §10.5.1: ATS cap 0x0020 (page aligned), control 0x8000 (enable).
    assert_eq!(&b[0x140..0x148], &[0x0f, 0x00, 0x81, 0x14, 0x20, 0x00, 0x00, 0x80]);
    // §10.5.2: PRI control 0x0001, status 0x8100, capacity 0x200, allocation 0x20.
    assert_eq!(&b[0x148..0x158], &[0x13, 0x00, 0x81, 0x15, 0x01, 0x00, 0x00, 0x81, 0x00, 0x02, 0, 0, 0x20, 0, 0, 0]);
    // §7.8.8: PASID cap 0x1406 (exec, priv, 20 bits), control 0x0001.
    assert_eq!(&b[0x158..0x160], &[0x1b, 0x00, 0x01, 0x16, 0x06, 0x14, 0x01, 0x00]);
    // §7.8.2: snoop 3 × 1024 ns (0x0803), no-snoop 1 × 2^25 ns (0x1401).
    assert_eq!(&b[0x160..0x168], &[0x18, 0x00, 0x81, 0x16, 0x03, 0x08, 0x01, 0x14]);
    // §7.9.3: serial 0x7766554433221100, lower dword first.
    assert_eq!(&b[0x168..0x174], &[0x03, 0x00, 0x41, 0x17, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]);
    // §7.8.3: L1SS capabilities 0x19 (PCI-PM L1.2, ASPM L1.1, L1 PM substates).
    assert_eq!(&b[0x174..0x17c], &[0x1e, 0x00, 0x01, 0x00, 0x19, 0x00, 0x00, 0x00]);
    assert_eq!(b[0x184], 0xA5);

    let cfg = Config::new(&b).unwrap();
    assert_eq!(
        cfg.ext_caps().map(|c| c.unwrap().id).collect::<Vec<_>>(),
        [ExtCapId::ERR, ExtCapId::ATS, ExtCapId::PRI, ExtCapId::PASID, ExtCapId::LTR, ExtCapId::DSN, ExtCapId::L1SS]
    );
    let a = cfg.aer().unwrap();
    assert_eq!(
        (a.version, a.first_error_pointer(), a.uncor_status.bits(), a.cor_mask.bits()),
        (2, 20, 0x0010_1000, 0x2000)
    );
    assert_eq!(a.header_log, [0x4a00_0001, 0x0100_0004, 0, 0]);
    let t = cfg.ats().unwrap();
    assert_eq!((t.enabled, t.page_aligned_request, t.invalidate_queue_depth, t.stu), (true, true, 0, 0));
    let p = cfg.pri().unwrap();
    assert_eq!(
        (p.enabled, p.stopped, p.prg_response_pasid_required, p.capacity, p.allocation),
        (true, true, true, 0x200, 0x20)
    );
    let p = cfg.pasid().unwrap();
    assert_eq!((p.exec_supported, p.priv_supported, p.max_width, p.enabled), (true, true, 20, true));
    let l = cfg.ltr().unwrap();
    assert_eq!((l.max_snoop_ns(), l.max_no_snoop_ns()), (Some(3072), Some(1 << 25)));
    assert_eq!(cfg.serial_number(), Some(0x7766_5544_3322_1100));
    let l = pci_l1ss_cap::ref_from_prefix(&b[0x174..]).unwrap().0;
    assert!(l.l1ss_cap_pcipm_l1_2() && !l.l1ss_cap_pcipm_l1_1() && l.l1ss_cap_aspm_l1_1() && l.l1ss_cap_l1_pm_ss());
}

#[test]
fn dpc_with_rp_pio_golden() {
    let mut b = with_express(4);
    ext(&mut b, 0x100, 0x001d, 0);
    {
        let d = pci_dpc_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0;
        d.set_dpc_cap(0).set_dpc_cap_irq(3).unwrap().set_dpc_cap_rp_ext(true).set_dpc_cap_poison(true);
        d.set_dpc_cap_sw_trigger(true).set_dpc_cap_rp_pio_log_size(6).unwrap().set_dpc_cap_dl_active(true);
        d.set_dpc_ctl(0).set_dpc_ctl_en(2).unwrap().set_dpc_ctl_cpl(true).set_dpc_ctl_int_en(true);
        d.set_dpc_status(0).set_dpc_status_trigger(true).set_dpc_status_trigger_rsn(3).unwrap();
        d.set_dpc_status_trigger_rsn_ext(1).unwrap().set_dpc_status_rp_pio_fep(18).unwrap();
        d.set_dpc_source_id(0x0300);
        let r = pci_dpc_rp_pio::mut_from_prefix(&mut b[0x100..]).unwrap().0;
        r.set_rp_pio_status(0).set_rp_pio_mem_cto(true).set_rp_pio_mask(0).set_rp_pio_severity(0x0007_0707);
        r.set_rp_pio_syserror(0).set_rp_pio_exception(0);
        r.set_rp_pio_header_log(&[0x01, 0x00, 0x00, 0x20, 0x0f, 0x2a, 0xe0, 0x00, 0x00, 0x00, 0x00, 0xf0, 0, 0, 0, 0]);
        r.set_rp_pio_impspec_log(0xdead_beef);
    }
    // RP PIO Log Size 6: header (4) + ImpSpec (1) + one TLP prefix dword at +0x34.
    b[0x134..0x138].copy_from_slice(&0x1234_5678u32.to_le_bytes());
    // §7.9.14.2-5: cap 0x16e3 (IRQ 3, RPExt, PoisonedTLP, SwTrigger, log 6,
    // DL_Active), ctl 0x000e (trigger on NONFATAL/FATAL, Cmpl, INT), status
    // 0x1227 (triggered, reason 3/ext 1 = software, RP PIO FEP 18), source 03:00.0.
    assert_eq!(&b[0x100..0x10c], &[0x1d, 0x00, 0x01, 0x00, 0xe3, 0x16, 0x0e, 0x00, 0x27, 0x12, 0x00, 0x03]);
    // §7.9.14.6: RP PIO status bit 18 (memory request completion timeout).
    assert_eq!(&b[0x10c..0x110], &[0x00, 0x00, 0x04, 0x00]);
    assert_eq!(&b[0x130..0x134], &[0xef, 0xbe, 0xad, 0xde]);
    assert_eq!(b[0x138], 0xA5);

    let cfg = Config::new(&b).unwrap();
    let d = cfg.dpc().unwrap().unwrap();
    assert_eq!((d.interrupt_message, d.rp_extensions, d.rp_pio_log_size, d.trigger_enable), (3, true, 6, 2));
    assert_eq!(
        (d.triggered, d.trigger_reason, d.trigger_reason_ext, d.rp_pio_first_error, d.source_id),
        (true, 3, 1, 18, 0x0300)
    );
    assert_eq!(d.trigger_reason_text(), "DPC software trigger");
    let r = d.rp_pio.unwrap();
    assert_eq!((r.status, r.severity, r.impspec_log, r.prefix_dwords), (1 << 18, 0x0007_0707, Some(0xdead_beef), 1));
    assert_eq!(r.header_log, [0x2000_0001, 0x00e0_2a0f, 0xf000_0000, 0]);
    assert_eq!(r.tlp_prefix_log, [0x1234_5678, 0, 0, 0]);

    // A log size below the 4-dword header log is refused, not read.
    pci_dpc_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0.set_dpc_cap_rp_pio_log_size(2).unwrap();
    let e = Config::new(&b).unwrap().dpc().unwrap().unwrap_err();
    assert_eq!(e, marrow_pcie::CapError::BadField { offset: 0x100, field: "RP PIO Log Size", value: 2 });
    // In Flit Mode (PCI Express Flags bit 15) capability bit 13 is log size
    // bit 4, as Linux's dpc.c reads it, and the RP PIO log is not decoded.
    {
        let d = pci_dpc_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0;
        d.set_dpc_cap_rp_pio_log_size(2).unwrap().set_dpc_cap_rp_pio_log_size4(true);
    }
    assert_eq!(&b[0x104..0x106], &[0xe3, 0x32]);
    pci_exp_cap::mut_from_prefix(&mut b[0x40..]).unwrap().0.set_flags(0x8042);
    let d = Config::new(&b).unwrap().dpc().unwrap().unwrap();
    assert_eq!((d.flit_mode, d.rp_pio_log_size, d.rp_pio), (true, 18, None));
    pci_exp_cap::mut_from_prefix(&mut b[0x40..]).unwrap().0.set_flags(0x0042);
    pci_dpc_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0.set_dpc_cap_rp_pio_log_size4(false);
    // Without RP Extensions (a switch downstream port) only the first 12 bytes count.
    pci_dpc_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0.set_dpc_cap_rp_ext(false);
    assert_eq!(Config::new(&b).unwrap().dpc().unwrap().unwrap().rp_pio, None);
}

#[test]
fn sriov_golden() {
    let mut b = with_express(4);
    ext(&mut b, 0x100, 0x0010, 0);
    {
        let s = pci_sriov_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0;
        s.set_sriov_cap(0).set_sriov_cap_vfm(true).set_sriov_cap_intr(1).unwrap();
        s.set_sriov_ctrl(0).set_sriov_ctrl_vfe(true).set_sriov_ctrl_mse(true).set_sriov_ctrl_ari(true);
        s.set_sriov_status(0).set_sriov_initial_vf(8).set_sriov_total_vf(16).set_sriov_num_vf(4).set_sriov_func_link(0);
        s.set_sriov_vf_offset(2).set_sriov_vf_stride(1).set_sriov_vf_did(0x101e);
        s.set_sriov_sup_pgsize(0x553).set_sriov_sys_pgsize(1);
        let mut bars = [0u8; 24];
        bars[0..8].copy_from_slice(&[0x0c, 0x00, 0x00, 0xe0, 0x38, 0x00, 0x00, 0x00]);
        s.set_sriov_bar(&bars).set_sriov_vfm(0);
    }
    // §9.3.3: caps 0x00200001 (VF migration, interrupt 1), control 0x0019
    // (VF Enable, VF MSE, ARI hierarchy), InitialVFs 8, TotalVFs 16, NumVFs 4,
    // link 0, (reserved byte untouched), offset 2, stride 1, (reserved
    // word untouched), VF device 0x101e, page sizes 0x553 / 0x1.
    assert_eq!(
        &b[0x100..0x124],
        &[
            0x10, 0x00, 0x01, 0x00, 0x01, 0x00, 0x20, 0x00, 0x19, 0x00, 0x00, 0x00, 0x08, 0x00, 0x10, 0x00, 0x04, 0x00,
            0x00, 0xA5, 0x02, 0x00, 0x01, 0x00, 0xA5, 0xA5, 0x1e, 0x10, 0x53, 0x05, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00
        ]
    );
    assert_eq!(&b[0x124..0x12c], &[0x0c, 0x00, 0x00, 0xe0, 0x38, 0x00, 0x00, 0x00]);
    assert_eq!(b[0x140], 0xA5);

    let s = Config::new(&b).unwrap().sriov().unwrap().unwrap();
    assert_eq!(
        (s.vf_enable, s.vf_memory_space_enable, s.ari_capable_hierarchy, s.vf_migration_enable),
        (true, true, true, false)
    );
    assert_eq!(
        (s.initial_vfs, s.total_vfs, s.num_vfs, s.first_vf_offset, s.vf_stride, s.vf_device_id),
        (8, 16, 4, 2, 1, 0x101e)
    );
    assert_eq!((s.vf_migration_capable, s.migration_interrupt), (true, 1));
    assert_eq!(s.vf_bars[0], Bar::Mem64 { index: 0, address: 0x38_e000_0000, prefetchable: true });
    assert_eq!(s.vf_bars.len(), 5);
    // VF 3 of PF 03:00.0 is at routing ID 0x300 + 2 + 2·1.
    assert_eq!((s.vf_routing_id(0x0300, 3), s.vf_routing_id(0x0300, 17)), (Some(0x0304), None));
    assert_eq!((s.system_page_bytes(), s.problems().len()), (Some(4096), 0));
}

#[test]
fn secondary_pcie_dlf_pl16_pl32_golden() {
    let mut b = with_express(4);
    ext(&mut b, 0x100, 0x0019, 0x120);
    {
        let s = pci_secpci_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0;
        s.set_lnkctl3(0).set_lnkctl3_perform_eq(true).set_lnkctl3_eq_irq_en(true).set_lane_err_sta(0b101);
        let l = pci_secpci_lane_eq::mut_from_prefix(&mut b[0x10c..]).unwrap().0;
        l.set_lane_eq_ctl(0).set_lane_eq_dsp_tx_preset(4).unwrap().set_lane_eq_dsp_rx_hint(2).unwrap();
        l.set_lane_eq_usp_tx_preset(7).unwrap().set_lane_eq_usp_rx_hint(3).unwrap();
        for lane in 1..4 {
            pci_secpci_lane_eq::mut_from_prefix(&mut b[0x10c + 2 * lane..]).unwrap().0.set_lane_eq_ctl(0);
        }
    }
    ext(&mut b, 0x120, 0x0025, 0x130);
    {
        let d = pci_dlf_cap::mut_from_prefix(&mut b[0x120..]).unwrap().0;
        d.set_dlf_cap(0).set_dlf_cap_exchange_enable(true).set_dlf_cap_features(1).unwrap();
        d.set_dlf_status(0).set_dlf_status_valid(true).set_dlf_status_features(1).unwrap();
    }
    ext(&mut b, 0x130, 0x0026, 0x158);
    {
        let p = pci_pl16_cap::mut_from_prefix(&mut b[0x130..]).unwrap().0;
        p.set_pl16_cap(0).set_pl16_ctl(0).set_pl16_status(0).set_pl16_status_eq_complete(true);
        p.set_pl16_status_eq_phase1(true).set_pl16_status_eq_phase2(true).set_pl16_status_eq_phase3(true);
        p.set_pl16_local_parity(0b10).set_pl16_first_retimer_parity(0).set_pl16_second_retimer_parity(0b1000);
        for lane in 0..4 {
            let e = pci_pl_lane_eq::mut_from_prefix(&mut b[0x150 + lane..]).unwrap().0;
            e.set_pl_lane_eq_ctl(0);
            if lane == 0 {
                e.set_pl_lane_eq_dsp_tx_preset(5).unwrap().set_pl_lane_eq_usp_tx_preset(7).unwrap();
            }
        }
    }
    ext(&mut b, 0x158, 0x002a, 0);
    {
        let p = pci_pl32_cap::mut_from_prefix(&mut b[0x158..]).unwrap().0;
        p.set_pl32_cap(0).set_pl32_cap_eq_bypass(true).set_pl32_cap_no_eq_needed(true).set_pl32_cap_mts_mode0(true);
        p.set_pl32_ctl(0).set_pl32_ctl_mts_mode(1).unwrap();
        p.set_pl32_status(0).set_pl32_status_eq_complete(true).set_pl32_status_eq_phase1(true);
        p.set_pl32_status_eq_phase2(true).set_pl32_status_eq_phase3(true).set_pl32_status_precoding_on(true);
        p.set_pl32_rx_mts1(0).set_pl32_rx_mts2(0).set_pl32_tx_mts1(0).set_pl32_tx_mts2(0);
        for lane in 0..4 {
            let e = pci_pl_lane_eq::mut_from_prefix(&mut b[0x178 + lane..]).unwrap().0;
            e.set_pl_lane_eq_ctl(0);
            if lane == 2 {
                e.set_pl_lane_eq_dsp_tx_preset(9).unwrap().set_pl_lane_eq_usp_tx_preset(4).unwrap();
            }
        }
    }
    // §7.7.3: LnkCtl3 0x3, lane errors on lanes 0 and 2, lane 0 presets 0x3724; four lanes (x4).
    assert_eq!(&b[0x100..0x114], &[0x19, 0x00, 0x01, 0x12, 0x03, 0, 0, 0, 0x05, 0, 0, 0, 0x24, 0x37, 0, 0, 0, 0, 0, 0]);
    assert_eq!(b[0x114], 0xA5);
    // §7.7.4: exchange enable + scaled flow control, partner's valid + scaled flow control.
    assert_eq!(&b[0x120..0x12c], &[0x25, 0x00, 0x01, 0x13, 0x01, 0, 0, 0x80, 0x01, 0, 0, 0x80]);
    // §7.7.5: status 0xf, local parity lane 1, second retimer lane 3, reserved untouched, lane 0 presets 0x75.
    assert_eq!(&b[0x130..0x134], &[0x26, 0x00, 0x81, 0x15]);
    assert_eq!(&b[0x13c..0x14c], &[0x0f, 0, 0, 0, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x08, 0, 0, 0]);
    assert_eq!(&b[0x14c..0x155], &[0xA5, 0xA5, 0xA5, 0xA5, 0x75, 0, 0, 0, 0xA5]);
    // §7.7.6: caps 0x103 (bypass, no-eq-needed, mode 0), ctl 0x100, status 0x10f, lane 2 presets 0x49.
    assert_eq!(&b[0x158..0x168], &[0x2a, 0x00, 0x01, 0x00, 0x03, 0x01, 0, 0, 0x00, 0x01, 0, 0, 0x0f, 0x01, 0, 0]);
    assert_eq!(&b[0x178..0x17d], &[0, 0, 0x49, 0, 0xA5]);

    let cfg = Config::new(&b).unwrap();
    let s = cfg.secondary_pcie().unwrap().unwrap();
    assert_eq!(
        (s.perform_equalization, s.eq_request_interrupt, s.lanes.len(), s.lane_count),
        (true, true, 4, LaneCount::LinkWidth)
    );
    assert_eq!(s.lanes_in_error().collect::<Vec<_>>(), [0, 2]);
    assert_eq!(
        (s.lanes[0].dsp_tx_preset, s.lanes[0].dsp_rx_hint, s.lanes[0].usp_tx_preset, s.lanes[0].usp_rx_hint),
        (4, 2, 7, 3)
    );
    let d = cfg.data_link_feature().unwrap().unwrap();
    assert!(d.scaled_flow_control_active());
    let p = cfg.physical_layer_16gt().unwrap().unwrap();
    assert!(p.equalization.complete && p.equalization.phase3 && !p.equalization.request);
    assert_eq!((p.local_parity_mismatch, p.second_retimer_parity_mismatch, p.lanes.len()), (2, 8, 4));
    assert_eq!((p.lanes[0].dsp_tx_preset, p.lanes[0].usp_tx_preset), (5, 7));
    let p = cfg.physical_layer_32gt().unwrap().unwrap();
    assert_eq!(
        (p.eq_bypass_supported, p.no_eq_needed_supported, p.modified_ts_modes, p.modified_ts_mode_selected),
        (true, true, 1, 1)
    );
    assert!(p.precoding_on && p.equalization.complete);
    assert_eq!((p.lanes[2].dsp_tx_preset, p.lanes[2].usp_tx_preset), (9, 4));

    // Without a link width (no PCI Express capability) the lane arrays are
    // bounded by the next capability: Secondary PCIe has 0x120 - 0x10c = 20
    // bytes, 10 lanes.
    let mut nolink = b.clone();
    nolink[0x34] = 0;
    pci_type0_header::mut_from_prefix(&mut nolink).unwrap().0.set_status_cap_list(false);
    let s = Config::new(&nolink).unwrap().secondary_pcie().unwrap().unwrap();
    assert_eq!((s.lanes.len(), s.lane_count), (10, LaneCount::Bounded));
}

#[test]
fn vsec_acs_egress_and_rebar_golden() {
    let mut b = with_express(4);
    ext(&mut b, 0x100, 0x000b, 0x110);
    pci_vsec_cap::mut_from_prefix(&mut b[0x100..])
        .unwrap()
        .0
        .set_vsec_header(0)
        .set_vsec_id(0x1234)
        .set_vsec_rev(1)
        .unwrap()
        .set_vsec_len(0x10)
        .unwrap();
    b[0x108..0x110].copy_from_slice(b"marrow!\0");
    ext(&mut b, 0x110, 0x000d, 0x120);
    {
        let a = pci_acs_cap::mut_from_prefix(&mut b[0x110..]).unwrap().0;
        a.set_acs_cap(0).set_acs_cap_sv(true).set_acs_cap_rr(true).set_acs_cap_cr(true).set_acs_cap_ec(true);
        a.set_acs_cap_egress_bits(40).set_acs_ctrl(0).set_acs_ctrl_ec(true);
    }
    // The egress control vector is variable-length (§7.7.8.4): ports 1 and 33 blocked.
    b[0x118..0x120].copy_from_slice(&[0x02, 0, 0, 0, 0x02, 0, 0, 0]);
    ext(&mut b, 0x120, 0x0015, 0);
    {
        let r = pci_rebar_cap::mut_from_prefix(&mut b[0x120..]).unwrap().0;
        r.set_rebar_cap(0).set_rebar_cap_sizes(0x1f00).unwrap();
        r.set_rebar_ctrl(0)
            .set_rebar_ctrl_bar_idx(0)
            .unwrap()
            .set_rebar_ctrl_nbar(2)
            .unwrap()
            .set_rebar_ctrl_bar_size(8)
            .unwrap();
        let e = pci_rebar_entry::mut_from_prefix(&mut b[0x12c..]).unwrap().0;
        e.set_entry_cap(0).set_entry_cap_sizes(0x7ffe0).unwrap();
        e.set_entry_ctrl(0)
            .set_entry_ctrl_bar_idx(2)
            .unwrap()
            .set_entry_ctrl_bar_size(18)
            .unwrap()
            .set_entry_ctrl_sizes_hi(1);
    }
    // §7.9.5: VSEC ID 0x1234, rev 1, length 16.
    assert_eq!(&b[0x100..0x108], &[0x0b, 0x00, 0x01, 0x11, 0x34, 0x12, 0x01, 0x01]);
    // §7.7.8: capability 0x282d (SV, RR, CR, EC; vector of 40 bits), control 0x0020 (EC).
    assert_eq!(&b[0x110..0x118], &[0x0d, 0x00, 0x01, 0x12, 0x2d, 0x28, 0x20, 0x00]);
    // §7.8.6: entry 0 sizes 256 MiB..4 GiB (0x0001f000), BAR0 with 2 BARs at
    // 256 MiB (0x0840); entry 1 sizes 32 MiB..256 GiB (0x007ffe00), BAR2 at
    // 256 GiB plus 256 TiB from the control register (0x00011202).
    assert_eq!(
        &b[0x120..0x134],
        &[
            0x15, 0x00, 0x01, 0x00, 0x00, 0xf0, 0x01, 0x00, 0x40, 0x08, 0, 0, 0x00, 0xfe, 0x7f, 0x00, 0x02, 0x12, 0x01,
            0x00
        ]
    );
    assert_eq!(b[0x134], 0xA5);

    let cfg = Config::new(&b).unwrap();
    let v: Vec<_> = cfg.vsecs().map(Result::unwrap).collect();
    assert_eq!((v.len(), v[0].id, v[0].rev, v[0].len, v[0].body), (1, 0x1234, 1, 0x10, Ok(&b"marrow!\0"[..])));
    let e = cfg.acs_egress_control().unwrap().unwrap();
    assert_eq!((e.bits, e.blocked().collect::<Vec<_>>()), (40, vec![1, 33]));
    let r: Vec<_> = cfg.resizable_bars().collect();
    assert_eq!(r.len(), 2);
    assert_eq!(
        (r[0].bar_index, r[0].current, r[0].supported().collect::<Vec<_>>()),
        (0, 256 << 20, vec![256 << 20, 512 << 20, 1 << 30, 2 << 30, 4 << 30])
    );
    assert_eq!((r[1].bar_index, r[1].current, r[1].supported().last()), (2, 256 << 30, Some(256u64 << 40)));
    assert_eq!(r[1].supported().count(), 15);

    // A VSEC length shorter than its own header is an error, not a body.
    pci_vsec_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0.set_vsec_len(4).unwrap();
    let v = Config::new(&b).unwrap().vsecs().next().unwrap().unwrap();
    assert_eq!(v.body, Err(marrow_pcie::CapError::BadField { offset: 0x100, field: "VSEC Length", value: 4 }));
}

/// ACS Control's bit 7 is I/O Request Blocking Enable (PCIe 4.0+), not the
/// capability register's Enhanced Capability: it stays in `control_raw`
/// and out of the decoded flags, while the capability keeps it.
#[test]
fn acs_control_bit_7_is_not_the_enhanced_capability() {
    let mut b = with_express(4);
    ext(&mut b, 0x100, 0x000d, 0);
    let a = pci_acs_cap::mut_from_prefix(&mut b[0x100..]).unwrap().0;
    a.set_acs_cap(0x0080 | 0x0004).set_acs_ctrl(0x0080 | 0x0004);
    let acs = Config::new(&b).unwrap().acs().unwrap();
    use marrow_pcie::acs::AcsBits;
    assert_eq!(acs.capability, AcsBits::ENHANCED | AcsBits::RR);
    assert_eq!(acs.control, AcsBits::RR);
    assert_eq!(acs.control_raw, 0x0084);
}
