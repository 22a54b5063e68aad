//! What each RC opcode carries (InfiniBand Architecture Specification
//! vol. 1 §9.2.1 Table 38 and §9.3; the same table as Linux rxe's
//! `rxe_opcode.c`), and where it sits in a message.

use crate::raw::BthOpcode;

/// The extended headers and payload a packet of one opcode carries, in wire order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// RDMA Extended Transport Header.
    pub reth: bool,
    /// Atomic Extended Transport Header.
    pub atmeth: bool,
    /// ACK Extended Transport Header.
    pub aeth: bool,
    /// Atomic Acknowledge Extended Transport Header.
    pub atmack: bool,
    /// Immediate data.
    pub immdt: bool,
    /// A payload may follow the headers.
    pub payload: bool,
}

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// The first of several packets.
    First,
    /// Neither first nor last.
    Middle,
    /// The last of several.
    Last,
    /// The whole message.
    Only,
}

impl Position {
    /// True for the packet that starts a message (FIRST or ONLY).
    pub fn starts(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// True for the packet that ends a message (LAST or ONLY).
    pub fn ends(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// The operation an opcode belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// SEND (with or without immediate).
    Send,
    /// RDMA WRITE (with or without immediate).
    Write,
    /// RDMA READ request.
    ReadRequest,
    /// RDMA READ response.
    ReadResponse,
    /// ACKNOWLEDGE.
    Ack,
    /// ATOMIC ACKNOWLEDGE.
    AtomicAck,
    /// COMPARE_SWAP or FETCH_ADD.
    Atomic,
}

/// What one opcode is: its operation, position and headers; `None` for an
/// opcode this model does not carry (SEND with invalidate, other transport
/// classes, manufacturer-specific opcodes).
pub fn describe(op: BthOpcode) -> Option<(Operation, Position, Layout)> {
    use Operation::*;
    use Position::*;
    let plain = Layout { payload: true, ..Layout::default() };
    let imm = Layout { immdt: true, ..plain };
    let reth = Layout { reth: true, ..plain };
    let aeth = Layout { aeth: true, ..plain };
    Some(match op {
        BthOpcode::SEND_FIRST => (Send, First, plain),
        BthOpcode::SEND_MIDDLE => (Send, Middle, plain),
        BthOpcode::SEND_LAST => (Send, Last, plain),
        BthOpcode::SEND_LAST_WITH_IMMEDIATE => (Send, Last, imm),
        BthOpcode::SEND_ONLY => (Send, Only, plain),
        BthOpcode::SEND_ONLY_WITH_IMMEDIATE => (Send, Only, imm),
        BthOpcode::RDMA_WRITE_FIRST => (Write, First, reth),
        BthOpcode::RDMA_WRITE_MIDDLE => (Write, Middle, plain),
        BthOpcode::RDMA_WRITE_LAST => (Write, Last, plain),
        BthOpcode::RDMA_WRITE_LAST_WITH_IMMEDIATE => (Write, Last, imm),
        BthOpcode::RDMA_WRITE_ONLY => (Write, Only, reth),
        BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE => (Write, Only, Layout { immdt: true, ..reth }),
        BthOpcode::RDMA_READ_REQUEST => (ReadRequest, Only, Layout { reth: true, ..Layout::default() }),
        BthOpcode::RDMA_READ_RESPONSE_FIRST => (ReadResponse, First, aeth),
        BthOpcode::RDMA_READ_RESPONSE_MIDDLE => (ReadResponse, Middle, plain),
        BthOpcode::RDMA_READ_RESPONSE_LAST => (ReadResponse, Last, aeth),
        BthOpcode::RDMA_READ_RESPONSE_ONLY => (ReadResponse, Only, aeth),
        BthOpcode::ACKNOWLEDGE => (Ack, Only, Layout { aeth: true, ..Layout::default() }),
        BthOpcode::ATOMIC_ACKNOWLEDGE => (AtomicAck, Only, Layout { aeth: true, atmack: true, ..Layout::default() }),
        BthOpcode::COMPARE_SWAP | BthOpcode::FETCH_ADD => (Atomic, Only, Layout { atmeth: true, ..Layout::default() }),
        _ => return None,
    })
}

/// The opcode of packet `position` of a SEND or WRITE message.
pub fn request_opcode(op: Operation, position: Position, with_imm: bool) -> BthOpcode {
    match (op, position, with_imm) {
        (Operation::Send, Position::First, _) => BthOpcode::SEND_FIRST,
        (Operation::Send, Position::Middle, _) => BthOpcode::SEND_MIDDLE,
        (Operation::Send, Position::Last, false) => BthOpcode::SEND_LAST,
        (Operation::Send, Position::Last, true) => BthOpcode::SEND_LAST_WITH_IMMEDIATE,
        (Operation::Send, Position::Only, false) => BthOpcode::SEND_ONLY,
        (Operation::Send, Position::Only, true) => BthOpcode::SEND_ONLY_WITH_IMMEDIATE,
        (Operation::Write, Position::First, _) => BthOpcode::RDMA_WRITE_FIRST,
        (Operation::Write, Position::Middle, _) => BthOpcode::RDMA_WRITE_MIDDLE,
        (Operation::Write, Position::Last, false) => BthOpcode::RDMA_WRITE_LAST,
        (Operation::Write, Position::Last, true) => BthOpcode::RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (Operation::Write, Position::Only, false) => BthOpcode::RDMA_WRITE_ONLY,
        (Operation::Write, Position::Only, true) => BthOpcode::RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        (Operation::ReadResponse, Position::First, _) => BthOpcode::RDMA_READ_RESPONSE_FIRST,
        (Operation::ReadResponse, Position::Middle, _) => BthOpcode::RDMA_READ_RESPONSE_MIDDLE,
        (Operation::ReadResponse, Position::Last, _) => BthOpcode::RDMA_READ_RESPONSE_LAST,
        (Operation::ReadResponse, Position::Only, _) => BthOpcode::RDMA_READ_RESPONSE_ONLY,
        (Operation::ReadRequest, ..) => BthOpcode::RDMA_READ_REQUEST,
        (Operation::Ack, ..) => BthOpcode::ACKNOWLEDGE,
        (Operation::AtomicAck, ..) => BthOpcode::ATOMIC_ACKNOWLEDGE,
        (Operation::Atomic, ..) => BthOpcode::FETCH_ADD,
    }
}

/// The position of packet `i` of `n` (n ≥ 1).
pub fn position(i: usize, n: usize) -> Position {
    match (i == 0, i + 1 >= n) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_rc_opcode_but_invalidate_is_described_and_round_trips() {
        for &op in BthOpcode::ALL {
            let name = op.name().unwrap_or("?");
            let Some((o, p, l)) = describe(op) else {
                assert!(name.contains("INVALIDATE"), "{name} has no description");
                continue;
            };
            if matches!(o, Operation::Send | Operation::Write | Operation::ReadResponse) {
                assert_eq!(request_opcode(o, p, l.immdt), op, "{name}");
            }
        }
    }
}
