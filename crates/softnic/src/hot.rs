//! The QPs the engine looks at more often than once a sweep.
//!
//! A ConnectX schedules a QP when its doorbell arrives; the softnic has no
//! doorbell interrupt and finds doorbells by looking at every QP's UAR
//! registers in turn, so with hundreds of QPs a doorbell on a busy QP would
//! wait for the sweep to come round. The engine instead looks at the QPs
//! that did work recently again every [`stride`] QPs of the sweep: a busy
//! QP's doorbell is found after a few idle looks however many QPs there
//! are, and every QP is still looked at once per sweep.

use crate::clock::ScanClock;
use std::time::{Duration, Instant};

/// QPs of the sweep between two looks at the hot QPs, per hot QP.
pub const STRIDE_PER_HOT: u32 = 4;
/// At most this many QPs are hot.
pub const MAX_HOT: usize = 8;

/// QPs of the sweep between two looks at `hot` hot QPs. Each look visits
/// every hot QP, so the looks add a quarter of the sweep's visits however
/// many QPs are hot, and the fewer are hot, the sooner each is looked at
/// again: a lone busy QP after 4 idle ones, 8 busy ones after 32.
pub fn stride(hot: usize) -> u32 {
    STRIDE_PER_HOT * hot.clamp(1, MAX_HOT) as u32
}
/// A QP stays hot this long after its last work.
pub const HOT_FOR: Duration = Duration::from_millis(1);
/// Scans between two looks at the clock for [`HOT_FOR`]: a QP then stays
/// hot up to this many scans longer (a few extra looks at it), where a
/// clock read on every scan was a share of every scan (`clock.rs`).
pub const EXPIRE_EVERY: u32 = 64;

/// Recently busy QPs and when each last did work.
#[derive(Debug, Default)]
pub struct HotSet {
    qps: Vec<(u32, Instant)>,
    /// Scans since the last expiry.
    scans: u32,
}

impl HotSet {
    /// `qpn` did work at `now`: hot from now on, in place of the QP idle
    /// longest when the set is full.
    pub fn touch(&mut self, qpn: u32, now: Instant) {
        if let Some(h) = self.qps.iter_mut().find(|h| h.0 == qpn) {
            h.1 = now;
        } else if self.qps.len() < MAX_HOT {
            self.qps.push((qpn, now));
        } else if let Some(oldest) = self.qps.iter_mut().min_by_key(|h| h.1) {
            *oldest = (qpn, now);
        }
    }

    /// Called once per scan: every [`EXPIRE_EVERY`] scans with a QP hot,
    /// forget the QPs idle for [`HOT_FOR`] at the scan's time.
    pub(crate) fn expire_now_and_then(&mut self, clock: &mut ScanClock) {
        if self.qps.is_empty() {
            return;
        }
        self.scans += 1;
        if self.scans >= EXPIRE_EVERY {
            self.scans = 0;
            self.expire(clock.now());
        }
    }

    /// Forget QPs idle for [`HOT_FOR`] at `now`.
    pub fn expire(&mut self, now: Instant) {
        self.qps.retain(|h| now.saturating_duration_since(h.1) < HOT_FOR);
    }

    /// The hot QPs' numbers, in no particular order.
    pub fn numbers(&self) -> impl Iterator<Item = u32> + '_ {
        self.qps.iter().map(|h| h.0)
    }

    /// Whether no QP is hot.
    pub fn is_empty(&self) -> bool {
        self.qps.is_empty()
    }

    /// How many QPs are hot.
    pub fn len(&self) -> usize {
        self.qps.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_looks_add_a_quarter_of_the_sweep_and_fewer_hot_qps_wait_less() {
        let sweep = 256u32;
        for hot in 1..=MAX_HOT {
            let looks = (1..sweep).filter(|i| i.is_multiple_of(stride(hot))).count();
            assert!(looks * hot <= sweep as usize / 4, "{hot} hot QPs: {} visits added to {sweep}", looks * hot);
        }
        assert_eq!((stride(1), stride(MAX_HOT)), (4, 32));
        assert!((1..MAX_HOT).all(|h| stride(h) < stride(h + 1)));
    }

    #[test]
    fn busy_qps_stay_hot_up_to_the_cap_and_cool_down() {
        let t0 = Instant::now();
        let mut h = HotSet::default();
        for q in 0..MAX_HOT as u32 {
            h.touch(0x100 + q, t0 + Duration::from_micros(q.into()));
        }
        h.touch(0x100, t0 + Duration::from_micros(100));
        assert_eq!(h.numbers().count(), MAX_HOT);
        // Full: the newcomer takes the place of the QP idle longest (0x101;
        // 0x100 was touched again).
        h.touch(0x200, t0 + Duration::from_micros(200));
        let mut n: Vec<u32> = h.numbers().collect();
        n.sort();
        assert!(n.contains(&0x200) && n.contains(&0x100) && !n.contains(&0x101), "{n:x?}");
        h.expire(t0 + Duration::from_micros(100) + HOT_FOR);
        let n: Vec<u32> = h.numbers().collect();
        assert_eq!(n, [0x200], "only the QP touched within HOT_FOR stays");
        h.expire(t0 + Duration::from_micros(200) + HOT_FOR);
        assert!(h.is_empty());
    }

    #[test]
    fn a_scan_expires_the_set_every_few_scans_and_an_empty_set_never() {
        let mut h = HotSet::default();
        // Hot long ago: expired by the first look at the clock.
        h.touch(0x100, Instant::now() - 2 * HOT_FOR);
        for scan in 1..EXPIRE_EVERY {
            h.expire_now_and_then(&mut ScanClock::default());
            assert_eq!(h.len(), 1, "scan {scan} read no clock for the set");
        }
        h.expire_now_and_then(&mut ScanClock::default());
        assert!(h.is_empty(), "scan {EXPIRE_EVERY} forgot the idle QP");
        // Empty: nothing counted, so a QP made hot now waits a full
        // EXPIRE_EVERY scans, however long the set was empty.
        for _ in 0..3 * EXPIRE_EVERY {
            h.expire_now_and_then(&mut ScanClock::default());
        }
        h.touch(0x200, Instant::now() - 2 * HOT_FOR);
        for _ in 1..EXPIRE_EVERY {
            h.expire_now_and_then(&mut ScanClock::default());
        }
        assert_eq!(h.len(), 1);
        h.expire_now_and_then(&mut ScanClock::default());
        assert!(h.is_empty());
    }
}
