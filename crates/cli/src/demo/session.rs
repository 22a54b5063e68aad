//! The two endpoints as the demo drives them: buffers written and
//! compared, WQEs posted and rung, completions awaited and matched.

use super::expect::first_difference;
use super::{BUF_LEN, Ctx, DemoError, GUARD};
use crate::decode::completion_line;
use marrow_mlx5::prelude::*;
use marrow_softnic::pair::{Endpoint, Pair, Side};
use std::time::{Duration, Instant};

/// The demo's state across its rows.
pub(super) struct Demo {
    /// The two endpoints, A and B.
    pub(super) p: Pair,
    /// How long each completion may take.
    pub(super) timeout: Duration,
    /// Completions polled, send and receive.
    pub(super) cqes: u64,
    /// The bytes the current operation sends, compared with what arrived.
    pub(super) src: Vec<u8>,
    /// Bytes read back from an endpoint's buffer.
    pub(super) scratch: Vec<u8>,
}

/// Side `s`'s endpoint.
pub(super) fn ep(p: &Pair, s: Side) -> &Endpoint {
    if s == Side::A { &p.a } else { &p.b }
}

/// The side across from `s`.
pub(super) fn other(s: Side) -> Side {
    if s == Side::A { Side::B } else { Side::A }
}

impl Demo {
    pub(super) fn sge(&self, s: Side, off: usize, len: usize) -> Sge {
        let e = ep(&self.p, s);
        Sge { addr: e.addr + off as u64, length: len as u32, lkey: e.lkey }
    }

    pub(super) fn remote(&self, s: Side, off: usize) -> RemoteAddr {
        let e = ep(&self.p, s);
        RemoteAddr { raddr: e.addr + off as u64, rkey: e.rkey }
    }

    pub(super) fn write(&self, s: Side, off: usize, data: &[u8], ctx: Ctx) -> Result<(), DemoError> {
        ep(&self.p, s).buf.write_bytes(off, data).map_err(|e| DemoError::Post { ctx, error: e.to_string() })
    }

    pub(super) fn read(&mut self, s: Side, off: usize, len: usize, ctx: Ctx) -> Result<(), DemoError> {
        self.scratch.resize(len, 0);
        ep(&self.p, s).buf.read_bytes(off, &mut self.scratch).map_err(|e| DemoError::Post { ctx, error: e.to_string() })
    }

    /// Compare `len` bytes at `off` of side `s` with `self.src`, and the guard after them.
    pub(super) fn check_src(&mut self, s: Side, off: usize, ctx: Ctx) -> Result<(), DemoError> {
        let len = self.src.len();
        self.read(s, off, len, ctx)?;
        let addr = ep(&self.p, s).addr;
        if let Some(d) = first_difference(&self.scratch, &self.src, off, addr) {
            return Err(DemoError::Mismatch { ctx, detail: format!("side {s:?}: {d}") });
        }
        self.check_guard(s, off + len, ctx)
    }

    pub(super) fn set_guard(&self, s: Side, off: usize, ctx: Ctx) -> Result<(), DemoError> {
        if off + GUARD.len() <= BUF_LEN { self.write(s, off, &GUARD, ctx) } else { Ok(()) }
    }

    pub(super) fn check_guard(&mut self, s: Side, off: usize, ctx: Ctx) -> Result<(), DemoError> {
        if off + GUARD.len() > BUF_LEN {
            return Ok(());
        }
        self.read(s, off, GUARD.len(), ctx)?;
        if self.scratch != GUARD {
            return Err(DemoError::Mismatch {
                ctx,
                detail: format!(
                    "side {s:?}: the 8 bytes after the destination (offset {off:#x}) changed: {:02x?}, were {GUARD:02x?}",
                    self.scratch
                ),
            });
        }
        Ok(())
    }

