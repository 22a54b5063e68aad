/*
 * Oracle harness: rdma-core's own inline helpers from <infiniband/mlx5dv.h>
 * (Debian libibverbs-dev), exported for marrow's differential tests.
 * Every function writes into a caller buffer that the Rust side poisoned
 * with 0xA5, so a byte the helper does not write stays visible.
 */
#include <infiniband/mlx5dv.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "marrow/generated/mlx5.h"

/* rdma-core's post path clears bytes 8..11 (signature, dci_stream_channel_id,
 * fm_ce_se) with one 32-bit store before it fills the control segment
 * (providers/mlx5/qp.c _mlx5_post_send); mlx5dv_set_ctrl_seg itself leaves
 * dci_stream_channel_id alone. */
void oracle_set_ctrl_seg(uint8_t *out, uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qp_num,
                         uint8_t fm_ce_se, uint8_t ds, uint8_t signature, uint32_t imm, int clear_8_11)
{
	struct mlx5_wqe_ctrl_seg seg;
	memcpy(&seg, out, sizeof(seg));
	if (clear_8_11)
		memset((uint8_t *)&seg + 8, 0, 4);
	mlx5dv_set_ctrl_seg(&seg, pi, opcode, opmod, qp_num, fm_ce_se, ds, signature, imm);
	memcpy(out, &seg, sizeof(seg));
}

void oracle_x86_set_ctrl_seg(uint8_t *out, uint16_t pi, uint8_t opcode, uint8_t opmod, uint32_t qp_num,
                             uint8_t fm_ce_se, uint8_t ds, uint8_t signature, uint32_t imm)
{
	struct mlx5_wqe_ctrl_seg seg __attribute__((aligned(16)));
	memcpy(&seg, out, sizeof(seg));
	mlx5dv_x86_set_ctrl_seg(&seg, pi, opcode, opmod, qp_num, fm_ce_se, ds, signature, imm);
	memcpy(out, &seg, sizeof(seg));
}

void oracle_set_data_seg(uint8_t *out, uint32_t length, uint32_t lkey, uint64_t address)
{
	struct mlx5_wqe_data_seg seg;
	memcpy(&seg, out, sizeof(seg));
	mlx5dv_set_data_seg(&seg, length, lkey, (uintptr_t)address);
	memcpy(out, &seg, sizeof(seg));
}

void oracle_x86_set_data_seg(uint8_t *out, uint32_t length, uint32_t lkey, uint64_t address)
{
	struct mlx5_wqe_data_seg seg __attribute__((aligned(16)));
	memcpy(&seg, out, sizeof(seg));
	mlx5dv_x86_set_data_seg(&seg, length, lkey, (uintptr_t)address);
	memcpy(out, &seg, sizeof(seg));
}

void oracle_set_dgram_seg(uint8_t *out, uint64_t key, uint32_t dqp_dct, uint8_t ext, uint8_t stat_rate_sl,
                          uint8_t fl_mlid, uint16_t rlid, const uint8_t *rmac, uint8_t tclass, uint8_t hop_limit,
                          uint32_t grh_gid_fl, const uint8_t *rgid)
{
	struct mlx5_wqe_datagram_seg seg;
	uint8_t mac[6], gid[16];
	memcpy(mac, rmac, 6);
	memcpy(gid, rgid, 16);
	memcpy(&seg, out, sizeof(seg));
	mlx5dv_set_dgram_seg(&seg, key, dqp_dct, ext, stat_rate_sl, fl_mlid, rlid, mac, tclass, hop_limit,
			     grh_gid_fl, gid);
	memcpy(out, &seg, sizeof(seg));
}

/* The four op_own getters on a CQE given as bytes. */
void oracle_cqe_getters(const uint8_t *in, uint8_t *owner, uint8_t *se, uint8_t *format, uint8_t *opcode)
{
	struct mlx5_cqe64 cqe;
	memcpy(&cqe, in, sizeof(cqe));
	*owner = mlx5dv_get_cqe_owner(&cqe);
	*se = mlx5dv_get_cqe_se(&cqe);
	*format = mlx5dv_get_cqe_format(&cqe);
	*opcode = mlx5dv_get_cqe_opcode(&cqe);
}

/* mlx5dv_set_cqe_owner on a CQE given as bytes. */
void oracle_set_cqe_owner(uint8_t *inout, uint8_t val)
{
	struct mlx5_cqe64 cqe;
	memcpy(&cqe, inout, sizeof(cqe));
	mlx5dv_set_cqe_owner(&cqe, val);
	memcpy(inout, &cqe, sizeof(cqe));
}

