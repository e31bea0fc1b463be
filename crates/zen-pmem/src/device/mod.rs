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
//!   ([`WriterWindow`]). With `--nvm-share N` each *running thread* (OS
//!   thread, whichever pool slots it persists or reads through: a worker's
//!   own slot, the volatile slot, the background slot of a checkpoint it
//!   runs) owns its buckets, at 1/N of the device's bandwidth with N
//!   writers: two real threads then feel the per-thread pressure of an
//!   N-thread run.
//! - **Media granularity and write combining**: each flush goes through the
//!   thread slot's write-combining buffer ([`combine`]) at flush time; what
//!   misses costs one granule of media bytes, charged to the write bucket at
//!   the slot's next fence as bytes that reached the medium when they were
//!   flushed (the medium writes them while the thread issues the rest).
//! - **Waiting**: the backend stamps an access after its memory operation
//!   and busy-waits to the stamp plus the charge, less what the running
//!   thread's last wait overshot ([`Device::resume_at`], [`Device::settle`]):
//!   the model's own work and the wait's overshoot are paid out of the
//!   charge instead of adding ~40–50 ns to every access.
//!
//! WHAT IS SERIALISED
//!
//! Nothing, with an idle device (`dram`: the backend never calls the model).
//! A flush touches only its thread slot (the combining buffer and the
//! pending media bytes and their finish time: relaxed loads and stores; a
//! clock read when it costs media bytes and write bandwidth is modelled). A fence or read on a modelled device without
//! `--nvm-share` performs one `fetch_add` on the shared bucket (plus a
//! `fetch_max` when the bucket had gone idle), and a fence records its
//! running thread once per 50 µs window in a shared mask: that shared cache
//! line is what a shared device costs, and it is the model (the threads do
//! compete for one medium). With `--nvm-share` a fence and a read touch only
//! the slot's and the running thread's own state.
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

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use crossbeam_utils::CachePadded;

pub use bucket::Bucket;
pub use clock::{Clock, ManualClock, Stamp, TscClock};
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
    /// When the medium would have written those bytes, each flush's from
    /// the time it was flushed, at one writer's rate (ps; valid while the
    /// bytes are > 0): the fence's bytes arrived, in effect, at this time
    /// less their cost.
    pending_done_ps: AtomicU64,
    /// Line index + 1 after the thread's last read (0: none yet).
    next_read_line: AtomicU64,
}

/// One running (OS) thread's state, whichever pool slots it uses: its
/// buckets under `--nvm-share` and the overshoot its last wait carried.
#[derive(Debug, Default)]
struct Runner {
    read_bucket: Bucket,
    write_bucket: Bucket,
    /// Nanoseconds the runner's last wait ran past its deadline (capped at
    /// [`MAX_CREDIT_NS`]): its next deadline comes that much earlier.
    credit_ns: AtomicU64,
}

/// Runners a device tells apart (OS threads fold modulo this).
pub const MAX_RUNNERS: usize = crate::pool::MAX_THREADS;
/// Most overshoot a runner carries into its next wait: a wait preempted for
/// milliseconds forgives no more than this of the waits after it.
pub const MAX_CREDIT_NS: u64 = 1_000;

/// This OS thread's runner index (the same for every device): assigned on
/// its first modelled access, in thread start order.
pub fn current_runner() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Relaxed) % MAX_RUNNERS;
    }
    INDEX.with(|i| *i)
}

/// The distinct writers of the current window, and the count of the last.
#[derive(Debug, Default)]
pub struct WriterWindow {
    mask: AtomicU64,
    started_ns: AtomicU64,
    previous: AtomicU64,
}

