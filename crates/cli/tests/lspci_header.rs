//! `decode --pcie` prints the header block, every line before the first
//! `Capabilities:`, line for line as `lspci -F DUMP -vvv -n` (Debian
//! pciutils 3.9) prints it: on every real fixture (text dumps as they are,
//! raw binaries written as `lspci -x` text), and on synthetic type 0, type 1
//! and CardBus headers of random registers. `-n` because lspci names a
//! Subsystem from pci.ids, which marrow does not carry; with names, only
//! the Subsystem line may differ, and that is checked too. Lines marrow
//! adds of its own start with `marrow:` and are left out. A swap of two
//! bits in marrow's copy of a dump is shown to be caught per register.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pcie")
}

/// Every dump under tests/fixtures/pcie, as decode_pcie.rs lists them.
fn every_fixture() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["pciutils-tests", "pcics", "h200-vm", "cpu-vm"] {
        for entry in std::fs::read_dir(fixtures().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let text = (dir == "pciutils-tests" && !name.contains('.') && name != "COPYING")
                || name.ends_with("lspci-x.txt")
                || name.ends_with("lspci-xxxx.txt");
            if text || name.ends_with(".config") || name.ends_with(".config.bin") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Function `i` of an `lspci -xxxx` dump: its address line, then 16-byte
/// rows (three-digit offsets past the first 256 bytes).
fn write_function(out: &mut String, i: usize, cs: &[u8]) {
    writeln!(out, "{:02x}:{:02x}.{} Device", i / 256, (i / 8) % 32, i % 8).unwrap();
    for (row, chunk) in cs.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let at = if row < 16 { format!("{:02x}", row * 16) } else { format!("{:03x}", row * 16) };
        writeln!(out, "{at}: {}", hex.join(" ")).unwrap();
    }
    out.push('\n');
}

/// Each function's header block, in order: the lines after its title up
/// to the first `Capabilities:` (or its end), whitespace folded, `marrow:`
/// lines left out.
fn header_blocks(text: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("Input: ") {
            // marrow's line naming the file it read, before any function.
            continue;
        } else if !line.is_empty() && !line.starts_with('\t') {
            out.push(Vec::new());
            inside = true;
        } else if line.is_empty() || line.starts_with("\tCapabilities:") {
            inside = false;
        } else if inside {
            let l = line.split_whitespace().collect::<Vec<_>>().join(" ");
            if !l.starts_with("marrow:") {
                out.last_mut().unwrap().push(l);
            }
        }
    }
    out
}

fn run(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&cmd.output().expect("runs").stdout).into_owned()
}

fn lspci(path: &Path, numeric: bool) -> Vec<Vec<String>> {
    let mut c = Command::new("lspci");
    c.arg("-F").arg(path).arg("-vvv");
    if numeric {
        c.arg("-n");
    }
    header_blocks(&run(&mut c))
}

fn marrow(path: &Path) -> Vec<Vec<String>> {
    header_blocks(&run(Command::new(env!("CARGO_BIN_EXE_marrow")).args(["decode", "--pcie"]).arg(path)))
}

/// lspci's header blocks of `theirs` against marrow's of `ours`: the lines
/// compared and every difference (`at` names the dump).
fn compare(at: &str, theirs: &Path, ours: &Path) -> (usize, Vec<String>) {
    let (named, numeric, mine) = (lspci(theirs, false), lspci(theirs, true), marrow(ours));
    assert_eq!(named.len(), numeric.len(), "{at}: lspci -n");
    assert_eq!(numeric.len(), mine.len(), "{at}: functions");
    let (mut n, mut wrong) = (0, Vec::new());
    for (f, ((named, lines), m)) in named.iter().zip(&numeric).zip(&mine).enumerate() {
        let unnamed = |v: &Vec<String>| v.iter().filter(|l| !l.starts_with("Subsystem: ")).cloned().collect::<Vec<_>>();
        assert_eq!(unnamed(named), unnamed(lines), "{at} function {f}: -n changes only the Subsystem line");
        n += lines.len();
        if lines != m {
            wrong.push(format!(
                "{at} function {f}:\n  lspci:  {}\n  marrow: {}",
                lines.join("\n          "),
                m.join("\n          ")
            ));
        }
    }
    (n, wrong)
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("marrow-lspci-header-{name}-{}", std::process::id()))
}

#[test]
fn header_block_matches_lspci_on_every_fixture() {
    let (mut text_lines, mut bin_lines, mut wrong) = (0, 0, Vec::new());
    let fixtures = every_fixture();
    assert!(fixtures.len() >= 21, "{fixtures:?}");
    for path in &fixtures {
        let at = path.strip_prefix(fixtures_root()).unwrap_or(path).display().to_string();
        if at.contains(".config") {
            // lspci -F reads text only: the bytes as `lspci -xxxx` text.
            let mut text = String::new();
            write_function(&mut text, 0, &std::fs::read(path).unwrap());
            let p = scratch("bin");
            std::fs::write(&p, text).unwrap();
            let (n, w) = compare(&at, &p, path);
            let _ = std::fs::remove_file(&p);
            bin_lines += n;
            wrong.extend(w);
        } else {
            let (n, w) = compare(&at, path, path);
            text_lines += n;
            wrong.extend(w);
        }
    }
    eprintln!(
        "header lines held to lspci: {text_lines} in the text fixtures, {bin_lines} in the binary ones ({} dumps)",
        fixtures.len()
    );
    assert!(text_lines > 300 && bin_lines > 40, "too little compared");
    assert!(wrong.is_empty(), "{} header blocks differ:\n{}", wrong.len(), wrong.join("\n"));
}

