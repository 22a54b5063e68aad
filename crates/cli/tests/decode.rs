//! `marrow decode` run as a program on the files in `examples/` and on bad
//! input: key lines, exit status, JSON shape, and never a panic.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

fn marrow(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("marrow runs");
    // A broken pipe just means marrow did not read stdin (a FILE was given).
    let _ = child.stdin.take().expect("stdin").write_all(stdin);
    child.wait_with_output().expect("marrow exits")
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str], stdin: &[u8]) -> Run {
    let o = marrow(args, stdin);
    let r = Run {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(!r.stderr.contains("panicked"), "marrow {args:?} panicked:\n{}", r.stderr);
    r
}

fn decode_file(name: &str, extra: &[&str]) -> Run {
    let path = example(name);
    let mut args = vec!["decode", path.to_str().expect("utf-8 path")];
    args.extend_from_slice(extra);
    run(&args, b"")
}

/// Lines of `out`, leading tabs removed.
fn has_line(out: &str, want: &str) -> bool {
    out.lines().any(|l| l.trim_start() == want)
}

fn assert_lines(r: &Run, want: &[&str]) {
    for w in want {
        assert!(has_line(&r.stdout, w), "missing line {w:?} in:\n{}", r.stdout);
    }
}

/// Exit status 2, an `error:` line on stderr, no panic.
fn assert_fails(r: &Run, needle: &str) {
    assert_eq!(r.code, Some(2), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert!(r.stderr.lines().any(|l| l.starts_with("error: ")), "no error line:\n{}", r.stderr);
    assert!(r.stderr.contains(needle), "{needle:?} not in:\n{}", r.stderr);
}

fn json(r: &Run) -> serde_json::Value {
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", r.stdout))
}

// ------------------------------------------------------------------ examples

#[test]
fn rdma_write_example() {
    let r = decode_file("rdma_write.wqe.hex", &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert_lines(
        &r,
        &[
            "Input: ".to_owned() + example("rdma_write.wqe.hex").to_str().unwrap() + ", 48 bytes (plain hex)",
            "WQE: RDMA_WRITE (0x08), ds 3 (48 bytes), 1 WQEBB, QPN 0x001234, wqe_index 0x0005".into(),
            "WQEBB 0 [0x000-0x03f]".into(),
            "[0x000] mlx5_wqe_ctrl_seg".into(),
            "opmod_idx_opcode 0x00000508".into(),
            "opcode RDMA_WRITE (0x08)".into(),
            "wqe_index 0x0005".into(),
            "qpn 0x001234".into(),
            "ds 0x03".into(),
            "ce CQE_ALWAYS (0x2)".into(),
            "fm NONE (0x0)".into(),
            "[0x010] mlx5_wqe_raddr_seg".into(),
            "raddr 0x00007f0000002000".into(),
            "rkey 0x00002222".into(),
            "[0x020] mlx5_wqe_data_seg".into(),
            "byte_count 0x00001000".into(),
            "lkey 0x00001111".into(),
            "addr 0x00007f0000001000".into(),
        ]
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    assert!(r.stdout.lines().nth(1).unwrap().starts_with("Kind: wqe ("), "{}", r.stdout);
    // Reserved fields that are zero are not shown.
    assert!(!r.stdout.contains("reserved"), "{}", r.stdout);
}

#[test]
fn inline_write_example_spans_two_wqebbs() {
    let r = decode_file("inline_write.wqe.xxd", &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_lines(
        &r,
        &[
            "WQE: RDMA_WRITE (0x08), ds 5 (80 bytes), 2 WQEBBs, QPN 0x001234, wqe_index 0x0006",
            "[0x020] mlx5_wqe_inl_data_seg",
            "byte_count 0x80000028",
            "inline 1",
            "inline_len 0x028",
            "payload (40 bytes at 0x024):",
            "spans WQEBB 0 to WQEBB 1",
            "WQEBB 1 [0x040-0x07f]",
            "(continuation of the segment at 0x020)",
            "48 trailing bytes ignored (beyond ds)",
        ],
    );
    assert!(r.stdout.contains("(xxd dump)"));
    assert!(r.stdout.contains("hello from marro"), "{}", r.stdout);
    // The inline segment is listed under WQEBB 0, where it starts.
    let seg = r.stdout.find("[0x020] mlx5_wqe_inl_data_seg").unwrap();
    assert!(seg < r.stdout.find("WQEBB 1 [").unwrap());
}

#[test]
fn atomic_fa_example() {
    let r = decode_file("atomic_fa.wqe.hex", &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_lines(
        &r,
        &[
            "WQE: ATOMIC_FA (0x12), ds 4 (64 bytes), 1 WQEBB, QPN 0x001234, wqe_index 0x0007",
            "opcode ATOMIC_FA (0x12)",
            "[0x020] mlx5_wqe_atomic_seg",
            "swap_add 0x0000000000000001",
            "compare 0x0000000000000000",
            "[0x030] mlx5_wqe_data_seg",
            "byte_count 0x00000008",
        ],
    );
}

#[test]
fn err_cqe_example() {
    let r = decode_file("err_cqe.hex", &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_lines(
        &r,
        &[
            "CQE: REQ_ERR (0xd), format NO_INLINE (0x0), owner 1, QPN 0x001234, wqe_counter 0x0005",
            "[0x000] mlx5_err_cqe",
            "syndrome REMOTE_ACCESS_ERR (0x13)",
            "vendor_err_synd 0x88",
            "s_wqe_opcode RDMA_WRITE (0x08)",
            "qpn 0x001234",
            "wqe_counter 0x0005",
            "op_own 0xd1",
            "opcode REQ_ERR (0xd)",
            "format NO_INLINE (0x0)",
            "se 0",
            "owner 1",
        ],
    );
    assert!(
        r.stdout.lines().any(|l| l
            .trim_start()
            .starts_with("Completion: error REQ_ERR syndrome REMOTE_ACCESS_ERR (0x13) vendor_err_synd 0x88")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.lines().nth(1).unwrap().starts_with("Kind: cqe ("));
}

#[test]
fn err_cqe_ownership() {
    let r = decode_file("err_cqe.hex", &["--ci", "8", "--ncqe", "8"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("Ownership: software owns this CQE at consumer index 8"), "{}", r.stdout);
    let r = decode_file("err_cqe.hex", &["--ci", "0x10", "--ncqe", "8"]);
    assert!(r.stdout.contains("Ownership: hardware owns it at consumer index 16"), "{}", r.stdout);
    let r = decode_file("err_cqe.hex", &["--ci", "1", "--ncqe", "6"]);
    assert_fails(&r, "power-of-two");
    // --ci without --ncqe is a usage error.
    let r = decode_file("err_cqe.hex", &["--ci", "1"]);
    assert_eq!(r.code, Some(2));
}

#[test]
fn forced_kinds() {
    let r = decode_file("err_cqe.hex", &["--kind", "err-cqe"]);
    assert_eq!(r.code, Some(0));
    assert!(r.stdout.contains("Kind: err-cqe (--kind err-cqe)"));
    // The same bytes as a WQE: ds is 0.
    let r = decode_file("err_cqe.hex", &["--kind", "wqe"]);
    assert_fails(&r, "ds is 0");
    let r = decode_file("rdma_write.wqe.hex", &["--kind", "cqe"]);
    assert_fails(&r, "a CQE is 64 bytes");
}

// ----------------------------------------------------------------- doorbells

#[test]
fn eight_bytes_are_a_uar_doorbell_by_default() {
    let r = run(&["decode"], b"00000600 00123400\n");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("8 bytes: decoded as uar-db; use --kind qp-dbrec or cq-dbrec"), "{}", r.stdout);
    assert!(r.stdout.contains("NVSHMEM/DOCA style"), "{}", r.stdout);
    assert_lines(&r, &["[0x000] mlx5_uar_db", "wqe_index 0x0006", "qpn 0x001234"]);

    let r = run(&["decode", "-"], b"0000 0508 0012 3403");
    assert!(r.stdout.contains("rdma-core style"), "{}", r.stdout);

    let r = run(&["decode", "--kind", "qp-dbrec"], b"00000000 00000006");
    assert_eq!(r.code, Some(0));
    assert_lines(&r, &["[0x000] mlx5_qp_dbrec", "send_wqe_counter 0x0006", "rcv_wqe_counter 0x0000"]);

    let r = run(&["decode", "--kind", "cq-dbrec"], b"00000005 10000005");
    assert_eq!(r.code, Some(0));
    assert_lines(&r, &["cons_index 0x000005", "arm_sn 0x1", "arm_ci 0x000005"]);

    let r = run(&["decode", "--kind", "qp-dbrec"], b"ffff0000 00000006");
    assert_eq!(r.code, Some(0), "non-zero reserved bits warn, they do not fail");
    assert!(r.stdout.contains("!! reserved field non-zero: rcv_counter.reserved_at_0"), "{}", r.stdout);
}

// -------------------------------------------------------------- bad input

#[test]
fn truncated_wqe() {
    // The first 32 of the 48 bytes of the RDMA_WRITE example.
    let text = std::fs::read_to_string(example("rdma_write.wqe.hex")).unwrap();
    let first_two: String = text.lines().filter(|l| !l.starts_with('#')).take(2).collect::<Vec<_>>().join("\n");
    let r = run(&["decode"], first_two.as_bytes());
    assert_fails(&r, "qpn_ds.ds = 3 (48 bytes) but only 32 bytes given");
    // What decoded is still shown.
    assert!(r.stdout.contains("opcode RDMA_WRITE (0x08)"), "{}", r.stdout);
}

#[test]
fn zero_ds_wqe() {
    let r = run(&["decode", "--kind", "wqe"], b"00000508 00123400 00000008 00000000");
    assert_fails(&r, "qpn_ds.ds is 0");
    assert!(r.stderr.contains("input offset 0x004"), "{}", r.stderr);
    let r = run(&["decode"], b"00000508 00123400 00000008 00000000");
    assert_fails(&r, "ds is 0");
}

#[test]
fn empty_input() {
    assert_fails(&run(&["decode"], b""), "empty input");
    assert_fails(&run(&["decode"], b"# only a comment\n\n"), "empty input");
}

#[test]
fn random_garbage() {
    // Deterministic garbage of a length no kind takes.
    let mut x = 0x1234_5678u32;
    let bytes: Vec<u8> = (0..37)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8 | 0x80
        })
        .collect();
    let r = run(&["decode"], &bytes);
    assert!(r.stdout.is_empty() || !r.stdout.contains("Kind:"), "{}", r.stdout);
    assert_fails(&r, "37 bytes");
    assert!(r.stderr.contains("--kind"), "{}", r.stderr);
}

#[test]
fn bad_hex_says_where() {
    let r = run(&["decode"], b"00000508 00123403\n0000 00g8\n");
    assert_fails(&r, "line 2, column 8");
    let r = run(&["decode", "--input", "hex"], b"abc");
    assert_fails(&r, "odd number of hex digits");
    let r = run(&["decode", "--input", "xxd"], b"00000508 00123403");
    assert_fails(&r, "xxd");
}

#[test]
fn multiple_wqes_then_a_bad_one() {
    let text = std::fs::read_to_string(example("atomic_fa.wqe.hex")).unwrap();
    let two = format!("{text}{text}");
    let r = run(&["decode"], two.as_bytes());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout.matches("WQE: ATOMIC_FA (0x12)").count(), 2, "{}", r.stdout);
    assert!(r.stdout.contains("at input offset 0x040"), "{}", r.stdout);

    let bad = format!("{two}00000000 00000000 00000000 00000000\n");
    let r = run(&["decode", "--kind", "wqe"], bad.as_bytes());
    assert_fails(&r, "input offset 0x084");
    assert_eq!(r.stdout.matches("WQE: ATOMIC_FA (0x12)").count(), 2);
}

#[test]
fn missing_file() {
    assert_fails(&run(&["decode", "/nonexistent/marrow-example"], b""), "cannot read");
}

// ---------------------------------------------------------------------- JSON

#[test]
fn json_wqe() {
    let r = decode_file("rdma_write.wqe.hex", &["--json"]);
    assert_eq!(r.code, Some(0));
    let v = json(&r);
    assert_eq!(v["kind"], "wqe");
    assert_eq!(v["wqebbs"], 1);
    let segs = v["segments"].as_array().unwrap();
    let layouts: Vec<_> = segs.iter().map(|s| (s["offset"].as_u64().unwrap(), s["layout"].as_str().unwrap())).collect();
    assert_eq!(layouts, [(0, "mlx5_wqe_ctrl_seg"), (16, "mlx5_wqe_raddr_seg"), (32, "mlx5_wqe_data_seg")]);
    let f0 = &segs[0]["fields"][0];
    assert_eq!(
        (f0["name"].as_str(), f0["offset"].as_u64(), f0["size"].as_u64()),
        (Some("opmod_idx_opcode"), Some(0), Some(4))
    );
    assert_eq!(f0["value"], 0x0508);
    let opcode = f0["bits"].as_array().unwrap().iter().find(|b| b["name"] == "opcode").unwrap();
    assert_eq!(opcode["value"], 8);
    assert_eq!(opcode["name_str"], "RDMA_WRITE");
    let raddr = segs[1]["fields"].as_array().unwrap().iter().find(|f| f["name"] == "raddr").unwrap();
    assert_eq!(raddr["value"].as_u64(), Some(0x7f00_0000_2000));
    assert!(v.get("errors").is_none());
}

#[test]
fn json_err_cqe() {
    let r = decode_file("err_cqe.hex", &["--json"]);
    assert_eq!(r.code, Some(0));
    let v = json(&r);
    assert_eq!(v["kind"], "cqe");
    let seg = &v["segments"][0];
    assert_eq!(seg["layout"], "mlx5_err_cqe");
    let fields = seg["fields"].as_array().unwrap();
    let syn = fields.iter().find(|f| f["name"] == "syndrome").unwrap();
    assert_eq!((syn["value"].as_u64(), syn["name_str"].as_str()), (Some(0x13), Some("REMOTE_ACCESS_ERR")));
    let rsv = fields.iter().find(|f| f["name"] == "reserved_at_0").unwrap();
    assert_eq!(rsv["value"].as_str().map(str::len), Some(64), "byte arrays are hex strings");
    assert!(
        v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().starts_with("Completion: error REQ_ERR"))
    );
}

#[test]
fn json_errors_and_arrays() {
    let r = run(&["decode", "--json", "--kind", "wqe"], b"00000508 00123400 00000008 00000000");
    assert_eq!(r.code, Some(2));
    let v = json(&r);
    assert_eq!(v["errors"][0]["offset"], 4);
    assert!(v["errors"][0]["error"].as_str().unwrap().contains("ds is 0"));

    let r = run(&["decode", "--json"], b"");
    assert_eq!(r.code, Some(2));
    let v = json(&r);
    assert!(v["error"].as_str().unwrap().contains("empty input"));

    let text = std::fs::read_to_string(example("atomic_fa.wqe.hex")).unwrap();
    let r = run(&["decode", "--json"], format!("{text}{text}").as_bytes());
    assert_eq!(r.code, Some(0));
    let v = json(&r);
    let items = v.as_array().expect("several WQEs give an array");
    assert_eq!(items.len(), 2);
    assert_eq!(items[1]["offset"], 64);
}

#[test]
fn binary_input() {
    let text = std::fs::read_to_string(example("err_cqe.hex")).unwrap();
    let (bytes, _) = marrow::hexin::read_input(text.as_bytes(), None).unwrap();
    let r = run(&["decode"], &bytes);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("64 bytes (raw binary)"), "{}", r.stdout);
    assert!(r.stdout.contains("syndrome REMOTE_ACCESS_ERR (0x13)"));
}

/// The error CQE as mlx5_ib's dump_cqe leaves it in dmesg (print_hex_dump,
/// DUMP_PREFIX_OFFSET, 16 bytes of 1 a line, no ASCII), with the lines around it.
#[test]
fn dmesg_paste_of_an_error_cqe() {
    let text = std::fs::read_to_string(example("err_cqe.hex")).unwrap();
    let (bytes, _) = marrow::hexin::read_input(text.as_bytes(), None).unwrap();
    let mut paste = String::from("[ 1234.567890] mlx5_0:dump_cqe:275:(pid 4242): dump error cqe\n");
    for (i, row) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
        paste += &format!("[ 1234.56789{i}] {:08x}: {}\n", i * 16, hex.join(" "));
    }
    paste += "[ 1234.567999] mlx5_core 0000:3b:00.0: mlx5_ib_poll: other message\n";
    let r = run(&["decode"], paste.as_bytes());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("64 bytes (kernel hex dump)"), "{}", r.stdout);
    assert!(r.stdout.contains("syndrome REMOTE_ACCESS_ERR (0x13)"), "{}", r.stdout);
    // A damaged row names the format and where.
    let bad = paste.replace("00000020: 00 00", "00000020: 00 0g");
    assert_fails(&run(&["decode"], bad.as_bytes()), "is not valid a kernel hex dump: line 4");
}

// ------------------------------------------------------------ bounded input

/// A scratch file under cargo's temporary directory for integration tests.
fn scratch(name: &str, bytes: &[u8]) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("marrow-decode-{name}"));
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The 48-byte RDMA_WRITE of the examples, padded to its one WQEBB.
fn one_wqebb() -> Vec<u8> {
    let text = std::fs::read_to_string(example("rdma_write.wqe.hex")).unwrap();
    let (mut b, _) = marrow::hexin::read_input(text.as_bytes(), None).unwrap();
    b.resize(64, 0);
    b
}

