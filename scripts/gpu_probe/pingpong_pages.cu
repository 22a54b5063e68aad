// Probe: does the GPU<->CPU ping-pong through host memory depend on the
// page it runs on? `marrow bench gpu` measures its floor on one fresh page
// per call, and that floor moves from call to call while the puts, whose
// CQEs walk a ring over many pages, hold still. Here one process measures
// the same ping-pong (marrow_pingpong_kernel's plain flavour, a CPU thread
// pinned to one CPU answering) on each of PAGES pages, twice, with the ping
// and the pong each moved alone, and once walking: iteration i's pong on
// page i mod PAGES, as a CQ's slots walk. Also the GPU's own read latency of
// each page (dependent loads, no CPU involved). Not part of marrow:
// evidence for docs/PERFORMANCE.md. Build and run on the device machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/pp scripts/gpu_probe/pingpong_pages.cu -lpthread && /tmp/pp [cpu]
#include <algorithm>
#include <atomic>
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

constexpr int PAGES = 64, PAGE = 4096, ITERS = 2000;

__device__ __forceinline__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ uint64_t ld_sys(const uint64_t *p) {
    uint64_t v;
    asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

// Ping at `ping`; the pong of value i at pong + (i % walk) * PAGE/8 words.
// Values start at `base` + 1 so that runs chain without a reset.
__global__ void pingpong(uint64_t *ping, uint64_t *pong, uint32_t walk, uint64_t base, uint64_t *ns, int *rc) {
    uint64_t t0 = now();
    for (uint64_t i = base + 1; i <= base + ITERS; i++) {
        *(volatile uint64_t *)ping = i;
        const uint64_t *p = pong + (i % walk) * (PAGE / 8);
        uint64_t start = now();
        while (ld_sys(p) != i) {
            if (now() - start > 100000000ull) { *rc = 1; return; }
        }
    }
    *ns = now() - t0;
    *rc = 0;
}

// Dependent system-scope loads of a word that holds 0.
__global__ void readlat(const uint64_t *p, uint64_t *ns) {
    uint64_t v = 0, t0 = now();
    for (int i = 0; i < 1000; i++) v = ld_sys(p + v);
    *ns = now() - t0 + (v ? 1 : 0);
}

struct Responder {
    std::atomic<uint64_t *> ping{nullptr};
    std::atomic<uint64_t *> pong{nullptr}; // the pong word; walking, value i goes i % walk pages on
    std::atomic<uint32_t> walk{1};
    std::atomic<bool> stop{false};
    void run(int cpu) {
        cpu_set_t s;
        CPU_ZERO(&s);
        CPU_SET(cpu, &s);
        pthread_setaffinity_np(pthread_self(), sizeof s, &s);
        uint64_t last = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            uint64_t *p = ping.load(std::memory_order_relaxed);
            if (p) {
                uint64_t v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
                if (v != last) {
                    uint32_t w = walk.load(std::memory_order_relaxed);
                    __atomic_store_n(pong.load(std::memory_order_relaxed) + (v % w) * (PAGE / 8), v, __ATOMIC_RELEASE);
                    last = v;
                }
            }
            __builtin_ia32_pause();
        }
    }
};

