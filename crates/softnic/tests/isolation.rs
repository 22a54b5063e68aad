//! Memory isolation under random and mangled WQEs: whatever a send queue
//! holds, the model touches no byte outside a registered MR.
//!
//! One buffer is poisoned with 0xA5; three MRs lie inside it (the
//! requester's local MR, the responder's remote MR, and an MR of a third
//! PD), with poisoned gaps around and between them. The local MR is host
//! memory; the other two are device memory whose copy engine
//! ([`Window`]) reaches the whole buffer, as a GPU's reaches all of its
//! memory: only the model's own key and bounds checks keep their bytes in
//! the MR. Each step builds a WQE
//! of a random operation whose addresses, lengths and keys land anywhere
//! (inside an MR, across its edges, in the gaps, past the buffer; the right
//! key, another MR's, a made-up one), mangles a third of them byte by byte
//! after building, posts it raw, rings, and drives the engine by hand until
//! a CQE comes or the QP stops. A QP in ERR is reset and reconnected. Every
//! byte outside the MRs is checked at the end, and every 10^4 steps.
//!
//! `MARROW_ISOLATION_WQES` sets the number of WQEs (default 2 × 10^5).

use marrow_driver::{CqMode, CqPoller, RecvQueue, SendQueue};
use marrow_mlx5::prelude::*;
use marrow_mlx5::wqe::build_wqe;
use marrow_softnic::{Access, CqMode as NicCqMode, ModifyQp, Pd, QpCaps, QpState, Shm, SoftNic};

const POISON: u8 = 0xa5;
const BUF: usize = 1 << 20;
/// The MRs: (offset in the buffer, length, PD index, access).
const MRS: [(usize, usize, usize); 3] = [(0x1_0000, 0x1_0000, 0), (0x4_0000, 0x1_0000, 1), (0x8_0000, 0x8000, 2)];
const SQ: u32 = 64;

/// Device memory for an MR at `off` of the poisoned buffer: its copies are
/// bounded by the whole buffer only, not by the MR, like a copy engine.
#[derive(Debug)]
struct Window {
    buf: marrow_mmio::Region,
    off: usize,
    len: usize,
}

impl marrow_softnic::DeviceMemory for Window {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, at: usize, out: &mut [u8]) -> Result<(), String> {
        self.buf.read_bytes(self.off + at, out).map_err(|e| e.to_string())
    }
    fn write(&self, at: usize, data: &[u8]) -> Result<(), String> {
        self.buf.write_bytes(self.off + at, data).map_err(|e| e.to_string())
    }
}

/// How a WQE ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// The builder refused the operation (the only step not posted).
    NotBuilt,
    /// A success CQE.
    Done,
    /// An error CQE.
    Failed,
    /// No CQE (a mangled byte asked for none, or made the WQE incomplete).
    Silent,
}

/// An address and rkey inside the responder's MR.
fn s_valid_remote(r: &Rig, rng: &mut fastrand::Rng) -> (u64, u32, (u32, u32)) {
    r.valid(rng, 1, 4096)
}

struct Rig {
    nic: SoftNic,
    buf: Shm,
    keys: Vec<(u32, u32)>,
    a: u32,
    b: u32,
    sq: SendQueue,
    scq: CqPoller,
    rq: RecvQueue,
    rcq: CqPoller,
}

fn connect(nic: &SoftNic, a: u32, b: u32) {
    let mut hca = nic.hca();
    for (q, peer) in [(a, b), (b, a)] {
        hca.modify_qp(q, ModifyQp::to(QpState::Reset)).unwrap();
        hca.modify_qp(q, ModifyQp::to(QpState::Init)).unwrap();
        hca.modify_qp(q, ModifyQp::rtr(peer)).unwrap();
        hca.modify_qp(q, ModifyQp::to(QpState::Rts)).unwrap();
    }
}

