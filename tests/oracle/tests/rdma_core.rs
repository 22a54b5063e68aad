//! Differential tests: marrow's generated layouts and typed builders against
//! rdma-core's own inline helpers in `<infiniband/mlx5dv.h>`, compiled by gcc.
//! Every comparison is byte for byte, in buffers poisoned with 0xA5.

use marrow_mlx5::raw::*;
use marrow_mlx5::wqe::{CtrlParams, RemoteAddr, Sge, WqeOp, build_wqe};
use marrow_oracle::*;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

fn rand_ctrl_args(r: &mut SplitMix) -> (CtrlArgs, FenceMode, CompletionMode, bool) {
    let fm = FenceMode(r.below(5) as u8);
    let ce = CompletionMode(r.below(4) as u8);
    let se = r.next_u8() & 1 == 1;
    let a = CtrlArgs {
        pi: r.next_u16(),
        opcode: r.next_u8(),
        opmod: r.next_u8(),
        qp_num: r.next_u32() & 0x00ff_ffff,
        fm_ce_se: (fm.0 << 5) | (ce.0 << 2) | (u8::from(se) << 1),
        ds: r.below(64) as u8,
        signature: r.next_u8(),
        imm: r.next_u32(),
    };
    (a, fm, ce, se)
}

#[test]
fn ctrl_seg_setters_match_mlx5dv_set_ctrl_seg_and_x86_variant() {
    let mut r = SplitMix(1);
    for case in 0..CASES {
        let (a, fm, ce, se) = rand_ctrl_args(&mut r);
        let mut s = mlx5_wqe_ctrl_seg::new_zeroed();
        s.set_opmod(a.opmod).set_wqe_index(a.pi).set_opcode(WqeOpcode(a.opcode));
        s.set_qpn(a.qp_num).unwrap().set_ds(a.ds).unwrap().set_fm(fm).unwrap().set_ce(ce).unwrap();
        s.set_se(se).set_signature(a.signature).set_imm(a.imm);
        let mut ours = [POISON; 16];
        ours.copy_from_slice(s.as_bytes());
        assert_eq!(ours, set_ctrl_seg(&a, true), "case {case}: {a:?} vs mlx5dv_set_ctrl_seg");
        assert_eq!(ours, x86_set_ctrl_seg(&a), "case {case}: {a:?} vs mlx5dv_x86_set_ctrl_seg");
        // And back: the getters read what rdma-core wrote.
        let back = mlx5_wqe_ctrl_seg::read_from_bytes(&set_ctrl_seg(&a, true)).unwrap();
        assert_eq!(
            (back.opmod(), back.wqe_index(), back.opcode().0, back.qpn(), back.ds()),
            (a.opmod, a.pi, a.opcode, a.qp_num, a.ds)
        );
        assert_eq!((back.fm(), back.ce(), back.se(), back.signature(), back.imm()), (fm, ce, se, a.signature, a.imm));
    }
    // mlx5dv_set_ctrl_seg alone leaves dci_stream_channel_id untouched; the
    // post path's 32-bit clear is what zeroes it (qp.c _mlx5_post_send).
    let (a, ..) = rand_ctrl_args(&mut r);
    assert_eq!(&set_ctrl_seg(&a, false)[9..11], &[POISON, POISON]);
}

#[test]
fn data_seg_matches_both_rdma_core_encodings() {
    let mut r = SplitMix(2);
    for case in 0..CASES {
        let (len, lkey, addr) = (r.next_u32(), r.next_u32(), r.next_u64());
        let mut d = mlx5_wqe_data_seg::new_zeroed();
        d.set_byte_count(len).set_lkey(lkey).set_addr(addr);
        let mut ours = [POISON; 16];
        ours.copy_from_slice(d.as_bytes());
        assert_eq!(ours, set_data_seg(len, lkey, addr), "case {case}: mlx5dv_set_data_seg");
        assert_eq!(ours, x86_set_data_seg(len, lkey, addr), "case {case}: mlx5dv_x86_set_data_seg");
    }
}

