//! marrow as perftest's client: the bandwidth tests' window of WQEs, and
//! the latency tests' ping-pong, each result checked where marrow can see it.

use super::side::{Side, fill_random, offset};
use super::wire::Keys;
use super::{BAD_RKEY_FLIP, Test, WINDOW};
use crate::InteropError;
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::prelude::*;
use std::time::Instant;

/// marrow as client: post the test's operations against the guest's buffer.
pub(super) fn run_client(s: &mut Side<'_>, peer: &Keys) -> Result<(usize, String), InteropError> {
    let (size, iters) = (s.opts.size, s.opts.iters);
    // Flip the key's index bits, keep its variant: an rkey no MR has.
    let rkey = if s.opts.bad_rkey { peer.rkey ^ BAD_RKEY_FLIP } else { peer.rkey };
    if s.opts.bad_rkey {
        let remote = RemoteAddr { raddr: peer.vaddr, rkey };
        let sgl = [Sge { addr: s.ep.addr, length: size as u32, lkey: s.ep.lkey }];
        s.post(&WqeOp::RdmaWrite { remote, sgl: &sgl })?;
        return match s.host.wait(&mut s.ep, false, s.opts.timeout, "the write with a wrong rkey")? {
            Completion::Error(e) if e.syndrome == Syndrome::REMOTE_ACCESS_ERR => Ok((
                1,
                format!(
                    "RDMA_WRITE with rkey {rkey:#x} (rxe's is {:#x}) ended in an error CQE, syndrome {:#04x} \
                     (REMOTE_ACCESS_ERR), vendor syndrome {:#04x}",
                    peer.rkey, e.syndrome.0, e.vendor_err_synd
                ),
            )),
            other => {
                Err(InteropError::Completion(format!("a wrong rkey must give REMOTE_ACCESS_ERR (0x13); got {other:?}")))
            }
        };
    }
    match s.opts.test {
        Test::WriteLat | Test::ReadLat => {
            Err(InteropError::Setup("the latency tests run their own loops (write_lat, read_lat)".into()))
        }
        Test::WriteBw | Test::ReadBw => {
            let read = s.opts.test == Test::ReadBw;
            let src = fill_random(s.lay.half, u64::from(s.me.psn));
            s.ep.buf.write_bytes(0, &src).map_err(|e| InteropError::Setup(e.to_string()))?;
            let mut inflight = std::collections::VecDeque::new();
            let mut first: std::collections::HashMap<usize, Vec<u8>> = std::collections::HashMap::new();
            for i in 0..iters + WINDOW {
                if i < iters {
                    let off = offset(size, i);
                    let remote = RemoteAddr { raddr: peer.vaddr + off as u64, rkey };
                    let sgl = [Sge { addr: s.ep.addr + off as u64, length: size as u32, lkey: s.ep.lkey }];
                    let op = if read {
                        WqeOp::RdmaRead { remote, sgl: &sgl }
                    } else {
                        WqeOp::RdmaWrite { remote, sgl: &sgl }
                    };
                    inflight.push_back((i, off, s.post(&op)?));
                }
                if inflight.len() >= WINDOW || (i >= iters && !inflight.is_empty()) {
                    let (n, off, (index, bbs)) = inflight.pop_front().expect("not empty");
                    let opcode = if read { WqeOpcode::RDMA_READ } else { WqeOpcode::RDMA_WRITE };
                    s.complete(index, bbs, opcode, n)?;
                    if read {
                        // Later reads into the same bytes may land after this
                        // completion: compare only once nothing else targets them.
                        let got = s.read(off, size)?;
                        if let Some(want) = first.get(&off) {
                            if inflight.iter().all(|(_, o, _)| *o != off) && &got != want {
                                return Err(InteropError::Mismatch(format!(
                                    "READ {n} of the guest's bytes at +{off:#x} differs from the first READ of them"
                                )));
                            }
                        } else if inflight.iter().all(|(_, o, _)| *o != off) {
                            first.insert(off, got);
                        }
                    }
                }
            }
            Ok((
                iters,
                if read {
                    format!("{iters} RDMA_READs of {size} B, every re-read of the same guest bytes identical")
                } else {
                    format!("{iters} RDMA_WRITEs of {size} B completed")
                },
            ))
        }
        Test::SendBw => {
            let src = fill_random(size, 7);
            s.ep.buf.write_bytes(0, &src).map_err(|e| InteropError::Setup(e.to_string()))?;
            let mut inflight = std::collections::VecDeque::new();
            for i in 0..iters + WINDOW {
                if i < iters {
                    let sgl = [Sge { addr: s.ep.addr, length: size as u32, lkey: s.ep.lkey }];
                    inflight.push_back((i, s.post(&WqeOp::Send { sgl: &sgl })?));
                }
                if inflight.len() >= WINDOW || (i >= iters && !inflight.is_empty()) {
                    let (n, (index, bbs)) = inflight.pop_front().expect("not empty");
                    s.complete(index, bbs, WqeOpcode::SEND, n)?;
                }
            }
            Ok((iters, format!("{iters} SENDs of {size} B completed")))
        }
        Test::AtomicFa => {
            // One address: RC executes in order, so the fetched values are a chain.
            let remote = RemoteAddr { raddr: peer.vaddr, rkey };
            let mut inflight = std::collections::VecDeque::new();
            let mut prev: Option<u64> = None;
            for i in 0..iters + WINDOW {
                if i < iters {
                    let slot = 8 * (i % WINDOW);
                    let local = Sge { addr: s.ep.addr + slot as u64, length: 8, lkey: s.ep.lkey };
                    inflight.push_back((i, slot, s.post(&WqeOp::AtomicFa { remote, local, add: 1 })?));
                }
                if inflight.len() >= WINDOW || (i >= iters && !inflight.is_empty()) {
                    let (n, slot, (index, bbs)) = inflight.pop_front().expect("not empty");
                    s.complete(index, bbs, WqeOpcode::ATOMIC_FA, n)?;
                    let got = s.u64_at(slot)?;
                    if let Some(p) = prev.filter(|p| p.wrapping_add(1) != got) {
                        return Err(InteropError::Mismatch(format!("FETCH_ADD {n} fetched {got:#x} after {p:#x}")));
                    }
                    prev = Some(got);
                }
            }
            Ok((
                iters,
                format!("{iters} FETCH_ADDs of 1, the fetched values one chain ending at {:#x}", prev.unwrap_or(0)),
            ))
        }
        Test::AtomicCs => {
            // One at a time: each compares with the value the last one left.
            let remote = RemoteAddr { raddr: peer.vaddr, rkey };
            let local = Sge { addr: s.ep.addr, length: 8, lkey: s.ep.lkey };
            let mut expect: Option<u64> = None;
            for i in 0..iters {
                let (compare, swap) = match expect {
                    None => (0, 0),
                    Some(v) => (v, v.wrapping_add(1)),
                };
                let (index, bbs) = s.post(&WqeOp::AtomicCs { remote, local, compare, swap })?;
                s.complete(index, bbs, WqeOpcode::ATOMIC_CS, i)?;
                let got = s.u64_at(0)?;
                if let Some(v) = expect.filter(|v| *v != got) {
                    return Err(InteropError::Mismatch(format!(
                        "CMP_AND_SWAP {i} fetched {got:#x}, the last swap left {v:#x}"
                    )));
                }
                expect = Some(if i == 0 || got != compare { got } else { swap });
            }
            Ok((iters, format!("{iters} CMP_AND_SWAPs, each swapping the value the last one left")))
        }
    }
}

