// One Channel object's burst of puts, then quiet, as a GPU thread's loop
// posts them: for the CPU entry points of device_cpu.cpp and
// device_cpu_general.cpp, each of which includes marrow/device.h first.
#ifndef MARROW_CPU_PUT_BURST_H
#define MARROW_CPU_PUT_BURST_H

/* `count` puts of `len` bytes from one Channel object, slot i at offset
 * base + i * len of both windows, every `blocking_every`-th blocking (0: none),
 * then quiet: an exclusive channel's heads stay in that object's registers
 * throughout, as in a GPU thread's loop. The first error, or OK. */
static int put_burst_on(uint8_t *page, uint32_t pe, uint64_t base, uint32_t len, uint32_t count, uint32_t blocking_every) {
    marrow::Channel ch{page};
    for (uint32_t i = 0; i < count; i++) {
        uint64_t off = base + (uint64_t)i * len;
        bool blocking = blocking_every && (i + 1) % blocking_every == 0;
        int rc = blocking ? marrow::put(ch, pe, off, off, len) : marrow::put_nbi(ch, pe, off, off, len);
        if (rc != marrow::OK) return rc;
    }
    return marrow::quiet(ch);
}

#endif /* MARROW_CPU_PUT_BURST_H */
