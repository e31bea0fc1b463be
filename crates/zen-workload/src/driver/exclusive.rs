//! Zen+ exclusive time inside the measured window.
//!
//! The engine adds an exclusive stage's whole duration to `exclusive_us`
//! when the stage ends, and counts `stage_switches` when one begins. The
//! difference of two readings therefore mixes windows: a stage begun in the
//! warmup and ended in the measured interval added all of its time to the
//! interval while its switch stayed in the warmup (a run once reported 8.5 s
//! exclusive in a 5 s window with 0 switches). The coordinator watches, at
//! every tick, whether a stage is running (and which, by the switch count),
//! and [`ExclusiveWatch::window_us`] cuts the stages at the window's edges:
//! the part of a stage before the window's start is taken off, a stage still
//! running at the end counts up to the end. The edges are known to within one
//! coordinator tick (20 ms at most); the result is clamped to the window.

use std::time::Instant;

use zen_engine::zen::adaptive::AdaptiveStats;

/// What the coordinator saw of the exclusive stages.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExclusiveWatch {
    /// The running stage: when it was first seen, and the switch count then.
    running: Option<(Instant, u64)>,
    /// The stage running when the window opened, and its part before the window.
    at_start: Option<((Instant, u64), f64)>,
}

impl ExclusiveWatch {
    /// One reading of the engine's counters at `now`.
    pub fn observe(&mut self, now: Instant, stats: &AdaptiveStats) {
        if !stats.exclusive_now {
            self.running = None;
        } else if self.running.is_none_or(|(_, switches)| switches != stats.stage_switches) {
            self.running = Some((now, stats.stage_switches));
        }
    }

    /// The measured window opens at `now`.
    pub fn open(&mut self, now: Instant) {
        self.at_start =
            self.running.map(|(since, n)| ((since, n), (now - since).as_secs_f64() * 1e6));
    }

    /// Exclusive microseconds inside the window [`open`, `end`], from the
    /// engine's count of the stages that ended in it (`ended_us`).
    pub fn window_us(&self, ended_us: u64, window_start: Instant, end: Instant) -> u64 {
        let window = (end - window_start).as_secs_f64() * 1e6;
        let mut us = ended_us as f64;
        let still_first = self.at_start.is_some_and(|(stage, _)| self.running == Some(stage));
        if let Some((_, before)) = self.at_start
            && !still_first
        {
            // The stage running at the start has ended: its count holds its pre-window part.
            us -= before;
        }
        if let Some((since, _)) = self.running {
            // A stage still running at the end: its time in the window so far.
            let from = if since > window_start { since } else { window_start };
            us += (end - from).as_secs_f64() * 1e6;
        }
        us.clamp(0.0, window) as u64
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn stats(running: bool, switches: u64) -> AdaptiveStats {
        AdaptiveStats { exclusive_now: running, stage_switches: switches, ..Default::default() }
    }

    #[test]
    fn a_stage_begun_in_the_warmup_counts_from_the_window_start() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = ExclusiveWatch::default();
        w.observe(ms(0), &stats(true, 1)); // begun in the warmup
        w.open(ms(3000));
        w.observe(ms(8500), &stats(false, 1)); // ended inside the window
        // The engine counted all 8.5 s when it ended; 5.5 s are in the window.
        assert_eq!(w.window_us(8_500_000, ms(3000), ms(10_000)), 5_500_000);
    }

    #[test]
    fn a_stage_running_at_the_end_counts_up_to_the_end() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = ExclusiveWatch::default();
        w.open(ms(0));
        w.observe(ms(1000), &stats(true, 1));
        w.observe(ms(1500), &stats(true, 1));
        // Nothing ended; 1 s of the running stage is inside the window.
        assert_eq!(w.window_us(0, ms(0), ms(2000)), 1_000_000);
    }

    #[test]
    fn a_stage_spanning_the_whole_window_is_the_window() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = ExclusiveWatch::default();
        w.observe(ms(0), &stats(true, 1));
        w.open(ms(1000));
        w.observe(ms(2000), &stats(true, 1));
        assert_eq!(w.window_us(0, ms(1000), ms(4000)), 3_000_000);
    }

    #[test]
    fn a_new_stage_between_two_ticks_is_told_apart_by_its_switch() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = ExclusiveWatch::default();
        w.observe(ms(0), &stats(true, 1));
        w.open(ms(500));
        // Stage 1 ended (1 s counted) and stage 2 began before the next tick.
        w.observe(ms(1020), &stats(true, 2));
        let us = w.window_us(1_000_000, ms(500), ms(2000));
        // 0.5 s of stage 1 in the window, then stage 2 from 1.02 s to 2 s.
        assert_eq!(us, 500_000 + 980_000);
    }

    #[test]
    fn stages_inside_the_window_are_the_engines_count() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut w = ExclusiveWatch::default();
        w.open(ms(0));
        w.observe(ms(100), &stats(true, 1));
        w.observe(ms(400), &stats(false, 1));
        assert_eq!(w.window_us(310_000, ms(0), ms(1000)), 310_000);
    }
}
