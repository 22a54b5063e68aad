//! The P2P copy-engine relay, host half (the device half is `relay_post` in
//! `kernels/include/marrow/device.h`).
//!
//! SM stores over the H200 pair's 18 NVLinks stop near 370 GB/s where the
//! copy engine reaches 395 (`docs/PERFORMANCE.md`), and only the host can
//! start the copy engine. With `gcrb_config.relay_ring` set, the device code
//! hands each put of at least `relay_min_kib` KiB to this thread as one
//! `gcrb_relay_desc` in host memory, published by its `seq`; the thread
//! takes descriptors in ticket order, checks them against the windows, has
//! its [`CopyEngine`] make the copy and then store the count of copies made
//! into `gcrb_heads.cons_idx`, which the device's blocking puts,
//! put_signal, fence and quiet wait for. NVSHMEM's device code hands work to
//! its proxy thread the same way. The CPU never touches the bytes; it is on
//! these puts' control path, which is why the relay is opt-in.
//!
//! A descriptor outside the windows is refused: nothing is copied, the
//! relay stops taking descriptors, and the device's next wait on it times
//! out with GCRB wait RELAY and its heads decoded; [`Relay::stop`] names
//! the descriptor.

use crate::TransportError;
use marrow_gcrb::{GCRB_OFF_HEADS, gcrb_heads, gcrb_relay_desc};
use marrow_mmio::Region;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use zerocopy::FromBytes;

/// The byte offset in a GCRB page of the count of copies the relay made.
pub fn done_offset() -> usize {
    GCRB_OFF_HEADS as usize + gcrb_heads::LAYOUT.field("cons_idx").map_or(24, |f| f.offset)
}

/// Bytes of a ring of `entries` descriptors.
pub fn ring_bytes(entries: u32) -> usize {
    entries as usize * gcrb_relay_desc::SIZE
}

/// Where the relay's copies may go: from the local window into the
/// windows of the key table (the peers', and this PE's own for a put to
/// itself), as mapped in this process, each `(address, bytes)`.
#[derive(Clone, Debug)]
pub struct RelayBounds {
    /// The local window (sources).
    pub src: (u64, u64),
    /// Every PE's window (destinations).
    pub dst: Vec<(u64, u64)>,
}

/// `addr..addr + len` lies in window `w` (`(base, bytes)`), with no sum
/// that could wrap.
fn inside(w: (u64, u64), addr: u64, len: u64) -> bool {
    addr >= w.0 && addr - w.0 <= w.1 && len <= w.1 - (addr - w.0)
}

impl RelayBounds {
    fn check(&self, d: &gcrb_relay_desc) -> Result<(), String> {
        if d.len() == 0 {
            return Err("zero length (the device code never posts one)".into());
        }
        if !inside(self.src, d.src(), d.len()) {
            return Err(format!("source outside the local window {:#x}+{:#x}", self.src.0, self.src.1));
        }
        if !self.dst.iter().any(|&w| inside(w, d.dst(), d.len())) {
            return Err("destination outside every PE's window".into());
        }
        Ok(())
    }
}

/// What makes the relay's copies.
pub trait CopyEngine: Send {
    /// Start copying `len` bytes from `src` to `dst` (checked against the
    /// windows); copies run in the order started.
    fn copy(&mut self, dst: u64, src: u64, len: u64) -> Result<(), String>;
    /// Once every copy started so far is made, store `count` (little
    /// endian) into the GCRB's `cons_idx`.
    fn done(&mut self, count: u64) -> Result<(), String>;
    /// Wait until every copy started so far is made: the relay stops only
    /// then, so the windows may be freed after [`Relay::stop`].
    fn finish(&mut self) -> Result<(), String>;
}

/// Why the relay stopped taking descriptors.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum RelayError {
    /// A descriptor outside the windows: not copied.
    #[error(
        "relay descriptor seq {seq} refused, {why}: dst {dst:#x} src {src:#x} len {len}; nothing was copied and the relay took no more, so the device's waits end in GCRB wait RELAY"
    )]
    Refused {
        /// Its seq.
        seq: u64,
        /// Destination.
        dst: u64,
        /// Source.
        src: u64,
        /// Bytes.
        len: u64,
        /// What is wrong with it.
        why: String,
    },
    /// The copy engine refused.
    #[error("relay copy engine: {0}")]
    Engine(String),
}

/// A running relay thread.
#[derive(Debug)]
pub struct Relay {
    stop: Arc<AtomicBool>,
    made: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<Result<(), RelayError>>>,
}

