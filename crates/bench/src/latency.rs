//! Latencies in an HDR histogram (nanosecond resolution, three significant
//! digits), summarised in `ib_write_lat`'s columns: perftest's typical is
//! the median, its percentiles those of the sorted samples.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Samples of one latency, in nanoseconds.
#[derive(Debug, Clone)]
pub struct Latency {
    h: Histogram<u64>,
}

/// One row's latency columns, in microseconds as perftest prints them.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    /// Shortest sample.
    pub t_min_us: f64,
    /// Longest sample.
    pub t_max_us: f64,
    /// The median.
    pub t_typical_us: f64,
    /// The mean.
    pub t_avg_us: f64,
    /// The standard deviation.
    pub t_stdev_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p99_9_us: f64,
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

impl Latency {
    /// An empty histogram from 1 ns to 100 s.
    pub fn new() -> Latency {
        // Bounds and precision are constants that hdrhistogram accepts.
        let h =
            Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("1 ns..100 s at 3 digits is a valid histogram");
        Latency { h }
    }

    /// Add one sample (clamped into the histogram's range).
    pub fn record(&mut self, d: Duration) {
        let ns = (d.as_nanos() as u64).clamp(1, self.h.high());
        self.h.saturating_record(ns);
    }

    /// Every sample of `other` added to these.
    pub fn add(&mut self, other: &Latency) {
        // Both histograms have `new`'s bounds, so the merge fits; were it
        // ever not to, the samples go in one by one, clamped.
        if self.h.add(&other.h).is_err() {
            for v in other.h.iter_recorded() {
                self.h.saturating_record_n(v.value_iterated_to().clamp(1, self.h.high()), v.count_at_value());
            }
        }
    }

    /// Samples recorded.
    pub fn len(&self) -> u64 {
        self.h.len()
    }

    /// No sample yet.
    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    /// The sample at quantile `q` (0 to 1), in microseconds; 0 without samples.
    pub fn quantile_us(&self, q: f64) -> f64 {
        if self.h.is_empty() {
            return 0.0;
        }
        self.h.value_at_quantile(q) as f64 / 1e3
    }

    /// The columns; all zero without samples.
    pub fn summary(&self) -> LatencySummary {
        let us = |ns: f64| ns / 1e3;
        if self.h.is_empty() {
            return LatencySummary {
                t_min_us: 0.0,
                t_max_us: 0.0,
                t_typical_us: 0.0,
                t_avg_us: 0.0,
                t_stdev_us: 0.0,
                p99_us: 0.0,
                p99_9_us: 0.0,
            };
        }
        LatencySummary {
            t_min_us: us(self.h.min() as f64),
            t_max_us: us(self.h.max() as f64),
            t_typical_us: us(self.h.value_at_quantile(0.5) as f64),
            t_avg_us: us(self.h.mean()),
            t_stdev_us: us(self.h.stdev()),
            p99_us: us(self.h.value_at_quantile(0.99) as f64),
            p99_9_us: us(self.h.value_at_quantile(0.999) as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_of_known_samples() {
        let mut l = Latency::new();
        for us in 1..=1000u64 {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        let near = |a: f64, b: f64| (a - b).abs() <= b * 1e-3 + 1e-3;
        assert!(near(s.t_min_us, 1.0) && near(s.t_max_us, 1000.0), "{s:?}");
        assert!(near(s.t_typical_us, 500.0), "{s:?}");
        assert!(near(s.t_avg_us, 500.5), "{s:?}");
        // Population standard deviation of 1..=1000.
        assert!(near(s.t_stdev_us, 288.675), "{s:?}");
        assert!(near(s.p99_us, 990.0) && near(s.p99_9_us, 999.0), "{s:?}");
    }

    #[test]
    fn merged_histograms_hold_both_sets_of_samples() {
        let (mut a, mut b) = (Latency::new(), Latency::new());
        a.record(Duration::from_micros(1));
        b.record(Duration::from_micros(9));
        a.add(&b);
        assert_eq!(a.len(), 2);
        assert!((a.summary().t_max_us - 9.0).abs() < 0.01);
    }

    #[test]
    fn no_samples_read_as_zeros() {
        assert_eq!(Latency::new().summary().t_max_us, 0.0);
    }
}
