//! `decode --pcie` prints the PCI Express, DPC and SR-IOV capabilities line for line as
//! `lspci -F DUMP -vvv` (Debian pciutils 3.9, which nobody here wrote)
//! prints it: random register values for every port type, with and without
//! a slot and a memory BAR, written as `lspci -x` text, decoded by both,
//! and every line of lspci's Express block looked for in marrow's
//! (whitespace folded, as lspci aligns with tabs), and every line of
//! marrow's looked for in lspci's.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

/// Port types of the PCI Express Capabilities register (§7.5.3.2).
const TYPES: [u8; 9] = [0, 1, 4, 5, 6, 7, 8, 9, 10];

fn dump(rng: &mut fastrand::Rng, n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        let t = TYPES[i % TYPES.len()];
        let bridge = matches!(t, 4..=8);
        let mut cs = [0u8; 256];
        cs[0..4].copy_from_slice(&[0x86, 0x80, 0x30, 0x20]);
        cs[6] = 0x10; // Status: Capabilities List
        cs[0x0b] = if bridge { 6 } else { 2 };
        cs[0x0e] = u8::from(bridge);
        if !bridge && rng.bool() {
            cs[0x10..0x14].copy_from_slice(&(rng.u32(1..1 << 20) << 12).to_le_bytes());
        }
        cs[0x34] = 0x40;
        cs[0x40] = 0x10; // PCI Express, the last capability
        let slot = matches!(t, 4 | 6 | 8) && rng.bool();
        let flags = 2u16 | u16::from(t) << 4 | u16::from(slot) << 8 | rng.u16(0..32) << 9;
        cs[0x42..0x44].copy_from_slice(&flags.to_le_bytes());
        for b in &mut cs[0x44..0x74] {
            *b = rng.u8(..);
        }
        if rng.u8(0..10) < 3 {
            // A v2 capability from before LnkCap2 was defined.
            cs[0x6c..0x70].fill(0);
        }
        write_function(&mut out, i, &cs);
    }
    out
}

/// Function 00:`i`.0 of an `lspci -x`/`-xxxx` dump: its address line, then
/// 16-byte rows (three-digit offsets past the first 256 bytes).
fn write_function(out: &mut String, i: usize, cs: &[u8]) {
    writeln!(out, "00:{i:02x}.0 Device").unwrap();
    for (row, chunk) in cs.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let at = if row < 16 { format!("{:02x}", row * 16) } else { format!("{:03x}", row * 16) };
        writeln!(out, "{at}: {}", hex.join(" ")).unwrap();
    }
    out.push('\n');
}

/// Each device's lines of the capability whose line starts with `head`
/// (the title without it, then the block), whitespace folded.
fn blocks(text: &str, head: &str) -> BTreeMap<String, Vec<String>> {
    let mut blocks = BTreeMap::new();
    let (mut dev, mut cur) = (String::new(), None::<String>);
    for line in text.lines() {
        if !line.starts_with('\t') {
            dev = line.split(' ').next().unwrap_or("").to_string();
            cur = None;
        } else if let Some(rest) = line.strip_prefix(head) {
            cur = Some(dev.clone());
            blocks.insert(dev.clone(), vec![fold(rest)]);
        } else if line.starts_with("\t\t") {
            if let Some(d) = &cur {
                blocks.get_mut(d).unwrap().push(fold(line));
            }
        } else {
            cur = None;
        }
    }
    blocks
}

