//! The softnic daemon (`marrow softnic`, a process of its own) under load
//! and attack at once: 8 well-behaved clients create, post to and destroy
//! objects at random, every byte checked, while 2 hostile clients send
//! garbage, try to shrink the daemon's memory, name the others' objects
//! and open hundreds of connections. At the end the daemon is alive and
//! serving, and its resident memory and open descriptors are back near
//! where they started.
//!
//! `MARROW_SOAK_SECS` sets how long the clients run (default 40).

use marrow_driver::{CqMode, CqPoller, SendQueue};
use marrow_mlx5::prelude::*;
use marrow_softnic::client::{Client, RemoteCq, RemoteQp};
use marrow_softnic::wire::{self, Request};
use marrow_softnic::{Access, QpCaps, QpState, Shm};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Daemon {
    child: Child,
    sock: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.sock);
    }
}

fn start() -> Daemon {
    let sock = std::env::temp_dir().join(format!("marrow-soak-{}.sock", std::process::id()));
    let child = Command::new(env!("CARGO_BIN_EXE_marrow"))
        .args(["softnic", "--socket"])
        .arg(&sock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("marrow softnic");
    let t0 = Instant::now();
    while Client::connect(&sock).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(20), "the daemon did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Daemon { child, sock }
}

/// The daemon's resident memory (KiB) and open descriptors.
fn footprint(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0);
    (rss, fds)
}

/// Object numbers good clients hold now, for the hostile ones to aim at.
#[derive(Default)]
struct Seen {
    qpns: Vec<u32>,
    cqns: Vec<u32>,
    pds: Vec<u32>,
    lkeys: Vec<u32>,
}

/// One connected pair of QPs of one good client, with its buffers.
struct Pair {
    buf: Shm,
    lkey: u32,
    rkey: u32,
    qps: [RemoteQp; 2],
    _cqs: [RemoteCq; 2],
    sq: SendQueue,
    scq: CqPoller,
    pd: u32,
}

const LEN: usize = 256 << 10;

fn pair(c: &mut Client) -> Pair {
    let pd = c.alloc_pd().unwrap();
    let buf = Shm::create("soak", 2 * LEN).unwrap();
    let (lkey, rkey) = c.reg_mr(pd, &buf, Access::all()).unwrap();
    let cqs = [c.create_cq(64, false).unwrap(), c.create_cq(64, false).unwrap()];
    let caps = QpCaps { sq_wqebbs: 64, ..QpCaps::default() };
    let qps = [
        c.create_qp(pd, cqs[0].cqn, cqs[0].cqn, caps).unwrap(),
        c.create_qp(pd, cqs[1].cqn, cqs[1].cqn, caps).unwrap(),
    ];
    for (me, peer) in [(0, 1), (1, 0)] {
        c.modify_qp(qps[me].qpn, QpState::Init, None).unwrap();
        c.modify_qp(qps[me].qpn, QpState::Rtr, Some(qps[peer].qpn)).unwrap();
        c.modify_qp(qps[me].qpn, QpState::Rts, None).unwrap();
    }
    let sq = SendQueue::new(qps[0].sq, 64, qps[0].dbrec, qps[0].uar, qps[0].qpn);
    let scq = CqPoller::new(cqs[0].buf, 64, cqs[0].dbrec, CqMode::Normal);
    Pair { buf, lkey, rkey, qps, _cqs: cqs, sq, scq, pd }
}

