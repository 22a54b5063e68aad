//! `marrow decode --pcie`: configuration-space dumps (`lspci -x`, `-xxx`,
//! `-xxxx` text, or a raw 64..4096-byte binary such as sysfs `config`)
//! decoded through `marrow-pcie` in lspci 3.9's vocabulary (`Flag+ Flag-`,
//! its register labels), function by function: the header (Command,
//! Status, BARs, expansion ROM, bridge buses, windows and subsystem), then
//! every capability of both lists (`pcie_caps`, `pcie_express`,
//! `pcie_ext`, `pcie_ext_dpc_sriov_phy`). Broken chains and malformed capabilities are
//! errors with their offsets; `--json` gives every register with its
//! fields (`pcie_json`). TLP headers go to `pcie_tlp`.

use crate::pcie_out::{Out, PcieReport};
use marrow_pcie::Config;
use marrow_pcie::dump::{DumpedFunction, parse_lspci_text};
use serde_json::{Value, json};

/// Reads the dump: `lspci -x` text when it parses as such, else raw bytes.
pub fn read_functions(raw: &[u8]) -> Result<Vec<DumpedFunction>, String> {
    if let Ok(text) = std::str::from_utf8(raw) {
        match parse_lspci_text(text) {
            Ok(f) => return Ok(f),
            // Text that is not a dump: say why rather than decoding its characters.
            Err(e) if text.chars().all(|c| c.is_ascii_graphic() || c.is_ascii_whitespace()) => {
                return Err(format!("not an lspci -x dump: {e}"));
            }
            Err(_) => {}
        }
    }
    Config::new(raw).map_err(|e| e.to_string())?;
    Ok(vec![DumpedFunction { address: "(binary)".into(), title: String::new(), bytes: raw.to_vec() }])
}

pub fn decode(raw: &[u8]) -> Result<PcieReport, String> {
    if let Some(dws) = std::str::from_utf8(raw).ok().and_then(crate::pcie_tlp::tlp_dwords) {
        return crate::pcie_tlp::tlp(&dws?);
    }
    let mut text = String::new();
    let mut errors = Vec::new();
    let mut functions = Vec::new();
    for f in read_functions(raw)? {
        let cfg = Config::new(&f.bytes).map_err(|e| format!("{}: {e}", f.address))?;
        let mut o = Out { text: String::new(), errors: Vec::new(), function0: is_function0(&f.address) };
        let j = function(&mut o, &f, &cfg);
        text.push_str(&o.text);
        let errs: Vec<Value> = o.errors.iter().map(|(e, at)| crate::pcie_json::error(e, *at)).collect();
        let mut j = j;
        j["errors"] = Value::Array(errs);
        functions.push(j);
        errors.extend(o.errors.into_iter().map(|(e, at)| (format!("{}: {e}", f.address), at)));
    }
    let json = json!({ "functions": functions });
    Ok(PcieReport { text, json, errors })
}