#[test]
fn dgram_seg_matches_mlx5dv_set_dgram_seg() {
    let mut r = SplitMix(3);
    for case in 0..CASES {
        let a = DgramArgs {
            key: r.next_u64(),
            dqp_dct: r.next_u32() & 0x00ff_ffff,
            ext: r.next_u8() & 1,
            stat_rate_sl: r.next_u8(),
            fl_mlid: r.next_u8(),
            rlid: r.next_u16(),
            rmac: r.bytes(),
            tclass: r.next_u8(),
            hop_limit: r.next_u8(),
            grh_gid_fl: r.next_u32(),
            rgid: r.bytes(),
        };
        let mut av = mlx5_wqe_av::new_zeroed();
        av.set_key(a.key).set_ext(a.ext == 1).set_dqpn(a.dqp_dct).unwrap();
        av.set_stat_rate_sl(a.stat_rate_sl).set_fl_mlid(a.fl_mlid).set_rlid(a.rlid).set_rmac(&a.rmac);
        av.set_tclass(a.tclass).set_hop_limit(a.hop_limit).set_grh_gid_fl(a.grh_gid_fl).set_rgid(&a.rgid);
        let theirs = set_dgram_seg(&a);
        let ours = av.as_bytes();
        // mlx5dv_set_dgram_seg never writes reserved0[4] (bytes 16..20);
        // marrow writes zeros there. Everything else must agree.
        assert_eq!(&ours[..16], &theirs[..16], "case {case}: {a:?}");
        assert_eq!(&ours[20..], &theirs[20..], "case {case}: {a:?}");
        assert_eq!(&theirs[16..20], &[POISON; 4]);
        assert_eq!(&ours[16..20], &[0; 4]);
    }
}

#[test]
fn cqe_op_own_matches_mlx5dv_getters_and_setter() {
    let mut r = SplitMix(4);
    for case in 0..CASES {
        let bytes: [u8; 64] = r.bytes();
        let cqe = mlx5_cqe64::read_from_bytes(&bytes).unwrap();
        let (owner, se, format, opcode) = cqe_getters(&bytes);
        assert_eq!(
            (u8::from(cqe.owner()), u8::from(cqe.se()), cqe.format().0, cqe.opcode().0),
            (owner, se, format, opcode),
            "case {case}: op_own {:#04x}",
            bytes[63]
        );
        let val = r.next_u8() & 1;
        let mut mine = cqe;
        mine.set_owner(val == 1);
        assert_eq!(mine.as_bytes(), &set_cqe_owner(&bytes, val)[..], "case {case}: mlx5dv_set_cqe_owner");
    }
}

/// A random operation and the `ds` it must produce, computed here from the
/// segment list rdma-core's qp.c writes (ctrl, raddr, atomic, data/inline).
fn rand_op<'a>(r: &mut SplitMix, sgl: &'a mut Vec<Sge>, inline: &'a mut Vec<u8>) -> (WqeOp<'a>, usize) {
    let remote = RemoteAddr { raddr: r.next_u64(), rkey: r.next_u32() };
    let sge = |r: &mut SplitMix, len: u32| Sge { addr: r.next_u64(), length: len, lkey: r.next_u32() };
    sgl.clear();
    for _ in 0..r.below(4) {
        let len = 1 + (r.next_u32() & 0x7fff_fffe); // non-zero, under 2 GiB
        sgl.push(sge(r, len));
    }
    inline.clear();
    inline.extend((0..r.below(200)).map(|_| r.next_u8()));
    let n = sgl.len();
    let inl_ds = (4 + inline.len()).div_ceil(16);
    match r.below(14) {
        0 => (WqeOp::Nop, 1),
        1 => (WqeOp::RdmaWrite { remote, sgl }, 2 + n),
        2 => (WqeOp::RdmaWriteImm { remote, sgl, imm: r.next_u32() }, 2 + n),
        3 => (WqeOp::RdmaWriteInline { remote, data: inline }, 2 + inl_ds),
        4 => (WqeOp::Send { sgl }, 1 + n),
        5 => (WqeOp::SendImm { sgl, imm: r.next_u32() }, 1 + n),
        6 => (WqeOp::SendInline { data: inline }, 1 + inl_ds),
        7 => (WqeOp::RdmaRead { remote, sgl }, 2 + n),
        8 => (WqeOp::AtomicCs { remote, local: sge(r, 8), compare: r.next_u64(), swap: r.next_u64() }, 4),
        9 => (WqeOp::AtomicFa { remote, local: sge(r, 8), add: r.next_u64() }, 4),
        10 => (
            WqeOp::MaskedCs32 {
                remote,
                local: sge(r, 4),
                swap: r.next_u32(),
                compare: r.next_u32(),
                swap_mask: r.next_u32(),
                compare_mask: r.next_u32(),
            },
            4,
        ),
        11 => (WqeOp::MaskedFa32 { remote, local: sge(r, 4), add: r.next_u32(), field_boundary: r.next_u32() }, 4),
        12 => (
            WqeOp::MaskedCs64 {
                remote,
                local: sge(r, 8),
                swap: r.next_u64(),
                compare: r.next_u64(),
                swap_mask: r.next_u64(),
                compare_mask: r.next_u64(),
            },
            5,
        ),
        _ => (WqeOp::MaskedFa64 { remote, local: sge(r, 8), add: r.next_u64(), field_boundary: r.next_u64() }, 4),
    }
}

