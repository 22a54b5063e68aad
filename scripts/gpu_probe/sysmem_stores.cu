// Probe: what one GPU thread pays to write a 64-byte WQE into host memory
// (cudaHostRegister'd, as the softnic's rings are), by store flavour, with
// and without the fences of a post. Not part of marrow: evidence for
// docs/PERFORMANCE.md. Build and run on the device machine:
//   nvcc -O3 -arch=sm_90 -o /tmp/probe scripts/gpu_probe/sysmem_stores.cu && /tmp/probe
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <sys/mman.h>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ void fence_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }
__device__ __forceinline__ void fence_rel_sys() { asm volatile("fence.release.sys;" ::: "memory"); }
__device__ __forceinline__ void st_cs16(uint64_t *p, uint64_t a, uint64_t b) { asm volatile("st.global.cs.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory"); }
__device__ __forceinline__ void st_wb16(uint64_t *p, uint64_t a, uint64_t b) { asm volatile("st.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory"); }
__device__ __forceinline__ void st_v4x32(uint64_t *p, uint64_t a, uint64_t b) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"((uint32_t)a), "r"((uint32_t)(a >> 32)), "r"((uint32_t)b), "r"((uint32_t)(b >> 32)) : "memory");
}
__device__ __forceinline__ void st_mmio(uint64_t *p, uint64_t v) { asm volatile("st.mmio.relaxed.sys.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory"); }

constexpr int N = 4096, RING = 1024;
const char *names[] = {
    "0 4 x st.global.cs.v2.u64 (marrow's WQE stores)",
    "1 4 x st.global.v2.u64 (default caching)",
    "2 4 x st.global.v4.u32",
    "3 8 x 8-byte volatile stores",
    "4 1 x 64-byte TMA bulk store from shared memory (no wait)",
    "5 4 x st.global.cs.v2.u64 into GPU memory",
    "6 the same 4 stores + fence.acq_rel.sys",
    "7 fence.acq_rel.sys alone",
    "8 1 x 8-byte volatile store",
    "9 the floor: 4 stores, fence, dbrec, fence, doorbell (st.mmio)",
    "10 TMA 64 B + wait_group 0 + fence, dbrec, fence, doorbell",
    "11 4 lanes x 16 B, each fences, syncwarp, lane 0 dbrec, fence, doorbell",
    "12 4 stores, dbrec, one fence, doorbell",
    "13 fence.release.sys alone",
    "14 the floor with fence.release.sys for both fences",
    "15 4 stores, st.release.sys dbrec, st.release.sys doorbell",
    "16 fence.acquire.sys alone",
    "17 fence.sc.sys alone",
    "18 the floor with fence.release.gpu for both fences (not enough for host memory; for scale)",
    "19 __match_any_sync(__activemask(), 64-bit key), one lane",
    "20 ten 64-bit __shfl_sync, one lane",
    "21 __syncwarp + __any_sync, one lane",
    "22 three 8-byte stores to GPU memory (the GCRB mirrors)",
};
constexpr int MODES = 23;