/* sizeof/offsetof of every named field of rdma-core's structs. */
struct oracle_field {
	const char *strct;
	const char *field;
	size_t offset;
	size_t size;
	size_t struct_size;
};

#define F(s, f) { #s, #f, offsetof(struct s, f), sizeof(((struct s *)0)->f), sizeof(struct s) }
static const struct oracle_field fields[] = {
	F(mlx5_wqe_ctrl_seg, opmod_idx_opcode),
	F(mlx5_wqe_ctrl_seg, qpn_ds),
	F(mlx5_wqe_ctrl_seg, signature),
	F(mlx5_wqe_ctrl_seg, dci_stream_channel_id),
	F(mlx5_wqe_ctrl_seg, fm_ce_se),
	F(mlx5_wqe_ctrl_seg, imm),
	F(mlx5_wqe_raddr_seg, raddr),
	F(mlx5_wqe_raddr_seg, rkey),
	F(mlx5_wqe_data_seg, byte_count),
	F(mlx5_wqe_data_seg, lkey),
	F(mlx5_wqe_data_seg, addr),
	F(mlx5_wqe_inl_data_seg, byte_count),
	F(mlx5_wqe_atomic_seg, swap_add),
	F(mlx5_wqe_atomic_seg, compare),
	F(mlx5_wqe_av, key),
	F(mlx5_wqe_av, dqp_dct),
	F(mlx5_wqe_av, stat_rate_sl),
	F(mlx5_wqe_av, fl_mlid),
	F(mlx5_wqe_av, rlid),
	F(mlx5_wqe_av, rmac),
	F(mlx5_wqe_av, tclass),
	F(mlx5_wqe_av, hop_limit),
	F(mlx5_wqe_av, grh_gid_fl),
	F(mlx5_wqe_av, rgid),
	F(mlx5_cqe64, wqe_id),
	F(mlx5_cqe64, ml_path),
	F(mlx5_cqe64, slid),
	F(mlx5_cqe64, flags_rqpn),
	F(mlx5_cqe64, hds_ip_ext),
	F(mlx5_cqe64, l4_hdr_type_etc),
	F(mlx5_cqe64, vlan_info),
	F(mlx5_cqe64, srqn_uidx),
	F(mlx5_cqe64, imm_inval_pkey),
	F(mlx5_cqe64, app),
	F(mlx5_cqe64, app_op),
	F(mlx5_cqe64, app_info),
	F(mlx5_cqe64, byte_cnt),
	F(mlx5_cqe64, timestamp),
	F(mlx5_cqe64, sop_drop_qpn),
	F(mlx5_cqe64, wqe_counter),
	F(mlx5_cqe64, signature),
	F(mlx5_cqe64, op_own),
	F(mlx5_err_cqe, srqn),
	F(mlx5_err_cqe, vendor_err_synd),
	F(mlx5_err_cqe, syndrome),
	F(mlx5_err_cqe, s_wqe_opcode_qpn),
	F(mlx5_err_cqe, wqe_counter),
	F(mlx5_err_cqe, signature),
	F(mlx5_err_cqe, op_own),
};
#undef F

size_t oracle_field_count(void) { return sizeof(fields) / sizeof(fields[0]); }
const struct oracle_field *oracle_field_at(size_t i) { return i < oracle_field_count() ? &fields[i] : NULL; }