/// A WRITE from the first half of the buffer into the second, or a READ of
/// the second half into the first, of a random size; the bytes are checked
/// where they arrive.
fn exchange(p: &mut Pair, rng: &mut fastrand::Rng) -> Result<(), String> {
    let r = p.buf.region();
    let base = r.base_addr() as u64;
    let n = rng.usize(1..LEN);
    let seed = rng.u8(..);
    let data: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
    let read = rng.bool();
    // The local half is always the first, the remote the second.
    let (from, to) = if read { (LEN, 0) } else { (0, LEN) };
    r.write_bytes(from, &data).map_err(|e| e.to_string())?;
    let sgl = [Sge { addr: base, length: n as u32, lkey: p.lkey }];
    let remote = RemoteAddr { raddr: base + LEN as u64, rkey: p.rkey };
    let op = if read { WqeOp::RdmaRead { remote, sgl: &sgl } } else { WqeOp::RdmaWrite { remote, sgl: &sgl } };
    p.sq.post(CtrlParams::signaled(0, 0), &op).map_err(|e| e.to_string())?;
    p.sq.ring().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let c = loop {
        if let Some(c) = p.scq.poll().map_err(|e| e.to_string())? {
            break c;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            return Err("no completion in 20 s".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    };
    match c {
        Completion::Requester { wqe_counter, .. } => p.sq.complete_through(wqe_counter, 1),
        other => return Err(format!("{other:?}")),
    }
    let mut got = vec![0u8; n];
    r.read_bytes(to, &mut got).map_err(|e| e.to_string())?;
    if got != data {
        let wrong = got.iter().zip(&data).filter(|(a, b)| a != b).count();
        return Err(format!("{wrong} of {n} bytes wrong after a {}", if read { "READ" } else { "WRITE" }));
    }
    Ok(())
}

fn good_client(sock: &Path, seed: u64, stop: &AtomicBool, seen: &Mutex<Seen>, ops: &AtomicU64) -> Result<(), String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    while !stop.load(Ordering::Relaxed) {
        let mut c = Client::connect(sock).map_err(|e| format!("connect: {e}"))?;
        let mut pairs: Vec<Pair> = Vec::new();
        for _ in 0..rng.usize(5..40) {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            match rng.u8(..10) {
                0 | 1 if pairs.len() < 3 => {
                    let p = pair(&mut c);
                    let mut s = seen.lock().unwrap();
                    s.qpns.extend(p.qps.iter().map(|q| q.qpn));
                    s.pds.push(p.pd);
                    s.lkeys.push(p.lkey);
                    pairs.push(p);
                }
                2 if !pairs.is_empty() => {
                    // Destroy one pair in verbs' order.
                    let p = pairs.swap_remove(rng.usize(..pairs.len()));
                    for q in &p.qps {
                        c.destroy_qp(q.qpn).map_err(|e| format!("destroy_qp: {e}"))?;
                    }
                    for q in &p._cqs {
                        c.destroy_cq(q.cqn).map_err(|e| format!("destroy_cq: {e}"))?;
                    }
                    c.dereg_mr(p.lkey).map_err(|e| format!("dereg_mr: {e}"))?;
                    c.dealloc_pd(p.pd).map_err(|e| format!("dealloc_pd: {e}"))?;
                }
                _ if !pairs.is_empty() => {
                    let i = rng.usize(..pairs.len());
                    exchange(&mut pairs[i], &mut rng)?;
                    ops.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
        let cq = c.create_cq(16, false).map_err(|e| e.to_string())?;
        seen.lock().unwrap().cqns.push(cq.cqn);
        // Half the time, just drop the connection with everything still held.
        if rng.bool() {
            for p in &pairs {
                for q in &p.qps {
                    c.destroy_qp(q.qpn).map_err(|e| format!("destroy_qp: {e}"))?;
                }
            }
        }
    }
    Ok(())
}

/// Garbage, handshakes of other versions, oversized lengths, unsealed
/// memfds and floods of connections.
fn vandal(sock: &Path, seed: u64, stop: &AtomicBool) {
    let mut rng = fastrand::Rng::with_seed(seed);
    while !stop.load(Ordering::Relaxed) {
        match rng.u8(..5) {
            0 => {
                let Ok(mut s) = UnixStream::connect(sock) else { continue };
                let junk: Vec<u8> = (0..rng.usize(..2000)).map(|_| rng.u8(..)).collect();
                let _ = s.write_all(&junk);
            }
            1 => {
                let Ok(s) = UnixStream::connect(sock) else { continue };
                let _ = wire::send(&s, &Request::Hello { version: rng.u32(..) }, &[]);
            }
            2 => {
                let Ok(mut s) = UnixStream::connect(sock) else { continue };
                let _ = s.write_all(&rng.u32(..).to_le_bytes());
            }
            3 => {
                let Ok(mut c) = Client::connect(sock) else { continue };
                let Ok(pd) = c.alloc_pd() else { continue };
                let fd: std::os::fd::OwnedFd =
                    nix::sys::memfd::memfd_create(c"vandal", nix::sys::memfd::MemFdCreateFlag::empty()).unwrap();
                let f = std::fs::File::from(fd);
                f.set_len(1 << 20).unwrap();
                let req = Request::RegMr { pd, addr: 0x10000, len: 1 << 20, access: 0xf };
                assert!(c.raw_call(&req, &[f.as_raw_fd()]).is_err(), "an unsealed memfd was registered");
            }
            _ => {
                // Hundreds of connections at once, then gone.
                let flood: Vec<UnixStream> = (0..300).filter_map(|_| UnixStream::connect(sock).ok()).collect();
                std::thread::sleep(Duration::from_millis(50));
                drop(flood);
            }
        }
    }
}

/// A client that names the others' objects and tries to shrink what the
/// daemon maps; every attempt must be refused.
fn trespasser(sock: &Path, seed: u64, stop: &AtomicBool, seen: &Mutex<Seen>) -> Result<u64, String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut tries = 0;
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut c) = Client::connect(sock) else { continue };
        let cq = c.create_cq(16, false).map_err(|e| e.to_string())?;
        // The CQ's memfd, received from the daemon: shrinking it is refused.
        let f = std::fs::File::from(cq.memfd().try_clone_to_owned().map_err(|e| e.to_string())?);
        if f.set_len(0).is_ok() {
            return Err("a daemon memfd was shrunk".into());
        }
        for _ in 0..50 {
            let (qpn, cqn, pd, lkey) = {
                // Numbers are reused: never aim at this client's own CQ.
                let s = seen.lock().unwrap();
                let pick =
                    |v: &Vec<u32>, rng: &mut fastrand::Rng| if v.is_empty() { 0x100 } else { v[rng.usize(..v.len())] };
                (pick(&s.qpns, &mut rng), pick(&s.cqns, &mut rng), pick(&s.pds, &mut rng), pick(&s.lkeys, &mut rng))
            };
            if cqn == cq.cqn {
                continue;
            }
            let attempts: [Result<(), _>; 7] = [
                c.modify_qp(qpn, QpState::Err, None),
                c.query_qp(qpn).map(|_| ()),
                c.destroy_qp(qpn),
                c.destroy_cq(cqn),
                c.dereg_mr(lkey),
                c.create_qp(pd, cq.cqn, cq.cqn, QpCaps::default()).map(|_| ()),
                c.raw_call(
                    &Request::SetFaults { qpn, drop_doorbells: 0, fail_wqe: None, stall: true, overflow_cq: false },
                    &[],
                )
                .map(|_| ()),
            ];
            for a in attempts {
                tries += 1;
                if a.is_ok() {
                    return Err(format!(
                        "a request on another client's object (QP {qpn:#x}, CQ {cqn:#x}, PD {pd:#x}, lkey {lkey:#x}) was carried out"
                    ));
                }
            }
        }
    }
    Ok(tries)
}

#[test]
fn the_daemon_survives_eight_good_clients_and_two_hostile_ones() {
    let secs: u64 = std::env::var("MARROW_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(40);
    let d = start();
    let pid = d.child.id();
    // Warm: one client's objects made and gone, so the allocator's arenas exist.
    {
        let mut c = Client::connect(&d.sock).unwrap();
        let mut p = pair(&mut c);
        exchange(&mut p, &mut fastrand::Rng::with_seed(1)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let (rss0, fds0) = footprint(pid);
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let ops = Arc::new(AtomicU64::new(0));
    let mut good = Vec::new();
    for i in 0..8 {
        let (sock, stop, seen, ops) = (d.sock.clone(), stop.clone(), seen.clone(), ops.clone());
        good.push(std::thread::spawn(move || good_client(&sock, 100 + i, &stop, &seen, &ops)));
    }
    let v = {
        let (sock, stop) = (d.sock.clone(), stop.clone());
        std::thread::spawn(move || vandal(&sock, 7, &stop))
    };
    let t = {
        let (sock, stop, seen) = (d.sock.clone(), stop.clone(), seen.clone());
        std::thread::spawn(move || trespasser(&sock, 9, &stop, &seen))
    };
    let t0 = Instant::now();
    let mut peak = (rss0, fds0);
    while t0.elapsed() < Duration::from_secs(secs) {
        std::thread::sleep(Duration::from_millis(500));
        let f = footprint(pid);
        peak = (peak.0.max(f.0), peak.1.max(f.1));
        assert!(d.child.id() == pid && std::path::Path::new(&format!("/proc/{pid}")).exists(), "the daemon died");
    }
    stop.store(true, Ordering::Relaxed);
    for g in good {
        g.join().unwrap().expect("a good client failed");
    }
    v.join().unwrap();
    let tries = t.join().unwrap().expect("the trespasser got through");
    // Sessions end as their threads see the connections close.
    let mut after = footprint(pid);
    let t1 = Instant::now();
    while (after.1 > fds0 + 2 || after.0 > rss0 + 24 * 1024) && t1.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        after = footprint(pid);
    }
    let n = ops.load(Ordering::Relaxed);
    eprintln!(
        "soak: {secs} s, {n} checked WRITEs and READs, {tries} trespasses refused; daemon RSS {rss0} KiB at start, peak {} KiB, {} KiB after; fds {fds0} at start, peak {}, {} after",
        peak.0, after.0, peak.1, after.1
    );
    assert!(n > 100, "only {n} operations in {secs} s");
    assert!(after.1 <= fds0 + 2, "descriptors: {fds0} at start, {} after", after.1);
    assert!(after.0 <= rss0 + 24 * 1024, "resident memory: {rss0} KiB at start, {} KiB after", after.0);
    let mut c = Client::connect(&d.sock).expect("the daemon serves after the soak");
    c.alloc_pd().unwrap();
}
