//! Choosing what the bytes are and building the decode tree.
//!
//! The walk over a WQE's segments is `marrow_mlx5::wqe_decode`'s, the CQE
//! decode `marrow_mlx5::cqe`'s and the doorbell decode
//! `marrow_mlx5::doorbell`'s; this module arranges their results, with
//! every structure's fields read through its generated `LAYOUT`.

mod cqe;
mod doorbell;
mod wqe;

pub use cqe::completion_line;
use cqe::{decode_cqe64_item, decode_cqe128};
use doorbell::decode_doorbell;
use wqe::decode_wqe;
pub use wqe::{wqe_line, wqe_line_fields};

use crate::model::{Decoded, ErrorAt, Kind, Report};
use marrow_mlx5::raw::{
    MLX5_CQE_SIZE, MLX5_SEND_WQE_BB, MLX5_SEND_WQE_DS, MLX5_UAR_DOORBELL_SIZE, WqeOpcode, mlx5_wqe_ctrl_seg,
};
use marrow_mlx5::wqe_decode::{WqeDecodeError, WqeView};
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

#[cfg(test)]
mod tests;
