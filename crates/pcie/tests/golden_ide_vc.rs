//! Golden values for the IDE stream register blocks (PCIe Base 6.0
//! §7.9.26.4, §7.9.26.5) and the Virtual Channel arbitration tables
//! (§7.9.1.9, §7.9.1.10). Each case starts from 4 KiB of 0xA5, writes the
//! registers with values whose bit positions were worked out by hand from
//! those sections (the shifts are written out here, not taken from
//! `hw-specs/pcie.toml`), and checks offsets, raw values and every named
//! field; then the same capabilities cut by the next capability or by the
//! end of the dump, which must be errors naming the block, not panics.

mod golden;

use golden::expect;
use marrow_pcie::Config;
use marrow_pcie::cap_id::ExtCapId;
use marrow_pcie::ide_selective::address_range;
use marrow_pcie::regs::{CapError, ext_cap_end};
use marrow_pcie::walk::ExtCap;

const POISON: u8 = 0xA5;

/// 4 KiB of poison: 15b3:1021, no standard capabilities, the extended
/// list starting at 0x100 with whatever the test writes there.
fn space() -> Vec<u8> {
    let mut b = vec![POISON; 4096];
    b[0..8].copy_from_slice(&[0xb3, 0x15, 0x21, 0x10, 0, 0, 0, 0]);
    b[0x0e] = 0;
    b
}

fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

/// Extended capability header (§7.6.3): ID 15:0, version 19:16, next 31:20.
fn ext_header(id: u16, version: u32, next: u32) -> u32 {
    u32::from(id) | (version << 16) | (next << 20)
}

/// §7.9.26.2: IDE Capability with Link IDE Stream Supported (bit 0) and
/// Number of TCs Supported for Link IDE (15:13) = 1: two link streams.
fn ide_two_link_streams(next: u32) -> Vec<u8> {
    let mut b = space();
    put32(&mut b, 0x100, ext_header(0x0030, 1, next));
    put32(&mut b, 0x104, (1 << 13) | 1);
    put32(&mut b, 0x108, 0);
    // Link stream 0 control (§7.9.26.4.1): Enable (0) 1, Tx Aggregation
    // NPR 3:2 = 1, PR 5:4 = 2, CPL 7:6 = 3, PCRC Enable (8) 1, Partial
    // Header Encryption Mode 13:10 = 5, Algorithm 18:14 = 0 (not written),
    // TC 21:19 = 6, Stream ID 31:24 = 0x42.
    put32(&mut b, 0x10c, 1 | (1 << 2) | (2 << 4) | (3 << 6) | (1 << 8) | (5 << 10) | (6 << 19) | (0x42 << 24));
    // Status (§7.9.26.4.2): state 3:0 = 2 (Secure), Integrity Check Fail (31) 1.
    put32(&mut b, 0x110, (1 << 31) | 2);
    // Link stream 1: Stream ID 0x43, everything else 0.
    put32(&mut b, 0x114, 0x43 << 24);
    put32(&mut b, 0x118, 0);
    b
}

#[test]
fn ide_link_streams() {
    let b = ide_two_link_streams(0);
    let s = Config::new(&b).unwrap().ide_streams().unwrap().unwrap();
    assert_eq!((s.offset, s.link.len(), s.selective.len(), s.selective_count(), s.stopped), (0x100, 2, 0, 0, None));
    let ctrl0 = 0x4230_15e5;
    expect(
        "link stream 0",
        &s.link[0],
        &[("ide_link_ctrl", 0x10c, ctrl0), ("ide_link_status", 0x110, 0x8000_0002)],
        &[
            ("ide_link_ctrl_stream_id", 0x42),
            ("ide_link_ctrl_tc", 6),
            ("ide_link_ctrl_alg", 0),
            ("ide_link_ctrl_part_enc", 5),
            ("ide_link_ctrl_pcrc_en", 1),
            ("ide_link_ctrl_aggr_cpl", 3),
            ("ide_link_ctrl_aggr_pr", 2),
            ("ide_link_ctrl_aggr_npr", 1),
            ("ide_link_ctrl_en", 1),
            ("ide_link_status_fail", 1),
            ("ide_link_status_state", 2),
        ],
    );
    assert_eq!(s.link[1].offset, 0x114);
    assert_eq!(s.link[1].get("ide_link_ctrl_stream_id"), Some(0x43));
    assert_eq!(s.link[1].raw("ide_link_status"), Some(0));
}

