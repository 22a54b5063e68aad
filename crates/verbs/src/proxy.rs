//! The CPU-proxy doorbell, for when the UAR cannot be mapped into the GPU
//! (`cudaHostRegister(..., cudaHostRegisterIoMemory)` refused: the
//! `PeerMappingOverride` case, DeepEP#509's error 800).
//!
//! The GCRB's `db_addr` then points at a mailbox in host memory the GPU can
//! write (8 bytes, mapped with a plain `cudaHostRegister`), and this proxy
//! thread forwards every new value to the real doorbell register: the same
//! 8 bytes, in the order the device wrote them, each as one 64-bit store
//! between write-combining barriers, as rdma-core's `mlx5_bf_copy`/`mmio_write64_be`
//! path rings. Unlike NVSHMEM's proxy (which forwards a producer index and
//! rebuilds the doorbell) it forwards the device's own doorbell value, so the
//! device code is unchanged between modes.
//!
//! The device code stores each doorbell value once; the proxy swaps the
//! mailbox with a sentinel of all ones (no real doorbell is all ones: the
//! QPN field is 24 bits and the top byte of the first word is the opmod or
//! a zero) so a value rung twice in a row is forwarded twice, and a value
//! rung while the proxy is forwarding the previous one is not lost. Two
//! values rung before the proxy looks collapse into the later one, which is
//! what hardware does with two doorbells too: the NIC executes up to the
//! producer counter in the doorbell record, and the later doorbell names
//! the later index.
//!
//! DeepEP PR#677 found two fatal bugs in a CPU-assisted path (the producer
//! index written where the proxy never read it, and a teardown deadlock);
//! the tests here cover both: the device side rings through the same GCRB
//! address the proxy polls, and stopping never waits on the device.

use marrow_mmio::{Region, barrier};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The mailbox's idle value.
pub const EMPTY: [u8; 8] = [0xff; 8];

/// How long the proxy keeps spinning after the last doorbell before it
/// sleeps between looks.
pub const SPIN: Duration = Duration::from_micros(500);

/// A running proxy.
#[derive(Debug)]
pub struct DoorbellProxy {
    stop: Arc<AtomicBool>,
    forwarded: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl DoorbellProxy {
    /// Initialise `mailbox` (8 bytes at its offset 0) to [`EMPTY`] and start
    /// forwarding every value written there to `doorbell` (offset 0), the
    /// UAR's doorbell register.
    pub fn start(mailbox: Region, doorbell: Region) -> Result<DoorbellProxy, marrow_mmio::OutOfBounds> {
        mailbox.write_8bytes(0, EMPTY)?;
        doorbell.read_8bytes(0)?; // bounds, once
        let stop = Arc::new(AtomicBool::new(false));
        let forwarded = Arc::new(AtomicU64::new(0));
        let (s, f) = (stop.clone(), forwarded.clone());
        let thread = std::thread::Builder::new()
            .name("marrow-db-proxy".into())
            .spawn(move || {
                let mut last = std::time::Instant::now();
                while !s.load(Ordering::Relaxed) {
                    // The swap is one atomic 8-byte exchange: the device's
                    // store is taken whole, never torn with a later one.
                    let v = mailbox.swap_8bytes(0, EMPTY).expect("checked at start");
                    if v == EMPTY {
                        // Spin while doorbells are recent (a put loop rings
                        // every few microseconds), then sleep, so an idle
                        // proxy costs nothing on 2-core machines
                        // (docs/SOURCES.md §4).
                        if last.elapsed() > SPIN {
                            std::thread::sleep(Duration::from_micros(20));
                        } else {
                            std::hint::spin_loop();
                        }
                        continue;
                    }
                    last = std::time::Instant::now();
                    // What the device wrote before its doorbell (WQEs, the
                    // doorbell record) is visible to the NIC before the UAR
                    // store: the device fenced at system scope before writing
                    // the mailbox, and this acquire-side barrier keeps our
                    // store after our read of it.
                    barrier::from_device();
                    barrier::wc_start();
                    doorbell.write_8bytes(0, v).expect("checked at start");
                    barrier::wc_flush();
                    f.fetch_add(1, Ordering::Release);
                }
            })
            .expect("spawn the doorbell proxy thread");
        Ok(DoorbellProxy { stop, forwarded, thread: Some(thread) })
    }

    /// Doorbells forwarded so far.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Ordering::Acquire)
    }

