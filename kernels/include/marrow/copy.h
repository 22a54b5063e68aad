/*
 * marrow device code: peer memory (transport P2P) reached with the
 * threads' own instructions: system-scope atomics, and copies by many
 * threads with 16-byte vectors or, on Hopper, the Tensor Memory
 * Accelerator's bulk stores.
 */
#ifndef MARROW_COPY_H
#define MARROW_COPY_H

#include "marrow/platform.h"

namespace marrow {

/* Atomics on a peer's memory (transport P2P): system scope, so both GPUs'
 * threads see one order. */
MARROW_FN uint64_t atomic_add_sys(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    return atomicAdd_system((unsigned long long *)p, (unsigned long long)v);
#else
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
#endif
}
MARROW_FN uint64_t cas_sys(uint64_t *p, uint64_t expected, uint64_t desired) {
#if MARROW_GPU
    return atomicCAS_system((unsigned long long *)p, expected, desired);
#else
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
#endif
}

/* Copy `len` bytes with `n` threads, this one being `rank`: 16-byte vectors
 * strided by thread so a warp's accesses coalesce, four in flight per
 * thread, the tail in bytes. Misaligned buffers go byte by byte. */
struct alignas(16) V16 {
    uint64_t lo, hi;
};

/* Whether every address or length in `bits` (or-ed together) is a multiple
 * of 16: what 16-byte vectors and TMA bulk copies need. */
MARROW_FN bool aligned16(uint64_t bits) { return bits % sizeof(V16) == 0; }

MARROW_FN void copy_strided(uint8_t *dst, const uint8_t *src, uint64_t len, uint32_t rank, uint32_t n) {
    uint64_t i = rank, step = n;
    if (aligned16((uint64_t)dst | (uint64_t)src)) {
        uint64_t nvec = len / 16;
        const V16 *s = (const V16 *)src;
        V16 *d = (V16 *)dst;
        /* Four loads in flight before the first store (eight measured
         * slower on the H200: fewer blocks resident). */
        for (; i + 3 * step < nvec; i += 4 * step) {
            V16 v[4];
            for (int k = 0; k < 4; k++) v[k] = s[i + k * step];
            for (int k = 0; k < 4; k++) d[i + k * step] = v[k];
        }
        for (; i < nvec; i += step) d[i] = s[i];
        i = nvec * 16 + rank;
    }
    for (; i < len; i += step) dst[i] = src[i];
}

#if MARROW_GPU
/* A block copies `len` bytes (both ends 16-byte aligned, len a multiple of
 * 16) through shared memory with the Tensor Memory Accelerator: threads load
 * a chunk into one of two shared buffers, thread 0 hands it to a bulk
 * asynchronous store (cp.async.bulk.global.shared::cta, sm_90) and the
 * threads fill the other buffer meanwhile. Hopper's TMA moves the peer
 * writes in large bulk transactions instead of 16 bytes per thread. All
 * threads of the block call. */
constexpr uint32_t TMA_CHUNK = 16384;

MARROW_FN void tma_store_wait_read_1() { asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); }
MARROW_FN void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

MARROW_FN void copy_block_tma(uint8_t *dst, const uint8_t *src, uint64_t len, uint32_t t, uint32_t n) {
    __shared__ __align__(128) uint8_t tma_buf[2][TMA_CHUNK];
    uint64_t chunks = (len + TMA_CHUNK - 1) / TMA_CHUNK;
    for (uint64_t c = 0; c < chunks; c++) {
        uint8_t *b = tma_buf[c & 1];
        uint64_t off = c * TMA_CHUNK;
        uint32_t this_len = (uint32_t)(len - off < TMA_CHUNK ? len - off : TMA_CHUNK);
        /* The store issued two chunks ago from this buffer has read it. */
        if (t == 0 && c >= 2) tma_store_wait_read_1();
        __syncthreads();
        const V16 *s = (const V16 *)(src + off);
        V16 *d = (V16 *)b;
        for (uint32_t i = t; i < this_len / 16; i += n) d[i] = s[i];
        /* Our generic-proxy writes to shared memory before the async proxy reads them. */
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        if (t == 0) {
            uint32_t sb = (uint32_t)__cvta_generic_to_shared(b);
            asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + off), "r"(sb), "r"(this_len)
                         : "memory");
            asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
    }
    /* The writes done (not only the shared reads) before the caller's quiet. */
    if (t == 0) tma_store_wait_all();
    __syncthreads();
}
#endif

} /* namespace marrow */

#endif /* MARROW_COPY_H */
