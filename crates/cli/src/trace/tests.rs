use super::*;
use marrow_mlx5::raw::{CqeOpcode, WqeOpcode};
use proptest::prelude::*;
use serde_json::Value as Json;
use st::Recorder;

fn file(records: &[(Kind, u32, u32, u64, Vec<u8>)]) -> Vec<u8> {
    let mut r = Recorder::new(1 << 20);
    for (k, q, o, a, b) in records {
        r.record(*k, *q, *o, *a, b);
    }
    r.bytes().to_vec()
}

fn text(bytes: &[u8], opts: &ShowOptions) -> (String, Shown) {
    let mut out = Vec::new();
    let s = show(bytes, opts, &mut out).unwrap();
    (String::from_utf8(out).unwrap(), s)
}

#[test]
fn names_parse() {
    assert_eq!(parse_kind("WQE_FETCH"), Ok(Kind::WQE_FETCH));
    assert_eq!(parse_kind("cqe-write"), Ok(Kind::CQE_WRITE));
    assert!(parse_kind("bogus").is_err());
    assert_eq!(parse_opcode("rdma_write"), Ok(OpcodeMatch::Wqe(WqeOpcode::RDMA_WRITE)));
    assert_eq!(parse_opcode("RESP_SEND"), Ok(OpcodeMatch::Cqe(CqeOpcode::RESP_SEND)));
    assert_eq!(parse_opcode("0x10"), Ok(OpcodeMatch::Wqe(WqeOpcode::RDMA_READ)));
    assert!(parse_opcode("WRITE").is_err());
    assert_eq!(qp_state_name(3), "RTS");
    assert_eq!(qp_state_name(6), "ERR");
}

#[test]
fn numbers_parse_in_decimal_or_with_0x() {
    assert_eq!(parse_num("0x1F"), Ok(31));
    assert_eq!(parse_num("0X1f"), Ok(31));
    assert_eq!(parse_num(" 42 "), Ok(42));
    assert_eq!(parse_num("18446744073709551615"), Ok(u64::MAX));
    for bad in ["", "0x", "-1", "1f", "0x1g", "18446744073709551616", "0x1_0"] {
        assert!(parse_num(bad).is_err_and(|e| e.contains(bad.trim())), "{bad:?}");
    }
}

#[test]
fn state_changes_and_errors() {
    let f = file(&[
        (Kind::QP_STATE, 0x100, 0, 0, vec![3, 6]),
        (Kind::QP_STATE, 0x100, 0, 0, vec![1, 2]),
        (Kind::WQE_ERROR, 0x100, 0, 0, b"REMOTE_ACCESS_ERR: bad\nkey".to_vec()),
        (Kind::DBREC_READ, 0x100, 0, 0, vec![0, 0, 0, 0, 0, 0, 0, 1]),
    ]);
    let (t, s) = text(&f, &ShowOptions::default());
    assert_eq!((s.total, s.shown, s.damage), (4, 4, None));
    assert!(t.contains("RTS (3) → ERR (6)"), "{t}");
    assert!(t.contains("bad\\nkey"), "{t}");
    assert!(t.contains("send_wqe_counter 0x0001"), "{t}");
    let opts = ShowOptions { filter: Filter { errors: true, ..Filter::default() }, ..ShowOptions::default() };
    let (t, s) = text(&f, &opts);
    assert_eq!(s.shown, 2, "{t}");
}

#[test]
fn truncated_reports_the_offset() {
    let f = file(&[(Kind::FAULT, 1, 0, 0, b"x".to_vec()), (Kind::FAULT, 1, 0, 0, b"y".to_vec())]);
    let (t, s) = text(&f[..f.len() - 1], &ShowOptions::default());
    assert_eq!(s.shown, 1);
    assert_eq!(s.damage.unwrap().offset, 16 + 33);
    assert!(t.contains("fault") && t.contains(" x\n"), "{t}");
}

fn any_record() -> impl Strategy<Value = (Kind, u32, u32, u64, Vec<u8>)> {
    let sized = prop_oneof![Just(0usize), Just(2), Just(8), Just(16), Just(48), Just(64), Just(128), 0usize..300];
    (0u8..12, prop_oneof![Just(0x100u32), Just(u32::MAX), any::<u32>()], any::<u32>(), any::<u64>(), sized)
        .prop_flat_map(|(k, q, o, a, n)| {
            proptest::collection::vec(any::<u8>(), n).prop_map(move |b| (Kind(k), q, o, a, b))
        })
}

