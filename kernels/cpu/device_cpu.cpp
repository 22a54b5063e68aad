// The device API compiled for the CPU: C entry points over marrow/device.h
// so that CPU threads run the same posting and polling code as the GPU,
// against the softnic, in CI. Each takes the GCRB page's address.
#include "marrow/device.h"
#include "put_burst.h"

namespace marrow {
thread_local uint32_t cpu_thread_index = 0;
}

using marrow::Channel;

extern "C" {

void marrow_cpu_set_thread(uint32_t index) { marrow::cpu_thread_index = index; }

int marrow_cpu_check_config(uint8_t *page) { return marrow::check_config(Channel{page}); }

int marrow_cpu_put_nbi(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len) {
    return marrow::put_nbi(Channel{page}, pe, roff, loff, len);
}

int marrow_cpu_put(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len) {
    return marrow::put(Channel{page}, pe, roff, loff, len);
}

/* put_burst.h: a GPU thread's loop of puts, then quiet. */
int marrow_cpu_put_burst(uint8_t *page, uint32_t pe, uint64_t base, uint32_t len, uint32_t count, uint32_t blocking_every) {
    return put_burst_on(page, pe, base, len, count, blocking_every);
}

int marrow_cpu_get(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len) {
    return marrow::get(Channel{page}, pe, roff, loff, len);
}

int marrow_cpu_fetch_add(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t value, uint64_t result_loff, uint64_t *old) {
    return marrow::atomic_fetch_add(Channel{page}, pe, roff, value, result_loff, old);
}

int marrow_cpu_compare_swap(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t compare, uint64_t swap,
                            uint64_t result_loff, uint64_t *old) {
    return marrow::atomic_compare_swap(Channel{page}, pe, roff, compare, swap, result_loff, old);
}

int marrow_cpu_put_signal(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t loff, uint32_t len, uint64_t sig_roff,
                          uint64_t sig_add, uint64_t scratch_loff) {
    return marrow::put_signal(Channel{page}, pe, roff, loff, len, sig_roff, sig_add, scratch_loff);
}

int marrow_cpu_quiet(uint8_t *page) { return marrow::quiet(Channel{page}); }

int marrow_cpu_p(uint8_t *page, uint32_t pe, uint64_t roff, uint64_t value) { return marrow::p(Channel{page}, pe, roff, value); }

int marrow_cpu_wait_until_ge(uint8_t *page, uint64_t loff, uint64_t value) {
    return marrow::wait_until_ge(Channel{page}, loff, value);
}

void marrow_cpu_fence(uint8_t *page) { marrow::fence(Channel{page}); }

/* The holder's claim alone, for the claim test: the run of ready marks
 * from WQEBB `from`, cleared, as a holder of the chain claims it; returns
 * the run's end. */
uint64_t marrow_cpu_claim_run(uint8_t *page, uint64_t from) { return marrow::claim_run(Channel{page}, from); }

/* The encoder alone, for the differential test (tests/oracle): the WQE for
 * one operation written at index `idx`, then the doorbell record and the
 * doorbell for it, by the same write_wqe and ring every post uses, without
 * the reservation, the ready chain or any wait. */
void marrow_cpu_encode(uint8_t *page, uint64_t idx, uint8_t opcode, uint8_t opmod, uint64_t raddr, uint32_t rkey,
                       uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t swap_add, uint64_t compare,
                       uint8_t fm_ce_se, int signaled) {
    Channel ch{page};
    marrow::Op op{opcode, opmod, raddr, rkey, laddr, lkey, len, swap_add, compare, fm_ce_se};
    uint64_t ctrl = marrow::write_wqe(ch, idx, op, signaled != 0);
    /* As a blocking call rings: with flags.early_doorbell, early. */
    marrow::ring(ch, idx + 1, ctrl, true);
}
}
