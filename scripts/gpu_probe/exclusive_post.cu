// Probe: where one thread's exclusive-channel put_nbi spends its time over
// the posting-rate floor. Each mode adds one layer of marrow's own device
// code (kernels/include/marrow/device.h), ringing every post into host
// memory that nothing consumes; the send queue holds every post, so no
// mode waits for a completion. Not part of marrow: evidence for
// docs/PERFORMANCE.md. Build and run on the device machine:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels/include -o /tmp/excl scripts/gpu_probe/exclusive_post.cu && /tmp/excl
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <cuda_runtime.h>
#include "marrow/device.h"
#include "probe_gcrb.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr uint32_t N = 1024, SQ = 32768;

const char *names[] = {
    "0 the floor: 4 x 16 B stores, fence, dbrec, fence, doorbell",
    "1 write_wqe (fields of an 8 B RDMA write) + to_device + ring",
    "2 + rw_op (key and window checks) per post",
    "3 post_own (group, sticky, room, ring decision) with an op built once",
    "4 put_nbi (rw_op + post_own): what marrow_post_rate_kernel times",
    "5 the floor again (drift check)",
    "6 mode 1 + group_of",
    "7 mode 6 + sticky_error and the room check",
    "8 mode 7 + the ring decision (g.any, lazy rule) and g.sync",
    "9 mode 1 with the heads in the Channel's Own (o.resv, o.prod)",
    "10 mode 9 + __activemask() and %laneid, checked against one lane",
    "11 mode 9 + a Group from __activemask() alone (no __match_any_sync)",
};

// post_own taken apart: mode 6..9 add its steps to mode 1 one at a time.
__device__ __forceinline__ int steps(const marrow::Channel &ch, const marrow::Op &op, int mode) {
    using namespace marrow;
    Own &o = ch.own;
    if (mode == 10) {
        if (__activemask() != (1u << lane_id())) return E_BAD_CONFIG;
    }
    if (mode == 11) {
        Group g = group_of_mask(__activemask(), lane_id());
        uint64_t end = o.resv + g.size;
        uint64_t ctrl = write_wqe(ch, o.resv + g.rank, op, true);
        to_device();
        g.sync();
        if (g.leader()) ring(ch, end, ctrl, false);
        o.resv = end;
        return OK;
    }
    if (mode >= 9) {
        uint64_t end = o.resv + 1;
        uint64_t ctrl = write_wqe(ch, o.resv, op, true);
        to_device();
        ring(ch, end, ctrl, false);
        o.resv = end;
        return OK;
    }
    Group g = group_of(ch.page);
    uint64_t base = o.resv, end = base + g.size;
    int rc = OK;
    if (mode >= 7 && g.leader()) {
        rc = sticky_error(ch);
        if (rc == OK && end > o.cons + ch.c.sq_wqebbs) rc = E_TIMEOUT;
    }
    if (rc != OK) return rc;
    bool ring_now = true;
    if (mode >= 8) ring_now = g.any(false) || !ch.flag(MARROW_GCRB_CONFIG_LAZY_NBI_DOORBELL_SHIFT) || end / RING_BATCH != base / RING_BATCH ||
                                   end - o.cons + MAX_GROUP > ch.c.sq_wqebbs / 2;
    uint64_t ctrl = write_wqe(ch, base + g.rank, op, ring_now);
    o.resv = end;
    to_device();
    if (mode >= 8) g.sync();
    if (g.leader()) ring(ch, end, ctrl, false);
    o.prod = end;
    return OK;
}

__global__ void probe(uint8_t *page, uint8_t *ring, uint32_t *dbrec, uint64_t *db, int mode, uint64_t *ns, int *rc) {
    marrow::Channel ch{page};
    int r = marrow::OK;
    marrow::Op fixed;
    marrow::rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, 1, 0, 0, 8, &fixed);
    uint64_t t0 = marrow::now_ns();
    for (uint32_t i = 0; i < N && r == marrow::OK; i++) {
        uint64_t off = (uint64_t)i * 8;
        if (mode == 0 || mode == 5) {
            floor_wqe(ring, i % SQ, i);
            floor_ring(dbrec, db, i);
        } else if (mode == 1 || mode == 2) {
            marrow::Op op = fixed;
            op.raddr += off, op.laddr += off;
            if (mode == 2) r = marrow::rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, 1, off, off, 8, &op);
            marrow::write_wqe(ch, i, op, true);
            marrow::to_device();
            marrow::ring(ch, i + 1, 0, false);
        } else if (mode == 3) {
            marrow::Op op = fixed;
            op.raddr += off, op.laddr += off;
            r = marrow::post(ch, op, nullptr, false, false);
        } else if (mode == 4) {
            r = marrow::put_nbi(ch, 1, off, off, 8);
        } else {
            marrow::Op op = fixed;
            op.raddr += off, op.laddr += off;
            r = steps(ch, op, mode);
        }
    }
    *ns = (marrow::now_ns() - t0) / N;
    *rc = r;
}

