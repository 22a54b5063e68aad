//! A QP of this process's softnic connected to a QP of another softnic
//! instance in a child process, through a link: writes, reads, atomics and
//! a SEND cross it; a bad rkey is NAKed by the remote model with
//! REMOTE_ACCESS_ERR; and when the other process exits, a request finds no
//! responder: TRANSPORT_RETRY_EXC_ERR.

use marrow_driver::{CqMode as DrvCqMode, CqPoller, SendQueue};
use marrow_mlx5::prelude::*;
use marrow_softnic::{Access, CqMode, ModifyQp, QpCaps, QpState, Shm, SoftNic};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LEN: usize = 1 << 16;

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(29) ^ seed).collect()
}

struct Local {
    nic: SoftNic,
    sq: SendQueue,
    cq: CqPoller,
    buf: Shm,
}

fn wait(cq: &mut CqPoller) -> Completion {
    let start = Instant::now();
    loop {
        if let Some(c) = cq.poll().unwrap() {
            return c;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no completion in 10 s");
        std::thread::yield_now();
    }
}

fn model(name: &str) -> (SoftNic, u32, u32, u32, Shm, u32, u32) {
    let mut nic = SoftNic::new();
    nic.start(1);
    let (pd, cq, qpn, buf, lkey, rkey) = {
        let mut hca = nic.hca();
        let pd = hca.alloc_pd();
        let cq = hca.create_cq(64, CqMode::Normal).unwrap();
        let qpn = hca.create_qp(pd, cq, cq, QpCaps::default()).unwrap();
        hca.modify_qp(qpn, ModifyQp::to(QpState::Init)).unwrap();
        let buf = Shm::create(name, LEN).unwrap();
        let r = buf.region();
        let (lkey, rkey) = hca.reg_mr(pd, r.base_addr() as u64, r, Access::all());
        (pd, cq, qpn, buf, lkey, rkey)
    };
    let _ = pd;
    (nic, cq, qpn, 0, buf, lkey, rkey)
}

fn connect(nic: &SoftNic, qpn: u32, peer: u32, link: u32) {
    let mut hca = nic.hca();
    hca.modify_qp(qpn, ModifyQp { dest_link: Some(link), ..ModifyQp::rtr(peer) }).unwrap();
    hca.modify_qp(qpn, ModifyQp::to(QpState::Rts)).unwrap();
}

fn queues(nic: &SoftNic, qpn: u32, cqn: u32) -> (SendQueue, CqPoller) {
    let hca = nic.hca();
    let m = &hca.qp(qpn).unwrap().mem;
    let c = hca.cq(cqn).unwrap();
    (SendQueue::new(m.sq, 64, m.dbrec, m.uar, qpn), CqPoller::new(c.buf, c.ncqe, c.dbrec, DrvCqMode::Normal))
}

#[test]
fn qps_of_two_softnic_processes_talk_over_a_link() {
    if std::env::var("MARROW_LINK_ROLE").is_ok() {
        return;
    }
    let sock = std::env::temp_dir().join(format!("marrow-link-test-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let listener = UnixListener::bind(&sock).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "remote_model", "--nocapture", "--test-threads=1"])
        .env("MARROW_LINK_ROLE", "remote")
        .env("MARROW_LINK_SOCK", &sock)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_child = child.stdin.take().unwrap();
    let mut from_child = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut expect = |tag: &str| -> Vec<u64> {
        for line in &mut from_child {
            let line = line.unwrap();
            if let Some((_, rest)) = line.split_once("@@ ") {
                let w: Vec<&str> = rest.split_whitespace().collect();
                assert_eq!(w[0], tag, "child said {rest}");
                return w[1..].iter().map(|x| x.parse().unwrap()).collect();
            }
        }
        panic!("child exited before {tag}");
    };

    let (stream, _) = listener.accept().unwrap();
    let (nic, cqn, qpn, _, buf, lkey, _) = model("link-local");
    nic.enable_trace(1 << 24);
    let link = nic.attach_link(stream).unwrap();
    let info = expect("READY");
    let (peer, rkey, raddr) = (info[0] as u32, info[1] as u32, info[2]);
    connect(&nic, qpn, peer, link);
    writeln!(to_child, "{qpn}").unwrap();
    expect("CONNECTED");
    let (sq, cq) = queues(&nic, qpn, cqn);
    let mut me = Local { nic, sq, cq, buf };
    let base = me.buf.region().base_addr() as u64;
    me.buf.region().write_bytes(0, &pattern(1)).unwrap();

    let half = (LEN / 2) as u32;
    let post = |me: &mut Local, op: WqeOp<'_>| {
        me.sq.post(CtrlParams::signaled(0, 0), &op).unwrap();
        me.sq.ring().unwrap();
        wait(&mut me.cq)
    };
    // Write our first half into the remote's second half.
    let s = [Sge { addr: base, length: half, lkey }];
    let c = post(&mut me, WqeOp::RdmaWrite { remote: RemoteAddr { raddr: raddr + u64::from(half), rkey }, sgl: &s });
    assert!(
        matches!(c, Completion::Requester { wqe_opcode: WqeOpcode::RDMA_WRITE, byte_cnt, .. } if byte_cnt == half),
        "{c:?}"
    );
    // Read the remote's first half into our second half.
    let s = [Sge { addr: base + u64::from(half), length: half, lkey }];
    let c = post(&mut me, WqeOp::RdmaRead { remote: RemoteAddr { raddr, rkey }, sgl: &s });
    assert!(matches!(c, Completion::Requester { wqe_opcode: WqeOpcode::RDMA_READ, .. }), "{c:?}");
    let mut got = vec![0u8; LEN / 2];
    me.buf.region().read_bytes(LEN / 2, &mut got).unwrap();
    assert_eq!(got, pattern(2)[..LEN / 2]);
    // Fetch-and-add on the remote's first word: the old value comes back.
    let old_remote = u64::from_ne_bytes(pattern(2)[..8].try_into().unwrap());
    let l = Sge { addr: base + 8, length: 8, lkey };
    let c = post(&mut me, WqeOp::AtomicFa { remote: RemoteAddr { raddr, rkey }, local: l, add: 5 });
    assert!(matches!(c, Completion::Requester { wqe_opcode: WqeOpcode::ATOMIC_FA, .. }), "{c:?}");
    let mut old = [0u8; 8];
    me.buf.region().read_bytes(8, &mut old).unwrap();
    assert_eq!(u64::from_ne_bytes(old), old_remote);
    // A SEND into the receive the remote posted.
    let c = post(&mut me, WqeOp::SendInline { data: b"over the link" });
    assert!(matches!(c, Completion::Requester { wqe_opcode: WqeOpcode::SEND, .. }), "{c:?}");
    writeln!(to_child, "check {}", old_remote.wrapping_add(5)).unwrap();
    expect("VERIFIED");

    // The remote model validates our rkey: a bad one is NAKed.
    let s = [Sge { addr: base, length: 8, lkey }];
    let c = post(&mut me, WqeOp::RdmaWrite { remote: RemoteAddr { raddr, rkey: rkey ^ 0x300 }, sgl: &s });
    match c {
        Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::REMOTE_ACCESS_ERR, "{e}"),
        c => {
            let (recs, _) = marrow_softnic::trace::parse(&me.nic.trace_bytes().unwrap());
            for r in recs {
                eprintln!(
                    "{} {:?} qp {:#x} addr {:#x} {:02x?}",
                    r.kind.name(),
                    r.t_ns,
                    r.qpn,
                    r.addr,
                    &r.bytes[..r.bytes.len().min(16)]
                );
            }
            panic!("{c:?}")
        }
    }
    assert_eq!(me.nic.hca().qp(qpn).unwrap().state, QpState::Err);

    // Reconnect, let the other process exit, and post again: no responder.
    {
        let mut hca = me.nic.hca();
        hca.modify_qp(qpn, ModifyQp::to(QpState::Reset)).unwrap();
        hca.modify_qp(qpn, ModifyQp::to(QpState::Init)).unwrap();
    }
    connect(&me.nic, qpn, peer, link);
    // The ring restarts at 0 after RESET; the CQ (and its consumer) go on.
    me.sq = queues(&me.nic, qpn, cqn).0;
    writeln!(to_child, "exit").unwrap();
    assert!(child.wait().unwrap().success());
    let c = post(&mut me, WqeOp::RdmaWriteInline { remote: RemoteAddr { raddr, rkey }, data: b"x" });
    match c {
        Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::TRANSPORT_RETRY_EXC_ERR, "{e}"),
        c => panic!("{c:?}"),
    }
    let _ = std::fs::remove_file(&sock);
}

