//! Golden values for the decoders added for issue 21 (PTM, ARI, DVSEC, DOE,
//! Virtual Channel, Lane Margining, Device 3, IDE, Enhanced Allocation, L1
//! PM Substates, the expansion ROM, bridge windows, bridge SSVID and the
//! CardBus header). Each case starts from 4 KiB of 0xA5, writes the
//! capability's registers with values whose bit positions were worked out
//! by hand from the section the layout cites (the shifts are written out
//! here, not taken from `hw-specs/pcie.toml`), and checks every register's
//! offset and raw value and every named field the decode gives. `expect`
//! also fails when the layout grows a field this file does not check, so a
//! moved, widened or added bit range fails here.

use marrow_pcie::Config;
use marrow_pcie::cap_id::ExtCapId;
use marrow_pcie::l1ss::{ltr_l12_threshold_ns, t_power_on_us};
use marrow_pcie::ptm::Granularity;
use marrow_pcie::registers::Block;
use marrow_pcie::regs::{CapError, LaneCount};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};

const POISON: u8 = 0xA5;

/// Values compared by every test of this file (for the report line).
static COMPARED: AtomicUsize = AtomicUsize::new(0);

/// 4 KiB of poison with a type `header_type` header: 15b3:1021, Command 0,
/// Status 0x0010 (Capabilities List, PCI §6.2.3 bit 4) when `cap` is
/// nonzero, the capability pointer at 0x34 (0x14 for CardBus) = `cap`.
fn space(header_type: u8, cap: u8) -> Vec<u8> {
    let mut b = vec![POISON; 4096];
    b[0..8].copy_from_slice(&[0xb3, 0x15, 0x21, 0x10, 0x00, 0x00, if cap != 0 { 0x10 } else { 0 }, 0x00]);
    b[0x0e] = header_type;
    let ptr = if header_type == 2 { 0x14 } else { 0x34 };
    b[ptr] = cap;
    // An extended list only where a test writes one: 0 at 0x100 is none.
    b[0x100..0x104].fill(0);
    b
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Extended capability header (PCIe 6.0 §7.6.3): ID 15:0, version 19:16,
/// next 31:20.
fn ext_header(id: u16, version: u32, next: u32) -> u32 {
    u32::from(id) | (version << 16) | (next << 20)
}

/// Checks `block` against hand values: `regs` is every register (name,
/// absolute offset, raw value) in offset order, `fields` every named bit
/// range with its value. A register or field of the decode missing from
/// the lists, or the other way round, fails too.
fn expect(what: &str, block: &Block, regs: &[(&str, u16, u64)], fields: &[(&str, u64)]) {
    let got: Vec<(&str, u16, u64)> = block.registers.iter().map(|r| (r.name(), r.offset, r.raw)).collect();
    let want: Vec<(&str, u16, u64)> = regs.to_vec();
    assert_eq!(got, want, "{what}: registers (name, offset, raw)");
    let named: BTreeSet<&str> = block.registers.iter().flat_map(|r| r.layout.bits.iter().map(|b| b.name)).collect();
    let listed: BTreeSet<&str> = fields.iter().map(|(n, _)| *n).collect();
    assert_eq!(named, listed, "{what}: the fields the layout names and the fields this test checks");
    for (name, value) in fields {
        assert_eq!(block.get(name), Some(*value), "{what}: {name}");
    }
    let n = 2 * regs.len() + fields.len();
    COMPARED.fetch_add(n, Ordering::Relaxed);
    eprintln!("{what}: {n} values (register offsets, raw values, fields) equal the hand-derived ones");
}

/// PCIe 6.0 §7.9.15: PTM Capability (+0x04) and PTM Control (+0x08).
#[test]
fn ptm() {
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x001f, 1, 0));
    // Capability: Requester (bit 0) 1, Responder (1) 0, Root (2) 1, ePTM (3)
    // 1, bits 7:4 0, Local Clock Granularity 15:8 = 60 ns, 31:16 reserved.
    let cap = 0xa5a5_0000 | (60 << 8) | 0b1101;
    put32(&mut b, 0x104, cap);
    // Control: Enable (0) 0, Root Select (1) 1, 7:2 reserved ones,
    // Effective Granularity 15:8 = 0xff (above 254 ns), 31:16 reserved.
    let ctl = 0x5a5a_0000 | (0xff << 8) | 0b1111_1110;
    put32(&mut b, 0x108, ctl);
    let cfg = Config::new(&b).unwrap();
    let p = cfg.ptm().unwrap().unwrap();
    assert_eq!((cap, ctl), (0xa5a5_3c0d, 0x5a5a_fffe));
    expect(
        "PTM",
        &p,
        &[("ext_cap_header", 0x100, 0x0001_001f), ("ptm_cap", 0x104, 0xa5a5_3c0d), ("ptm_ctrl", 0x108, 0x5a5a_fffe)],
        &[
            ("ptm_cap_req", 1),
            ("ptm_cap_res", 0),
            ("ptm_cap_root", 1),
            ("ptm_cap_eptm", 1),
            ("ptm_cap_granularity", 60),
            ("ptm_ctrl_enable", 0),
            ("ptm_ctrl_root", 1),
            ("ptm_ctrl_granularity", 0xff),
        ],
    );
    assert_eq!(Granularity::from_field(p.get("ptm_cap_granularity").unwrap()), Granularity::Ns(60));
    assert_eq!(Granularity::from_field(p.get("ptm_ctrl_granularity").unwrap()), Granularity::Above254Ns);
    assert_eq!(Granularity::from_field(0), Granularity::Unimplemented);
    // A dump that ends inside the capability is an error, not a guess.
    let short = Config::new(&b[..0x10a]).unwrap();
    assert!(matches!(short.ptm(), Some(Err(CapError::Truncated { offset: 0x100, .. }))));
}