fn fold(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn express_lines_match_lspci_for_every_port_type() {
    let mut rng = fastrand::Rng::with_seed(0x6d61_7272);
    let path = std::env::temp_dir().join(format!("marrow-express-lines-{}.txt", std::process::id()));
    let (mut compared, mut wrong) = (0, Vec::new());
    for _ in 0..4 {
        std::fs::write(&path, dump(&mut rng, 28)).unwrap();
        let lspci = Command::new("lspci").arg("-F").arg(&path).arg("-vvv").output().expect("lspci (pciutils)");
        let ours = Command::new(env!("CARGO_BIN_EXE_marrow")).args(["decode", "--pcie"]).arg(&path).output().unwrap();
        let (theirs, ours) = (
            blocks(&String::from_utf8_lossy(&lspci.stdout), "\tCapabilities: [40] "),
            blocks(&String::from_utf8_lossy(&ours.stdout), "\tCapabilities: [40] "),
        );
        assert_eq!(theirs.len(), 28, "lspci decoded {} devices", theirs.len());
        for (dev, lines) in &theirs {
            let mine = ours.get(dev).cloned().unwrap_or_default();
            for l in lines {
                compared += 1;
                if !mine.contains(l) {
                    wrong.push(format!("{dev}: lspci prints `{l}`; marrow:\n    {}", mine.join("\n    ")));
                }
            }
            for l in &mine {
                if !lines.contains(l) {
                    wrong.push(format!("{dev}: marrow prints `{l}`, lspci does not"));
                }
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    eprintln!("Express lines compared with lspci: {compared}");
    assert!(compared > 1000, "only {compared} lines compared");
    assert!(wrong.is_empty(), "{} of {compared} lines differ:\n{}", wrong.len(), wrong.join("\n"));
}

/// Functions with DPC at 0x100 and SR-IOV at 0x180, every register random
/// (half the RP PIO registers zero), as 4 KiB `lspci -xxxx` text.
fn ext_dump(rng: &mut fastrand::Rng, n: usize, port_type: u8) -> String {
    let mut out = String::new();
    for i in 0..n {
        let mut cs = vec![0u8; 4096];
        cs[0..4].copy_from_slice(&[0x86, 0x80, 0x30, 0x20]);
        cs[6] = 0x10;
        cs[0x0e] = u8::from(matches!(port_type, 4..=6));
        cs[0x34] = 0x40;
        cs[0x40] = 0x10;
        cs[0x42] = 0x02 | port_type << 4;
        cs[0x100..0x104].copy_from_slice(&(0x1du32 | 1 << 16 | 0x180 << 20).to_le_bytes());
        for b in &mut cs[0x104..0x118] {
            *b = rng.u8(..);
        }
        for b in &mut cs[0x118..0x140] {
            *b = if rng.bool() { rng.u8(..) } else { 0 };
        }
        cs[0x180..0x184].copy_from_slice(&(0x10u32 | 1 << 16).to_le_bytes());
        for b in &mut cs[0x184..0x1c0] {
            *b = rng.u8(..);
        }
        write_function(&mut out, i, &cs);
    }
    out
}

#[test]
fn dpc_and_sriov_lines_match_lspci() {
    let mut rng = fastrand::Rng::with_seed(0x5249_4f56);
    let path = std::env::temp_dir().join(format!("marrow-dpc-sriov-lines-{}.txt", std::process::id()));
    let (mut compared, mut wrong) = (0, Vec::new());
    for port_type in [0u8, 4, 6] {
        for _ in 0..3 {
            std::fs::write(&path, ext_dump(&mut rng, 8, port_type)).unwrap();
            let lspci = Command::new("lspci").arg("-F").arg(&path).arg("-vvv").output().expect("lspci (pciutils)");
            let ours =
                Command::new(env!("CARGO_BIN_EXE_marrow")).args(["decode", "--pcie"]).arg(&path).output().unwrap();
            let (lspci, ours) = (String::from_utf8_lossy(&lspci.stdout), String::from_utf8_lossy(&ours.stdout));
            for at in ["100", "180"] {
                let head = format!("\tCapabilities: [{at} v1] ");
                let theirs = blocks(&lspci, &head);
                let mine_all = blocks(&ours, &head);
                assert_eq!(theirs.len(), 8, "lspci decoded {} capabilities at {at}", theirs.len());
                for (dev, lines) in &theirs {
                    // marrow's own reading of the registers follows, marked.
                    let mine: Vec<String> = mine_all
                        .get(dev)
                        .cloned()
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|l| !l.starts_with("marrow:"))
                        .collect();
                    compared += lines.len();
                    for l in lines.iter().filter(|l| !mine.contains(l)) {
                        wrong.push(format!("{dev} [{at}]: lspci prints `{l}`"));
                    }
                    for l in mine.iter().filter(|l| !lines.contains(l)) {
                        wrong.push(format!("{dev} [{at}]: marrow prints `{l}`, lspci does not"));
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_file(&path);
    eprintln!("DPC and SR-IOV lines compared with lspci: {compared}");
    assert!(compared > 500, "only {compared} lines compared");
    assert!(wrong.is_empty(), "{} of {compared} lines differ:\n{}", wrong.len(), wrong.join("\n"));
}
