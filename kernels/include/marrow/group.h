/*
 * marrow device code: posting groups, the lanes of a warp that post
 * together on one channel and elect a leader (cooperative_groups'
 * coalesced_threads() pattern, with __match_any_sync on the channel). On
 * the CPU each thread is a group of one.
 */
#ifndef MARROW_GROUP_H
#define MARROW_GROUP_H

#include "marrow/platform.h"

namespace marrow {

/* The threads that post together. On the GPU: the lanes of a warp that are
 * active here and name the same key (the channel), found with
 * __match_any_sync as cooperative_groups::coalesced_threads() does. On the
 * CPU: the calling thread alone. */
/* Every lane of a warp, as a lane mask. */
constexpr uint32_t WHOLE_WARP = ~0u;

struct Group {
#if MARROW_GPU
    unsigned mask;
    uint32_t rank, size, leader_lane, last_lane;
    /* A lane alone skips every warp instruction: each costs tens of
     * nanoseconds even with one lane (scripts/gpu_probe/sysmem_stores.cu). */
    MARROW_MEMBER bool solo() const { return size == 1; }
    MARROW_MEMBER bool leader() const { return rank == 0; }
    MARROW_MEMBER int from_leader32(int v) const { return solo() ? v : __shfl_sync(mask, v, leader_lane); }
    MARROW_MEMBER uint64_t from_leader64(uint64_t v) const {
        return solo() ? v : __shfl_sync(mask, (unsigned long long)v, leader_lane);
    }
    MARROW_MEMBER uint64_t from_last64(uint64_t v) const { return solo() ? v : __shfl_sync(mask, (unsigned long long)v, last_lane); }
    MARROW_MEMBER bool any(bool p) const { return solo() ? p : __any_sync(mask, p) != 0; }
    MARROW_MEMBER uint32_t or32(uint32_t v) const { return solo() ? v : __reduce_or_sync(mask, v); }
    MARROW_MEMBER bool whole_warp() const { return mask == WHOLE_WARP; }
    /* Every lane of the group is active here (others may be too). */
    MARROW_MEMBER bool all_here() const { return (__activemask() & mask) == mask; }
    /* Memory ordering among the group: the leader acts after everyone's stores and fences. */
    MARROW_MEMBER void sync() const {
        if (!solo()) __syncwarp(mask);
    }
#else
    uint32_t rank = 0, size = 1;
    MARROW_MEMBER bool solo() const { return true; }
    MARROW_MEMBER bool leader() const { return true; }
    MARROW_MEMBER int from_leader32(int v) const { return v; }
    MARROW_MEMBER uint64_t from_leader64(uint64_t v) const { return v; }
    MARROW_MEMBER uint64_t from_last64(uint64_t v) const { return v; }
    MARROW_MEMBER bool any(bool p) const { return p; }
    MARROW_MEMBER uint32_t or32(uint32_t v) const { return v; }
    MARROW_MEMBER bool whole_warp() const { return false; }
    MARROW_MEMBER bool all_here() const { return true; }
    MARROW_MEMBER void sync() const {}
#endif
};

#if MARROW_GPU
MARROW_FN unsigned lane_id() {
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

/* The group of lanes `mask`, as seen from `lane` (one of them). */
MARROW_FN Group group_of_mask(unsigned mask, unsigned lane) {
    Group g;
    g.mask = mask;
    g.rank = __popc(mask & ((1u << lane) - 1u));
    g.size = __popc(mask);
    g.leader_lane = __ffs(mask) - 1;
    g.last_lane = 31 - __clz(mask);
    return g;
}
#endif

MARROW_FN Group group_of(const void *key) {
#if MARROW_GPU
    unsigned lane = lane_id();
    unsigned active = __activemask();
    /* Alone in the warp: no match needed. */
    unsigned mask = active == (1u << lane) ? active : __match_any_sync(active, (unsigned long long)key);
    return group_of_mask(mask, lane);
#else
    (void)key;
    return Group{};
#endif
}

} /* namespace marrow */

#endif /* MARROW_GROUP_H */
