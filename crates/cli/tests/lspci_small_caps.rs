//! `decode --pcie` prints Vendor Specific (virtio and other), Debug port,
//! SATA HBA, PCI Advanced Features, Vital Product Data, Subsystem, Root
//! Complex Link and Multicast line for line as `lspci -F DUMP -vvv -n`
//! (Debian pciutils 3.9) prints them: random register values, laid out
//! byte by byte from the sections the decoders cite (PCI 3.0 §6.4, EHCI
//! Appendix C, AHCI §2.4, the AF ECN, VIRTIO 1.2 §4.1.4, PCIe 6.0 §7.9.8
//! and §7.9.11), for every PCI Express port type, written as `lspci -xxxx`
//! text and decoded by both. `-n`: lspci names a Subsystem from pci.ids,
//! which marrow does not carry, and prints its IDs instead under `-n`.
//! Every comparison is shown able to fail: two bits swapped in marrow's
//! copy of a dump are caught for each capability that prints a register.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

/// The capabilities this file holds to lspci, by the start of their title.
const CAPS: [&str; 8] = [
    "Vendor Specific Information",
    "Debug port",
    "SATA HBA",
    "PCI Advanced Features",
    "Vital Product Data",
    "Subsystem",
    "Root Complex Link",
    "Multicast",
];

/// Port types of the PCI Express Capabilities register (§7.5.3.2); `None`
/// for a function with no PCI Express capability (a PCI-X one instead,
/// so that lspci still shows the extended list, with no port type).
const TYPES: [Option<u8>; 10] =
    [Some(0), Some(1), Some(4), Some(5), Some(6), Some(7), Some(8), Some(9), Some(10), None];

fn put(b: &mut [u8], at: usize, bytes: &[u8]) {
    b[at..at + bytes.len()].copy_from_slice(bytes);
}

fn rand_bytes(rng: &mut fastrand::Rng, b: &mut [u8]) {
    b.iter_mut().for_each(|x| *x = rng.u8(..));
}

/// Extended capability header (PCIe 6.0 §7.6.3): ID 15:0, version 19:16, next 31:20.
fn ext_header(id: u32, next: u32) -> [u8; 4] {
    (id | 1 << 16 | next << 20).to_le_bytes()
}

/// One 4 KiB function: a PCI Express (or PCI-X) capability at 0x40, then
/// Vendor Specific at 0x80, Debug port at 0xa0, SATA at 0xa4, Advanced
/// Features at 0xac, VPD at 0xb4, SSVID at 0xbc and a second Vendor
/// Specific at 0xc4; Root Complex Link at 0x100 and Multicast at 0x200
/// (or near the end of the space, so that its link entries run past it).
fn function(rng: &mut fastrand::Rng, i: usize) -> Vec<u8> {
    let port = TYPES[i % TYPES.len()];
    let bridge = matches!(port, Some(4..=8));
    let mut b = vec![0u8; 4096];
    let virtio = rng.bool();
    let (vendor, device) = if virtio { (0x1af4u16, rng.u16(0x1000..=0x107f)) } else { (0x8086, rng.u16(..)) };
    put(&mut b, 0, &vendor.to_le_bytes());
    put(&mut b, 2, &device.to_le_bytes());
    b[6] = 0x10; // Status: Capabilities List
    b[0x0e] = u8::from(bridge);
    b[0x34] = 0x40;
    match port {
        Some(t) => put(&mut b, 0x40, &[0x10, 0x80, 0x02 | t << 4, 0]),
        None => put(&mut b, 0x40, &[0x07, 0x80, 0, 0]),
    }
    // Vendor Specific: a virtio_pci_cap (§4.1.4) with a random cfg_type,
    // or, for other vendors, bytes only; lengths on both sides of 16 and 20.
    let vndr = |rng: &mut fastrand::Rng, b: &mut [u8], at: usize, next: u8| {
        rand_bytes(rng, &mut b[at + 2..at + 0x20]);
        let len = [8u8, 15, 16, 17, 19, 20, 24, 0x20][rng.usize(0..8)];
        put(b, at, &[0x09, next, len, rng.u8(0..10)]);
    };
    vndr(rng, &mut b, 0x80, 0xa0);
    // Debug port (EHCI C.2.1): BAR number 15:13 and offset 12:0 of the word at +2.
    put(&mut b, 0xa0, &[0x0a, 0xa4]);
    put(&mut b, 0xa2, &rng.u16(..).to_le_bytes());
    // SATA (AHCI §2.4): revision at +2, SATACR1 at +4 with BARLOC 3:0.
    put(&mut b, 0xa4, &[0x12, 0xac, rng.u8(..), 0]);
    let barloc = [4u32, 5, 9, 15, rng.u32(0..16)][rng.usize(0..5)];
    put(&mut b, 0xa8, &((rng.u32(..) & !0xf) | barloc).to_le_bytes());
    // Advanced Features: length 6, AF Capabilities, Control, Status.
    put(&mut b, 0xac, &[0x13, 0xb4, 0x06, rng.u8(..), rng.u8(..), rng.u8(..)]);
    // VPD (PCI §6.4): address/F at +2, data at +4.
    put(&mut b, 0xb4, &[0x03, 0xbc]);
    rand_bytes(rng, &mut b[0xb6..0xbc]);
    // SSVID (P2P §3.2.5.13): vendor at +4, device at +6.
    put(&mut b, 0xbc, &[0x0d, 0xc4]);
    rand_bytes(rng, &mut b[0xc0..0xc4]);
    vndr(rng, &mut b, 0xc4, 0x00);
    // Root Complex Link Declaration (§7.9.8): Element Self Description
    // with 0-4 link entries (or many, running past the end of the space
    // when the capability sits near it), each link's type random.
    let near_end = rng.u8(0..4) == 0;
    let rcld = if near_end { 0xf80 } else { 0x100 };
    let mcast = if near_end { 0x100 } else { 0x200 };
    put(&mut b, 0x100, &ext_header(if near_end { 0x12 } else { 0x05 }, 0x200));
    put(&mut b, 0x200, &ext_header(if near_end { 0x0b } else { 0x12 }, if near_end { 0xf80 } else { 0 }));
    if near_end {
        put(&mut b, 0x204, &[0x01, 0x00, 0x00, 0x01]); // VSEC of 16 bytes between the two
        put(&mut b, 0xf80, &ext_header(0x05, 0));
    }
    let links = if near_end { rng.u32(5..256) } else { rng.u32(0..5) };
    let elt = [0u32, 1, 2, rng.u32(0..256)][rng.usize(0..4)];
    put(&mut b, rcld + 4, &((rng.u32(..) & 0xffff_0000) | links << 8 | elt).to_le_bytes());
    for l in 0..links.min(4) as usize {
        let at = rcld + 0x10 + 0x10 * l;
        rand_bytes(rng, &mut b[at..at + 0x10]);
    }
    // Multicast (§7.9.11): every register random.
    rand_bytes(rng, &mut b[mcast + 4..mcast + 0x30]);
    b
}

