// Probe: can a GPU-initiated put ride the copy engine?
// A one-thread kernel on GPU 0 device-launches (CUDA device graph launch,
// fire-and-forget) a pre-built graph: REPS memcpy nodes, then a one-thread
// kernel node that counts the run in managed memory. The host times from
// just before the launch until it sees the count move (wall clock, launch
// included), against REPS x cudaMemcpyPeerAsync timed the same way.
//
// The CUDA programming guide's "Device Graph Launch" allows device launches
// only from a kernel that itself runs as a node of a graph: a first version
// that launched the launcher with <<<>>> saw cudaGraphLaunch return
// cudaSuccess and the graph never run. Here the launcher is a kernel node
// of a host-launched graph. It also asks whether the launching kernel can
// wait for its own copy (a quiet): the launcher spins on the count for up
// to 2 ms. First a graph whose memcpy stays on GPU 0, then the peer copy.
//
// Answer on 2 x H200, 2026-11-29 (docs/runs/2026-11-29-p2p-probe-device-graph-8eb28c1.txt): it
// works, and a kernel does see its graph finish, but the peer memcpy nodes
// run at SM-store speed, not the copy engine's: 256 MiB 367.4 GB/s against
// cudaMemcpyPeerAsync's 394.7 (0.931), 64 MiB 0.912. A put cannot reach
// the copy engine's rate from the GPU this way either.
//   nvcc -O3 -arch=sm_90 -rdc=true -o /tmp/dg scripts/gpu_probe/p2p_device_graph.cu -lcudadevrt && /tmp/dg
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int REPS = 20;

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

// One thread decides to put: it launches the device graph, then, if asked,
// waits up to wait_ns for the count to move. rc[0]: what cudaGraphLaunch
// said; rc[1]: 1 if the count moved while this kernel still ran, 0 if not.
__global__ void launcher(cudaGraphExec_t g, int *rc, const unsigned *count, unsigned long long wait_ns) {
    unsigned before = *(volatile const unsigned *)count;
    rc[0] = (int)cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
    rc[1] = 0;
    if (!wait_ns) return;
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < wait_ns)
        if (*(volatile const unsigned *)count != before) { rc[1] = 1; return; }
}

// The graph's last node: counts finished runs.
__global__ void finished(unsigned *count) { atomicAdd(count, 1u); }

__global__ void count_not(const unsigned char *p, size_t n, unsigned char v, unsigned long long *bad) {
    unsigned long long mine = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) mine += p[i] != v;
    if (mine) atomicAdd(bad, mine);
}

// REPS memcpys dst <- src in a chain, then `finished`; instantiated for device launch.
static cudaGraphExec_t build(void *dst, const void *src, size_t len, unsigned *done, cudaStream_t st) {
    cudaGraph_t graph;
    CK(cudaGraphCreate(&graph, 0));
    cudaGraphNode_t prev = nullptr;
    for (int r = 0; r < REPS; r++) {
        cudaGraphNode_t node;
        CK(cudaGraphAddMemcpyNode1D(&node, graph, prev ? &prev : nullptr, prev ? 1 : 0, dst, src, len, cudaMemcpyDeviceToDevice));
        prev = node;
    }
    cudaKernelNodeParams kp = {};
    void *args[] = {&done};
    kp.func = (void *)finished;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args;
    cudaGraphNode_t tail;
    CK(cudaGraphAddKernelNode(&tail, graph, &prev, 1, &kp));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagDeviceLaunch));
    CK(cudaGraphUpload(exec, st));
    CK(cudaGraphDestroy(graph));
    return exec;
}

// A host-launched graph of one node, the launcher: device graph launch is
// allowed only from a kernel running as part of a graph.
static cudaGraphExec_t outer(cudaGraphExec_t inner, int *rc, const unsigned *count, unsigned long long wait_ns) {
    cudaGraph_t graph;
    CK(cudaGraphCreate(&graph, 0));
    cudaKernelNodeParams kp = {};
    void *args[] = {&inner, &rc, &count, &wait_ns};
    kp.func = (void *)launcher;
    kp.gridDim = dim3(1);
    kp.blockDim = dim3(1);
    kp.kernelParams = args;
    cudaGraphNode_t node;
    CK(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &kp));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, 0));
    CK(cudaGraphDestroy(graph));
    return exec;
}

