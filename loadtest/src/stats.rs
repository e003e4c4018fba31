//! The pure bookkeeping of the load scenarios: latency percentiles (exact and
//! histogram-based) and per-watcher accounting of missed, duplicate and
//! reordered events.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Nearest-rank percentile of `sorted` (ascending): the smallest value with at
/// least `p` (0..=1) of the samples at or below it. `None` when empty.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 1.0);
    let rank = (p * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Median of unsorted values (NaNs are ignored); `None` when there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// The quantiles a latency distribution is kept at for plots: every
/// percent, then the tail.
pub const CDF_QUANTILES: [f64; 104] = {
    let mut q = [0.0; 104];
    let mut i = 0;
    while i < 100 {
        q[i] = (i + 1) as f64 / 100.0;
        i += 1;
    }
    q[99] = 0.995;
    q[100] = 0.999;
    q[101] = 0.9999;
    q[102] = 0.99999;
    q[103] = 1.0;
    q
};

/// Sub-buckets per power of two: values are kept with < 1/32 (3.1 %) error.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Largest exponent kept; larger values land in the last bucket (2^41 µs is
/// 25 days, so nothing real is clipped).
const MAX_EXP: u32 = 40;
const BUCKETS: usize = (SUB + (MAX_EXP + 1 - SUB_BITS) as u64 * SUB) as usize;

/// A log-linear histogram of `u64` values (microseconds here) that many tasks
/// record into concurrently with relaxed atomics. Percentiles are reported as
/// the upper bound of their bucket, so they err high by < 3.1 %.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("count", &self.count())
            .field("max", &self.max())
            .finish_non_exhaustive()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros();
    if exp > MAX_EXP {
        return BUCKETS - 1;
    }
    let shift = exp - SUB_BITS;
    let sub = (v >> shift) - SUB;
    (SUB + u64::from(shift) * SUB + sub) as usize
}

/// The largest value that falls into bucket `i`.
fn bucket_upper(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = (i - SUB) / SUB;
    let sub = (i - SUB) % SUB;
    ((SUB + sub + 1) << shift) - 1
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }

    /// Records `n` samples of value `v`.
    pub fn record_n(&self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.buckets[bucket_of(v)].fetch_add(n, Ordering::Relaxed);
        self.count.fetch_add(n, Ordering::Relaxed);
        self.sum.fetch_add(v.saturating_mul(n), Ordering::Relaxed);
        self.max.fetch_max(v, Ordering::Relaxed);
    }

    /// Records one sample.
    pub fn record(&self, v: u64) {
        self.record_n(v, 1);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Largest sample (exact); 0 when empty.
    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// Mean of the samples; 0 when empty.
    pub fn mean(&self) -> f64 {
        let n = self.count();
        if n == 0 {
            0.0
        } else {
            self.sum.load(Ordering::Relaxed) as f64 / n as f64
        }
    }

    /// Nearest-rank percentile `p` (0..=1), as its bucket's upper bound
    /// (never above the exact maximum); `None` when empty.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((p.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                return Some(bucket_upper(i).min(self.max()));
            }
        }
        Some(self.max())
    }

    /// `(quantile, value)` at each of [`CDF_QUANTILES`]; empty when there
    /// are no samples.
    pub fn cdf(&self) -> Vec<(f64, u64)> {
        CDF_QUANTILES
            .iter()
            .filter_map(|&q| self.percentile(q).map(|v| (q, v)))
            .collect()
    }
}

/// What one watcher received, checked against the revisions the writer made.
///
/// Revisions after `base` are kept in a bitset, so a watcher costs one bit
/// per revision of the run.
#[derive(Clone, Debug)]
pub struct Tally {
    base: i64,
    seen: Vec<u64>,
    last: i64,
    /// Events received (every one, including duplicates).
    pub events: u64,
    /// Events whose revision this watcher had already received.
    pub duplicates: u64,
    /// Events whose revision is lower than one received before.
    pub out_of_order: u64,
    /// Events at or before `base` (older than the watch's start).
    pub stale: u64,
}

/// The verdict on one or many watchers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Accounting {
    /// Events received, duplicates included.
    pub delivered: u64,
    /// (watcher, written revision) pairs that never arrived.
    pub missed: u64,
    /// Events received more than once by the same watcher.
    pub duplicates: u64,
    /// Events received after a higher revision (reordering).
    pub out_of_order: u64,
    /// Events whose revision the writer does not know (not written in the
    /// run, or at or before the watch's start).
    pub unexpected: u64,
}

impl Accounting {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Accounting) {
        self.delivered += other.delivered;
        self.missed += other.missed;
        self.duplicates += other.duplicates;
        self.out_of_order += other.out_of_order;
        self.unexpected += other.unexpected;
    }
}

