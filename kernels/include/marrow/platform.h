/*
 * marrow device platform layer: the handful of primitives the posting and
 * polling protocol needs, for the GPU (nvcc or NVRTC, sm_90) and for the CPU
 * (g++), so that device.h is written once.
 *
 * Barriers carry the names of crates/mmio (after rdma-core util/udma_barrier.h):
 *   to_device   - WQE stores before the doorbell record the NIC reads
 *   from_device - a load that saw ownership (CQE owner) before payload loads
 *   wc_start    - doorbell record before the doorbell MMIO store
 *   wc_flush    - push the doorbell out before what follows
 * The rings, doorbell records and CQs live in host memory mapped into the GPU
 * (cudaHostRegister), so the GPU fences are system scope
 * (docs/SOURCES.md §2.3: NVSHMEM's IBGDA_MEMBAR is
 * __threadfence_system() unless NIC buffers are in GPU memory).
 */
#ifndef MARROW_PLATFORM_H
#define MARROW_PLATFORM_H

#include "marrow/generated/gcrb.h"
#include "marrow/generated/mlx5.h"

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MARROW_GPU 1
#define MARROW_FN __device__ __forceinline__
#define MARROW_MEMBER __device__ __forceinline__
#else
#define MARROW_GPU 0
#define MARROW_FN static inline
#define MARROW_MEMBER inline
#include <sched.h>
#include <time.h>
#include "marrow/generated/barrier.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#endif

