//! The responder half of RC (InfiniBand Architecture Specification vol. 1
//! §9.7, responder side; Linux rxe's `rxe_resp.c` does the same): requests
//! are taken strictly in PSN order; memory, keys and receive buffers are
//! checked by [`crate::respond`], the same code a local peer goes through.
//!
//! | Request | Answer |
//! |---|---|
//! | the expected PSN, executed | ACK when the requester set AckReq (so the ACKs of a message's packets coalesce into one), READ responses, or ATOMIC ACKNOWLEDGE |
//! | a PSN ahead of the expected one | one NAK PSN sequence error carrying the expected PSN, then silence until that PSN arrives |
//! | a PSN behind (a duplicate) | SEND and WRITE: an ACK of everything received; READ: executed again; atomic: its saved result sent again, never executed twice |
//! | a bad key, range or right | NAK remote access error |
//! | a malformed message, misaligned atomic, SEND longer than the receive buffer | NAK invalid request |
//! | the responder's own buffers fail | NAK remote operational error |
//! | a SEND (or WRITE with immediate) with no receive WQE posted | RNR NAK with this QP's `min_rnr_timer` |
//! | a QP that is not ready to receive | nothing: the requester's timer runs out |

use super::WireAttrs;
use super::requester::packets_for;
use crate::respond::{self, Nak, Src, Target};
use marrow_mlx5::wqe::RemoteAddr;
use marrow_mlx5::wqe_decode::AtomicArgs;
use marrow_roce::opcode::{Operation, position, request_opcode};
use marrow_roce::packet::{Aeth, Packet};
use marrow_roce::psn;
use marrow_roce::raw::{AethNakCode, BthOpcode};
use std::collections::VecDeque;

/// The message being received, between its first and last packet.
#[derive(Debug)]
enum Inbound {
    Write { first_psn: u32, va: u64, rkey: u32, offset: u32, len: u32 },
    Send { first_psn: u32, data: Vec<u8> },
}

/// The responder state of one QP.
#[derive(Debug)]
pub struct Responder {
    epsn: u32,
    msn: u32,
    nak_sent: bool,
    inbound: Option<Inbound>,
    /// Results of recent atomics, by PSN, for duplicates.
    atomics: VecDeque<(u32, u64)>,
    resources: usize,
    min_rnr_timer: u8,
    pmtu: u32,
    /// A class C error (IBA 9.9.3.1): the NAK went out and the QP must now
    /// go to the error state, as Linux rxe's `do_class_ac_error` does.
    pub fatal: Option<String>,
}

impl Responder {
    /// A responder expecting `attrs.rq_psn`.
    pub fn new(attrs: &WireAttrs) -> Responder {
        Responder {
            epsn: attrs.rq_psn,
            msn: 0,
            nak_sent: false,
            inbound: None,
            atomics: VecDeque::new(),
            resources: attrs.max_dest_rd_atomic as usize,
            min_rnr_timer: attrs.min_rnr_timer,
            fatal: None,
            pmtu: attrs.path_mtu,
        }
    }

    /// A request packet for QP `qpn` from the requester QP `src_qpn`:
    /// appends the answers (transport packets) to `out`.
    pub fn on_request(
        &mut self,
        target: &mut impl Target,
        qpn: u32,
        src_qpn: u32,
        p: &Packet<'_>,
        out: &mut Vec<Vec<u8>>,
    ) {
        let Some((op, pos)) = p.kind() else { return };
        let mut reply = Reply { to: src_qpn, out };
        let d = psn::diff(p.psn, self.epsn);
        if d > 0 {
            if !self.nak_sent {
                self.nak_sent = true;
                reply.ack(self.epsn, Aeth::nak(AethNakCode::PSN_SEQUENCE_ERROR, self.msn));
            }
            return;
        }
        if d < 0 {
            self.duplicate(target, qpn, op, p, &mut reply);
            return;
        }
        self.nak_sent = false;
        let result = match op {
            Operation::Write => self.write(target, qpn, p, pos.starts(), pos.ends()),
            Operation::Send => self.send(target, qpn, p, pos.starts(), pos.ends()),
            Operation::ReadRequest => self.read(target, qpn, p, &mut reply).map(|n| {
                self.msn = psn::add(self.msn, 1);
                self.epsn = psn::add(self.epsn, n);
            }),
            Operation::Atomic => self.atomic(target, qpn, p, &mut reply),
            // Acknowledgements and responses are the requester's.
            Operation::ReadResponse | Operation::Ack | Operation::AtomicAck => return,
        };
        match result {
            Ok(()) if matches!(op, Operation::Write | Operation::Send) => {
                self.epsn = psn::add(self.epsn, 1);
                if p.ack_req {
                    reply.ack(p.psn, Aeth::ack(self.msn));
                }
            }
            Ok(()) => {}
            Err(nak) => {
                // The message starts over when the requester sends it again.
                let start = self.message_start(p);
                self.inbound = None;
                let aeth = match nak {
                    Nak::Rnr => Aeth::rnr(self.min_rnr_timer, self.msn),
                    Nak::Access(_) => Aeth::nak(AethNakCode::REMOTE_ACCESS_ERROR, self.msn),
                    Nak::InvalReq(_) => Aeth::nak(AethNakCode::INVALID_REQUEST, self.msn),
                    Nak::RemoteOp(_) => Aeth::nak(AethNakCode::REMOTE_OPERATIONAL_ERROR, self.msn),
                    Nak::NoResponse(_) => return,
                };
                if let Nak::Access(why) | Nak::InvalReq(why) | Nak::RemoteOp(why) = &nak {
                    self.fatal = Some(format!("responder NAK {aeth:?} for PSN {:#08x}: {why}", p.psn));
                }
                if matches!(nak, Nak::Rnr) {
                    // The whole message is sent again from its first packet.
                    self.epsn = start;
                    reply.ack(self.epsn, aeth);
                } else {
                    reply.ack(p.psn, aeth);
                }
            }
        }
    }