__global__ void probe(uint8_t *host, uint8_t *gpu, uint32_t *dbrec, uint64_t *db, int mode, uint64_t *ns) {
    __shared__ __align__(128) uint64_t smem[8][8];
    uint32_t lane = threadIdx.x;
    uint64_t t0 = now();
    for (int i = 0; i < N; i++) {
        uint64_t *w = (uint64_t *)((mode == 5 ? gpu : host) + (i % RING) * 64);
        uint64_t v = i;
        switch (mode) {
        case 0: case 5: case 6: case 9: case 12:
            if (lane == 0) for (int k = 0; k < 8; k += 2) st_cs16(w + k, v + k, v + k + 1);
            if (mode == 6) fence_sys();
            if (mode == 9) { fence_sys(); *(volatile uint32_t *)dbrec = i; fence_sys(); st_mmio(db, v); }
            if (mode == 12) { *(volatile uint32_t *)dbrec = i; fence_sys(); st_mmio(db, v); }
            break;
        case 1: if (lane == 0) for (int k = 0; k < 8; k += 2) st_wb16(w + k, v + k, v + k + 1); break;
        case 2: if (lane == 0) for (int k = 0; k < 8; k += 2) st_v4x32(w + k, v + k, v + k + 1); break;
        case 3: if (lane == 0) for (int k = 0; k < 8; k++) ((volatile uint64_t *)w)[k] = v + k; break;
        case 4: case 10: {
            if (lane == 0) {
                uint64_t *s = smem[i % 8];
                // The slot's previous bulk store must have read it.
                asm volatile("cp.async.bulk.wait_group.read 7;" ::: "memory");
                for (int k = 0; k < 8; k++) s[k] = v + k;
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                uint32_t sa = (uint32_t)__cvta_generic_to_shared(s);
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], 64;" ::"l"(w), "r"(sa) : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
                if (mode == 10) {
                    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
                    fence_sys(); *(volatile uint32_t *)dbrec = i; fence_sys(); st_mmio(db, v);
                }
            }
            break;
        }
        case 7: if (lane == 0) fence_sys(); break;
        case 13: if (lane == 0) fence_rel_sys(); break;
        case 14: case 15: case 18:
            if (lane == 0) {
                for (int k = 0; k < 8; k += 2) st_cs16(w + k, v + k, v + k + 1);
                if (mode == 14) { fence_rel_sys(); *(volatile uint32_t *)dbrec = i; fence_rel_sys(); st_mmio(db, v); }
                if (mode == 18) { asm volatile("fence.release.gpu;" ::: "memory"); *(volatile uint32_t *)dbrec = i; asm volatile("fence.release.gpu;" ::: "memory"); st_mmio(db, v); }
                if (mode == 15) {
                    asm volatile("st.release.sys.global.b32 [%0], %1;" ::"l"(dbrec), "r"((uint32_t)i) : "memory");
                    asm volatile("st.release.sys.global.b64 [%0], %1;" ::"l"(db), "l"(v) : "memory");
                }
            }
            break;
        case 19: if (lane == 0) { unsigned m = __match_any_sync(__activemask(), (unsigned long long)(uintptr_t)w + (v >> 40)); if (m == 7) ns[20] = m; } break;
        case 20: if (lane == 0) { uint64_t x = v; for (int k = 0; k < 10; k++) x = __shfl_sync(1u, x + k, 0); if (x == 7) ns[20] = x; } break;
        case 21: if (lane == 0) { __syncwarp(1u); if (__any_sync(1u, v == 7)) ns[21] = v; } break;
        case 22: if (lane == 0) { uint64_t *gg = (uint64_t *)gpu; *(volatile uint64_t *)gg = v; *(volatile uint64_t *)(gg + 1) = v; *(volatile uint64_t *)(gg + 2) = v; } break;
        case 16: if (lane == 0) asm volatile("fence.acquire.sys;" ::: "memory"); break;
        case 17: if (lane == 0) asm volatile("fence.sc.sys;" ::: "memory"); break;
        case 8: if (lane == 0) *(volatile uint64_t *)w = v; break;
        case 11:
            if (lane < 4) { st_cs16(w + 2 * lane, v, v + 1); fence_sys(); }
            __syncwarp(0xfu);
            if (lane == 0) { *(volatile uint32_t *)dbrec = i; fence_sys(); st_mmio(db, v); }
            __syncwarp(0xfu);
            break;
        }
    }
    if (mode == 4 && lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    if (lane == 0) ns[mode] = (now() - t0) / N;
}

int main() {
    size_t len = RING * 64 + 4096;
    uint8_t *h = (uint8_t *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CK(cudaHostRegister(h, len, cudaHostRegisterMapped));
    uint8_t *hd;
    CK(cudaHostGetDevicePointer((void **)&hd, h, 0));
    uint8_t *g;
    uint64_t *ns;
    CK(cudaMalloc(&g, RING * 64));
    CK(cudaMallocManaged(&ns, MODES * 8));
    uint32_t *dbrec = (uint32_t *)(hd + RING * 64);
    uint64_t *db = (uint64_t *)(hd + RING * 64 + 64);
    uint64_t best[MODES];
    for (int m = 0; m < MODES; m++) best[m] = ~0ull;
    for (int rep = 0; rep < 5; rep++)
        for (int m = 0; m < MODES; m++) {
            probe<<<1, m == 11 ? 4 : 1>>>(h == nullptr ? nullptr : hd, g, dbrec, db, m, ns);
            CK(cudaDeviceSynchronize());
            if (ns[m] < best[m]) best[m] = ns[m];
        }
    for (int m = 0; m < MODES; m++) printf("%5llu ns per WQE  %s\n", (unsigned long long)best[m], names[m]);
    return 0;
}
