// Probe: a blocking put's round trip, its steps added one at a time, with a
// pinned CPU thread standing in for the NIC (it reads the WQE's line and
// writes a CQE-sized answer into the next slot of a walking CQ, nothing
// else: the softnic's own work is left out). Each mode is one thread doing
// ITERS round trips; ns per round trip. Modes:
//   0 the floor: plain store of the ping, poll the walking pong;
//   1 4 x 16 B WQE stores, fence.acq_rel.sys, doorbell (the ping), poll;
//   2 mode 1 + record, fence.acq_rel.sys, second doorbell (DOCA's order,
//     marrow's flags.early_doorbell), poll;
//   3 WQE, fence, record, fence, one doorbell (NVSHMEM's order), poll;
//   4 mode 2 + two L2 round trips after it (a load, then an atomic OR on a
//     word in GPU memory), the poll waiting for them: a shared channel's
//     cons_idx look and poll lock, as now;
//   5 mode 2 with the same atomic and load issued before the second fence;
//   6 mode 1 + the record after the doorbell, no second fence;
//   7 mode 2, polling with two reads in flight, the second STAGGER SM
//     cycles after the first: does a second read of the same word, issued
//     while the first is on its way, bring a fresher value?
// Then modes 0, 2 and 7 with the CPU answering DELAY ns late, standing in
// for a NIC slower than a spinning thread: how late can a CQE come before
// a put pays a whole read round trip more.
// Not part of marrow: evidence for docs/PERFORMANCE.md. Build and run on
// the device machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/ps scripts/gpu_probe/put_shape.cu -lpthread && /tmp/ps [cpu]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <thread>
#include <vector>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int ITERS = 2000, SLOTS = 4096, MODES = 8;
constexpr long long STAGGER = 1200; // SM cycles, about 0.6 us
// Host memory: the doorbell page, the record page, the SQ, the CQ.
constexpr size_t DB = 0, REC = 4096, SQ = 8192, CQ = SQ + SLOTS * 64, LEN = CQ + SLOTS * 64;

