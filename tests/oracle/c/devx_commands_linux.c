/*
 * Oracle harness: the devx CREATE_CQ mailbox built with DEVX_SET from
 * <infiniband/mlx5dv.h> over the kernel's include/linux/mlx5/mlx5_ifc.h
 * (rdma-core's copy has no cqc), with the values marrow-verbs' devx.rs sets.
 * The three UMEM fields the kernel header leaves reserved are written at the
 * places rdma-core's tests/mlx5_prm_structs.py gives them (CreateCqIn,
 * SwCqc; checked in tests/mlx5_ifc.rs).
 */
#include <infiniband/mlx5dv.h>
#include <string.h>
typedef uint8_t u8;
#define BIT(n) (1UL << (n))
#define BIT_ULL(n) (1ULL << (n))
#include "linux/mlx5/mlx5_ifc.h"

size_t devx_create_cq_in(uint8_t *in, uint32_t log_cq_size, uint32_t uar, uint32_t eqn, uint32_t umem_id,
			 uint64_t umem_off, uint32_t dbr_umem, uint64_t dbr_off, int cc)
{
	memset(in, 0, DEVX_ST_SZ_BYTES(create_cq_in));
	DEVX_SET(create_cq_in, in, opcode, MLX5_CMD_OP_CREATE_CQ);
	void *c = DEVX_ADDR_OF(create_cq_in, in, cq_context);
	DEVX_SET(cqc, c, cqe_sz, 0);
	DEVX_SET(cqc, c, cc, cc);
	DEVX_SET(cqc, c, oi, 1);
	DEVX_SET(cqc, c, dbr_umem_valid, 1);
	DEVX_SET(cqc, c, log_cq_size, log_cq_size);
	DEVX_SET(cqc, c, uar_page, uar);
	DEVX_SET(cqc, c, log_page_size, 0);
	DEVX_SET(cqc, c, c_eqn_or_apu_element, eqn);
	DEVX_SET64(cqc, c, dbr_addr, dbr_off);
	*(__be32 *)((uint8_t *)c + 4) = htobe32(dbr_umem);        /* SwCqc dbr_umem_id */
	*(__be64 *)(in + 0x50) = htobe64(umem_off);                /* CreateCqIn e_mtt_pointer_or_cq_umem_offset */
	*(__be32 *)(in + 0x58) = htobe32(umem_id);                 /* CreateCqIn cq_umem_id */
	DEVX_SET(create_cq_in, in, cq_umem_valid, 1);
	return DEVX_ST_SZ_BYTES(create_cq_in);
}