/// §7.9.26.2: Selective IDE Streams Supported (bit 1), Number of Selective
/// IDE Streams Supported (23:16) = 1: two selective streams, the first at
/// +0x0c since there is no link block; stream 0 has two address blocks.
fn ide_two_selective_streams(next: u32) -> Vec<u8> {
    let mut b = space();
    put32(&mut b, 0x100, ext_header(0x0030, 1, next));
    put32(&mut b, 0x104, (1 << 16) | (1 << 1));
    put32(&mut b, 0x108, 0);
    // Stream 0 capability (§7.9.26.5.1): Address Association blocks 3:0 = 2.
    put32(&mut b, 0x10c, 2);
    // Control (§7.9.26.5.2): Enable (0), Config Requests (9), TC 21:19 = 3,
    // Default Stream (22), TEE-limited (23), Stream ID 31:24 = 0x10.
    put32(&mut b, 0x110, 1 | (1 << 9) | (3 << 19) | (1 << 22) | (1 << 23) | (0x10 << 24));
    // Status (§7.9.26.5.3): state 3:0 = 2.
    put32(&mut b, 0x114, 2);
    // RID Association 1 (§7.9.26.5.4.1): RID Limit 23:8 = 0x02ff.
    put32(&mut b, 0x118, 0x02ff << 8);
    // RID Association 2 (§7.9.26.5.4.2): V (0), RID Base 23:8 = 0x0200, 31:24 = 5.
    put32(&mut b, 0x11c, 1 | (0x0200 << 8) | (5 << 24));
    // Address block 0 (§7.9.26.5.5): V (0), Memory Base Lower 19:8 = 0x800,
    // Memory Limit Lower 31:20 = 0x8ff; Limit Upper 1, Base Upper 1.
    put32(&mut b, 0x120, 1 | (0x800 << 8) | (0x8ff << 20));
    put32(&mut b, 0x124, 1);
    put32(&mut b, 0x128, 1);
    // Address block 1: not valid, base and limit lower 0x001, uppers 0.
    put32(&mut b, 0x12c, (0x001 << 8) | (0x001 << 20));
    put32(&mut b, 0x130, 0);
    put32(&mut b, 0x134, 0);
    // Stream 1 at 0x10c + 20 + 2 * 12 = 0x138: no address blocks, ID 0x11.
    put32(&mut b, 0x138, 0);
    put32(&mut b, 0x13c, 0x11 << 24);
    for at in [0x140, 0x144, 0x148] {
        put32(&mut b, at, 0);
    }
    b
}

#[test]
fn ide_selective_streams() {
    let b = ide_two_selective_streams(0);
    let s = Config::new(&b).unwrap().ide_streams().unwrap().unwrap();
    assert_eq!((s.link.len(), s.selective.len(), s.selective_count(), s.stopped), (0, 2, 2, None));
    let st = &s.selective[0];
    expect(
        "selective stream 0",
        &st.regs,
        &[
            ("ide_sel_cap", 0x10c, 2),
            ("ide_sel_ctrl", 0x110, 0x10d8_0201),
            ("ide_sel_status", 0x114, 2),
            ("ide_sel_rid1", 0x118, 0x2_ff00),
            ("ide_sel_rid2", 0x11c, 0x0502_0001),
        ],
        &[
            ("ide_sel_cap_addr_blocks", 2),
            ("ide_sel_ctrl_stream_id", 0x10),
            ("ide_sel_ctrl_tee_limited", 1),
            ("ide_sel_ctrl_default", 1),
            ("ide_sel_ctrl_tc", 3),
            ("ide_sel_ctrl_alg", 0),
            ("ide_sel_ctrl_part_enc", 0),
            ("ide_sel_ctrl_cfg_en", 1),
            ("ide_sel_ctrl_pcrc_en", 0),
            ("ide_sel_ctrl_aggr_cpl", 0),
            ("ide_sel_ctrl_aggr_pr", 0),
            ("ide_sel_ctrl_aggr_npr", 0),
            ("ide_sel_ctrl_en", 1),
            ("ide_sel_status_fail", 0),
            ("ide_sel_status_state", 2),
            ("ide_sel_rid1_limit", 0x02ff),
            ("ide_sel_rid2_segment", 5),
            ("ide_sel_rid2_base", 0x0200),
            ("ide_sel_rid2_valid", 1),
        ],
    );
    assert_eq!(st.addresses.len(), 2);
    expect(
        "address association 0",
        &st.addresses[0],
        &[("ide_addr1", 0x120, 0x8ff8_0001), ("ide_addr2", 0x124, 1), ("ide_addr3", 0x128, 1)],
        &[("ide_addr1_limit_low", 0x8ff), ("ide_addr1_base_low", 0x800), ("ide_addr1_valid", 1)],
    );
    // Base: upper 1, bits 31:20 0x800; limit: upper 1, bits 31:20 0x8ff, 19:0 ones.
    assert_eq!(address_range(&st.addresses[0]), (0x1_8000_0000, 0x1_8fff_ffff));
    assert_eq!(address_range(&st.addresses[1]), (0x10_0000, 0x1f_ffff));
    assert!(!st.addresses[1].flag("ide_addr1_valid"));
    // The second stream is found by the first one's size.
    assert_eq!((s.selective[1].regs.offset, s.selective[1].addresses.len()), (0x138, 0));
    assert_eq!(s.selective[1].regs.get("ide_sel_ctrl_stream_id"), Some(0x11));
}

