// Probe: can a GPU-initiated put reach the copy engine's bandwidth by handing
// large messages to the copy engine through a host relay thread, and does
// splitting a message between the copy engine and SM stores beat either?
// GPU 0 puts into GPU 1's memory over NVLink, 20 messages each time (as
// `marrow bench p2p` measures "20 puts in one launch").
// Not part of marrow: evidence for docs/PERFORMANCE.md. Needs two peer GPUs:
//   nvcc -O3 -arch=sm_90 -o /tmp/p2p_relay scripts/gpu_probe/p2p_relay.cu -lcuda && /tmp/p2p_relay
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <cuda.h>
#include <cuda_runtime.h>
#include "p2p_sm_put.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CKD(x) do { CUresult e_ = (x); if (e_ != CUDA_SUCCESS) { printf("%s: %d\n", #x, (int)e_); exit(1); } } while (0)

// The relay's ring: one descriptor per put, published by its seq.
struct Desc { uint64_t seq, dst, src, len; };
constexpr int RING = 64;

// One thread posts `reps` descriptors, then waits (bounded) for the relay's
// completion count; 0 on success, -110 on timeout.
__global__ void relay_put(Desc *ring, volatile uint64_t *done, uint64_t dst, uint64_t src, uint64_t len, int reps, int *rc) {
    for (int r = 0; r < reps; r++) {
        Desc *d = &ring[r % RING];
        ((volatile Desc *)d)->dst = dst;
        ((volatile Desc *)d)->src = src;
        ((volatile Desc *)d)->len = len;
        __threadfence_system();  // descriptor before its seq, for the host
        ((volatile Desc *)d)->seq = r + 1;
    }
    uint64_t t0 = clock64();
    while (*done < (uint64_t)reps) {
        if (clock64() - t0 > 20000000000ull) { *rc = -110; return; }
    }
    *rc = 0;
}

int main() {
    const uint64_t max = 256ull << 20;
    V16 *src, *dst;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&dst, max));
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaMalloc(&src, max));
    CK(cudaMemset(src, 7, max));
    cudaStream_t s0, s1, cs;
    CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    auto wall_best = [&](auto body) {
        double best = 1e30;
        for (int t = 0; t < 3; t++) {
            CK(cudaDeviceSynchronize());
            auto a = std::chrono::steady_clock::now();
            body();
            CK(cudaDeviceSynchronize());
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
            if (s < best) best = s;
        }
        return best;
    };
    Desc *ring;
    uint64_t *done_h;
    CK(cudaHostAlloc(&ring, sizeof(Desc) * RING, cudaHostAllocMapped));
    CK(cudaMalloc(&done_h, 8));
    int *rc;
    CK(cudaMallocManaged(&rc, 4));
    for (uint64_t len : {1ull << 20, 16ull << 20, 64ull << 20, 256ull << 20}) {
        double gb = 20.0 * len / 1e9;
        double ce = gb / wall_best([&] { for (int r = 0; r < 20; r++) CK(cudaMemcpyPeerAsync(dst, 1, src, 0, len, cs)); });
        // SM stores: p2p_stores.cu's best shape (plain, 4 in flight, 528x512).
        double sm = gb / wall_best([&] { put<0, 0, 4><<<528, 512, 0, s0>>>(dst, src, len, 20); });
        printf("%4llu MiB: copy engine x20 %.1f GB/s; SM stores %.1f (%.3f)\n", (unsigned long long)(len >> 20), ce, sm, sm / ce);
        for (double f : {0.3, 0.5, 0.6, 0.7, 0.8, 0.9}) {
            uint64_t ce_len = (uint64_t)(len * f) & ~4095ull;
            double bw = gb / wall_best([&] {
                put<0, 0, 4><<<528, 512, 0, s0>>>(dst + ce_len / 16, src + ce_len / 16, len - ce_len, 20);
                for (int r = 0; r < 20; r++) CK(cudaMemcpyPeerAsync(dst, 1, src, 0, ce_len, cs));
            });
            printf("%4llu MiB: split %.0f%% copy engine + rest SM stores concurrently %.1f GB/s (%.3f)\n",
                   (unsigned long long)(len >> 20), f * 100, bw, bw / ce);
        }
        // The relay: the kernel posts, a host thread issues the copies and a
        // stream write of the count that the kernel waits for.
        double bw = gb / wall_best([&] {
            memset(ring, 0, sizeof(Desc) * RING);
            CK(cudaMemset(done_h, 0, 8));
            CK(cudaDeviceSynchronize());
            std::atomic<bool> stop{false};
            std::thread relay([&] {
                CK(cudaSetDevice(0));
                for (uint64_t next = 1; next <= 20 && !stop;) {
                    volatile Desc *d = &ring[(next - 1) % RING];
                    if (d->seq != next) continue;
                    std::atomic_thread_fence(std::memory_order_acquire);
                    CK(cudaMemcpyAsync((void *)d->dst, (void *)d->src, d->len, cudaMemcpyDeviceToDevice, cs));
                    CKD(cuStreamWriteValue64(cs, (CUdeviceptr)done_h, next, 0));
                    next++;
                }
            });
            relay_put<<<1, 1, 0, s0>>>(ring, done_h, (uint64_t)dst, (uint64_t)src, len, 20, rc);
            CK(cudaStreamSynchronize(s0));
            stop = true;
            relay.join();
        });
        printf("%4llu MiB: device-posted, host-relayed copy engine x20 %.1f GB/s (%.3f) rc %d\n", (unsigned long long)(len >> 20), bw, bw / ce, *rc);
    }
    return 0;
}
