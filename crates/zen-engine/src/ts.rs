//! Timestamps (Tx-CTS) and the global clock.
//!
//! A Tx-CTS is `counter << 8 | worker`: unique (the worker id is in the low
//! bits), strictly increasing per worker, and, because every protocol draws
//! it from the one global counter *after* it holds (or has validated) every
//! tuple it writes, a newer version of a tuple always has the larger Tx-CTS.
//! Tx-CTS values stay below 2^61 so that protocols can keep three flag bits
//! beside them in one word. After recovery the counter resumes above the
//! largest timestamp found in the pool.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of a Tx-CTS that hold the worker id.
pub const WORKER_BITS: u32 = 8;
/// Tx-CTS values are below this bound.
pub const MAX_CTS: u64 = 1 << 61;

/// The global timestamp counter.
#[derive(Debug)]
pub struct Clock {
    counter: AtomicU64,
}

impl Clock {
    /// A clock whose next timestamp is above `floor_cts`.
    pub fn resume_above(floor_cts: u64) -> Clock {
        Clock { counter: AtomicU64::new((floor_cts >> WORKER_BITS) + 1) }
    }

    /// A fresh, unique timestamp for `worker` (strictly above every earlier one).
    #[inline]
    pub fn next(&self, worker: usize) -> u64 {
        crate::sched::point();
        let c = self.counter.fetch_add(1, Ordering::SeqCst);
        let cts = (c << WORKER_BITS) | worker as u64;
        assert!(cts < MAX_CTS, "timestamp space exhausted");
        cts
    }

    /// Advance the clock without drawing a commit timestamp: returns a value
    /// above every timestamp drawn or read (`now`) before it.
    #[inline]
    pub fn tick(&self) -> u64 {
        (self.counter.fetch_add(1, Ordering::SeqCst) + 1) << WORKER_BITS
    }

    /// The current `now()`, advancing the clock past it: every transaction
    /// that begins afterwards publishes a larger `now()`. Stamps retired
    /// Met-Cache entries (C4) where nothing else may advance the clock (a
    /// read-only workload that evicts).
    #[inline]
    pub fn now_and_advance(&self) -> u64 {
        self.counter.fetch_add(1, Ordering::SeqCst) << WORKER_BITS
    }

    /// Raise the clock so that `now()` is above `cts` (per-worker clocks).
    #[inline]
    pub fn raise_above(&self, cts: u64) {
        let counter = (cts >> WORKER_BITS) + 1;
        if self.counter.load(Ordering::Relaxed) < counter {
            self.counter.fetch_max(counter, Ordering::SeqCst);
        }
    }

    /// A timestamp no larger than any timestamp handed out from now on.
    #[inline]
    pub fn now(&self) -> u64 {
        self.counter.load(Ordering::SeqCst) << WORKER_BITS
    }
}

/// The worker that produced `cts`.
pub fn worker_of(cts: u64) -> usize {
    (cts & ((1 << WORKER_BITS) - 1)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_unique_increasing_and_carry_the_worker() {
        let clock = Clock::resume_above(0);
        let a = clock.next(3);
        let b = clock.next(7);
        assert!(b > a);
        assert_eq!(worker_of(a), 3);
        assert_eq!(worker_of(b), 7);
        assert!(clock.now() > b);
    }

    #[test]
    fn resumed_clock_is_above_the_floor() {
        let clock = Clock::resume_above(5 << WORKER_BITS | 9);
        assert!(clock.next(0) > (5 << WORKER_BITS | 9));
    }
}
