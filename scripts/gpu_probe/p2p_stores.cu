// Probe: SM-driven puts from GPU 0 into GPU 1's memory over NVLink by store
// and load flavour, 20 messages per launch (as `marrow bench p2p` measures
// "20 puts in one launch"), against the copy engine (cudaMemcpyPeerAsync x 20).
// Not part of marrow: evidence for docs/PERFORMANCE.md. Needs two peer GPUs:
//   nvcc -O3 -arch=sm_90 -o /tmp/p2p_probe scripts/gpu_probe/p2p_stores.cu && /tmp/p2p_probe
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>
#include "p2p_sm_put.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

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
