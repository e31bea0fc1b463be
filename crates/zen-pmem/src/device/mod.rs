//! The NVM device model of the `emu` backend: one [`Device`] per pool, shared
//! by every thread slot of it.
//!
//! WHAT IT MODELS
//!
//! ```text
//!   read (thread t, offset, len)                       fence (thread t)
//!     latency   random or sequential (t's last read)     latency   persist_ns if t flushed
//!               + read_per_line_ns per further line      media     bytes t's flushes cost after
//!     media     lines rounded to the granularity                   write combining (flush time)
//!     wait      read bucket (media bytes)                wait      write bucket (media bytes),
//!                                                                  rate falling past a few writers
//! ```
//!
//! - **Latency** is charged per access, as before: extra nanoseconds over
//!   this machine's DRAM ([`DeviceParams`]).
//! - **Bandwidth** is a token bucket per direction ([`bucket`]). Without
//!   `--nvm-share` the buckets are the device's, shared by the pool's
//!   threads, and the write bucket's rate is the peak write bandwidth times
//!   [`DeviceParams::write_share`] of the writers seen in the last 50 µs
//!   ([`WriterWindow`]). With `--nvm-share N` each thread slot owns its
//!   buckets, at 1/N of the device's bandwidth with N writers: two real
//!   threads then feel the per-thread pressure of an N-thread run.
//! - **Media granularity and write combining**: each flush goes through the
//!   thread's write-combining buffer ([`combine`]) at flush time; what misses
//!   costs one granule of media bytes, charged to the write bucket at the
//!   thread's next fence.
//!
//! WHAT IS SERIALISED
//!
//! Nothing, with an idle device (`dram`: the backend never calls the model).
//! A flush touches only its thread's own slot (the combining buffer and the
//! pending media bytes: relaxed loads and stores). A fence or read on a
//! modelled device without `--nvm-share` performs one `fetch_add` on the
//! shared bucket (plus a `fetch_max` when the bucket had gone idle), and a
//! fence records its thread once per 50 µs window in a shared mask: that
//! shared cache line is what a shared device costs, and it is the model (the
//! threads do compete for one medium). With `--nvm-share` a fence and a read
//! touch only the thread's own slot.
//!
//! WHAT IT DOES NOT MODEL
//!
//! - Writes never flushed (evicted from the CPU cache by itself), and eADR,
//!   where `Persister::flush` issues nothing: no media write is charged.
//! - Read-modify-write of a partially written XPLine on eviction (a media
//!   read the real DIMM performs): a partial granule costs its write only.
//! - One write-combining buffer shared by all threads of a DIMM: each thread
//!   has its own few entries (the DIMMs' buffers divided among the threads).
//! - Reads by no worker slot (`PmemBackend::read`: recovery, catalog) pay
//!   random latency but no bandwidth.

pub mod bucket;
pub mod clock;
pub mod combine;
pub mod params;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

pub use bucket::Bucket;
pub use clock::{Clock, ManualClock, TscClock};
pub use combine::Combiner;
pub use params::{DeviceParams, NvmProfile, ParamError};

use crate::pool::MAX_THREADS;

/// Writers are counted over windows of this length.
pub const WRITER_WINDOW_NS: u64 = 50_000;
/// Writers the window can tell apart (a bit each; slots fold modulo 64).
pub const MAX_COUNTED_WRITERS: u32 = 64;

/// What one access costs in the model; the backend waits for `stall_ns()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charge {
    pub read_latency_ns: u64,
    pub write_latency_ns: u64,
    pub bandwidth_wait_ns: u64,
    /// Bytes the medium writes for this access (fences only).
    pub media_bytes_written: u64,
}

impl Charge {
    pub fn stall_ns(&self) -> u64 {
        self.read_latency_ns + self.write_latency_ns + self.bandwidth_wait_ns
    }
}

/// One thread slot's state; only its owner writes it (see the module docs).
#[derive(Debug, Default)]
struct ThreadState {
    combiner: Combiner,
    /// Media bytes of flushes since the thread's last fence.
    pending_media_bytes: AtomicU64,
    /// Line index + 1 after the thread's last read (0: none yet).
    next_read_line: AtomicU64,
    /// The thread's own buckets under `--nvm-share`.
    read_bucket: Bucket,
    write_bucket: Bucket,
}

/// The distinct writers of the current window, and the count of the last.
#[derive(Debug, Default)]
pub struct WriterWindow {
    mask: AtomicU64,
    started_ns: AtomicU64,
    previous: AtomicU64,
}

