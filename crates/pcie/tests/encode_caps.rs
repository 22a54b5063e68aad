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
