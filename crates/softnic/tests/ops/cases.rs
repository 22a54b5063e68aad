fn fill(p: &Pair, side: Side, off: usize, bytes: &[u8]) {
    let ep = if side == Side::A { &p.a } else { &p.b };
    ep.buf.write_bytes(off, bytes).unwrap();
}

fn read(p: &Pair, side: Side, off: usize, len: usize) -> Vec<u8> {
    let ep = if side == Side::A { &p.a } else { &p.b };
    let mut v = vec![0; len];
    ep.buf.read_bytes(off, &mut v).unwrap();
    v
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn post(op: WqeOp<'_>, p: &mut Pair) -> BuiltWqe {
    let b = p.a.sq.post(CtrlParams::signaled(0, 0), &op).unwrap();
    p.a.sq.ring().unwrap();
    b
}

fn sge(p: &Pair, side: Side, off: usize, len: u32) -> Sge {
    let ep = if side == Side::A { &p.a } else { &p.b };
    Sge { addr: ep.addr + off as u64, length: len, lkey: ep.lkey }
}

fn remote(p: &Pair, side: Side, off: usize) -> RemoteAddr {
    let ep = if side == Side::A { &p.a } else { &p.b };
    RemoteAddr { raddr: ep.addr + off as u64, rkey: ep.rkey }
}

fn expect_ok(p: &mut Pair, opcode: WqeOpcode, byte_cnt: u32) {
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Requester { wqe_opcode, byte_cnt: b, .. } => {
            assert_eq!(wqe_opcode, opcode);
            assert_eq!(b, byte_cnt);
        }
        c => panic!("expected a good {opcode:?} completion, got {c:?}"),
    }
}

#[test]
fn rdma_write_of_many_sizes() {
    let mut p = pair();
    for (i, len) in [1usize, 8, 63, 64, 4096, 65536, 1 << 19].into_iter().enumerate() {
        let data = pattern(len, i as u8);
        fill(&p, Side::A, 0, &data);
        let s = [sge(&p, Side::A, 0, len as u32)];
        post(WqeOp::RdmaWrite { remote: remote(&p, Side::B, 4096), sgl: &s }, &mut p);
        expect_ok(&mut p, WqeOpcode::RDMA_WRITE, len as u32);
        assert_eq!(read(&p, Side::B, 4096, len), data, "len {len}");
    }
}

#[test]
fn rdma_write_gathers_several_entries() {
    let mut p = pair();
    fill(&p, Side::A, 0, b"hello ");
    fill(&p, Side::A, 100, b"world");
    let s = [sge(&p, Side::A, 0, 6), sge(&p, Side::A, 100, 5)];
    post(WqeOp::RdmaWrite { remote: remote(&p, Side::B, 0), sgl: &s }, &mut p);
    expect_ok(&mut p, WqeOpcode::RDMA_WRITE, 11);
    assert_eq!(read(&p, Side::B, 0, 11), b"hello world");
}

#[test]
fn inline_write() {
    let mut p = pair();
    let data = pattern(200, 9);
    post(WqeOp::RdmaWriteInline { remote: remote(&p, Side::B, 8), data: &data }, &mut p);
    expect_ok(&mut p, WqeOpcode::RDMA_WRITE, 200);
    assert_eq!(read(&p, Side::B, 8, 200), data);
}

#[test]
fn rdma_write_imm_consumes_a_receive() {
    let mut p = pair();
    let r = [sge(&p, Side::B, 0, 16)];
    p.b.rq.post(&r).unwrap();
    fill(&p, Side::A, 0, &[7; 32]);
    let s = [sge(&p, Side::A, 0, 32)];
    post(WqeOp::RdmaWriteImm { remote: remote(&p, Side::B, 512), sgl: &s, imm: 0xfeed_f00d }, &mut p);
    expect_ok(&mut p, WqeOpcode::RDMA_WRITE_IMM, 32);
    match p.wait(Side::B, true, T).unwrap() {
        Completion::Responder { opcode, byte_cnt, imm, wqe_counter, .. } => {
            assert_eq!((opcode, byte_cnt, imm, wqe_counter), (CqeOpcode::RESP_WR_IMM, 32, Some(0xfeed_f00d), 0));
        }
        c => panic!("{c:?}"),
    }
    assert_eq!(read(&p, Side::B, 512, 32), vec![7; 32]);
}

