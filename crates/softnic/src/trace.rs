//! The register trace: every doorbell, doorbell-record read, WQE fetch, CQE
//! write and QP state change, with a timestamp, the address and the raw
//! bytes. The file format is documented in `docs/TRACE.md`:
//!
//! ```text
//! file   := "MRWTRACE" version:u32le=1 reserved:u32le  record*
//! record := t_ns:u64le kind:u8 reserved:u8 len:u16le qpn:u32le obj:u32le
//!           reserved:u32le addr:u64le bytes[len]          (32-byte header)
//! ```

use std::io::{BufRead, Read, Write};
use zerocopy::byteorder::{LittleEndian as LE, U16, U32, U64};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout, Unaligned};

/// File magic.
pub const MAGIC: &[u8; 8] = b"MRWTRACE";
/// Format version.
pub const VERSION: u32 = 1;
const HEADER: usize = size_of::<RecordHeader>();
const FILE_HEADER: usize = size_of::<FileHeader>();

/// The file's first bytes: [`MAGIC`], then [`VERSION`] and a reserved word.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct FileHeader {
    magic: [u8; 8],
    version: U32<LE>,
    reserved: U32<LE>,
}

/// The header before each record's bytes, little-endian on every host.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct RecordHeader {
    t_ns: U64<LE>,
    kind: u8,
    reserved0: u8,
    len: U16<LE>,
    qpn: U32<LE>,
    obj: U32<LE>,
    reserved1: U32<LE>,
    addr: U64<LE>,
}

// The file format's sizes: readers written against it count on them.
const _: () = assert!(size_of::<FileHeader>() == 16);
const _: () = assert!(size_of::<RecordHeader>() == 32);

impl RecordHeader {
    /// The fields of `rec` except its bytes, taken from the header.
    fn fill(&self, rec: &mut Record) {
        rec.t_ns = self.t_ns.get();
        rec.kind = Kind(self.kind);
        rec.qpn = self.qpn.get();
        rec.obj = self.obj.get();
        rec.addr = self.addr.get();
    }
}
/// The most bytes one record may carry: its length is a `u16`, so a reader
/// never allocates more than this for a record, whatever the file says.
pub const MAX_RECORD_BYTES: usize = u16::MAX as usize;

/// What a record is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kind(pub u8);

impl Kind {
    /// 8 bytes found in a UAR doorbell register; `addr` = offset in the page.
    pub const DOORBELL: Kind = Kind(1);
    /// A doorbell found and dropped by fault injection.
    pub const DOORBELL_DROPPED: Kind = Kind(2);
    /// The QP doorbell record read on a doorbell; bytes = the 8-byte record.
    pub const DBREC_READ: Kind = Kind(3);
    /// A send WQE fetched; `addr` = byte offset in the send queue; bytes = `ds*16`.
    pub const WQE_FETCH: Kind = Kind(4);
    /// A CQE written; `obj` = CQN, `addr` = byte offset in the CQ buffer.
    pub const CQE_WRITE: Kind = Kind(5);
    /// A QP state change; bytes = [old, new] (see `QpState`).
    pub const QP_STATE: Kind = Kind(6);
    /// A CQ overflowed; `obj` = CQN; bytes = producer and consumer index (u32le each).
    pub const CQ_OVERFLOW: Kind = Kind(7);
    /// A fault was injected; bytes = a UTF-8 description.
    pub const FAULT: Kind = Kind(8);
    /// A receive WQE consumed; `addr` = byte offset in the receive queue.
    pub const RECV_WQE_FETCH: Kind = Kind(9);
    /// Why a WQE failed; bytes = a UTF-8 description.
    pub const WQE_ERROR: Kind = Kind(10);
    /// A whole WQE found in a BlueFlame register; `addr` = offset in the UAR page.
    pub const BLUEFLAME: Kind = Kind(11);

    /// A short name.
    pub fn name(self) -> &'static str {
        match self.0 {
            1 => "doorbell",
            2 => "doorbell-dropped",
            3 => "dbrec-read",
            4 => "wqe-fetch",
            5 => "cqe-write",
            6 => "qp-state",
            7 => "cq-overflow",
            8 => "fault",
            9 => "recv-wqe-fetch",
            10 => "wqe-error",
            11 => "blueflame",
            _ => "unknown",
        }
    }
}

