//! Step 1 of the backend: host-memory queues on any mlx5 NIC through verbs.
//! A context on one port, a PD, memory regions (host-pinned, or GPU memory
//! by dma-buf), and an RC QP with its send CQ whose rings, doorbell record
//! and BlueFlame register come out of `mlx5dv_init_obj` as [`DvQueues`]:
//! the plain addresses the transport puts in the GCRB.
//!
//! Every object is destroyed on drop, children before parents (QP, CQ, MR,
//! PD, context), and every failure carries the call and errno. None of this
//! runs on the development machines (no NIC); the pure parts ([`DvQueues`],
//! the transitions in [`crate::qp`]) are tested there.

use crate::ffi::*;
use crate::qp::{self, LinkLayer, RcEndpoint, RcParams};
use crate::{Verbs, VerbsError};
use core::ffi::{c_int, c_void};
use std::sync::Arc;

pub(crate) fn errno(call: &'static str) -> VerbsError {
    VerbsError::Call { call, err: std::io::Error::last_os_error() }
}

pub(crate) fn rc(call: &'static str, r: c_int) -> Result<(), VerbsError> {
    // verbs calls return an errno value (positive) or -1 with errno set.
    match r {
        0 => Ok(()),
        -1 => Err(errno(call)),
        e => Err(VerbsError::Call { call, err: std::io::Error::from_raw_os_error(e.abs()) }),
    }
}

/// An open mlx5 device, on one port.
#[derive(Debug)]
pub struct Context {
    v: Arc<Verbs>,
    ctx: *mut c_void,
    /// Device name (`mlx5_0`).
    pub name: String,
    /// Port number.
    pub port: u8,
    /// The port's attributes (the compat prefix `ibv_query_port` fills).
    pub port_attr: ibv_port_attr,
    /// IB or RoCE.
    pub link: LinkLayer,
    /// The local GID at `gid_index`.
    pub gid: [u8; 16],
    /// GID table index used for RoCE.
    pub gid_index: u8,
    /// Opened through `mlx5dv_open_device` with devx.
    pub devx: bool,
}

