// What device_put.cu and shared_put_parts.cu time alike against the
// minimal NIC (minimal_nic.cuh): the floor's ping-pong, marrow::put in a
// loop, and a channel's GCRB on the NIC's queues.
#pragma once
#include "marrow/device.h"
#include "minimal_nic.cuh"
#include "probe_gcrb.cuh"

// The floor: a plain ping in its own page, the pong walking the CQ's slots.
__global__ void floor_kernel(uint8_t *host, uint64_t base, uint64_t *ns, int *rc) {
    uint64_t t0 = now();
    for (uint64_t i = base + 1; i <= base + ITERS; i++) {
        *(volatile uint64_t *)(host + OFF_PING) = i;
        const uint64_t *slot = (const uint64_t *)(host + OFF_CQ + (i % NCQE) * 64);
        uint64_t start = now();
        while (marrow::load_device_u64(slot) != i)
            if (now() - start > 100000000ull) { *rc = 1; return; }
    }
    *ns = now() - t0;
    *rc = 0;
}

// ITERS blocking 8-byte puts on the channel at `page`.
__global__ void put_kernel(uint8_t *page, uint64_t *ns, int *rc) {
    marrow::Channel ch{page};
    uint64_t t0 = now();
    int r = marrow::OK;
    for (uint32_t i = 0; i < ITERS && r == marrow::OK; i++) r = marrow::put(ch, 1, 0, 0, 8);
    *ns = now() - t0;
    *rc = r;
}

// A fresh GCRB at `page` (device memory) for a channel on the NIC's queues
// in `dhost` (map_host's device address): early doorbells, a CQ that
// ignores overrun (the NIC never reads its record), shared or exclusive.
inline void nic_channel(uint8_t *page, bool exclusive, uint8_t *dhost, uint8_t *local) {
    static uint8_t img[MARROW_GCRB_PAGE_SIZE];
    uint32_t flags = 1u << MARROW_GCRB_CONFIG_EARLY_DOORBELL_SHIFT | 1u << MARROW_GCRB_CONFIG_CQ_OVERRUN_IGNORE_SHIFT |
                     (exclusive ? 1u << MARROW_GCRB_CONFIG_EXCLUSIVE_SHIFT : 0u);
    probe_gcrb(img, flags, dhost, SQ, dhost + OFF_REC, dhost + OFF_DB, local);
    marrow_gcrb_config *c = (marrow_gcrb_config *)(img + MARROW_GCRB_OFF_CONFIG);
    c->qpn = QPN;
    c->cq_base = (uint64_t)(dhost + OFF_CQ);
    c->cq_ncqe = NCQE;
    c->cq_dbrec_addr = (uint64_t)(dhost + OFF_REC + 64);
    CK(cudaMemcpy(page, img, sizeof img, cudaMemcpyHostToDevice));
}

// The probes' device buffers and the minimal NIC answering from a pinned
// CPU. A run: fresh(), launch a kernel with the buffers here, finish().
struct NicRig {
    uint8_t *host, *dhost, *page, *local;
    uint64_t *dns;
    int *drc;
    uint64_t floor_base = 0;
    Nic nic;
    explicit NicRig(int cpu) {
        host = map_host(&dhost);
        CK(cudaMalloc(&page, 4096 + MARROW_GCRB_TRACE_ENTRIES * 64));
        CK(cudaMalloc(&local, 1 << 20));
        CK(cudaMalloc(&dns, 8));
        CK(cudaMalloc(&drc, 4));
        nic.start(host, cpu);
    }
    // The NIC's queues fresh, answering pings (the floor) or doorbells.
    void fresh(bool floor) {
        nic.floor = floor;
        nic.reset();
    }
    // The floor's kernel, each run on pings it has not used.
    void launch_floor() {
        floor_kernel<<<1, 1>>>(dhost, floor_base, dns, drc);
        floor_base += ITERS;
    }
    // A channel at `page` on the NIC's queues (nic_channel).
    void channel(bool exclusive) { nic_channel(page, exclusive, dhost, local); }
    // The run's ns per round trip; a failed run ends the probe, naming `mode`.
    double finish(int mode) {
        CK(cudaDeviceSynchronize());
        uint64_t ns;
        int rc;
        CK(cudaMemcpy(&ns, dns, 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(&rc, drc, 4, cudaMemcpyDeviceToHost));
        if (rc) { printf("mode %d failed: %d\n", mode, rc); exit(1); }
        return (double)ns / ITERS;
    }
};
