//! Choosing what the bytes are and building the decode tree.
//!
//! The walk over a WQE's segments is `marrow_mlx5::wqe_decode`'s, the CQE
//! decode `marrow_mlx5::cqe`'s and the doorbell decode
//! `marrow_mlx5::doorbell`'s; this module arranges their results, with
//! every structure's fields read through its generated `LAYOUT`.

use crate::fields::{enum_text, layout_by_name, struct_node};
use crate::model::{Decoded, ErrorAt, Kind, Node, Payload, Report};
use marrow_layout::StructLayout;
use marrow_mlx5::cqe::{Completion, CqeError, CqePoll, decode_cqe, owner_bit_for, poll_cqe};
use marrow_mlx5::doorbell::{DoorbellStyle, decode_uar_doorbell};
use marrow_mlx5::raw::{
    CqeOpcode, MLX5_CQE_SIZE, MLX5_CQE128_CQE64_OFFSET, MLX5_SEND_WQE_BB, MLX5_SEND_WQE_DS, MLX5_UAR_DOORBELL_SIZE,
    WqeOpcode, mlx5_cq_dbrec, mlx5_cqe64, mlx5_cqe128, mlx5_err_cqe, mlx5_qp_dbrec, mlx5_uar_db, mlx5_wqe_ctrl_seg,
    mlx5_wqe_inl_data_seg,
};
use marrow_mlx5::wqe::inline_seg_bytes;
use marrow_mlx5::wqe_decode::{CtrlFields, Segment, WqeDecodeError, WqeView};
use zerocopy::FromBytes;

const BB: usize = MLX5_SEND_WQE_BB as usize;
const DS: usize = MLX5_SEND_WQE_DS as usize;
const CQE: usize = MLX5_CQE_SIZE as usize;
const DB: usize = MLX5_UAR_DOORBELL_SIZE as usize;

/// What to decode the bytes as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The kind asked for (`auto` to pick).
    pub kind: Kind,
    /// `(consumer index, CQ entries)`: also check CQE ownership.
    pub ownership: Option<(u32, u32)>,
}

impl Default for Options {
    fn default() -> Self {
        Options { kind: Kind::Auto, ownership: None }
    }
}

/// Decode `bytes`. `Err` when nothing can be decoded at all (empty input,
/// a length no kind takes); a partly decoded item carries its errors in
/// [`Decoded::errors`] instead.
pub fn decode(bytes: &[u8], opts: &Options) -> Result<Report, ErrorAt> {
    let mut all = Collect::default();
    let mut src = bytes;
    match decode_stream(&mut src, opts, bytes.len(), &mut all) {
        Ok(()) => Ok(Report { kind: all.kind, reason: all.reason, items: all.items }),
        Err(StreamError::Input(e)) => Err(e),
        Err(StreamError::Output(e)) => Err(top(e.to_string())),
    }
}

/// The bytes to decode, read as they are needed.
pub trait Source {
    /// Append up to `max` more bytes to `buf`; `Ok(0)` at the end of the input.
    fn read_into(&mut self, buf: &mut Vec<u8>, max: usize) -> Result<usize, ErrorAt>;
}

impl Source for &[u8] {
    fn read_into(&mut self, buf: &mut Vec<u8>, max: usize) -> Result<usize, ErrorAt> {
        let (now, later) = self.split_at(max.min(self.len()));
        buf.extend_from_slice(now);
        *self = later;
        Ok(now.len())
    }
}

/// Where [`decode_stream`] puts what it decodes, as it goes.
pub trait Sink {
    /// The kind the input is decoded as, why, and its length when the whole
    /// input was read to choose (`None`: it is longer than the window).
    fn start(&mut self, kind: Kind, reason: &str, len: Option<usize>) -> std::io::Result<()>;
    /// One decoded item, in input order.
    fn item(&mut self, d: Decoded) -> std::io::Result<()>;
}

/// Why [`decode_stream`] stopped early.
#[derive(Debug)]
pub enum StreamError {
    /// The input: unreadable, malformed, or of no kind that can be decoded.
    /// Items before it may have gone to the sink.
    Input(ErrorAt),
    /// The sink could not take an item (a closed pipe, say).
    Output(std::io::Error),
}

impl From<ErrorAt> for StreamError {
    fn from(e: ErrorAt) -> Self {
        StreamError::Input(e)
    }
}

impl From<std::io::Error> for StreamError {
    fn from(e: std::io::Error) -> Self {
        StreamError::Output(e)
    }
}

/// A [`Sink`] that keeps everything: what [`decode`] returns.
#[derive(Debug)]
struct Collect {
    kind: Kind,
    reason: String,
    items: Vec<Decoded>,
}

impl Default for Collect {
    fn default() -> Self {
        Collect { kind: Kind::Auto, reason: String::new(), items: Vec::new() }
    }
}

impl Sink for Collect {
    fn start(&mut self, kind: Kind, reason: &str, _len: Option<usize>) -> std::io::Result<()> {
        (self.kind, self.reason) = (kind, reason.to_owned());
        Ok(())
    }
    fn item(&mut self, d: Decoded) -> std::io::Result<()> {
        self.items.push(d);
        Ok(())
    }
}

