//! Work-completion status → the mlx5 CQE syndrome a ConnectX reports.
//!
//! The source is the inverse of rdma-core's `providers/mlx5/cq.c`
//! `mlx5_handle_error_cqe`, which maps each mlx5 syndrome to the
//! `ibv_wc_status` an application sees; each status below is mapped back
//! to the syndrome that produces it. Statuses no mlx5 syndrome produces
//! (the EEC, RDD and tag-matching ones, FATAL, RESP_TIMEOUT, GENERAL) have
//! no exact inverse: `mlx5_handle_error_cqe` turns every syndrome it does
//! not name into `IBV_WC_GENERAL_ERR`, so they are given a syndrome that
//! names the same failure class (noted in the last column).
//!
//! | `ibv_wc_status` | mlx5 syndrome | |
//! |---|---|---|
//! | `IBV_WC_LOC_LEN_ERR` (1) | LOCAL_LENGTH_ERR 0x01 | exact |
//! | `IBV_WC_LOC_QP_OP_ERR` (2) | LOCAL_QP_OP_ERR 0x02 | exact |
//! | `IBV_WC_LOC_EEC_OP_ERR` (3) | LOCAL_QP_OP_ERR 0x02 | no mlx5 form (no EE contexts) |
//! | `IBV_WC_LOC_PROT_ERR` (4) | LOCAL_PROT_ERR 0x04 | exact |
//! | `IBV_WC_WR_FLUSH_ERR` (5) | WR_FLUSH_ERR 0x05 | exact |
//! | `IBV_WC_MW_BIND_ERR` (6) | MW_BIND_ERR 0x06 | exact |
//! | `IBV_WC_BAD_RESP_ERR` (7) | BAD_RESP_ERR 0x10 | exact |
//! | `IBV_WC_LOC_ACCESS_ERR` (8) | LOCAL_ACCESS_ERR 0x11 | exact |
//! | `IBV_WC_REM_INV_REQ_ERR` (9) | REMOTE_INVAL_REQ_ERR 0x12 | exact |
//! | `IBV_WC_REM_ACCESS_ERR` (10) | REMOTE_ACCESS_ERR 0x13 | exact |
//! | `IBV_WC_REM_OP_ERR` (11) | REMOTE_OP_ERR 0x14 | exact |
//! | `IBV_WC_RETRY_EXC_ERR` (12) | TRANSPORT_RETRY_EXC_ERR 0x15 | exact |
//! | `IBV_WC_RNR_RETRY_EXC_ERR` (13) | RNR_RETRY_EXC_ERR 0x16 | exact |
//! | `IBV_WC_LOC_RDD_VIOL_ERR` (14) | LOCAL_PROT_ERR 0x04 | no mlx5 form (RD only) |
//! | `IBV_WC_REM_INV_RD_REQ_ERR` (15) | REMOTE_INVAL_REQ_ERR 0x12 | no mlx5 form (RD only) |
//! | `IBV_WC_REM_ABORT_ERR` (16) | REMOTE_ABORTED_ERR 0x22 | exact |
//! | `IBV_WC_INV_EECN_ERR` (17), `IBV_WC_INV_EEC_STATE_ERR` (18) | LOCAL_QP_OP_ERR 0x02 | no mlx5 form (RD only) |
//! | `IBV_WC_FATAL_ERR` (19) | LOCAL_QP_OP_ERR 0x02 | no mlx5 form |
//! | `IBV_WC_RESP_TIMEOUT_ERR` (20) | TRANSPORT_RETRY_EXC_ERR 0x15 | no mlx5 form: a response that never came |
//! | `IBV_WC_GENERAL_ERR` (21) and any other | LOCAL_QP_OP_ERR 0x02 | `mlx5_handle_error_cqe`'s default |

use marrow_mlx5::raw::Syndrome;
use marrow_verbs::ffi::*;