fn line() -> String {
    let mut s = String::new();
    std::io::stdin().read_line(&mut s).unwrap();
    s.trim().to_string()
}

#[test]
fn remote_model() {
    if std::env::var("MARROW_LINK_ROLE").as_deref() != Ok("remote") {
        return;
    }
    let stream = UnixStream::connect(std::env::var("MARROW_LINK_SOCK").unwrap()).unwrap();
    let (nic, cqn, qpn, _, buf, lkey, rkey) = model("link-remote");
    let link = nic.attach_link(stream).unwrap();
    buf.region().write_bytes(0, &pattern(2)).unwrap();
    // A receive for the requester's SEND, at offset 1024 of our buffer.
    let (mut rq, mut rcq) = {
        let hca = nic.hca();
        let q = hca.qp(qpn).unwrap();
        let c = hca.cq(cqn).unwrap();
        (
            marrow_driver::RecvQueue::new(q.mem.rq, q.caps.rq_wqes, q.caps.rq_stride as usize, q.mem.dbrec),
            CqPoller::new(c.buf, c.ncqe, c.dbrec, DrvCqMode::Normal),
        )
    };
    let base = buf.region().base_addr() as u64;
    rq.post(&[Sge { addr: base + 1024, length: 64, lkey }]).unwrap();
    println!("@@ READY {qpn} {rkey} {base}");
    let peer: u32 = line().parse().unwrap();
    connect(&nic, qpn, peer, link);
    println!("@@ CONNECTED");
    let check = line();
    let want_word: u64 = check.strip_prefix("check ").unwrap().parse().unwrap();
    let mut second = vec![0u8; LEN / 2];
    buf.region().read_bytes(LEN / 2, &mut second).unwrap();
    assert_eq!(second, pattern(1)[..LEN / 2], "the write landed");
    let mut word = [0u8; 8];
    buf.region().read_bytes(0, &mut word).unwrap();
    assert_eq!(u64::from_ne_bytes(word), want_word, "the fetch-and-add applied");
    match wait(&mut rcq) {
        Completion::Responder { opcode: CqeOpcode::RESP_SEND, byte_cnt: 13, .. } => {}
        c => panic!("{c:?}"),
    }
    let mut msg = [0u8; 13];
    buf.region().read_bytes(1024, &mut msg).unwrap();
    assert_eq!(&msg, b"over the link");
    println!("@@ VERIFIED");
    assert_eq!(line(), "exit");
}
