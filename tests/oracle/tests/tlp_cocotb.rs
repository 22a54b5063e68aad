//! marrow-pcie's TLP header codec against cocotbext-pcie's `Tlp` class (PyPI,
//! MIT), over 20,000 random headers of every type it packs: memory (3DW and
//! 4DW), locked reads, I/O, Cfg0/Cfg1, Cpl/CplD/CplLk/CplDLk and the three
//! AtomicOps. cocotbext-pcie packs each from random fields; we decode its
//! dwords and compare every field, and encode the same fields and compare
//! every dword. The package is installed under target/pyoracle by
//! scripts/install-test-deps.sh.

use marrow_pcie::tlp::{Attr, Body, CplStatus, TlpHeader, TlpKind};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const CASES: usize = 20_000;

fn cocotb_headers() -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let site = root.join("target/pyoracle");
    let out = Command::new("python3")
        .arg(root.join("tests/oracle/py/tlp_cocotb.py"))
        .args(["20261129", &CASES.to_string()])
        .env("PYTHONPATH", &site)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "cocotbext-pcie not usable from {} (run scripts/install-test-deps.sh): {}",
        site.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| v[k].as_bool().map(u64::from).unwrap_or_else(|| panic!("field {k} in {v}")))
}

/// The header cocotbext-pcie was asked to pack, built from its fields alone.
fn from_fields(v: &Value) -> TlpHeader {
    let name = v["name"].as_str().unwrap();
    let body = if name.starts_with("CPL") {
        Body::Completion {
            completer_id: u(v, "completer_id") as u16,
            status: CplStatus(u(v, "status") as u8),
            bcm: u(v, "bcm") != 0,
            byte_count: u(v, "byte_count") as u16,
            requester_id: u(v, "requester_id") as u16,
            lower_address: u(v, "lower_address") as u8,
        }
    } else if name.starts_with("CFG") {
        Body::Config {
            requester_id: u(v, "requester_id") as u16,
            last_be: u(v, "last_be") as u8,
            first_be: u(v, "first_be") as u8,
            target_id: u(v, "completer_id") as u16,
            register: u(v, "address") as u16,
        }
    } else {
        Body::Request {
            requester_id: u(v, "requester_id") as u16,
            last_be: u(v, "last_be") as u8,
            first_be: u(v, "first_be") as u8,
            address: u(v, "address"),
            ph: u(v, "ph") as u8,
        }
    };
    TlpHeader {
        fmt: u(v, "fmt") as u8,
        ty: u(v, "type") as u8,
        tc: u(v, "tc") as u8,
        attr: Attr::from_bits(u(v, "attr") as u8).unwrap(),
        ln: u(v, "ln") != 0,
        th: u(v, "th") != 0,
        td: u(v, "td") != 0,
        ep: u(v, "ep") != 0,
        at: u(v, "at") as u8,
        length: u(v, "length") as u16,
        tag: u(v, "tag") as u16,
        body,
    }
}

/// cocotbext-pcie's type names to the spec's kinds: checks our Fmt/Type table.
fn kind_of(name: &str) -> TlpKind {
    match name.trim_end_matches("_64") {
        "MEM_READ" => TlpKind::MemRead,
        "MEM_READ_LOCKED" => TlpKind::MemReadLocked,
        "MEM_WRITE" => TlpKind::MemWrite,
        "IO_READ" => TlpKind::IoRead,
        "IO_WRITE" => TlpKind::IoWrite,
        "CFG_READ_0" => TlpKind::CfgRead0,
        "CFG_WRITE_0" => TlpKind::CfgWrite0,
        "CFG_READ_1" => TlpKind::CfgRead1,
        "CFG_WRITE_1" => TlpKind::CfgWrite1,
        "CPL" => TlpKind::Cpl,
        "CPL_DATA" => TlpKind::CplData,
        "CPL_LOCKED" => TlpKind::CplLocked,
        "CPL_LOCKED_DATA" => TlpKind::CplLockedData,
        "FETCH_ADD" => TlpKind::FetchAdd,
        "SWAP" => TlpKind::Swap,
        "CAS" => TlpKind::Cas,
        other => panic!("unmapped cocotbext-pcie type {other}"),
    }
}

#[test]
fn tlp_headers_agree_with_cocotbext_pcie() {
    let cases = cocotb_headers();
    assert_eq!(cases.len(), CASES);
    let mut kinds = std::collections::BTreeSet::new();
    for v in &cases {
        let dws: Vec<u32> = v["dws"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as u32).collect();
        let want = from_fields(v);
        let got = TlpHeader::decode(&dws).unwrap_or_else(|e| panic!("{e}: {v}"));
        assert_eq!(got, want, "decode of {dws:08x?} ({v})");
        assert_eq!(got.kind(), kind_of(v["name"].as_str().unwrap()), "{v}");
        kinds.insert(v["name"].as_str().unwrap().to_string());
        let mut out = [0xA5A5_A5A5u32; 4];
        let n = want.encode(&mut out);
        assert_eq!(&out[..n], &dws[..], "encode of {v}");
    }
    // Every type cocotbext-pcie packs was drawn.
    assert_eq!(kinds.len(), 22, "kinds drawn: {kinds:?}");
}
