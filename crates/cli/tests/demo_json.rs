//! `marrow demo --json`: the run as one JSON document (parsed here) whose
//! counts agree with the trace file it names, read back by `trace stats`.

use std::process::Command;

fn marrow() -> Command {
    Command::new(env!("CARGO_BIN_EXE_marrow"))
}

#[test]
fn the_quick_demo_as_json_agrees_with_its_own_trace() {
    let trace = std::env::temp_dir().join(format!("marrow-demo-json-{}.trace", std::process::id()));
    let out = marrow().args(["demo", "--quick", "--json", "--trace-out"]).arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let rows = r["rows"].as_array().unwrap();
    let ops: Vec<&str> = rows.iter().map(|x| x["op"].as_str().unwrap()).collect();
    for op in ["RDMA_WRITE", "RDMA_READ", "ATOMIC_FA"] {
        assert!(ops.contains(&op), "no {op} row in {ops:?}");
    }
    let mut sum = 0;
    for row in rows {
        let n = row["ops"].as_u64().unwrap();
        assert!(n > 0, "{row}");
        assert_eq!(row["total_bytes"].as_u64(), Some(n * row["bytes"].as_u64().unwrap()), "{row}");
        let t = |c: &str| row[c].as_f64().unwrap();
        assert!(
            t("t_min_us") > 0.0 && t("t_min_us") <= t("t_typical_us") && t("t_typical_us") <= t("t_max_us"),
            "{row}"
        );
        sum += n;
    }
    assert_eq!(r["total"]["ops"].as_u64(), Some(sum));
    assert!(r["checks"].as_array().is_some_and(|c| c.len() > 1), "{r}");
    // The trace it names is there, with as many records as it says.
    let t = &r["trace"];
    assert_eq!(t["path"].as_str(), trace.to_str());
    assert_eq!(t["bytes"].as_u64(), Some(std::fs::metadata(&trace).unwrap().len()));
    assert_eq!(t["dropped_completions"], 0);
    let stats = marrow().args(["trace", "stats", "--json"]).arg(&trace).output().unwrap();
    assert!(stats.status.success(), "{}", String::from_utf8_lossy(&stats.stderr));
    let s: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let kinds = s["kinds"].as_object().unwrap();
    assert_eq!(kinds.values().map(|v| v.as_u64().unwrap()).sum::<u64>(), t["records"].as_u64().unwrap(), "{s}");
    for (kind, ours) in [
        ("doorbell", "doorbells"),
        ("dbrec-read", "dbrec_reads"),
        ("wqe-fetch", "wqe_fetches"),
        ("cqe-write", "cqe_writes"),
    ] {
        assert_eq!(kinds[kind], t[ours], "{kind}: trace stats {} against demo's {}", kinds[kind], t[ours]);
    }
    let _ = std::fs::remove_file(&trace);
}

/// With `--json` the demo's text is not shown, so a spinner with the elapsed
/// time says it is working: on stderr, and only on a terminal (here a
/// pseudo-terminal from util-linux's `script`), never into the JSON.
#[test]
fn a_json_demo_spins_on_a_terminal_and_not_elsewhere() {
    let trace = std::env::temp_dir().join(format!("marrow-demo-spin-{}.trace", std::process::id()));
    let cmd = format!("{} demo --quick --json --trace-out {}", env!("CARGO_BIN_EXE_marrow"), trace.display());
    let tty = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().expect("util-linux script");
    assert!(tty.status.success(), "{}", String::from_utf8_lossy(&tty.stdout));
    let seen = String::from_utf8_lossy(&tty.stdout);
    assert!(
        seen.contains("marrow demo: puts, gets") && seen.contains("[00:00:"),
        "no spinner on the terminal:\n{seen}"
    );
    let piped = marrow().args(["demo", "--quick", "--json", "--trace-out"]).arg(&trace).output().unwrap();
    assert!(piped.status.success());
    assert!(piped.stderr.is_empty(), "stderr without a terminal: {}", String::from_utf8_lossy(&piped.stderr));
    serde_json::from_slice::<serde_json::Value>(&piped.stdout).expect("stdout is the JSON alone");
    let _ = std::fs::remove_file(&trace);
}
