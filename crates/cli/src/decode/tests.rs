use super::*;
use crate::print::{render_json, render_text};
use marrow_mlx5::prelude::*;
use proptest::prelude::*;

fn opts(kind: Kind) -> Options {
    Options { kind, ownership: None }
}

fn rdma_write() -> Vec<u8> {
    let sge = [Sge { addr: 0x1000, length: 8, lkey: 0x11 }];
    let op = WqeOp::RdmaWrite { remote: RemoteAddr { raddr: 0x2000, rkey: 0x22 }, sgl: &sge };
    let mut out = vec![0u8; 48];
    build_wqe(&CtrlParams::signaled(5, 0x1234), &op, &mut out).unwrap();
    out
}

#[test]
fn auto_picks_wqe_and_walks_segments() {
    let r = decode(&rdma_write(), &Options::default()).unwrap();
    assert_eq!(r.kind, Kind::Wqe);
    assert_eq!(r.items.len(), 1);
    let d = &r.items[0];
    assert!(d.errors.is_empty());
    assert_eq!(d.summary, "WQE: RDMA_WRITE (0x08), ds 3 (48 bytes), 1 WQEBB, QPN 0x001234, wqe_index 0x0005");
    let layouts: Vec<_> = d.segments.iter().map(|n| (n.offset, n.layout)).collect();
    assert_eq!(layouts, [(0, "mlx5_wqe_ctrl_seg"), (0x10, "mlx5_wqe_raddr_seg"), (0x20, "mlx5_wqe_data_seg")]);
}

#[test]
fn two_wqes_back_to_back() {
    let mut b = rdma_write();
    b.resize(64, 0);
    b.extend(rdma_write());
    let r = decode(&b, &Options::default()).unwrap();
    assert_eq!(r.items.len(), 2);
    assert_eq!(r.items[1].offset, 64);
    assert_eq!(r.items[0].notes, ["16 trailing bytes ignored (beyond ds)"]);
}

#[test]
fn zero_ds_is_an_error_at_qpn_ds() {
    let mut b = rdma_write();
    b[7] &= !0x3f;
    let r = decode(&b, &opts(Kind::Wqe)).unwrap();
    let e = &r.items[0].errors[0];
    assert_eq!(e.offset, Some(4));
    assert!(e.error.contains("ds is 0"), "{e:?}");
    assert_eq!(r.items[0].segments.len(), 1, "the control segment is still shown");
}

#[test]
fn err_cqe_picks_err_layout() {
    let c = Completion::Error(ErrorCompletion {
        opcode: CqeOpcode::REQ_ERR,
        syndrome: Syndrome::REMOTE_ACCESS_ERR,
        vendor_err_synd: 0x88,
        hw_err_synd: 0,
        hw_synd_type: 0,
        wqe_opcode: WqeOpcode::RDMA_WRITE,
        qpn: 0x1234,
        wqe_counter: 5,
    });
    let b = encode_cqe(&c, true).unwrap();
    let r = decode(&b, &Options { kind: Kind::Auto, ownership: Some((8, 8)) }).unwrap();
    assert_eq!(r.kind, Kind::Cqe);
    let d = &r.items[0];
    assert_eq!(d.segments[0].layout, "mlx5_err_cqe");
    let syn = d.segments[0].fields.iter().find(|f| f.name == "syndrome").unwrap();
    assert_eq!(syn.name_str.as_deref(), Some("REMOTE_ACCESS_ERR"));
    assert!(d.notes.iter().any(|n| n.starts_with("Completion: error REQ_ERR syndrome REMOTE_ACCESS_ERR (0x13)")));
    assert!(d.notes.iter().any(|n| n.starts_with("Ownership: software owns")), "{:?}", d.notes);
    let r = decode(&b, &Options { kind: Kind::Auto, ownership: Some((0, 8)) }).unwrap();
    assert!(r.items[0].notes.iter().any(|n| n.starts_with("Ownership: hardware owns")));
}

#[test]
fn lengths_no_kind_takes_are_refused() {
    assert!(decode(&[], &Options::default()).unwrap_err().error.contains("empty"));
    let e = decode(&[1u8; 37], &Options::default()).unwrap_err();
    assert!(e.error.contains("cannot tell what 37 bytes are"), "{e}");
    assert!(decode(&[0u8; 9], &opts(Kind::UarDb)).is_err());
    assert!(decode(&[0u8; 65], &opts(Kind::Cqe)).is_err());
    assert!(decode(&[0u8; 64], &Options { kind: Kind::Wqe, ownership: Some((0, 8)) }).is_err());
    assert!(decode(&[0u8; 64], &Options { kind: Kind::Cqe, ownership: Some((0, 6)) }).is_err());
}

#[test]
fn eight_bytes_default_to_uar_db() {
    let b = uar_doorbell_index_qpn(6, 0x1234).unwrap();
    let r = decode(&b, &Options::default()).unwrap();
    assert_eq!(r.kind, Kind::UarDb);
    assert!(r.reason.contains("--kind qp-dbrec or cq-dbrec"));
    assert!(r.items[0].notes[0].contains("NVSHMEM/DOCA"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_bytes_any_kind_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..1100),
        k in 0usize..8,
        own in proptest::option::of((any::<u32>(), 0u32..70)),
    ) {
        let kind = if k == 7 { Kind::Auto } else { Kind::CONCRETE[k] };
        for o in [Options { kind, ownership: None }, Options { kind, ownership: own }] {
            if let Ok(r) = decode(&bytes, &o) {
                let _ = render_text(&r);
                let _ = render_json(&r);
            }
        }
    }

    #[test]
    fn wqe_shaped_bytes_never_panic(
        ctrl in (any::<u8>(), any::<u16>(), 0u8..0x30, 0u8..64),
        rest in proptest::collection::vec(any::<u8>(), 0..1100),
    ) {
        // Mostly valid control segments, so the segment walk is reached.
        let (opmod, idx, op, ds) = ctrl;
        let mut b = vec![opmod, (idx >> 8) as u8, idx as u8, op, 0, 0x12, 0x34, ds];
        b.extend_from_slice(&[0u8; 8]);
        b.extend(rest);
        let r = decode(&b, &opts(Kind::Wqe)).unwrap();
        let _ = render_text(&r);
        let _ = render_json(&r);
    }
}
