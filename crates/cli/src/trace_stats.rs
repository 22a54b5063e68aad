//! `marrow trace stats`: a summary of a softnic register trace
//! (`docs/TRACE.md`): records by kind, by QP and by WQE opcode, the time
//! span, doorbell-to-CQE latency percentiles per QP, and every error with
//! the WQE fetch it belongs to.
//!
//! The file is read one record at a time; what is kept is per-QP state (the
//! doorbells not yet completed, the last fetch of each WQE index, a latency
//! histogram) and at most [`MAX_LISTED_ERRORS`] error entries, so the memory
//! does not grow with the file. Damage ends the reading and is reported with
//! its offset, after the figures of every record before it.

use crate::trace::{Damage, damage_of, view_line};
use hdrhistogram::Histogram;
use marrow_mlx5::cqe::{Completion, decode_cqe};
use marrow_mlx5::doorbell::{DoorbellStyle, decode_uar_doorbell};
use marrow_mlx5::raw::{CqeOpcode, MLX5_SEND_WQE_BB, MLX5_SEND_WQE_DS, WqeOpcode, mlx5_wqe_ctrl_seg};
use zerocopy::FromBytes;

/// 16-byte units (a control segment's `ds`) in a 64-byte WQEBB.
const DS_PER_WQEBB: u16 = (MLX5_SEND_WQE_BB / MLX5_SEND_WQE_DS) as u16;
use marrow_softnic::trace::{self as st, Kind, Record};
use serde_json::{Value as Json, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;

/// Errors listed one by one; past this they are only counted, so a flush
/// storm in a long trace does not hold every error in memory.
pub const MAX_LISTED_ERRORS: usize = 1000;

/// Doorbells kept per QP waiting for their CQEs: a damaged or unsignaled
/// stream that never completes must not grow without end.
const MAX_PENDING_DOORBELLS: usize = 4096;

/// Dropped doorbells per QP waiting for the fetch of their WQE.
const MAX_PENDING_DROPS: usize = 64;

/// A doorbell waiting for the CQEs of the WQEs it announced: those with a
/// WQE index in `start..end` (16-bit, wrapping).
#[derive(Clone, Copy, Debug)]
struct PendingDoorbell {
    t_ns: u64,
    start: u16,
    end: u16,
}

/// Where a WQE was fetched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchRef {
    /// The WQE_FETCH record's number in the file.
    pub record: usize,
    /// The WQE index (`opmod_idx_opcode[23:8]` of its control segment).
    pub wqe_index: u16,
    /// WQEBBs it spans (from `ds`).
    pub wqebbs: u16,
    /// Its opcode.
    pub opcode: WqeOpcode,
}

impl FetchRef {
    fn covers(&self, index: u16) -> bool {
        index.wrapping_sub(self.wqe_index) < self.wqebbs.max(1)
    }
}

/// One error record and the WQE it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorEntry {
    /// The record's number in the file.
    pub record: usize,
    /// Its timestamp.
    pub t_ns: u64,
    /// Its kind.
    pub kind: Kind,
    /// Its QP (`u32::MAX` when none).
    pub qpn: u32,
    /// The one-line summary `trace show --brief` prints for it.
    pub summary: String,
    /// The WQE fetch it belongs to, when one was found.
    pub wqe: Option<FetchRef>,
}

/// Doorbell-to-CQE latency of one QP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Latency {
    /// The QP.
    pub qpn: u32,
    /// CQEs paired with a doorbell.
    pub count: u64,
    /// Percentiles, ns: p50, p90, p99, p99.9.
    pub p50: u64,
    /// 90th percentile, ns.
    pub p90: u64,
    /// 99th percentile, ns.
    pub p99: u64,
    /// 99.9th percentile, ns.
    pub p999: u64,
    /// Largest, ns.
    pub max: u64,
    /// Send-queue CQEs of this QP that no pending doorbell announced.
    pub unpaired: u64,
}

