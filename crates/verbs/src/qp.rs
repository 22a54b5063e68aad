//! RC QP transitions RESET→INIT→RTR→RTS as pure functions: each returns the
//! `ibv_qp_attr` and the `IBV_QP_*` mask that `ibv_modify_qp` takes, with the
//! values of rdma-core's own RC example (`libibverbs/examples/rc_pingpong.c`:
//! timeout 14, retry 7, RNR retry 7, RNR timer 12, hop limit 1), except the
//! read/atomic depth, which marrow raises from 1 to 16 because the device code
//! keeps many gets and atomics in flight.
//!
//! The masks are checked (in this module's tests) against the table the
//! kernel enforces, `qp_state_table` in Linux
//! `drivers/infiniband/core/verbs.c` (`ib_modify_qp_is_ok`): every required
//! attribute present, nothing outside required ∪ optional ∪ {STATE,
//! RATE_LIMIT}. The IBTA spec's "QP state transition required attributes"
//! tables say the same for RC; the kernel's copy is the one a lab node runs.
//! The `IBV_QP_*` values themselves are checked against `<infiniband/verbs.h>`
//! by `tests/oracle/tests/verbs_abi.rs`.

use crate::ffi::*;
use serde::{Deserialize, Serialize};

/// What one side of an RC connection tells the other through the bootstrap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RcEndpoint {
    /// QP number.
    pub qpn: u32,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Port GID at `gid_index` (RoCE; also IB across subnets).
    pub gid: [u8; 16],
    /// First PSN this side will send (24 bits).
    pub psn: u32,
    /// rkey of the symmetric buffer.
    pub rkey: u32,
    /// Address of the symmetric buffer.
    pub addr: u64,
    /// Bytes of it.
    pub len: u64,
}

impl RcEndpoint {
    /// A record only rank `rank` would send, every field different between
    /// ranks: what the bootstrap tests and the `marrow-mpi-probe` helper
    /// exchange and check.
    #[doc(hidden)]
    pub fn sample(rank: u32) -> RcEndpoint {
        RcEndpoint {
            qpn: 0x1_0000 + rank,
            lid: 0x100 + rank as u16,
            gid: std::array::from_fn(|i| (rank as u8).wrapping_mul(16).wrapping_add(i as u8)),
            psn: 0x00ab_cd00 + rank,
            rkey: 0xdead_0000 + rank,
            addr: 0x7f00_0000_0000 + u64::from(rank) * 4096,
            len: 1 << (20 + rank),
        }
    }
}

/// Link-level addressing of the local port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand: address by LID (a GRH only across subnets, not used here).
    Infiniband,
    /// RoCE: address by GID, always with a GRH.
    Ethernet,
}

/// Connection parameters that are local choices, not exchanged.
#[derive(Clone, Copy, Debug)]
pub struct RcParams {
    /// Local port (1-based).
    pub port: u8,
    /// GID table index of the local GID (RoCE v2 is usually 3, or whichever
    /// `show_gids` lists as v2 with an IPv4-mapped address).
    pub sgid_index: u8,
    /// `IBV_MTU_*` code.
    pub mtu: u32,
    /// Link layer of the local port.
    pub link: LinkLayer,
    /// Outstanding RDMA reads/atomics each way.
    pub rd_atomic: u8,
    /// Local ACK timeout code: 4.096 µs × 2^timeout (14 ≈ 67 ms, rc_pingpong's).
    pub timeout: u8,
    /// Transport retries (7: the most).
    pub retry_cnt: u8,
    /// RNR retries (7: infinite; marrow posts no receives on the data path).
    pub rnr_retry: u8,
    /// RNR NAK timer code (12 ≈ 0.64 ms, rc_pingpong's).
    pub min_rnr_timer: u8,
    /// Service level.
    pub sl: u8,
    /// Traffic class (RoCE DSCP<<2); 0 unless the fabric asks.
    pub traffic_class: u8,
}

impl Default for RcParams {
    fn default() -> Self {
        RcParams {
            port: 1,
            sgid_index: 0,
            mtu: IBV_MTU_4096,
            link: LinkLayer::Infiniband,
            rd_atomic: 16,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            sl: 0,
            traffic_class: 0,
        }
    }
}

/// Remote access a marrow channel grants: the device code writes, reads and
/// does atomics on the peer's symmetric buffer.
pub const RC_ACCESS: u32 =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