/* rdma-core's constants, for comparison with the generated ones. */
struct oracle_const {
	const char *name;
	uint64_t value;
};
#define C(n) { #n, (uint64_t)(n) }
static const struct oracle_const consts[] = {
	C(MLX5_SEND_WQE_BB), C(MLX5_SEND_WQE_SHIFT), C(MLX5_INLINE_SEG), C(MLX5_INVALID_LKEY),
	C(MLX5_EXTENDED_UD_AV), C(MLX5_RCV_DBR), C(MLX5_SND_DBR), C(MLX5_CQ_DOORBELL),
	C(MLX5_OPCODE_NOP), C(MLX5_OPCODE_SEND_INVAL), C(MLX5_OPCODE_RDMA_WRITE), C(MLX5_OPCODE_RDMA_WRITE_IMM),
	C(MLX5_OPCODE_SEND), C(MLX5_OPCODE_SEND_IMM), C(MLX5_OPCODE_TSO), C(MLX5_OPCODE_RDMA_READ),
	C(MLX5_OPCODE_ATOMIC_CS), C(MLX5_OPCODE_ATOMIC_FA), C(MLX5_OPCODE_ATOMIC_MASKED_CS),
	C(MLX5_OPCODE_ATOMIC_MASKED_FA), C(MLX5_OPCODE_FMR), C(MLX5_OPCODE_LOCAL_INVAL), C(MLX5_OPCODE_CONFIG_CMD),
	C(MLX5_OPCODE_SET_PSV), C(MLX5_OPCODE_UMR), C(MLX5_OPCODE_TAG_MATCHING), C(MLX5_OPCODE_FLOW_TBL_ACCESS),
	C(MLX5_OPCODE_MMO),
	C(MLX5_CQE_REQ), C(MLX5_CQE_RESP_WR_IMM), C(MLX5_CQE_RESP_SEND), C(MLX5_CQE_RESP_SEND_IMM),
	C(MLX5_CQE_RESP_SEND_INV), C(MLX5_CQE_RESIZE_CQ), C(MLX5_CQE_NO_PACKET), C(MLX5_CQE_SIG_ERR),
	C(MLX5_CQE_REQ_ERR), C(MLX5_CQE_RESP_ERR), C(MLX5_CQE_INVALID),
	C(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR), C(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR),
	C(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR), C(MLX5_CQE_SYNDROME_WR_FLUSH_ERR), C(MLX5_CQE_SYNDROME_MW_BIND_ERR),
	C(MLX5_CQE_SYNDROME_BAD_RESP_ERR), C(MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR),
	C(MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR), C(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR),
	C(MLX5_CQE_SYNDROME_REMOTE_OP_ERR), C(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR),
	C(MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR), C(MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR),
	C(MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT),
	C(MLX5_WQE_CTRL_CQ_UPDATE), C(MLX5_WQE_CTRL_SOLICITED), C(MLX5_WQE_CTRL_FENCE),
	C(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE),
};
#undef C
size_t oracle_const_count(void) { return sizeof(consts) / sizeof(consts[0]); }
const struct oracle_const *oracle_const_at(size_t i) { return i < oracle_const_count() ? &consts[i] : NULL; }

/* The generated header must agree with rdma-core wherever both declare a
 * field: checked by the C compiler at build time. */
#define SAME(s, f) \
	_Static_assert(offsetof(struct s, f) == offsetof(struct marrow_##s, f) && \
			       sizeof(((struct s *)0)->f) == sizeof(((struct marrow_##s *)0)->f), \
		       #s "." #f " differs between mlx5dv.h and marrow/generated/mlx5.h")
SAME(mlx5_wqe_ctrl_seg, opmod_idx_opcode);
SAME(mlx5_wqe_ctrl_seg, qpn_ds);
SAME(mlx5_wqe_ctrl_seg, signature);
SAME(mlx5_wqe_ctrl_seg, dci_stream_channel_id);
SAME(mlx5_wqe_ctrl_seg, fm_ce_se);
SAME(mlx5_wqe_ctrl_seg, imm);
SAME(mlx5_wqe_data_seg, byte_count);
SAME(mlx5_wqe_data_seg, lkey);
SAME(mlx5_wqe_data_seg, addr);
SAME(mlx5_wqe_raddr_seg, raddr);
SAME(mlx5_wqe_raddr_seg, rkey);
SAME(mlx5_wqe_atomic_seg, swap_add);
SAME(mlx5_wqe_atomic_seg, compare);
SAME(mlx5_cqe64, wqe_counter);
SAME(mlx5_cqe64, op_own);
SAME(mlx5_cqe64, sop_drop_qpn);
SAME(mlx5_cqe64, byte_cnt);
SAME(mlx5_err_cqe, syndrome);
SAME(mlx5_err_cqe, vendor_err_synd);
SAME(mlx5_err_cqe, s_wqe_opcode_qpn);
_Static_assert(sizeof(struct mlx5_wqe_ctrl_seg) == sizeof(struct marrow_mlx5_wqe_ctrl_seg), "ctrl size");
_Static_assert(sizeof(struct mlx5_wqe_av) == sizeof(struct marrow_mlx5_wqe_av), "av size");
_Static_assert(sizeof(struct mlx5_cqe64) == sizeof(struct marrow_mlx5_cqe64), "cqe64 size");
_Static_assert(sizeof(struct mlx5_err_cqe) == sizeof(struct marrow_mlx5_err_cqe), "err_cqe size");