#[derive(Debug, Default)]
struct QpTrack {
    records: u64,
    /// The end of the range the last doorbell announced.
    announced_end: Option<u16>,
    doorbells: VecDeque<PendingDoorbell>,
    /// The latest fetch of each WQE index.
    fetches: HashMap<u16, FetchRef>,
    last_fetch: Option<FetchRef>,
    /// Listed dropped-doorbell errors (positions in `Stats::errors`) waiting for their WQE's fetch.
    drops_waiting: Vec<(usize, u16)>,
    latency: Option<Histogram<u64>>,
    unpaired: u64,
}

/// The summary of a trace.
#[derive(Debug, Default)]
pub struct Stats {
    /// Records read.
    pub records: usize,
    /// Bytes of the file read (up to the damage).
    pub bytes: usize,
    /// First and last timestamp, ns.
    pub t_first: Option<u64>,
    /// The last record's timestamp.
    pub t_last: Option<u64>,
    /// Records by kind.
    pub kinds: BTreeMap<u8, u64>,
    /// WQE fetches by opcode.
    pub wqe_opcodes: BTreeMap<u8, u64>,
    /// Error records, all of them.
    pub errors_total: u64,
    /// The first [`MAX_LISTED_ERRORS`] error records.
    pub errors: Vec<ErrorEntry>,
    /// The damage, for a malformed or truncated file.
    pub damage: Option<Damage>,
    qps: BTreeMap<u32, QpTrack>,
}

impl Stats {
    /// Records by QP (`u32::MAX` for records of no QP), in QPN order.
    pub fn qp_records(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.qps.iter().filter(|(_, t)| t.records > 0).map(|(q, t)| (*q, t.records))
    }

    /// Doorbell-to-CQE latency, for each QP that had a send-queue CQE.
    pub fn latencies(&self) -> Vec<Latency> {
        self.qps
            .iter()
            .filter(|(_, t)| t.latency.is_some() || t.unpaired > 0)
            .map(|(q, t)| {
                let at = |p: f64| t.latency.as_ref().map_or(0, |h| h.value_at_quantile(p));
                Latency {
                    qpn: *q,
                    count: t.latency.as_ref().map_or(0, Histogram::len),
                    p50: at(0.5),
                    p90: at(0.9),
                    p99: at(0.99),
                    p999: at(0.999),
                    max: t.latency.as_ref().map_or(0, Histogram::max),
                    unpaired: t.unpaired,
                }
            })
            .collect()
    }

    fn qp(&mut self, qpn: u32) -> &mut QpTrack {
        self.qps.entry(qpn).or_default()
    }

    fn add(&mut self, index: usize, r: &Record) {
        self.records += 1;
        self.t_first.get_or_insert(r.t_ns);
        self.t_last = Some(r.t_ns);
        *self.kinds.entry(r.kind.0).or_default() += 1;
        self.qp(r.qpn).records += 1;
        match r.kind {
            Kind::DOORBELL => self.doorbell(r),
            Kind::DOORBELL_DROPPED => self.dropped_doorbell(index, r),
            Kind::WQE_FETCH => self.fetch(index, r),
            Kind::CQE_WRITE => self.cqe(index, r),
            Kind::QP_STATE | Kind::CQ_OVERFLOW | Kind::FAULT | Kind::WQE_ERROR => {
                let v = view_line(r);
                if v.is_error {
                    let wqe = self.qps.get(&r.qpn).and_then(|t| t.last_fetch);
                    self.error(index, r, v.summary, wqe);
                }
            }
            _ => {}
        }
    }

    /// The doorbell's QPN and the end of the WQE range it announces (the
    /// index after its last WQE): rdma-core style carries the last WQE's
    /// index, NVSHMEM/DOCA style the next free WQEBB.
    fn doorbell_range(r: &Record) -> Option<(u32, u16)> {
        let bytes: [u8; 8] = r.bytes[..].try_into().ok()?;
        let d = decode_uar_doorbell(bytes);
        let end = match d.style {
            DoorbellStyle::RdmaCore => d.wqe_index.wrapping_add(1),
            DoorbellStyle::IndexAndQpn => d.wqe_index,
        };
        Some((d.qpn, end))
    }

