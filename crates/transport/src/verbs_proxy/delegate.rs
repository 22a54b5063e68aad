//! The proxy's transport: each message the softnic's engine decoded from
//! an mlx5 WQE ([`marrow_softnic::delegate`]) becomes one `ibv_send_wr` on
//! a verbs RC QP of any provider, and each `ibv_wc` becomes the mlx5 CQE
//! the device code expects (the syndrome from [`super::status`]).
//!
//! | mlx5 WQE | `ibv_send_wr` |
//! |---|---|
//! | RDMA_WRITE, RDMA_WRITE_IMM (SGEs or inline data) | `IBV_WR_RDMA_WRITE`, `IBV_WR_RDMA_WRITE_WITH_IMM` |
//! | SEND, SEND_IMM | `IBV_WR_SEND`, `IBV_WR_SEND_WITH_IMM` |
//! | RDMA_READ | `IBV_WR_RDMA_READ` |
//! | ATOMIC_CS, ATOMIC_FA (8 bytes) | `IBV_WR_ATOMIC_CMP_AND_SWP`, `IBV_WR_ATOMIC_FETCH_AND_ADD` |
//! | masked atomics | refused: verbs has no masked atomics (error CQE LOCAL_QP_OP_ERR) |
//!
//! The bytes go through a staging buffer registered with the verbs device:
//! the engine hands over a write's or send's bytes gathered from the WQE's
//! local buffers (or its inline data), and a read's or atomic's result is
//! copied out of staging into the WQE's local buffers when it completes.
//! Staging is a ring freed in completion order (RC completes in order, IBA
//! vol. 1 §10.8.3); a message that does not fit waits (the engine retries).
//! Arriving SENDs land in receive slots posted up front, and are handed to
//! the engine for the device code's next receive WQE.

use super::status::syndrome_of;
use marrow_mlx5::raw::Syndrome;
use marrow_mlx5::wqe_decode::{AtomicArgs, CtrlFields};
use marrow_mmio::Region;
use marrow_softnic::Shm;
use marrow_softnic::delegate::{Delegate, Event, Refused};
use marrow_softnic::mr::Loc;
use marrow_softnic::rc::requester::Message;
use marrow_verbs::any::Endpoint;
use marrow_verbs::ffi::*;
use std::collections::VecDeque;

/// `wr_id` bit that marks a receive.
const RECV: u64 = 1 << 63;

/// Where a completed request's result goes.
#[derive(Debug)]
enum Sink {
    None,
    Read(Vec<(Loc, usize)>),
    Atomic(Loc),
}

#[derive(Debug)]
struct Pending {
    wr_id: u64,
    ctrl: CtrlFields,
    byte_cnt: u32,
    /// Staging bytes it holds: (offset, length); freed when it completes.
    stage: (usize, usize),
    sink: Sink,
}

/// Sizes of the proxy's buffers.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Staging bytes for messages in flight.
    pub staging: usize,
    /// Send requests in flight at most (the verbs QP's `max_send_wr`).
    pub send_wr: u32,
    /// Receive slots.
    pub recv_slots: u32,
    /// Bytes of each receive slot (the largest SEND accepted).
    pub recv_bytes: usize,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes { staging: 4 << 20, send_wr: 64, recv_slots: 8, recv_bytes: 1 << 20 }
    }
}

/// The verbs side of one proxied QP.
#[derive(Debug)]
pub struct VerbsDelegate {
    ep: Endpoint,
    sizes: Sizes,
    stage: Region,
    stage_lkey: u32,
    recv: Region,
    recv_lkey: u32,
    /// Staging ring: next free byte and bytes in use.
    head: usize,
    used: usize,
    next_id: u64,
    pending: VecDeque<Pending>,
    /// A flushed receive was reported.
    flushed: bool,
    _shm: (Shm, Shm),
}

impl VerbsDelegate {
    /// Register the staging and receive buffers on `ep`.
    pub fn new(mut ep: Endpoint, sizes: Sizes) -> Result<VerbsDelegate, super::ProxyError> {
        let io = |what: &str, e: std::io::Error| super::ProxyError::Setup(format!("{what}: {e}"));
        let stage_shm = Shm::create("verbs-stage", sizes.staging).map_err(|e| io("staging buffer", e))?;
        let recv_len = sizes.recv_bytes * sizes.recv_slots as usize;
        let recv_shm = Shm::create("verbs-recv", recv_len.max(64)).map_err(|e| io("receive slots", e))?;
        let (stage, recv) = (stage_shm.region(), recv_shm.region());
        // SAFETY: both buffers are kept in `_shm` as long as the endpoint
        // (and so its MRs) lives: the delegate owns both.
        let (stage_lkey, _) = unsafe { ep.reg(stage.base_addr() as *mut u8, sizes.staging, IBV_ACCESS_LOCAL_WRITE)? };
        // SAFETY: as above.
        let (recv_lkey, _) = unsafe { ep.reg(recv.base_addr() as *mut u8, recv_len.max(64), IBV_ACCESS_LOCAL_WRITE)? };
        let d = VerbsDelegate {
            ep,
            sizes,
            stage,
            stage_lkey,
            recv,
            recv_lkey,
            head: 0,
            used: 0,
            next_id: 0,
            pending: VecDeque::new(),
            flushed: false,
            _shm: (stage_shm, recv_shm),
        };
        Ok(d)
    }

