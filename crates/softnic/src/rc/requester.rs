//! The requester half of RC (InfiniBand Architecture Specification vol. 1
//! §9.7, requester side; Linux rxe's `rxe_req.c` and `rxe_comp.c` do the
//! same in software): WQEs become packets numbered by PSN, stay outstanding
//! until acknowledged, and complete strictly in order.
//!
//! | What arrives | What the requester does |
//! |---|---|
//! | ACK for PSN p | completes every SEND and WRITE that ends at or before p; a READ or atomic at or before p whose answer never came is sent again |
//! | READ response | lands at its offset in the local buffers; the last one completes the READ (and, implicitly, everything before it) |
//! | ATOMIC ACKNOWLEDGE | the original value lands in the local buffer; the atomic completes |
//! | NAK PSN sequence error at p | completes what ends before p, sends again from the message holding p |
//! | RNR NAK at p | waits the timer the NAK names, then sends again from p; after `rnr_retry` tries RNR_RETRY_EXC_ERR (7 tries forever) |
//! | NAK invalid request / remote access / remote operational error at p | the message at p fails with REMOTE_INVAL_REQ_ERR / REMOTE_ACCESS_ERR / REMOTE_OP_ERR; the rest are flushed |
//! | nothing for the ACK timeout | sends everything outstanding again; after `retry_cnt` tries TRANSPORT_RETRY_EXC_ERR |
//!
//! The requester never touches the HCA: it returns [`Action`]s (packets to
//! send, WQEs to complete), which the engine carries out in order.