/// One record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Nanoseconds since the trace was enabled.
    pub t_ns: u64,
    /// What happened.
    pub kind: Kind,
    /// The QP concerned, or `u32::MAX`.
    pub qpn: u32,
    /// A second object (the CQN for CQE records), or 0.
    pub obj: u32,
    /// Where: an offset in the object named by `kind`.
    pub addr: u64,
    /// The raw bytes.
    pub bytes: Vec<u8>,
}

/// An in-memory trace being recorded.
#[derive(Debug)]
pub struct Recorder {
    buf: Vec<u8>,
    start: std::time::Instant,
    cap: usize,
    dropped: u64,
}

impl Recorder {
    /// A recorder that keeps at most `cap` bytes (then counts what it drops).
    pub fn new(cap: usize) -> Self {
        let mut buf = Vec::with_capacity(1 << 16);
        buf.extend_from_slice(FileHeader { magic: *MAGIC, version: VERSION.into(), reserved: 0.into() }.as_bytes());
        Recorder { buf, start: std::time::Instant::now(), cap, dropped: 0 }
    }

    /// Append a record.
    pub fn record(&mut self, kind: Kind, qpn: u32, obj: u32, addr: u64, bytes: &[u8]) {
        let len = bytes.len().min(u16::MAX as usize);
        if self.buf.len() + HEADER + len > self.cap {
            self.dropped += 1;
            return;
        }
        let t = self.start.elapsed().as_nanos() as u64;
        let h = RecordHeader {
            t_ns: t.into(),
            kind: kind.0,
            reserved0: 0,
            len: (len as u16).into(),
            qpn: qpn.into(),
            obj: obj.into(),
            reserved1: 0.into(),
            addr: addr.into(),
        };
        self.buf.extend_from_slice(h.as_bytes());
        self.buf.extend_from_slice(&bytes[..len]);
    }

    /// Records dropped because the cap was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The trace file's bytes so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Write the trace file.
    pub fn save(&self, path: &std::path::Path) -> std::io::Result<()> {
        let mut f = std::fs::File::create(path)?;
        f.write_all(&self.buf)
    }
}

/// What is wrong with a trace file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// Not a marrow trace.
    #[error("not a marrow trace: the file does not start with \"MRWTRACE\"")]
    BadMagic,
    /// A version this reader does not know.
    #[error("trace format version {0}, this reader knows version 1")]
    BadVersion(u32),
    /// The file could not be read on.
    #[error("cannot read the trace at byte {offset:#x}: {message}")]
    Read {
        /// Where reading failed.
        offset: usize,
        /// The system's error.
        message: String,
    },
    /// A record runs past the end of the file.
    #[error("record at byte {offset:#x} is truncated ({need} bytes needed, {have} left)")]
    Truncated {
        /// Where the record starts.
        offset: usize,
        /// Bytes it needs.
        need: usize,
        /// Bytes left.
        have: usize,
    },
}

/// Parse a trace file. Never panics; a truncated tail is an error naming
/// where it starts, after every complete record before it.
pub fn parse(bytes: &[u8]) -> (Vec<Record>, Option<TraceError>) {
    let mut r = match Reader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut out = Vec::new();
    for rec in &mut r {
        match rec {
            Ok(rec) => out.push(rec),
            Err(e) => return (out, Some(e)),
        }
    }
    (out, None)
}

/// The records of a trace file, read one at a time from any reader: what
/// it holds is one record (at most [`MAX_RECORD_BYTES`] of payload),
/// whatever the file's size. Yields `Err` once, at the first damage, then ends.
#[derive(Debug)]
pub struct Reader<R> {
    src: R,
    /// Bytes read so far: where the next record starts.
    offset: usize,
    done: bool,
}

impl<R: Read> Reader<R> {
    /// Reads and checks the file header.
    pub fn new(mut src: R) -> Result<Self, TraceError> {
        let mut h = FileHeader::new_zeroed();
        let n = read_full(&mut src, h.as_mut_bytes())
            .map_err(|e| TraceError::Read { offset: 0, message: e.to_string() })?;
        if n < FILE_HEADER || &h.magic != MAGIC {
            return Err(TraceError::BadMagic);
        }
        let version = h.version.get();
        if version != VERSION {
            return Err(TraceError::BadVersion(version));
        }
        Ok(Reader { src, offset: FILE_HEADER, done: false })
    }