#[test]
fn built_wqes_match_rdma_core_segment_by_segment() {
    let mut r = SplitMix(5);
    let (mut sgl, mut inline) = (Vec::new(), Vec::new());
    for case in 0..CASES {
        let (a, fm, ce, se) = rand_ctrl_args(&mut r);
        let (op, ds) = rand_op(&mut r, &mut sgl, &mut inline);
        let ctrl = CtrlParams { wqe_index: a.pi, qpn: a.qp_num, fence: fm, completion: ce, solicited: se };
        let mut wqe = [POISON; 1024];
        let built = build_wqe(&ctrl, &op, &mut wqe).unwrap_or_else(|e| panic!("case {case}: {op:?}: {e}"));
        assert_eq!(built.ds as usize, ds, "case {case}: {op:?}");
        assert_eq!(built.wqebbs as usize, (ds * 16).div_ceil(64));

        let (opcode, opmod) = op.opcode_opmod();
        let imm = match op {
            WqeOp::RdmaWriteImm { imm, .. } | WqeOp::SendImm { imm, .. } => imm,
            _ => 0,
        };
        let c = CtrlArgs { opcode: opcode.0, opmod, ds: ds as u8, signature: 0, imm, ..a };
        assert_eq!(&wqe[..16], &set_ctrl_seg(&c, true), "case {case}: ctrl of {op:?}");

        // The remaining segments, from the reference's layouts (raddr: be64
        // raddr, be32 rkey, 0; atomic: be64 swap_add, be64 compare; inline:
        // be32(len | 0x80000000) then the payload) and mlx5dv_set_data_seg.
        let mut want = Vec::new();
        let raddr = |rm: RemoteAddr| [&rm.raddr.to_be_bytes()[..], &rm.rkey.to_be_bytes(), &[0; 4]].concat();
        let data = |s: &Sge| set_data_seg(s.length, s.lkey, s.addr).to_vec();
        match op {
            WqeOp::Nop => {}
            WqeOp::RdmaWrite { remote, sgl }
            | WqeOp::RdmaWriteImm { remote, sgl, .. }
            | WqeOp::RdmaRead { remote, sgl } => {
                want.extend(raddr(remote));
                sgl.iter().for_each(|s| want.extend(data(s)));
            }
            WqeOp::Send { sgl } | WqeOp::SendImm { sgl, .. } => sgl.iter().for_each(|s| want.extend(data(s))),
            WqeOp::RdmaWriteInline { remote, data: d } => {
                want.extend(raddr(remote));
                want.extend((0x8000_0000u32 | d.len() as u32).to_be_bytes());
                want.extend(d);
            }
            WqeOp::SendInline { data: d } => {
                want.extend((0x8000_0000u32 | d.len() as u32).to_be_bytes());
                want.extend(d);
            }
            WqeOp::AtomicCs { remote, local, compare, swap } => {
                want.extend(raddr(remote));
                want.extend([swap.to_be_bytes(), compare.to_be_bytes()].concat());
                want.extend(data(&local));
            }
            WqeOp::AtomicFa { remote, local, add } => {
                want.extend(raddr(remote));
                want.extend([add.to_be_bytes(), [0; 8]].concat());
                want.extend(data(&local));
            }
            WqeOp::MaskedCs32 { remote, local, swap, compare, swap_mask, compare_mask } => {
                want.extend(raddr(remote));
                for v in [swap, compare, swap_mask, compare_mask] {
                    want.extend(v.to_be_bytes());
                }
                want.extend(data(&local));
            }
            WqeOp::MaskedFa32 { remote, local, add, field_boundary } => {
                want.extend(raddr(remote));
                want.extend([&add.to_be_bytes()[..], &field_boundary.to_be_bytes(), &[0; 8]].concat());
                want.extend(data(&local));
            }
            WqeOp::MaskedCs64 { remote, local, swap, compare, swap_mask, compare_mask } => {
                want.extend(raddr(remote));
                for v in [swap, compare, swap_mask, compare_mask] {
                    want.extend(v.to_be_bytes());
                }
                want.extend(data(&local));
            }
            WqeOp::MaskedFa64 { remote, local, add, field_boundary } => {
                want.extend(raddr(remote));
                want.extend([add.to_be_bytes(), field_boundary.to_be_bytes()].concat());
                want.extend(data(&local));
            }
        }
        want.resize(ds * 16 - 16, 0); // inline padding is zeroed
        assert_eq!(&wqe[16..ds * 16], &want[..], "case {case}: segments of {op:?}");
        // Nothing past the WQE was touched.
        assert!(wqe[ds * 16..].iter().all(|&b| b == POISON), "case {case}: wrote past ds*16");
    }
}