/// The syndrome for `status`, and the status's name.
pub fn syndrome_of(status: u32) -> (Syndrome, &'static str) {
    let s = match status {
        IBV_WC_LOC_LEN_ERR => Syndrome::LOCAL_LENGTH_ERR,
        IBV_WC_LOC_PROT_ERR | IBV_WC_LOC_RDD_VIOL_ERR => Syndrome::LOCAL_PROT_ERR,
        IBV_WC_WR_FLUSH_ERR => Syndrome::WR_FLUSH_ERR,
        IBV_WC_MW_BIND_ERR => Syndrome::MW_BIND_ERR,
        IBV_WC_BAD_RESP_ERR => Syndrome::BAD_RESP_ERR,
        IBV_WC_LOC_ACCESS_ERR => Syndrome::LOCAL_ACCESS_ERR,
        IBV_WC_REM_INV_REQ_ERR | IBV_WC_REM_INV_RD_REQ_ERR => Syndrome::REMOTE_INVAL_REQ_ERR,
        IBV_WC_REM_ACCESS_ERR => Syndrome::REMOTE_ACCESS_ERR,
        IBV_WC_REM_OP_ERR => Syndrome::REMOTE_OP_ERR,
        IBV_WC_RETRY_EXC_ERR | IBV_WC_RESP_TIMEOUT_ERR => Syndrome::TRANSPORT_RETRY_EXC_ERR,
        IBV_WC_RNR_RETRY_EXC_ERR => Syndrome::RNR_RETRY_EXC_ERR,
        IBV_WC_REM_ABORT_ERR => Syndrome::REMOTE_ABORTED_ERR,
        _ => Syndrome::LOCAL_QP_OP_ERR,
    };
    (s, IBV_WC_STATUS_NAMES.get(status as usize).copied().unwrap_or("unknown status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mlx5_handle_error_cqe` (rdma-core `providers/mlx5/cq.c`) as a table:
    /// syndrome → status. Every pair must come back through [`syndrome_of`].
    const RDMA_CORE: &[(Syndrome, u32)] = &[
        (Syndrome::LOCAL_LENGTH_ERR, IBV_WC_LOC_LEN_ERR),
        (Syndrome::LOCAL_QP_OP_ERR, IBV_WC_LOC_QP_OP_ERR),
        (Syndrome::LOCAL_PROT_ERR, IBV_WC_LOC_PROT_ERR),
        (Syndrome::WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR),
        (Syndrome::MW_BIND_ERR, IBV_WC_MW_BIND_ERR),
        (Syndrome::BAD_RESP_ERR, IBV_WC_BAD_RESP_ERR),
        (Syndrome::LOCAL_ACCESS_ERR, IBV_WC_LOC_ACCESS_ERR),
        (Syndrome::REMOTE_INVAL_REQ_ERR, IBV_WC_REM_INV_REQ_ERR),
        (Syndrome::REMOTE_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR),
        (Syndrome::REMOTE_OP_ERR, IBV_WC_REM_OP_ERR),
        (Syndrome::TRANSPORT_RETRY_EXC_ERR, IBV_WC_RETRY_EXC_ERR),
        (Syndrome::RNR_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR),
        (Syndrome::REMOTE_ABORTED_ERR, IBV_WC_REM_ABORT_ERR),
    ];

    #[test]
    fn every_status_rdma_core_derives_maps_back_to_its_syndrome() {
        for &(syn, status) in RDMA_CORE {
            assert_eq!(syndrome_of(status).0, syn, "{}", syndrome_of(status).1);
        }
        // Every named syndrome is covered by the table.
        assert_eq!(RDMA_CORE.len(), Syndrome::ALL.len());
        assert_eq!(syndrome_of(IBV_WC_REM_ACCESS_ERR).0, Syndrome(0x13));
        assert_eq!(syndrome_of(IBV_WC_RETRY_EXC_ERR).0, Syndrome(0x15));
        assert_eq!(syndrome_of(IBV_WC_GENERAL_ERR), (Syndrome::LOCAL_QP_OP_ERR, "IBV_WC_GENERAL_ERR"));
        assert_eq!(syndrome_of(99).1, "unknown status");
    }
}
