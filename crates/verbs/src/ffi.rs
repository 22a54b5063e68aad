//! The C structs and constants of rdma-core that marrow touches, declared by
//! hand from `<infiniband/verbs.h>` and `<infiniband/mlx5dv.h>` (Debian
//! `libibverbs-dev`, rdma-core 44). Hand-declared FFI is only as good as its
//! check: `tests/oracle/tests/verbs_abi.rs` compares every size and offset
//! below with what gcc computes from the real headers, and every constant
//! with the header's value ([`STRUCTS`] and [`CONSTS`] list them).
//!
//! Only what a host-memory RC channel needs is here. Opaque objects
//! (`ibv_context`, `ibv_pd`, `ibv_cq`, `ibv_device`, devx objects) stay
//! opaque pointers, except for the leading fields marrow reads: `ibv_qp`'s
//! `qp_num` and `ibv_mr`'s keys.

#![allow(non_camel_case_types)] // the C names, so one grep crosses Rust and the headers

use core::ffi::{c_int, c_uint, c_void};

/// `union ibv_gid`: 16 raw bytes (subnet prefix then interface id, big
/// endian). 8-byte aligned: the union's other member is two `__be64`s, which
/// makes `ibv_qp_attr` 144 bytes, not 140 (the oracle caught this).
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid {
    /// `raw[16]`.
    pub raw: [u8; 16],
}

/// `struct ibv_global_route` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_global_route {
    /// Destination GID.
    pub dgid: ibv_gid,
    /// Flow label.
    pub flow_label: u32,
    /// Index of the local GID in the port's table.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_ah_attr {
    /// Global route header (RoCE always, IB across subnets).
    pub grh: ibv_global_route,
    /// Destination LID (IB).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate.
    pub static_rate: u8,
    /// Nonzero: `grh` is valid.
    pub is_global: u8,
    /// Local port.
    pub port_num: u8,
}

/// `struct ibv_qp_cap` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_qp_cap {
    /// Send queue depth in work requests.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Scatter/gather entries per send WR.
    pub max_send_sge: u32,
    /// Scatter/gather entries per receive WR.
    pub max_recv_sge: u32,
    /// Inline bytes per send WR.
    pub max_inline_data: u32,
}

/// `struct ibv_qp_attr` (verbs.h): what `ibv_modify_qp` reads, selected by
/// an `IBV_QP_*` mask.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_qp_attr {
    /// `enum ibv_qp_state`.
    pub qp_state: c_uint,
    /// `enum ibv_qp_state`.
    pub cur_qp_state: c_uint,
    /// `enum ibv_mtu`.
    pub path_mtu: c_uint,
    /// `enum ibv_mig_state`.
    pub path_mig_state: c_uint,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// Remote QPN.
    pub dest_qp_num: u32,
    /// `IBV_ACCESS_*` remote rights.
    pub qp_access_flags: c_uint,
    /// Capabilities.
    pub cap: ibv_qp_cap,
    /// Primary path.
    pub ah_attr: ibv_ah_attr,
    /// Alternate path.
    pub alt_ah_attr: ibv_ah_attr,
    /// P_Key index.
    pub pkey_index: u16,
    /// Alternate P_Key index.
    pub alt_pkey_index: u16,
    /// SQD async event.
    pub en_sqd_async_notify: u8,
    /// Read only.
    pub sq_draining: u8,
    /// Outstanding RDMA reads/atomics as initiator.
    pub max_rd_atomic: u8,
    /// ... as responder.
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Local port.
    pub port_num: u8,
    /// Local ACK timeout code (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries (7: infinite).
    pub rnr_retry: u8,
    /// Alternate port.
    pub alt_port_num: u8,
    /// Alternate timeout.
    pub alt_timeout: u8,
    /// Rate limit (kbps).
    pub rate_limit: u32,
}

