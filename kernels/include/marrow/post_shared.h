/*
 * marrow device code: posting on a shared channel, where any thread posts
 * (NVSHMEM's protocol): reserve WQEBBs with an atomic add and wait for
 * room, write the WQE, take the ready chain in order and ring when NVSHMEM
 * would; the lanes of a warp that call together post as one group.
 */
#ifndef MARROW_POST_SHARED_H
#define MARROW_POST_SHARED_H

#include "marrow/cq.h"
#include "marrow/encoder.h"

namespace marrow {

/* ------------------------------------------------------------ shared posting */

/* Reserve `n` WQEBBs; wait for room by polling the CQ. The sticky status,
 * a snapshot of cons_idx and the atomic add are issued together: one round
 * trip to L2, not three. A reservation taken on a channel already in error
 * is never used; the error sticks, so nothing waits for it. */
struct Reserved {
    uint64_t idx, cons;
    uint32_t status;
};

MARROW_FN Reserved reserve_issue(const Channel &ch, uint32_t n) {
    marrow_gcrb_heads *h = ch.heads();
    uint32_t status = load_relaxed32(&ch.err()->status);
    uint64_t cons = load_relaxed(&h->cons_idx);
    return Reserved{atomic_add(&h->resv_head, n), cons, status};
}

MARROW_FN int reserve_check(const Channel &ch, const Reserved &r, uint32_t n) {
    int rc = sticky_status(ch, r.status);
    if (rc != OK) return rc;
    uint64_t depth = ch.c.sq_wqebbs;
    if (r.idx + n <= depth) return OK;
    uint64_t need = r.idx + n - depth;
    /* Room already (the snapshot can only be behind): the common case. No
     * store of ours to the slot can pass it: stores are not speculative. */
    if (r.cons >= need) return OK;
    return wait_shared(ch, need, MARROW_GCRB_WAIT_SLOT, false);
}

/* reserve_check's room test in one comparison, for the solo fast path. */
MARROW_FN bool reserved_has_room(const Channel &ch, const Reserved &r, uint32_t n) {
    return r.idx + n <= r.cons + ch.c.sq_wqebbs;
}

MARROW_FN int reserve(const Channel &ch, uint32_t n, uint64_t *idx) {
    Reserved r = reserve_issue(ch, n);
    *idx = r.idx;
    return reserve_check(ch, r, n);
}

/* The ready chain: [idx, idx+n) becomes ready strictly in order, and only
 * the poster whose reservation holds ready_head may move it (at its first
 * WQEBB, or inside it where a run of ready marks stopped: see below), so
 * waiting with loads and then one release store is enough (no
 * compare-and-swap storm, unlike NVSHMEM's atomicCAS loop). The holder of the chain also
 * rings, so doorbell records never go backwards without a doorbell lock.
 * It rings when
 *   - the caller asks (a blocking call waits for this WQE), or
 *   - nobody reserved after it (resv_head == our end), or
 *   - a batch of shared_ring_batch() WQEBBs was crossed
 *     (NVSHMEM_IBGDA_NUM_REQUESTS_IN_BATCH), or
 *   - someone reserved past the ring and may be waiting for room, which
 *     only completions of what is ready here can make.
 * Otherwise the next holder rings for both: every WQE ends up rung by the
 * last holder of a burst, who always sees itself last. A thread that fails
 * between its reservation and its turn stops the chain; its error is
 * sticky and every later call returns it. */

/* A shared channel's batch: RING_BATCH, or a quarter of a deeper ring, up
 * to SHARED_RING_BATCH_MAX. Only a holder with posters queued behind it
 * rings at a batch edge (a lone poster rings as the tail), and each ring
 * costs the chain a system-scope fence while the queue waits, so a whole
 * GPU on one channel posts faster with fewer edges (the batch sweep is in
 * docs/PERFORMANCE.md). A quarter of the ring keeps
 * the NIC fed well before anyone waits for room. A power of two. Lazy
 * posters (flags.lazy_nbi_doorbell) keep RING_BATCH. */
constexpr uint64_t SHARED_RING_BATCH_MAX = 256;
MARROW_FN uint64_t shared_ring_batch(uint64_t depth) {
    uint64_t b = depth / 4 < SHARED_RING_BATCH_MAX ? depth / 4 : SHARED_RING_BATCH_MAX;
    return b > RING_BATCH ? b : RING_BATCH;
}

/* The heads a holder of the chain decides with, loaded right after the
 * reservation so that the loads land while the WQE stores drain. A stale
 * resv_head or cons_idx only ever rings more (resv_head looks like ours,
 * cons_idx looks lower). */
struct ChainView {
    uint64_t ready, resv, cons;
};

MARROW_FN ChainView chain_view(const Channel &ch) {
    marrow_gcrb_heads *h = ch.heads();
    return ChainView{load_relaxed(&h->ready_head), load_relaxed(&h->resv_head), load_relaxed(&h->cons_idx)};
}

/* The view a thread posting alone decides with, for its WQEBB idx. When
 * its own last turn left ready_head at idx, nothing need be loaded:
 * ready_head is still idx (only a reservation's poster moves it past its
 * start), so it is this thread's turn, and it rings as the tail would
 * (resv = cons = the end: no claim, no batch edge to decide). A thread
 * posting again and again then skips the three loads and the wait for
 * them before the ring; whoever reserved meanwhile finds ready_head at its
 * own start after our store, its turn. Lazy posters need cons_idx for
 * their rule and keep the loads. A warp's leader keeps them too: on the
 * H200 the warp measured no faster with the shortcut, and a whole GPU's
 * put_nbi_warp slower (docs/PERFORMANCE.md). */
/* A tuning knob (kernels/README.md): 0, every poster loads the chain. */
#ifndef MARROW_CHAIN_END_SHORTCUT
#define MARROW_CHAIN_END_SHORTCUT 1
#endif
MARROW_FN ChainView view_at(const Channel &ch, uint64_t idx, bool lazy) {
#if MARROW_CHAIN_END_SHORTCUT
    if (!lazy && idx == ch.own.resv) return ChainView{idx, idx + 1, idx + 1};
#else
    (void)idx, (void)lazy;
#endif
    return chain_view(ch);
}

/* A thread posting alone: its turn left ready_head at `end`. */
MARROW_FN void turn_ended(const Channel &ch, uint64_t end) {
#if MARROW_CHAIN_END_SHORTCUT
    ch.own.resv = end;
#else
    (void)ch, (void)end;
#endif
}

/* Polls of ready_head between two looks at the sticky status and the
 * clock: each look is a round trip of its own, which would otherwise
 * double the time a waiter takes to see its turn come. */
constexpr uint32_t READY_POLLS_PER_LOOK = 16;

/* A waiter this many groups or more from its turn sleeps between polls,
 * for about a turn's hand-off per group ahead of it (proportional backoff,
 * as in Mellor-Crummey and Scott's ticket lock): a whole GPU queued on one
 * channel then polls ready_head's line far less often, and the holder's
 * store and the next waiter's load meet less traffic there. In ns per
 * group ahead; 0 polls without sleeping. */
#ifndef MARROW_READY_BACKOFF_NS
#define MARROW_READY_BACKOFF_NS 0
#endif
constexpr uint64_t READY_BACKOFF_MAX_NS = 4000;

/* Wait until ready_head reaches `target`: a holder's turn (only the holder
 * can move it past its own index), or quiet's target. */
struct Waited {
    int rc;
    uint64_t ready; /* where ready_head stood, at or past the target */
};

MARROW_FN Waited wait_ready(const Channel &ch, uint64_t target) {
    marrow_gcrb_heads *h = ch.heads();
    Deadline d;
    for (uint32_t polls = 1;; polls++) {
        uint64_t ready = load_acquire(&h->ready_head);
        if (ready >= target) return Waited{OK, ready};
#if MARROW_GPU
        uint64_t groups = (target - ready) / MAX_GROUP;
        if (MARROW_READY_BACKOFF_NS && groups > 1) {
            uint64_t ns = (groups - 1) * MARROW_READY_BACKOFF_NS;
            __nanosleep((unsigned)(ns < READY_BACKOFF_MAX_NS ? ns : READY_BACKOFF_MAX_NS));
        }
#endif
        if (polls % READY_POLLS_PER_LOOK) continue;
        int rc = sticky_error(ch);
        if (rc != OK) return Waited{rc, ready};
        if (d.expired(ch, MARROW_GCRB_WAIT_READY)) return Waited{E_TIMEOUT, ready};
    }
}

/* ------------------------------------------------------------ ready marks */

/* A chain handed on one group per turn is as fast as a turn's round trip
 * to L2, whatever the GPU does in parallel: a whole GPU on one channel
 * waits there. So a poster that is not next marks its WQEBBs in the ready
 * marks (GCRB_OFF_READY_MARKS, a bit per WQEBB) once they are written and
 * fenced, and the holder of the chain claims the run of marked WQEBBs
 * after its own in the same turn: one turn, one ring and one store of
 * ready_head for as many groups as are written by then (at most
 * MARROW_RUN_SCAN_CHUNKS chunks of MARROW_RUN_SCAN_WORDS words of marks).
 * A marked poster waits until ready_head passes its WQEBBs (someone's run
 * covered them) or stops inside them (the last holder's run ended there:
 * its turn, for the rest of its WQEBBs and what follows). Exactly one
 * group contains ready_head, so there is one holder, as before.
 * Not marked, the classic turn instead: a poster that must ring (a
 * blocking call: only a holder rings), and channels whose doorbell is the
 * last WQE's control bytes (flags.db_ctrl_bytes: a holder knows only its
 * own). A holder's run stops at such a poster's first WQEBB, whose bit is
 * never set. */
constexpr uint32_t MARK_WORDS = MARROW_GCRB_READY_MARK_BITS / 64;

MARROW_FN uint64_t *ready_marks(const Channel &ch) { return (uint64_t *)(ch.page + MARROW_GCRB_OFF_READY_MARKS); }

MARROW_FN bool marks_runs(const Channel &ch, bool force) {
    return !force && !ch.flag(MARROW_GCRB_CONFIG_DB_CTRL_BYTES_SHIFT);
}

/* Set the bits of WQEBBs [from, to): a group's, at most MAX_GROUP, so at
 * most two words. */
MARROW_FN void mark_ready(const Channel &ch, uint64_t from, uint64_t to) {
    uint64_t *m = ready_marks(ch);
    while (from < to) {
        uint32_t bit = (uint32_t)(from % 64);
        uint64_t n = to - from < 64 - bit ? to - from : 64 - bit;
        uint64_t mask = (n == 64 ? ~0ull : (1ull << n) - 1) << bit;
        atomic_or_relaxed(&m[(from / 64) % MARK_WORDS], mask);
        from += n;
    }
}

/* One word of a claim: the set bits from `s.bit` on, cleared, extend the
 * run; a clear bit ends it. */
struct RunScan {
    uint64_t end;
    uint32_t bit;
    bool more;
};

MARROW_FN void claim_word(uint64_t *word, uint64_t w, RunScan &s) {
    if (!s.more) return;
    uint32_t room = 64 - s.bit;
    uint32_t n = trailing_ones64(w >> s.bit);
    if (n > room) n = room;
    if (n) atomic_and_relaxed(word, ~((n == 64 ? ~0ull : (1ull << n) - 1) << s.bit));
    s.end += n;
    s.more = n == room;
    s.bit = 0;
}

/* Four words of marks, loaded together. */
struct MarkQuad {
    uint64_t a0, a1, a2, a3;
};

MARROW_FN MarkQuad load_quad(uint64_t *m, uint32_t w) {
    return MarkQuad{load_relaxed(&m[w % MARK_WORDS]), load_relaxed(&m[(w + 1) % MARK_WORDS]),
                    load_relaxed(&m[(w + 2) % MARK_WORDS]), load_relaxed(&m[(w + 3) % MARK_WORDS])};
}

MARROW_FN void claim_quad(uint64_t *m, uint32_t w, const MarkQuad &q, RunScan &s) {
    claim_word(&m[w % MARK_WORDS], q.a0, s);
    claim_word(&m[(w + 1) % MARK_WORDS], q.a1, s);
    claim_word(&m[(w + 2) % MARK_WORDS], q.a2, s);
    claim_word(&m[(w + 3) % MARK_WORDS], q.a3, s);
}

/* The holder's claim: the run of set bits from `from` (where its turn
 * stands), cleared; returns the run's end. A chunk of MARROW_RUN_SCAN_WORDS
 * words is loaded together, then one fence makes the loads acquires: the
 * WQE stores of every group in the run are then ordered before the ring
 * that follows. A run that reaches the chunk's end goes on into the next
 * chunk, up to MARROW_RUN_SCAN_CHUNKS: a whole GPU posting on one channel
 * keeps runs long, and one turn then hands on all of them, while a short
 * run (few posters, or many channels) pays one chunk's loads. Written out
 * four words at a time: a local array would go to local memory. */
#ifndef MARROW_RUN_SCAN_WORDS
#define MARROW_RUN_SCAN_WORDS 8
#endif
#ifndef MARROW_RUN_SCAN_CHUNKS
#define MARROW_RUN_SCAN_CHUNKS 4
#endif
static_assert(MARROW_RUN_SCAN_WORDS == 4 || MARROW_RUN_SCAN_WORDS == 8 || MARROW_RUN_SCAN_WORDS == 16,
              "a claim chunk is 4, 8 or 16 words");
/* A claim starts at most a group past ready_head and every mark lies
 * within MARROW_GCRB_READY_MARK_BITS of it: a claim never reaches a bit
 * that stands for the lap after. */
static_assert(MARROW_RUN_SCAN_CHUNKS >= 1 &&
                  MARROW_RUN_SCAN_CHUNKS * MARROW_RUN_SCAN_WORDS * 64 + MAX_GROUP <= MARROW_GCRB_READY_MARK_BITS,
              "a claim scans less than the marks' window");
MARROW_FN uint64_t claim_run(const Channel &ch, uint64_t from) {
    uint64_t *m = ready_marks(ch);
    RunScan s{from, (uint32_t)(from % 64), true};
    for (uint32_t chunk = 0; chunk < MARROW_RUN_SCAN_CHUNKS && s.more; chunk++) {
        /* The first chunk starts in `from`'s word; a later one where the
         * run reached, a word boundary. */
        uint32_t w = (uint32_t)(s.end / 64);
        MarkQuad q0 = load_quad(m, w);
#if MARROW_RUN_SCAN_WORDS >= 8
        MarkQuad q1 = load_quad(m, w + 4);
#endif
#if MARROW_RUN_SCAN_WORDS >= 16
        MarkQuad q2 = load_quad(m, w + 8), q3 = load_quad(m, w + 12);
#endif
        fence_acquire_gpu();
        claim_quad(m, w, q0, s);
#if MARROW_RUN_SCAN_WORDS >= 8
        claim_quad(m, w + 4, q1, s);
#endif
#if MARROW_RUN_SCAN_WORDS >= 16
        claim_quad(m, w + 8, q2, s);
        claim_quad(m, w + 12, q3, s);
#endif
    }
    return s.end;
}

/* A poster that is not next: wait until its WQEBBs lie within the marks'
 * window of ready_head, mark them, and wait until ready_head reaches them.
 * Where ready_head then stands, at or past `idx`: below `end`, this
 * poster's turn. */
MARROW_FN Waited mark_and_wait(const Channel &ch, uint64_t idx, uint64_t end) {
    if (end > MARROW_GCRB_READY_MARK_BITS) {
        Waited w = wait_ready(ch, end - MARROW_GCRB_READY_MARK_BITS);
        if (w.rc != OK) return w;
    }
    mark_ready(ch, idx, end);
    return wait_ready(ch, idx);
}

/* The turn that rang hands ready_head on past `end`. The ring's wc_start
 * (fence.acq_rel.sys, or .gpu with flags.gpu_scope_fences: either scope
 * holds every thread that takes the chain) came after every WQE store this
 * turn hands on: the group's (the warp barrier), the earlier holders' (our acquire of
 * ready_head), the marked runs' (the claim's acquire), and after the
 * claim's clears. A fence then a strong store is a release pattern (PTX
 * memory consistency model), so the release store's own fence would only
 * wait again. On the CPU wc_start orders stores only (sfence, dsb st):
 * there the store stays a release. */
MARROW_FN void hand_on_rung(const Channel &ch, uint64_t end) {
#if MARROW_GPU
    store_relaxed(&ch.heads()->ready_head, end);
#else
    store_release(&ch.heads()->ready_head, end);
#endif
}

/* `v` was loaded before the caller's to_device() fence, which makes the
 * relaxed load of ready_head an acquire: if it already showed our turn,
 * there is nothing to wait for (only we can move it on). `solo`: a thread
 * posting alone, which remembers where its turn left ready_head (view_at). */

MARROW_FN int ready_and_ring(const Channel &ch, uint64_t idx, uint32_t n, bool force, bool lazy, uint64_t last_ctrl,
                             ChainView v, bool solo) {
    marrow_gcrb_heads *h = ch.heads();
    uint64_t end = idx + n;
    bool runs = marks_runs(ch, force);
    /* Marked: our bits are set and the claim must take them back. */
    bool marked = false;
    if (v.ready != idx) {
        marked = runs;
        Waited w = runs ? mark_and_wait(ch, idx, end) : wait_ready(ch, idx);
        if (w.rc != OK) return w.rc;
        /* A holder's run covered ours: it or a later holder rings it. */
        if (runs && w.ready >= end) return OK;
        /* Our turn, from where the last run stopped (our bits from there
         * on are set). */
        if (runs) end = w.ready;
    }
    uint64_t resv = v.resv, cons = v.cons;
    /* Unmarked and nobody reserved after us when we looked: no run to
     * claim (a later poster that marked anyway finds ready_head at its
     * first WQEBB: its own turn). */
    if (marked || (runs && resv > end)) {
        uint64_t mine = end;
        end = claim_run(ch, end);
        /* The snapshot predates the run: read it again. It may still be
         * older than the marks the claim saw, and below `end`: that reads
         * as the tail, which rings (ringing more is always safe). */
        if (end != mine) resv = load_relaxed(&h->resv_head);
    }
    uint64_t depth = ch.c.sq_wqebbs;
    /* Lazy (flags.lazy_nbi_doorbell, put_nbi only): the last poster does not
     * ring; a ring more than half full (less a group) does instead, which
     * covers anyone who reserves later and waits for room: the holder just
     * before such a waiter sees end - cons > depth - MAX_GROUP. */
    bool tail = lazy ? end - cons + MAX_GROUP > depth / 2 : resv <= end;
    /* Lazy posters keep DeepEP's batch: a lone one rings only at its edges. */
    uint64_t batch_mask = ~((lazy ? RING_BATCH : shared_ring_batch(depth)) - 1);
    if (force || tail || (end & batch_mask) != (idx & batch_mask) || resv > cons + depth) {
        /* Every poster fenced (to_device) its WQE stores before its turn or
         * its mark, and our acquire of ready_head and of the marks saw
         * theirs: the WQEs are ordered before this doorbell record. */
        ring(ch, end, last_ctrl, force);
#if MARROW_GPU
        hand_on_rung(ch, end);
        if (solo) turn_ended(ch, end);
        return OK;
#endif
    }
    /* Unrung, or on the CPU: hand_on_rung's release store. */
    store_release(&h->ready_head, end);
    if (solo) turn_ended(ch, end);
    return OK;
}

/* post_shared for a thread posting alone, in straight-line code: no warp
 * instruction and no branch on the group, each of which the compiler must
 * treat as divergent (post_own_solo is the exclusive twin). */
MARROW_FN int post_shared_solo(const Channel &ch, const Op &op, uint64_t *idx_out, bool force_ring, bool lazy) {
    Reserved r = reserve_issue(ch, 1);
    uint64_t idx = r.idx;
#if MARROW_FAST_PATH && MARROW_CHAIN_END_SHORTCUT
    /* The common case in one test (encoder.h): no error, room, not lazy,
     * and our own last turn left ready_head at our WQEBB (view_at), so the
     * turn is ours and we ring as the tail, as ready_and_ring would. */
    if (r.status == MARROW_GCRB_STATUS_OK && reserved_has_room(ch, r, 1) && !lazy && idx == ch.own.resv &&
        trace_allows_fast(ch)) {
        uint64_t end = idx + 1, ctrl = write_wqe_untraced(ch, idx, op);
        /* Our WQE stores ahead of the doorbell record. */
        to_device_at(ch.gpu_scope());
        ring_untraced(ch, end, ctrl, force_ring);
        hand_on_rung(ch, end);
        turn_ended(ch, end);
        if (idx_out) *idx_out = idx;
        return OK;
    }
#endif
    int rc = reserve_check(ch, r, 1);
    if (rc != OK) return rc;
    ChainView view = view_at(ch, idx, lazy);
    uint64_t ctrl = write_wqe(ch, idx, op);
    /* Our WQE stores before any holder of the chain rings past them. */
    to_device_at(ch.gpu_scope());
    rc = ready_and_ring(ch, idx, 1, force_ring, lazy, ctrl, view, true);
    if (idx_out) *idx_out = idx;
    return rc;
}

/* What a group's leader tells the others after reserving, in one 64-bit
 * shuffle: the first WQEBB, or, with this bit set, the error below it.
 * WQEBB indexes never reach bit 63 (at 10^9 WQEBBs a second, a 64-bit
 * count takes centuries to get there). */
constexpr uint64_t RESERVE_FAILED = 1ull << 63;

/* Post one WQE per calling thread. On the GPU the threads of a warp that
 * call together on one channel post as a group (warp-aggregated): the
 * leader reserves for all, each writes its own WQE, the leader takes the
 * ready chain once for all. One reservation, one turn of the chain and at
 * most one doorbell per warp instead of per thread.
 *
 * A group is the lanes with the same channel and the same force_ring.
 * The key below is the page's address plus the flag: GCRB pages lie
 * MARROW_GCRB_PAGE_SIZE apart, so it is no other channel's key. The
 * leader's own force_ring is then the group's, and no vote is needed.
 * Every caller in device.h passes a constant, so lanes that call together
 * still form one group; lanes that disagree would post as two. With the
 * error folded into the index's shuffle, a warp's post has one shuffle
 * and one vote fewer (measured in docs/PERFORMANCE.md, 2026-12-06). */
MARROW_FN int post_shared(const Channel &ch, const Op &op, uint64_t *idx_out, bool force_ring, bool lazy) {
    Group g = group_of(ch.page + (force_ring ? 1 : 0));
    if (g.solo()) return post_shared_solo(ch, op, idx_out, force_ring, lazy);
    int rc = OK;
    uint64_t said = 0;
    ChainView view{~0ull, 0, 0};
    if (g.leader()) {
        uint64_t first;
        rc = reserve(ch, g.size, &first);
        said = rc == OK ? first : RESERVE_FAILED | (uint32_t)rc;
        view = chain_view(ch);
    }
    said = g.from_leader64(said);
    if (said & RESERVE_FAILED) return (int)(uint32_t)said;
    uint64_t base = said, idx = base + g.rank;
    uint64_t ctrl = write_wqe(ch, idx, op);
    /* The last lane's control bytes are the doorbell only with flags.db_ctrl_bytes. */
    uint64_t last_ctrl = ch.flag(MARROW_GCRB_CONFIG_DB_CTRL_BYTES_SHIFT) ? g.from_last64(ctrl) : 0;
    /* Every lane's WQE stores before any holder of the chain rings past
     * them: the warp barrier orders them before the leader's fence, which
     * is cumulative (PTX memory consistency model), so it orders them at
     * system scope before what the leader does next. One fence after the
     * barrier instead of each lane's before it measured faster on the H200
     * (scripts/gpu_probe/shared_warp_post.cu S10, docs/PERFORMANCE.md);
     * the leader's fence also makes its chain loads acquires, as a lone
     * poster's does. */
    g.sync();
    if (g.leader()) {
        to_device_at(ch.gpu_scope());
        rc = ready_and_ring(ch, base, g.size, force_ring, lazy, last_ctrl, view, false);
    }
    rc = g.from_leader32(rc);
    if (idx_out) *idx_out = idx;
    return rc;
}

} /* namespace marrow */

#endif /* MARROW_POST_SHARED_H */
