//! marrow-verbs builds the devx command mailboxes (CREATE_CQ, CREATE_QP,
//! RST2INIT, INIT2RTR, RTR2RTS) from the generated PRM layouts. The same
//! commands built in C with rdma-core's own `DEVX_SET`/`DEVX_SET64` over
//! the `mlx5_ifc.h` headers (tests/oracle/c/devx_commands_*.c) must be the
//! same bytes, for random field values.

use marrow_oracle::*;
use marrow_verbs::devx;
use marrow_verbs::qp::{LinkLayer, RcEndpoint, RcParams};

const N: usize = 2_000;

#[test]
fn create_cq_matches_devx_set() {
    let mut r = SplitMix(71);
    for case in 0..N {
        let s = devx::CqSpec {
            log_cq_size: (r.next_u32() % 24) as u8,
            uar_page: r.next_u32() & 0xff_ffff,
            eqn: r.next_u32(),
            umem: (r.next_u32(), r.next_u64()),
            dbr: (r.next_u32(), r.next_u64()),
            collapsed: r.next_u8() & 1 == 1,
        };
        let ours = devx::create_cq_in(&s).unwrap();
        let theirs = devx_create_cq(u32::from(s.log_cq_size), s.uar_page, s.eqn, s.umem, s.dbr, s.collapsed);
        assert_eq!(ours, theirs, "case {case}: {s:?}");
    }
}

#[test]
fn create_qp_matches_devx_set() {
    let mut r = SplitMix(72);
    for case in 0..N {
        let s = devx::QpSpec {
            pd: r.next_u32() & 0xff_ffff,
            uar_page: r.next_u32() & 0xff_ffff,
            log_sq_size: (r.next_u32() % 16) as u8,
            cqn: (r.next_u32() & 0xff_ffff, r.next_u32() & 0xff_ffff),
            wq_umem: r.next_u32(),
            dbr: (r.next_u32(), r.next_u64()),
        };
        let ours = devx::create_qp_in(&s).unwrap();
        assert_eq!(
            ours,
            devx_create_qp(s.pd, s.uar_page, u32::from(s.log_sq_size), s.cqn, s.wq_umem, s.dbr),
            "case {case}: {s:?}"
        );
    }
}

#[test]
fn qp_transitions_match_devx_set() {
    let mut r = SplitMix(73);
    for case in 0..N {
        let roce = r.next_u8() & 1 == 1;
        let mut gid = [0u8; 16];
        gid.iter_mut().for_each(|b| *b = r.next_u8());
        let mut rmac = [0u8; 6];
        rmac.iter_mut().for_each(|b| *b = r.next_u8());
        let p = RcParams {
            port: 1 + r.next_u8() % 2,
            sgid_index: r.next_u8(),
            mtu: 1 + r.next_u32() % 5,
            link: if roce { LinkLayer::Ethernet } else { LinkLayer::Infiniband },
            rd_atomic: 1 << (r.next_u32() % 5),
            timeout: (r.next_u32() % 32) as u8,
            retry_cnt: (r.next_u32() % 8) as u8,
            rnr_retry: (r.next_u32() % 8) as u8,
            min_rnr_timer: (r.next_u32() % 32) as u8,
            sl: 0,
            traffic_class: 0,
        };
        let remote = RcEndpoint {
            qpn: r.next_u32() & 0xff_ffff,
            lid: r.next_u16(),
            gid,
            psn: r.next_u32(),
            rkey: 0,
            addr: 0,
            len: 0,
        };
        let qpn = r.next_u32() & 0xff_ffff;
        let log_rd = u32::from(p.rd_atomic).trailing_zeros();
        assert_eq!(
            devx::rst2init_qp_in(qpn, &p).unwrap(),
            devx_rst2init(qpn, u32::from(p.port)),
            "case {case} rst2init"
        );
        let a = Init2Rtr {
            qpn,
            mtu: p.mtu,
            remote_qpn: remote.qpn,
            psn: remote.psn & 0xff_ffff,
            log_rra: log_rd,
            min_rnr: u32::from(p.min_rnr_timer),
            port: u32::from(p.port),
            roce,
            rlid: u32::from(remote.lid),
            gid,
            sgid: u32::from(p.sgid_index),
            rmac,
            ack_timeout: u32::from(p.timeout),
        };
        assert_eq!(
            devx::init2rtr_qp_in(qpn, &p, &remote, rmac).unwrap(),
            devx_init2rtr(&a),
            "case {case} init2rtr {a:?}"
        );
        let psn = r.next_u32();
        assert_eq!(
            devx::rtr2rts_qp_in(qpn, &p, psn).unwrap(),
            devx_rtr2rts(
                qpn,
                u32::from(p.retry_cnt),
                u32::from(p.rnr_retry),
                psn & 0xff_ffff,
                log_rd,
                u32::from(p.timeout),
                u32::from(p.port)
            ),
            "case {case} rtr2rts"
        );
    }
}