fn fixtures_root() -> PathBuf {
    fixtures()
}

/// A BAR: none, all ones, 32-bit or below-1M memory, 64-bit (with its
/// upper half random or 0), I/O, or the reserved type; any address.
fn bar(rng: &mut fastrand::Rng) -> u32 {
    match rng.u8(0..8) {
        0 => 0,
        1 => u32::MAX,
        2 => rng.u32(..) & !0xf | 0x4 | (rng.u32(0..2) << 3),
        3 => rng.u32(..) | 1,
        4 => rng.u32(..) & !0xfff | rng.u32(0..16),
        _ => rng.u32(..),
    }
}

/// A function of random header registers: type 0, type 1, CardBus or an
/// unknown type, mostly with a class that fits it; windows of valid and
/// invalid types; the capability list off (its blocks are other tests').
fn function(rng: &mut fastrand::Rng) -> Vec<u8> {
    let kind = rng.u8(0..16);
    let htype = match kind {
        0..=6 => 0,
        7..=13 => 1,
        14 => 2,
        _ => rng.u8(3..0x80),
    };
    let len = if htype == 2 && rng.bool() { 64 } else { 256 };
    let mut b: Vec<u8> = (0..len).map(|_| rng.u8(..)).collect();
    b[0..2].copy_from_slice(&0x8086u16.to_le_bytes());
    b[6] &= !0x10;
    b[0x0e] = htype | if rng.bool() { 0x80 } else { 0 };
    let class: u16 = match (htype, rng.u8(0..4)) {
        (_, 0) => rng.u16(..),
        (0, _) => [0x0200, 0x0300, 0x0604, 0x0108][rng.usize(0..4)],
        _ => [0x0604, 0x0607, 0x0600][rng.usize(0..3)],
    };
    b[0x0a..0x0c].copy_from_slice(&class.to_le_bytes());
    for i in 0..6 {
        let v = bar(rng);
        b[0x10 + 4 * i..0x14 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    if htype == 1 {
        // Window types: mostly valid and agreeing, at times anything.
        let t = |rng: &mut fastrand::Rng, ok: u8| if rng.u8(0..6) == 0 { rng.u8(0..16) } else { ok };
        let (io, pf) = (rng.u8(0..2), rng.u8(0..2));
        let io = (t(rng, io), t(rng, io));
        let (m, p) = ((t(rng, 0), t(rng, 0)), (t(rng, pf), t(rng, pf)));
        b[0x1c] = b[0x1c] & 0xf0 | io.0;
        b[0x1d] = b[0x1d] & 0xf0 | io.1;
        b[0x20] = b[0x20] & 0xf0 | m.0;
        b[0x22] = b[0x22] & 0xf0 | m.1;
        b[0x24] = b[0x24] & 0xf0 | p.0;
        b[0x26] = b[0x26] & 0xf0 | p.1;
        if rng.bool() {
            // An open window of each kind, above and below 4 GiB.
            b[0x1c] &= 0x0f;
            b[0x21] &= 0x7f;
            b[0x23] |= 0x80;
            b[0x25] &= 0x7f;
            b[0x27] |= 0x80;
            b[0x28..0x2c].fill(0);
        }
    }
    // ROM: none, disabled, enabled, all ones, or anything.
    let rom_at = if htype == 1 { 0x38 } else { 0x30 };
    let rom = [0, rng.u32(..) & !1, rng.u32(..) | 1, u32::MAX, rng.u32(..)][rng.usize(0..5)];
    if htype < 2 {
        b[rom_at..rom_at + 4].copy_from_slice(&rom.to_le_bytes());
    }
    // Interrupt pin 0-4, or one whose letter is still printable text
    // (lspci prints the byte 'A' + pin - 1, which past '~' is not text).
    b[0x3d] = if rng.bool() { rng.u8(0..5) } else { rng.u8(0..0x3f) };
    if rng.u8(0..3) == 0 {
        b[0x3c] = 0;
    }
    if rng.u8(0..3) == 0 {
        b[0x2c..0x2e].copy_from_slice(&[0u16, 0xffff][rng.usize(0..2)].to_le_bytes());
    }
    b
}

#[test]
fn header_block_matches_lspci_for_random_registers() {
    let mut rng = fastrand::Rng::with_seed(0x6864_7221);
    let (mut n, mut wrong, mut text) = (0, Vec::new(), String::new());
    let mut kinds = BTreeMap::<u8, usize>::new();
    for i in 0..600 {
        let cs = function(&mut rng);
        *kinds.entry(cs[0x0e] & 0x7f).or_default() += 1;
        write_function(&mut text, i, &cs);
    }
    let p = scratch("random");
    std::fs::write(&p, &text).unwrap();
    let (c, w) = compare("random", &p, &p);
    if std::env::var_os("MARROW_KEEP_DUMPS").is_none() {
        let _ = std::fs::remove_file(&p);
    }
    n += c;
    wrong.extend(w);
    let t0 = kinds.get(&0).copied().unwrap_or(0);
    let t1 = kinds.get(&1).copied().unwrap_or(0);
    eprintln!(
        "header lines held to lspci: {n} in 600 random functions ({t0} type 0, {t1} type 1, the rest CardBus or unknown)"
    );
    assert!(n > 6000 && t0 > 200 && t1 > 200, "too little compared");
    assert!(wrong.is_empty(), "{} header blocks differ:\n{}", wrong.len(), wrong.join("\n"));
}

/// Bits `a` and `b` (one set, one clear) of the dword at `at` swapped in
/// marrow's copy of a header of type `htype`: the comparison must see it.
fn swap_is_caught(htype: u8, at: usize, a: u32, b: u32) {
    let mut rng = fastrand::Rng::with_seed(u64::from(htype) << 16 | at as u64);
    let mut cs = function(&mut rng);
    cs[0x0e] = htype;
    cs[0x0a..0x0c].copy_from_slice(&if htype == 1 { 0x0604u16 } else { 0x0200 }.to_le_bytes());
    // I/O, Mem and BusMaster on, so that Latency is printed; a bridge's
    // windows of valid types (I/O 16-bit, prefetchable 64-bit), so that
    // each is printed.
    cs[0x04] |= 0x07;
    if htype == 1 {
        for at in [0x1c, 0x1d, 0x20, 0x22] {
            cs[at] &= 0xf0;
        }
        cs[0x24] = cs[0x24] & 0xf0 | 1;
        cs[0x26] = cs[0x26] & 0xf0 | 1;
    }
    let word = |cs: &[u8]| u32::from_le_bytes(cs[at..at + 4].try_into().unwrap());
    let w = (word(&cs) | 1 << a) & !(1 << b);
    cs[at..at + 4].copy_from_slice(&w.to_le_bytes());
    let mut swapped = cs.clone();
    swapped[at..at + 4].copy_from_slice(&((w & !(1 << a)) | 1 << b).to_le_bytes());
    let (mut theirs, mut ours) = (String::new(), String::new());
    write_function(&mut theirs, 0, &cs);
    write_function(&mut ours, 0, &swapped);
    let (tp, op) = (scratch(&format!("swap-t-{at:x}-{a}")), scratch(&format!("swap-o-{at:x}-{a}")));
    std::fs::write(&tp, theirs).unwrap();
    std::fs::write(&op, ours).unwrap();
    let (same_n, same) = compare("unswapped", &tp, &tp);
    let (_, w) = compare("swapped", &tp, &op);
    let _ = (std::fs::remove_file(&tp), std::fs::remove_file(&op));
    assert!(same.is_empty() && same_n > 0, "type {htype} {at:#x}: unswapped differs: {same:?}");
    assert!(
        !w.is_empty(),
        "type {htype}: bits {a} and {b} of the dword at {at:#x} swapped, and the comparison saw nothing"
    );
    eprintln!("type {htype}: bits {a} and {b} of the dword at {at:#x} swapped: caught");
}

#[test]
fn swapped_bits_are_caught() {
    // Command (I/O against Mem, BusMaster against SERR), Status (Cap is
    // off, so 66MHz against UDF), latency timer against cache line size.
    swap_is_caught(0, 0x04, 0, 1);
    swap_is_caught(0, 0x04, 2, 8);
    swap_is_caught(0, 0x04, 21, 22);
    swap_is_caught(0, 0x0c, 8, 0);
    // BIST capable against start, BAR 0 I/O against prefetchable, ROM
    // enable against address bit 11, interrupt pin against line, MIN_GNT.
    swap_is_caught(0, 0x0c, 31, 30);
    swap_is_caught(0, 0x10, 0, 3);
    swap_is_caught(0, 0x30, 0, 11);
    swap_is_caught(0, 0x3c, 8, 0);
    swap_is_caught(0, 0x3c, 16, 24);
    // Bridge: bus numbers and sec-latency, I/O window type, memory base
    // against limit, Secondary Status, upper prefetchable, Bridge Control.
    swap_is_caught(1, 0x18, 8, 24);
    swap_is_caught(1, 0x1c, 0, 4);
    swap_is_caught(1, 0x1c, 29, 30);
    swap_is_caught(1, 0x20, 4, 20);
    swap_is_caught(1, 0x28, 0, 1);
    swap_is_caught(1, 0x3c, 16, 17);
    swap_is_caught(1, 0x3c, 26, 27);
}