/// `ib_write_lat`'s ping-pong (`run_iter_lat_write`): each side writes
/// its `size` bytes into the other's target with a counter in the last
/// byte, and waits for the peer's counter to reach the next value in the
/// last byte of its own target. The server writes first. The tool zeroes
/// its buffer, so each arrival must be zeros and the counter.
pub(super) fn write_lat(s: &mut Side<'_>, peer: &Keys, server: bool) -> Result<(usize, String), InteropError> {
    let (size, iters, t) = (s.opts.size, s.opts.iters, s.lay.target());
    s.ep.buf.fill(0, s.lay.len(), 0).map_err(|e| InteropError::Setup(e.to_string()))?;
    let remote = RemoteAddr { raddr: peer.vaddr, rkey: peer.rkey };
    let sgl = [Sge { addr: s.ep.addr, length: size as u32, lkey: s.ep.lkey }];
    let mut rcnt = 0u8;
    for scnt in 1..=iters {
        if !(server && scnt == 1) {
            rcnt = rcnt.wrapping_add(1);
            let t0 = Instant::now();
            while s.read(t + size - 1, 1)?[0] != rcnt {
                if t0.elapsed() > s.opts.timeout {
                    return Err(InteropError::Timeout(format!(
                        "ping {scnt}: the guest's write with counter {rcnt} did not arrive in {:?}",
                        s.opts.timeout
                    )));
                }
                std::hint::spin_loop();
            }
            let got = s.read(t, size)?;
            if got[..size - 1].iter().any(|&b| b != 0) {
                return Err(InteropError::Mismatch(format!("ping {scnt}: the guest's zeros arrived changed")));
            }
        }
        s.ep.buf.write_bytes(size - 1, &[scnt as u8]).map_err(|e| InteropError::Setup(e.to_string()))?;
        let (index, bbs) = s.post(&WqeOp::RdmaWrite { remote, sgl: &sgl })?;
        s.complete(index, bbs, WqeOpcode::RDMA_WRITE, scnt)?;
    }
    if server {
        // The server's last turn: the client's final write.
        rcnt = rcnt.wrapping_add(1);
        let t0 = Instant::now();
        while s.read(t + size - 1, 1)?[0] != rcnt {
            if t0.elapsed() > s.opts.timeout {
                return Err(InteropError::Timeout("the guest's last write did not arrive".into()));
            }
            std::hint::spin_loop();
        }
    }
    Ok((iters, format!("{iters} round trips of {size} B, every arrival the guest's zeros and the next counter")))
}

/// `ib_read_lat`'s client: one RDMA READ of the same bytes at a time;
/// every read must return what the first did.
pub(super) fn read_lat(s: &mut Side<'_>, peer: &Keys) -> Result<(usize, String), InteropError> {
    let (size, iters) = (s.opts.size, s.opts.iters);
    let remote = RemoteAddr { raddr: peer.vaddr, rkey: peer.rkey };
    let sgl = [Sge { addr: s.ep.addr, length: size as u32, lkey: s.ep.lkey }];
    let mut first: Option<Vec<u8>> = None;
    for i in 0..iters {
        let (index, bbs) = s.post(&WqeOp::RdmaRead { remote, sgl: &sgl })?;
        s.complete(index, bbs, WqeOpcode::RDMA_READ, i)?;
        let got = s.read(0, size)?;
        match &first {
            Some(f) if *f != got => {
                return Err(InteropError::Mismatch(format!("READ {i} of the guest's bytes differs from the first")));
            }
            Some(_) => {}
            None => first = Some(got),
        }
    }
    Ok((iters, format!("{iters} RDMA_READs of {size} B, one at a time, all returning the same guest bytes")))
}
