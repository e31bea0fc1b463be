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
    media_bytes_written: AtomicU64,
    read_latency_ns: AtomicU64,
    write_latency_ns: AtomicU64,
    bandwidth_wait_ns: AtomicU64,
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

    /// Count what the device model charged for one access (`emu` only).
    pub(crate) fn on_charge(&self, charge: &crate::device::Charge) {
        let stall = charge.stall_ns();
        if stall == 0 && charge.media_bytes_written == 0 {
            return;
        }
        bump(&self.stall_ns, stall);
        bump(&self.read_latency_ns, charge.read_latency_ns);
        bump(&self.write_latency_ns, charge.write_latency_ns);
        bump(&self.bandwidth_wait_ns, charge.bandwidth_wait_ns);
        bump(&self.media_bytes_written, charge.media_bytes_written);
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
            media_bytes_written: self.media_bytes_written.load(Relaxed),
            read_latency_ns: self.read_latency_ns.load(Relaxed),
            write_latency_ns: self.write_latency_ns.load(Relaxed),
            bandwidth_wait_ns: self.bandwidth_wait_ns.load(Relaxed),
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
    /// Nanoseconds of modelled NVM stall (`emu`): the sum of
    /// `read_latency_ns`, `write_latency_ns` and `bandwidth_wait_ns`.
    pub stall_ns: u64,
    /// Reads of memory on another NUMA node.
    pub remote_reads: u64,
    /// Writes to memory on another NUMA node.
    pub remote_writes: u64,
    /// Bytes the modelled medium wrote (`emu`): flushed lines rounded to the
    /// media granularity after write combining, charged at fences.
    pub media_bytes_written: u64,
    /// Modelled read latency (`emu`).
    pub read_latency_ns: u64,
    /// Modelled persist (write) latency at fences (`emu`).
    pub write_latency_ns: u64,
    /// Modelled wait for read or write bandwidth (`emu`).
    pub bandwidth_wait_ns: u64,
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
            media_bytes_written: self.media_bytes_written.wrapping_sub(earlier.media_bytes_written),
            read_latency_ns: self.read_latency_ns.wrapping_sub(earlier.read_latency_ns),
            write_latency_ns: self.write_latency_ns.wrapping_sub(earlier.write_latency_ns),
            bandwidth_wait_ns: self.bandwidth_wait_ns.wrapping_sub(earlier.bandwidth_wait_ns),
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
            media_bytes_written: self.media_bytes_written.wrapping_add(other.media_bytes_written),
            read_latency_ns: self.read_latency_ns.wrapping_add(other.read_latency_ns),
            write_latency_ns: self.write_latency_ns.wrapping_add(other.write_latency_ns),
            bandwidth_wait_ns: self.bandwidth_wait_ns.wrapping_add(other.bandwidth_wait_ns),
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

    #[test]
    fn a_charge_is_counted_split_and_in_total() {
        let c = WorkerCounters::default();
        let charge = crate::device::Charge {
            read_latency_ns: 3,
            write_latency_ns: 100,
            bandwidth_wait_ns: 40,
            media_bytes_written: 256,
        };
        c.on_charge(&charge);
        c.on_charge(&charge);
        let s = c.snapshot();
        assert_eq!(s.stall_ns, 286);
        assert_eq!((s.read_latency_ns, s.write_latency_ns, s.bandwidth_wait_ns), (6, 200, 80));
        assert_eq!(s.media_bytes_written, 512);
        assert_eq!(s.since(&CounterSnapshot::default()).add(&s).media_bytes_written, 1024);
    }
}
