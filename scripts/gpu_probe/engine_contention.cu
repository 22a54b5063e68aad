// Probe: does a CPU thread that watches the ring (as the softnic's engine
// does) slow a GPU thread's post into host memory? One GPU thread runs the
// posting-rate floor (64 B of WQE, fence, doorbell record, fence, doorbell)
// while a host thread does nothing, spins on an unrelated line, or polls the
// doorbell and reads what a post wrote, as an engine would. Not part of
// marrow: evidence for docs/PERFORMANCE.md. Build and run on the device machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/contention scripts/gpu_probe/engine_contention.cu -lpthread && /tmp/contention
#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <sys/mman.h>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ void fence_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void st_cs16(uint64_t *p, uint64_t a, uint64_t b) { asm volatile("st.global.cs.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory"); }
__device__ __forceinline__ void st_mmio(uint64_t *p, uint64_t v) { asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); }

constexpr int N = 4096, RING = 1024;
constexpr size_t OFF_DBREC = RING * 64, OFF_DB = OFF_DBREC + 4096, OFF_CQ = OFF_DB + 4096, OFF_BUF = OFF_CQ + RING * 64,
                 OFF_IDLE = OFF_BUF + 8192, REGION = OFF_IDLE + 4096;

// The floor, ringing every post; the doorbell carries the next index + 1
// so a watcher can tell a new one.
__global__ void floor_kernel(uint8_t *ring, uint32_t *dbrec, uint64_t *db, uint64_t *ns) {
    uint64_t t0 = now();
    for (uint32_t i = 0; i < N; i++) {
        uint64_t *w = (uint64_t *)(ring + (i % RING) * 64);
        for (int k = 0; k < 8; k += 2) st_cs16(w + k, i + k, i + k + 1);
        fence_sys();
        *(volatile uint32_t *)dbrec = i + 1;
        fence_sys();
        st_mmio(db, i + 1);
    }
    *ns = (now() - t0) / N;
}

const char *names[] = {
    "0 no host thread",
    "1 host thread spinning on a line of its own",
    "2 host thread polling the doorbell word",
    "3 host polls the doorbell, then reads the doorbell record and the new WQE (64 B)",
    "4 as 3, then copies 8 B between host buffers and writes a 64 B CQE (the engine's work for an 8 B put)",
};

int main() {
    uint8_t *h = (uint8_t *)mmap(nullptr, REGION, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (h == MAP_FAILED) return 1;
    memset(h, 0, REGION);
    CK(cudaHostRegister(h, REGION, cudaHostRegisterMapped));
    uint8_t *d;
    CK(cudaHostGetDevicePointer((void **)&d, h, 0));
    uint64_t *ns;
    CK(cudaMalloc(&ns, 8));
    printf("# scripts/gpu_probe/engine_contention.cu: one GPU thread, %d posts, best of 5, ns per post\n", N);
    for (int mode = 0; mode < 5; mode++) {
        uint64_t best = ~0ull;
        for (int rep = 0; rep < 5; rep++) {
            memset(h + OFF_DB, 0, 8);
            std::atomic<bool> stop{false};
            std::thread t;
            if (mode > 0) t = std::thread([&] {
                volatile uint64_t *db = (volatile uint64_t *)(h + (mode == 1 ? OFF_IDLE : OFF_DB));
                volatile uint32_t *dbrec = (volatile uint32_t *)(h + OFF_DBREC);
                uint64_t seen = 0, sink = 0;
                while (!stop.load(std::memory_order_relaxed)) {
                    uint64_t v = *db;
                    if (mode < 3 || v == seen) { sink += v; continue; }
                    sink += *dbrec;
                    for (uint64_t i = seen; i < v; i++) {
                        volatile uint64_t *w = (volatile uint64_t *)(h + (i % RING) * 64);
                        for (int k = 0; k < 8; k++) sink += w[k];
                        if (mode == 4) {
                            memcpy(h + OFF_BUF + 4096 + (i % 512) * 8, h + OFF_BUF + (i % 512) * 8, 8);
                            volatile uint64_t *c = (volatile uint64_t *)(h + OFF_CQ + (i % RING) * 64);
                            for (int k = 0; k < 8; k++) c[k] = i + k;
                        }
                    }
                    seen = v;
                }
                if (sink == 42) printf(" ");
            });
            floor_kernel<<<1, 1>>>(d, (uint32_t *)(d + OFF_DBREC), (uint64_t *)(d + OFF_DB), ns);
            CK(cudaDeviceSynchronize());
            stop = true;
            if (t.joinable()) t.join();
            uint64_t v;
            CK(cudaMemcpy(&v, ns, 8, cudaMemcpyDeviceToHost));
            if (v < best) best = v;
        }
        printf("%6llu ns  %s\n", (unsigned long long)best, names[mode]);
    }
    return 0;
}