/// PCIe 6.0 §7.8.8: ARI Capability (+0x04, 16 bits) and Control (+0x06).
#[test]
fn ari() {
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x000e, 1, 0));
    // Capability: MFVC (0) 1, ACS (1) 0, 7:2 reserved ones, Next Function 15:8 = 0x42.
    put16(&mut b, 0x104, (0x42 << 8) | 0b1111_1101);
    // Control: MFVC (0) 0, ACS (1) 1, 3:2 reserved ones, Function Group
    // 6:4 = 5, 7 reserved one, 15:8 reserved 0xa5.
    put16(&mut b, 0x106, 0xa500 | 0x80 | (5 << 4) | 0b1110);
    let cfg = Config::new(&b).unwrap();
    let a = cfg.ari().unwrap().unwrap();
    expect(
        "ARI",
        &a,
        &[("ext_cap_header", 0x100, 0x0001_000e), ("ari_cap", 0x104, 0x42fd), ("ari_ctrl", 0x106, 0xa5de)],
        &[
            ("ari_cap_mfvc", 1),
            ("ari_cap_acs", 0),
            ("ari_cap_nfn", 0x42),
            ("ari_ctrl_mfvc", 0),
            ("ari_ctrl_acs", 1),
            ("ari_ctrl_fg", 5),
        ],
    );
}

/// PCIe 6.0 §7.9.6: DVSEC Header 1 (+0x04: vendor 15:0, revision 19:16,
/// length 31:20) and Header 2 (+0x08: ID 15:0); CXL 3.0 Table 8-2 names.
#[test]
fn dvsec() {
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x0023, 1, 0x140));
    put32(&mut b, 0x104, (0x038 << 20) | (3 << 16) | 0x1e98);
    put16(&mut b, 0x108, 0x0007);
    // A second one, of another vendor, whose length (8) is below the header's 10 bytes.
    put32(&mut b, 0x140, ext_header(0x0023, 1, 0));
    put32(&mut b, 0x144, (0x008 << 20) | (1 << 16) | 0x10de);
    put16(&mut b, 0x148, 0x0002);
    let cfg = Config::new(&b).unwrap();
    let all = cfg.dvsecs();
    assert_eq!(all.len(), 2);
    let d = all[0].clone().unwrap();
    assert_eq!((d.offset, d.version, d.vendor, d.rev, d.len, d.id), (0x100, 1, 0x1e98, 3, 0x38, 7));
    assert_eq!(d.name(), Some("CXL PCIe DVSEC for Flex Bus Port"));
    expect(
        "DVSEC",
        &d.block,
        &[("ext_cap_header", 0x100, 0x1401_0023), ("dvsec_header1", 0x104, 0x0383_1e98), ("dvsec_header2", 0x108, 7)],
        &[("dvsec_len", 0x38), ("dvsec_rev", 3), ("dvsec_vendor_id", 0x1e98), ("dvsec_id", 7)],
    );
    assert_eq!(all[1], Err(CapError::BadField { offset: 0x140, field: "DVSEC Length", value: 8 }));
    COMPARED.fetch_add(8, Ordering::Relaxed);
}

/// PCIe 6.0 §7.9.24: DOE Capabilities, Control, Status and the mailboxes.
#[test]
fn doe() {
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x002e, 1, 0x180));
    // Capabilities: Interrupt Support (0) 1, Interrupt Message Number 11:1 = 0x2a5.
    put32(&mut b, 0x104, (0x2a5 << 1) | 1);
    // Control: Abort (0) 0, Interrupt Enable (1) 1, Go (31) 1.
    put32(&mut b, 0x108, (1 << 31) | (1 << 1));
    // Status: Busy (0) 1, Interrupt Status (1) 0, Error (2) 1, Data Object Ready (31) 1.
    put32(&mut b, 0x10c, (1 << 31) | (1 << 2) | 1);
    put32(&mut b, 0x110, 0x1234_5678);
    put32(&mut b, 0x114, 0x9abc_def0);
    // A second instance with the opposite flags.
    put32(&mut b, 0x180, ext_header(0x002e, 1, 0));
    put32(&mut b, 0x184, 0x7ff << 1);
    put32(&mut b, 0x188, 1);
    put32(&mut b, 0x18c, 1 << 1);
    put32(&mut b, 0x190, 0);
    put32(&mut b, 0x194, u32::MAX);
    let cfg = Config::new(&b).unwrap();
    let all: Vec<Block> = cfg.doe().map(Result::unwrap).collect();
    assert_eq!(all.len(), 2);
    expect(
        "DOE 0",
        &all[0],
        &[
            ("ext_cap_header", 0x100, 0x1801_002e),
            ("doe_cap", 0x104, 0x54b),
            ("doe_ctrl", 0x108, 0x8000_0002),
            ("doe_status", 0x10c, 0x8000_0005),
            ("doe_write", 0x110, 0x1234_5678),
            ("doe_read", 0x114, 0x9abc_def0),
        ],
        &[
            ("doe_cap_int_sup", 1),
            ("doe_cap_irq", 0x2a5),
            ("doe_ctrl_go", 1),
            ("doe_ctrl_int_en", 1),
            ("doe_ctrl_abort", 0),
            ("doe_status_data_object_ready", 1),
            ("doe_status_error", 1),
            ("doe_status_int_status", 0),
            ("doe_status_busy", 1),
        ],
    );
    expect(
        "DOE 1",
        &all[1],
        &[
            ("ext_cap_header", 0x180, 0x0001_002e),
            ("doe_cap", 0x184, 0xffe),
            ("doe_ctrl", 0x188, 1),
            ("doe_status", 0x18c, 2),
            ("doe_write", 0x190, 0),
            ("doe_read", 0x194, 0xffff_ffff),
        ],
        &[
            ("doe_cap_int_sup", 0),
            ("doe_cap_irq", 0x7ff),
            ("doe_ctrl_go", 0),
            ("doe_ctrl_int_en", 0),
            ("doe_ctrl_abort", 1),
            ("doe_status_data_object_ready", 0),
            ("doe_status_error", 0),
            ("doe_status_int_status", 1),
            ("doe_status_busy", 0),
        ],
    );
}

