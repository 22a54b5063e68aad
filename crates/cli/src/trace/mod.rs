//! `marrow trace show`: a softnic register trace (`docs/TRACE.md`), one
//! line per record, with the WQEs, CQEs and doorbells decoded by the same
//! decode tree as `marrow decode` ([`crate::decode`], [`crate::print`]).
//!
//! Everything here takes untrusted bytes: a damaged file prints the records
//! before the damage and reports where it is; nothing panics.

mod filter;
mod render;
mod view;

use filter::view_passes;
pub use filter::{Filter, OpcodeMatch, matches, parse_kind, parse_num, parse_opcode};
pub use render::{place, record_json, render_record, render_record_into};
pub use view::{View, qp_state_name, view, view_line};

use crate::trace_shared::Facts;
pub use crate::trace_shared::{Detail, KINDS};
use marrow_softnic::trace::{self as st, Kind, Record, TraceError};
use serde_json::json;
use std::io::Write;

/// Options of `marrow trace show`.
#[derive(Clone, Debug, Default)]
pub struct ShowOptions {
    /// Which records.
    pub filter: Filter,
    /// How much of each.
    pub detail: Detail,
    /// JSON Lines instead of text.
    pub json: bool,
    /// Print only the last N records that pass the filter (held in a ring of N).
    pub tail: Option<usize>,
}

/// Where a trace file is damaged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// What is wrong.
    pub message: String,
    /// Byte offset in the file.
    pub offset: usize,
}

/// What [`show`] printed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    /// Records read before the end, the damage or the limit.
    pub total: usize,
    /// Records printed.
    pub shown: usize,
    /// Records that passed the filter (more than `shown` under `--tail`).
    pub matched: usize,
    /// The damage, for a malformed or truncated file.
    pub damage: Option<Damage>,
    /// Bytes of the file read.
    pub bytes: usize,
    /// Reading stopped at [`Filter::limit`] or past [`Filter::around`], before the end of the file.
    pub limited: bool,
}

/// A parse error as a message and a file offset.
pub fn damage_of(e: &TraceError) -> Damage {
    let offset = match *e {
        TraceError::BadMagic => 0,
        TraceError::BadVersion(_) => 8,
        TraceError::Truncated { offset, .. } | TraceError::Read { offset, .. } => offset,
    };
    Damage { message: e.to_string(), offset }
}

