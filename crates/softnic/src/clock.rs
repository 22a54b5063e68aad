//! The engine's time within one scan: read at most once, and only when
//! something the scan does needs it.
//!
//! An idle scan of a few QPs takes tens of nanoseconds, and a clock read
//! (`clock_gettime` through the vDSO, more where the host's clock source
//! is slower) costs about as much: read on every scan, it was a large part
//! of an idle scan, and so of how late a doorbell is seen (`perf record`
//! of `cargo run --release -p marrow-bench --example engine_latency`).
//! Most scans need no time at all; a delayed doorbell (a fault), a wire
//! QP's timers and a busy QP's place in the hot set do.

use std::time::Instant;

/// The time of one scan, taken on first use.
#[derive(Debug, Default)]
pub(crate) struct ScanClock(Option<Instant>);

impl ScanClock {
    /// The scan's time: read now on the first call, the same on later ones.
    pub(crate) fn now(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_read_once_and_only_when_asked() {
        let before = Instant::now();
        let mut c = ScanClock::default();
        assert!(c.0.is_none(), "nothing read before the first use");
        let t = c.now();
        assert!(t >= before);
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(c.now(), t, "one reading per scan");
    }
}
