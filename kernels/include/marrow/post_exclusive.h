/*
 * marrow device code: posting on an exclusive channel (DOCA GPUNetIO's
 * EXCLUSIVE sharing mode): one owner, a thread or a whole warp, keeps the
 * heads in its registers; no atomic, no ready chain, no CQ lock.
 */
#ifndef MARROW_POST_EXCLUSIVE_H
#define MARROW_POST_EXCLUSIVE_H

#include "marrow/cq.h"
#include "marrow/encoder.h"

namespace marrow {

/* ------------------------------------------------------------ exclusive channels */

/* flags.exclusive (DOCA's EXCLUSIVE resource sharing mode, NCCL GIN's
 * NCCL_GIN_RESOURCE_SHARING_THREAD): one owner posts and polls, either one
 * thread or the lanes of one warp that always call together. What the
 * shared protocol spends its L2 round trips on has nothing to arbitrate:
 * the index comes from a register, not an atomic add; no one else's WQEs
 * can be pending, so there is no ready chain; no one else polls, so there
 * is no CQ lock. A post is the WQE stores and, when it rings, the fences,
 * doorbell record and doorbell: what the posting-rate floor measures.
 * Two owners at once on one exclusive channel would corrupt its ring; the
 * host gives each owner a channel of its own. A warp owns one through the
 * warp calls (put_nbi_warp reconverges the warp first): the leader keeps
 * the books and every lane leaves each call with the leader's copy. The
 * owner is fixed when the Channel is made (Channel::grp); a call by only
 * some of its lanes, or an owner that is part of a warp, is refused with
 * E_BAD_CONFIG (own_group). */

/* The owner's lanes for a call: all of them must be here (other lanes may
 * be active too: other owners, on other channels). Otherwise the call is
 * refused before anything is written, so the lanes' copies of the heads
 * cannot part: a lone lane's post would hand out the group's next slot
 * twice. The refusal is reported to the error block for the host, and
 * sticks for later Channels on the page as every error does; the owner's
 * own status stays as it was, since the owner's lanes did not all see it. */
MARROW_FN bool own_group(const Channel &ch) {
    const Group &g = ch.grp;
    if (g.solo() || (g.whole_warp() && g.all_here())) return true;
    report_error(ch, MARROW_GCRB_STATUS_BAD_CONFIG, MARROW_GCRB_WAIT_NONE, 0, nullptr);
    return false;
}

MARROW_FN void own_from_leader(const Channel &ch, const Group &g) {
    if (g.solo()) return;
    Own &o = ch.own;
    o.resv = g.from_leader64(o.resv);
    o.prod = g.from_leader64(o.prod);
    o.cons = g.from_leader64(o.cons);
    o.ci = g.from_leader64(o.ci);
    o.status = (uint32_t)g.from_leader32((int)o.status);
}

/* The leader's wait, on its registers, until WQEBBs below `upto` completed. */
MARROW_FN int own_wait_upto(const Channel &ch, uint64_t upto, uint32_t wait) {
    Own &o = ch.own;
#if MARROW_FAST_PATH
    /* The first CQE in straight-line code; an error CQE, or more CQEs to
     * wait for, go on in the general walk below from where it left off. */
    if (fast_walk_allowed(ch) && o.cons < upto &&
        fast_first(ch, load_device_u32(cqe_tail(ch.cfg(), o.ci)), o.cons, o.ci, 0, wait) == FirstCqe::TIMEOUT)
        return E_TIMEOUT;
#endif
    Deadline d;
    while (o.cons < upto) {
        int rc = walk_cq(ch, upto, o.cons, o.ci);
        if (rc != OK) return rc;
        if (o.cons >= upto) break;
        if (d.expired(ch, wait)) return E_TIMEOUT;
    }
    return OK;
}

/* Wait until the WQEBBs below `upto` completed: the leader waits for the
 * group's last lane's target (the highest: it posted last). */
MARROW_FN int wait_own(const Channel &ch, uint64_t upto, uint32_t wait) {
    if (!own_group(ch)) return E_BAD_CONFIG;
    const Group &g = ch.grp;
    upto = g.from_last64(upto);
    int rc = OK;
    if (g.leader()) {
        rc = sticky_error(ch);
        if (rc == OK) rc = own_wait_upto(ch, upto, wait);
    }
    rc = g.from_leader32(rc);
    own_from_leader(ch, g);
    return rc;
}

/* Lazy posting's rule for ringing (the shared path's: a batch crossed, or
 * the ring over half full, less a group), for `base` up to `end`. */
MARROW_FN bool ring_due(bool force, bool lazy, uint64_t base, uint64_t end, uint64_t cons, uint64_t depth) {
    return force || !lazy || end / RING_BATCH != base / RING_BATCH || end - cons + MAX_GROUP > depth / 2;
}

/* Room in the send queue for the WQEBBs below `end`, after the sticky
 * status: the owner (a group's leader) polls the CQ if the ring is full.
 * Room comes from CQEs, and only rung, signaled WQEs make them. Lazy
 * posting rings, and signals, at least once per RING_BATCH and whenever
 * the ring is over half full, so with a full ring a rung, signaled WQE lies
 * within RING_BATCH past the slot needed (rings under 2 * RING_BATCH ring
 * every post). Were that broken, this wait would end in a decoded timeout.
 * `*waited`: the heads moved. */
MARROW_FN int own_room(const Channel &ch, uint64_t end, bool *waited) {
    uint64_t depth = ch.c.sq_wqebbs;
    int rc = sticky_error(ch);
    *waited = rc == OK && end > ch.own.cons + depth;
    if (*waited) rc = own_wait_upto(ch, end - depth, MARROW_GCRB_WAIT_SLOT);
    return rc;
}

/* post_own for an owner posting alone, in straight-line code: no warp
 * instruction and no branch on the group, each of which the compiler must
 * treat as divergent. One thread's post costs about 120 ns less this way,
 * a tenth of the floor (scripts/gpu_probe/exclusive_post.cu). */
MARROW_FN int post_own_solo(const Channel &ch, const Op &op, uint64_t *idx_out, bool force_ring, bool lazy) {
    Own &o = ch.own;
    uint64_t idx = o.resv, end = idx + 1;
#if MARROW_FAST_PATH
    /* The common case in one test (encoder.h): what own_room and ring_due
     * would find, no error, room and a ring now. */
    if (o.status == MARROW_GCRB_STATUS_OK && end <= o.cons + ch.c.sq_wqebbs && !lazy && trace_allows_fast(ch)) {
        o.resv = end;
        uint64_t ctrl = write_wqe_untraced(ch, idx, op);
        /* Our WQE stores ahead of the doorbell record. */
        to_device_at(ch.gpu_scope());
        ring_untraced(ch, end, ctrl, force_ring);
        if (idx_out) *idx_out = idx;
        return OK;
    }
#endif
    bool waited;
    int rc = own_room(ch, end, &waited);
    if (rc != OK) return rc;
    o.resv = end;
    bool ring_now = ring_due(force_ring, lazy, idx, end, o.cons, ch.c.sq_wqebbs);
    uint64_t ctrl = write_wqe(ch, idx, op, ring_now);
    if (ring_now) {
        /* Our WQE stores, and any left unrung before, ahead of the doorbell record. */
        to_device_at(ch.gpu_scope());
        ring(ch, end, ctrl, force_ring);
    }
    if (idx_out) *idx_out = idx;
    return OK;
}

/* A tuning knob (kernels/README.md): 1, the default, a warp's lanes leave
 * their WQE stores unfenced and the leader fences once after the warp
 * barrier, which orders the lanes' stores before the leader's fence (the
 * barrier orders memory among its lanes, and fences are cumulative), as
 * post_shared and DOCA's warp put (doca_gpu_dev_verbs_put_warp) do; 0,
 * every lane fences its own stores before the barrier. */
#ifndef MARROW_OWN_LEADER_FENCE
#define MARROW_OWN_LEADER_FENCE 1
#endif

/* The two halves of an owner warp's WQE fence: each lane's, before the
 * warp barrier, and the leader's, after it and before the doorbell
 * record. The knob keeps exactly one of them. */
MARROW_FN void own_lane_fence(const Channel &ch) {
#if !MARROW_OWN_LEADER_FENCE
    to_device_at(ch.gpu_scope());
#else
    (void)ch;
#endif
}
MARROW_FN void own_leader_fence(const Channel &ch) {
#if MARROW_OWN_LEADER_FENCE
    to_device_at(ch.gpu_scope());
#else
    (void)ch;
#endif
}

MARROW_FN int post_own(const Channel &ch, const Op &op, uint64_t *idx_out, bool force_ring, bool lazy) {
    const Group &g = ch.grp;
    if (g.solo()) return post_own_solo(ch, op, idx_out, force_ring, lazy);
    if (!own_group(ch)) return E_BAD_CONFIG;
    Own &o = ch.own;
    /* Every lane's copy agrees (own_group), so each knows the base and the
     * room; only the leader acts on the CQ, and says whether it did. */
    uint64_t base = o.resv, end = base + g.size;
#if MARROW_FAST_PATH >= 2
    /* post_own_solo's test, on every lane's copy of the heads: the same
     * answer everywhere, so only force_ring is exchanged. (Written out
     * twice: as one inline function it compiled to other instructions
     * than the ones measured in docs/PERFORMANCE.md.) */
    if (o.status == MARROW_GCRB_STATUS_OK && end <= o.cons + ch.c.sq_wqebbs && !lazy && trace_allows_fast(ch)) {
        bool force = g.any(force_ring);
        uint64_t idx = base + g.rank;
        o.resv = end;
        uint64_t ctrl = write_wqe_untraced(ch, idx, op);
        /* Each lane's WQE stores ahead of the leader's doorbell record: by
         * the leader's fence after the barrier, or each lane's before it. */
        own_lane_fence(ch);
        uint64_t last_ctrl = ch.flag(MARROW_GCRB_CONFIG_DB_CTRL_BYTES_SHIFT) ? g.from_last64(ctrl) : 0;
        g.sync();
        if (g.leader()) {
            own_leader_fence(ch);
            ring_untraced(ch, end, last_ctrl, force);
        }
        o.prod = end;
        if (idx_out) *idx_out = idx;
        return OK;
    }
#endif
    int rc = OK;
    bool waited = false;
    if (g.leader()) rc = own_room(ch, end, &waited);
    /* One reduction tells the group both whether any lane forces a ring
     * and whether the leader has news (an error, or heads moved by its
     * wait); its words follow only then. A shuffle and a vote each time
     * cost a warp's post 80 ns (scripts/gpu_probe/exclusive_post.cu). */
    constexpr uint32_t FORCE = 1u, LEADER_NEWS = 2u;
    uint32_t news = g.or32((force_ring ? FORCE : 0u) | (g.leader() && (rc != OK || waited) ? LEADER_NEWS : 0u));
    if (news & LEADER_NEWS) {
        rc = g.from_leader32(rc);
        own_from_leader(ch, g);
    }
    if (rc != OK) return rc;
    uint64_t idx = base + g.rank;
    o.resv = end;
    bool force = (news & FORCE) != 0;
    bool ring_now = ring_due(force, lazy, base, end, o.cons, ch.c.sq_wqebbs);
    /* Only the WQEs of a ring get CQEs (selective signaling, rdma-core's
     * sq_sig_all = 0): an RC QP completes in order, so a CQE covers every
     * WQE before it, and unrung lazy posts cost the NIC and the poller no
     * CQE each. Every ring's last WQE is signaled, so all rung means all
     * covered. */
    uint64_t ctrl = write_wqe(ch, idx, op, ring_now);
    if (ring_now) {
        /* Our WQE stores, and any left unrung before, ahead of the doorbell
         * record, fenced as on the fast path above. */
        own_lane_fence(ch);
        uint64_t last_ctrl = ch.flag(MARROW_GCRB_CONFIG_DB_CTRL_BYTES_SHIFT) ? g.from_last64(ctrl) : 0;
        g.sync();
        if (g.leader()) {
            own_leader_fence(ch);
            ring(ch, end, last_ctrl, force);
        }
        o.prod = end;
    } else {
        /* The WQE stores stay unfenced until a ring: the ringer's fence
         * comes after this barrier, and fences are cumulative. */
        g.sync();
    }
    if (idx_out) *idx_out = idx;
    return OK;
}

/* Everything posted so far: ring the rest, wait for its completions. A
 * lazy tail is unrung and unsignaled: the leader posts a signaled NOP,
 * which rings it, and whose CQE covers it. */
MARROW_FN int quiet_own(const Channel &ch) {
    if (!own_group(ch)) return E_BAD_CONFIG;
    const Group &g = ch.grp;
    Own &o = ch.own;
    bool tail = o.prod < o.resv;
    if (tail) {
        /* Lazy posting left the lanes' WQE stores unfenced. The NOP's
         * post below fences the leader's, after the barrier, and with the
         * knob at 1 everyone's (as post_own's leader fence does); with the
         * knob at 0 each other lane fences its own first. */
        if (!g.leader()) own_lane_fence(ch);
        g.sync();
    }
    int rc = OK;
    if (g.leader()) {
        Op nop = Op{};
        nop.opcode = MARROW_MLX5_OPCODE_NOP;
        nop.fm_ce_se = CQ_UPDATE;
        /* The NOP's post checks the sticky status itself. */
        rc = tail ? post_own_solo(ch, nop, nullptr, true, false) : sticky_error(ch);
        if (rc == OK) rc = own_wait_upto(ch, o.resv, MARROW_GCRB_WAIT_CQ);
    }
    rc = g.from_leader32(rc);
    own_from_leader(ch, g);
    return rc;
}

} /* namespace marrow */

#endif /* MARROW_POST_EXCLUSIVE_H */
