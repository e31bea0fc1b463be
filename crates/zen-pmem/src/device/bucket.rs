//! Token buckets for media bandwidth, kept as a theoretical arrival time
//! (GCRA): `tat` is when the medium will have moved every byte granted so
//! far. A request of `n` bytes at `now` moves `tat` to `max(tat, now) +
//! n × cost_per_byte` and waits until `tat` is within `burst` of `now`.
//!
//! ```text
//!   idle:   tat ≤ arrived  → tat := arrived + cost    wait = max(0, tat' − now − burst)
//!   busy:   tat > arrived  → tat := tat + cost        wait = max(0, tat' − now − burst)
//! ```
//!
//! `arrived` is when the bytes reached the medium: `now` for a read, when
//! they were flushed for a fence (the medium writes flushed lines while the
//! thread goes on issuing the rest; charging them all at the fence as if
//! they had just arrived left the medium idle during that work).
//!
//! A bucket is either shared by the threads of a pool (two atomic RMWs at
//! most per request, no loop: a `fetch_max` when the bucket has gone idle and
//! a `fetch_add`) or owned by one thread under `--nvm-share` (plain loads and
//! stores). Times are in picoseconds so that a per-byte cost keeps its
//! precision (13.9 GB/s is 71.9 ps per byte).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Requests may run this far ahead of the medium without waiting: a burst of
/// about one transaction's writes.
pub const BURST_PS: u64 = 1_000_000;

/// Picoseconds per byte at `gb_per_s` (decimal GB: 1 GB/s is 1 byte per ns).
pub fn ps_per_byte(gb_per_s: f64) -> u64 {
    ((1000.0 / gb_per_s).round() as u64).max(1)
}

#[derive(Debug, Default)]
pub struct Bucket {
    tat_ps: AtomicU64,
}

impl Bucket {
    /// Grant `cost_ps` of medium time to one of several threads, for bytes
    /// that reached the medium at `arrived_ps` (≤ `now_ps`: a fence's bytes
    /// arrived when they were flushed, and the medium has been working on
    /// them since); returns the picoseconds the caller must wait at `now_ps`.
    pub fn take_shared(&self, arrived_ps: u64, now_ps: u64, cost_ps: u64) -> u64 {
        if self.tat_ps.load(Relaxed) < arrived_ps {
            self.tat_ps.fetch_max(arrived_ps, Relaxed);
        }
        let tat = self.tat_ps.fetch_add(cost_ps, Relaxed) + cost_ps;
        tat.saturating_sub(now_ps + BURST_PS)
    }

    /// The same for a bucket only its owner thread touches.
    pub fn take_owned(&self, arrived_ps: u64, now_ps: u64, cost_ps: u64) -> u64 {
        let tat = self.tat_ps.load(Relaxed).max(arrived_ps) + cost_ps;
        self.tat_ps.store(tat, Relaxed);
        tat.saturating_sub(now_ps + BURST_PS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000_000;

    #[test]
    fn an_idle_bucket_grants_a_burst_without_waiting() {
        let b = Bucket::default();
        assert_eq!(b.take_shared(10 * US, 10 * US, US / 2), 0);
        assert_eq!(b.take_shared(10 * US, 10 * US, US / 2), 0);
        // The third half-microsecond goes beyond the burst.
        assert_eq!(b.take_shared(10 * US, 10 * US, US / 2), US / 2);
    }

    #[test]
    fn a_saturated_bucket_paces_requests_at_its_rate() {
        let b = Bucket::default();
        // 1 GB/s: 1000 ps per byte; 4 KiB requests at one instant.
        let cost = 4096 * ps_per_byte(1.0);
        let waits: Vec<u64> = (0..4).map(|_| b.take_owned(0, 0, cost)).collect();
        assert_eq!(
            waits,
            [cost - BURST_PS, 2 * cost - BURST_PS, 3 * cost - BURST_PS, 4 * cost - BURST_PS]
        );
    }

    #[test]
    fn time_that_passed_idle_is_not_banked_beyond_the_burst() {
        let b = Bucket::default();
        b.take_owned(0, 0, 5 * US);
        // Long after: the bucket restarts at `now`, with one burst only.
        assert_eq!(b.take_owned(100 * US, 100 * US, 3 * US), 2 * US);
    }

    #[test]
    fn bytes_that_arrived_earlier_have_been_moving_since() {
        let b = Bucket::default();
        // 5 µs of medium time flushed from t = 10 µs on, fenced at 13 µs:
        // the medium started at 10, ends at 15, the burst lets the fence go at 14.
        assert_eq!(b.take_owned(10 * US, 13 * US, 5 * US), US);
        // Fenced after the medium is done: no wait, and nothing banked.
        assert_eq!(b.take_owned(20 * US, 26 * US, 5 * US), 0);
        assert_eq!(b.take_owned(30 * US, 30 * US, 2 * US), US);
    }

    #[test]
    fn owned_and_shared_buckets_agree_on_one_thread() {
        let (a, b) = (Bucket::default(), Bucket::default());
        for (now, cost) in [(0, 700_000), (100_000, 900_000), (5 * US, 2 * US), (5 * US, US)] {
            assert_eq!(a.take_owned(now, now, cost), b.take_shared(now, now, cost));
        }
    }

    #[test]
    fn costs_per_byte_follow_the_bandwidth() {
        assert_eq!(ps_per_byte(1.0), 1000);
        assert_eq!(ps_per_byte(13.9), 72);
        assert_eq!(ps_per_byte(1e6), 1);
    }
}