/// 973 bytes of xxd whose `*` lines stand for 16 MiB of zeros each, 1.1 GiB
/// in all: refused with the cap named, or decoded no further than needed,
/// in a few MiB either way.
#[test]
fn xxd_star_lines_that_stand_for_a_gibibyte_are_bounded() {
    let mut t = b"0:00\n".to_vec();
    for k in 1u64..=69 {
        t.extend_from_slice(format!("*\n{:x}:00\n", k * ((1 << 24) + 1)).as_bytes());
    }
    t.resize(972, b'#');
    t.push(b'\n');
    assert_eq!(t.len(), 973);
    let p = scratch("star.xxd", &t);
    for kind in ["auto", "wqe", "cqe128"] {
        let r =
            common::marrow_bounded(&["decode", "--input", "xxd", "--kind", kind, p.to_str().unwrap()], 200 << 10, 60);
        assert_eq!(r.code, Some(2), "--kind {kind}: {r:?}");
        assert!(r.stderr.starts_with("error: "), "{r:?}");
    }
    let e = marrow::hexin::parse_xxd(&t).unwrap_err();
    assert!(e.message.contains("at most 0x1000000 bytes (16 MiB)"), "{e}");
}

/// 2 MiB of WQEs (32768 of them) written as 4 MiB of hex decode in a few
/// MiB: what is held is a window and one WQE, not the input or its report.
#[test]
fn decode_holds_a_window_not_the_input() {
    let w = one_wqebb();
    let mut text = String::new();
    for _ in 0..32768 {
        text.push_str(&marrow::model::hex_string(&w));
        text.push('\n');
    }
    let p = scratch("big.hex", text.as_bytes());
    for json in [false, true] {
        let mut args = vec!["decode", p.to_str().unwrap()];
        if json {
            args.push("--json");
        }
        let r = common::marrow_bounded(&args, 64 << 10, 300);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        if json {
            let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
            assert_eq!(v.as_array().unwrap().len(), 32768);
            assert_eq!(v[32767]["offset"], 32767 * 64);
        } else {
            assert!(r.stdout.starts_with(&format!("Input: {}, decoded as it is read (plain hex)\n", p.display())));
            assert_eq!(r.stdout.matches("WQE: RDMA_WRITE (0x08)").count(), 32768);
        }
    }
    let _ = std::fs::remove_file(p);
}

