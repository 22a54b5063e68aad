//! `marrow softnic` as a process: it says it serves only once it does, keeps
//! its trace file whole, writes it on SIGTERM, removes its socket, and
//! refuses a live daemon's socket, a path that is not a socket and an
//! unwritable trace before doing anything.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("marrow-softnic-process-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn marrow() -> Command {
    Command::new(env!("CARGO_BIN_EXE_marrow"))
}

/// Start a daemon and wait for its "serving" line; the socket must answer by then.
fn start(sock: &Path, trace: Option<&Path>) -> Child {
    let mut c = marrow();
    c.args(["softnic", "--socket"]).arg(sock).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    if let Some(t) = trace {
        c.arg("--trace").arg(t).args(["--trace-every", "1"]);
    }
    let mut child = c.spawn().expect("marrow softnic");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines.next().expect("a status line").unwrap();
    assert!(line.contains("serving on"), "{line}");
    // Keep reading, so the daemon's later lines have somewhere to go.
    std::thread::spawn(move || lines.for_each(drop));
    // Said after the bind: a client can connect at once.
    assert!(std::os::unix::net::UnixStream::connect(sock).is_ok(), "serving said before the socket answers");
    child
}

fn wait(child: &mut Child) -> std::process::ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the daemon did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_writes_the_trace_and_removes_the_socket() {
    let d = dir("term");
    let (sock, trace) = (d.join("s.sock"), d.join("t.trace"));
    let mut child = start(&sock, Some(&trace));
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = wait(&mut child);
    assert!(status.success(), "{status}");
    assert!(!sock.exists(), "the socket was left behind");
    // Before the first interval: the trace is there because SIGTERM wrote it,
    // and `trace show` reads it (the file header, no records yet).
    let out = marrow().args(["trace", "show"]).arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // No temporary file is left beside it.
    let left: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from("t.trace")], "{left:?}");
}

#[test]
fn a_live_daemons_socket_and_a_file_are_refused_and_left_alone() {
    let d = dir("live");
    let sock = d.join("s.sock");
    let mut first = start(&sock, None);
    let out = marrow().args(["softnic", "--socket"]).arg(&sock).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already serving"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::os::unix::net::UnixStream::connect(&sock).is_ok(), "the live daemon lost its socket");
    first.kill().unwrap();
    let _ = first.wait();
    let file = d.join("not-a-socket");
    std::fs::write(&file, b"keep me").unwrap();
    let out = marrow().args(["softnic", "--socket"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    // A stale socket (its daemon killed) is replaced.
    let mut again = start(&sock, None);
    again.kill().unwrap();
    let _ = again.wait();
}

#[test]
fn an_unwritable_trace_is_refused_before_serving() {
    let d = dir("unwritable");
    let sock = d.join("s.sock");
    let out = marrow()
        .args(["softnic", "--socket"])
        .arg(&sock)
        .arg("--trace")
        .arg(d.join("no/such/dir/t.trace"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error: trace file") && !err.contains("serving"), "{err}");
    assert!(!sock.exists(), "bound before the check");
}

#[test]
fn an_existing_trace_is_left_alone_until_the_daemon_writes_one() {
    let d = dir("existing");
    let (sock, trace) = (d.join("s.sock"), d.join("t.trace"));
    std::fs::write(&trace, b"an earlier run's trace").unwrap();
    // Checked, not touched: the file is as it was once the daemon serves.
    let mut child = start(&sock, Some(&trace));
    assert_eq!(std::fs::read(&trace).unwrap(), b"an earlier run's trace");
    child.kill().unwrap();
    let _ = child.wait();
}