/// `struct ibv_qp_init_attr` (verbs.h).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_qp_init_attr {
    /// User context.
    pub qp_context: *mut c_void,
    /// `struct ibv_cq *`.
    pub send_cq: *mut c_void,
    /// `struct ibv_cq *`.
    pub recv_cq: *mut c_void,
    /// `struct ibv_srq *`.
    pub srq: *mut c_void,
    /// Requested capabilities (updated with the actual ones).
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`.
    pub qp_type: c_uint,
    /// Nonzero: every send WR generates a CQE.
    pub sq_sig_all: c_int,
}

/// `struct ibv_port_attr` (verbs.h). The exported `ibv_query_port`
/// (IBVERBS_1.1) fills the compat prefix of it; `verbs.h`'s inline
/// `___ibv_query_port` is not reachable through `dlsym`, so marrow also reads
/// the link layer from sysfs.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_port_attr {
    /// `enum ibv_port_state`.
    pub state: c_uint,
    /// `enum ibv_mtu`.
    pub max_mtu: c_uint,
    /// `enum ibv_mtu`.
    pub active_mtu: c_uint,
    /// GID table length.
    pub gid_tbl_len: c_int,
    /// Capability flags.
    pub port_cap_flags: u32,
    /// Largest message.
    pub max_msg_sz: u32,
    /// Counter.
    pub bad_pkey_cntr: u32,
    /// Counter.
    pub qkey_viol_cntr: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// Base LID (IB).
    pub lid: u16,
    /// SM LID.
    pub sm_lid: u16,
    /// LID mask control.
    pub lmc: u8,
    /// VLs.
    pub max_vl_num: u8,
    /// SM SL.
    pub sm_sl: u8,
    /// Subnet timeout.
    pub subnet_timeout: u8,
    /// Init type reply.
    pub init_type_reply: u8,
    /// Active width.
    pub active_width: u8,
    /// Active speed.
    pub active_speed: u8,
    /// Physical state.
    pub phys_state: u8,
    /// `IBV_LINK_LAYER_*`.
    pub link_layer: u8,
    /// Flags.
    pub flags: u8,
    /// More capability flags.
    pub port_cap_flags2: u16,
}

/// The leading fields of `struct ibv_qp` (verbs.h) up to `qp_num`: marrow
/// only reads the QPN from the object `ibv_create_qp` returns.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp_prefix {
    /// `struct ibv_context *`.
    pub context: *mut c_void,
    /// User context.
    pub qp_context: *mut c_void,
    /// `struct ibv_pd *`.
    pub pd: *mut c_void,
    /// `struct ibv_cq *`.
    pub send_cq: *mut c_void,
    /// `struct ibv_cq *`.
    pub recv_cq: *mut c_void,
    /// `struct ibv_srq *`.
    pub srq: *mut c_void,
    /// Kernel handle.
    pub handle: u32,
    /// The QP number.
    pub qp_num: u32,
    /// `enum ibv_qp_state`.
    pub state: c_uint,
    /// `enum ibv_qp_type`.
    pub qp_type: c_uint,
}

/// `struct ibv_mr` (verbs.h), complete.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_mr {
    /// `struct ibv_context *`.
    pub context: *mut c_void,
    /// `struct ibv_pd *`.
    pub pd: *mut c_void,
    /// Start of the registered range.
    pub addr: *mut c_void,
    /// Bytes registered.
    pub length: usize,
    /// Kernel handle.
    pub handle: u32,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
}

/// The send or receive queue of [`mlx5dv_qp`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_wq {
    /// Ring.
    pub buf: *mut c_void,
    /// Entries (WQEBBs for the SQ).
    pub wqe_cnt: u32,
    /// Bytes per entry (64 for the SQ).
    pub stride: u32,
}

/// The BlueFlame register of [`mlx5dv_qp`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_bf {
    /// The doorbell/BlueFlame register, inside the UAR page.
    pub reg: *mut c_void,
    /// Bytes of BlueFlame buffer (0 when the UAR has none: doorbell only).
    pub size: u32,
}

/// `struct mlx5dv_qp` (mlx5dv.h): what `mlx5dv_init_obj` exposes of a QP.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_qp {
    /// Doorbell record: `dbrec[MLX5_RCV_DBR]`, `dbrec[MLX5_SND_DBR]` (big endian).
    pub dbrec: *mut u32,
    /// Send queue.
    pub sq: mlx5dv_wq,
    /// Receive queue.
    pub rq: mlx5dv_wq,
    /// BlueFlame register.
    pub bf: mlx5dv_bf,
    /// `MLX5DV_QP_MASK_*` of the fields below that are wanted/valid.
    pub comp_mask: u64,
    /// `off_t`.
    pub uar_mmap_offset: i64,
    /// Raw packet QPs.
    pub tirn: u32,
    /// Raw packet QPs.
    pub tisn: u32,
    /// Raw packet QPs.
    pub rqn: u32,
    /// Raw packet QPs.
    pub sqn: u32,
    /// Raw packet QPs.
    pub tir_icm_addr: u64,
}

/// `struct mlx5dv_cq` (mlx5dv.h).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_cq {
    /// Ring.
    pub buf: *mut c_void,
    /// Doorbell record: `[MLX5_CQ_SET_CI]`, `[MLX5_CQ_ARM_DB]`.
    pub dbrec: *mut u32,
    /// Entries.
    pub cqe_cnt: u32,
    /// Bytes per CQE (64 or 128).
    pub cqe_size: u32,
    /// The CQ's UAR (arming; marrow never arms).
    pub cq_uar: *mut c_void,
    /// CQ number.
    pub cqn: u32,
    /// Valid optional fields.
    pub comp_mask: u64,
}

/// All pointers null, all counts zero: what `mlx5dv_init_obj` fills in.
impl Default for mlx5dv_qp {
    fn default() -> Self {
        let w = mlx5dv_wq { buf: core::ptr::null_mut(), wqe_cnt: 0, stride: 0 };
        mlx5dv_qp {
            dbrec: core::ptr::null_mut(),
            sq: w,
            rq: w,
            bf: mlx5dv_bf { reg: core::ptr::null_mut(), size: 0 },
            comp_mask: 0,
            uar_mmap_offset: 0,
            tirn: 0,
            tisn: 0,
            rqn: 0,
            sqn: 0,
            tir_icm_addr: 0,
        }
    }
}

/// All pointers null, all counts zero: what `mlx5dv_init_obj` fills in.
impl Default for mlx5dv_cq {
    fn default() -> Self {
        mlx5dv_cq {
            buf: core::ptr::null_mut(),
            dbrec: core::ptr::null_mut(),
            cqe_cnt: 0,
            cqe_size: 0,
            cq_uar: core::ptr::null_mut(),
            cqn: 0,
            comp_mask: 0,
        }
    }
}

/// One `{in, out}` pair of [`mlx5dv_obj`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_obj_pair {
    /// The verbs object.
    pub r#in: *mut c_void,
    /// The mlx5dv struct to fill.
    pub out: *mut c_void,
}

/// `struct mlx5dv_obj` (mlx5dv.h): `mlx5dv_init_obj`'s argument.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_obj {
    /// `ibv_qp` → `mlx5dv_qp`.
    pub qp: mlx5dv_obj_pair,
    /// `ibv_cq` → `mlx5dv_cq`.
    pub cq: mlx5dv_obj_pair,
    /// `ibv_srq` → `mlx5dv_srq`.
    pub srq: mlx5dv_obj_pair,
    /// `ibv_wq` → `mlx5dv_rwq`.
    pub rwq: mlx5dv_obj_pair,
    /// `ibv_dm` → `mlx5dv_dm`.
    pub dm: mlx5dv_obj_pair,
    /// `ibv_ah` → `mlx5dv_ah`.
    pub ah: mlx5dv_obj_pair,
    /// `ibv_pd` → `mlx5dv_pd`.
    pub pd: mlx5dv_obj_pair,
}

/// `struct mlx5dv_devx_umem` (mlx5dv.h).
#[repr(C)]
#[derive(Debug)]
pub struct mlx5dv_devx_umem {
    /// The UMEM id that `qpc.dbr_umem_id`, `create_qp_in.wq_umem_id` and
    /// `create_cq_in.cq_umem_id` name.
    pub umem_id: u32,
}

/// `struct mlx5dv_devx_umem_in` (mlx5dv.h): `mlx5dv_devx_umem_reg_ex`'s
/// argument; with `MLX5DV_UMEM_MASK_DMABUF` it registers a dma-buf (GPU
/// memory from `cuMemGetHandleForAddressRange`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_devx_umem_in {
    /// Address (the offset into the dma-buf when registering one).
    pub addr: *mut c_void,
    /// Bytes.
    pub size: usize,
    /// `IBV_ACCESS_*`.
    pub access: u32,
    /// Page sizes the caller accepts.
    pub pgsz_bitmap: u64,
    /// `MLX5DV_UMEM_MASK_*`.
    pub comp_mask: u64,
    /// dma-buf file descriptor.
    pub dmabuf_fd: c_int,
}

/// `struct mlx5dv_devx_uar` (mlx5dv.h).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mlx5dv_devx_uar {
    /// The doorbell register.
    pub reg_addr: *mut c_void,
    /// The UAR page.
    pub base_addr: *mut c_void,
    /// UAR page index (`qpc.uar_page`, `cqc.uar_page`).
    pub page_id: u32,
    /// `off_t`.
    pub mmap_off: i64,
    /// Valid optional fields.
    pub comp_mask: u64,
}

/// `struct mlx5dv_context_attr` (mlx5dv.h): `mlx5dv_open_device`'s
/// argument; devx needs `MLX5DV_CONTEXT_FLAGS_DEVX`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_context_attr {
    /// `MLX5DV_CONTEXT_FLAGS_*`.
    pub flags: u32,
    /// Valid optional fields.
    pub comp_mask: u64,
}

/// `enum mlx5dv_context_attr_flags`: open the context for devx.
pub const MLX5DV_CONTEXT_FLAGS_DEVX: u32 = 1 << 0;

/// `enum ibv_qp_state` (verbs.h).
pub const IBV_QPS_RESET: u32 = 0;
/// `enum ibv_qp_state`.
pub const IBV_QPS_INIT: u32 = 1;
/// `enum ibv_qp_state`.
pub const IBV_QPS_RTR: u32 = 2;
/// `enum ibv_qp_state`.
pub const IBV_QPS_RTS: u32 = 3;
/// `enum ibv_qp_type`.
pub const IBV_QPT_RC: u32 = 2;
/// `enum ibv_mtu`.
pub const IBV_MTU_1024: u32 = 3;
/// `enum ibv_mtu`.
pub const IBV_MTU_4096: u32 = 5;
/// `enum ibv_port_state`: active.
pub const IBV_PORT_ACTIVE: u32 = 4;
/// `IBV_LINK_LAYER_*`.
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
/// `IBV_LINK_LAYER_*`.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// `enum ibv_access_flags`.
pub const IBV_ACCESS_LOCAL_WRITE: u32 = 1;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_REMOTE_READ: u32 = 1 << 2;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;

/// `enum ibv_qp_attr_mask` (verbs.h).
pub const IBV_QP_STATE: u32 = 1 << 0;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_CUR_STATE: u32 = 1 << 1;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_ACCESS_FLAGS: u32 = 1 << 3;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_PKEY_INDEX: u32 = 1 << 4;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_PORT: u32 = 1 << 5;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_QKEY: u32 = 1 << 6;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_AV: u32 = 1 << 7;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_PATH_MTU: u32 = 1 << 8;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_TIMEOUT: u32 = 1 << 9;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_RETRY_CNT: u32 = 1 << 10;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_RNR_RETRY: u32 = 1 << 11;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_RQ_PSN: u32 = 1 << 12;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_MAX_QP_RD_ATOMIC: u32 = 1 << 13;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_ALT_PATH: u32 = 1 << 14;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_MIN_RNR_TIMER: u32 = 1 << 15;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_SQ_PSN: u32 = 1 << 16;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_PATH_MIG_STATE: u32 = 1 << 18;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_CAP: u32 = 1 << 19;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_DEST_QPN: u32 = 1 << 20;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_RATE_LIMIT: u32 = 1 << 25;

/// `enum mlx5dv_obj_type`.
pub const MLX5DV_OBJ_QP: u64 = 1 << 0;
/// `enum mlx5dv_obj_type`.
pub const MLX5DV_OBJ_CQ: u64 = 1 << 1;
/// `enum mlx5dv_devx_umem_in_mask`.
pub const MLX5DV_UMEM_MASK_DMABUF: u64 = 1 << 0;
/// `MLX5DV_UAR_ALLOC_TYPE_BF` (mlx5dv.h): a BlueFlame UAR.
pub const MLX5DV_UAR_ALLOC_TYPE_BF: u32 = 0;
/// `MLX5DV_UAR_ALLOC_TYPE_NC` (mlx5dv.h): a non-cached UAR (doorbell only).
pub const MLX5DV_UAR_ALLOC_TYPE_NC: u32 = 1;

/// `struct ibv_sge`: one scatter/gather element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_sge {
    /// Start address.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the MR that covers it.
    pub lkey: u32,
}

/// `struct ibv_send_wr`. The `wr` union is kept as four words: `rdma` is
/// `{remote_addr, rkey}` (words 0, 1), `atomic` is `{remote_addr,
/// compare_add, swap, rkey}` (words 0..3); [`ibv_send_wr::rdma`] and
/// [`ibv_send_wr::atomic`] fill them.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr {
    /// Returned in the work completion.
    pub wr_id: u64,
    /// Next request of a chain (null: last).
    pub next: *mut ibv_send_wr,
    /// Scatter/gather list.
    pub sg_list: *mut ibv_sge,
    /// Its entries.
    pub num_sge: c_int,
    /// `IBV_WR_*`.
    pub opcode: c_uint,
    /// `IBV_SEND_*`.
    pub send_flags: c_uint,
    /// Immediate data, big endian (network order) as the wire carries it.
    pub imm_data: u32,
    /// The `wr` union (`rdma`, `atomic`, `ud`).
    pub wr: [u64; 4],
    /// The `qp_type` union (`xrc.remote_srqn`), and padding.
    pub qp_type: [u32; 2],
    /// The `bind_mw`/`tso` union, unused here.
    pub tail: [u64; 6],
}

