//! Any bytes as a configuration space, as lspci text and as TLP header dwords:
//! walks end, decoders never panic, TLP headers re-encode to themselves.
#![no_main]
use libfuzzer_sys::fuzz_target;
use marrow_pcie::Config;

fuzz_target!(|data: &[u8]| {
    if let Ok(cfg) = Config::new(data) {
        let _ = cfg.caps().count();
        let _ = cfg.ext_caps().count();
        let _ = (cfg.express(), cfg.acs(), cfg.bars().count(), cfg.bus_numbers(), cfg.subsystem());
        let _ = (cfg.aer(), cfg.msi(), cfg.msix(), cfg.power_management(), cfg.ats(), cfg.pri(), cfg.pasid());
        let _ = (cfg.ltr().map(|l| (l.max_snoop_ns(), l.max_no_snoop_ns())), cfg.serial_number());
        let _ = cfg.resizable_bars().map(|r| r.supported().count()).sum::<usize>();
        let _ = (cfg.dpc(), cfg.sriov(), cfg.secondary_pcie(), cfg.data_link_feature());
        let _ = (cfg.physical_layer_16gt(), cfg.physical_layer_32gt());
        let _ = cfg.acs_egress_control().map(|e| e.map(|e| e.blocked().count()));
        let _ = (cfg.vsecs().count(), cfg.vendor_caps().count());
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
                    let _ = (cfg.caps().count(), cfg.ext_caps().count(), cfg.acs());
                }
            }
        }
    }
});
