//! Property tests: `parse(emit(x)) == x` for WQEs and CQEs, arbitrary bytes
//! never panic a decoder, and the CQ owner phase across thousands of passes.

use marrow_mlx5::cqe::owner_bit_for;
use marrow_mlx5::prelude::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum OpSpec {
    Nop,
    Write(Vec<Sge>),
    WriteImm(Vec<Sge>, u32),
    WriteInline(Vec<u8>),
    Send(Vec<Sge>),
    SendImm(Vec<Sge>, u32),
    SendInline(Vec<u8>),
    Read(Vec<Sge>),
    Cs(u64, u64),
    Fa(u64),
    MCs32(u32, u32, u32, u32),
    MFa32(u32, u32),
    MCs64(u64, u64, u64, u64),
    MFa64(u64, u64),
}

fn sge() -> impl Strategy<Value = Sge> + Clone {
    (any::<u64>(), 1u32..0x8000_0000, any::<u32>()).prop_map(|(addr, length, lkey)| Sge { addr, length, lkey })
}

fn op_spec() -> impl Strategy<Value = OpSpec> {
    let sgl = prop::collection::vec(sge(), 0..8);
    let data = prop::collection::vec(any::<u8>(), 0..300);
    prop_oneof![
        Just(OpSpec::Nop),
        sgl.clone().prop_map(OpSpec::Write),
        (sgl.clone(), any::<u32>()).prop_map(|(s, i)| OpSpec::WriteImm(s, i)),
        data.clone().prop_map(OpSpec::WriteInline),
        sgl.clone().prop_map(OpSpec::Send),
        (sgl.clone(), any::<u32>()).prop_map(|(s, i)| OpSpec::SendImm(s, i)),
        data.prop_map(OpSpec::SendInline),
        sgl.prop_map(OpSpec::Read),
        (any::<u64>(), any::<u64>()).prop_map(|(a, b)| OpSpec::Cs(a, b)),
        any::<u64>().prop_map(OpSpec::Fa),
        any::<(u32, u32, u32, u32)>().prop_map(|(a, b, c, d)| OpSpec::MCs32(a, b, c, d)),
        any::<(u32, u32)>().prop_map(|(a, b)| OpSpec::MFa32(a, b)),
        any::<(u64, u64, u64, u64)>().prop_map(|(a, b, c, d)| OpSpec::MCs64(a, b, c, d)),
        any::<(u64, u64)>().prop_map(|(a, b)| OpSpec::MFa64(a, b)),
    ]
}

fn ctrl() -> impl Strategy<Value = CtrlParams> {
    (any::<u16>(), 0u32..0x100_0000, 0u8..5, 0u8..4, any::<bool>()).prop_map(|(i, q, f, c, s)| CtrlParams {
        wqe_index: i,
        qpn: q,
        fence: FenceMode(f),
        completion: CompletionMode(c),
        solicited: s,
    })
}