namespace marrow {

#if !MARROW_GPU
/* The CPU harness numbers its threads (the GPU has blockIdx/threadIdx). */
extern thread_local uint32_t cpu_thread_index;
MARROW_FN uint32_t cpu_thread_id() { return cpu_thread_index; }
MARROW_FN void sched_yield_hook() { sched_yield(); }
#endif

/* ------------------------------------------------------------ byte order */

MARROW_FN uint32_t be32(uint32_t v) {
#if MARROW_GPU
    return __byte_perm(v, 0, 0x0123); /* layout-ok: the byte swap's selector */
#else
    return __builtin_bswap32(v);
#endif
}

MARROW_FN uint16_t be16(uint16_t v) { return (uint16_t)((v >> 8) | (v << 8)); } /* layout-ok: a byte swap */

/* The largest power of two not above x (x > 0). */
MARROW_FN uint64_t floor_pow2(uint64_t x) {
#if MARROW_GPU
    return 1ull << (63 - __clzll((long long)x));
#else
    return 1ull << (63 - __builtin_clzll(x));
#endif
}

MARROW_FN uint64_t be64(uint64_t v) {
    return ((uint64_t)be32((uint32_t)v) << 32) | be32((uint32_t)(v >> 32)); /* layout-ok: the halves swapped */
}

/* ------------------------------------------------------------ clock */

/* Nanoseconds from a monotonic clock: %globaltimer on the GPU. */
MARROW_FN uint64_t now_ns() {
#if MARROW_GPU
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

/* One turn of a tight poll (a CQE re-read under the poll lock). */
MARROW_FN void spin_pause() {
#if !MARROW_GPU && defined(__x86_64__)
    _mm_pause();
#endif
}

/* Back off inside a wait loop. */
MARROW_FN void relax(uint32_t spins) {
#if MARROW_GPU
    if (spins > 64) __nanosleep(64);
#else
#if defined(__x86_64__)
    _mm_pause();
#endif
    /* Small machines: let the device model's engine thread run. */
    if (spins > 256) sched_yield_hook();
#endif
}

/* ------------------------------------------------------------ atomics */
/* These act on the GCRB's counters, which only the device code's threads
 * touch while a kernel runs (the host reads them after): GPU scope on the
 * GPU, where the GCRB lives in GPU memory (NVSHMEM keeps its mvars there
 * too). Stores the NIC must see (WQEs, doorbell record, doorbell) are
 * ordered by the system-scope barriers below instead. */

MARROW_FN uint64_t atomic_add(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    return atomicAdd((unsigned long long *)p, (unsigned long long)v);
#else
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
#endif
}

/* Raise *p to at least v; returns the value before. */
MARROW_FN uint64_t atomic_max(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    return atomicMax((unsigned long long *)p, (unsigned long long)v);
#else
    uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
    }
    return old;
#endif
}

MARROW_FN bool cas32(uint32_t *p, uint32_t expected, uint32_t desired) {
#if MARROW_GPU
    return atomicCAS((unsigned int *)p, expected, desired) == expected;
#else
    return __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
#endif
}

/* Take a bit of *p, returning the word before: acquire, so a holder that
 * found the bit clear reads what the previous holder wrote before it freed
 * the word (cq.h's poll_state). */
MARROW_FN uint64_t atomic_or_acquire(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    uint64_t old;
    asm volatile("atom.acquire.gpu.global.or.b64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
    return old;
#else
    return __atomic_fetch_or(p, v, __ATOMIC_ACQUIRE);
#endif
}

/* A release fence for the GCRB's counters: the relaxed stores after it are
 * each a release (PTX: a fence.acq_rel then a strong store is a release
 * pattern; C++: a release fence then an atomic store), so several words
 * are published for the price of one fence. */
MARROW_FN void fence_release_gpu() {
#if MARROW_GPU
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

/* The ready marks' bits (post_shared.h): set once a poster's WQEs are
 * fenced, so a relaxed OR after that fence is a release (a fence then a
 * strong write, PTX); cleared by the holder that claims them, ordered
 * before the ready_head store that lets the next lap's posters mark. No
 * value comes back, so the GPU issues them as reductions and waits for
 * neither. */
MARROW_FN void atomic_or_relaxed(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    atomicOr((unsigned long long *)p, (unsigned long long)v);
#else
    __atomic_fetch_or(p, v, __ATOMIC_RELEASE);
#endif
}
MARROW_FN void atomic_and_relaxed(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    atomicAnd((unsigned long long *)p, (unsigned long long)v);
#else
    __atomic_fetch_and(p, v, __ATOMIC_RELAXED);
#endif
}

/* After relaxed loads, makes them acquires (PTX: a relaxed load then a
 * fence.acq_rel is an acquire pattern): one fence for several words. */
MARROW_FN void fence_acquire_gpu() {
#if MARROW_GPU
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

/* Trailing one bits of x (64 when all are ones). */
MARROW_FN uint32_t trailing_ones64(uint64_t x) {
    uint64_t z = ~x;
#if MARROW_GPU
    return z ? (uint32_t)(__ffsll((long long)z) - 1) : 64u;
#else
    return z ? (uint32_t)__builtin_ctzll(z) : 64u;
#endif
}

MARROW_FN uint64_t load_acquire(const uint64_t *p) {
#if MARROW_GPU
    uint64_t v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

MARROW_FN uint32_t load_acquire32(const uint32_t *p) {
#if MARROW_GPU
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/* Loads that order nothing (a status seen eventually, a snapshot of a head
 * that only grows): they issue without waiting, so several overlap. */
MARROW_FN uint64_t load_relaxed(const uint64_t *p) {
#if MARROW_GPU
    uint64_t v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}
MARROW_FN uint32_t load_relaxed32(const uint32_t *p) {
#if MARROW_GPU
    uint32_t v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}
/* A head other threads only read for reports (prod_idx). */
MARROW_FN void store_relaxed(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}
MARROW_FN void store_release(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

MARROW_FN void store_release32(uint32_t *p, uint32_t v) {
#if MARROW_GPU
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
#else
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

/* 16 bytes of a WQE into the ring (DOCA's st.weak.cs.v2.b64): one store
 * instruction per segment, not cached on the way (the GPU never reads it). */
MARROW_FN void store_wqe16(uint64_t *p, uint64_t lo, uint64_t hi) {
#if MARROW_GPU
    asm volatile("st.global.cs.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
#else
    ((volatile uint64_t *)p)[0] = lo;
    ((volatile uint64_t *)p)[1] = hi;
#endif
}
/* A word the NIC reads (the doorbell record): a plain store, ordered by the
 * barrier that follows it. */
MARROW_FN void store_device_u32(uint32_t *p, uint32_t v) { *(volatile uint32_t *)p = v; }

/* A byte or halfword the NIC writes (CQE op_own, wqe_counter): never cached. */
/* Loads of what the NIC writes (CQEs): system scope on the GPU, so no
 * cache between the GPU and host memory answers for the NIC (DOCA polls
 * op_own with ld.relaxed.sys on sm_90). */
MARROW_FN uint32_t load_device_u32(const uint32_t *p) {
#if MARROW_GPU
    uint32_t v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
#else
    return *(const volatile uint32_t *)p;
#endif
}

/* An 8-byte store another agent polls for (a peer GPU, the CPU): system scope. */
MARROW_FN void store_device_u64(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    *(volatile uint64_t *)p = v;
#endif
}
MARROW_FN uint64_t load_device_u64(const uint64_t *p) {
#if MARROW_GPU
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return *(const volatile uint64_t *)p;
#endif
}
/* Stores and loads between the GPU and a CPU thread (the ping-pong floor). */
MARROW_FN void store_release_sys(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

MARROW_FN uint64_t load_acquire_sys(const uint64_t *p) {
#if MARROW_GPU
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

/* ------------------------------------------------------------ barriers */

/* On the GPU each is fence.acq_rel.sys: ordering at system scope is what
 * the NIC (or the softnic's CPU thread) needs; fence.sc.sys, which
 * __threadfence_system() emits, adds a total order nobody here relies on.
 * (DOCA GPUNetIO's one-sided verbs fence at GPU scope and only its CQ poll
 * at system scope, because its rings can live in GPU memory; marrow's live
 * in host memory, where the NIC's reads need the system scope.)
 *
 * On the CPU each is the row of hw-specs/barrier.toml that crates/mmio's
 * barriers come from too (generated/barrier.h): rdma-core's instruction for
 * the same purpose, e.g. the outer-shareable dmb osh* on aarch64. */
MARROW_FN void fence_sys() {
#if MARROW_GPU
    asm volatile("fence.acq_rel.sys;" ::: "memory");
#endif
}
/* Two orders in one: the WQE stores before the doorbell record (the DMA
 * barrier), and the relaxed load of ready_head taken before it (post_shared.h
 * chain_view) before what follows, which makes that load an acquire. On the
 * GPU fence.acq_rel.sys gives both; on the CPU the DMA row orders stores
 * only (dmb oshst), so a thread acquire fence adds the load half. On x86
 * both are compiler barriers. */
MARROW_FN void to_device() {
#if MARROW_GPU
    fence_sys();
#else
    marrow_cpu_to_device();
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

/* to_device and wc_start at the scope the NIC's reads of the rings need:
 * GPU scope where the send queue and its doorbell record live in GPU
 * memory (gcrb_config.flags.gpu_scope_fences: a NIC's peer reads of GPU
 * memory are served like the GPU's own, so what is ordered for the GPU is
 * ordered for them; DOCA's one-sided verbs fence at GPU scope by default),
 * system scope otherwise. The CPU has one scope: its row of the barrier
 * table. */
MARROW_FN void to_device_at(bool gpu_scope) {
#if MARROW_GPU
    /* fence.acq_rel.gpu: both of to_device's orders, at GPU scope. */
    if (gpu_scope) return fence_release_gpu();
#else
    (void)gpu_scope;
#endif
    to_device();
}

MARROW_FN void from_device() {
#if MARROW_GPU
    /* Acquire only: nothing before it needs to be ordered ahead, so no
     * release half (DOCA's CQ poll ends in fence.acquire.sys too); unlike
     * fence.acq_rel.sys it does not wait for this thread's outstanding
     * stores. */
    asm volatile("fence.acquire.sys;" ::: "memory");
#else
    marrow_cpu_from_device();
#endif
}

MARROW_FN void wc_start() {
#if MARROW_GPU
    fence_sys();
#else
    marrow_cpu_wc_start();
#endif
}

MARROW_FN void wc_start_at(bool gpu_scope) {
#if MARROW_GPU
    if (gpu_scope) return fence_release_gpu();
#else
    (void)gpu_scope;
#endif
    wc_start();
}

MARROW_FN void wc_flush() {
#if MARROW_GPU
    fence_sys();
#else
    marrow_cpu_wc_flush();
#endif
}

/* One 8-byte store to the UAR doorbell register: a single MMIO write. */
MARROW_FN void mmio_store64(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    *(volatile uint64_t *)p = v;
#endif
}

/* Who is calling: a global thread id on the GPU, the harness's index on the CPU. */
MARROW_FN uint32_t thread_id() {
#if MARROW_GPU
    return blockIdx.x * blockDim.x + threadIdx.x;
#else
    return cpu_thread_id();
#endif
}

/* ------------------------------------------------------------ peer memory */

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

/* Every earlier store of this thread performed for every thread of the
 * system (quiet on peer memory): fence.sc.sys, the strongest fence. */
MARROW_FN void fence_quiet() {
#if MARROW_GPU
    __threadfence_system();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
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

/* ------------------------------------------------------------ posting groups */

/* The threads that post together. On the GPU: the lanes of a warp that are
 * active here and name the same key (the channel), found with
 * __match_any_sync as cooperative_groups::coalesced_threads() does. On the
 * CPU: the calling thread alone. */
/* Every lane of a warp, as a lane mask. */
constexpr uint32_t WHOLE_WARP = ~0u;

struct Group {
#if MARROW_GPU
    unsigned mask;
    uint32_t rank, size, leader_lane, last_lane;
    /* A lane alone skips every warp instruction: each costs tens of
     * nanoseconds even with one lane (scripts/gpu_probe/sysmem_stores.cu). */
    MARROW_MEMBER bool solo() const { return size == 1; }
    MARROW_MEMBER bool leader() const { return rank == 0; }
    MARROW_MEMBER int from_leader32(int v) const { return solo() ? v : __shfl_sync(mask, v, leader_lane); }
    MARROW_MEMBER uint64_t from_leader64(uint64_t v) const {
        return solo() ? v : __shfl_sync(mask, (unsigned long long)v, leader_lane);
    }
    MARROW_MEMBER uint64_t from_last64(uint64_t v) const { return solo() ? v : __shfl_sync(mask, (unsigned long long)v, last_lane); }
    MARROW_MEMBER bool any(bool p) const { return solo() ? p : __any_sync(mask, p) != 0; }
    MARROW_MEMBER uint32_t or32(uint32_t v) const { return solo() ? v : __reduce_or_sync(mask, v); }
    MARROW_MEMBER bool whole_warp() const { return mask == WHOLE_WARP; }
    /* Every lane of the group is active here (others may be too). */
    MARROW_MEMBER bool all_here() const { return (__activemask() & mask) == mask; }
    /* Memory ordering among the group: the leader acts after everyone's stores and fences. */
    MARROW_MEMBER void sync() const {
        if (!solo()) __syncwarp(mask);
    }
#else
    uint32_t rank = 0, size = 1;
    MARROW_MEMBER bool solo() const { return true; }
    MARROW_MEMBER bool leader() const { return true; }
    MARROW_MEMBER int from_leader32(int v) const { return v; }
    MARROW_MEMBER uint64_t from_leader64(uint64_t v) const { return v; }
    MARROW_MEMBER uint64_t from_last64(uint64_t v) const { return v; }
    MARROW_MEMBER bool any(bool p) const { return p; }
    MARROW_MEMBER uint32_t or32(uint32_t v) const { return v; }
    MARROW_MEMBER bool whole_warp() const { return false; }
    MARROW_MEMBER bool all_here() const { return true; }
    MARROW_MEMBER void sync() const {}
#endif
};

#if MARROW_GPU
MARROW_FN unsigned lane_id() {
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

/* The group of lanes `mask`, as seen from `lane` (one of them). */
MARROW_FN Group group_of_mask(unsigned mask, unsigned lane) {
    Group g;
    g.mask = mask;
    g.rank = __popc(mask & ((1u << lane) - 1u));
    g.size = __popc(mask);
    g.leader_lane = __ffs(mask) - 1;
    g.last_lane = 31 - __clz(mask);
    return g;
}
#endif

MARROW_FN Group group_of(const void *key) {
#if MARROW_GPU
    unsigned lane = lane_id();
    unsigned active = __activemask();
    /* Alone in the warp: no match needed. */
    unsigned mask = active == (1u << lane) ? active : __match_any_sync(active, (unsigned long long)key);
    return group_of_mask(mask, lane);
#else
    (void)key;
    return Group{};
#endif
}

} /* namespace marrow */

#endif /* MARROW_PLATFORM_H */
