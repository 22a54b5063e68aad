/*
 * marrow device API: GPU (or CPU) threads post mlx5 WQEs and ring the NIC's
 * doorbell themselves, through one channel (QP + CQ) described by its GCRB.
 * Written once; compiled for the GPU (nvcc/NVRTC, sm_90) and the CPU (g++).
 *
 * The protocol follows NVSHMEM's (docs/SOURCES.md §2.2-2.4):
 *   1. reserve WQEBBs: atomic add on gcrb_heads.resv_head, then wait for room
 *      by polling the CQ (NVSHMEM ibgda_wait_for_slot_availability); lanes of
 *      a warp that post together reserve once (warp-aggregated);
 *   2. write the WQE (big endian, generated layouts) into the ring, fence;
 *   3. take the ready chain in order: wait until ready_head is our index
 *      (only we can move it on), or, marked ready (the ready marks), until
 *      a holder's run passes our WQEBBs; while holding it, claim the run
 *      of marked WQEBBs after ours, and
 *   4. ring when NVSHMEM would (last reserver, a batch of 32 crossed) or
 *      someone may wait for room: doorbell record = next WQEBB (BE32), then
 *      one 8-byte doorbell {BE32(pi << 8), BE32(qpn << 8)} (ibgda_ring_db),
 *      or rdma-core's control bytes (flags.db_ctrl_bytes); holding the chain
 *      is what keeps doorbell records from going backwards, with no lock;
 *      then release ready_head past our WQEs;
 *   5. completions: CQEs by owner bit (or slot 0 of a collapsed CQ), consumer
 *      index published in the CQ doorbell record.
 * An exclusive channel (gcrb_config.flags.exclusive: one owner, a thread or
 * a warp) keeps the heads in the owner's registers: no atomic in 1, no
 * chain in 3, no CQ lock in 5.
 * Transport P2P (gcrb_config.transport) replaces 1-5 with the threads' own
 * loads, stores and system-scope atomics on peer-mapped GPU memory, and
 * with a relay (gcrb_config.relay_ring) hands large puts to a host thread
 * that has the copy engine make them.
 * Every wait has a runtime timeout (gcrb_config.timeout_ns): on expiry the
 * decoded state goes into gcrb_error and the call returns MARROW_E_TIMEOUT.
 * An error CQE returns MARROW_E_CQE_BASE - syndrome with the CQE decoded
 * into gcrb_error. Nothing hangs, nothing traps.
 */
#ifndef MARROW_DEVICE_H
#define MARROW_DEVICE_H

/* One file per concern, each including what it builds on:
 *   platform.h        byte order, clock, atomics, loads and stores, GPU and CPU
 *   barriers.h        the fences that order what the NIC reads, by purpose
 *   group.h           a warp's posting groups
 *   copy.h            peer memory: system-scope atomics, bulk copies
 *   channel.h         the Channel, status codes, errors, deadlines, windows
 *   cq.h              the CQ walk; a shared channel's poll and wait
 *   encoder.h         the WQE, the doorbell record and the doorbell
 *   post_shared.h     posting on a shared channel (reserve, ready chain)
 *   post_exclusive.h  posting on an exclusive channel (the owner's registers)
 *   p2p.h             transport P2P and the copy-engine relay
 * and below, the public API. */
#include "marrow/channel.h"
#include "marrow/copy.h"
#include "marrow/cq.h"
#include "marrow/encoder.h"
#include "marrow/p2p.h"
#include "marrow/post_exclusive.h"
#include "marrow/post_shared.h"