    /// Stop the thread; never waits on the device.
    pub fn stop(mut self) -> u64 {
        self.halt();
        self.forwarded()
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for DoorbellProxy {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page of ordinary memory standing in for shared memory: the mailbox
    /// at 0, a fake UAR doorbell register at 0x800 (MLX5_BF_OFFSET).
    struct Page(Box<[u64; 512]>);
    impl Page {
        fn region(&mut self) -> Region {
            let p = std::ptr::NonNull::new(self.0.as_mut_ptr().cast::<u8>()).unwrap();
            // SAFETY: the box lives as long as the test's `Page` and the
            // proxy is stopped before it is dropped; 4096 bytes are owned.
            unsafe { Region::new(p, 4096) }
        }
    }

    #[test]
    fn forwards_exactly_the_8_bytes_in_order() {
        let mut page = Page(Box::new([0; 512]));
        let r = page.region();
        let (mailbox, uar) = (r.sub(0, 8).unwrap(), r.sub(0x800, 8).unwrap());
        let proxy = DoorbellProxy::start(mailbox, uar).unwrap();
        assert_eq!(mailbox.read_8bytes(0).unwrap(), EMPTY);
        // The device side rings: each value once, waiting until the mailbox
        // is free again (as device.h's proxy-mode store does with a timeout),
        // and the UAR must show each value in turn, bytes exactly as written.
        let mut seen = Vec::new();
        for i in 0u64..200 {
            let db = ((i as u32 & 0xffff) << 8 | 0x08).to_be_bytes();
            let qpn = (0x1234u32 << 8).to_be_bytes();
            let v = [db[0], db[1], db[2], db[3], qpn[0], qpn[1], qpn[2], qpn[3]];
            let t0 = std::time::Instant::now();
            while mailbox.read_8bytes(0).unwrap() != EMPTY {
                assert!(t0.elapsed() < Duration::from_secs(5), "proxy stalled");
                std::thread::yield_now();
            }
            mailbox.write_8bytes(0, v).unwrap();
            while proxy.forwarded() < i + 1 {
                assert!(t0.elapsed() < Duration::from_secs(5), "proxy never forwarded {i}");
                std::thread::yield_now();
            }
            seen.push(uar.read_8bytes(0).unwrap());
            assert_eq!(seen[i as usize], v, "doorbell {i}");
        }
        // The same value twice is two doorbells.
        let v = seen[5];
        for n in 0..2 {
            while mailbox.read_8bytes(0).unwrap() != EMPTY {
                std::thread::yield_now();
            }
            mailbox.write_8bytes(0, v).unwrap();
            while proxy.forwarded() < 201 + n {
                std::thread::yield_now();
            }
        }
        // Nothing else of the page was touched.
        assert!(r.read_array::<0x7f8>(8).unwrap().iter().all(|b| *b == 0));
        assert_eq!(proxy.stop(), 202);
    }

    #[test]
    fn stopping_never_waits_on_the_device() {
        let mut page = Page(Box::new([0; 512]));
        let r = page.region();
        let proxy = DoorbellProxy::start(r.sub(0, 8).unwrap(), r.sub(0x800, 8).unwrap()).unwrap();
        let t0 = std::time::Instant::now();
        assert_eq!(proxy.stop(), 0);
        assert!(t0.elapsed() < Duration::from_secs(1));
        assert_eq!(r.read_8bytes(0x800).unwrap(), [0; 8]);
    }
}
