//! The dump formats engineers paste, from the tools themselves where they
//! are installed (xxd, hexdump, od) and from a port of the kernel's
//! lib/hexdump.c where they cannot be (print_hex_dump).

use super::*;
use proptest::prelude::*;
use std::process::Command;

/// `tool args FILE` run on a file holding `bytes` (hexdump cannot `-s` on a pipe): its stdout.
fn tool(tool: &str, args: &[&str], bytes: &[u8]) -> Vec<u8> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("marrow-hexin-{}-{n}.bin", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let out = Command::new(tool)
        .args(args)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("{tool} (installed for these tests) cannot run: {e}"));
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success(), "{tool} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// Bytes with a run of zero lines (for `*`), text (for the ASCII column)
/// and a short last row.
fn known_bytes() -> Vec<u8> {
    let mut b: Vec<u8> = (0u8..=0x2f).collect();
    b.extend_from_slice(&[0; 64]);
    b.extend_from_slice(b"mlx5 |err| cqe\x00\xff\x7f");
    b
}

#[derive(Clone, Copy, Debug)]
enum Prefix {
    None,
    Address(u64),
    /// `%p` hashed: each line's address is unrelated to the last.
    Hashed,
    Offset,
}

/// lib/hexdump.c `hex_dump_to_buffer`, on a little-endian CPU.
fn hex_dump_to_buffer(buf: &[u8], rowsize: usize, groupsize: usize, ascii: bool) -> String {
    let rowsize = if rowsize == 16 || rowsize == 32 { rowsize } else { 16 };
    let len = buf.len().min(rowsize);
    let mut groupsize = if groupsize.is_power_of_two() && groupsize <= 8 { groupsize } else { 1 };
    if !len.is_multiple_of(groupsize) {
        groupsize = 1;
    }
    let ascii_column = rowsize * 2 + rowsize / groupsize + 1;
    let mut s = String::new();
    if groupsize > 1 {
        for (j, g) in buf[..len].chunks(groupsize).enumerate() {
            let mut v = [0u8; 8];
            v[..groupsize].copy_from_slice(g);
            let word = u64::from_le_bytes(v);
            s.push_str(&format!("{}{word:0w$x}", if j > 0 { " " } else { "" }, w = groupsize * 2));
        }
    } else {
        let bytes: Vec<String> = buf[..len].iter().map(|b| format!("{b:02x}")).collect();
        s.push_str(&bytes.join(" "));
    }
    if ascii {
        while s.len() < ascii_column {
            s.push(' ');
        }
        s.extend(buf[..len].iter().map(|&c| if (0x20..0x7f).contains(&c) { char::from(c) } else { '.' }));
    }
    s
}

/// lib/hexdump.c `print_hex_dump`: its lines, each after `log` (what dmesg
/// puts before them) and `prefix_str`.
fn print_hex_dump(
    log: &dyn Fn(usize) -> String,
    prefix_str: &str,
    prefix: Prefix,
    rowsize: usize,
    groupsize: usize,
    buf: &[u8],
    ascii: bool,
) -> String {
    let rowsize = if rowsize == 16 || rowsize == 32 { rowsize } else { 16 };
    let mut text = String::new();
    let mut rng = fastrand::Rng::with_seed(buf.len() as u64);
    for (n, i) in (0..buf.len()).step_by(rowsize).enumerate() {
        let line = hex_dump_to_buffer(&buf[i..], rowsize, groupsize, ascii);
        let head = match prefix {
            Prefix::None => String::new(),
            Prefix::Address(base) => format!("{:016x}: ", base + i as u64),
            Prefix::Hashed => format!("{:016x}: ", rng.u32(..)),
            Prefix::Offset => format!("{i:08x}: "),
        };
        text.push_str(&format!("{}{prefix_str}{head}{line}\n", log(n)));
    }
    text
}

fn dmesg(n: usize) -> String {
    format!("[{:5}.{:06}] ", 12 + n / 3, 345_678 + n)
}

fn bare(_: usize) -> String {
    String::new()
}