/// PCIe 6.0 §7.9.1: the port registers and two VC resources (VC0 at +0x10,
/// VC1 12 bytes on), the reserved word of each left poisoned.
#[test]
fn virtual_channel() {
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x0002, 1, 0));
    // Port VC Capability 1: Extended VC Count 2:0 = 1, LPEVC 6:4 = 1,
    // Reference Clock 9:8 = 0, Port Arbitration Table Entry Size 11:10 = 2.
    put32(&mut b, 0x104, (2 << 10) | (1 << 4) | 1);
    // Port VC Capability 2: VC Arbitration Capability 7:0 = 0x03, Table Offset 31:24 = 5.
    put32(&mut b, 0x108, (5 << 24) | 0x03);
    // Port VC Control: Load VC Arbitration Table (0) 1, VC Arbitration Select 3:1 = 2.
    put16(&mut b, 0x10c, (2 << 1) | 1);
    // Port VC Status: VC Arbitration Table Status (0) 1.
    put16(&mut b, 0x10e, 1);
    // VC0: capability: Port Arbitration Capability 7:0 = 0x01, Reject Snoop
    // (15) 1, Maximum Time Slots 22:16 = 0x3f, Port Arbitration Table Offset 31:24 = 6.
    put32(&mut b, 0x110, (6 << 24) | (0x3f << 16) | (1 << 15) | 0x01);
    // VC0 control: TC/VC Map 7:0 = 0xff, Load Port Arbitration Table (16)
    // 0, Port Arbitration Select 19:17 = 3, VC ID 26:24 = 0, VC Enable (31) 1.
    put32(&mut b, 0x114, (1 << 31) | (3 << 17) | 0xff);
    // VC0 status (+0x0a): Port Arbitration Table Status (0) 0, VC Negotiation Pending (1) 1.
    put16(&mut b, 0x11a, 1 << 1);
    // VC1: PAT capability 0x10, offset 0x0a; map 0x02, load 1, select 0, ID 1, disabled; status both.
    put32(&mut b, 0x11c, (0x0a << 24) | 0x10);
    put32(&mut b, 0x120, (1 << 24) | (1 << 16) | 0x02);
    put16(&mut b, 0x126, 0b11);
    let cfg = Config::new(&b).unwrap();
    let vc = cfg.virtual_channel().unwrap().unwrap();
    assert_eq!(vc.offset, 0x100);
    assert_eq!(vc.resources.len(), 2, "Extended VC Count 1: VC0 and VC1");
    expect(
        "VC port",
        &vc.port,
        &[
            ("ext_cap_header", 0x100, 0x0001_0002),
            ("vc_port_cap1", 0x104, 0x811),
            ("vc_port_cap2", 0x108, 0x0500_0003),
            ("vc_port_ctrl", 0x10c, 0x5),
            ("vc_port_status", 0x10e, 0x1),
        ],
        &[
            ("vc_cap1_arb_size", 2),
            ("vc_cap1_ref_clk", 0),
            ("vc_cap1_lpevc", 1),
            ("vc_cap1_evcc", 1),
            ("vc_cap2_arb_off", 5),
            ("vc_cap2_arb_cap", 3),
            ("vc_ctrl_arb_select", 2),
            ("vc_ctrl_load_table", 1),
            ("vc_status_arb_table", 1),
        ],
    );
    expect(
        "VC0",
        &vc.resources[0],
        &[("vc_res_cap", 0x110, 0x063f_8001), ("vc_res_ctrl", 0x114, 0x8006_00ff), ("vc_res_status", 0x11a, 0x2)],
        &[
            ("vc_res_pat_offset", 6),
            ("vc_res_max_time_slots", 0x3f),
            ("vc_res_rej_snoop", 1),
            ("vc_res_pat_cap", 1),
            ("vc_res_enable", 1),
            ("vc_res_id", 0),
            ("vc_res_arb_select", 3),
            ("vc_res_load_table", 0),
            ("vc_res_tc_map", 0xff),
            ("vc_res_nego_pending", 1),
            ("vc_res_table_status", 0),
        ],
    );
    expect(
        "VC1",
        &vc.resources[1],
        &[("vc_res_cap", 0x11c, 0x0a00_0010), ("vc_res_ctrl", 0x120, 0x0101_0002), ("vc_res_status", 0x126, 0x3)],
        &[
            ("vc_res_pat_offset", 0x0a),
            ("vc_res_max_time_slots", 0),
            ("vc_res_rej_snoop", 0),
            ("vc_res_pat_cap", 0x10),
            ("vc_res_enable", 0),
            ("vc_res_id", 1),
            ("vc_res_arb_select", 0),
            ("vc_res_load_table", 1),
            ("vc_res_tc_map", 0x02),
            ("vc_res_nego_pending", 1),
            ("vc_res_table_status", 1),
        ],
    );
    // The MFVC-function ID 0x0009 reads the same way.
    put32(&mut b, 0x100, ext_header(0x0009, 1, 0));
    assert_eq!(Config::new(&b).unwrap().virtual_channel().unwrap().unwrap().resources.len(), 2);
}

/// A PCI Express v2 endpoint capability at 0x40 whose Link Capabilities
/// (+0x0c) say 8 GT/s (3:0 = 3) x`width` (9:4), the rest zero.
fn express_at_0x40(b: &mut [u8], width: u32) {
    b[0x40..0x7c].fill(0);
    b[0x40] = 0x10;
    put16(b, 0x42, 0x0002);
    put32(b, 0x4c, (width << 4) | 3);
}