impl Context {
    /// Open device `name` (or the first mlx5 device) on `port`. `devx`:
    /// open with `MLX5DV_CONTEXT_FLAGS_DEVX` (step 2; needs a kernel with
    /// devx and, in containers, the privilege sglang#12533 ran into).
    pub fn open(v: Arc<Verbs>, name: Option<&str>, port: u8, gid_index: u8, devx: bool) -> Result<Context, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: see Verbs::devices; the list is freed below on every path.
        let list = unsafe { (v.ibv.ibv_get_device_list)(&mut n) };
        if list.is_null() {
            return Err(crate::lib_load::list_failed(std::io::Error::last_os_error()));
        }
        let mut chosen = None;
        let mut present = Vec::new();
        for i in 0..n.max(0) as usize {
            // SAFETY: i < n; entries and names valid until the list is freed.
            let (dev, dname, is_mlx5) = unsafe {
                let dev = *list.add(i);
                let nm = std::ffi::CStr::from_ptr((v.ibv.ibv_get_device_name)(dev)).to_string_lossy().into_owned();
                (dev, nm, (v.mlx5.mlx5dv_is_supported)(dev))
            };
            present.push(dname.clone());
            if chosen.is_none() && is_mlx5 && name.is_none_or(|w| w == dname) {
                chosen = Some((dev, dname));
            }
        }
        let ctx = chosen.as_ref().map(|(dev, _)| {
            if devx {
                let mut attr = mlx5dv_context_attr { flags: MLX5DV_CONTEXT_FLAGS_DEVX, comp_mask: 0 };
                // SAFETY: `dev` is from the live list; attr outlives the call.
                unsafe { (v.mlx5.mlx5dv_open_device)(*dev, &mut attr) }
            } else {
                // SAFETY: `dev` is from the live list.
                unsafe { (v.ibv.ibv_open_device)(*dev) }
            }
        });
        let open_err = errno(if devx { "mlx5dv_open_device(DEVX)" } else { "ibv_open_device" });
        // SAFETY: freed once; the context keeps its own device reference.
        unsafe { (v.ibv.ibv_free_device_list)(list) };
        let Some((_, dname)) = chosen else {
            return Err(match name {
                Some(w) => VerbsError::DeviceNotFound {
                    wanted: w.into(),
                    present: if present.is_empty() { "none".into() } else { present.join(", ") },
                },
                None => VerbsError::NoDevice(crate::probe::no_device_reason(std::path::Path::new("/sys"))),
            });
        };
        let ctx = ctx.filter(|c| !c.is_null()).ok_or(open_err)?;
        let mut c = Context {
            v,
            ctx,
            name: dname,
            port,
            port_attr: ibv_port_attr::default(),
            link: LinkLayer::Infiniband,
            gid: [0; 16],
            gid_index,
            devx,
        };
        // SAFETY: ctx is open; port_attr is a full ibv_port_attr, larger than
        // the compat prefix the exported ibv_query_port writes.
        rc("ibv_query_port", unsafe { (c.v.ibv.ibv_query_port)(c.ctx, port, &mut c.port_attr) })?;
        let sysfs_ll = std::fs::read_to_string(format!("/sys/class/infiniband/{}/ports/{port}/link_layer", c.name))
            .unwrap_or_default();
        c.link = if c.port_attr.link_layer == IBV_LINK_LAYER_ETHERNET || sysfs_ll.trim() == "Ethernet" {
            LinkLayer::Ethernet
        } else {
            LinkLayer::Infiniband
        };
        let mut gid = ibv_gid::default();
        // SAFETY: ctx open, gid a valid out pointer.
        rc("ibv_query_gid", unsafe { (c.v.ibv.ibv_query_gid)(c.ctx, port, c_int::from(gid_index), &mut gid) })?;
        c.gid = gid.raw;
        if c.port_attr.state != IBV_PORT_ACTIVE {
            return Err(VerbsError::NoDevice(format!(
                "{} port {port} is not ACTIVE (state {}): check the cable, the subnet manager (IB) or the link (RoCE)",
                c.name, c.port_attr.state
            )));
        }
        Ok(c)
    }

    /// The raw `ibv_context *` (for devx and the transport).
    pub fn raw(&self) -> *mut c_void {
        self.ctx
    }

    /// The loaded library.
    pub fn verbs(&self) -> &Arc<Verbs> {
        &self.v
    }

    /// Connection parameters for this port.
    pub fn rc_params(&self) -> RcParams {
        RcParams { port: self.port, sgid_index: self.gid_index, link: self.link, ..RcParams::default() }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: opened by us, closed once; PDs, MRs and QPs borrow
        // `&Context`, so the borrow checker has dropped them already.
        unsafe { (self.v.ibv.ibv_close_device)(self.ctx) };
    }
}

/// A protection domain.
#[derive(Debug)]
pub struct Pd<'c> {
    c: &'c Context,
    pd: *mut c_void,
}

impl<'c> Pd<'c> {
    /// `ibv_alloc_pd`.
    pub fn alloc(c: &'c Context) -> Result<Pd<'c>, VerbsError> {
        // SAFETY: ctx is open.
        let pd = unsafe { (c.v.ibv.ibv_alloc_pd)(c.ctx) };
        if pd.is_null() { Err(errno("ibv_alloc_pd")) } else { Ok(Pd { c, pd }) }
    }

    /// Register host memory (pinned by the kernel for the MR's life). With
    /// `nvidia_peermem` loaded, a GPU virtual address (from `cuMemAlloc`)
    /// registers the same way: the peer-memory client pins GPU pages.
    ///
    /// # Safety
    /// `addr..addr+len` must stay mapped, and not be freed, while the MR lives.
    pub unsafe fn reg_host(&self, addr: *mut u8, len: usize, access: u32) -> Result<Mr<'_>, VerbsError> {
        // SAFETY: the caller keeps the range mapped; pd is live.
        let mr = unsafe { (self.c.v.ibv.ibv_reg_mr)(self.pd, addr.cast(), len, access as c_int) };
        if mr.is_null() {
            let err = std::io::Error::last_os_error();
            // ENOMEM here is nearly always RLIMIT_MEMLOCK: the pages are pinned.
            let call = if err.raw_os_error() == Some(12) {
                "ibv_reg_mr (raise the memlock limit: ulimit -l unlimited)"
            } else {
                "ibv_reg_mr"
            };
            return Err(VerbsError::Call { call, err });
        }
        Ok(Mr { c: self.c, mr })
    }

