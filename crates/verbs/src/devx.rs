//! Step 2 of the backend: queues in GPU memory through devx. The CQ ring,
//! the SQ ring and both doorbell records live in GPU memory registered as
//! UMEMs (`mlx5dv_devx_umem_reg_ex` over a dma-buf from
//! `cuMemGetHandleForAddressRange`, or `mlx5dv_devx_umem_reg` with
//! nvidia_peermem), and the CQ and QP are created with raw PRM commands
//! (`mlx5dv_devx_obj_create`), as NVSHMEM's IBGDA transport does
//! (`src/modules/transport/ibgda/ibgda.cpp`).
//!
//! The command mailboxes are built here as pure functions over the layouts
//! generated from hw-specs/mlx5.toml (whose bit offsets the oracle checks
//! against `mlx5_ifc.h`), and `tests/oracle/tests/devx_commands.rs` builds the
//! same commands with rdma-core's own `DEVX_SET` in C and compares the bytes.
//! Sending them needs a NIC; [`Devx`] does that (UMEMs over dma-buf or
//! host/peermem memory, a UAR, the EQ, object create/modify) and is not run
//! here.

use crate::VerbsError;
use crate::qp::{LinkLayer, RcEndpoint, RcParams};
use marrow_mlx5::raw::*;
use zerocopy::{FromBytes, FromZeros, IntoBytes};

fn fit<T>(r: Result<T, marrow_layout::FieldOverflow>, what: &str) -> Result<T, VerbsError> {
    r.map_err(|e| VerbsError::Queue(format!("{what}: {e:?}")))
}

/// A CQ whose ring and doorbell record are in UMEMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqSpec {
    /// log2 of entries.
    pub log_cq_size: u8,
    /// UAR page index (`mlx5dv_devx_uar.page_id`).
    pub uar_page: u32,
    /// Completion EQ (`mlx5dv_devx_query_eqn`).
    pub eqn: u32,
    /// UMEM of the ring, and the ring's offset in it.
    pub umem: (u32, u64),
    /// UMEM of the doorbell record, and its offset.
    pub dbr: (u32, u64),
    /// Collapsed (NVSHMEM's `cc=1`): every CQE in entry 0.
    pub collapsed: bool,
}

/// `create_cq_in` for [`CqSpec`]: 64-byte CQEs, overrun ignored (the device
/// code never writes the CQ doorbell record when collapsed; NVSHMEM sets
/// `oi=1` for the same reason), 4 KiB pages (`log_page_size` 0 above 4 KiB).
pub fn create_cq_in(s: &CqSpec) -> Result<Vec<u8>, VerbsError> {
    let mut c = cqc::new_zeroed();
    fit(c.set_cqe_sz(0), "cqe_sz")?;
    c.set_cc(s.collapsed).set_oi(true).set_dbr_umem_valid(true);
    fit(c.set_log_cq_size(s.log_cq_size), "log_cq_size")?;
    fit(c.set_uar_page(s.uar_page), "uar_page")?;
    fit(c.set_log_page_size(0), "log_page_size")?;
    c.set_c_eqn_or_apu_element(s.eqn).set_dbr_umem_id(s.dbr.0).set_dbr_addr(s.dbr.1);
    let mut i = create_cq_in::new_zeroed();
    i.set_opcode(MLX5_CMD_OP_CREATE_CQ as u16);
    i.set_cq_context(c.as_bytes().try_into().expect("cqc is 64 bytes"));
    i.set_cq_umem_valid(true).set_cq_umem_id(s.umem.0).set_cq_umem_offset(s.umem.1);
    Ok(i.as_bytes().to_vec())
}

/// An RC QP whose send ring and doorbell record are in UMEMs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpSpec {
    /// Protection domain number.
    pub pd: u32,
    /// UAR page index.
    pub uar_page: u32,
    /// log2 of send-queue WQEBBs.
    pub log_sq_size: u8,
    /// Send and receive CQ numbers.
    pub cqn: (u32, u32),
    /// UMEM of the send ring (offset 0 in it).
    pub wq_umem: u32,
    /// UMEM of the doorbell record, and its offset.
    pub dbr: (u32, u64),
}