/// PCIe 6.0 §7.7.7: Margining Port Capabilities and Status, then one lane
/// control/status pair per lane of Maximum Link Width (x4 here).
#[test]
fn lane_margining() {
    let mut b = space(0, 0x40);
    express_at_0x40(&mut b, 4);
    put32(&mut b, 0x100, ext_header(0x0027, 1, 0));
    put16(&mut b, 0x104, 1); // Margining uses Driver Software (0)
    put16(&mut b, 0x106, 1); // Margining Ready (0) 1, Software Ready (1) 0
    // Lane control and status: Receiver Number 2:0, Margin Type 5:3, Usage
    // Model 6, bit 7 reserved, Margin Payload 15:8.
    let lane = |payload: u16, usage: u16, ty: u16, rcvr: u16| (payload << 8) | (usage << 6) | (ty << 3) | rcvr;
    let values = [
        ((0x9c, 0, 3, 1), (0x40, 1, 3, 1)),
        ((0x01, 1, 7, 6), (0xfe, 0, 2, 5)),
        ((0x00, 0, 1, 2), (0x80, 1, 0, 7)),
        ((0xff, 1, 0, 0), (0x0f, 0, 6, 3)),
    ];
    for (i, (c, s)) in values.iter().enumerate() {
        put16(&mut b, 0x108 + 4 * i, lane(c.0, c.1, c.2, c.3));
        put16(&mut b, 0x10a + 4 * i, lane(s.0, s.1, s.2, s.3));
    }
    let cfg = Config::new(&b).unwrap();
    let m = cfg.lane_margining().unwrap().unwrap();
    assert_eq!((m.offset, m.lane_count, m.lanes.len()), (0x100, LaneCount::LinkWidth, 4));
    expect(
        "LMR port",
        &m.port,
        &[("ext_cap_header", 0x100, 0x0001_0027), ("lmr_port_cap", 0x104, 1), ("lmr_port_status", 0x106, 1)],
        &[("lmr_cap_uses_driver", 1), ("lmr_status_sw_ready", 0), ("lmr_status_ready", 1)],
    );
    // Lane 0 worked out: control 0x9c << 8 | 3 << 3 | 1 = 0x9c19, status 0x4000 | 0x40 | 0x18 | 1 = 0x4059.
    assert_eq!((m.lanes[0].raw("lmr_lane_ctrl"), m.lanes[0].raw("lmr_lane_status")), (Some(0x9c19), Some(0x4059)));
    for (i, (c, s)) in values.iter().enumerate() {
        let at = 0x108 + 4 * i as u16;
        expect(
            &format!("LMR lane {i}"),
            &m.lanes[i],
            &[
                ("lmr_lane_ctrl", at, u64::from(lane(c.0, c.1, c.2, c.3))),
                ("lmr_lane_status", at + 2, u64::from(lane(s.0, s.1, s.2, s.3))),
            ],
            &[
                ("lmr_ctrl_payload", c.0.into()),
                ("lmr_ctrl_usage_model", c.1.into()),
                ("lmr_ctrl_type", c.2.into()),
                ("lmr_ctrl_rcvr", c.3.into()),
                ("lmr_sta_payload", s.0.into()),
                ("lmr_sta_usage_model", s.1.into()),
                ("lmr_sta_type", s.2.into()),
                ("lmr_sta_rcvr", s.3.into()),
            ],
        );
    }
    // Without a PCI Express capability: lanes up to the end of the dump, at most 32.
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x0027, 1, 0));
    let m = Config::new(&b[..0x120]).unwrap().lane_margining().unwrap().unwrap();
    assert_eq!((m.lane_count, m.lanes.len()), (LaneCount::Bounded, (0x120 - 0x108) / 4));
    let m = Config::new(&b).unwrap().lane_margining().unwrap().unwrap();
    assert_eq!(m.lanes.len(), 32);
}

/// PCIe 6.0 §7.7.9: Device Capabilities 3, Control 3 and Status 3.
#[test]
fn device3() {
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x002f, 1, 0));
    // Capabilities 3: DMWr Request Routing (0) 1, 14-Bit Tag Completer (1)
    // 1, Requester (2) 0, Receiver L0p (3) 1, Port L0p Exit Latency 6:4 = 5,
    // Retimer L0p Exit Latency 9:7 = 6.
    put32(&mut b, 0x104, (6 << 7) | (5 << 4) | (1 << 3) | (1 << 1) | 1);
    // Control 3: DMWr Requester Enable (0) 0, DMWr Egress Blocking (1) 1,
    // 14-Bit Tag Requester Enable (2) 1, L0p Enable (3) 0, Target Link Width 6:4 = 3.
    put32(&mut b, 0x108, (3 << 4) | (1 << 2) | (1 << 1));
    // Status 3: Initial Link Width 2:0 = 4, Segment Captured (3) 1, Remote L0p (4) 1.
    put32(&mut b, 0x10c, (1 << 4) | (1 << 3) | 4);
    let d = Config::new(&b).unwrap().device3().unwrap().unwrap();
    expect(
        "Device 3",
        &d,
        &[
            ("ext_cap_header", 0x100, 0x0001_002f),
            ("devcap3", 0x104, 0x35b),
            ("devctl3", 0x108, 0x36),
            ("devsta3", 0x10c, 0x1c),
        ],
        &[
            ("devcap3_retimer_l0p_exit", 6),
            ("devcap3_port_l0p_exit", 5),
            ("devcap3_l0p", 1),
            ("devcap3_tag14_req", 0),
            ("devcap3_tag14_comp", 1),
            ("devcap3_dmwr_route", 1),
            ("devctl3_target_link_width", 3),
            ("devctl3_l0p_en", 0),
            ("devctl3_tag14_req_en", 1),
            ("devctl3_dmwr_egress_block", 1),
            ("devctl3_dmwr_req_en", 0),
            ("devsta3_remote_l0p", 1),
            ("devsta3_segment_captured", 1),
            ("devsta3_initial_link_width", 4),
        ],
    );
}

/// PCIe 6.0 §7.9.26.2-3: IDE Capability and IDE Control.
#[test]
fn ide() {
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x0030, 1, 0));
    // Capability: Link (0) 1, Selective (1) 1, Flow-Through (2) 0, Partial
    // Header (3) 1, Aggregation (4) 0, PCRC (5) 1, IDE_KM (6) 1, Selective
    // for Configuration (7) 0, Supported Algorithms 12:8 = 0x11, Link TCs
    // 15:13 = 7, Selective Streams 23:16 = 0x0e, TEE-Limited (24) 1.
    put32(&mut b, 0x104, (1 << 24) | (0x0e << 16) | (7 << 13) | (0x11 << 8) | 0b0110_1011);
    // Control: Flow-Through IDE Stream Enabled (2).
    put32(&mut b, 0x108, 1 << 2);
    let d = Config::new(&b).unwrap().ide().unwrap().unwrap();
    expect(
        "IDE",
        &d,
        &[("ext_cap_header", 0x100, 0x0001_0030), ("ide_cap", 0x104, 0x010e_f16b), ("ide_ctrl", 0x108, 4)],
        &[
            ("ide_cap_tee_limited", 1),
            ("ide_cap_sel_streams", 0x0e),
            ("ide_cap_link_tcs", 7),
            ("ide_cap_algorithms", 0x11),
            ("ide_cap_sel_cfg", 0),
            ("ide_cap_ide_km", 1),
            ("ide_cap_pcrc", 1),
            ("ide_cap_aggregation", 0),
            ("ide_cap_partial_header", 1),
            ("ide_cap_flow_through", 0),
            ("ide_cap_selective", 1),
            ("ide_cap_link", 1),
            ("ide_ctrl_flow_through", 1),
        ],
    );
}