impl WriterWindow {
    /// Record `thread` writing at `now_ns`; returns the writers to assume:
    /// the larger of the last window's and the current one's so far.
    pub fn note(&self, thread: u32, now_ns: u64) -> u32 {
        let bit = 1u64 << (thread % MAX_COUNTED_WRITERS);
        let mut mask = self.mask.load(Relaxed);
        if mask & bit == 0 {
            mask = self.mask.fetch_or(bit, Relaxed) | bit;
        }
        let started = self.started_ns.load(Relaxed);
        if now_ns.saturating_sub(started) >= WRITER_WINDOW_NS
            && self.started_ns.compare_exchange(started, now_ns, Relaxed, Relaxed).is_ok()
        {
            // This thread closes the window and opens the next one.
            let closed = self.mask.swap(bit, Relaxed);
            self.previous.store(u64::from(closed.count_ones()), Relaxed);
        }
        (self.previous.load(Relaxed) as u32).max(mask.count_ones()).max(1)
    }
}

/// The device of one pool. See the module docs.
pub struct Device<C: Clock = TscClock> {
    params: DeviceParams,
    clock: C,
    threads: Box<[CachePadded<ThreadState>]>,
    read_bucket: Bucket,
    write_bucket: Bucket,
    writers: WriterWindow,
    read_ps_per_byte: Option<u64>,
    /// Write cost per byte for 1..=64 writers (index 0 unused), or with `--nvm-share`.
    write_ps_per_byte: Option<Box<[u64]>>,
}

impl<C: Clock> Device<C> {
    /// A device with `params` (validated by the caller) reading `clock`.
    pub fn new(params: DeviceParams, clock: C) -> Self {
        let read_ps_per_byte = params.thread_read_bandwidth().map(bucket::ps_per_byte);
        let write_ps_per_byte = params.write_bandwidth_gb_per_s.map(|_| {
            (0..=MAX_COUNTED_WRITERS)
                .map(|w| {
                    let gb = params.thread_write_bandwidth(w.max(1)).unwrap_or(f64::INFINITY);
                    bucket::ps_per_byte(gb)
                })
                .collect()
        });
        Device {
            params,
            clock,
            threads: (0..MAX_THREADS).map(|_| CachePadded::new(ThreadState::default())).collect(),
            read_bucket: Bucket::default(),
            write_bucket: Bucket::default(),
            writers: WriterWindow::default(),
            read_ps_per_byte,
            write_ps_per_byte,
        }
    }

    pub fn params(&self) -> &DeviceParams {
        &self.params
    }

    pub fn clock(&self) -> &C {
        &self.clock
    }

    fn slot(&self, thread: u32) -> &ThreadState {
        &self.threads[thread as usize % MAX_THREADS]
    }

    /// `thread` wrote back `[offset, offset + len)`: run it through the
    /// thread's write-combining buffer; the media bytes wait for the fence.
    #[inline]
    pub fn on_flush(&self, thread: u32, offset: u64, len: u64) {
        let p = &self.params;
        let slot = self.slot(thread);
        let bytes =
            slot.combiner.write_back(offset, len, p.media_granularity_bytes, p.combine_lines);
        let pending = &slot.pending_media_bytes;
        pending.store(pending.load(Relaxed) + bytes, Relaxed);
    }

    /// `thread` fenced after flushing `lines_flushed` lines since its last fence.
    #[inline]
    pub fn on_fence(&self, thread: u32, lines_flushed: u64) -> Charge {
        let slot = self.slot(thread);
        let media = slot.pending_media_bytes.load(Relaxed);
        if media == 0 && lines_flushed == 0 {
            return Charge::default();
        }
        slot.pending_media_bytes.store(0, Relaxed);
        let mut charge = Charge {
            write_latency_ns: self.params.fence_cost_ns(lines_flushed.max(u64::from(media > 0))),
            media_bytes_written: media,
            ..Charge::default()
        };
        if let (Some(costs), true) = (&self.write_ps_per_byte, media > 0) {
            let now_ns = self.clock.now_ns();
            let wait_ps = match self.params.share_threads {
                Some(_) => slot.write_bucket.take_owned(now_ns * 1000, media * costs[0]),
                None => {
                    let writers = self.writers.note(thread, now_ns);
                    self.write_bucket.take_shared(now_ns * 1000, media * costs[writers as usize])
                }
            };
            charge.bandwidth_wait_ns = wait_ps.div_ceil(1000);
        }
        charge
    }

