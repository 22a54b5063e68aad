//! The register trace: every doorbell, doorbell-record read, WQE fetch, CQE
//! write and QP state change, with a timestamp, the address and the raw
//! bytes. The file format is documented in `docs/TRACE.md`:
//!
//! ```text
//! file   := "MRWTRACE" version:u32le=1 reserved:u32le  record*
//! record := t_ns:u64le kind:u8 reserved:u8 len:u16le qpn:u32le obj:u32le
//!           reserved:u32le addr:u64le bytes[len]          (32-byte header)
//! ```

use std::io::Write;

/// File magic.
pub const MAGIC: &[u8; 8] = b"MRWTRACE";
/// Format version.
pub const VERSION: u32 = 1;
const HEADER: usize = 32;

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
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
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
        self.buf.extend_from_slice(&t.to_le_bytes());
        self.buf.push(kind.0);
        self.buf.push(0);
        self.buf.extend_from_slice(&(len as u16).to_le_bytes());
        self.buf.extend_from_slice(&qpn.to_le_bytes());
        self.buf.extend_from_slice(&obj.to_le_bytes());
        self.buf.extend_from_slice(&0u32.to_le_bytes());
        self.buf.extend_from_slice(&addr.to_le_bytes());
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
    if bytes.len() < 16 || &bytes[..8] != MAGIC {
        return (Vec::new(), Some(TraceError::BadMagic));
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != VERSION {
        return (Vec::new(), Some(TraceError::BadVersion(version)));
    }
    let mut out = Vec::new();
    let mut at = 16;
    while at < bytes.len() {
        let have = bytes.len() - at;
        if have < HEADER {
            return (out, Some(TraceError::Truncated { offset: at, need: HEADER, have }));
        }
        let h = &bytes[at..at + HEADER];
        let u64le = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap_or([0; 8]));
        let u32le = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().unwrap_or([0; 4]));
        let len = u16::from_le_bytes([h[10], h[11]]) as usize;
        if have < HEADER + len {
            return (out, Some(TraceError::Truncated { offset: at, need: HEADER + len, have }));
        }
        out.push(Record {
            t_ns: u64le(0),
            kind: Kind(h[8]),
            qpn: u32le(12),
            obj: u32le(16),
            addr: u64le(24),
            bytes: bytes[at + HEADER..at + HEADER + len].to_vec(),
        });
        at += HEADER + len;
    }
    (out, None)
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
}