impl WriterWindow {
    /// Record runner `writer` writing at `now_ns`; returns the writers to assume:
    /// the larger of the last window's and the current one's so far.
    pub fn note(&self, writer: usize, now_ns: u64) -> u32 {
        let bit = 1u64 << (writer % MAX_COUNTED_WRITERS as usize);
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
    runners: Box<[CachePadded<Runner>]>,
    read_bucket: Bucket,
    write_bucket: Bucket,
    writers: WriterWindow,
    read_ps_per_byte: Option<u64>,
    /// Write cost per byte for 1..=64 writers (index 0 unused), or with `--nvm-share`.
    write_ps_per_byte: Option<Box<[u64]>>,
    /// The clock's [`Clock::fixed_cost_ns`] of a read's stamp and of a
    /// fence's, read once.
    read_fixed_ns: u64,
    fence_fixed_ns: u64,
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
            threads: (0..MAX_THREADS).map(|_| CachePadded::new(ThreadState::default())).collect(),
            runners: (0..MAX_RUNNERS).map(|_| CachePadded::new(Runner::default())).collect(),
            read_bucket: Bucket::default(),
            write_bucket: Bucket::default(),
            writers: WriterWindow::default(),
            read_ps_per_byte,
            write_ps_per_byte,
            read_fixed_ns: if params.is_idle() {
                0
            } else {
                clock.fixed_cost_ns(Stamp::AfterLoads)
            },
            fence_fixed_ns: if params.is_idle() {
                0
            } else {
                clock.fixed_cost_ns(Stamp::AfterDrain)
            },
            clock,
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

    fn runner(&self, runner: usize) -> &Runner {
        &self.runners[runner % MAX_RUNNERS]
    }

    /// `thread` wrote back `[offset, offset + len)`: run it through the
    /// thread's write-combining buffer; the media bytes wait for the fence.
    /// A flush that costs media bytes reads the clock (only when write
    /// bandwidth is modelled) and moves the slot's own finish time: the
    /// medium writes a line from when it is flushed, so the fence's bytes
    /// count as arrived at `finish − cost` (their flushes' times, not the
    /// fence's, and not the epoch's first flush's: an early 8-byte flush
    /// must not make the bytes flushed just before the fence old).
    #[inline]
    pub fn on_flush(&self, thread: u32, offset: u64, len: u64) {
        let p = &self.params;
        let slot = self.slot(thread);
        let bytes =
            slot.combiner.write_back(offset, len, p.media_granularity_bytes, p.combine_lines);
        let pending = slot.pending_media_bytes.load(Relaxed);
        if let (Some(costs), true) = (&self.write_ps_per_byte, bytes > 0) {
            let now_ps = self.clock.now_unordered_ns() * 1000;
            let done = if pending == 0 { 0 } else { slot.pending_done_ps.load(Relaxed) };
            slot.pending_done_ps.store(done.max(now_ps) + bytes * costs[1], Relaxed);
        }
        slot.pending_media_bytes.store(pending + bytes, Relaxed);
    }

    /// `thread` fenced after flushing `lines_flushed` lines since its last
    /// fence; the calling OS thread is the runner. Returns the charge and the
    /// time the clock read (not read, and 0, when there is nothing to charge):
    /// a [drained](Stamp::AfterDrain) stamp, so that the persist latency is
    /// charged after this machine's own persist has completed, not under it.
    #[inline]
    pub fn on_fence(&self, thread: u32, lines_flushed: u64) -> (Charge, u64) {
        if lines_flushed == 0 && self.slot(thread).pending_media_bytes.load(Relaxed) == 0 {
            return (Charge::default(), 0);
        }
        let now_ns = self.clock.now_drained_ns();
        (self.on_fence_by(current_runner(), thread, lines_flushed, now_ns), now_ns)
    }

    /// [`Device::on_fence`] by runner `runner` (tests name it).
    pub fn on_fence_by(
        &self,
        runner: usize,
        thread: u32,
        lines_flushed: u64,
        now_ns: u64,
    ) -> Charge {
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
            let now_ps = now_ns * 1000;
            let done = slot.pending_done_ps.load(Relaxed);
            let arrived_ps = done.saturating_sub(media * costs[1]).min(now_ps);
            let wait_ps = match self.params.share_threads {
                Some(_) => self.runner(runner).write_bucket.take_owned(
                    arrived_ps,
                    now_ps,
                    media * costs[0],
                ),
                None => {
                    let writers = self.writers.note(runner, now_ns);
                    let cost = media * costs[writers as usize];
                    self.write_bucket.take_shared(arrived_ps, now_ps, cost)
                }
            };
            charge.bandwidth_wait_ns = wait_ps.div_ceil(1000);
        }
        charge
    }