#[test]
fn hexdump_c_output_with_star_lines_and_closing_offset() {
    let b = known_bytes();
    let text = tool("hexdump", &["-C"], &b);
    let shown = String::from_utf8_lossy(&text);
    assert!(shown.contains("\n*\n") && shown.contains("|mlx5 |err| cqe..|"), "{shown}");
    assert_eq!(detect(&text), InputFormat::Hexdump, "{shown}");
    assert_eq!(parse_hexdump(&text).unwrap(), b);
    // Ending in zeros: only the closing offset says how many.
    let z = [&[1u8, 2, 3][..], &[0; 77]].concat();
    assert_eq!(parse_hexdump(&tool("hexdump", &["-C"], &z)).unwrap(), z);
    // `-s`: offsets start where the dump does.
    assert_eq!(parse_hexdump(&tool("hexdump", &["-C", "-s", "5"], &b)).unwrap(), &b[5..]);
    let e = parse_hexdump(b"00000000  00 01  |..|\n00000010  02  |.|\n").unwrap_err();
    assert!(e.message.contains("does not follow"), "{e}");
    let e = parse_hexdump(b"00000000  00 01  |..|\n00000002\n00000002  02  |.|\n").unwrap_err();
    assert!(e.message.contains("closing offset"), "{e}");
}

#[test]
fn xxd_output_of_every_grouping() {
    let b = known_bytes();
    for args in [&[][..], &["-a"], &["-g1"], &["-g4"], &["-c", "32"], &["-a", "-g8", "-c", "24"]] {
        let text = tool("xxd", args, &b);
        assert_eq!(detect(&text), InputFormat::Xxd, "xxd {args:?}");
        assert_eq!(parse_xxd(&text).unwrap(), b, "xxd {args:?}");
    }
}

#[test]
fn od_an_tx1_is_plain_hex_and_its_star_needs_v() {
    let b = known_bytes();
    let text = tool("od", &["-An", "-tx1", "-v"], &b);
    assert_eq!(detect(&text), InputFormat::Hex);
    assert_eq!(read_input(&text, None).unwrap().0, b);
    let text = tool("od", &["-An", "-tx1"], &b);
    let e = read_input(&text, None).unwrap_err();
    assert!(e.message.contains("run od with -v"), "{e}");
}

/// mlx5_ib's dump_cqe: `mlx5_ib_warn(..., "dump error cqe\n")`, then
/// `print_hex_dump(KERN_WARNING, "", DUMP_PREFIX_OFFSET, 16, 1, cqe, 64, false)`.
#[test]
fn mlx5_dump_err_cqe_in_dmesg() {
    let cqe: Vec<u8> = (0..64u8).map(|i| if i >= 0x30 { i.wrapping_mul(37) } else { 0 }).collect();
    let mut text = "[ 1234.567890] mlx5_0:dump_cqe:275:(pid 4242): dump error cqe\n".to_string();
    text += &print_hex_dump(&dmesg, "", Prefix::Offset, 16, 1, &cqe, false);
    text += "[ 1234.567999] mlx5_core 0000:3b:00.0: mlx5_cmd_out_err:838: other message\n";
    assert!(text.contains("] 00000030: f0 15 3a 5f"), "{text}");
    assert_eq!(read_input(text.as_bytes(), None).unwrap(), (cqe.clone(), InputFormat::Kernel));
    // With the kernel level (`dmesg -r`), journalctl's prefix, or a device prefix.
    for head in ["<4>", "Dec 02 06:54:24 node7 kernel: ", "[  12.3][  T77] mlx5_core 0000:3b:00.0: "] {
        let t: String = text.lines().map(|l| format!("{head}{}\n", l.split_once("] ").unwrap().1)).collect();
        assert_eq!(read_input(t.as_bytes(), None).unwrap(), (cqe.clone(), InputFormat::Kernel), "{t}");
    }
    let t = "[    1.000000] mlx5_core 0000:3b:00.0 enp59s0f0np0: 00000000: 0a 0b\n";
    assert_eq!(parse_kernel(t.as_bytes()).unwrap(), [0x0a, 0x0b]);
}

/// A dump of a log file shows `kernel: ` in its ASCII column: still xxd or hexdump.
#[test]
fn dumps_of_kernel_logs_are_not_kernel_lines() {
    let log = b"Dec 02 06:54:24 node7 kernel: mlx5_core 0000:3b:00.0: link up\n".to_vec();
    for (t, f) in [("xxd", InputFormat::Xxd), ("hexdump", InputFormat::Hexdump)] {
        let args: &[&str] = if t == "xxd" { &["-c", "64"] } else { &["-C"] };
        let text = tool(t, args, &log);
        assert_eq!(detect(&text), f, "{}", String::from_utf8_lossy(&text));
        assert_eq!(read_input(&text, None).unwrap().0, log);
    }
}

