//! Never a panic from the decoders added for issue 21 (and VPD, Debug
//! Port, SATA, AF, virtio, Root Complex Link, Multicast, the IDE stream
//! blocks and the VC arbitration tables): arbitrary bytes with
//! a header of any type, a capability of a chosen ID at an arbitrary
//! pointer, and a chain of extended capabilities of the new IDs at
//! arbitrary offsets with arbitrary next pointers, cut at lengths that end
//! inside them. Every entry point returns a decode or an error; what a
//! decode returns stays inside the dump.

use marrow_pcie::Config;
use marrow_pcie::cap_id::{CapId, ExtCapId};
use marrow_pcie::generated::pcie::ALL_LAYOUTS;
use marrow_pcie::registers::Block;
use proptest::prelude::*;

/// The registers of a block lie in the dump.
fn inside(block: &Block, len: usize) -> bool {
    block.registers.iter().all(|r| usize::from(r.offset) + r.size() <= len)
}

#[derive(Debug, Clone)]
struct Space {
    bytes: Vec<u8>,
    layout: usize,
    layout_at: usize,
    layout_len: usize,
    probe_ext: u16,
    probe_std: u8,
}

fn space() -> impl Strategy<Value = Space> {
    (
        prop::sample::select(vec![0u8, 1, 2, 0x81, 0x82, 0x7f]),
        prop::sample::select(vec![0x14u8, 0x0d, 0x10, 0x01, 0x05, 0xff, 0x00, 0x03, 0x09, 0x0a, 0x12, 0x13]),
        any::<u8>(),
        any::<u8>(),
        proptest::collection::vec(
            (
                prop::sample::select(vec![
                    0x001f_u16, 0x000e, 0x0023, 0x002e, 0x0002, 0x0009, 0x0027, 0x002f, 0x0030, 0x001e, 0x0001, 0x0000,
                    0x0005, 0x0012,
                ]),
                0usize..0x3c0,
                0u32..16,
            ),
            1..6,
        ),
        any::<u16>(),
        proptest::collection::vec(any::<u8>(), 4096),
        prop::sample::select(vec![
            64usize, 65, 0x44, 0x4c, 0x60, 0x100, 0x104, 0x10a, 0x110, 0x130, 0x180, 0x400, 4093, 4096,
        ]),
        (any::<usize>(), any::<u16>(), any::<u8>(), any::<u16>(), any::<u8>()),
    )
        .prop_map(|(header_type, std_id, std_at, std_next, ext, last_next, mut b, len, (li, la, ll, pe, ps))| {
            b[0x0e] = header_type;
            b[0x06] |= 0x10;
            let ptr = if header_type & 0x7f == 2 { 0x14 } else { 0x34 };
            b[ptr] = std_at;
            let at = usize::from(std_at & !3).max(0x40);
            b[at] = std_id;
            b[at + 1] = std_next;
            // Extended chain: first at 0x100, the others at the offsets drawn.
            let offsets: Vec<usize> =
                core::iter::once(0x100).chain(ext.iter().skip(1).map(|e| 0x100 + 4 * e.1)).collect();
            for (i, (id, _, version)) in ext.iter().enumerate() {
                let next = offsets.get(i + 1).map_or(u32::from(last_next) & 0xfff, |&n| n as u32);
                let h = u32::from(*id) | (version << 16) | (next << 20);
                b[offsets[i]..offsets[i] + 4].copy_from_slice(&h.to_le_bytes());
            }
            b.truncate(len);
            Space {
                bytes: b,
                layout: li % ALL_LAYOUTS.len(),
                layout_at: usize::from(la) % 4200,
                layout_len: usize::from(ll),
                probe_ext: pe,
                probe_std: ps,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn every_new_decoder_returns(s in space()) {
        let cfg = Config::new(&s.bytes).unwrap();
        let n = cfg.len();
        // The whole crate once, as the fuzz target runs it.
        cfg.decode_all();
        // registers.rs: any layout at any offset, whole or a prefix.
        let layout = ALL_LAYOUTS[s.layout];
        if let Ok(b) = cfg.block(layout, s.layout_at, s.layout_at as u16) {
            prop_assert!(s.layout_at + layout.size <= n && inside(&b, n));
        }
        if let Ok(b) = cfg.block_prefix(layout, s.layout_at, 0, s.layout_len) {
            prop_assert!(inside(&b, n));
            prop_assert!(b.registers.iter().all(|r| usize::from(r.offset) + r.size() <= s.layout_at + s.layout_len));
        }
        if let Some(Ok(b)) = cfg.ext_block(ExtCapId(s.probe_ext), layout) { prop_assert!(inside(&b, n)); }
        if let Some(Ok(b)) = cfg.cap_block(CapId(s.probe_std), layout) { prop_assert!(inside(&b, n)); }
        // header_regs.rs
        prop_assert!(inside(&cfg.header_block(), n));
        if let Some(Ok(b)) = cfg.express_block() { prop_assert!(inside(&b, n)); }
        // One decoder each.
        for b in [cfg.ptm(), cfg.ari(), cfg.device3(), cfg.ide(), cfg.l1ss()].into_iter().flatten().flatten() {
            prop_assert!(inside(&b, n));
        }
        for d in cfg.dvsecs().into_iter().flatten() {
            prop_assert!(usize::from(d.len) >= 10 && inside(&d.block, n));
            let _ = d.name();
        }
        for b in cfg.doe().flatten() { prop_assert!(inside(&b, n)); }
        if let Some(Ok(vc)) = cfg.virtual_channel() {
            prop_assert!((1..=8).contains(&vc.resources.len()));
            prop_assert!(inside(&vc.port, n) && vc.resources.iter().all(|r| inside(r, n)));
            // Arbitration tables (vc_arb.rs): inside the dump and 4 KiB, one entry per phase.
            prop_assert_eq!(vc.port_arb_tables.len(), vc.resources.len());
            for t in vc.port_arb_tables.iter().chain([&vc.vc_arb_table]).flatten().flatten() {
                prop_assert!(t.dwords.iter().all(|d| inside(d, n)));
                prop_assert!(usize::from(t.offset) + t.phases * usize::from(t.entry_bits) / 8 <= n.min(4096));
                prop_assert_eq!(t.entries().len(), t.phases);
            }
        }
        // IDE stream blocks (ide_link.rs, ide_selective.rs): bounded by the counts and the dump.
        if let Some(Ok(s)) = cfg.ide_streams() {
            prop_assert!(inside(&s.ide, n) && s.link.len() <= 8 && s.link.iter().all(|b| inside(b, n)));
            prop_assert!(s.selective.len() <= s.selective_count() && s.selective_count() <= 256);
            for st in &s.selective {
                prop_assert!(inside(&st.regs, n) && st.addresses.len() <= 15);
                prop_assert!(st.addresses.iter().all(|a| inside(a, n)));
                let _ = st.addresses.iter().map(marrow_pcie::ide_selective::address_range).count();
            }
            if let Some(e) = s.stopped { let _ = (e.offset(), e.to_string()); }
        }
        if let Some(Ok(m)) = cfg.lane_margining() {
            prop_assert!(m.lanes.len() <= 32 && m.lanes.iter().all(|l| inside(l, n)));
        }
        if let Some(Ok(ea)) = cfg.enhanced_allocation() {
            prop_assert!(ea.entries.len() <= 63);
            for e in &ea.entries {
                prop_assert!(usize::from(e.offset) < 256 && inside(&e.block, n));
                let _ = (marrow_pcie::ea::bei_text(e.bei), marrow_pcie::ea::property_text(e.primary), e.bar());
            }
        }
        if let Some(Ok(s)) = cfg.bridge_subsystem() { prop_assert!(usize::from(s.offset) + 8 <= n); }
        if let Some(r) = cfg.expansion_rom() { prop_assert!(r.address & 0x7ff == 0); }
        if let Some(w) = cfg.bridge_windows() {
            prop_assert!(w.io.limit & 0xfff == 0xfff && w.memory.limit & 0xf_ffff == 0xf_ffff);
            let _ = (w.io.is_open(), w.memory.is_open(), w.prefetchable.is_open());
        }
        let _ = (cfg.subsystem(), cfg.capabilities_not_dumped(), cfg.bars().count());
        // VPD, Debug Port, SATA, AF, virtio: at every capability of the walk,
        // and at the probed offset whatever is there.
        let std_at: Vec<u16> = cfg.caps().filter_map(Result::ok).map(|c| c.offset).chain([u16::from(s.probe_std)]).collect();
        for at in std_at {
            for b in [cfg.vpd(at), cfg.debug_port(at), cfg.sata(at), cfg.advanced_features(at)].into_iter().flatten() {
                prop_assert!(inside(&b, n));
            }
            if let Some(Ok(v)) = cfg.virtio_cap(at) {
                prop_assert!(inside(&v.block, n) && v.notify_multiplier.iter().all(|m| inside(m, n)));
            }
        }
        // Root Complex Link and Multicast: at every extended capability and the probed offset.
        let ext_at: Vec<u16> = cfg.ext_caps().filter_map(Result::ok).map(|c| c.offset).chain([s.probe_ext]).collect();
        for at in ext_at {
            if let Ok(r) = cfg.rc_link(at) {
                prop_assert!(inside(&r.header, n) && r.links.iter().all(|l| inside(l, n)));
                prop_assert!(r.links.len() + r.links_missing <= 255);
            }
            if let Ok(m) = cfg.multicast(at) { prop_assert!(inside(&m, n)); }
        }
        let _ = marrow_pcie::rcld::config_address(u64::from(s.probe_ext) << 8 | u64::from(s.probe_std));
    }

    /// The helpers that turn fields into units take any field value.
    #[test]
    fn unit_helpers_take_any_value(scale in any::<u64>(), value in any::<u64>()) {
        let _ = marrow_pcie::l1ss::t_power_on_us(scale, value & 0x1f);
        let _ = marrow_pcie::l1ss::ltr_l12_threshold_ns(scale, value & 0x3ff);
        let _ = marrow_pcie::ptm::Granularity::from_field(value);
    }
}
