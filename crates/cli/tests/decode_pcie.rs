//! `marrow decode --pcie` on real dumps. Expected facts are lspci 3.9.0's
//! (the `.expected-lspci-*` files next to the dumps), not this code's.

use std::process::Command;

fn fixture(p: &str) -> String {
    format!("{}/../../tests/fixtures/pcie/{p}", env!("CARGO_MANIFEST_DIR"))
}

fn decode(path: &str) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_marrow")).args(["decode", "--pcie", path]).output().unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Decodes `bytes` written to a temporary file.
fn decode_bytes(tag: &str, bytes: &[u8]) -> (Option<i32>, String, String) {
    let path = std::env::temp_dir().join(format!("marrow-{tag}-{}", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let r = decode(path.to_str().unwrap());
    let _ = std::fs::remove_file(&path);
    r
}

#[test]
fn h200_binary_dump() {
    let (code, out, _) = decode(&fixture("h200-vm/10de_2335_h200_00-06.0.config"));
    assert_eq!(code, Some(0), "{out}");
    for want in [
        "Vendor 10de Device 2335, class 030200 rev a1",
        "Region 0: Memory at 104002000000 (64-bit, prefetchable)",
        "Region 2: Memory at 100000000000 (64-bit, prefetchable)",
        "Capabilities: [60] Express (v2) Endpoint, MSI 00",
        "Capabilities: [b0] MSI-X",
        "Capabilities: [100 v0] Null",
        "Capabilities: [1b8 v2] Advanced Error Reporting",
        "Capabilities: [2f0 v1] Device Serial Number",
        "LnkSta: Speed 32GT/s, Width x16",
        "MaxReadReq 4096 bytes",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
}

#[test]
fn root_port_with_acs_redirect() {
    let (code, out, _) = decode(&fixture("pciutils-tests/cap-aer-root"));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Capabilities: [110 v1] Access Control Services"), "{out}");
    assert!(out.contains("redirected to the root complex"), "{out}");
}

#[test]
fn broken_chain_exits_2_with_the_loop_named() {
    let (code, out, err) = decode(&fixture("pciutils-tests/broken-ecaps"));
    assert_eq!(code, Some(2), "{out}");
    // In the decode where the walk stopped, and on stderr with its offset, as `decode`'s errors are.
    assert!(out.contains("error: capability list loops back to 0x790"), "{out}");
    assert!(err.contains("capability list loops back to 0x790 (offset 0x790)"), "{err}");
}

/// A kernel AER line; the expected fields are worked by hand from PCIe 6.0
/// §2.2 (MRd 4DW of 1 DW from 00:1c.0, tag 0x2a, address 0x1_0000_0040).
#[test]
fn aer_tlp_header_line() {
    let line = "pcieport 0000:00:1c.0:   TLP Header: 20000001 00e02a0f 00000001 00000040\n";
    let (code, out, err) = decode_bytes("tlp", line.as_bytes());
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("TLP MRd (Fmt 001 Type 00000), 4 DW header"), "{out}");
    assert!(out.contains("Tag 0x02a"), "{out}");
    assert!(out.contains("Requester 00:1c.0 Address 0x100000040"), "{out}");
    assert!(out.contains("First DW BE 1111 Last DW BE 0000"), "{out}");
}

/// The same AER line as JSON: the body's fields by name, with the values
/// worked by hand above (Requester ID 0x00e0 is 00:1c.0).
#[test]
fn aer_tlp_header_json_has_every_field() {
    let path = std::env::temp_dir().join(format!("marrow-tlp-json-{}", std::process::id()));
    std::fs::write(&path, "TLP Header: 20000001 00e02a0f 00000001 00000040\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["decode", "--pcie", "--json"])
        .arg(&path)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = v.pointer("/tlp").or_else(|| v.pointer("/0/tlp")).unwrap_or_else(|| panic!("no tlp in {v}"));
    assert_eq!(
        (t["fmt"].as_u64(), t["type"].as_u64(), t["length"].as_u64(), t["tag"].as_u64()),
        (Some(1), Some(0), Some(1), Some(0x2a))
    );
    let b = &t["body"];
    assert_eq!(b["form"], "request");
    assert_eq!(b["requester_id"].as_u64(), Some(0x00e0));
    assert_eq!(b["requester"], "00:1c.0");
    assert_eq!(b["address"].as_u64(), Some(0x1_0000_0040));
    assert_eq!((b["first_dw_be"].as_u64(), b["last_dw_be"].as_u64(), b["ph"].as_u64()), (Some(0xf), Some(0), Some(0)));
}

/// A 4DW header for an address below 4 GiB is flagged (§2.2.4.1).
#[test]
fn four_dw_below_4g_is_malformed() {
    let (code, out, _) = decode_bytes("tlp4", b"60000001 00000a0f 00000000 fee00000\n");
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("TLP MWr"), "{out}");
    assert!(out.contains("malformed: FOUR_DW_BELOW_4G"), "{out}");
}

#[test]
fn short_binary_is_refused() {
    let (code, _, err) = decode_bytes("short", &[0x86, 0x80, 0, 0, 0xff, 0x01]);
    assert_eq!(code, Some(2));
    assert!(err.contains("shorter than the 64-byte header"), "{err}");
}

#[test]
fn null_and_vendor_specific_on_real_dumps() {
    let (code, out, _) = decode(&fixture("h200-vm/10de_2335_h200_00-06.0.config"));
    assert_eq!(code, Some(0), "{out}");
    // lspci: `[100 v0] Null`, `[2a4 v1] Vendor Specific Information: ID=0001 Rev=1 Len=014`.
    assert!(
        out.contains(
            "Capabilities: [100 v0] Null\n\t\tmarrow: no registers (hidden or removed capability), list continues"
        ),
        "{out}"
    );
    assert!(out.contains("VSEC [2a4]: ID 0001 rev 1 length 0x14, body "), "{out}");
    let (code, out, _) = decode(&fixture("pciutils-tests/cap-aer-root"));
    assert_eq!(code, Some(0), "{out}");
    // lspci: `[250 v1] Secondary PCI Express`, `LnkCtl3: LnkEquIntrruptEn- PerformEqu-`, `LaneErrStat: LaneErr at lane: 0 1 2 3 4 5 6 7`.
    assert!(
        out.contains("\tLnkCtl3: LnkEquIntrruptEn- PerformEqu-\n\t\tLaneErrStat: LaneErr at lane: 0 1 2 3 4 5 6 7"),
        "{out}"
    );
    assert!(out.contains("VSEC [100]: ID 0002 rev 0 length 0xc, body "), "{out}");
    let (_, out, _) = decode(&fixture("pciutils-tests/tree-asus-p6t6"));
    // lspci: `[50] Vendor Specific Information: Len=ff`: past 0x100, an error here.
    assert!(
        out.contains(
            "Vendor Specific [50]: length 255: error: capability at 0x50: Capability Length 0xff is impossible"
        ),
        "{out}"
    );
}

/// A root port with DPC (triggered), SR-IOV, Secondary PCIe, DLF and the
/// 16/32 GT/s capabilities, written byte by byte from PCIe 6.0 §7.7.3 -
/// §7.7.6, §7.9.14 and §9.3.3 (lspci 3.9 prints the DPC, SR-IOV and
/// Secondary PCIe parts the same way: see lspci_agrees' synthetic test).
#[test]
fn dpc_sriov_and_physical_layer_caps() {
    let mut b = vec![0u8; 4096];
    let put = |b: &mut Vec<u8>, at: usize, bytes: &[u8]| b[at..at + bytes.len()].copy_from_slice(bytes);
    put(&mut b, 0, &[0xb3, 0x15, 0x1d, 0x10, 0x06, 0x00, 0x10, 0x00]);
    b[0x34] = 0x40;
    put(&mut b, 0x40, &[0x10, 0x00, 0x42, 0x00]); // PCIe v2 root port
    put(&mut b, 0x4c, &0x0000_0044u32.to_le_bytes()); // LnkCap 16GT/s x4
    put(&mut b, 0x52, &0x0044u16.to_le_bytes());
    let ext = |id: u32, next: u32| (id | (1 << 16) | (next << 20)).to_le_bytes();
    put(&mut b, 0x100, &ext(0x1d, 0x160));
    put(&mut b, 0x104, &[0xe3, 0x06, 0x0e, 0x00, 0x05, 0x00, 0x00, 0x03]); // DPC: RPExt, log 6; ctl 0xe; status triggered, ERR_FATAL; source 03:00.0
    put(&mut b, 0x10c, &0x0004_0000u32.to_le_bytes()); // RP PIO: memory completion timeout
    put(&mut b, 0x160, &ext(0x10, 0x1c0));
    put(
        &mut b,
        0x164,
        &[
            0x01, 0x00, 0x20, 0x00, 0x19, 0x00, 0x00, 0x00, 0x08, 0x00, 0x10, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02, 0x00,
            0x01, 0x00, 0x00, 0x00, 0x1e, 0x10,
        ],
    );
    put(&mut b, 0x17c, &[0x53, 0x05, 0, 0, 0x01, 0, 0, 0, 0x0c, 0, 0, 0xe0, 0x38, 0, 0, 0]);
    put(&mut b, 0x1c0, &ext(0x19, 0x200));
    put(&mut b, 0x1c4, &[0x01, 0, 0, 0, 0x04, 0, 0, 0, 0x24, 0x37]);
    put(&mut b, 0x200, &ext(0x25, 0x220));
    put(&mut b, 0x204, &[0x01, 0, 0, 0x80, 0x01, 0, 0, 0x80]);
    put(&mut b, 0x220, &ext(0x26, 0x260));
    put(&mut b, 0x22c, &[0x0f, 0, 0, 0, 0x02, 0, 0, 0]);
    put(&mut b, 0x240, &[0x75, 0x75, 0x75, 0x75]);
    put(&mut b, 0x260, &ext(0x2a, 0));
    put(&mut b, 0x264, &[0x03, 0x01, 0, 0, 0, 0x01, 0, 0, 0x0f, 0x01, 0, 0]);
    let (code, out, err) = decode_bytes("dpc-sriov", &b);
    assert_eq!(code, Some(0), "{out}{err}");
    for want in [
        "DPC [100]: trigger on ERR_NONFATAL or ERR_FATAL; RPExt+ PoisonedTLP+ SwTrigger+ RP PIO Log 6 DL_ActiveErr-, INT Msg #3",
        "TRIGGERED: ERR_FATAL received (reason 2, ext 0), source 03:00.0",
        "RP PIO: status 0x00040000",
        "SR-IOV [160]: VFs 4 of 16 (initial 8), VF Enable+ MSE+ ARIHierarchy+ Migration-, VF device 101e, first VF offset 2, stride 1",
        "page sizes: supported 0x00000553, system 0x00000001 (4KB)",
        "VF BAR0 Memory at 38e0000000 (64-bit, prefetchable)",
        "LnkCtl3: LnkEquIntrruptEn- PerformEqu+",
        "LaneErrStat: LaneErr at lane: 2",
        "marrow: 8GT/s Tx presets DSP/USP per lane (4 lanes, LinkWidth): 4/7 0/0 0/0 0/0",
        "Data Link Feature [200]: exchange enabled, local features 0x000001 (scaled flow control yes), remote 0x000001",
        "Physical Layer 16GT/s [220]: EqComplete+ Phase1+ Phase2+ Phase3+ EqRequest-; data parity mismatch lanes: local 0x2",
        "Tx presets DSP/USP per lane (4 lanes, LinkWidth): 5/7 5/7 5/7 5/7",
        "Physical Layer 32GT/s [260]: EqComplete+ Phase1+ Phase2+ Phase3+ EqRequest-; EqBypass+ NoEqNeeded+ ModifiedTS modes 001 (selected 1), precoding on",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
}

/// Issue 21's cases: a header-only dump, PME support in lspci's order, the
/// JSON form, and TLP inputs that are not one header.
#[test]
fn header_only_dump_pme_order_json_and_tlp_errors() {
    let mut b = vec![0u8; 64];
    b[0..4].copy_from_slice(&[0x86, 0x80, 0x34, 0x12]);
    b[6] = 0x10;
    b[0x34] = 0x40;
    let (code, out, err) = decode_bytes("hdr64", &b);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("Capabilities: <access denied>"), "{out}");
    // PMC 0xc803: PME from D0, D3hot and D3cold (PM 1.2 §3.2.3; lspci prints it so).
    let mut b = vec![0u8; 256];
    b[0..4].copy_from_slice(&[0x86, 0x80, 0x34, 0x12]);
    b[6] = 0x10;
    b[0x34] = 0x40;
    b[0x40..0x44].copy_from_slice(&[0x01, 0x00, 0x03, 0xc8]);
    let (code, out, _) = decode_bytes("pm", &b);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("PME(D0+,D1-,D2-,D3hot+,D3cold+)"), "{out}");
    let path = std::env::temp_dir().join(format!("marrow-json-{}", std::process::id()));
    std::fs::write(&path, &b).unwrap();
    let o =
        Command::new(env!("CARGO_BIN_EXE_marrow")).args(["decode", "--pcie", "--json"]).arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let pmc = &j["functions"][0]["capabilities"][0]["registers"][2];
    assert_eq!(
        (pmc["name"].as_str(), pmc["offset"].as_u64(), pmc["raw"].as_u64()),
        (Some("pmc"), Some(0x42), Some(0xc803))
    );
    assert_eq!(pmc["fields"]["pmc_pme_support"].as_u64(), Some(0x19));
    let (code, _, err) = decode_bytes("prefix", b"80000000\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("no header after it"), "{err}");
    let (code, _, err) = decode_bytes("five", b"00000001 00000000 00000000 00000000 00000000\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("a TLP header is at most 4 dwords"), "{err}");
    let (code, _, err) = decode_bytes("nothex", b"4a000001 0100zz04\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("TLP header word 2 \"0100zz04\" is not a hex dword"), "{err}");
    // CplD with reserved status 0b011.
    let (code, out, _) = decode_bytes("cpl", b"4a000001 01006004 00000000\n");
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("RESERVED_CPL_STATUS"), "{out}");
    // MWr of 2 DW at 0xffc crosses 4 KB.
    let (code, out, _) = decode_bytes("4k", b"40000002 000000ff 00000ffc\n");
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("CROSSES_4K"), "{out}");
}