    /// Bytes of the file read so far.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Read the next record into `rec`, reusing its byte buffer (a reader of
    /// a long trace then allocates once, not once per record): `Ok(false)`
    /// at the end of the file. After an error, or the end, it reads nothing more.
    pub fn next_into(&mut self, rec: &mut Record) -> Result<bool, TraceError> {
        if self.done {
            return Ok(false);
        }
        let r = self.read_record(rec);
        self.done = !matches!(r, Ok(true));
        r
    }

    fn read_record(&mut self, rec: &mut Record) -> Result<bool, TraceError> {
        let at = self.offset;
        let read_err = |e: std::io::Error| TraceError::Read { offset: at, message: e.to_string() };
        let mut h = RecordHeader::new_zeroed();
        let n = read_full(&mut self.src, h.as_mut_bytes()).map_err(read_err)?;
        if n == 0 {
            return Ok(false);
        }
        if n < HEADER {
            return Err(TraceError::Truncated { offset: at, need: HEADER, have: n });
        }
        let len = usize::from(h.len.get());
        rec.bytes.clear();
        rec.bytes.resize(len.min(MAX_RECORD_BYTES), 0);
        let got = read_full(&mut self.src, &mut rec.bytes).map_err(read_err)?;
        if got < len {
            return Err(TraceError::Truncated { offset: at, need: HEADER + len, have: HEADER + got });
        }
        self.offset = at + HEADER + len;
        h.fill(rec);
        Ok(true)
    }
}

impl<R: BufRead> Reader<R> {
    /// [`Reader::next_into`] for a buffered source: a record that lies whole
    /// in the source's buffer is parsed there and its bytes copied once,
    /// instead of going through [`Read`] twice and zeroing the payload first;
    /// any other is read as [`Reader::next_into`] reads it. Nothing is read
    /// that `next_into` would not read.
    pub fn next_into_buffered(&mut self, rec: &mut Record) -> Result<bool, TraceError> {
        if self.done {
            return Ok(false);
        }
        let Ok(buf) = self.src.fill_buf() else { return self.next_into(rec) };
        let Ok((h, rest)) = RecordHeader::ref_from_prefix(buf) else { return self.next_into(rec) };
        let len = usize::from(h.len.get());
        let Some(bytes) = rest.get(..len) else { return self.next_into(rec) };
        h.fill(rec);
        rec.bytes.clear();
        rec.bytes.extend_from_slice(bytes);
        self.src.consume(HEADER + len);
        self.offset += HEADER + len;
        Ok(true)
    }
}

