//! One thread's write-combining buffer: the last few media granules
//! (XPLines on Optane) this thread wrote back, oldest replaced first.
//!
//! A flushed line whose granule is in the buffer merges into it for free; a
//! line of another granule costs one whole granule of media write and takes
//! the oldest entry's place. So four sequential 64-byte flushes of one
//! 256-byte XPLine cost 256 media bytes, and four 64-byte flushes of four
//! scattered XPLines cost 1024: four times the bytes. With no entries
//! (`combine_lines` = 0) every line costs a granule.
//!
//! Only its owner thread touches a buffer: loads and stores are relaxed and
//! never read-modify-write, like the worker counters.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::params::MAX_COMBINE_LINES;

#[derive(Debug, Default)]
pub struct Combiner {
    /// Granule index + 1 of each entry; 0 is empty.
    entries: [AtomicU64; MAX_COMBINE_LINES as usize],
    /// Next entry to replace (FIFO).
    next: AtomicU64,
}

impl Combiner {
    /// Media bytes that writing back `[offset, offset + len)` costs, with
    /// `capacity` entries of `granularity` bytes (a power of two).
    pub fn write_back(&self, offset: u64, len: u64, granularity: u64, capacity: u32) -> u64 {
        if len == 0 {
            return 0;
        }
        let shift = granularity.trailing_zeros();
        let (first, last) = (offset >> shift, (offset + len - 1) >> shift);
        let mut granules = 0;
        for granule in first..=last {
            if !self.hit_or_insert(granule + 1, capacity as usize) {
                granules += 1;
            }
        }
        granules * granularity
    }

    fn hit_or_insert(&self, tag: u64, capacity: usize) -> bool {
        if capacity == 0 {
            return false;
        }
        let entries = &self.entries[..capacity];
        if entries.iter().any(|e| e.load(Relaxed) == tag) {
            return true;
        }
        // The cursor stays below the capacity (no division on the hot path);
        // a capacity that shrank since is caught by the comparison.
        let next = self.next.load(Relaxed) as usize;
        let next = if next < capacity { next } else { 0 };
        entries[next].store(tag, Relaxed);
        self.next.store(if next + 1 == capacity { 0 } else { next + 1 } as u64, Relaxed);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_lines_of_one_xpline_cost_one_media_write() {
        let c = Combiner::default();
        let bytes: u64 = (0..4).map(|i| c.write_back(4096 + i * 64, 64, 256, 24)).sum();
        assert_eq!(bytes, 256);
    }

    #[test]
    fn scattered_lines_cost_four_times_the_bytes() {
        let c = Combiner::default();
        let bytes: u64 = (0..4).map(|i| c.write_back(i << 20, 64, 256, 24)).sum();
        assert_eq!(bytes, 4 * 256);
        assert_eq!(bytes / (4 * 64), 4);
    }

    #[test]
    fn a_granule_evicted_by_newer_ones_costs_again() {
        let c = Combiner::default();
        assert_eq!(c.write_back(0, 64, 256, 2), 256);
        assert_eq!(c.write_back(1024, 64, 256, 2), 256);
        assert_eq!(c.write_back(64, 64, 256, 2), 0);
        assert_eq!(c.write_back(2048, 64, 256, 2), 256);
        // Granule 0 was the oldest and is gone.
        assert_eq!(c.write_back(128, 64, 256, 2), 256);
    }

    #[test]
    fn without_entries_every_line_costs_a_granule() {
        let c = Combiner::default();
        assert_eq!(c.write_back(0, 64, 64, 0), 64);
        assert_eq!(c.write_back(0, 64, 64, 0), 64);
        assert_eq!(c.write_back(0, 1024, 256, 0), 1024);
    }

    #[test]
    fn a_range_spanning_granules_counts_each_once() {
        let c = Combiner::default();
        assert_eq!(c.write_back(200, 1024, 256, 24), 5 * 256);
        assert_eq!(c.write_back(200, 1024, 256, 24), 0);
    }
}