/// Every dump under tests/fixtures/pcie: the `lspci -x` text files and the
/// raw binaries (sysfs `config` copies).
fn every_fixture() -> Vec<std::path::PathBuf> {
    let root = std::path::PathBuf::from(fixture(""));
    let mut out = Vec::new();
    for dir in ["pciutils-tests", "pcics", "h200-vm", "cpu-vm"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let text_dump = (dir == "pciutils-tests" && !name.contains('.') && name != "COPYING")
                || name.ends_with("lspci-x.txt")
                || name.ends_with("lspci-xxxx.txt");
            if text_dump || name.ends_with(".config") || name.ends_with(".config.bin") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The bytes of each function of a dump, read independently of the CLI:
/// raw binaries as they are, text through marrow-pcie's `lspci -x` parser.
fn dump_functions(path: &std::path::Path) -> Vec<Vec<u8>> {
    let raw = std::fs::read(path).unwrap();
    let name = path.to_string_lossy();
    if name.ends_with(".config") || name.ends_with(".config.bin") {
        return vec![raw];
    }
    let text = String::from_utf8(raw).unwrap();
    marrow_pcie::dump::parse_lspci_text(&text).unwrap().into_iter().map(|f| f.bytes).collect()
}

#[derive(Default, Debug)]
struct JsonTally {
    registers: usize,
    fields: usize,
    errors: usize,
}

/// Walks the JSON of one function: each register's `raw` against the dump
/// bytes at its `offset`, each of its `fields` against `(raw >> lo) & mask`
/// with the bit range of the generated LAYOUT (the enclosing block's layout
/// when it names one, else the layouts with a register of that name, size
/// and field set, told apart by the offset from the enclosing capability),
/// and every object with an `error` as `{error, offset}`.
fn check_json(at: &str, v: &serde_json::Value, bytes: &[u8], ctx: (Option<&str>, Option<u64>), t: &mut JsonTally) {
    use marrow_pcie::generated::pcie::ALL_LAYOUTS;
    use serde_json::Value;
    match v {
        Value::Array(items) => items.iter().for_each(|x| check_json(at, x, bytes, ctx, t)),
        Value::Object(m) => {
            if let Some(e) = m.get("error") {
                let keys: Vec<&str> = m.keys().map(String::as_str).collect();
                assert_eq!(keys, ["error", "offset"], "{at}: error object {v}");
                assert!(e.is_string() && (m["offset"].is_u64() || m["offset"].is_null()), "{at}: {v}");
                t.errors += 1;
                return;
            }
            let is_register = ["name", "offset", "size", "raw", "fields"].iter().all(|k| m.contains_key(*k));
            if !is_register {
                let layout = m.get("layout").and_then(Value::as_str).or(ctx.0);
                let base = m.get("offset").and_then(Value::as_u64).or(ctx.1);
                let ctx = if m.contains_key("layout") || m.contains_key("registers") { (layout, base) } else { ctx };
                m.values().for_each(|x| check_json(at, x, bytes, ctx, t));
                return;
            }
            let name = m["name"].as_str().unwrap();
            let offset = m["offset"].as_u64().unwrap() as usize;
            let size = m["size"].as_u64().unwrap() as usize;
            let raw = m["raw"].as_u64().unwrap();
            let fields = m["fields"].as_object().unwrap();
            let mut le = [0u8; 8];
            le[..size].copy_from_slice(&bytes[offset..offset + size]);
            assert_eq!(raw, u64::from_le_bytes(le), "{at}: {name} at {offset:#x}: raw against the dump bytes");
            t.registers += 1;
            let keys: std::collections::BTreeSet<&str> = fields.keys().map(String::as_str).collect();
            let mut candidates: Vec<&marrow_layout::FieldLayout> = ALL_LAYOUTS
                .iter()
                .filter(|l| ctx.0.is_none_or(|n| l.name == n))
                .flat_map(|l| l.fields.iter())
                .filter(|f| f.name == name && f.size == size)
                .filter(|f| f.bits.iter().map(|b| b.name).collect::<std::collections::BTreeSet<_>>() == keys)
                .collect();
            let ranges = |c: &[&marrow_layout::FieldLayout]| {
                c.iter()
                    .map(|f| f.bits.iter().map(|b| (b.name, b.hi, b.lo)).collect::<Vec<_>>())
                    .collect::<std::collections::BTreeSet<_>>()
            };
            if ranges(&candidates).len() > 1
                && let Some(base) = ctx.1
            {
                candidates.retain(|f| (offset as u64).checked_sub(base) == Some(f.offset as u64));
            }
            if let (Some(_), Some(base), [f]) = (ctx.0, ctx.1, candidates.as_slice()) {
                assert_eq!(offset as u64, base + f.offset as u64, "{at}: {name}: offset in its layout");
            }
            assert_eq!(ranges(&candidates).len(), 1, "{at}: {name} at {offset:#x}: no single layout register");
            for b in candidates[0].bits {
                let mask = if b.hi - b.lo >= 63 { u64::MAX } else { (1u64 << (b.hi - b.lo + 1)) - 1 };
                assert_eq!(fields[b.name].as_u64(), Some((raw >> b.lo) & mask), "{at}: {name}.{}", b.name);
                t.fields += 1;
            }
        }
        _ => {}
    }
}

/// `decode --pcie --json` on every fixture: the JSON is tied to the bytes.
#[test]
fn json_registers_and_fields_are_the_dump_bytes() {
    let mut t = JsonTally::default();
    let fixtures = every_fixture();
    assert!(fixtures.len() >= 21, "{fixtures:?}");
    for path in &fixtures {
        let at = path.strip_prefix(fixture("")).unwrap_or(path).display().to_string();
        let o =
            Command::new(env!("CARGO_BIN_EXE_marrow")).args(["decode", "--pcie", "--json"]).arg(path).output().unwrap();
        assert!(matches!(o.status.code(), Some(0 | 2)), "{at}: {:?}", o.status);
        let j: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{at}: {e}"));
        let functions = j["functions"].as_array().unwrap();
        let dumps = dump_functions(path);
        assert_eq!(functions.len(), dumps.len(), "{at}: functions");
        let errors_before = t.errors;
        for (f, bytes) in functions.iter().zip(&dumps) {
            assert_eq!(f["length"].as_u64(), Some(bytes.len() as u64), "{at}");
            assert!(f["errors"].is_array(), "{at}");
            check_json(&at, f, bytes, (None, None), &mut t);
        }
        // Exit status 2 exactly when there are errors, and they are in the JSON.
        assert_eq!(o.status.code() == Some(2), t.errors > errors_before, "{at}: exit status and errors");
    }
    eprintln!(
        "{} fixtures: {} registers' raw values equal the dump bytes, {} fields equal (raw >> lo) & mask, {} errors are {{error, offset}}",
        fixtures.len(),
        t.registers,
        t.fields,
        t.errors
    );
    assert!(t.registers > 1000 && t.fields > 3000 && t.errors >= 1, "too little checked");
}

/// Each function's capability blocks (`[offset]` → lines, whitespace
/// folded) from `lspci -vvv`-style text: the title line without its
/// `Capabilities: [..]` head, then the block's lines.
fn capability_blocks(text: &str) -> std::collections::BTreeMap<(String, String), Vec<String>> {
    let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut blocks = std::collections::BTreeMap::new();
    let (mut dev, mut cur) = (String::new(), None);
    for line in text.lines() {
        if !line.is_empty() && !line.starts_with('\t') {
            dev = line.split(' ').next().unwrap_or("").to_string();
            cur = None;
        } else if let Some(rest) = line.strip_prefix("\tCapabilities: [") {
            let (at, title) = rest.split_once("] ").unwrap_or((rest, ""));
            let at = at.split(' ').next().unwrap_or(at).trim_start_matches('0').to_string();
            let key = (dev.clone(), at);
            blocks.insert(key.clone(), vec![fold(title)]);
            cur = Some(key);
        } else if line.starts_with("\t\t") {
            if let Some(v) = cur.as_ref().and_then(|k| blocks.get_mut(k)) {
                v.push(fold(line));
            }
        } else {
            cur = None;
        }
    }
    blocks
}

/// A capability's name from its title: the words before the first that
/// holds a value (`Express (v2) Root Port` is Express, `Power Management
/// version 3` Power Management, `SATA HBA v1.0 ...` SATA HBA).
fn cap_name(title: &str) -> String {
    let head = title.split(':').next().unwrap_or("");
    let words: Vec<&str> = head
        .split(' ')
        .take_while(|w| {
            let value = |w: &str| w.starts_with(|c: char| c.is_ascii_digit() || c == '(' || c == '<');
            let serial = w.contains('-') && w.chars().all(|c| c.is_ascii_hexdigit() || c == '-');
            !value(w) && !serial && !w.strip_prefix('v').is_some_and(value) && *w != "version"
        })
        .collect();
    words.join(" ")
}

/// Line for line with `lspci -F DUMP -vvv` on every text fixture, both
/// ways, for every capability. Lines marrow adds of its own start with
/// `marrow:` and are left out; where lspci decodes nothing (its title ends
/// in `<?>`), only the title is compared. The one exception is narrow and
/// checked: lspci names a bridge's Subsystem from pci.ids, which marrow
/// does not carry, so that title is compared with `lspci -n`'s (the IDs as
/// numbers), and every other block must be the same under `-n`. The lines
/// compared are counted per capability and printed (`--nocapture`).
#[test]
fn capabilities_print_line_for_line_as_lspci() {
    const MARROW_ONLY: &str = "marrow:";
    let lspci = |path: &std::path::Path, numeric: bool| {
        let mut c = std::process::Command::new("lspci");
        c.arg("-F").arg(path).arg("-vvv");
        if numeric {
            c.arg("-n");
        }
        capability_blocks(&String::from_utf8_lossy(&c.output().expect("lspci").stdout))
    };
    let (mut compared, mut wrong) = (0, Vec::new());
    let mut per_cap: std::collections::BTreeMap<String, usize> = Default::default();
    for path in every_fixture().into_iter().filter(|p| !p.to_string_lossy().contains(".config")) {
        let theirs = lspci(&path, false);
        let numeric = lspci(&path, true);
        let ours = std::process::Command::new(env!("CARGO_BIN_EXE_marrow"))
            .args(["decode", "--pcie"])
            .arg(&path)
            .output()
            .unwrap();
        let ours = capability_blocks(&String::from_utf8_lossy(&ours.stdout));
        assert_eq!(theirs.len(), numeric.len(), "{}: lspci -n", path.display());
        for (key, named) in &theirs {
            let lines = &numeric[key];
            if named[0].starts_with("Subsystem: ") {
                assert_eq!(named.len(), 1, "{}: {key:?}: Subsystem is one line", path.display());
            } else {
                assert_eq!(named, lines, "{}: {key:?}: -n changes only Subsystem names", path.display());
            }
            let mut mine = ours.get(key).cloned().unwrap_or_default();
            mine.retain(|l| !l.starts_with(MARROW_ONLY));
            if lines[0].ends_with("<?>") {
                mine.truncate(1);
            }
            let differ =
                lines.iter().filter(|l| !mine.contains(l)).count() + mine.iter().filter(|l| !lines.contains(l)).count();
            compared += lines.len();
            *per_cap.entry(cap_name(&lines[0])).or_default() += lines.len();
            if differ > 0 {
                wrong.push(format!(
                    "{} {key:?}:\n  lspci:  {}\n  marrow: {}",
                    path.display(),
                    lines.join("\n          "),
                    mine.join("\n          ")
                ));
            }
        }
    }
    for (name, lines) in &per_cap {
        eprintln!("held to lspci: {name}: {lines} lines");
    }
    eprintln!("held to lspci: {compared} lines of every text fixture");
    assert!(compared > 1000, "only {compared} lines compared");
    for name in [
        "Vendor Specific Information",
        "Subsystem",
        "PCI Advanced Features",
        "Root Complex Link",
        "Multicast",
        "Debug port",
        "Vital Product Data",
        "SATA HBA",
    ] {
        assert!(per_cap.get(name).is_some_and(|&n| n > 0), "no {name} lines compared: {per_cap:?}");
    }
    assert!(wrong.is_empty(), "{} capabilities differ from lspci:\n{}", wrong.len(), wrong.join("\n"));
}

/// The H200 fixture's header (it has a PCI Express capability, so lspci
/// walks the extended list) with a Virtual Channel at 0x100 carrying a VC
/// Arbitration Table and two Port Arbitration Tables (PCIe 6.0 §7.9.1.9,
/// §7.9.1.10), and IDE at 0x200 with two link and two selective streams
/// (§7.9.26.4, §7.9.26.5), as `lspci -x` text.
fn vc_ide_dump(ide_next: u32) -> (Vec<u8>, String) {
    let mut b = std::fs::read(fixture("h200-vm/10de_2335_h200_00-06.0.config")).unwrap();
    b.truncate(256);
    b.resize(4096, 0xa5);
    let mut p32 = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    p32(0x100, 0x0002 | 1 << 16 | 0x200 << 20);
    p32(0x104, 2 << 10 | 1); // PATEntryBits 4, one extended VC
    p32(0x108, 4 << 24 | 0b110); // VC table at +0x40, WRR32 and WRR64: 64 phases
    p32(0x10c, 1 << 1); // ArbSelect WRR32, status 0
    p32(0x110, 6 << 24 | 0b10); // VC0: WRR32, table at +0x60
    p32(0x114, 1 << 31 | 1 << 17 | 0xff);
    p32(0x118, 0);
    p32(0x11c, 8 << 24 | 0b1_0000); // VC1: TWRR128, table at +0x80
    p32(0x120, 1 << 24 | 4 << 17 | 0x02);
    p32(0x124, 0);
    for i in 0..8 {
        p32(0x140 + 4 * i, 0x7654_3210); // VC IDs 0..7
    }
    for i in 0..4 {
        p32(0x160 + 4 * i, 0x1111_1111 * i as u32); // ports: 8 of each
    }
    for i in 0..16 {
        p32(0x180 + 4 * i, 0xfedc_ba98);
    }
    p32(0x200, 0x0030 | 1 << 16 | ide_next << 20);
    p32(0x204, 1 << 16 | 1 << 13 | 0b11); // 2 selective, 2 link streams
    p32(0x208, 0);
    p32(0x20c, 7 << 24 | 1 << 19 | 1);
    p32(0x210, 2);
    p32(0x214, 8 << 24);
    p32(0x218, 1 << 31);
    p32(0x21c, 2); // selective 0: two address blocks
    p32(0x220, 9 << 24 | 1);
    p32(0x224, 2);
    p32(0x228, 0x01ff << 8);
    p32(0x22c, 0x0100 << 8 | 1);
    p32(0x230, 0x123 << 20 | 0x100 << 8 | 1);
    p32(0x234, 1);
    p32(0x238, 1);
    p32(0x23c, 0x7ff << 20 | 0x400 << 8);
    p32(0x240, 0);
    p32(0x244, 0);
    p32(0x248, 0); // selective 1: none
    p32(0x24c, 10 << 24);
    for at in [0x250, 0x254, 0x258] {
        p32(at, 0);
    }
    if ide_next != 0 {
        p32(ide_next as usize, 0);
    }
    let mut text = String::from("00:06.0 Device\n");
    for (i, row) in b.chunks(16).enumerate() {
        let hex: Vec<String> = row.iter().map(|x| format!("{x:02x}")).collect();
        text += &format!("{:02x}: {}\n", i * 16, hex.join(" "));
    }
    (b, text + "\n")
}

/// VC keeps every line lspci prints (including its `Port Arbitration Table
/// [140] <?>` for the VC table) and adds the tables on `marrow:` lines; the
/// IDE stream blocks print in spec names; the JSON is tied to the bytes.
#[test]
fn vc_arbitration_tables_and_ide_streams() {
    let (bytes, text) = vc_ide_dump(0);
    let path = std::env::temp_dir().join(format!("marrow-vc-ide-{}", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let run = |args: &[&str]| Command::new(env!("CARGO_BIN_EXE_marrow")).args(args).arg(&path).output().unwrap();
    let out = run(&["decode", "--pcie"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let ours = String::from_utf8_lossy(&out.stdout).into_owned();
    let lspci = Command::new("lspci").arg("-F").arg(&path).arg("-vvv").output().expect("lspci");
    let theirs = capability_blocks(&String::from_utf8_lossy(&lspci.stdout));
    let mine = capability_blocks(&ours);
    let key = ("00:06.0".to_string(), "100".to_string());
    let mut vc = mine[&key].clone();
    vc.retain(|l| !l.starts_with("marrow:"));
    assert_eq!(vc, theirs[&key], "the Virtual Channel lines lspci prints");
    for want in [
        "marrow: VC Arbitration Table [140]: 64 phases of 4 bits (ArbSelect uses 32), VC IDs:",
        "marrow: phases 0-31: 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7",
        "marrow: VC0 Port Arbitration Table [160]: 32 phases of 4 bits (ArbSelect uses 32), ports:",
        "marrow: phases 0-31: 0 0 0 0 0 0 0 0 1 1 1 1 1 1 1 1 2 2 2 2 2 2 2 2 3 3 3 3 3 3 3 3",
        "marrow: VC1 Port Arbitration Table [180]: 128 phases of 4 bits (ArbSelect uses 128), ports:",
        "marrow: phases 96-127: 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15",
        "marrow: Link IDE Stream 1 [214]",
        "ide_link_status [218] 0x80000000: ide_link_status_fail=0x1 ide_link_status_state=0x0",
        "marrow: Selective IDE Stream 0 [21c]: RID 0100-01ff V+, 2 address association blocks",
        "marrow: Address Association 0 [230]: 0x110000000-0x1123fffff V+",
        "marrow: Selective IDE Stream 1 [248]: RID 0000-0000 V-, 0 address association blocks",
    ] {
        assert!(ours.lines().any(|l| l.trim() == want), "missing {want:?} in\n{ours}");
    }
    let out = run(&["decode", "--pcie", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = &j["functions"][0];
    let mut t = JsonTally::default();
    check_json("vc+ide", f, &bytes, (None, None), &mut t);
    let caps = f["capabilities"].as_array().unwrap();
    let find = |at: u64| caps.iter().find(|c| c["offset"] == at).cloned().unwrap();
    let vc = find(0x100);
    assert_eq!(vc["vc_arbitration_table"]["offset"], 0x140);
    assert_eq!(vc["vc_arbitration_table"]["entries"].as_array().unwrap().len(), 64);
    assert_eq!(vc["port_arbitration_tables"][1]["dwords"].as_array().unwrap().len(), 16);
    let ide = find(0x200);
    assert_eq!(ide["link_streams"].as_array().unwrap().len(), 2);
    assert_eq!(ide["selective_streams"][0]["address_associations"][1]["offset"], 0x23c);
    assert_eq!(ide["selective_streams"][1]["offset"], 0x248);
    eprintln!("VC and IDE: {} registers and {} fields equal the dump bytes", t.registers, t.fields);
    assert!(t.registers >= 60 && t.errors == 0, "{t:?}");

    // The next capability at 0x240 cuts selective stream 0's second address block.
    let (bytes, text) = vc_ide_dump(0x240);
    std::fs::write(&path, &text).unwrap();
    let out = run(&["decode", "--pcie"]);
    assert_eq!(out.status.code(), Some(2));
    let err = "error: IDE stream blocks (4 counted): capability at 0x200: the 12-byte block at 0x23c runs past the capability's end at 0x240";
    assert!(String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == err));
    let out = run(&["decode", "--pcie", "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut t = JsonTally::default();
    check_json("vc+ide cut", &j["functions"][0], &bytes, (None, None), &mut t);
    assert_eq!(t.errors, 2, "the error in the function's list and in the capability");
    let _ = std::fs::remove_file(&path);
}