#[test]
fn print_hex_dump_groups_are_little_endian_words() {
    let b: Vec<u8> = (0..16).collect();
    let text = print_hex_dump(&dmesg, "", Prefix::Offset, 16, 4, &b, true);
    assert_eq!(text, "[   12.345678] 00000000: 03020100 07060504 0b0a0908 0f0e0d0c  ................\n");
    assert_eq!(parse_kernel(text.as_bytes()).unwrap(), b);
    // The same line without the dmesg prefix reads as xxd (memory order as
    // printed) unless --input kernel says otherwise.
    let bare_line = text.split_once("] ").unwrap().1;
    assert_eq!(detect(bare_line.as_bytes()), InputFormat::Xxd);
    assert_eq!(parse_kernel(bare_line.as_bytes()).unwrap(), b);
    let e = parse_kernel(b"00000000: 00010\n").unwrap_err();
    assert!(e.message.contains("odd number"), "{e}");
    let e = parse_kernel(b"00000000: 0001020304\n").unwrap_err();
    assert!(e.message.contains("groups of 1, 2, 4 or 8 bytes"), "{e}");
    let e = parse_kernel(b"00000000: 00 01\n00000010: 02\n").unwrap_err();
    assert!(e.message.contains("does not follow"), "{e}");
}

#[test]
fn print_hex_dump_addresses_hashed_or_not() {
    let b = known_bytes();
    for prefix in [Prefix::Address(0xffff_8881_2345_6780), Prefix::Hashed] {
        let text = print_hex_dump(&bare, "", prefix, 16, 1, &b, true);
        assert_eq!(read_input(text.as_bytes(), None).unwrap(), (b.clone(), InputFormat::Kernel), "{text}");
    }
    let t = b"(____ptrval____): 01 02 03 04  ....\n";
    assert_eq!(read_input(t, None).unwrap(), (vec![1, 2, 3, 4], InputFormat::Kernel));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn print_hex_dump_round_trips(
        bytes in proptest::collection::vec(any::<u8>(), 1..200),
        rowsize in prop_oneof![Just(16usize), Just(32)],
        groupsize in prop_oneof![Just(1usize), Just(2), Just(4), Just(8)],
        prefix in prop_oneof![Just(Prefix::None), Just(Prefix::Offset), Just(Prefix::Hashed), Just(Prefix::Address(0xffff_8881_0000_0000))],
        ascii in any::<bool>(),
        in_dmesg in any::<bool>(),
        chunk in 1usize..40,
    ) {
        let log: &dyn Fn(usize) -> String = if in_dmesg { &dmesg } else { &bare };
        let text = print_hex_dump(log, "", prefix, rowsize, groupsize, &bytes, ascii);
        prop_assert_eq!(&parse_kernel(text.as_bytes()).unwrap(), &bytes, "{}", text);
        prop_assert_eq!(&super::tests::chunked(text.as_bytes(), InputFormat::Kernel, chunk).unwrap(), &bytes);
        if in_dmesg {
            prop_assert_eq!(detect(text.as_bytes()), InputFormat::Kernel);
        }
    }

    #[test]
    fn any_input_gives_bytes_or_an_error_in_every_format(
        s in "([\\[\\]0-9a-fA-FxX:*#| ,\t\r\n.<>(_)]|kernel: |mlx5_core 0000:3b:00.0: ){0,120}",
        raw in proptest::collection::vec(any::<u8>(), 0..200),
        chunk in 1usize..40,
    ) {
        for f in [InputFormat::Hex, InputFormat::Xxd, InputFormat::Hexdump, InputFormat::Kernel, InputFormat::Bin] {
            let _ = read_input(&raw, Some(f));
            let whole = read_input(s.as_bytes(), Some(f)).map(|(b, _)| b).map_err(|e| e.to_string());
            if let Ok(b) = &whole && f != InputFormat::Bin {
                prop_assert!(b.len() <= s.len() / 2 + MAX_ZERO_FILL as usize);
            }
            prop_assert_eq!(super::tests::chunked(s.as_bytes(), f, chunk), whole);
        }
        let _ = read_input(s.as_bytes(), None);
    }
}
