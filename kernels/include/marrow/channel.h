/*
 * marrow device code: the channel. A Channel is a GCRB page's address and
 * the configuration read from it once; this file also owns the calls'
 * status codes (hw-specs/gcrb.toml DeviceStatus), the error block and
 * trace ring (gcrb_error, gcrb_trace_entry), the deadline every wait runs
 * under, the configuration check, the sticky status, and the window checks
 * of local and remote offsets (the key table, NVSHMEM's lkey/rkey tables).
 */
#ifndef MARROW_CHANNEL_H
#define MARROW_CHANNEL_H

#include "marrow/group.h"
#include "marrow/platform.h"

namespace marrow {

/* The calls' return values: hw-specs/gcrb.toml's DeviceStatus, generated. */
constexpr int OK = MARROW_E_OK;
constexpr int E_TIMEOUT = MARROW_E_TIMEOUT;
constexpr int E_BAD_CONFIG = MARROW_E_BAD_CONFIG;
constexpr int E_RANGE = MARROW_E_RANGE;
constexpr int E_UNSUPPORTED = MARROW_E_UNSUPPORTED;
constexpr int E_CQE_BASE = MARROW_E_CQE_BASE;

/* A channel: the device address of its GCRB page, and its configuration
 * read once. The host fills gcrb_config before launch and nothing writes it
 * while device code runs, so a copy in registers is exact; re-reading it
 * from memory would cost a trip to L2 after every acquire load. */
constexpr uint32_t CACHED_KEYS = 4;

/* An exclusive channel's heads (gcrb_config.flags.exclusive, DOCA's
 * EXCLUSIVE sharing mode): one owner posts and polls, so they live in the
 * owner's registers and go back to gcrb_heads as stores the owner never
 * waits for: with each CQE, each error, and when the Channel ends, for the
 * host's decoded report and the next Channel on the page.
 * `status` is the sticky gcrb_error.status as the owner knows it: only the
 * owner can record an error on its channel. */
struct Own {
    uint64_t resv, prod, cons, ci;
    uint32_t status;
};

struct Channel {
    uint8_t *page;
    marrow_gcrb_config c;
    /* The first key-table entries, read once for the same reason: a P2P
     * value put is then one store, not a load from L2 and a store. */
    marrow_gcrb_key k[CACHED_KEYS];
    bool excl;
    /* Exclusive only; `mutable` because a Channel is passed by const
     * reference and these are the owner's working copies, not its identity.
     * On a shared channel `own.resv` alone is used, by a thread posting
     * alone: where its own last turn of the ready chain left ready_head
     * (0 at first: WQEBB 0's poster finds ready_head at 0). A field of its
     * own made the exclusive post 5 % slower on the H200 (the kernel's
     * registers), for the same information. */
    mutable Own own;
    /* Exclusive only: the owner, the lanes that made this Channel together
     * on its page (one thread, or a whole warp), found once here instead
     * of with a match at every call (see own_group). */
    Group grp;

