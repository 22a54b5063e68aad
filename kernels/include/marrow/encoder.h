/*
 * marrow device code: the encoder. One WQE (control, remote address, atomic
 * and data segments, big endian, as rdma-core's mlx5dv_set_ctrl_seg and
 * mlx5dv_set_data_seg write them), then the doorbell record and the 8-byte
 * doorbell in NVSHMEM's (ibgda_ring_db) or rdma-core's convention. Held to
 * marrow_mlx5::wqe::build_wqe and rdma-core by tests/oracle's differential
 * test.
 */
#ifndef MARROW_ENCODER_H
#define MARROW_ENCODER_H

#include "marrow/barriers.h"
#include "marrow/channel.h"

namespace marrow {

/* ------------------------------------------------------------ the WQE and the doorbell */

/* What one WQE carries. */
struct Op {
    uint8_t opcode, opmod;
    uint64_t raddr;
    uint32_t rkey;
    uint64_t laddr;
    uint32_t lkey, len;
    uint64_t swap_add, compare;
    uint8_t fm_ce_se;
};

/* MLX5_WQE_CTRL_CQ_UPDATE: this WQE gets a CQE (fm_ce_se.ce = CQE_ALWAYS). */
constexpr uint8_t CQ_UPDATE = MARROW_MLX5_WQE_CTRL_CE_CQE_ALWAYS << MARROW_MLX5_WQE_CTRL_SEG_CE_SHIFT;

/* Where the field at byte `off` of a segment lies in the little-endian
 * 64-bit word that holds it: word off / 8, shifted by word_shift(off). */
MARROW_FN constexpr uint32_t word_shift(uint32_t off) { return 8 * (off % 8); }

/* The words write_wqe fills, each field in the word the generated layout
 * puts it in (the segments are 16 bytes: two words each). */
static_assert(MARROW_MLX5_WQE_CTRL_SEG_OPMOD_IDX_OPCODE_OFF / 8 == 0 && MARROW_MLX5_WQE_CTRL_SEG_QPN_DS_OFF / 8 == 0 &&
                  MARROW_MLX5_WQE_CTRL_SEG_FM_CE_SE_OFF / 8 == 1,
              "ctrl: opmod_idx_opcode and qpn_ds in word 0, fm_ce_se in word 1");
static_assert(MARROW_MLX5_WQE_RADDR_SEG_RADDR_OFF == 0 && MARROW_MLX5_WQE_RADDR_SEG_RKEY_OFF == 8,
              "raddr: raddr the first word, rkey the low half of the second");
static_assert(MARROW_MLX5_WQE_DATA_SEG_BYTE_COUNT_OFF / 8 == 0 && MARROW_MLX5_WQE_DATA_SEG_LKEY_OFF / 8 == 0 &&
                  MARROW_MLX5_WQE_DATA_SEG_ADDR_OFF == 8,
              "data: byte_count and lkey in word 0, addr word 1");
static_assert(MARROW_MLX5_WQE_ATOMIC_SEG_SWAP_ADD_OFF == 0 && MARROW_MLX5_WQE_ATOMIC_SEG_COMPARE_OFF == 8,
              "atomic: swap_add word 0, compare word 1");

/* Write the WQE for `op` at index `idx`: 64 bytes, stores of 16. Returns
 * its first 8 bytes (opmod_idx_opcode, qpn_ds), rdma-core's doorbell value.
 * Untraced: write_wqe below adds the trace entry; a fast path that has seen
 * the trace flag clear calls this directly. */
MARROW_FN uint64_t write_wqe_untraced(const Channel &ch, uint64_t idx, const Op &op, bool signaled = true) {
    const marrow_gcrb_config *c = ch.cfg();
    uint8_t *w = (uint8_t *)c->sq_base + (idx & (c->sq_wqebbs - 1)) * MARROW_MLX5_SEND_WQE_BB;
    bool atomic = op.opcode == MARROW_MLX5_OPCODE_ATOMIC_FA || op.opcode == MARROW_MLX5_OPCODE_ATOMIC_CS;
    uint32_t ds = op.opcode == MARROW_MLX5_OPCODE_NOP ? 1 : (atomic ? 4 : 3);
    /* The 64 bytes as eight little-endian words of big-endian fields, laid
     * out as marrow/generated/mlx5.h declares them (asserted below), so the
     * ring gets whole 16-byte stores and no field is written twice. */
    static_assert(MARROW_MLX5_WQE_CTRL_SEG_SIZE == 16 && MARROW_MLX5_WQE_RADDR_SEG_SIZE == 16 &&
                      MARROW_MLX5_WQE_DATA_SEG_SIZE == 16 && MARROW_MLX5_WQE_ATOMIC_SEG_SIZE == 16,
                  "16-byte segments");
    uint64_t seg[8];
    /* ctrl: opmod_idx_opcode and qpn_ds; signature, dci_stream_channel_id
     * and imm stay 0 */
    uint32_t opmod_idx_opcode = ((uint32_t)op.opmod << MARROW_MLX5_WQE_CTRL_SEG_OPMOD_SHIFT) |
                                ((uint32_t)(idx & MARROW_MLX5_WQE_CTRL_SEG_WQE_INDEX_MASK) << MARROW_MLX5_WQE_CTRL_SEG_WQE_INDEX_SHIFT) |
                                op.opcode;
    uint32_t qpn_ds = (c->qpn << MARROW_MLX5_WQE_CTRL_SEG_QPN_SHIFT) | ds;
    seg[0] = ((uint64_t)be32(opmod_idx_opcode) << word_shift(MARROW_MLX5_WQE_CTRL_SEG_OPMOD_IDX_OPCODE_OFF)) |
             ((uint64_t)be32(qpn_ds) << word_shift(MARROW_MLX5_WQE_CTRL_SEG_QPN_DS_OFF));
    seg[1] = (uint64_t)(signaled ? op.fm_ce_se : op.fm_ce_se & ~CQ_UPDATE)
             << word_shift(MARROW_MLX5_WQE_CTRL_SEG_FM_CE_SE_OFF);
    /* raddr: raddr, rkey (the rest reserved) */
    seg[2] = be64(op.raddr);
    seg[3] = (uint64_t)be32(op.rkey) << word_shift(MARROW_MLX5_WQE_RADDR_SEG_RKEY_OFF);
    /* data: byte_count, lkey, addr */
    uint64_t d0 = ((uint64_t)be32(op.len) << word_shift(MARROW_MLX5_WQE_DATA_SEG_BYTE_COUNT_OFF)) |
                  ((uint64_t)be32(op.lkey) << word_shift(MARROW_MLX5_WQE_DATA_SEG_LKEY_OFF)),
             d1 = be64(op.laddr);
    if (atomic) {
        /* atomic: swap_add, compare */
        seg[4] = be64(op.swap_add);
        seg[5] = be64(op.compare);
        seg[6] = d0;
        seg[7] = d1;
    } else {
        seg[4] = d0;
        seg[5] = d1;
        seg[6] = seg[7] = 0;
    }
    for (int i = 0; i < 8; i += 2) store_wqe16((uint64_t *)w + i, seg[i], seg[i + 1]);
    return seg[0];
}

MARROW_FN uint64_t write_wqe(const Channel &ch, uint64_t idx, const Op &op, bool signaled = true) {
    uint64_t ctrl = write_wqe_untraced(ch, idx, op, signaled);
    trace(ch, MARROW_GCRB_EVENT_POST, idx, op.opcode);
    return ctrl;
}

/* Lanes a posting group can have: a warp. */
constexpr uint64_t MAX_GROUP = 32;

/* Ring at least once per this many WQEBBs (NVSHMEM_IBGDA_NUM_REQUESTS_IN_BATCH),
 * on shared and exclusive channels alike. */
constexpr uint64_t RING_BATCH = 32;

/* Doorbell record, then doorbell, for the WQEBBs below `end`; the caller
 * has ordered their WQE stores before this (to_device). `last_ctrl` is the
 * last WQE's first 8 bytes, the doorbell with flags.db_ctrl_bytes.
 * `waited_for`: a caller waits for this ring's last CQE (a blocking call,
 * quiet's NOP), the rings flags.early_doorbell makes early. */
MARROW_FN void ring_untraced(const Channel &ch, uint64_t end, uint64_t last_ctrl, bool waited_for) {
    uint32_t *dbrec = (uint32_t *)ch.c.dbrec_addr;
    uint64_t db = ch.flag(MARROW_GCRB_CONFIG_DB_CTRL_BYTES_SHIFT)
                      ? last_ctrl
                      : ((uint64_t)be32((uint32_t)(end & MARROW_MLX5_UAR_DB_WQE_INDEX_MASK) << MARROW_MLX5_UAR_DB_WQE_INDEX_SHIFT)
                         << word_shift(MARROW_MLX5_UAR_DB_OPMOD_IDX_OPCODE_OFF)) |
                            ((uint64_t)be32(ch.c.qpn << MARROW_MLX5_UAR_DB_QPN_SHIFT) << word_shift(MARROW_MLX5_UAR_DB_QPN_DS_OFF));
    bool early = waited_for && ch.flag(MARROW_GCRB_CONFIG_EARLY_DOORBELL_SHIFT);
    if (early) {
        /* DOCA's early ringing (doca_gpu_dev_verbs_submit_db): the WQEs are
         * fenced already, and the doorbell itself says how far to go, so
         * the NIC can start one system-scope fence sooner. The record and
         * the second ring below cover a NIC that reads the record instead
         * (doorbell recovery); a NIC that already went that far ignores
         * the repeat. Only where someone waits for the CQE: a put_nbi's
         * ring is waited for by nobody, and a second MMIO store per ring
         * would cost its posting rate for no latency anyone sees. */
        mmio_store64((uint64_t *)ch.c.db_addr, db);
    }
    store_device_u32(&dbrec[MARROW_MLX5_SND_DBR], be32((uint32_t)end & MARROW_MLX5_QP_DBREC_SEND_WQE_COUNTER_MASK));
    /* Doorbell record before the doorbell that makes the NIC read it.
     * After an early ring the NIC has its index from that doorbell, and
     * the second ring only covers a lost first one, which it does without
     * the record. There a shared channel fences at GPU scope, as DOCA's
     * submit_db does by default: enough for the next holder of the chain,
     * whose store to the record then follows ours (stores to one location
     * keep causality order, so the record never goes backwards), while a
     * system-scope fence would be waited out in full by its blocking put.
     * An exclusive owner has no next holder. There the fence orders
     * nothing a NIC needs either, but holds back the wait's first CQE
     * read, which follows at once: a read that reaches host memory before
     * the CQE costs a whole PCIe round trip. Holding back is a matter of
     * time, not of scope, so it stays system-scope with
     * flags.gpu_scope_fences too: a GPU-scope fence there lowered the
     * median but let some first reads leave too early, on the H200 and
     * on an H100 (docs/PERFORMANCE.md). Without an early ring this is the
     * record's fence before the one doorbell, at the posting fences'
     * scope. */
    if (early && !ch.excl) {
        fence_release_gpu();
    } else if (early) {
        wc_start();
    } else {
        wc_start_at(ch.gpu_scope());
    }
    mmio_store64((uint64_t *)ch.c.db_addr, db);
#if !MARROW_GPU
    /* Out of the write-combining buffer before the chain moves on, so
     * doorbells of two holders reach the NIC in order. The GPU path
     * has no write-combining buffer to drain; like DOCA and NVSHMEM it
     * puts no fence after the doorbell store. */
    wc_flush();
#endif
    if (ch.excl) {
        /* An exclusive owner's heads reach the GCRB when its Channel ends
         * and in record_error: stores here would be waited for by the next
         * post's fence. */
        ch.own.prod = end;
    } else {
        store_relaxed(&ch.heads()->prod_idx, end);
    }
}

MARROW_FN void ring(const Channel &ch, uint64_t end, uint64_t last_ctrl, bool waited_for) {
    ring_untraced(ch, end, last_ctrl, waited_for);
    trace(ch, MARROW_GCRB_EVENT_DOORBELL, end, 0);
}

} /* namespace marrow */

#endif /* MARROW_ENCODER_H */
