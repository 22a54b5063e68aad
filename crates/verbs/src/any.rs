//! An RC endpoint on an RDMA device of any provider (rxe, EFA, eRDMA, mlx5
//! through plain verbs): what the verbs proxy posts on. It follows rdma-core's
//! `libibverbs/examples/rc_pingpong.c`: open the device, query the port and
//! the GID, a PD, memory regions, one CQ for both queues, an RC QP taken
//! through RESET→INIT→RTR→RTS ([`crate::qp`]) with the peer's [`RcEndpoint`]
//! from the bootstrap; then `ibv_post_send`, `ibv_post_recv` and
//! `ibv_poll_cq`, which `verbs.h` defines inline as calls through the
//! context's provider ops (`ctx->ops.post_send` ...), called the same way
//! here at the offsets `ffi` declares.
//!
//! Only libibverbs is loaded ([`Ibverbs`]): no libmlx5, no mlx5dv. The GID
//! index is the port's RoCE v2 GID with an IPv4 address when none is given
//! ([`crate::gids::recommend`], from sysfs).
//!
//! Every object is destroyed on drop, QP before CQ, MRs, PD, context.

use crate::VerbsError;
use crate::device::{errno, rc};
use crate::ffi::*;
use crate::lib_load::Ibverbs;
use crate::qp::{self, LinkLayer, RcEndpoint, RcParams};
use core::ffi::{c_int, c_void};
use std::sync::Arc;

