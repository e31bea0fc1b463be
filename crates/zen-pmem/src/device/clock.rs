//! The device model's clock: the TSC in production, a hand-moved clock in
//! tests (so that the token buckets are tested without timing).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How an access's stamp is taken, which decides what it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamp {
    /// After every earlier load is globally visible (`rdtscp`): a read's
    /// wait starts when its data has arrived, so the machine's own miss is
    /// not overlapped with the modelled latency.
    AfterLoads,
    /// Whenever the CPU gets to it (`rdtsc`): a flush's arrival time, which
    /// must not wait for the write-back it has just started.
    Unordered,
    /// After every earlier store and write-back has completed (`mfence;
    /// lfence; rdtsc`): a fence's stamp, so that the modelled persist
    /// latency starts when this machine's own persist has ended instead of
    /// running under its drain. An unordered stamp after `sfence` let a
    /// 100-ns charge vanish under the ~200–450 ns the cache-missing write-back
    /// takes here, while the busy-wait still kept the next persist's miss
    /// from overlapping that write-back (docs/design/nvm-emulation.md,
    /// "Calibration", 4).
    AfterDrain,
}

/// Nanoseconds since an arbitrary origin, monotonic.
pub trait Clock: Send + Sync + 'static {
    /// The time, ordered after the caller's earlier loads ([`Stamp::AfterLoads`]).
    fn now_ns(&self) -> u64;

    /// The time, not ordered after earlier memory operations
    /// ([`Stamp::Unordered`]).
    fn now_unordered_ns(&self) -> u64 {
        self.now_ns()
    }

    /// The time, ordered after the caller's earlier stores and write-backs
    /// ([`Stamp::AfterDrain`]).
    fn now_drained_ns(&self) -> u64 {
        self.now_ns()
    }

    /// The time, taken as `stamp` says.
    fn stamp_ns(&self, stamp: Stamp) -> u64 {
        match stamp {
            Stamp::AfterLoads => self.now_ns(),
            Stamp::Unordered => self.now_unordered_ns(),
            Stamp::AfterDrain => self.now_drained_ns(),
        }
    }

    /// Nanoseconds a modelled access stamped as `stamp` spends outside the
    /// span its wait covers (the stamp itself, the wait's last poll and its
    /// exit): taken off every deadline (see [`TscClock::fixed_cost_ns`]). 0
    /// for a clock that only moves when told to.
    fn fixed_cost_ns(&self, stamp: Stamp) -> u64 {
        let _ = stamp;
        0
    }
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

impl TscClock {
    fn ns_of(&self, tick: u64) -> u64 {
        (tick.wrapping_sub(self.origin) as f64 * self.ns_per_tick) as u64
    }

    /// Busy-wait until the clock reads `deadline_ns` (at once if it has
    /// passed); returns the time it read when it stopped. The loop polls the
    /// raw TSC against a precomputed tick (no conversion per poll) and issues
    /// no `pause` (`spin_loop`): on recent cores that takes ~140 cycles, most
    /// of a 72-ns wait.
    #[inline]
    pub fn spin_until(&self, deadline_ns: u64) -> u64 {
        let ticks = (deadline_ns as f64 / self.ns_per_tick) as u64;
        let deadline_tick = self.origin.wrapping_add(ticks);
        loop {
            let now = crate::cpu::rdtsc();
            if now.wrapping_sub(deadline_tick) as i64 >= 0 {
                return self.ns_of(now);
            }
        }
    }
}

impl Clock for TscClock {
    /// Ordered after the caller's earlier loads (`rdtscp`, see
    /// [`crate::cpu::rdtsc_ordered`]).
    #[inline]
    fn now_ns(&self) -> u64 {
        self.ns_of(crate::cpu::rdtsc_ordered())
    }

    #[inline]
    fn now_unordered_ns(&self) -> u64 {
        self.ns_of(crate::cpu::rdtsc())
    }

    #[inline]
    fn now_drained_ns(&self) -> u64 {
        self.ns_of(crate::cpu::rdtsc_after_drain())
    }

    /// Measured once per process and kind of stamp: the stamp-and-wait
    /// sequence of a modelled access (a stamp, a deadline less the carried
    /// overshoot, a spin to it) run for a fixed wait, in 8 batches of 256;
    /// the least time per access over the wait is the cost (at most 200
    /// ns). On this project's 2-core KVM guest it is ~40 ns with `rdtscp`
    /// (~23 ns), the spin's last `rdtsc` poll (~12 ns) and the conversions.
    fn fixed_cost_ns(&self, stamp: Stamp) -> u64 {
        static AFTER_LOADS: OnceLock<u64> = OnceLock::new();
        static UNORDERED: OnceLock<u64> = OnceLock::new();
        // A drained stamp's `mfence` completes when the fence's write-backs
        // do: that time is this machine's own persist, which the wait must
        // follow. What comes after it (`lfence; rdtsc`, the wait's exit) is
        // the model's own cost, the same as an ordered `rdtscp` stamp's: a
        // loop of drained stamps with nothing to drain would also count the
        // `mfence` itself (~13 ns more here) and take it off the latency.
        let (cost, measured) = match stamp {
            Stamp::AfterLoads | Stamp::AfterDrain => (&AFTER_LOADS, Stamp::AfterLoads),
            Stamp::Unordered => (&UNORDERED, Stamp::Unordered),
        };
        *cost.get_or_init(|| self.calibrate(measured))
    }
}

impl TscClock {
    fn calibrate(&self, stamp: Stamp) -> u64 {
        const WAIT_NS: u64 = 150;
        let per_tick = self.ns_per_tick;
        let mut least = f64::INFINITY;
        for _ in 0..8 {
            let mut credit = 0u64;
            let start = crate::cpu::rdtsc_ordered();
            for _ in 0..256 {
                let started = self.stamp_ns(stamp);
                let deadline = (started + WAIT_NS).saturating_sub(credit);
                let resumed = self.spin_until(deadline);
                credit = resumed.saturating_sub(deadline).min(super::MAX_CREDIT_NS);
            }
            let per_access =
                crate::cpu::rdtsc_ordered().wrapping_sub(start) as f64 * per_tick / 256.0;
            least = least.min(per_access);
        }
        ((least - WAIT_NS as f64).max(0.0) as u64).min(200)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_stamp_reads_the_same_clock_and_costs_what_an_ordered_one_does() {
        let clock = TscClock::default();
        let before = clock.now_unordered_ns();
        let drained = clock.now_drained_ns();
        assert!(drained >= before, "{drained} < {before}");
        assert!(clock.now_ns() >= drained);
        // The `mfence` before it is the machine's own persist, not the
        // model's cost: only what an `rdtscp` stamp costs comes off the wait.
        assert_eq!(clock.fixed_cost_ns(Stamp::AfterDrain), clock.fixed_cost_ns(Stamp::AfterLoads));
        assert!(clock.fixed_cost_ns(Stamp::AfterDrain) <= 200);
    }
}
