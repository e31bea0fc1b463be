//! The device model's clock: the TSC in production, a hand-moved clock in
//! tests (so that the token buckets are tested without timing).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Nanoseconds since an arbitrary origin, monotonic.
pub trait Clock: Send + Sync + 'static {
    fn now_ns(&self) -> u64;
}

/// The invariant TSC, scaled by [`crate::cpu::tsc_ticks_per_ns`].
#[derive(Debug)]
pub struct TscClock {
    origin: u64,
    ns_per_tick: f64,
}

impl Default for TscClock {
    fn default() -> Self {
        TscClock { origin: crate::cpu::rdtsc(), ns_per_tick: 1.0 / crate::cpu::tsc_ticks_per_ns() }
    }
}

impl Clock for TscClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        (crate::cpu::rdtsc().wrapping_sub(self.origin) as f64 * self.ns_per_tick) as u64
    }
}

/// A clock that moves only when told to (tests, `zen probe`'s self-check).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn advance(&self, ns: u64) {
        self.0.fetch_add(ns, Relaxed);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.0.load(Relaxed)
    }
}