use super::WireAttrs;
use crate::mr::Loc;
use marrow_mlx5::raw::Syndrome;
use marrow_mlx5::wqe::RemoteAddr;
use marrow_mlx5::wqe_decode::{AtomicArgs, CtrlFields};
use marrow_roce::opcode::{Operation, Position, position, request_opcode};
use marrow_roce::packet::{AtomicEth, Packet, Reth};
use marrow_roce::psn;
use marrow_roce::raw::{AethNakCode, AethType, BthOpcode};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Most messages one QP keeps outstanding (a bound on the retransmission
/// state; the PSN space allows 2^23 packets).
pub const MAX_OUTSTANDING: usize = 1024;

/// Inside a long message, every this many packets (at most; half the send
/// window when that is less) ask for an ACK, so the
/// requester hears of progress (and restarts its timer) before the message
/// ends, and a retransmission starts after what was acknowledged.
pub const ACK_EVERY: usize = 64;

/// Packets a QP sends beyond the last one acknowledged, by default: the
/// send window ([`super::WireAttrs::send_window`]). It keeps a long message
/// from overrunning the far end's receive buffer faster than the ACKs come
/// back (a NIC's line rate and credits do this in hardware).
pub const WINDOW: u32 = 1024;

/// Spare message buffers a QP keeps: a send window of 64 KiB messages at
/// MTU 4096 (each at most [`SPARE_MAX`]), so a steady stream of them never
/// goes back to the allocator.
const SPARE_BUFFERS: usize = 64;
/// Spare packet buffers a QP keeps: a send window's worth at MTU 4096 and
/// the default window of 64 KiB messages.
const SPARE_PACKETS: usize = 256;
/// The largest buffer kept spare.
const SPARE_MAX: usize = 1 << 20;

/// The message a WQE asks for.
#[derive(Debug)]
pub enum Message {
    /// RDMA WRITE (with immediate) of `data`.
    Write {
        /// The remote buffer.
        remote: RemoteAddr,
        /// Immediate data.
        imm: Option<u32>,
        /// The bytes, gathered from the WQE's local buffers.
        data: Vec<u8>,
    },
    /// SEND (with immediate) of `data`.
    Send {
        /// Immediate data.
        imm: Option<u32>,
        /// The bytes.
        data: Vec<u8>,
    },
    /// RDMA READ of `len` bytes into `sink`.
    Read {
        /// The remote buffer.
        remote: RemoteAddr,
        /// Bytes.
        len: u32,
        /// The local buffers, in order: (where, length).
        sink: Vec<(Loc, usize)>,
    },
    /// COMPARE_SWAP or FETCH_ADD; the original value lands at `result`.
    Atomic {
        /// The remote 8 bytes.
        remote: RemoteAddr,
        /// `Cs` or `Fa`.
        args: AtomicArgs,
        /// The local 8 bytes.
        result: Loc,
    },
}

impl Message {
    fn is_rd_atomic(&self) -> bool {
        matches!(self, Message::Read { .. } | Message::Atomic { .. })
    }
}

/// What the engine must do, in order.
#[derive(Debug)]
pub enum Action {
    /// Send this transport packet (BTH to pad) to the peer.
    Send(Vec<u8>),
    /// The WQE completed: a CQE if it asked for one.
    Done {
        /// Its control fields.
        ctrl: CtrlFields,
        /// `byte_cnt` for the CQE.
        byte_cnt: u32,
    },
    /// The WQE failed: an error CQE, then the QP goes to ERR.
    Failed {
        /// Its control fields.
        ctrl: CtrlFields,
        /// The syndrome.
        syndrome: Syndrome,
        /// Why, for the trace.
        why: String,
    },
    /// The WQE was outstanding when the QP went to ERR: WR_FLUSH_ERR.
    Flushed {
        /// Its control fields.
        ctrl: CtrlFields,
    },
}

#[derive(Debug)]
struct Outstanding {
    first_psn: u32,
    npkts: u32,
    msg: Message,
    ctrl: CtrlFields,
    byte_cnt: u32,
    /// READ responses received so far.
    got: u32,
    /// READ responses asked for so far: a long READ is asked for a window at
    /// a time, each part a READ request of its own at the PSN of its first
    /// response, so the responses never outrun the requester.
    asked: u32,
}

impl Outstanding {
    fn last_psn(&self) -> u32 {
        psn::add(self.first_psn, self.npkts - 1)
    }

    fn holds(&self, p: u32) -> bool {
        let d = psn::diff(p, self.first_psn);
        d >= 0 && (d as u32) < self.npkts
    }
}

/// The requester state of one QP.
#[derive(Debug)]
pub struct Requester {
    next_psn: u32,
    outstanding: VecDeque<Outstanding>,
    pmtu: u32,
    timeout: Option<Duration>,
    retry_cnt: u8,
    rnr_retry: u8,
    max_rd_atomic: u8,
    /// Packets sent beyond `acked`.
    window: u32,
    retry_left: u8,
    rnr_left: u8,
    /// When the ACK timer fires.
    deadline: Option<Instant>,
    /// Sending again waits for this (after an RNR NAK).
    rnr_until: Option<Instant>,
    /// The last PSN the responder acknowledged.
    acked: u32,
    /// The next PSN to put on the wire (behind `next_psn` while the window is full).
    sent_upto: u32,
    /// Messages at the front entirely on the wire: where sending resumes.
    sent: usize,
    /// Buffers of completed messages, for the next ones to gather into.
    spare: Vec<Vec<u8>>,
    /// Buffers of packets the port has sent, for the next ones.
    packets: Vec<Vec<u8>>,
}

impl Requester {
    /// A requester starting at `attrs.sq_psn`.
    pub fn new(attrs: &WireAttrs) -> Requester {
        Requester {
            next_psn: attrs.sq_psn,
            outstanding: VecDeque::new(),
            pmtu: attrs.path_mtu,
            timeout: attrs.ack_timeout(),
            retry_cnt: attrs.retry_cnt,
            rnr_retry: attrs.rnr_retry,
            max_rd_atomic: attrs.max_rd_atomic,
            window: attrs.send_window,
            retry_left: attrs.retry_cnt,
            rnr_left: attrs.rnr_retry,
            deadline: None,
            rnr_until: None,
            acked: psn::prev(attrs.sq_psn),
            sent_upto: attrs.sq_psn,
            sent: 0,
            spare: Vec::new(),
            packets: Vec::new(),
        }
    }

    /// Take new values of the attributes RTR→RTS sets (sq_psn, timeouts, retries).
    pub fn update(&mut self, attrs: &WireAttrs) {
        if self.outstanding.is_empty() {
            self.next_psn = attrs.sq_psn;
            self.acked = psn::prev(attrs.sq_psn);
            self.sent_upto = attrs.sq_psn;
        }
        self.timeout = attrs.ack_timeout();
        self.retry_cnt = attrs.retry_cnt;
        self.rnr_retry = attrs.rnr_retry;
        self.retry_left = attrs.retry_cnt;
        self.rnr_left = attrs.rnr_retry;
        self.max_rd_atomic = attrs.max_rd_atomic;
        self.window = attrs.send_window;
    }

    /// Messages outstanding.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Whether a new WQE (a READ or atomic when `rd_atomic`) may go out now.
    pub fn can_post(&self, rd_atomic: bool) -> bool {
        if self.outstanding.len() >= MAX_OUTSTANDING || self.rnr_until.is_some() {
            return false;
        }
        !rd_atomic || self.outstanding.iter().filter(|o| o.msg.is_rd_atomic()).count() < self.max_rd_atomic as usize
    }

    /// Send the WQE `ctrl` asking for `msg` to `dest_qp`.
    pub fn post(
        &mut self,
        now: Instant,
        dest_qp: u32,
        msg: Message,
        ctrl: CtrlFields,
        byte_cnt: u32,
        out: &mut Vec<Action>,
    ) {
        let npkts = match &msg {
            Message::Write { data, .. } | Message::Send { data, .. } => packets_for(data.len() as u32, self.pmtu),
            Message::Read { len, .. } => packets_for(*len, self.pmtu),
            Message::Atomic { .. } => 1,
        };
        let o = Outstanding { first_psn: self.next_psn, npkts, msg, ctrl, byte_cnt, got: 0, asked: 0 };
        self.next_psn = psn::add(self.next_psn, npkts);
        self.outstanding.push_back(o);
        self.pump(dest_qp, out);
        if self.deadline.is_none() {
            self.deadline = self.timeout.map(|t| now + t);
        }
    }

    /// A packet for this QP as requester (an acknowledgement or a response).
    pub fn on_packet(&mut self, now: Instant, dest_qp: u32, p: &Packet<'_>, out: &mut Vec<Action>) {
        let progressed = match p.opcode {
            BthOpcode::ACKNOWLEDGE => self.on_ack(now, dest_qp, p, out),
            BthOpcode::ATOMIC_ACKNOWLEDGE => self.on_atomic_ack(p, out),
            _ if matches!(p.kind(), Some((Operation::ReadResponse, _))) => self.on_read_response(p, out),
            _ => false, // a request opcode: the responder's business
        };
        if progressed {
            self.retry_left = self.retry_cnt;
            self.deadline = if self.outstanding.is_empty() { None } else { self.timeout.map(|t| now + t) };
            // The window moved: send what it now allows.
            if self.rnr_until.is_none() {
                self.pump(dest_qp, out);
            }
        }
    }

    /// Put on the wire every packet from `sent_upto` that the window
    /// (`acked` + the send window) allows, message by message in PSN order.
    fn pump(&mut self, dest_qp: u32, out: &mut Vec<Action>) {
        let limit = psn::add(self.acked, self.window);
        // Ask for ACKs at least twice a window, or the window fills before
        // the responder has been asked to say how far it got.
        let ack_every = (self.window as usize / 2).clamp(1, ACK_EVERY);
        let skip = self.sent.min(self.outstanding.len());
        for (i, o) in self.outstanding.iter_mut().enumerate().skip(skip) {
            if matches!(o.msg, Message::Read { .. }) {
                // The part asked for is in flight: wait for it before going on.
                if o.asked > o.got && psn::diff(self.sent_upto, psn::add(o.first_psn, o.asked)) >= 0 {
                    if o.asked < o.npkts {
                        break;
                    }
                    continue;
                }
                if psn::diff(psn::add(o.first_psn, o.got), limit) > 0 {
                    break;
                }
                o.asked = o.got + self.window.min(o.npkts - o.got);
                emit(o, &Shape { pmtu: self.pmtu, ack_every, dest_qp }, 0, 0, &mut self.packets, out);
                self.sent_upto = psn::add(o.first_psn, o.asked);
                if o.asked < o.npkts {
                    break;
                }
                self.sent = i + 1;
                continue;
            }
            if psn::diff(o.last_psn(), self.sent_upto) < 0 {
                self.sent = i + 1;
                continue; // all on the wire already
            }
            if psn::diff(o.first_psn, limit) > 0 {
                break;
            }
            let from = psn::diff(self.sent_upto, o.first_psn).max(0) as u32;
            let to = if o.msg.is_rd_atomic() {
                // One request stands for all its responses.
                o.npkts - 1
            } else {
                (psn::diff(limit, o.first_psn) as u32).min(o.npkts - 1)
            };
            emit(o, &Shape { pmtu: self.pmtu, ack_every, dest_qp }, from, to, &mut self.packets, out);
            self.sent_upto = psn::add(o.first_psn, to + 1);
            if to + 1 < o.npkts {
                break; // the window is full
            }
            self.sent = i + 1;
        }
    }

    /// Take the front message off (it completed or failed); its gathered
    /// bytes become a spare buffer.
    fn pop_front(&mut self) -> Option<Outstanding> {
        let mut o = self.outstanding.pop_front()?;
        self.sent = self.sent.saturating_sub(1);
        if let Message::Write { data, .. } | Message::Send { data, .. } = &mut o.msg
            && self.spare.len() < SPARE_BUFFERS
            && data.capacity() <= SPARE_MAX
        {
            self.spare.push(std::mem::take(data));
        }
        Some(o)
    }

    /// Take back the buffer of a packet the port has sent. Packets are
    /// allocated and freed by the thousand a second: reused, they stay out
    /// of the allocator (see [`Requester::buffer`]).
    pub fn recycle(&mut self, packet: Vec<u8>) {
        if self.packets.len() < SPARE_PACKETS && packet.capacity() <= SPARE_MAX {
            self.packets.push(packet);
        }
    }

    /// An empty buffer with room for `len` bytes, for the next message to
    /// gather into: a completed message's, when one is spare. Freeing and allocating
    /// 64 KiB per message had glibc's heap grow and trim at its top, and the
    /// kernel zero fresh pages, for every WRITE (a tenth of the wire
    /// benchmark's time).
    pub fn buffer(&mut self, len: usize) -> Vec<u8> {
        let mut v = self.spare.pop().unwrap_or_default();
        v.clear();
        v.reserve(len);
        v
    }

    /// A NAK at `p` says the responder has everything before `p`.
    fn note_received_before(&mut self, p: u32) {
        let before = psn::prev(p);
        if psn::diff(before, self.acked) > 0 && psn::diff(self.next_psn, before) > 0 {
            self.acked = before;
        }
    }

    /// Complete the SENDs and WRITEs at the front that end at or before `p`;
    /// returns whether any did.
    fn complete_through(&mut self, p: u32, out: &mut Vec<Action>) -> bool {
        let mut any = false;
        while let Some(o) = self.outstanding.front() {
            if o.msg.is_rd_atomic() || psn::diff(o.last_psn(), p) > 0 {
                break;
            }
            let o = self.pop_front().expect("front exists");
            out.push(Action::Done { ctrl: o.ctrl, byte_cnt: o.byte_cnt });
            any = true;
        }
        any
    }

    fn on_ack(&mut self, now: Instant, dest_qp: u32, p: &Packet<'_>, out: &mut Vec<Action>) -> bool {
        let Some(aeth) = p.aeth else { return false };
        match aeth.ack_type {
            AethType::ACK => {
                // An ACK inside a long message is progress too.
                let advanced = psn::diff(p.psn, self.acked) > 0 && psn::diff(self.next_psn, p.psn) > 0;
                if advanced {
                    self.acked = p.psn;
                }
                let any = self.complete_through(p.psn, out) || advanced;
                // A READ or atomic the ACK covers lost its answer: ask again.
                if let Some(o) = self.outstanding.front()
                    && o.msg.is_rd_atomic()
                    && psn::diff(p.psn, o.first_psn) >= 0
                {
                    self.resend_all(dest_qp, out);
                }
                any
            }
            AethType::RNR_NAK => {
                self.note_received_before(p.psn);
                let any = self.complete_through(psn::prev(p.psn), out);
                if self.rnr_retry != 7 && self.rnr_left == 0 {
                    self.fail_front(
                        Syndrome::RNR_RETRY_EXC_ERR,
                        "receiver not ready: RNR retries exhausted".into(),
                        out,
                    );
                    return true;
                }
                if self.rnr_retry != 7 {
                    self.rnr_left -= 1;
                }
                self.rnr_until = Some(now + super::rnr_timer(aeth.value));
                any
            }
            AethType::NAK => {
                self.note_received_before(p.psn);
                let any = self.complete_through(psn::prev(p.psn), out);
                let (syndrome, what) = match AethNakCode(aeth.value) {
                    AethNakCode::PSN_SEQUENCE_ERROR => {
                        self.resend_all(dest_qp, out);
                        return any;
                    }
                    AethNakCode::INVALID_REQUEST => (Syndrome::REMOTE_INVAL_REQ_ERR, "invalid request"),
                    AethNakCode::REMOTE_ACCESS_ERROR => (Syndrome::REMOTE_ACCESS_ERR, "remote access error"),
                    _ => (Syndrome::REMOTE_OP_ERR, "remote operational error"),
                };
                self.fail_front(syndrome, format!("the responder NAKed PSN {:#08x}: {what}", p.psn), out);
                true
            }
            _ => false,
        }
    }

    fn on_read_response(&mut self, p: &Packet<'_>, out: &mut Vec<Action>) -> bool {
        // Responses come in order: everything before the READ is acknowledged.
        let Some(i) = self.outstanding.iter().position(|o| matches!(o.msg, Message::Read { .. }) && o.holds(p.psn))
        else {
            return false;
        };
        let first = self.outstanding[i].first_psn;
        let mut any = self.complete_through(psn::prev(first), out);
        let Some(o) = self.outstanding.front_mut() else { return any };
        if o.first_psn != first || psn::add(o.first_psn, o.got) != p.psn {
            return any; // a duplicate, or one after a lost response: the timer resends
        }
        let Message::Read { len, sink, .. } = &o.msg else { return any };
        let at = (o.got * self.pmtu) as usize;
        let end = at + p.payload.len();
        let (_, pos) = p.kind().unwrap_or((Operation::ReadResponse, Position::Only));
        // A response ends the part asked for, which ends at `asked` or the READ's end.
        let part_end = ((o.asked * self.pmtu) as usize).min(*len as usize);
        let short = if pos.ends() { end != part_end } else { p.payload.len() != self.pmtu as usize };
        if short || end > *len as usize {
            let why = format!("READ response PSN {:#08x} of {} bytes at offset {at} of {len}", p.psn, p.payload.len());
            self.fail_front(Syndrome::REMOTE_INVAL_REQ_ERR, why, out);
            return true;
        }
        if let Err(e) = scatter(sink, at, p.payload) {
            self.fail_front(Syndrome::LOCAL_PROT_ERR, format!("READ response into local memory: {e}"), out);
            return true;
        }
        o.got += 1;
        // A response acknowledges its own PSN: the window moves.
        self.acked = p.psn;
        any = true;
        if o.got == o.npkts {
            let o = self.pop_front().expect("front exists");
            out.push(Action::Done { ctrl: o.ctrl, byte_cnt: o.byte_cnt });
        }
        any
    }

    fn on_atomic_ack(&mut self, p: &Packet<'_>, out: &mut Vec<Action>) -> bool {
        let Some(i) =
            self.outstanding.iter().position(|o| matches!(o.msg, Message::Atomic { .. }) && o.first_psn == p.psn)
        else {
            return false;
        };
        let first = self.outstanding[i].first_psn;
        self.complete_through(psn::prev(first), out);
        if self.outstanding.front().is_none_or(|o| o.first_psn != first) {
            return true;
        }
        self.acked = p.psn;
        let o = self.pop_front().expect("front exists");
        let Message::Atomic { result, .. } = &o.msg else { return true };
        match result.write(0, &p.atomic_ack.unwrap_or(0).to_ne_bytes()) {
            Ok(()) => out.push(Action::Done { ctrl: o.ctrl, byte_cnt: o.byte_cnt }),
            Err(e) => {
                self.outstanding.push_front(o);
                self.sent += 1;
                self.fail_front(Syndrome::LOCAL_PROT_ERR, format!("atomic result into local memory: {e}"), out);
            }
        }
        true
    }

    /// Timers: the ACK timeout and the end of an RNR wait.
    pub fn tick(&mut self, now: Instant, dest_qp: u32, out: &mut Vec<Action>) {
        if let Some(t) = self.rnr_until
            && now >= t
        {
            self.rnr_until = None;
            self.resend_all(dest_qp, out);
            self.deadline = self.timeout.map(|t| now + t);
            return;
        }
        let Some(d) = self.deadline else { return };
        if now < d || self.outstanding.is_empty() || self.rnr_until.is_some() {
            return;
        }
        if self.retry_left == 0 {
            let why = format!("no ACK within the local ACK timeout after {} retries", self.retry_cnt);
            self.fail_front(Syndrome::TRANSPORT_RETRY_EXC_ERR, why, out);
            return;
        }
        self.retry_left -= 1;
        self.resend_all(dest_qp, out);
        self.deadline = self.timeout.map(|t| now + t);
    }

    /// Send every outstanding message again (go-back-N): from its first
    /// packet, except what the responder acknowledged of the first message
    /// and the READ responses already received.
    fn resend_all(&mut self, dest_qp: u32, out: &mut Vec<Action>) {
        let Some(o) = self.outstanding.front() else { return };
        self.sent = 0;
        self.sent_upto =
            if o.holds(self.acked) && !o.msg.is_rd_atomic() { psn::add(self.acked, 1) } else { o.first_psn };
        self.pump(dest_qp, out);
    }

    /// The front message fails; everything behind it is flushed.
    fn fail_front(&mut self, syndrome: Syndrome, why: String, out: &mut Vec<Action>) {
        if let Some(o) = self.pop_front() {
            out.push(Action::Failed { ctrl: o.ctrl, syndrome, why });
        }
        self.flush(out);
    }

    /// Flush everything outstanding (the QP went to ERR).
    pub fn flush(&mut self, out: &mut Vec<Action>) {
        self.sent = 0;
        for o in self.outstanding.drain(..) {
            out.push(Action::Flushed { ctrl: o.ctrl });
        }
        self.deadline = None;
        self.rnr_until = None;
    }
}

/// Packets a message of `len` bytes takes at path MTU `pmtu` (at least one).
pub fn packets_for(len: u32, pmtu: u32) -> u32 {
    len.div_ceil(pmtu).max(1)
}

/// Copy `data` into the buffers of `sink`, `at` bytes into the whole.
fn scatter(sink: &[(Loc, usize)], mut at: usize, mut data: &[u8]) -> Result<(), String> {
    for (loc, len) in sink {
        if data.is_empty() {
            break;
        }
        if at >= *len {
            at -= len;
            continue;
        }
        let n = (len - at).min(data.len());
        loc.write(at, &data[..n])?;
        data = &data[n..];
        at = 0;
    }
    if data.is_empty() { Ok(()) } else { Err(format!("{} bytes past the local buffers", data.len())) }
}

/// Packets `from..=to` of message `o` (READs and atomics are one request,
/// whatever the range).
/// How the packets of a message are cut and addressed.
struct Shape {
    pmtu: u32,
    ack_every: usize,
    dest_qp: u32,
}

/// Packets `from..=to` of `o`, each encoded into a buffer from `pool`.
fn emit(o: &Outstanding, shape: &Shape, from: u32, to: u32, pool: &mut Vec<Vec<u8>>, out: &mut Vec<Action>) {
    let (pmtu, ack_every) = (shape.pmtu, shape.ack_every);
    let mut p = Packet::bare(BthOpcode::SEND_ONLY, shape.dest_qp, o.first_psn);
    let mut encode = |p: &Packet<'_>| {
        let mut b = pool.pop().unwrap_or_default();
        b.clear();
        // Room for the ICRC the port appends.
        b.reserve(p.wire_len() + 4);
        p.encode(&mut b);
        out.push(Action::Send(b));
    };
    match &o.msg {
        Message::Write { data, imm, .. } | Message::Send { data, imm } => {
            let (op, reth) = match &o.msg {
                Message::Write { remote, .. } => {
                    (Operation::Write, Some(Reth { va: remote.raddr, rkey: remote.rkey, len: data.len() as u32 }))
                }
                _ => (Operation::Send, None),
            };
            let n = o.npkts as usize;
            for i in from as usize..=(to as usize).min(n - 1) {
                let pos = position(i, n);
                let chunk = &data[(i * pmtu as usize).min(data.len())..((i + 1) * pmtu as usize).min(data.len())];
                p.opcode = request_opcode(op, pos, imm.is_some() && pos.ends());
                p.psn = psn::add(o.first_psn, i as u32);
                p.reth = if pos.starts() { reth } else { None };
                p.imm = if pos.ends() { *imm } else { None };
                p.se = pos.ends() && o.ctrl.solicited;
                p.ack_req = pos.ends() || (i + 1) % ack_every == 0;
                p.payload = chunk;
                encode(&p);
            }
        }
        Message::Read { remote, len, .. } => {
            // The responses received so far are kept: the request asks for
            // the part from there to `asked`.
            let done = (o.got * pmtu).min(*len);
            let upto = (o.asked.max(o.got + 1) * pmtu).min(*len);
            p.opcode = BthOpcode::RDMA_READ_REQUEST;
            p.psn = psn::add(o.first_psn, o.got);
            p.reth = Some(Reth { va: remote.raddr.wrapping_add(done.into()), rkey: remote.rkey, len: upto - done });
            p.ack_req = true;
            encode(&p);
        }
        Message::Atomic { remote, args, .. } => {
            let (opcode, swap_add, comp) = match *args {
                AtomicArgs::Cs { compare, swap } => (BthOpcode::COMPARE_SWAP, swap, compare),
                AtomicArgs::Fa { add } => (BthOpcode::FETCH_ADD, add, 0),
                // The engine refuses masked atomics on wire QPs before they get here.
                _ => (BthOpcode::FETCH_ADD, 0, 0),
            };
            p.opcode = opcode;
            p.atomic = Some(AtomicEth { va: remote.raddr, rkey: remote.rkey, swap_add, comp });
            p.ack_req = true;
            encode(&p);
        }
    }
}