fn every_way(bytes: &[u8]) {
    for detail in [Detail::Brief, Detail::Normal, Detail::Full] {
        for json in [false, true] {
            let opts = ShowOptions {
                filter: Filter {
                    opcodes: vec![OpcodeMatch::Wqe(WqeOpcode::RDMA_WRITE), OpcodeMatch::Cqe(CqeOpcode::REQ_ERR)],
                    ..Filter::default()
                },
                detail,
                json,
                tail: Some(3),
            };
            let mut out = Vec::new();
            let _ = show(bytes, &opts, &mut out);
            let opts = ShowOptions { filter: Filter::default(), detail, json, tail: None };
            let mut out = Vec::new();
            let s = show(bytes, &opts, &mut out).unwrap();
            if json {
                for l in String::from_utf8(out).unwrap().lines() {
                    serde_json::from_str::<Json>(l).unwrap();
                }
            }
            let _ = s;
        }
    }
}

/// Where [`crate::trace_text`] writes a record, it writes what the
/// general path prints, and the same flags.
fn text_is_the_general_text(index: usize, r: &Record) -> Result<(), TestCaseError> {
    for detail in [Detail::Brief, Detail::Normal, Detail::Full] {
        let mut buf = b"before".to_vec();
        let v = if detail == Detail::Brief { view_line(r) } else { view(r, detail) };
        match crate::trace_text::write_record(&mut buf, index, r, detail) {
            Some(facts) => {
                prop_assert_eq!(String::from_utf8(buf).unwrap(), format!("before{}", render_record(index, r, &v)));
                prop_assert_eq!(facts, v.facts());
            }
            None => prop_assert_eq!(&buf[..], b"before"),
        }
    }
    Ok(())
}

