// Probe: where a blocking 8-byte put's time goes beyond the GPU<->CPU
// ping-pong, split between marrow's device code and the softnic's engine.
// A pinned CPU thread plays a minimal NIC: it watches the doorbell word,
// reads each announced WQE's line, and writes a requester CQE (owner bit,
// wqe_counter) into the next slot of an overrun-ignoring CQ, nothing else
// (no key checks, no copy). Against it, ns per round trip:
//   0 the floor: plain ping, the pong walking a ring of 64-byte slots;
//   1 the bare post in DOCA's order (4 x 16 B WQE, fence, doorbell,
//     record, fence, doorbell), then a poll of the CQE's tail;
//   2 marrow::put on an exclusive channel (flags.early_doorbell,
//     flags.cq_overrun_ignore), as marrow_put_latency_kernel calls it;
//   3 marrow::put on a shared channel, same flags;
// and on the exclusive channel, marrow's steps added to mode 1 one at a time:
//   4 the WQE from write_wqe_untraced, to_device, ring_untraced (the
//     encoder and the doorbells), then mode 1's poll;
//   5 mode 4, waiting with own_wait_upto (the CQ walk) instead;
//   6 post_own + wait_own with an op built once (put without rw_op);
// and on the shared channel:
//   7 post (post_shared_solo) with an op built once, then mode 1's poll;
//   8 post + wait_shared (put without rw_op).
// `marrow bench gpu` gives the same put with the softnic answering; the
// difference from mode 2 is the engine's. Then modes 1 and 2 with the
// minimal NIC answering DELAY ns late. Not part of marrow: evidence for
// docs/PERFORMANCE.md. Build and run on the device machine:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels/include -o /tmp/dp scripts/gpu_probe/device_put.cu -lpthread && /tmp/dp [cpu]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <thread>
#include <vector>
#include <cuda_runtime.h>
#include "marrow/device.h"
#include "nic_put.cuh"

// The bare post: WQEs at `idx` from `first`, CQEs from `ci`.
__global__ void bare_kernel(uint8_t *host, uint64_t first, uint64_t *ns, int *rc) {
    uint64_t t0 = now();
    for (uint64_t idx = first; idx < first + ITERS; idx++) {
        bare_post(host, idx);
        // The CQE of WQE idx is the idx-th: its owner bit is (idx / NCQE) & 1.
        const uint32_t *tail = (const uint32_t *)(host + OFF_CQ + (idx % NCQE) * 64 + 60);
        uint32_t want_own = (uint32_t)((idx / NCQE) & 1);
        uint64_t start = now();
        for (;;) {
            uint32_t t = marrow::load_device_u32(tail);
            uint8_t op_own = (uint8_t)(t >> 24);
            if ((op_own >> 4) != MARROW_MLX5_CQE_INVALID && (op_own & 1) == want_own) break;
            if (now() - start > 100000000ull) { *rc = 1; return; }
        }
        marrow::from_device();
    }
    *ns = now() - t0;
    *rc = 0;
}

__global__ void steps_kernel(uint8_t *page, uint8_t *host, int mode, uint64_t *ns, int *rc) {
    using namespace marrow;
    Channel ch{page};
    Op op;
    int r = rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, 1, 0, 0, 8, &op);
    uint64_t t0 = now();
    for (uint64_t idx = 0; idx < ITERS && r == OK; idx++) {
        if (mode == 6 || mode == 8) {
            uint64_t got;
            r = post(ch, op, &got, true);
            if (r == OK) r = wait_done(ch, got + 1, MARROW_GCRB_WAIT_CQ, true);
            continue;
        }
        if (mode == 7) {
            uint64_t got;
            r = post(ch, op, &got, true);
            if (r != OK) break;
        }
        if (mode != 7) {
            uint64_t ctrl = write_wqe_untraced(ch, idx, op);
            to_device();
            ring_untraced(ch, idx + 1, ctrl, true);
        }
        if (mode == 5) {
            r = own_wait_upto(ch, idx + 1, MARROW_GCRB_WAIT_CQ);
            continue;
        }
        const uint32_t *tail = (const uint32_t *)(host + OFF_CQ + (idx % NCQE) * 64 + 60);
        uint32_t want_own = (uint32_t)((idx / NCQE) & 1);
        uint64_t start = now();
        for (;;) {
            uint32_t t = load_device_u32(tail);
            uint8_t op_own = (uint8_t)(t >> 24);
            if ((op_own >> 4) != MARROW_MLX5_CQE_INVALID && (op_own & 1) == want_own) break;
            if (now() - start > 100000000ull) { *rc = 1; return; }
        }
        from_device();
    }
    *ns = now() - t0;
    *rc = r;
}

int main(int argc, char **argv) {
    int cpu = argc > 1 ? atoi(argv[1]) : 2;
    NicRig R(cpu);
    auto run = [&](int mode) -> double {
        R.fresh(mode == 0);
        if (mode == 0) {
            R.launch_floor();
        } else if (mode == 1) {
            bare_kernel<<<1, 1>>>(R.dhost, 0, R.dns, R.drc);
        } else {
            R.channel(mode != 3 && mode < 7);
            if (mode >= 4)
                steps_kernel<<<1, 1>>>(R.page, R.dhost, mode, R.dns, R.drc);
            else
                put_kernel<<<1, 1>>>(R.page, R.dns, R.drc);
        }
        return R.finish(mode);
    };
    constexpr int MODES = 9;
    for (int m = 0; m < MODES; m++) run(m);
    printf("minimal NIC on CPU %d; %u round trips per figure; ns per round trip, 5 passes over the modes\n", cpu, ITERS);
    std::vector<std::vector<double>> v(MODES);
    for (int pass = 0; pass < 5; pass++)
        for (int m = 0; m < MODES; m++) v[m].push_back(run(m));
    const char *names[] = {"0 floor (walking pong)", "1 bare post, DOCA's order", "2 marrow::put, exclusive",
                           "3 marrow::put, shared", "4 marrow's encoder and ring", "5 mode 4 + own_wait_upto",
                           "6 post_own + wait_own", "7 shared post, bare poll", "8 shared post + wait_shared"};
    for (int m = 0; m < MODES; m++) {
        std::sort(v[m].begin(), v[m].end());
        printf("%-30s min %6.0f  median %6.0f  max %6.0f\n", names[m], v[m][0], v[m][2], v[m][4]);
    }
    if (argc > 2) {
        R.nic.finish();
        return 0;
    }
    printf("the NIC answering late: median of 5 passes, ns per round trip\n  delay  mode 1  mode 2  mode 3\n");
    for (long d : {0L, 100L, 200L, 300L, 400L, 600L}) {
        R.nic.delay_ns = d;
        std::vector<std::vector<double>> w(3);
        for (int pass = 0; pass < 5; pass++)
            for (int m = 1; m < 4; m++) w[m - 1].push_back(run(m));
        for (auto &x : w) std::sort(x.begin(), x.end());
        printf("  %5ld  %6.0f  %6.0f  %6.0f\n", d, w[0][2], w[1][2], w[2][2]);
    }
    R.nic.finish();
    return 0;
}
