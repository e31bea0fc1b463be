//! Group commit of wbl: the write-behind log record (cp, cd) and who may be
//! acknowledged.
//!
//! ```text
//!   cts:     ... 40 41 42 43 44 45 46 47 48 ...               (clock →)
//!                      ▲ cp = 42         ▲ now        ▲ cd = now + window
//!   ≤ cp: every transaction persisted its versions (fenced) → committed
//!   (cp, cd]: may have versions in NVM, not all durable → undone by recovery
//!   > cd: no version may be written before a record raises cd past it
//! ```
//!
//! IN-FLIGHT. A committing worker publishes `clock.now()` (a lower bound of
//! the cts it is about to draw) *before* drawing its cts and clears it after
//! the fences of its versions. The record writer reads the clock first and
//! then every published word (all `SeqCst`), so cp = min(now, published) − 1
//! never covers a transaction whose versions are not yet durable: a cts
//! below `now` was drawn after its worker published (the same argument as
//! Zen's watermark).
//!
//! RECORDS go round a ring of the meta page (`layout.rs`); each is written,
//! flushed and fenced on its own, and only then published to the workers
//! (`durable_cp`, `durable_cd`), who acknowledge their commits with cts ≤ cp.
//! A record is written when one is due (`group_commit_interval_us` since the
//! last), when a worker's cts passes cd (before it writes any version), and
//! on `sync`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::sched::Mutex;
use crossbeam_utils::CachePadded;
use zen_pmem::{PmemBackend, Pool};

use super::layout::WblRecord;
use crate::ts::{Clock, WORKER_BITS};

/// cd runs this far ahead of the clock (in cts units: 4096 commits).
pub const DIRTY_WINDOW: u64 = 1 << (WORKER_BITS + 12);

pub struct GroupCommit {
    inflight: Box<[CachePadded<AtomicU64>]>,
    pub durable_cp: CachePadded<AtomicU64>,
    pub durable_cd: AtomicU64,
    /// Seq of the last record written (guards the ring).
    writer: Mutex<u64>,
    last_record_ns: AtomicU64,
    started: Instant,
    interval_ns: u64,
    meta_offset: u64,
    /// Injected bug: publish cp before the record's fence.
    publish_early: bool,
}

impl GroupCommit {
    pub fn new(
        workers: usize,
        meta_offset: u64,
        last: WblRecord,
        interval_us: u64,
        publish_early: bool,
    ) -> GroupCommit {
        GroupCommit {
            inflight: (0..workers).map(|_| CachePadded::new(AtomicU64::new(u64::MAX))).collect(),
            durable_cp: CachePadded::new(AtomicU64::new(last.cp)),
            durable_cd: AtomicU64::new(last.cd),
            writer: Mutex::new(last.seq),
            last_record_ns: AtomicU64::new(0),
            started: Instant::now(),
            interval_ns: interval_us * 1000,
            meta_offset,
            publish_early,
        }
    }

    /// Before drawing a cts.
    pub fn publish(&self, worker: usize, clock: &Clock) {
        self.inflight[worker].store(clock.now(), Ordering::SeqCst);
    }

    /// After the transaction's versions are durable (or it aborted).
    pub fn retire(&self, worker: usize) {
        self.inflight[worker].store(u64::MAX, Ordering::SeqCst);
    }

    fn now_ns(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Is a record due (the interval passed since the last one)?
    pub fn due(&self) -> bool {
        self.now_ns().saturating_sub(self.last_record_ns.load(Ordering::Relaxed))
            >= self.interval_ns
    }

    pub fn cp(&self) -> u64 {
        self.durable_cp.load(Ordering::Acquire)
    }

    pub fn cd(&self) -> u64 {
        self.durable_cd.load(Ordering::Acquire)
    }

    /// Write a record now (waiting for the ring if another writer has it).
    /// `early` runs with the record before its fence, and only under the
    /// injected bug (it acknowledges too early).
    pub fn write<B: PmemBackend>(
        &self,
        pool: &Pool<B>,
        thread: u32,
        clock: &Clock,
        early: &mut dyn FnMut(&WblRecord),
    ) {
        let mut seq = self.writer.lock();
        self.write_locked(&mut seq, pool, thread, clock, early);
    }

    /// Write a record unless another thread is writing one.
    pub fn try_write<B: PmemBackend>(
        &self,
        pool: &Pool<B>,
        thread: u32,
        clock: &Clock,
        early: &mut dyn FnMut(&WblRecord),
    ) -> bool {
        let Some(mut seq) = self.writer.try_lock() else { return false };
        self.write_locked(&mut seq, pool, thread, clock, early);
        true
    }

    fn write_locked<B: PmemBackend>(
        &self,
        seq: &mut u64,
        pool: &Pool<B>,
        thread: u32,
        clock: &Clock,
        early: &mut dyn FnMut(&WblRecord),
    ) {
        let now = clock.now();
        let low = self.inflight.iter().map(|w| w.load(Ordering::SeqCst)).fold(now, u64::min);
        let cp = low.saturating_sub(1).max(self.cp());
        let cd = self.cd().max(now + DIRTY_WINDOW);
        let record = WblRecord { seq: *seq + 1, cp, cd };
        let at = WblRecord::offset(self.meta_offset, record.seq);
        let p = pool.persister(thread);
        p.write(at, &record.encode());
        p.flush(at, 32);
        if self.publish_early {
            self.publish_record(&record);
            early(&record);
        }
        p.fence();
        self.publish_record(&record);
        *seq = record.seq;
        self.last_record_ns.store(self.now_ns(), Ordering::Relaxed);
    }

    fn publish_record(&self, r: &WblRecord) {
        // cd first: a worker that sees the new cp may draw a cts up to cd.
        self.durable_cd.fetch_max(r.cd, Ordering::AcqRel);
        self.durable_cp.fetch_max(r.cp, Ordering::AcqRel);
    }

    /// The last record written (seq, cp, cd) as the workers see it.
    pub fn last(&self) -> WblRecord {
        WblRecord { seq: *self.writer.lock(), cp: self.cp(), cd: self.cd() }
    }
}
