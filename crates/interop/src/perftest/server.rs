//! marrow as perftest's server: its receives posted, and after the guest's
//! run, its buffer checked for what the guest's writes, reads, atomics or
//! sends must have left there.

use super::side::{Side, fill_random};
use super::{CYCLE, POISON, Test};
use crate::InteropError;
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::prelude::*;

/// marrow as server: check what the guest's operations did.
pub(super) fn check_server(s: &mut Side<'_>, posted_recvs: usize) -> Result<(usize, String), InteropError> {
    let (size, iters, t) = (s.opts.size, s.opts.iters, s.lay.target());
    if s.opts.deny {
        let state = s.host.nic.hca().qp(s.ep.qpn).map(|q| format!("{:?}", q.state)).unwrap_or_default();
        let untouched = s.read(t, s.lay.half)?.iter().all(|&b| b == POISON);
        if !untouched {
            return Err(InteropError::Mismatch("the guest changed a buffer it has no rights to".into()));
        }
        return Ok((0, format!("the buffer without remote rights is untouched; QP {state}")));
    }
    let guard = s.read(2 * s.lay.half, 64)?;
    if guard.iter().any(|&b| b != POISON) || s.read(0, s.lay.half)?.iter().any(|&b| b != POISON) {
        return Err(InteropError::Mismatch("bytes outside the target changed".into()));
    }
    match s.opts.test {
        Test::WriteBw => {
            let got = s.read(t, size)?;
            let poisoned = got.iter().filter(|&&b| b == POISON).count();
            // The guest writes rand() bytes: about 1 in 256 equals the poison.
            if poisoned * 16 > size.max(16) {
                return Err(InteropError::Mismatch(format!(
                    "{poisoned} of the {size} target bytes still hold the poison: the writes did not land"
                )));
            }
            Ok((
                iters,
                format!(
                    "the first {size} target bytes written ({poisoned} equal the poison, as chance has it), nothing outside the target"
                ),
            ))
        }
        Test::ReadBw | Test::ReadLat => {
            let want = fill_random(s.lay.half, 99);
            if s.read(t, s.lay.half)? != want {
                return Err(InteropError::Mismatch("READs changed the target".into()));
            }
            Ok((iters, "the target read, unchanged, nothing outside it touched".into()))
        }
        Test::AtomicFa | Test::AtomicCs => {
            // perftest strides its atomics over the cycle buffer, 64 bytes apart.
            let mut sum = 0u64;
            for k in 0..CYCLE / 64 {
                let v = s.u64_at(t + 64 * k)?;
                let rest = s.read(t + 64 * k + 8, 56)?;
                if rest.iter().any(|&b| b != 0) {
                    return Err(InteropError::Mismatch(format!("bytes beside atomic slot {k} changed")));
                }
                sum = sum.wrapping_add(v);
            }
            let want = if s.opts.test == Test::AtomicFa { iters as u64 } else { 0 };
            if sum != want {
                return Err(InteropError::Mismatch(format!("the atomic slots sum to {sum}, {want} expected")));
            }
            Ok((
                iters,
                if want > 0 {
                    format!("the guest's {iters} FETCH_ADDs of 1 sum to {sum} over the 64 slots it strides")
                } else {
                    "the CMP_AND_SWAPs of 0 left every slot 0".into()
                },
            ))
        }
        Test::SendBw => Ok((posted_recvs, format!("{iters} SENDs of {size} B received whole"))),
        Test::WriteLat => Ok((iters, String::new())),
    }
}

/// Prepare the server's target for the guest's operations.
pub(super) fn prepare_server(s: &mut Side<'_>) -> Result<(), InteropError> {
    let t = s.lay.target();
    match s.opts.test {
        Test::ReadBw | Test::ReadLat => s.ep.buf.write_bytes(t, &fill_random(s.lay.half, 99)),
        // Atomic slots start at 0.
        Test::AtomicFa | Test::AtomicCs => s.ep.buf.fill(t, CYCLE, 0),
        _ => Ok(()),
    }
    .map_err(|e| InteropError::Setup(e.to_string()))
}

/// The server's receives for `ib_send_bw`: every SEND arrives whole.
pub(super) fn receive_sends(s: &mut Side<'_>) -> Result<usize, InteropError> {
    let opts = s.opts;
    let sge = [Sge { addr: s.ep.addr + s.lay.target() as u64, length: opts.size as u32, lkey: s.ep.lkey }];
    let mut posted = opts.iters.min(512);
    for i in 0..opts.iters {
        match s.host.wait(&mut s.ep, true, opts.timeout, &format!("receive {i}"))? {
            Completion::Responder { opcode: CqeOpcode::RESP_SEND, byte_cnt, wqe_counter, .. }
                if byte_cnt as usize == opts.size =>
            {
                s.ep.rq.complete(wqe_counter);
                if posted < opts.iters {
                    s.ep.rq.post(&sge).map_err(|e| InteropError::Setup(e.to_string()))?;
                    posted += 1;
                }
            }
            other => {
                return Err(InteropError::Completion(format!(
                    "receive {i}: expected RESP_SEND of {} B; got {other:?}",
                    opts.size
                )));
            }
        }
    }
    Ok(opts.iters)
}