    fn doorbell(&mut self, r: &Record) {
        let Some((qpn, end)) = Self::doorbell_range(r) else { return };
        let t = self.qp(qpn);
        // The first doorbell of a QP announces everything posted before it:
        // take half the 16-bit index space as "before".
        let start = t.announced_end.unwrap_or(end.wrapping_sub(1 << 15));
        if t.doorbells.len() == MAX_PENDING_DOORBELLS {
            t.doorbells.pop_front();
        }
        t.doorbells.push_back(PendingDoorbell { t_ns: r.t_ns, start, end });
        t.announced_end = Some(end);
    }

    /// A dropped doorbell announced nothing: the device never acted on it,
    /// so its WQEs belong to the next doorbell that is acted on.
    fn dropped_doorbell(&mut self, index: usize, r: &Record) {
        let range = Self::doorbell_range(r);
        if let Some((qpn, end)) = range {
            let t = self.qp(qpn);
            if t.doorbells.back().is_some_and(|d| d.end == end && d.t_ns <= r.t_ns) {
                let d = t.doorbells.pop_back();
                t.announced_end = d.map(|d| d.start);
            }
        }
        let summary = view_line(r).summary;
        let Some((qpn, end)) = range else {
            self.error(index, r, summary, None);
            return;
        };
        let last = end.wrapping_sub(1);
        let fetched = self.qps.get(&qpn).and_then(|t| t.fetches.get(&last).copied());
        let listed = self.error(index, r, summary, fetched);
        if let (Some(at), None) = (listed, fetched) {
            let t = self.qp(qpn);
            if t.drops_waiting.len() < MAX_PENDING_DROPS {
                t.drops_waiting.push((at, last));
            }
        }
    }

    fn fetch(&mut self, index: usize, r: &Record) {
        // A fetch shorter than a control segment is no WQE to count.
        let Ok((ctrl, _)) = mlx5_wqe_ctrl_seg::ref_from_prefix(&r.bytes) else { return };
        let f = FetchRef {
            record: index,
            wqe_index: ctrl.wqe_index(),
            wqebbs: u16::from(ctrl.ds()).div_ceil(DS_PER_WQEBB).max(1),
            opcode: ctrl.opcode(),
        };
        *self.wqe_opcodes.entry(ctrl.opcode().0).or_default() += 1;
        let t = self.qp(r.qpn);
        t.fetches.insert(f.wqe_index, f);
        t.last_fetch = Some(f);
        let mut resolved = Vec::new();
        t.drops_waiting.retain(|&(at, want)| {
            let hit = f.covers(want);
            if hit {
                resolved.push(at);
            }
            !hit
        });
        for at in resolved {
            if let Some(e) = self.errors.get_mut(at) {
                e.wqe = Some(f);
            }
        }
    }

    fn cqe(&mut self, index: usize, r: &Record) {
        let v = view_line(r);
        let counter = match decode_cqe(&r.bytes) {
            Ok(Completion::Requester { wqe_counter, .. }) => Some(wqe_counter),
            Ok(Completion::Error(e)) if e.opcode == CqeOpcode::REQ_ERR => Some(e.wqe_counter),
            _ => None,
        };
        if let Some(c) = counter {
            let t = self.qp(r.qpn);
            pair(t, c, r.t_ns);
        }
        if v.is_error {
            let wqe = counter.and_then(|c| self.qps.get(&r.qpn).and_then(|t| t.fetches.get(&c).copied()));
            self.error(index, r, v.summary, wqe);
        }
    }

    /// Count an error and list it while the list has room: its position in the list.
    fn error(&mut self, index: usize, r: &Record, summary: String, wqe: Option<FetchRef>) -> Option<usize> {
        self.errors_total += 1;
        if self.errors.len() >= MAX_LISTED_ERRORS {
            return None;
        }
        self.errors.push(ErrorEntry { record: index, t_ns: r.t_ns, kind: r.kind, qpn: r.qpn, summary, wqe });
        Some(self.errors.len() - 1)
    }
}

