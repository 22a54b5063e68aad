// The GCRB page of a probe's channel: a send queue of `sq` WQEBBs at `ring`,
// its doorbell record and doorbell in host memory that nothing consumes, a
// 1 MiB local window at `local`, two PEs' windows of 1 MiB; heads, error
// block and ready marks at zero. Shared by the posting probes here, with the
// store floor's two halves (marrow_store_floor_kernel's stores and fences).
#pragma once
#include <cstring>
#include "marrow/device.h"

inline void probe_gcrb(uint8_t (&img)[MARROW_GCRB_PAGE_SIZE], uint32_t flags, uint8_t *ring, uint32_t sq, uint8_t *dbrec,
                       uint8_t *db, uint8_t *local) {
    memset(img, 0, sizeof img);
    marrow_gcrb_config *c = (marrow_gcrb_config *)(img + MARROW_GCRB_OFF_CONFIG);
    c->magic = MARROW_GCRB_MAGIC;
    c->version = MARROW_GCRB_VERSION;
    c->qpn = 0x100;
    c->flags = flags;
    c->sq_base = (uint64_t)ring;
    c->sq_wqebbs = sq;
    c->sq_stride = MARROW_MLX5_SEND_WQE_BB;
    c->dbrec_addr = (uint64_t)dbrec;
    c->db_addr = (uint64_t)db;
    c->db_size = 8;
    c->cq_ncqe = sq;
    c->cq_base = (uint64_t)(dbrec + 1024);
    c->local_lkey = 0x11;
    c->local_base = (uint64_t)local;
    c->local_len = 1 << 20;
    c->timeout_ns = 1000000000ull;
    c->key_count = 2;
    c->transport = MARROW_GCRB_TRANSPORT_MLX5;
    marrow_gcrb_key *k = (marrow_gcrb_key *)(img + MARROW_GCRB_OFF_KEYS);
    for (int p = 0; p < 2; p++) k[p].raddr = 0x10000000ull * (p + 1), k[p].rkey = 0x22 + p, k[p].rlen_pages = 256;
}

// The store floor's WQE: 64 bytes of filler at WQEBB `slot` of `ring`, in
// the four 16-byte stores a post makes.
__device__ __forceinline__ void floor_wqe(uint8_t *ring, uint32_t slot, uint32_t i) {
    uint64_t *w = (uint64_t *)(ring + (uint64_t)slot * MARROW_MLX5_SEND_WQE_BB);
    for (int k = 0; k < 8; k += 2) marrow::store_wqe16(w + k, i + k, i + k + 1);
}

// The store floor's ring: the fence before the doorbell record, the record,
// the fence before the doorbell, the doorbell (`db` a scratch word).
__device__ __forceinline__ void floor_ring(uint32_t *dbrec, uint64_t *db, uint32_t i) {
    marrow::to_device();
    marrow::store_device_u32(dbrec, marrow::be32(i));
    marrow::wc_start();
    marrow::mmio_store64(db, i);
}
