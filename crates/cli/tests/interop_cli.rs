//! `marrow interop`: the step list both ends of the interop run read, and
//! the host refusing clearly, step by step, when no guest is there (the
//! runs against rxe are `cargo xtask interop test`, docs/INTEROP.md).

use std::process::Command;

fn marrow(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_marrow")).args(args).output().expect("marrow runs")
}

#[test]
fn the_steps_are_numbered_lines_the_guest_script_reads() {
    let o = marrow(&["interop", "steps"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    let tools = ["rc_pingpong", "write_bw", "read_bw", "send_bw", "atomic_fa", "atomic_cs", "write_lat", "read_lat"];
    for (i, l) in text.lines().enumerate() {
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(w.len(), 7, "ID TOOL ROLE SIZE ITERS MTU FAULTS: {l}");
        assert_eq!(w[0], i.to_string(), "{l}");
        assert!(["client", "server"].contains(&w[2]), "{l}");
    }
    for t in tools {
        for role in ["client", "server"] {
            for mtu in ["1024", "4096"] {
                assert!(
                    text.lines()
                        .any(|l| l.contains(&format!(" {t} {role} ")) && l.split_whitespace().nth(5) == Some(mtu)),
                    "{t} as {role} at MTU {mtu} is in the matrix"
                );
            }
        }
    }
    assert!(text.lines().any(|l| l.ends_with(" 1")), "some steps run with the wire faults on");
}

#[test]
fn without_a_guest_every_step_fails_with_its_reason() {
    let o = marrow(&["interop", "host", "--cable", "127.0.0.1:49100,127.0.0.1:49101,10.77.0.1", "--deadline", "0"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{text}");
    let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("not ok - step ")).collect();
    assert!(failed.len() > 40, "{text}");
    assert!(failed.iter().all(|l| l.contains("connection exchange")), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("ok - step")), "{text}");
}

#[test]
fn a_bad_cable_is_refused_before_anything_runs() {
    let o = marrow(&["interop", "host", "--cable", "127.0.0.1:1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--cable"));
}
