//! Golden bytes, emitted into buffers poisoned with 0xA5 so a field that was
//! never written shows. The expected bytes are written out by hand from the
//! layouts in rdma-core's `providers/mlx5/mlx5dv.h` and `qp.c` (NVSHMEM's
//! `ibgda_device.cuh` for the masked atomics; `docs/SOURCES.md` §1), not from this crate.

use marrow_mlx5::prelude::*;

const P: u8 = 0xA5;
const REMOTE: RemoteAddr = RemoteAddr { raddr: 0x1122_3344_5566_7788, rkey: 0xaabb_ccdd };
const RADDR_SEG: [u8; 16] = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 0];

fn build(op: &WqeOp<'_>) -> ([u8; 256], BuiltWqe) {
    let mut buf = [P; 256];
    let b = build_wqe(&CtrlParams::signaled(5, 0x1234), op, &mut buf).unwrap();
    (buf, b)
}

fn ctrl(opmod: u8, opcode: u8, ds: u8) -> [u8; 16] {
    // opmod_idx_opcode = opmod<<24 | 5<<8 | opcode; qpn_ds = 0x1234<<8 | ds;
    // signature 0, dci_stream_channel_id 0, fm_ce_se = CQ_UPDATE (2<<2), imm 0.
    [opmod, 0x00, 0x05, opcode, 0x00, 0x12, 0x34, ds, 0, 0, 0, 0x08, 0, 0, 0, 0]
}

#[test]
fn nop() {
    let (buf, b) = build(&WqeOp::Nop);
    assert_eq!((b.ds, b.wqebbs), (1, 1));
    assert_eq!(buf[..16], ctrl(0, 0x00, 1));
    assert!(buf[16..].iter().all(|&x| x == P));
}

#[test]
fn rdma_write() {
    let sgl = [Sge { addr: 0x1000, length: 8, lkey: 0x11 }];
    let (buf, b) = build(&WqeOp::RdmaWrite { remote: REMOTE, sgl: &sgl });
    assert_eq!((b.ds, b.wqebbs), (3, 1));
    assert_eq!(buf[..16], ctrl(0, 0x08, 3));
    assert_eq!(buf[16..32], RADDR_SEG);
    assert_eq!(buf[32..48], [0, 0, 0, 8, 0, 0, 0, 0x11, 0, 0, 0, 0, 0, 0, 0x10, 0]);
    assert!(buf[48..].iter().all(|&x| x == P), "the rest of the WQEBB is not written");
}

