//! Golden values for VPD, Debug Port, SATA, PCI Advanced Features, the
//! virtio structure capability, Root Complex Link Declaration and
//! Multicast. Each case starts from 4 KiB of 0xA5, writes the capability's
//! registers with values whose bit positions were worked out by hand from
//! the section the decoder cites (the shifts are written out here, not
//! taken from `hw-specs/pcie.toml`), and checks every register's offset and
//! raw value and every named field; a layout field this file does not
//! check fails it too.

mod golden;

use golden::expect;
use marrow_pcie::Config;
use marrow_pcie::regs::CapError;

const POISON: u8 = 0xA5;

/// 4 KiB of poison: vendor:device `id`, Status 0x0010 (Capabilities
/// List), the capability pointer at 0x34 = `cap`, no extended list unless
/// a test writes one.
fn space(id: [u8; 4], cap: u8) -> Vec<u8> {
    let mut b = vec![POISON; 4096];
    b[0..8].copy_from_slice(&[id[0], id[1], id[2], id[3], 0x00, 0x00, 0x10, 0x00]);
    b[0x0e] = 0;
    b[0x34] = cap;
    b[0x100..0x104].fill(0);
    b
}

const INTEL: [u8; 4] = [0x86, 0x80, 0x34, 0x12];

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// PCI 3.0 §6.4: VPD Address at +2 (F flag 15, address 14:0), VPD Data at +4.
#[test]
fn vpd() {
    let mut b = space(INTEL, 0x80);
    b[0x80..0x82].copy_from_slice(&[0x03, 0x00]);
    put16(&mut b, 0x82, 1 << 15 | 0x1234);
    put32(&mut b, 0x84, 0xdead_beef);
    let cfg = Config::new(&b).unwrap();
    expect(
        "VPD",
        &cfg.vpd(0x80).unwrap(),
        &[("cap_id", 0x80, 3), ("cap_next", 0x81, 0), ("vpd_addr", 0x82, 0x9234), ("vpd_data", 0x84, 0xdead_beef)],
        &[("vpd_addr_f", 1), ("vpd_addr_addr", 0x1234)],
    );
    let short = Config::new(&b[..0x86]).unwrap();
    assert_eq!(short.vpd(0x80), Err(CapError::Truncated { offset: 0x80, need: 8, len: 0x86 }));
}

/// EHCI Appendix C.2.1: BAR Number in bits 31:29 of the first dword (15:13
/// of the word at +2), the offset in 28:16 (12:0).
#[test]
fn debug_port() {
    let mut b = space(INTEL, 0x58);
    b[0x58..0x5a].copy_from_slice(&[0x0a, 0x00]);
    put16(&mut b, 0x5a, 1 << 13 | 0x0a0);
    let cfg = Config::new(&b).unwrap();
    expect(
        "Debug port",
        &cfg.debug_port(0x58).unwrap(),
        &[("cap_id", 0x58, 0x0a), ("cap_next", 0x59, 0), ("dbg_port", 0x5a, 0x20a0)],
        &[("dbg_port_bar", 1), ("dbg_port_offset", 0xa0)],
    );
}

/// AHCI §2.4: SATACR0 MAJREV 23:20, MINREV 19:16 (the byte at +2), 31:24
/// reserved; SATACR1 BARLOC 3:0, BAROFST 23:4, 31:24 reserved.
#[test]
fn sata() {
    let mut b = space(INTEL, 0xa8);
    b[0xa8..0xab].copy_from_slice(&[0x12, 0x00, 1 << 4]); // v1.0: MAJREV 1, MINREV 0
    put32(&mut b, 0xac, 0xa500_0000 | 0x4 << 4 | 4);
    let cfg = Config::new(&b).unwrap();
    expect(
        "SATA",
        &cfg.sata(0xa8).unwrap(),
        &[("cap_id", 0xa8, 0x12), ("cap_next", 0xa9, 0), ("sata_cr0_rev", 0xaa, 0x10), ("sata_cr1", 0xac, 0xa500_0044)],
        &[("sata_cr0_majrev", 1), ("sata_cr0_minrev", 0), ("sata_cr1_barofst", 4), ("sata_cr1_barloc", 4)],
    );
}