/// `create_qp_in` for [`QpSpec`]: RC, migrated, no receive queue (marrow's
/// data path posts no receives: zero-length RQ, `rq_type` 3).
pub fn create_qp_in(s: &QpSpec) -> Result<Vec<u8>, VerbsError> {
    let mut q = qpc::new_zeroed();
    q.set_st(MLX5_QPC_ST_RC as u8);
    fit(q.set_pm_state(MLX5_QPC_PM_STATE_MIGRATED as u8), "pm_state")?;
    fit(q.set_pd(s.pd), "pd")?;
    fit(q.set_uar_page(s.uar_page), "uar_page")?;
    fit(q.set_log_sq_size(s.log_sq_size), "log_sq_size")?;
    fit(q.set_rq_type(3), "rq_type")?;
    fit(q.set_cqn_snd(s.cqn.0), "cqn_snd")?;
    fit(q.set_cqn_rcv(s.cqn.1), "cqn_rcv")?;
    fit(q.set_log_page_size(0), "log_page_size")?;
    q.set_dbr_umem_valid(true).set_dbr_umem_id(s.dbr.0).set_dbr_addr(s.dbr.1);
    let mut i = create_qp_in::new_zeroed();
    i.set_opcode(MLX5_CMD_OP_CREATE_QP as u16);
    i.set_qpc(q.as_bytes().try_into().expect("qpc size"));
    i.set_wq_umem_id(s.wq_umem).set_wq_umem_valid(true);
    Ok(i.as_bytes().to_vec())
}

fn path(p: &RcParams, remote: Option<&RcEndpoint>, rmac: [u8; 6]) -> Result<ads, VerbsError> {
    let mut a = ads::new_zeroed();
    a.set_pkey_index(0).set_vhca_port_num(p.port);
    if let Some(r) = remote {
        fit(a.set_ack_timeout(p.timeout), "ack_timeout")?;
        match p.link {
            LinkLayer::Infiniband => {
                a.set_rlid(r.lid);
            }
            LinkLayer::Ethernet => {
                a.set_grh(true).set_rgid_rip(&r.gid).set_src_addr_index(p.sgid_index).set_hop_limit(1);
                a.set_rmac_47_32(u16::from_be_bytes([rmac[0], rmac[1]]))
                    .set_rmac_31_0(u32::from_be_bytes([rmac[2], rmac[3], rmac[4], rmac[5]]));
            }
        }
    }
    Ok(a)
}

fn log2_ceil(v: u8) -> u8 {
    (u32::from(v.max(1)).next_power_of_two().trailing_zeros()) as u8
}

/// `rst2init_qp_in`: remote read, write and atomics on, 8-byte atomics
/// (`atomic_mode` 3, as NVSHMEM sets), the port.
pub fn rst2init_qp_in(qpn: u32, p: &RcParams) -> Result<Vec<u8>, VerbsError> {
    let mut q = qpc::new_zeroed();
    q.set_rre(true).set_rwe(true).set_rae(true);
    fit(q.set_atomic_mode(3), "atomic_mode")?;
    fit(q.set_pm_state(MLX5_QPC_PM_STATE_MIGRATED as u8), "pm_state")?;
    q.set_primary_address_path(path(p, None, [0; 6])?.as_bytes().try_into().expect("ads size"));
    let mut i = rst2init_qp_in::new_zeroed();
    i.set_opcode(MLX5_CMD_OP_RST2INIT_QP as u16);
    fit(i.set_qpn(qpn), "qpn")?;
    i.set_qpc(q.as_bytes().try_into().expect("qpc size"));
    Ok(i.as_bytes().to_vec())
}

