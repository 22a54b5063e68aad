//! The real config dumps under tests/fixtures/pcie that `lspci -F` reads.

use std::path::{Path, PathBuf};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pcie")
}

/// Every text dump: the pciutils test files and the `lspci -x` captures.
pub fn text_dumps() -> Vec<PathBuf> {
    let root = fixtures();
    let mut out = Vec::new();
    for dir in ["pciutils-tests", "pcics", "h200-vm", "cpu-vm"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("fixture folder") {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let is_dump = (dir == "pciutils-tests" && !name.contains('.') && name != "COPYING")
                || name.ends_with("lspci-x.txt")
                || name.ends_with("lspci-xxxx.txt");
            if is_dump {
                out.push(path);
            }
        }
    }
    out.sort();
    assert!(out.len() >= 13, "expected the 13 fixture dumps, found {out:?}");
    out
}