/// PCIe 6.0 §7.8.3: L1 PM Substates Capabilities, Control 1 and Control 2.
#[test]
fn l1ss() {
    let mut b = space(0, 0);
    put32(&mut b, 0x100, ext_header(0x001e, 1, 0));
    // Capabilities: PCI-PM L1.2 (0) 1, PCI-PM L1.1 (1) 0, ASPM L1.2 (2) 1,
    // ASPM L1.1 (3) 1, L1 PM Substates (4) 1, Common_Mode_Restore_Time
    // 15:8 = 40, T_POWER_ON Scale 17:16 = 1 (10 us), Value 23:19 = 11.
    put32(&mut b, 0x104, (11 << 19) | (1 << 16) | (40 << 8) | 0b1_1101);
    // Control 1: PCI-PM L1.2 (0) 0, PCI-PM L1.1 (1) 1, ASPM L1.2 (2) 1,
    // ASPM L1.1 (3) 0, Common_Mode_Restore_Time 15:8 = 0x37,
    // LTR_L1.2_THRESHOLD_Value 25:16 = 0x2a5, Scale 31:29 = 2 (1024 ns).
    put32(&mut b, 0x108, (2 << 29) | (0x2a5 << 16) | (0x37 << 8) | 0b0110);
    // Control 2: T_POWER_ON Scale 1:0 = 2 (100 us), Value 7:3 = 19.
    put32(&mut b, 0x10c, (19 << 3) | 2);
    let l = Config::new(&b).unwrap().l1ss().unwrap().unwrap();
    expect(
        "L1SS",
        &l,
        &[
            ("ext_cap_header", 0x100, 0x0001_001e),
            ("l1ss_cap", 0x104, 0x0059_281d),
            ("l1ss_ctl1", 0x108, 0x42a5_3706),
            ("l1ss_ctl2", 0x10c, 0x9a),
        ],
        &[
            ("l1ss_cap_pcipm_l1_2", 1),
            ("l1ss_cap_pcipm_l1_1", 0),
            ("l1ss_cap_aspm_l1_2", 1),
            ("l1ss_cap_aspm_l1_1", 1),
            ("l1ss_cap_l1_pm_ss", 1),
            ("l1ss_cap_cm_restore_time", 40),
            ("l1ss_cap_p_pwr_on_scale", 1),
            ("l1ss_cap_p_pwr_on_value", 11),
            ("l1ss_ctl1_pcipm_l1_2", 0),
            ("l1ss_ctl1_pcipm_l1_1", 1),
            ("l1ss_ctl1_aspm_l1_2", 1),
            ("l1ss_ctl1_aspm_l1_1", 0),
            ("l1ss_ctl1_cm_restore_time", 0x37),
            ("l1ss_ctl1_ltr_l12_th_value", 0x2a5),
            ("l1ss_ctl1_ltr_l12_th_scale", 2),
            ("l1ss_ctl2_t_pwr_on_scale", 2),
            ("l1ss_ctl2_t_pwr_on_value", 19),
        ],
    );
    // §7.8.3.2 scales 2/10/100 us, 3 reserved; §7.8.3.3 value × 32^scale ns.
    assert_eq!(t_power_on_us(1, 11), Some(110));
    assert_eq!(t_power_on_us(2, 19), Some(1900));
    assert_eq!(t_power_on_us(3, 1), None);
    assert_eq!(ltr_l12_threshold_ns(2, 0x2a5), Some(677 * 1024));
    assert_eq!(ltr_l12_threshold_ns(6, 1), None);
    COMPARED.fetch_add(5, Ordering::Relaxed);
}