namespace marrow {

/* ------------------------------------------------------------ the API */

/* Every call below chooses its path once, here or at its top: transport
 * P2P or MLX5, then on MLX5 a shared or an exclusive channel. */

/* Wait until the WQEBBs below `upto` completed. `own`: WQEBB upto - 1 is
 * the caller's own WQE (cq.h poll_cq). */
MARROW_FN int wait_done(const Channel &ch, uint64_t upto, uint32_t wait, bool own) {
    return ch.excl ? wait_own(ch, upto, wait) : wait_shared(ch, upto, wait, own);
}

/* Post one WQE per calling thread (post_shared, post_own). */
MARROW_FN int post(const Channel &ch, const Op &op, uint64_t *idx_out, bool force_ring, bool lazy = false) {
    return ch.excl ? post_own(ch, op, idx_out, force_ring, lazy) : post_shared(ch, op, idx_out, force_ring, lazy);
}

/* A WRITE or READ between local offset `loff` and PE `pe`'s window at `roff`. */
MARROW_FN int rw_op(const Channel &ch, uint8_t opcode, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len, Op *op) {
    *op = Op{};
    /* The window checks allow any length their windows hold; a pointer
     * data segment's byte_count also has bit 31 clear (set, the NIC reads
     * the segment as inline data: MLX5_INLINE_SEG). */
    int rc = ends(ch, pe, roff, loff, len, &op->raddr, &op->rkey, &op->laddr);
    if (len & MARROW_MLX5_INLINE_SEG) rc = E_RANGE;
    op->opcode = opcode;
    op->lkey = ch.c.local_lkey;
    op->len = len;
    op->fm_ce_se = CQ_UPDATE;
    return rc;
}

/* Non-blocking put: `len` bytes from local offset `loff` to PE `pe`'s window at `roff`. */
MARROW_FN int put_nbi(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len) {
    if (p2p(ch)) return p2p_put(ch, pe, roff, loff, len, nullptr);
    Op op;
    int rc = rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, pe, roff, loff, len, &op);
    return rc != OK ? rc : post(ch, op, nullptr, false, ch.flag(MARROW_GCRB_CONFIG_LAZY_NBI_DOORBELL_SHIFT));
}

/* Blocking put: returns when the source may be reused (the WQE completed;
 * with P2P, once the stores are issued or the relay's copy is made). */
MARROW_FN int put(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len) {
    if (p2p(ch)) {
        uint64_t at;
        int rc = p2p_put(ch, pe, roff, loff, len, &at);
        return rc != OK || at == 0 ? rc : relay_wait(ch, at);
    }
    Op op;
    uint64_t idx;
    int rc = rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, pe, roff, loff, len, &op);
    if (rc == OK) rc = post(ch, op, &idx, true);
    return rc != OK ? rc : wait_done(ch, idx + 1, MARROW_GCRB_WAIT_CQ, true);
}

/* Blocking get: `len` bytes from PE `pe` at `roff` into local offset `loff`. */
MARROW_FN int get(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len) {
    if (p2p(ch)) {
        uint8_t *r, *l;
        int rc = p2p_ends(ch, pe, roff, loff, len, &r, &l);
        /* Loads of what the peer's earlier puts and atomics wrote. */
        from_device();
        if (rc == OK) copy_strided(l, r, len, 0, 1);
        return rc;
    }
    Op op;
    uint64_t idx;
    int rc = rw_op(ch, MARROW_MLX5_OPCODE_RDMA_READ, pe, roff, loff, len, &op);
    if (rc == OK) rc = post(ch, op, &idx, true);
    if (rc == OK) rc = wait_done(ch, idx + 1, MARROW_GCRB_WAIT_CQ, true);
    /* The NIC wrote the local buffer: read it only after the CQE. */
    from_device();
    return rc;
}

/* An 8-byte atomic WQE on PE `pe` at `roff`, its result landing at local `result_loff`. */
MARROW_FN int atomic_op(const Channel &ch, uint8_t opcode, uint32_t pe, uint64_t roff, uint64_t result_loff,
                        uint64_t swap_add, uint64_t compare, uint8_t fm_ce_se, Op *op) {
    *op = Op{};
    int rc = ends(ch, pe, roff, result_loff, 8, &op->raddr, &op->rkey, &op->laddr);
    if (rc != OK) return rc;
    op->opcode = opcode;
    op->lkey = ch.c.local_lkey;
    op->len = 8;
    op->swap_add = swap_add;
    op->compare = compare;
    op->fm_ce_se = fm_ce_se;
    return OK;
}

MARROW_FN int atomic(const Channel &ch, uint8_t opcode, uint32_t pe, uint64_t roff, uint64_t result_loff, uint64_t swap_add,
                     uint64_t compare, uint64_t *old) {
    if (p2p(ch)) {
        uint8_t *r, *l;
        int rc = p2p_ends(ch, pe, roff, result_loff, 8, &r, &l);
        if (rc != OK) return rc;
        uint64_t v = opcode == MARROW_MLX5_OPCODE_ATOMIC_FA ? atomic_add_sys((uint64_t *)r, swap_add)
                                                            : cas_sys((uint64_t *)r, compare, swap_add);
        /* As a NIC would: the fetched value lands in the local window too. */
        *(volatile uint64_t *)l = v;
        if (old) *old = v;
        return OK;
    }
    Op op;
    int rc = atomic_op(ch, opcode, pe, roff, result_loff, swap_add, compare, CQ_UPDATE, &op);
    if (rc != OK) return rc;
    uint64_t idx;
    rc = post(ch, op, &idx, true);
    if (rc == OK) rc = wait_done(ch, idx + 1, MARROW_GCRB_WAIT_CQ, true);
    if (rc != OK) return rc;
    /* The fetched value is in local memory the NIC wrote. */
    from_device();
    if (old) *old = *(volatile uint64_t *)op.laddr;
    return OK;
}

