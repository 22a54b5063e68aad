//! Running `marrow` as a child whose memory and time are bounded: a parser
//! that reads without bound fails in the child (its allocation is refused)
//! rather than filling the machine, and one that blocks fails the test
//! rather than hanging it.

// Each test binary includes this module and uses a part of it.
#![allow(dead_code)]

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a bounded run gave.
#[derive(Debug)]
pub struct Bounded {
    /// Exit status; `None` when a signal ended it (an allocation refused aborts).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// `marrow ARGS` with its address space capped at `kib` KiB, killed (and the
/// test failed) after `secs` seconds.
pub fn marrow_bounded(args: &[&str], kib: u64, secs: u64) -> Bounded {
    let mut c = Command::new("sh");
    c.arg("-c").arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\"")).arg(env!("CARGO_BIN_EXE_marrow")).args(args);
    finish_within(c, secs)
}

/// Runs `c` to its end, or kills it after `secs` and fails.
pub fn finish_within(mut c: Command, secs: u64) -> Bounded {
    let mut child = c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + Duration::from_secs(secs);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("marrow did not finish in {secs} s: blocked, or reading without end?");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let r = Bounded { code: status.code(), stdout: out.join().expect("stdout"), stderr: err.join().expect("stderr") };
    assert!(!r.stderr.contains("panicked"), "marrow panicked:\n{}", r.stderr);
    r
}

/// What a run of `marrow ARGS` gave.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// `marrow ARGS`, to its end; a panic in it fails the test.
pub fn marrow(args: &[&str]) -> Run {
    let o = Command::new(env!("CARGO_BIN_EXE_marrow")).args(args).output().expect("marrow runs");
    let r = Run {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    };
    assert!(!r.stderr.contains("panicked"), "marrow {args:?} panicked:\n{}", r.stderr);
    r
}

/// A scratch file under cargo's temporary directory for integration tests,
/// named for the test binary so that binaries running at once never share one.
pub fn tmp(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("marrow-{}-{name}", env!("CARGO_CRATE_NAME")))
}

/// A temporary path as the `&str` an argument list wants.
pub fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// `marrow ARGS` with `env` added to its environment: (exit code, stdout, stderr).
pub fn marrow_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_marrow"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
