//! The device encoder held to two oracles. `device.h`'s `write_wqe` and
//! `ring`, compiled for the CPU (`kernels/cpu/device_cpu.cpp`, the same
//! source the GPU runs), write the WQE, doorbell record and doorbell of
//! random operations into 0xA5-poisoned memory. Each is compared byte for
//! byte with `marrow_mlx5::wqe::build_wqe`, and its control and data
//! segments with rdma-core's `mlx5dv_set_ctrl_seg` and
//! `mlx5dv_set_data_seg`. Doorbells are checked in both conventions:
//! NVSHMEM's `{BE32(pi << 8), BE32(qpn << 8)}` and rdma-core's first 8 bytes
//! of the control segment. A mismatch names the operation, the byte and the
//! field it belongs to (from the generated layouts).
//!
//! `MARROW_ENCODER_OPS` sets the number of operations (default 10^5).

use marrow_gcrb::GCRB_PAGE_SIZE;
use marrow_layout::StructLayout;
use marrow_mlx5::raw::{CompletionMode, FenceMode, MLX5_BF_OFFSET, MLX5_SND_DBR, WqeOpcode};
use marrow_mlx5::raw::{mlx5_wqe_atomic_seg, mlx5_wqe_ctrl_seg, mlx5_wqe_data_seg, mlx5_wqe_raddr_seg};
use marrow_mlx5::wqe::{CtrlParams, RemoteAddr, Sge, WqeOp, build_wqe};
use marrow_softnic::Shm;
use marrow_transport::cpu::{Device, EncodeOp};
use marrow_transport::gcrb_page::{self, GcrbSetup};

const POISON: u8 = 0xa5;
const BB: usize = 64;

/// One ring size's memory: GCRB page, send queue, doorbell record, UAR page.
struct Rig {
    page: Shm,
    sq: Shm,
    dbrec: Shm,
    uar: Shm,
    wqebbs: u32,
    qpn: u32,
}

fn rig(wqebbs: u32, qpn: u32, ctrl_bytes: bool, early: bool) -> Rig {
    let page = Shm::create("enc-gcrb", GCRB_PAGE_SIZE as usize).unwrap();
    let sq = Shm::create("enc-sq", wqebbs as usize * BB).unwrap();
    poison(&sq);
    let dbrec = Shm::create("enc-dbrec", 4096).unwrap();
    let uar = Shm::create("enc-uar", 4096).unwrap();
    let cq = Shm::create("enc-cq", 4096).unwrap();
    let a = |s: &Shm| s.region().base_addr() as u64;
    let setup = GcrbSetup {
        qpn,
        sq: (a(&sq), wqebbs),
        dbrec: a(&dbrec),
        db: (a(&uar) + u64::from(MLX5_BF_OFFSET), 8),
        cq: (a(&cq), 64, a(&cq) + 4096 - 8, false),
        local: (1, a(&sq), 64),
        keys: [(0, 0); 2],
        timeout_ns: 1_000_000,
        trace: false,
    };
    gcrb_page::fill(&page.region(), &setup).unwrap();
    gcrb_page::edit_config(&page.region(), |c| {
        c.set_db_ctrl_bytes(ctrl_bytes);
        c.set_early_doorbell(early);
    })
    .unwrap();
    std::mem::forget(cq); // named by the page; never touched by the encoder
    Rig { page, sq, dbrec, uar, wqebbs, qpn }
}

fn poison(s: &Shm) {
    s.region().fill(0, s.len(), POISON).unwrap();
}

fn bytes(s: &Shm) -> Vec<u8> {
    let mut v = vec![0u8; s.len()];
    s.region().read_bytes(0, &mut v).unwrap();
    v
}