/// Link streams come first, selective ones after them.
#[test]
fn ide_link_then_selective() {
    let mut b = ide_two_link_streams(0);
    // Both kinds, 2 link TCs, 1 selective stream (count 0 = 1 stream) with no address blocks.
    put32(&mut b, 0x104, (1 << 13) | (1 << 1) | 1);
    put32(&mut b, 0x11c, 0);
    put32(&mut b, 0x120, 0x77 << 24);
    let s = Config::new(&b).unwrap().ide_streams().unwrap().unwrap();
    assert_eq!((s.link.len(), s.selective.len(), s.stopped), (2, 1, None));
    assert_eq!(s.selective[0].regs.offset, 0x11c);
    assert_eq!(s.selective[0].regs.get("ide_sel_ctrl_stream_id"), Some(0x77));
}

#[test]
fn ide_blocks_past_the_capability_or_the_dump_are_errors() {
    // The next capability at 0x128 cuts address block 0 (0x120..0x12c).
    let mut b = ide_two_selective_streams(0x128);
    put32(&mut b, 0x128, ext_header(0, 0, 0));
    let s = Config::new(&b).unwrap().ide_streams().unwrap().unwrap();
    assert_eq!(s.stopped, Some(CapError::Overrun { offset: 0x100, at: 0x120, len: 12, end: 0x128 }));
    assert_eq!((s.selective.len(), s.selective[0].addresses.len()), (1, 0), "the stream's own registers are kept");
    // The dump ending at 0x130 cuts address block 1 (0x12c..0x138).
    let b = ide_two_selective_streams(0);
    let s = Config::new(&b[..0x130]).unwrap().ide_streams().unwrap().unwrap();
    assert_eq!(s.stopped, Some(CapError::Truncated { offset: 0x100, need: 0x38, len: 0x130 }));
    assert_eq!(s.selective[0].addresses.len(), 1);
    // Eight link streams (TCs 15:13 = 7) from 0x10c; the next capability at
    // 0x140 cuts the seventh (0x13c..0x144).
    let mut b = ide_two_link_streams(0x140);
    put32(&mut b, 0x104, (7 << 13) | 1);
    put32(&mut b, 0x140, ext_header(0, 0, 0));
    let s = Config::new(&b).unwrap().ide_streams().unwrap().unwrap();
    assert_eq!(s.link.len(), 6);
    assert_eq!(s.stopped, Some(CapError::Overrun { offset: 0x100, at: 0x13c, len: 8, end: 0x140 }));
    // 256 selective streams counted (23:16 = 0xff) in a 4 KiB space: the walk stops at the end.
    let mut b = space();
    put32(&mut b, 0x100, ext_header(0x0030, 1, 0));
    put32(&mut b, 0x104, (0xff << 16) | (1 << 1));
    b[0x10c..].fill(0);
    let s = Config::new(&b).unwrap().ide_streams().unwrap().unwrap();
    assert_eq!(s.selective.len(), (4096 - 0x10c) / 20);
    assert!(matches!(s.stopped, Some(CapError::Overrun { offset: 0x100, end: 4096, .. })));
    // The capability's own registers cut: an error for the whole.
    let b = ide_two_link_streams(0);
    assert_eq!(
        Config::new(&b[..0x108]).unwrap().ide_streams(),
        Some(Err(CapError::Truncated { offset: 0x100, need: 12, len: 0x108 }))
    );
    // A next pointer below the capability bounds nothing (§7.6.3 fixes no order).
    let below = ExtCap { offset: 0x200, id: ExtCapId::IDE, version: 1, next: 0x100 };
    assert_eq!(ext_cap_end(&below), 4096);
    assert_eq!(ext_cap_end(&ExtCap { next: 0x300, ..below }), 0x300);
}

