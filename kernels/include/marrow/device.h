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
 *      (only we can move it on), and while holding it
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
     * reference and these are the owner's working copies, not its identity. */
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
    /* An exclusive owner's heads into gcrb_heads (cons_idx and cq_ci go
     * there with each CQE). Rung posts are all ready: ready = resv. */
    MARROW_MEMBER void store_heads() const {
        marrow_gcrb_heads *h = heads();
        store_relaxed(&h->resv_head, own.resv);
        store_relaxed(&h->ready_head, own.resv);
        store_relaxed(&h->prod_idx, own.prod);
    }
    MARROW_MEMBER const marrow_gcrb_config *cfg() const { return &c; }
    MARROW_MEMBER marrow_gcrb_heads *heads() const { return (marrow_gcrb_heads *)(page + MARROW_GCRB_OFF_HEADS); }
    MARROW_MEMBER marrow_gcrb_error *err() const { return (marrow_gcrb_error *)(page + MARROW_GCRB_OFF_ERROR); }
    MARROW_MEMBER marrow_gcrb_key *key(uint32_t pe) const { return (marrow_gcrb_key *)(page + MARROW_GCRB_OFF_KEYS) + pe; }
    MARROW_MEMBER marrow_gcrb_trace_entry *trace_at(uint64_t i) const {
        return (marrow_gcrb_trace_entry *)(page + MARROW_GCRB_OFF_TRACE) + (i % MARROW_GCRB_TRACE_ENTRIES);
    }
    MARROW_MEMBER bool flag(uint32_t shift) const { return (c.flags >> shift) & 1u; }
};

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
    if (!cas32(&e->status, MARROW_GCRB_STATUS_OK, 0xffffffffu)) return; /* someone else reported first */
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
    bool pow2 = sq && !(sq & (sq - 1)) && cq && !(cq & (cq - 1));
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
    if (s == MARROW_GCRB_STATUS_OK || s == 0xffffffffu) return OK;
    if (s == MARROW_GCRB_STATUS_CQE_ERROR) return E_CQE_BASE - (int)ch.err()->syndrome;
    if (s == MARROW_GCRB_STATUS_TIMEOUT) return E_TIMEOUT;
    return E_BAD_CONFIG;
}

MARROW_FN int sticky_error(const Channel &ch) {
    return sticky_status(ch, ch.excl ? ch.own.status : load_relaxed32(&ch.err()->status));
}

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

/* The walk itself, from the consumer state (cons, ci) its caller owns:
 * under the poll lock, or an exclusive channel's registers. The heads are
 * published as they move: with a release for the shared protocol, whose
 * waiters acquire cons_idx; relaxed for an exclusive owner, whose copy is
 * only for the host to decode. */
