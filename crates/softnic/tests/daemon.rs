//! Two client processes on one softnic daemon: each creates its QP through
//! the socket, maps its queues from the memfds the daemon sends, and they
//! exchange an RDMA_WRITE and an RDMA_READ through shared memory alone.
//!
//! The children are this test binary run again with `MARROW_ROLE` set.

use marrow_driver::{CqMode, CqPoller, SendQueue};
use marrow_mlx5::prelude::*;
use marrow_softnic::client::Client;
use marrow_softnic::{Access, QpCaps, QpState, Shm, SoftNic};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LEN: usize = 1 << 16;

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(13) ^ seed).collect()
}

struct Peer {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl Peer {
    fn spawn(role: &str, sock: &PathBuf) -> Peer {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
            .env("MARROW_ROLE", role)
            .env("MARROW_SOCK", sock)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Peer { child, stdin, lines }
    }

    /// The next line the child prints with `@@ `, skipping libtest's own.
    fn expect(&mut self, tag: &str) -> Vec<String> {
        for line in &mut self.lines {
            let line = line.unwrap();
            // libtest may print "test child_role ... " on the same line first.
            if let Some((_, rest)) = line.split_once("@@ ") {
                let words: Vec<String> = rest.split_whitespace().map(String::from).collect();
                assert_eq!(words[0], tag, "child said {rest}");
                return words[1..].to_vec();
            }
        }
        panic!("child exited before saying {tag}");
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
    }
}

#[test]
fn two_processes_share_one_daemon() {
    if std::env::var("MARROW_ROLE").is_ok() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("marrow-daemon-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("softnic.sock");
    let mut nic = SoftNic::new();
    nic.enable_trace(1 << 20);
    nic.start(1);
    let nic = Arc::new(nic);
    let listener = UnixListener::bind(&sock).unwrap();
    let server = nic.clone();
    std::thread::spawn(move || marrow_softnic::daemon::serve(server, listener, Default::default()));

    let mut b = Peer::spawn("responder", &sock);
    let binfo = b.expect("READY");
    let mut a = Peer::spawn("requester", &sock);
    a.say(&binfo.join(" "));
    let ainfo = a.expect("READY");
    b.say(&ainfo[0]);
    b.expect("CONNECTED");
    a.say("go");
    a.expect("DONE");
    b.say("check");
    b.expect("VERIFIED");
    assert!(a.child.wait().unwrap().success());
    assert!(b.child.wait().unwrap().success());
    // The daemon's engine saw both processes' doorbells in one model.
    let (recs, _) = marrow_softnic::trace::parse(&nic.trace_bytes().unwrap());
    let writers: std::collections::BTreeSet<u32> =
        recs.iter().filter(|r| r.kind == marrow_softnic::trace::Kind::WQE_FETCH).map(|r| r.qpn).collect();
    assert_eq!(writers.len(), 1, "only the requester posts: {writers:?}");
    let _ = std::fs::remove_dir_all(dir);
}

fn read_line() -> String {
    let mut s = String::new();
    std::io::stdin().read_line(&mut s).unwrap();
    s.trim().to_string()
}

struct Setup {
    client: Client,
    buf: Shm,
    lkey: u32,
    rkey: u32,
    qp: marrow_softnic::client::RemoteQp,
    cq: marrow_softnic::client::RemoteCq,
}

fn setup() -> Setup {
    let sock = PathBuf::from(std::env::var("MARROW_SOCK").unwrap());
    let mut client = Client::connect(&sock).unwrap();
    let pd = client.alloc_pd().unwrap();
    let buf = Shm::create("client-buf", LEN).unwrap();
    let (lkey, rkey) = client.reg_mr(pd, &buf, Access::all()).unwrap();
    let cq = client.create_cq(16, false).unwrap();
    let qp = client.create_qp(pd, cq.cqn, cq.cqn, QpCaps::default()).unwrap();
    client.modify_qp(qp.qpn, QpState::Init, None).unwrap();
    Setup { client, buf, lkey, rkey, qp, cq }
}

fn wait(poller: &mut CqPoller) -> Completion {
    let start = Instant::now();
    loop {
        if let Some(c) = poller.poll().unwrap() {
            return c;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no completion in 10 s");
        std::thread::yield_now();
    }
}

#[test]
fn child_role() {
    match std::env::var("MARROW_ROLE").as_deref() {
        Ok("responder") => {
            let mut s = setup();
            s.buf.region().write_bytes(0, &pattern(2)).unwrap();
            println!("@@ READY {} {} {}", s.qp.qpn, s.rkey, s.buf.region().base_addr());
            let peer: u32 = read_line().parse().unwrap();
            s.client.modify_qp(s.qp.qpn, QpState::Rtr, Some(peer)).unwrap();
            s.client.modify_qp(s.qp.qpn, QpState::Rts, None).unwrap();
            println!("@@ CONNECTED");
            assert_eq!(read_line(), "check");
            let mut got = vec![0u8; LEN];
            s.buf.region().read_bytes(LEN / 2, &mut got[..LEN / 2]).unwrap();
            assert_eq!(got[..LEN / 2], pattern(1)[..LEN / 2], "the requester's write landed here");
            println!("@@ VERIFIED");
        }
        Ok("requester") => {
            let mut s = setup();
            let info: Vec<u64> = read_line().split_whitespace().map(|w| w.parse().unwrap()).collect();
            let (peer, rkey, raddr) = (info[0] as u32, info[1] as u32, info[2]);
            s.client.modify_qp(s.qp.qpn, QpState::Rtr, Some(peer)).unwrap();
            s.client.modify_qp(s.qp.qpn, QpState::Rts, None).unwrap();
            s.buf.region().write_bytes(0, &pattern(1)).unwrap();
            println!("@@ READY {}", s.qp.qpn);
            assert_eq!(read_line(), "go");
            let mut sq = SendQueue::new(s.qp.sq, 64, s.qp.dbrec, s.qp.uar, s.qp.qpn);
            let mut cq = CqPoller::new(s.cq.buf, s.cq.ncqe, s.cq.dbrec, CqMode::Normal);
            let base = s.buf.region().base_addr() as u64;
            // Write our first half into the responder's second half...
            let sgl = [Sge { addr: base, length: (LEN / 2) as u32, lkey: s.lkey }];
            let remote = RemoteAddr { raddr: raddr + (LEN / 2) as u64, rkey };
            sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWrite { remote, sgl: &sgl }).unwrap();
            // ...and read its first half into our second half.
            let sgl = [Sge { addr: base + (LEN / 2) as u64, length: (LEN / 2) as u32, lkey: s.lkey }];
            sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaRead { remote: RemoteAddr { raddr, rkey }, sgl: &sgl })
                .unwrap();
            sq.ring().unwrap();
            for want in [WqeOpcode::RDMA_WRITE, WqeOpcode::RDMA_READ] {
                match wait(&mut cq) {
                    Completion::Requester { wqe_opcode, .. } => assert_eq!(wqe_opcode, want),
                    c => panic!("{c:?}"),
                }
            }
            let mut got = vec![0u8; LEN / 2];
            s.buf.region().read_bytes(LEN / 2, &mut got).unwrap();
            assert_eq!(got, pattern(2)[..LEN / 2], "the read brought the responder's bytes");
            assert_eq!(s.client.query_qp(s.qp.qpn).unwrap(), (QpState::Rts, 2));
            println!("@@ DONE");
        }
        _ => {}
    }
}
