//! Per-worker NVM counters: always on, cache-padded, written only by their owner.
//!
//! Each worker slot of a pool owns one [`WorkerCounters`]; the persist
//! primitives bump it on every call. Owners update with relaxed load + store
//! (no read-modify-write: nobody else writes the slot), readers take
//! [`CounterSnapshot`]s at any time and subtract two snapshots to get the cost
//! of whatever ran in between, e.g. one transaction.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Optane's internal write unit: writes are counted in distinct 256-byte blocks too.
pub const XPLINE: u64 = 256;

/// The counters of one worker slot. See the module docs for the update rules.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    bytes_written: AtomicU64,
    bytes_read: AtomicU64,
    lines_flushed: AtomicU64,
    fences: AtomicU64,
    blocks_written: AtomicU64,
    stall_ns: AtomicU64,
    remote_reads: AtomicU64,
    remote_writes: AtomicU64,
    /// Last 256-byte block counted, so consecutive writes to one block count once.
    last_block: AtomicU64,
    /// Lines flushed since this worker's last fence (what the latency model charges).
    lines_since_fence: AtomicU64,
}

#[inline]
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

impl WorkerCounters {
    pub(crate) fn on_write(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        bump(&self.bytes_written, len);
        let first = offset / XPLINE;
        let last = (offset + len - 1) / XPLINE;
        let previous = self.last_block.load(Relaxed);
        // `previous` is stored +1 so that 0 means "none".
        let skip = u64::from(previous == first + 1);
        bump(&self.blocks_written, last - first + 1 - skip);
        self.last_block.store(last + 1, Relaxed);
    }

    pub(crate) fn on_read(&self, len: u64) {
        bump(&self.bytes_read, len);
    }

    pub(crate) fn on_flush(&self, lines: u64) {
        bump(&self.lines_flushed, lines);
        bump(&self.lines_since_fence, lines);
    }

    /// Count a fence; returns the lines flushed since the previous one.
    pub(crate) fn on_fence(&self) -> u64 {
        bump(&self.fences, 1);
        self.lines_since_fence.swap(0, Relaxed)
    }

    pub(crate) fn on_stall(&self, ns: u64) {
        bump(&self.stall_ns, ns);
    }

    /// Count an access to memory of another NUMA node (real or virtual).
    pub fn on_remote(&self, write: bool) {
        bump(if write { &self.remote_writes } else { &self.remote_reads }, 1);
    }

    /// Count modelled NVM read traffic that did not go through [`crate::Persister::read`]
    /// (e.g. a cache miss served from a mapped slot).
    pub fn add_read_bytes(&self, len: u64) {
        self.on_read(len);
    }

    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            bytes_written: self.bytes_written.load(Relaxed),
            bytes_read: self.bytes_read.load(Relaxed),
            lines_flushed: self.lines_flushed.load(Relaxed),
            fences: self.fences.load(Relaxed),
            blocks_written: self.blocks_written.load(Relaxed),
            stall_ns: self.stall_ns.load(Relaxed),
            remote_reads: self.remote_reads.load(Relaxed),
            remote_writes: self.remote_writes.load(Relaxed),
        }
    }
}

/// A point-in-time copy of counters; subtract two to get a difference.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CounterSnapshot {
    /// Bytes stored to NVM (tuple data, headers, zeroing, logs).
    pub bytes_written: u64,
    /// Bytes read from NVM (modelled: cache misses, recovery scans).
    pub bytes_read: u64,
    /// Cache lines written back (`clwb`).
    pub lines_flushed: u64,
    /// Store fences (`sfence`).
    pub fences: u64,
    /// Distinct 256-byte blocks written (consecutive repeats counted once).
    pub blocks_written: u64,
    /// Nanoseconds spent in emulated NVM latency.
    pub stall_ns: u64,
    /// Reads of memory on another NUMA node.
    pub remote_reads: u64,
    /// Writes to memory on another NUMA node.
    pub remote_writes: u64,
}

impl CounterSnapshot {
    /// `self - earlier`, field by field (wrapping, so it never panics).
    pub fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        CounterSnapshot {
            bytes_written: self.bytes_written.wrapping_sub(earlier.bytes_written),
            bytes_read: self.bytes_read.wrapping_sub(earlier.bytes_read),
            lines_flushed: self.lines_flushed.wrapping_sub(earlier.lines_flushed),
            fences: self.fences.wrapping_sub(earlier.fences),
            blocks_written: self.blocks_written.wrapping_sub(earlier.blocks_written),
            stall_ns: self.stall_ns.wrapping_sub(earlier.stall_ns),
            remote_reads: self.remote_reads.wrapping_sub(earlier.remote_reads),
            remote_writes: self.remote_writes.wrapping_sub(earlier.remote_writes),
        }
    }

    /// Field-by-field sum.
    pub fn add(&self, other: &CounterSnapshot) -> CounterSnapshot {
        CounterSnapshot {
            bytes_written: self.bytes_written.wrapping_add(other.bytes_written),
            bytes_read: self.bytes_read.wrapping_add(other.bytes_read),
            lines_flushed: self.lines_flushed.wrapping_add(other.lines_flushed),
            fences: self.fences.wrapping_add(other.fences),
            blocks_written: self.blocks_written.wrapping_add(other.blocks_written),
            stall_ns: self.stall_ns.wrapping_add(other.stall_ns),
            remote_reads: self.remote_reads.wrapping_add(other.remote_reads),
            remote_writes: self.remote_writes.wrapping_add(other.remote_writes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_writes_to_one_block_count_once() {
        let c = WorkerCounters::default();
        c.on_write(0, 64);
        c.on_write(64, 64);
        c.on_write(256, 16);
        let s = c.snapshot();
        assert_eq!(s.bytes_written, 144);
        assert_eq!(s.blocks_written, 2);
    }

    #[test]
    fn difference_of_snapshots_is_the_work_in_between() {
        let c = WorkerCounters::default();
        c.on_fence();
        let a = c.snapshot();
        c.on_flush(3);
        c.on_fence();
        let d = c.snapshot().since(&a);
        assert_eq!((d.lines_flushed, d.fences), (3, 1));
    }
}
