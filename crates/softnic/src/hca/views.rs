//! What `crate::exec` and `crate::respond` see of the HCA: each takes a
//! trait ([`crate::exec::Initiator`], [`crate::respond::Target`]) rather
//! than the `Hca` itself, so neither depends on the rest of it.

use super::Hca;
use crate::exec::{self, Outcome};
use crate::mr::{MrTable, Pd};
use crate::qp::RCV_DBR_OFFSET;
use crate::rc::requester::Message;
use crate::respond::{Nak, Recv, Target};
use crate::trace::Kind;
use marrow_mlx5::cqe::Completion;
use marrow_mlx5::raw::{Syndrome, mlx5_wqe_data_seg};
use marrow_mlx5::wqe_decode::CtrlFields;

/// The responder's view of this HCA ([`crate::respond`]): the target QP's
/// PD, state and receive queue, the MR table, its receive CQ, its error path.
impl Target for Hca {
    fn accepting(&self, qpn: u32) -> Result<Pd, Nak> {
        match self.qps.get(&qpn) {
            Some(p) if p.state.can_receive() => Ok(p.pd),
            Some(p) => {
                Err(Nak::NoResponse(format!("peer QP {qpn:#x} is in {:?}: no response, retries exhausted", p.state)))
            }
            None => Err(Nak::NoResponse(format!("peer QP {qpn:#x} does not exist"))),
        }
    }

    fn mrs(&self) -> &MrTable {
        &self.mrs
    }

    fn connected(&self, qpn: u32, from: u32) -> bool {
        self.qps.get(&qpn).is_some_and(|q| q.peer == Some(from))
    }

    fn has_recv(&self, qpn: u32) -> bool {
        self.qps
            .get(&qpn)
            .is_some_and(|qp| qp.mem.dbrec.read_be32(RCV_DBR_OFFSET).is_ok_and(|head| head as u16 != qp.rq_ci as u16))
    }

    fn take_recv(&mut self, qpn: u32) -> Option<Recv> {
        let qp = self.qps.get_mut(&qpn)?;
        let head = qp.mem.dbrec.read_be32(RCV_DBR_OFFSET).ok()? as u16;
        if head == qp.rq_ci as u16 {
            return None;
        }
        let stride = qp.caps.rq_stride as usize;
        let base = (qp.rq_ci % qp.caps.rq_wqes) as usize * stride;
        let mut raw = vec![0u8; stride];
        qp.mem.rq.read_bytes(base, &mut raw).ok()?;
        let index = qp.rq_ci as u16;
        qp.rq_ci = qp.rq_ci.wrapping_add(1);
        let mut sges = Vec::new();
        for seg in raw.chunks_exact(mlx5_wqe_data_seg::SIZE) {
            let Ok(d) = <mlx5_wqe_data_seg as zerocopy::FromBytes>::read_from_bytes(seg) else { break };
            let (bc, lkey, addr) = (d.byte_count(), d.lkey(), d.addr());
            if lkey == marrow_mlx5::raw::MLX5_INVALID_LKEY {
                break;
            }
            sges.push((addr, bc, lkey));
        }
        if let Some(t) = &mut self.trace {
            t.record(Kind::RECV_WQE_FETCH, qpn, 0, base as u64, &raw);
        }
        Some(Recv { index, sges })
    }

    fn complete_recv(&mut self, qpn: u32, c: &Completion) {
        if let Some(cqn) = self.qps.get(&qpn).map(|q| q.recv_cq) {
            self.complete(cqn, qpn, c);
        }
    }

    fn fail(&mut self, qpn: u32, why: String) {
        self.fail_qp(qpn, why);
    }
}

/// The requester's view of this HCA ([`crate::exec`]).
impl exec::Initiator for Hca {
    fn prepare(&mut self, qpn: u32) -> Result<exec::Prepared, Outcome> {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return Err(Outcome::Error { syndrome: Syndrome::LOCAL_QP_OP_ERR, vendor: 0, why: "QP vanished".into() });
        };
        if let Some((k, syndrome, vendor)) = qp.faults.fail_wqe
            && k == qp.executed
        {
            qp.faults.fail_wqe = None;
            if let Some(t) = &mut self.trace {
                let msg = format!("injected {syndrome:?} (vendor {vendor:#04x}) on WQE #{k}");
                t.record(Kind::FAULT, qpn, 0, 0, msg.as_bytes());
            }
            return Err(Outcome::Error { syndrome, vendor, why: "injected fault".into() });
        }
        let wire = qp.wire.is_some() || qp.delegate.is_some();
        Ok(exec::Prepared { pd: qp.pd, sq_ci: qp.sq_ci as u16, peer: qp.peer, wire })
    }

    fn wire_post(&mut self, qpn: u32, msg: Message, ctrl: CtrlFields, byte_cnt: u32) -> Outcome {
        Hca::wire_post(self, qpn, msg, ctrl, byte_cnt)
    }

    fn wire_buffer(&mut self, qpn: u32, len: usize) -> Vec<u8> {
        Hca::wire_buffer(self, qpn, len)
    }
}