/// The first WQEs are printed while the input is still open: decode reads
/// and prints as it goes, it does not wait for the end.
#[test]
fn decode_prints_before_the_input_ends() {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;
    let mut child = Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["decode", "--input", "bin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (seen, wait_seen) = mpsc::channel::<()>();
    let pid = child.id();
    std::thread::spawn(move || {
        let w = one_wqebb();
        // More than the window and the output buffer; the pipe stays open
        // until the reader has seen output (or a minute has gone: then the
        // child is killed and the test fails).
        for _ in 0..4096 {
            if stdin.write_all(&w).is_err() {
                return;
            }
        }
        if wait_seen.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "Input: <stdin>, decoded as it is read (raw binary)");
    let wqes = lines.by_ref().take(2000).filter(|l| l.as_ref().is_ok_and(|l| l.starts_with("WQE: "))).count();
    assert!(wqes > 0);
    seen.send(()).unwrap();
    for _ in lines {}
    assert!(child.wait().unwrap().success());
}

/// A long CQE input whose last CQE is cut: the CQEs before it, then the error
/// (in JSON as the last element of the array), exit status 2.
#[test]
fn a_cut_cqe_after_the_window_ends_the_output_with_the_error() {
    let n = 1100;
    let mut b = vec![0u8; n * 64 + 5];
    for i in 0..n {
        b[i * 64 + 63] = 0xf0; // opcode INVALID, owner 0
    }
    let p = scratch("cut.cqe", &b);
    let r = run(&["decode", "--kind", "cqe", "--json", p.to_str().unwrap()], b"");
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    let v = json(&r);
    let items = v.as_array().unwrap();
    assert_eq!(items.len(), n + 1);
    let last = &items[n];
    assert_eq!(last["offset"], n * 64);
    assert!(last["error"].as_str().unwrap().contains("the input ends 5 bytes into CQE 1100"), "{last}");
    assert!(r.stderr.contains("the input ends 5 bytes into CQE 1100"), "{}", r.stderr);
    let r = run(&["decode", "--kind", "cqe", p.to_str().unwrap()], b"");
    assert_eq!(r.code, Some(2));
    assert_eq!(r.stdout.matches("CQE: INVALID").count(), n);
    let _ = std::fs::remove_file(p);
}

/// Malformed hex far into a long input: the WQEs before it, then the error with its line.
#[test]
fn bad_hex_after_the_window_is_reported_where_it_is() {
    let w = marrow::model::hex_string(&one_wqebb());
    let mut text = format!("{w}\n").repeat(2000);
    text.push_str("00zz\n");
    let p = scratch("late.hex", text.as_bytes());
    let r = run(&["decode", p.to_str().unwrap()], b"");
    assert_eq!(r.code, Some(2));
    assert_eq!(r.stdout.matches("WQE: RDMA_WRITE").count(), 2000);
    assert!(
        r.stderr.contains("is not valid hex: line 2001, column 3: 'z' in '00zz' is not a hex digit"),
        "{}",
        r.stderr
    );
    let _ = std::fs::remove_file(p);
}

/// /dev/zero as input: decode reads its window and says what the bytes are
/// not; --pcie reads up to its cap and names it. Neither reads on for ever.
#[test]
fn dev_zero_is_read_no_further_than_a_cap() {
    let r = common::marrow_bounded(&["decode", "/dev/zero"], 256 << 10, 60);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("cannot tell what more than 65536 bytes are: not a WQE (qpn_ds.ds is 0"), "{}", r.stderr);
    let r = common::marrow_bounded(&["decode", "--pcie", "/dev/zero"], 256 << 10, 60);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("is longer than 67108864 bytes (64 MiB), the most decode --pcie reads"), "{}", r.stderr);
}