/// The most bytes one WQE can span: a 6-bit `ds`, rounded up to WQEBBs.
const WQE_LOOKAHEAD: usize = (0x3f * DS).div_ceil(BB) * BB;
/// Bytes asked of the source at a time.
const CHUNK: usize = 64 << 10;

/// The input as read so far, less what has been decoded.
struct Buffered<'a> {
    src: &'a mut dyn Source,
    buf: Vec<u8>,
    start: usize,
    at_end: bool,
    /// Why reading stopped, kept until the bytes before it are decoded.
    error: Option<ErrorAt>,
}

impl<'a> Buffered<'a> {
    fn new(src: &'a mut dyn Source) -> Self {
        Buffered { src, buf: Vec::new(), start: 0, at_end: false, error: None }
    }

    fn rest(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Read until at least `want` bytes are not yet decoded, or the input
    /// ends or fails (see [`Buffered::error`]).
    fn fill(&mut self, want: usize) {
        while !self.at_end && self.rest().len() < want {
            let ask = (want - self.rest().len()).max(CHUNK);
            match self.src.read_into(&mut self.buf, ask) {
                Ok(n) => self.at_end = n == 0,
                Err(e) => (self.at_end, self.error) = (true, Some(e)),
            }
        }
    }

    /// `n` bytes are decoded: drop them once they are most of the buffer.
    fn advance(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
        if self.start >= CHUNK.max(self.buf.len() / 2) {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// The end of the items: `Err` when reading failed.
    fn finish(&mut self) -> Result<(), StreamError> {
        self.error.take().map_or(Ok(()), |e| Err(StreamError::Input(e)))
    }
}

/// Decode what `src` gives, handing each item to `sink` as soon as it is
/// decoded, so that memory does not grow with the input. The first `window`
/// bytes are read before anything else: an input that ends within them is
/// decoded exactly as [`decode`] decodes it; a longer one is decoded as the
/// kind its start shows (or `--kind`), one item after another, and an error
/// partway (a truncated last CQE, malformed hex) comes after the items
/// before it.
pub fn decode_stream(
    src: &mut dyn Source,
    opts: &Options,
    window: usize,
    sink: &mut dyn Sink,
) -> Result<(), StreamError> {
    let mut b = Buffered::new(src);
    b.fill(window.saturating_add(1));
    // Within the window, bad input is refused before anything is decoded.
    b.finish()?;
    let whole = b.at_end && b.rest().len() <= window;
    let (kind, reason) = if whole {
        let (kind, reason) = choose_kind(b.rest(), opts.kind)?;
        check_ownership(kind, opts)?;
        check_length(kind, b.rest().len())?;
        (kind, reason)
    } else {
        let (kind, reason) = choose_kind_of_start(b.rest(), opts.kind, window)?;
        check_ownership(kind, opts)?;
        check_fixed_length_fits(kind, window)?;
        (kind, reason)
    };
    sink.start(kind, &reason, whole.then(|| b.rest().len()))?;
    match kind {
        Kind::Auto | Kind::Wqe => stream_wqes(&mut b, &reason, sink)?,
        Kind::Cqe | Kind::ErrCqe => stream_cqes(&mut b, kind, opts, &reason, sink)?,
        Kind::Cqe128 => sink.item(decode_cqe128(b.rest(), opts.ownership, &reason))?,
        Kind::QpDbrec | Kind::CqDbrec | Kind::UarDb => {
            let arr = <[u8; DB]>::try_from(b.rest()).map_err(|_| top(format!("{kind}: not {DB} bytes")))?;
            sink.item(decode_doorbell(kind, arr, &reason))?;
        }
    }
    b.finish()
}

/// Whether `bytes` hold the whole WQE they start with (its control segment
/// and every WQEBB its `ds` spans).
fn holds_whole_wqe(bytes: &[u8]) -> bool {
    let Ok((ctrl, _)) = mlx5_wqe_ctrl_seg::read_from_prefix(bytes) else { return false };
    bytes.len() >= (usize::from(ctrl.ds()) * DS).div_ceil(BB) * BB
}

fn check_ownership(kind: Kind, opts: &Options) -> Result<(), ErrorAt> {
    let Some((_, ncqe)) = opts.ownership else { return Ok(()) };
    if !matches!(kind, Kind::Cqe | Kind::ErrCqe | Kind::Cqe128) {
        return Err(top(format!("--ci/--ncqe apply to CQEs, but the input is decoded as {kind}")));
    }
    if !ncqe.is_power_of_two() {
        return Err(top(format!("--ncqe {ncqe}: a CQ has a power-of-two number of entries")));
    }
    Ok(())
}

fn fixed_length_what(kind: Kind) -> &'static str {
    match kind {
        Kind::Cqe128 => "a 128-byte CQE is",
        Kind::QpDbrec => "a QP doorbell record is",
        Kind::CqDbrec => "a CQ doorbell record is",
        _ => "a UAR doorbell (one 64-bit store) is",
    }
}

/// Whether an input of `len` bytes can be decoded as `kind`.
fn check_length(kind: Kind, len: usize) -> Result<(), ErrorAt> {
    match kind {
        Kind::Cqe | Kind::ErrCqe if !len.is_multiple_of(CQE) => Err(top(format!(
            "{kind}: a CQE is {CQE} bytes, got {len} (not a multiple of {CQE}; use --kind cqe128 for a 128-byte CQE)"
        ))),
        Kind::Cqe128 if len != 2 * CQE => Err(top(format!("cqe128: a 128-byte CQE is 128 bytes, got {len}"))),
        Kind::QpDbrec | Kind::CqDbrec | Kind::UarDb if len != DB => {
            Err(top(format!("{kind}: {} {DB} bytes, got {len}", fixed_length_what(kind))))
        }
        _ => Ok(()),
    }
}

/// Kinds of one fixed length are refused when the input is longer than the window.
fn check_fixed_length_fits(kind: Kind, window: usize) -> Result<(), ErrorAt> {
    let len = match kind {
        Kind::Cqe128 => 2 * CQE,
        Kind::QpDbrec | Kind::CqDbrec | Kind::UarDb => DB,
        _ => return Ok(()),
    };
    Err(top(format!("{kind}: {} {len} bytes, got more than {window}", fixed_length_what(kind))))
}

/// The kind of an input longer than the window, from its start.
fn choose_kind_of_start(bytes: &[u8], asked: Kind, window: usize) -> Result<(Kind, String), ErrorAt> {
    if asked != Kind::Auto {
        return Ok((asked, format!("--kind {asked}")));
    }
    let not_wqe = match WqeView::new(bytes) {
        Ok(v) if v.ctrl().opcode().is_known() => {
            let (op, ds) = (v.ctrl().opcode(), v.ctrl().ds());
            return Ok((
                Kind::Wqe,
                format!(
                    "more than {window} bytes starting with a valid control segment, opcode {op}, ds {ds}: \
                     decoded as wqe, one after another as the input is read"
                ),
            ));
        }
        Ok(v) => format!("opcode {} is not a send WQE opcode", v.ctrl().opcode()),
        Err(e) => e.to_string(),
    };
    Err(top(format!(
        "cannot tell what more than {window} bytes are: not a WQE ({not_wqe}); a CQE is 64 bytes (128 for cqe128), \
         a doorbell record or UAR doorbell 8. Use --kind wqe|cqe|err-cqe"
    )))
}

/// WQEs back to back until the input ends or one is malformed.
fn stream_wqes(b: &mut Buffered<'_>, reason: &str, sink: &mut dyn Sink) -> Result<(), StreamError> {
    let mut at = 0;
    loop {
        b.fill(WQE_LOOKAHEAD);
        let rest = b.rest();
        // Bytes cut off by a read error are not a truncated WQE: the error says what happened.
        if rest.is_empty() || (b.error.is_some() && !holds_whole_wqe(rest)) {
            return Ok(());
        }
        let d = decode_wqe(rest, at, reason);
        let step = (d.wqebbs.unwrap_or(0) * BB).min(rest.len());
        let stop = !d.errors.is_empty() || step == 0;
        sink.item(d)?;
        if stop {
            return Ok(());
        }
        b.advance(step);
        at += step;
    }
}

/// 64-byte CQEs until the input ends.
fn stream_cqes(
    b: &mut Buffered<'_>,
    kind: Kind,
    opts: &Options,
    reason: &str,
    sink: &mut dyn Sink,
) -> Result<(), StreamError> {
    for i in 0usize.. {
        b.fill(CQE);
        let rest = b.rest();
        if rest.is_empty() || (b.error.is_some() && rest.len() < CQE) {
            break;
        }
        if rest.len() < CQE {
            return Err(StreamError::Input(ErrorAt {
                error: format!(
                    "{kind}: a CQE is {CQE} bytes, and the input ends {} bytes into CQE {i} \
                     (its length is not a multiple of {CQE})",
                    rest.len()
                ),
                offset: Some(i * CQE),
            }));
        }
        let own = opts.ownership.map(|(n, m)| (n.wrapping_add(i as u32), m));
        sink.item(decode_cqe64_item(&rest[..CQE], i * CQE, kind == Kind::ErrCqe, own, reason))?;
        b.advance(CQE);
    }
    Ok(())
}

fn top(error: String) -> ErrorAt {
    ErrorAt { error, offset: None }
}

/// The kind to decode as, and why.
pub fn choose_kind(bytes: &[u8], asked: Kind) -> Result<(Kind, String), ErrorAt> {
    let len = bytes.len();
    if len == 0 {
        return Err(top("empty input: no bytes to decode".into()));
    }
    if asked != Kind::Auto {
        return Ok((asked, format!("--kind {asked}")));
    }
    if len == DB {
        return Ok((
            Kind::UarDb,
            "8 bytes: decoded as uar-db; use --kind qp-dbrec or cq-dbrec for a doorbell record".into(),
        ));
    }
    let not_wqe = match WqeView::new(bytes) {
        Ok(v) => {
            let op = v.ctrl().opcode();
            let ds = v.ctrl().ds();
            if !op.is_known() {
                format!("opcode {op} is not a send WQE opcode")
            } else if !len.is_multiple_of(DS) {
                format!("{len} bytes is not a whole number of 16-byte units")
            } else {
                return Ok((
                    Kind::Wqe,
                    format!(
                        "{len} bytes: a valid control segment, opcode {op}, ds {ds} within the input: decoded as wqe"
                    ),
                ));
            }
        }
        Err(e @ WqeDecodeError::DsBeyondBuffer { .. }) => {
            let op = mlx5_wqe_ctrl_seg::read_from_prefix(bytes).map_or(WqeOpcode::NOP, |(c, _)| c.opcode());
            if op.is_known() && len != CQE && len != 2 * CQE {
                return Ok((
                    Kind::Wqe,
                    format!(
                        "{len} bytes starting with a control segment of opcode {op} ({e}): decoded as a truncated wqe"
                    ),
                ));
            }
            e.to_string()
        }
        Err(e) => e.to_string(),
    };
    match len {
        CQE => Ok((Kind::Cqe, format!("64 bytes: decoded as cqe; not a WQE: {not_wqe}"))),
        128 => Ok((Kind::Cqe128, format!("128 bytes: decoded as cqe128; not a WQE: {not_wqe}"))),
        _ => Err(top(format!(
            "cannot tell what {len} bytes are: not a WQE ({not_wqe}); a CQE is 64 bytes (128 for cqe128), \
             a doorbell record or UAR doorbell 8. Use --kind wqe|cqe|err-cqe|cqe128|qp-dbrec|cq-dbrec|uar-db"
        ))),
    }
}

// ------------------------------------------------------------------- WQEs

/// Where a WQE decode error points, relative to the WQE.
fn wqe_error_offset(e: &WqeDecodeError) -> usize {
    let qpn_ds = mlx5_wqe_ctrl_seg::LAYOUT.field("qpn_ds").map_or(4, |f| f.offset);
    match *e {
        WqeDecodeError::TooShort { .. } | WqeDecodeError::BadAtomicOpmod { .. } => 0,
        WqeDecodeError::UnsupportedOpcode { .. } => 0,
        WqeDecodeError::ZeroDs | WqeDecodeError::DsBeyondBuffer { .. } => qpn_ds,
        WqeDecodeError::MissingSegment { offset, .. }
        | WqeDecodeError::InlineOverrun { offset, .. }
        | WqeDecodeError::AtomicLocalInline { offset }
        | WqeDecodeError::AtomicExtraSegments { offset } => offset,
    }
}

fn wqe_error(e: &WqeDecodeError, base: usize) -> ErrorAt {
    ErrorAt { error: e.to_string(), offset: Some(base + wqe_error_offset(e)) }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 { format!("{n} {one}") } else { format!("{n} {one}s") }
}

fn wqe_summary(c: &CtrlFields, base: usize) -> String {
    let ds = usize::from(c.ds);
    let mut s = format!(
        "WQE: {}, ds {ds} ({} bytes), {}, QPN {:#08x}, wqe_index {:#06x}",
        enum_text(c.opcode.name(), u64::from(c.opcode.0), 2),
        ds * DS,
        plural((ds * DS).div_ceil(BB), "WQEBB"),
        c.qpn,
        c.wqe_index
    );
    if c.opmod != 0 {
        s.push_str(&format!(", opmod {:#04x}", c.opmod));
    }
    if base != 0 {
        s.push_str(&format!(", at input offset {base:#05x}"));
    }
    s
}

/// The summary line [`decode`] gives the WQE at the start of `bytes`, worked
/// out without building its decode tree; `None` when the WQE has an error or
/// is longer than one read of the decoder (then only [`decode`] says the same).
pub fn wqe_line(bytes: &[u8]) -> Option<String> {
    wqe_line_fields(bytes).map(|c| wqe_summary(&c, 0))
}

/// The control fields [`wqe_line`] words its line from, under the same
/// conditions (`None` when it gives `None`).
pub fn wqe_line_fields(bytes: &[u8]) -> Option<CtrlFields> {
    if bytes.len() > WQE_LOOKAHEAD {
        return None;
    }
    let view = WqeView::new(bytes).ok()?;
    if view.segments().any(|s| s.is_err()) {
        return None;
    }
    match view.parse() {
        Ok(_) | Err(WqeDecodeError::UnsupportedOpcode { .. }) => {}
        Err(_) => return None,
    }
    Some(view.ctrl_fields())
}

/// Decode the WQE at the start of `bytes` (input offset `base`).
fn decode_wqe(bytes: &[u8], base: usize, reason: &str) -> Decoded {
    let mut d = Decoded::new(Kind::Wqe, reason, base);
    let Ok((ctrl, _)) = mlx5_wqe_ctrl_seg::read_from_prefix(bytes) else {
        let e = WqeDecodeError::TooShort { have: bytes.len() };
        d.summary = format!("WQE: {} bytes, too short for a control segment", bytes.len());
        d.length = bytes.len();
        d.errors.push(wqe_error(&e, base));
        return d;
    };
    let c = CtrlFields::from_seg(&ctrl);
    d.summary = wqe_summary(&c, base);
    let view = match WqeView::new(bytes) {
        Ok(v) => v,
        Err(e) => {
            // Show the control segment that did decode, then the error.
            let mut n = struct_node(&mlx5_wqe_ctrl_seg::LAYOUT, bytes, 0);
            n.wqebb = Some(0);
            d.segments.push(n);
            d.length = bytes.len().min(BB);
            d.errors.push(wqe_error(&e, base));
            return d;
        }
    };
    let ds_bytes = view.bytes().len();
    let wqebbs = view.wqebbs();
    d.wqebbs = Some(wqebbs);
    d.length = bytes.len().min(wqebbs * BB);
    for item in view.segments() {
        match item {
            Ok((off, seg)) => d.segments.push(segment_node(off, &seg, view.bytes())),
            Err(e) => {
                d.errors.push(wqe_error(&e, base));
                break;
            }
        }
    }
    if d.errors.is_empty() {
        match view.parse() {
            Ok(_) => {}
            Err(WqeDecodeError::UnsupportedOpcode { opcode }) => {
                if opcode.is_known() {
                    d.notes.push(format!(
                        "opcode {opcode}: the segments after the control segment are not decoded (shown raw)"
                    ));
                } else {
                    d.notes.push(format!(
                        "opcode {opcode} is not a send WQE opcode the spec names: the segments after the control segment are shown raw"
                    ));
                }
            }
            Err(e) => d.errors.push(wqe_error(&e, base)),
        }
    }
    if d.length > ds_bytes {
        d.notes.push(format!("{} trailing bytes ignored (beyond ds)", d.length - ds_bytes));
    }
    d
}

fn layout_node(layout: &'static StructLayout, wqe: &[u8], off: usize) -> Node {
    let end = off.saturating_add(layout.size).min(wqe.len());
    struct_node(layout, wqe.get(off..end).unwrap_or(&[]), off)
}

/// The node for one segment of a WQE whose bytes (`ds * 16`) are `wqe`.
fn segment_node(off: usize, seg: &Segment<'_>, wqe: &[u8]) -> Node {
    let wqebb = off / BB;
    let mut n = match *seg {
        Segment::Inline { data, .. } => {
            let mut n = layout_node(&mlx5_wqe_inl_data_seg::LAYOUT, wqe, off);
            let hdr = mlx5_wqe_inl_data_seg::LAYOUT.size;
            let seg_len = inline_seg_bytes(data.len());
            n.payload = Some(Payload { offset: off + hdr, len: data.len(), bytes: data.to_vec() });
            n.notes.push(format!(
                "inline data: {} bytes; segment {seg_len} bytes [{off:#05x}-{:#05x}]",
                data.len(),
                off + seg_len - 1
            ));
            let pad = wqe.get(off + hdr + data.len()..off + seg_len).unwrap_or(&[]);
            if pad.iter().any(|b| *b != 0) {
                n.warnings.push(format!("inline padding non-zero ({} bytes after the data)", pad.len()));
            }
            let last = (off + seg_len - 1) / BB;
            if last != wqebb {
                n.notes.push(format!("spans WQEBB {wqebb} to WQEBB {last}"));
            }
            n
        }
        Segment::Opaque(raw) => Node {
            offset: off,
            layout: seg.layout_name(),
            payload: Some(Payload { offset: off, len: raw.len(), bytes: raw.to_vec() }),
            ..Node::default()
        },
        _ => match layout_by_name(seg.layout_name()) {
            Some(l) => layout_node(l, wqe, off),
            None => Node {
                offset: off,
                layout: seg.layout_name(),
                notes: vec!["no layout of this name in the spec".into()],
                ..Node::default()
            },
        },
    };
    n.wqebb = Some(wqebb);
    n
}

// ------------------------------------------------------------------- CQEs

fn is_err_opcode(op: CqeOpcode) -> bool {
    op == CqeOpcode::REQ_ERR || op == CqeOpcode::RESP_ERR
}

/// The CQE structure at `off` of the item, with the layout its opcode (or
/// `force_err`) calls for, plus the notes that go with it.
fn cqe64_node(cqe: &[u8], off: usize, force_err: bool) -> (Node, Vec<String>) {
    let mut notes = Vec::new();
    let Ok(q) = mlx5_cqe64::read_from_bytes(cqe) else {
        return (Node { offset: off, layout: "unparsed", ..Node::default() }, notes);
    };
    let op = q.opcode();
    let layout = if is_err_opcode(op) || force_err { &mlx5_err_cqe::LAYOUT } else { &mlx5_cqe64::LAYOUT };
    if is_err_opcode(op) && !force_err {
        notes.push(format!("op_own.opcode is {op}: fields shown with the mlx5_err_cqe layout"));
    } else if force_err && !is_err_opcode(op) {
        notes.push(format!("op_own.opcode is {op}, not an error opcode; mlx5_err_cqe layout used as asked"));
    }
    (struct_node(layout, cqe, off), notes)
}

fn cqe_summary(cqe: &[u8], base: usize) -> String {
    let Ok(q) = mlx5_cqe64::read_from_bytes(cqe) else {
        return "CQE".into();
    };
    let (op, fmt) = (q.opcode(), q.format());
    let mut s = format!(
        "CQE: {}, format {}, owner {}, QPN {:#08x}, wqe_counter {:#06x}",
        enum_text(op.name(), u64::from(op.0), 1),
        enum_text(fmt.name(), u64::from(fmt.0), 1),
        u8::from(q.owner()),
        q.qpn(),
        q.wqe_counter()
    );
    if base != 0 {
        s.push_str(&format!(", at input offset {base:#05x}"));
    }
    s
}

/// The `Completion:` line for a decoded CQE.
pub fn completion_line(c: &Completion) -> String {
    let op8 = |o: WqeOpcode| enum_text(o.name(), u64::from(o.0), 2);
    match *c {
        Completion::Requester { wqe_opcode, qpn, wqe_counter, byte_cnt, timestamp } => format!(
            "Completion: requester, WQE {} on QPN {qpn:#08x} at wqe_counter {wqe_counter:#06x}, byte_cnt {byte_cnt}, timestamp {timestamp:#x}",
            op8(wqe_opcode)
        ),
        Completion::Responder { opcode, qpn, wqe_counter, byte_cnt, imm } => {
            let mut s = format!(
                "Completion: responder {opcode} on QPN {qpn:#08x}, wqe_counter {wqe_counter:#06x}, byte_cnt {byte_cnt}"
            );
            if let Some(imm) = imm {
                s.push_str(&format!(", imm {imm:#010x}"));
            }
            s
        }
        Completion::Error(e) => format!(
            "Completion: error {} syndrome {} vendor_err_synd {:#04x} hw_err_synd {:#04x} hw_synd_type {:#04x}, WQE {} on QPN {:#08x} at wqe_counter {:#06x}",
            e.opcode,
            enum_text(e.syndrome.name(), u64::from(e.syndrome.0), 2),
            e.vendor_err_synd,
            e.hw_err_synd,
            e.hw_synd_type,
            op8(e.wqe_opcode),
            e.qpn,
            e.wqe_counter
        ),
        Completion::Other { opcode, qpn, wqe_counter } => {
            let mut s = format!(
                "Completion: {} on QPN {qpn:#08x}, wqe_counter {wqe_counter:#06x}",
                enum_text(opcode.name(), u64::from(opcode.0), 1)
            );
            if opcode == CqeOpcode::INVALID {
                s.push_str(" (opcode INVALID: the slot has not been written by hardware)");
            }
            s
        }
    }
}

/// Completion and ownership lines for the 64-byte CQE `cqe64`.
fn completion_notes(d: &mut Decoded, full: &[u8], cqe64: &[u8], cqe64_off: usize, own: Option<(u32, u32)>) {
    match decode_cqe(full) {
        Ok(c) => d.notes.push(completion_line(&c)),
        Err(CqeError::Compressed) => d.notes.push(format!("Completion: not decoded: {}", CqeError::Compressed)),
        Err(e) => d.errors.push(ErrorAt { error: e.to_string(), offset: Some(d.offset) }),
    }
    let Some((n, ncqe)) = own else { return };
    let (owner, opcode) =
        mlx5_cqe64::ref_from_bytes(cqe64).map_or((0, CqeOpcode(0)), |c| (u8::from(c.owner()), c.opcode()));
    let expected = owner_bit_for(n, ncqe);
    match poll_cqe(cqe64, n, ncqe) {
        Ok(CqePoll::Ready(_)) => d.notes.push(format!(
            "Ownership: software owns this CQE at consumer index {n} (CQ of {ncqe}, slot {}: owner bit {}, expected {expected})",
            n % ncqe,
            owner
        )),
        Ok(CqePoll::NotReady) => {
            let why = if opcode == CqeOpcode::INVALID {
                "opcode INVALID".to_owned()
            } else {
                format!("owner bit {owner}, software expects {expected}")
            };
            d.notes.push(format!(
                "Ownership: hardware owns it at consumer index {n} (CQ of {ncqe}, slot {}: {why})",
                n % ncqe
            ));
        }
        Err(e) => d.errors.push(ErrorAt { error: e.to_string(), offset: Some(d.offset + cqe64_off) }),
    }
}

fn decode_cqe64_item(cqe: &[u8], base: usize, force_err: bool, own: Option<(u32, u32)>, reason: &str) -> Decoded {
    let kind = if force_err { Kind::ErrCqe } else { Kind::Cqe };
    let mut d = Decoded::new(kind, reason, base);
    d.length = cqe.len();
    d.summary = cqe_summary(cqe, base);
    let (node, notes) = cqe64_node(cqe, 0, force_err);
    d.segments.push(node);
    d.notes.extend(notes);
    completion_notes(&mut d, cqe, cqe, 0, own);
    d
}

fn decode_cqe128(bytes: &[u8], own: Option<(u32, u32)>, reason: &str) -> Decoded {
    let mut d = Decoded::new(Kind::Cqe128, reason, 0);
    d.length = bytes.len();
    let at = mlx5_cqe128::LAYOUT.field("cqe64").map_or(MLX5_CQE128_CQE64_OFFSET as usize, |f| f.offset);
    let (inline, cqe64) = bytes.split_at(at.min(bytes.len()));
    d.summary = cqe_summary(cqe64, 0).replacen("CQE:", "CQE128:", 1);
    let name = mlx5_cqe128::LAYOUT.field("inline_data").map_or("inline_data", |f| f.name);
    d.segments.push(Node {
        offset: 0,
        layout: name,
        payload: Some(Payload { offset: 0, len: inline.len(), bytes: inline.to_vec() }),
        notes: vec!["inline scatter data (responder CQEs of small receives)".into()],
        ..Node::default()
    });
    let (node, notes) = cqe64_node(cqe64, at, false);
    d.segments.push(node);
    d.notes.extend(notes);
    completion_notes(&mut d, bytes, cqe64, at, own);
    d
}

// -------------------------------------------------------------- doorbells

fn decode_doorbell(kind: Kind, b: [u8; DB], reason: &str) -> Decoded {
    let mut d = Decoded::new(kind, reason, 0);
    d.length = DB;
    match kind {
        Kind::QpDbrec => {
            d.segments.push(struct_node(&mlx5_qp_dbrec::LAYOUT, &b, 0));
            if let Ok(r) = mlx5_qp_dbrec::read_from_bytes(&b) {
                d.summary = format!(
                    "QP doorbell record: rcv_wqe_counter {:#06x}, send_wqe_counter {:#06x}",
                    r.rcv_wqe_counter(),
                    r.send_wqe_counter()
                );
                d.notes.push(format!(
                    "send_wqe_counter {0:#06x}: the next free WQEBB (producer index after the last posted WQE, mod 2^16); \
                     rcv_wqe_counter {1:#06x}: receive queue head",
                    r.send_wqe_counter(),
                    r.rcv_wqe_counter()
                ));
            }
        }
        Kind::CqDbrec => {
            d.segments.push(struct_node(&mlx5_cq_dbrec::LAYOUT, &b, 0));
            if let Ok(r) = mlx5_cq_dbrec::read_from_bytes(&b) {
                d.summary = format!(
                    "CQ doorbell record: cons_index {:#08x}, arm_sn {}, arm_cmd {:#x}, arm_ci {:#08x}",
                    r.cons_index(),
                    r.arm_sn(),
                    r.arm_cmd(),
                    r.arm_ci()
                );
            }
        }
        _ => {
            d.segments.push(struct_node(&mlx5_uar_db::LAYOUT, &b, 0));
            let u = decode_uar_doorbell(b);
            d.summary = format!("UAR doorbell: QPN {:#08x}, wqe_index {:#06x}", u.qpn, u.wqe_index);
            d.notes.push(match u.style {
                DoorbellStyle::IndexAndQpn => format!(
                    "Doorbell: NVSHMEM/DOCA style {{BE32(pi << 8), BE32(qpn << 8)}}: producer index {:#06x} on QPN {:#08x}",
                    u.wqe_index, u.qpn
                ),
                DoorbellStyle::RdmaCore => format!(
                    "Doorbell: rdma-core style (first 8 bytes of the last WQE's control segment): {} ds {}, wqe_index {:#06x} on QPN {:#08x}",
                    enum_text(u.opcode.name(), u64::from(u.opcode.0), 2),
                    u.ds,
                    u.wqe_index,
                    u.qpn
                ),
            });
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::print::{render_json, render_text};
    use marrow_mlx5::prelude::*;
    use proptest::prelude::*;

    fn opts(kind: Kind) -> Options {
        Options { kind, ownership: None }
    }

    fn rdma_write() -> Vec<u8> {
        let sge = [Sge { addr: 0x1000, length: 8, lkey: 0x11 }];
        let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: 0x2000, rkey: 0x22 }, sgl: &sge };
        let mut out = vec![0u8; 48];
        build_wqe(&CtrlParams::signaled(5, 0x1234), &op, &mut out).unwrap();
        out
    }

    #[test]
    fn auto_picks_wqe_and_walks_segments() {
        let r = decode(&rdma_write(), &Options::default()).unwrap();
        assert_eq!(r.kind, Kind::Wqe);
        assert_eq!(r.items.len(), 1);
        let d = &r.items[0];
        assert!(d.errors.is_empty());
        assert_eq!(d.summary, "WQE: RDMA_WRITE (0x08), ds 3 (48 bytes), 1 WQEBB, QPN 0x001234, wqe_index 0x0005");
        let layouts: Vec<_> = d.segments.iter().map(|n| (n.offset, n.layout)).collect();
        assert_eq!(layouts, [(0, "mlx5_wqe_ctrl_seg"), (0x10, "mlx5_wqe_raddr_seg"), (0x20, "mlx5_wqe_data_seg")]);
    }

    #[test]
    fn two_wqes_back_to_back() {
        let mut b = rdma_write();
        b.resize(64, 0);
        b.extend(rdma_write());
        let r = decode(&b, &Options::default()).unwrap();
        assert_eq!(r.items.len(), 2);
        assert_eq!(r.items[1].offset, 64);
        assert_eq!(r.items[0].notes, ["16 trailing bytes ignored (beyond ds)"]);
    }

    #[test]
    fn zero_ds_is_an_error_at_qpn_ds() {
        let mut b = rdma_write();
        b[7] &= !0x3f;
        let r = decode(&b, &opts(Kind::Wqe)).unwrap();
        let e = &r.items[0].errors[0];
        assert_eq!(e.offset, Some(4));
        assert!(e.error.contains("ds is 0"), "{e:?}");
        assert_eq!(r.items[0].segments.len(), 1, "the control segment is still shown");
    }

    #[test]
    fn err_cqe_picks_err_layout() {
        let c = Completion::Error(ErrorCompletion {
            opcode: CqeOpcode::REQ_ERR,
            syndrome: Syndrome::REMOTE_ACCESS_ERR,
            vendor_err_synd: 0x88,
            hw_err_synd: 0,
            hw_synd_type: 0,
            wqe_opcode: WqeOpcode::RDMA_WRITE,
            qpn: 0x1234,
            wqe_counter: 5,
        });
        let b = encode_cqe(&c, true).unwrap();
        let r = decode(&b, &Options { kind: Kind::Auto, ownership: Some((8, 8)) }).unwrap();
        assert_eq!(r.kind, Kind::Cqe);
        let d = &r.items[0];
        assert_eq!(d.segments[0].layout, "mlx5_err_cqe");
        let syn = d.segments[0].fields.iter().find(|f| f.name == "syndrome").unwrap();
        assert_eq!(syn.name_str.as_deref(), Some("REMOTE_ACCESS_ERR"));
        assert!(d.notes.iter().any(|n| n.starts_with("Completion: error REQ_ERR syndrome REMOTE_ACCESS_ERR (0x13)")));
        assert!(d.notes.iter().any(|n| n.starts_with("Ownership: software owns")), "{:?}", d.notes);
        let r = decode(&b, &Options { kind: Kind::Auto, ownership: Some((0, 8)) }).unwrap();
        assert!(r.items[0].notes.iter().any(|n| n.starts_with("Ownership: hardware owns")));
    }

    #[test]
    fn lengths_no_kind_takes_are_refused() {
        assert!(decode(&[], &Options::default()).unwrap_err().error.contains("empty"));
        let e = decode(&[1u8; 37], &Options::default()).unwrap_err();
        assert!(e.error.contains("cannot tell what 37 bytes are"), "{e}");
        assert!(decode(&[0u8; 9], &opts(Kind::UarDb)).is_err());
        assert!(decode(&[0u8; 65], &opts(Kind::Cqe)).is_err());
        assert!(decode(&[0u8; 64], &Options { kind: Kind::Wqe, ownership: Some((0, 8)) }).is_err());
        assert!(decode(&[0u8; 64], &Options { kind: Kind::Cqe, ownership: Some((0, 6)) }).is_err());
    }

    #[test]
    fn eight_bytes_default_to_uar_db() {
        let b = uar_doorbell_index_qpn(6, 0x1234).unwrap();
        let r = decode(&b, &Options::default()).unwrap();
        assert_eq!(r.kind, Kind::UarDb);
        assert!(r.reason.contains("--kind qp-dbrec or cq-dbrec"));
        assert!(r.items[0].notes[0].contains("NVSHMEM/DOCA"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn any_bytes_any_kind_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..1100),
            k in 0usize..8,
            own in proptest::option::of((any::<u32>(), 0u32..70)),
        ) {
            let kind = if k == 7 { Kind::Auto } else { Kind::CONCRETE[k] };
            for o in [Options { kind, ownership: None }, Options { kind, ownership: own }] {
                if let Ok(r) = decode(&bytes, &o) {
                    let _ = render_text(&r);
                    let _ = render_json(&r);
                }
            }
        }

        #[test]
        fn wqe_shaped_bytes_never_panic(
            ctrl in (any::<u8>(), any::<u16>(), 0u8..0x30, 0u8..64),
            rest in proptest::collection::vec(any::<u8>(), 0..1100),
        ) {
            // Mostly valid control segments, so the segment walk is reached.
            let (opmod, idx, op, ds) = ctrl;
            let mut b = vec![opmod, (idx >> 8) as u8, idx as u8, op, 0, 0x12, 0x34, ds];
            b.extend_from_slice(&[0u8; 8]);
            b.extend(rest);
            let r = decode(&b, &opts(Kind::Wqe)).unwrap();
            let _ = render_text(&r);
            let _ = render_json(&r);
        }
    }
}
