/*
 * Oracle harness: devx QP command mailboxes built the way rdma-core's users
 * build them -- DEVX_SET/DEVX_SET64 from <infiniband/mlx5dv.h> over
 * rdma-core's providers/mlx5/mlx5_ifc.h -- with the values marrow-verbs'
 * devx.rs sets (which NVSHMEM's ibgda.cpp sets too). The Rust test compares
 * the bytes with marrow's builders.
 */
#include <infiniband/mlx5dv.h>
#include <string.h>
#include "mlx5_ifc.h"

size_t devx_create_qp_in(uint8_t *in, uint32_t pd, uint32_t uar, uint32_t log_sq, uint32_t cqn_snd, uint32_t cqn_rcv,
			 uint32_t wq_umem, uint32_t dbr_umem, uint64_t dbr_off)
{
	memset(in, 0, DEVX_ST_SZ_BYTES(create_qp_in));
	DEVX_SET(create_qp_in, in, opcode, MLX5_CMD_OP_CREATE_QP);
	void *q = DEVX_ADDR_OF(create_qp_in, in, qpc);
	DEVX_SET(qpc, q, st, MLX5_QPC_ST_RC);
	DEVX_SET(qpc, q, pm_state, MLX5_QPC_PM_STATE_MIGRATED);
	DEVX_SET(qpc, q, pd, pd);
	DEVX_SET(qpc, q, uar_page, uar);
	DEVX_SET(qpc, q, log_sq_size, log_sq);
	DEVX_SET(qpc, q, rq_type, 3); /* zero-length RQ */
	DEVX_SET(qpc, q, cqn_snd, cqn_snd);
	DEVX_SET(qpc, q, cqn_rcv, cqn_rcv);
	DEVX_SET(qpc, q, log_page_size, 0);
	DEVX_SET(qpc, q, dbr_umem_valid, 1);
	DEVX_SET(qpc, q, dbr_umem_id, dbr_umem);
	DEVX_SET64(qpc, q, dbr_addr, dbr_off);
	DEVX_SET(create_qp_in, in, wq_umem_id, wq_umem);
	DEVX_SET(create_qp_in, in, wq_umem_valid, 1);
	return DEVX_ST_SZ_BYTES(create_qp_in);
}

static void path(void *ads, uint32_t port, int remote, int roce, uint32_t rlid, const uint8_t *gid, uint32_t sgid,
		 const uint8_t *rmac, uint32_t ack_timeout)
{
	DEVX_SET(ads, ads, pkey_index, 0);
	DEVX_SET(ads, ads, vhca_port_num, port);
	if (!remote)
		return;
	DEVX_SET(ads, ads, ack_timeout, ack_timeout);
	if (!roce) {
		DEVX_SET(ads, ads, rlid, rlid);
		return;
	}
	DEVX_SET(ads, ads, grh, 1);
	memcpy(DEVX_ADDR_OF(ads, ads, rgid_rip), gid, 16);
	DEVX_SET(ads, ads, src_addr_index, sgid);
	DEVX_SET(ads, ads, hop_limit, 1);
	DEVX_SET(ads, ads, rmac_47_32, (uint32_t)rmac[0] << 8 | rmac[1]);
	DEVX_SET(ads, ads, rmac_31_0, (uint32_t)rmac[2] << 24 | (uint32_t)rmac[3] << 16 | (uint32_t)rmac[4] << 8 | rmac[5]);
}

size_t devx_rst2init_qp_in(uint8_t *in, uint32_t qpn, uint32_t port)
{
	memset(in, 0, DEVX_ST_SZ_BYTES(rst2init_qp_in));
	DEVX_SET(rst2init_qp_in, in, opcode, MLX5_CMD_OP_RST2INIT_QP);
	DEVX_SET(rst2init_qp_in, in, qpn, qpn);
	void *q = DEVX_ADDR_OF(rst2init_qp_in, in, qpc);
	DEVX_SET(qpc, q, rre, 1);
	DEVX_SET(qpc, q, rwe, 1);
	DEVX_SET(qpc, q, rae, 1);
	DEVX_SET(qpc, q, atomic_mode, 3);
	DEVX_SET(qpc, q, pm_state, MLX5_QPC_PM_STATE_MIGRATED);
	path(DEVX_ADDR_OF(qpc, q, primary_address_path), port, 0, 0, 0, NULL, 0, NULL, 0);
	return DEVX_ST_SZ_BYTES(rst2init_qp_in);
}

size_t devx_init2rtr_qp_in(uint8_t *in, uint32_t qpn, uint32_t mtu, uint32_t remote_qpn, uint32_t psn, uint32_t log_rra,
			   uint32_t min_rnr, uint32_t port, int roce, uint32_t rlid, const uint8_t *gid, uint32_t sgid,
			   const uint8_t *rmac, uint32_t ack_timeout)
{
	memset(in, 0, DEVX_ST_SZ_BYTES(init2rtr_qp_in));
	DEVX_SET(init2rtr_qp_in, in, opcode, MLX5_CMD_OP_INIT2RTR_QP);
	DEVX_SET(init2rtr_qp_in, in, qpn, qpn);
	void *q = DEVX_ADDR_OF(init2rtr_qp_in, in, qpc);
	DEVX_SET(qpc, q, mtu, mtu);
	DEVX_SET(qpc, q, log_msg_max, 30);
	DEVX_SET(qpc, q, remote_qpn, remote_qpn);
	DEVX_SET(qpc, q, next_rcv_psn, psn);
	DEVX_SET(qpc, q, log_rra_max, log_rra);
	DEVX_SET(qpc, q, min_rnr_nak, min_rnr);
	path(DEVX_ADDR_OF(qpc, q, primary_address_path), port, 1, roce, rlid, gid, sgid, rmac, ack_timeout);
	return DEVX_ST_SZ_BYTES(init2rtr_qp_in);
}

size_t devx_rtr2rts_qp_in(uint8_t *in, uint32_t qpn, uint32_t retry, uint32_t rnr, uint32_t psn, uint32_t log_sra,
			  uint32_t ack_timeout, uint32_t port)
{
	memset(in, 0, DEVX_ST_SZ_BYTES(rtr2rts_qp_in));
	DEVX_SET(rtr2rts_qp_in, in, opcode, MLX5_CMD_OP_RTR2RTS_QP);
	DEVX_SET(rtr2rts_qp_in, in, qpn, qpn);
	void *q = DEVX_ADDR_OF(rtr2rts_qp_in, in, qpc);
	DEVX_SET(qpc, q, retry_count, retry);
	DEVX_SET(qpc, q, rnr_retry, rnr);
	DEVX_SET(qpc, q, next_send_psn, psn);
	DEVX_SET(qpc, q, log_sra_max, log_sra);
	void *a = DEVX_ADDR_OF(qpc, q, primary_address_path);
	DEVX_SET(ads, a, ack_timeout, ack_timeout);
	DEVX_SET(ads, a, vhca_port_num, port);
	return DEVX_ST_SZ_BYTES(rtr2rts_qp_in);
}
