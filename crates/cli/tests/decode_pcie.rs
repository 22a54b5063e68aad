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
        "10de:2335 class 030200 rev a1",
        "BAR0 memory at 0x104002000000 (64-bit, prefetchable)",
        "BAR2 memory at 0x100000000000 (64-bit, prefetchable)",
        "cap [60] EXP(0x10)",
        "cap [b0] MSIX(0x11)",
        "ext cap [100 v0] NULL(0x0)",
        "ext cap [1b8 v2] ERR(0x1)",
        "ext cap [2f0 v1] DSN(0x3)",
        "link: capable 32GT/s x16, negotiated 32GT/s x16",
        "MaxReadReq 4096",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
}

#[test]
fn root_port_with_acs_redirect() {
    let (code, out, _) = decode(&fixture("pciutils-tests/cap-aer-root"));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ACS [110]"), "{out}");
    assert!(out.contains("redirected to the root complex"), "{out}");
}

#[test]
fn broken_chain_exits_2_with_the_loop_named() {
    let (code, out, _) = decode(&fixture("pciutils-tests/broken-ecaps"));
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("error: capability list loops back to 0x790"), "{out}");
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

/// A 4DW header for an address below 4 GiB is flagged (§2.2.4.1).
#[test]
fn four_dw_below_4g_is_malformed() {
    let (code, out, _) = decode_bytes("tlp4", b"60000001 00000a0f 00000000 fee00000\n");
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("TLP MWr"), "{out}");
    assert!(out.contains("malformed: Malformed(FOUR_DW_BELOW_4G)"), "{out}");
}

#[test]
fn short_binary_is_refused() {
    let (code, _, err) = decode_bytes("short", &[0x86, 0x80, 0, 0, 0xff, 0x01]);
    assert_eq!(code, Some(2));
    assert!(err.contains("shorter than the 64-byte header"), "{err}");
}
