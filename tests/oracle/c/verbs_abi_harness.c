/*
 * Oracle harness: the ABI of rdma-core's <infiniband/verbs.h> and
 * <infiniband/mlx5dv.h> (Debian libibverbs-dev) as gcc lays it out, for the
 * structs and constants marrow-verbs declares by hand (crates/verbs/src/ffi.rs).
 * tests/oracle/tests/verbs_abi.rs compares every offset, size and value.
 */
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>

struct verbs_field {
	const char *strct;
	const char *field;
	size_t offset;
	size_t size;
	size_t struct_size;
};

#define F(s, f) { #s, #f, offsetof(struct s, f), sizeof(((struct s *)0)->f), sizeof(struct s) }
#define U(s, f) { #s, #f, offsetof(union s, f), sizeof(((union s *)0)->f), sizeof(union s) }
static const struct verbs_field fields[] = {
	U(ibv_gid, raw),
	F(ibv_global_route, dgid), F(ibv_global_route, flow_label), F(ibv_global_route, sgid_index),
	F(ibv_global_route, hop_limit), F(ibv_global_route, traffic_class),
	F(ibv_ah_attr, grh), F(ibv_ah_attr, dlid), F(ibv_ah_attr, sl), F(ibv_ah_attr, src_path_bits),
	F(ibv_ah_attr, static_rate), F(ibv_ah_attr, is_global), F(ibv_ah_attr, port_num),
	F(ibv_qp_cap, max_send_wr), F(ibv_qp_cap, max_recv_wr), F(ibv_qp_cap, max_send_sge),
	F(ibv_qp_cap, max_recv_sge), F(ibv_qp_cap, max_inline_data),
	F(ibv_qp_attr, qp_state), F(ibv_qp_attr, cur_qp_state), F(ibv_qp_attr, path_mtu),
	F(ibv_qp_attr, path_mig_state), F(ibv_qp_attr, qkey), F(ibv_qp_attr, rq_psn), F(ibv_qp_attr, sq_psn),
	F(ibv_qp_attr, dest_qp_num), F(ibv_qp_attr, qp_access_flags), F(ibv_qp_attr, cap),
	F(ibv_qp_attr, ah_attr), F(ibv_qp_attr, alt_ah_attr), F(ibv_qp_attr, pkey_index),
	F(ibv_qp_attr, alt_pkey_index), F(ibv_qp_attr, en_sqd_async_notify), F(ibv_qp_attr, sq_draining),
	F(ibv_qp_attr, max_rd_atomic), F(ibv_qp_attr, max_dest_rd_atomic), F(ibv_qp_attr, min_rnr_timer),
	F(ibv_qp_attr, port_num), F(ibv_qp_attr, timeout), F(ibv_qp_attr, retry_cnt), F(ibv_qp_attr, rnr_retry),
	F(ibv_qp_attr, alt_port_num), F(ibv_qp_attr, alt_timeout), F(ibv_qp_attr, rate_limit),
	F(ibv_qp_init_attr, qp_context), F(ibv_qp_init_attr, send_cq), F(ibv_qp_init_attr, recv_cq),
	F(ibv_qp_init_attr, srq), F(ibv_qp_init_attr, cap), F(ibv_qp_init_attr, qp_type),
	F(ibv_qp_init_attr, sq_sig_all),
	F(ibv_port_attr, state), F(ibv_port_attr, max_mtu), F(ibv_port_attr, active_mtu),
	F(ibv_port_attr, gid_tbl_len), F(ibv_port_attr, port_cap_flags), F(ibv_port_attr, max_msg_sz),
	F(ibv_port_attr, bad_pkey_cntr), F(ibv_port_attr, qkey_viol_cntr), F(ibv_port_attr, pkey_tbl_len),
	F(ibv_port_attr, lid), F(ibv_port_attr, sm_lid), F(ibv_port_attr, lmc), F(ibv_port_attr, max_vl_num),
	F(ibv_port_attr, sm_sl), F(ibv_port_attr, subnet_timeout), F(ibv_port_attr, init_type_reply),
	F(ibv_port_attr, active_width), F(ibv_port_attr, active_speed), F(ibv_port_attr, phys_state),
	F(ibv_port_attr, link_layer), F(ibv_port_attr, flags), F(ibv_port_attr, port_cap_flags2),
	F(ibv_qp, context), F(ibv_qp, qp_context), F(ibv_qp, pd), F(ibv_qp, send_cq), F(ibv_qp, recv_cq),
	F(ibv_qp, srq), F(ibv_qp, handle), F(ibv_qp, qp_num), F(ibv_qp, state), F(ibv_qp, qp_type),
	F(ibv_mr, context), F(ibv_mr, pd), F(ibv_mr, addr), F(ibv_mr, length), F(ibv_mr, handle),
	F(ibv_mr, lkey), F(ibv_mr, rkey),
	F(mlx5dv_qp, dbrec), F(mlx5dv_qp, sq.buf), F(mlx5dv_qp, sq.wqe_cnt), F(mlx5dv_qp, sq.stride),
	F(mlx5dv_qp, rq.buf), F(mlx5dv_qp, rq.wqe_cnt), F(mlx5dv_qp, rq.stride), F(mlx5dv_qp, bf.reg),
	F(mlx5dv_qp, bf.size), F(mlx5dv_qp, comp_mask), F(mlx5dv_qp, uar_mmap_offset), F(mlx5dv_qp, tirn),
	F(mlx5dv_qp, tisn), F(mlx5dv_qp, rqn), F(mlx5dv_qp, sqn), F(mlx5dv_qp, tir_icm_addr),
	F(mlx5dv_cq, buf), F(mlx5dv_cq, dbrec), F(mlx5dv_cq, cqe_cnt), F(mlx5dv_cq, cqe_size),
	F(mlx5dv_cq, cq_uar), F(mlx5dv_cq, cqn), F(mlx5dv_cq, comp_mask),
	F(mlx5dv_obj, qp.in), F(mlx5dv_obj, qp.out), F(mlx5dv_obj, cq.in), F(mlx5dv_obj, cq.out),
	F(mlx5dv_obj, srq.in), F(mlx5dv_obj, rwq.in), F(mlx5dv_obj, dm.in), F(mlx5dv_obj, ah.in),
	F(mlx5dv_obj, pd.in), F(mlx5dv_obj, pd.out),
	F(mlx5dv_context_attr, flags), F(mlx5dv_context_attr, comp_mask),
	F(mlx5dv_devx_umem, umem_id),
	F(mlx5dv_devx_umem_in, addr), F(mlx5dv_devx_umem_in, size), F(mlx5dv_devx_umem_in, access),
	F(mlx5dv_devx_umem_in, pgsz_bitmap), F(mlx5dv_devx_umem_in, comp_mask), F(mlx5dv_devx_umem_in, dmabuf_fd),
	F(mlx5dv_devx_uar, reg_addr), F(mlx5dv_devx_uar, base_addr), F(mlx5dv_devx_uar, page_id),
	F(mlx5dv_devx_uar, mmap_off), F(mlx5dv_devx_uar, comp_mask),
	F(ibv_sge, addr), F(ibv_sge, length), F(ibv_sge, lkey),
	F(ibv_send_wr, wr_id), F(ibv_send_wr, next), F(ibv_send_wr, sg_list), F(ibv_send_wr, num_sge),
	F(ibv_send_wr, opcode), F(ibv_send_wr, send_flags), F(ibv_send_wr, imm_data), F(ibv_send_wr, wr),
	F(ibv_send_wr, wr.rdma.remote_addr), F(ibv_send_wr, wr.rdma.rkey), F(ibv_send_wr, wr.atomic.remote_addr),
	F(ibv_send_wr, wr.atomic.compare_add), F(ibv_send_wr, wr.atomic.swap), F(ibv_send_wr, wr.atomic.rkey),
	F(ibv_send_wr, qp_type),
	F(ibv_recv_wr, wr_id), F(ibv_recv_wr, next), F(ibv_recv_wr, sg_list), F(ibv_recv_wr, num_sge),
	F(ibv_wc, wr_id), F(ibv_wc, status), F(ibv_wc, opcode), F(ibv_wc, vendor_err), F(ibv_wc, byte_len),
	F(ibv_wc, imm_data), F(ibv_wc, qp_num), F(ibv_wc, src_qp), F(ibv_wc, wc_flags), F(ibv_wc, pkey_index),
	F(ibv_wc, slid), F(ibv_wc, sl), F(ibv_wc, dlid_path_bits),
	F(ibv_context, ops.poll_cq), F(ibv_context, ops.post_send), F(ibv_context, ops.post_recv),
};