/// The segments of a WQE of `opcode`, in order, as the generated layouts name them.
fn segments(opcode: WqeOpcode) -> Vec<&'static StructLayout> {
    match opcode {
        WqeOpcode::NOP => vec![&mlx5_wqe_ctrl_seg::LAYOUT],
        WqeOpcode::ATOMIC_FA | WqeOpcode::ATOMIC_CS => vec![
            &mlx5_wqe_ctrl_seg::LAYOUT,
            &mlx5_wqe_raddr_seg::LAYOUT,
            &mlx5_wqe_atomic_seg::LAYOUT,
            &mlx5_wqe_data_seg::LAYOUT,
        ],
        _ => vec![&mlx5_wqe_ctrl_seg::LAYOUT, &mlx5_wqe_raddr_seg::LAYOUT, &mlx5_wqe_data_seg::LAYOUT],
    }
}

/// "segment.field" of byte `at` of a WQE of `opcode`.
fn field_of(opcode: WqeOpcode, at: usize) -> String {
    let mut base = 0;
    for seg in segments(opcode) {
        if at < base + seg.size {
            let f = seg.fields.iter().find(|f| (f.offset..f.offset + f.size).contains(&(at - base)));
            return format!("{}.{}", seg.name, f.map_or("?", |f| f.name));
        }
        base += seg.size;
    }
    "past the WQE's ds".into()
}

/// A random operation of those the device API posts, as both encoders take it.
fn random_op(rng: &mut fastrand::Rng) -> (EncodeOp, bool) {
    let opcode =
        [WqeOpcode::RDMA_WRITE, WqeOpcode::RDMA_READ, WqeOpcode::ATOMIC_FA, WqeOpcode::ATOMIC_CS, WqeOpcode::NOP]
            [rng.usize(..5)];
    let atomic = matches!(opcode, WqeOpcode::ATOMIC_FA | WqeOpcode::ATOMIC_CS);
    // Every fence mode, completion mode and solicited bit.
    let fm_ce_se = (rng.u8(..8) << 5) | (rng.u8(..4) << 2) | (rng.u8(..2) << 1);
    // The fields each call of the API fills (device.h's rw_op, atomic_op and
    // quiet's NOP); the others stay zero, as `Op{}` leaves them.
    let op = match opcode {
        WqeOpcode::NOP => EncodeOp { opcode: opcode.0, fm_ce_se, ..EncodeOp::default() },
        _ => EncodeOp {
            opcode: opcode.0,
            opmod: 0,
            raddr: rng.u64(..),
            rkey: rng.u32(..),
            laddr: rng.u64(..),
            lkey: rng.u32(..),
            // rw_op refuses a length with bit 31 set (MLX5_INLINE_SEG).
            len: if atomic { 8 } else { rng.u32(..1 << 31) },
            swap_add: if atomic { rng.u64(..) } else { 0 },
            compare: if opcode == WqeOpcode::ATOMIC_CS { rng.u64(..) } else { 0 },
            fm_ce_se,
        },
    };
    (op, rng.bool())
}

/// What `build_wqe` makes of the same operation, ds×16 bytes.
fn reference(op: &EncodeOp, idx: u64, qpn: u32, signaled: bool) -> Vec<u8> {
    let mut ce = (op.fm_ce_se >> 2) & 3;
    if !signaled {
        ce &= !2; // CQ_UPDATE cleared, as write_wqe does for an unsignaled WQE
    }
    let ctrl = CtrlParams {
        wqe_index: idx as u16,
        qpn,
        fence: FenceMode(op.fm_ce_se >> 5),
        completion: CompletionMode(ce),
        solicited: op.fm_ce_se & 2 != 0,
    };
    let remote = RemoteAddr { raddr: op.raddr, rkey: op.rkey };
    let sge = Sge { addr: op.laddr, length: op.len, lkey: op.lkey };
    let sgl = [sge];
    let wop = match WqeOpcode(op.opcode) {
        WqeOpcode::RDMA_WRITE => WqeOp::RdmaWrite { remote, sgl: &sgl },
        WqeOpcode::RDMA_READ => WqeOp::RdmaRead { remote, sgl: &sgl },
        WqeOpcode::ATOMIC_FA => WqeOp::AtomicFa { remote, local: sge, add: op.swap_add },
        WqeOpcode::ATOMIC_CS => WqeOp::AtomicCs { remote, local: sge, compare: op.compare, swap: op.swap_add },
        _ => WqeOp::Nop,
    };
    let mut out = [0u8; 16 * BB];
    let built = build_wqe(&ctrl, &wop, &mut out).expect("build_wqe");
    out[..built.len()].to_vec()
}

