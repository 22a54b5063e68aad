//! The device code run by CPU threads: FFI into `kernels/cpu/device_cpu.cpp`,
//! which compiles `marrow/device.h` for the CPU. The calls take the GCRB
//! page's address; the rings and buffers it names are shared memory the
//! softnic's engine serves.

use crate::DeviceError;
use crate::world::Channel;

unsafe extern "C" {
    fn marrow_cpu_set_thread(index: u32);
    fn marrow_cpu_check_config(page: *mut u8) -> i32;
    fn marrow_cpu_put_nbi(page: *mut u8, pe: u32, roff: u64, loff: u64, len: u32) -> i32;
    fn marrow_cpu_put(page: *mut u8, pe: u32, roff: u64, loff: u64, len: u32) -> i32;
    fn marrow_cpu_put_burst(page: *mut u8, pe: u32, base: u64, len: u32, count: u32, blocking_every: u32) -> i32;
    fn marrow_cpu_general_put_burst(
        page: *mut u8,
        pe: u32,
        base: u64,
        len: u32,
        count: u32,
        blocking_every: u32,
    ) -> i32;
    fn marrow_cpu_get(page: *mut u8, pe: u32, roff: u64, loff: u64, len: u32) -> i32;
    fn marrow_cpu_fetch_add(page: *mut u8, pe: u32, roff: u64, value: u64, result_loff: u64, old: *mut u64) -> i32;
    fn marrow_cpu_compare_swap(
        page: *mut u8,
        pe: u32,
        roff: u64,
        compare: u64,
        swap: u64,
        result_loff: u64,
        old: *mut u64,
    ) -> i32;
    fn marrow_cpu_put_signal(
        page: *mut u8,
        pe: u32,
        roff: u64,
        loff: u64,
        len: u32,
        sig_roff: u64,
        sig_add: u64,
        scratch_loff: u64,
    ) -> i32;
    fn marrow_cpu_quiet(page: *mut u8) -> i32;
    fn marrow_cpu_p(page: *mut u8, pe: u32, roff: u64, value: u64) -> i32;
    fn marrow_cpu_wait_until_ge(page: *mut u8, loff: u64, value: u64) -> i32;
    fn marrow_cpu_fence(page: *mut u8);
    fn marrow_cpu_claim_run(page: *mut u8, from: u64) -> u64;
    fn marrow_cpu_encode(
        page: *mut u8,
        idx: u64,
        opcode: u8,
        opmod: u8,
        raddr: u64,
        rkey: u32,
        laddr: u64,
        lkey: u32,
        len: u32,
        swap_add: u64,
        compare: u64,
        fm_ce_se: u8,
        signaled: i32,
    );
}

/// One operation as the device encoder takes it (`marrow::Op` in
/// `device.h`): what [`Device::encode`] writes a WQE for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodeOp {
    /// `MLX5_OPCODE_*`.
    pub opcode: u8,
    /// Opcode modifier.
    pub opmod: u8,
    /// Remote address.
    pub raddr: u64,
    /// Remote key.
    pub rkey: u32,
    /// Local address.
    pub laddr: u64,
    /// Local key.
    pub lkey: u32,
    /// Bytes.
    pub len: u32,
    /// Atomic swap or add operand.
    pub swap_add: u64,
    /// Atomic compare operand.
    pub compare: u64,
    /// The control segment's `fm_ce_se` byte.
    pub fm_ce_se: u8,
}

fn rc(code: i32) -> Result<(), DeviceError> {
    if code == 0 { Ok(()) } else { Err(DeviceError(code)) }
}

/// A CPU thread's handle on a channel: the device API, callable from any
/// number of threads at once (the protocol is lock-free but for the CQ poll
/// and doorbell locks in the GCRB).
#[derive(Clone, Copy, Debug)]
pub struct Device {
    page: *mut u8,
}

// SAFETY: the page is shared memory that the device code accesses only
// with atomics, volatile accesses and fences, from any thread, as GPU
// threads do; a `Device` is an address, not a borrow.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

impl Device {
    /// The device API over `ch`'s GCRB. The channel must outlive every call.
    pub fn new(ch: &Channel) -> Device {
        Self::on_page(&ch.page())
    }

    /// The device API over the GCRB in `page`, which must outlive every call.
    pub fn on_page(page: &marrow_mmio::Region) -> Device {
        Device { page: page.base_addr() as *mut u8 }
    }

    /// The device encoder alone: the WQE for `op` written at index `idx` of
    /// the page's send queue, then its doorbell record and doorbell, as
    /// every post writes them (`write_wqe` and `ring` in `device.h`), with
    /// no reservation, chain or wait. `signaled: false` clears CQ_UPDATE.
    pub fn encode(&self, idx: u64, op: &EncodeOp, signaled: bool) {
        // SAFETY: `page` is a live GCRB page (see `new`) whose send queue,
        // doorbell record and doorbell addresses name live memory; the
        // encoder writes one WQEBB of the ring, 4 bytes of the record and
        // 8 of the doorbell register.
        unsafe {
            marrow_cpu_encode(
                self.page,
                idx,
                op.opcode,
                op.opmod,
                op.raddr,
                op.rkey,
                op.laddr,
                op.lkey,
                op.len,
                op.swap_add,
                op.compare,
                op.fm_ce_se,
                i32::from(signaled),
            )
        }
    }