fn function(o: &mut Out, f: &DumpedFunction, cfg: &Config) -> Value {
    o.line(0, format!("{} {}", f.address, crate::print::escape(&f.title)));
    o.line(
        1,
        format!(
            "marrow: Vendor {:04x} Device {:04x}, class {:06x} rev {:02x}, header type {}{}, {} bytes",
            cfg.vendor_id(),
            cfg.device_id(),
            cfg.class(),
            cfg.revision(),
            cfg.header_type(),
            if cfg.is_multifunction() { " (multi-function)" } else { "" },
            cfg.len()
        ),
    );
    let mut j = json!({
        "address": f.address, "title": f.title, "length": cfg.len(),
        "vendor_id": cfg.vendor_id(), "device_id": cfg.device_id(), "class": cfg.class(),
        "revision": cfg.revision(), "header_type": cfg.header_type(), "multifunction": cfg.is_multifunction(),
    });
    if !crate::pcie_header::header(o, cfg, &mut j) {
        o.line(1, "marrow: capabilities read from 0x34, as in a type 0 header");
    }
    let mut caps = Vec::new();
    if cfg.capabilities_not_dumped() {
        // The status says there is a list; the dump (`lspci -x` without root) stops before it.
        o.line(1, "Capabilities: <access denied>");
        j["capabilities_not_dumped"] = json!(true);
    }
    for cap in cfg.caps() {
        match cap {
            Ok(c) => {
                // These name themselves on this line with what they hold, as lspci's do.
                use marrow_pcie::cap_id::CapId;
                const SELF_TITLED: [CapId; 10] = [
                    CapId::EXP,
                    CapId::PM,
                    CapId::MSI,
                    CapId::MSIX,
                    CapId::VPD,
                    CapId::DBG,
                    CapId::SATA,
                    CapId::AF,
                    CapId::VNDR,
                    CapId::SSVID,
                ];
                if !SELF_TITLED.contains(&c.id) {
                    o.line(1, format!("Capabilities: [{:02x}] {}", c.offset, c.id));
                }
                caps.push(crate::pcie_caps::standard(o, cfg, &c));
            }
            Err(e) => o.error(1, &e, walk_offset(&e)),
        }
    }
    for cap in cfg.ext_caps() {
        match cap {
            Ok(c) => {
                let (title, spec_name) = crate::pcie_titles::extended(cfg, &c);
                o.line(1, format!("Capabilities: [{:03x} v{}] {title}", c.offset, c.version));
                if let Some(name) = spec_name {
                    o.line(2, format!("marrow: {name}"));
                }
                let mut v = crate::pcie_caps::extended(o, cfg, &c);
                v["extended"] = json!(true);
                caps.push(v);
            }
            Err(e) => o.error(1, &e, walk_offset(&e)),
        }
    }
    j["capabilities"] = Value::Array(caps);
    j
}

fn walk_offset(e: &marrow_pcie::WalkError) -> Option<u64> {
    use marrow_pcie::WalkError::*;
    Some(match *e {
        Loop { offset } | Truncated { offset, .. } | AllOnes { offset } => offset.into(),
        PointerOutOfRange { from, .. } | ExtPointerOutOfRange { from, .. } => from.into(),
    })
}

/// Whether `address` (`[domain:]bus:dev.fn` as lspci writes it) is device 0
/// function 0; an address that is not one (a binary dump) counts as yes.
fn is_function0(address: &str) -> bool {
    let Some((_, devfn)) = address.rsplit_once(':') else { return true };
    let Some((dev, func)) = devfn.split_once('.') else { return true };
    match (u8::from_str_radix(dev, 16), u8::from_str_radix(func, 16)) {
        (Ok(d), Ok(f)) => d == 0 && f == 0,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn terminal_safe(text: &str) -> bool {
        !text.chars().any(|c| (c.is_control() && c != '\n' && c != '\t') || crate::print::is_format_char(c))
    }

    /// `lspci -x` text of one function: its address line, then 16-byte rows.
    fn lspci_text(title: &str, bytes: &[u8]) -> String {
        let mut t = format!("00:02.0 {title}\n");
        for (i, row) in bytes.chunks(16).enumerate() {
            let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
            t.push_str(&format!("{:02x}: {}\n", i * 16, hex.join(" ")));
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn any_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..5000)) {
            if let Ok(r) = decode(&raw) {
                prop_assert!(terminal_safe(&r.text), "{:?}", r.text);
            }
        }

        #[test]
        fn lspci_text_never_panics_and_its_title_is_escaped(
            title in "[\\x00-\\x09\\x0b-\\x{ff}\\u{202a}-\\u{202e}\\u{2066}-\\u{2069}]{0,30}",
            bytes in proptest::collection::vec(any::<u8>(), 64..512),
        ) {
            let text = lspci_text(&title, &bytes);
            if let Ok(r) = decode(text.as_bytes()) {
                prop_assert!(terminal_safe(&r.text), "{:?}", r.text);
            }
        }

        #[test]
        fn tlp_words_never_panic(words in proptest::collection::vec(any::<u32>(), 1..5), aer in any::<bool>()) {
            let hex: Vec<String> = words.iter().map(|w| format!("{w:08x}")).collect();
            let text = if aer { format!("pcieport: AER: TLP Header: {}", hex.join(" ")) } else { hex.join(" ") };
            let _ = decode(text.as_bytes());
        }
    }
}