/// Print the records of the trace file read from `src` that pass the
/// filter, each as soon as it is read: what is held is one record, whatever
/// the file's size, and reading stops once [`Filter::limit`] records are
/// shown. The damage of a malformed file is returned, not printed (in JSON it
/// also ends the output as `{"error", "offset"}`).
pub fn show(src: impl std::io::BufRead, opts: &ShowOptions, out: &mut dyn Write) -> std::io::Result<Shown> {
    let mut s = Shown { total: 0, shown: 0, matched: 0, damage: None, bytes: 0, limited: false };
    let mut reader = match st::Reader::new(src) {
        Ok(r) => r,
        Err(e) => {
            s.damage = Some(damage_of(&e));
            return finish(opts, out, s);
        }
    };
    let f = &opts.filter;
    // `--tail`: the last N records that passed, kept raw and decoded only when printed.
    let mut ring: std::collections::VecDeque<(usize, Record)> = std::collections::VecDeque::new();
    // Records are written into `buf` and it into `out` in blocks: one call
    // through `out` per block instead of one per record.
    let mut buf: Vec<u8> = Vec::with_capacity(OUT_BLOCK + OUT_BLOCK / 4);
    let mut text = String::new();
    let mut r = Record { t_ns: 0, kind: Kind(0), qpn: 0, obj: 0, addr: 0, bytes: Vec::new() };
    while f.limit.is_none_or(|l| s.shown < l) {
        if f.around.is_some_and(|(_, last)| s.total > last) {
            s.limited = true;
            break;
        }
        match reader.next_into_buffered(&mut r) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                s.damage = Some(damage_of(&e));
                break;
            }
        }
        let index = s.total;
        s.total += 1;
        if !f.header_passes(index, &r) {
            continue;
        }
        match opts.tail {
            Some(n) => {
                if f.needs_view() && !view_passes(f, &r, view_line(&r).facts()) {
                    continue;
                }
                s.matched += 1;
                if n == 0 {
                    continue;
                }
                // The record that leaves the ring lends its buffer to the one that enters.
                let mut slot = if ring.len() == n { ring.pop_front().map(|(_, old)| old) } else { None }
                    .unwrap_or_else(|| Record { bytes: Vec::with_capacity(r.bytes.len()), ..r.clone() });
                copy_record(&r, &mut slot);
                ring.push_back((index, slot));
            }
            None => {
                let at = buf.len();
                if view_passes(f, &r, print_record(index, &r, opts, &mut buf, &mut text)) {
                    s.matched += 1;
                    s.shown += 1;
                    if buf.len() >= OUT_BLOCK {
                        out.write_all(&buf)?;
                        buf.clear();
                    }
                } else {
                    buf.truncate(at);
                }
            }
        }
    }
    for (index, r) in &ring {
        print_record(*index, r, opts, &mut buf, &mut text);
        s.shown += 1;
        if buf.len() >= OUT_BLOCK {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    s.bytes = reader.offset();
    s.limited |= s.damage.is_none() && f.limit.is_some_and(|l| s.shown >= l);
    finish(opts, out, s)
}

/// The text output's last line: how many records were shown of how many read.
pub fn trailer(s: &Shown, file: &str, limit: Option<usize>) -> String {
    let (shown, total, bytes) = (s.shown, s.total, s.bytes);
    let what = if s.matched > s.shown {
        format!("last {shown} of {} matching records shown, of {total} records", s.matched)
    } else {
        format!("{shown} of {total} records shown")
    };
    match limit {
        Some(l) if s.limited && shown >= l => {
            format!("-- {what} (stopped at --limit {l}; {file}, {bytes} bytes read)")
        }
        _ if s.limited => format!("-- {what} (stopped after the --around window; {file}, {bytes} bytes read)"),
        _ if s.damage.is_some() => format!("-- {what} ({file}, {bytes} bytes read before the damage)"),
        _ => format!("-- {what} ({file}, {bytes} bytes)"),
    }
}

fn copy_record(from: &Record, to: &mut Record) {
    to.t_ns = from.t_ns;
    to.kind = from.kind;
    to.qpn = from.qpn;
    to.obj = from.obj;
    to.addr = from.addr;
    to.bytes.clear();
    to.bytes.extend_from_slice(&from.bytes);
}

/// Bytes of output gathered before they are written.
const OUT_BLOCK: usize = 64 << 10;

/// Append record `index` as [`show`] prints it to `buf` and return the
/// flags the filter tests. Text goes through [`crate::trace_text`] where it
/// covers the record, else through [`view()`] and [`render_record_into`]
/// (`text` is their reused buffer).
fn print_record(index: usize, r: &Record, opts: &ShowOptions, buf: &mut Vec<u8>, text: &mut String) -> Facts {
    if !opts.json
        && let Some(facts) = crate::trace_text::write_record(buf, index, r, opts.detail)
    {
        return facts;
    }
    let v = if opts.detail == Detail::Brief && !opts.json { view_line(r) } else { view(r, opts.detail) };
    if opts.json {
        // Writing into a Vec cannot fail.
        let _ = writeln!(buf, "{}", record_json(index, r, &v));
    } else {
        text.clear();
        render_record_into(text, index, r, &v);
        buf.extend_from_slice(text.as_bytes());
    }
    v.facts()
}

fn finish(opts: &ShowOptions, out: &mut dyn Write, s: Shown) -> std::io::Result<Shown> {
    if let (true, Some(d)) = (opts.json, &s.damage) {
        writeln!(out, "{}", json!({ "error": d.message, "offset": d.offset }))?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests;