/// The AF ECN: length at +2, AF Capabilities at +3 (TP 0, FLR 1), AF
/// Control at +4 (Initiate FLR 0), AF Status at +5 (TP 0).
#[test]
fn advanced_features() {
    let mut b = space(INTEL, 0x50);
    b[0x50..0x56].copy_from_slice(&[0x13, 0x00, 0x06, 0b11, 0xa4, 0xa5]);
    let cfg = Config::new(&b).unwrap();
    expect(
        "AF",
        &cfg.advanced_features(0x50).unwrap(),
        &[
            ("cap_id", 0x50, 0x13),
            ("cap_next", 0x51, 0),
            ("af_length", 0x52, 6),
            ("af_cap", 0x53, 3),
            ("af_ctrl", 0x54, 0xa4),
            ("af_status", 0x55, 0xa5),
        ],
        &[("af_cap_flr", 1), ("af_cap_tp", 1), ("af_ctrl_flr", 0), ("af_status_tp", 1)],
    );
}

/// VIRTIO 1.2 §4.1.4: cap_len +2, cfg_type +3, bar +4, id +5, offset +8,
/// length +12; a notify capability (cfg_type 2) of 20 bytes has
/// notify_off_multiplier at +16 (§4.1.4.4). Only a virtio device
/// (1af4:1000-107f, §4.1.2) has them.
#[test]
fn virtio() {
    let mut b = space([0xf4, 0x1a, 0x41, 0x10], 0x70);
    b[0x70..0x76].copy_from_slice(&[0x09, 0x00, 20, 2, 4, 1]);
    put32(&mut b, 0x78, 0x3000);
    put32(&mut b, 0x7c, 0x1000);
    put32(&mut b, 0x80, 4);
    let cfg = Config::new(&b).unwrap();
    assert!(cfg.is_virtio());
    let v = cfg.virtio_cap(0x70).unwrap().unwrap();
    expect(
        "virtio",
        &v.block,
        &[
            ("cap_vndr", 0x70, 9),
            ("cap_next", 0x71, 0),
            ("cap_len", 0x72, 20),
            ("cfg_type", 0x73, 2),
            ("bar", 0x74, 4),
            ("id", 0x75, 1),
            ("offset", 0x78, 0x3000),
            ("length", 0x7c, 0x1000),
        ],
        &[],
    );
    expect("virtio notify", v.notify_multiplier.as_ref().unwrap(), &[("notify_off_multiplier", 0x80, 4)], &[]);
    // A common config capability has no multiplier, even 20 bytes long.
    b[0x73] = 1;
    assert_eq!(Config::new(&b).unwrap().virtio_cap(0x70).unwrap().unwrap().notify_multiplier, None);
    // Shorter than virtio_pci_cap, or past the dump: errors.
    b[0x72] = 15;
    let e = Config::new(&b).unwrap().virtio_cap(0x70).unwrap();
    assert_eq!(e, Err(CapError::BadField { offset: 0x70, field: "cap_len", value: 15 }));
    b[0x72] = 0x20;
    let short = Config::new(&b[..0x8f]).unwrap();
    assert_eq!(short.virtio_cap(0x70).unwrap(), Err(CapError::Truncated { offset: 0x70, need: 0x20, len: 0x8f }));
    // Device 0x1080 is past virtio's range; another vendor is not virtio.
    b[2..4].copy_from_slice(&[0x80, 0x10]);
    assert_eq!(Config::new(&b).unwrap().virtio_cap(0x70), None);
}

