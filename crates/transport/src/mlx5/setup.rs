//! The GCRB of a hardware channel, from what `mlx5dv_init_obj` returned
//! ([`marrow_verbs::device::DvQueues`]): a pure function, so it is tested
//! here without a NIC, including by running the device code against it.
//!
//! What device.h expects of the GCRB (kernels/include/marrow/device.h), and
//! where each value comes from:
//!
//! | gcrb_config | from | device.h use |
//! |---|---|---|
//! | `sq_base`, `sq_wqebbs`, `sq_stride` | `mlx5dv_qp.sq.{buf,wqe_cnt,stride}` | WQE `i` at `sq_base + (i % sq_wqebbs) * 64`: stride must be 64, depth a power of two |
//! | `dbrec_addr` | `mlx5dv_qp.dbrec` | `dbrec[MLX5_SND_DBR]` (+4) = BE32(producer & 0xffff) |
//! | `db_addr`, `db_size` | `mlx5dv_qp.bf.{reg,size}` (or the proxy mailbox) | one 8-byte store to `db_addr` |
//! | `cq_base`, `cq_ncqe`, `cq_dbrec_addr`, `cq_mode` | `mlx5dv_cq.{buf,cqe_cnt,dbrec}`; verbs CQs are not collapsed | CQE `i` at `cq_base + (i % ncqe) * 64`; `dbrec[MLX5_CQ_SET_CI]` |
//! | `local_*`, keys | the MRs | lkey/rkey in data and remote-address segments |

use super::Mlx5Error;
use crate::gcrb_page::GcrbSetup;
use marrow_mlx5::raw::{
    MLX5_ADAPTER_PAGE_SIZE, MLX5_BF_OFFSET, MLX5_CQE_SIZE, MLX5_DB_BLUEFLAME_BUFFER_SIZE, MLX5_SEND_WQE_BB,
};
use marrow_verbs::device::DvQueues;

/// Where the device code's doorbell store goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doorbell {
    /// The UAR register at its host address (CPU threads ring it).
    Uar,
    /// The UAR register mapped into the GPU at this device address
    /// (`cuMemHostRegister(IOMEMORY)` may map MMIO elsewhere than the host
    /// address, unlike ordinary host memory).
    GpuUar(u64),
    /// A host mailbox at this (device-visible) address that the CPU proxy forwards.
    Mailbox(u64),
}

