//! The doorbell scan an engine thread runs: every QP's UAR page read and
//! cleared, BlueFlame copies taken, each doorbell refused unless the QP it
//! names is bound to the page it was written on, and the send queue's
//! target set to the further of the doorbell and the doorbell record. The
//! recently busy QPs are looked at again within the sweep (`hot.rs`).

use super::{Hca, wqe_ds};
use crate::clock::ScanClock;
use crate::cq::Cq;
use crate::hot;
use crate::qp::{DOORBELL_OFFSETS, PendingDoorbell, Qp, SND_DBR_OFFSET};
use crate::table::Table;
use crate::trace::Kind;
use marrow_mlx5::doorbell::{DoorbellStyle, decode_uar_doorbell};
use marrow_mlx5::raw::MLX5_DB_BLUEFLAME_BUFFER_SIZE;
use marrow_mlx5::wqe::wqebbs_for_ds;

/// A doorbell on `qp` was just seen: ask for the lines its WQEs will touch
/// next, before any of them is read. The send counter of the doorbell
/// record, the WQE at the consumer index, the send CQ's next slot (for a
/// store) and, unless the CQ ignores overrun, its consumer index were last
/// written by the poster or read by it, so each is a miss; asked for
/// together, the misses overlap instead of following one another through
/// the doorbell's decode, the fetch and the CQE. A hint: nothing here
/// reads or changes what the engine then does.
fn prefetch_for_doorbell(qp: &Qp, cqs: &Table<Cq>) {
    use marrow_mmio::Prefetch;
    let m = &qp.mem;
    let _ = m.dbrec.prefetch(SND_DBR_OFFSET, Prefetch::Read);
    let _ = m.sq.prefetch(qp.sq_slot_offset(0), Prefetch::Read);
    if let Some(cq) = cqs.get(&qp.send_cq) {
        let _ = cq.buf.prefetch(cq.next_slot_offset(), Prefetch::Write);
        if !cq.overrun_ignore {
            let _ = cq.dbrec.prefetch(crate::cq::SET_CI_OFFSET, Prefetch::Read);
        }
    }
}

impl Hca {
    /// One scan of every QP: doorbells found, send queues walked, and the
    /// recently busy QPs looked at again every few QPs of the sweep (see
    /// `hot.rs`). Returns the number of WQEs executed or flushed, so an idle
    /// engine can back off.
    pub fn scan(&mut self) -> usize {
        let mut work = 0;
        // At most one clock read per scan, and none where nothing needs the
        // time (clock.rs).
        let mut clock = ScanClock::default();
        self.hot.expire_now_and_then(&mut clock);
        let stride = hot::stride(self.hot.len());
        // QPNs are dense from the table's base: no list to allocate per scan.
        for (i, qpn) in self.qps.number_range().enumerate() {
            if i > 0 && (i as u32).is_multiple_of(stride) && !self.hot.is_empty() {
                let busy: smallvec::SmallVec<[u32; hot::MAX_HOT]> = self.hot.numbers().collect();
                for q in busy {
                    work += self.visit(q, &mut clock);
                }
            }
            work += self.visit(qpn, &mut clock);
        }
        work
    }

    /// Serve `qpn` once: doorbells, send queue, wire timers. Most QPs are
    /// idle most scans: one look decides, so an idle QP costs a few loads,
    /// not the full walk.
    fn visit(&mut self, qpn: u32, clock: &mut ScanClock) -> usize {
        if self.qps.get(&qpn).is_none_or(Qp::idle) {
            return 0;
        }
        self.find_doorbells(qpn, clock);
        let work = self.walk_send_queue(qpn) + self.tick_wire(qpn, clock);
        if work > 0 {
            self.hot.touch(qpn, clock.now());
        }
        work
    }

    /// Read and clear the doorbell registers of `qpn`'s UAR page; `clock`
    /// is the scan's time, read only for a delayed doorbell (a fault).
    fn find_doorbells(&mut self, qpn: u32, clock: &mut ScanClock) {
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        let uar = qp.mem.uar;
        let mut found = smallvec::SmallVec::<[(usize, [u8; 8]); 2]>::new();
        for off in DOORBELL_OFFSETS {
            // Taking the value (leaving zeros) sees a doorbell written twice
            // with the same bytes; no real QP has number 0, so an all-zero
            // register is always "no doorbell".
            // Look before taking: an idle scan then only reads the line, so
            // it stays clean in this CPU's cache, and a device's doorbell
            // store need not first pull back a line our swap dirtied.
            if uar.atomic_u64(off).is_ok_and(|a| a.load(std::sync::atomic::Ordering::Relaxed) != 0) {
                if found.is_empty() {
                    prefetch_for_doorbell(qp, &self.cqs);
                }
                if let Ok(bytes) = uar.swap_8bytes(off, [0; 8])
                    && bytes != [0; 8]
                {
                    found.push((off, bytes));
                }
            }
        }
        let ready: Vec<PendingDoorbell> = if qp.delayed.is_empty() {
            Vec::new()
        } else {
            let now = clock.now();
            let (due, later): (Vec<_>, Vec<_>) = qp.delayed.drain(..).partition(|d| d.at <= now);
            qp.delayed = later;
            due
        };
        for (off, bytes) in found {
            if let Some(t) = &mut self.trace {
                t.record(Kind::DOORBELL, qpn, 0, off as u64, &bytes);
            }
            self.take_blueflame(qpn, off, bytes);
            let Some(qp) = self.qps.get_mut(&qpn) else { return };
            if qp.faults.drop_doorbells > 0 {
                qp.faults.drop_doorbells -= 1;
                if let Some(t) = &mut self.trace {
                    t.record(Kind::DOORBELL_DROPPED, qpn, 0, off as u64, &bytes);
                }
                continue;
            }
            if let Some(d) = qp.faults.delay_doorbell {
                qp.delayed.push(PendingDoorbell { at: clock.now() + d, bytes });
                continue;
            }
            self.ring(qpn, bytes);
        }
        for d in ready {
            self.ring(qpn, d.bytes);
        }
    }

