/*
 * marrow device platform layer: the primitives the posting and polling
 * protocol is written in, for the GPU (nvcc or NVRTC, sm_90) and for the
 * CPU (g++), so that the device code is written once: byte order, the
 * clock, the GCRB's atomics, and the loads and stores of what the NIC
 * reads and writes. The fences that order those for the NIC are in
 * barriers.h, a warp's posting groups in group.h, peer-memory atomics and
 * bulk copies in copy.h.
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
 * ordered by the system-scope barriers of barriers.h instead. */

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

/* Raise *p to at least v, waiting for nothing: no value comes back, so the
 * GPU issues it as a reduction (red), as atomic_or_relaxed below. */
MARROW_FN void red_max_relaxed(uint64_t *p, uint64_t v) {
#if MARROW_GPU
    asm volatile("red.relaxed.gpu.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
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

} /* namespace marrow */

#endif /* MARROW_PLATFORM_H */