size_t verbs_field_count(void) { return sizeof(fields) / sizeof(fields[0]); }
const struct verbs_field *verbs_field_at(size_t i) { return i < verbs_field_count() ? &fields[i] : NULL; }

struct verbs_const {
	const char *name;
	uint64_t value;
};
#define C(n) { #n, (uint64_t)(n) }
static const struct verbs_const consts[] = {
	C(IBV_QPS_RESET), C(IBV_QPS_INIT), C(IBV_QPS_RTR), C(IBV_QPS_RTS), C(IBV_QPT_RC),
	C(IBV_MTU_1024), C(IBV_MTU_4096), C(IBV_PORT_ACTIVE),
	C(IBV_LINK_LAYER_INFINIBAND), C(IBV_LINK_LAYER_ETHERNET),
	C(IBV_ACCESS_LOCAL_WRITE), C(IBV_ACCESS_REMOTE_WRITE), C(IBV_ACCESS_REMOTE_READ), C(IBV_ACCESS_REMOTE_ATOMIC),
	C(IBV_QP_STATE), C(IBV_QP_CUR_STATE), C(IBV_QP_EN_SQD_ASYNC_NOTIFY), C(IBV_QP_ACCESS_FLAGS),
	C(IBV_QP_PKEY_INDEX), C(IBV_QP_PORT), C(IBV_QP_QKEY), C(IBV_QP_AV), C(IBV_QP_PATH_MTU),
	C(IBV_QP_TIMEOUT), C(IBV_QP_RETRY_CNT), C(IBV_QP_RNR_RETRY), C(IBV_QP_RQ_PSN),
	C(IBV_QP_MAX_QP_RD_ATOMIC), C(IBV_QP_ALT_PATH), C(IBV_QP_MIN_RNR_TIMER), C(IBV_QP_SQ_PSN),
	C(IBV_QP_MAX_DEST_RD_ATOMIC), C(IBV_QP_PATH_MIG_STATE), C(IBV_QP_CAP), C(IBV_QP_DEST_QPN),
	C(IBV_QP_RATE_LIMIT),
	C(MLX5DV_CONTEXT_FLAGS_DEVX), C(MLX5DV_OBJ_QP), C(MLX5DV_OBJ_CQ), C(MLX5DV_UMEM_MASK_DMABUF),
	C(MLX5DV_UAR_ALLOC_TYPE_BF), C(MLX5DV_UAR_ALLOC_TYPE_NC),
	C(IBV_WR_RDMA_WRITE),
	C(IBV_WR_RDMA_WRITE_WITH_IMM),
	C(IBV_WR_SEND),
	C(IBV_WR_SEND_WITH_IMM),
	C(IBV_WR_RDMA_READ),
	C(IBV_WR_ATOMIC_CMP_AND_SWP),
	C(IBV_WR_ATOMIC_FETCH_AND_ADD),
	C(IBV_SEND_SIGNALED),
	C(IBV_WC_RECV),
	C(IBV_WC_RECV_RDMA_WITH_IMM),
	C(IBV_WC_WITH_IMM),
	C(IBV_WC_SUCCESS),
	C(IBV_WC_LOC_LEN_ERR),
	C(IBV_WC_LOC_QP_OP_ERR),
	C(IBV_WC_LOC_EEC_OP_ERR),
	C(IBV_WC_LOC_PROT_ERR),
	C(IBV_WC_WR_FLUSH_ERR),
	C(IBV_WC_MW_BIND_ERR),
	C(IBV_WC_BAD_RESP_ERR),
	C(IBV_WC_LOC_ACCESS_ERR),
	C(IBV_WC_REM_INV_REQ_ERR),
	C(IBV_WC_REM_ACCESS_ERR),
	C(IBV_WC_REM_OP_ERR),
	C(IBV_WC_RETRY_EXC_ERR),
	C(IBV_WC_RNR_RETRY_EXC_ERR),
	C(IBV_WC_LOC_RDD_VIOL_ERR),
	C(IBV_WC_REM_INV_RD_REQ_ERR),
	C(IBV_WC_REM_ABORT_ERR),
	C(IBV_WC_INV_EECN_ERR),
	C(IBV_WC_INV_EEC_STATE_ERR),
	C(IBV_WC_FATAL_ERR),
	C(IBV_WC_RESP_TIMEOUT_ERR),
	C(IBV_WC_GENERAL_ERR),
	C(IBV_WC_TM_ERR),
	C(IBV_WC_TM_RNDV_INCOMPLETE),
};

size_t verbs_const_count(void) { return sizeof(consts) / sizeof(consts[0]); }
const struct verbs_const *verbs_const_at(size_t i) { return i < verbs_const_count() ? &consts[i] : NULL; }