/// WQEs of every opcode the builder makes, CQEs of every completion,
/// doorbells and receive WQEs: records the direct writer takes.
fn healthy_record() -> impl Strategy<Value = Record> {
    use marrow_mlx5::prelude::*;
    let wqe =
        (0usize..14, any::<u16>(), 0u32..0x0100_0000, any::<u64>(), proptest::collection::vec(any::<u8>(), 1..120))
            .prop_map(|(op, idx, qpn, x, data)| {
                let sge =
                    [Sge { addr: x, length: 8, lkey: x as u32 }, Sge { addr: !x, length: data.len() as u32, lkey: 7 }];
                let remote = RemoteAddr { raddr: x.rotate_left(7), rkey: (x >> 9) as u32 };
                let local = Sge { addr: x, length: 8, lkey: 3 };
                let local4 = Sge { addr: x, length: 4, lkey: 3 };
                let (a, b) = (x as u32, (x >> 32) as u32);
                let ops = [
                    WqeOp::Nop,
                    WqeOp::RdmaWrite { remote, sgl: &sge },
                    WqeOp::RdmaWriteImm { remote, sgl: &sge[..1], imm: a },
                    WqeOp::RdmaWriteInline { remote, data: &data },
                    WqeOp::Send { sgl: &sge },
                    WqeOp::SendImm { sgl: &sge, imm: b },
                    WqeOp::SendInline { data: &data },
                    WqeOp::RdmaRead { remote, sgl: &sge[..1] },
                    WqeOp::AtomicCs { remote, local, compare: x, swap: !x },
                    WqeOp::AtomicFa { remote, local, add: x },
                    WqeOp::MaskedCs32 { remote, local: local4, swap: a, compare: b, swap_mask: !a, compare_mask: !b },
                    WqeOp::MaskedFa32 { remote, local: local4, add: a, field_boundary: b },
                    WqeOp::MaskedCs64 { remote, local, swap: x, compare: !x, swap_mask: x >> 3, compare_mask: x << 5 },
                    WqeOp::MaskedFa64 { remote, local, add: x, field_boundary: !x },
                ];
                let mut out = vec![0u8; 1024];
                let bytes = match build_wqe(&CtrlParams::signaled(idx, qpn), &ops[op], &mut out) {
                    Ok(b) => out[..usize::from(b.ds) * 16].to_vec(),
                    Err(_) => out[..64].to_vec(),
                };
                Record { t_ns: x >> 20, kind: Kind::WQE_FETCH, qpn, obj: 0, addr: u64::from(idx) * 64, bytes }
            });
    let cqe = (0usize..3, any::<u16>(), 0u32..0x0100_0000, any::<u32>(), any::<u8>(), any::<bool>()).prop_map(
        |(which, counter, qpn, n, op, owner)| {
            let c = match which {
                0 => Completion::Requester {
                    wqe_opcode: WqeOpcode(op % 0x20),
                    qpn,
                    wqe_counter: counter,
                    byte_cnt: n,
                    timestamp: u64::from(n) << 7,
                },
                1 => Completion::Responder {
                    opcode: [CqeOpcode::RESP_SEND, CqeOpcode::RESP_SEND_IMM, CqeOpcode::RESP_WR_IMM]
                        [usize::from(op % 3)],
                    qpn,
                    wqe_counter: counter,
                    byte_cnt: n,
                    imm: Some(n.rotate_left(3)),
                },
                _ => Completion::Error(ErrorCompletion {
                    opcode: if op & 1 == 0 { CqeOpcode::REQ_ERR } else { CqeOpcode::RESP_ERR },
                    syndrome: Syndrome(op),
                    vendor_err_synd: op ^ 0x5a,
                    hw_err_synd: 0,
                    hw_synd_type: 0,
                    wqe_opcode: WqeOpcode(op >> 3),
                    qpn,
                    wqe_counter: counter,
                }),
            };
            let bytes = encode_cqe(&c, owner).map(|b| b.to_vec()).unwrap_or_default();
            Record { t_ns: u64::from(n), kind: Kind::CQE_WRITE, qpn, obj: 0x80, addr: u64::from(counter) * 64, bytes }
        },
    );
    let other = (
        prop_oneof![
            Just(Kind::DOORBELL),
            Just(Kind::DOORBELL_DROPPED),
            Just(Kind::DBREC_READ),
            Just(Kind::RECV_WQE_FETCH)
        ],
        any::<[u8; 8]>(),
        0usize..4,
        any::<u64>(),
    )
        .prop_map(|(kind, db, entries, x)| {
            let bytes = if kind == Kind::RECV_WQE_FETCH {
                let mut b = Vec::new();
                for i in 0..entries {
                    b.extend_from_slice(&(x as u32 >> i).to_be_bytes());
                    b.extend_from_slice(&(0x11 + i as u32).to_be_bytes());
                    b.extend_from_slice(&x.rotate_left(i as u32).to_be_bytes());
                }
                b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 0]);
                b.resize(64, 0);
                b
            } else {
                db.to_vec()
            };
            Record { t_ns: x, kind, qpn: x as u32 & 0xffff, obj: 0, addr: 0x800, bytes }
        });
    prop_oneof![wqe, cqe, other]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn direct_text_is_the_general_text(r in healthy_record(), index in 0usize..10_000_000, flip in proptest::option::of((any::<prop::sample::Index>(), any::<u8>()))) {
        text_is_the_general_text(index, &r)?;
        // A changed byte somewhere makes some records malformed or
        // warned about: either path must still print the same.
        if let (Some((at, x)), false) = (flip, r.bytes.is_empty()) {
            let mut r = r;
            let i = at.index(r.bytes.len());
            r.bytes[i] ^= x;
            text_is_the_general_text(index, &r)?;
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        every_way(&bytes);
        let mut f = st::MAGIC.to_vec();
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&[0; 4]);
        f.extend_from_slice(&bytes);
        every_way(&f);
    }

    #[test]
    fn arbitrary_records_never_panic(recs in proptest::collection::vec(any_record(), 0..12), cut in any::<prop::sample::Index>()) {
        let f = file(&recs);
        for (i, r) in st::parse(&f).0.iter().enumerate() {
            text_is_the_general_text(i, r)?;
        }
        for r in st::parse(&f).0 {
            let (line, full) = (view_line(&r), view(&r, Detail::Brief));
            prop_assert_eq!(&line.summary, &full.summary);
            prop_assert_eq!(&line.details, &full.details);
            prop_assert_eq!((line.is_error, line.wqe_opcode, line.cqe_opcode), (full.is_error, full.wqe_opcode, full.cqe_opcode));
        }
        every_way(&f);
        every_way(&f[..cut.index(f.len() + 1)]);
    }
}