    /// `thread` (or no worker slot) read `[offset, offset + len)`.
    #[inline]
    pub fn on_read(&self, thread: Option<u32>, offset: u64, len: u64) -> Charge {
        if len == 0 {
            return Charge::default();
        }
        let p = &self.params;
        let (first, last) = (offset / 64, (offset + len - 1) / 64);
        let Some(thread) = thread else {
            return Charge { read_latency_ns: p.read_cost_ns(offset, len), ..Charge::default() };
        };
        let slot = self.slot(thread);
        let previous = slot.next_read_line.load(Relaxed);
        slot.next_read_line.store(last + 2, Relaxed);
        let g = p.media_granularity_bytes;
        let media = read_media_bytes(previous, offset, len, g);
        let continues = previous == first + 1 || media < granules_touched(offset, len, g) * g;
        let latency = if continues { p.read_sequential_ns } else { p.read_random_ns };
        let mut charge = Charge {
            read_latency_ns: latency + (last - first) * p.read_per_line_ns,
            ..Charge::default()
        };
        if let (Some(cost), true) = (self.read_ps_per_byte, media > 0) {
            let now_ps = self.clock.now_ns() * 1000;
            let wait_ps = match p.share_threads {
                Some(_) => slot.read_bucket.take_owned(now_ps, media * cost),
                None => self.read_bucket.take_shared(now_ps, media * cost),
            };
            charge.bandwidth_wait_ns = wait_ps.div_ceil(1000);
        }
        charge
    }
}

/// Granules of `granularity` bytes (a power of two: shifts, not divisions,
/// on the hot path) that `[offset, offset + len)` touches.
fn granules_touched(offset: u64, len: u64, granularity: u64) -> u64 {
    let shift = granularity.trailing_zeros();
    ((offset + len - 1) >> shift) - (offset >> shift) + 1
}

/// Media bytes a read of `[offset, offset + len)` moves: the granules it
/// touches, less the first when it is the granule the thread's previous read
/// ended in (`previous`: line after that read + 1, 0 for none), which the
/// medium has just fetched.
pub fn read_media_bytes(previous: u64, offset: u64, len: u64, granularity: u64) -> u64 {
    let touched = granules_touched(offset, len, granularity);
    let last_line_read = previous.checked_sub(2);
    let shift = granularity.trailing_zeros();
    let fetched = last_line_read.is_some_and(|l| (l * 64) >> shift == offset >> shift);
    (touched - u64::from(fetched)) * granularity
}

#[cfg(test)]
mod tests {
    use super::*;

    fn optane(share: Option<u32>) -> Device<ManualClock> {
        let params = DeviceParams { share_threads: share, ..NvmProfile::Optane.model() };
        Device::new(params, ManualClock::default())
    }

    #[test]
    fn random_and_sequential_reads_pay_their_latencies() {
        let d = optane(None);
        assert_eq!(d.on_read(Some(1), 1 << 20, 64).read_latency_ns, 224);
        assert_eq!(d.on_read(Some(1), (1 << 20) + 64, 64).read_latency_ns, 72);
        assert_eq!(d.on_read(Some(1), 5 << 20, 64).read_latency_ns, 224);
        // Re-reading within the XPLine just read is sequential too.
        assert_eq!(d.on_read(Some(1), 5 << 20, 8).read_latency_ns, 72);
        // Another thread keeps its own history.
        assert_eq!(d.on_read(Some(2), (5 << 20) + 64, 64).read_latency_ns, 224);
        // Four lines: the first's latency plus three further lines.
        assert_eq!(d.on_read(Some(3), 9 << 20, 256).read_latency_ns, 224 + 3 * 10);
        assert_eq!(d.on_read(None, 0, 8).read_latency_ns, 224);
    }

    #[test]
    fn a_fence_charges_the_media_bytes_of_the_flushes_before_it() {
        let d = optane(None);
        for i in 0..4 {
            d.on_flush(1, 4096 + i * 64, 64);
        }
        let c = d.on_fence(1, 4);
        assert_eq!((c.media_bytes_written, c.write_latency_ns), (256, 100));
        for i in 0..4 {
            d.on_flush(1, i << 20, 64);
        }
        assert_eq!(d.on_fence(1, 4).media_bytes_written, 1024);
        assert_eq!(d.on_fence(1, 0), Charge::default());
    }

