//! `marrow bench softnic` as perftest users read it: the `-a` sweep's rows
//! in JSON (parsed here), CSV, perftest's text columns, the plot, and the
//! refusals that come before any measuring.

use std::process::Command;

fn marrow(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_marrow")).args(["bench", "softnic"]).args(args).output().unwrap()
}

/// Few iterations: the test checks the report, not the speed.
const QUICK: [&str; 6] = ["--runs", "2", "-n", "300", "--lat-iters", "30"];

#[test]
fn the_sweep_in_json_has_every_size_column_and_floor_and_draws_its_plot() {
    let dir = std::env::temp_dir().join(format!("marrow-bench-softnic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg = dir.join("bench-softnic.svg");
    // A peer: perftest's own tables from the interop run (ib_write_bw on
    // rxe in the QEMU guest against the softnic), as the log kept them.
    let log = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/runs/2026-12-01-interop-daf886a.txt");
    let mut args = vec!["-a", "--json", "--plot", svg.to_str().unwrap(), "--peer", log];
    args.extend(QUICK);
    let out = marrow(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sizes: Vec<u64> = (1..=23).map(|k| 1u64 << k).collect();
    for (table, columns) in [
        ("bandwidth", &["bw_peak_mb_s", "bw_average_mb_s", "msg_rate_mpps", "floor_bw_average_mb_s", "ratio"][..]),
        (
            "latency",
            &[
                "t_min_us",
                "t_max_us",
                "t_typical_us",
                "t_avg_us",
                "t_stdev_us",
                "p99_us",
                "p99_9_us",
                "floor_t_typical_us",
                "ratio",
            ][..],
        ),
    ] {
        let rows = r[table].as_array().unwrap_or_else(|| panic!("no {table} in {r}"));
        assert_eq!(rows.iter().map(|x| x["bytes"].as_u64().unwrap()).collect::<Vec<_>>(), sizes, "{table}");
        for row in rows {
            assert!(row["iterations"].as_u64().unwrap() >= 16, "{row}");
            for c in columns {
                let v = row[c].as_f64().unwrap_or_else(|| panic!("{table} row without {c}: {row}"));
                // A stdev can be 0 when every sample fell in one bucket.
                assert!(v > 0.0 || (*c == "t_stdev_us" && v == 0.0), "{table} {c} = {v} in {row}");
            }
        }
    }
    for b in r["bandwidth"].as_array().unwrap() {
        let (avg, floor, ratio) = (
            b["bw_average_mb_s"].as_f64().unwrap(),
            b["floor_bw_average_mb_s"].as_f64().unwrap(),
            b["ratio"].as_f64().unwrap(),
        );
        assert!((avg / floor - ratio).abs() <= ratio * 1e-9, "{b}");
        assert!(b["bw_peak_mb_s"].as_f64().unwrap() >= avg * 0.999, "{b}");
        // perftest's MB is 2^20 B and its Mpps 10^6 msg/s.
        let mpps = b["msg_rate_mpps"].as_f64().unwrap();
        let bytes = b["bytes"].as_f64().unwrap();
        assert!((mpps * 1e6 * bytes / (1u64 << 20) as f64 - avg).abs() <= avg * 1e-6, "{b}");
    }
    for l in r["latency"].as_array().unwrap() {
        let t = |c: &str| l[c].as_f64().unwrap();
        assert!(
            t("t_min_us") <= t("t_typical_us") && t("t_typical_us") <= t("p99_us") && t("p99_us") <= t("t_max_us"),
            "{l}"
        );
    }
    assert!(r["figures"].as_array().is_some_and(|f| f.len() == 3), "{r}");
    let peer = "perftest RDMA_Write BW Test, rxe0 (2026-12-01-interop-daf886a.txt";
    let peers = r["peers"].as_array().unwrap();
    let write_bw =
        peers.iter().find(|p| p["name"].as_str().unwrap().starts_with(peer) && p["points"][0][1].as_f64() > Some(0.0));
    let write_bw = write_bw.unwrap_or_else(|| panic!("no {peer} with a bandwidth in {peers:?}"));
    assert_eq!(
        (write_bw["quantity"].as_str(), write_bw["points"][0][0].as_u64()),
        (Some("bandwidth_mb_s"), Some(65536))
    );
    let plot = std::fs::read_to_string(&svg).unwrap();
    assert!(
        plot.starts_with("<svg") && plot.trim_end().ends_with("</svg>"),
        "not an SVG: {}",
        &plot[..80.min(plot.len())]
    );
    for label in
        ["latency [usec]", "bandwidth [MB/sec]", "message size [bytes]", "floor: memcpy", "marrow softnic", peer]
    {
        assert!(plot.contains(label), "the plot has no {label:?}");
    }
    // CI keeps the plot beside the build.
    let keep = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-softnic.svg");
    std::fs::copy(&svg, &keep).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn csv_and_text_carry_perftests_columns() {
    let mut args = vec!["-s", "8,4K", "--csv"];
    args.extend(QUICK);
    let out = marrow(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8(out.stdout).unwrap();
    // Parsed by the csv crate's reader: quoting (figure names hold commas)
    // and a column count per row as any CSV consumer sees them.
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_owned).collect();
    for c in [
        "kind",
        "bytes",
        "iterations",
        "bw_peak_mb_s",
        "bw_average_mb_s",
        "msg_rate_mpps",
        "t_typical_us",
        "p99_9_us",
        "ratio",
    ] {
        assert!(header.iter().any(|h| h == c), "no {c} in {header:?}");
    }
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert!(rows.iter().all(|r| r.len() == header.len()), "{csv}");
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let kinds: Vec<(&str, &str)> = rows.iter().map(|r| (&r[col("kind")], &r[col("bytes")])).collect();
    assert_eq!(
        kinds,
        [("bw", "8"), ("bw", "4096"), ("lat", "8"), ("lat", "4096"), ("figure", ""), ("figure", ""), ("figure", "")],
        "{csv}"
    );
    for r in &rows {
        assert!(r[col("ratio")].parse::<f64>().is_ok_and(|x| x > 0.0), "{r:?}");
    }

    let mut args = vec!["-s", "64"];
    args.extend(QUICK);
    let out = marrow(&args);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"),
        "{text}"
    );
    assert!(
        text.contains(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"),
        "{text}"
    );
    assert!(text.lines().any(|l| l.trim_start().starts_with("64 ")), "{text}");
}

#[test]
fn an_unwritable_plot_or_a_bad_size_is_refused_before_measuring() {
    let out = marrow(&["-a", "--plot", "/nonexistent-dir/plot.svg"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("error: writing the plot to /nonexistent-dir/plot.svg"), "{e}");
    assert!(out.stdout.is_empty(), "it measured first: {}", String::from_utf8_lossy(&out.stdout));
    let out = marrow(&["-s", "12Q"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"12Q\" is not a byte count"));
    let out = marrow(&["-s", "0x10", "--json", "--runs", "1", "-n", "20", "--lat-iters", "5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["bandwidth"][0]["bytes"], 16);
}

#[test]
fn a_peer_file_without_a_perftest_table_is_refused_before_measuring() {
    let out = marrow(&["-a", "--peer", "/nonexistent-dir/ib_write_bw.txt"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("error: --peer /nonexistent-dir/ib_write_bw.txt: "), "{e}");
    let readme = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let out = marrow(&["-a", "--peer", readme]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("no perftest result table"), "{e}");
    assert!(out.stdout.is_empty(), "it measured first: {}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn with_json_a_refusal_is_a_json_error_object_too() {
    let out = marrow(&["-a", "--json", "--plot", "/nonexistent-dir/plot.svg"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let msg = v["error"].as_str().unwrap_or_else(|| panic!("{v}"));
    assert!(msg.contains("/nonexistent-dir/plot.svg") && v["offset"].is_null(), "{v}");
    assert!(err.contains(&format!("error: {msg}")), "{err}");
}