impl ibv_send_wr {
    /// An empty request (no chain, no SGE).
    pub fn zeroed() -> ibv_send_wr {
        ibv_send_wr {
            wr_id: 0,
            next: core::ptr::null_mut(),
            sg_list: core::ptr::null_mut(),
            num_sge: 0,
            opcode: 0,
            send_flags: 0,
            imm_data: 0,
            wr: [0; 4],
            qp_type: [0; 2],
            tail: [0; 6],
        }
    }

    /// `wr.rdma`.
    pub fn rdma(&mut self, remote_addr: u64, rkey: u32) {
        self.wr = [remote_addr, u64::from(rkey), 0, 0];
    }

    /// `wr.atomic`.
    pub fn atomic(&mut self, remote_addr: u64, compare_add: u64, swap: u64, rkey: u32) {
        self.wr = [remote_addr, compare_add, swap, u64::from(rkey)];
    }
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_recv_wr {
    /// Returned in the work completion.
    pub wr_id: u64,
    /// Next request of a chain.
    pub next: *mut ibv_recv_wr,
    /// Scatter list.
    pub sg_list: *mut ibv_sge,
    /// Its entries.
    pub num_sge: c_int,
}

/// `struct ibv_wc`: one work completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_wc {
    /// The request's `wr_id`.
    pub wr_id: u64,
    /// `IBV_WC_*` status.
    pub status: c_uint,
    /// `IBV_WC_*` opcode.
    pub opcode: c_uint,
    /// The provider's own error code.
    pub vendor_err: u32,
    /// Bytes (receives, reads).
    pub byte_len: u32,
    /// Immediate data, network order, with `IBV_WC_WITH_IMM`.
    pub imm_data: u32,
    /// Local QP.
    pub qp_num: u32,
    /// Remote QP (UD).
    pub src_qp: u32,
    /// `IBV_WC_*` flags.
    pub wc_flags: c_uint,
    /// P_Key index (GSI).
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// Path bits.
    pub dlid_path_bits: u8,
}

