// Probe: does a poll with several reads of one host-memory word in flight
// at once, issued a fixed spacing apart, see an answer sooner than a poll
// that waits for each read before issuing the next?
//
// A GPU read of host memory takes a PCIe round trip. A poll that reads,
// waits, and reads again sees an answer that landed just after a read
// passed only when the next read arrives, a whole round trip later: the
// ping-pong floor's slow mode (docs/PERFORMANCE.md). With D reads in
// flight, spaced S apart, the answer waits at most about S for a read.
// Whether the GPU keeps same-address reads apart (no merging in L2 or the
// host interface) is what this probe finds out.
//
// The minimal NIC of minimal_nic.cuh answers:
//   floor: the GPU stores i to a ping word, the CPU stores i in the next
//          64-byte slot of a pong ring, the GPU polls that slot;
//   post:  DOCA's order (4 x 16 B WQE, fence, doorbell, record, fence,
//          doorbell); the CPU reads the WQE, waits DELAY ns (the engine's
//          work), writes a CQE; the GPU polls the CQE's tail.
// The post's from_device fence after its CQE orders the loads before it,
// so it may wait for the reads still in flight, up to (D - 1) * S more;
// the post lines include whatever that costs, as the exclusive wait would.
// A post line ends with the medians of the post's two parts (bare_post):
// the WQE's stores and the first fence, then doorbell, record, second
// fence, doorbell; the rest of its round trip is the wait.
// Each line: the hold (SM cycles spun between the last store and the first
// read: holding the read back, as tried before), D (reads in flight), S
// (SM cycles between issues), and the
// p10 / p50 / p90 / mean of 2000 round trips (ns, globaltimer), best pass
// of three by mean. D = 1 is today's poll.
// Build and run on the device machine:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels/include -o /tmp/sp scripts/gpu_probe/staggered_poll.cu -lpthread && /tmp/sp [cpu]
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
#include "minimal_nic.cuh"

constexpr uint64_t TIMEOUT_NS = 100000000ull;

__device__ __forceinline__ void spin_cycles(uint32_t c) {
    uint64_t t = clock64();
    while ((uint64_t)clock64() - t < c) {
    }
}

// What a poll waits for: the floor's pong value, or a CQE tail's owner bit.
struct Pong {
    uint64_t want;
    __device__ bool ready(uint64_t v) const { return v == want; }
};
struct CqeTail {
    uint32_t want_own;
    __device__ bool ready(uint64_t v) const {
        uint8_t op_own = (uint8_t)((uint32_t)v >> 24);
        return (op_own >> 4) != MARROW_MLX5_CQE_INVALID && (op_own & 1) == want_own;
    }
};

__device__ __forceinline__ uint64_t read(const uint64_t *p) { return marrow::load_device_u64(p); }
__device__ __forceinline__ uint64_t read(const uint32_t *p) { return marrow::load_device_u32(p); }

// D reads of *p in flight, S cycles apart; each, once looked at, is
// issued again at once, so the reads keep their spacing. False on timeout.
template <int D, class T, class W>
__device__ bool staggered(const T *p, W w, uint32_t spacing) {
    uint64_t r[D];
#pragma unroll
    for (int k = 0; k < D; k++) {
        r[k] = read(p);
        if (k + 1 < D) spin_cycles(spacing);
    }
    uint64_t start = now();
    for (;;) {
#pragma unroll
        for (int k = 0; k < D; k++) {
            if (w.ready(r[k])) return true;
            r[k] = read(p);
        }
        if (now() - start > TIMEOUT_NS) return false;
    }
}

template <class T, class W>
__device__ bool poll(int d, const T *p, W w, uint32_t spacing) {
    switch (d) {
    case 2: return staggered<2>(p, w, spacing);
    case 4: return staggered<4>(p, w, spacing);
    case 8: return staggered<8>(p, w, spacing);
    default: return staggered<1>(p, w, spacing);
    }
}

__global__ void floor_kernel(uint8_t *host, uint64_t base, int d, uint32_t spacing, uint32_t hold, uint64_t *each,
                             int *rc) {
    uint64_t t = now();
    for (uint64_t i = base + 1; i <= base + ITERS; i++) {
        *(volatile uint64_t *)(host + OFF_PING) = i;
        spin_cycles(hold);
        const uint64_t *slot = (const uint64_t *)(host + OFF_CQ + (i % NCQE) * 64);
        if (!poll(d, slot, Pong{i}, spacing)) { *rc = 1; return; }
        uint64_t t1 = now();
        each[i - base - 1] = t1 - t;
        t = t1;
    }
    *rc = 0;
}