impl Relay {
    /// Start taking descriptors from `ring` (`entries` of them, a power of
    /// two, the memory `gcrb_config.relay_ring` names) from seq 1.
    pub fn start(
        ring: Region,
        entries: u32,
        bounds: RelayBounds,
        mut engine: Box<dyn CopyEngine>,
    ) -> Result<Relay, TransportError> {
        if entries == 0 || !entries.is_power_of_two() {
            return Err(TransportError::Config(format!("relay ring of {entries} descriptors: not a power of two")));
        }
        let need = ring_bytes(entries);
        if ring.len() < need {
            return Err(TransportError::Window(marrow_mmio::OutOfBounds { offset: 0, len: need, size: ring.len() }));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let made = Arc::new(AtomicU64::new(0));
        let (s, m) = (stop.clone(), made.clone());
        let thread = std::thread::Builder::new().name("marrow-p2p-relay".into()).spawn(move || {
            let r = take(&ring, entries, &bounds, engine.as_mut(), &s, &m);
            let f = engine.finish().map_err(RelayError::Engine);
            r.and(f)
        })?;
        Ok(Relay { stop, made, thread: Some(thread) })
    }

    /// Copies started so far.
    pub fn made(&self) -> u64 {
        self.made.load(Ordering::Acquire)
    }

    /// Stop the thread once its copies are made: how many it made, or why
    /// it stopped early.
    pub fn stop(mut self) -> Result<u64, RelayError> {
        self.halt().unwrap_or(Ok(()))?;
        Ok(self.made())
    }

    fn halt(&mut self) -> Option<Result<(), RelayError>> {
        self.stop.store(true, Ordering::Release);
        let t = self.thread.take()?;
        Some(t.join().unwrap_or_else(|_| Err(RelayError::Engine("the relay thread panicked".into()))))
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// The relay loop: descriptors in seq order until `stop`.
fn take(
    ring: &Region,
    entries: u32,
    bounds: &RelayBounds,
    engine: &mut dyn CopyEngine,
    stop: &AtomicBool,
    made: &AtomicU64,
) -> Result<(), RelayError> {
    let ring_err = |e: marrow_mmio::OutOfBounds| RelayError::Engine(format!("relay ring: {e}"));
    let mut next = 1u64;
    let mut idle = 0u32;
    while !stop.load(Ordering::Acquire) {
        let slot = ((next - 1) % u64::from(entries)) as usize * gcrb_relay_desc::SIZE;
        // Acquire: the device stored the descriptor, fenced, then its seq.
        let seq = u64::from_le(ring.atomic_u64(slot).map_err(ring_err)?.load(Ordering::Acquire));
        if seq != next {
            // A dedicated spinning thread, as NVSHMEM's proxy: a sleep here
            // would add its length to every put's latency.
            idle = idle.wrapping_add(1);
            if idle.is_multiple_of(1024) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        idle = 0;
        let mut b = [0u8; gcrb_relay_desc::SIZE];
        ring.read_bytes(slot, &mut b).map_err(ring_err)?;
        let d = gcrb_relay_desc::read_from_bytes(&b)
            .unwrap_or_else(|_| unreachable!("read_bytes filled gcrb_relay_desc::SIZE bytes"));
        if let Err(why) = bounds.check(&d) {
            return Err(RelayError::Refused { seq, dst: d.dst(), src: d.src(), len: d.len(), why });
        }
        engine.copy(d.dst(), d.src(), d.len()).map_err(RelayError::Engine)?;
        engine.done(next).map_err(RelayError::Engine)?;
        made.store(next, Ordering::Release);
        next += 1;
    }
    Ok(())
}

/// The CPU's copy engine, for the CPU tests: `memcpy` between regions of
/// this process, the count stored with release order after it.
#[derive(Debug)]
pub struct MemcpyEngine {
    /// Every window a descriptor may name.
    pub windows: Vec<Region>,
    /// The GCRB page whose `cons_idx` counts the copies.
    pub page: Region,
}

impl MemcpyEngine {
    fn find(&self, addr: u64, len: u64) -> Result<(&Region, usize), String> {
        self.windows
            .iter()
            .find(|w| inside((w.base_addr() as u64, w.len() as u64), addr, len))
            .map(|w| (w, (addr - w.base_addr() as u64) as usize))
            .ok_or_else(|| format!("{addr:#x}+{len:#x} is in no window of this process"))
    }
}

impl CopyEngine for MemcpyEngine {
    fn copy(&mut self, dst: u64, src: u64, len: u64) -> Result<(), String> {
        let (s, so) = self.find(src, len)?;
        let (d, dof) = self.find(dst, len)?;
        Region::copy(s, so, d, dof, len as usize).map_err(|e| e.to_string())
    }

    fn done(&mut self, count: u64) -> Result<(), String> {
        // Release: the copy's bytes before the count that says they are there.
        self.page.atomic_u64(done_offset()).map_err(|e| e.to_string())?.store(count.to_le(), Ordering::Release);
        Ok(())
    }

    fn finish(&mut self) -> Result<(), String> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use zerocopy::FromZeros;

    const SRC: (u64, u64) = (0x7000_0000_0000, 1 << 20);
    const DST: [(u64, u64); 2] = [(0x7f00_0000_0000, 1 << 20), (u64::MAX - (1 << 20) + 1, 1 << 20)];

    /// Near a window's ends, or anywhere.
    fn addr() -> impl Strategy<Value = u64> {
        let near = |b: u64, l: u64| {
            (0u64..3, -64i64..64)
                .prop_map(move |(end, d)| [b, b + l / 2, b.wrapping_add(l)][end as usize].wrapping_add_signed(d))
        };
        prop_oneof![near(SRC.0, SRC.1), near(DST[0].0, DST[0].1), near(DST[1].0, DST[1].1), any::<u64>()]
    }

    fn len() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..128, (1u64 << 20) - 64..(1 << 20) + 64, any::<u64>()]
    }

    /// The same judgement in 128-bit arithmetic, where nothing wraps.
    fn holds(w: (u64, u64), a: u64, l: u64) -> bool {
        u128::from(a) >= u128::from(w.0) && u128::from(a) + u128::from(l) <= u128::from(w.0) + u128::from(w.1)
    }

    proptest! {
        /// Any descriptor is refused, or names only bytes inside the
        /// windows, and checking it never panics.
        #[test]
        fn any_descriptor_is_refused_or_inside_the_windows(dst in addr(), src in addr(), len in len()) {
            let b = RelayBounds { src: SRC, dst: DST.to_vec() };
            let mut d = gcrb_relay_desc::new_zeroed();
            d.set_seq(1).set_dst(dst).set_src(src).set_len(len);
            let want = len > 0 && holds(SRC, src, len) && DST.iter().any(|&w| holds(w, dst, len));
            prop_assert_eq!(b.check(&d).is_ok(), want);
        }
    }
}