// One device-launched run: ms from launch to the count moving, or < 0 on a
// timeout (after printing what the launch and the context said).
static double run(cudaGraphExec_t exec, unsigned *done, int *rc, cudaStream_t st, unsigned long long wait_ns = 0) {
    cudaGraphExec_t out = outer(exec, rc, done, wait_ns);
    unsigned before = *(volatile unsigned *)done;
    CK(cudaStreamSynchronize(st));
    auto t0 = std::chrono::steady_clock::now();
    CK(cudaGraphLaunch(out, st));
    while (*(volatile unsigned *)done == before) {
        if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
            cudaError_t sync = cudaStreamSynchronize(st);
            int h_rc[2] = {-1, -1};
            cudaMemcpy(h_rc, rc, sizeof h_rc, cudaMemcpyDeviceToHost);
            printf("  no completion in 10 s: device cudaGraphLaunch said %d (%s); stream sync says %s; count %u\n", h_rc[0],
                   cudaGetErrorString((cudaError_t)h_rc[0]), cudaGetErrorString(sync), *(volatile unsigned *)done);
            return -1;
        }
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CK(cudaStreamSynchronize(st));
    CK(cudaGraphExecDestroy(out));
    return ms;
}

int main() {
    const size_t sizes[] = {1ull << 20, 16ull << 20, 64ull << 20, 256ull << 20};
    const size_t max = 256ull << 20;
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (ndev < 2) { printf("SKIP: need 2 GPUs\n"); return 0; }
    void *dst, *src, *local;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&dst, max));
    CK(cudaSetDevice(0));
    CK(cudaDeviceEnablePeerAccess(1, 0));
    CK(cudaMalloc(&src, max));
    CK(cudaMalloc(&local, 1 << 20));
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    int *rc;
    CK(cudaMallocManaged(&rc, 2 * sizeof(int)));
    unsigned *done;
    CK(cudaMallocManaged(&done, sizeof(unsigned)));
    *done = 0;
    printf("# scripts/gpu_probe/p2p_device_graph.cu: %d memcpys per device-launched graph\n", REPS);
    // 1. Does device graph launch complete at all, with a copy inside GPU 0?
    cudaGraphExec_t lg = build(local, src, 1 << 20, done, st);
    double ms = run(lg, done, rc, st);
    printf("graph of GPU 0 -> GPU 0 memcpys (1 MiB): %s (%.3f ms), device launch said %d\n", ms < 0 ? "did not complete" : "completed", ms, rc[0]);
    if (ms < 0) return 1;
    // Can the launching kernel see its own fire-and-forget graph finish?
    ms = run(lg, done, rc, st, 2000000ull);
    printf("launcher waiting up to 2 ms for its graph: %s\n", ms < 0 ? "timed out" : rc[1] ? "saw it finish (a kernel can quiet a copy-engine put)" : "did not see it finish while running (children start after the parent)");
    CK(cudaGraphExecDestroy(lg));
    // 2. The peer copy, against the copy engine launched from the host.
    for (size_t len : sizes) {
        unsigned char v = (unsigned char)((len >> 20) & 0xff);
        CK(cudaMemsetAsync(src, v, len, st));
        cudaGraphExec_t exec = build(dst, src, len, done, st);
        double best_dg = 1e30, best_ce = 1e30;
        for (int trial = 0; trial < 3; trial++) {
            ms = run(exec, done, rc, st);
            if (ms < 0) return 1;
            if (ms < best_dg) best_dg = ms;
            auto t0 = std::chrono::steady_clock::now();
            for (int r = 0; r < REPS; r++) CK(cudaMemcpyPeerAsync(dst, 1, src, 0, len, st));
            CK(cudaStreamSynchronize(st));
            ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (ms < best_ce) best_ce = ms;
        }
        // Every byte of one more device-launched run, into a cleared window.
        CK(cudaSetDevice(1));
        CK(cudaMemset(dst, 0, len));
        CK(cudaDeviceSynchronize());
        CK(cudaSetDevice(0));
        if (run(exec, done, rc, st) < 0) return 1;
        CK(cudaSetDevice(1));
        unsigned long long *bad, h_bad = 0;
        CK(cudaMalloc(&bad, sizeof *bad));
        CK(cudaMemset(bad, 0, sizeof *bad));
        count_not<<<528, 512>>>((const unsigned char *)dst, len, v, bad);
        CK(cudaMemcpy(&h_bad, bad, sizeof h_bad, cudaMemcpyDeviceToHost));
        CK(cudaFree(bad));
        CK(cudaSetDevice(0));
        double gb = (double)len * REPS / 1e9;
        printf("%5zu MiB: device-launched graph %.1f GB/s; cudaMemcpyPeerAsync x %d %.1f GB/s (both wall clock, launch to done); ratio %.3f; bytes differing: %llu\n",
               len >> 20, gb / (best_dg / 1e3), REPS, gb / (best_ce / 1e3), best_ce / best_dg, h_bad);
        CK(cudaGraphExecDestroy(exec));
    }
    return 0;
}
