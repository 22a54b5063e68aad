//! `marrow demo --wire udp --pcap FILE`: the whole demo with B on a second
//! softnic, another process (`marrow softnic`), across RoCEv2, every check
//! passing; tshark dissects every frame
//! of the capture as InfiniBand over RoCEv2 with no malformed frame and no
//! expert error; Python's zlib agrees with every ICRC. And `--pcap` without
//! a wire is refused before anything runs.

use std::path::Path;
use std::process::Command;

fn marrow(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_marrow")).args(args).output().expect("marrow runs")
}

#[test]
fn the_demo_over_the_wire_passes_and_tshark_reads_its_capture() {
    let dir = std::env::temp_dir().join(format!("marrow-demo-wire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (pcap, trace) = (dir.join("demo.pcap"), dir.join("demo.trace"));
    let o = marrow(&[
        "demo",
        "--quick",
        "--wire",
        "udp",
        "--pcap",
        pcap.to_str().unwrap(),
        "--trace-out",
        trace.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("linked by RoCEv2 over loopback UDP") && text.contains("Checks (all passed)"), "{text}");
    assert!(text.contains("two softnic processes (B's: `marrow softnic`, pid "), "{text}");
    // B's trace came from the other process: its receive completions are there.
    let b_line = text.lines().find(|l| l.contains("B's softnic:")).unwrap_or_default();
    assert!(dir.join("demo.b.trace").exists(), "B's trace is written beside A's");
    assert!(b_line.contains("CQE writes)") && !b_line.contains("(0 CQE writes)"), "{b_line}");

    let p = pcap.to_str().unwrap();
    let ts = Command::new("tshark")
        .args(["-r", p, "-T", "fields", "-e", "infiniband.bth.opcode", "-e", "_ws.malformed"])
        .output()
        .expect("tshark runs (scripts/install-test-deps.sh installs it)");
    let fields = String::from_utf8_lossy(&ts.stdout);
    let frames: Vec<&str> = fields.lines().collect();
    assert!(frames.len() > 1000, "{} frames", frames.len());
    for f in &frames {
        let (op, malformed) = f.split_once('\t').unwrap_or((f, ""));
        assert!(!op.is_empty() && malformed.is_empty(), "frame not dissected cleanly: {f:?}");
    }
    let expert = Command::new("tshark").args(["-r", p, "-q", "-z", "expert,error"]).output().unwrap();
    let expert = String::from_utf8_lossy(&expert.stdout);
    assert!(!expert.contains("Error") && !expert.contains("Malformed"), "{expert}");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let icrc = Command::new("python3").arg(root.join("scripts/roce_icrc_check.py")).arg(&pcap).output().unwrap();
    let said = String::from_utf8_lossy(&icrc.stdout);
    let n = frames.len();
    assert!(icrc.status.success() && said.contains(&format!("{n} RoCEv2 frames, {n} ICRC ok")), "{said}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_pcap_without_a_wire_is_refused_up_front() {
    let o = marrow(&["demo", "--quick", "--pcap", "/tmp/never-written.pcap"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--pcap captures the RoCEv2 wire: it needs --wire udp"), "{err}");
}