    #[test]
    fn shared_write_bandwidth_paces_the_device() {
        let d = optane(None);
        // One writer: 13.9 GB/s, 72 ps per byte; 64 KiB of XPLines at one instant.
        let mut waits = Vec::new();
        for round in 0..4u64 {
            for x in 0..256 {
                d.on_flush(1, (round * 256 + x) * 256 + (1 << 30), 256);
            }
            waits.push(d.on_fence(1, 1024).bandwidth_wait_ns);
        }
        let cost_ps = 65_536 * 72;
        let expected = [1, 2, 3, 4].map(|k| (k * cost_ps - bucket::BURST_PS).div_ceil(1000));
        assert_eq!(waits, expected);
    }

    #[test]
    fn more_writers_than_the_peak_lower_the_write_rate() {
        let d = optane(None);
        d.clock().advance(WRITER_WINDOW_NS);
        // Sixteen threads write within one window, then the window closes.
        for t in 0..16 {
            d.on_flush(t, u64::from(t) << 20, 64);
            d.on_fence(t, 1);
        }
        assert_eq!(d.writers.note(0, WRITER_WINDOW_NS + 1), 16);
        d.clock().advance(WRITER_WINDOW_NS);
        assert_eq!(d.writers.note(0, 2 * WRITER_WINDOW_NS), 16, "the closed window's count");
        d.clock().advance(WRITER_WINDOW_NS);
        assert_eq!(d.writers.note(0, 3 * WRITER_WINDOW_NS), 1, "only thread 0 since");
        assert_eq!(d.write_ps_per_byte.as_ref().unwrap()[16], bucket::ps_per_byte(13.9 * 0.64));
    }

    #[test]
    fn a_shared_device_gives_each_thread_one_nth_and_keeps_threads_apart() {
        let d = optane(Some(16));
        let per_thread_ps = bucket::ps_per_byte(13.9 * 0.64 / 16.0);
        for t in [1, 2] {
            for x in 0..64 {
                d.on_flush(t, x * 256, 256);
            }
            let c = d.on_fence(t, 256);
            assert_eq!(c.media_bytes_written, 16_384);
            // Each thread's own bucket: the same wait for both threads.
            assert_eq!(
                c.bandwidth_wait_ns,
                (16_384 * per_thread_ps - bucket::BURST_PS).div_ceil(1000)
            );
        }
    }

    #[test]
    fn scattered_64_byte_writes_take_four_times_the_medium_time() {
        let scattered = optane(Some(16));
        let sequential = optane(Some(16));
        for i in 0..1024u64 {
            scattered.on_flush(1, i << 16, 64);
            sequential.on_flush(1, i * 64, 64);
        }
        let a = scattered.on_fence(1, 1024);
        let b = sequential.on_fence(1, 1024);
        assert_eq!(a.media_bytes_written, 4 * b.media_bytes_written);
        let (wa, wb) = (a.bandwidth_wait_ns + 1000, b.bandwidth_wait_ns + 1000);
        assert!((wa as f64 / wb as f64 - 4.0).abs() < 0.01, "{wa} vs {wb}");
    }

    #[test]
    fn reads_inside_the_granule_just_read_cost_no_media_bandwidth() {
        // No previous read: every granule touched.
        assert_eq!(read_media_bytes(0, 1024, 8, 256), 256);
        assert_eq!(read_media_bytes(0, 1000, 100, 256), 512);
        // The previous read ended in line 16 (bytes 1024..1088): granule 4.
        assert_eq!(read_media_bytes(18, 1088, 8, 256), 0);
        assert_eq!(read_media_bytes(18, 1088, 256, 256), 256);
        assert_eq!(read_media_bytes(18, 4096, 8, 256), 256);
        let d = optane(None);
        d.on_read(Some(1), 1 << 20, 8);
        // Lines 1..3 of the same XPLine: sequential latency.
        assert_eq!(d.on_read(Some(1), (1 << 20) + 128, 8).read_latency_ns, 72);
    }

    #[test]
    fn reads_wait_for_read_bandwidth_in_granules() {
        let d = optane(Some(16));
        let cost = bucket::ps_per_byte(39.4 / 16.0);
        let mut total = 0;
        for i in 0..64u64 {
            // 8 bytes from scattered XPLines: each costs a whole 256-byte granule.
            total = d.on_read(Some(1), i << 20, 8).bandwidth_wait_ns;
        }
        assert_eq!(total, (64 * 256 * cost - bucket::BURST_PS).div_ceil(1000));
    }
}