    /// A BlueFlame write carries the whole WQE in the register (rdma-core
    /// `post_send_db` copies it in 64-byte chunks when it fits the buffer,
    /// `MLX5_DB_BLUEFLAME_BUFFER_SIZE`): keep it, so the WQE is executed
    /// from these bytes rather than fetched from the ring. Shared memory has
    /// no write-combining burst, so the writer stores the first 8 bytes
    /// last; the rest of the buffer is read after them, then cleared.
    fn take_blueflame(&mut self, qpn: u32, off: usize, first: [u8; 8]) {
        let ds = wqe_ds(&first);
        let len = ds * 16;
        if ds == 0 || len > MLX5_DB_BLUEFLAME_BUFFER_SIZE as usize {
            return;
        }
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        // Looked at on the stack: most doorbells are 8 bytes, and an
        // allocation per doorbell was a visible part of the engine's
        // doorbell-to-CQE latency.
        let mut rest = [0u8; MLX5_DB_BLUEFLAME_BUFFER_SIZE as usize - 8];
        let rest = &mut rest[..len.saturating_sub(8)];
        if rest.is_empty() || qp.mem.uar.read_bytes(off + 8, rest).is_err() || rest.iter().all(|&b| b == 0) {
            return; // an 8-byte doorbell
        }
        let mut wqe = first.to_vec();
        wqe.extend_from_slice(rest);
        let _ = qp.mem.uar.fill(off + 8, len - 8, 0);
        let index = decode_uar_doorbell(first).wqe_index;
        if let Some(t) = &mut self.trace {
            t.record(Kind::BLUEFLAME, qpn, 0, off as u64, &wqe);
        }
        qp.blueflame = Some((index, wqe));
    }

    /// Act on a doorbell found on `page_qpn`'s UAR page.
    fn ring(&mut self, page_qpn: u32, bytes: [u8; 8]) {
        let db = decode_uar_doorbell(bytes);
        // The doorbell names its QP. A UAR page may be shared by several QPs
        // (the queues a caller places with `create_qp_in`), but a doorbell
        // drives only a QP bound to the page it was written on: a process
        // holding one QP's page must not ring another's.
        let page = self.qps.get(&page_qpn).map(|q| q.mem.uar.base_addr());
        let bound = self.qps.get(&db.qpn).is_some_and(|q| Some(q.mem.uar.base_addr()) == page);
        if !bound {
            self.doorbells_refused += 1;
            if let Some(t) = &mut self.trace {
                let msg = if self.qps.contains_key(&db.qpn) {
                    format!(
                        "doorbell on QP {page_qpn:#x}'s UAR page names QP {:#x}, which is not bound to that page; not executed",
                        db.qpn
                    )
                } else {
                    format!("doorbell names QPN {:#x}, which does not exist; ignored", db.qpn)
                };
                t.record(Kind::WQE_ERROR, page_qpn, 0, 0, msg.as_bytes());
            }
            return;
        }
        let qpn = db.qpn;
        let Some(qp) = self.qps.get_mut(&qpn) else { return };
        let dbrec = qp.mem.dbrec.read_be32(SND_DBR_OFFSET).unwrap_or(0) as u16;
        if let Some(t) = &mut self.trace {
            let mut rec = [0u8; 8];
            qp.mem.dbrec.read_bytes(0, &mut rec).ok();
            t.record(Kind::DBREC_READ, qpn, 0, 0, &rec);
        }
        // How far the doorbell itself says: rdma-core rings with the last
        // WQE's control bytes (index of its first WQEBB, its ds), NVSHMEM and
        // DOCA with the next free index. Take whichever of that and the
        // doorbell record reaches further, within one ring.
        let from_db = match db.style {
            DoorbellStyle::RdmaCore => db.wqe_index.wrapping_add(wqebbs_for_ds(db.ds as usize) as u16),
            DoorbellStyle::IndexAndQpn => db.wqe_index,
        };
        let ci = qp.sq_ci as u16;
        let n = qp.caps.sq_wqebbs as u16;
        let ahead = |t: u16| t.wrapping_sub(ci);
        let mut target = qp.sq_target.unwrap_or(ci);
        for t in [dbrec, from_db] {
            if ahead(t) <= n && ahead(t) > ahead(target) {
                target = t;
            }
        }
        qp.sq_target = Some(target);
    }
}