impl<R: Read> Iterator for Reader<R> {
    type Item = Result<Record, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut rec = Record { t_ns: 0, kind: Kind(0), qpn: 0, obj: 0, addr: 0, bytes: Vec::new() };
        match self.next_into(&mut rec) {
            Ok(true) => Some(Ok(rec)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// Fill `buf` from `src` as far as it goes: the bytes read, short only at the end.
fn read_full(src: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// The trace file `bytes` with only the records `keep` accepts, in order,
/// as raw bytes (the daemon gives a client only its own records). A file
/// that does not parse keeps what parsed; one shorter than the file header
/// is passed back as it was.
pub fn retain(bytes: &[u8], keep: impl Fn(&Record) -> bool) -> Vec<u8> {
    let (records, _) = parse(bytes);
    let mut out = bytes[..FILE_HEADER.min(bytes.len())].to_vec();
    let mut at = FILE_HEADER;
    for r in &records {
        let end = at + HEADER + r.bytes.len();
        if keep(r)
            && let Some(raw) = bytes.get(at..end)
        {
            out.extend_from_slice(raw);
        }
        at = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn records_round_trip() {
        let mut r = Recorder::new(1 << 20);
        r.record(Kind::DOORBELL, 7, 0, 0x800, &[1, 2, 3, 4, 5, 6, 7, 8]);
        r.record(Kind::QP_STATE, 7, 0, 0, &[3, 6]);
        let (recs, err) = parse(r.bytes());
        assert_eq!(err, None);
        assert_eq!(recs.len(), 2);
        assert_eq!((recs[0].kind, recs[0].qpn, recs[0].addr), (Kind::DOORBELL, 7, 0x800));
        assert_eq!(recs[1].bytes, vec![3, 6]);
        let (recs, err) = parse(&r.bytes()[..r.bytes().len() - 1]);
        assert_eq!(recs.len(), 1);
        assert!(matches!(err, Some(TraceError::Truncated { .. })));
    }

    #[test]
    fn the_cap_drops_and_counts() {
        let mut r = Recorder::new(16 + 40);
        r.record(Kind::FAULT, 1, 0, 0, b"12345678");
        r.record(Kind::FAULT, 1, 0, 0, b"x");
        assert_eq!(r.dropped(), 1);
    }

    /// A reader that counts what is taken from it.
    #[derive(Debug)]
    struct Counting<R> {
        inner: R,
        taken: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.taken.set(self.taken.get() + n);
            Ok(n)
        }
    }

    #[test]
    fn the_reader_takes_one_record_at_a_time_from_an_endless_file() {
        // A valid header, then zeros forever: endless empty records of kind 0.
        let mut header = MAGIC.to_vec();
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&[0; 4]);
        let taken = std::rc::Rc::new(std::cell::Cell::new(0));
        let src = Counting { inner: std::io::Cursor::new(header).chain(std::io::repeat(0)), taken: taken.clone() };
        let mut r = Reader::new(src).unwrap();
        let first = r.next().unwrap().unwrap();
        assert_eq!((first.kind, first.bytes.len()), (Kind(0), 0));
        assert_eq!(taken.get(), 16 + 32, "nothing read past the record asked for");
        assert_eq!(r.take(999).count(), 999);
        assert_eq!(taken.get(), 16 + 32 * 1000);
    }

    #[test]
    fn a_bad_start_is_an_error_not_a_read_to_the_end() {
        let taken = std::rc::Rc::new(std::cell::Cell::new(0));
        let src = Counting { inner: std::io::repeat(0), taken: taken.clone() };
        assert_eq!(Reader::new(src).unwrap_err(), TraceError::BadMagic);
        assert_eq!(taken.get(), 16);
        assert_eq!(Reader::new(&b"MRWTRACE\x02\0\0\0\0\0\0\0"[..]).unwrap_err(), TraceError::BadVersion(2));
        assert_eq!(Reader::new(&b"MRW"[..]).unwrap_err(), TraceError::BadMagic);
    }

    #[test]
    fn a_record_longer_than_the_rest_is_truncated_and_ends_the_reader() {
        let mut r = Recorder::new(1 << 20);
        r.record(Kind::FAULT, 1, 0, 0, &[7; 300]);
        let b = &r.bytes()[..16 + 32 + 10];
        let mut rd = Reader::new(b).unwrap();
        assert_eq!(rd.next(), Some(Err(TraceError::Truncated { offset: 16, need: 332, have: 42 })));
        assert_eq!(rd.next(), None);
    }

    proptest! {
        #[test]
        fn any_bytes_parse_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let mut file = MAGIC.to_vec();
            file.extend_from_slice(&1u32.to_le_bytes());
            file.extend_from_slice(&[0; 4]);
            file.extend_from_slice(&bytes);
            let _ = parse(&file);
            let _ = parse(&bytes);
        }
    }

    #[test]
    fn a_filtered_trace_keeps_exactly_the_records_asked_for_in_order() {
        let mut r = Recorder::new(1 << 20);
        r.record(Kind::DOORBELL, 0x100, 0, 0x800, &[1; 8]);
        r.record(Kind::WQE_FETCH, 0x101, 0, 0, &[2; 64]);
        r.record(Kind::CQE_WRITE, 0x100, 0x80, 0, &[3; 64]);
        r.record(Kind::QP_STATE, 0x102, 0, 0, &[0, 1]);
        let kept = retain(r.bytes(), |x| x.qpn == 0x100);
        let (recs, err) = parse(&kept);
        assert_eq!(err, None);
        let kinds: Vec<Kind> = recs.iter().map(|x| x.kind).collect();
        assert_eq!(kinds, [Kind::DOORBELL, Kind::CQE_WRITE]);
        assert_eq!(recs[1].bytes, [3; 64]);
        assert_eq!(retain(b"junk", |_| true), b"junk".to_vec(), "a bad file is passed back as it was");
    }
}
