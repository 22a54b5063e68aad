//! Doorbell records and UAR doorbell values.
//!
//! QP doorbell record: two big-endian words, `[MLX5_RCV_DBR]` the receive
//! head and `[MLX5_SND_DBR]` the next free WQEBB index, each modulo 2^16
//! (rdma-core `qp.c` `post_send_db`, `mlx5_post_recv`). CQ doorbell record:
//! `[MLX5_CQ_SET_CI]` the 24-bit consumer index and `[MLX5_CQ_ARM_DB]`
//! `sn<<28 | cmd | ci` (rdma-core `cq.c`). The send doorbell is one 64-bit
//! store to `UAR + MLX5_BF_OFFSET`: rdma-core writes the first 8 bytes of the
//! control segment; NVSHMEM (`ibgda_ring_db`) and DOCA
//! (`doca_gpu_dev_common_prepare_db`) write `{BE32(pi << 8), BE32(qpn << 8)}`.

use crate::generated::mlx5::*;
use marrow_layout::FieldOverflow;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

/// The 8 bytes of a QP doorbell record after the send counter is set to
/// `next_wqebb` (the producer index after the last WQE, modulo 2^16).
pub fn qp_dbrec(rcv_counter: u16, next_wqebb: u16) -> [u8; 8] {
    let mut d = mlx5_qp_dbrec::new_zeroed();
    d.set_rcv_wqe_counter(rcv_counter).set_send_wqe_counter(next_wqebb);
    d.as_bytes().try_into().unwrap_or([0; 8])
}

/// The big-endian send-counter word alone: what a driver stores into
/// `dbrec[MLX5_SND_DBR]`.
pub fn qp_dbrec_send_word(next_wqebb: u16) -> [u8; 4] {
    u32::from(next_wqebb).to_be_bytes()
}

/// The CQ doorbell record's consumer-index word (24 bits).
pub fn cq_dbrec_set_ci(cons_index: u32) -> [u8; 4] {
    (cons_index & mlx5_cq_dbrec::CONS_INDEX_MASK).to_be_bytes()
}

/// The CQ arm word `sn<<28 | cmd<<24 | ci`; refuses values wider than their fields.
pub fn cq_arm_word(sn: u8, cmd: u8, ci: u32) -> Result<u32, FieldOverflow> {
    let mut d = mlx5_cq_dbrec::new_zeroed();
    d.set_arm_sn(sn)?.set_arm_cmd(cmd)?.set_arm_ci(ci)?;
    Ok(d.arm_db())
}

/// How a doorbell names the WQE it announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoorbellStyle {
    /// rdma-core: the first 8 bytes of the last WQE's control segment.
    RdmaCore,
    /// NVSHMEM and DOCA: WQE index and QPN only (opcode 0, ds 0).
    IndexAndQpn,
}

/// The 8 bytes rdma-core stores to the UAR: the control segment's
/// `opmod_idx_opcode` and `qpn_ds`, unchanged.
pub fn uar_doorbell_from_ctrl(ctrl: &mlx5_wqe_ctrl_seg) -> [u8; 8] {
    let mut out = [0u8; 8];
    out.copy_from_slice(&ctrl.as_bytes()[..8]);
    out
}

/// The 8 bytes NVSHMEM and DOCA store to the UAR: `{BE32(pi << 8), BE32(qpn << 8)}`.
pub fn uar_doorbell_index_qpn(pi: u16, qpn: u32) -> Result<[u8; 8], FieldOverflow> {
    let mut d = mlx5_uar_db::new_zeroed();
    d.set_wqe_index(pi).set_qpn(qpn)?;
    let mut out = [0u8; 8];
    out.copy_from_slice(d.as_bytes());
    Ok(out)
}

/// A send doorbell as the NIC reads it: which QP, and up to which WQEBB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UarDoorbell {
    /// QP number.
    pub qpn: u32,
    /// The WQE index carried (`opmod_idx_opcode[23:8]`).
    pub wqe_index: u16,
    /// Opcode carried (0 for GPU doorbells).
    pub opcode: WqeOpcode,
    /// `ds` carried (0 for GPU doorbells).
    pub ds: u8,
    /// Which convention wrote it.
    pub style: DoorbellStyle,
}

/// Decode 8 doorbell bytes.
pub fn decode_uar_doorbell(bytes: [u8; 8]) -> UarDoorbell {
    // An 8-byte array always holds an 8-byte, unaligned layout.
    let d = mlx5_uar_db::read_from_bytes(&bytes).unwrap_or_else(|_| mlx5_uar_db::new_zeroed());
    let style = if d.opcode().0 == 0 && d.ds() == 0 { DoorbellStyle::IndexAndQpn } else { DoorbellStyle::RdmaCore };
    UarDoorbell { qpn: d.qpn(), wqe_index: d.wqe_index(), opcode: d.opcode(), ds: d.ds(), style }
}