#[test]
fn rdma_core_struct_layouts_equal_the_generated_rust_layouts() {
    let fields = rdma_core_fields();
    assert_eq!(fields.len(), 49);
    for f in &fields {
        let layout = ALL_LAYOUTS
            .iter()
            .find(|l| l.name == f.strct)
            .unwrap_or_else(|| panic!("no generated layout for rdma-core's struct {}", f.strct));
        assert_eq!(layout.size, f.struct_size, "sizeof(struct {})", f.strct);
        let ours = layout
            .field(&f.field)
            .unwrap_or_else(|| panic!("generated {} lacks rdma-core's field {}", f.strct, f.field));
        assert_eq!((ours.offset, ours.size), (f.offset, f.size), "{}.{}", f.strct, f.field);
    }
}

#[test]
fn generated_c_header_layout_equals_rust_layout() {
    let c = generated_header_fields();
    let rust: Vec<CField> = ALL_LAYOUTS
        .iter()
        .chain(marrow_gcrb::ALL_LAYOUTS.iter())
        .chain(marrow_pcie::generated::pcie::ALL_LAYOUTS.iter())
        .flat_map(|l| {
            l.fields.iter().map(|f| CField {
                strct: l.name.to_string(),
                field: f.name.to_string(),
                offset: f.offset,
                size: f.size,
                struct_size: l.size,
            })
        })
        .collect();
    assert_eq!(c, rust, "g++'s layout of marrow/generated/{{mlx5,gcrb,pcie}}.h differs from Rust's");
    assert_eq!(core::mem::size_of::<marrow_pcie::generated::pcie::pci_exp_cap>(), 60);
    // The Rust side's own sizes, as rustc lays the structs out.
    assert_eq!(core::mem::size_of::<mlx5_wqe_ctrl_seg>(), 16);
    assert_eq!(core::mem::size_of::<mlx5_cqe64>(), 64);
    assert_eq!(core::mem::size_of::<mlx5_wqe_av>(), 48);
}

#[test]
fn rdma_core_constants_equal_the_generated_ones() {
    let consts = rdma_core_consts();
    assert!(consts.len() >= 50);
    for (name, value) in consts {
        let ours: u64 = if let Some(n) = name.strip_prefix("MLX5_OPCODE_") {
            WqeOpcode::ALL.iter().find(|o| o.name() == Some(n)).map(|o| o.0.into())
        } else if let Some(n) = name.strip_prefix("MLX5_CQE_SYNDROME_") {
            Syndrome::ALL.iter().find(|o| o.name() == Some(n)).map(|o| o.0.into())
        } else if let Some(n) = name.strip_prefix("MLX5_CQE_VENDOR_SYNDROME_") {
            VendorSyndrome::ALL.iter().find(|o| o.name() == Some(n)).map(|o| o.0.into())
        } else if let Some(n) = name.strip_prefix("MLX5_CQE_") {
            CqeOpcode::ALL.iter().find(|o| o.name() == Some(n)).map(|o| o.0.into())
        } else {
            match name.as_str() {
                "MLX5_WQE_CTRL_CQ_UPDATE" => Some(u64::from(CompletionMode::CQE_ALWAYS.0) << 2),
                "MLX5_WQE_CTRL_SOLICITED" => Some(1 << 1),
                "MLX5_WQE_CTRL_FENCE" => Some(u64::from(FenceMode::SMALL_AND_FENCE.0) << 5),
                "MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE" => Some(u64::from(FenceMode::INITIATOR_SMALL.0) << 5),
                "MLX5_SEND_WQE_BB" => Some(MLX5_SEND_WQE_BB.into()),
                "MLX5_SEND_WQE_SHIFT" => Some(MLX5_SEND_WQE_SHIFT.into()),
                "MLX5_INLINE_SEG" => Some(MLX5_INLINE_SEG.into()),
                "MLX5_INVALID_LKEY" => Some(MLX5_INVALID_LKEY.into()),
                "MLX5_EXTENDED_UD_AV" => Some(MLX5_EXTENDED_UD_AV.into()),
                "MLX5_RCV_DBR" => Some(MLX5_RCV_DBR.into()),
                "MLX5_SND_DBR" => Some(MLX5_SND_DBR.into()),
                "MLX5_CQ_DOORBELL" => Some(MLX5_CQ_DOORBELL.into()),
                _ => None,
            }
        }
        .unwrap_or_else(|| panic!("rdma-core constant {name} has no generated counterpart"));
        assert_eq!(ours, value, "{name}");
    }
}
