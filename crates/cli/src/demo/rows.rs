//! The demo's rows: each operation run, timed and checked.

use super::expect::{Rng, low_mask, masked_cs, masked_fa, pattern_into};
use super::session::{Demo, other};
use super::table::Row;
use super::{ATOM, BATCH, Ctx, DemoError, POISON, RD, RECV, SEND_SRC, WR};
use marrow_mlx5::prelude::*;
use marrow_softnic::pair::Side;
use std::time::{Duration, Instant};

impl Demo {
    /// RDMA_WRITE (A's bytes into B) or RDMA_READ (B's bytes into A), always
    /// posted by A: fill the source, guard the byte after the destination,
    /// run, check every byte.
    fn rdma(&mut self, rows: &mut Vec<Row>, size: usize, n: usize, seed: u64, read: bool) -> Result<(), DemoError> {
        let (name, off, from, to) =
            if read { ("RDMA_READ", RD, Side::B, Side::A) } else { ("RDMA_WRITE", WR, Side::A, Side::B) };
        let mut row = Row::new(name, size);
        for iter in 0..n {
            let ctx = Ctx { op: row.op, size, iter };
            pattern_into(&mut self.src, seed ^ ((size as u64) << 24) ^ iter as u64, size);
            self.write(from, off, &self.src, ctx)?;
            self.set_guard(to, off + size, ctx)?;
            let sgl = [self.sge(Side::A, off, size)];
            let remote = self.remote(Side::B, off);
            let op = if read { WqeOp::RdmaRead { remote, sgl: &sgl } } else { WqeOp::RdmaWrite { remote, sgl: &sgl } };
            row.add(self.one(Side::A, &op, size, ctx)?);
            self.check_src(to, off, ctx)?;
        }
        rows.push(row);
        Ok(())
    }

    fn inline_write(&mut self, rows: &mut Vec<Row>, size: usize, n: usize, seed: u64) -> Result<(), DemoError> {
        let mut row = Row::new("RDMA_WRITE inline", size);
        for iter in 0..n {
            let ctx = Ctx { op: row.op, size, iter };
            pattern_into(&mut self.src, seed ^ ((size as u64) << 24) ^ iter as u64, size);
            self.set_guard(Side::B, WR + size, ctx)?;
            let data = std::mem::take(&mut self.src);
            let op = WqeOp::RdmaWriteInline { remote: self.remote(Side::B, WR), data: &data };
            let r = self.one(Side::A, &op, size, ctx);
            self.src = data;
            row.add(r?);
            self.check_src(Side::B, WR, ctx)?;
        }
        rows.push(row);
        Ok(())
    }

    /// `BATCH` inline 8-byte writes behind one doorbell, only the last
    /// signaled: the CQE of the last completes them all (`complete_through`).
    fn batched_writes(&mut self, rows: &mut Vec<Row>, batches: usize, seed: u64) -> Result<(), DemoError> {
        const SIZE: usize = 8;
        let mut row = Row::new("RDMA_WRITE inline, 16 per doorbell", SIZE);
        let quiet = CtrlParams { completion: CompletionMode::CQE_ON_CQE_ERROR, ..CtrlParams::signaled(0, 0) };
        let mut posted = [Instant::now(); BATCH];
        let mut datas = [[0u8; SIZE]; BATCH];
        for iter in 0..batches {
            let ctx = Ctx { op: row.op, size: SIZE, iter };
            self.set_guard(Side::B, WR + BATCH * SIZE, ctx)?;
            let mut last = (0, 0);
            for j in 0..BATCH {
                pattern_into(&mut self.src, seed ^ ((iter * BATCH + j) as u64), SIZE);
                datas[j].copy_from_slice(&self.src);
                let op = WqeOp::RdmaWriteInline { remote: self.remote(Side::B, WR + j * SIZE), data: &datas[j] };
                let params = if j + 1 == BATCH { CtrlParams::signaled(0, 0) } else { quiet };
                posted[j] = Instant::now();
                last = self.post(Side::A, params, &op, ctx)?;
            }
            self.ring(Side::A, ctx)?;
            self.wait_req(Side::A, WqeOpcode::RDMA_WRITE, last.0, last.1, SIZE, ctx)?;
            let done = Instant::now();
            for t in posted {
                row.lat.record(done - t);
            }
            row.busy_ns += (done - posted[0]).as_nanos() as u64;
            self.src = datas.concat();
            self.check_src(Side::B, WR, ctx)?;
        }
        rows.push(row);
        Ok(())
    }