/// Offsets into `struct ibv_context` of the provider ops `verbs.h`'s inline
/// `ibv_poll_cq`, `ibv_post_send` and `ibv_post_recv` call through
/// (`ctx->ops.poll_cq` ...): they are not exported symbols.
pub const IBV_CONTEXT_OPS_POLL_CQ: usize = 96;
/// `offsetof(struct ibv_context, ops.post_send)`.
pub const IBV_CONTEXT_OPS_POST_SEND: usize = 208;
/// `offsetof(struct ibv_context, ops.post_recv)`.
pub const IBV_CONTEXT_OPS_POST_RECV: usize = 216;

/// `enum ibv_wc_status`, in order, with their names (`ibv_wc_status_str`).
pub const IBV_WC_STATUS_NAMES: [&str; 24] = [
    "IBV_WC_SUCCESS",
    "IBV_WC_LOC_LEN_ERR",
    "IBV_WC_LOC_QP_OP_ERR",
    "IBV_WC_LOC_EEC_OP_ERR",
    "IBV_WC_LOC_PROT_ERR",
    "IBV_WC_WR_FLUSH_ERR",
    "IBV_WC_MW_BIND_ERR",
    "IBV_WC_BAD_RESP_ERR",
    "IBV_WC_LOC_ACCESS_ERR",
    "IBV_WC_REM_INV_REQ_ERR",
    "IBV_WC_REM_ACCESS_ERR",
    "IBV_WC_REM_OP_ERR",
    "IBV_WC_RETRY_EXC_ERR",
    "IBV_WC_RNR_RETRY_EXC_ERR",
    "IBV_WC_LOC_RDD_VIOL_ERR",
    "IBV_WC_REM_INV_RD_REQ_ERR",
    "IBV_WC_REM_ABORT_ERR",
    "IBV_WC_INV_EECN_ERR",
    "IBV_WC_INV_EEC_STATE_ERR",
    "IBV_WC_FATAL_ERR",
    "IBV_WC_RESP_TIMEOUT_ERR",
    "IBV_WC_GENERAL_ERR",
    "IBV_WC_TM_ERR",
    "IBV_WC_TM_RNDV_INCOMPLETE",
];
/// `IBV_WC_SUCCESS`.
pub const IBV_WC_SUCCESS: u32 = 0;
/// `IBV_WC_LOC_LEN_ERR`.
pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
/// `IBV_WC_LOC_QP_OP_ERR`.
pub const IBV_WC_LOC_QP_OP_ERR: u32 = 2;
/// `IBV_WC_LOC_EEC_OP_ERR`.
pub const IBV_WC_LOC_EEC_OP_ERR: u32 = 3;
/// `IBV_WC_LOC_PROT_ERR`.
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
/// `IBV_WC_WR_FLUSH_ERR`.
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
/// `IBV_WC_MW_BIND_ERR`.
pub const IBV_WC_MW_BIND_ERR: u32 = 6;
/// `IBV_WC_BAD_RESP_ERR`.
pub const IBV_WC_BAD_RESP_ERR: u32 = 7;
/// `IBV_WC_LOC_ACCESS_ERR`.
pub const IBV_WC_LOC_ACCESS_ERR: u32 = 8;
/// `IBV_WC_REM_INV_REQ_ERR`.
pub const IBV_WC_REM_INV_REQ_ERR: u32 = 9;
/// `IBV_WC_REM_ACCESS_ERR`.
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
/// `IBV_WC_REM_OP_ERR`.
pub const IBV_WC_REM_OP_ERR: u32 = 11;
/// `IBV_WC_RETRY_EXC_ERR`.
pub const IBV_WC_RETRY_EXC_ERR: u32 = 12;
/// `IBV_WC_RNR_RETRY_EXC_ERR`.
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// `IBV_WC_LOC_RDD_VIOL_ERR`.
pub const IBV_WC_LOC_RDD_VIOL_ERR: u32 = 14;
/// `IBV_WC_REM_INV_RD_REQ_ERR`.
pub const IBV_WC_REM_INV_RD_REQ_ERR: u32 = 15;
/// `IBV_WC_REM_ABORT_ERR`.
pub const IBV_WC_REM_ABORT_ERR: u32 = 16;
/// `IBV_WC_INV_EECN_ERR`.
pub const IBV_WC_INV_EECN_ERR: u32 = 17;
/// `IBV_WC_INV_EEC_STATE_ERR`.
pub const IBV_WC_INV_EEC_STATE_ERR: u32 = 18;
/// `IBV_WC_FATAL_ERR`.
pub const IBV_WC_FATAL_ERR: u32 = 19;
/// `IBV_WC_RESP_TIMEOUT_ERR`.
pub const IBV_WC_RESP_TIMEOUT_ERR: u32 = 20;
/// `IBV_WC_GENERAL_ERR`.
pub const IBV_WC_GENERAL_ERR: u32 = 21;
/// `IBV_WC_TM_ERR`.
pub const IBV_WC_TM_ERR: u32 = 22;
/// `IBV_WC_TM_RNDV_INCOMPLETE`.
pub const IBV_WC_TM_RNDV_INCOMPLETE: u32 = 23;
/// `IBV_WR_RDMA_WRITE`.
pub const IBV_WR_RDMA_WRITE: u32 = 0;
/// `IBV_WR_RDMA_WRITE_WITH_IMM`.
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// `IBV_WR_SEND`.
pub const IBV_WR_SEND: u32 = 2;
/// `IBV_WR_SEND_WITH_IMM`.
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
/// `IBV_WR_RDMA_READ`.
pub const IBV_WR_RDMA_READ: u32 = 4;
/// `IBV_WR_ATOMIC_CMP_AND_SWP`.
pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
/// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
/// `IBV_SEND_SIGNALED`.
pub const IBV_SEND_SIGNALED: u32 = 1 << 1;
/// `IBV_WC_RECV`: set in the opcode of every receive completion.
pub const IBV_WC_RECV: u32 = 1 << 7;
/// `IBV_WC_RECV_RDMA_WITH_IMM`.
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = IBV_WC_RECV + 1;
/// `IBV_WC_WITH_IMM` in `wc_flags`.
pub const IBV_WC_WITH_IMM: u32 = 1 << 1;