/// `init2rtr_qp_in`: MTU, the remote QPN and PSN, responder depth, RNR
/// timer, the address path. RoCE needs the next hop's MAC (`rmac`), which
/// verbs resolves itself and devx does not: the caller supplies it.
pub fn init2rtr_qp_in(qpn: u32, p: &RcParams, r: &RcEndpoint, rmac: [u8; 6]) -> Result<Vec<u8>, VerbsError> {
    let mut q = qpc::new_zeroed();
    fit(q.set_mtu(p.mtu as u8), "mtu")?;
    fit(q.set_log_msg_max(30), "log_msg_max")?;
    fit(q.set_remote_qpn(r.qpn), "remote_qpn")?;
    fit(q.set_next_rcv_psn(r.psn & qpc::NEXT_RCV_PSN_MASK), "next_rcv_psn")?;
    fit(q.set_log_rra_max(log2_ceil(p.rd_atomic)), "log_rra_max")?;
    fit(q.set_min_rnr_nak(p.min_rnr_timer), "min_rnr_nak")?;
    q.set_primary_address_path(path(p, Some(r), rmac)?.as_bytes().try_into().expect("ads size"));
    let mut i = init2rtr_qp_in::new_zeroed();
    i.set_opcode(MLX5_CMD_OP_INIT2RTR_QP as u16);
    fit(i.set_qpn(qpn), "qpn")?;
    i.set_qpc(q.as_bytes().try_into().expect("qpc size"));
    Ok(i.as_bytes().to_vec())
}

/// `rtr2rts_qp_in`: retries, our first PSN, initiator depth, ACK timeout.
pub fn rtr2rts_qp_in(qpn: u32, p: &RcParams, psn: u32) -> Result<Vec<u8>, VerbsError> {
    let mut q = qpc::new_zeroed();
    fit(q.set_retry_count(p.retry_cnt), "retry_count")?;
    fit(q.set_rnr_retry(p.rnr_retry), "rnr_retry")?;
    fit(q.set_next_send_psn(psn & qpc::NEXT_SEND_PSN_MASK), "next_send_psn")?;
    fit(q.set_log_sra_max(log2_ceil(p.rd_atomic)), "log_sra_max")?;
    let mut a = ads::new_zeroed();
    fit(a.set_ack_timeout(p.timeout), "ack_timeout")?;
    a.set_vhca_port_num(p.port);
    q.set_primary_address_path(a.as_bytes().try_into().expect("ads size"));
    let mut i = rtr2rts_qp_in::new_zeroed();
    i.set_opcode(MLX5_CMD_OP_RTR2RTS_QP as u16);
    fit(i.set_qpn(qpn), "qpn")?;
    i.set_qpc(q.as_bytes().try_into().expect("qpc size"));
    Ok(i.as_bytes().to_vec())
}

/// `(status, syndrome)` of any command output (every `*_out` starts with
/// `status[8]`, `syndrome[32]` at bit 0x20).
pub fn out_status(out: &[u8]) -> (u8, u32) {
    match rst2init_qp_out::read_from_prefix(out) {
        Ok((o, _)) => (o.status(), o.syndrome()),
        Err(_) => (0xff, 0),
    }
}

/// The object number a create command returned (`cqn`, `qpn` at bit 0x48).
pub fn created_id(out: &[u8]) -> u32 {
    create_qp_out::read_from_prefix(out).map(|(o, _)| o.qpn()).unwrap_or(0)
}

/// Where a devx channel's queues live in GPU memory: three UMEMs, as
/// NVSHMEM's IBGDA transport lays them out (ibgda.cpp): the CQ ring, the SQ
/// ring, and one page holding both doorbell records (each on its own
/// 64-byte line). Rings are whole 4 KiB pages (`log_page_size` 0, page
/// offset 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuQueuePlan {
    /// log2 of SQ WQEBBs.
    pub log_sq: u8,
    /// log2 of CQ entries.
    pub log_cq: u8,
    /// Bytes of the SQ UMEM.
    pub sq_bytes: usize,
    /// Bytes of the CQ UMEM.
    pub cq_bytes: usize,
    /// Bytes of the doorbell-record UMEM.
    pub dbr_bytes: usize,
    /// Offset of the QP's doorbell record in it.
    pub qp_dbr_off: u64,
    /// Offset of the CQ's doorbell record in it.
    pub cq_dbr_off: u64,
}

