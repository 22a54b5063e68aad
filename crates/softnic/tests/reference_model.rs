//! Random sequences of valid and invalid WQEs, run on the softnic and on an
//! independent reference model written here from the verbs rules (not from
//! the softnic's code): no byte outside a memory region changes, every
//! signaled WQE completes exactly once and in order, data matches, and the
//! first error is followed by flushes only.

use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Pair, PairConfig, Side};
use marrow_softnic::{Access, Shm};
use proptest::prelude::*;
use std::time::Duration;

const PAGE: usize = 4096;

#[derive(Clone, Debug)]
enum Op {
    Write { src: usize, dst: isize, len: usize, bad_rkey: bool, bad_lkey: bool },
    Read { dst: usize, src: isize, len: usize },
    Fa { at: isize, add: u64 },
    Cs { at: isize, compare_hit: bool, swap: u64 },
    Nop,
}

fn op() -> impl Strategy<Value = Op> {
    // Target offsets relative to the start of the registered page, reaching
    // 64 bytes to either side of it.
    let off = -64isize..(PAGE as isize + 64);
    prop_oneof![
        4 => (0usize..1024, off.clone(), 1usize..300, prop::bool::weighted(0.05), prop::bool::weighted(0.05))
            .prop_map(|(src, dst, len, bad_rkey, bad_lkey)| Op::Write { src, dst, len, bad_rkey, bad_lkey }),
        2 => (0usize..1024, off.clone(), 1usize..300).prop_map(|(dst, src, len)| Op::Read { dst, src, len }),
        2 => (off.clone(), any::<u64>()).prop_map(|(at, add)| Op::Fa { at: at & !3, add }),
        1 => (off, any::<bool>(), any::<u64>()).prop_map(|(at, compare_hit, swap)| Op::Cs { at: at & !7, compare_hit, swap }),
        1 => Just(Op::Nop),
    ]
}

/// What the reference expects of one WQE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Ok(WqeOpcode),
    Err(Syndrome),
}

struct Reference {
    /// Guard page, registered page, guard page.
    target: Vec<u8>,
    /// The requester's local buffer (first 2 KiB used).
    local: Vec<u8>,
    failed: bool,
}

impl Reference {
    fn in_mr(at: isize, len: usize) -> Option<usize> {
        (at >= 0 && at as usize + len <= PAGE).then(|| PAGE + at as usize)
    }

    fn step(&mut self, op: &Op, operand_now: impl Fn(&[u8], usize) -> u64) -> Expect {
        if self.failed {
            return Expect::Err(Syndrome::WR_FLUSH_ERR);
        }
        let e = match *op {
            Op::Nop => Expect::Ok(WqeOpcode::NOP),
            Op::Write { src, dst, len, bad_rkey, bad_lkey } => {
                if bad_lkey {
                    Expect::Err(Syndrome::LOCAL_PROT_ERR)
                } else if bad_rkey {
                    Expect::Err(Syndrome::REMOTE_ACCESS_ERR)
                } else if let Some(t) = Self::in_mr(dst, len) {
                    self.target[t..t + len].copy_from_slice(&self.local[src..src + len]);
                    Expect::Ok(WqeOpcode::RDMA_WRITE)
                } else {
                    Expect::Err(Syndrome::REMOTE_ACCESS_ERR)
                }
            }
            Op::Read { dst, src, len } => match Self::in_mr(src, len) {
                Some(t) => {
                    self.local[dst..dst + len].copy_from_slice(&self.target[t..t + len]);
                    Expect::Ok(WqeOpcode::RDMA_READ)
                }
                None => Expect::Err(Syndrome::REMOTE_ACCESS_ERR),
            },
            Op::Fa { at, add } => {
                if at % 8 != 0 {
                    Expect::Err(Syndrome::REMOTE_INVAL_REQ_ERR)
                } else if let Some(t) = Self::in_mr(at, 8) {
                    let old = operand_now(&self.target, t);
                    self.target[t..t + 8].copy_from_slice(&old.wrapping_add(add).to_ne_bytes());
                    self.local[2048..2056].copy_from_slice(&old.to_ne_bytes());
                    Expect::Ok(WqeOpcode::ATOMIC_FA)
                } else {
                    Expect::Err(Syndrome::REMOTE_ACCESS_ERR)
                }
            }
            Op::Cs { at, compare_hit, swap } => match Self::in_mr(at, 8) {
                Some(t) => {
                    let old = operand_now(&self.target, t);
                    if compare_hit {
                        self.target[t..t + 8].copy_from_slice(&swap.to_ne_bytes());
                    }
                    self.local[2048..2056].copy_from_slice(&old.to_ne_bytes());
                    Expect::Ok(WqeOpcode::ATOMIC_CS)
                }
                None => Expect::Err(Syndrome::REMOTE_ACCESS_ERR),
            },
        };
        if matches!(e, Expect::Err(_)) {
            self.failed = true;
        }
        e
    }
}

