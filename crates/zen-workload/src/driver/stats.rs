//! A worker's private statistics of the measured interval, merged at the end.
//!
//! Each worker counts into its own [`WorkerStats`] (no sharing at all while
//! it runs) and hands it back when it stops; [`WorkerStats::merge`] adds
//! them up. Latencies are recorded in nanoseconds in HdrHistograms (1 ns to
//! 100 s, 3 significant digits) so that sub-microsecond transactions keep
//! their resolution; reports print microseconds.

use std::time::Instant;

use hdrhistogram::Histogram;
use zen_engine::{AbortReason, CacheStats};

/// Largest latency a histogram holds (longer ones are clamped): 100 s.
pub const LATENCY_MAX_NS: u64 = 100_000_000_000;

pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3).expect("valid histogram bounds")
}

/// Counts of one transaction type.
#[derive(Debug, Clone)]
pub struct TypeStats {
    pub commits: u64,
    pub cc_aborts: u64,
    pub user_aborts: u64,
    /// Latency of committed transactions, retries included, in ns.
    pub latency_ns: Histogram<u64>,
}

impl TypeStats {
    fn new() -> TypeStats {
        TypeStats { commits: 0, cc_aborts: 0, user_aborts: 0, latency_ns: new_histogram() }
    }
}

/// Everything a worker measured. See the module docs.
#[derive(Debug, Clone)]
pub struct WorkerStats {
    pub commits: u64,
    pub cc_aborts: u64,
    pub user_aborts: u64,
    /// Aborts by reason, indexed like `AbortReason::ALL` (user aborts too).
    pub aborts_by_reason: [u64; AbortReason::ALL.len()],
    /// Per transaction type; the latency of all commits is their sum
    /// ([`WorkerStats::latency_ns`]), so a commit records one histogram.
    pub per_type: Vec<TypeStats>,
    /// Cache counters over the measured interval.
    pub cache: CacheStats,
    /// When the worker stopped (the latest of all workers after a merge).
    pub finished_at: Option<Instant>,
    /// Heap allocations the worker thread made in the measured interval
    /// (driver, workload and engine; counted only where the counting
    /// allocator is installed, `zen_pmem::alloc_count`).
    pub allocations: u64,
}

fn reason_index(reason: AbortReason) -> usize {
    AbortReason::ALL.iter().position(|r| *r == reason).expect("every reason is in ALL")
}

impl WorkerStats {
    pub fn new(types: usize) -> WorkerStats {
        WorkerStats {
            commits: 0,
            cc_aborts: 0,
            user_aborts: 0,
            aborts_by_reason: [0; AbortReason::ALL.len()],
            per_type: (0..types).map(|_| TypeStats::new()).collect(),
            cache: CacheStats::default(),
            finished_at: None,
            allocations: 0,
        }
    }

    #[inline]
    pub fn on_commit(&mut self, txn_type: usize, latency_ns: u64) {
        let ns = latency_ns.clamp(1, LATENCY_MAX_NS);
        self.commits += 1;
        let t = &mut self.per_type[txn_type];
        t.commits += 1;
        t.latency_ns.saturating_record(ns);
    }

    #[inline]
    pub fn on_cc_abort(&mut self, txn_type: usize, reason: AbortReason) {
        self.cc_aborts += 1;
        self.aborts_by_reason[reason_index(reason)] += 1;
        self.per_type[txn_type].cc_aborts += 1;
    }

    #[inline]
    pub fn on_user_abort(&mut self, txn_type: usize) {
        self.user_aborts += 1;
        self.aborts_by_reason[reason_index(AbortReason::User)] += 1;
        self.per_type[txn_type].user_aborts += 1;
    }

    /// Latency of committed transactions (retries included) in ns: the sum
    /// of the per-type histograms.
    pub fn latency_ns(&self) -> Histogram<u64> {
        let mut all = new_histogram();
        for t in &self.per_type {
            // Same bounds, so adding cannot fail.
            let _ = all.add(&t.latency_ns);
        }
        all
    }

    /// Add `other` into `self`.
    pub fn merge(&mut self, other: &WorkerStats) {
        self.commits += other.commits;
        self.cc_aborts += other.cc_aborts;
        self.user_aborts += other.user_aborts;
        for (a, b) in self.aborts_by_reason.iter_mut().zip(other.aborts_by_reason) {
            *a += b;
        }
        // Both histograms have the same bounds, so adding cannot fail.
        for (a, b) in self.per_type.iter_mut().zip(&other.per_type) {
            a.commits += b.commits;
            a.cc_aborts += b.cc_aborts;
            a.user_aborts += b.user_aborts;
            let _ = a.latency_ns.add(&b.latency_ns);
        }
        self.cache = self.cache.add(&other.cache);
        self.finished_at = self.finished_at.max(other.finished_at);
        self.allocations += other.allocations;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merging_adds_counts_reasons_and_latencies() {
        let mut a = WorkerStats::new(2);
        let mut b = WorkerStats::new(2);
        a.on_commit(0, 1000);
        a.on_cc_abort(0, AbortReason::WriteLocked);
        b.on_commit(1, 3000);
        b.on_commit(1, 0);
        b.on_user_abort(1);
        b.cache = CacheStats { hits: 3, misses: 1, evictions: 0 };
        a.merge(&b);
        assert_eq!((a.commits, a.cc_aborts, a.user_aborts), (3, 1, 1));
        assert_eq!(a.aborts_by_reason[reason_index(AbortReason::WriteLocked)], 1);
        assert_eq!(a.aborts_by_reason[reason_index(AbortReason::User)], 1);
        assert_eq!(a.latency_ns().len(), 3);
        assert_eq!(a.per_type[1].commits, 2);
        assert_eq!(a.per_type[1].latency_ns.max(), a.latency_ns().max());
        assert_eq!(a.cache.hits, 3);
    }
}
