//! Any bytes as a configuration space and as lspci text: walks end, decoders never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_pcie::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(cfg) = Config::new(data) {
        let _ = cfg.caps().count();
        let _ = cfg.ext_caps().count();
        let _ = (cfg.express(), cfg.acs(), cfg.bars().count(), cfg.bus_numbers(), cfg.subsystem());
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(funcs) = marrow_pcie::dump::parse_lspci_text(text) {
            for f in funcs {
                if let Ok(cfg) = Config::new(&f.bytes) {
                    let _ = (cfg.caps().count(), cfg.ext_caps().count(), cfg.acs());
                }
            }
        }
    }
});