const char *warp_names[] = {
    "W0 the floor, 32 lanes: each its WQE, fence, dbrec, fence, doorbell",
    "W1 put_nbi from a whole warp (the owner found when the Channel was made): what marrow_post_rate_kernel times",
    "W2 group_of, write_wqe, to_device, syncwarp, the leader rings",
    "W3 W2 + a same-heads check (__match_all_sync; before own_group)",
    "W4 W3 + the leader's word to the group (__shfl_sync)",
    "W5 W4 + g.any(force_ring) (__any_sync)",
};

// post_own's group path taken apart, one warp instruction at a time.
__device__ __forceinline__ int warp_steps(const marrow::Channel &ch, const marrow::Op &op, int mode) {
    using namespace marrow;
    Own &o = ch.own;
    Group g = group_of(ch.page);
    if (mode >= 3) {
        int all;
        __match_all_sync(g.mask, (unsigned long long)(o.resv ^ (o.ci << 32)), &all);
        if (!all) return E_BAD_CONFIG;
    }
    uint64_t base = o.resv, end = base + g.size;
    int rc = OK;
    if (g.leader()) {
        rc = sticky_error(ch);
        if (rc == OK && end > o.cons + ch.c.sq_wqebbs) rc = E_TIMEOUT;
    }
    if (mode >= 4) rc = (int)(uint32_t)g.from_leader64((uint64_t)(uint32_t)rc);
    if (rc != OK) return rc;
    bool force = mode >= 5 ? g.any(false) : false;
    uint64_t ctrl = write_wqe(ch, base + g.rank, op, true);
    o.resv = end;
    to_device();
    g.sync();
    if (g.leader()) ring(ch, end, ctrl + force, false);
    o.prod = end;
    return OK;
}

__global__ void probe_warp(uint8_t *page, uint8_t *ring, uint32_t *dbrec, uint64_t *db, int mode, uint64_t *ns, int *rc) {
    marrow::Channel ch{page};
    int r = marrow::OK;
    uint32_t lane = threadIdx.x;
    marrow::Op fixed;
    marrow::rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, 1, 0, 0, 8, &fixed);
    uint64_t t0 = marrow::now_ns();
    for (uint32_t i = 0; i < N && r == marrow::OK; i++) {
        uint64_t off = ((uint64_t)i * 32 + lane) * 8;
        if (mode == 0) {
            floor_wqe(ring, (i * 32 + lane) % SQ, i);
            floor_ring(dbrec, db, i);
        } else if (mode == 1) {
            r = marrow::put_nbi(ch, 1, off, off, 8);
        } else {
            marrow::Op op = fixed;
            op.raddr += off, op.laddr += off;
            r = warp_steps(ch, op, mode);
        }
    }
    if (lane == 0) *ns = (marrow::now_ns() - t0) / N;
    if (r != marrow::OK) *rc = r;
}

const char *lazy_names[] = {
    "L0 the lazy floor: 4 x 16 B stores; every 32nd post also fence, dbrec, fence, doorbell",
    "L1 put_nbi with flags.lazy_nbi_doorbell: what the lazy (a) and (c) time",
    "L2 write_wqe with the heads in Own; every 32nd post to_device + ring",
    "L3 L2 + rw_op per post",
    "L4 post_own_solo (lazy) with an op built once",
};

