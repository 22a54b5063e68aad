//! marrow-verbs declares rdma-core's structs by hand (`crates/verbs/src/ffi.rs`)
//! so that marrow builds without rdma-core's headers and loads the library
//! at run time. Hand-declared FFI is trusted only because of this test: gcc
//! lays out the real `<infiniband/verbs.h>` and `<infiniband/mlx5dv.h>`
//! (Debian libibverbs-dev) and every size, offset and constant must agree.

use marrow_oracle::{verbs_abi_consts, verbs_abi_fields};
use marrow_verbs::ffi::{CONSTS, STRUCTS};

#[test]
fn every_hand_declared_struct_matches_gcc_on_the_real_headers() {
    let c = verbs_abi_fields();
    let mut checked = 0;
    for s in STRUCTS {
        let of: Vec<_> = c.iter().filter(|f| f.strct == s.name).collect();
        assert!(!of.is_empty(), "{} is not in the harness", s.name);
        for (field, off) in s.fields {
            let cf = of
                .iter()
                .find(|f| f.field == *field)
                .unwrap_or_else(|| panic!("{}.{field} is not in the harness", s.name));
            assert_eq!(*off, cf.offset, "offsetof({}, {field})", s.name);
            checked += 1;
        }
        if let Some(size) = s.size {
            assert_eq!(size, of[0].struct_size, "sizeof(struct {})", s.name);
        }
        // Every field the harness lists is declared on the Rust side too
        // (a field dropped from ffi.rs must be dropped here on purpose).
        for cf in &of {
            assert!(
                s.fields.iter().any(|(f, _)| *f == cf.field),
                "{}.{} declared in C, not in ffi.rs",
                s.name,
                cf.field
            );
        }
    }
    assert_eq!(checked, c.len(), "harness entries for structs ffi.rs does not list");
    assert!(checked > 120, "{checked}");
}

#[test]
fn every_constant_matches_the_header() {
    let c = verbs_abi_consts();
    assert_eq!(c.len(), CONSTS.len());
    for (name, value) in CONSTS {
        let (_, v) = c.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} not in the harness"));
        assert_eq!(value, v, "{name}");
    }
}

#[test]
fn the_transition_table_uses_the_headers_mask_bits() {
    // The kernel's IB_QP_* and rdma-core's IBV_QP_* are one ABI; the masks
    // marrow-verbs builds are checked against the kernel's table in its unit
    // tests, and here every bit they use is the header's.
    use marrow_verbs::qp::*;
    let c = verbs_abi_consts();
    let hdr = |n: &str| c.iter().find(|(k, _)| k == n).map(|(_, v)| *v as u32).unwrap();
    let p = RcParams::default();
    let r = RcEndpoint { qpn: 1, lid: 1, gid: [0; 16], psn: 0, rkey: 0, addr: 0, len: 0 };
    assert_eq!(
        reset_to_init(&p).1,
        hdr("IBV_QP_STATE") | hdr("IBV_QP_PKEY_INDEX") | hdr("IBV_QP_PORT") | hdr("IBV_QP_ACCESS_FLAGS")
    );
    assert_eq!(
        init_to_rtr(&p, &r).1,
        hdr("IBV_QP_STATE")
            | hdr("IBV_QP_AV")
            | hdr("IBV_QP_PATH_MTU")
            | hdr("IBV_QP_DEST_QPN")
            | hdr("IBV_QP_RQ_PSN")
            | hdr("IBV_QP_MAX_DEST_RD_ATOMIC")
            | hdr("IBV_QP_MIN_RNR_TIMER")
    );
    assert_eq!(
        rtr_to_rts(&p, 0).1,
        hdr("IBV_QP_STATE")
            | hdr("IBV_QP_TIMEOUT")
            | hdr("IBV_QP_RETRY_CNT")
            | hdr("IBV_QP_RNR_RETRY")
            | hdr("IBV_QP_SQ_PSN")
            | hdr("IBV_QP_MAX_QP_RD_ATOMIC")
    );
    assert_eq!(
        (reset_to_init(&p).0.qp_state, init_to_rtr(&p, &r).0.qp_state, rtr_to_rts(&p, 0).0.qp_state),
        (hdr("IBV_QPS_INIT"), hdr("IBV_QPS_RTR"), hdr("IBV_QPS_RTS"))
    );
}