/// rdma-core's control and data segments for the same WQE, spliced at
/// their offsets over `want` (the raddr and atomic segments rdma-core
/// fills by hand in qp.c, with no mlx5dv helper to call).
fn rdma_core(op: &EncodeOp, idx: u64, qpn: u32, signaled: bool, ds: u8) -> ([u8; 16], Option<(usize, [u8; 16])>) {
    let fm_ce_se = if signaled { op.fm_ce_se } else { op.fm_ce_se & !(2 << 2) };
    let a = marrow_oracle::CtrlArgs {
        pi: idx as u16,
        opcode: op.opcode,
        opmod: op.opmod,
        qp_num: qpn,
        fm_ce_se,
        ds,
        signature: 0,
        imm: 0,
    };
    let ctrl = marrow_oracle::set_ctrl_seg(&a, true);
    let data = match WqeOpcode(op.opcode) {
        WqeOpcode::NOP => None,
        WqeOpcode::ATOMIC_FA | WqeOpcode::ATOMIC_CS => {
            Some((48, marrow_oracle::set_data_seg(op.len, op.lkey, op.laddr)))
        }
        _ => Some((32, marrow_oracle::set_data_seg(op.len, op.lkey, op.laddr))),
    };
    (ctrl, data)
}

fn check_one(r: &Rig, dev: &Device, i: usize, idx: u64, op: &EncodeOp, signaled: bool, ctrl_bytes: bool) {
    // The send queue is poisoned once and each written WQEBB re-poisoned
    // after its check: the WQEBB and its neighbours are what is looked at.
    for s in [&r.dbrec, &r.uar] {
        poison(s);
    }
    dev.encode(idx, op, signaled);
    let opcode = WqeOpcode(op.opcode);
    let want = reference(op, idx, r.qpn, signaled);
    let n = r.wqebbs as usize;
    let slot = (idx % u64::from(r.wqebbs)) as usize;
    let ctx = |what: &str| format!("op #{i} {op:?} at index {idx:#x} (slot {slot}), signaled {signaled}: {what}");
    let read_bb = |k: usize| {
        let mut b = [0u8; BB];
        r.sq.region().read_bytes(k * BB, &mut b).unwrap();
        b
    };
    let wqe = read_bb(slot);
    for (k, (&g, &w)) in wqe.iter().zip(&want).enumerate() {
        assert_eq!(
            g,
            w,
            "{}",
            ctx(&format!("WQE byte {k} ({}) is {g:#04x}; build_wqe writes {w:#04x}", field_of(opcode, k)))
        );
    }
    // The rest of the WQEBB: zeros; the WQEBBs around it: untouched.
    for (k, &g) in wqe[want.len()..].iter().enumerate() {
        assert_eq!(g, 0, "{}", ctx(&format!("WQE byte {} past its ds is {g:#04x}, not 0", want.len() + k)));
    }
    for k in [(slot + n - 1) % n, (slot + 1) % n] {
        if k != slot {
            assert!(
                read_bb(k).iter().all(|&b| b == POISON),
                "{}",
                ctx(&format!("WQEBB {k}, next to the WQE's, was written"))
            );
        }
    }
    r.sq.region().fill(slot * BB, BB, POISON).unwrap();
    // rdma-core's own helpers agree on the control and data segments.
    let (ctrl, data) = rdma_core(op, idx, r.qpn, signaled, (want.len() / 16) as u8);
    assert_eq!(&wqe[..16], &ctrl, "{}", ctx("control segment differs from mlx5dv_set_ctrl_seg's"));
    if let Some((at, d)) = data {
        assert_eq!(&wqe[at..at + 16], &d, "{}", ctx("data segment differs from mlx5dv_set_data_seg's"));
    }
    // Doorbell record: the send counter (word MLX5_SND_DBR) is the next WQEBB.
    let rec = bytes(&r.dbrec);
    let at = 4 * MLX5_SND_DBR as usize;
    let next = marrow_mlx5::doorbell::qp_dbrec_send_word((idx + 1) as u16);
    assert_eq!(&rec[at..at + 4], &next, "{}", ctx("doorbell record's send counter"));
    assert!(
        rec[..at].iter().chain(&rec[at + 4..]).all(|&b| b == POISON),
        "{}",
        ctx("doorbell record: other bytes written")
    );
    // Doorbell: either convention, at the BlueFlame register.
    let uar = bytes(&r.uar);
    let bf = MLX5_BF_OFFSET as usize;
    let db: [u8; 8] = uar[bf..bf + 8].try_into().unwrap();
    let want_db = if ctrl_bytes {
        // rdma-core rings with the WQE's first 8 bytes (mmio_write64_be of the ctrl seg).
        let c = mlx5_wqe_ctrl_seg::read_from_bytes(&ctrl).unwrap();
        marrow_mlx5::doorbell::uar_doorbell_from_ctrl(&c)
    } else {
        marrow_mlx5::doorbell::uar_doorbell_index_qpn((idx + 1) as u16, r.qpn).unwrap()
    };
    assert_eq!(db, want_db, "{}", ctx(&format!("doorbell ({})", if ctrl_bytes { "rdma-core" } else { "NVSHMEM" })));
    assert!(
        uar.iter().enumerate().all(|(k, &b)| (bf..bf + 8).contains(&k) || b == POISON),
        "{}",
        ctx("UAR page: bytes outside the doorbell register written")
    );
}