    /// Register GPU memory exported as a dma-buf (`cuMemGetHandleForAddressRange`
    /// with `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`): `offset` into the dma-buf,
    /// `iova` the address the WQEs will name (the GPU virtual address).
    pub fn reg_dmabuf(&self, fd: i32, offset: u64, len: usize, iova: u64, access: u32) -> Result<Mr<'_>, VerbsError> {
        let f = self.c.v.opt.ibv_reg_dmabuf_mr.ok_or(VerbsError::Unsupported(
            "ibv_reg_dmabuf_mr (rdma-core 34+): register GPU memory through nvidia_peermem and reg_host instead",
        ))?;
        // SAFETY: the kernel validates fd/offset/len against the dma-buf; pd is live.
        let mr = unsafe { f(self.pd, offset, len, iova, fd, access as c_int) };
        if mr.is_null() { Err(errno("ibv_reg_dmabuf_mr")) } else { Ok(Mr { c: self.c, mr }) }
    }

    /// The raw `ibv_pd *`.
    pub fn raw(&self) -> *mut c_void {
        self.pd
    }
}

impl Drop for Pd<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by us; its MRs and QPs borrow it and are gone.
        unsafe { (self.c.v.ibv.ibv_dealloc_pd)(self.pd) };
    }
}

/// A registered memory region.
#[derive(Debug)]
pub struct Mr<'c> {
    c: &'c Context,
    mr: *mut ibv_mr,
}

impl Mr<'_> {
    /// (lkey, rkey).
    pub fn keys(&self) -> (u32, u32) {
        // SAFETY: a live ibv_mr returned by rdma-core; lkey/rkey are plain fields.
        unsafe { ((*self.mr).lkey, (*self.mr).rkey) }
    }
}

impl Drop for Mr<'_> {
    fn drop(&mut self) {
        // SAFETY: registered by us, deregistered once.
        unsafe { (self.c.v.ibv.ibv_dereg_mr)(self.mr) };
    }
}

/// What the device code needs of a QP and its send CQ, as plain addresses
/// (host virtual addresses; the transport maps them for a GPU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DvQueues {
    /// QP number.
    pub qpn: u32,
    /// `mlx5dv_qp.sq.buf`.
    pub sq_buf: u64,
    /// `mlx5dv_qp.sq.wqe_cnt` (WQEBBs).
    pub sq_wqe_cnt: u32,
    /// `mlx5dv_qp.sq.stride`.
    pub sq_stride: u32,
    /// `mlx5dv_qp.dbrec`: the record's first word (`[MLX5_RCV_DBR]`).
    pub dbrec: u64,
    /// `mlx5dv_qp.bf.reg`: the doorbell/BlueFlame register.
    pub bf_reg: u64,
    /// `mlx5dv_qp.bf.size`.
    pub bf_size: u32,
    /// `mlx5dv_cq.buf`.
    pub cq_buf: u64,
    /// `mlx5dv_cq.cqe_cnt`.
    pub cqe_cnt: u32,
    /// `mlx5dv_cq.cqe_size`.
    pub cqe_size: u32,
    /// `mlx5dv_cq.dbrec`.
    pub cq_dbrec: u64,
    /// `mlx5dv_cq.cqn`.
    pub cqn: u32,
}

impl DvQueues {
    /// From what `mlx5dv_init_obj` filled.
    pub fn from_dv(qpn: u32, q: &mlx5dv_qp, c: &mlx5dv_cq) -> DvQueues {
        DvQueues {
            qpn,
            sq_buf: q.sq.buf as u64,
            sq_wqe_cnt: q.sq.wqe_cnt,
            sq_stride: q.sq.stride,
            dbrec: q.dbrec as u64,
            bf_reg: q.bf.reg as u64,
            bf_size: q.bf.size,
            cq_buf: c.buf as u64,
            cqe_cnt: c.cqe_cnt,
            cqe_size: c.cqe_size,
            cq_dbrec: c.dbrec as u64,
            cqn: c.cqn,
        }
    }
}

/// An RC QP with its own send CQ (and a tiny receive CQ: marrow's data path
/// posts no receives).
#[derive(Debug)]
pub struct RcQp<'c> {
    c: &'c Context,
    qp: *mut c_void,
    cq: *mut c_void,
    rcq: *mut c_void,
    /// The queues for the GCRB.
    pub dv: DvQueues,
}