impl Tally {
    /// A watcher that starts after revision `base`.
    pub fn new(base: i64) -> Self {
        Self {
            base,
            seen: Vec::new(),
            last: base,
            events: 0,
            duplicates: 0,
            out_of_order: 0,
            stale: 0,
        }
    }

    /// The highest revision received so far (`base` before any).
    pub fn last(&self) -> i64 {
        self.last
    }

    /// Records one received event at revision `rev`.
    pub fn record(&mut self, rev: i64) {
        self.events += 1;
        if rev <= self.base {
            self.stale += 1;
            return;
        }
        if rev < self.last {
            self.out_of_order += 1;
        }
        self.last = self.last.max(rev);
        let off = (rev - self.base - 1) as usize;
        let (word, bit) = (off / 64, off % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicates += 1;
        } else {
            self.seen[word] |= 1 << bit;
        }
    }

    fn has(&self, rev: i64) -> bool {
        if rev <= self.base {
            return false;
        }
        let off = (rev - self.base - 1) as usize;
        self.seen
            .get(off / 64)
            .is_some_and(|w| w & (1 << (off % 64)) != 0)
    }

    /// Compares what arrived with `written` (the revisions of the writes,
    /// ascending, all after `base`).
    pub fn check(&self, written: &[i64]) -> Accounting {
        let missed = written.iter().filter(|&&r| !self.has(r)).count() as u64;
        let distinct: u64 = self.seen.iter().map(|w| u64::from(w.count_ones())).sum();
        let known = written.len() as u64 - missed;
        Accounting {
            delivered: self.events,
            missed,
            duplicates: self.duplicates,
            out_of_order: self.out_of_order,
            unexpected: self.stale + (distinct - known),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_percentiles_use_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), Some(50.0));
        assert_eq!(percentile(&v, 0.99), Some(99.0));
        assert_eq!(percentile(&v, 1.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&[7.0], 0.99), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(median(&[3.0, f64::NAN, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(1.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut prev = 0;
        for v in (0..5_000u64).chain((13..40).map(|e| (1u64 << e) + 12_345)) {
            let b = bucket_of(v);
            assert!(b >= prev, "bucket order at {v}");
            prev = b;
            let up = bucket_upper(b);
            assert!(up >= v, "upper {up} below {v}");
            assert!((up - v) as f64 <= v as f64 / 32.0 + 1.0, "{v} -> {up}");
        }
        for i in 0..BUCKETS - 1 {
            assert_eq!(bucket_of(bucket_upper(i)), i);
            assert_eq!(bucket_of(bucket_upper(i) + 1), i + 1);
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn histogram_percentiles_are_within_bucket_error() {
        let h = Histogram::new();
        assert_eq!(h.percentile(0.5), None);
        for v in 1..=10_000u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 10_000);
        assert_eq!(h.max(), 10_000);
        assert!((h.mean() - 5000.5).abs() < 1e-9);
        for (p, exact) in [(0.5, 5_000.0), (0.99, 9_900.0), (0.999, 9_990.0)] {
            let got = h.percentile(p).unwrap() as f64;
            assert!(got >= exact && got <= exact * 1.032, "p{p}: {got}");
        }
        assert_eq!(h.percentile(1.0), Some(10_000));
        let small = Histogram::new();
        small.record_n(3, 5);
        small.record(17);
        assert_eq!(small.percentile(0.5), Some(3));
        assert_eq!(small.percentile(0.99), Some(17));
    }

    #[test]
    fn tally_counts_missed_duplicates_and_reordering() {
        let written = [11, 12, 13, 15, 16];
        let mut t = Tally::new(10);
        for rev in [11, 12, 12, 15, 13, 9, 14] {
            t.record(rev);
        }
        assert_eq!(t.last(), 15);
        let a = t.check(&written);
        assert_eq!(
            a,
            Accounting {
                delivered: 7,
                missed: 1,       // 16
                duplicates: 1,   // 12 twice
                out_of_order: 2, // 13 and 14 after 15
                unexpected: 2,   // 9 (before the start) and 14 (never written)
            }
        );
    }

    #[test]
    fn perfect_watchers_add_up_to_zero_errors() {
        let written: Vec<i64> = (101..=400).collect();
        let mut total = Accounting::default();
        for _ in 0..3 {
            let mut t = Tally::new(100);
            written.iter().for_each(|&r| t.record(r));
            total.add(&t.check(&written));
        }
        assert_eq!(total.delivered, 900);
        assert_eq!(
            (
                total.missed,
                total.duplicates,
                total.out_of_order,
                total.unexpected
            ),
            (0, 0, 0, 0)
        );
        // A watcher that received nothing missed everything.
        assert_eq!(Tally::new(100).check(&written).missed, 300);
    }
}