#[test]
fn rdma_write_imm_carries_imm_big_endian() {
    let sgl = [Sge { addr: 0x1000, length: 8, lkey: 0x11 }];
    let (buf, _) = build(&WqeOp::RdmaWriteImm { remote: REMOTE, sgl: &sgl, imm: 0xdead_beef });
    let mut c = ctrl(0, 0x09, 3);
    c[12..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(buf[..16], c);
}

#[test]
fn inline_write_pads_to_16_with_zeros() {
    let (buf, b) = build(&WqeOp::RdmaWriteInline { remote: REMOTE, data: b"hello" });
    assert_eq!((b.ds, b.wqebbs), (3, 1));
    assert_eq!(buf[16..32], RADDR_SEG);
    assert_eq!(buf[32..48], [0x80, 0, 0, 5, b'h', b'e', b'l', b'l', b'o', 0, 0, 0, 0, 0, 0, 0]);
    assert!(buf[48..].iter().all(|&x| x == P));
}

#[test]
fn inline_spanning_three_wqebbs() {
    let data: Vec<u8> = (0..100u8).collect();
    let (buf, b) = build(&WqeOp::RdmaWriteInline { remote: REMOTE, data: &data });
    // ds = ctrl 1 + raddr 1 + ceil((4 + 100) / 16) = 7 → 9; 144 bytes → 3 WQEBBs.
    assert_eq!((b.ds, b.wqebbs), (9, 3));
    assert_eq!(buf[32..36], [0x80, 0, 0, 100]);
    assert_eq!(buf[36..136], data[..]);
    assert_eq!(buf[136..144], [0; 8]);
    assert!(buf[144..].iter().all(|&x| x == P));
}

#[test]
fn send_and_read() {
    let sgl = [Sge { addr: 0xabcd, length: 0x40, lkey: 0x7 }];
    let (buf, b) = build(&WqeOp::Send { sgl: &sgl });
    assert_eq!(b.ds, 2);
    assert_eq!(buf[..16], ctrl(0, 0x0a, 2));
    assert_eq!(buf[16..32], [0, 0, 0, 0x40, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0xab, 0xcd]);
    let (buf, _) = build(&WqeOp::RdmaRead { remote: REMOTE, sgl: &sgl });
    assert_eq!(buf[..16], ctrl(0, 0x10, 3));
    assert_eq!(buf[16..32], RADDR_SEG);
}

#[test]
fn atomic_cs_puts_swap_before_compare() {
    let local = Sge { addr: 0x2000, length: 8, lkey: 0x33 };
    let (buf, b) =
        build(&WqeOp::AtomicCs { remote: REMOTE, local, compare: 0x0102_0304_0506_0708, swap: 0x1112_1314_1516_1718 });
    assert_eq!((b.ds, b.wqebbs), (4, 1));
    assert_eq!(buf[..16], ctrl(0, 0x11, 4));
    assert_eq!(buf[16..32], RADDR_SEG);
    assert_eq!(buf[32..48], [0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(buf[48..64], [0, 0, 0, 8, 0, 0, 0, 0x33, 0, 0, 0, 0, 0, 0, 0x20, 0]);
}

#[test]
fn atomic_fa_zeroes_compare() {
    let local = Sge { addr: 0x2000, length: 8, lkey: 0x33 };
    let (buf, _) = build(&WqeOp::AtomicFa { remote: REMOTE, local, add: 1 });
    assert_eq!(buf[..16], ctrl(0, 0x12, 4));
    assert_eq!(buf[32..48], [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn masked_atomics_use_opmod_8_and_9() {
    let l4 = Sge { addr: 0x2000, length: 4, lkey: 0x33 };
    let l8 = Sge { addr: 0x2000, length: 8, lkey: 0x33 };
    let (buf, b) = build(&WqeOp::MaskedFa32 { remote: REMOTE, local: l4, add: 0x0a0b_0c0d, field_boundary: 0x8000 });
    assert_eq!(b.ds, 4);
    assert_eq!(buf[..16], ctrl(0x08, 0x15, 4));
    assert_eq!(buf[32..48], [0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(buf[48..52], [0, 0, 0, 4]);

    let (buf, _) =
        build(&WqeOp::MaskedCs32 { remote: REMOTE, local: l4, swap: 1, compare: 2, swap_mask: 3, compare_mask: 4 });
    assert_eq!(buf[..16], ctrl(0x08, 0x14, 4));
    assert_eq!(buf[32..48], [0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4]);

    let (buf, b) =
        build(&WqeOp::MaskedCs64 { remote: REMOTE, local: l8, swap: 1, compare: 2, swap_mask: 3, compare_mask: 4 });
    assert_eq!((b.ds, b.wqebbs), (5, 2));
    assert_eq!(buf[..16], ctrl(0x09, 0x14, 5));
    assert_eq!(buf[32..48], [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]);
    assert_eq!(buf[48..64], [0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4]);
    assert_eq!(buf[64..80], [0, 0, 0, 8, 0, 0, 0, 0x33, 0, 0, 0, 0, 0, 0, 0x20, 0]);
    assert!(buf[80..].iter().all(|&x| x == P));

    let (buf, _) = build(&WqeOp::MaskedFa64 { remote: REMOTE, local: l8, add: 5, field_boundary: 6 });
    assert_eq!(buf[..16], ctrl(0x09, 0x15, 4));
    assert_eq!(buf[32..48], [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6]);
}

#[test]
fn fence_completion_and_solicited_bits() {
    let mut buf = [P; 64];
    let c = CtrlParams {
        wqe_index: 0xffff,
        qpn: 0xff_ffff,
        fence: FenceMode::STRONG_ORDERING,
        completion: CompletionMode::CQE_ON_CQE_ERROR,
        solicited: true,
    };
    build_wqe(&c, &WqeOp::Nop, &mut buf).unwrap();
    assert_eq!(buf[..16], [0, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 1, 0, 0, 0, (3 << 5) | 0b10, 0, 0, 0, 0]);
}

#[test]
fn doorbell_values() {
    // rdma-core: dbrec[MLX5_SND_DBR] = htobe32(cur_post & 0xffff).
    assert_eq!(qp_dbrec(0x0102, 0xfffe), [0, 0, 0x01, 0x02, 0, 0, 0xff, 0xfe]);
    // NVSHMEM/DOCA: {BE32(pi << 8), BE32(qpn << 8)}.
    assert_eq!(uar_doorbell_index_qpn(0x0007, 0x1234).unwrap(), [0, 0, 0x07, 0, 0, 0x12, 0x34, 0]);
    assert!(uar_doorbell_index_qpn(0, 0x100_0000).is_err());
    // rdma-core: the first 8 bytes of the control segment.
    let (buf, _) = build(&WqeOp::Nop);
    let ctrl = marrow_mlx5::raw::mlx5_wqe_ctrl_seg::read_from_bytes(&buf[..16]).unwrap();
    assert_eq!(uar_doorbell_from_ctrl(&ctrl), buf[..8]);
    let db = decode_uar_doorbell(buf[..8].try_into().unwrap());
    assert_eq!((db.qpn, db.wqe_index, db.style), (0x1234, 5, DoorbellStyle::RdmaCore));
    assert_eq!(cq_dbrec_set_ci(0x0123_4567), [0, 0x23, 0x45, 0x67]);
    assert_eq!(marrow_mlx5::doorbell::cq_arm_word(1, 0, 5).unwrap(), 0x1000_0005);
}

use zerocopy::FromBytes;

#[test]
fn refusals_write_nothing() {
    let c = CtrlParams::signaled(0, 1);
    let big = [0u8; 1000];
    let mut buf = [P; 1024];
    // ds is 6 bits: ctrl + raddr leave 61 units, 976 bytes, 972 of payload.
    assert_eq!(
        build_wqe(&c, &WqeOp::RdmaWriteInline { remote: REMOTE, data: &big[..973] }, &mut buf),
        Err(WqeError::InlineTooLong { len: 973, max: 972 })
    );
    assert_eq!(
        build_wqe(&c, &WqeOp::RdmaWriteInline { remote: REMOTE, data: &big[..972] }, &mut [P; 1024]).unwrap().ds,
        63
    );
    assert_eq!(
        build_wqe(&c, &WqeOp::SendInline { data: &big[..989] }, &mut buf),
        Err(WqeError::InlineTooLong { len: 989, max: 988 })
    );
    let sgl = vec![Sge { addr: 0, length: 1, lkey: 0 }; 62];
    assert_eq!(
        build_wqe(&c, &WqeOp::RdmaWrite { remote: REMOTE, sgl: &sgl }, &mut buf),
        Err(WqeError::TooManySegments { ds: 64 })
    );
    let b = build_wqe(&c, &WqeOp::RdmaWrite { remote: REMOTE, sgl: &sgl[..61] }, &mut [P; 1024]).unwrap();
    assert_eq!((b.ds, b.wqebbs), (63, 16));
    let zero = Sge { addr: 0, length: 0, lkey: 0 };
    assert_eq!(
        build_wqe(&c, &WqeOp::AtomicFa { remote: REMOTE, local: zero, add: 1 }, &mut buf),
        Err(WqeError::AtomicLength { expected: 8, got: 0 })
    );
    let four = Sge { addr: 0, length: 4, lkey: 0 };
    assert_eq!(
        build_wqe(&c, &WqeOp::MaskedFa64 { remote: REMOTE, local: four, add: 1, field_boundary: 0 }, &mut buf),
        Err(WqeError::AtomicLength { expected: 8, got: 4 })
    );
    assert_eq!(
        build_wqe(&CtrlParams::signaled(0, 0x100_0000), &WqeOp::Nop, &mut buf),
        Err(WqeError::QpnOutOfRange { qpn: 0x100_0000 })
    );
    let huge = [Sge { addr: 0, length: 0x8000_0000, lkey: 0 }];
    assert_eq!(build_wqe(&c, &WqeOp::Send { sgl: &huge }, &mut buf), Err(WqeError::SgeTooLong { length: 0x8000_0000 }));
    assert_eq!(
        build_wqe(&c, &WqeOp::RdmaWrite { remote: REMOTE, sgl: &sgl[..1] }, &mut buf[..47]),
        Err(WqeError::BufferTooSmall { need: 48, have: 47 })
    );
    assert!(buf.iter().all(|&x| x == P), "a refused WQE must not write a byte");
}

#[test]
fn zero_length_gather_entries_are_skipped_like_rdma_core() {
    let sgl = [Sge { addr: 1, length: 0, lkey: 1 }, Sge { addr: 2, length: 4, lkey: 2 }];
    let (buf, b) = build(&WqeOp::Send { sgl: &sgl });
    assert_eq!(b.ds, 2);
    assert_eq!(buf[16..20], [0, 0, 0, 4]);
}