/* Fetch-and-add on PE `pe` at `roff`; the old value lands at local `result_loff` and in *old. */
MARROW_FN int atomic_fetch_add(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t value, uint64_t result_loff,
                               uint64_t *old) {
    return atomic(ch, MARROW_MLX5_OPCODE_ATOMIC_FA, pe, roff, result_loff, value, 0, old);
}

/* Compare-and-swap on PE `pe` at `roff`. */
MARROW_FN int atomic_compare_swap(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t compare, uint64_t swap,
                                  uint64_t result_loff, uint64_t *old) {
    return atomic(ch, MARROW_MLX5_OPCODE_ATOMIC_CS, pe, roff, result_loff, swap, compare, old);
}

/* Put, then add `sig_add` to the signal word at `sig_roff`, ordered after the data:
 * RC executes a QP's WQEs in order, and the fence bit keeps the atomic behind
 * the write (rdma-core's IBV_SEND_FENCE, MLX5_FENCE_MODE_SMALL_AND_FENCE). */
MARROW_FN int put_signal(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len, uint64_t sig_roff,
                         uint64_t sig_add, uint64_t scratch_loff) {
    if (p2p(ch)) {
        uint8_t *r, *l;
        int rc = p2p_ends(ch, pe, sig_roff, scratch_loff, 8, &r, &l);
        uint64_t at = 0;
        if (rc == OK) rc = p2p_put(ch, pe, roff, loff, len, &at);
        /* A relayed put's bytes are the copy engine's: the signal waits for them. */
        if (rc == OK && at) rc = relay_wait(ch, at);
        if (rc != OK) return rc;
        /* The data before the signal, for whoever sees the signal. */
        to_device();
        atomic_add_sys((uint64_t *)r, sig_add);
        return OK;
    }
    int rc = put_nbi(ch, pe, roff, loff, len);
    if (rc != OK) return rc;
    Op op;
    rc = atomic_op(ch, MARROW_MLX5_OPCODE_ATOMIC_FA, pe, sig_roff, scratch_loff, sig_add, 0,
                   CQ_UPDATE | (MARROW_MLX5_FENCE_MODE_SMALL_AND_FENCE << MARROW_MLX5_WQE_CTRL_SEG_FM_SHIFT), &op);
    if (rc != OK) return rc;
    return post(ch, op, nullptr, true);
}

/* Order this thread's earlier puts before its later ones: a no-op on one RC
 * QP, which executes in order; kept so code ports from NVSHMEM unchanged.
 * P2P with a relay: stores after it must not overtake a relayed put, so it
 * waits for the relay's copies (a timeout sticks for the next call). */
MARROW_FN void fence(const Channel &ch) {
    to_device();
    if (p2p(ch)) (void)relay_drain(ch);
}

/* Wait for every WQE reserved so far to complete. The last of them was
 * rung by its holder of the ready chain (it saw itself last, or a later
 * holder rang for it), so quiet waits for readiness, then completions. */
MARROW_FN int quiet(const Channel &ch) {
    if (p2p(ch)) {
        fence_quiet();
        int rc = relay_drain(ch);
        return rc != OK ? rc : sticky_error(ch);
    }
    if (ch.excl) return quiet_own(ch);
    marrow_gcrb_heads *h = ch.heads();
    uint64_t target = load_acquire(&h->resv_head);
    if (ch.flag(MARROW_GCRB_CONFIG_LAZY_NBI_DOORBELL_SHIFT) && load_relaxed(&h->prod_idx) < target &&
        atomic_max(&h->quiet_claim, target + 1) < target) {
        /* Lazy put_nbi may have left WQEs unrung: a signaled NOP rings them
         * (a holder of the chain, so no doorbell goes backwards), and its
         * completion, in order, means theirs. One NOP per quiet epoch: the
         * thread that raises quiet_claim past its target posts it, reserved
         * at or after that target, so it covers every target up to the
         * claim, its own slot included; a quiet that finds the claim at or
         * past its target waits for that NOP below instead of posting one
         * (a whole grid's quiet would otherwise post one per thread). */
        Op nop = Op{};
        nop.opcode = MARROW_MLX5_OPCODE_NOP;
        nop.fm_ce_se = CQ_UPDATE;
        uint64_t idx;
        int rc = post(ch, nop, &idx, true);
        return rc != OK ? rc : wait_done(ch, idx + 1, MARROW_GCRB_WAIT_CQ, true);
    }
    int rc = wait_ready(ch, target).rc;
    return rc != OK ? rc : wait_done(ch, target, MARROW_GCRB_WAIT_CQ, false);
}