    MARROW_MEMBER explicit Channel(uint8_t *p) : page(p), c(*(const marrow_gcrb_config *)(p + MARROW_GCRB_OFF_CONFIG)) {
        for (uint32_t i = 0; i < CACHED_KEYS; i++) k[i] = *((const marrow_gcrb_key *)(p + MARROW_GCRB_OFF_KEYS) + i);
        excl = flag(MARROW_GCRB_CONFIG_EXCLUSIVE_SHIFT) && c.transport != MARROW_GCRB_TRANSPORT_P2P;
        own = Own{0, 0, 0, 0, 0};
        grp = Group{};
        if (excl) {
            grp = group_of(p);
            /* Where the last owner left them: five loads in flight at once. */
            marrow_gcrb_heads *h = heads();
            own = Own{load_relaxed(&h->resv_head), load_relaxed(&h->prod_idx), load_relaxed(&h->cons_idx),
                      load_relaxed(&h->cq_ci), load_relaxed32(&err()->status)};
        }
    }
    /* An exclusive owner's heads go back to the GCRB here, when its Channel
     * ends, for the next Channel on the page (a later call or launch) to
     * start from, and with any error. One owner, one live Channel: no copies. */
    Channel(const Channel &) = delete;
    Channel &operator=(const Channel &) = delete;
    MARROW_MEMBER ~Channel() {
        if (excl) store_heads();
    }
    /* An exclusive owner's heads into gcrb_heads. Rung posts are all
     * ready: ready = resv. */
    MARROW_MEMBER void store_heads() const {
        marrow_gcrb_heads *h = heads();
        store_relaxed(&h->resv_head, own.resv);
        store_relaxed(&h->ready_head, own.resv);
        store_relaxed(&h->prod_idx, own.prod);
        store_relaxed(&h->cons_idx, own.cons);
        store_relaxed(&h->cq_ci, own.ci);
    }
    MARROW_MEMBER const marrow_gcrb_config *cfg() const { return &c; }
    MARROW_MEMBER marrow_gcrb_heads *heads() const { return (marrow_gcrb_heads *)(page + MARROW_GCRB_OFF_HEADS); }
    MARROW_MEMBER marrow_gcrb_error *err() const { return (marrow_gcrb_error *)(page + MARROW_GCRB_OFF_ERROR); }
    MARROW_MEMBER marrow_gcrb_key *key(uint32_t pe) const { return (marrow_gcrb_key *)(page + MARROW_GCRB_OFF_KEYS) + pe; }
    MARROW_MEMBER marrow_gcrb_trace_entry *trace_at(uint64_t i) const {
        return (marrow_gcrb_trace_entry *)(page + MARROW_GCRB_OFF_TRACE) + (i % MARROW_GCRB_TRACE_ENTRIES);
    }
    MARROW_MEMBER bool flag(uint32_t shift) const { return (c.flags >> shift) & 1u; }
    /* The scope of the posting fences (flags.gpu_scope_fences; barriers.h
     * to_device_at). */
    MARROW_MEMBER bool gpu_scope() const { return flag(MARROW_GCRB_CONFIG_GPU_SCOPE_FENCES_SHIFT); }
};

/* A post tests in one branch whether it is the common case: no sticky
 * error, room in the ring, a doorbell now (not lazy) and no trace, and on
 * a shared channel a turn of the ready chain that is its own for certain
 * (post_shared.h view_at). Then it writes and rings, untraced, in
 * straight-line code, without the general path's separate branches on
 * each, which a lone thread pays one after another. A wait takes its
 * first CQE the same way (cq.h fast_first). A tuning knob
 * (kernels/README.md): 0, the general path always; 1, a thread posting
 * alone, and the waits; 2, the owner warp of an exclusive channel too
 * (post_own). A shared channel's warp keeps the general path: with the
 * test in its leader it measured no faster on the H200
 * (docs/PERFORMANCE.md). */
#ifndef MARROW_FAST_PATH
#define MARROW_FAST_PATH 2
#endif

MARROW_FN bool trace_allows_fast(const Channel &ch) { return !ch.flag(MARROW_GCRB_CONFIG_TRACE_SHIFT); }

/* ------------------------------------------------------------ trace, errors */

MARROW_FN void trace_append(const Channel &ch, uint32_t event, uint64_t a0, uint64_t a1) {
    uint64_t i = atomic_add(&ch.heads()->trace_head, 1);
    marrow_gcrb_trace_entry *e = ch.trace_at(i);
    e->t_ns = now_ns();
    e->event = event;
    e->thread = thread_id();
    e->arg0 = a0;
    e->arg1 = a1;
}

/* Posts, doorbells and CQEs are traced when gcrb_config.flags.trace is set:
 * each entry is an atomic and five stores, a third of a post's cost. */
MARROW_FN void trace(const Channel &ch, uint32_t event, uint64_t a0, uint64_t a1) {
    if (ch.flag(MARROW_GCRB_CONFIG_TRACE_SHIFT)) trace_append(ch, event, a0, a1);
}

/* The first failure into the error block, with the heads as they are now,
 * for the host. Always traced. */
MARROW_FN void report_error(const Channel &ch, uint32_t status, uint32_t wait, uint64_t elapsed, const uint8_t *cqe) {
    marrow_gcrb_error *e = ch.err();
    if (!cas32(&e->status, MARROW_GCRB_STATUS_OK, MARROW_GCRB_STATUS_REPORTING)) return; /* someone else reported first */
    marrow_gcrb_heads *h = ch.heads();
    e->wait = wait;
    e->elapsed_ns = elapsed;
    if (ch.excl) {
        /* The owner's registers are the heads; the GCRB's copy may lag. */
        const Own &o = ch.own;
        e->resv_head = o.resv, e->ready_head = o.resv, e->prod_idx = o.prod, e->cons_idx = o.cons, e->cq_ci = o.ci;
        ch.store_heads();
    } else {
        e->resv_head = load_acquire(&h->resv_head);
        e->ready_head = load_acquire(&h->ready_head);
        e->prod_idx = load_acquire(&h->prod_idx);
        e->cons_idx = load_acquire(&h->cons_idx);
        e->cq_ci = load_acquire(&h->cq_ci);
    }
    if (cqe) {
        const marrow_mlx5_err_cqe *c = (const marrow_mlx5_err_cqe *)cqe;
        e->syndrome = c->syndrome;
        e->vendor_err_synd = c->vendor_err_synd;
        e->hw_err_synd = c->hw_err_synd;
        e->wqe_opcode = (uint8_t)(be32(c->s_wqe_opcode_qpn) >> MARROW_MLX5_ERR_CQE_S_WQE_OPCODE_SHIFT);
        e->wqe_counter = be16(c->wqe_counter);
    }
    store_release32(&e->status, status);
    trace_append(ch, status == MARROW_GCRB_STATUS_TIMEOUT ? MARROW_GCRB_EVENT_TIMEOUT : MARROW_GCRB_EVENT_ERROR,
                 cqe ? be16(((const marrow_mlx5_err_cqe *)cqe)->wqe_counter) : wait,
                 cqe ? ((const marrow_mlx5_err_cqe *)cqe)->syndrome : elapsed);
}

/* A failure of this channel's calls: reported, and sticky for its later
 * calls (an exclusive owner keeps the status in its registers). */
MARROW_FN void record_error(const Channel &ch, uint32_t status, uint32_t wait, uint64_t elapsed, const uint8_t *cqe) {
    if (ch.excl && ch.own.status == MARROW_GCRB_STATUS_OK) ch.own.status = status;
    report_error(ch, status, wait, elapsed, cqe);
}

/* A deadline for one wait, started by its first unsuccessful check: a wait
 * that succeeds at once never reads the clock. */
struct Deadline {
    uint64_t start = 0;
    uint32_t spins = 0;
    MARROW_MEMBER bool expired(const Channel &ch, uint32_t wait) {
        relax(++spins);
        uint64_t now = now_ns();
        if (spins == 1) start = now;
        uint64_t t = now - start;
        if (t <= ch.c.timeout_ns) return false;
        record_error(ch, MARROW_GCRB_STATUS_TIMEOUT, wait, t, nullptr);
        return true;
    }
};

MARROW_FN int check_config(const Channel &ch) {
    /* The rings are indexed with masks: their sizes must be powers of two
     * (as mlx5 makes them: log_wq_sz, log_cq_size). */
    uint32_t sq = ch.c.sq_wqebbs, cq = ch.c.cq_ncqe;
    /* A shared poller keeps the CQEs consumed modulo 2^31 (poll_state.ci):
     * enough for the slot and the owner bit of a CQ of up to 2^30. */
    bool pow2 = sq && !(sq & (sq - 1)) && cq && !(cq & (cq - 1)) && cq <= (MARROW_GCRB_HEADS_CI_MASK + 1u) / 2;
    uint32_t re = ch.c.relay_entries;
    bool relay_ok = ch.c.relay_ring ? re && !(re & (re - 1)) && ch.c.transport == MARROW_GCRB_TRANSPORT_P2P : re == 0;
    if (ch.c.magic != MARROW_GCRB_MAGIC || ch.c.version != MARROW_GCRB_VERSION || !relay_ok ||
        (!pow2 && ch.c.transport != MARROW_GCRB_TRANSPORT_P2P)) {
        record_error(ch, MARROW_GCRB_STATUS_BAD_CONFIG, MARROW_GCRB_WAIT_NONE, 0, nullptr);
        return E_BAD_CONFIG;
    }
    return OK;
}

/* An earlier failure sticks: later calls return it instead of going on.
 * A relaxed load: the status only needs to be seen eventually. */
MARROW_FN int sticky_status(const Channel &ch, uint32_t s) {
    if (s == MARROW_GCRB_STATUS_OK || s == MARROW_GCRB_STATUS_REPORTING) return OK;
    if (s == MARROW_GCRB_STATUS_CQE_ERROR) return E_CQE_BASE - (int)ch.err()->syndrome;
    if (s == MARROW_GCRB_STATUS_TIMEOUT) return E_TIMEOUT;
    return E_BAD_CONFIG;
}

MARROW_FN int sticky_error(const Channel &ch) {
    return sticky_status(ch, ch.excl ? ch.own.status : load_relaxed32(&ch.err()->status));
}

/* ------------------------------------------------------------ windows */

/* Whether PE `pe`'s window holds `len` bytes at `off`; its address and
 * key in either case (unused when it does not). */
MARROW_FN bool remote_in(const Channel &ch, uint32_t pe, uint64_t off, uint64_t len, uint64_t *raddr, uint32_t *rkey) {
    bool known = pe < ch.c.key_count;
    /* By value, with constant indices only: a pointer that may point into
     * the Channel, or an index into its array known only at run time, puts
     * the whole Channel in local memory, which the L1 invalidation of every
     * system-scope fence then sends to L2 on its next use. Written out:
     * NVRTC keeps a loop here (even with #pragma unroll) until after the
     * pass that would put the Channel in registers. */
    static_assert(CACHED_KEYS == 4, "remote_in() picks among four cached keys");
    uint64_t base = ch.k[0].raddr, pages = ch.k[0].rlen_pages;
    uint32_t key = ch.k[0].rkey;
    if (pe == 1) base = ch.k[1].raddr, pages = ch.k[1].rlen_pages, key = ch.k[1].rkey;
    if (pe == 2) base = ch.k[2].raddr, pages = ch.k[2].rlen_pages, key = ch.k[2].rkey;
    if (pe == 3) base = ch.k[3].raddr, pages = ch.k[3].rlen_pages, key = ch.k[3].rkey;
    if (known && pe >= CACHED_KEYS) {
        const marrow_gcrb_key *k = ch.key(pe);
        base = k->raddr, pages = k->rlen_pages, key = k->rkey;
    }
    /* With P2P nothing downstream checks a window (no rkey): the length
     * does. A window of 0 pages is unchecked (the NIC's rkey checks it). */
    uint64_t lim = pages << MARROW_GCRB_WINDOW_PAGE_SHIFT;
    *raddr = base + off;
    *rkey = key;
    return known & ((lim == 0) | ((off <= lim) & (len <= lim - off)));
}

/* Whether the local window holds `len` bytes at `off`; their address. */
MARROW_FN bool local_in(const Channel &ch, uint64_t off, uint64_t len, uint64_t *laddr) {
    *laddr = ch.c.local_base + off;
    return (off <= ch.c.local_len) & (len <= ch.c.local_len - off);
}

MARROW_FN int local(const Channel &ch, uint64_t off, uint64_t len, uint64_t *laddr) {
    return local_in(ch, off, len, laddr) ? OK : E_RANGE;
}

/* Both ends of a transfer, in one test: the checks are compares joined
 * with `&` and `|`, which compile to predicates and a single branch, where
 * one early return after another made branches a lone thread takes in
 * turn (scripts/gpu_probe/exclusive_post.cu times the step). On E_RANGE
 * the caller posts nothing. */
MARROW_FN int ends(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint64_t len, uint64_t *raddr,
                   uint32_t *rkey, uint64_t *laddr) {
    bool in = remote_in(ch, pe, roff, len, raddr, rkey);
    return in & local_in(ch, loff, len, laddr) ? OK : E_RANGE;
}

} /* namespace marrow */

#endif /* MARROW_CHANNEL_H */