/// Function 00:`i`.0 of an `lspci -xxxx` dump: its address line, then
/// 16-byte rows (three-digit offsets past the first 256 bytes).
fn write_function(out: &mut String, i: usize, cs: &[u8]) {
    writeln!(out, "00:{:02x}.{} Device", i / 8, i % 8).unwrap();
    for (row, chunk) in cs.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let at = if row < 16 { format!("{:02x}", row * 16) } else { format!("{:03x}", row * 16) };
        writeln!(out, "{at}: {}", hex.join(" ")).unwrap();
    }
    out.push('\n');
}

fn fold(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The blocks of the capabilities of CAPS, by (device, offset): the title
/// without its `Capabilities: [..]` head, then its lines, folded.
fn blocks(text: &str) -> BTreeMap<(String, String), Vec<String>> {
    let mut out = BTreeMap::new();
    let (mut dev, mut cur) = (String::new(), None);
    for line in text.lines() {
        if !line.is_empty() && !line.starts_with('\t') {
            dev = line.split(' ').next().unwrap_or("").to_string();
            cur = None;
        } else if let Some(rest) = line.strip_prefix("\tCapabilities: [") {
            let (at, title) = rest.split_once("] ").unwrap_or((rest, ""));
            cur = None;
            if CAPS.iter().any(|c| title.starts_with(c)) {
                let key = (dev.clone(), at.split(' ').next().unwrap_or(at).to_string());
                out.insert(key.clone(), vec![fold(title)]);
                cur = Some(key);
            }
        } else if line.starts_with("\t\t") {
            if let Some(v) = cur.as_ref().and_then(|k| out.get_mut(k)) {
                v.push(fold(line));
            }
        } else {
            cur = None;
        }
    }
    out
}

fn run(cmd: &mut Command) -> String {
    String::from_utf8_lossy(&cmd.output().expect("runs").stdout).into_owned()
}

/// lspci on `theirs`, marrow on `ours`: per capability name the lines
/// compared, and every difference.
fn compare(tag: &str, theirs: &str, ours: &str) -> (BTreeMap<&'static str, usize>, Vec<String>) {
    let dir = std::env::temp_dir();
    let (tp, op) = (
        dir.join(format!("marrow-small-caps-{tag}-lspci-{}", std::process::id())),
        dir.join(format!("marrow-small-caps-{tag}-marrow-{}", std::process::id())),
    );
    std::fs::write(&tp, theirs).unwrap();
    std::fs::write(&op, ours).unwrap();
    let lspci = blocks(&run(Command::new("lspci").arg("-F").arg(&tp).args(["-vvv", "-n"])));
    let mine = blocks(&run(Command::new(env!("CARGO_BIN_EXE_marrow")).args(["decode", "--pcie"]).arg(&op)));
    if std::env::var_os("MARROW_KEEP_DUMPS").is_none() {
        let _ = (std::fs::remove_file(&tp), std::fs::remove_file(&op));
    }
    let (mut per_cap, mut wrong) = (BTreeMap::new(), Vec::new());
    for (key, lines) in &lspci {
        let cap = CAPS.iter().find(|c| lines[0].starts_with(*c)).unwrap();
        let mut m: Vec<String> = mine.get(key).cloned().unwrap_or_default();
        m.retain(|l| !l.starts_with("marrow:"));
        if lines[0].ends_with("<?>") {
            m.truncate(1);
        }
        *per_cap.entry(*cap).or_default() += lines.len();
        for l in lines.iter().filter(|l| !m.contains(l)) {
            wrong.push(format!("{key:?}: lspci prints `{l}`; marrow:\n    {}", m.join("\n    ")));
        }
        for l in m.iter().filter(|l| !lines.contains(l)) {
            wrong.push(format!("{key:?}: marrow prints `{l}`, lspci does not"));
        }
    }
    (per_cap, wrong)
}

#[test]
fn small_caps_match_lspci_for_random_registers() {
    let mut rng = fastrand::Rng::with_seed(0x736d_616c);
    let (mut total, mut wrong) = (BTreeMap::<&str, usize>::new(), Vec::new());
    for round in 0..4 {
        let mut text = String::new();
        for i in 0..40 {
            write_function(&mut text, i, &function(&mut rng, i));
        }
        let (n, w) = compare(&format!("r{round}"), &text, &text);
        n.into_iter().for_each(|(k, v)| *total.entry(k).or_default() += v);
        wrong.extend(w);
    }
    for (cap, n) in &total {
        eprintln!("{cap}: {n} lspci lines compared");
    }
    for cap in CAPS {
        assert!(total.get(cap).is_some_and(|&n| n >= 100), "too few {cap} lines compared: {total:?}");
    }
    assert!(wrong.is_empty(), "{} lines differ:\n{}", wrong.len(), wrong.join("\n"));
}

/// A dump whose two bits at `at` (bit `a` set, bit `b` clear) are swapped
/// in marrow's copy: the comparison must report the capability.
fn swap_is_caught(cap: &str, at: usize, a: u32, b: u32, tweak: impl Fn(&mut Vec<u8>)) {
    let mut rng = fastrand::Rng::with_seed(7);
    let mut cs = function(&mut rng, 0);
    tweak(&mut cs);
    let word = |cs: &[u8]| u32::from_le_bytes(cs[at..at + 4].try_into().unwrap());
    let w = (word(&cs) | 1 << a) & !(1 << b);
    cs[at..at + 4].copy_from_slice(&w.to_le_bytes());
    let mut swapped = cs.clone();
    swapped[at..at + 4].copy_from_slice(&((w & !(1 << a)) | 1 << b).to_le_bytes());
    let (mut theirs, mut ours) = (String::new(), String::new());
    write_function(&mut theirs, 0, &cs);
    write_function(&mut ours, 0, &swapped);
    let (same_n, same) = compare("same", &theirs, &theirs);
    assert!(same.is_empty() && same_n.contains_key(cap), "{cap}: unswapped: {same:?} {same_n:?}");
    let (_, w) = compare("swap", &theirs, &ours);
    assert!(!w.is_empty(), "{cap}: bits {a} and {b} at {at:#x} swapped, and the comparison saw nothing");
    eprintln!("{cap}: bits {a} and {b} of the dword at {at:#x} swapped: {} lines differ", w.len());
}

#[test]
fn swapped_bits_are_caught() {
    // Virtio: the function a virtio device, a 16-byte common config
    // capability; cfg_type bits 0 and 1 (1 CommonCfg, 2 Notify).
    swap_is_caught("Vendor Specific Information", 0x80, 24, 25, |b| {
        put(b, 0, &[0xf4, 0x1a, 0x41, 0x10]);
        put(b, 0x80, &[0x09, 0xa0, 0x10, 0x01]);
    });
    // Non-virtio: the length byte (bits 16 and 17: Len=01 against Len=02).
    swap_is_caught("Vendor Specific Information", 0x80, 16, 17, |b| put(b, 0, &[0x86, 0x80, 0, 0]));
    swap_is_caught("Debug port", 0xa0, 29, 16, |_| {});
    swap_is_caught("SATA HBA", 0xa4, 20, 16, |_| {});
    swap_is_caught("PCI Advanced Features", 0xac, 24, 25, |_| {});
    swap_is_caught("Subsystem", 0xc0, 0, 1, |_| {});
    swap_is_caught("Root Complex Link", 0x104, 24, 25, |b| put(b, 0x100, &ext_header(0x05, 0x200)));
    swap_is_caught("Multicast", 0x204, 31, 16, |b| {
        put(b, 0x40, &[0x10, 0x80, 0x42, 0]); // a root port
        put(b, 0x100, &ext_header(0x05, 0x200));
        put(b, 0x104, &0u32.to_le_bytes()); // no link entries
        put(b, 0x200, &ext_header(0x12, 0));
    });
    // VPD prints nothing of its registers (from a dump, lspci and marrow
    // both say `Not readable`), so there are no bits to swap there.
}