    /// `thread` (or no worker slot) read `[offset, offset + len)`; the
    /// calling OS thread is the runner.
    #[inline]
    pub fn on_read(&self, thread: Option<u32>, offset: u64, len: u64, now_ns: u64) -> Charge {
        self.on_read_by(current_runner(), thread, offset, len, now_ns)
    }

    /// [`Device::on_read`] by runner `runner` (tests name it).
    pub fn on_read_by(
        &self,
        runner: usize,
        thread: Option<u32>,
        offset: u64,
        len: u64,
        now_ns: u64,
    ) -> Charge {
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
            let now_ps = now_ns * 1000;
            let wait_ps = match p.share_threads {
                Some(_) => self.runner(runner).read_bucket.take_owned(now_ps, now_ps, media * cost),
                None => self.read_bucket.take_shared(now_ps, now_ps, media * cost),
            };
            charge.bandwidth_wait_ns = wait_ps.div_ceil(1000);
        }
        charge
    }

    /// When `runner` should resume after an access stamped `stamp` at
    /// `started_ns` and charged `stall_ns`: `started_ns + stall_ns`, less
    /// the overshoot its last wait carried and the clock's fixed cost per
    /// access with that stamp ([`Clock::fixed_cost_ns`]). The model's own work between the
    /// stamp and the wait (the charge, the bucket), the wait's overshoot and
    /// the stamp itself are thus paid out of the charge, not on top of it
    /// (`zen probe` measured 35–75 ns of them per access before).
    pub fn resume_at(&self, runner: usize, stamp: Stamp, started_ns: u64, stall_ns: u64) -> u64 {
        let fixed = match stamp {
            Stamp::AfterLoads => self.read_fixed_ns,
            Stamp::Unordered | Stamp::AfterDrain => self.fence_fixed_ns,
        };
        let credit = self.runner(runner).credit_ns.load(Relaxed) + fixed;
        (started_ns + stall_ns).saturating_sub(credit)
    }

    /// `runner` resumed at `resumed_ns` from a wait due at `deadline_ns`:
    /// carry what it overshot (at most [`MAX_CREDIT_NS`]).
    pub fn settle(&self, runner: usize, deadline_ns: u64, resumed_ns: u64) {
        let over = resumed_ns.saturating_sub(deadline_ns).min(MAX_CREDIT_NS);
        self.runner(runner).credit_ns.store(over, Relaxed);
    }
}

