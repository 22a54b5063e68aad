//! The send-queue walk: each WQE fetched once from the ring, executed
//! (`crate::exec`) or flushed, and completed with the CQE a ConnectX
//! writes, the error CQE and the QP's move to ERR included.

use super::{Hca, wqe_ds};
use crate::exec::{self, Outcome};
use crate::qp::QpState;
use crate::trace::Kind;
use marrow_mlx5::cqe::{Completion, ErrorCompletion};
use marrow_mlx5::raw::{CompletionMode, CqeOpcode, MLX5_SEND_WQE_BB, Syndrome, WqeOpcode};
use marrow_mlx5::wqe::wqebbs_for_ds;
use marrow_mlx5::wqe_decode::CtrlFields;
use std::time::Instant;

const BB: usize = MLX5_SEND_WQE_BB as usize;

/// A fetched WQE: one or two WQEBBs stay on the stack, unzeroed until read.
type WqeBuf = smallvec::SmallVec<[u8; 2 * BB]>;

impl Hca {
    /// Execute (or flush) the WQEs announced on `qpn`'s send queue.
    pub(super) fn walk_send_queue(&mut self, qpn: u32) -> usize {
        let mut done = 0;
        // A bounded batch per scan keeps one busy QP from starving the others.
        while done < 256 {
            let Some(qp) = self.qps.get(&qpn) else { break };
            if qp.faults.stall {
                break;
            }
            if qp.state == QpState::Err && qp.delegate.as_ref().is_some_and(|d| d.d.outstanding() > 0) {
                // The delegate's QP flushes what it holds first; the WQEs
                // after them are flushed here once those are reported.
                break;
            }
            if qp.state == QpState::Err && qp.wire.as_ref().is_some_and(|w| w.req.outstanding() > 0) {
                // WQEs on the wire when the QP failed complete first, flushed.
                let mut actions = Vec::new();
                if let Some(w) = self.qps.get_mut(&qpn).and_then(|q| q.wire.as_mut()) {
                    w.req.flush(&mut actions);
                }
                done += actions.len();
                self.apply(qpn, actions);
                continue;
            }
            if qp.pending() == 0 {
                break;
            }
            match qp.state {
                QpState::Rts => {}
                QpState::Sqd => break, // drained: new WQEs wait for RTS
                _ => {
                    // Posting outside RTS, or after an error: the QP is (or
                    // goes) to ERR and every WQE completes with WR_FLUSH_ERR.
                    if qp.state != QpState::Err {
                        self.fail_qp(qpn, format!("WQE posted in state {:?}", qp.state));
                    }
                    if !self.flush_one(qpn) {
                        break;
                    }
                    done += 1;
                    continue;
                }
            }
            if let Some((since, tries)) = qp.rnr
                && since.elapsed() < self.rnr_timer * tries.max(1)
            {
                break; // waiting out the RNR timer
            }
            if !self.execute_one(qpn) {
                break;
            }
            done += 1;
        }
        done
    }

    /// Copy the WQE at the consumer index out of the ring (WQEBB by WQEBB,
    /// wrapping), as the HCA's fetch does. Returns the buffer and the
    /// WQEBBs it spans.
    fn fetch(&mut self, qpn: u32, wqe: &mut WqeBuf) -> Option<usize> {
        let qp = self.qps.get_mut(&qpn)?;
        if let Some((_, bf)) = qp.blueflame.take_if(|(i, _)| *i == qp.sq_ci as u16) {
            // The WQE came with its doorbell: no fetch from the ring.
            let bbs = bf.len().div_ceil(BB);
            wqe.extend_from_slice(&bf);
            wqe.resize(bbs * BB, 0);
            return Some(bbs);
        }
        let qp = self.qps.get(&qpn)?;
        let slot = |i: u32| qp.sq_slot_offset(i);
        // Read straight into the inline buffer: fixed-size moves, no memmove
        // or memset call, and no copy of a copy (a 64-byte value handed
        // through a `Result` is stored at an odd offset and read back with
        // loads the store buffer cannot forward).
        let mut inline = [0u8; 2 * BB];
        qp.mem.sq.read_bytes(slot(0), &mut inline[..BB]).ok()?;
        let ds = wqe_ds(&inline);
        *wqe = WqeBuf::from_buf_and_len(inline, BB);
        // A WQE spans at most the WQEBBs announced; a `ds` that claims more
        // is read only as far as the announced part (and fails validation).
        let bbs = wqebbs_for_ds(ds.max(1)).min(qp.pending() as usize).max(1);
        for i in 1..bbs {
            wqe.extend_from_slice(&qp.mem.sq.read_array::<BB>(slot(i as u32)).ok()?);
        }
        if let Some(t) = &mut self.trace {
            let shown = (ds * 16).clamp(16, bbs * BB);
            t.record(Kind::WQE_FETCH, qpn, 0, slot(0) as u64, &wqe[..shown]);
        }
        Some(bbs)
    }

    /// Flush the WQE at the consumer index with WR_FLUSH_ERR.
    fn flush_one(&mut self, qpn: u32) -> bool {
        let mut wqe = WqeBuf::new();
        let Some(bbs) = self.fetch(qpn, &mut wqe) else { return false };
        let ctrl = exec::ctrl_of(&wqe);
        let (opcode, wqe_counter) = (ctrl.opcode, ctrl.wqe_index);
        let qp = self.qps.get_mut(&qpn).expect("fetched above");
        qp.sq_ci = qp.sq_ci.wrapping_add(bbs as u32);
        self.wqe_flushed(qpn, opcode, wqe_counter);
        true
    }

