//! Where no NVIDIA driver exists (every development and CI machine), the GPU
//! commands say so and exit 2, as for any missing hardware: no panic, no hang (cudarc's dynamic
//! loading would panic if asked to load a missing libcuda).

use std::process::Command;

fn has_libcuda() -> bool {
    ["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
}

#[test]
fn gpu_commands_name_what_is_missing() {
    if has_libcuda() {
        return; // a GPU machine runs the real thing instead (docs/PERFORMANCE.md)
    }
    for args in [
        &["demo", "--gpu"][..],
        &["bench", "gpu"][..],
        &["bench", "gpu", "--doca", "doca_peer.cubin", "--doca-only"][..],
        &["bench", "gpu", "--only", "latency,qps"][..],
        &["bench", "p2p"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_marrow")).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("libcuda.so") && !err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn doca_only_needs_a_doca_cubin() {
    let out = Command::new(env!("CARGO_BIN_EXE_marrow")).args(["bench", "gpu", "--doca-only"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--doca <CUBIN>"), "{err}");
}

#[test]
fn only_an_unknown_part_is_refused_with_the_parts() {
    let out =
        Command::new(env!("CARGO_BIN_EXE_marrow")).args(["bench", "gpu", "--only", "latency,latncy"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("\"latncy\" is not a part of bench gpu (the parts: latency, qps, rates, loop)"), "{err}");
}
