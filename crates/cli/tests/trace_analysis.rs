//! `marrow trace stats` and the record windows of `marrow trace show`
//! (`--tail`, `--around`, `--since`/`--until`), run as programs on traces
//! written by `marrow demo`; the figures are checked against counts this
//! test makes itself from `trace show --json`.

mod common;
use common::{marrow, s, tmp};

use proptest::prelude::*;
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A healthy quick demo's trace.
fn demo() -> &'static PathBuf {
    static DEMO: OnceLock<PathBuf> = OnceLock::new();
    DEMO.get_or_init(|| {
        let path = tmp("demo.trace");
        let r = marrow(&["demo", "--quick", "--trace-out", s(&path)]);
        assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
        path
    })
}

/// A quick demo whose fourth WQE fails (the demo stops there with status 1).
fn failing() -> &'static PathBuf {
    static FAIL: OnceLock<PathBuf> = OnceLock::new();
    FAIL.get_or_init(|| {
        let path = tmp("fail.trace");
        let r = marrow(&["demo", "--quick", "--inject", "fail-wqe:3", "--trace-out", s(&path)]);
        assert_eq!(r.code, Some(1), "{}\n{}", r.stdout, r.stderr);
        path
    })
}

/// Every record of `trace show --json`.
fn show_json(path: &Path) -> Vec<Json> {
    let r = marrow(&["trace", "show", s(path), "--json", "--brief"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    r.stdout.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

fn stats_json(path: &Path) -> Json {
    let r = marrow(&["trace", "stats", s(path), "--json"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    serde_json::from_str(&r.stdout).expect("one JSON object")
}

/// Record lines of `trace show` output.
fn records(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with('#')).collect()
}

fn index_of(line: &str) -> usize {
    line[1..].split_whitespace().next().and_then(|n| n.parse().ok()).expect("#N at the start")
}

#[test]
fn stats_json_counts_agree_with_the_records() {
    for path in [demo(), failing()] {
        let recs = show_json(path);
        let st = stats_json(path);
        assert_eq!(st["records"], recs.len(), "{st}");
        assert_eq!(st["damage"], Json::Null);
        assert_eq!(st["t_first_ns"], recs[0]["t_ns"]);
        assert_eq!(st["t_last_ns"], recs[recs.len() - 1]["t_ns"]);

        let mut kinds: BTreeMap<String, u64> = BTreeMap::new();
        let mut qps: BTreeMap<String, u64> = BTreeMap::new();
        let mut opcodes: BTreeMap<u64, u64> = BTreeMap::new();
        for r in &recs {
            *kinds.entry(r["kind"].as_str().unwrap().to_owned()).or_default() += 1;
            *qps.entry(r["qpn"].to_string()).or_default() += 1;
            if r["kind"] == "wqe-fetch" {
                let op = u64::from_str_radix(&r["bytes"].as_str().unwrap()[6..8], 16).unwrap();
                *opcodes.entry(op).or_default() += 1;
            }
        }
        let got: BTreeMap<String, u64> =
            st["kinds"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
        assert_eq!(got, kinds);
        let got: BTreeMap<String, u64> = st["qps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| (q["qpn"].to_string(), q["records"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, qps);
        let got: BTreeMap<u64, u64> = st["wqe_opcodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o["value"].as_u64().unwrap(), o["fetches"].as_u64().unwrap()))
            .collect();
        assert_eq!(got, opcodes);

        let errors: Vec<u64> =
            recs.iter().filter(|r| r["error"] == true).map(|r| r["index"].as_u64().unwrap()).collect();
        assert_eq!(st["errors_total"], errors.len());
        let listed: Vec<u64> = st["errors"].as_array().unwrap().iter().map(|e| e["record"].as_u64().unwrap()).collect();
        assert_eq!(listed, errors);

        // Every send-queue completion is paired with its doorbell.
        let sq_cqes = recs
            .iter()
            .filter(|r| r["kind"] == "cqe-write")
            .filter(|r| r["summary"].as_str().unwrap().starts_with("CQE REQ"))
            .count() as u64;
        let lat = st["latency"].as_array().unwrap();
        assert_eq!(lat.iter().map(|l| l["count"].as_u64().unwrap()).sum::<u64>(), sq_cqes, "{st}");
        for l in lat {
            assert_eq!(l["unpaired"], 0, "{l}");
            let p = |k: &str| l[k].as_u64().unwrap();
            assert!(p("p50_ns") <= p("p90_ns") && p("p90_ns") <= p("p99_ns"), "{l}");
            assert!(p("p99_ns") <= p("p99_9_ns") && p("p99_9_ns") <= p("max_ns"), "{l}");
        }
    }
}

#[test]
fn stats_lists_each_error_with_the_failed_wqe() {
    let st = stats_json(failing());
    let errors = st["errors"].as_array().unwrap();
    let kinds: Vec<&str> = errors.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    for k in ["fault", "wqe-error", "cqe-write", "qp-state"] {
        assert!(kinds.contains(&k), "no {k} error: {st}");
    }
    for e in errors {
        let w = &e["wqe"];
        assert_eq!((w["opcode"].as_str(), w["wqe_index"].as_u64()), (Some("RDMA_WRITE"), Some(3)), "{e}");
        assert!(w["record"].as_u64().unwrap() < e["record"].as_u64().unwrap(), "{e}");
    }
}

#[test]
fn stats_text_is_in_aligned_columns() {
    let r = marrow(&["trace", "stats", s(demo())]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for h in ["Records by kind", "Records by QP", "WQE fetches by opcode", "Doorbell to CQE latency, ns", "Errors: 0"] {
        assert!(r.stdout.contains(h), "no {h}:\n{}", r.stdout);
    }
    let table: Vec<&str> = r
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Doorbell to CQE"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(table.len() >= 3, "a header and both QPs:\n{}", r.stdout);
    assert!(table[0].split_whitespace().eq(["QP", "count", "p50", "p90", "p99", "p99.9", "max", "unpaired"]));
    assert!(table.iter().all(|l| l.len() == table[0].len()), "ragged columns:\n{}", table.join("\n"));
    assert!(table[1].trim_start().starts_with("0x000100"), "{}", r.stdout);

    let r = marrow(&["trace", "stats", s(failing())]);
    let rows: Vec<&str> = r.stdout.lines().skip_while(|l| !l.starts_with("Errors: 4")).skip(2).collect();
    assert_eq!(rows.len(), 4, "{}", r.stdout);
    assert!(rows.iter().all(|l| l.contains("RDMA_WRITE idx 0x0003")), "{}", r.stdout);
}

#[test]
fn brief_lines_are_the_lines_of_the_full_decode() {
    // --brief words its lines without the decode tree; they must not differ.
    for p in [demo(), failing()] {
        let brief = marrow(&["trace", "show", s(p), "--brief"]);
        let full = marrow(&["trace", "show", s(p), "--full"]);
        assert_eq!(records(&brief.stdout), records(&full.stdout));
    }
}

#[test]
fn show_prints_each_record_as_its_view_renders_it() {
    // `show` writes most records without the decode tree; what it prints
    // must be what the decode tree of each record renders, at every detail.
    use marrow::trace::{Detail, ShowOptions, render_record, show, view};
    for p in [demo(), failing()] {
        let bytes = std::fs::read(p).unwrap();
        let (records, damage) = marrow_softnic::trace::parse(&bytes);
        assert!(damage.is_none() && !records.is_empty());
        for detail in [Detail::Brief, Detail::Normal, Detail::Full] {
            let mut out = Vec::new();
            show(&bytes[..], &ShowOptions { detail, ..ShowOptions::default() }, &mut out).unwrap();
            let want: String = records.iter().enumerate().map(|(i, r)| render_record(i, r, &view(r, detail))).collect();
            assert!(String::from_utf8(out).unwrap() == want, "{detail:?} differs for {}", p.display());
        }
    }
}

#[test]
fn tail_shows_the_last_records_that_pass() {
    let p = s(demo());
    let all = marrow(&["trace", "show", p, "--brief"]);
    let all = records(&all.stdout);
    let r = marrow(&["trace", "show", p, "--brief", "--tail", "7"]);
    assert_eq!(r.code, Some(0));
    assert_eq!(records(&r.stdout), all[all.len() - 7..]);
    assert!(r.stdout.contains(&format!("-- last 7 of {n} matching records shown, of {n} records", n = all.len())));

    let errs = marrow(&["trace", "show", s(failing()), "--errors", "--brief"]);
    let errs = records(&errs.stdout);
    let r = marrow(&["trace", "show", s(failing()), "--errors", "--brief", "--tail", "2"]);
    assert_eq!(records(&r.stdout), errs[errs.len() - 2..]);
    let r = marrow(&["trace", "show", p, "--tail", "3", "--limit", "3"]);
    assert_eq!(r.code, Some(2), "--tail and --limit conflict");
}

#[test]
fn around_shows_a_record_and_its_neighbours() {
    let p = s(demo());
    let r = marrow(&["trace", "show", p, "--brief", "--around", "100"]);
    assert_eq!(r.code, Some(0));
    let got: Vec<usize> = records(&r.stdout).iter().map(|l| index_of(l)).collect();
    assert_eq!(got, (95..=105).collect::<Vec<_>>());
    let r = marrow(&["trace", "show", p, "--brief", "--around", "2", "--context", "4"]);
    let got: Vec<usize> = records(&r.stdout).iter().map(|l| index_of(l)).collect();
    assert_eq!(got, (0..=6).collect::<Vec<_>>());
    // With a filter: only the records of the window that pass it.
    let r = marrow(&["trace", "show", p, "--brief", "--around", "100", "--context", "10", "--kind", "doorbell"]);
    assert!(records(&r.stdout).iter().all(|l| l.contains("doorbell") && (90..=110).contains(&index_of(l))));
    assert!(!records(&r.stdout).is_empty());
}

#[test]
fn since_and_until_bound_the_timestamps() {
    let recs = show_json(demo());
    let t = |i: usize| recs[i]["t_ns"].as_u64().unwrap();
    let (lo, hi) = (t(recs.len() / 4), t(recs.len() / 2));
    let want: Vec<u64> = recs
        .iter()
        .filter(|r| (lo..=hi).contains(&r["t_ns"].as_u64().unwrap()))
        .map(|r| r["index"].as_u64().unwrap())
        .collect();
    let r = marrow(&["trace", "show", s(demo()), "--json", "--since", &lo.to_string(), "--until", &hi.to_string()]);
    assert_eq!(r.code, Some(0));
    let got: Vec<u64> =
        r.stdout.lines().map(|l| serde_json::from_str::<Json>(l).unwrap()["index"].as_u64().unwrap()).collect();
    assert_eq!(got, want);
    let r = marrow(&["trace", "show", s(demo()), "--brief", "--since", &format!("{:#x}", t(recs.len() - 1))]);
    assert_eq!(records(&r.stdout).len(), 1, "{}", r.stdout);
    let r = marrow(&["trace", "show", s(demo()), "--since", "soon"]);
    assert_eq!(r.code, Some(2));
}

#[test]
fn a_damaged_trace_gives_the_figures_before_the_damage_and_exit_2() {
    let bytes = std::fs::read(demo()).unwrap();
    let cut = tmp("cut.trace");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let r = marrow(&["trace", "stats", s(&cut)]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.starts_with("error: ") && r.stderr.contains("is truncated"), "{}", r.stderr);
    assert!(r.stderr.contains(&format!("(file offset {:#x})", bytes.len() - 96)), "{}", r.stderr);
    assert!(r.stdout.contains("Records by kind") && r.stdout.contains("Damaged at file offset 0x"), "{}", r.stdout);
    let r = marrow(&["trace", "stats", s(&cut), "--json"]);
    assert_eq!(r.code, Some(2));
    let st: Json = serde_json::from_str(&r.stdout).unwrap();
    let full = stats_json(demo());
    assert_eq!(st["records"].as_u64().unwrap() + 1, full["records"].as_u64().unwrap());
    assert_eq!(st["damage"]["offset"].as_u64().unwrap() + 32 + 64, bytes.len() as u64, "{st}");

    let junk = tmp("junk.trace");
    std::fs::write(&junk, b"not a trace at all").unwrap();
    let r = marrow(&["trace", "stats", s(&junk)]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("not a marrow trace"), "{}", r.stderr);
    let r = marrow(&["trace", "stats", s(&tmp("missing.trace"))]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.starts_with("error: cannot read"), "{}", r.stderr);
}

#[test]
fn stats_streams_a_large_trace_in_bounded_memory() {
    // The demo trace repeated to about 40 MB: the figures scale, the memory does not.
    let bytes = std::fs::read(demo()).unwrap();
    let big = tmp("big.trace");
    let mut f = bytes.clone();
    let repeats = (40 << 20) / bytes.len();
    for _ in 1..repeats {
        f.extend_from_slice(&bytes[16..]);
    }
    std::fs::write(&big, &f).unwrap();
    drop(f);
    let r = common::marrow_bounded(&["trace", "stats", "--json", s(&big)], 96 << 10, 300);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let st: Json = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(st["records"].as_u64().unwrap(), stats_json(demo())["records"].as_u64().unwrap() * repeats as u64);
    let _ = std::fs::remove_file(big);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn stats_never_panics_on_arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..2048), header in any::<bool>()) {
        let mut bytes = if header { b"MRWTRACE\x01\0\0\0\0\0\0\0".to_vec() } else { Vec::new() };
        bytes.extend_from_slice(&body);
        let path = tmp(&format!("arb-{}.trace", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        for json in [false, true] {
            let args: &[&str] = if json { &["trace", "stats", "--json", s(&path)] } else { &["trace", "stats", s(&path)] };
            let r = marrow(args);
            prop_assert!(matches!(r.code, Some(0 | 2)), "{:?}: {}", r.code, r.stderr);
            if json {
                prop_assert!(serde_json::from_str::<Json>(&r.stdout).is_ok(), "{}", r.stdout);
            }
        }
    }
}