impl Device<TscClock> {
    /// Busy-wait for `charge` of an access this thread stamped `stamp` at
    /// `started_ns` (see [`Device::resume_at`]).
    #[inline]
    pub fn stall(&self, stamp: Stamp, started_ns: u64, charge: &Charge) {
        let stall = charge.stall_ns();
        if stall == 0 {
            return;
        }
        let runner = current_runner();
        let deadline = self.resume_at(runner, stamp, started_ns, stall);
        let resumed = self.clock.spin_until(deadline);
        self.settle(runner, deadline, resumed);
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

    /// A read by slot `thread`, run by runner `thread`, at the clock's time.
    fn read(d: &Device<ManualClock>, thread: u32, offset: u64, len: u64) -> Charge {
        d.on_read_by(thread as usize, Some(thread), offset, len, d.clock().now_ns())
    }

    /// A fence of slot `thread`, run by runner `thread`, at the clock's time.
    fn fence(d: &Device<ManualClock>, thread: u32, lines: u64) -> Charge {
        d.on_fence_by(thread as usize, thread, lines, d.clock().now_ns())
    }

    #[test]
    fn random_and_sequential_reads_pay_their_latencies() {
        let d = optane(None);
        assert_eq!(read(&d, 1, 1 << 20, 64).read_latency_ns, 224);
        assert_eq!(read(&d, 1, (1 << 20) + 64, 64).read_latency_ns, 72);
        assert_eq!(read(&d, 1, 5 << 20, 64).read_latency_ns, 224);
        // Re-reading within the XPLine just read is sequential too.
        assert_eq!(read(&d, 1, 5 << 20, 8).read_latency_ns, 72);
        // Another thread keeps its own history.
        assert_eq!(read(&d, 2, (5 << 20) + 64, 64).read_latency_ns, 224);
        // Four lines: the first's latency plus three further lines.
        assert_eq!(read(&d, 3, 9 << 20, 256).read_latency_ns, 224 + 3 * 10);
        assert_eq!(d.on_read_by(0, None, 0, 8, 0).read_latency_ns, 224);
    }

    #[test]
    fn a_fence_charges_the_media_bytes_of_the_flushes_before_it() {
        let d = optane(None);
        for i in 0..4 {
            d.on_flush(1, 4096 + i * 64, 64);
        }
        let c = fence(&d, 1, 4);
        assert_eq!((c.media_bytes_written, c.write_latency_ns), (256, 100));
        for i in 0..4 {
            d.on_flush(1, i << 20, 64);
        }
        assert_eq!(fence(&d, 1, 4).media_bytes_written, 1024);
        assert_eq!(fence(&d, 1, 0), Charge::default());
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
            waits.push(fence(&d, 1, 1024).bandwidth_wait_ns);
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
            fence(&d, t, 1);
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
            let c = fence(&d, t, 256);
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
        let a = fence(&scattered, 1, 1024);
        let b = fence(&sequential, 1, 1024);
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
        read(&d, 1, 1 << 20, 8);
        // Lines 1..3 of the same XPLine: sequential latency.
        assert_eq!(read(&d, 1, (1 << 20) + 128, 8).read_latency_ns, 72);
    }

    #[test]
    fn reads_wait_for_read_bandwidth_in_granules() {
        let d = optane(Some(16));
        let cost = bucket::ps_per_byte(39.4 / 16.0);
        let mut total = 0;
        for i in 0..64u64 {
            // 8 bytes from scattered XPLines: each costs a whole 256-byte granule.
            total = read(&d, 1, i << 20, 8).bandwidth_wait_ns;
        }
        assert_eq!(total, (64 * 256 * cost - bucket::BURST_PS).div_ceil(1000));
    }

    /// The probe's write loop on a hand-moved clock: each epoch flushes 16
    /// XPLines, spends `work_ns` of CPU time issuing them, fences, and waits
    /// its charge. Returns the clock time per epoch once steady.
    fn epoch_period(scattered: bool, work_ns: u64) -> f64 {
        let d = optane(Some(16));
        let mut next = 0u64;
        let mut epoch = |d: &Device<ManualClock>| {
            for _ in 0..16 {
                // Scattered: 64 B of a fresh XPLine; sequential: a whole one.
                let len = if scattered { 64 } else { 256 };
                d.on_flush(1, next * 256, len);
                next += 97;
            }
            d.clock().advance(work_ns);
            let c = fence(d, 1, 16);
            d.clock().advance(c.stall_ns());
        };
        (0..50).for_each(|_| epoch(&d));
        let start = d.clock().now_ns();
        (0..1000).for_each(|_| epoch(&d));
        (d.clock().now_ns() - start) as f64 / 1000.0
    }

    #[test]
    fn a_bandwidth_bound_thread_runs_at_its_share_whatever_its_own_work() {
        // 16 XPLines = 4096 media bytes per epoch at 0.556 GB/s (1799 ps per byte).
        let medium_ns = 4096.0 * 1.799;
        for work_ns in [0, 500, 2_000, 5_000] {
            for scattered in [false, true] {
                let period = epoch_period(scattered, work_ns);
                // The medium writes the lines from when they are flushed,
                // while the thread issues the rest: the period is the medium's
                // time, not the medium's time plus the thread's work beyond
                // the burst (7.4 + 5 − 1 µs before this model change).
                assert!((period - medium_ns).abs() < 2.0, "{work_ns} ns: {period} vs {medium_ns}");
            }
        }
        // Scattered 64-byte writes move a quarter of the bytes in the same
        // medium time: the 256 B / 64 B bandwidth ratio is the granularity's 4.
    }

    #[test]
    fn a_fence_waits_only_for_what_the_medium_has_not_yet_written() {
        let d = optane(Some(16));
        for x in 0..16 {
            d.on_flush(1, x * 256, 256);
        }
        // 5 µs of the thread's own work between the first flush and the fence.
        d.clock().advance(5_000);
        let c = fence(&d, 1, 64);
        let cost_ps = 4096 * bucket::ps_per_byte(13.9 * 0.64 / 16.0);
        assert_eq!(c.bandwidth_wait_ns, (cost_ps - 5_000_000 - bucket::BURST_PS).div_ceil(1000));
        // A flush the write-combining buffer absorbs stamps nothing: the next
        // epoch starts when its first media bytes are flushed.
        d.clock().advance(c.stall_ns() + 10_000);
        d.on_flush(1, 64, 64);
        d.clock().advance(3_000);
        let first_media_flush = d.clock().now_ns();
        d.on_flush(1, 1 << 20, 64);
        let one_writer_ps = 256 * bucket::ps_per_byte(13.9 * 0.64 / 16.0);
        assert_eq!(
            d.slot(1).pending_done_ps.load(Relaxed),
            first_media_flush * 1000 + one_writer_ps
        );
        let c = fence(&d, 1, 2);
        assert_eq!(c.media_bytes_written, 256);
        assert_eq!(c.bandwidth_wait_ns, 0);
    }

    #[test]
    fn an_early_small_flush_does_not_age_the_bytes_flushed_before_the_fence() {
        // Zen's pattern: the LP word flushed at the end of one transaction,
        // the next one's rows flushed at its commit, 50 µs later, then its fence.
        let d = optane(Some(16));
        d.on_flush(1, 0, 8);
        d.clock().advance(50_000);
        for x in 1..=16 {
            d.on_flush(1, x * 4096, 256);
        }
        let c = fence(&d, 1, 17);
        let ps = bucket::ps_per_byte(13.9 * 0.64 / 16.0);
        // The rows' 4096 bytes arrived now: the medium writes them after the
        // fence's stamp (the LP word's granule was written long before).
        assert_eq!(c.bandwidth_wait_ns, (4096 * ps - bucket::BURST_PS).div_ceil(1000));
    }

    /// A hand-moved clock whose ordered stamp costs more than its unordered one.
    struct StampCosts(ManualClock);

    impl Clock for StampCosts {
        fn now_ns(&self) -> u64 {
            self.0.now_ns()
        }
        fn fixed_cost_ns(&self, stamp: Stamp) -> u64 {
            match stamp {
                Stamp::AfterLoads => 40,
                Stamp::Unordered | Stamp::AfterDrain => 15,
            }
        }
    }

    #[test]
    fn each_kind_of_stamp_has_its_own_fixed_cost_taken_off_the_deadline() {
        let d = Device::new(NvmProfile::Optane.model(), StampCosts(ManualClock::default()));
        // A read's stamp waits for its loads (rdtscp), a fence's for its
        // write-backs (mfence; lfence; rdtsc): each costs what it costs.
        assert_eq!(d.resume_at(1, Stamp::AfterLoads, 1_000, 224), 1_184);
        assert_eq!(d.resume_at(1, Stamp::AfterDrain, 1_000, 100), 1_085);
        // An idle device never waits, so it never measures either.
        let idle = Device::new(NvmProfile::Dram.model(), StampCosts(ManualClock::default()));
        assert_eq!(idle.resume_at(1, Stamp::AfterLoads, 1_000, 224), 1_224);
        assert_eq!(idle.resume_at(1, Stamp::AfterDrain, 1_000, 100), 1_100);
    }

    #[test]
    fn the_overshoot_of_a_wait_comes_off_the_next() {
        let d = optane(None);
        // A 224-ns read stamped at 1000; the wait overshoots by 40 ns.
        assert_eq!(d.resume_at(3, Stamp::AfterLoads, 1_000, 224), 1_224);
        d.settle(3, 1_224, 1_264);
        // The next deadline comes 40 ns early; another runner owes nothing.
        assert_eq!(d.resume_at(3, Stamp::AfterLoads, 2_000, 224), 2_184);
        assert_eq!(d.resume_at(4, Stamp::AfterLoads, 2_000, 224), 2_224);
        // With a fixed 40-ns overshoot per wait, n waits take n charges
        // (plus the last overshoot): the model's cost is paid out of the charge.
        let mut now = 10_000u64;
        for _ in 0..100 {
            let deadline = d.resume_at(3, Stamp::AfterLoads, now, 72);
            now = deadline + 40;
            d.settle(3, deadline, now);
        }
        assert_eq!(now, 10_000 + 100 * 72);
        // A wait cut short by nothing but preempted for 5 ms carries 1 µs at most.
        d.settle(3, 50_000, 5_050_000);
        assert_eq!(
            d.resume_at(3, Stamp::AfterLoads, 6_000_000, 224),
            6_000_000 + 224 - MAX_CREDIT_NS
        );
        // A charge smaller than the credit is not waited at all; what was
        // left over is carried, within the cap.
        assert_eq!(
            d.resume_at(3, Stamp::AfterLoads, 7_000_000, 10),
            7_000_000 + 10 - MAX_CREDIT_NS
        );
        d.settle(3, 7_000_000 + 10 - MAX_CREDIT_NS, 7_000_030);
        assert_eq!(d.runner(3).credit_ns.load(Relaxed), MAX_CREDIT_NS);
    }

    #[test]
    fn a_running_thread_draws_one_share_whichever_slots_it_persists_through() {
        let d = optane(Some(16));
        let cost_ps = 4096 * bucket::ps_per_byte(13.9 * 0.64 / 16.0);
        let epoch = |runner: usize, slot: u32, base: u64| {
            for x in 0..16 {
                d.on_flush(slot, base + x * 256, 256);
            }
            d.on_fence_by(runner, slot, 16, 0).bandwidth_wait_ns
        };
        // Runner 1 persists through its worker slot, then through a
        // background slot (mmdb's checkpoint, wbl's closing record): one share.
        assert_eq!(epoch(1, 1, 0), (cost_ps - bucket::BURST_PS).div_ceil(1000));
        assert_eq!(epoch(1, 511, 1 << 20), (2 * cost_ps - bucket::BURST_PS).div_ceil(1000));
        // Another running thread on the same background slot has its own share.
        assert_eq!(epoch(2, 511, 2 << 20), (cost_ps - bucket::BURST_PS).div_ceil(1000));
        // Reads too: runner 1's reads through two slots share its read bucket.
        let read_ps = 256 * bucket::ps_per_byte(39.4 / 16.0);
        let mut wait = 0;
        for i in 0..16u64 {
            let slot = if i % 2 == 0 { 1 } else { 257 };
            wait = d.on_read_by(1, Some(slot), (i + 16) << 20, 8, 0).bandwidth_wait_ns;
        }
        assert_eq!(wait, (16 * read_ps - bucket::BURST_PS).div_ceil(1000));
    }
}