    pub(super) fn read_u64(&mut self, s: Side, off: usize, width: usize, ctx: Ctx) -> Result<u64, DemoError> {
        self.read(s, off, width, ctx)?;
        let mut b = [0u8; 8];
        b[..width].copy_from_slice(&self.scratch[..width]);
        // Atomics operate on host-order memory; a 4-byte value is the low half.
        Ok(if width == 4 { u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])) } else { u64::from_ne_bytes(b) })
    }

    pub(super) fn write_u64(&self, s: Side, off: usize, width: usize, v: u64, ctx: Ctx) -> Result<(), DemoError> {
        if width == 4 {
            self.write(s, off, &(v as u32).to_ne_bytes(), ctx)
        } else {
            self.write(s, off, &v.to_ne_bytes(), ctx)
        }
    }

    /// Post one WQE on side `s`; returns its wqe_index and WQEBBs.
    pub(super) fn post(
        &mut self,
        s: Side,
        params: CtrlParams,
        op: &WqeOp<'_>,
        ctx: Ctx,
    ) -> Result<(u16, u32), DemoError> {
        let sq = &mut self.p.side(s).sq;
        let index = sq.pi() as u16;
        let b = sq.post(params, op).map_err(|e| DemoError::Post { ctx, error: e.to_string() })?;
        Ok((index, u32::from(b.wqebbs)))
    }

    pub(super) fn ring(&mut self, s: Side, ctx: Ctx) -> Result<(), DemoError> {
        self.p.side(s).sq.ring().map_err(|e| DemoError::Post { ctx, error: e.to_string() })
    }

    /// Post, ring and wait for the requester completion.
    pub(super) fn one(&mut self, s: Side, op: &WqeOp<'_>, byte_cnt: usize, ctx: Ctx) -> Result<Duration, DemoError> {
        let t0 = Instant::now();
        let (index, bbs) = self.post(s, CtrlParams::signaled(0, 0), op, ctx)?;
        self.ring(s, ctx)?;
        self.wait_req(s, op.opcode_opmod().0, index, bbs, byte_cnt, ctx)?;
        Ok(t0.elapsed())
    }

    pub(super) fn wait(&mut self, s: Side, recv: bool, ctx: Ctx) -> Result<Completion, DemoError> {
        let c = self.p.wait(s, recv, self.timeout).map_err(|error| DemoError::Wait { ctx, error })?;
        self.cqes += 1;
        Ok(c)
    }

    /// Wait for the requester completion of the WQE at `index` and free its slots.
    pub(super) fn wait_req(
        &mut self,
        s: Side,
        opcode: WqeOpcode,
        index: u16,
        wqebbs: u32,
        byte_cnt: usize,
        ctx: Ctx,
    ) -> Result<(), DemoError> {
        let c = self.wait(s, false, ctx)?;
        match c {
            Completion::Requester { wqe_opcode, wqe_counter, byte_cnt: b, .. }
                if wqe_opcode == opcode && wqe_counter == index && b as usize == byte_cnt =>
            {
                self.p.side(s).sq.complete_through(index, wqebbs);
                Ok(())
            }
            other => Err(DemoError::Completion {
                ctx,
                detail: format!(
                    "expected the requester completion of {opcode} at wqe_counter {index:#06x} with byte_cnt {byte_cnt}; got {}",
                    completion_line(&other)
                ),
            }),
        }
    }

    /// Wait for the receive completion of receive WQE `index`.
    pub(super) fn wait_recv(&mut self, s: Side, index: u16, byte_cnt: usize, ctx: Ctx) -> Result<(), DemoError> {
        let c = self.wait(s, true, ctx)?;
        match c {
            Completion::Responder { opcode: CqeOpcode::RESP_SEND, wqe_counter, byte_cnt: b, .. }
                if wqe_counter == index && b as usize == byte_cnt =>
            {
                self.p.side(s).rq.complete(wqe_counter);
                Ok(())
            }
            other => Err(DemoError::Completion {
                ctx,
                detail: format!(
                    "expected a RESP_SEND completion of receive WQE {index:#06x} with byte_cnt {byte_cnt}; got {}",
                    completion_line(&other)
                ),
            }),
        }
    }
}
