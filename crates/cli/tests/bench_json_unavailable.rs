//! `--json` and `--csv` on the benchmarks that need hardware this machine
//! lacks: each exits 2 naming what is missing, with `--json` also as an
//! error object on stdout (what a script reads); `--json --csv` together is
//! refused before anything runs.

mod common;

use common::marrow_env as marrow;

fn has_libcuda() -> bool {
    ["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
}

fn has_rdma_device() -> bool {
    std::fs::read_dir("/sys/class/infiniband").is_ok_and(|mut d| d.next().is_some())
}

/// stdout is one JSON object whose `error` contains `what`, and nothing else.
fn json_error(args: &[&str], out: &str, err: &str, what: &str) {
    let v: serde_json::Value =
        serde_json::from_str(out).unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}): {out:?}; {err}"));
    let obj = v.as_object().unwrap_or_else(|| panic!("{args:?}: {v}"));
    let msg = obj["error"].as_str().unwrap_or_else(|| panic!("{args:?}: no error string in {v}"));
    assert!(msg.contains(what), "{args:?}: {msg}");
    assert!(obj["offset"].is_null(), "{args:?}: {v}");
    assert_eq!(obj.len(), 2, "{args:?}: {v}");
    // The same reason on stderr, as without --json.
    assert!(err.contains(&format!("error: {msg}")) && !err.contains("panicked"), "{args:?}: {err}");
}

#[test]
fn gpu_benchmarks_in_json_name_the_missing_library() {
    if has_libcuda() {
        return; // a GPU machine runs the real thing instead (docs/PERFORMANCE.md)
    }
    for args in [&["bench", "gpu", "--json"][..], &["bench", "p2p", "--json"], &["demo", "--gpu", "--json"]] {
        let (rc, out, err) = marrow(args, &[]);
        assert_eq!(rc, 2, "{args:?}: {out}{err}");
        json_error(args, &out, &err, "libcuda.so");
    }
    // CSV has no error row: stdout stays empty, stderr says why.
    for args in [&["bench", "gpu", "--csv"][..], &["bench", "p2p", "--csv"], &["demo", "--gpu", "--csv"]] {
        let (rc, out, err) = marrow(args, &[]);
        assert_eq!(rc, 2, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.contains("error: ") && err.contains("libcuda.so"), "{args:?}: {err}");
    }
}

#[test]
fn mlx5_in_json_names_the_missing_library_or_device() {
    let lib = [("MARROW_IBVERBS_LIB", "/nonexistent/libibverbs.so.1")];
    for args in [&["bench", "mlx5", "--json"][..], &["bench", "mlx5", "--json", "--listen", "127.0.0.1:0"]] {
        let (rc, out, err) = marrow(args, &lib);
        assert_eq!(rc, 2, "{args:?}: {out}{err}");
        json_error(args, &out, &err, "/nonexistent/libibverbs.so.1 not found");
    }
    let (rc, out, err) = marrow(&["bench", "mlx5", "--csv", "--listen", "127.0.0.1:0"], &lib);
    assert_eq!(rc, 2, "{out}{err}");
    assert!(out.is_empty() && err.contains("libibverbs.so.1 not found"), "{out}{err}");
    if has_rdma_device() {
        return; // a lab node runs the real thing (README run book)
    }
    let args = ["bench", "mlx5", "--json", "--connect", "127.0.0.1:1:x"];
    let (rc, out, err) = marrow(&args, &[]);
    assert_eq!(rc, 2, "{out}{err}");
    json_error(&args, &out, &err, "no RDMA device");
}

#[test]
fn json_and_csv_together_are_refused_by_the_parser() {
    for args in [
        &["bench", "gpu", "--json", "--csv"][..],
        &["bench", "p2p", "--json", "--csv"],
        &["bench", "mlx5", "--json", "--csv"],
        &["bench", "softnic", "--json", "--csv"],
        &["demo", "--gpu", "--json", "--csv"],
    ] {
        let (rc, out, err) = marrow(args, &[]);
        assert_eq!(rc, 2, "{args:?}: {out}{err}");
        assert!(out.is_empty(), "{args:?}: {out}");
        assert!(err.contains("cannot be used with"), "{args:?}: {err}");
    }
    // The softnic demo has no CSV: --csv is the GPU demo's.
    let (rc, out, err) = marrow(&["demo", "--csv"], &[]);
    assert_eq!(rc, 2, "{out}{err}");
    assert!(err.contains("--gpu"), "{err}");
}