type PollCq = unsafe extern "C" fn(*mut c_void, c_int, *mut ibv_wc) -> c_int;
type PostSend = unsafe extern "C" fn(*mut c_void, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
type PostRecv = unsafe extern "C" fn(*mut c_void, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;

/// The names of the RDMA devices libibverbs lists, of every provider.
pub fn device_names(v: &Ibverbs) -> Result<Vec<String>, VerbsError> {
    let mut n: c_int = 0;
    // SAFETY: returns a NULL-terminated array of `n` devices or NULL with errno.
    let list = unsafe { (v.ibv.ibv_get_device_list)(&mut n) };
    if list.is_null() {
        return Err(crate::lib_load::list_failed(std::io::Error::last_os_error()));
    }
    let mut out = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: i < n; each entry and its name live until the list is freed.
        out.push(unsafe {
            std::ffi::CStr::from_ptr((v.ibv.ibv_get_device_name)(*list.add(i))).to_string_lossy().into_owned()
        });
    }
    // SAFETY: from ibv_get_device_list, freed once.
    unsafe { (v.ibv.ibv_free_device_list)(list) };
    Ok(out)
}

/// One RC QP on one port of a device of any provider, with its PD, CQ and MRs.
#[derive(Debug)]
pub struct Endpoint {
    v: Arc<Ibverbs>,
    ctx: *mut c_void,
    pd: *mut c_void,
    cq: *mut c_void,
    qp: *mut c_void,
    mrs: Vec<*mut ibv_mr>,
    poll_cq: PollCq,
    post_send: PostSend,
    post_recv: PostRecv,
    /// Device name (`rxe0`).
    pub name: String,
    /// Port.
    pub port: u8,
    /// The port's attributes.
    pub port_attr: ibv_port_attr,
    /// IB or RoCE.
    pub link: LinkLayer,
    /// GID table index in use.
    pub gid_index: u8,
    /// Why that index.
    pub gid_reason: String,
    /// The GID at that index.
    pub gid: [u8; 16],
    /// The QP's number.
    pub qpn: u32,
}

// SAFETY: verbs objects may be used from any thread (rdma-core's providers
// lock their queues); an `Endpoint` is used by one thread at a time (`&mut`
// for posting and polling), and its pointers are owned, not shared.
unsafe impl Send for Endpoint {}

impl Endpoint {
    /// Open device `name` (the first listed when `None`) on `port`, with
    /// GID index `gid_index` (the port's RoCE v2 GID when `None`), and
    /// create a PD, a CQ and an RC QP for `send_wr` sends and `recv_wr`
    /// receives.
    pub fn open(
        v: Arc<Ibverbs>,
        name: Option<&str>,
        port: u8,
        gid_index: Option<u8>,
        send_wr: u32,
        recv_wr: u32,
    ) -> Result<Endpoint, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: as in `device_names`; the list is freed below on every path.
        let list = unsafe { (v.ibv.ibv_get_device_list)(&mut n) };
        if list.is_null() {
            return Err(crate::lib_load::list_failed(std::io::Error::last_os_error()));
        }
        let mut present = Vec::new();
        let mut ctx = core::ptr::null_mut();
        let mut chosen = None;
        for i in 0..n.max(0) as usize {
            // SAFETY: i < n; entries and names valid until the list is freed.
            let (dev, dname) = unsafe {
                let dev = *list.add(i);
                (dev, std::ffi::CStr::from_ptr((v.ibv.ibv_get_device_name)(dev)).to_string_lossy().into_owned())
            };
            present.push(dname.clone());
            if chosen.is_none() && name.is_none_or(|w| w == dname) {
                // SAFETY: `dev` is from the live list.
                ctx = unsafe { (v.ibv.ibv_open_device)(dev) };
                chosen = Some(dname);
            }
        }
        let open_err = errno("ibv_open_device");
        // SAFETY: freed once; an open context keeps its own device reference.
        unsafe { (v.ibv.ibv_free_device_list)(list) };
        let Some(dname) = chosen else {
            return Err(match name {
                Some(w) => VerbsError::DeviceNotFound {
                    wanted: w.into(),
                    present: if present.is_empty() { "none".into() } else { present.join(", ") },
                },
                None => VerbsError::NoDevice(crate::probe::no_device_reason(std::path::Path::new("/sys"))),
            });
        };
        if ctx.is_null() {
            return Err(open_err);
        }
        // SAFETY: `ctx` is a live `struct ibv_context`; the ops table sits at
        // the offsets `ffi` declares (checked against verbs.h), and a
        // provider fills these three entries (rdma-core's `verbs_set_ops`).
        let (poll_cq, post_send, post_recv) = unsafe {
            let base = ctx as *const u8;
            (
                *(base.add(IBV_CONTEXT_OPS_POLL_CQ) as *const Option<PollCq>),
                *(base.add(IBV_CONTEXT_OPS_POST_SEND) as *const Option<PostSend>),
                *(base.add(IBV_CONTEXT_OPS_POST_RECV) as *const Option<PostRecv>),
            )
        };
        let (Some(poll_cq), Some(post_send), Some(post_recv)) = (poll_cq, post_send, post_recv) else {
            // SAFETY: opened above, closed once.
            unsafe { (v.ibv.ibv_close_device)(ctx) };
            return Err(VerbsError::Unsupported("the provider has no poll_cq/post_send/post_recv in its ops"));
        };
        let mut e = Endpoint {
            v,
            ctx,
            pd: core::ptr::null_mut(),
            cq: core::ptr::null_mut(),
            qp: core::ptr::null_mut(),
            mrs: Vec::new(),
            poll_cq,
            post_send,
            post_recv,
            name: dname,
            port,
            port_attr: ibv_port_attr::default(),
            link: LinkLayer::Infiniband,
            gid_index: 0,
            gid_reason: String::new(),
            gid: [0; 16],
            qpn: 0,
        };
        // SAFETY: ctx open; port_attr is a full ibv_port_attr.
        rc("ibv_query_port", unsafe { (e.v.ibv.ibv_query_port)(e.ctx, port, &mut e.port_attr) })?;
        if e.port_attr.state != IBV_PORT_ACTIVE {
            return Err(VerbsError::NoDevice(format!(
                "{} port {port} is not ACTIVE (state {}): check the link (RoCE: is the netdev up?)",
                e.name, e.port_attr.state
            )));
        }
        let sys = crate::gids::read_port(
            &e.name,
            u32::from(port),
            &std::path::Path::new("/sys/class/infiniband").join(&e.name).join(format!("ports/{port}")),
        );
        e.link = if e.port_attr.link_layer == IBV_LINK_LAYER_ETHERNET || sys.link_layer.as_deref() == Some("Ethernet") {
            LinkLayer::Ethernet
        } else {
            LinkLayer::Infiniband
        };
        (e.gid_index, e.gid_reason) = match gid_index {
            Some(i) => (i, "given".into()),
            None => match sys.recommended {
                Some(i) => (u8::try_from(i).unwrap_or(0), sys.recommended_reason.clone()),
                None if e.link == LinkLayer::Infiniband => (0, "InfiniBand: index 0".into()),
                None => {
                    return Err(VerbsError::NoDevice(format!(
                        "{} port {port}: no GID index to use ({})",
                        e.name, sys.recommended_reason
                    )));
                }
            },
        };
        let mut gid = ibv_gid::default();
        // SAFETY: ctx open, gid a valid out pointer.
        rc("ibv_query_gid", unsafe { (e.v.ibv.ibv_query_gid)(e.ctx, port, c_int::from(e.gid_index), &mut gid) })?;
        e.gid = gid.raw;
        // SAFETY: ctx is open.
        e.pd = unsafe { (e.v.ibv.ibv_alloc_pd)(e.ctx) };
        if e.pd.is_null() {
            return Err(errno("ibv_alloc_pd"));
        }
        let ncqe = (send_wr + recv_wr + 1) as c_int;
        // SAFETY: ctx is live; the CQ is destroyed in Drop.
        e.cq = unsafe { (e.v.ibv.ibv_create_cq)(e.ctx, ncqe, core::ptr::null_mut(), core::ptr::null_mut(), 0) };
        if e.cq.is_null() {
            return Err(errno("ibv_create_cq"));
        }
        let mut init = ibv_qp_init_attr {
            qp_context: core::ptr::null_mut(),
            send_cq: e.cq,
            recv_cq: e.cq,
            srq: core::ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: send_wr,
                max_recv_wr: recv_wr,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: init is a complete ibv_qp_init_attr (checked by the oracle).
        e.qp = unsafe { (e.v.ibv.ibv_create_qp)(e.pd, &mut init) };
        if e.qp.is_null() {
            return Err(errno("ibv_create_qp"));
        }
        // SAFETY: qp is a live ibv_qp; qp_num's offset is checked by the oracle.
        e.qpn = unsafe { (*(e.qp as *const ibv_qp_prefix)).qp_num };
        Ok(e)
    }

    /// Register `len` bytes at `addr`; returns (lkey, rkey). The MR lives
    /// as long as the endpoint.
    ///
    /// # Safety
    /// `addr..addr+len` must stay mapped while the endpoint lives.
    pub unsafe fn reg(&mut self, addr: *mut u8, len: usize, access: u32) -> Result<(u32, u32), VerbsError> {
        // SAFETY: the caller keeps the range mapped; pd is live.
        let mr = unsafe { (self.v.ibv.ibv_reg_mr)(self.pd, addr.cast(), len, access as c_int) };
        if mr.is_null() {
            let err = std::io::Error::last_os_error();
            let call = if err.raw_os_error() == Some(12) {
                "ibv_reg_mr (raise the memlock limit: ulimit -l unlimited)"
            } else {
                "ibv_reg_mr"
            };
            return Err(VerbsError::Call { call, err });
        }
        self.mrs.push(mr);
        // SAFETY: a live ibv_mr; lkey/rkey are plain fields.
        Ok(unsafe { ((*mr).lkey, (*mr).rkey) })
    }

    /// Register GPU memory exported as a dma-buf (`fd`, `offset` into it)
    /// at the address `iova` the work requests will name; (lkey, rkey).
    /// Refused by name where this rdma-core or the provider lacks it.
    pub fn reg_dmabuf(
        &mut self,
        fd: i32,
        offset: u64,
        len: usize,
        iova: u64,
        access: u32,
    ) -> Result<(u32, u32), VerbsError> {
        let f = self.v.reg_dmabuf.ok_or(VerbsError::Unsupported("ibv_reg_dmabuf_mr (rdma-core 34+)"))?;
        // SAFETY: the kernel validates fd/offset/len against the dma-buf; pd is live.
        let mr = unsafe { f(self.pd, offset, len, iova, fd, access as c_int) };
        if mr.is_null() {
            return Err(errno("ibv_reg_dmabuf_mr"));
        }
        self.mrs.push(mr);
        // SAFETY: a live ibv_mr.
        Ok(unsafe { ((*mr).lkey, (*mr).rkey) })
    }

    /// What the peer needs to reach this QP and the buffer `(addr, len, rkey)`.
    pub fn endpoint(&self, psn: u32, addr: u64, len: u64, rkey: u32) -> RcEndpoint {
        RcEndpoint { qpn: self.qpn, lid: self.port_attr.lid, gid: self.gid, psn, rkey, addr, len }
    }

    /// The connection parameters: this port, GID index and link, the
    /// port's active MTU, the ACK timeout and retry count given.
    pub fn params(&self, timeout: u8, retry_cnt: u8) -> RcParams {
        RcParams {
            port: self.port,
            sgid_index: self.gid_index,
            link: self.link,
            mtu: self.port_attr.active_mtu,
            timeout,
            retry_cnt,
            ..RcParams::default()
        }
    }

    fn modify(&self, (mut attr, mask): (ibv_qp_attr, u32)) -> Result<(), VerbsError> {
        // SAFETY: qp live; attr a complete ibv_qp_attr.
        rc("ibv_modify_qp", unsafe { (self.v.ibv.ibv_modify_qp)(self.qp, &mut attr, mask as c_int) })
    }

    /// RESET→INIT→RTR→RTS against `remote`, our first PSN `psn`.
    pub fn connect(&self, p: &RcParams, psn: u32, remote: &RcEndpoint) -> Result<(), VerbsError> {
        self.modify(qp::reset_to_init(p))?;
        self.modify(qp::init_to_rtr(p, remote))?;
        self.modify(qp::rtr_to_rts(p, psn))
    }

    /// `ibv_post_send` of one request (its `next` must be null).
    pub fn post_send(&mut self, wr: &mut ibv_send_wr) -> Result<(), VerbsError> {
        let mut bad = core::ptr::null_mut();
        // SAFETY: qp live; `wr` and its SGE list are valid for the call
        // (the provider copies them into its queue).
        rc("ibv_post_send", unsafe { (self.post_send)(self.qp, wr, &mut bad) })
    }

    /// `ibv_post_recv` of one request.
    pub fn post_recv(&mut self, wr: &mut ibv_recv_wr) -> Result<(), VerbsError> {
        let mut bad = core::ptr::null_mut();
        // SAFETY: as in `post_send`.
        rc("ibv_post_recv", unsafe { (self.post_recv)(self.qp, wr, &mut bad) })
    }

    /// `ibv_poll_cq` into `wc`; the completions written.
    pub fn poll(&mut self, wc: &mut [ibv_wc]) -> Result<usize, VerbsError> {
        // SAFETY: cq live; `wc` has room for the count passed.
        let n = unsafe { (self.poll_cq)(self.cq, wc.len() as c_int, wc.as_mut_ptr()) };
        if n < 0 {
            return Err(VerbsError::Call { call: "ibv_poll_cq", err: std::io::Error::from_raw_os_error(-n) });
        }
        Ok(n as usize)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: every object was created by `open`/`reg`, is destroyed
        // once, children before parents.
        unsafe {
            if !self.qp.is_null() {
                (self.v.ibv.ibv_destroy_qp)(self.qp);
            }
            if !self.cq.is_null() {
                (self.v.ibv.ibv_destroy_cq)(self.cq);
            }
            for &mr in &self.mrs {
                (self.v.ibv.ibv_dereg_mr)(mr);
            }
            if !self.pd.is_null() {
                (self.v.ibv.ibv_dealloc_pd)(self.pd);
            }
            (self.v.ibv.ibv_close_device)(self.ctx);
        }
    }
}