/// One hand-declared struct: its C name, Rust size, and its fields' Rust
/// offsets, for the oracle to compare with gcc's.
#[derive(Clone, Copy, Debug)]
pub struct StructAbi {
    /// C struct name (`ibv_qp` for the prefix struct).
    pub name: &'static str,
    /// `size_of` here; `None` for prefix declarations (only offsets count).
    pub size: Option<usize>,
    /// (C field path, offset here).
    pub fields: &'static [(&'static str, usize)],
}

macro_rules! abi {
    ($c:literal, $t:ty, $full:expr, [$($f:literal => $($p:ident).+),* $(,)?]) => {
        StructAbi {
            name: $c,
            size: if $full { Some(core::mem::size_of::<$t>()) } else { None },
            fields: &[$(($f, core::mem::offset_of!($t, $($p).+))),*],
        }
    };
}

/// Every hand-declared struct, for `tests/oracle/tests/verbs_abi.rs`.
pub const STRUCTS: &[StructAbi] = &[
    abi!("ibv_gid", ibv_gid, true, ["raw" => raw]),
    abi!("ibv_global_route", ibv_global_route, true, [
        "dgid" => dgid, "flow_label" => flow_label, "sgid_index" => sgid_index,
        "hop_limit" => hop_limit, "traffic_class" => traffic_class]),
    abi!("ibv_ah_attr", ibv_ah_attr, true, [
        "grh" => grh, "dlid" => dlid, "sl" => sl, "src_path_bits" => src_path_bits,
        "static_rate" => static_rate, "is_global" => is_global, "port_num" => port_num]),
    abi!("ibv_qp_cap", ibv_qp_cap, true, [
        "max_send_wr" => max_send_wr, "max_recv_wr" => max_recv_wr, "max_send_sge" => max_send_sge,
        "max_recv_sge" => max_recv_sge, "max_inline_data" => max_inline_data]),
    abi!("ibv_qp_attr", ibv_qp_attr, true, [
        "qp_state" => qp_state, "cur_qp_state" => cur_qp_state, "path_mtu" => path_mtu,
        "path_mig_state" => path_mig_state, "qkey" => qkey, "rq_psn" => rq_psn, "sq_psn" => sq_psn,
        "dest_qp_num" => dest_qp_num, "qp_access_flags" => qp_access_flags, "cap" => cap,
        "ah_attr" => ah_attr, "alt_ah_attr" => alt_ah_attr, "pkey_index" => pkey_index,
        "alt_pkey_index" => alt_pkey_index, "en_sqd_async_notify" => en_sqd_async_notify,
        "sq_draining" => sq_draining, "max_rd_atomic" => max_rd_atomic,
        "max_dest_rd_atomic" => max_dest_rd_atomic, "min_rnr_timer" => min_rnr_timer,
        "port_num" => port_num, "timeout" => timeout, "retry_cnt" => retry_cnt,
        "rnr_retry" => rnr_retry, "alt_port_num" => alt_port_num, "alt_timeout" => alt_timeout,
        "rate_limit" => rate_limit]),
    abi!("ibv_qp_init_attr", ibv_qp_init_attr, true, [
        "qp_context" => qp_context, "send_cq" => send_cq, "recv_cq" => recv_cq, "srq" => srq,
        "cap" => cap, "qp_type" => qp_type, "sq_sig_all" => sq_sig_all]),
    abi!("ibv_port_attr", ibv_port_attr, true, [
        "state" => state, "max_mtu" => max_mtu, "active_mtu" => active_mtu, "gid_tbl_len" => gid_tbl_len,
        "port_cap_flags" => port_cap_flags, "max_msg_sz" => max_msg_sz, "bad_pkey_cntr" => bad_pkey_cntr,
        "qkey_viol_cntr" => qkey_viol_cntr, "pkey_tbl_len" => pkey_tbl_len, "lid" => lid,
        "sm_lid" => sm_lid, "lmc" => lmc, "max_vl_num" => max_vl_num, "sm_sl" => sm_sl,
        "subnet_timeout" => subnet_timeout, "init_type_reply" => init_type_reply,
        "active_width" => active_width, "active_speed" => active_speed, "phys_state" => phys_state,
        "link_layer" => link_layer, "flags" => flags, "port_cap_flags2" => port_cap_flags2]),
    abi!("ibv_qp", ibv_qp_prefix, false, [
        "context" => context, "qp_context" => qp_context, "pd" => pd, "send_cq" => send_cq,
        "recv_cq" => recv_cq, "srq" => srq, "handle" => handle, "qp_num" => qp_num,
        "state" => state, "qp_type" => qp_type]),
    abi!("ibv_mr", ibv_mr, true, [
        "context" => context, "pd" => pd, "addr" => addr, "length" => length, "handle" => handle,
        "lkey" => lkey, "rkey" => rkey]),
    abi!("mlx5dv_qp", mlx5dv_qp, true, [
        "dbrec" => dbrec, "sq.buf" => sq.buf, "sq.wqe_cnt" => sq.wqe_cnt, "sq.stride" => sq.stride,
        "rq.buf" => rq.buf, "rq.wqe_cnt" => rq.wqe_cnt, "rq.stride" => rq.stride,
        "bf.reg" => bf.reg, "bf.size" => bf.size, "comp_mask" => comp_mask,
        "uar_mmap_offset" => uar_mmap_offset, "tirn" => tirn, "tisn" => tisn, "rqn" => rqn,
        "sqn" => sqn, "tir_icm_addr" => tir_icm_addr]),
    abi!("mlx5dv_cq", mlx5dv_cq, true, [
        "buf" => buf, "dbrec" => dbrec, "cqe_cnt" => cqe_cnt, "cqe_size" => cqe_size,
        "cq_uar" => cq_uar, "cqn" => cqn, "comp_mask" => comp_mask]),
    abi!("mlx5dv_obj", mlx5dv_obj, true, [
        "qp.in" => qp.r#in, "qp.out" => qp.out, "cq.in" => cq.r#in, "cq.out" => cq.out,
        "srq.in" => srq.r#in, "rwq.in" => rwq.r#in, "dm.in" => dm.r#in, "ah.in" => ah.r#in,
        "pd.in" => pd.r#in, "pd.out" => pd.out]),
    abi!("mlx5dv_context_attr", mlx5dv_context_attr, true, ["flags" => flags, "comp_mask" => comp_mask]),
    abi!("mlx5dv_devx_umem", mlx5dv_devx_umem, true, ["umem_id" => umem_id]),
    abi!("mlx5dv_devx_umem_in", mlx5dv_devx_umem_in, true, [
        "addr" => addr, "size" => size, "access" => access, "pgsz_bitmap" => pgsz_bitmap,
        "comp_mask" => comp_mask, "dmabuf_fd" => dmabuf_fd]),
    abi!("mlx5dv_devx_uar", mlx5dv_devx_uar, true, [
        "reg_addr" => reg_addr, "base_addr" => base_addr, "page_id" => page_id,
        "mmap_off" => mmap_off, "comp_mask" => comp_mask]),
    abi!("ibv_sge", ibv_sge, true, ["addr" => addr, "length" => length, "lkey" => lkey]),
    StructAbi {
        name: "ibv_send_wr",
        size: Some(core::mem::size_of::<ibv_send_wr>()),
        fields: &[
            ("wr_id", core::mem::offset_of!(ibv_send_wr, wr_id)),
            ("next", core::mem::offset_of!(ibv_send_wr, next)),
            ("sg_list", core::mem::offset_of!(ibv_send_wr, sg_list)),
            ("num_sge", core::mem::offset_of!(ibv_send_wr, num_sge)),
            ("opcode", core::mem::offset_of!(ibv_send_wr, opcode)),
            ("send_flags", core::mem::offset_of!(ibv_send_wr, send_flags)),
            ("imm_data", core::mem::offset_of!(ibv_send_wr, imm_data)),
            ("wr", core::mem::offset_of!(ibv_send_wr, wr)),
            // The words `rdma` and `atomic` fill (see `ibv_send_wr::rdma`, `::atomic`).
            ("wr.rdma.remote_addr", core::mem::offset_of!(ibv_send_wr, wr)),
            ("wr.rdma.rkey", core::mem::offset_of!(ibv_send_wr, wr) + 8),
            ("wr.atomic.remote_addr", core::mem::offset_of!(ibv_send_wr, wr)),
            ("wr.atomic.compare_add", core::mem::offset_of!(ibv_send_wr, wr) + 8),
            ("wr.atomic.swap", core::mem::offset_of!(ibv_send_wr, wr) + 16),
            ("wr.atomic.rkey", core::mem::offset_of!(ibv_send_wr, wr) + 24),
            ("qp_type", core::mem::offset_of!(ibv_send_wr, qp_type)),
        ],
    },
    abi!("ibv_recv_wr", ibv_recv_wr, true, ["wr_id" => wr_id, "next" => next, "sg_list" => sg_list, "num_sge" => num_sge]),
    abi!("ibv_wc", ibv_wc, true, [
        "wr_id" => wr_id, "status" => status, "opcode" => opcode, "vendor_err" => vendor_err,
        "byte_len" => byte_len, "imm_data" => imm_data, "qp_num" => qp_num, "src_qp" => src_qp,
        "wc_flags" => wc_flags, "pkey_index" => pkey_index, "slid" => slid, "sl" => sl,
        "dlid_path_bits" => dlid_path_bits]),
    StructAbi {
        name: "ibv_context",
        size: None,
        fields: &[
            ("ops.poll_cq", IBV_CONTEXT_OPS_POLL_CQ),
            ("ops.post_send", IBV_CONTEXT_OPS_POST_SEND),
            ("ops.post_recv", IBV_CONTEXT_OPS_POST_RECV),
        ],
    },
];

/// Every constant above by its C name, for the oracle.
pub const CONSTS: &[(&str, u64)] = &[
    ("IBV_QPS_RESET", IBV_QPS_RESET as u64),
    ("IBV_QPS_INIT", IBV_QPS_INIT as u64),
    ("IBV_QPS_RTR", IBV_QPS_RTR as u64),
    ("IBV_QPS_RTS", IBV_QPS_RTS as u64),
    ("IBV_QPT_RC", IBV_QPT_RC as u64),
    ("IBV_MTU_1024", IBV_MTU_1024 as u64),
    ("IBV_MTU_4096", IBV_MTU_4096 as u64),
    ("IBV_PORT_ACTIVE", IBV_PORT_ACTIVE as u64),
    ("IBV_LINK_LAYER_INFINIBAND", IBV_LINK_LAYER_INFINIBAND as u64),
    ("IBV_LINK_LAYER_ETHERNET", IBV_LINK_LAYER_ETHERNET as u64),
    ("IBV_ACCESS_LOCAL_WRITE", IBV_ACCESS_LOCAL_WRITE as u64),
    ("IBV_ACCESS_REMOTE_WRITE", IBV_ACCESS_REMOTE_WRITE as u64),
    ("IBV_ACCESS_REMOTE_READ", IBV_ACCESS_REMOTE_READ as u64),
    ("IBV_ACCESS_REMOTE_ATOMIC", IBV_ACCESS_REMOTE_ATOMIC as u64),
    ("IBV_QP_STATE", IBV_QP_STATE as u64),
    ("IBV_QP_CUR_STATE", IBV_QP_CUR_STATE as u64),
    ("IBV_QP_EN_SQD_ASYNC_NOTIFY", IBV_QP_EN_SQD_ASYNC_NOTIFY as u64),
    ("IBV_QP_ACCESS_FLAGS", IBV_QP_ACCESS_FLAGS as u64),
    ("IBV_QP_PKEY_INDEX", IBV_QP_PKEY_INDEX as u64),
    ("IBV_QP_PORT", IBV_QP_PORT as u64),
    ("IBV_QP_QKEY", IBV_QP_QKEY as u64),
    ("IBV_QP_AV", IBV_QP_AV as u64),
    ("IBV_QP_PATH_MTU", IBV_QP_PATH_MTU as u64),
    ("IBV_QP_TIMEOUT", IBV_QP_TIMEOUT as u64),
    ("IBV_QP_RETRY_CNT", IBV_QP_RETRY_CNT as u64),
    ("IBV_QP_RNR_RETRY", IBV_QP_RNR_RETRY as u64),
    ("IBV_QP_RQ_PSN", IBV_QP_RQ_PSN as u64),
    ("IBV_QP_MAX_QP_RD_ATOMIC", IBV_QP_MAX_QP_RD_ATOMIC as u64),
    ("IBV_QP_ALT_PATH", IBV_QP_ALT_PATH as u64),
    ("IBV_QP_MIN_RNR_TIMER", IBV_QP_MIN_RNR_TIMER as u64),
    ("IBV_QP_SQ_PSN", IBV_QP_SQ_PSN as u64),
    ("IBV_QP_MAX_DEST_RD_ATOMIC", IBV_QP_MAX_DEST_RD_ATOMIC as u64),
    ("IBV_QP_PATH_MIG_STATE", IBV_QP_PATH_MIG_STATE as u64),
    ("IBV_QP_CAP", IBV_QP_CAP as u64),
    ("IBV_QP_DEST_QPN", IBV_QP_DEST_QPN as u64),
    ("IBV_QP_RATE_LIMIT", IBV_QP_RATE_LIMIT as u64),
    ("MLX5DV_CONTEXT_FLAGS_DEVX", MLX5DV_CONTEXT_FLAGS_DEVX as u64),
    ("MLX5DV_OBJ_QP", MLX5DV_OBJ_QP),
    ("MLX5DV_OBJ_CQ", MLX5DV_OBJ_CQ),
    ("MLX5DV_UMEM_MASK_DMABUF", MLX5DV_UMEM_MASK_DMABUF),
    ("MLX5DV_UAR_ALLOC_TYPE_BF", MLX5DV_UAR_ALLOC_TYPE_BF as u64),
    ("MLX5DV_UAR_ALLOC_TYPE_NC", MLX5DV_UAR_ALLOC_TYPE_NC as u64),
    ("IBV_WR_RDMA_WRITE", IBV_WR_RDMA_WRITE as u64),
    ("IBV_WR_RDMA_WRITE_WITH_IMM", IBV_WR_RDMA_WRITE_WITH_IMM as u64),
    ("IBV_WR_SEND", IBV_WR_SEND as u64),
    ("IBV_WR_SEND_WITH_IMM", IBV_WR_SEND_WITH_IMM as u64),
    ("IBV_WR_RDMA_READ", IBV_WR_RDMA_READ as u64),
    ("IBV_WR_ATOMIC_CMP_AND_SWP", IBV_WR_ATOMIC_CMP_AND_SWP as u64),
    ("IBV_WR_ATOMIC_FETCH_AND_ADD", IBV_WR_ATOMIC_FETCH_AND_ADD as u64),
    ("IBV_SEND_SIGNALED", IBV_SEND_SIGNALED as u64),
    ("IBV_WC_RECV", IBV_WC_RECV as u64),
    ("IBV_WC_RECV_RDMA_WITH_IMM", IBV_WC_RECV_RDMA_WITH_IMM as u64),
    ("IBV_WC_WITH_IMM", IBV_WC_WITH_IMM as u64),
    ("IBV_WC_SUCCESS", IBV_WC_SUCCESS as u64),
    ("IBV_WC_LOC_LEN_ERR", IBV_WC_LOC_LEN_ERR as u64),
    ("IBV_WC_LOC_QP_OP_ERR", IBV_WC_LOC_QP_OP_ERR as u64),
    ("IBV_WC_LOC_EEC_OP_ERR", IBV_WC_LOC_EEC_OP_ERR as u64),
    ("IBV_WC_LOC_PROT_ERR", IBV_WC_LOC_PROT_ERR as u64),
    ("IBV_WC_WR_FLUSH_ERR", IBV_WC_WR_FLUSH_ERR as u64),
    ("IBV_WC_MW_BIND_ERR", IBV_WC_MW_BIND_ERR as u64),
    ("IBV_WC_BAD_RESP_ERR", IBV_WC_BAD_RESP_ERR as u64),
    ("IBV_WC_LOC_ACCESS_ERR", IBV_WC_LOC_ACCESS_ERR as u64),
    ("IBV_WC_REM_INV_REQ_ERR", IBV_WC_REM_INV_REQ_ERR as u64),
    ("IBV_WC_REM_ACCESS_ERR", IBV_WC_REM_ACCESS_ERR as u64),
    ("IBV_WC_REM_OP_ERR", IBV_WC_REM_OP_ERR as u64),
    ("IBV_WC_RETRY_EXC_ERR", IBV_WC_RETRY_EXC_ERR as u64),
    ("IBV_WC_RNR_RETRY_EXC_ERR", IBV_WC_RNR_RETRY_EXC_ERR as u64),
    ("IBV_WC_LOC_RDD_VIOL_ERR", IBV_WC_LOC_RDD_VIOL_ERR as u64),
    ("IBV_WC_REM_INV_RD_REQ_ERR", IBV_WC_REM_INV_RD_REQ_ERR as u64),
    ("IBV_WC_REM_ABORT_ERR", IBV_WC_REM_ABORT_ERR as u64),
    ("IBV_WC_INV_EECN_ERR", IBV_WC_INV_EECN_ERR as u64),
    ("IBV_WC_INV_EEC_STATE_ERR", IBV_WC_INV_EEC_STATE_ERR as u64),
    ("IBV_WC_FATAL_ERR", IBV_WC_FATAL_ERR as u64),
    ("IBV_WC_RESP_TIMEOUT_ERR", IBV_WC_RESP_TIMEOUT_ERR as u64),
    ("IBV_WC_GENERAL_ERR", IBV_WC_GENERAL_ERR as u64),
    ("IBV_WC_TM_ERR", IBV_WC_TM_ERR as u64),
    ("IBV_WC_TM_RNDV_INCOMPLETE", IBV_WC_TM_RNDV_INCOMPLETE as u64),
];
