// Probe: where one warp's put_nbi on a shared channel spends its time over
// the posting-rate floor and over the same warp on an exclusive channel.
// Each mode adds one step of post_shared's group path (kernels/include/
// marrow/post_shared.h) to the one before, ringing every post into host
// memory that nothing consumes; the send queue holds every post, so no
// mode waits for a completion. Not part of marrow: evidence for
// docs/PERFORMANCE.md. Build and run on the device machine:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels/include -o /tmp/sw scripts/gpu_probe/shared_warp_post.cu && /tmp/sw
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <cuda_runtime.h>
#include "marrow/device.h"
#include "probe_gcrb.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr uint32_t N = 1000, SQ = 32768;

const char *names[] = {
    "S0 the floor, 32 lanes: each its WQE, fence, dbrec, fence, doorbell",
    "S1 put_nbi from a whole warp on a shared channel: what marrow_post_rate_kernel times",
    "S2 post_shared with an op built once (no window checks)",
    "S3 group_of, the leader's atomic add, base by shuffle, write_wqe, to_device, syncwarp, the leader rings",
    "S4 S3 + the status and cons_idx loads beside the add, and the room check",
    "S5 S4 + the leader's chain loads (ready_head, resv_head, cons_idx) and its store of ready_head",
    "S6 S5 + rc by shuffle before and after, g.any(force_ring)",
    "S7 S3 without group_of (the whole warp known): the atomic add and the shuffle alone",
    "S8 an exclusive channel's warp put_nbi (the same warp, heads in registers): the twin",
    "S9 the floor with one fence for the warp: each lane its WQE, syncwarp, lane 0 fences, dbrec, fence, doorbell",
    "S10 S6 with one fence for the warp: the lanes' WQE stores, syncwarp, the leader fences before it rings",
    "S11 S10 without the sticky status load beside the add (status taken as OK)",
    "S12 S10 without the cons_idx load beside the add (room taken as there)",
    "S13 S10 without either load beside the add",
    "S14 S10 without the leader's chain loads (its own last turn taken as the chain's end), the loads beside the add kept",
    "S15 S10 with the add alone before the shuffle: S13 and S14 together",
    "S16 S10 with view_at's test instead of the chain loads, and turn_ended (post_shared's leader with the shortcut)",
    "S17 S10 with nothing stored to the heads' line after the doorbell (no prod_idx, no ready_head store)",
    "S18 S10 with the add alone, and the status loaded beside the chain loads, tested before the ring",
};