    fn fetch_add(
        &mut self,
        rows: &mut Vec<Row>,
        checks: &mut Vec<String>,
        n: usize,
        rng: &mut Rng,
    ) -> Result<(), DemoError> {
        let mut row = Row::new("ATOMIC_FA", 8);
        let target = ATOM;
        // Start below 2^64 so that the sum wraps around half way.
        let start = 0u64.wrapping_sub((n as u64 / 2) << 23);
        let mut expect = start;
        self.write_u64(Side::B, target, 8, start, Ctx { op: row.op, size: 8, iter: 0 })?;
        let local = self.sge(Side::A, ATOM, 8);
        for iter in 0..n {
            let ctx = Ctx { op: row.op, size: 8, iter };
            let add = rng.next() >> 40; // 24 bits: 2^23 on average
            self.write(Side::A, ATOM, &[POISON; 8], ctx)?;
            let op = WqeOp::AtomicFa { remote: self.remote(Side::B, target), local, add };
            row.add(self.one(Side::A, &op, 8, ctx)?);
            let old = self.read_u64(Side::A, ATOM, 8, ctx)?;
            if old != expect {
                return Err(DemoError::Mismatch {
                    ctx,
                    detail: format!("fetched {old:#018x}, the running sum is {expect:#018x} (add {add:#x})"),
                });
            }
            expect = expect.wrapping_add(add);
        }
        let ctx = Ctx { op: row.op, size: 8, iter: n };
        let fin = self.read_u64(Side::B, target, 8, ctx)?;
        if fin != expect {
            return Err(DemoError::Mismatch {
                ctx,
                detail: format!("final value {fin:#018x}, expected {expect:#018x}"),
            });
        }
        checks.push(format!(
            "ATOMIC_FA: {n} adds from {start:#018x} (wrapping past 2^64); every fetched value was the running sum; final {fin:#018x}"
        ));
        rows.push(row);
        Ok(())
    }

    fn compare_swap(
        &mut self,
        rows: &mut Vec<Row>,
        checks: &mut Vec<String>,
        n: usize,
        rng: &mut Rng,
    ) -> Result<(), DemoError> {
        let (mut hit, mut miss) = (Row::new("ATOMIC_CS swapped", 8), Row::new("ATOMIC_CS compare failed", 8));
        let target = ATOM + 8;
        let mut cur = rng.next();
        self.write_u64(Side::B, target, 8, cur, Ctx { op: hit.op, size: 8, iter: 0 })?;
        let local = self.sge(Side::A, ATOM, 8);
        for i in 0..2 * n {
            let succeed = i % 2 == 0;
            let row = if succeed { &mut hit } else { &mut miss };
            let ctx = Ctx { op: row.op, size: 8, iter: i / 2 };
            let swap = rng.next();
            let compare = if succeed { cur } else { cur ^ (1 << (rng.next() % 64)) };
            self.write(Side::A, ATOM, &[POISON; 8], ctx)?;
            let op = WqeOp::AtomicCs { remote: self.remote(Side::B, target), local, compare, swap };
            row.add(self.one(Side::A, &op, 8, ctx)?);
            let old = self.read_u64(Side::A, ATOM, 8, ctx)?;
            let now = self.read_u64(Side::B, target, 8, ctx)?;
            let want = if succeed { swap } else { cur };
            if old != cur || now != want {
                return Err(DemoError::Mismatch {
                    ctx,
                    detail: format!(
                        "compare {compare:#018x} swap {swap:#018x} on {cur:#018x}: fetched {old:#018x}, memory {now:#018x}; expected fetched {cur:#018x}, memory {want:#018x}"
                    ),
                });
            }
            cur = want;
        }
        checks.push(format!(
            "ATOMIC_CS: {n} swaps and {n} failed compares; every fetched value and every memory value as computed"
        ));
        rows.push(hit);
        rows.push(miss);
        Ok(())
    }