impl<'c> RcQp<'c> {
    /// Create the CQ (`ncqe` entries) and an RC QP with room for `sq_wr`
    /// send work requests. mlx5 sizes the ring in WQEBBs, rounded up to a
    /// power of two; `dv.sq_wqe_cnt` says what it made.
    pub fn create(c: &'c Context, pd: &Pd<'c>, sq_wr: u32, ncqe: u32) -> Result<RcQp<'c>, VerbsError> {
        // SAFETY: ctx is live; the CQ is destroyed in Drop or on the error path.
        let cq =
            unsafe { (c.v.ibv.ibv_create_cq)(c.ctx, ncqe as c_int, core::ptr::null_mut(), core::ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(errno("ibv_create_cq"));
        }
        // SAFETY: as above.
        let rcq = unsafe { (c.v.ibv.ibv_create_cq)(c.ctx, 1, core::ptr::null_mut(), core::ptr::null_mut(), 0) };
        if rcq.is_null() {
            let e = errno("ibv_create_cq (receive)");
            // SAFETY: created above, destroyed once.
            unsafe { (c.v.ibv.ibv_destroy_cq)(cq) };
            return Err(e);
        }
        let mut init = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: cq,
            recv_cq: rcq,
            srq: core::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: sq_wr,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 28,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: init is a complete ibv_qp_init_attr (checked by the oracle).
        let qp = unsafe { (c.v.ibv.ibv_create_qp)(pd.raw(), &mut init) };
        let mut me = RcQp { c, qp, cq, rcq, dv: DvQueues::from_dv(0, &mlx5dv_qp::default(), &mlx5dv_cq::default()) };
        if qp.is_null() {
            me.qp = core::ptr::null_mut();
            return Err(errno("ibv_create_qp"));
        }
        let mut dq = mlx5dv_qp::default();
        let mut dc = mlx5dv_cq::default();
        let null = mlx5dv_obj_pair { r#in: core::ptr::null_mut(), out: core::ptr::null_mut() };
        let mut obj = mlx5dv_obj {
            qp: mlx5dv_obj_pair { r#in: qp, out: (&mut dq as *mut mlx5dv_qp).cast() },
            cq: mlx5dv_obj_pair { r#in: cq, out: (&mut dc as *mut mlx5dv_cq).cast() },
            srq: null,
            rwq: null,
            dm: null,
            ah: null,
            pd: null,
        };
        // SAFETY: obj names live verbs objects and out structs of the right type.
        rc("mlx5dv_init_obj", unsafe { (c.v.mlx5.mlx5dv_init_obj)(&mut obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ) })?;
        // SAFETY: qp is a live ibv_qp; qp_num's offset is checked by the oracle.
        let qpn = unsafe { (*(qp as *const ibv_qp_prefix)).qp_num };
        me.dv = DvQueues::from_dv(qpn, &dq, &dc);
        Ok(me)
    }

    /// `ibv_modify_qp` with one attribute set from [`crate::qp`].
    pub fn modify(&self, (mut attr, mask): (ibv_qp_attr, u32)) -> Result<(), VerbsError> {
        let to = attr.qp_state;
        // SAFETY: qp live; attr a complete ibv_qp_attr.
        let r = rc("ibv_modify_qp", unsafe { (self.c.v.ibv.ibv_modify_qp)(self.qp, &mut attr, mask as c_int) });
        tracing::debug!(
            qpn = format_args!("{:#x}", self.dv.qpn),
            to,
            mask = format_args!("{mask:#x}"),
            ok = r.is_ok(),
            "ibv_modify_qp"
        );
        r
    }

    /// RESET→INIT→RTR→RTS against `remote`, our first PSN `psn`.
    pub fn connect(&self, p: &RcParams, psn: u32, remote: &RcEndpoint) -> Result<(), VerbsError> {
        self.modify(qp::reset_to_init(p))?;
        self.modify(qp::init_to_rtr(p, remote))?;
        self.modify(qp::rtr_to_rts(p, psn))
    }
}

impl Drop for RcQp<'_> {
    fn drop(&mut self) {
        // SAFETY: objects created in `create`, destroyed once, QP before its CQs.
        unsafe {
            if !self.qp.is_null() {
                (self.c.v.ibv.ibv_destroy_qp)(self.qp);
            }
            (self.c.v.ibv.ibv_destroy_cq)(self.rcq);
            (self.c.v.ibv.ibv_destroy_cq)(self.cq);
        }
    }
}