__device__ __forceinline__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ uint64_t ld_sys(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void fence_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void st16(void *p, uint64_t a, uint64_t b) {
    asm volatile("st.global.cs.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ void st_mmio(void *p, uint64_t v) {
    asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ uint64_t atom_or(uint64_t *p, uint64_t v) {
    uint64_t r;
    asm volatile("atom.acquire.gpu.global.or.b64 %0, [%1], %2;" : "=l"(r) : "l"(p), "l"(v) : "memory");
    return r;
}
__device__ __forceinline__ uint64_t ld_gpu(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__global__ void put_shape(uint8_t *host, uint64_t *gmem, int mode, uint64_t base, uint64_t *ns, int *rc) {
    uint64_t t0 = now(), sink = 0, dep = 0;
    for (uint64_t i = base + 1; i <= base + ITERS; i++) {
        uint8_t *wqe = host + SQ + (i % SLOTS) * 64;
        uint64_t *db = (uint64_t *)(host + DB), *rec = (uint64_t *)(host + REC);
        if (mode == 0) {
            *(volatile uint64_t *)db = i;
        } else {
            for (int k = 0; k < 4; k++) st16(wqe + 16 * k, i, i);
            fence_sys();
            if (mode == 3) {
                *(volatile uint64_t *)rec = i;
                fence_sys();
                st_mmio(db, i);
            } else {
                st_mmio(db, i);
                *(volatile uint64_t *)rec = i;
                if (mode == 5) {
                    uint64_t c = ld_gpu(gmem + 16);
                    dep = atom_or(gmem + (c >> 63), 1) >> 63;
                }
                if (mode == 2 || mode == 4 || mode == 5 || mode == 7) {
                    fence_sys();
                    st_mmio(db, i);
                }
                if (mode == 4) {
                    uint64_t c = ld_gpu(gmem + 16);
                    dep = atom_or(gmem + (c >> 63), 1) >> 63;
                }
            }
        }
        /* dep is 0, but the first poll cannot leave before the atomic's
         * answer (modes 4 and 5), as a shared poller's cannot. */
        const uint64_t *cqe = (const uint64_t *)(host + CQ + (i % SLOTS) * 64 + 56) + dep;
        uint64_t start = now();
        if (mode == 7) {
            uint64_t a = ld_sys(cqe);
            long long c0 = clock64();
            while (clock64() - c0 < STAGGER) {
            }
            uint64_t b = ld_sys(cqe);
            for (;;) {
                if (a == i) break;
                a = ld_sys(cqe);
                if (b == i) break;
                b = ld_sys(cqe);
                if (now() - start > 100000000ull) { *rc = 1; return; }
            }
            continue;
        }
        while (ld_sys(cqe) != i) {
            if (now() - start > 100000000ull) { *rc = 1; return; }
        }
    }
    *ns = now() - t0;
    *rc = sink == 1 ? 2 : 0;
    (void)sink;
}

struct Responder {
    uint8_t *host = nullptr;
    std::atomic<bool> stop{false};
    std::atomic<long> delay_ns{0};
    void run(int cpu) {
        cpu_set_t s;
        CPU_ZERO(&s);
        CPU_SET(cpu, &s);
        pthread_setaffinity_np(pthread_self(), sizeof s, &s);
        uint64_t last = 0, *db = (uint64_t *)(host + DB);
        while (!stop.load(std::memory_order_relaxed)) {
            uint64_t v = __atomic_load_n(db, __ATOMIC_ACQUIRE);
            if (v != last) {
                long d = delay_ns.load(std::memory_order_relaxed);
                if (d) {
                    auto t0 = std::chrono::steady_clock::now();
                    while (std::chrono::steady_clock::now() - t0 < std::chrono::nanoseconds(d)) {
                    }
                }
                // Read the WQE's line as the engine would, then answer.
                const volatile uint64_t *wqe = (const uint64_t *)(host + SQ + (v % SLOTS) * 64);
                uint64_t x = wqe[0] + wqe[7];
                uint64_t *cqe = (uint64_t *)(host + CQ + (v % SLOTS) * 64);
                cqe[0] = x;
                __atomic_store_n(cqe + 7, v, __ATOMIC_RELEASE);
                last = v;
            }
            __builtin_ia32_pause();
        }
    }
};

int main(int argc, char **argv) {
    int cpu = argc > 1 ? atoi(argv[1]) : 2;
    uint8_t *host = (uint8_t *)mmap(nullptr, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (host == MAP_FAILED) { perror("mmap"); return 1; }
    std::fill(host, host + LEN, 0);
    CK(cudaHostRegister(host, LEN, cudaHostRegisterMapped));
    uint8_t *dhost;
    CK(cudaHostGetDevicePointer((void **)&dhost, host, 0));
    uint64_t *gmem, *dns;
    int *drc;
    CK(cudaMalloc(&gmem, 256));
    CK(cudaMemset(gmem, 0, 256));
    CK(cudaMalloc(&dns, 8));
    CK(cudaMalloc(&drc, 4));
    Responder r;
    r.host = host;
    std::thread t([&] { r.run(cpu); });
    uint64_t base = 0;
    auto run = [&](int mode) -> double {
        put_shape<<<1, 1>>>(dhost, gmem, mode, base, dns, drc);
        CK(cudaDeviceSynchronize());
        base += ITERS;
        uint64_t ns;
        int rc;
        CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&rc, drc, 4, cudaMemcpyDeviceToHost));
        if (rc == 1) { printf("mode %d timed out\n", mode); exit(1); }
        return (double)ns / ITERS;
    };
    run(0);
    printf("responder on CPU %d; %d round trips per figure; ns per round trip, 5 passes over the modes\n", cpu, ITERS);
    std::vector<std::vector<double>> v(MODES);
    for (int pass = 0; pass < 5; pass++)
        for (int m = 0; m < MODES; m++) v[m].push_back(run(m));
    for (int m = 0; m < MODES; m++) {
        std::sort(v[m].begin(), v[m].end());
        printf("mode %d: min %6.0f  median %6.0f  max %6.0f\n", m, v[m][0], v[m][2], v[m][4]);
    }
    printf("the CPU answering late: median of 5 passes, ns per round trip\n  delay  mode 0  mode 2  mode 7\n");
    for (long d : {0L, 100L, 200L, 300L, 400L, 500L, 600L, 800L, 1000L}) {
        r.delay_ns = d;
        std::vector<std::vector<double>> w(3);
        for (int pass = 0; pass < 5; pass++) {
            w[0].push_back(run(0));
            w[1].push_back(run(2));
            w[2].push_back(run(7));
        }
        for (auto &x : w) std::sort(x.begin(), x.end());
        printf("  %5ld  %6.0f  %6.0f  %6.0f\n", d, w[0][2], w[1][2], w[2][2]);
    }
    r.stop = true;
    t.join();
    return 0;
}
