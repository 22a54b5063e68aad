// GPU kernels over the device API (marrow/device.h): correctness and
// benchmark drivers the host launches (crates/transport). Compiled at run
// time with the machine's NVRTC for sm_90, and in CI by scripts/nvrtc_check.py.
#include "marrow/device.h"

using marrow::Channel;

// Every thread puts `iters` messages of `len` bytes from its slots of the
// local window to the same slots of PE `pe` (whole warps together with
// `warp`, put_nbi_warp); the first error, or OK.
__device__ __forceinline__ int marrow_put_slots(const Channel &ch, uint32_t pe, uint32_t len, uint32_t iters, bool warp) {
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    int r = marrow::OK;
    for (uint32_t i = 0; i < iters && r == marrow::OK; i++) {
        uint64_t off = ((uint64_t)tid * iters + i) * len;
        r = warp ? marrow::put_nbi_warp(ch, pe, off, off, len) : marrow::put_nbi(ch, pe, off, off, len);
    }
    return r;
}

// marrow_put_slots, then a wait for all of them. rc[tid] gets 0 or the
// device error code.
extern "C" __global__ void marrow_put_kernel(uint8_t *page, uint32_t pe, uint32_t len, uint32_t iters, int *rc) {
    Channel ch{page};
    int r = marrow_put_slots(ch, pe, len, iters, false);
    rc[blockIdx.x * blockDim.x + threadIdx.x] = r == marrow::OK ? marrow::quiet(ch) : r;
}

// The same with whole warps posting together (put_nbi_warp).
extern "C" __global__ void marrow_put_warp_kernel(uint8_t *page, uint32_t pe, uint32_t len, uint32_t iters, int *rc) {
    Channel ch{page};
    int r = marrow_put_slots(ch, pe, len, iters, true);
    rc[blockIdx.x * blockDim.x + threadIdx.x] = r == marrow::OK ? marrow::quiet(ch) : r;
}

// An exclusive channel's owner is fixed when the Channel is made: here a
// whole warp. Lane 0 alone then puts (refused: it would take the group's
// next slot for itself), then the warp puts its 8-byte slots together.
// rc[lane] = the warp's put and quiet; rc[32] = lane 0's lone put.
extern "C" __global__ void marrow_lone_lane_kernel(uint8_t *page, uint32_t pe, int *rc) {
    Channel ch{page};
    uint32_t lane = threadIdx.x % 32;
    if (lane == 0) rc[32] = marrow::put_nbi(ch, pe, 0, 0, 8);
    __syncwarp();
    uint64_t off = (uint64_t)lane * 8;
    int r = marrow::put_nbi(ch, pe, off, off, 8);
    rc[lane] = r == marrow::OK ? marrow::quiet(ch) : r;
}

// Every thread gets its slots of PE `pe` into the local window.
extern "C" __global__ void marrow_get_kernel(uint8_t *page, uint32_t pe, uint32_t len, uint32_t iters, int *rc) {
    Channel ch{page};
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    int r = marrow::OK;
    for (uint32_t i = 0; i < iters && r == marrow::OK; i++) {
        uint64_t off = ((uint64_t)tid * iters + i) * len;
        r = marrow::get(ch, pe, off, off, len);
    }
    rc[tid] = r;
}

// Every thread adds 1 to PE `pe`'s counter at `roff` `iters` times; the
// fetched values go to olds[tid * iters + i].
extern "C" __global__ void marrow_fetch_add_kernel(uint8_t *page, uint32_t pe, uint64_t roff, uint32_t iters,
                                                   uint64_t result_base, uint64_t *olds, int *rc) {
    Channel ch{page};
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    int r = marrow::OK;
    for (uint32_t i = 0; i < iters && r == marrow::OK; i++) {
        uint64_t old = 0;
        r = marrow::atomic_fetch_add(ch, pe, roff, 1, result_base + (uint64_t)tid * 8, &old);
        olds[(uint64_t)tid * iters + i] = old;
    }
    rc[tid] = r;
}

// One thread: compare-and-swap, expecting `compare`.
extern "C" __global__ void marrow_compare_swap_kernel(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t compare,
                                                      uint64_t swap, uint64_t result_loff, uint64_t *old, int *rc) {
    Channel ch{page};
    *rc = marrow::atomic_compare_swap(ch, pe, roff, compare, swap, result_loff, old);
}

// Latency: one thread does `iters` blocking 8-byte puts; ns[0] = ns total,
// each[i] = put i's ns (a mean hides a put that lost a whole read round
// trip of host memory behind ones that did not).
extern "C" __global__ void marrow_put_latency_kernel(uint8_t *page, uint32_t pe, uint32_t iters, uint64_t *ns, uint64_t *each,
                                                     int *rc) {
    Channel ch{page};
    uint64_t t0 = marrow::now_ns(), t = t0;
    int r = marrow::OK;
    for (uint32_t i = 0; i < iters && r == marrow::OK; i++) {
        r = marrow::put(ch, pe, 0, 0, 8);
        uint64_t t1 = marrow::now_ns();
        each[i] = t1 - t;
        t = t1;
    }
    *ns = t - t0;
    *rc = r;
}