    fn masked(
        &mut self,
        rows: &mut Vec<Row>,
        checks: &mut Vec<String>,
        cs: bool,
        width: usize,
        n: usize,
        rng: &mut Rng,
    ) -> Result<(), DemoError> {
        let name = if cs { "ATOMIC_MASKED_CS" } else { "ATOMIC_MASKED_FA" };
        let mut row = Row::new(name, width);
        let target = ATOM + if width == 4 { 16 } else { 24 };
        let wmask = low_mask(width as u32 * 8);
        let mut cur = rng.next() & wmask;
        self.write_u64(Side::B, target, width, cur, Ctx { op: name, size: width, iter: 0 })?;
        let local = self.sge(Side::A, ATOM, width);
        let remote = self.remote(Side::B, target);
        let mut swapped = 0;
        for iter in 0..n {
            let ctx = Ctx { op: name, size: width, iter };
            let (a, b, c, d) = (rng.next() & wmask, rng.next() & wmask, rng.next() & wmask, rng.next() & wmask);
            let (op, want, what) = if cs {
                // Half the compares are made to match on the compared bits.
                let compare = if rng.next() & 1 == 0 { cur ^ (b & !d) } else { b };
                let want = masked_cs(cur, a, compare, c, d);
                swapped += usize::from((cur ^ compare) & d == 0);
                let op = if width == 4 {
                    WqeOp::MaskedCs32 {
                        remote,
                        local,
                        swap: a as u32,
                        compare: compare as u32,
                        swap_mask: c as u32,
                        compare_mask: d as u32,
                    }
                } else {
                    WqeOp::MaskedCs64 { remote, local, swap: a, compare, swap_mask: c, compare_mask: d }
                };
                (op, want, format!("swap {a:#x} compare {compare:#x} swap_mask {c:#x} compare_mask {d:#x}"))
            } else {
                let boundary = match rng.next() % 4 {
                    0 => 0,
                    1 => 0x8000_8000_8000_8000 & wmask,
                    2 => 0x8080_8080_8080_8080 & wmask,
                    _ => b,
                };
                let want = masked_fa(cur, a, boundary, width as u32 * 8);
                let op = if width == 4 {
                    WqeOp::MaskedFa32 { remote, local, add: a as u32, field_boundary: boundary as u32 }
                } else {
                    WqeOp::MaskedFa64 { remote, local, add: a, field_boundary: boundary }
                };
                (op, want, format!("add {a:#x} field_boundary {boundary:#x}"))
            };
            self.write(Side::A, ATOM, &[POISON; 8][..width], ctx)?;
            row.add(self.one(Side::A, &op, width, ctx)?);
            let old = self.read_u64(Side::A, ATOM, width, ctx)?;
            let now = self.read_u64(Side::B, target, width, ctx)?;
            if old != cur || now != want {
                return Err(DemoError::Mismatch {
                    ctx,
                    detail: format!(
                        "{what} on {cur:#x}: fetched {old:#x}, memory {now:#x}; computed: fetched {cur:#x}, memory {want:#x}"
                    ),
                });
            }
            cur = want;
        }
        checks.push(if cs {
            format!(
                "{name} {width} B: {n} operations ({swapped} matched the compare mask), each checked against the CPU"
            )
        } else {
            format!(
                "{name} {width} B: {n} operations with 1-, 8-, 16-bit and random fields, each checked against the CPU"
            )
        });
        rows.push(row);
        Ok(())
    }