int main(int argc, char **argv) {
    int cpu = argc > 1 ? atoi(argv[1]) : 2;
    // Two areas of PAGES pages each: pings in one, pongs in the other.
    size_t len = 2 * PAGES * PAGE;
    uint8_t *mem = (uint8_t *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (mem == MAP_FAILED) { perror("mmap"); return 1; }
    std::fill(mem, mem + len, 0);
    CK(cudaHostRegister(mem, len, cudaHostRegisterMapped));
    uint8_t *dmem;
    CK(cudaHostGetDevicePointer((void **)&dmem, mem, 0));
    auto ping_at = [&](uint8_t *m, int page) { return (uint64_t *)(m + page * PAGE); };
    auto pong_at = [&](uint8_t *m, int page) { return (uint64_t *)(m + (PAGES + page) * PAGE + 64); };
    uint64_t *dns;
    int *drc;
    CK(cudaMalloc(&dns, 8));
    CK(cudaMalloc(&drc, 4));
    Responder r;
    r.pong.store(pong_at(mem, 0));
    std::thread t([&] { r.run(cpu); });
    uint64_t base = 0;
    // One ping-pong of ITERS; ns per round trip.
    auto run = [&](int ping_page, int pong_page, uint32_t walk) -> double {
        // The responder's pong base moves with pong_page only when not walking.
        r.walk.store(walk);
        r.pong.store(pong_at(mem, walk > 1 ? 0 : pong_page));
        r.ping.store(ping_at(mem, ping_page));
        pingpong<<<1, 1>>>(ping_at(dmem, ping_page), walk > 1 ? pong_at(dmem, 0) : pong_at(dmem, pong_page), walk, base,
                           dns, drc);
        CK(cudaDeviceSynchronize());
        base += ITERS;
        uint64_t ns;
        int rc;
        CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&rc, drc, 4, cudaMemcpyDeviceToHost));
        r.ping.store(nullptr);
        if (rc) { printf("timed out (ping page %d, pong page %d, walk %u)\n", ping_page, pong_page, walk); exit(1); }
        return (double)ns / ITERS;
    };
    run(0, 0, 1); // warm-up
    printf("responder on CPU %d; %d iterations per figure; ns per round trip\n", cpu, ITERS);
    std::vector<double> same1, same2, ping_moves, pong_moves, lat;
    for (int p = 0; p < PAGES; p++) same1.push_back(run(p, p, 1));
    for (int p = 0; p < PAGES; p++) same2.push_back(run(p, p, 1));
    for (int p = 0; p < PAGES; p++) ping_moves.push_back(run(p, 0, 1));
    for (int p = 0; p < PAGES; p++) pong_moves.push_back(run(0, p, 1));
    std::vector<double> walks;
    for (int k = 0; k < 8; k++) walks.push_back(run(0, 0, PAGES));
    for (int p = 0; p < PAGES; p++) {
        readlat<<<1, 1>>>(pong_at(dmem, p) + 1, dns);
        CK(cudaDeviceSynchronize());
        uint64_t ns;
        CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
        lat.push_back(ns / 1000.0);
    }
    printf("page  same(1) same(2)  ping-moved pong-moved  GPU read latency of the pong page\n");
    for (int p = 0; p < PAGES; p++)
        printf("%4d  %7.0f %7.0f  %10.0f %10.0f  %7.0f\n", p, same1[p], same2[p], ping_moves[p], pong_moves[p], lat[p]);
    auto summary = [](const char *name, std::vector<double> v) {
        std::sort(v.begin(), v.end());
        double sum = 0;
        for (double x : v) sum += x;
        printf("%-40s min %6.0f  median %6.0f  mean %6.0f  max %6.0f\n", name, v.front(), v[v.size() / 2], sum / v.size(),
               v.back());
    };
    summary("same page, first pass", same1);
    summary("same page, second pass", same2);
    summary("ping moved, pong on page 0", ping_moves);
    summary("pong moved, ping on page 0", pong_moves);
    summary("walking: pong i on page i mod 64 (8 runs)", walks);
    summary("GPU read latency, per page", lat);
    // Does a page keep its level? Correlation of the two same-page passes.
    double m1 = 0, m2 = 0;
    for (int p = 0; p < PAGES; p++) m1 += same1[p], m2 += same2[p];
    m1 /= PAGES, m2 /= PAGES;
    double c = 0, v1 = 0, v2 = 0;
    for (int p = 0; p < PAGES; p++) {
        c += (same1[p] - m1) * (same2[p] - m2);
        v1 += (same1[p] - m1) * (same1[p] - m1);
        v2 += (same2[p] - m2) * (same2[p] - m2);
    }
    printf("correlation of the two same-page passes: %.2f\n", c / __builtin_sqrt(v1 * v2));
    r.stop = true;
    t.join();
    return 0;
}
