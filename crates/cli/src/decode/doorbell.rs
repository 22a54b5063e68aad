//! A UAR doorbell's decode tree: the 8 bytes rdma-core's
//! `mlx5_bf_copy`/`mmio_write64_be` ring, read as `marrow_mlx5::doorbell` reads them.

use super::DB;
use crate::fields::{enum_text, struct_node};
use crate::model::{Decoded, Kind};
use marrow_mlx5::doorbell::{DoorbellStyle, decode_uar_doorbell};
use marrow_mlx5::raw::{mlx5_cq_dbrec, mlx5_qp_dbrec, mlx5_uar_db};
use zerocopy::FromBytes;

// -------------------------------------------------------------- doorbells

pub(super) fn decode_doorbell(kind: Kind, b: [u8; DB], reason: &str) -> Decoded {
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
