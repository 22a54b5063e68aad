//! `MARROW_LOG`: with it, the daemon logs each request with its reply and
//! the device model each QP transition, on stderr; without it, neither; a
//! filter that does not parse is refused before anything starts.

use marrow_softnic::QpState;
use marrow_softnic::client::Client;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A daemon with `log` as MARROW_LOG (or none) that one client makes a QP
/// on and moves to INIT; its stderr after SIGTERM.
fn daemon_stderr(log: Option<&str>) -> String {
    let d = std::env::temp_dir().join(format!("marrow-log-{}-{}", std::process::id(), log.is_some()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let sock = d.join("s.sock");
    let mut c = Command::new(env!("CARGO_BIN_EXE_marrow"));
    c.args(["softnic", "--socket"]).arg(&sock).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    c.env_remove("MARROW_LOG");
    if let Some(l) = log {
        c.env("MARROW_LOG", l);
    }
    let mut child = c.spawn().unwrap();
    let t0 = Instant::now();
    let mut client = loop {
        match Client::connect(&sock) {
            Ok(c) => break c,
            Err(e) => assert!(t0.elapsed() < Duration::from_secs(20), "no daemon: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let pd = client.alloc_pd().unwrap();
    let cq = client.create_cq(64, false).unwrap();
    let qp = client.create_qp(pd, cq.cqn, cq.cqn, Default::default()).unwrap();
    client.modify_qp(qp.qpn, QpState::Init, None).unwrap();
    drop(client);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(child.wait().unwrap().success(), "{err}");
    let _ = std::fs::remove_dir_all(&d);
    format!("{err}\nqpn={:#x}", qp.qpn)
}

#[test]
fn debug_logs_requests_and_qp_transitions_and_silence_is_the_default() {
    let err = daemon_stderr(Some("debug"));
    let qpn = err.rsplit("qpn=").next().unwrap().to_string();
    for request in ["AllocPd", "CreateCq", "CreateQp", "ModifyQp"] {
        assert!(
            err.lines().any(|l| l.contains("DEBUG") && l.contains("daemon request") && l.contains(request)),
            "no {request} logged:\n{err}"
        );
    }
    let transition = format!("QP transition qpn={qpn} from=Reset to=Init");
    assert!(
        err.lines().any(|l| l.contains("marrow_softnic::hca") && l.contains(&transition)),
        "no {transition:?}:\n{err}"
    );

    let quiet = daemon_stderr(None);
    assert!(!quiet.contains("daemon request") && !quiet.contains("QP transition"), "{quiet}");
    // A filter for one other crate leaves these out too.
    let other = daemon_stderr(Some("marrow_verbs=debug"));
    assert!(!other.contains("QP transition"), "{other}");
}

#[test]
fn a_filter_that_does_not_parse_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_marrow")).args(["doctor"]).env("MARROW_LOG", "[[").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.starts_with("error: MARROW_LOG=\"[[\" is not a log filter"), "{e}");
    assert!(out.stdout.is_empty());
}