// The lazy path taken apart (flags.lazy_nbi_doorbell set on the channel).
__global__ void probe_lazy(uint8_t *page, uint8_t *sq, uint32_t *dbrec, uint64_t *db, int mode, uint64_t *ns, int *rc) {
    using namespace marrow;
    Channel ch{page};
    int r = OK;
    Op fixed;
    rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, 1, 0, 0, 8, &fixed);
    Own &o = ch.own;
    uint64_t t0 = now_ns();
    for (uint32_t i = 0; i < N && r == OK; i++) {
        uint64_t off = (uint64_t)i * 8;
        Op op = fixed;
        op.raddr += off, op.laddr += off;
        if (mode == 0) {
            floor_wqe(sq, i % SQ, i);
            if ((i + 1) % 32 == 0) {
                floor_ring(dbrec, db, i);
            }
        } else if (mode == 1) {
            r = put_nbi(ch, 1, off, off, 8);
        } else if (mode == 2 || mode == 3) {
            if (mode == 3) r = rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, 1, off, off, 8, &op);
            uint64_t idx = o.resv, end = idx + 1;
            bool due = end % 32 == 0;
            write_wqe(ch, idx, op, due);
            o.resv = end;
            if (due) {
                to_device();
                ring(ch, end, 0, false);
            }
        } else {
            r = post_own_solo(ch, op, nullptr, false, true);
        }
    }
    *ns = (now_ns() - t0) / N;
    *rc = r;
}

int main() {
    const size_t host_len = SQ * 64 + 8192;
    uint8_t *h = (uint8_t *)mmap(nullptr, host_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (h == MAP_FAILED) return 1;
    memset(h, 0, host_len);
    CK(cudaHostRegister(h, host_len, cudaHostRegisterMapped));
    uint8_t *hd;
    CK(cudaHostGetDevicePointer((void **)&hd, h, 0));
    uint8_t *ring = hd, *dbrec = hd + SQ * 64, *db = dbrec + 4096;
    uint8_t *page, *local;
    uint64_t *ns;
    int *rc;
    CK(cudaMalloc(&page, 4096 + MARROW_GCRB_TRACE_ENTRIES * 64));
    CK(cudaMalloc(&local, 1 << 20));
    CK(cudaMalloc(&ns, 8));
    CK(cudaMalloc(&rc, 4));
    printf("# scripts/gpu_probe/exclusive_post.cu: one GPU thread, %u posts ringing each, best of 5, ns per post\n", N);
    for (int mode = 0; mode < 23; mode++) {
        bool warp = mode >= 12 && mode < 18, lazy = mode >= 18;
        uint64_t best = ~0ull;
        int worst = 0;
        for (int rep = 0; rep < 5; rep++) {
            // A fresh exclusive channel each run: heads at zero.
            static uint8_t img[MARROW_GCRB_PAGE_SIZE];
            probe_gcrb(img, 1u << MARROW_GCRB_CONFIG_EXCLUSIVE_SHIFT | (lazy ? 1u << MARROW_GCRB_CONFIG_LAZY_NBI_DOORBELL_SHIFT : 0u), ring, SQ, dbrec, db, local);
            CK(cudaMemcpy(page, img, sizeof img, cudaMemcpyHostToDevice));
            CK(cudaMemset(rc, 0, 4));
            if (lazy)
                probe_lazy<<<1, 1>>>(page, ring, (uint32_t *)dbrec, (uint64_t *)db, mode - 18, ns, rc);
            else if (warp)
                probe_warp<<<1, 32>>>(page, ring, (uint32_t *)dbrec, (uint64_t *)db, mode - 12, ns, rc);
            else
                probe<<<1, 1>>>(page, ring, (uint32_t *)dbrec, (uint64_t *)db, mode, ns, rc);
            CK(cudaDeviceSynchronize());
            uint64_t v;
            int r;
            CK(cudaMemcpy(&v, ns, 8, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(&r, rc, 4, cudaMemcpyDeviceToHost));
            if (v < best) best = v;
            if (r) worst = r;
        }
        if (mode == 12) printf("# one warp, %u posts per lane, ns per warp-wide post (32 WQEs)\n", N);
        if (mode == 18) printf("# one thread, lazy doorbells, %u posts, ns per post\n", N);
        const char *name = lazy ? lazy_names[mode - 18] : warp ? warp_names[mode - 12] : names[mode];
        printf("%6llu ns  %s%s\n", (unsigned long long)best, name, worst ? "  (ERROR)" : "");
    }
    return 0;
}
