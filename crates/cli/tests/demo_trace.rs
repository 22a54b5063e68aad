//! `marrow demo` and `marrow trace show` run as programs: the demo's table
//! and trace file; the trace decoder's filters on that trace and on a trace
//! with an injected error; damaged files.

mod common;
use common::{Run, marrow, s, tmp};

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, Side};
use marrow_softnic::trace::{self, Kind};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// Record lines of `trace show` output (not the details under them, not the footer).
fn records(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with('#')).collect()
}

/// One quick demo run for every test that needs its trace.
fn demo() -> &'static (Run, PathBuf) {
    static DEMO: OnceLock<(Run, PathBuf)> = OnceLock::new();
    DEMO.get_or_init(|| {
        let path = tmp("demo.trace");
        let r = marrow(&["demo", "--quick", "--trace-out", s(&path)]);
        (r, path)
    })
}

#[test]
fn demo_quick_prints_every_operation_and_writes_a_trace() {
    let (r, path) = demo();
    assert_eq!(r.code, Some(0), "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    let table: Vec<&str> = r.stdout.lines().collect();
    let row =
        |op: &str, size: &str| table.iter().any(|l| l.starts_with(op) && l[op.len()..].trim_start().starts_with(size));
    for size in ["8 B", "64 B", "4 KiB", "64 KiB", "1 MiB"] {
        assert!(row("RDMA_WRITE ", size), "no RDMA_WRITE {size} row:\n{}", r.stdout);
        assert!(row("RDMA_READ ", size), "no RDMA_READ {size} row:\n{}", r.stdout);
    }
    for (op, size) in [
        ("RDMA_WRITE inline ", "8 B"),
        ("RDMA_WRITE inline ", "64 B"),
        ("RDMA_WRITE inline, 16 per doorbell", "8 B"),
        ("ATOMIC_FA", "8 B"),
        ("ATOMIC_CS swapped", "8 B"),
        ("ATOMIC_CS compare failed", "8 B"),
        ("ATOMIC_MASKED_FA", "4 B"),
        ("ATOMIC_MASKED_FA", "8 B"),
        ("ATOMIC_MASKED_CS", "4 B"),
        ("ATOMIC_MASKED_CS", "8 B"),
        ("SEND/RECV (A→B, B→A)", "64 B"),
        ("SEND/RECV (A→B, B→A)", "4 KiB"),
    ] {
        assert!(row(op, size), "no {op} {size} row:\n{}", r.stdout);
    }
    assert!(table.iter().any(|l| l.starts_with("total")), "{}", r.stdout);
    for h in ["p50 µs", "p99 µs", "max µs", "ops/s"] {
        assert!(r.stdout.contains(h), "no column {h}");
    }
    assert!(r.stdout.contains("Register trace excerpt: the first RDMA_WRITE"), "{}", r.stdout);
    assert!(r.stdout.contains("mlx5_wqe_raddr_seg"), "the excerpt decodes the WQE:\n{}", r.stdout);
    assert!(r.stdout.contains("Completion: requester, WQE RDMA_WRITE"), "{}", r.stdout);
    assert!(r.stdout.contains("No records dropped"), "{}", r.stdout);

    let bytes = std::fs::read(path).expect("the trace file exists");
    assert!(bytes.len() <= 64 << 20);
    let (recs, err) = trace::parse(&bytes);
    assert_eq!(err, None);
    for k in [Kind::DOORBELL, Kind::DBREC_READ, Kind::WQE_FETCH, Kind::CQE_WRITE, Kind::RECV_WQE_FETCH] {
        assert!(recs.iter().any(|r| r.kind == k), "no {} record", k.name());
    }
    assert!(r.stdout.contains(&format!("Trace: {} records", recs.len())), "{}", r.stdout);
}

#[test]
fn demo_failures_exit_1_with_the_decoded_state_and_keep_the_trace() {
    // A hung engine: the first wait times out and says what the QP and CQ look like.
    let path = tmp("stall.trace");
    let r = marrow(&["demo", "--quick", "--inject", "stall", "--timeout-ms", "200", "--trace-out", s(&path)]);
    assert_eq!(r.code, Some(1), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.starts_with("error: RDMA_WRITE 8 B iteration 0: no completion after"), "{}", r.stderr);
    assert!(r.stderr.contains("QP Rts, send queue posted 1 WQEBBs, device consumed 0"), "{}", r.stderr);
    assert!(r.stdout.contains("Stopped by an error"), "{}", r.stdout);
    assert_eq!(trace::parse(&std::fs::read(&path).unwrap()).1, None);

    // A failing WQE: the error completion, decoded, and the trace shows it.
    let path = tmp("fail.trace");
    let r = marrow(&["demo", "--quick", "--inject", "fail-wqe:3", "--trace-out", s(&path)]);
    assert_eq!(r.code, Some(1), "{}\n{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("iteration 3: expected the requester completion of RDMA_WRITE"), "{}", r.stderr);
    assert!(r.stderr.contains("syndrome REMOTE_ACCESS_ERR (0x13)"), "{}", r.stderr);
    let t = marrow(&["trace", "show", s(&path), "--errors", "--brief"]);
    let lines = records(&t.stdout);
    assert!(lines.iter().any(|l| l.contains("fault") && l.contains("on WQE #3")), "{}", t.stdout);
    assert!(lines.iter().any(|l| l.contains("RTS (3) → ERR (6)")), "{}", t.stdout);
    let _ = std::fs::remove_file(path);
}

#[test]
fn trace_show_decodes_the_demo_trace_and_filters() {
    let (d, path) = demo();
    assert_eq!(d.code, Some(0));
    let p = s(path);

    let r = marrow(&["trace", "show", p, "--limit", "4"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = records(&r.stdout);
    assert_eq!(lines.len(), 4, "{}", r.stdout);
    assert!(lines[0].contains("doorbell") && lines[0].contains("wqe_index 0x0000"), "{}", lines[0]);
    assert!(lines[1].contains("dbrec-read") && lines[1].contains("send_wqe_counter 0x0001"), "{}", lines[1]);
    assert!(lines[2].contains("wqe-fetch") && lines[2].contains("RDMA_WRITE"), "{}", lines[2]);
    assert!(lines[3].contains("cqe-write") && lines[3].contains("RDMA_WRITE (0x08) completed"), "{}", lines[3]);
    assert!(r.stdout.contains("\t\t[0x010] mlx5_wqe_raddr_seg"), "{}", r.stdout);
    assert!(r.stdout.contains("-- 4 of "), "{}", r.stdout);

    // --qp: every record of QP B only, and there are some (its SENDs and receives).
    let r = marrow(&["trace", "show", p, "--qp", "0x101", "--brief"]);
    assert_eq!(r.code, Some(0));
    let lines = records(&r.stdout);
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|l| l.contains("QP 0x000101")), "{}", r.stdout);
    assert!(lines.iter().any(|l| l.contains("RESP_SEND")), "{}", r.stdout);
    let r257 = marrow(&["trace", "show", p, "--qp", "257", "--brief"]);
    assert_eq!(records(&r257.stdout), lines, "decimal and hex QPNs agree");

    // --opcode: WQE fetches and CQEs of RDMA_READ only.
    let r = marrow(&["trace", "show", p, "--opcode", "RDMA_READ", "--brief"]);
    assert_eq!(r.code, Some(0));
    let lines = records(&r.stdout);
    let fetches = lines.iter().filter(|l| l.contains("wqe-fetch")).count();
    let cqes = lines.iter().filter(|l| l.contains("cqe-write")).count();
    assert!(fetches > 0 && fetches == cqes, "{fetches} fetches, {cqes} CQEs");
    assert_eq!(fetches + cqes, lines.len());
    assert!(lines.iter().all(|l| l.contains("RDMA_READ (0x10)")), "{}", r.stdout);

    // --kind and --opcode together; --kind by either spelling.
    let a = marrow(&["trace", "show", p, "--opcode", "ATOMIC_FA", "--kind", "cqe-write", "--brief"]);
    let b = marrow(&["trace", "show", p, "--opcode", "atomic_fa", "--kind", "CQE_WRITE", "--brief"]);
    assert!(!records(&a.stdout).is_empty());
    assert_eq!(a.stdout, b.stdout);
    assert!(records(&a.stdout).iter().all(|l| l.contains("cqe-write") && l.contains("ATOMIC_FA")));

    // A clean run has no errors.
    let r = marrow(&["trace", "show", p, "--errors"]);
    assert_eq!((r.code, records(&r.stdout).len()), (Some(0), 0), "{}", r.stdout);

    // JSON Lines.
    let r = marrow(&["trace", "show", p, "--json", "--limit", "3"]);
    assert_eq!(r.code, Some(0));
    let objs: Vec<serde_json::Value> = r.stdout.lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    assert_eq!(objs.len(), 3);
    assert_eq!(objs[0]["kind"], "doorbell");
    assert_eq!(objs[2]["kind"], "wqe-fetch");
    assert_eq!(objs[2]["decode"]["segments"][1]["layout"], "mlx5_wqe_raddr_seg");

    // Bad filter values are usage errors.
    let r = marrow(&["trace", "show", p, "--opcode", "WRITE"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("unknown opcode"), "{}", r.stderr);
}

#[test]
fn damaged_traces_show_what_precedes_the_damage_and_exit_2() {
    let (d, path) = demo();
    assert_eq!(d.code, Some(0));
    let bytes = std::fs::read(path).unwrap();
    let (recs, _) = trace::parse(&bytes);
    let cut = tmp("cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
    let r = marrow(&["trace", "show", s(&cut), "--brief"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.starts_with("error:") && r.stderr.contains("truncated"), "{}", r.stderr);
    let last = bytes.len() - 32 - recs.last().unwrap().bytes.len();
    assert!(r.stderr.contains(&format!("file offset {last:#x}")), "{}", r.stderr);
    assert_eq!(records(&r.stdout).len(), recs.len() - 1);

    let r = marrow(&["trace", "show", s(&cut), "--json", "--kind", "qp-state"]);
    assert_eq!(r.code, Some(2));
    let end: serde_json::Value = serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(end["offset"], last);

    let junk = tmp("junk.trace");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    let r = marrow(&["trace", "show", s(&junk)]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("not a marrow trace") && r.stderr.contains("file offset 0x0"), "{}", r.stderr);

    let r = marrow(&["trace", "show", s(&tmp("does-not-exist"))]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.starts_with("error: cannot read"), "{}", r.stderr);
    let _ = std::fs::remove_file(cut);
    let _ = std::fs::remove_file(junk);
}

#[test]
fn errors_filter_shows_the_error_cqe_and_the_state_change() {
    const T: Duration = Duration::from_secs(5);
    let mut p = Pair::new(PairConfig::default()).unwrap();
    p.nic.enable_trace(1 << 20);
    // One good write, one with a bad rkey, one flushed behind it.
    let sgl = [Sge { addr: p.a.addr, length: 64, lkey: p.a.lkey }];
    let good = RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey };
    let bad = RemoteAddr { raddr: p.b.addr, rkey: p.b.rkey ^ 0x0100_0000 };
    for remote in [good, bad] {
        p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWrite { remote, sgl: &sgl }).unwrap();
        p.a.sq.ring().unwrap();
        p.wait(Side::A, false, T).unwrap();
    }
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    p.a.sq.ring().unwrap();
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::WR_FLUSH_ERR),
        c => panic!("{c:?}"),
    }
    let path = tmp("error.trace");
    std::fs::write(&path, p.nic.trace_bytes().unwrap()).unwrap();
    let qpn = format!("{:#x}", p.a.qpn);

    let r = marrow(&["trace", "show", s(&path), "--errors"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = records(&r.stdout);
    let find = |what: &str| lines.iter().any(|l| l.contains(what));
    assert!(find("REQ_ERR: RDMA_WRITE (0x08) failed, syndrome REMOTE_ACCESS_ERR (0x13)"), "{}", r.stdout);
    assert!(find("qp-state") && find("RTS (3) → ERR (6)"), "{}", r.stdout);
    assert!(find("wqe-error") && find("REMOTE_ACCESS_ERR(0x13): rkey"), "{}", r.stdout);
    assert!(find("syndrome WR_FLUSH_ERR (0x05)"), "{}", r.stdout);
    assert!(r.stdout.contains("Completion: error REQ_ERR syndrome REMOTE_ACCESS_ERR (0x13)"), "{}", r.stdout);
    // Nothing that is not an error: the good write's records are left out.
    assert!(!find("completed") && !find("doorbell") && !find("wqe-fetch"), "{}", r.stdout);

    // The errors of QP A, as RDMA_WRITE CQEs: just the REMOTE_ACCESS_ERR one.
    let r = marrow(&["trace", "show", s(&path), "--errors", "--qp", &qpn, "--opcode", "RDMA_WRITE", "--brief"]);
    let lines = records(&r.stdout);
    assert_eq!(lines.len(), 1, "{}", r.stdout);
    assert!(lines[0].contains("REMOTE_ACCESS_ERR"));
    // By CQE opcode.
    let r = marrow(&["trace", "show", s(&path), "--opcode", "REQ_ERR", "--brief"]);
    assert_eq!(records(&r.stdout).len(), 2, "{}", r.stdout);

    let r = marrow(&["trace", "show", s(&path), "--errors", "--json"]);
    let objs: Vec<serde_json::Value> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(objs.iter().all(|o| o["error"] == true));
    assert!(objs.iter().any(|o| o["qp_state"]["to"] == "ERR"));
    let _ = std::fs::remove_file(path);
}

// ------------------------------------------------------------ bounded input

fn trace_header() -> Vec<u8> {
    let mut h = trace::MAGIC.to_vec();
    h.extend_from_slice(&trace::VERSION.to_le_bytes());
    h.extend_from_slice(&[0; 4]);
    h
}

/// /dev/zero is not a trace: refused after its first 16 bytes, not read
/// until memory runs out.
#[test]
fn trace_show_refuses_dev_zero_at_once() {
    let r = common::marrow_bounded(&["trace", "show", "/dev/zero", "--limit", "1"], 256 << 10, 60);
    assert_eq!(r.code, Some(2), "{r:?}");
    assert!(r.stderr.contains("not a marrow trace") && r.stderr.contains("file offset 0x0"), "{}", r.stderr);
}

/// A trace that never ends (a FIFO fed a header, then zeros for ever):
/// `--limit 1` shows one record and stops reading.
#[test]
fn trace_show_limit_stops_reading_an_endless_trace() {
    let fifo = tmp("endless.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let path = fifo.clone();
    std::thread::spawn(move || {
        use std::io::Write;
        let Ok(mut f) = std::fs::OpenOptions::new().write(true).open(&path) else { return };
        let _ = f.write_all(&trace_header());
        let zeros = [0u8; 1 << 16];
        // Until the reader has gone (the write fails with a broken pipe).
        while f.write_all(&zeros).is_ok() {}
    });
    let r = common::marrow_bounded(&["trace", "show", s(&fifo), "--limit", "1"], 256 << 10, 60);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(records(&r.stdout).len(), 1, "{}", r.stdout);
    assert!(r.stdout.contains("unknown record kind 0x00, 0 bytes"), "{}", r.stdout);
    assert!(r.stdout.contains("-- 1 of 1 records shown (stopped at --limit 1;"), "{}", r.stdout);
    let _ = std::fs::remove_file(fifo);
}

/// A 64 MiB trace (records of the largest size) is shown holding one
/// record, not the file: the child's address space is capped below the file.
#[test]
fn trace_show_streams_a_trace_larger_than_its_memory() {
    let path = tmp("big.trace");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        f.write_all(&trace_header()).unwrap();
        let body = vec![0xa5u8; trace::MAX_RECORD_BYTES];
        for i in 0..1024u64 {
            let mut h = [0u8; 32];
            h[..8].copy_from_slice(&i.to_le_bytes());
            h[8] = 0x63; // a kind this reader does not know: shown briefly
            h[10..12].copy_from_slice(&(trace::MAX_RECORD_BYTES as u16).to_le_bytes());
            f.write_all(&h).unwrap();
            f.write_all(&body).unwrap();
        }
    }
    let r = common::marrow_bounded(&["trace", "show", s(&path), "--brief"], 48 << 10, 120);
    assert_eq!(r.code, Some(0), "{r:?}");
    assert_eq!(records(&r.stdout).len(), 1024);
    assert!(r.stdout.contains(&format!(
        "-- 1024 of 1024 records shown ({}, {} bytes)",
        s(&path),
        16 + 1024 * (32 + 65535)
    )));
    let _ = std::fs::remove_file(path);
}

/// Text from a trace (a fault's description) reaches the terminal with its
/// controls, escapes, bidi characters and bytes that are not UTF-8 escaped.
#[test]
fn trace_text_is_escaped_for_the_terminal() {
    let mut rec = trace::Recorder::new(1 << 20);
    let fault = ["drop\u{202e}txt.exe\x1b[2J\u{2066}\x7f\u{9b}".as_bytes(), b"\xff"].concat();
    rec.record(Kind::FAULT, 1, 0, 0, &fault);
    rec.record(Kind::WQE_ERROR, 1, 0, 0, b"bad \xfe key\r\n");
    let path = tmp("escapes.trace");
    std::fs::write(&path, rec.bytes()).unwrap();
    for json in [false, true] {
        let mut args = vec!["trace", "show", s(&path)];
        if json {
            args.push("--json");
        }
        let r = marrow(&args);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
        assert!(!r.stdout.contains(['\x1b', '\u{202e}', '\u{2066}', '\x7f', '\u{9b}', '\r']), "{:?}", r.stdout);
        let (fault, error) = if json {
            (r"drop\\u{202e}txt.exe\\x1b[2J\\u{2066}\\x7f\\u{009b}\\xff", r"bad \\xfe key\\r\\n")
        } else {
            (r"drop\u{202e}txt.exe\x1b[2J\u{2066}\x7f\u{009b}\xff", r"bad \xfe key\r\n")
        };
        assert!(r.stdout.contains(fault), "{fault} not in {}", r.stdout);
        assert!(r.stdout.contains(error), "{error} not in {}", r.stdout);
    }
    let _ = std::fs::remove_file(path);
}
