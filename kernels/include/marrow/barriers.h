/*
 * marrow device code: the barriers that order what the NIC reads, named by
 * purpose as crates/mmio names them (after rdma-core's
 * util/udma_barrier.h):
 *   to_device   - WQE stores before the doorbell record the NIC reads
 *   from_device - a load that saw ownership (CQE owner) before payload loads
 *   wc_start    - doorbell record before the doorbell MMIO store
 *   wc_flush    - push the doorbell out before what follows
 * and quiet's fence for peer memory. The rings, doorbell records and CQs
 * live in host memory mapped into the GPU (cudaHostRegister), so the GPU
 * fences are system scope (docs/SOURCES.md §2.3: NVSHMEM's IBGDA_MEMBAR is
 * __threadfence_system() unless NIC buffers are in GPU memory).
 */
#ifndef MARROW_BARRIERS_H
#define MARROW_BARRIERS_H

#include "marrow/platform.h"
#if !MARROW_GPU
#include "marrow/generated/barrier.h"
#endif

namespace marrow {

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

/* Every earlier store of this thread performed for every thread of the
 * system (quiet on peer memory): fence.sc.sys, the strongest fence. */
MARROW_FN void fence_quiet() {
#if MARROW_GPU
    __threadfence_system();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

} /* namespace marrow */

#endif /* MARROW_BARRIERS_H */
