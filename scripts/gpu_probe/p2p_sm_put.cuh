// The SM-driven put kernel the P2P probes share: each block copies one
// contiguous slice of the message, `reps` times, with INFLIGHT 16-byte
// loads in flight per thread, in the load (LD) and store (ST) flavour asked.
// Included by p2p_stores.cu and p2p_relay.cu.
#pragma once
#include <cstdint>

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