/// PCIe 6.0 §7.9.8: Element Self Description at +4 (type 3:0, 7:4
/// reserved, link entries 15:8, component 23:16, port 31:24); link
/// entries from +0x10, 16 bytes each: description (valid 0, type 1,
/// associate RCRB 2, target component 23:16, target port 31:24), +4
/// reserved, address +8 (64 bits).
#[test]
fn root_complex_link() {
    let mut b = space(INTEL, 0);
    put32(&mut b, 0x100, 0x0005 | 1 << 16);
    put32(&mut b, 0x104, 0x0f << 24 | 0x01 << 16 | 2 << 8); // element type 0 (configuration space)
    put32(&mut b, 0x110, 1);
    put64(&mut b, 0x118, 0xfed1_c000);
    // A configuration space link: bus 0x12 (N 0: 8 bits from bit 20), device 3 (19:15), function 1 (14:12).
    put32(&mut b, 0x120, 0x02 << 24 | 0x03 << 16 | 0b111);
    let cfg_addr = 0x12u64 << 20 | 3 << 15 | 1 << 12;
    put64(&mut b, 0x128, cfg_addr);
    let cfg = Config::new(&b).unwrap();
    let r = cfg.rc_link(0x100).unwrap();
    expect(
        "RCLD",
        &r.header,
        &[("ext_cap_header", 0x100, 0x0001_0005), ("rcld_esd", 0x104, 0x0f01_0200)],
        &[
            ("rcld_esd_port_number", 0x0f),
            ("rcld_esd_component_id", 1),
            ("rcld_esd_link_entries", 2),
            ("rcld_esd_element_type", 0),
        ],
    );
    let link = |port, comp, assoc, ty, valid| {
        [
            ("rcld_link_target_port", port),
            ("rcld_link_target_component", comp),
            ("rcld_link_assoc_rcrb", assoc),
            ("rcld_link_type", ty),
            ("rcld_link_valid", valid),
        ]
    };
    assert_eq!((r.links.len(), r.links_missing), (2, 0));
    expect(
        "RCLD link 0",
        &r.links[0],
        &[("rcld_link_desc", 0x110, 1), ("rcld_link_addr", 0x118, 0xfed1_c000)],
        &link(0, 0, 0, 0, 1),
    );
    expect(
        "RCLD link 1",
        &r.links[1],
        &[("rcld_link_desc", 0x120, 0x0203_0007), ("rcld_link_addr", 0x128, 0x0121_9000)],
        &link(2, 3, 1, 1, 1),
    );
    assert_eq!(marrow_pcie::rcld::config_address(cfg_addr), (0x12, 3, 1));
    // N = 4: the bus field is 4 bits wide.
    assert_eq!(marrow_pcie::rcld::config_address(cfg_addr | 4), (0x2, 3, 1));
    // A dump that ends inside the second entry keeps the first.
    let short = Config::new(&b[..0x12c]).unwrap();
    let r = short.rc_link(0x100).unwrap();
    assert_eq!((r.links.len(), r.links_missing), (1, 1));
}

/// PCIe 6.0 §7.9.11: Capability +4 (max group 5:0, window size 13:8,
/// ECRC 15), Control +6 (num group 5:0, enable 15), then 64-bit Base
/// Address (index position 5:0, address 63:12), Receive, Block All, Block
/// Untranslated and Overlay BAR (size 5:0, address 63:6).
#[test]
fn multicast() {
    let mut b = space(INTEL, 0);
    put32(&mut b, 0x100, 0x0012 | 1 << 16);
    put16(&mut b, 0x104, 1 << 15 | 0x0c << 8 | 0x3f);
    put16(&mut b, 0x106, 1 << 15 | 0x01);
    put64(&mut b, 0x108, 0x0012_3456_7000 | 0x0c);
    put64(&mut b, 0x110, 0xffff_0000_ffff_0001);
    put64(&mut b, 0x118, 1);
    put64(&mut b, 0x120, 1 << 63);
    put64(&mut b, 0x128, 0x00ab_cdef_0000 | 0x10);
    let cfg = Config::new(&b).unwrap();
    expect(
        "Multicast",
        &cfg.multicast(0x100).unwrap(),
        &[
            ("ext_cap_header", 0x100, 0x0001_0012),
            ("mcast_cap", 0x104, 0x8c3f),
            ("mcast_ctrl", 0x106, 0x8001),
            ("mcast_bar", 0x108, 0x0012_3456_700c),
            ("mcast_rcv", 0x110, 0xffff_0000_ffff_0001),
            ("mcast_block", 0x118, 1),
            ("mcast_block_untrans", 0x120, 1 << 63),
            ("mcast_ovl_bar", 0x128, 0x00ab_cdef_0010),
        ],
        &[
            ("mcast_cap_ecrc", 1),
            ("mcast_cap_win_size", 0x0c),
            ("mcast_cap_max_group", 0x3f),
            ("mcast_ctrl_enable", 1),
            ("mcast_ctrl_num_group", 1),
            ("mcast_bar_base", 0x0012_3456_7000 >> 12),
            ("mcast_bar_index_pos", 0x0c),
            ("mcast_ovl_base", 0x00ab_cdef_0000 >> 6),
            ("mcast_ovl_size", 0x10),
        ],
    );
    let short = Config::new(&b[..0x12f]).unwrap();
    assert_eq!(short.multicast(0x100), Err(CapError::Truncated { offset: 0x100, need: 0x30, len: 0x12f }));
}