fn rig() -> Rig {
    let nic = SoftNic::new();
    let buf = Shm::create("isolation", BUF).unwrap();
    buf.region().fill(0, BUF, POISON).unwrap();
    let (a, b, sq, scq, rq, rcq, keys) = {
        let mut hca = nic.hca();
        let pds: Vec<Pd> = (0..3).map(|_| hca.alloc_pd()).collect();
        let base = buf.region().base_addr() as u64;
        let keys = MRS
            .iter()
            .map(|&(off, len, pd)| {
                let addr = base + off as u64;
                if pd == 0 {
                    hca.reg_mr(pds[pd], addr, buf.region().sub(off, len).unwrap(), Access::all())
                } else {
                    let w = std::sync::Arc::new(Window { buf: buf.region(), off, len });
                    hca.reg_device_mr(pds[pd], addr, w, Access::all())
                }
            })
            .collect();
        let cq_a = hca.create_cq(256, NicCqMode::Normal).unwrap();
        let cq_b = hca.create_cq(256, NicCqMode::Normal).unwrap();
        let caps = QpCaps { sq_wqebbs: SQ, rq_wqes: 64, ..QpCaps::default() };
        let a = hca.create_qp(pds[0], cq_a, cq_a, caps).unwrap();
        let b = hca.create_qp(pds[1], cq_b, cq_b, caps).unwrap();
        let (qa, qb) = (hca.qp(a).unwrap(), hca.qp(b).unwrap());
        let sq = SendQueue::new(qa.mem.sq, SQ, qa.mem.dbrec, qa.mem.uar, a);
        let rq = RecvQueue::new(qb.mem.rq, 64, caps.rq_stride as usize, qb.mem.dbrec);
        let (ca, cb) = (hca.cq(cq_a).unwrap(), hca.cq(cq_b).unwrap());
        let scq = CqPoller::new(ca.buf, ca.ncqe, ca.dbrec, CqMode::Normal);
        let rcq = CqPoller::new(cb.buf, cb.ncqe, cb.dbrec, CqMode::Normal);
        (a, b, sq, scq, rq, rcq, keys)
    };
    connect(&nic, a, b);
    Rig { nic, buf, keys, a, b, sq, scq, rq, rcq }
}

impl Rig {
    fn addr(&self, rng: &mut fastrand::Rng) -> u64 {
        let base = self.buf.region().base_addr() as u64;
        match rng.u8(..8) {
            // Inside, or across an edge of, an MR.
            0..=4 => {
                let (off, len, _) = MRS[rng.usize(..MRS.len())];
                let edge = rng.i64(-256..256);
                let at = if rng.bool() { off as i64 + edge } else { (off + len) as i64 + edge };
                let inside = off as i64 + rng.i64(0..len as i64);
                base.wrapping_add_signed(if rng.bool() { at } else { inside })
            }
            // Anywhere in the buffer (mostly the poisoned gaps).
            5 | 6 => base + rng.u64(..BUF as u64),
            // Anywhere at all.
            _ => rng.u64(..),
        }
    }

    fn key(&self, rng: &mut fastrand::Rng, remote: bool) -> u32 {
        let (l, r) = self.keys[rng.usize(..self.keys.len())];
        match rng.u8(..6) {
            0..=3 => {
                if remote {
                    r
                } else {
                    l
                }
            }
            4 => l ^ r ^ rng.u32(..0x100),
            _ => rng.u32(..),
        }
    }

    fn len(rng: &mut fastrand::Rng) -> u32 {
        match rng.u8(..4) {
            0 => rng.u32(..64),
            1 => rng.u32(..0x2_0000),
            2 => 8,
            _ => rng.u32(..),
        }
    }

    /// An address, length and key inside MR `k` (what a correct caller posts).
    fn valid(&self, rng: &mut fastrand::Rng, k: usize, max: u32) -> (u64, u32, (u32, u32)) {
        let (off, len, _) = MRS[k];
        let n = rng.u32(..max.min(len as u32) + 1);
        let at = off + rng.usize(..=len - n as usize);
        (self.buf.region().base_addr() as u64 + at as u64, n, self.keys[k])
    }

