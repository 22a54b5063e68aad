// The minimal NIC of the latency probes (device_put.cu, staggered_poll.cu):
// host memory laid out as one send queue, its doorbell record and doorbell,
// a CQ and a ping word; a pinned CPU thread that completes each WQE a
// doorbell announces with a requester CQE, or answers pings in the CQ's
// slots (floor mode). Nothing else: no key checks, no copy. What a put
// takes beyond it is the softnic's.
#pragma once
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
#include <cuda_runtime.h>
#include "marrow/device.h"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr uint32_t ITERS = 2000, SQ = 1024, NCQE = 4096, QPN = 0x100;
// Host memory: the SQ, the record page, the doorbell page, the CQ, the ping page.
constexpr size_t OFF_REC = SQ * 64, OFF_DB = OFF_REC + 4096, OFF_CQ = OFF_DB + 4096, OFF_PING = OFF_CQ + NCQE * 64,
                 LEN = OFF_PING + 4096;

__device__ __forceinline__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }

// The doorbell marrow rings (NVSHMEM's ibgda_ring_db): BE32(pi << 8), BE32(qpn << 8).
__host__ __device__ inline uint32_t bswap(uint32_t v) {
    return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}
__device__ inline uint64_t doorbell(uint32_t end) { return (uint64_t)bswap((end & 0xffffu) << 8) | ((uint64_t)bswap(QPN << 8) << 32); }

// WQE `idx` posted in DOCA's order, bare: its 4 x 16 B stores, fence,
// doorbell, record, fence, doorbell (the record and the second doorbell
// for a NIC that reads the record). Its CQE is the idx-th of the CQ. With
// `ns`, ns[0] gets the time to the end of the first fence, ns[1] from there
// to the end of the second doorbell (globaltimer).
__device__ inline void bare_post(uint8_t *host, uint64_t idx, uint64_t *ns = nullptr) {
    uint64_t t0 = ns ? now() : 0;
    uint64_t *w = (uint64_t *)(host + (idx % SQ) * 64);
    for (int k = 0; k < 8; k += 2) marrow::store_wqe16(w + k, idx, idx);
    marrow::fence_sys();
    uint64_t t1 = ns ? now() : 0;
    uint64_t db = doorbell((uint32_t)idx + 1);
    marrow::mmio_store64((uint64_t *)(host + OFF_DB), db);
    marrow::store_device_u32((uint32_t *)(host + OFF_REC) + 1, bswap((uint32_t)idx + 1));
    marrow::fence_sys();
    marrow::mmio_store64((uint64_t *)(host + OFF_DB), db);
    if (ns) {
        ns[0] = t1 - t0;
        ns[1] = now() - t1;
    }
}

// The minimal NIC: executes (reads) every WQE the doorbell announces and
// completes each with a CQE; the floor's pings are answered in the CQ too.
struct Nic {
    uint8_t *host = nullptr;
    std::atomic<bool> stop{false};
    std::atomic<long> delay_ns{0};
    std::atomic<uint64_t> ci{0};  // next WQE to execute (= next CQE)
    std::atomic<bool> floor{false};
    std::thread thread;
    // Answer in `h` (map_host's memory) from a thread pinned to `cpu`.
    void start(uint8_t *h, int cpu) {
        host = h;
        reset();
        thread = std::thread([this, cpu] { run(cpu); });
    }
    void finish() {
        stop = true;
        thread.join();
    }
    // A fresh CQ and queue for each run: every slot invalid, heads at zero.
    void reset() {
        memset(host, 0, LEN);
        for (uint32_t k = 0; k < NCQE; k++) host[OFF_CQ + k * 64 + 63] = MARROW_MLX5_CQE_INVALID << 4 | 1;
        ci = 0;
    }
    void run(int cpu) {
        cpu_set_t s;
        CPU_ZERO(&s);
        CPU_SET(cpu, &s);
        pthread_setaffinity_np(pthread_self(), sizeof s, &s);
        volatile uint64_t *db = (volatile uint64_t *)(host + OFF_DB);
        volatile uint64_t *ping = (volatile uint64_t *)(host + OFF_PING);
        uint64_t last_ping = 0;
        while (!stop.load(std::memory_order_relaxed)) {
            if (floor.load(std::memory_order_relaxed)) {
                uint64_t v = *ping;
                if (v != last_ping) {
                    __atomic_store_n((uint64_t *)(host + OFF_CQ + (v % NCQE) * 64), v, __ATOMIC_RELEASE);
                    last_ping = v;
                }
                __builtin_ia32_pause();
                continue;
            }
            uint64_t d = *db;
            uint32_t end16 = bswap((uint32_t)d) >> 8;
            uint64_t c = ci.load(std::memory_order_relaxed);
            if (d != 0 && (uint16_t)(end16 - (uint16_t)c) != 0 && (uint16_t)(end16 - (uint16_t)c) <= SQ) {
                long dl = delay_ns.load(std::memory_order_relaxed);
                if (dl) {
                    auto t0 = std::chrono::steady_clock::now();
                    while (std::chrono::steady_clock::now() - t0 < std::chrono::nanoseconds(dl)) {
                    }
                }
                uint64_t end = c + (uint16_t)(end16 - (uint16_t)c);
                for (; c < end; c++) {
                    const volatile uint64_t *w = (const uint64_t *)(host + (c % SQ) * 64);
                    uint64_t x = w[0] ^ w[7];
                    uint8_t *cqe = host + OFF_CQ + (c % NCQE) * 64;
                    ((volatile uint64_t *)cqe)[0] = x;
                    // Bytes 56..63: ..., wqe_counter (BE16) at 60, signature 62, op_own 63.
                    uint8_t tail[8] = {0, 0, 0, 0, (uint8_t)(c >> 8), (uint8_t)c, 0,
                                       (uint8_t)((MARROW_MLX5_CQE_REQ << 4) | ((c / NCQE) & 1))};
                    uint64_t t;
                    memcpy(&t, tail, 8);
                    __atomic_store_n((uint64_t *)(cqe + 56), t, __ATOMIC_RELEASE);
                }
                ci.store(c, std::memory_order_relaxed);
            }
            __builtin_ia32_pause();
        }
    }
};

// The host memory above, mapped and registered with the GPU; `*dev` is its
// device address.
inline uint8_t *map_host(uint8_t **dev) {
    uint8_t *host = (uint8_t *)mmap(nullptr, LEN, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (host == MAP_FAILED) { perror("mmap"); exit(1); }
    CK(cudaHostRegister(host, LEN, cudaHostRegisterMapped));
    CK(cudaHostGetDevicePointer((void **)dev, host, 0));
    return host;
}