// The floor for put latency: a ping-pong with a CPU thread through the same
// host memory. The GPU writes i to *ping, the CPU answers i in the pong
// ring's slot (first + i) % walk (64-byte slots from `pong`), as a CQ's slots walk:
// how long a GPU read of host memory takes depends on the page, so a floor
// on one line is one page's draw, while the put's CQEs cover dozens of
// pages. With `lean`, plain system-scope stores and relaxed loads (no
// release/acquire fences): the fastest round trip the memory allows.
// ns[0] = ns total, each[i] = round trip i's ns.
extern "C" __global__ void marrow_pingpong_kernel(uint64_t *ping, uint64_t *pong, uint32_t walk, uint32_t first, uint32_t iters,
                                                  uint64_t timeout_ns, uint32_t lean, uint64_t *ns, uint64_t *each, int *rc) {
    uint64_t t0 = marrow::now_ns(), t = t0;
    for (uint32_t i = 1; i <= iters; i++) {
        if (lean) {
            *(volatile uint64_t *)ping = i;
        } else {
            marrow::store_release_sys(ping, i);
        }
        const uint64_t *slot = pong + (uint64_t)((first + (uint64_t)i) % walk) * 8;
        uint64_t start = marrow::now_ns();
        while ((lean ? marrow::load_device_u64(slot) : marrow::load_acquire_sys(slot)) != i) {
            if (marrow::now_ns() - start > timeout_ns) {
                *rc = marrow::E_TIMEOUT;
                return;
            }
        }
        uint64_t t1 = marrow::now_ns();
        each[i - 1] = t1 - t;
        t = t1;
    }
    *ns = t - t0;
    *rc = marrow::OK;
}

// The span of a timed loop over all threads: span[0] = earliest start,
// span[1] = latest end (GPU clock); the host zeroes span[1] and sets span[0] = ~0.
__device__ __forceinline__ void marrow_span(uint64_t *span, uint64_t t0, uint64_t t1) {
    atomicMin((unsigned long long *)&span[0], (unsigned long long)t0);
    atomicMax((unsigned long long *)&span[1], (unsigned long long)t1);
}

// Posting rate: every thread posts `iters` 8-byte put_nbi (or, with `warp`,
// put_nbi_warp); span covers the posting only, then quiet waits for all.
// The send queue must hold every put of the launch, so that posting never
// waits for the engine: this measures the device code, not the softnic.
// With `npages` channels, warp w posts on channel w % npages (NVSHMEM
// likewise gives warps or CTAs QPs of their own).
extern "C" __global__ void marrow_post_rate_kernel(const uint64_t *pages, uint32_t npages, uint32_t pe, uint32_t iters,
                                                   uint32_t warp, uint64_t *span, int *rc) {
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    Channel ch{(uint8_t *)pages[(tid / 32) % npages]};
    uint64_t t0 = marrow::now_ns();
    int r = marrow_put_slots(ch, pe, 8, iters, warp != 0);
    marrow_span(span, t0, marrow::now_ns());
    if (r == marrow::OK) r = marrow::quiet(ch);
    rc[tid] = r;
}

// Posting rate floor: exactly the stores and fences of a post, without the
// protocol (no reservation, no ready chain, no CQ), the WQEs into `ring`
// (the bench passes the send queue the posts use): 64 B of WQE in 16-byte
// stores, the fence before the doorbell record,
// the 4-byte doorbell record, the fence before the doorbell, the 8-byte
// doorbell; the last four once per `ring_every` WQEs (lazy doorbells ring
// per 32). `db` is a scratch word, not a UAR the softnic watches. The WQEs
// start at slot `first`, so that runs walk the ring as posts do, each on
// pages the last one did not touch.
extern "C" __global__ void marrow_store_floor_kernel(uint8_t *ring, uint32_t wqebbs, uint32_t first, uint32_t *dbrec,
                                                     uint64_t *db, uint32_t iters, uint32_t ring_every, uint64_t *span) {
    uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    uint64_t t0 = marrow::now_ns();
    for (uint32_t i = 0; i < iters; i++) {
        uint64_t *w = (uint64_t *)(ring + ((first + tid * iters + i) % wqebbs) * 64);
        for (int k = 0; k < 8; k += 2) marrow::store_wqe16(w + k, i + k, i + k + 1);
        if ((i + 1) % ring_every && i + 1 < iters) continue;
        marrow::to_device();
        marrow::store_device_u32(dbrec, marrow::be32(i));
        marrow::wc_start();
        marrow::mmio_store64(db, i);
    }
    marrow_span(span, t0, marrow::now_ns());
}