fn as_op<'a>(s: &'a OpSpec, remote: RemoteAddr, local: Sge) -> WqeOp<'a> {
    let l4 = Sge { length: 4, ..local };
    let l8 = Sge { length: 8, ..local };
    match s {
        OpSpec::Nop => WqeOp::Nop,
        OpSpec::Write(sgl) => WqeOp::RdmaWrite { remote, sgl },
        OpSpec::WriteImm(sgl, imm) => WqeOp::RdmaWriteImm { remote, sgl, imm: *imm },
        OpSpec::WriteInline(data) => WqeOp::RdmaWriteInline { remote, data },
        OpSpec::Send(sgl) => WqeOp::Send { sgl },
        OpSpec::SendImm(sgl, imm) => WqeOp::SendImm { sgl, imm: *imm },
        OpSpec::SendInline(data) => WqeOp::SendInline { data },
        OpSpec::Read(sgl) => WqeOp::RdmaRead { remote, sgl },
        OpSpec::Cs(c, s) => WqeOp::AtomicCs { remote, local: l8, compare: *c, swap: *s },
        OpSpec::Fa(a) => WqeOp::AtomicFa { remote, local: l8, add: *a },
        OpSpec::MCs32(a, b, c, d) => {
            WqeOp::MaskedCs32 { remote, local: l4, swap: *a, compare: *b, swap_mask: *c, compare_mask: *d }
        }
        OpSpec::MFa32(a, b) => WqeOp::MaskedFa32 { remote, local: l4, add: *a, field_boundary: *b },
        OpSpec::MCs64(a, b, c, d) => {
            WqeOp::MaskedCs64 { remote, local: l8, swap: *a, compare: *b, swap_mask: *c, compare_mask: *d }
        }
        OpSpec::MFa64(a, b) => WqeOp::MaskedFa64 { remote, local: l8, add: *a, field_boundary: *b },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn wqe_parse_of_emit_is_identity(c in ctrl(), spec in op_spec(), raddr in any::<u64>(), rkey in any::<u32>(), local in sge()) {
        let remote = RemoteAddr { raddr, rkey };
        let op = as_op(&spec, remote, local);
        let mut buf = [0xA5u8; 1024];
        let built = build_wqe(&c, &op, &mut buf).unwrap();
        let view = WqeView::new(&buf).unwrap();
        prop_assert_eq!(view.wqebbs(), built.wqebbs as usize);
        let p = view.parse().unwrap();
        let (opcode, opmod) = op.opcode_opmod();
        prop_assert_eq!(p.ctrl.opcode, opcode);
        prop_assert_eq!(p.ctrl.opmod, opmod);
        prop_assert_eq!((p.ctrl.wqe_index, p.ctrl.qpn, p.ctrl.ds), (c.wqe_index, c.qpn, built.ds));
        prop_assert_eq!((p.ctrl.fence, p.ctrl.completion, p.ctrl.solicited), (c.fence, c.completion, c.solicited));
        let locals: Vec<Local<'_>> = p.locals().collect();
        match op {
            WqeOp::Nop => prop_assert!(p.remote.is_none() && locals.is_empty()),
            WqeOp::RdmaWrite { sgl, .. } | WqeOp::RdmaRead { sgl, .. } | WqeOp::RdmaWriteImm { sgl, .. } => {
                prop_assert_eq!(p.remote, Some(remote));
                let want: Vec<Local<'_>> = sgl.iter().map(|s| Local::Sge(*s)).collect();
                prop_assert_eq!(locals, want);
            }
            WqeOp::Send { sgl } | WqeOp::SendImm { sgl, .. } => {
                prop_assert_eq!(p.remote, None);
                let want: Vec<Local<'_>> = sgl.iter().map(|s| Local::Sge(*s)).collect();
                prop_assert_eq!(locals, want);
            }
            WqeOp::RdmaWriteInline { data, .. } | WqeOp::SendInline { data } => {
                prop_assert_eq!(locals, vec![Local::Inline(data)]);
            }
            _ => {
                prop_assert_eq!(p.remote, Some(remote));
                prop_assert_eq!(locals.len(), 1);
                let want = match op {
                    WqeOp::AtomicCs { compare, swap, .. } => AtomicArgs::Cs { compare, swap },
                    WqeOp::AtomicFa { add, .. } => AtomicArgs::Fa { add },
                    WqeOp::MaskedCs32 { swap, compare, swap_mask, compare_mask, .. } => AtomicArgs::MaskedCs32 { swap, compare, swap_mask, compare_mask },
                    WqeOp::MaskedFa32 { add, field_boundary, .. } => AtomicArgs::MaskedFa32 { add, field_boundary },
                    WqeOp::MaskedCs64 { swap, compare, swap_mask, compare_mask, .. } => AtomicArgs::MaskedCs64 { swap, compare, swap_mask, compare_mask },
                    WqeOp::MaskedFa64 { add, field_boundary, .. } => AtomicArgs::MaskedFa64 { add, field_boundary },
                    _ => unreachable!(),
                };
                prop_assert_eq!(p.atomic, Some(want));
            }
        }
    }

    #[test]
    fn cqe_decode_of_encode_is_identity(
        kind in 0u8..4, qpn in 0u32..0x100_0000, wc in any::<u16>(), bc in any::<u32>(), ts in any::<u64>(),
        code in any::<u8>(), synd in any::<u8>(), v in any::<u8>(), hw in any::<u8>(), ht in any::<u8>(),
        imm in any::<u32>(), owner in any::<bool>(),
    ) {
        let c = match kind {
            0 => Completion::Requester { wqe_opcode: WqeOpcode(code), qpn, wqe_counter: wc, byte_cnt: bc, timestamp: ts },
            1 => {
                let opcode = [CqeOpcode::RESP_SEND, CqeOpcode::RESP_SEND_IMM, CqeOpcode::RESP_WR_IMM, CqeOpcode::RESP_SEND_INV][code as usize % 4];
                let has_imm = matches!(opcode, CqeOpcode::RESP_SEND_IMM | CqeOpcode::RESP_WR_IMM);
                Completion::Responder { opcode, qpn, wqe_counter: wc, byte_cnt: bc, imm: has_imm.then_some(imm) }
            }
            2 => Completion::Error(ErrorCompletion {
                opcode: if code & 1 == 0 { CqeOpcode::REQ_ERR } else { CqeOpcode::RESP_ERR },
                syndrome: Syndrome(synd), vendor_err_synd: v, hw_err_synd: hw, hw_synd_type: ht,
                wqe_opcode: WqeOpcode(code), qpn, wqe_counter: wc,
            }),
            _ => Completion::Other { opcode: [CqeOpcode::RESIZE_CQ, CqeOpcode::NO_PACKET, CqeOpcode::SIG_ERR, CqeOpcode(7)][code as usize % 4], qpn, wqe_counter: wc },
        };
        let bytes = encode_cqe(&c, owner).unwrap();
        prop_assert_eq!(bytes[63] & 1, u8::from(owner));
        prop_assert_eq!(decode_cqe(&bytes).unwrap(), c);
        let mut cqe128 = [0u8; 128];
        cqe128[64..].copy_from_slice(&bytes);
        prop_assert_eq!(decode_cqe(&cqe128).unwrap(), c);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in prop::collection::vec(any::<u8>(), 0..1100), n in any::<u32>(), log in 0u32..24) {
        if let Ok(v) = WqeView::new(&bytes) {
            for s in v.segments() {
                let _ = s;
            }
            if let Ok(p) = v.parse() {
                let _ = p.local_len();
            }
        }
        let _ = decode_cqe(&bytes);
        let _ = poll_cqe(&bytes, n, 1 << log);
        let _ = poll_cqe(&bytes, n, 3);
        if bytes.len() >= 8 {
            let _ = decode_uar_doorbell(bytes[..8].try_into().unwrap());
        }
    }

    #[test]
    fn ctrl_headers_with_any_ds_never_panic(ctrl_word in any::<[u8; 16]>(), tail in prop::collection::vec(any::<u8>(), 0..1024)) {
        // Well-formed control segments with random everything else reach
        // deeper into the segment walk than fully random bytes do.
        let mut bytes = ctrl_word.to_vec();
        bytes.extend(tail);
        if let Ok(v) = WqeView::new(&bytes) {
            let _ = v.segments().count();
            let _ = v.parse();
        }
    }
}