    /// Post every receive slot (a QP in INIT or later: rdma-core and the
    /// kernel refuse receives in RESET).
    pub fn post_receives(&mut self) -> Result<(), marrow_verbs::VerbsError> {
        for slot in 0..self.sizes.recv_slots {
            self.post_recv(slot)?;
        }
        Ok(())
    }

    /// The endpoint (to connect it, or read its numbers).
    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    fn post_recv(&mut self, slot: u32) -> Result<(), marrow_verbs::VerbsError> {
        let mut sge = ibv_sge {
            addr: self.recv.base_addr() as u64 + u64::from(slot) * self.sizes.recv_bytes as u64,
            length: self.sizes.recv_bytes as u32,
            lkey: self.recv_lkey,
        };
        let mut wr =
            ibv_recv_wr { wr_id: RECV | u64::from(slot), next: core::ptr::null_mut(), sg_list: &mut sge, num_sge: 1 };
        self.ep.post_recv(&mut wr)
    }

    /// `len` bytes of staging, contiguous, or `None` while the ring is full:
    /// where they start, and how much of the ring's tail was skipped for it.
    fn alloc(&mut self, len: usize) -> Option<(usize, usize)> {
        let cap = self.sizes.staging;
        if len == 0 {
            return Some((self.head, 0));
        }
        if len > cap {
            return None;
        }
        // Contiguous: skip the ring's tail end when the message does not fit there.
        let skip = if self.head + len > cap { cap - self.head } else { 0 };
        if self.used + skip + len > cap {
            return None;
        }
        let at = if skip > 0 { 0 } else { self.head };
        self.used += skip + len;
        self.head = (at + len) % cap;
        // The skipped tail is charged to this message: freed with it.
        Some((at, skip))
    }

    fn free(&mut self, stage: (usize, usize)) {
        self.used = self.used.saturating_sub(stage.1);
    }
}

fn refuse(why: impl Into<String>) -> Refused {
    Refused::Error(Syndrome::LOCAL_QP_OP_ERR, why.into())
}

