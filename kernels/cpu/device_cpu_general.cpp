// The device code's general path for the CPU: marrow/device.h compiled with
// MARROW_FAST_PATH=0 (channel.h), so that a test can hold the fast path,
// which device_cpu.cpp compiles, to it: the same posts through both must
// leave the same WQE bytes, doorbell record and heads
// (crates/transport/tests/cpu_device.rs). Only functions with internal
// linkage (MARROW_FN) differ between the two translation units.
#define MARROW_FAST_PATH 0
#include "marrow/device.h"
#include "put_burst.h"

extern "C" {

int marrow_cpu_general_put_burst(uint8_t *page, uint32_t pe, uint64_t base, uint32_t len, uint32_t count,
                                 uint32_t blocking_every) {
    return put_burst_on(page, pe, base, len, count, blocking_every);
}
}