/// Plan the GPU-memory queues of one channel.
pub fn plan(sq_wqebbs: u32, ncqe: u32) -> Result<GpuQueuePlan, VerbsError> {
    let pow2 = |what: &str, n: u32, max: u32| {
        if n.is_power_of_two() && n.trailing_zeros() <= max {
            Ok(n.trailing_zeros() as u8)
        } else {
            Err(VerbsError::Queue(format!("{what} {n}: a power of two up to 2^{max}")))
        }
    };
    let log_sq = pow2("SQ WQEBBs", sq_wqebbs, 15)?;
    let log_cq = pow2("CQ entries", ncqe, 22)?;
    let page = |b: usize| b.div_ceil(4096) * 4096;
    Ok(GpuQueuePlan {
        log_sq,
        log_cq,
        sq_bytes: page(sq_wqebbs as usize * MLX5_SEND_WQE_BB as usize),
        cq_bytes: page(ncqe as usize * MLX5_CQE_SIZE as usize),
        dbr_bytes: 4096,
        qp_dbr_off: 0,
        cq_dbr_off: 64,
    })
}

/// What a fresh CQ ring must hold before CREATE_CQ: every CQE's `op_own`
/// INVALID with owner 0 (rdma-core cq.c `mlx5_alloc_cq_buf`), so the device
/// code never mistakes an unwritten slot for a completion.
pub fn cq_init_bytes(p: &GpuQueuePlan) -> Vec<u8> {
    let mut b = vec![0u8; p.cq_bytes];
    for i in 0..(1usize << p.log_cq) {
        b[i * MLX5_CQE_SIZE as usize + MLX5_CQE_SIZE as usize - 1] = MLX5_CQE_INIT_OP_OWN as u8;
    }
    b
}

/// The queues of a devx channel as the GCRB needs them, from the plan and
/// where things ended up: device addresses of the three UMEMs, the UAR
/// register (as the device sees it) and the object numbers.
#[allow(clippy::too_many_arguments)]
pub fn dv_queues(
    p: &GpuQueuePlan,
    qpn: u32,
    cqn: u32,
    sq: u64,
    cq: u64,
    dbr: u64,
    db_reg: u64,
    db_size: u32,
) -> crate::device::DvQueues {
    crate::device::DvQueues {
        qpn,
        sq_buf: sq,
        sq_wqe_cnt: 1 << p.log_sq,
        sq_stride: MLX5_SEND_WQE_BB,
        dbrec: dbr + p.qp_dbr_off,
        bf_reg: db_reg,
        bf_size: db_size,
        cq_buf: cq,
        cqe_cnt: 1 << p.log_cq,
        cqe_size: MLX5_CQE_SIZE,
        cq_dbrec: dbr + p.cq_dbr_off,
        cqn,
    }
}

/// A devx-capable context's objects: UMEMs, a UAR, and CQs/QPs created
/// with the mailboxes above. Needs a NIC (and, in containers, the devx
/// privilege); not run on the development machines.
#[derive(Debug)]
pub struct Devx<'c> {
    c: &'c crate::device::Context,
    objs: Vec<*mut core::ffi::c_void>,
    umems: Vec<*mut crate::ffi::mlx5dv_devx_umem>,
    uars: Vec<*mut crate::ffi::mlx5dv_devx_uar>,
}

/// A UMEM: its id for the PRM commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Umem(pub u32);