    /// The PSN of the first packet of the message `p` ends or continues.
    fn message_start(&self, p: &Packet<'_>) -> u32 {
        match &self.inbound {
            Some(Inbound::Write { first_psn, .. } | Inbound::Send { first_psn, .. }) => *first_psn,
            None => p.psn,
        }
    }

    fn check_size(&self, p: &Packet<'_>, ends: bool, have: u32, len: Option<u32>) -> Result<(), Nak> {
        let n = p.payload.len() as u32;
        let bad = if ends { len.is_some_and(|l| have + n != l) || n > self.pmtu } else { n != self.pmtu };
        if bad {
            return Err(Nak::InvalReq(format!("PSN {:#08x}: {n} bytes of payload at path MTU {}", p.psn, self.pmtu)));
        }
        Ok(())
    }

    fn write(
        &mut self,
        target: &mut impl Target,
        qpn: u32,
        p: &Packet<'_>,
        starts: bool,
        ends: bool,
    ) -> Result<(), Nak> {
        if starts {
            if self.inbound.is_some() {
                return Err(Nak::InvalReq("a new message before the last one ended".into()));
            }
            let r = p.reth.ok_or_else(|| Nak::InvalReq("RDMA WRITE without RETH".into()))?;
            if ends {
                self.check_size(p, true, 0, Some(r.len))?;
                let remote = RemoteAddr { raddr: r.va, rkey: r.rkey };
                respond::write(target, qpn, remote, Src::Bytes(p.payload), p.imm)?;
                self.msn = psn::add(self.msn, 1);
                return Ok(());
            }
            self.inbound = Some(Inbound::Write { first_psn: p.psn, va: r.va, rkey: r.rkey, offset: 0, len: r.len });
        }
        let Some(Inbound::Write { first_psn, va, rkey, offset, len }) = self.inbound else {
            return Err(Nak::InvalReq(format!("PSN {:#08x} continues no RDMA WRITE", p.psn)));
        };
        self.check_size(p, ends, offset, Some(len))?;
        let remote = RemoteAddr { raddr: va.wrapping_add(offset.into()), rkey };
        respond::write(target, qpn, remote, Src::Bytes(p.payload), None)?;
        let offset = offset + p.payload.len() as u32;
        if ends {
            if let Some(imm) = p.imm {
                respond::write_imm_done(target, qpn, len, imm)?;
            }
            self.inbound = None;
            self.msn = psn::add(self.msn, 1);
        } else {
            self.inbound = Some(Inbound::Write { first_psn, va, rkey, offset, len });
        }
        Ok(())
    }

    fn send(
        &mut self,
        target: &mut impl Target,
        qpn: u32,
        p: &Packet<'_>,
        starts: bool,
        ends: bool,
    ) -> Result<(), Nak> {
        if starts {
            if self.inbound.is_some() {
                return Err(Nak::InvalReq("a new message before the last one ended".into()));
            }
            if !target.has_recv(qpn) {
                return Err(Nak::Rnr);
            }
            self.inbound = Some(Inbound::Send { first_psn: p.psn, data: Vec::new() });
        }
        let Some(Inbound::Send { data, .. }) = &mut self.inbound else {
            return Err(Nak::InvalReq(format!("PSN {:#08x} continues no SEND", p.psn)));
        };
        let have = data.len() as u32;
        let n = p.payload.len() as u32;
        if (!ends && n != self.pmtu) || n > self.pmtu {
            return Err(Nak::InvalReq(format!("PSN {:#08x}: {n} bytes of payload at path MTU {}", p.psn, self.pmtu)));
        }
        if have as u64 + n as u64 > 1 << 31 {
            return Err(Nak::InvalReq("SEND longer than 2^31 bytes".into()));
        }
        data.extend_from_slice(p.payload);
        if ends {
            respond::send(target, qpn, Src::Bytes(data), p.imm)?;
            self.inbound = None;
            self.msn = psn::add(self.msn, 1);
        }
        Ok(())
    }