#[test]
fn send_and_send_imm_scatter_into_receives() {
    let mut p = pair();
    // Two receive buffers of 4 and 100 bytes: a 50-byte SEND spans both.
    let r = [sge(&p, Side::B, 0, 4), sge(&p, Side::B, 1000, 100)];
    p.b.rq.post(&r).unwrap();
    p.b.rq.post(&r).unwrap();
    let data = pattern(50, 3);
    fill(&p, Side::A, 0, &data);
    let s = [sge(&p, Side::A, 0, 50)];
    post(WqeOp::Send { sgl: &s }, &mut p);
    expect_ok(&mut p, WqeOpcode::SEND, 50);
    match p.wait(Side::B, true, T).unwrap() {
        Completion::Responder { opcode, byte_cnt, imm, .. } => {
            assert_eq!((opcode, byte_cnt, imm), (CqeOpcode::RESP_SEND, 50, None))
        }
        c => panic!("{c:?}"),
    }
    assert_eq!(read(&p, Side::B, 0, 4), data[..4]);
    assert_eq!(read(&p, Side::B, 1000, 46), data[4..]);
    post(WqeOp::SendImm { sgl: &s[..0], imm: 42 }, &mut p);
    expect_ok(&mut p, WqeOpcode::SEND_IMM, 0);
    match p.wait(Side::B, true, T).unwrap() {
        Completion::Responder { opcode, imm, wqe_counter, .. } => {
            assert_eq!((opcode, imm, wqe_counter), (CqeOpcode::RESP_SEND_IMM, Some(42), 1))
        }
        c => panic!("{c:?}"),
    }
}

#[test]
fn send_inline() {
    let mut p = pair();
    p.b.rq.post(&[sge(&p, Side::B, 64, 64)]).unwrap();
    post(WqeOp::SendInline { data: b"inline!" }, &mut p);
    expect_ok(&mut p, WqeOpcode::SEND, 7);
    p.wait(Side::B, true, T).unwrap();
    assert_eq!(read(&p, Side::B, 64, 7), b"inline!");
}

#[test]
fn rdma_read_of_many_sizes() {
    let mut p = pair();
    for (i, len) in [8usize, 100, 4096, 1 << 18].into_iter().enumerate() {
        let data = pattern(len, 100 + i as u8);
        fill(&p, Side::B, 8192, &data);
        let s = [sge(&p, Side::A, 0, len as u32)];
        post(WqeOp::RdmaRead { remote: remote(&p, Side::B, 8192), sgl: &s }, &mut p);
        expect_ok(&mut p, WqeOpcode::RDMA_READ, len as u32);
        assert_eq!(read(&p, Side::A, 0, len), data);
    }
}

fn u64_at(p: &Pair, side: Side, off: usize) -> u64 {
    u64::from_ne_bytes(read(p, side, off, 8).try_into().unwrap())
}

#[test]
fn atomics_fetch_add_and_compare_swap() {
    let mut p = pair();
    fill(&p, Side::B, 64, &100u64.to_ne_bytes());
    let l = sge(&p, Side::A, 0, 8);
    post(WqeOp::AtomicFa { remote: remote(&p, Side::B, 64), local: l, add: 5 }, &mut p);
    expect_ok(&mut p, WqeOpcode::ATOMIC_FA, 8);
    assert_eq!((u64_at(&p, Side::A, 0), u64_at(&p, Side::B, 64)), (100, 105));

    // A compare that fails leaves memory alone and returns the old value.
    post(WqeOp::AtomicCs { remote: remote(&p, Side::B, 64), local: l, compare: 1, swap: 9 }, &mut p);
    expect_ok(&mut p, WqeOpcode::ATOMIC_CS, 8);
    assert_eq!((u64_at(&p, Side::A, 0), u64_at(&p, Side::B, 64)), (105, 105));
    post(WqeOp::AtomicCs { remote: remote(&p, Side::B, 64), local: l, compare: 105, swap: 9 }, &mut p);
    expect_ok(&mut p, WqeOpcode::ATOMIC_CS, 8);
    assert_eq!((u64_at(&p, Side::A, 0), u64_at(&p, Side::B, 64)), (105, 9));
}