/// §7.9.1: VC at 0x100 with VC0 and VC1. Port VC Capability 1: Extended
/// VC Count 2:0 = 1, Port Arbitration Table Entry Size 11:10 = 1 (2 bits).
/// Port VC Capability 2: VC Arbitration Capability 7:0 = WRR32 (1) and
/// WRR128 (3), VC Arb Table Offset 31:24 = 3 (0x130). Port VC Control:
/// VC Arbitration Select 3:1 = 1 (WRR32).
fn vc_with_tables(next: u32) -> Vec<u8> {
    let mut b = space();
    put32(&mut b, 0x100, ext_header(0x0002, 1, next));
    put32(&mut b, 0x104, (1 << 10) | 1);
    put32(&mut b, 0x108, (3 << 24) | (1 << 3) | (1 << 1));
    put16(&mut b, 0x10c, 1 << 1);
    put16(&mut b, 0x10e, 0);
    // VC0 (§7.9.1.6): Port Arbitration Capability 7:0 = WRR32 (1) and
    // WRR256 (5), PATOffset 31:24 = 7 (0x170); control (§7.9.1.7): Enable
    // (31), Port Arbitration Select 19:17 = 5 (WRR256), TC/VC 0xff.
    put32(&mut b, 0x110, (7 << 24) | (1 << 5) | (1 << 1));
    put32(&mut b, 0x114, (1 << 31) | (5 << 17) | 0xff);
    // VC1: hardware-fixed only (bit 0), an offset of 0x0c all the same: no table.
    put32(&mut b, 0x11c, (0x0c << 24) | 1);
    put32(&mut b, 0x120, (1 << 24) | 0x02);
    // VC Arbitration Table (§7.9.1.9), 128 phases of 4 bits (64 bytes):
    // phase k of each dword holds VC ID k, with the reserved bit 3 set on
    // odd phases: nibbles 0 9 2 b 4 d 6 f from the low end.
    for i in 0..16 {
        put32(&mut b, 0x130 + 4 * i, 0xf6d4_b290);
    }
    // VC0's Port Arbitration Table (§7.9.1.10), 256 phases of 2 bits (64
    // bytes): 0b11_10_01_00 per byte, ports 0 1 2 3 from the low end.
    for i in 0..16 {
        put32(&mut b, 0x170 + 4 * i, 0xe4e4_e4e4);
    }
    b
}

