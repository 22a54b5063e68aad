// Probe: where a shared channel's blocking 8-byte put spends what an
// exclusive channel's does not. A lone thread posts and waits on a shared
// channel in straight-line code built from marrow's own pieces
// (post_shared_solo's fast path, ring_untraced, wait_shared and poll_cq's
// fast first CQE), against device_put.cu's minimal NIC on a pinned CPU
// thread. Each variant leaves out or changes one part (bits, combined):
//   1 NORESV   the WQEBB index from a register: no status and cons_idx
//              loads, no atomic add on resv_head (a lone thread only);
//   2 SYSFENCE the fence before the second doorbell at system scope, as
//              an exclusive channel's (which holds the first CQE read back);
//   4 NOLOOK   no acquire load of cons_idx before the poll lock;
//   8 NOLOCK   no poll lock: cons and ci in registers, as an exclusive
//              owner's (no atomic on poll_state, no cq_ci load; cons_idx
//              stored relaxed for the reservation's room test);
//  16 NOPUB    cons_idx stored without publish_cons's release fence;
//  32 NOHAND   no store of ready_head after the ring.
// Several variants are unsafe with more than one poster; here one thread
// posts, and each is timing evidence only. Variant 0 is the shared put
// itself: it should read as `marrow::put, shared` does. Also printed, for
// reference: the floor, and marrow::put on both kinds of channel.
// Not part of marrow: evidence for docs/PERFORMANCE.md. Build and run on
// the device machine:
//   nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels/include -o /tmp/spp scripts/gpu_probe/shared_put_parts.cu -lpthread && /tmp/spp [cpu]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>
#include "marrow/device.h"
#include "nic_put.cuh"

enum : int { NORESV = 1, SYSFENCE = 2, NOLOOK = 4, NOLOCK = 8, NOPUB = 16, NOHAND = 32 };

__global__ void parts_kernel(uint8_t *page, int v, uint64_t *ns, int *rc) {
    using namespace marrow;
    Channel ch{page};
    marrow_gcrb_heads *h = ch.heads();
    Op op;
    int r = rw_op(ch, MARROW_MLX5_OPCODE_RDMA_WRITE, 1, 0, 0, 8, &op);
    uint64_t next = 0, reg_cons = 0, reg_ci = 0;
    uint64_t t0 = now();
    for (uint32_t i = 0; i < ITERS && r == OK; i++) {
        uint64_t idx;
        if (v & NORESV) {
            idx = next++;
        } else {
            Reserved rs = reserve_issue(ch, 1);
            idx = rs.idx;
            if (rs.status != MARROW_GCRB_STATUS_OK || !reserved_has_room(ch, rs, 1)) {
                r = -1000;
                break;
            }
        }
        uint64_t end = idx + 1, ctrl = write_wqe_untraced(ch, idx, op);
        to_device();
        /* ring_untraced's early ring: a shared channel fences the second
         * doorbell at GPU scope, an exclusive one at system scope. */
        ch.excl = (v & SYSFENCE) != 0;
        ring_untraced(ch, end, ctrl, true);
        ch.excl = false;
        if (!(v & NOHAND)) hand_on_rung(ch, end);
        if (v & NOLOCK) {
            if (fast_first(ch, load_device_u32(cqe_tail(ch.cfg(), reg_ci)), reg_cons, reg_ci, 0, MARROW_GCRB_WAIT_CQ) !=
                FirstCqe::TAKEN)
                r = -1001;
            /* The reservation's room test reads cons_idx. */
            if (!(v & NORESV)) store_relaxed(&h->cons_idx, reg_cons);
            continue;
        }
        if (!(v & NOLOOK) && load_acquire(&h->cons_idx) >= end) {
            r = -1002; /* a lone poster's CQE is never consumed by anyone else */
            break;
        }
        uint64_t w = atomic_or_acquire(&h->poll_state, POLL_HELD);
        if (w & POLL_HELD) {
            r = -1003;
            break;
        }
        uint64_t ci = (w >> MARROW_GCRB_HEADS_CI_SHIFT) & MARROW_GCRB_HEADS_CI_MASK;
        uint32_t first = load_device_u32(cqe_tail(ch.cfg(), ci));
        uint64_t cons = widen_cons(end, w);
        uint64_t host_ci = load_relaxed(&h->cq_ci);
        if (fast_first(ch, first, cons, ci, 0, MARROW_GCRB_WAIT_CQ) != FirstCqe::TAKEN) {
            r = -1004;
            break;
        }
        if (v & NOPUB) {
            store_relaxed(&h->cons_idx, cons);
        } else {
            publish_cons(h, cons);
        }
        store_relaxed(&h->cq_ci, host_ci + 1);
        store_relaxed(&h->poll_state, poll_state(cons, ci));
    }
    *ns = now() - t0;
    *rc = r;
}

int main(int argc, char **argv) {
    int cpu = argc > 1 ? atoi(argv[1]) : 2;
    NicRig R(cpu);
    /* Modes: -3 the floor, -2 marrow::put exclusive, -1 marrow::put shared,
     * v >= 0 parts_kernel's variant v. */
    auto run = [&](int mode) -> double {
        R.fresh(mode == -3);
        if (mode == -3) {
            R.launch_floor();
        } else {
            R.channel(mode == -2);
            if (mode >= 0)
                parts_kernel<<<1, 1>>>(R.page, mode, R.dns, R.drc);
            else
                put_kernel<<<1, 1>>>(R.page, R.dns, R.drc);
        }
        return R.finish(mode);
    };
    const std::vector<int> modes = {-3,
                                    -2,
                                    -1,
                                    0,
                                    NORESV,
                                    SYSFENCE,
                                    NOLOOK,
                                    NOLOCK,
                                    NOPUB,
                                    NOHAND,
                                    NOLOOK | NOPUB,
                                    SYSFENCE | NOLOOK,
                                    SYSFENCE | NOLOCK,
                                    NORESV | NOLOOK | NOPUB,
                                    NORESV | SYSFENCE | NOLOCK | NOHAND};
    const int passes = 7;
    for (int m : modes) run(m);
    printf("minimal NIC on CPU %d; %u round trips per figure; ns per round trip, %d passes over the modes\n", cpu, ITERS,
           passes);
    std::vector<std::vector<double>> t(modes.size());
    for (int pass = 0; pass < passes; pass++)
        for (size_t k = 0; k < modes.size(); k++) t[k].push_back(run(modes[k]));
    const char *bits[] = {"NORESV", "SYSFENCE", "NOLOOK", "NOLOCK", "NOPUB", "NOHAND"};
    for (size_t k = 0; k < modes.size(); k++) {
        int m = modes[k];
        char name[96] = "";
        if (m == -3) snprintf(name, sizeof name, "floor (walking pong)");
        if (m == -2) snprintf(name, sizeof name, "marrow::put, exclusive");
        if (m == -1) snprintf(name, sizeof name, "marrow::put, shared");
        if (m == 0) snprintf(name, sizeof name, "parts: all (the shared put)");
        if (m > 0) {
            snprintf(name, sizeof name, "parts:");
            for (int b = 0; b < 6; b++)
                if (m & (1 << b)) snprintf(name + strlen(name), sizeof name - strlen(name), " %s", bits[b]);
        }
        std::sort(t[k].begin(), t[k].end());
        printf("%-44s min %6.0f  median %6.0f  max %6.0f\n", name, t[k][0], t[k][passes / 2], t[k][passes - 1]);
    }
    R.nic.finish();
    return 0;
}