// post_shared's group path taken apart.
__device__ __forceinline__ int steps(const marrow::Channel &ch, const marrow::Op &op, int mode) {
    using namespace marrow;
    marrow_gcrb_heads *h = ch.heads();
    Group g = mode == 7 ? group_of_mask(0xffffffffu, lane_id()) : group_of(ch.page);
    uint64_t base = 0;
    int rc = OK;
    ChainView view{0, 0, 0};
    uint32_t late_status = 0;
    /* The loads beside the add: both (S4 on), cons_idx only (S11), the
     * status only (S12), neither (S13, S15, S18). */
    bool with_cons = mode >= 4 && mode != 7 && mode != 12 && mode != 13 && mode != 15 && mode != 18;
    bool with_status = mode >= 4 && mode != 7 && mode != 11 && mode != 13 && mode != 15 && mode != 18;
    if (g.leader()) {
        if (with_cons || with_status) {
            uint64_t cons = with_cons ? load_relaxed(&h->cons_idx) : ~0ull >> 1;
            uint32_t status = with_status ? load_relaxed32(&ch.err()->status) : 0u;
            Reserved r{atomic_add(&h->resv_head, g.size), cons, status};
            base = r.idx;
            rc = reserve_check(ch, r, g.size);
        } else {
            base = atomic_add(&h->resv_head, g.size);
        }
        /* The chain: loaded (S5 on), taken as the leader's own end (S14,
         * S15), view_at's test (S16), loaded with the status (S18). */
        if (mode == 14 || mode == 15) {
            view = ChainView{base, base + g.size, base + g.size};
        } else if (mode == 16) {
            view = view_at(ch, base, false);
        } else if (mode >= 5 && mode != 7) {
            view = chain_view(ch);
            if (mode == 18) late_status = load_relaxed32(&ch.err()->status);
        }
    }
    if (mode >= 6 && mode != 7) rc = g.from_leader32(rc);
    base = g.from_leader64(base);
    if (rc != OK) return rc;
    uint64_t ctrl = write_wqe(ch, base + g.rank, op, true);
    /* S10: the warp barrier, then the leader's fence (cumulative), order
     * every lane's WQE stores before the doorbell record. */
    if (mode < 10) to_device();
    bool force = mode >= 6 && mode != 7 ? g.any(false) : false;
    g.sync();
    uint64_t end = base + g.size;
    if (g.leader()) {
        if (mode >= 10) to_device();
        if (mode == 18 && late_status != 0) {
            rc = sticky_status(ch, late_status);
        } else if (mode == 17) {
            /* ring() without its store of prod_idx, and no ready_head store:
             * nothing stored to the heads' line. */
            store_device_u32((uint32_t *)ch.c.dbrec_addr + MARROW_MLX5_SND_DBR, be32((uint32_t)end));
            wc_start();
            mmio_store64((uint64_t *)ch.c.db_addr, ctrl + force + (view.ready == ~0ull));
        } else {
            ring(ch, end, ctrl + force + (view.ready == ~0ull), false);
            if (mode >= 5 && mode != 7) store_relaxed(&h->ready_head, end);
            if (mode == 16) turn_ended(ch, end);
        }
    }
    if (mode >= 6 && mode != 7) rc = g.from_leader32(rc);
    return rc;
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
        marrow::Op op = fixed;
        op.raddr += off, op.laddr += off;
        if (mode == 0) {
            floor_wqe(ring, (i * 32 + lane) % SQ, i);
            floor_ring(dbrec, db, i);
        } else if (mode == 9) {
            floor_wqe(ring, (i * 32 + lane) % SQ, i);
            __syncwarp();
            if (lane == 0) {
                floor_ring(dbrec, db, i);
            }
            __syncwarp();
        } else if (mode == 1 || mode == 8) {
            r = marrow::put_nbi(ch, 1, off, off, 8);
        } else if (mode == 2) {
            r = marrow::post(ch, op, nullptr, false, false);
        } else {
            r = steps(ch, op, mode);
        }
    }
    if (lane == 0) *ns = (marrow::now_ns() - t0) / N;
    if (r != marrow::OK) *rc = r;
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
    CK(cudaMalloc(&page, MARROW_GCRB_PAGE_SIZE));
    CK(cudaMalloc(&local, 1 << 20));
    CK(cudaMalloc(&ns, 8));
    CK(cudaMalloc(&rc, 4));
    printf("# scripts/gpu_probe/shared_warp_post.cu: one warp, %u posts per lane ringing each, best of 5, ns per warp-wide post (32 WQEs)\n", N);
    for (int mode = 0; mode < 19; mode++) {
        uint64_t best = ~0ull;
        int worst = 0;
        for (int rep = 0; rep < 5; rep++) {
            // A fresh channel each run: heads, marks and error block at zero.
            static uint8_t img[MARROW_GCRB_PAGE_SIZE];
            probe_gcrb(img, mode == 8 ? 1u << MARROW_GCRB_CONFIG_EXCLUSIVE_SHIFT : 0u, ring, SQ, dbrec, db, local);
            CK(cudaMemcpy(page, img, sizeof img, cudaMemcpyHostToDevice));
            CK(cudaMemset(rc, 0, 4));
            probe_warp<<<1, 32>>>(page, ring, (uint32_t *)dbrec, (uint64_t *)db, mode, ns, rc);
            CK(cudaDeviceSynchronize());
            uint64_t v;
            int r;
            CK(cudaMemcpy(&v, ns, 8, cudaMemcpyDeviceToHost));
            CK(cudaMemcpy(&r, rc, 4, cudaMemcpyDeviceToHost));
            if (v < best) best = v;
            if (r) worst = r;
        }
        printf("%6llu ns  %s%s\n", (unsigned long long)best, names[mode], worst ? "  (ERROR)" : "");
    }
    return 0;
}
