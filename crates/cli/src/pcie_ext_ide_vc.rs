//! `decode --pcie`: the register blocks lspci 3.9 prints nothing for
//! inside two capabilities it does name. IDE (PCIe Base 6.0 §7.9.26, a
//! `<?>` title in lspci): the link (§7.9.26.4) and selective (§7.9.26.5)
//! stream blocks, each register in spec names under a `marrow:` heading.
//! Virtual Channel (§7.9.1): lspci prints the registers, which stay as
//! they are, but not the VC (§7.9.1.9) and Port (§7.9.1.10) Arbitration
//! Tables, which go on `marrow:` lines. Both go into the JSON with offsets.

use crate::pcie_json;
use crate::pcie_out::{Out, spec_block};
use marrow_pcie::ide_selective::address_range;
use marrow_pcie::vc_arb::ArbTable;
use marrow_pcie::{CapError, Config};
use serde_json::{Value, json};

/// Where an error is: the block that overran, else the capability.
fn at(e: &CapError) -> u64 {
    match *e {
        CapError::Overrun { at, .. } => at as u64,
        _ => e.offset().into(),
    }
}

fn spec_lines(o: &mut Out, b: &marrow_pcie::registers::Block) {
    spec_block(o, Some(Ok(b.clone())));
}

pub fn ide(o: &mut Out, cfg: &Config, j: &mut Value) {
    // The capability's own registers: an error here is printed by spec_block.
    if spec_block(o, cfg.ide()).is_none() {
        return;
    }
    let Some(Ok(s)) = cfg.ide_streams() else { return };
    for (n, b) in s.link.iter().enumerate() {
        o.line(2, format!("marrow: Link IDE Stream {n} [{:03x}]", b.offset));
        spec_lines(o, b);
    }
    for (n, st) in s.selective.iter().enumerate() {
        let g = |f: &str| st.regs.get(f).unwrap_or(0);
        o.line(
            2,
            format!(
                "marrow: Selective IDE Stream {n} [{:03x}]: RID {:04x}-{:04x} V{}, {} address association blocks",
                st.regs.offset,
                g("ide_sel_rid2_base"),
                g("ide_sel_rid1_limit"),
                crate::pcie_out::pm(st.regs.flag("ide_sel_rid2_valid")),
                st.addresses.len()
            ),
        );
        spec_lines(o, &st.regs);
        for (k, a) in st.addresses.iter().enumerate() {
            let (base, limit) = address_range(a);
            let v = crate::pcie_out::pm(a.flag("ide_addr1_valid"));
            o.line(2, format!("marrow: Address Association {k} [{:03x}]: {base:#x}-{limit:#x} V{v}", a.offset));
            spec_lines(o, a);
        }
    }
    j["link_streams"] = Value::Array(s.link.iter().map(pcie_json::block).collect());
    j["selective_streams"] = Value::Array(
        s.selective
            .iter()
            .map(|st| {
                let mut v = pcie_json::block(&st.regs);
                v["address_associations"] = Value::Array(st.addresses.iter().map(pcie_json::block).collect());
                v
            })
            .collect(),
    );
    if let Some(e) = s.stopped {
        let (e_at, counted) = (at(&e), s.link.len() + s.selective_count());
        o.error(2, format!("IDE stream blocks ({counted} counted): {e}"), Some(e_at));
        j["streams_error"] = pcie_json::error(e, Some(e_at));
    }
}

/// Entries per printed line.
const ROW: usize = 32;

/// A table on `marrow:` lines at `indent` and its JSON (`null` when the
/// capability has none, `{error, offset}` when it runs out of bounds).
/// `what` names the entries: VC IDs (VC table) or ports (port tables).
pub fn arb_table(o: &mut Out, indent: usize, name: &str, what: &str, t: Option<&Result<ArbTable, CapError>>) -> Value {
    match t {
        None => Value::Null,
        Some(Err(e)) => {
            o.error(indent, format!("{name}: {e}"), Some(at(e)));
            pcie_json::error(e, Some(at(e)))
        }
        Some(Ok(t)) => {
            let sel =
                t.selected_phases.map_or("ArbSelect uses no table".to_string(), |p| format!("ArbSelect uses {p}"));
            o.line(
                indent,
                format!(
                    "marrow: {name} [{:03x}]: {} phases of {} bits ({sel}), {what}:",
                    t.offset, t.phases, t.entry_bits
                ),
            );
            let entries = t.entries();
            for (r, row) in entries.chunks(ROW).enumerate() {
                let words: Vec<String> = row.iter().map(u8::to_string).collect();
                let first = r * ROW;
                o.line(indent, format!("marrow: phases {first}-{}: {}", first + row.len() - 1, words.join(" ")));
            }
            json!({
                "offset": t.offset,
                "entry_bits": t.entry_bits,
                "phases": t.phases,
                "selected_phases": t.selected_phases,
                "entries": entries,
                "dwords": t.dwords.iter().map(pcie_json::block).collect::<Vec<_>>(),
            })
        }
    }
}