impl<'c> Devx<'c> {
    /// Over a context opened with `devx = true`.
    pub fn new(c: &'c crate::device::Context) -> Result<Devx<'c>, VerbsError> {
        if !c.devx {
            return Err(VerbsError::Unsupported(
                "devx needs a context opened with MLX5DV_CONTEXT_FLAGS_DEVX (Context::open(.., devx = true))",
            ));
        }
        Ok(Devx { c, objs: Vec::new(), umems: Vec::new(), uars: Vec::new() })
    }

    fn push_umem(&mut self, u: *mut crate::ffi::mlx5dv_devx_umem, call: &'static str) -> Result<Umem, VerbsError> {
        if u.is_null() {
            return Err(VerbsError::Call { call, err: std::io::Error::last_os_error() });
        }
        self.umems.push(u);
        // SAFETY: a live UMEM rdma-core returned; umem_id is a plain field.
        Ok(Umem(unsafe { (*u).umem_id }))
    }

    /// Register GPU memory exported as a dma-buf as a UMEM (the IBGDA path:
    /// queues and doorbell records in GPU memory).
    pub fn umem_dmabuf(&mut self, fd: i32, offset: u64, len: usize) -> Result<Umem, VerbsError> {
        let f = self
            .c
            .verbs()
            .opt
            .mlx5dv_devx_umem_reg_ex
            .ok_or(VerbsError::Unsupported("mlx5dv_devx_umem_reg_ex (rdma-core 35+)"))?;
        let mut i = crate::ffi::mlx5dv_devx_umem_in {
            addr: offset as *mut core::ffi::c_void,
            size: len,
            access: crate::qp::RC_ACCESS,
            pgsz_bitmap: 1 << 12 | 1 << 16 | 1 << 21,
            comp_mask: crate::ffi::MLX5DV_UMEM_MASK_DMABUF,
            dmabuf_fd: fd,
        };
        // SAFETY: `i` is a complete mlx5dv_devx_umem_in (checked by the oracle);
        // the kernel validates the dma-buf range.
        let u = unsafe { f(self.c.raw(), &mut i) };
        self.push_umem(u, "mlx5dv_devx_umem_reg_ex(DMABUF)")
    }

    /// Register host memory (or, with nvidia_peermem, GPU memory) as a UMEM.
    ///
    /// # Safety
    /// `addr..addr+len` stays mapped while the UMEM lives.
    pub unsafe fn umem(&mut self, addr: *mut u8, len: usize) -> Result<Umem, VerbsError> {
        // SAFETY: the caller keeps the range mapped; the context is live.
        let u =
            unsafe { (self.c.verbs().mlx5.mlx5dv_devx_umem_reg)(self.c.raw(), addr.cast(), len, crate::qp::RC_ACCESS) };
        self.push_umem(u, "mlx5dv_devx_umem_reg")
    }

    /// A UAR for the QP's doorbells: (page id, register address).
    pub fn uar(&mut self) -> Result<(u32, u64), VerbsError> {
        // SAFETY: the context is live; NC first (an 8-byte doorbell register,
        // NVSHMEM's preference), BlueFlame otherwise.
        let mut u =
            unsafe { (self.c.verbs().mlx5.mlx5dv_devx_alloc_uar)(self.c.raw(), crate::ffi::MLX5DV_UAR_ALLOC_TYPE_NC) };
        if u.is_null() {
            // SAFETY: as above.
            u = unsafe {
                (self.c.verbs().mlx5.mlx5dv_devx_alloc_uar)(self.c.raw(), crate::ffi::MLX5DV_UAR_ALLOC_TYPE_BF)
            };
        }
        if u.is_null() {
            return Err(VerbsError::Call {
                call: "mlx5dv_devx_alloc_uar (in a container this needs --privileged or the devx capability)",
                err: std::io::Error::last_os_error(),
            });
        }
        self.uars.push(u);
        // SAFETY: a live UAR rdma-core returned.
        Ok(unsafe { ((*u).page_id, (*u).reg_addr as u64) })
    }

    /// The completion EQ for vector 0.
    pub fn eqn(&self) -> Result<u32, VerbsError> {
        let mut eqn = 0u32;
        // SAFETY: the context is live; `eqn` a valid out-pointer.
        let r = unsafe { (self.c.verbs().mlx5.mlx5dv_devx_query_eqn)(self.c.raw(), 0, &mut eqn) };
        if r != 0 {
            return Err(VerbsError::Call {
                call: "mlx5dv_devx_query_eqn",
                err: std::io::Error::from_raw_os_error(r.abs()),
            });
        }
        Ok(eqn)
    }

    /// Send a create command; returns the new object's number (CQN/QPN).
    pub fn create(&mut self, cmd: &'static str, input: &[u8]) -> Result<u32, VerbsError> {
        let mut out = [0u8; 64];
        // SAFETY: `input` and `out` are live buffers of the lengths given.
        let o = unsafe {
            (self.c.verbs().mlx5.mlx5dv_devx_obj_create)(
                self.c.raw(),
                input.as_ptr().cast(),
                input.len(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        };
        let (status, syndrome) = out_status(&out);
        tracing::debug!(
            cmd,
            in_bytes = input.len(),
            status,
            syndrome = format_args!("{syndrome:#x}"),
            id = created_id(&out),
            "devx mailbox: create"
        );
        if o.is_null() {
            return Err(VerbsError::Devx { cmd, err: std::io::Error::last_os_error(), status, syndrome });
        }
        self.objs.push(o);
        Ok(created_id(&out))
    }

    /// Send a modify command (a QP transition) to the `obj_index`-th object `create` made.
    pub fn modify(&self, cmd: &'static str, obj_index: usize, input: &[u8]) -> Result<(), VerbsError> {
        let o = *self.objs.get(obj_index).ok_or(VerbsError::Unsupported("no such devx object"))?;
        let mut out = [0u8; 64];
        // SAFETY: a live devx object; buffers of the lengths given.
        let r = unsafe {
            (self.c.verbs().mlx5.mlx5dv_devx_obj_modify)(
                o,
                input.as_ptr().cast(),
                input.len(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        };
        let (status, syndrome) = out_status(&out);
        tracing::debug!(
            cmd,
            obj_index,
            in_bytes = input.len(),
            rc = r,
            status,
            syndrome = format_args!("{syndrome:#x}"),
            "devx mailbox: modify"
        );
        if r != 0 {
            return Err(VerbsError::Devx { cmd, err: std::io::Error::from_raw_os_error(r.abs()), status, syndrome });
        }
        Ok(())
    }
}

impl Drop for Devx<'_> {
    fn drop(&mut self) {
        // SAFETY: every pointer was returned by rdma-core and is released
        // once, objects (QPs after CQs were created, so reversed) first.
        unsafe {
            for o in self.objs.drain(..).rev() {
                (self.c.verbs().mlx5.mlx5dv_devx_obj_destroy)(o);
            }
            for u in self.umems.drain(..) {
                (self.c.verbs().mlx5.mlx5dv_devx_umem_dereg)(u);
            }
            for u in self.uars.drain(..) {
                (self.c.verbs().mlx5.mlx5dv_devx_free_uar)(u);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_cq_carries_the_spec_in_the_right_bits() {
        let s = CqSpec {
            log_cq_size: 7,
            uar_page: 0x123,
            eqn: 9,
            umem: (0x11, 0x2000),
            dbr: (0x12, 0x40),
            collapsed: true,
        };
        let b = create_cq_in(&s).unwrap();
        let i = create_cq_in::read_from_bytes(&b).unwrap();
        assert_eq!(i.opcode(), 0x400);
        let c = cqc::read_from_bytes(i.cq_context()).unwrap();
        assert_eq!(
            (c.log_cq_size(), c.uar_page(), c.c_eqn_or_apu_element(), c.cc(), c.oi(), c.cqe_sz()),
            (7, 0x123, 9, true, true, 0)
        );
        assert_eq!((c.dbr_umem_valid(), c.dbr_umem_id(), c.dbr_addr()), (true, 0x12, 0x40));
        assert_eq!((i.cq_umem_valid(), i.cq_umem_id(), i.cq_umem_offset()), (true, 0x11, 0x2000));
        // Big-endian words: log_cq_size sits in byte 16+12 (cqc at 16, dword 3).
        assert_eq!(b[16 + 12] & 0x1f, 7);
        assert!(create_cq_in(&CqSpec { log_cq_size: 32, ..s }).is_err(), "5-bit field refuses 32");
    }

    #[test]
    fn create_qp_and_transitions_carry_what_rc_needs() {
        let s = QpSpec { pd: 5, uar_page: 0x77, log_sq_size: 6, cqn: (0x400, 0x401), wq_umem: 3, dbr: (4, 0x80) };
        let b = create_qp_in(&s).unwrap();
        let i = create_qp_in::read_from_bytes(&b).unwrap();
        let q = qpc::read_from_bytes(i.qpc()).unwrap();
        assert_eq!((i.opcode(), i.wq_umem_id(), i.wq_umem_valid()), (0x500, 3, true));
        assert_eq!((q.st(), q.pm_state(), q.pd(), q.uar_page(), q.log_sq_size(), q.rq_type()), (0, 3, 5, 0x77, 6, 3));
        assert_eq!((q.cqn_snd(), q.cqn_rcv(), q.dbr_umem_id(), q.dbr_addr()), (0x400, 0x401, 4, 0x80));

        let remote = RcEndpoint { qpn: 0xabcd, lid: 0x12, gid: [7; 16], psn: 0x0100_0042, rkey: 0, addr: 0, len: 0 };
        let p = RcParams::default();
        let b = init2rtr_qp_in(0x99, &p, &remote, [0; 6]).unwrap();
        let i = init2rtr_qp_in::read_from_bytes(&b).unwrap();
        let q = qpc::read_from_bytes(i.qpc()).unwrap();
        let a = ads::read_from_bytes(q.primary_address_path()).unwrap();
        assert_eq!(
            (i.opcode(), i.qpn(), q.remote_qpn(), q.next_rcv_psn(), q.mtu(), q.log_rra_max()),
            (0x503, 0x99, 0xabcd, 0x42, 5, 4)
        );
        assert_eq!((a.rlid(), a.grh(), a.vhca_port_num()), (0x12, false, 1));
        let pr = RcParams { link: LinkLayer::Ethernet, sgid_index: 3, ..p };
        let b = init2rtr_qp_in(0x99, &pr, &remote, [1, 2, 3, 4, 5, 6]).unwrap();
        let q = qpc::read_from_bytes(init2rtr_qp_in::read_from_bytes(&b).unwrap().qpc()).unwrap();
        let a = ads::read_from_bytes(q.primary_address_path()).unwrap();
        assert_eq!(
            (a.grh(), *a.rgid_rip(), a.src_addr_index(), a.hop_limit(), a.rmac_47_32(), a.rmac_31_0()),
            (true, [7; 16], 3, 1, 0x0102, 0x03040506)
        );

        let q =
            qpc::read_from_bytes(rst2init_qp_in::read_from_bytes(&rst2init_qp_in(0x99, &p).unwrap()).unwrap().qpc())
                .unwrap();
        assert_eq!((q.rre(), q.rwe(), q.rae(), q.atomic_mode()), (true, true, true, 3));
        let b = rtr2rts_qp_in(0x99, &p, 0x0200_0007).unwrap();
        let q = qpc::read_from_bytes(rtr2rts_qp_in::read_from_bytes(&b).unwrap().qpc()).unwrap();
        assert_eq!((q.next_send_psn(), q.retry_count(), q.rnr_retry(), q.log_sra_max()), (7, 7, 7, 4));
        assert_eq!(ads::read_from_bytes(q.primary_address_path()).unwrap().ack_timeout(), 14);
    }

    #[test]
    fn gpu_queue_plans_are_whole_pages_and_powers_of_two() {
        let p = plan(64, 256).unwrap();
        assert_eq!((p.log_sq, p.log_cq, p.sq_bytes, p.cq_bytes), (6, 8, 4096, 16384));
        assert_eq!((p.qp_dbr_off, p.cq_dbr_off, p.dbr_bytes), (0, 64, 4096));
        assert_eq!(plan(1024, 64).unwrap().sq_bytes, 65536);
        assert!(plan(48, 64).unwrap_err().to_string().contains("SQ WQEBBs 48"));
        assert!(plan(64, 0).is_err());
        let init = cq_init_bytes(&p);
        assert_eq!(init.len(), 16384);
        assert!((0..256).all(|i| init[i * 64 + 63] == 0xf0 && init[i * 64..i * 64 + 63].iter().all(|b| *b == 0)));
        let d = dv_queues(&p, 0x11, 0x22, 0x1000_0000, 0x2000_0000, 0x3000_0000, 0x7f00_0800, 8);
        assert_eq!(
            (d.sq_wqe_cnt, d.cqe_cnt, d.dbrec, d.cq_dbrec, d.sq_stride, d.cqe_size),
            (64, 256, 0x3000_0000, 0x3000_0040, 64, 64)
        );
    }

    #[test]
    fn outputs_decode_status_syndrome_and_id() {
        let mut o = create_qp_out::new_zeroed();
        o.set_status(0x3).set_syndrome(0x764216);
        o.set_qpn(0x1234).unwrap();
        assert_eq!(out_status(o.as_bytes()), (3, 0x764216));
        assert_eq!(created_id(o.as_bytes()), 0x1234);
        assert_eq!(out_status(&[0; 4]), (0xff, 0));
    }
}