/// Pair a send-queue CQE for WQE index `c` with the oldest pending doorbell
/// whose range holds it. CQEs come in WQE order, so doorbells whose range
/// lies wholly before `c` will get no more CQEs and are dropped.
fn pair(t: &mut QpTrack, c: u16, t_ns: u64) {
    while let Some(d) = t.doorbells.front().copied() {
        let span = d.end.wrapping_sub(d.start);
        if c.wrapping_sub(d.start) < span {
            if t.latency.is_none() {
                t.latency = Histogram::new(3).ok();
            }
            if let Some(h) = &mut t.latency {
                let _ = h.record(t_ns.saturating_sub(d.t_ns));
            }
            return;
        }
        t.doorbells.pop_front();
    }
    t.unpaired += 1;
}

/// Read the trace from `src` and summarize it.
pub fn stats(src: impl std::io::Read) -> Stats {
    let mut s = Stats::default();
    let mut reader = match st::Reader::new(src) {
        Ok(r) => r,
        Err(e) => {
            s.damage = Some(damage_of(&e));
            return s;
        }
    };
    let mut r = Record { t_ns: 0, kind: Kind(0), qpn: 0, obj: 0, addr: 0, bytes: Vec::new() };
    let mut index = 0;
    loop {
        match reader.next_into(&mut r) {
            Ok(true) => {
                s.add(index, &r);
                index += 1;
            }
            Ok(false) => break,
            Err(e) => {
                s.damage = Some(damage_of(&e));
                break;
            }
        }
    }
    s.bytes = reader.offset();
    s
}

fn kind_name(k: u8) -> String {
    if crate::trace::KINDS.contains(&Kind(k)) { Kind(k).name().to_owned() } else { format!("kind-{k:#04x}") }
}

fn opcode_name(op: u8) -> String {
    WqeOpcode(op).name().map_or_else(|| format!("opcode-{op:#04x}"), str::to_owned)
}

fn qp_name(qpn: u32) -> String {
    if qpn == u32::MAX { "-".into() } else { format!("{qpn:#08x}") }
}

fn wqe_text(w: &Option<FetchRef>) -> String {
    match w {
        Some(f) => format!("#{} {} idx {:#06x}", f.record, opcode_name(f.opcode.0), f.wqe_index),
        None => "-".into(),
    }
}

/// The text report, columns aligned.
pub fn render_text(s: &Stats, file: &str) -> String {
    let mut o = String::new();
    let span = match (s.t_first, s.t_last) {
        (Some(a), Some(b)) => format!("{a} ns .. {b} ns (span {} ns)", b.saturating_sub(a)),
        _ => "no records".into(),
    };
    let _ = writeln!(o, "{file}: {} records, {} bytes, {span}", s.records, s.bytes);

    use crate::columns::{Align::Left, Align::Right, Columns};
    let mut t = Columns::new(&[("kind", Left), ("records", Right)]);
    for (k, n) in &s.kinds {
        t.row([kind_name(*k).to_string(), n.to_string()]);
    }
    let _ = write!(o, "\nRecords by kind\n{}", t.render("  "));
    let mut t = Columns::new(&[("QP", Left), ("records", Right)]);
    for (q, n) in s.qp_records() {
        t.row([qp_name(q), n.to_string()]);
    }
    let _ = write!(o, "\nRecords by QP\n{}", t.render("  "));
    let mut t = Columns::new(&[("opcode", Left), ("fetches", Right)]);
    for (op, n) in &s.wqe_opcodes {
        t.row([format!("{} ({op:#04x})", opcode_name(*op)), n.to_string()]);
    }
    let _ = write!(o, "\nWQE fetches by opcode\n{}", t.render("  "));
    let figures = ["count", "p50", "p90", "p99", "p99.9", "max", "unpaired"].map(|h| (h, Right));
    let mut t = Columns::new(&[[("QP", Left)].as_slice(), &figures].concat());
    for l in s.latencies() {
        t.row(
            [qp_name(l.qpn)]
                .into_iter()
                .chain([l.count, l.p50, l.p90, l.p99, l.p999, l.max, l.unpaired].map(|v| v.to_string())),
        );
    }
    let _ = write!(o, "\nDoorbell to CQE latency, ns\n{}", t.render("  "));
    let listed = if s.errors_total > s.errors.len() as u64 {
        format!(" (the first {} listed)", s.errors.len())
    } else {
        String::new()
    };
    let _ = writeln!(o, "\nErrors: {}{listed}", s.errors_total);
    if !s.errors.is_empty() {
        let mut t = Columns::new(&[
            ("record", Left),
            ("t_ns", Right),
            ("kind", Left),
            ("QP", Left),
            ("WQE fetch", Left),
            ("what", Left),
        ]);
        for e in &s.errors {
            t.row([
                format!("#{}", e.record),
                e.t_ns.to_string(),
                kind_name(e.kind.0).to_string(),
                qp_name(e.qpn),
                wqe_text(&e.wqe),
                e.summary.clone(),
            ]);
        }
        o.push_str(&t.render("  "));
    }
    if let Some(d) = &s.damage {
        let _ = writeln!(
            o,
            "\nDamaged at file offset {:#x}: {} (figures cover the records before it)",
            d.offset, d.message
        );
    }
    o
}

