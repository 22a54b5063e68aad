// DOCA GPUNetIO's device verbs, as NCCL 2.28 ships them
// (include/nccl_device/gin/gdaki/doca_gpunetio), driven on the softnic's
// own rings, so that `marrow bench gpu --doca` times DOCA's code and
// marrow's on the same send queues, doorbells and CQs in one run.
//
// Nothing of DOCA is copied here: this file fills DOCA's public
// `doca_gpu_dev_verbs_qp` from marrow's queue description (as DOCA's host
// side does for a QP it creates) and calls DOCA's own put, put_warp and CQ
// poll. Built by scripts/doca_peer/build.sh with nvcc against the
// installed headers; loaded by crates/transport/src/gpu_doca.rs, whose
// launch wrappers match these signatures.
//
// Every wait here has a deadline: DOCA's doca_gpu_dev_verbs_wait spins
// without one, so the kernels loop on its single step,
// doca_gpu_dev_verbs_poll_one_cq_at (the same loads: the CQ's consumer
// index, then the CQE's op_own), and give up with -ETIMEDOUT.
#include <errno.h>
#include <stdint.h>

// <cuda.h> first, as NCCL's own chain includes it before DOCA's headers
// (gin_gdaki.h -> gin_device_common.h -> gin_device_host_common.h): DOCA's
// common header picks its instructions by CUDA_VERSION. From 12.2 the
// doorbell is st.mmio.relaxed.sys, and from 12.8 on sm_90 the fences are
// fence.release / fence.acquire; without CUDA_VERSION it falls back to a
// plain system-scope store and to a release store (or acquire load) on a
// stack word for each fence, which is not the code NCCL runs.
#include <cuda.h>

#include "doca_gpunetio_device.h"

#if !defined(DOCA_GPUNETIO_VERBS_HAS_STORE_RELAXED_MMIO)
#error "DOCA's headers did not see CUDA_VERSION >= 12020: not the DOCA build NCCL makes"
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(DOCA_GPUNETIO_VERBS_HAS_FENCE_ACQUIRE_RELEASE_PTX)
#error "DOCA's headers did not see CUDA_VERSION >= 12080 on sm_90: not the DOCA build NCCL makes"
#endif

// One QP as marrow describes it (crates/transport/src/gpu_doca.rs
// DocaQueue, the same field order). Device addresses of registered host
// memory: the rings, the doorbell records and the doorbell register.
struct doca_peer_queue {
    uint64_t sq_base;       // send queue, 64-byte WQEBBs
    uint64_t dbrec_addr;    // the QP's doorbell record (receive word first)
    uint64_t db_addr;       // the doorbell register (UAR + MLX5_BF_OFFSET)
    uint64_t cq_base;       // owner-bit CQ of 64-byte CQEs, created with oi
    uint64_t cq_dbrec_addr; // the CQ's doorbell record (never written: oi)
    uint32_t qpn;
    uint32_t sq_wqebbs;     // a power of two, at most 32768 (DOCA's 16-bit count)
    uint32_t cq_ncqe;       // a power of two, at least sq_wqebbs
    uint32_t reserved;
};
static_assert(sizeof(struct doca_peer_queue) == 56, "DocaQueue is 56 bytes");

// Where the puts go (crates/transport/src/gpu_doca.rs DocaWindow, the same
// field order): PE 1's window and the local one, keys big-endian
// (DOCA_GPUNETIO_VERBS_MKEY_SWAPPED).
struct doca_peer_window {
    uint64_t raddr;
    uint64_t laddr;
    uint32_t rkey_be;
    uint32_t lkey_be;
};
static_assert(sizeof(struct doca_peer_window) == 24, "DocaWindow is 24 bytes");

static __device__ __forceinline__ uint64_t peer_now_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ __forceinline__ uint32_t peer_be32(uint32_t v) { return __byte_perm(v, 0, 0x0123); }

// sizeof(doca_gpu_dev_verbs_qp), for the host's allocation.
extern "C" __global__ void doca_peer_qp_size(uint64_t *out) { *out = sizeof(struct doca_gpu_dev_verbs_qp); }

// qps[i] from queues[i]: the fields DOCA's host side sets for a QP whose
// rings live in host memory and whose doorbells the SM rings itself
// (NIC_HANDLER_GPU_SM_DB); every index starts at 0, as the softnic's QP
// does.
extern "C" __global__ void doca_peer_init(struct doca_gpu_dev_verbs_qp *qps, const struct doca_peer_queue *queues,
                                          uint32_t n) {
    uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const struct doca_peer_queue q = queues[i];
    struct doca_gpu_dev_verbs_qp p;
    memset(&p, 0, sizeof(p));
    p.sq_num = q.qpn;
    p.sq_num_shift8 = q.qpn << 8;
    p.sq_num_shift8_be = peer_be32(q.qpn << 8);
    p.sq_num_shift8_be_1ds = peer_be32((q.qpn << 8) | 1);
    p.sq_num_shift8_be_2ds = peer_be32((q.qpn << 8) | 2);
    p.sq_num_shift8_be_3ds = peer_be32((q.qpn << 8) | 3);
    p.sq_num_shift8_be_4ds = peer_be32((q.qpn << 8) | 4);
    p.sq_wqe_num = (uint16_t)q.sq_wqebbs;
    p.sq_wqe_mask = (uint16_t)(q.sq_wqebbs - 1);
    p.sq_wqe_daddr = (uint8_t *)q.sq_base;
    p.sq_dbrec = (__be32 *)(q.dbrec_addr + 4 * DOCA_GPUNETIO_IB_MLX5_SND_DBR);
    p.sq_db = (uint64_t *)q.db_addr;
    p.cq_sq.cqe_daddr = (uint8_t *)q.cq_base;
    p.cq_sq.cqe_num = q.cq_ncqe;
    p.cq_sq.cqe_mask = q.cq_ncqe - 1;
    p.cq_sq.dbrec = (__be32 *)q.cq_dbrec_addr;
    p.cq_sq.cqe_size = DOCA_GPUNETIO_VERBS_CQE_SIZE;
    p.cq_sq.mem_type = DOCA_GPUNETIO_VERBS_MEM_TYPE_HOST;
    p.nic_handler = DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB;
    p.mem_type = DOCA_GPUNETIO_VERBS_MEM_TYPE_HOST;
    qps[i] = p;
}