    /// Execute a READ request at `p.psn` and send its responses; returns how
    /// many PSNs they take.
    fn read(&mut self, target: &mut impl Target, qpn: u32, p: &Packet<'_>, reply: &mut Reply<'_>) -> Result<u32, Nak> {
        let r = p.reth.ok_or_else(|| Nak::InvalReq("RDMA READ without RETH".into()))?;
        let src = respond::read(target, qpn, RemoteAddr { raddr: r.va, rkey: r.rkey }, r.len.into())?;
        let mut data = vec![0u8; r.len as usize];
        src.read(0, &mut data).map_err(|e| Nak::RemoteOp(format!("READ source: {e}")))?;
        let n = packets_for(r.len, self.pmtu);
        // The responses acknowledge the READ itself: the MSN after it.
        let msn = psn::add(self.msn, 1);
        for i in 0..n as usize {
            let pos = position(i, n as usize);
            let chunk = &data[(i * self.pmtu as usize).min(data.len())..((i + 1) * self.pmtu as usize).min(data.len())];
            let op = request_opcode(Operation::ReadResponse, pos, false);
            let aeth = (op != BthOpcode::RDMA_READ_RESPONSE_MIDDLE).then(|| Aeth::ack(msn));
            reply.send(Packet { aeth, payload: chunk, ..reply.packet(op, psn::add(p.psn, i as u32)) });
        }
        Ok(n)
    }

    fn atomic(&mut self, target: &mut impl Target, qpn: u32, p: &Packet<'_>, reply: &mut Reply<'_>) -> Result<(), Nak> {
        let a = p.atomic.ok_or_else(|| Nak::InvalReq("atomic without AtomicETH".into()))?;
        let args = match p.opcode {
            BthOpcode::COMPARE_SWAP => AtomicArgs::Cs { compare: a.comp, swap: a.swap_add },
            _ => AtomicArgs::Fa { add: a.swap_add },
        };
        let orig = respond::atomic(target, qpn, RemoteAddr { raddr: a.va, rkey: a.rkey }, args)?;
        self.msn = psn::add(self.msn, 1);
        self.epsn = psn::add(self.epsn, 1);
        if self.atomics.len() == self.resources {
            self.atomics.pop_front();
        }
        self.atomics.push_back((p.psn, orig));
        self.atomic_ack(p.psn, orig, reply);
        Ok(())
    }

    fn atomic_ack(&self, at: u32, orig: u64, reply: &mut Reply<'_>) {
        let base = reply.packet(BthOpcode::ATOMIC_ACKNOWLEDGE, at);
        reply.send(Packet { aeth: Some(Aeth::ack(self.msn)), atomic_ack: Some(orig), ..base });
    }

    fn duplicate(&mut self, target: &mut impl Target, qpn: u32, op: Operation, p: &Packet<'_>, reply: &mut Reply<'_>) {
        match op {
            Operation::Write | Operation::Send if p.ack_req => {
                reply.ack(psn::prev(self.epsn), Aeth::ack(self.msn));
            }
            Operation::ReadRequest => {
                // A READ has no side effect: execute it again (IBA 9.7.5.1.1).
                if let Err(nak) = self.read(target, qpn, p, reply) {
                    let _ = nak; // it succeeded the first time; the requester's timer covers a change
                }
            }
            Operation::Atomic => {
                // Never execute twice: replay the saved result, or stay silent.
                if let Some(&(_, orig)) = self.atomics.iter().find(|(q, _)| *q == p.psn) {
                    self.atomic_ack(p.psn, orig, reply);
                }
            }
            _ => {}
        }
    }
}

/// Answers to one requester QP.
struct Reply<'a> {
    to: u32,
    out: &'a mut Vec<Vec<u8>>,
}

impl Reply<'_> {
    fn packet(&self, opcode: BthOpcode, at: u32) -> Packet<'static> {
        Packet::bare(opcode, self.to, at)
    }

    fn send(&mut self, p: Packet<'_>) {
        // Room for the ICRC the port appends.
        let mut b = Vec::with_capacity(p.wire_len() + 4);
        p.encode(&mut b);
        self.out.push(b);
    }

    fn ack(&mut self, at: u32, aeth: Aeth) {
        let p = Packet { aeth: Some(aeth), ..self.packet(BthOpcode::ACKNOWLEDGE, at) };
        self.send(p);
    }
}