use zerocopy::FromBytes;

#[test]
fn the_device_encoder_writes_what_build_wqe_and_rdma_core_write() {
    let ops: usize = std::env::var("MARROW_ENCODER_OPS").ok().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let mut rng = fastrand::Rng::with_seed(0x00e2_c0de);
    // Ring sizes from one WQEBB to 32768, both doorbell conventions, with
    // and without early doorbells, QPNs to the 24-bit limit.
    let mut rigs = Vec::new();
    for (k, wqebbs) in [1u32, 2, 64, 1024, 32768].into_iter().enumerate() {
        for (ctrl_bytes, early) in [(false, false), (true, false), (false, true), (true, true)] {
            let qpn = [0x100, 0x1234, 0xff_ffff, 0x80_0001, 0x42][k];
            rigs.push((rig(wqebbs, qpn, ctrl_bytes, early), ctrl_bytes));
        }
    }
    let mut count = [0u64; 5];
    for i in 0..ops {
        let (r, ctrl_bytes) = &rigs[rng.usize(..rigs.len())];
        let dev = Device::on_page(&r.page.region());
        // Indexes anywhere, and often around the 16-bit wrap and the ring's end.
        let idx = match rng.u8(..3) {
            0 => rng.u64(..),
            1 => 0xffff_u64.wrapping_add(rng.u64(..4)).wrapping_sub(2) + (rng.u64(..1 << 20) << 16),
            _ => u64::from(r.wqebbs) * rng.u64(..1 << 20) + rng.u64(..2) + u64::from(r.wqebbs) - 1,
        };
        let (op, signaled) = random_op(&mut rng);
        check_one(r, &dev, i, idx, &op, signaled, *ctrl_bytes);
        count[[0x08, 0x10, 0x12, 0x11, 0x00].iter().position(|&o| o == op.opcode).unwrap_or(4)] += 1;
    }
    eprintln!(
        "device encoder: {ops} operations (WRITE {}, READ {}, FETCH_ADD {}, CMP_SWAP {}, NOP {}), all byte-identical",
        count[0], count[1], count[2], count[3], count[4]
    );
}