// A stand-in for compute: `work` dependent multiply-adds on one thread.
__device__ __forceinline__ uint64_t marrow_busy(uint64_t x, uint32_t work) {
    for (uint32_t k = 0; k < work; k++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

// compute -> put -> compute, GPU-initiated: one kernel, `iters` rounds of
// compute then an 8-byte put of the result, posted without waiting (the
// point of GPU-initiated communication: compute goes on while the NIC
// works); one quiet at the end. Each round puts to its own slot. ns[0] =
// total, ns[1] = time in compute, ns[2] = time storing the result and
// posting (GPU clock; the rest is the final quiet).
extern "C" __global__ void marrow_compute_put_kernel(uint8_t *page, uint32_t pe, uint32_t iters, uint32_t work,
                                                     uint64_t *ns, int *rc) {
    Channel ch{page};
    uint64_t x = 1, t0 = marrow::now_ns(), in_compute = 0, in_put = 0;
    int r = marrow::OK;
    for (uint32_t i = 0; i < iters && r == marrow::OK; i++) {
        uint64_t a = marrow::now_ns();
        x = marrow_busy(x, work);
        // (x & 0): the clock is read once the result exists.
        uint64_t b = marrow::now_ns() + (x & 0);
        uint64_t off = (uint64_t)(i % 1024) * 8;
        *(uint64_t *)(ch.cfg()->local_base + off) = x;
        r = marrow::put_nbi(ch, pe, off, off, 8);
        uint64_t c = marrow::now_ns();
        in_compute += b - a;
        in_put += c - b;
    }
    if (r == marrow::OK) r = marrow::quiet(ch);
    ns[0] = marrow::now_ns() - t0;
    ns[1] = in_compute;
    ns[2] = in_put;
    *rc = r;
}

// The compute alone, for the CPU-initiated loop (one launch per round); the
// result goes to host memory, where the host's put takes it from.
extern "C" __global__ void marrow_compute_kernel(uint32_t work, uint64_t *out) { *out = marrow_busy((uint64_t)work | 1, work); }

// Where a single thread's post goes over the floor: the floor's stores and
// fences plus one protocol step at a time (cumulative by `mode`):
//   0 floor; 1 + atomic add on a GPU-memory head (index used by the stores);
//   2 + the ready chain: acquire-load a second head until it is ours, store
//   it relaxed after the doorbell; 3 that store a release; 4 + two relaxed
//   snapshot loads; 5 the release store before the doorbell record instead.
// `heads` is GPU memory. ns[mode] = ns per iteration, ~0 if a wait outlived
// `timeout_ns` (it cannot, single-threaded; no wait here is unbounded).
extern "C" __global__ void marrow_post_profile_kernel(uint8_t *ring, uint32_t wqebbs, uint32_t *dbrec, uint64_t *db,
                                                      uint64_t *heads, uint32_t iters, uint64_t timeout_ns, uint64_t *ns) {
    for (uint32_t mode = 0; mode < 6; mode++) {
        heads[0] = heads[1] = heads[2] = 0;
        __threadfence();
        uint64_t t0 = marrow::now_ns();
        for (uint32_t i = 0; i < iters; i++) {
            uint64_t idx = i, snap = 0;
            if (mode >= 4) snap = marrow::load_relaxed(&heads[2]) + marrow::load_relaxed(&heads[0]);
            if (mode >= 1) idx = marrow::atomic_add(&heads[0], 1);
            uint64_t *w = (uint64_t *)(ring + (idx % wqebbs) * 64);
            for (int k = 0; k < 8; k += 2) marrow::store_wqe16(w + k, idx + k, idx + k + 1 + snap);
            marrow::to_device();
            if (mode >= 2) {
                while (marrow::load_acquire(&heads[1]) != idx) {
                    if (marrow::now_ns() - t0 > timeout_ns) {
                        ns[mode] = ~0ull;
                        return;
                    }
                }
            }
            if (mode == 5) marrow::store_release(&heads[1], idx + 1);
            marrow::store_device_u32(dbrec, marrow::be32((uint32_t)idx));
            marrow::wc_start();
            marrow::mmio_store64(db, idx);
            if (mode == 2) marrow::store_relaxed(&heads[1], idx + 1);
            if (mode == 3 || mode == 4) marrow::store_release(&heads[1], idx + 1);
        }
        ns[mode] = (marrow::now_ns() - t0) / iters;
    }
}

// ---------------------------------------------------------------- transport P2P

// One message of `len` bytes from local `loff` to PE `pe` at `roff`, moved
// by the whole grid `reps` times back to back (NVSHMEM's shmem_put_bw
// shape: puts without waiting, one quiet): each block puts its contiguous,
// 16-byte aligned slice with putmem_nbi_block (its TMA path with `tma`),
// then quiets once. rc[block] gets the result.
extern "C" __global__ void marrow_p2p_put_block_kernel(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t loff, uint64_t len,
                                                       uint32_t tma, uint32_t reps, int *rc) {
    Channel ch{page};
    uint64_t per = ((len + gridDim.x - 1) / gridDim.x + 15) & ~15ull;
    uint64_t start = per * blockIdx.x;
    uint64_t n = start >= len ? 0 : (len - start < per ? len - start : per);
    int r = marrow::OK;
    for (uint32_t k = 0; k < reps && r == marrow::OK && n; k++)
        r = marrow::putmem_nbi_block(ch, pe, roff + start, loff + start, n, tma != 0);
    // One quiet for the block: after the barrier, thread 0's system-scope
    // fence covers every store the block made (fences are cumulative).
    __syncthreads();
    if (threadIdx.x == 0) rc[blockIdx.x] = r == marrow::OK ? marrow::quiet(ch) : r;
}

// The byte a P2P check expects at offset i of a message seeded `seed`
// (the host fills sources with the same formula).
__device__ __forceinline__ uint8_t marrow_p2p_byte(uint64_t i, uint32_t seed) { return (uint8_t)(i * 7 + seed + (i >> 11)); } // layout-ok: a test pattern

// Wait (one block) until the local word at `sig_loff` reaches `value`, then
// check `len` bytes at `data_loff` against the seeded pattern: what
// put_signal promises is that the data is there once the signal is.
extern "C" __global__ void marrow_p2p_wait_check_kernel(uint8_t *page, uint64_t sig_loff, uint64_t value, uint64_t data_loff,
                                                        uint64_t len, uint32_t seed, unsigned long long *bad, int *rc) {
    Channel ch{page};
    __shared__ int r;
    if (threadIdx.x == 0) r = marrow::wait_until_ge(ch, sig_loff, value);
    __syncthreads();
    if (r == marrow::OK) {
        const volatile uint8_t *d = (const volatile uint8_t *)(ch.cfg()->local_base + data_loff);
        unsigned long long mine = 0;
        for (uint64_t i = threadIdx.x; i < len; i += blockDim.x) mine += d[i] != marrow_p2p_byte(i, seed);
        if (mine) atomicAdd(bad, mine);
    }
    if (threadIdx.x == 0) *rc = r;
}

// Round trips between rank 0 and rank 1 over the 8-byte slot at `slot` of
// each window: rank 0 puts i into rank 1's slot and waits for i in its own;
// rank 1 answers. With `floor`, the same through plain system-scope stores
// and loads on the mapped addresses, no API. ns = total on rank 0.
extern "C" __global__ void marrow_p2p_pingpong_kernel(uint8_t *page, uint32_t rank, uint64_t slot, uint64_t base,
                                                      uint32_t iters, uint32_t floor, uint64_t *ns, int *rc) {
    Channel ch{page};
    uint32_t peer = 1 - rank;
    uint64_t *mine = (uint64_t *)(ch.cfg()->local_base + slot);
    uint64_t *theirs = (uint64_t *)(ch.key(peer)->raddr + slot);
    uint64_t t0 = marrow::now_ns();
    int r = marrow::OK;
    for (uint64_t i = base + 1; i <= base + iters && r == marrow::OK; i++) {
        if (rank == 0) r = floor ? (marrow::store_device_u64(theirs, i), marrow::OK) : marrow::p(ch, peer, slot, i);
        if (r != marrow::OK) break;
        if (floor) {
            uint64_t start = marrow::now_ns();
            while (marrow::load_device_u64(mine) < i)
                if (marrow::now_ns() - start > ch.cfg()->timeout_ns) {
                    r = marrow::E_TIMEOUT;
                    break;
                }
        } else {
            r = marrow::wait_until_ge(ch, slot, i);
        }
        if (rank == 1 && r == marrow::OK) r = floor ? (marrow::store_device_u64(theirs, i), marrow::OK) : marrow::p(ch, peer, slot, i);
    }
    *ns = marrow::now_ns() - t0;
    *rc = r;
}

// One thread: get `len` bytes from PE `pe` at `roff` into local `loff`.
extern "C" __global__ void marrow_get_at_kernel(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len, int *rc) {
    Channel ch{page};
    *rc = marrow::get(ch, pe, roff, loff, len);
}

// One thread: put_signal of `len` bytes, then quiet.
extern "C" __global__ void marrow_put_signal_kernel(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len,
                                                    uint64_t sig_roff, uint64_t sig_add, uint64_t scratch_loff, int *rc) {
    Channel ch{page};
    int r = marrow::put_signal(ch, pe, roff, loff, len, sig_roff, sig_add, scratch_loff);
    *rc = r == marrow::OK ? marrow::quiet(ch) : r;
}