// Wait for the CQE of WQE `ticket`: 0, -EIO (an error CQE) or -ETIMEDOUT.
template <enum doca_gpu_dev_verbs_resource_sharing_mode mode>
static __device__ int peer_wait(struct doca_gpu_dev_verbs_qp *qp, uint64_t ticket, uint64_t timeout_ns) {
    uint64_t start = peer_now_ns();
    for (uint32_t polls = 1;; polls++) {
        int s = doca_gpu_dev_verbs_poll_one_cq_at<mode>(&qp->cq_sq, ticket);
        if (s != EBUSY) return s;
        if (polls % 256 == 0 && peer_now_ns() - start > timeout_ns) return -ETIMEDOUT;
    }
}

template <enum doca_gpu_dev_verbs_resource_sharing_mode mode, enum doca_gpu_dev_verbs_exec_scope scope>
static __device__ uint64_t peer_put(struct doca_gpu_dev_verbs_qp *qp, struct doca_gpu_dev_verbs_addr r,
                                    struct doca_gpu_dev_verbs_addr l, uint32_t len) {
    doca_gpu_dev_verbs_ticket_t ticket;
    doca_gpu_dev_verbs_put<mode, DOCA_GPUNETIO_VERBS_NIC_HANDLER_GPU_SM_DB, scope>(qp, r, l, len, &ticket);
    return ticket;
}

// One thread: `iters` 8-byte puts, each waited for (DOCA's put then its
// CQ poll), on qp 0 in the given sharing mode; ns[0] the loop, each[i]
// put i.
extern "C" __global__ void doca_peer_put_latency(struct doca_gpu_dev_verbs_qp *qp, uint32_t shared,
                                                 struct doca_peer_window w, uint32_t iters, uint64_t timeout_ns,
                                                 uint64_t *ns, uint64_t *each, int *rc) {
    struct doca_gpu_dev_verbs_addr r = {w.raddr, w.rkey_be}, l = {w.laddr, w.lkey_be};
    uint64_t t0 = peer_now_ns(), t = t0;
    int s = 0;
    for (uint32_t i = 0; i < iters && s == 0; i++) {
        if (shared) {
            uint64_t k = peer_put<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>(
                qp, r, l, 8);
            s = peer_wait<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>(qp, k, timeout_ns);
        } else {
            uint64_t k = peer_put<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE,
                                  DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>(qp, r, l, 8);
            s = peer_wait<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE>(qp, k, timeout_ns);
        }
        uint64_t t1 = peer_now_ns();
        each[i] = t1 - t;
        t = t1;
    }
    *ns = t - t0;
    *rc = s;
}

// Posting rate: every thread posts `iters` 8-byte puts on qps[(warp index)
// % nqps], through doca_gpu_dev_verbs_put_warp with `warp` (the 32 lanes
// together) or per thread; `shared` picks DOCA's GPU sharing mode, else
// EXCLUSIVE (one owner per QP). span[0] / span[1]: the earliest start and
// the latest end of the posting loops (GPU clock); then every thread waits
// for its last put's CQE, its result in rc[thread].
extern "C" __global__ void doca_peer_post_rate(struct doca_gpu_dev_verbs_qp *qps, uint32_t nqps, uint32_t shared,
                                               uint32_t warp, struct doca_peer_window w, uint32_t iters,
                                               uint64_t timeout_ns, uint64_t *span, int *rc) {
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    struct doca_gpu_dev_verbs_qp *qp = &qps[(tid / 32) % nqps];
    struct doca_gpu_dev_verbs_addr r = {w.raddr, w.rkey_be}, l = {w.laddr, w.lkey_be};
    uint64_t ticket = 0, t0 = peer_now_ns();
    for (uint32_t i = 0; i < iters; i++) {
        if (shared && warp) {
            ticket = peer_put<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP>(
                qp, r, l, 8);
        } else if (shared) {
            ticket = peer_put<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU, DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>(
                qp, r, l, 8);
        } else if (warp) {
            ticket = peer_put<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE,
                              DOCA_GPUNETIO_VERBS_EXEC_SCOPE_WARP>(qp, r, l, 8);
        } else {
            ticket = peer_put<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE,
                              DOCA_GPUNETIO_VERBS_EXEC_SCOPE_THREAD>(qp, r, l, 8);
        }
    }
    uint64_t t1 = peer_now_ns();
    atomicMin((unsigned long long *)&span[0], (unsigned long long)t0);
    atomicMax((unsigned long long *)&span[1], (unsigned long long)t1);
    int s = 0;
    if (iters == 0) {
    } else if (shared) {
        s = peer_wait<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_GPU>(qp, ticket, timeout_ns);
    } else if (warp) {
        // One owner: its CQ state takes plain accesses, so one lane polls,
        // for the warp's last ticket (CQEs come back in order).
        if ((tid & 31) == 31) s = peer_wait<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE>(qp, ticket, timeout_ns);
        s = __shfl_sync(0xffffffffu, s, 31);
    } else {
        s = peer_wait<DOCA_GPUNETIO_VERBS_RESOURCE_SHARING_MODE_EXCLUSIVE>(qp, ticket, timeout_ns);
    }
    rc[tid] = s;
}
