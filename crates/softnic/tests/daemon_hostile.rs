//! The softnic daemon against a hostile client: each finding that once
//! crashed, stopped or exhausted the daemon, or let one client reach
//! another's objects, is tried here, and after each the daemon still serves
//! a well-behaved client.

use marrow_mlx5::prelude::*;
use marrow_softnic::client::{Client, ClientError, RemoteCq, RemoteQp};
use marrow_softnic::daemon::{Options, serve};
use marrow_softnic::wire::{self, Limits, PROTOCOL_VERSION, Reply, Request};
use marrow_softnic::{Access, QpCaps, QpState, Shm, SoftNic};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A daemon serving on a socket of this test's own.
struct Daemon {
    nic: Arc<SoftNic>,
    sock: PathBuf,
}

fn daemon(name: &str, opts: Options) -> Daemon {
    let dir = std::env::temp_dir().join(format!("marrow-hostile-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("softnic.sock");
    let mut nic = SoftNic::new();
    nic.enable_trace(1 << 20);
    nic.start(1);
    let nic = Arc::new(nic);
    let listener = UnixListener::bind(&sock).unwrap();
    let server = nic.clone();
    std::thread::spawn(move || serve(server, listener, opts));
    Daemon { nic, sock }
}

impl Daemon {
    fn client(&self) -> Client {
        Client::connect(&self.sock).expect("a well-behaved client is served")
    }

    /// A raw connection that has said Hello.
    fn raw(&self) -> UnixStream {
        let s = UnixStream::connect(&self.sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        wire::send(&s, &Request::Hello { version: PROTOCOL_VERSION }, &[]).unwrap();
        assert!(matches!(wire::recv::<Reply>(&s).unwrap(), Some((Reply::Hello { .. }, _))));
        s
    }

    /// Whether a new client can still connect, say Hello and allocate a PD
    /// within `wait` (a daemon that stopped serving fails this, not hangs).
    fn serves(&self, wait: Duration) -> bool {
        let Ok(s) = UnixStream::connect(&self.sock) else { return false };
        s.set_read_timeout(Some(wait)).unwrap();
        for req in [Request::Hello { version: PROTOCOL_VERSION }, Request::AllocPd] {
            if wire::send(&s, &req, &[]).is_err() {
                return false;
            }
            match wire::recv::<Reply>(&s) {
                Ok(Some((Reply::Hello { .. } | Reply::Pd(_), _))) => {}
                _ => return false,
            }
        }
        true
    }
}

fn refused(r: Result<impl std::fmt::Debug, ClientError>) -> String {
    match r {
        Err(ClientError::Refused(why)) => why,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A memfd of `len` bytes made without the seals `Shm::create` adds.
fn unsealed_memfd(len: u64) -> std::fs::File {
    let fd: OwnedFd =
        nix::sys::memfd::memfd_create(c"hostile", nix::sys::memfd::MemFdCreateFlag::MFD_ALLOW_SEALING).unwrap();
    let f = std::fs::File::from(fd);
    f.set_len(len).unwrap();
    f
}

/// A PD, an MR over a fresh buffer, a CQ and a QP in INIT.
struct Objects {
    pd: u32,
    buf: Shm,
    lkey: u32,
    rkey: u32,
    cq: RemoteCq,
    qp: RemoteQp,
}

fn objects(c: &mut Client, len: usize) -> Objects {
    let pd = c.alloc_pd().unwrap();
    let buf = Shm::create("hostile-buf", len).unwrap();
    let (lkey, rkey) = c.reg_mr(pd, &buf, Access::all()).unwrap();
    let cq = c.create_cq(16, false).unwrap();
    let qp = c.create_qp(pd, cq.cqn, cq.cqn, QpCaps::default()).unwrap();
    c.modify_qp(qp.qpn, QpState::Init, None).unwrap();
    Objects { pd, buf, lkey, rkey, cq, qp }
}

#[test]
fn client_memory_must_be_sealed_and_daemon_memory_cannot_be_shrunk() {
    let d = daemon("seals", Options::default());
    let mut c = d.client();
    let pd = c.alloc_pd().unwrap();
    // An MR over a memfd that could be truncated under the daemon's mapping.
    let f = unsealed_memfd(1 << 16);
    let req = Request::RegMr { pd, addr: 0x1000, len: 1 << 16, access: Access::all().bits() };
    let why = refused(c.raw_call(&req, &[f.as_raw_fd()]));
    assert!(why.contains("F_SEAL_SHRINK"), "{why}");
    // A plain file is refused too (it has no seals at all).
    let plain = std::fs::File::from(tempfile_in_tmp());
    plain.set_len(1 << 16).unwrap();
    let why = refused(c.raw_call(&req, &[plain.as_raw_fd()]));
    assert!(why.contains("seals"), "{why}");
    // What the daemon hands out (CQ ring, queues, UAR page) cannot be shrunk.
    let cq = c.create_cq(16, false).unwrap();
    let qp = c.create_qp(pd, cq.cqn, cq.cqn, QpCaps::default()).unwrap();
    let _ = (cq, qp);
    let mut fds = 0;
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        let t = target.to_string_lossy();
        if t.contains("memfd:marrow-cq") || t.contains("memfd:marrow-qp") || t.contains("memfd:marrow-uar") {
            let f = std::fs::OpenOptions::new().write(true).open(entry.path()).unwrap();
            let e = f.set_len(0).expect_err("shrinking a memfd the daemon maps");
            assert_eq!(e.raw_os_error(), Some(nix::libc::EPERM), "{t}: {e}");
            fds += 1;
        }
    }
    assert!(fds >= 2, "found {fds} of the daemon's memfds in /proc/self/fd");
    // And the client's own sealed MR memory: the seal holds it too.
    let buf = Shm::create("sealed", 1 << 16).unwrap();
    c.reg_mr(pd, &buf, Access::all()).unwrap();
    let f = std::fs::File::from(buf.fd().try_clone_to_owned().unwrap());
    assert_eq!(f.set_len(4096).unwrap_err().raw_os_error(), Some(nix::libc::EPERM));
    assert!(d.serves(Duration::from_secs(5)));
}

/// An unlinked regular file under the temporary directory.
fn tempfile_in_tmp() -> OwnedFd {
    let p = std::env::temp_dir().join(format!("marrow-hostile-plain-{}", std::process::id()));
    let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
    std::fs::remove_file(&p).unwrap();
    f.into()
}

#[test]
fn limits_on_objects_bytes_and_entries_give_clear_errors() {
    let limits = Limits { objects: 8, mapped_bytes: 1 << 20, cq_entries: 64, qp_entries: 128 };
    let d = daemon("limits", Options { limits, ..Options::default() });
    let mut c = d.client();
    assert_eq!(c.limits(), limits);
    let pd = c.alloc_pd().unwrap();
    // A sparse memfd much larger than the limit: refused before it is mapped.
    let big = Shm::create("big", 2 << 20).unwrap();
    let why = refused(c.reg_mr(pd, &big, Access::all()));
    assert!(why.contains("limit of 1048576"), "{why}");
    let why = refused(c.create_cq(128, false));
    assert!(why.contains("CQ entries") && why.contains("limit of 64"), "{why}");
    let cq = c.create_cq(64, false).unwrap();
    let caps = QpCaps { sq_wqebbs: 256, ..QpCaps::default() };
    let why = refused(c.create_qp(pd, cq.cqn, cq.cqn, caps));
    assert!(why.contains("queue entries"), "{why}");
    // Objects: PD and CQ held, then PDs until the eighth; the ninth is refused.
    for _ in 0..6 {
        c.alloc_pd().unwrap();
    }
    let why = refused(c.alloc_pd());
    assert!(why.contains("holds 8 objects"), "{why}");
    // The limits are per client: another one starts from nothing.
    let mut other = d.client();
    other.alloc_pd().unwrap();
}

#[test]
fn too_many_clients_are_told_so_and_the_daemon_serves_on() {
    let d = daemon("clients", Options { max_clients: 4, ..Options::default() });
    let held: Vec<UnixStream> = (0..4).map(|_| d.raw()).collect();
    let s = UnixStream::connect(&d.sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    match wire::recv::<Reply>(&s).unwrap() {
        Some((Reply::Error(why), _)) => assert!(why.contains("at most 4 clients"), "{why}"),
        other => panic!("the fifth client got {other:?}"),
    }
    drop(held);
    let t0 = Instant::now();
    while !d.serves(Duration::from_secs(2)) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the daemon did not serve again once clients left");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_flood_of_silent_connections_does_not_lock_clients_out() {
    let d = daemon("flood", Options { max_clients: 16, max_handshaking: 8, ..Options::default() });
    let flood: Vec<UnixStream> = (0..300).filter_map(|_| UnixStream::connect(&d.sock).ok()).collect();
    assert!(flood.len() > 100, "only {} connections opened", flood.len());
    // Each new connection closes the oldest silent one, so a client that
    // says Hello at once is always served.
    let t0 = Instant::now();
    let mut c = d.client();
    c.alloc_pd().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5), "a client waited {:?} behind a flood", t0.elapsed());
    drop(flood);
}

#[test]
fn everything_a_client_made_is_destroyed_when_it_disconnects() {
    let d = daemon("cleanup", Options::default());
    let before = d.nic.hca().object_counts();
    for _ in 0..20 {
        let mut c = d.client();
        let o = objects(&mut c, 1 << 16);
        c.modify_qp(o.qp.qpn, QpState::Err, None).unwrap();
        drop(c);
    }
    let t0 = Instant::now();
    while d.nic.hca().object_counts() != before {
        assert!(t0.elapsed() < Duration::from_secs(10), "objects left: {:?}", d.nic.hca().object_counts());
        std::thread::sleep(Duration::from_millis(10));
    }
    // Numbers are reused, so the model's tables do not grow with churn.
    let mut c = d.client();
    let o = objects(&mut c, 4096);
    assert!(o.qp.qpn < 0x100 + 4, "QPN {:#x} after 20 clients came and went", o.qp.qpn);
    // Explicit destroys, in the order verbs wants them.
    let why = refused(c.destroy_cq(o.cq.cqn));
    assert!(why.contains("in use"), "{why}");
    let why = refused(c.dealloc_pd(o.pd));
    assert!(why.contains("in use"), "{why}");
    c.destroy_qp(o.qp.qpn).unwrap();
    c.destroy_cq(o.cq.cqn).unwrap();
    c.dereg_mr(o.lkey).unwrap();
    c.dealloc_pd(o.pd).unwrap();
    let why = refused(c.destroy_qp(o.qp.qpn));
    assert!(why.contains("no QP"), "{why}");
}

#[test]
fn events_go_to_the_client_that_owns_the_object() {
    let d = daemon("events", Options::default());
    let mut a = d.client();
    let mut b = d.client();
    let oa = objects(&mut a, 4096);
    let _ob = objects(&mut b, 4096);
    // A forced CQ overflow on A's QP: the next CQE finds the ring full, the
    // CQ and its QPs raise events.
    let faults =
        Request::SetFaults { qpn: oa.qp.qpn, drop_doorbells: 0, fail_wqe: None, stall: false, overflow_cq: true };
    a.raw_call(&faults, &[]).unwrap();
    a.modify_qp(oa.qp.qpn, QpState::Rtr, Some(oa.qp.qpn)).unwrap();
    a.modify_qp(oa.qp.qpn, QpState::Rts, None).unwrap();
    let mut sq = marrow_driver::SendQueue::new(oa.qp.sq, 64, oa.qp.dbrec, oa.qp.uar, oa.qp.qpn);
    sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    sq.ring().unwrap();
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while seen.is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no event for A's overflowed CQ");
        std::thread::sleep(Duration::from_millis(5));
        seen = a.take_events().unwrap();
    }
    assert!(seen.iter().any(|e| e.contains("CqOverflow")), "{seen:?}");
    assert_eq!(b.take_events().unwrap(), Vec::<String>::new(), "B sees none of A's events");
    assert_eq!(a.take_events().unwrap().len(), 0, "taken events are gone");
}

#[test]
fn one_client_cannot_reach_another_clients_objects() {
    let d = daemon("isolation", Options::default());
    let mut a = d.client();
    let mut b = d.client();
    let oa = objects(&mut a, 1 << 16);
    let ob = objects(&mut b, 1 << 16);
    // B names A's objects: every one refused, as if it did not exist.
    let why = refused(b.query_qp(oa.qp.qpn));
    assert_eq!(why, format!("no QP {:#x}", oa.qp.qpn));
    for state in [QpState::Init, QpState::Rtr, QpState::Err] {
        refused(b.modify_qp(oa.qp.qpn, state, Some(ob.qp.qpn)));
    }
    let faults =
        Request::SetFaults { qpn: oa.qp.qpn, drop_doorbells: 1, fail_wqe: None, stall: true, overflow_cq: false };
    refused(b.raw_call(&faults, &[]));
    refused(b.query_cq(oa.cq.cqn));
    refused(b.create_qp(oa.pd, ob.cq.cqn, ob.cq.cqn, QpCaps::default()));
    refused(b.create_qp(ob.pd, oa.cq.cqn, oa.cq.cqn, QpCaps::default()));
    let mem = Shm::create("b-into-a", 4096).unwrap();
    refused(b.reg_mr(oa.pd, &mem, Access::all()));
    refused(b.dereg_mr(oa.lkey));
    refused(b.destroy_qp(oa.qp.qpn));
    refused(b.destroy_cq(oa.cq.cqn));
    refused(b.dealloc_pd(oa.pd));
    // A PD never allocated is refused too.
    refused(b.reg_mr(0x7777, &mem, Access::all()));
    assert_eq!(a.query_qp(oa.qp.qpn).unwrap().0, QpState::Init, "A's QP untouched");

    // B connects its QP to A's (allowed: that is how clients connect) and
    // writes into A's MR with A's rkey. A's QP is not connected to B's, so
    // as an RC responder it drops the request: B's WQE fails, A's bytes stay.
    oa.buf.region().fill(0, 1 << 16, 0xa5).unwrap();
    b.modify_qp(ob.qp.qpn, QpState::Rtr, Some(oa.qp.qpn)).unwrap();
    b.modify_qp(ob.qp.qpn, QpState::Rts, None).unwrap();
    let mut sq = marrow_driver::SendQueue::new(ob.qp.sq, 64, ob.qp.dbrec, ob.qp.uar, ob.qp.qpn);
    let mut cq = marrow_driver::CqPoller::new(ob.cq.buf, 16, ob.cq.dbrec, marrow_driver::CqMode::Normal);
    ob.buf.region().fill(0, 4096, 0x11).unwrap();
    let sgl = [Sge { addr: ob.buf.region().base_addr() as u64, length: 4096, lkey: ob.lkey }];
    let remote = RemoteAddr { raddr: oa.buf.region().base_addr() as u64, rkey: oa.rkey };
    sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWrite { remote, sgl: &sgl }).unwrap();
    sq.ring().unwrap();
    match wait(&mut cq) {
        Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::TRANSPORT_RETRY_EXC_ERR, "{e:?}"),
        other => panic!("B's WRITE into A's MR: {other:?}"),
    }
    let mut got = vec![0u8; 1 << 16];
    oa.buf.region().read_bytes(0, &mut got).unwrap();
    assert!(got.iter().all(|&x| x == 0xa5), "A's memory changed");

    // A doorbell written on B's UAR page naming A's QP drives nothing.
    let refused_before = d.nic.hca().doorbells_refused();
    let db = marrow_mlx5::doorbell::uar_doorbell_index_qpn(1, oa.qp.qpn).unwrap();
    ob.qp.uar.write_8bytes(marrow_mlx5::raw::MLX5_BF_OFFSET as usize, db).unwrap();
    let t0 = Instant::now();
    while d.nic.hca().doorbells_refused() == refused_before {
        assert!(t0.elapsed() < Duration::from_secs(5), "the stray doorbell was not counted");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(a.query_qp(oa.qp.qpn).unwrap(), (QpState::Init, 0), "A's send queue did not move");
    // B's trace holds B's records only.
    b.enable_trace(1 << 20).unwrap();
    let (recs, _) = marrow_softnic::trace::parse(&b.trace_bytes().unwrap());
    assert!(recs.iter().all(|r| r.qpn == ob.qp.qpn || r.qpn == u32::MAX), "B's trace shows another QP");
}

#[test]
fn keys_do_not_follow_from_one_another() {
    let d = daemon("keys", Options::default());
    let mut c = d.client();
    let pd = c.alloc_pd().unwrap();
    let mem = Shm::create("keys", 4096).unwrap();
    let keys: Vec<u32> = (0..32).map(|_| c.reg_mr(pd, &mem, Access::all()).unwrap().1).collect();
    let variants: std::collections::BTreeSet<u32> = keys.iter().map(|k| k & 0xff).collect();
    // 32 draws of a 7-bit variant all equal: about 1 in 10^66.
    assert!(variants.len() > 1, "every key has variant byte {variants:?}: the next key is the last plus 0x100");
}

#[test]
fn malformed_requests_get_an_error_reply_before_the_connection_closes() {
    let d = daemon("malformed", Options::default());
    // Not JSON.
    let mut s = d.raw();
    s.write_all(&[5, 0, 0, 0]).unwrap();
    s.write_all(b"}}}}}").unwrap();
    match wire::recv::<Reply>(&s).unwrap() {
        Some((Reply::Error(why), _)) => assert!(why.contains("not a message of the protocol"), "{why}"),
        other => panic!("garbage got {other:?}"),
    }
    let mut rest = Vec::new();
    assert_eq!(s.read_to_end(&mut rest).unwrap(), 0, "the connection is closed after the reply");
    // A declared length of 2 GiB: refused, nothing allocated for it.
    let mut s = d.raw();
    s.write_all(&(2u32 << 30).to_le_bytes()).unwrap();
    match wire::recv::<Reply>(&s).unwrap() {
        Some((Reply::Error(why), _)) => assert!(why.contains("more than the protocol's"), "{why}"),
        other => panic!("an oversized message got {other:?}"),
    }
    // No Hello first; a Hello of another version.
    let s = UnixStream::connect(&d.sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    wire::send(&s, &Request::AllocPd, &[]).unwrap();
    match wire::recv::<Reply>(&s).unwrap() {
        Some((Reply::Error(why), _)) => assert!(why.contains("first request must be Hello"), "{why}"),
        other => panic!("{other:?}"),
    }
    let s = UnixStream::connect(&d.sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    wire::send(&s, &Request::Hello { version: 999 }, &[]).unwrap();
    match wire::recv::<Reply>(&s).unwrap() {
        Some((Reply::Error(why), _)) => assert!(why.contains("version 999"), "{why}"),
        other => panic!("{other:?}"),
    }
    // An MR whose range wraps past 2^64.
    let mut c = d.client();
    let pd = c.alloc_pd().unwrap();
    let mem = Shm::create("wrap", 8192).unwrap();
    let req = Request::RegMr { pd, addr: u64::MAX - 4095, len: 8192, access: Access::all().bits() };
    let why = refused(c.raw_call(&req, &[mem.fd().as_raw_fd()]));
    assert!(why.contains("wraps"), "{why}");
    assert!(d.serves(Duration::from_secs(5)));
}

#[test]
fn a_silent_connection_is_closed_after_the_handshake_timeout() {
    let opts = Options { handshake_timeout: Duration::from_millis(200), ..Options::default() };
    let d = daemon("silent", opts);
    let s = UnixStream::connect(&d.sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    match wire::recv::<Reply>(&s).unwrap() {
        Some((Reply::Error(why), _)) => assert!(why.contains("no Hello within"), "{why}"),
        other => panic!("{other:?}"),
    }
}

fn wait(cq: &mut marrow_driver::CqPoller) -> Completion {
    let t0 = Instant::now();
    loop {
        if let Some(c) = cq.poll().unwrap() {
            return c;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no completion in 10 s");
        std::thread::sleep(Duration::from_micros(100));
    }
}