    /// One random, possibly mangled, WQE posted and driven to its end;
    /// whether it completed successfully.
    fn step(&mut self, rng: &mut fastrand::Rng) -> Outcome {
        // Half the WQEs are what a correct caller would post (a local MR of
        // the requester's PD, a remote MR of the responder's), so that much
        // of the traffic reaches memory; the rest aim anywhere.
        let good = rng.bool();
        let sge = |s: &Rig, rng: &mut fastrand::Rng| match good {
            true => {
                let (addr, length, (lkey, _)) = s.valid(rng, 0, 4096);
                Sge { addr, length, lkey }
            }
            false => Sge { addr: s.addr(rng), length: Rig::len(rng), lkey: s.key(rng, false) },
        };
        let remote = match good {
            true => {
                let (raddr, _, (_, rkey)) = s_valid_remote(self, rng);
                RemoteAddr { raddr: raddr & !7, rkey }
            }
            false => RemoteAddr { raddr: self.addr(rng), rkey: self.key(rng, true) },
        };
        let sgl: Vec<Sge> = (0..rng.usize(1..4)).map(|_| sge(self, rng)).collect();
        let local = Sge { length: 8, addr: sge(self, rng).addr & !7, ..sge(self, rng) };
        let inline = vec![0x5a; rng.usize(..200)];
        let op = match rng.u8(..9) {
            0 => WqeOp::RdmaWrite { remote, sgl: &sgl },
            1 => WqeOp::RdmaWriteImm { remote, sgl: &sgl, imm: rng.u32(..) },
            2 => WqeOp::RdmaWriteInline { remote, data: &inline },
            3 => WqeOp::Send { sgl: &sgl },
            4 => WqeOp::SendInline { data: &inline },
            5 => WqeOp::RdmaRead { remote, sgl: &sgl },
            6 => WqeOp::AtomicCs { remote, local, compare: rng.u64(..), swap: rng.u64(..) },
            7 => WqeOp::AtomicFa { remote, local, add: rng.u64(..) },
            _ => WqeOp::MaskedFa64 { remote, local, add: rng.u64(..), field_boundary: rng.u64(..) },
        };
        let ctrl = CtrlParams { wqe_index: self.sq.pi() as u16, qpn: self.a, ..CtrlParams::signaled(0, 0) };
        let mut wqe = [0u8; 16 * 64];
        let Ok(built) = build_wqe(&ctrl, &op, &mut wqe) else { return Outcome::NotBuilt };
        let n = built.len();
        if rng.u8(..3) == 0 {
            for _ in 0..rng.usize(1..5) {
                wqe[rng.usize(..n)] ^= 1 << rng.u8(..8);
            }
        }
        // Receives for SENDs, with scatter lists as random as the rest.
        if rng.u8(..4) == 0 {
            let rsgl = [sge(self, rng)];
            let _ = self.rq.post(&rsgl);
        }
        if self.sq.post_raw(&wqe[..n.div_ceil(64) * 64]).is_err() {
            self.reset();
            return Outcome::Silent;
        }
        let _ = self.sq.ring();
        let mut outcome = Outcome::Silent;
        for _ in 0..64 {
            self.nic.scan();
            let got = self.scq.poll().ok().flatten();
            while let Ok(Some(_)) = self.rcq.poll() {}
            if let Some(c) = got {
                outcome = if matches!(c, Completion::Error(_)) { Outcome::Failed } else { Outcome::Done };
                break;
            }
        }
        let stuck = {
            let hca = self.nic.hca();
            [self.a, self.b].iter().any(|q| hca.qp(*q).map(|q| q.state).ok() != Some(QpState::Rts))
        };
        // A WQE that errored, or that a mangled byte made silent or
        // incomplete: start the pair again.
        if stuck || self.sq.free() < 16 {
            self.reset();
        }
        outcome
    }

    fn reset(&mut self) {
        connect(&self.nic, self.a, self.b);
        let hca = self.nic.hca();
        let (qa, qb) = (hca.qp(self.a).unwrap(), hca.qp(self.b).unwrap());
        self.sq = SendQueue::new(qa.mem.sq, SQ, qa.mem.dbrec, qa.mem.uar, self.a);
        self.rq = RecvQueue::new(qb.mem.rq, 64, qb.caps.rq_stride as usize, qb.mem.dbrec);
        drop(hca);
        while let Ok(Some(_)) = self.scq.poll() {}
        while let Ok(Some(_)) = self.rcq.poll() {}
    }

    /// The first byte outside every MR that is not poison, if any.
    fn touched(&self) -> Option<usize> {
        let mut all = vec![0u8; BUF];
        self.buf.region().read_bytes(0, &mut all).unwrap();
        let inside = |i: usize| MRS.iter().any(|&(off, len, _)| (off..off + len).contains(&i));
        all.iter().enumerate().position(|(i, &x)| x != POISON && !inside(i))
    }
}

#[test]
fn random_and_mangled_wqes_touch_no_byte_outside_an_mr() {
    let wqes: usize = std::env::var("MARROW_ISOLATION_WQES").ok().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let seed = std::env::var("MARROW_ISOLATION_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x150_1a7e);
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut r = rig();
    let mut count = std::collections::BTreeMap::<&str, u64>::new();
    for i in 0..wqes {
        let o = r.step(&mut rng);
        *count.entry(format!("{o:?}").leak()).or_default() += 1;
        if i % 10_000 == 9_999 {
            assert_eq!(r.touched(), None, "a byte outside the MRs changed by step {i} (seed {seed:#x})");
        }
    }
    assert_eq!(r.touched(), None, "a byte outside the MRs changed (seed {seed:#x})");
    // The run must have reached the memory: some WQEs succeeded, and the
    // MRs were written.
    let mut mr = vec![0u8; MRS[1].1];
    r.buf.region().read_bytes(MRS[1].0, &mut mr).unwrap();
    assert!(mr.iter().any(|&x| x != POISON), "no WQE ever wrote the remote MR");
    let done = count.get("Done").copied().unwrap_or(0);
    assert!(done > wqes as u64 / 20, "only {done} of {wqes} WQEs succeeded: {count:?}");
    eprintln!("isolation: {wqes} WQEs, seed {seed:#x}: {count:?}");
}
