//! Any bytes through `marrow decode --pcie`'s front end: lspci -x text, a
//! TLP header (bare dwords or a kernel AER line), or a raw configuration
//! space. A report or an error, never a panic; the report's text holds no
//! character a terminal would obey besides newline and tab (titles from
//! the dump are escaped).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = marrow::pcie_decode::decode(data) {
        assert!(
            !r.text.chars().any(|c| (c.is_control() && c != '\n' && c != '\t') || marrow::print::is_format_char(c)),
            "{:?}",
            r.text
        );
    }
});
