//! The golden tests' one check: a decoded block against hand-derived values.

use marrow_pcie::registers::Block;
use std::collections::BTreeSet;

/// Every register (name, absolute offset, raw) and every named bit range
/// with its value; anything the decode has that the lists lack, or the
/// other way round, fails.
pub fn expect(what: &str, block: &Block, regs: &[(&str, u16, u64)], fields: &[(&str, u64)]) {
    let got: Vec<(&str, u16, u64)> = block.registers.iter().map(|r| (r.name(), r.offset, r.raw)).collect();
    assert_eq!(got, regs.to_vec(), "{what}: registers (name, offset, raw)");
    let named: BTreeSet<&str> = block.registers.iter().flat_map(|r| r.layout.bits.iter().map(|b| b.name)).collect();
    let listed: BTreeSet<&str> = fields.iter().map(|(n, _)| *n).collect();
    assert_eq!(named, listed, "{what}: the fields the layout names and the fields this test checks");
    for (name, value) in fields {
        assert_eq!(block.get(name), Some(*value), "{what}: {name}");
    }
    eprintln!("{what}: {} values equal the hand-derived ones", 2 * regs.len() + fields.len());
}
