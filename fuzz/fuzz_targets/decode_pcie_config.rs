//! Any bytes as a configuration space, as lspci text and as TLP header dwords:
//! walks end, decoders never panic, TLP headers re-encode to themselves.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_pcie::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(cfg) = Config::new(data) {
        cfg.decode_all();
    }
    let dws: Vec<u32> = data.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect();
    if let Ok(h) = marrow_pcie::tlp::TlpHeader::decode(&dws) {
        let _ = (h.malformed(), h.kind(), h.length_dw());
        let mut out = [0u32; 4];
        let n = h.encode(&mut out);
        assert_eq!(marrow_pcie::tlp::TlpHeader::decode(&out[..n]).unwrap(), h);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(funcs) = marrow_pcie::dump::parse_lspci_text(text) {
            for f in funcs {
                if let Ok(cfg) = Config::new(&f.bytes) {
                    cfg.decode_all();
                }
            }
        }
    }
});