#[test]
fn masked_atomics() {
    let mut p = pair();
    if WIRE {
        // No RoCEv2 wire form: refused before anything is sent.
        let l4 = sge(&p, Side::A, 0, 4);
        let op = WqeOp::MaskedFa32 { remote: remote(&p, Side::B, 0), local: l4, add: 1, field_boundary: 0 };
        post(op, &mut p);
        match p.wait(Side::A, false, T).unwrap() {
            Completion::Error(e) => assert_eq!(e.syndrome, Syndrome::LOCAL_QP_OP_ERR, "{e:?}"),
            c => panic!("a masked atomic on a wire QP completed as {c:?}"),
        }
        return;
    }
    fill(&p, Side::B, 0, &0x0001_ffffu32.to_ne_bytes());
    let l4 = sge(&p, Side::A, 0, 4);
    // Two 16-bit lanes: the carry out of the low lane stops at bit 15.
    post(
        WqeOp::MaskedFa32 { remote: remote(&p, Side::B, 0), local: l4, add: 0x0001_0001, field_boundary: 0x8000_8000 },
        &mut p,
    );
    expect_ok(&mut p, WqeOpcode::ATOMIC_MASKED_FA, 4);
    assert_eq!(read(&p, Side::B, 0, 4), 0x0002_0000u32.to_ne_bytes());
    assert_eq!(read(&p, Side::A, 0, 4), 0x0001_ffffu32.to_ne_bytes());

    post(
        WqeOp::MaskedCs32 {
            remote: remote(&p, Side::B, 0),
            local: l4,
            swap: 0xabcd,
            compare: 0x0002_0000,
            swap_mask: 0xffff,
            compare_mask: 0xffff_0000,
        },
        &mut p,
    );
    expect_ok(&mut p, WqeOpcode::ATOMIC_MASKED_CS, 4);
    assert_eq!(read(&p, Side::B, 0, 4), 0x0002_abcdu32.to_ne_bytes());

    fill(&p, Side::B, 8, &0xff00u64.to_ne_bytes());
    let l8 = sge(&p, Side::A, 8, 8);
    post(
        WqeOp::MaskedCs64 {
            remote: remote(&p, Side::B, 8),
            local: l8,
            swap: 0x11,
            compare: 0xff00,
            swap_mask: 0xff,
            compare_mask: 0xff00,
        },
        &mut p,
    );
    expect_ok(&mut p, WqeOpcode::ATOMIC_MASKED_CS, 8);
    assert_eq!(u64_at(&p, Side::B, 8), 0xff11);
    post(WqeOp::MaskedFa64 { remote: remote(&p, Side::B, 8), local: l8, add: 1, field_boundary: 0 }, &mut p);
    expect_ok(&mut p, WqeOpcode::ATOMIC_MASKED_FA, 8);
    assert_eq!(u64_at(&p, Side::B, 8), 0xff12);
}

#[test]
fn nop_completes() {
    let mut p = pair();
    post(WqeOp::Nop, &mut p);
    expect_ok(&mut p, WqeOpcode::NOP, 0);
}

#[test]
fn unsignaled_wqes_complete_silently_and_in_order() {
    let mut p = pair();
    let quiet = CtrlParams { completion: CompletionMode::CQE_ON_CQE_ERROR, ..CtrlParams::signaled(0, 0) };
    for i in 0..10u8 {
        p.a.sq.post(quiet, &WqeOp::RdmaWriteInline { remote: remote(&p, Side::B, i as usize), data: &[i] }).unwrap();
    }
    p.a.sq.post(CtrlParams::signaled(0, 0), &WqeOp::Nop).unwrap();
    p.a.sq.ring().unwrap();
    match p.wait(Side::A, false, T).unwrap() {
        Completion::Requester { wqe_opcode, wqe_counter, .. } => {
            assert_eq!((wqe_opcode, wqe_counter), (WqeOpcode::NOP, 10))
        }
        c => panic!("{c:?}"),
    }
    assert_eq!(read(&p, Side::B, 0, 10), (0..10).collect::<Vec<u8>>());
}