/// EA ECN §6.9.1: a type 0 function with a 32-bit and a 64-bit entry, then
/// a type 1 function (fixed bus numbers at +4, entries at +8).
#[test]
fn enhanced_allocation() {
    let mut b = space(0, 0x40);
    // First DW: ID 0x14, next 0, Num Entries 5:0 of +2 = 2.
    b[0x40] = 0x14;
    b[0x41] = 0;
    put16(&mut b, 0x42, 2);
    // Entry 0 DW0: Entry Size 2:0 = 2, BEI 7:4 = 2, Primary Properties 15:8
    // = 0x00, Secondary 23:16 = 0xfd, Writable (30) 0, Enable (31) 1.
    put32(&mut b, 0x44, (1 << 31) | (0xfd << 16) | (2 << 4) | 2);
    put32(&mut b, 0x48, 0xfe00_0000); // Base 31:2, bit 1 (64-bit) 0
    put32(&mut b, 0x4c, 0x00ff_fffc); // MaxOffset 31:2, bit 1 0
    // Entry 1: Entry Size 4, BEI 4, PP 0x01, SP 0x03, Writable 1, Enable 0;
    // Base and MaxOffset 64-bit (bit 1), their upper dwords after both lower.
    put32(&mut b, 0x50, (1 << 30) | (0x03 << 16) | (0x01 << 8) | (4 << 4) | 4);
    put32(&mut b, 0x54, 0x8000_0000 | 2);
    put32(&mut b, 0x58, 0xffff_fffc | 2);
    put32(&mut b, 0x5c, 0x38);
    put32(&mut b, 0x60, 0x1);
    let cfg = Config::new(&b).unwrap();
    let ea = cfg.enhanced_allocation().unwrap().unwrap();
    assert_eq!((ea.offset, ea.bridge_buses.is_none(), ea.entries.len()), (0x40, true, 2));
    expect(
        "EA header",
        &ea.header,
        &[("cap_id", 0x40, 0x14), ("cap_next", 0x41, 0), ("ea_num_ent", 0x42, 2)],
        &[("ea_num_ent_count", 2)],
    );
    let e = &ea.entries[0];
    assert_eq!(
        (e.offset, e.enable, e.writable, e.size_dw, e.bei, e.primary, e.secondary),
        (0x44, true, false, 2, 2, 0x00, 0xfd)
    );
    assert_eq!(
        (e.base, e.max_offset, e.base_is_64, e.max_offset_is_64, e.bar()),
        (0xfe00_0000, 0xff_ffff, false, false, Some(2))
    );
    expect(
        "EA entry 0",
        &e.block,
        &[("ea_entry_dw0", 0x44, 0x80fd_0022), ("ea_base", 0x48, 0xfe00_0000), ("ea_max_offset", 0x4c, 0x00ff_fffc)],
        &[
            ("ea_enable", 1),
            ("ea_writable", 0),
            ("ea_sp", 0xfd),
            ("ea_pp", 0x00),
            ("ea_bei", 2),
            ("ea_es", 2),
            ("ea_base_addr", 0x3f80_0000),
            ("ea_base_is_64", 0),
            ("ea_max_offset_addr", 0x003f_ffff),
            ("ea_max_offset_is_64", 0),
        ],
    );
    let e = &ea.entries[1];
    assert_eq!(
        (e.offset, e.enable, e.writable, e.size_dw, e.bei, e.primary, e.secondary),
        (0x50, false, true, 4, 4, 0x01, 0x03)
    );
    assert_eq!(
        (e.base, e.max_offset, e.base_is_64, e.max_offset_is_64, e.bar()),
        (0x38_8000_0000, 0x1_ffff_ffff, true, true, Some(4))
    );
    expect(
        "EA entry 1",
        &e.block,
        &[("ea_entry_dw0", 0x50, 0x4003_0144), ("ea_base", 0x54, 0x8000_0002), ("ea_max_offset", 0x58, 0xffff_fffe)],
        &[
            ("ea_enable", 0),
            ("ea_writable", 1),
            ("ea_sp", 0x03),
            ("ea_pp", 0x01),
            ("ea_bei", 4),
            ("ea_es", 4),
            ("ea_base_addr", 0x2000_0000),
            ("ea_base_is_64", 1),
            ("ea_max_offset_addr", 0x3fff_ffff),
            ("ea_max_offset_is_64", 1),
        ],
    );
    COMPARED.fetch_add(24, Ordering::Relaxed);
    // Entry Size 1 cannot hold Base and MaxOffset.
    put32(&mut b, 0x44, (1 << 31) | 1);
    assert_eq!(
        Config::new(&b).unwrap().enhanced_allocation().unwrap(),
        Err(CapError::BadField { offset: 0x40, field: "EA Entry Size", value: 1 })
    );

    // Type 1: Fixed Secondary Bus 7:0 = 2, Fixed Subordinate Bus 15:8 = 5 at +4.
    let mut b = space(1, 0x40);
    b[0x40] = 0x14;
    b[0x41] = 0;
    put16(&mut b, 0x42, 1);
    put32(&mut b, 0x44, (5 << 8) | 2);
    // One entry, BEI 6 (behind the bridge), PP 0x05, SP 0xff, 32-bit.
    put32(&mut b, 0x48, (1 << 31) | (0xff << 16) | (0x05 << 8) | (6 << 4) | 2);
    put32(&mut b, 0x4c, 0xc000_0000);
    put32(&mut b, 0x50, 0x0fff_fffc);
    let ea = Config::new(&b).unwrap().enhanced_allocation().unwrap().unwrap();
    expect(
        "EA buses",
        ea.bridge_buses.as_ref().unwrap(),
        &[("ea_buses", 0x44, 0x0502)],
        &[("ea_sub_bus", 5), ("ea_sec_bus", 2)],
    );
    let e = &ea.entries[0];
    assert_eq!((e.offset, e.bei, e.primary, e.secondary, e.bar()), (0x48, 6, 0x05, 0xff, None));
    assert_eq!((e.base, e.max_offset), (0xc000_0000, 0x0fff_ffff));
    assert_eq!(marrow_pcie::ea::bei_text(6), "resource behind function");
    COMPARED.fetch_add(7, Ordering::Relaxed);
}

/// PCI 3.0 §6.2.5.2 (type 0 at 0x30) and P2P 1.2 §3.2.5.14 (type 1 at
/// 0x38): address 31:11, enable bit 0; bits 10:1 are not address.
#[test]
fn expansion_rom() {
    let mut b = space(0, 0);
    put32(&mut b, 0x30, 0xfeb0_07ff);
    let cfg = Config::new(&b).unwrap();
    let rom = cfg.expansion_rom().unwrap();
    assert_eq!((rom.register, rom.address, rom.enabled), (0x30, 0xfeb0_0000, true));
    let h = cfg.header_block();
    assert_eq!(h.register("rom_address").map(|r| (r.offset, r.raw)), Some((0x30, 0xfeb0_07ff)));
    assert_eq!((h.get("rom_address_mask"), h.get("rom_address_enable")), (Some(0xfeb0_0000 >> 11), Some(1)));
    let mut b = space(1, 0);
    put32(&mut b, 0x38, 0x000f_f800);
    put32(&mut b, 0x30, 0xffff_ffff); // a type 0 ROM offset: the I/O upper halves here
    let cfg = Config::new(&b).unwrap();
    let rom = cfg.expansion_rom().unwrap();
    assert_eq!((rom.register, rom.address, rom.enabled), (0x38, 0x000f_f800, false));
    let h = cfg.header_block();
    assert_eq!(h.register("rom_address1").map(|r| (r.offset, r.raw)), Some((0x38, 0x000f_f800)));
    assert_eq!((h.get("rom_address_mask"), h.get("rom_address_enable")), (Some(0x1ff), Some(0)));
    put32(&mut b, 0x38, 0);
    assert_eq!(Config::new(&b).unwrap().expansion_rom(), None);
    // CardBus bridges have no ROM register.
    assert_eq!(Config::new(&space(2, 0)).unwrap().expansion_rom(), None);
    COMPARED.fetch_add(16, Ordering::Relaxed);
}