/// The GCRB for one channel. `local`: (lkey, address, length) of the local
/// window; `keys`: (address, rkey) of each PE's window.
pub fn gcrb_setup(
    dv: &DvQueues,
    doorbell: Doorbell,
    local: (u32, u64, u64),
    keys: [(u64, u32); 2],
    timeout_ns: u64,
    trace: bool,
) -> Result<GcrbSetup, Mlx5Error> {
    let bad = |m: String| Err(Mlx5Error::Queue(m));
    if dv.sq_stride != MLX5_SEND_WQE_BB {
        return bad(format!("SQ stride {} bytes: the device code builds {MLX5_SEND_WQE_BB}-byte WQEBBs", dv.sq_stride));
    }
    if dv.sq_wqe_cnt == 0 || !dv.sq_wqe_cnt.is_power_of_two() {
        return bad(format!("SQ of {} WQEBBs: the device code needs a power of two", dv.sq_wqe_cnt));
    }
    if dv.cqe_size != MLX5_CQE_SIZE {
        return bad(format!(
            "{}-byte CQEs: the device code reads 64-byte CQEs; set MLX5_CQE_SIZE=64 in the environment (rdma-core's mlx5 provider, providers/mlx5/mlx5.c, picks 128 on 128-byte cache lines)",
            dv.cqe_size
        ));
    }
    if dv.cqe_cnt == 0 || !dv.cqe_cnt.is_power_of_two() {
        return bad(format!("CQ of {} entries: the device code needs a power of two", dv.cqe_cnt));
    }
    for (name, a, align) in [
        ("SQ buffer", dv.sq_buf, 64),
        ("doorbell record", dv.dbrec, 4),
        ("CQ buffer", dv.cq_buf, 64),
        ("CQ doorbell record", dv.cq_dbrec, 4),
        ("BlueFlame register", dv.bf_reg, 8),
    ] {
        if a == 0 || !a.is_multiple_of(align) {
            return bad(format!("{name} at {a:#x}: null or not {align}-byte aligned"));
        }
    }
    // rdma-core places doorbell/BlueFlame registers at UAR + 0x800 + k * 0x100
    // (providers/mlx5/mlx5.c, verbs.c mlx5_insert_dyn_uuars); anything else
    // is not a doorbell register.
    let off = (dv.bf_reg % u64::from(MLX5_ADAPTER_PAGE_SIZE)) as u32;
    if off < MLX5_BF_OFFSET || !(off - MLX5_BF_OFFSET).is_multiple_of(MLX5_DB_BLUEFLAME_BUFFER_SIZE) {
        return bad(format!(
            "BlueFlame register at UAR offset {off:#x}: expected {MLX5_BF_OFFSET:#x} + k*{MLX5_DB_BLUEFLAME_BUFFER_SIZE:#x}"
        ));
    }
    let db = match doorbell {
        // bf.size 0: a doorbell-only register (no BlueFlame buffer); 8 bytes.
        Doorbell::Uar => (dv.bf_reg, dv.bf_size.max(8)),
        Doorbell::GpuUar(a) => (a, dv.bf_size.max(8)),
        Doorbell::Mailbox(a) => (a, 8),
    };
    Ok(GcrbSetup {
        qpn: dv.qpn,
        sq: (dv.sq_buf, dv.sq_wqe_cnt),
        dbrec: dv.dbrec,
        db,
        cq: (dv.cq_buf, dv.cqe_cnt, dv.cq_dbrec, false),
        local,
        keys,
        timeout_ns,
        trace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::Device;
    use crate::gcrb_page;
    use marrow_gcrb::{
        GCRB_MAGIC, GCRB_OFF_CONFIG, GCRB_OFF_KEYS, GCRB_PAGE_SIZE, GCRB_VERSION, gcrb_config, gcrb_key,
    };
    use marrow_mlx5::raw::{MLX5_SND_DBR, WqeOpcode};
    use marrow_mlx5::wqe_decode::WqeView;
    use marrow_mmio::Region;
    use marrow_softnic::Shm;
    use marrow_verbs::ffi::{mlx5dv_bf, mlx5dv_cq, mlx5dv_qp, mlx5dv_wq};
    use zerocopy::FromBytes;

    /// Stand-ins for what mlx5 allocates: SQ ring, doorbell records, a UAR
    /// page, a CQ ring, and the local/remote windows, all in shared memory.
    struct FakeHca {
        sq: Shm,
        dbr: Shm,
        uar: Shm,
        cq: Shm,
        buf: Shm,
    }

    impl FakeHca {
        fn new(wqebbs: usize, ncqe: usize) -> FakeHca {
            let f = FakeHca {
                sq: Shm::create("hw-sq", wqebbs * 64).unwrap(),
                dbr: Shm::create("hw-dbr", 64).unwrap(),
                uar: Shm::create("hw-uar", 4096).unwrap(),
                cq: Shm::create("hw-cq", ncqe * 64).unwrap(),
                buf: Shm::create("hw-buf", 1 << 16).unwrap(),
            };
            // As mlx5_alloc_cq_buf initialises a CQ: every op_own INVALID.
            for i in 0..ncqe {
                f.cq.region().write_u8(i * 64 + 63, 0xf0).unwrap();
            }
            f
        }

        /// What `mlx5dv_init_obj` would return for these buffers.
        fn dv(&self, wqebbs: u32, ncqe: u32) -> (mlx5dv_qp, mlx5dv_cq) {
            let p = |s: &Shm, off: usize| (s.region().base_addr() + off) as *mut core::ffi::c_void;
            let q = mlx5dv_qp {
                dbrec: p(&self.dbr, 0).cast(),
                sq: mlx5dv_wq { buf: p(&self.sq, 0), wqe_cnt: wqebbs, stride: 64 },
                bf: mlx5dv_bf { reg: p(&self.uar, 0x800), size: 0x100 },
                ..mlx5dv_qp::default()
            };
            let c = mlx5dv_cq {
                buf: p(&self.cq, 0),
                dbrec: p(&self.dbr, 32).cast(),
                cqe_cnt: ncqe,
                cqe_size: 64,
                cqn: 0x80,
                ..mlx5dv_cq::default()
            };
            (q, c)
        }
    }

    fn setup_for(f: &FakeHca, doorbell: Doorbell) -> (DvQueues, GcrbSetup) {
        let (q, c) = f.dv(64, 64);
        let dv = DvQueues::from_dv(0x1234, &q, &c);
        let base = f.buf.region().base_addr() as u64;
        let s =
            gcrb_setup(&dv, doorbell, (0x11, base, 0x8000), [(base, 0x21), (base + 0x8000, 0x22)], 1_000_000_000, true)
                .unwrap();
        (dv, s)
    }

    #[test]
    fn the_page_holds_what_device_h_reads() {
        let f = FakeHca::new(64, 64);
        let (dv, s) = setup_for(&f, Doorbell::Uar);
        let page = Shm::create("hw-gcrb", GCRB_PAGE_SIZE as usize).unwrap();
        gcrb_page::fill(&page.region(), &s).unwrap();
        let mut b = vec![0u8; gcrb_config::SIZE];
        page.region().read_bytes(GCRB_OFF_CONFIG as usize, &mut b).unwrap();
        let c = gcrb_config::read_from_bytes(&b).unwrap();
        assert_eq!((c.magic(), c.version(), c.qpn()), (GCRB_MAGIC, GCRB_VERSION, 0x1234));
        assert_eq!((c.sq_base(), c.sq_wqebbs(), c.sq_stride()), (dv.sq_buf, 64, 64));
        // device.h writes dbrec[MLX5_SND_DBR]: the record's second word.
        assert_eq!(c.dbrec_addr() + 4 * u64::from(MLX5_SND_DBR), dv.dbrec + 4);
        assert_eq!((c.db_addr(), c.db_size()), (dv.bf_reg, 0x100));
        assert_eq!(c.db_addr() & 0xfff, 0x800);
        assert_eq!((c.cq_base(), c.cq_ncqe(), c.cq_dbrec_addr(), c.cq_mode()), (dv.cq_buf, 64, dv.cq_dbrec, 0));
        assert_eq!((c.local_lkey(), c.local_len(), c.key_count()), (0x11, 0x8000, 2));
        let mut k = vec![0u8; gcrb_key::SIZE];
        page.region().read_bytes(GCRB_OFF_KEYS as usize + gcrb_key::SIZE, &mut k).unwrap();
        assert_eq!(gcrb_key::read_from_bytes(&k).unwrap().rkey(), 0x22);
        assert!(Device::on_page(&page.region()).check_config().is_ok());
    }

    /// The device code (device.h on a CPU thread) posts through a GCRB
    /// built from fake `mlx5dv` objects: the WQE lands in the SQ ring, the
    /// doorbell record and the UAR register get what a ConnectX reads.
    #[test]
    fn the_device_code_posts_and_rings_through_it() {
        let f = FakeHca::new(64, 64);
        let (dv, s) = setup_for(&f, Doorbell::Uar);
        let page = Shm::create("hw-gcrb", GCRB_PAGE_SIZE as usize).unwrap();
        gcrb_page::fill(&page.region(), &s).unwrap();
        let d = Device::on_page(&page.region());
        d.put_nbi(1, 0x40, 0x80, 64).unwrap();
        let mut wqe = [0u8; 64];
        f.sq.region().read_bytes(0, &mut wqe).unwrap();
        let p = WqeView::new(&wqe).unwrap().parse().unwrap();
        assert_eq!((p.ctrl.opcode, p.ctrl.qpn, p.ctrl.wqe_index), (WqeOpcode::RDMA_WRITE, 0x1234, 0));
        let r = p.remote.unwrap();
        assert_eq!((r.raddr, r.rkey), (s.keys[1].0 + 0x40, 0x22));
        assert_eq!(f.dbr.region().read_be32(4).unwrap(), 1, "dbrec[MLX5_SND_DBR] = producer index 1");
        let db = f.uar.region().read_8bytes(0x800).unwrap();
        assert_eq!(&db[..4], &(1u32 << 8).to_be_bytes(), "doorbell: WQE index");
        assert_eq!(&db[4..], &(0x1234u32 << 8).to_be_bytes(), "doorbell: QPN");
        assert_eq!(dv.bf_reg as usize, f.uar.region().base_addr() + 0x800);
    }

    /// CPU-proxy mode: the GCRB's doorbell is a host mailbox; the device
    /// code rings it, the proxy forwards the same 8 bytes to the UAR.
    #[test]
    fn proxy_mode_forwards_the_device_codes_doorbell() {
        let f = FakeHca::new(64, 64);
        let mailbox = Shm::create("hw-mailbox", 64).unwrap();
        let (_, s) = setup_for(&f, Doorbell::Mailbox(mailbox.region().base_addr() as u64));
        assert_eq!(s.db, (mailbox.region().base_addr() as u64, 8));
        let page = Shm::create("hw-gcrb", GCRB_PAGE_SIZE as usize).unwrap();
        gcrb_page::fill(&page.region(), &s).unwrap();
        let uar_reg: Region = f.uar.region().sub(0x800, 8).unwrap();
        let proxy = marrow_verbs::proxy::DoorbellProxy::start(mailbox.region().sub(0, 8).unwrap(), uar_reg).unwrap();
        let d = Device::on_page(&page.region());
        d.put_nbi(1, 0, 0, 8).unwrap();
        let t0 = std::time::Instant::now();
        while proxy.forwarded() < 1 {
            assert!(t0.elapsed() < std::time::Duration::from_secs(5), "the proxy never forwarded");
            std::thread::yield_now();
        }
        let db = uar_reg.read_8bytes(0).unwrap();
        assert_eq!(&db[..4], &(1u32 << 8).to_be_bytes());
        assert_eq!(&db[4..], &(0x1234u32 << 8).to_be_bytes());
        assert_eq!(proxy.stop(), 1);
    }

    #[test]
    fn queues_the_device_code_cannot_drive_are_refused_with_the_fix() {
        let f = FakeHca::new(64, 64);
        let (q, c) = f.dv(64, 64);
        let ok = DvQueues::from_dv(1, &q, &c);
        let run = |dv: DvQueues| {
            gcrb_setup(&dv, Doorbell::Uar, (0, 0, 0), [(0, 0); 2], 1, false).map(|_| ()).unwrap_err().to_string()
        };
        assert!(run(DvQueues { cqe_size: 128, ..ok }).contains("MLX5_CQE_SIZE=64"));
        assert!(run(DvQueues { sq_stride: 128, ..ok }).contains("64-byte WQEBBs"));
        assert!(run(DvQueues { sq_wqe_cnt: 48, ..ok }).contains("power of two"));
        assert!(run(DvQueues { cqe_cnt: 0, ..ok }).contains("power of two"));
        assert!(run(DvQueues { bf_reg: ok.bf_reg - 0x800 + 0x100, ..ok }).contains("UAR offset 0x100"));
        assert!(run(DvQueues { dbrec: 0, ..ok }).contains("doorbell record at 0x0"));
        // Mapped into the GPU elsewhere: the GCRB carries the device address.
        let s = gcrb_setup(&ok, Doorbell::GpuUar(0x7000_0000_0800), (0, 0, 0), [(0, 0); 2], 1, false).unwrap();
        assert_eq!(s.db, (0x7000_0000_0800, 0x100));
        // Step 2's queues (GPU memory, devx) pass the same checks.
        let p = marrow_verbs::devx::plan(128, 512).unwrap();
        let d = marrow_verbs::devx::dv_queues(
            &p,
            0x77,
            0x88,
            0x7000_0000_0000,
            0x7000_0001_0000,
            0x7000_0002_0000,
            0x7f00_0000_0800,
            8,
        );
        let s = gcrb_setup(&d, Doorbell::GpuUar(0x7100_0000_0800), (0, 0, 0), [(0, 0); 2], 1, false).unwrap();
        assert_eq!(
            (s.sq, s.cq.1, s.dbrec, s.cq.2, s.db),
            ((0x7000_0000_0000, 128), 512, 0x7000_0002_0000, 0x7000_0002_0040, (0x7100_0000_0800, 8))
        );
        // A doorbell-only UAR (bf.size 0) still takes one 8-byte store.
        let s = gcrb_setup(
            &DvQueues { bf_size: 0, bf_reg: ok.bf_reg + 0x100, ..ok },
            Doorbell::Uar,
            (0, 0, 0),
            [(0, 0); 2],
            1,
            false,
        )
        .unwrap();
        assert_eq!(s.db.1, 8);
    }
}