/// RESET→INIT: state, P_Key index, port, access flags.
pub fn reset_to_init(p: &RcParams) -> (ibv_qp_attr, u32) {
    let a = ibv_qp_attr {
        qp_state: IBV_QPS_INIT,
        pkey_index: 0,
        port_num: p.port,
        qp_access_flags: RC_ACCESS,
        ..Default::default()
    };
    (a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
}

/// INIT→RTR: path MTU, the remote QPN and its first PSN, responder
/// resources, RNR timer and the address vector (LID on IB; on RoCE the GID
/// with a GRH and hop limit 1, as `rc_pingpong.c` sets it).
pub fn init_to_rtr(p: &RcParams, remote: &RcEndpoint) -> (ibv_qp_attr, u32) {
    let mut ah = ibv_ah_attr { dlid: remote.lid, sl: p.sl, port_num: p.port, ..Default::default() };
    if p.link == LinkLayer::Ethernet {
        ah.is_global = 1;
        ah.grh = ibv_global_route {
            dgid: ibv_gid { raw: remote.gid },
            flow_label: 0,
            sgid_index: p.sgid_index,
            hop_limit: 1,
            traffic_class: p.traffic_class,
        };
        ah.dlid = 0;
    }
    let a = ibv_qp_attr {
        qp_state: IBV_QPS_RTR,
        path_mtu: p.mtu,
        dest_qp_num: remote.qpn,
        rq_psn: remote.psn & marrow_mlx5::raw::qpc::NEXT_RCV_PSN_MASK,
        max_dest_rd_atomic: p.rd_atomic,
        min_rnr_timer: p.min_rnr_timer,
        ah_attr: ah,
        ..Default::default()
    };
    let mask = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;
    (a, mask)
}

/// RTR→RTS: ACK timeout, retry counts, our first PSN, initiator depth.
pub fn rtr_to_rts(p: &RcParams, local_psn: u32) -> (ibv_qp_attr, u32) {
    let a = ibv_qp_attr {
        qp_state: IBV_QPS_RTS,
        timeout: p.timeout,
        retry_cnt: p.retry_cnt,
        rnr_retry: p.rnr_retry,
        sq_psn: local_psn & marrow_mlx5::raw::qpc::NEXT_SEND_PSN_MASK,
        max_rd_atomic: p.rd_atomic,
        ..Default::default()
    };
    let mask =
        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    (a, mask)
}

/// One row of the kernel's `qp_state_table` for `IB_QPT_RC`: (from, to,
/// required, optional). Transcribed from Linux 7.3
/// `drivers/infiniband/core/verbs.c`; the kernel's `IB_QP_*` bits equal
/// rdma-core's `IBV_QP_*` (both are the uverbs ABI).
pub const RC_TRANSITIONS: [(u32, u32, u32, u32); 3] = [
    (IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, 0),
    (
        IBV_QPS_INIT,
        IBV_QPS_RTR,
        IBV_QP_AV
            | IBV_QP_PATH_MTU
            | IBV_QP_DEST_QPN
            | IBV_QP_RQ_PSN
            | IBV_QP_MAX_DEST_RD_ATOMIC
            | IBV_QP_MIN_RNR_TIMER,
        IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
    ),
    (
        IBV_QPS_RTR,
        IBV_QPS_RTS,
        IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
        IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE,
    ),
];

/// `ib_modify_qp_is_ok` for RC, for the transitions marrow makes: `Err`
/// names the missing or unexpected attributes.
pub fn mask_is_ok(from: u32, to: u32, mask: u32) -> Result<(), String> {
    let Some(&(_, _, req, opt)) = RC_TRANSITIONS.iter().find(|t| t.0 == from && t.1 == to) else {
        return Err(format!("no RC transition {from}→{to} in the table"));
    };
    if mask & IBV_QP_STATE == 0 {
        return Err("IBV_QP_STATE missing".into());
    }
    let missing = req & !mask;
    let extra = mask & !(req | opt | IBV_QP_STATE | IBV_QP_RATE_LIMIT);
    match (missing, extra) {
        (0, 0) => Ok(()),
        _ => Err(format!("missing {}; not allowed {}", mask_names(missing), mask_names(extra))),
    }
}

/// The `IBV_QP_*` names of the bits in `mask`.
pub fn mask_names(mask: u32) -> String {
    const NAMES: [(u32, &str); 22] = [
        (IBV_QP_STATE, "STATE"),
        (IBV_QP_CUR_STATE, "CUR_STATE"),
        (IBV_QP_EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY"),
        (IBV_QP_ACCESS_FLAGS, "ACCESS_FLAGS"),
        (IBV_QP_PKEY_INDEX, "PKEY_INDEX"),
        (IBV_QP_PORT, "PORT"),
        (IBV_QP_QKEY, "QKEY"),
        (IBV_QP_AV, "AV"),
        (IBV_QP_PATH_MTU, "PATH_MTU"),
        (IBV_QP_TIMEOUT, "TIMEOUT"),
        (IBV_QP_RETRY_CNT, "RETRY_CNT"),
        (IBV_QP_RNR_RETRY, "RNR_RETRY"),
        (IBV_QP_RQ_PSN, "RQ_PSN"),
        (IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC"),
        (IBV_QP_ALT_PATH, "ALT_PATH"),
        (IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER"),
        (IBV_QP_SQ_PSN, "SQ_PSN"),
        (IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"),
        (IBV_QP_PATH_MIG_STATE, "PATH_MIG_STATE"),
        (IBV_QP_CAP, "CAP"),
        (IBV_QP_DEST_QPN, "DEST_QPN"),
        (IBV_QP_RATE_LIMIT, "RATE_LIMIT"),
    ];
    let v: Vec<&str> = NAMES.iter().filter(|(b, _)| mask & b != 0).map(|(_, n)| *n).collect();
    if v.is_empty() { "nothing".into() } else { v.join("|") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote() -> RcEndpoint {
        RcEndpoint {
            qpn: 0x1234,
            lid: 7,
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            psn: 0x0abc_def0,
            rkey: 9,
            addr: 0x1000,
            len: 64,
        }
    }

    #[test]
    fn every_transition_mask_passes_the_kernels_table() {
        for link in [LinkLayer::Infiniband, LinkLayer::Ethernet] {
            let p = RcParams { link, ..RcParams::default() };
            let (a, m) = reset_to_init(&p);
            assert_eq!(a.qp_state, IBV_QPS_INIT);
            mask_is_ok(IBV_QPS_RESET, IBV_QPS_INIT, m).unwrap();
            let (a, m) = init_to_rtr(&p, &remote());
            assert_eq!(a.qp_state, IBV_QPS_RTR);
            mask_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, m).unwrap();
            let (a, m) = rtr_to_rts(&p, 0x00ff_0001);
            assert_eq!(a.qp_state, IBV_QPS_RTS);
            mask_is_ok(IBV_QPS_RTR, IBV_QPS_RTS, m).unwrap();
        }
    }

    #[test]
    fn the_checker_refuses_a_missing_or_foreign_attribute() {
        let (_, m) = init_to_rtr(&RcParams::default(), &remote());
        let e = mask_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, m & !IBV_QP_AV).unwrap_err();
        assert!(e.contains("missing AV"), "{e}");
        let e = mask_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, m | IBV_QP_SQ_PSN).unwrap_err();
        assert!(e.contains("not allowed SQ_PSN"), "{e}");
        assert!(mask_is_ok(IBV_QPS_RESET, IBV_QPS_INIT, IBV_QP_PORT).is_err());
    }

    #[test]
    fn values_are_the_ones_rc_needs() {
        let p = RcParams::default();
        let (a, _) = reset_to_init(&p);
        assert_eq!((a.port_num, a.pkey_index, a.qp_access_flags), (1, 0, 0xf));
        // IB: LID addressing, no GRH.
        let (a, _) = init_to_rtr(&p, &remote());
        assert_eq!((a.dest_qp_num, a.rq_psn, a.path_mtu), (0x1234, 0xbcdef0, IBV_MTU_4096));
        assert_eq!((a.ah_attr.dlid, a.ah_attr.is_global, a.ah_attr.port_num), (7, 0, 1));
        assert_eq!((a.max_dest_rd_atomic, a.min_rnr_timer), (16, 12));
        // RoCE: GID with a GRH, the local GID index, no LID.
        let pr = RcParams { link: LinkLayer::Ethernet, sgid_index: 3, ..p };
        let (a, _) = init_to_rtr(&pr, &remote());
        assert_eq!(
            (a.ah_attr.is_global, a.ah_attr.dlid, a.ah_attr.grh.sgid_index, a.ah_attr.grh.hop_limit),
            (1, 0, 3, 1)
        );
        assert_eq!(a.ah_attr.grh.dgid.raw, remote().gid);
        let (a, _) = rtr_to_rts(&p, 0x0100_0005);
        assert_eq!((a.sq_psn, a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic), (5, 14, 7, 7, 16));
    }

    #[test]
    fn endpoint_round_trips_as_json() {
        let s = serde_json::to_string(&remote()).unwrap();
        assert_eq!(serde_json::from_str::<RcEndpoint>(&s).unwrap(), remote());
    }
}