/// P2P 1.2 §3.2.5.6-10: I/O base/limit (0x1c/0x1d, address 15:12 in 7:4,
/// 32-bit when 3:0 = 1, upper halves at 0x30/0x32), memory base/limit
/// (0x20/0x22, address 31:20 in 15:4) and prefetchable (0x24/0x26, 64-bit
/// when 3:0 = 1, upper halves at 0x28/0x2c).
#[test]
fn bridge_windows() {
    let mut b = space(1, 0);
    b[0x1c] = 0x21;
    b[0x1d] = 0x31;
    put16(&mut b, 0x30, 0x0001);
    put16(&mut b, 0x32, 0x0001);
    put16(&mut b, 0x20, 0xfe1f); // 3:0 read-only zero in the spec; not address bits
    put16(&mut b, 0x22, 0xfe30);
    put16(&mut b, 0x24, 0x0011);
    put16(&mut b, 0x26, 0x0ff1);
    put32(&mut b, 0x28, 0x38);
    put32(&mut b, 0x2c, 0x39);
    let w = Config::new(&b).unwrap().bridge_windows().unwrap();
    assert_eq!((w.io.base, w.io.limit, w.io.wide, w.io.is_open()), (0x1_2000, 0x1_3fff, true, true));
    assert_eq!((w.memory.base, w.memory.limit, w.memory.is_open()), (0xfe10_0000, 0xfe3f_ffff, true));
    assert_eq!(
        (w.prefetchable.base, w.prefetchable.limit, w.prefetchable.wide),
        (0x38_0010_0000, 0x39_0fff_ffff, true)
    );
    let h = Config::new(&b).unwrap().header_block();
    for (name, want) in [
        ("io_range_addr", 2),
        ("io_range_type", 1),
        ("io_limit_addr", 3),
        ("io_limit_type", 1),
        ("memory_range_addr", 0xfe1),
        ("memory_limit_addr", 0xfe3),
        ("pref_range_addr", 0x001),
        ("pref_range_type", 1),
        ("pref_limit_addr", 0x0ff),
        ("pref_limit_type", 1),
    ] {
        assert_eq!(h.get(name), Some(want), "{name}");
    }
    for (name, at, want) in [
        ("io_base", 0x1c, 0x21),
        ("io_limit", 0x1d, 0x31),
        ("memory_base", 0x20, 0xfe1f),
        ("memory_limit", 0x22, 0xfe30),
        ("pref_memory_base", 0x24, 0x0011),
        ("pref_memory_limit", 0x26, 0x0ff1),
        ("pref_base_upper32", 0x28, 0x38),
        ("pref_limit_upper32", 0x2c, 0x39),
        ("io_base_upper16", 0x30, 1),
        ("io_limit_upper16", 0x32, 1),
    ] {
        assert_eq!(h.register(name).map(|r| (r.offset, r.raw)), Some((at, want)), "{name}");
    }
    // 16-bit I/O and 32-bit prefetchable: the (poisoned) upper halves do not
    // count; base above limit closes a window.
    let mut b = space(1, 0);
    b[0x1c] = 0xf0;
    b[0x1d] = 0x00;
    put16(&mut b, 0x20, 0x0010);
    put16(&mut b, 0x22, 0x0000);
    put16(&mut b, 0x24, 0xc000);
    put16(&mut b, 0x26, 0xdff0);
    let w = Config::new(&b).unwrap().bridge_windows().unwrap();
    assert_eq!((w.io.base, w.io.limit, w.io.wide, w.io.is_open()), (0xf000, 0x0fff, false, false));
    assert_eq!((w.memory.base, w.memory.limit, w.memory.is_open()), (0x0010_0000, 0x000f_ffff, false));
    assert_eq!(
        (w.prefetchable.base, w.prefetchable.limit, w.prefetchable.wide, w.prefetchable.is_open()),
        (0xc000_0000, 0xdfff_ffff, false, true)
    );
    assert_eq!(Config::new(&space(0, 0)).unwrap().bridge_windows(), None);
    COMPARED.fetch_add(10 + 20 + 11 + 1, Ordering::Relaxed);
}

/// P2P 1.2 §3.2.5.13 and the SSVID capability (ID 0x0d): subsystem vendor
/// at +4, subsystem ID at +6, +2 reserved.
#[test]
fn bridge_subsystem() {
    let mut b = space(1, 0x80);
    b[0x80] = 0x0d;
    b[0x81] = 0x00;
    put16(&mut b, 0x84, 0x1af4);
    put16(&mut b, 0x86, 0x1100);
    let cfg = Config::new(&b).unwrap();
    let s = cfg.bridge_subsystem().unwrap().unwrap();
    assert_eq!((s.offset, s.vendor, s.device), (0x80, 0x1af4, 0x1100));
    // A type 1 header has no subsystem IDs at 0x2c (those bytes are prefetchable upper bits).
    assert_eq!(cfg.subsystem(), None);
    let short = Config::new(&b[..0x84]).unwrap();
    assert_eq!(short.bridge_subsystem(), Some(Err(CapError::Truncated { offset: 0x80, need: 8, len: 0x84 })));
    COMPARED.fetch_add(5, Ordering::Relaxed);
}