#[test]
fn owner_phase_across_thousands_of_passes() {
    for ncqe in [1u32, 2, 4, 64] {
        let mut ring = vec![[0u8; 64]; ncqe as usize];
        for slot in &mut ring {
            slot[63] = 0xf0; // rdma-core initialises op_own to INVALID, owner 0
        }
        let mut ci = 0u32;
        for n in 0..(ncqe * 5000) {
            // Nothing is ready before the device writes.
            assert_eq!(poll_cqe(&ring[(n % ncqe) as usize], ci, ncqe).unwrap(), CqePoll::NotReady, "n {n}");
            let c = Completion::Requester {
                wqe_opcode: WqeOpcode::RDMA_WRITE,
                qpn: 7,
                wqe_counter: n as u16,
                byte_cnt: 0,
                timestamp: 0,
            };
            ring[(n % ncqe) as usize] = encode_cqe(&c, owner_bit_for(n, ncqe) == 1).unwrap();
            match poll_cqe(&ring[(ci % ncqe) as usize], ci, ncqe).unwrap() {
                CqePoll::Ready(got) => assert_eq!(got.wqe_counter(), n as u16),
                CqePoll::NotReady => panic!("CQE {n} not seen at ci {ci}"),
            }
            ci += 1;
            // The slot just consumed reads as stale for the next pass.
            assert_eq!(poll_cqe(&ring[(n % ncqe) as usize], ci + ncqe - 1, ncqe).unwrap(), CqePoll::NotReady);
        }
    }
}

#[test]
fn sw_owns_follows_rdma_core_get_sw_cqe() {
    // (op_own & 1) == !!(n & ncqe), and opcode 15 is never owned.
    assert!(sw_owns(0x00, 0, 4));
    assert!(!sw_owns(0x01, 0, 4));
    assert!(sw_owns(0x01, 4, 4));
    assert!(!sw_owns(0xf0, 0, 4));
    assert!(!sw_owns(0xf1, 4, 4));
    assert_eq!(decode_cqe(&[0x0c; 64]), Err(CqeError::Compressed));
    assert_eq!(decode_cqe(&[0; 63]), Err(CqeError::WrongSize { have: 63 }));
}

#[test]
fn malformed_wqes_are_reported_with_offsets() {
    let mut buf = [0u8; 64];
    assert_eq!(WqeView::new(&buf[..8]).unwrap_err(), WqeDecodeError::TooShort { have: 8 });
    assert_eq!(WqeView::new(&buf).unwrap_err(), WqeDecodeError::ZeroDs);
    buf[3] = 0x08; // RDMA_WRITE
    buf[7] = 5; // ds 5 = 80 bytes
    assert_eq!(WqeView::new(&buf).unwrap_err(), WqeDecodeError::DsBeyondBuffer { ds: 5, have: 64 });
    buf[7] = 1; // RDMA_WRITE with only a control segment
    let err = WqeView::new(&buf).unwrap().parse().unwrap_err();
    assert_eq!(err, WqeDecodeError::MissingSegment { what: "remote address segment", offset: 16 });
    buf[7] = 3;
    buf[32..36].copy_from_slice(&[0x80, 0, 0, 40]); // inline of 40 bytes in 16
    let err = WqeView::new(&buf).unwrap().parse().unwrap_err();
    assert_eq!(err, WqeDecodeError::InlineOverrun { offset: 32, len: 40, room: 16 });
    buf[3] = 0x15; // masked FA with opmod 0
    assert_eq!(WqeView::new(&buf).unwrap().parse().unwrap_err(), WqeDecodeError::BadAtomicOpmod { opmod: 0 });
    buf[3] = 0x42;
    assert_eq!(
        WqeView::new(&buf).unwrap().parse().unwrap_err(),
        WqeDecodeError::UnsupportedOpcode { opcode: WqeOpcode(0x42) }
    );
}
