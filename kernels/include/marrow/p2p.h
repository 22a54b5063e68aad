/*
 * marrow device code: transport P2P. The calling threads' own loads, stores
 * and system-scope atomics on peer-mapped GPU memory, checked against the
 * same windows as a WQE; with a relay, large puts handed to a host thread
 * that has the copy engine make them (gcrb_relay_desc).
 */
#ifndef MARROW_P2P_H
#define MARROW_P2P_H

#include "marrow/barriers.h"
#include "marrow/channel.h"
#include "marrow/copy.h"

namespace marrow {

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
    int rc = ends(ch, pe, roff, loff, len, &raddr, &rkey, &laddr);
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
    return ch.c.relay_ring != 0 && len >= (uint64_t)ch.c.relay_min_kib * 1024;
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

} /* namespace marrow */

#endif /* MARROW_P2P_H */
