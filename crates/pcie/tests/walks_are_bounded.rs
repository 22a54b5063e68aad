//! Broken capability chains end in an error or are followed, never a panic
//! or a hang. Each case starts from a 0xA5-poisoned buffer so that stray
//! reads of unset bytes show.

use marrow_pcie::cap_id::{CapId, ExtCapId};
use marrow_pcie::walk::WalkError;
use marrow_pcie::{Config, ConfigError};
use proptest::prelude::*;

/// A type 0 header with the capability-list status bit and pointer set.
fn space(len: usize, first_cap: u8) -> Vec<u8> {
    let mut b = vec![0xA5; len];
    b[0..4].copy_from_slice(&[0xb3, 0x15, 0x1d, 0x10]); // 15b3:101d
    b[0x06] = 0x10; // PCI_STATUS_CAP_LIST
    b[0x0e] = 0x00;
    b[0x34] = first_cap;
    b
}

fn ext_header(b: &mut [u8], at: usize, id: u16, version: u32, next: u32) {
    let h = u32::from(id) | (version << 16) | (next << 20);
    b[at..at + 4].copy_from_slice(&h.to_le_bytes());
}

#[test]
fn standard_loop_is_reported() {
    let mut b = space(256, 0x40);
    b[0x40..0x42].copy_from_slice(&[0x01, 0x50]);
    b[0x50..0x52].copy_from_slice(&[0x10, 0x40]);
    let cfg = Config::new(&b).unwrap();
    let caps: Vec<_> = cfg.caps().collect();
    assert_eq!(caps.len(), 3);
    assert_eq!(caps[0].as_ref().unwrap().id, CapId::PM);
    assert_eq!(caps[1].as_ref().unwrap().id, CapId::EXP);
    assert_eq!(caps[2], Err(WalkError::Loop { offset: 0x40 }));
}

#[test]
fn pointer_into_header_is_reported() {
    let mut b = space(256, 0x40);
    b[0x40..0x42].copy_from_slice(&[0x05, 0x10]);
    let caps: Vec<_> = Config::new(&b).unwrap().caps().collect();
    assert_eq!(caps[1], Err(WalkError::PointerOutOfRange { from: 0x40, to: 0x10 }));
}

#[test]
fn truncated_dump_is_reported() {
    // A header-only dump (`lspci -x` without root) does not hold the list:
    // not a broken walk, but a list not dumped (lspci: `<access denied>`).
    let mut b = space(64, 0x40);
    b.truncate(64);
    let cfg = Config::new(&b).unwrap();
    assert_eq!(cfg.caps().count(), 0);
    assert!(cfg.capabilities_not_dumped());
    // A dump that stops inside the list is.
    let mut b = space(80, 0x50);
    b.truncate(80);
    let caps: Vec<_> = Config::new(&b).unwrap().caps().collect();
    assert_eq!(caps, vec![Err(WalkError::Truncated { offset: 0x50, len: 80 })]);
    assert_eq!(Config::new(&b[..63]).unwrap_err(), ConfigError::TooShort { len: 63 });
    assert_eq!(Config::new(&[0; 4097]).unwrap_err(), ConfigError::TooLong { len: 4097 });
}

#[test]
fn all_ones_capability_is_reported() {
    let mut b = space(256, 0x40);
    b[0x40] = 0xff;
    let caps: Vec<_> = Config::new(&b).unwrap().caps().collect();
    assert_eq!(caps, vec![Err(WalkError::AllOnes { offset: 0x40 })]);
}

#[test]
fn null_ext_header_with_live_next_is_followed() {
    // As the H200 fixture's VMM does: a v0 Null header at 0x100 pointing on.
    let mut b = space(4096, 0);
    ext_header(&mut b, 0x100, 0x0000, 0, 0x12c);
    ext_header(&mut b, 0x12c, ExtCapId::ACS.0, 1, 0);
    let caps: Vec<_> = Config::new(&b).unwrap().ext_caps().collect();
    assert_eq!(caps.len(), 2);
    assert_eq!(caps[0].as_ref().unwrap().id, ExtCapId::NULL);
    assert_eq!(caps[1].as_ref().unwrap().id, ExtCapId::ACS);
    assert_eq!(caps[1].as_ref().unwrap().offset, 0x12c);
}

#[test]
fn ext_loop_and_low_pointer_are_reported() {
    let mut b = space(4096, 0);
    ext_header(&mut b, 0x100, ExtCapId::ERR.0, 2, 0x200);
    ext_header(&mut b, 0x200, ExtCapId::ACS.0, 1, 0x100);
    let caps: Vec<_> = Config::new(&b).unwrap().ext_caps().collect();
    assert_eq!(caps[2], Err(WalkError::Loop { offset: 0x100 }));
    ext_header(&mut b, 0x200, ExtCapId::ACS.0, 1, 0x80);
    let caps: Vec<_> = Config::new(&b).unwrap().ext_caps().collect();
    assert_eq!(caps[2], Err(WalkError::ExtPointerOutOfRange { from: 0x200, to: 0x80 }));
}

#[test]
fn legacy_dump_has_no_ext_walk() {
    let b = space(256, 0);
    assert_eq!(Config::new(&b).unwrap().ext_caps().count(), 0);
}