/// The CardBus header (Linux `PCI_CB_*`): capability pointer at 0x14,
/// subsystem IDs at 0x40/0x42, one BAR (socket/ExCa base at 0x10), and
/// 0x34 is not a capability pointer there.
#[test]
fn cardbus_header() {
    let mut b = space(2, 0x80);
    put16(&mut b, 0x04, 0x0007);
    put32(&mut b, 0x08, 0x0607_0001);
    b[0x0c..0x10].copy_from_slice(&[0x10, 0x40, 0x02, 0x00]);
    put32(&mut b, 0x10, 0xfebf_f000);
    b[0x15] = 0x00;
    put16(&mut b, 0x16, 0x0200);
    b[0x18..0x1c].copy_from_slice(&[0x00, 0x02, 0x05, 0xb0]);
    for (i, v) in
        [0x2000_0000u32, 0x21ff_f000, 0x2400_0000, 0x25ff_f000, 0x1000, 0x10ff, 0x1400, 0x14ff].iter().enumerate()
    {
        put32(&mut b, 0x1c + 4 * i, *v);
    }
    b[0x3c] = 0x0b;
    b[0x3d] = 0x01;
    put16(&mut b, 0x3e, 0x0540);
    put16(&mut b, 0x40, 0x104c);
    put16(&mut b, 0x42, 0xac56);
    put32(&mut b, 0x44, 0x0000_0001);
    b[0x80] = 0x01; // PM, found through 0x14
    b[0x81] = 0x00;
    b[0x34] = 0x90; // ignored: a PM at 0x90 would be a second capability
    b[0x90] = 0x05;
    b[0x91] = 0x00;
    let cfg = Config::new(&b).unwrap();
    assert_eq!(cfg.capability_pointer_offset(), 0x14);
    assert_eq!(cfg.capability_pointer(), Some(0x80));
    let caps: Vec<_> = cfg.caps().map(Result::unwrap).map(|c| (c.offset, c.id.0)).collect();
    assert_eq!(caps, vec![(0x80, 0x01)]);
    assert_eq!(cfg.subsystem(), Some((0x104c, 0xac56)));
    assert_eq!(cfg.bar_slots(), 1);
    let regs: &[(&str, u16, u64)] = &[
        ("vendor_id", 0x00, 0x15b3),
        ("device_id", 0x02, 0x1021),
        ("command", 0x04, 0x0007),
        ("status", 0x06, 0x0010),
        ("class_revision", 0x08, 0x0607_0001),
        ("cache_line_size", 0x0c, 0x10),
        ("latency_timer", 0x0d, 0x40),
        ("header_type", 0x0e, 0x02),
        ("bist", 0x0f, 0x00),
        ("cb_socket_base", 0x10, 0xfebf_f000),
        ("cb_capability_list", 0x14, 0x80),
        ("cb_sec_status", 0x16, 0x0200),
        ("cb_primary_bus", 0x18, 0x00),
        ("cb_card_bus", 0x19, 0x02),
        ("cb_subordinate_bus", 0x1a, 0x05),
        ("cb_latency_timer", 0x1b, 0xb0),
        ("cb_memory_base_0", 0x1c, 0x2000_0000),
        ("cb_memory_limit_0", 0x20, 0x21ff_f000),
        ("cb_memory_base_1", 0x24, 0x2400_0000),
        ("cb_memory_limit_1", 0x28, 0x25ff_f000),
        ("cb_io_base_0", 0x2c, 0x1000),
        ("cb_io_limit_0", 0x30, 0x10ff),
        ("cb_io_base_1", 0x34, 0x1490),
        ("cb_io_limit_1", 0x38, 0x14ff),
        ("interrupt_line", 0x3c, 0x0b),
        ("interrupt_pin", 0x3d, 0x01),
        ("cb_bridge_control", 0x3e, 0x0540),
        ("cb_subsystem_vendor_id", 0x40, 0x104c),
        ("cb_subsystem_id", 0x42, 0xac56),
        ("cb_legacy_mode_base", 0x44, 0x0000_0001),
    ];
    // 0x34 is both cb_io_base_1's low byte and the byte lspci would misread.
    let h = cfg.header_block();
    // The bits, from Linux's pci_regs.h masks: Command 0x0007 is PCI_COMMAND_IO,
    // _MEMORY and _MASTER; Status 0x0010 is PCI_STATUS_CAP_LIST; BIST 0x00;
    // the secondary status 0x0200 is a DEVSEL timing, not PCI_STATUS_SIG_SYSTEM_ERROR
    // (0x4000); Bridge Control 0x0540 is PCI_CB_BRIDGE_CTL_CB_RESET (0x40),
    // _PREFETCH_MEM0 (0x100) and _POST_WRITES (0x400).
    let ones = ["command_io", "command_memory", "command_master", "status_cap_list"];
    let ones_cb = ["cb_bridge_ctl_cb_reset", "cb_bridge_ctl_prefetch_mem0", "cb_bridge_ctl_post_writes"];
    let fields: Vec<(&str, u64)> = h
        .registers
        .iter()
        .flat_map(|r| r.layout.bits.iter().map(|b| b.name))
        .map(|n| (n, u64::from(ones.contains(&n) || ones_cb.contains(&n))))
        .collect();
    assert_eq!(fields.len(), 37, "the CardBus header's named bit ranges: {fields:?}");
    expect("CardBus header", &h, regs, &fields);
    // A 64-byte dump: the registers it holds, no subsystem IDs.
    let cfg = Config::new(&b[..64]).unwrap();
    let h = cfg.header_block();
    let in_64: Vec<_> = regs.iter().filter(|r| r.1 < 0x40).cloned().collect();
    expect("CardBus header, 64 bytes", &h, &in_64, &fields);
    assert_eq!(cfg.subsystem(), None);
    assert!(cfg.capabilities_not_dumped());
    COMPARED.fetch_add(6, Ordering::Relaxed);
}

#[test]
fn ext_ids_are_the_spec_ids() {
    // PCI Code and ID Assignment 1.11 §3 (Extended Capability IDs).
    for (id, want) in [
        (ExtCapId::VC, 0x0002),
        (ExtCapId::VC9, 0x0009),
        (ExtCapId::ARI, 0x000e),
        (ExtCapId::L1SS, 0x001e),
        (ExtCapId::PTM, 0x001f),
        (ExtCapId::DVSEC, 0x0023),
        (ExtCapId::LMR, 0x0027),
        (ExtCapId::DOE, 0x002e),
        (ExtCapId::DEV3, 0x002f),
        (ExtCapId::IDE, 0x0030),
    ] {
        assert_eq!(id.0, want);
    }
}