impl Delegate for VerbsDelegate {
    fn post(&mut self, msg: Message, ctrl: CtrlFields, byte_cnt: u32) -> Result<(), Refused> {
        if self.pending.len() >= self.sizes.send_wr as usize {
            return Err(Refused::Busy);
        }
        let len = match &msg {
            Message::Write { data, .. } | Message::Send { data, .. } => data.len(),
            Message::Read { len, .. } => *len as usize,
            Message::Atomic { .. } => 8,
        };
        if len > self.sizes.staging {
            return Err(Refused::Error(
                Syndrome::LOCAL_LENGTH_ERR,
                format!("message of {len} bytes exceeds the proxy's staging buffer ({} bytes)", self.sizes.staging),
            ));
        }
        let Some((at, skip)) = self.alloc(len) else { return Err(Refused::Busy) };
        let stage = (at, len + skip);
        let mut sge =
            ibv_sge { addr: self.stage.base_addr() as u64 + at as u64, length: len as u32, lkey: self.stage_lkey };
        let mut wr = ibv_send_wr::zeroed();
        wr.wr_id = self.next_id;
        wr.send_flags = IBV_SEND_SIGNALED;
        let sink = match msg {
            Message::Write { remote, imm, data } => {
                self.stage.write_bytes(at, &data).map_err(|e| refuse(format!("staging: {e}")))?;
                wr.opcode = if imm.is_some() { IBV_WR_RDMA_WRITE_WITH_IMM } else { IBV_WR_RDMA_WRITE };
                wr.imm_data = imm.unwrap_or(0).to_be();
                wr.rdma(remote.raddr, remote.rkey);
                Sink::None
            }
            Message::Send { imm, data } => {
                self.stage.write_bytes(at, &data).map_err(|e| refuse(format!("staging: {e}")))?;
                wr.opcode = if imm.is_some() { IBV_WR_SEND_WITH_IMM } else { IBV_WR_SEND };
                wr.imm_data = imm.unwrap_or(0).to_be();
                Sink::None
            }
            Message::Read { remote, sink, .. } => {
                wr.opcode = IBV_WR_RDMA_READ;
                wr.rdma(remote.raddr, remote.rkey);
                Sink::Read(sink)
            }
            Message::Atomic { remote, args, result } => {
                match args {
                    AtomicArgs::Cs { compare, swap } => {
                        wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
                        wr.atomic(remote.raddr, compare, swap, remote.rkey);
                    }
                    AtomicArgs::Fa { add } => {
                        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
                        wr.atomic(remote.raddr, add, 0, remote.rkey);
                    }
                    other => {
                        self.free(stage);
                        return Err(refuse(format!(
                            "{other:?}: verbs has no masked atomics (only IBV_WR_ATOMIC_CMP_AND_SWP and FETCH_AND_ADD)"
                        )));
                    }
                }
                Sink::Atomic(result)
            }
        };
        if len > 0 {
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
        }
        if let Err(e) = self.ep.post_send(&mut wr) {
            self.free(stage);
            return Err(refuse(format!("{e}")));
        }
        self.pending.push_back(Pending { wr_id: self.next_id, ctrl, byte_cnt, stage, sink });
        self.next_id += 1;
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Event>) {
        let mut wc = [ibv_wc::default(); 16];
        let n = match self.ep.poll(&mut wc) {
            Ok(n) => n,
            Err(e) => {
                out.push(Event::Fatal(format!("{e}")));
                return;
            }
        };
        for w in &wc[..n] {
            if w.wr_id & RECV != 0 {
                self.on_recv(w, out);
                continue;
            }
            let Some(p) = self.pending.pop_front() else {
                out.push(Event::Fatal(format!("a completion for wr_id {} with nothing outstanding", w.wr_id)));
                continue;
            };
            if p.wr_id != w.wr_id {
                out.push(Event::Fatal(format!("completion for wr_id {} where {} was next", w.wr_id, p.wr_id)));
            }
            self.free(p.stage);
            let at = p.stage.0;
            if w.status == IBV_WC_SUCCESS {
                let copied = match &p.sink {
                    Sink::None => Ok(()),
                    Sink::Read(sink) => {
                        let mut off = 0;
                        let mut r = Ok(());
                        for (loc, l) in sink {
                            let mut b = vec![0u8; *l];
                            r = self
                                .stage
                                .read_bytes(at + off, &mut b)
                                .map_err(|e| e.to_string())
                                .and_then(|_| loc.write(0, &b));
                            if r.is_err() {
                                break;
                            }
                            off += l;
                        }
                        r
                    }
                    Sink::Atomic(loc) => {
                        self.stage.read_array::<8>(at).map_err(|e| e.to_string()).and_then(|b| loc.write(0, &b))
                    }
                };
                match copied {
                    Ok(()) => out.push(Event::Done { ctrl: p.ctrl, byte_cnt: p.byte_cnt }),
                    Err(why) => out.push(Event::Failed {
                        ctrl: p.ctrl,
                        syndrome: Syndrome::LOCAL_PROT_ERR,
                        vendor: 0,
                        why: format!("result into local memory: {why}"),
                    }),
                }
            } else if w.status == IBV_WC_WR_FLUSH_ERR {
                out.push(Event::Flushed { ctrl: p.ctrl });
            } else {
                let (syndrome, name) = syndrome_of(w.status);
                out.push(Event::Failed {
                    ctrl: p.ctrl,
                    syndrome,
                    vendor: w.vendor_err as u8,
                    why: format!(
                        "{} on {}: ibv_wc status {} ({name}), vendor_err {:#x}",
                        self.ep.name, self.ep.port, w.status, w.vendor_err
                    ),
                });
            }
        }
    }

    fn outstanding(&self) -> usize {
        self.pending.len()
    }
}

impl VerbsDelegate {
    fn on_recv(&mut self, w: &ibv_wc, out: &mut Vec<Event>) {
        let slot = (w.wr_id & !RECV) as u32;
        if w.status == IBV_WC_WR_FLUSH_ERR {
            // The verbs QP is in ERR (a responder error such as a bad rkey
            // moves it there, IBA class C): the model's QP follows, once.
            if !self.flushed {
                self.flushed = true;
                out.push(Event::Fatal(format!(
                    "{} QP {:#x}: a receive was flushed: the verbs QP is in the error state",
                    self.ep.name, self.ep.qpn
                )));
            }
            return;
        }
        if w.status != IBV_WC_SUCCESS {
            let (_, name) = syndrome_of(w.status);
            out.push(Event::Fatal(format!("receive completed with ibv_wc status {} ({name})", w.status)));
            return;
        }
        let imm = (w.wc_flags & IBV_WC_WITH_IMM != 0).then_some(u32::from_be(w.imm_data));
        if w.opcode == IBV_WC_RECV_RDMA_WITH_IMM {
            out.push(Event::WriteImm { len: w.byte_len, imm: imm.unwrap_or(0) });
        } else {
            let mut data = vec![0u8; w.byte_len as usize];
            let at = slot as usize * self.sizes.recv_bytes;
            if let Err(e) = self.recv.read_bytes(at, &mut data) {
                out.push(Event::Fatal(format!("receive slot {slot}: {e}")));
                return;
            }
            out.push(Event::Received { data, imm });
        }
        if let Err(e) = self.post_recv(slot) {
            out.push(Event::Fatal(format!("reposting receive slot {slot}: {e}")));
        }
    }
}