#[test]
fn acs_decodes_from_bytes() {
    let mut b = space(4096, 0);
    ext_header(&mut b, 0x100, ExtCapId::ACS.0, 1, 0);
    b[0x104..0x106].copy_from_slice(&0x005fu16.to_le_bytes()); // SV TB RR CR UF DT
    b[0x106..0x108].copy_from_slice(&0x000cu16.to_le_bytes()); // RR CR on
    let acs = Config::new(&b).unwrap().acs().unwrap();
    assert!(acs.redirects_p2p());
    assert_eq!(acs.control.bits(), 0x0c);
    assert_eq!(acs.egress_vector_bits, 256);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]
    /// Any bytes: the walks end, within the number of dwords in the space.
    #[test]
    fn any_bytes_walk_ends(bytes in proptest::collection::vec(any::<u8>(), 0..4200)) {
        if let Ok(cfg) = Config::new(&bytes) {
            prop_assert!(cfg.caps().count() <= 64 + 1);
            prop_assert!(cfg.ext_caps().count() <= 1024 + 1);
            cfg.decode_all();
            for v in cfg.vsecs() {
                if let Ok(v) = v && let Ok(body) = v.body {
                    prop_assert!(body.len() + 8 == usize::from(v.len));
                }
            }
            prop_assert!(cfg.vendor_caps().count() <= 64);
        }
    }

    /// Every new capability decoder on a real header with one extended
    /// capability of its ID at a random offset and random body: bounded,
    /// never panics, and lane arrays never exceed x32.
    #[test]
    fn new_cap_decoders_never_panic(
        id in prop::sample::select(vec![0x0b_u16, 0x0d, 0x10, 0x15, 0x19, 0x1d, 0x25, 0x26, 0x2a]),
        at in 0x40usize..0x3ff,
        next in any::<u16>(),
        body in proptest::collection::vec(any::<u8>(), 0..96),
        len in prop::sample::select(vec![4096usize, 0x110, 0x180, 0x104]),
    ) {
        let mut b = space(4096, 0);
        // A dword-aligned offset in 0x100..=0xffc.
        let at = 0x100 + (4 * at) % 0xf00;
        ext_header(&mut b, 0x100, if at == 0x100 { id } else { 0x0001 }, 1, if at == 0x100 { u32::from(next) & 0xfff } else { at as u32 });
        if at != 0x100 {
            ext_header(&mut b, at, id, 1, u32::from(next) & 0xfff);
        }
        let end = (at + 4 + body.len()).min(4096);
        b[at + 4..end].copy_from_slice(&body[..end - at - 4]);
        b.truncate(len);
        let cfg = Config::new(&b).unwrap();
        let _ = (cfg.dpc(), cfg.sriov(), cfg.data_link_feature());
        if let Some(Ok(s)) = cfg.secondary_pcie() { prop_assert!(s.lanes.len() <= 32); }
        if let Some(Ok(p)) = cfg.physical_layer_16gt() { prop_assert!(p.lanes.len() <= 32); }
        if let Some(Ok(p)) = cfg.physical_layer_32gt() { prop_assert!(p.lanes.len() <= 32); }
        let _ = cfg.acs_egress_control().map(|e| e.map(|e| e.blocked().count()));
        prop_assert!(cfg.resizable_bars().count() <= 6);
        for v in cfg.vsecs() {
            if let Ok(v) = v && let Ok(body) = v.body {
                prop_assert!(usize::from(v.offset) + usize::from(v.len) <= b.len());
                prop_assert_eq!(body.len() + 8, usize::from(v.len));
            }
        }
    }

    /// Random next pointers over a real header: still bounded.
    #[test]
    fn random_chains_end(ptrs in proptest::collection::vec(any::<u16>(), 64)) {
        let mut b = space(4096, 0x40);
        for (i, p) in ptrs.iter().enumerate() {
            let at = 0x40 + 4 * (i % 48);
            b[at] = 0x10;
            b[at + 1] = *p as u8;
            ext_header(&mut b, 0x100 + 4 * (i * 13 % 960), p & 0x2f, 1, u32::from(*p) & 0xfff);
        }
        let cfg = Config::new(&b).unwrap();
        prop_assert!(cfg.caps().count() <= 65);
        prop_assert!(cfg.ext_caps().count() <= 1025);
    }
}

/// Found by the decode_pcie_config fuzz target: a title line starting with a
/// non-ASCII whitespace made the title slice land inside a character.
#[test]
fn lspci_text_with_unicode_whitespace_does_not_panic() {
    for text in [
        "1a:68.1\n\u{85}\u{85}\u{85}\u{85}1a:a7.1\n",
        "\u{85}00:00.0 x\n",
        "\u{3000}00:00.0\n00: 00\n",
        "00:00.0\u{3000}title\n00: 86 80\n",
    ] {
        let _ = marrow_pcie::dump::parse_lspci_text(text);
    }
}

proptest! {
    /// Any text: the lspci dump parser returns, never panics.
    #[test]
    fn any_text_parses_or_errors(text in "\\PC{0,200}") {
        let _ = marrow_pcie::dump::parse_lspci_text(&text);
    }
}