fn qp_json(qpn: u32) -> Json {
    if qpn == u32::MAX { Json::Null } else { json!(qpn) }
}

/// The JSON report (schema in `docs/TRACE.md`).
pub fn render_json(s: &Stats, file: &str) -> Json {
    let kinds: serde_json::Map<String, Json> = s.kinds.iter().map(|(k, n)| (kind_name(*k), json!(n))).collect();
    let qps: Vec<Json> = s.qp_records().map(|(q, n)| json!({ "qpn": qp_json(q), "records": n })).collect();
    let ops: Vec<Json> =
        s.wqe_opcodes.iter().map(|(op, n)| json!({ "opcode": opcode_name(*op), "value": op, "fetches": n })).collect();
    let lat: Vec<Json> = s
        .latencies()
        .iter()
        .map(|l| {
            json!({
                "qpn": l.qpn, "count": l.count, "p50_ns": l.p50, "p90_ns": l.p90, "p99_ns": l.p99,
                "p99_9_ns": l.p999, "max_ns": l.max, "unpaired": l.unpaired,
            })
        })
        .collect();
    let errors: Vec<Json> = s
        .errors
        .iter()
        .map(|e| {
            json!({
                "record": e.record,
                "t_ns": e.t_ns,
                "kind": kind_name(e.kind.0),
                "qpn": qp_json(e.qpn),
                "summary": e.summary,
                "wqe": e.wqe.map(|f| json!({
                    "record": f.record, "wqe_index": f.wqe_index,
                    "opcode": opcode_name(f.opcode.0), "opcode_value": f.opcode.0,
                })),
            })
        })
        .collect();
    json!({
        "file": file,
        "records": s.records,
        "bytes": s.bytes,
        "t_first_ns": s.t_first,
        "t_last_ns": s.t_last,
        "span_ns": s.t_first.zip(s.t_last).map(|(a, b)| b.saturating_sub(a)),
        "kinds": kinds,
        "qps": qps,
        "wqe_opcodes": ops,
        "latency": lat,
        "errors_total": s.errors_total,
        "errors": errors,
        "damage": s.damage.as_ref().map(|d| json!({ "error": d.message, "offset": d.offset })),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use marrow_softnic::trace::Recorder;
    use proptest::prelude::*;

    fn wqe(index: u16, op: u8, ds: u8) -> Vec<u8> {
        let mut b = vec![0u8; usize::from(ds) * 16];
        b[..4].copy_from_slice(&((u32::from(index) << 8) | u32::from(op)).to_be_bytes());
        b[4..8].copy_from_slice(&((0x100u32 << 8) | u32::from(ds)).to_be_bytes());
        b
    }

    fn doorbell(index: u16, op: u8, ds: u8) -> Vec<u8> {
        wqe(index, op, ds)[..8].to_vec()
    }

    fn req_cqe(counter: u16, op: WqeOpcode) -> Vec<u8> {
        let c = Completion::Requester { wqe_opcode: op, qpn: 0x100, wqe_counter: counter, byte_cnt: 64, timestamp: 0 };
        marrow_mlx5::cqe::encode_cqe(&c, false).unwrap().to_vec()
    }

    #[test]
    fn a_doorbell_for_two_wqes_pairs_both_cqes() {
        let mut r = Recorder::new(1 << 20);
        r.record(Kind::DOORBELL, 0x100, 0, 0x800, &doorbell(1, 0x08, 3));
        r.record(Kind::WQE_FETCH, 0x100, 0, 0, &wqe(0, 0x08, 3));
        r.record(Kind::WQE_FETCH, 0x100, 0, 64, &wqe(1, 0x08, 3));
        r.record(Kind::CQE_WRITE, 0x100, 0x80, 0, &req_cqe(0, WqeOpcode::RDMA_WRITE));
        r.record(Kind::CQE_WRITE, 0x100, 0x80, 64, &req_cqe(1, WqeOpcode::RDMA_WRITE));
        r.record(Kind::DOORBELL, 0x100, 0, 0x900, &doorbell(2, 0x08, 3));
        r.record(Kind::CQE_WRITE, 0x100, 0x80, 128, &req_cqe(9, WqeOpcode::RDMA_WRITE));
        let s = stats(r.bytes());
        assert_eq!(s.damage, None);
        assert_eq!(s.wqe_opcodes.get(&0x08), Some(&2));
        let l = s.latencies();
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].qpn, l[0].count, l[0].unpaired), (0x100, 2, 1));
        assert_eq!(s.errors_total, 0);
    }

    #[test]
    fn a_dropped_doorbell_hands_its_wqes_to_the_next_and_finds_its_fetch() {
        let mut r = Recorder::new(1 << 20);
        r.record(Kind::DOORBELL, 0x100, 0, 0x800, &doorbell(0, 0x08, 3));
        r.record(Kind::DOORBELL_DROPPED, 0x100, 0, 0x800, &doorbell(0, 0x08, 3));
        // NVSHMEM/DOCA style: the next free WQEBB, 2, announces WQEs 0 and 1.
        let mut gpu = [0u8; 8];
        gpu[..4].copy_from_slice(&(2u32 << 8).to_be_bytes());
        gpu[4..].copy_from_slice(&(0x100u32 << 8).to_be_bytes());
        r.record(Kind::DOORBELL, 0x100, 0, 0x900, &gpu);
        r.record(Kind::WQE_FETCH, 0x100, 0, 0, &wqe(0, 0x08, 3));
        r.record(Kind::WQE_FETCH, 0x100, 0, 64, &wqe(1, 0x0a, 2));
        r.record(Kind::CQE_WRITE, 0x100, 0x80, 0, &req_cqe(0, WqeOpcode::RDMA_WRITE));
        r.record(Kind::CQE_WRITE, 0x100, 0x80, 64, &req_cqe(1, WqeOpcode::SEND));
        let s = stats(r.bytes());
        let l = s.latencies();
        assert_eq!((l[0].count, l[0].unpaired), (2, 0));
        assert_eq!(s.errors.len(), 1);
        let e = &s.errors[0];
        assert_eq!((e.record, e.kind), (1, Kind::DOORBELL_DROPPED));
        assert_eq!(e.wqe.map(|f| (f.record, f.wqe_index, f.opcode)), Some((3, 0, WqeOpcode::RDMA_WRITE)));
        let j = render_json(&s, "t");
        assert_eq!(j["errors"][0]["wqe"]["opcode"], "RDMA_WRITE");
        assert_eq!(j["wqe_opcodes"][1]["opcode"], "SEND");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..800)) {
            let mut f = st::MAGIC.to_vec();
            f.extend_from_slice(&1u32.to_le_bytes());
            f.extend_from_slice(&[0; 4]);
            f.extend_from_slice(&bytes);
            for b in [&bytes[..], &f[..]] {
                let s = stats(b);
                let _ = render_text(&s, "x");
                let _ = render_json(&s, "x");
            }
        }
    }
}
