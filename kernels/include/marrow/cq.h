/*
 * marrow device code: completions. The CQ walk by owner bit (or slot 0 of a
 * collapsed CQ, NVSHMEM's mode), the consumer index published in the CQ
 * doorbell record, and a shared channel's poll (one poller at a time,
 * under gcrb_heads.poll_state) and wait. CQE fields as the PRM's
 * mlx5_cqe64 and mlx5_err_cqe lay them out (marrow/generated/mlx5.h).
 */
#ifndef MARROW_CQ_H
#define MARROW_CQ_H

#include "marrow/barriers.h"
#include "marrow/channel.h"

namespace marrow {

/* ------------------------------------------------------------ completions */

/* The full index of the WQE a CQE's 16-bit wqe_counter names: CQEs come
 * back in order and at most a send queue (<= 32768 WQEBBs) is outstanding,
 * so it is the first index at or after `from` with those low 16 bits. No
 * shared head is needed to widen it. */
MARROW_FN uint64_t widen_from(uint64_t from, uint16_t counter) { return from + (uint16_t)(counter - (uint16_t)from); }

/* Re-reads of an unchanged CQE before the poller lets the lock go: fewer on
 * the CPU, whose threads may share a core with the engine they wait for. */
constexpr uint32_t POLL_SPINS = MARROW_GPU ? 256 : 16;

/* CQE tails read per PCIe round trip when several completions are awaited
 * (a quiet after many put_nbi): one read each, all in flight at once,
 * instead of a round trip per CQE. Eight named words, not an array: an
 * array would need a loop that NVRTC keeps, and local memory with it. */
constexpr uint64_t CQ_LOOKAHEAD = 8;

/* The tail word of a CQE (its last four bytes: wqe_counter, signature,
 * op_own), what a poll reads first: one PCIe read instead of two (DOCA's
 * pre-sm90 poll). Read as one little-endian word. */
constexpr uint32_t CQE_TAIL_OFF = MARROW_MLX5_CQE64_WQE_COUNTER_OFF;
static_assert(MARROW_MLX5_CQE64_SIGNATURE_OFF == CQE_TAIL_OFF + 2 && MARROW_MLX5_CQE64_OP_OWN_OFF == CQE_TAIL_OFF + 3 &&
                  MARROW_MLX5_CQE64_SIZE == CQE_TAIL_OFF + 4,
              "wqe_counter, signature and op_own end the CQE");

MARROW_FN const uint32_t *cqe_tail(const marrow_gcrb_config *c, uint64_t ci) {
    uint8_t *cq = (uint8_t *)c->cq_base;
    return (const uint32_t *)(cq + (c->cq_mode ? 0 : (ci & (c->cq_ncqe - 1)) * MARROW_MLX5_CQE_SIZE) + CQE_TAIL_OFF);
}

/* op_own and wqe_counter (host order) out of a tail word. */
MARROW_FN uint8_t tail_op_own(uint32_t tail) { return (uint8_t)(tail >> 8 * (MARROW_MLX5_CQE64_OP_OWN_OFF - CQE_TAIL_OFF)); }
MARROW_FN uint16_t tail_wqe_counter(uint32_t tail) {
    return be16((uint16_t)(tail >> 8 * (MARROW_MLX5_CQE64_WQE_COUNTER_OFF - CQE_TAIL_OFF)));
}

/* Whether a CQE whose op_own is `op_own`, in slot ci of an owner-bit CQ,
 * is software's: its owner bit is this pass over the ring's (the previous
 * pass's bit: hardware still owns it). */
MARROW_FN bool owner_bit_ours(const marrow_gcrb_config *c, uint8_t op_own, uint64_t ci) {
    return ((op_own >> MARROW_MLX5_CQE64_OWNER_SHIFT) & MARROW_MLX5_CQE64_OWNER_MASK) == ((ci & c->cq_ncqe) ? 1u : 0u);
}

/* A requester's or responder's error CQE (mlx5_err_cqe). */
MARROW_FN bool cqe_is_error(uint8_t opcode) {
    return opcode == MARROW_MLX5_CQE_REQ_ERR || opcode == MARROW_MLX5_CQE_RESP_ERR;
}

/* A shared poller's progress for its waiters, who acquire cons_idx: a
 * release fence then the write (poll_cq adds cq_ci and poll_state behind
 * the same fence). A maximum, not a store: the writes after one fence are
 * not ordered among themselves, so a poller's cons_idx may land after the
 * next poller's, and a maximum never goes back. `release` false: no fence
 * (poll_cq's own_only). */
MARROW_FN void publish_cons(marrow_gcrb_heads *h, uint64_t cons, bool release = true) {
    if (release) fence_release_gpu();
    red_max_relaxed(&h->cons_idx, cons);
}

/* Whether the walk keeps the CQ doorbell record: an owner-bit CQ that does
 * not ignore overrun (rdma-core update_cons_index). A collapsed CQ's one
 * slot and an overrun-ignoring CQ need none. */
MARROW_FN bool keeps_cq_record(const Channel &ch) {
    return !ch.c.cq_mode && !ch.flag(MARROW_GCRB_CONFIG_CQ_OVERRUN_IGNORE_SHIFT);
}

/* The walk itself, from the consumer state (cons, ci) its caller owns:
 * under the poll lock, or an exclusive channel's registers. With
 * `prefetched`, `first` is the tail of slot ci, read by the caller already
 * (a shared poller issues that PCIe read as soon as it holds the lock); by
 * value, so nothing here has its address taken (local memory). An exclusive
 * owner's heads reach the GCRB when its Channel ends or fails
 * (Channel::store_heads): stores here, to GPU memory, would be waited for
 * by the system-scope fence of the next post. A shared poller publishes
 * cons_idx (publish_cons) when it pauses with progress made, and its
 * caller the rest when the walk ends. */
MARROW_FN int walk_cq(const Channel &ch, uint64_t upto, uint64_t &cons, uint64_t &ci, bool prefetched = false,
                      uint32_t first = 0) {
    marrow_gcrb_heads *h = ch.heads();
    const marrow_gcrb_config *c = ch.cfg();
    /* Return slots to the NIC (rdma-core update_cons_index) every `batch`
     * CQEs: at most sq_wqebbs CQEs are ever outstanding, so a CQ deeper than
     * the send queue leaves slack for the doorbell record to lag by half of
     * it, and each update costs a system-scope fence. A CQ no deeper than
     * the send queue is updated on every CQE. */
    uint64_t slack = c->cq_ncqe > c->sq_wqebbs ? c->cq_ncqe - c->sq_wqebbs : 0;
    uint64_t batch = slack >= 4 ? floor_pow2(slack / 2) : 1; /* a power of two: a mask, not a division */
    bool keeps_record = keeps_cq_record(ch);
    int rc = OK;
    /* Starts idle: the first read is of one slot. */
    uint32_t idle = 1;
    while (cons < upto && rc == OK) {
        /* A collapsed CQ has one slot; an owner-bit ring, the next n, but
         * only while CQEs keep coming: a poll that found nothing reads one
         * slot again, so waiting costs one PCIe read at a time, as before
         * the look-ahead. */
        uint64_t n = c->cq_mode || idle ? 1 : (upto - cons < CQ_LOOKAHEAD ? upto - cons : CQ_LOOKAHEAD);
        auto tail_at = [&](uint64_t k) { return k < n ? load_device_u32(cqe_tail(c, ci + k)) : 0u; };
        /* The caller's read of the first slot stands for this pass's. */
        uint32_t w0 = prefetched ? first : tail_at(0), w1 = tail_at(1), w2 = tail_at(2), w3 = tail_at(3);
        prefetched = false;
        uint32_t w4 = tail_at(4), w5 = tail_at(5), w6 = tail_at(6), w7 = tail_at(7);
        uint64_t got = 0;
        for (; got < n; got++) {
            uint32_t tail = w0;
            w0 = w1, w1 = w2, w2 = w3, w3 = w4, w4 = w5, w5 = w6, w6 = w7, w7 = 0;
            const uint8_t *cqe = (const uint8_t *)cqe_tail(c, ci) - CQE_TAIL_OFF;
            uint8_t op_own = tail_op_own(tail);
            uint8_t opcode = op_own >> MARROW_MLX5_CQE64_OPCODE_SHIFT;
            uint16_t counter = tail_wqe_counter(tail);
            uint64_t done = 0;
            bool fresh = opcode != MARROW_MLX5_CQE_INVALID;
            if (fresh && c->cq_mode) {
                /* Collapsed: slot 0 holds the latest CQE, at or after the last
                 * one consumed; new when its counter is past it. */
                done = widen_from(cons ? cons - 1 : 0, counter) + 1;
                fresh = done > cons || opcode == MARROW_MLX5_CQE_REQ_ERR;
            } else if (fresh) {
                fresh = owner_bit_ours(c, op_own, ci);
            }
            if (!fresh) break;
            /* An owner bit (or counter) was seen: only now read the rest. */
            if (got == 0) from_device();
            if (cqe_is_error(opcode)) {
                record_error(ch, MARROW_GCRB_STATUS_CQE_ERROR, MARROW_GCRB_WAIT_NONE, 0, cqe);
                rc = E_CQE_BASE - (int)((const marrow_mlx5_err_cqe *)cqe)->syndrome;
                break;
            }
            if (!c->cq_mode) done = widen_from(cons, counter) + 1;
            trace(ch, MARROW_GCRB_EVENT_CQE, counter, op_own);
            if (done > cons) cons = done;
            ++ci;
            /* A CQ that ignores overrun (flags.cq_overrun_ignore, DOCA's
             * CQs) reads no consumer index: no record to keep, and no
             * system-scope fence per batch for it. */
            if (keeps_record && (ci & (batch - 1)) == 0) {
                /* Our reads of the CQE before the NIC may reuse its slot. */
                to_device();
                uint32_t *dbrec = (uint32_t *)c->cq_dbrec_addr;
                dbrec[MARROW_MLX5_CQ_SET_CI] = be32((uint32_t)ci & MARROW_MLX5_CQ_DBREC_CONS_INDEX_MASK);
            }
            if (cons >= upto) break;
        }
        if (got == 0 && rc == OK) {
            /* Nothing new: re-read, keeping the caller's claim (the poll
             * lock, or the channel), up to POLL_SPINS times. */
            if (++idle >= POLL_SPINS) break;
            spin_pause();
            continue;
        }
        /* Going on for more: the waiters of what came so far need not wait
         * for the rest. */
        if (!ch.excl && cons < upto && rc == OK) publish_cons(h, cons);
        idle = 0;
    }
    return rc;
}

/* ------------------------------------------------------------ the first CQE, fast */

/* A wait's first CQE in straight-line code (MARROW_FAST_PATH, channel.h,
 * as a post's common case), where nothing else is to be done with it: an
 * owner-bit CQ that ignores overrun (no doorbell record to keep:
 * flags.cq_overrun_ignore), no trace. Read the tail of slot ci until it
 * turns ours and take it: the floor's poll and nothing more. On the H200
 * against a minimal NIC (scripts/gpu_probe/device_put.cu) walk_cq measured
 * slower for the same CQE, every blocking put paying for it
 * (docs/PERFORMANCE.md). Only the first: a wait for more goes on in
 * walk_cq, whose look-ahead reads eight tails per round trip. */
MARROW_FN bool fast_walk_allowed(const Channel &ch) {
    return !ch.c.cq_mode && ch.flag(MARROW_GCRB_CONFIG_CQ_OVERRUN_IGNORE_SHIFT) && trace_allows_fast(ch);
}

/* Polls of a CQE slot between two looks at the clock in fast_first. */
constexpr uint32_t FAST_POLLS_PER_LOOK = 256;

/* What fast_first came to. */
enum class FirstCqe : uint8_t {
    TAKEN,   /* a CQE of ours: cons and ci moved past it */
    DECODE,  /* an error CQE at ci, left for walk_cq to decode */
    IDLE,    /* `max_idle` reads found nothing (a shared poller lets the lock go) */
    TIMEOUT, /* the deadline passed, recorded (`max_idle` 0 only) */
};

/* From `tail`, the caller's read of slot ci's tail, read again until a CQE
 * is there. `max_idle`: reads before giving up, or 0 to wait under the
 * channel's deadline for `wait`. */
MARROW_FN FirstCqe fast_first(const Channel &ch, uint32_t tail, uint64_t &cons, uint64_t &ci, uint32_t max_idle,
                              uint32_t wait) {
    const marrow_gcrb_config *c = ch.cfg();
    Deadline d;
    for (uint32_t polls = 1;; polls++) {
        uint8_t op_own = tail_op_own(tail);
        uint8_t opcode = op_own >> MARROW_MLX5_CQE64_OPCODE_SHIFT;
        if (opcode != MARROW_MLX5_CQE_INVALID && owner_bit_ours(c, op_own, ci)) {
            if (cqe_is_error(opcode)) return FirstCqe::DECODE;
            /* An owner bit was seen: only now is the rest of the CQE ours. */
            from_device();
            uint64_t done = widen_from(cons, tail_wqe_counter(tail)) + 1;
            if (done > cons) cons = done;
            ++ci;
            return FirstCqe::TAKEN;
        }
        if (max_idle && polls >= max_idle) return FirstCqe::IDLE;
        if (!max_idle && polls % FAST_POLLS_PER_LOOK == 0 && d.expired(ch, wait)) return FirstCqe::TIMEOUT;
        tail = load_device_u32(cqe_tail(c, ci));
    }
}

/* poll_state: the lock bit, and where the walk goes on (cons_idx and the
 * CQEs consumed, each modulo a power of two). */
constexpr uint64_t POLL_HELD = (uint64_t)MARROW_GCRB_HEADS_HELD_MASK << MARROW_GCRB_HEADS_HELD_SHIFT;

MARROW_FN uint64_t poll_state(uint64_t cons, uint64_t ci) {
    return ((cons & MARROW_GCRB_HEADS_CONS_MASK) << MARROW_GCRB_HEADS_CONS_SHIFT) |
           ((ci & MARROW_GCRB_HEADS_CI_MASK) << MARROW_GCRB_HEADS_CI_SHIFT);
}

/* The full index of poll_state.cons, from `near` within 2^31 of it. */
MARROW_FN uint64_t widen_cons(uint64_t near, uint64_t w) {
    uint32_t lo = (uint32_t)((w >> MARROW_GCRB_HEADS_CONS_SHIFT) & MARROW_GCRB_HEADS_CONS_MASK);
    uint32_t up = lo - (uint32_t)near; /* modulo 2^32: forward, or back when over 2^31 */
    return up < (1u << 31) ? near + up : near - (uint32_t)(0u - up);
}

/* A tuning knob (kernels/README.md): 1, a poller that took only its own
 * WQE's CQE publishes without the release fence (poll_cq's own_only); 0,
 * it fences as any poller does. */
#ifndef MARROW_OWN_PUBLISH_RELAXED
#define MARROW_OWN_PUBLISH_RELAXED 1
#endif

/* What a poll-lock holder does when the word shows its target passed
 * already (the last holder took its CQE), a tuning knob
 * (kernels/README.md): 0, the default, on the fast walk it polls as for
 * any target (POLL_SPINS looks) and takes a CQE that comes (the general
 * walk stops at a passed target at once); 1, it leaves at once,
 * reading no CQE (0dc88da's early leave); 2, where the walk is the fast
 * one (fast_walk_allowed) it looks once at the next slot, takes a CQE
 * that is there, else leaves (not yet measured on a GPU). Leaving at once
 * saves the looks when no CQE is coming, but under many posters CQEs
 * keep coming, and holders that gave the lock back with the next one
 * unread made a whole GPU's put_nbi_warp slower on an H100, while a lone
 * thread's blocking put, which never finds its target passed, gained
 * nothing from it (docs/PERFORMANCE.md). */
#ifndef MARROW_EARLY_LEAVE
#define MARROW_EARLY_LEAVE 0
#endif
MARROW_FN bool takes_after_target(const Channel &ch) {
#if MARROW_FAST_PATH
    return MARROW_EARLY_LEAVE == 0 || (MARROW_EARLY_LEAVE == 2 && fast_walk_allowed(ch));
#else
    (void)ch;
    return MARROW_EARLY_LEAVE == 0;
#endif
}

/* Consume CQEs until WQEBBs below `upto` completed; one poller at a time
 * (the others return at once and look at cons_idx). The lock and the
 * walk's position are one word, gcrb_heads.poll_state: the atomic OR that
 * takes the lock returns where the walk goes on, so the new holder reads
 * the next CQE at once instead of first loading cons_idx and cq_ci (a
 * round trip to L2 saved on every poll). Its target is one it reserved or
 * read just now, within 2^31 WQEBBs of cons_idx: the widening's range. One
 * release fence publishes cons_idx and cq_ci for waiters and the host, and
 * the freed word for the next poller, which reads its position from the
 * word alone (none where only the caller needs it: own_only below). While
 * nothing new has arrived the poller re-reads the CQE, up to POLL_SPINS
 * times, keeping the lock: a waiter then sees its CQE one PCIe read after
 * it lands, not a lock round trip later. Once `upto` is reached it leaves
 * the rest of the CQ to the next poller rather than spend a PCIe read
 * looking for more; one that finds its target passed already does as
 * takes_after_target says. `own`: WQEBB upto - 1 is the caller's own WQE (a
 * blocking call's, or quiet's NOP), whose results the NIC wrote for the
 * caller alone. */
MARROW_FN int poll_cq(const Channel &ch, uint64_t upto, bool *reached, bool own) {
    marrow_gcrb_heads *h = ch.heads();
    *reached = false;
    uint64_t w = atomic_or_acquire(&h->poll_state, POLL_HELD);
    if (w & POLL_HELD) return sticky_error(ch);
    uint64_t cons = widen_cons(upto, w), cons_start = cons;
    if (cons >= upto && !takes_after_target(ch)) {
        /* The last holder took our CQE (after our look at cons_idx, or
         * with no look: wait_polls_first), and its cons_idx may not have
         * landed yet. Publish it again from the word, released (we
         * acquired the word the holder released), give the word back as
         * we found it, and go (takes_after_target). */
        publish_cons(h, cons);
        store_relaxed(&h->poll_state, w);
        *reached = true;
        return OK;
    }
    uint64_t ci = (w >> MARROW_GCRB_HEADS_CI_SHIFT) & MARROW_GCRB_HEADS_CI_MASK;
    uint32_t first = load_device_u32(cqe_tail(ch.cfg(), ci));
    /* cq_ci, the host's 64-bit count, widened from its last value; read
     * while the CQE is on its way, and used only after the walk. */
    uint64_t host_ci = load_relaxed(&h->cq_ci), ci_start = ci;
    int rc = OK;
#if MARROW_FAST_PATH
    if (fast_walk_allowed(ch)) {
        /* A target already passed: one look where takes_after_target
         * says so. An error CQE, or more to wait for, go on in the
         * general walk. */
        uint32_t looks = cons >= upto && MARROW_EARLY_LEAVE == 2 ? 1 : POLL_SPINS;
        FirstCqe f = fast_first(ch, first, cons, ci, looks, MARROW_GCRB_WAIT_NONE);
        if (f == FirstCqe::DECODE || (f == FirstCqe::TAKEN && cons < upto)) rc = walk_cq(ch, upto, cons, ci);
    } else
#endif
        rc = walk_cq(ch, upto, cons, ci, true, first);
    host_ci += ((ci_start - host_ci) & MARROW_GCRB_HEADS_CI_MASK) + (ci - ci_start);
    /* The release fence orders what the walk did before the words below:
     *   - its reads of the CQEs, for a waiter that acquires cons_idx and
     *     goes on to read what the NIC wrote for its WQE (a get's data, an
     *     atomic's old value). Only a WQE's own poster reads those, after
     *     its own wait; quiet and a reservation waiting for room read
     *     nothing the NIC wrote (the reservation's stores to the freed
     *     slot rest on stores not being speculative, as reserve_check
     *     says);
     *   - the CQ doorbell records it wrote, before the freed word, so the
     *     next poller's record never lands first;
     *   - an error it recorded.
     * So when the walk took our own WQE's CQE and nothing else, without
     * error, on a CQ whose record nobody keeps, no other thread needs the
     * fence, and a lone thread's blocking put goes without it: a round
     * trip to L2 between its CQE and its next post (docs/PERFORMANCE.md). */
    bool own_only = MARROW_OWN_PUBLISH_RELAXED && own && rc == OK && cons_start + 1 == upto && cons == upto &&
                    !keeps_cq_record(ch);
    publish_cons(h, cons, !own_only);
    store_relaxed(&h->cq_ci, host_ci);
    store_relaxed(&h->poll_state, poll_state(cons, ci));
    *reached = cons >= upto;
    /* Our own target reached without error: leave the sticky status to the
     * next call rather than spend a round trip on it now. */
    return rc != OK ? rc : (*reached ? OK : sticky_error(ch));
}

/* Whether a shared wait's first look polls the CQ at once or reads
 * cons_idx first, a tuning knob (kernels/README.md): 0, it looks first; 1,
 * it polls first; 2, the default, it polls first where the channel rings
 * early (flags.early_doorbell). Polling at once saves a round trip to L2
 * before the CQE read (every caller's target is one it has just reserved
 * or read, so cons_idx is rarely past it). But that read must not reach
 * host memory before the CQE does, or the CQE is seen a PCIe round trip
 * later: after a late ring (the record, a fence, the one doorbell) the NIC
 * starts later, and the look holds the read back; after an early ring the
 * NIC starts a fence sooner, and the read meets the CQE. Against the
 * softnic the blocking put measured slower polling first without early
 * doorbells; with them, no different on the H200 in an older build and
 * faster on an H100 in this one (docs/PERFORMANCE.md). */
#ifndef MARROW_WAIT_POLLS_FIRST
#define MARROW_WAIT_POLLS_FIRST 2
#endif
MARROW_FN bool wait_polls_first(const Channel &ch) {
    return MARROW_WAIT_POLLS_FIRST == 1 ||
           (MARROW_WAIT_POLLS_FIRST == 2 && ch.flag(MARROW_GCRB_CONFIG_EARLY_DOORBELL_SHIFT));
}

/* Wait until the WQEBBs below `upto` completed, on a shared channel
 * (`own` as poll_cq's). Whoever posted them rang for them, or left the
 * ringing to a later holder of the ready chain (ready_and_ring), so a
 * waiter only polls. Looks after the first (wait_polls_first) read
 * cons_idx first, so that waiters whose CQEs another poller consumed
 * leave without touching the lock. */
MARROW_FN int wait_shared(const Channel &ch, uint64_t upto, uint32_t wait, bool own) {
    Deadline d;
    marrow_gcrb_heads *h = ch.heads();
    for (bool first = wait_polls_first(ch); first || load_acquire(&h->cons_idx) < upto; first = false) {
        bool reached;
        int rc = poll_cq(ch, upto, &reached, own);
        if (rc != OK) return rc;
        if (reached) break;
        if (d.expired(ch, wait)) return E_TIMEOUT;
    }
    return OK;
}

} /* namespace marrow */

#endif /* MARROW_CQ_H */