fn u64_at(b: &[u8], t: usize) -> u64 {
    u64::from_ne_bytes(b[t..t + 8].try_into().unwrap())
}

fn run(ops: &[Op], seed: u8) -> Result<(), TestCaseError> {
    let mut p =
        Pair::unstarted(PairConfig { sq_wqebbs: 128, ncqe: 128, buf_len: 1 << 16, ..PairConfig::default() }).unwrap();
    // Three pages; only the middle one is registered, with every right.
    let shm = Shm::create("target", 3 * PAGE).unwrap();
    let whole = shm.region();
    let initial: Vec<u8> = (0..3 * PAGE).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)).collect();
    whole.write_bytes(0, &initial).unwrap();
    let page = whole.sub(PAGE, PAGE).unwrap();
    let page_addr = page.base_addr() as u64;
    let (_, rkey) = {
        let mut hca = p.nic.hca();
        let pd = hca.qp(p.b.qpn).unwrap().pd;
        hca.reg_mr(pd, page_addr, page, Access::all())
    };
    let local_init: Vec<u8> = (0..4096).map(|i| (i as u8) ^ seed).collect();
    p.a.buf.write_bytes(0, &local_init).unwrap();

    let mut reference = Reference { target: initial, local: local_init, failed: false };
    let (lkey, laddr) = (p.a.lkey, p.a.addr);
    let raddr = |at: isize| (page_addr as i64 + at as i64) as u64;
    let mut expected = Vec::new();
    for o in ops {
        let wqe = match *o {
            Op::Nop => WqeOp::Nop,
            Op::Write { src, dst, len, bad_rkey, bad_lkey } => {
                let sgl = [Sge {
                    addr: laddr + src as u64,
                    length: len as u32,
                    lkey: if bad_lkey { lkey ^ 0x100 } else { lkey },
                }];
                let remote = RemoteAddr { raddr: raddr(dst), rkey: if bad_rkey { rkey ^ 0x300 } else { rkey } };
                p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::RdmaWrite { remote, sgl: &sgl }).unwrap();
                expected.push(reference.step(o, u64_at));
                continue;
            }
            Op::Read { dst, src, len } => {
                let sgl = [Sge { addr: laddr + dst as u64, length: len as u32, lkey }];
                p.a.sq
                    .post(
                        CtrlParams::signaled(0, 0),
                        &WqeOp::RdmaRead { remote: RemoteAddr { raddr: raddr(src), rkey }, sgl: &sgl },
                    )
                    .unwrap();
                expected.push(reference.step(o, u64_at));
                continue;
            }
            Op::Fa { at, add } => WqeOp::AtomicFa {
                remote: RemoteAddr { raddr: raddr(at), rkey },
                local: Sge { addr: laddr + 2048, length: 8, lkey },
                add,
            },
            Op::Cs { at, compare_hit, swap } => {
                // The compare value is what the reference holds now (a hit) or its complement.
                let now = Reference::in_mr(at, 8).map(|t| u64_at(&reference.target, t)).unwrap_or(0);
                let compare = if compare_hit { now } else { !now };
                WqeOp::AtomicCs {
                    remote: RemoteAddr { raddr: raddr(at), rkey },
                    local: Sge { addr: laddr + 2048, length: 8, lkey },
                    compare,
                    swap,
                }
            }
        };
        p.a.sq.post(CtrlParams::signaled(0, 0), &wqe).unwrap();
        expected.push(reference.step(o, u64_at));
    }
    p.a.sq.ring().unwrap();

    for (i, want) in expected.iter().enumerate() {
        let c = p.wait(Side::A, false, Duration::from_secs(5)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(c.wqe_counter(), i as u16, "completions in order, exactly once");
        let got = match c {
            Completion::Requester { wqe_opcode, .. } => Expect::Ok(wqe_opcode),
            Completion::Error(e) => Expect::Err(e.syndrome),
            other => return Err(TestCaseError::fail(format!("unexpected {other:?}"))),
        };
        prop_assert_eq!(got, *want, "WQE {} ({:?})", i, ops[i]);
    }
    // Nothing more arrives.
    prop_assert!(p.wait(Side::A, false, Duration::from_millis(5)).is_err());
    let mut target = vec![0u8; 3 * PAGE];
    whole.read_bytes(0, &mut target).unwrap();
    prop_assert!(target[..PAGE] == reference.target[..PAGE], "guard page before the MR changed");
    prop_assert!(target[2 * PAGE..] == reference.target[2 * PAGE..], "guard page after the MR changed");
    prop_assert!(target == reference.target, "registered page differs from the reference");
    let mut local = vec![0u8; 4096];
    p.a.buf.read_bytes(0, &mut local).unwrap();
    prop_assert!(local == reference.local, "requester buffer differs from the reference");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    #[test]
    fn softnic_matches_the_reference_model(ops in prop::collection::vec(op(), 1..60), seed in any::<u8>()) {
        run(&ops, seed)?;
    }
}
