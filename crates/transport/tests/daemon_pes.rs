//! Two PEs in two processes on one softnic daemon: each builds its channel
//! through the daemon's socket, they exchange QP and buffer (as a launcher
//! would), and PE 0's device code (on CPU threads) puts, gets and adds into
//! PE 1's buffer through the shared rings alone.
//!
//! The children are this test binary run again with `MARROW_PE` set.

use marrow_softnic::SoftNic;
use marrow_transport::cpu::Device;
use marrow_transport::remote::{PeInfo, RemotePe};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const LEN: usize = 1 << 20;

struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Peer {
    fn spawn(pe: usize, sock: &PathBuf) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "pe_process", "--nocapture", "--test-threads=1"])
            .env("MARROW_PE", pe.to_string())
            .env("MARROW_SOCK", sock)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Peer { child, stdin, lines }
    }

    fn expect(&mut self, tag: &str) -> String {
        for line in &mut self.lines {
            let line = line.unwrap();
            if let Some((_, rest)) = line.split_once("@@ ") {
                let (t, body) = rest.split_once(' ').unwrap_or((rest, ""));
                assert_eq!(t, tag, "child said {rest}");
                return body.to_string();
            }
        }
        panic!("child exited before saying {tag}");
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }
}

#[test]
fn pes_in_two_processes_share_one_daemon() {
    if std::env::var("MARROW_PE").is_ok() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("marrow-pes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("softnic.sock");
    let mut nic = SoftNic::new();
    nic.start(1);
    let nic = Arc::new(nic);
    let listener = UnixListener::bind(&sock).unwrap();
    let server = nic.clone();
    std::thread::spawn(move || marrow_softnic::daemon::serve(server, listener, Default::default()));

    let mut pe1 = Peer::spawn(1, &sock);
    let info1 = pe1.expect("INFO");
    let mut pe0 = Peer::spawn(0, &sock);
    pe0.say(&info1);
    let info0 = pe0.expect("INFO");
    pe1.say(&info0);
    pe1.expect("READY");
    pe0.say("go");
    pe0.expect("DONE");
    pe1.say("check");
    pe1.expect("VERIFIED");
    assert!(pe0.child.wait().unwrap().success());
    assert!(pe1.child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(dir);
}

fn line() -> String {
    let mut s = String::new();
    std::io::stdin().read_line(&mut s).unwrap();
    s.trim().to_string()
}

const THREADS: usize = 4;
const PER: usize = 64;

fn slot(t: usize, i: usize) -> usize {
    (t * PER + i) * 64
}

#[test]
fn pe_process() {
    let Ok(pe) = std::env::var("MARROW_PE") else { return };
    let pe: usize = pe.parse().unwrap();
    let sock = PathBuf::from(std::env::var("MARROW_SOCK").unwrap());
    let mut me = RemotePe::create(&sock, pe, LEN, 8, Duration::from_secs(10)).unwrap();
    if pe == 1 {
        // The word PE 0 adds to, and the bytes it reads back.
        me.buf().write_bytes(LEN - 4096, &0u64.to_ne_bytes()).unwrap();
        me.buf().write_bytes(LEN - 2048, &[0x5A; 256]).unwrap();
        println!("@@ INFO {}", me.info());
        let peer: PeInfo = line().parse().unwrap();
        me.connect(peer).unwrap();
        println!("@@ READY");
        assert_eq!(line(), "check");
        for t in 0..THREADS {
            for i in 0..PER {
                let mut got = [0u8; 64];
                me.buf().read_bytes(slot(t, i), &mut got).unwrap();
                assert_eq!(got, [(t * 16 + i) as u8; 64], "thread {t} put {i}");
            }
        }
        let mut v = [0u8; 8];
        me.buf().read_bytes(LEN - 4096, &mut v).unwrap();
        assert_eq!(u64::from_ne_bytes(v), (THREADS * PER) as u64);
        println!("@@ VERIFIED");
    } else {
        let peer: PeInfo = line().parse().unwrap();
        me.connect(peer).unwrap();
        println!("@@ INFO {}", me.info());
        assert_eq!(line(), "go");
        let page = me.page();
        let dev = Device::on_page(&page);
        let buf = me.buf();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    Device::set_thread(t as u32);
                    for i in 0..PER {
                        buf.write_bytes(slot(t, i), &[(t * 16 + i) as u8; 64]).unwrap();
                        dev.put_nbi(1, slot(t, i) as u64, slot(t, i) as u64, 64).unwrap();
                        dev.fetch_add(1, (LEN - 4096) as u64, 1, (LEN - 8192 + t * 8) as u64).unwrap();
                    }
                });
            }
        });
        dev.quiet().unwrap();
        dev.get(1, (LEN - 2048) as u64, (LEN - 1024) as u64, 256).unwrap();
        let mut got = [0u8; 256];
        buf.read_bytes(LEN - 1024, &mut got).unwrap();
        assert_eq!(got, [0x5A; 256]);
        println!("@@ DONE");
    }
}