/* An 8-byte value put (NVSHMEM's nvshmem_uint64_p): with P2P one store.
 * On MLX5 it needs an inline-data WQE, which device.h does not build yet. */
MARROW_FN int p(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t value) {
    if (!p2p(ch)) return E_UNSUPPORTED;
    uint8_t *r, *l;
    int rc = p2p_ends(ch, pe, roff, 0, 0, &r, &l);
    if (rc == OK) store_device_u64((uint64_t *)r, value);
    return rc;
}

/* Wait until the 8-byte word at local offset `loff` is at least `value`
 * (NVSHMEM's signal_wait_until with NVSHMEM_CMP_GE): what peers' puts,
 * put_signal and atomics (or the NIC's writes) land in is polled with
 * system-scope acquire loads, under the channel's timeout. */
MARROW_FN int wait_until_ge(const Channel &ch, uint64_t loff, uint64_t value) {
    uint64_t laddr;
    int rc = local(ch, loff, 8, &laddr);
    if (rc != OK) return rc;
    /* Acquire polls (what was written before the value, put_signal's
     * data, is then read after it), the sticky status and the clock only
     * every 256 of them: a poll is one load. A relaxed poll and a fence
     * after it measured slower on the H200: the system-scope fence waits
     * for this thread's outstanding peer stores. */
    Deadline d;
    uint32_t polls = 0;
    while (load_acquire_sys((const uint64_t *)laddr) < value) {
        if (++polls % 256) continue;
        rc = sticky_error(ch);
        if (rc != OK) return rc;
        if (d.expired(ch, MARROW_GCRB_WAIT_SIGNAL)) return E_TIMEOUT;
    }
    return OK;
}

#if MARROW_GPU
/* Block-cooperative put of one message (NVSHMEM's nvshmemx_putmem_nbi_block):
 * every thread of the CTA calls with the same arguments. P2P: the threads
 * copy it together, coalesced, or with `tma` through shared memory and
 * bulk asynchronous stores; a message the relay takes is one descriptor
 * from thread 0. MLX5: thread 0 posts one WQE. */
MARROW_FN int putmem_nbi_block(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint64_t len, bool tma = false) {
    __shared__ int block_rc;
    uint32_t t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    uint32_t n = blockDim.x * blockDim.y * blockDim.z;
    if (p2p(ch) && relayed(ch, len)) {
        /* One descriptor for the block, after every thread's source writes. */
        __syncthreads();
        if (t == 0) block_rc = p2p_put(ch, pe, roff, loff, len, nullptr);
        __syncthreads();
        return block_rc;
    }
    if (p2p(ch)) {
        uint8_t *r, *l;
        int rc = p2p_ends(ch, pe, roff, loff, len, &r, &l);
        if (rc != OK) return rc;
        /* TMA bulk stores need 16-byte aligned ends and a multiple of 16
         * bytes; anything else goes through the threads' own stores. */
        if (tma && aligned16((uint64_t)r | (uint64_t)l | len)) {
            copy_block_tma(r, l, len, t, n);
        } else {
            copy_strided(r, l, len, t, n);
        }
        return OK;
    }
    __syncthreads();
    /* A WQE's byte_count is 32 bits wide. */
    if (t == 0) block_rc = len != (uint32_t)len ? E_RANGE : put_nbi(ch, pe, roff, loff, (uint32_t)len);
    __syncthreads();
    return block_rc;
}

/* Warp-cooperative put: all 32 lanes call; they post as one group (one
 * reservation of 32 WQEBBs, one turn of the ready chain, one doorbell).
 * put_nbi does the same for whichever lanes call it together; this entry
 * point first reconverges the warp so the group is the whole warp. */
MARROW_FN int put_nbi_warp(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len) {
    __syncwarp(WHOLE_WARP);
    return put_nbi(ch, pe, roff, loff, len);
}
#endif

} /* namespace marrow */

#endif /* MARROW_DEVICE_H */