// each[i]: round trip i; steps[2i], steps[2i + 1]: its post's two parts (bare_post).
__global__ void post_kernel(uint8_t *host, int d, uint32_t spacing, uint32_t hold, uint64_t *each, uint64_t *steps,
                            int *rc) {
    uint64_t t = now();
    for (uint64_t idx = 0; idx < ITERS; idx++) {
        bare_post(host, idx, steps + 2 * idx);
        spin_cycles(hold);
        const uint32_t *tail = (const uint32_t *)(host + OFF_CQ + (idx % NCQE) * 64 + 60);
        if (!poll(d, tail, CqeTail{(uint32_t)((idx / NCQE) & 1)}, spacing)) { *rc = 1; return; }
        marrow::from_device();
        uint64_t t1 = now();
        each[idx] = t1 - t;
        t = t1;
    }
    *rc = 0;
}

// A pass: its round trips' p10 / p50 / p90 / mean, and for posts the
// medians of the post's two parts (0 for the floor).
struct Stats {
    double p10, p50, p90, mean, fence1, fence2;
};

static double median(std::vector<uint64_t> v) {
    std::sort(v.begin(), v.end());
    return (double)v[v.size() / 2];
}

int main(int argc, char **argv) {
    int cpu = argc > 1 ? atoi(argv[1]) : 2;
    uint8_t *dhost;
    uint8_t *host = map_host(&dhost);
    uint64_t *deach, *dsteps;
    int *drc;
    CK(cudaMalloc(&deach, ITERS * 8));
    CK(cudaMalloc(&dsteps, 2 * ITERS * 8));
    CK(cudaMalloc(&drc, 4));
    Nic nic;
    nic.start(host, cpu);
    uint64_t floor_base = 0;
    auto run = [&](bool floor, int d, uint32_t spacing, uint32_t hold) -> Stats {
        nic.floor = floor;
        nic.reset();
        if (floor) {
            floor_kernel<<<1, 1>>>(dhost, floor_base, d, spacing, hold, deach, drc);
            floor_base += ITERS;
        } else {
            post_kernel<<<1, 1>>>(dhost, d, spacing, hold, deach, dsteps, drc);
        }
        CK(cudaDeviceSynchronize());
        int rc;
        std::vector<uint64_t> e(ITERS);
        CK(cudaMemcpy(&rc, drc, 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(e.data(), deach, ITERS * 8, cudaMemcpyDeviceToHost));
        if (rc) { printf("%s d=%d s=%u timed out\n", floor ? "floor" : "post", d, spacing); exit(1); }
        double sum = 0, fence1 = 0, fence2 = 0;
        for (auto x : e) sum += (double)x;
        if (!floor) {
            std::vector<uint64_t> st(2 * ITERS), f1(ITERS), f2(ITERS);
            CK(cudaMemcpy(st.data(), dsteps, 2 * ITERS * 8, cudaMemcpyDeviceToHost));
            for (uint32_t i = 0; i < ITERS; i++) f1[i] = st[2 * i], f2[i] = st[2 * i + 1];
            fence1 = median(f1);
            fence2 = median(f2);
        }
        std::sort(e.begin(), e.end());
        return Stats{(double)e[ITERS / 10], (double)e[ITERS / 2], (double)e[ITERS * 9 / 10], sum / ITERS, fence1, fence2};
    };
    struct Shape {
        int d;
        uint32_t s, hold;
    };
    const Shape shapes[] = {{1, 0, 0},   {1, 0, 1000}, {1, 0, 2000}, {1, 0, 4000}, {2, 600, 0}, {2, 1200, 0},
                            {4, 300, 0}, {4, 600, 0},  {8, 150, 0},  {8, 300, 0},  {8, 0, 0}};
    printf("answering CPU %d; %u round trips a pass; ns p10 / p50 / p90 / mean, the best of 3 passes by mean;\n"
           "posts also: the medians of WQE stores + first fence, and doorbell, record, second fence, doorbell\n",
           cpu, ITERS);
    for (long delay : {-1L, 0L, 300L}) {
        nic.delay_ns = delay < 0 ? 0 : delay;
        bool floor = delay < 0;
        for (const Shape &sh : shapes) run(floor, sh.d, sh.s, sh.hold);  // warm
        for (int round = 0; round < 2; round++) {
            for (const Shape &sh : shapes) {
                Stats best{0, 0, 0, 1e18, 0, 0};
                for (int pass = 0; pass < 3; pass++) {
                    Stats s = run(floor, sh.d, sh.s, sh.hold);
                    if (s.mean < best.mean) best = s;
                }
                printf("%-5s delay %4ld  hold %4u  D %d  S %5u cycles: %6.0f / %6.0f / %6.0f / %6.0f", floor ? "floor" : "post",
                       floor ? 0L : delay, sh.hold, sh.d, sh.s, best.p10, best.p50, best.p90, best.mean);
                if (floor)
                    printf("\n");
                else
                    printf("; post %4.0f + %4.0f\n", best.fence1, best.fence2);
            }
        }
    }
    nic.finish();
    return 0;
}
