// Probe: SM-driven puts from GPU 0 into GPU 1's memory over NVLink by store
// and load flavour, 20 messages per launch (as `marrow bench p2p` measures
// "20 puts in one launch"), against the copy engine (cudaMemcpyPeerAsync x 20).
// Not part of marrow: evidence for docs/PERFORMANCE.md. Needs two peer GPUs:
//   nvcc -O3 -arch=sm_90 -o /tmp/p2p_probe scripts/gpu_probe/p2p_stores.cu && /tmp/p2p_probe
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

struct __align__(16) V16 { uint32_t a, b, c, d; };

__device__ __forceinline__ V16 ld_plain(const V16 *p) { return *p; }
__device__ __forceinline__ V16 ld_nc(const V16 *p) {
    V16 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.a), "=r"(v.b), "=r"(v.c), "=r"(v.d) : "l"(p));
    return v;
}
__device__ __forceinline__ void st_plain(V16 *p, V16 v) { *p = v; }
__device__ __forceinline__ void st_cs(V16 *p, V16 v) { asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.a), "r"(v.b), "r"(v.c), "r"(v.d) : "memory"); }
__device__ __forceinline__ void st_wt(V16 *p, V16 v) { asm volatile("st.global.wt.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.a), "r"(v.b), "r"(v.c), "r"(v.d) : "memory"); }

template <int LD, int ST, int INFLIGHT>
__global__ void put(V16 *dst, const V16 *src, uint64_t len, int reps) {
    uint64_t per = ((len + gridDim.x - 1) / gridDim.x + 15) & ~15ull;
    uint64_t start = per * blockIdx.x;
    if (start >= len) return;
    uint64_t n = (len - start < per ? len - start : per) / 16;
    const V16 *s = src + start / 16;
    V16 *d = dst + start / 16;
    for (int r = 0; r < reps; r++) {
        uint64_t i = threadIdx.x, step = blockDim.x;
        for (; i + (INFLIGHT - 1) * step < n; i += INFLIGHT * step) {
            V16 v[INFLIGHT];
#pragma unroll
            for (int k = 0; k < INFLIGHT; k++) v[k] = LD ? ld_nc(s + i + k * step) : ld_plain(s + i + k * step);
#pragma unroll
            for (int k = 0; k < INFLIGHT; k++) {
                if (ST == 0) st_plain(d + i + k * step, v[k]);
                if (ST == 1) st_cs(d + i + k * step, v[k]);
                if (ST == 2) st_wt(d + i + k * step, v[k]);
            }
        }
        for (; i < n; i += step) st_plain(d + i, ld_plain(s + i));
    }
    __threadfence_system();
}

typedef void (*Kern)(V16 *, const V16 *, uint64_t, int);

int main() {
    const uint64_t max = 256ull << 20;
    V16 *src, *dst;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&dst, max));
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaMalloc(&src, max));
    CK(cudaMemset(src, 7, max));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    struct { const char *name; Kern k; int blocks, threads; } ks[] = {
        {"plain ld, plain st, 4 in flight, 528x512", put<0, 0, 4>, 528, 512},
        {"plain ld, st.cs, 4 in flight, 528x512", put<0, 1, 4>, 528, 512},
        {"plain ld, st.wt, 4 in flight, 528x512", put<0, 2, 4>, 528, 512},
        {"ld.nc, plain st, 4 in flight, 528x512", put<1, 0, 4>, 528, 512},
        {"ld.nc, st.cs, 4 in flight, 528x512", put<1, 1, 4>, 528, 512},
        {"plain ld, plain st, 2 in flight, 528x512", put<0, 0, 2>, 528, 512},
        {"plain ld, plain st, 8 in flight, 264x512", put<0, 0, 8>, 264, 512},
        {"plain ld, plain st, 4 in flight, 264x1024", put<0, 0, 4>, 264, 1024},
        {"plain ld, plain st, 4 in flight, 132x1024", put<0, 0, 4>, 132, 1024},
        {"ld.nc, st.cs, 8 in flight, 528x256", put<1, 1, 8>, 528, 256},
    };
    // Best of 3, event-timed, of whatever `launch` enqueues.
    auto best_ms = [&](auto launch) {
        float best = 1e30f;
        for (int t = 0; t < 3; t++) {
            CK(cudaEventRecord(a));
            launch();
            CK(cudaEventRecord(b));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            if (ms < best) best = ms;
        }
        return best;
    };
    for (uint64_t len : {16ull << 20, 64ull << 20, 256ull << 20}) {
        float ms = best_ms([&] {
            for (int r = 0; r < 20; r++) CK(cudaMemcpyPeerAsync(dst, 1, src, 0, len));
        });
        double ce = 20.0 * len / (ms * 1e-3) / 1e9;
        printf("%4llu MiB: copy engine (cudaMemcpyPeerAsync x 20) %.1f GB/s\n", (unsigned long long)(len >> 20), ce);
        for (auto &k : ks) {
            float kms = best_ms([&] { k.k<<<k.blocks, k.threads>>>(dst, src, len, 20); });
            double bw = 20.0 * len / (kms * 1e-3) / 1e9;
            printf("%4llu MiB: %-44s %.1f GB/s  ratio %.3f\n", (unsigned long long)(len >> 20), k.name, bw, bw / ce);
        }
    }
    return 0;
}