    /// The WR_FLUSH_ERR CQE of a WQE the QP had not finished when it failed.
    pub(crate) fn wqe_flushed(&mut self, qpn: u32, opcode: WqeOpcode, wqe_counter: u16) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        let cqn = qp.send_cq;
        let c = Completion::Error(ErrorCompletion {
            opcode: CqeOpcode::REQ_ERR,
            syndrome: Syndrome::WR_FLUSH_ERR,
            vendor_err_synd: 0,
            hw_err_synd: 0,
            hw_synd_type: 0,
            wqe_opcode: opcode,
            qpn,
            wqe_counter,
        });
        self.complete(cqn, qpn, &c);
    }

    /// Execute the WQE at the consumer index.
    fn execute_one(&mut self, qpn: u32) -> bool {
        let mut buf = WqeBuf::new();
        let Some(bbs) = self.fetch(qpn, &mut buf) else { return false };
        let wqe = &buf[..];
        let ctrl = exec::ctrl_of(wqe);
        let outcome = exec::execute(self, qpn, wqe, &ctrl);
        self.finish(qpn, bbs, ctrl, outcome)
    }

    /// Act on what became of the WQE at the consumer index: complete it,
    /// fail it, wait out RNR, or hand it to the wire (the requester completes it).
    /// Returns whether the walk may go on to the next WQE.
    fn finish(&mut self, qpn: u32, bbs: usize, ctrl: CtrlFields, outcome: Outcome) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else { return false };
        // CQEs come in WQE order: a WQE that completes here (a NOP, a local
        // error) waits until the wire has answered for the ones before it.
        if matches!(outcome, Outcome::Done { .. } | Outcome::Error { .. })
            && (qp.wire.as_ref().is_some_and(|w| w.req.outstanding() > 0)
                || qp.delegate.as_ref().is_some_and(|d| d.d.outstanding() > 0))
        {
            return false;
        }
        match outcome {
            Outcome::Rnr => {
                let tries = qp.rnr.map_or(1, |(_, t)| t + 1);
                if qp.rnr_retry != 7 && tries > qp.rnr_retry {
                    qp.rnr = None;
                    self.error(qpn, bbs, ctrl, Syndrome::RNR_RETRY_EXC_ERR, 0, "receiver not ready, retries exhausted");
                } else {
                    qp.rnr = Some((qp.rnr.map_or(Instant::now(), |(s, _)| s), tries));
                    return false;
                }
            }
            Outcome::Sent => {
                // On the wire: the requester completes it when it is acknowledged.
                qp.rnr = None;
                qp.executed += 1;
                qp.sq_ci = qp.sq_ci.wrapping_add(bbs as u32);
            }
            Outcome::Busy => return false,
            Outcome::Done { byte_cnt } => {
                qp.rnr = None;
                qp.executed += 1;
                qp.sq_ci = qp.sq_ci.wrapping_add(bbs as u32);
                self.wqe_done(qpn, ctrl, byte_cnt);
            }
            Outcome::Error { syndrome, vendor, why } => {
                qp.rnr = None;
                self.error(qpn, bbs, ctrl, syndrome, vendor, &why);
            }
        }
        true
    }

    /// Complete the WQE at the consumer index with an error CQE and move
    /// the QP to ERR, as the HCA does.
    fn error(&mut self, qpn: u32, bbs: usize, ctrl: CtrlFields, syndrome: Syndrome, vendor: u8, why: &str) {
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        qp.executed += 1;
        qp.sq_ci = qp.sq_ci.wrapping_add(bbs as u32);
        self.wqe_failed(qpn, ctrl, syndrome, vendor, why);
    }

    /// The CQE of a WQE that completed, if its completion mode asks for one.
    pub(crate) fn wqe_done(&mut self, qpn: u32, ctrl: CtrlFields, byte_cnt: u32) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        let cqn = qp.send_cq;
        if matches!(ctrl.completion, CompletionMode::CQE_ALWAYS | CompletionMode::CQE_AND_EQE) {
            let c = Completion::Requester {
                wqe_opcode: ctrl.opcode,
                qpn,
                wqe_counter: ctrl.wqe_index,
                byte_cnt,
                timestamp: 0,
            };
            self.complete(cqn, qpn, &c);
        }
    }

    /// The error CQE of a WQE that failed; the QP goes to ERR.
    pub(crate) fn wqe_failed(&mut self, qpn: u32, ctrl: CtrlFields, syndrome: Syndrome, vendor: u8, why: &str) {
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        let report = !(ctrl.completion == CompletionMode::CQE_ON_FIRST_CQE_ERROR && qp.error_reported);
        qp.error_reported = true;
        let cqn = qp.send_cq;
        if let Some(t) = &mut self.trace {
            let msg = format!("{syndrome:?}: {why}");
            t.record(Kind::WQE_ERROR, qpn, 0, 0, msg.as_bytes());
        }
        if report {
            let c = Completion::Error(ErrorCompletion {
                opcode: CqeOpcode::REQ_ERR,
                syndrome,
                vendor_err_synd: vendor,
                hw_err_synd: 0,
                hw_synd_type: 0,
                wqe_opcode: ctrl.opcode,
                qpn,
                wqe_counter: ctrl.wqe_index,
            });
            self.complete(cqn, qpn, &c);
        }
        self.fail_qp(qpn, format!("{syndrome:?}: {why}"));
    }
}