MARROW_FN int walk_cq(const Channel &ch, uint64_t upto, uint64_t &cons, uint64_t &ci) {
    marrow_gcrb_heads *h = ch.heads();
    const marrow_gcrb_config *c = ch.cfg();
    uint8_t *cq = (uint8_t *)c->cq_base;
    /* Return slots to the NIC (rdma-core update_cons_index) every `batch`
     * CQEs: at most sq_wqebbs CQEs are ever outstanding, so a CQ deeper than
     * the send queue leaves slack for the doorbell record to lag by half of
     * it, and each update costs a system-scope fence. A CQ no deeper than
     * the send queue is updated on every CQE. */
    uint64_t slack = c->cq_ncqe > c->sq_wqebbs ? c->cq_ncqe - c->sq_wqebbs : 0;
    uint64_t batch = slack >= 4 ? floor_pow2(slack / 2) : 1; /* a power of two: a mask, not a division */
    int rc = OK;
    /* Starts idle: the first read is of one slot. */
    uint32_t idle = 1;
    while (cons < upto && rc == OK) {
        /* A collapsed CQ has one slot; an owner-bit ring, the next n, but
         * only while CQEs keep coming: a poll that found nothing reads one
         * slot again, so waiting costs one PCIe read at a time, as before
         * the look-ahead. One 32-bit load of {wqe_counter, signature,
         * op_own} (CQE bytes 60..63) each: one PCIe read instead of two
         * (DOCA's pre-sm90 poll). */
        uint64_t n = c->cq_mode || idle ? 1 : (upto - cons < CQ_LOOKAHEAD ? upto - cons : CQ_LOOKAHEAD);
        auto tail_at = [&](uint64_t k) {
            return k < n ? load_device_u32((const uint32_t *)(cq + (c->cq_mode ? 0 : ((ci + k) & (c->cq_ncqe - 1)) * MARROW_MLX5_CQE_SIZE) + 60))
                         : 0u;
        };
        uint32_t w0 = tail_at(0), w1 = tail_at(1), w2 = tail_at(2), w3 = tail_at(3);
        uint32_t w4 = tail_at(4), w5 = tail_at(5), w6 = tail_at(6), w7 = tail_at(7);
        uint64_t got = 0;
        for (; got < n; got++) {
            uint32_t tail = w0;
            w0 = w1, w1 = w2, w2 = w3, w3 = w4, w4 = w5, w5 = w6, w6 = w7, w7 = 0;
            uint8_t *cqe = cq + (c->cq_mode ? 0 : (ci & (c->cq_ncqe - 1)) * MARROW_MLX5_CQE_SIZE);
            uint8_t op_own = (uint8_t)(tail >> 24);
            uint8_t opcode = op_own >> MARROW_MLX5_CQE64_OPCODE_SHIFT;
            uint16_t counter = be16((uint16_t)tail);
            uint64_t done = 0;
            bool fresh = opcode != MARROW_MLX5_CQE_INVALID;
            if (fresh && c->cq_mode) {
                /* Collapsed: slot 0 holds the latest CQE, at or after the last
                 * one consumed; new when its counter is past it. */
                done = widen_from(cons ? cons - 1 : 0, counter) + 1;
                fresh = done > cons || opcode == MARROW_MLX5_CQE_REQ_ERR;
            } else if (fresh) {
                /* The owner bit of the previous pass: hardware still owns it. */
                fresh = (op_own & 1) == ((ci & c->cq_ncqe) ? 1 : 0);
            }
            if (!fresh) break;
            /* An owner bit (or counter) was seen: only now read the rest. */
            if (got == 0) from_device();
            if (opcode == MARROW_MLX5_CQE_REQ_ERR || opcode == MARROW_MLX5_CQE_RESP_ERR) {
                record_error(ch, MARROW_GCRB_STATUS_CQE_ERROR, MARROW_GCRB_WAIT_NONE, 0, cqe);
                rc = E_CQE_BASE - (int)((const marrow_mlx5_err_cqe *)cqe)->syndrome;
                break;
            }
            if (!c->cq_mode) done = widen_from(cons, counter) + 1;
            trace(ch, MARROW_GCRB_EVENT_CQE, counter, op_own);
            if (done > cons) {
                cons = done;
                if (ch.excl) {
                    store_relaxed(&h->cons_idx, cons);
                } else {
                    store_release(&h->cons_idx, cons);
                }
            }
            store_relaxed(&h->cq_ci, ++ci);
            if (!c->cq_mode && (ci & (batch - 1)) == 0) {
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
        idle = 0;
    }
    return rc;
}

/* Consume CQEs until WQEBBs below `upto` completed; one poller at a time
 * (the others return at once and look at cons_idx). While nothing new has
 * arrived the poller re-reads the CQE, up to POLL_SPINS times, keeping the
 * lock: a waiter then sees its CQE one PCIe read after it lands, not a lock
 * round trip later. Once `upto` is reached it leaves the rest of the CQ to
 * the next poller rather than spend a PCIe read looking for more. */
MARROW_FN int poll_cq(const Channel &ch, uint64_t upto, bool *reached) {
    marrow_gcrb_heads *h = ch.heads();
    *reached = false;
    if (!cas32_acquire(&h->poll_lock, 0, 1)) return sticky_error(ch);
    /* cons_idx and cq_ci change only under this lock: two loads in flight at once. */
    uint64_t cons = load_relaxed(&h->cons_idx), ci = load_relaxed(&h->cq_ci);
    int rc = walk_cq(ch, upto, cons, ci);
    store_release32(&h->poll_lock, 0);
    *reached = cons >= upto;
    /* Our own target reached without error: leave the sticky status to the
     * next call rather than spend a round trip on it now. */
    return rc != OK ? rc : (*reached ? OK : sticky_error(ch));
}

/* Wait until the WQEBBs below `upto` completed. Whoever posted them rang
 * for them, or left the ringing to a later holder of the ready chain
 * (ready_and_ring), so a waiter only polls. */
MARROW_FN int wait_own(const Channel &ch, uint64_t upto, uint32_t wait);

MARROW_FN int wait_done(const Channel &ch, uint64_t upto, uint32_t wait) {
    if (ch.excl) return wait_own(ch, upto, wait);
    Deadline d;
    marrow_gcrb_heads *h = ch.heads();
    while (load_acquire(&h->cons_idx) < upto) {
        bool reached;
        int rc = poll_cq(ch, upto, &reached);
        if (rc != OK) return rc;
        if (reached) break;
        if (d.expired(ch, wait)) return E_TIMEOUT;
    }
    return OK;
}

/* ------------------------------------------------------------ posting */

/* Reserve `n` WQEBBs; wait for room by polling the CQ. The sticky status,
 * a snapshot of cons_idx and the atomic add are issued together: one round
 * trip to L2, not three. A reservation taken on a channel already in error
 * is never used; the error sticks, so nothing waits for it. */
MARROW_FN int reserve(const Channel &ch, uint32_t n, uint64_t *idx) {
    marrow_gcrb_heads *h = ch.heads();
    uint32_t status = load_relaxed32(&ch.err()->status);
    uint64_t cons = load_relaxed(&h->cons_idx);
    *idx = atomic_add(&h->resv_head, n);
    int rc = sticky_status(ch, status);
    if (rc != OK) return rc;
    uint64_t depth = ch.c.sq_wqebbs;
    if (*idx + n <= depth) return OK;
    uint64_t need = *idx + n - depth;
    /* Room already (the snapshot can only be behind): the common case. No
     * store of ours to the slot can pass it: stores are not speculative. */
    if (cons >= need) return OK;
    return wait_done(ch, need, MARROW_GCRB_WAIT_SLOT);
}

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

/* Write the WQE for `op` at index `idx`: 64 bytes, stores of 16. Returns
 * its first 8 bytes (opmod_idx_opcode, qpn_ds), rdma-core's doorbell value. */
MARROW_FN uint64_t write_wqe(const Channel &ch, uint64_t idx, const Op &op, bool signaled = true) {
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
    /* ctrl: opmod_idx_opcode @0, qpn_ds @4, signature @8, dci_stream_channel_id @9, fm_ce_se @11, imm @12 */
    uint32_t opmod_idx_opcode = ((uint32_t)op.opmod << MARROW_MLX5_WQE_CTRL_SEG_OPMOD_SHIFT) |
                                ((uint32_t)(idx & MARROW_MLX5_WQE_CTRL_SEG_WQE_INDEX_MASK) << MARROW_MLX5_WQE_CTRL_SEG_WQE_INDEX_SHIFT) |
                                op.opcode;
    uint32_t qpn_ds = (c->qpn << MARROW_MLX5_WQE_CTRL_SEG_QPN_SHIFT) | ds;
    seg[0] = (uint64_t)be32(opmod_idx_opcode) | ((uint64_t)be32(qpn_ds) << 32);
    seg[1] = ((uint64_t)(signaled ? op.fm_ce_se : op.fm_ce_se & ~CQ_UPDATE) << 24);
    /* raddr: raddr @0 (be64), rkey @8, reserved @12 */
    seg[2] = be64(op.raddr);
    seg[3] = (uint64_t)be32(op.rkey);
    /* data: byte_count @0, lkey @4, addr @8 */
    uint64_t d0 = (uint64_t)be32(op.len) | ((uint64_t)be32(op.lkey) << 32), d1 = be64(op.laddr);
    if (atomic) {
        /* atomic: swap_add @0, compare @8 */
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
    trace(ch, MARROW_GCRB_EVENT_POST, idx, op.opcode);
    return seg[0];
}

/* The ready chain: [idx, idx+n) becomes ready strictly in order, and only
 * the thread whose reservation starts at ready_head may move it, so waiting
 * with loads and then one release store is enough (no compare-and-swap
 * storm, unlike NVSHMEM's atomicCAS loop). The holder of the chain also
 * rings, so doorbell records never go backwards without a doorbell lock.
 * It rings when
 *   - the caller asks (a blocking call waits for this WQE), or
 *   - nobody reserved after it (resv_head == our end), or
 *   - a batch of RING_BATCH WQEBBs was crossed (NVSHMEM_IBGDA_NUM_REQUESTS_IN_BATCH), or
 *   - someone reserved past the ring and may be waiting for room, which
 *     only completions of what is ready here can make.
 * Otherwise the next holder rings for both: every WQE ends up rung by the
 * last holder of a burst, who always sees itself last. A thread that fails
 * between its reservation and its turn stops the chain; its error is
 * sticky and every later call returns it. */
constexpr uint64_t RING_BATCH = 32;

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

/* `v` was loaded before the caller's to_device() fence, which makes the
 * relaxed load of ready_head an acquire: if it already showed our turn,
 * there is nothing to wait for (only we can move it on). */
/* Lanes a posting group can have: a warp. */
constexpr uint64_t MAX_GROUP = 32;

/* Doorbell record, then doorbell, for the WQEBBs below `end`; the caller
 * has ordered their WQE stores before this (to_device). `last_ctrl` is the
 * last WQE's first 8 bytes, the doorbell with flags.db_ctrl_bytes. */
MARROW_FN void ring(const Channel &ch, uint64_t end, uint64_t last_ctrl) {
    uint32_t *dbrec = (uint32_t *)ch.c.dbrec_addr;
    uint64_t db = ch.flag(MARROW_GCRB_CONFIG_DB_CTRL_BYTES_SHIFT)
                      ? last_ctrl
                      : (uint64_t)be32((uint32_t)(end & MARROW_MLX5_UAR_DB_WQE_INDEX_MASK) << MARROW_MLX5_UAR_DB_WQE_INDEX_SHIFT) |
                            ((uint64_t)be32(ch.c.qpn << MARROW_MLX5_UAR_DB_QPN_SHIFT) << 32);
    if (ch.flag(MARROW_GCRB_CONFIG_EARLY_DOORBELL_SHIFT)) {
        /* DOCA's early ringing (doca_gpu_dev_verbs_submit_db): the WQEs are
         * fenced already, and the doorbell itself says how far to go, so
         * the NIC can start one system-scope fence sooner. The record and
         * the second ring below cover a NIC that reads the record instead
         * (doorbell recovery); a NIC that already went that far ignores
         * the repeat. */
        mmio_store64((uint64_t *)ch.c.db_addr, db);
    }
    store_device_u32(&dbrec[MARROW_MLX5_SND_DBR], be32((uint32_t)end & MARROW_MLX5_QP_DBREC_SEND_WQE_COUNTER_MASK));
    /* Doorbell record before the doorbell that makes the NIC read it. */
    wc_start();
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
    trace(ch, MARROW_GCRB_EVENT_DOORBELL, end, 0);
}

MARROW_FN int ready_and_ring(const Channel &ch, uint64_t idx, uint32_t n, bool force, bool lazy, uint64_t last_ctrl,
                             ChainView v) {
    marrow_gcrb_heads *h = ch.heads();
    if (v.ready != idx) {
        Deadline d;
        while (load_acquire(&h->ready_head) != idx) {
            int rc = sticky_error(ch);
            if (rc != OK) return rc;
            if (d.expired(ch, MARROW_GCRB_WAIT_READY)) return E_TIMEOUT;
        }
    }
    uint64_t resv = v.resv, cons = v.cons;
    uint64_t end = idx + n;
    uint64_t depth = ch.c.sq_wqebbs;
    /* Lazy (flags.lazy_nbi_doorbell, put_nbi only): the last poster does not
     * ring; a ring more than half full (less a group) does instead, which
     * covers anyone who reserves later and waits for room: the holder just
     * before such a waiter sees end - cons > depth - MAX_GROUP. */
    bool tail = lazy ? end - cons + MAX_GROUP > depth / 2 : resv == end;
    if (force || tail || end / RING_BATCH != idx / RING_BATCH || resv > cons + depth) {
        /* Every poster fenced (to_device) its WQE stores before its turn,
         * and our acquire of ready_head saw theirs: the WQEs are ordered
         * before this doorbell record. */
        ring(ch, end, last_ctrl);
    }
    store_release(&h->ready_head, end);
    return OK;
}

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
    bool waited;
    int rc = own_room(ch, end, &waited);
    if (rc != OK) return rc;
    o.resv = end;
    bool ring_now = ring_due(force_ring, lazy, idx, end, o.cons, ch.c.sq_wqebbs);
    uint64_t ctrl = write_wqe(ch, idx, op, ring_now);
    if (ring_now) {
        /* Our WQE stores, and any left unrung before, ahead of the doorbell record. */
        to_device();
        ring(ch, end, ctrl);
    }
    if (idx_out) *idx_out = idx;
    return OK;
}

MARROW_FN int post_own(const Channel &ch, const Op &op, uint64_t *idx_out, bool force_ring, bool lazy) {
    const Group &g = ch.grp;
    if (g.solo()) return post_own_solo(ch, op, idx_out, force_ring, lazy);
    if (!own_group(ch)) return E_BAD_CONFIG;
    Own &o = ch.own;
    /* Every lane's copy agrees (own_group), so each knows the base and the
     * room; only the leader acts on the CQ, and says whether it did. */
    uint64_t base = o.resv, end = base + g.size;
    int rc = OK;
    bool waited = false;
    if (g.leader()) rc = own_room(ch, end, &waited);
    /* One reduction tells the group both whether any lane forces a ring
     * and whether the leader has news (an error, or heads moved by its
     * wait); its words follow only then. A shuffle and a vote each time
     * cost a warp's post 80 ns (scripts/gpu_probe/exclusive_post.cu). */
    uint32_t news = g.or32((force_ring ? 1u : 0u) | (g.leader() && (rc != OK || waited) ? 2u : 0u));
    if (news & 2u) {
        rc = g.from_leader32(rc);
        own_from_leader(ch, g);
    }
    if (rc != OK) return rc;
    uint64_t idx = base + g.rank;
    o.resv = end;
    bool ring_now = ring_due((news & 1u) != 0, lazy, base, end, o.cons, ch.c.sq_wqebbs);
    /* Only the WQEs of a ring get CQEs (selective signaling, rdma-core's
     * sq_sig_all = 0): an RC QP completes in order, so a CQE covers every
     * WQE before it, and unrung lazy posts cost the NIC and the poller no
     * CQE each. Every ring's last WQE is signaled, so all rung means all
     * covered. */
    uint64_t ctrl = write_wqe(ch, idx, op, ring_now);
    if (ring_now) {
        /* Our WQE stores, and any left unrung before, ahead of the doorbell record. */
        to_device();
        uint64_t last_ctrl = ch.flag(MARROW_GCRB_CONFIG_DB_CTRL_BYTES_SHIFT) ? g.from_last64(ctrl) : 0;
        g.sync();
        if (g.leader()) ring(ch, end, last_ctrl);
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
        /* Lazy posting left this lane's WQE stores unfenced; the leader's
         * are fenced by the NOP's post below. */
        if (!g.leader()) to_device();
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

/* Post one WQE per calling thread. On the GPU the threads of a warp that
 * call together on one channel post as a group (warp-aggregated): the
 * leader reserves for all, each writes its own WQE, the leader takes the
 * ready chain once for all. One reservation, one turn of the chain and at
 * most one doorbell per warp instead of per thread. */
MARROW_FN int post(const Channel &ch, const Op &op, uint64_t *idx_out, bool force_ring, bool lazy = false) {
    if (ch.excl) return post_own(ch, op, idx_out, force_ring, lazy);
    Group g = group_of(ch.page);
    int rc = OK;
    uint64_t base = 0;
    ChainView view{~0ull, 0, 0};
    if (g.leader()) {
        rc = reserve(ch, g.size, &base);
        view = chain_view(ch);
    }
    rc = g.from_leader32(rc);
    base = g.from_leader64(base);
    if (rc != OK) return rc;
    uint64_t idx = base + g.rank;
    uint64_t ctrl = write_wqe(ch, idx, op);
    /* Our WQE stores before any holder of the chain rings past them. */
    to_device();
    bool force = g.any(force_ring);
    uint64_t last_ctrl = g.from_last64(ctrl);
    g.sync();
    if (g.leader()) rc = ready_and_ring(ch, base, g.size, force, lazy, last_ctrl, view);
    rc = g.from_leader32(rc);
    if (idx_out) *idx_out = idx;
    return rc;
}

MARROW_FN int remote(const Channel &ch, uint32_t pe, uint64_t off, uint64_t len, uint64_t *raddr, uint32_t *rkey) {
    if (pe >= ch.c.key_count) return E_RANGE;
    /* By value, with constant indices only: a pointer that may point into
     * the Channel, or an index into its array known only at run time, puts
     * the whole Channel in local memory, which the L1 invalidation of every
     * system-scope fence then sends to L2 on its next use. */
    uint64_t base, pages;
    uint32_t key;
    if (pe < CACHED_KEYS) {
        /* Written out: NVRTC keeps a loop here (even with #pragma unroll)
         * until after the pass that would put the Channel in registers. */
        static_assert(CACHED_KEYS == 4, "remote() picks among four cached keys");
        base = ch.k[0].raddr, pages = ch.k[0].rlen_pages, key = ch.k[0].rkey;
        if (pe == 1) base = ch.k[1].raddr, pages = ch.k[1].rlen_pages, key = ch.k[1].rkey;
        if (pe == 2) base = ch.k[2].raddr, pages = ch.k[2].rlen_pages, key = ch.k[2].rkey;
        if (pe == 3) base = ch.k[3].raddr, pages = ch.k[3].rlen_pages, key = ch.k[3].rkey;
    } else {
        const marrow_gcrb_key *k = ch.key(pe);
        base = k->raddr, pages = k->rlen_pages, key = k->rkey;
    }
    /* With P2P nothing downstream checks a window (no rkey): the length does. */
    uint64_t lim = pages << 12;
    if (lim && (off > lim || len > lim - off)) return E_RANGE;
    *raddr = base + off;
    *rkey = key;
    return OK;
}

MARROW_FN int local(const Channel &ch, uint64_t off, uint64_t len, uint64_t *laddr) {
    if (off > ch.c.local_len || len > ch.c.local_len - off) return E_RANGE;
    *laddr = ch.c.local_base + off;
    return OK;
}

/* ------------------------------------------------------------ peer-to-peer */

/* Transport P2P (gcrb_config.transport): the key table holds each PE's
 * window as mapped into this process (CUDA IPC over NVLink or PCIe peer
 * access), so a put is the calling threads' own stores, a get their loads,
 * an atomic one system-scope atomic, and quiet one system-scope fence. No
 * WQE, doorbell or CQ is involved; the GCRB's heads stay zero. */
MARROW_FN bool p2p(const Channel &ch) { return ch.c.transport == MARROW_GCRB_TRANSPORT_P2P; }

/* Both ends of a P2P transfer: checked against the windows like a WQE's. */
MARROW_FN int p2p_ends(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint64_t len, uint8_t **r, uint8_t **l) {
    uint64_t raddr = 0, laddr = 0;
    uint32_t rkey;
    int rc = remote(ch, pe, roff, len, &raddr, &rkey);
    if (rc == OK) rc = local(ch, loff, len, &laddr);
    *r = (uint8_t *)raddr;
    *l = (uint8_t *)laddr;
    return rc;
}

/* The copy-engine relay (gcrb_config.relay_ring). SM stores over the H200
 * pair's NVLinks stop near 370 GB/s where the copy engine reaches 395
 * (docs/PERFORMANCE.md, scripts/gpu_probe/p2p_relay.cu), and only the host
 * can start the copy engine. So a put of at least relay_min_kib KiB goes to
 * a host relay thread as one gcrb_relay_desc in host memory, as NVSHMEM's
 * device code hands work to its proxy thread: a ticket from
 * gcrb_heads.resv_head, room in the ring (tickets - copies done <
 * relay_entries), the descriptor, a system-scope fence, then its seq. The
 * relay has the copy engine copy, and the same stream then store the count
 * of copies done into gcrb_heads.cons_idx. The CPU never touches the
 * bytes; it is on these puts' control path. Blocking puts, put_signal,
 * fence and quiet wait for the count, under the channel's timeout. */
MARROW_FN bool relayed(const Channel &ch, uint64_t len) {
    return ch.c.relay_ring != 0 && len >= ((uint64_t)ch.c.relay_min_kib << 10);
}

/* Wait until the relay has made `upto` copies. */
MARROW_FN int relay_wait(const Channel &ch, uint64_t upto) {
    const uint64_t *done = &ch.heads()->cons_idx;
    Deadline d;
    /* Acquire at system scope: the copy engine wrote the bytes before the
     * count, and what the caller does next (a signal) must follow them. */
    while (load_acquire_sys(done) < upto) {
        int rc = sticky_error(ch);
        if (rc != OK) return rc;
        if (d.expired(ch, MARROW_GCRB_WAIT_RELAY)) return E_TIMEOUT;
    }
    return OK;
}

/* Hand one copy to the relay; *done_at = the count of copies done that
 * includes it. */
MARROW_FN int relay_post(const Channel &ch, uint64_t dst, uint64_t src, uint64_t len, uint64_t *done_at) {
    uint64_t t = atomic_add(&ch.heads()->resv_head, 1);
    uint64_t n = ch.c.relay_entries;
    /* Slot t % n is free once copy t - n is done (taken, then made). */
    if (t >= n) {
        int rc = relay_wait(ch, t - n + 1);
        if (rc != OK) return rc;
    }
    volatile marrow_gcrb_relay_desc *d = (volatile marrow_gcrb_relay_desc *)ch.c.relay_ring + (t & (n - 1));
    d->dst = dst;
    d->src = src;
    d->len = len;
    /* The source bytes and the descriptor before its seq, for the host. */
    to_device();
    d->seq = t + 1;
    if (done_at) *done_at = t + 1;
    return OK;
}

/* A P2P put: the threads' own stores, or one relay descriptor. *done_at
 * (if asked) is the relay's count that covers it, 0 for stores. */
MARROW_FN int p2p_put(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint64_t len, uint64_t *done_at) {
    uint8_t *r, *l;
    if (done_at) *done_at = 0;
    int rc = p2p_ends(ch, pe, roff, loff, len, &r, &l);
    if (rc != OK) return rc;
    if (relayed(ch, len)) return relay_post(ch, (uint64_t)r, (uint64_t)l, len, done_at);
    copy_strided(r, l, len, 0, 1);
    return OK;
}

/* Every relay copy handed over so far made (nothing to wait for without a relay). */
MARROW_FN int relay_drain(const Channel &ch) {
    return ch.c.relay_ring ? relay_wait(ch, load_acquire(&ch.heads()->resv_head)) : OK;
}

/* ------------------------------------------------------------ the API */


/* A WRITE or READ between local offset `loff` and PE `pe`'s window at `roff`. */
MARROW_FN int rw_op(const Channel &ch, uint8_t opcode, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len, Op *op) {
    *op = Op{};
    /* A pointer data segment's byte_count has bit 31 clear: set, the NIC
     * reads the segment as inline data (MLX5_INLINE_SEG). The window
     * checks below allow any length their windows hold. */
    if (len & MARROW_MLX5_INLINE_SEG) return E_RANGE;
    int rc = remote(ch, pe, roff, len, &op->raddr, &op->rkey);
    if (rc == OK) rc = local(ch, loff, len, &op->laddr);
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
    return rc != OK ? rc : wait_done(ch, idx + 1, MARROW_GCRB_WAIT_CQ);
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
    if (rc == OK) rc = wait_done(ch, idx + 1, MARROW_GCRB_WAIT_CQ);
    /* The NIC wrote the local buffer: read it only after the CQE. */
    from_device();
    return rc;
}

/* An 8-byte atomic WQE on PE `pe` at `roff`, its result landing at local `result_loff`. */
MARROW_FN int atomic_op(const Channel &ch, uint8_t opcode, uint32_t pe, uint64_t roff, uint64_t result_loff,
                        uint64_t swap_add, uint64_t compare, uint8_t fm_ce_se, Op *op) {
    *op = Op{};
    int rc = remote(ch, pe, roff, 8, &op->raddr, &op->rkey);
    if (rc == OK) rc = local(ch, result_loff, 8, &op->laddr);
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
    if (rc == OK) rc = wait_done(ch, idx + 1, MARROW_GCRB_WAIT_CQ);
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
        return rc != OK ? rc : wait_done(ch, idx + 1, MARROW_GCRB_WAIT_CQ);
    }
    Deadline d;
    while (load_acquire(&h->ready_head) < target) {
        int rc = sticky_error(ch);
        if (rc != OK) return rc;
        if (d.expired(ch, MARROW_GCRB_WAIT_READY)) return E_TIMEOUT;
    }
    return wait_done(ch, target, MARROW_GCRB_WAIT_CQ);
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
        if (tma && (((uint64_t)r | (uint64_t)l | len) & 15) == 0) {
            copy_block_tma(r, l, len, t, n);
        } else {
            copy_strided(r, l, len, t, n);
        }
        return OK;
    }
    __syncthreads();
    if (t == 0) block_rc = len > 0xffffffffull ? E_RANGE : put_nbi(ch, pe, roff, loff, (uint32_t)len);
    __syncthreads();
    return block_rc;
}

/* Warp-cooperative put: all 32 lanes call; they post as one group (one
 * reservation of 32 WQEBBs, one turn of the ready chain, one doorbell).
 * put_nbi does the same for whichever lanes call it together; this entry
 * point first reconverges the warp so the group is the whole warp. */
MARROW_FN int put_nbi_warp(const Channel &ch, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len) {
    __syncwarp(0xffffffffu);
    return put_nbi(ch, pe, roff, loff, len);
}
#endif

} /* namespace marrow */

#endif /* MARROW_DEVICE_H */