#[test]
fn vc_arbitration_tables() {
    let b = vc_with_tables(0);
    let vc = Config::new(&b).unwrap().virtual_channel().unwrap().unwrap();
    let t = vc.vc_arb_table.clone().unwrap().unwrap();
    assert_eq!((t.offset, t.entry_bits, t.phases, t.selected_phases, t.dwords.len()), (0x130, 4, 128, Some(32), 16));
    expect(
        "VC arbitration dword 0",
        &t.dwords[0],
        &[("vc_arb_dword", 0x130, 0xf6d4_b290)],
        &(0..8)
            .map(|k| {
                (
                    [
                        "vc_arb_phase0",
                        "vc_arb_phase1",
                        "vc_arb_phase2",
                        "vc_arb_phase3",
                        "vc_arb_phase4",
                        "vc_arb_phase5",
                        "vc_arb_phase6",
                        "vc_arb_phase7",
                    ][k],
                    k as u64,
                )
            })
            .collect::<Vec<_>>(),
    );
    assert_eq!(t.dwords[15].offset, 0x16c);
    let want: Vec<u8> = (0..128).map(|p| (p % 8) as u8).collect();
    assert_eq!(t.entries(), want, "VC IDs, the reserved bit 3 left out");
    assert_eq!(vc.port_arb_tables.len(), 2);
    let p = vc.port_arb_tables[0].clone().unwrap().unwrap();
    assert_eq!((p.offset, p.entry_bits, p.phases, p.selected_phases, p.dwords.len()), (0x170, 2, 256, Some(256), 16));
    assert_eq!(p.dwords[0].raw("vc_pat2_dword"), Some(0xe4e4_e4e4));
    assert_eq!(p.dwords[0].get("vc_pat2_phase0"), Some(0));
    assert_eq!(p.dwords[0].get("vc_pat2_phase7"), Some(3));
    assert_eq!(p.dwords[0].get("vc_pat2_phase14"), Some(2));
    assert_eq!(p.dwords[0].layout.fields[0].bits.len(), 16);
    let want: Vec<u8> = (0..256).map(|p| (p % 4) as u8).collect();
    assert_eq!(p.entries(), want);
    assert_eq!(vc.port_arb_tables[1], None, "hardware-fixed arbitration has no table");
}

/// The port table's length follows the entry size (§7.9.1.2 bits 11:10).
#[test]
fn port_table_entry_sizes() {
    for (size, bits, layout) in [
        (0, 1, "pci_vc_pat1_dword"),
        (1, 2, "pci_vc_pat2_dword"),
        (2, 4, "pci_vc_pat4_dword"),
        (3, 8, "pci_vc_pat8_dword"),
    ] {
        let mut b = vc_with_tables(0);
        put32(&mut b, 0x104, (size << 10) | 1);
        // VC0: WRR32 only (bit 1), select 1.
        put32(&mut b, 0x110, (7 << 24) | (1 << 1));
        put32(&mut b, 0x114, (1 << 31) | (1 << 17) | 0xff);
        let vc = Config::new(&b).unwrap().virtual_channel().unwrap().unwrap();
        let p = vc.port_arb_tables[0].clone().unwrap().unwrap();
        // 32 phases of `bits` bits: 4 * bits bytes.
        assert_eq!((p.entry_bits, p.phases, p.dwords.len()), (bits, 32, usize::from(bits)));
        assert_eq!(p.dwords[0].layout.name, layout);
        assert_eq!(p.entries().len(), 32);
        let first = 0xe4e4_e4e4u32 & ((1u64 << bits) - 1) as u32;
        assert_eq!(u32::from(p.entries()[0]), first);
    }
}

#[test]
fn vc_tables_past_the_capability_or_the_dump_are_errors() {
    // The next capability at 0x160 cuts the VC table (0x130..0x170) and VC0's (0x170..0x1b0).
    let mut b = vc_with_tables(0x160);
    put32(&mut b, 0x160, ext_header(0, 0, 0));
    let vc = Config::new(&b).unwrap().virtual_channel().unwrap().unwrap();
    assert_eq!(vc.vc_arb_table, Some(Err(CapError::Overrun { offset: 0x100, at: 0x130, len: 64, end: 0x160 })));
    assert_eq!(vc.port_arb_tables[0], Some(Err(CapError::Overrun { offset: 0x100, at: 0x170, len: 64, end: 0x160 })));
    assert_eq!(vc.resources.len(), 2, "the registers lspci prints are kept");
    // The dump ending at 0x1a0 cuts only VC0's table.
    let b = vc_with_tables(0);
    let vc = Config::new(&b[..0x1a0]).unwrap().virtual_channel().unwrap().unwrap();
    assert!(matches!(vc.vc_arb_table, Some(Ok(_))));
    assert_eq!(vc.port_arb_tables[0], Some(Err(CapError::Truncated { offset: 0x100, need: 0xb0, len: 0x1a0 })));
    // A table offset of 255 units (0xff0 past 0x100) runs past 4 KiB.
    let mut b = vc_with_tables(0);
    put32(&mut b, 0x108, (0xff << 24) | (1 << 1));
    let vc = Config::new(&b).unwrap().virtual_channel().unwrap().unwrap();
    assert_eq!(vc.vc_arb_table, Some(Err(CapError::Overrun { offset: 0x100, at: 0x10f0, len: 16, end: 4096 })));
}