    /// The holder's claim alone (`claim_run` in `post_shared.h`): the run
    /// of set ready marks from WQEBB `from`, cleared; returns where it
    /// ends. Only for a page no poster is using.
    pub fn claim_run(&self, from: u64) -> u64 {
        // SAFETY: `page` is a live GCRB page (see `new`); the claim reads
        // and clears words of its ready marks only.
        unsafe { marrow_cpu_claim_run(self.page, from) }
    }

    /// Name the calling thread in the device trace.
    pub fn set_thread(index: u32) {
        // SAFETY: sets a thread-local in the device code.
        unsafe { marrow_cpu_set_thread(index) }
    }

    /// Check the GCRB's magic and version.
    pub fn check_config(&self) -> Result<(), DeviceError> {
        // SAFETY: `page` is a live GCRB page (see `new`).
        rc(unsafe { marrow_cpu_check_config(self.page) })
    }

    /// Non-blocking put.
    pub fn put_nbi(&self, pe: u32, roff: u64, loff: u64, len: u32) -> Result<(), DeviceError> {
        // SAFETY: `page` is a live GCRB page; offsets are bounds-checked by the device code.
        rc(unsafe { marrow_cpu_put_nbi(self.page, pe, roff, loff, len) })
    }

    /// Blocking put.
    pub fn put(&self, pe: u32, roff: u64, loff: u64, len: u32) -> Result<(), DeviceError> {
        // SAFETY: as in `put_nbi`.
        rc(unsafe { marrow_cpu_put(self.page, pe, roff, loff, len) })
    }

    /// `count` puts of `len` bytes, slot i at offset `base + i * len` of both
    /// windows, every `blocking_every`-th blocking (0: none), then quiet, all
    /// through one device-side channel object (an exclusive channel's heads
    /// stay in its registers throughout, as in a GPU thread's loop).
    pub fn put_burst(&self, pe: u32, base: u64, len: u32, count: u32, blocking_every: u32) -> Result<(), DeviceError> {
        // SAFETY: as in `put_nbi`.
        rc(unsafe { marrow_cpu_put_burst(self.page, pe, base, len, count, blocking_every) })
    }

    /// [`Device::put_burst`] through the device code's general path
    /// (`kernels/cpu/device_cpu_general.cpp`, compiled with
    /// `MARROW_FAST_PATH=0`): what the fast path is held to.
    pub fn put_burst_general(
        &self,
        pe: u32,
        base: u64,
        len: u32,
        count: u32,
        blocking_every: u32,
    ) -> Result<(), DeviceError> {
        // SAFETY: as in `put_nbi`.
        rc(unsafe { marrow_cpu_general_put_burst(self.page, pe, base, len, count, blocking_every) })
    }

    /// Blocking get.
    pub fn get(&self, pe: u32, roff: u64, loff: u64, len: u32) -> Result<(), DeviceError> {
        // SAFETY: as in `put_nbi`.
        rc(unsafe { marrow_cpu_get(self.page, pe, roff, loff, len) })
    }

    /// Fetch-and-add; returns the old value.
    pub fn fetch_add(&self, pe: u32, roff: u64, value: u64, result_loff: u64) -> Result<u64, DeviceError> {
        let mut old = 0;
        // SAFETY: as in `put_nbi`; `old` is a valid u64 for the call.
        rc(unsafe { marrow_cpu_fetch_add(self.page, pe, roff, value, result_loff, &mut old) })?;
        Ok(old)
    }

    /// Compare-and-swap; returns the old value.
    pub fn compare_swap(
        &self,
        pe: u32,
        roff: u64,
        compare: u64,
        swap: u64,
        result_loff: u64,
    ) -> Result<u64, DeviceError> {
        let mut old = 0;
        // SAFETY: as in `fetch_add`.
        rc(unsafe { marrow_cpu_compare_swap(self.page, pe, roff, compare, swap, result_loff, &mut old) })?;
        Ok(old)
    }

    /// Put, then add to a signal word after it.
    #[allow(clippy::too_many_arguments)]
    pub fn put_signal(
        &self,
        pe: u32,
        roff: u64,
        loff: u64,
        len: u32,
        sig_roff: u64,
        sig_add: u64,
        scratch_loff: u64,
    ) -> Result<(), DeviceError> {
        // SAFETY: as in `put_nbi`.
        rc(unsafe { marrow_cpu_put_signal(self.page, pe, roff, loff, len, sig_roff, sig_add, scratch_loff) })
    }

    /// Wait for everything posted so far.
    pub fn quiet(&self) -> Result<(), DeviceError> {
        // SAFETY: as in `put_nbi`.
        rc(unsafe { marrow_cpu_quiet(self.page) })
    }

    /// Put one 8-byte value (transport P2P only: MLX5 answers unsupported).
    pub fn p(&self, pe: u32, roff: u64, value: u64) -> Result<(), DeviceError> {
        // SAFETY: as in `put_nbi`.
        rc(unsafe { marrow_cpu_p(self.page, pe, roff, value) })
    }

    /// Wait until the local word at `loff` reaches `value`, or time out.
    pub fn wait_until_ge(&self, loff: u64, value: u64) -> Result<(), DeviceError> {
        // SAFETY: as in `put_nbi`.
        rc(unsafe { marrow_cpu_wait_until_ge(self.page, loff, value) })
    }

    /// Order this thread's earlier puts before its later ones (P2P with a
    /// relay: wait for the relay's copies; a timeout sticks in the GCRB).
    pub fn fence(&self) {
        // SAFETY: as in `put_nbi`.
        unsafe { marrow_cpu_fence(self.page) }
    }
}