    /// SEND from `from` into a receive posted at the other side; the
    /// latency is from the post of the SEND to the receive completion.
    fn send_one(&mut self, from: Side, size: usize, seed: u64, ctx: Ctx) -> Result<Duration, DemoError> {
        let to = other(from);
        let rsge = [self.sge(to, RECV, 64 << 10)];
        let rindex = self.p.side(to).rq.post(&rsge).map_err(|e| DemoError::Post { ctx, error: e.to_string() })?;
        pattern_into(&mut self.src, seed, size);
        self.write(from, SEND_SRC, &self.src, ctx)?;
        self.set_guard(to, RECV + size, ctx)?;
        let sgl = [self.sge(from, SEND_SRC, size)];
        let op = WqeOp::Send { sgl: &sgl };
        let t0 = Instant::now();
        let (index, bbs) = self.post(from, CtrlParams::signaled(0, 0), &op, ctx)?;
        self.ring(from, ctx)?;
        self.wait_req(from, WqeOpcode::SEND, index, bbs, size, ctx)?;
        self.wait_recv(to, rindex, size, ctx)?;
        let dt = t0.elapsed();
        self.check_src(to, RECV, ctx)?;
        Ok(dt)
    }

    fn send_recv(&mut self, rows: &mut Vec<Row>, size: usize, n: usize, seed: u64) -> Result<(), DemoError> {
        let mut row = Row::new("SEND/RECV (A→B, B→A)", size);
        for iter in 0..n {
            let ctx = Ctx { op: row.op, size, iter };
            let s = seed ^ ((size as u64) << 24) ^ ((iter as u64) << 1);
            row.add(self.send_one(Side::A, size, s, ctx)?);
            row.add(self.send_one(Side::B, size, s | 1, ctx)?);
        }
        rows.push(row);
        Ok(())
    }
}

/// Iterations per row.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    pub(super) quick: bool,
    /// Across a RoCEv2 wire: the masked atomics, which have none, are skipped.
    pub(super) wire: bool,
}

impl Plan {
    fn n(self, full: usize, quick: usize) -> usize {
        if self.quick { quick } else { full }
    }

    fn per_size(self, size: usize) -> usize {
        match size {
            0..=64 => self.n(5000, 100),
            65..=4096 => self.n(2000, 50),
            4097..=65536 => self.n(1000, 10),
            _ => self.n(200, 3),
        }
    }
}

/// Sizes of the RDMA_WRITE and RDMA_READ rows.
pub const SIZES: [usize; 5] = [8, 64, 4 << 10, 64 << 10, 1 << 20];

pub(super) fn body(d: &mut Demo, plan: Plan, rows: &mut Vec<Row>, checks: &mut Vec<String>) -> Result<(), DemoError> {
    let mut rng = Rng(0x6d61_7272_6f77);
    for size in SIZES {
        d.rdma(rows, size, plan.per_size(size), 0x1000_0000_0000, false)?;
    }
    for size in [8, 64] {
        d.inline_write(rows, size, plan.per_size(size), 0x2000_0000_0000)?;
    }
    d.batched_writes(rows, plan.n(500, 10), 0x3000_0000_0000)?;
    for size in SIZES {
        d.rdma(rows, size, plan.per_size(size), 0x4000_0000_0000, true)?;
    }
    d.fetch_add(rows, checks, plan.n(5000, 100), &mut rng)?;
    d.compare_swap(rows, checks, plan.n(2000, 50), &mut rng)?;
    if plan.wire {
        checks.push("masked atomics skipped: RoCEv2 has no wire form for them (a wire QP refuses them)".into());
    } else {
        for (cs, width) in [(false, 4), (false, 8), (true, 4), (true, 8)] {
            d.masked(rows, checks, cs, width, plan.n(2000, 50), &mut rng)?;
        }
    }
    for size in [64, 4 << 10] {
        d.send_recv(rows, size, plan.per_size(size) / 2, 0x5000_0000_0000)?;
    }
    Ok(())
}
