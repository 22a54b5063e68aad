//! Which records `marrow trace show` prints: the names and numbers its
//! options take, and the tests, the header's first and the decoded
//! record's only where they are needed.

use super::view::View;
use crate::trace_shared::Facts;
use crate::trace_shared::KINDS;
use marrow_mlx5::raw::{CqeOpcode, WqeOpcode, mlx5_cqe64};
use marrow_softnic::trace::{Kind, Record};
use zerocopy::FromBytes;

/// A record kind from its name (`wqe-fetch`, `WQE_FETCH`) or number.
pub fn parse_kind(s: &str) -> Result<Kind, String> {
    let norm = s.trim().to_ascii_lowercase().replace('_', "-");
    if let Some(k) = KINDS.iter().find(|k| k.name() == norm) {
        return Ok(*k);
    }
    if let Ok(n) = parse_num(&norm).and_then(|n| u8::try_from(n).map_err(|e| e.to_string())) {
        return Ok(Kind(n));
    }
    let names: Vec<&str> = KINDS.iter().map(|k| k.name()).collect();
    Err(format!("unknown record kind '{s}'; kinds: {}", names.join(", ")))
}

/// A decimal or `0x` hex number.
pub fn parse_num(s: &str) -> Result<u64, String> {
    let s = s.trim();
    clap_num::maybe_hex::<u64>(s).map_err(|e| format!("'{s}': {e}"))
}

/// What `--opcode` matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpcodeMatch {
    /// A send WQE opcode: WQE fetches of it, and requester or error CQEs of such a WQE.
    Wqe(WqeOpcode),
    /// A CQE opcode (`RESP_SEND`, `REQ_ERR`…): CQEs with it.
    Cqe(CqeOpcode),
}

/// An opcode by its spec name (a WQE opcode such as `RDMA_WRITE`, or a CQE
/// opcode such as `RESP_SEND`), or a WQE opcode by number.
pub fn parse_opcode(s: &str) -> Result<OpcodeMatch, String> {
    let up = s.trim().to_ascii_uppercase().replace('-', "_");
    if let Some(op) = WqeOpcode::ALL.iter().find(|o| o.name() == Some(up.as_str())) {
        return Ok(OpcodeMatch::Wqe(*op));
    }
    if let Some(op) = CqeOpcode::ALL.iter().find(|o| o.name() == Some(up.as_str())) {
        return Ok(OpcodeMatch::Cqe(*op));
    }
    if let Ok(n) = parse_num(s).and_then(|n| u8::try_from(n).map_err(|e| e.to_string())) {
        return Ok(OpcodeMatch::Wqe(WqeOpcode(n)));
    }
    let names: Vec<&str> = WqeOpcode::ALL.iter().filter_map(|o| o.name()).collect();
    Err(format!("unknown opcode '{s}'; WQE opcodes: {} (or a CQE opcode such as RESP_SEND, REQ_ERR)", names.join(", ")))
}

/// Which records to show. Within one filter any value matches; all filters must match.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these QPs.
    pub qps: Vec<u32>,
    /// Only WQE fetches and CQEs of these opcodes.
    pub opcodes: Vec<OpcodeMatch>,
    /// Only errors: error CQEs, WQE_ERROR, FAULT, CQ_OVERFLOW, QP_STATE to ERR, dropped doorbells.
    pub errors: bool,
    /// Only these kinds.
    pub kinds: Vec<Kind>,
    /// At most this many records.
    pub limit: Option<usize>,
    /// Only records at or after this `t_ns`.
    pub since: Option<u64>,
    /// Only records at or before this `t_ns`.
    pub until: Option<u64>,
    /// Only records numbered in this range (first, last; inclusive): `--around N --context K`.
    pub around: Option<(usize, usize)>,
}

impl Filter {
    /// The record numbers `--around n --context k` names.
    pub fn around(n: usize, k: usize) -> (usize, usize) {
        (n.saturating_sub(k), n.saturating_add(k))
    }

    /// Whether the test needs the record decoded (`--errors`, `--opcode`).
    pub(super) fn needs_view(&self) -> bool {
        self.errors || !self.opcodes.is_empty()
    }

    /// The tests that need only the record header, done before any decoding.
    pub(super) fn header_passes(&self, index: usize, r: &Record) -> bool {
        self.around.is_none_or(|(a, b)| (a..=b).contains(&index))
            && self.since.is_none_or(|t| r.t_ns >= t)
            && self.until.is_none_or(|t| r.t_ns <= t)
            && (self.qps.is_empty() || self.qps.contains(&r.qpn))
            && (self.kinds.is_empty() || self.kinds.contains(&r.kind))
            && (!self.errors || may_be_error(r))
            && (self.opcodes.is_empty() || matches!(r.kind, Kind::WQE_FETCH | Kind::BLUEFLAME | Kind::CQE_WRITE))
    }
}

/// False for records [`view`](super::view()) never marks as errors, decided without
/// decoding them, so `--errors` skips the decode of a healthy trace's records.
fn may_be_error(r: &Record) -> bool {
    match r.kind {
        Kind::DOORBELL_DROPPED | Kind::QP_STATE | Kind::CQ_OVERFLOW | Kind::FAULT | Kind::WQE_ERROR => true,
        Kind::CQE_WRITE => mlx5_cqe64::ref_from_bytes(&r.bytes)
            .is_ok_and(|c| matches!(c.opcode(), CqeOpcode::REQ_ERR | CqeOpcode::RESP_ERR)),
        _ => false,
    }
}

/// Whether `r` (decoded as `v`) passes `f` (all but the limit).
pub fn matches(f: &Filter, index: usize, r: &Record, v: &View) -> bool {
    f.header_passes(index, r) && view_passes(f, r, v.facts())
}

/// The tests of `f` that need the decoded record.
pub(super) fn view_passes(f: &Filter, r: &Record, v: Facts) -> bool {
    if f.errors && !v.is_error {
        return false;
    }
    if !f.opcodes.is_empty() {
        let hit = f.opcodes.iter().any(|m| match *m {
            OpcodeMatch::Wqe(op) => {
                matches!(r.kind, Kind::WQE_FETCH | Kind::BLUEFLAME | Kind::CQE_WRITE) && v.wqe_opcode == Some(op)
            }
            OpcodeMatch::Cqe(op) => r.kind == Kind::CQE_WRITE && v.cqe_opcode == Some(op),
        });
        if !hit {
            return false;
        }
    }
    true
}
