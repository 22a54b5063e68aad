//! A daemon whose process runs out of file descriptors keeps serving: its
//! `accept` fails (EMFILE) while every descriptor is taken, it logs and
//! retries with backoff, and the next client after the flood is served.
//! A test binary of its own: it lowers this process's descriptor limit.

use marrow_softnic::SoftNic;
use marrow_softnic::daemon::{Options, serve};
use marrow_softnic::wire::{self, PROTOCOL_VERSION, Reply, Request};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn serves(sock: &std::path::Path) -> bool {
    let Ok(s) = UnixStream::connect(sock) else { return false };
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    wire::send(&s, &Request::Hello { version: PROTOCOL_VERSION }, &[]).is_ok()
        && matches!(wire::recv::<Reply>(&s), Ok(Some((Reply::Hello { .. }, _))))
}

#[test]
fn running_out_of_descriptors_does_not_stop_the_daemon() {
    let dir = std::env::temp_dir().join(format!("marrow-fd-exhaustion-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("softnic.sock");
    let nic = Arc::new(SoftNic::new());
    let listener = UnixListener::bind(&sock).unwrap();
    std::thread::spawn(move || serve(nic, listener, Options::default()));
    assert!(serves(&sock));

    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    setrlimit(Resource::RLIMIT_NOFILE, open + 24, hard).unwrap();
    // Connections until this process has no descriptor left: each takes
    // one here and one in the daemon's accept, until accept fails.
    let mut held = Vec::new();
    let err = loop {
        match UnixStream::connect(&sock) {
            Ok(s) => held.push(s),
            Err(e) => break e,
        }
        assert!(held.len() < 1000, "the descriptor limit never bit");
    };
    assert_eq!(err.raw_os_error(), Some(nix::libc::EMFILE), "{err}");
    // Let the daemon meet EMFILE on the connections still in its backlog.
    std::thread::sleep(Duration::from_millis(300));
    drop(held);
    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).unwrap();
    let t0 = Instant::now();
    while !serves(&sock) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the daemon stopped serving after running out of descriptors");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(dir);
}
