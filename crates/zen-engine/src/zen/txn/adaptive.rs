//! The worker's side of Zen+ adaptive execution (design, invariants R1–R4
//! and the stages: `zen/adaptive.rs`): snapshot begin and reads, safe
//! points with the α/β/γ checks, entering and leaving the exclusive stage,
//! and reading NVM tuples in place.

use std::sync::atomic::Ordering;
use std::time::Instant;

use zen_pmem::PmemBackend;

use super::{SPIN_LIMIT, ZenWorker, backoff};
use crate::cc::{Protocol, silo};
use crate::error::{AbortReason, Error, Result};
use crate::heap::{self, SlotHeader};
use crate::zen::adaptive::{NO_BEGIN, SNAPSHOT_BEGIN, Trigger};
use crate::zen::cache::{LOC_EMPTY, loc_entry};
use crate::zen::table::Table;

/// Sleeps of a worker waiting in `begin` for the exclusive stage to end
/// (10 µs each: about 100 s) before it gives up with `Exclusive`.
const EXCLUSIVE_WAIT_LIMIT: u32 = 10_000_000;
/// Yields of a privileged transaction waiting for the others to end (step 2).
const DRAIN_LIMIT: u32 = 1 << 24;
/// Accesses between two β checks (a pool lock) and two publications of the
/// accessed count.
const BETA_EVERY: u64 = 256;

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Adaptive execution is on for this engine and protocol.
    #[inline]
    pub(super) fn adaptive_on(&self) -> bool {
        P::SNAPSHOT_READS && self.s.config.adaptive
    }

    /// This worker holds G-EX (its transaction runs alone).
    #[inline]
    pub(super) fn exclusive_mine(&self) -> bool {
        self.privileged.is_some()
    }

    /// Before publishing a transaction: wait while another worker is privileged.
    pub(super) fn wait_exclusive_free(&self) -> Result<()> {
        for _ in 0..EXCLUSIVE_WAIT_LIMIT {
            match self.s.adaptive.holder() {
                Some(w) if w != self.id => {
                    if !crate::sched::point() {
                        std::thread::sleep(std::time::Duration::from_micros(10));
                    }
                }
                _ => return Ok(()),
            }
        }
        Err(Error::Abort(AbortReason::Exclusive))
    }

    /// After publishing: the Dekker half of step 2 (see `adaptive.rs`).
    pub(super) fn check_exclusive(&self) -> Result<()> {
        match self.s.adaptive.holder() {
            Some(w) if w != self.id => Err(Error::Abort(AbortReason::Exclusive)),
            _ => Ok(()),
        }
    }

    /// Begin a snapshot transaction: choose S as `adaptive.rs` steps 1–4.
    pub(super) fn begin_snapshot(&mut self) -> Result<()> {
        let a = &self.s.adaptive;
        a.begin_ts[self.id].store(SNAPSHOT_BEGIN, Ordering::SeqCst);
        self.s.active_ts[self.id].store(0, Ordering::SeqCst);
        self.check_exclusive()?;
        let mut low = self.s.clock.now();
        for w in (0..self.s.regions).filter(|&w| w != self.id) {
            low = low.min(self.begin_of(w)?);
        }
        self.s.active_ts[self.id].store(low, Ordering::SeqCst);
        self.snapshot = Some(low.saturating_sub(1));
        self.begin_ts = low;
        self.watermark = low;
        let mine = &a.snapshot_txns[self.id];
        mine.store(mine.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Ok(())
    }

    /// Worker `w`'s begin timestamp for step 3 (`u64::MAX` if it runs no
    /// read-write transaction), waiting out the gap between its publication
    /// and its drawing a timestamp.
    fn begin_of(&self, w: usize) -> Result<u64> {
        for spin in 0..SPIN_LIMIT {
            if self.s.active_ts[w].load(Ordering::SeqCst) == u64::MAX {
                return Ok(u64::MAX);
            }
            match self.s.adaptive.begin_ts[w].load(Ordering::SeqCst) {
                SNAPSHOT_BEGIN => return Ok(u64::MAX),
                NO_BEGIN => backoff(spin),
                ts => return Ok(ts),
            }
        }
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// A snapshot read of record `rid`: the newest version with Tx-CTS ≤ S
    /// (R3, R4). True when a row is present (copied to `out`).
    pub(super) fn read_snapshot(&mut self, t: &Table, rid: u64, out: &mut [u8]) -> Result<bool> {
        let s = self.snapshot.expect("a snapshot transaction");
        let locw = t.records.loc(rid);
        for spin in 0..SPIN_LIMIT {
            let loc = locw.load(Ordering::Acquire);
            if loc == LOC_EMPTY {
                return Ok(false);
            }
            let Some((w, idx)) = loc_entry(loc) else {
                let Some((h, present)) = self.read_nvm(t, loc, out) else {
                    // The slot emptied: the record moved on (re-read its location).
                    backoff(spin);
                    continue;
                };
                if locw.load(Ordering::Acquire) != loc {
                    continue;
                }
                // R3: a head evicted to NVM is visible to every snapshot.
                if h.cts > s {
                    return Err(Error::Corrupt(format!(
                        "snapshot {s}: record {rid} lives in NVM at Tx-CTS {} (R3 broken)",
                        h.cts
                    )));
                }
                self.snapshot_deps.push(h.cts);
                return Ok(present);
            };
            let head = t.caches[w].entry(idx);
            let v = head.cc[0].load(Ordering::SeqCst);
            if v & silo::OBSOLETE != 0 && locw.load(Ordering::Acquire) != loc {
                continue;
            }
            let mut p = loc;
            let mut limit = 1u32 << 20;
            while let Some((w, idx)) = loc_entry(p) {
                let e = t.caches[w].entry(idx);
                let v = e.cc[0].load(Ordering::Acquire);
                if silo::cts_of(v) <= s {
                    self.snapshot_deps.push(silo::cts_of(v));
                    let present = v & silo::ABSENT == 0;
                    if present {
                        t.caches[w].read_row(idx, out);
                    }
                    self.stats.hits += 1;
                    return Ok(present);
                }
                p = e.cc[2].load(Ordering::Acquire);
                limit -= 1;
                assert!(limit > 0, "version chain longer than 2^20");
            }
            // R4: no version at or below S: the record did not exist then.
            return Ok(false);
        }
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// Read the tuple in heap slot `slot` in place (no caching): its header
    /// and whether a row is present (copied to `out`). `None` if the slot is
    /// empty.
    pub(super) fn read_nvm(
        &mut self,
        t: &Table,
        slot: u64,
        out: &mut [u8],
    ) -> Option<(SlotHeader, bool)> {
        let len = heap::SLOT_HEADER_BYTES as usize + t.row_bytes;
        self.slot_buf.resize(len, 0);
        self.s.pool.persister(self.thread).read(slot, &mut self.slot_buf[..len]);
        let w0 = u64::from_le_bytes(self.slot_buf[0..8].try_into().expect("8 bytes"));
        let w1 = u64::from_le_bytes(self.slot_buf[8..16].try_into().expect("8 bytes"));
        let h = SlotHeader::decode(w0, w1)?;
        if !h.deleted {
            out.copy_from_slice(&self.slot_buf[heap::SLOT_HEADER_BYTES as usize..len]);
        }
        self.stats.misses += 1;
        self.s.adaptive.nvm_direct_reads.fetch_add(1, Ordering::Relaxed);
        Some((h, !h.deleted))
    }

    /// A privileged transaction's read of a record whose version is in NVM
    /// while its Met-Cache region is full (step 3): (location, version word).
    pub(super) fn read_direct(
        &mut self,
        t: &Table,
        slot: u64,
        out: &mut [u8],
    ) -> Result<(u64, u64)> {
        let (h, _) = self.read_nvm(t, slot, out).ok_or_else(|| {
            Error::Corrupt(format!("table {}: a record points at empty slot {slot}", t.schema.name))
        })?;
        Ok((slot, silo::tid(h.cts, h.deleted)))
    }

    /// A safe point (every tuple access): abort if another worker is
    /// privileged; otherwise count the access and check α, β, γ.
    #[inline]
    pub(super) fn safe_point(&mut self, t: &Table) -> Result<()> {
        if !self.adaptive_on() {
            return Ok(());
        }
        self.accessed += 1;
        self.accessed_bytes += t.caches[self.id].entry_bytes() as u64;
        if self.exclusive_mine() {
            return Ok(());
        }
        self.check_exclusive()?;
        let trigger = self.detect();
        match trigger {
            Some(t) => self.enter_exclusive(t),
            None => Ok(()),
        }
    }

    /// The Met-Cache region could not supply an entry. True when the
    /// transaction is privileged (now) and may read and write NVM directly:
    /// a read-write transaction that has accessed at least half of α and
    /// finds its whole region full has passed α even if its access count has
    /// not (entries retired during a long transaction wait for it to end,
    /// C4, so a region fills before α × its share of accesses in a small
    /// cache). A shorter transaction that finds the region full because of
    /// others is not the one to privilege: it aborts with `CacheFull`.
    pub(super) fn privileged_on_full(&mut self) -> Result<bool> {
        if self.exclusive_mine() {
            return Ok(true);
        }
        if !self.adaptive_on()
            || self.snapshot.is_some()
            || self.accessed_bytes <= self.alpha_limit / 2
        {
            return Ok(false);
        }
        self.enter_exclusive(Trigger::Alpha)?;
        Ok(true)
    }

    /// The detecting stage's three conditions for the running transaction.
    fn detect(&self) -> Option<Trigger> {
        let c = &self.s.config;
        if self.snapshot.is_none() && self.accessed_bytes > self.alpha_limit {
            return Some(Trigger::Alpha);
        }
        if self.wasted.saturating_add(self.accessed) > c.adaptive_gamma_tuples {
            return Some(Trigger::Gamma);
        }
        if self.accessed.is_multiple_of(BETA_EVERY) {
            self.s.adaptive.accessed[self.id].store(self.accessed, Ordering::Relaxed);
            let pool = &self.s.pool;
            let free = pool.free_page_count() as f64;
            if free < c.adaptive_beta * pool.page_count() as f64 && self.largest_running() {
                return Some(Trigger::Beta);
            }
        }
        None
    }

    /// β's choice: is this the running transaction with the most accesses
    /// (ties to the lower worker id)?
    fn largest_running(&self) -> bool {
        let a = &self.s.adaptive;
        (0..self.s.regions).filter(|&w| w != self.id).all(|w| {
            let theirs = a.accessed[w].load(Ordering::Relaxed);
            let running = self.s.active_ts[w].load(Ordering::Acquire) != u64::MAX;
            !running || theirs < self.accessed || (theirs == self.accessed && self.id < w)
        })
    }

    /// Steps 1–2: take G-EX and wait until every other worker is idle.
    fn enter_exclusive(&mut self, trigger: Trigger) -> Result<()> {
        let a = &self.s.adaptive;
        if !a.try_enter(self.id, trigger) {
            return Err(Error::Abort(AbortReason::Exclusive));
        }
        self.privileged = Some(Instant::now());
        for w in (0..self.s.regions).filter(|&w| w != self.id) {
            let mut waited = 0;
            while self.s.active_ts[w].load(Ordering::SeqCst) != u64::MAX {
                waited += 1;
                if waited > DRAIN_LIMIT {
                    // Cannot happen while every wait of a transaction is
                    // bounded; give the stage up rather than hang.
                    return Err(Error::Abort(AbortReason::Exclusive));
                }
                if !crate::sched::point() {
                    std::thread::yield_now();
                }
            }
        }
        Ok(())
    }

    /// After a transaction ended (`end` ran): account wasted work for γ and,
    /// if it was privileged, reclaim every worker's garbage and release G-EX
    /// (steps 4–5).
    pub(super) fn finish_adaptive(&mut self, committed: bool, retryable: bool) {
        if !self.adaptive_on() {
            return;
        }
        self.wasted = if committed || !retryable { 0 } else { self.wasted + self.accessed };
        self.accessed = 0;
        self.accessed_bytes = 0;
        self.s.adaptive.accessed[self.id].store(0, Ordering::Relaxed);
        self.snapshot = None;
        if let Some(since) = self.privileged.take() {
            // The privileged commit is durable before anyone else may read it.
            self.fence_and_maintain();
            self.s.reclaim_all(self.id);
            self.s.adaptive.leave(self.id, since);
        }
    }

    /// The α threshold of this worker in bytes of Met-Cache entries: α of
    /// the worker's budget (its region of every table: the Met-Cache budget
    /// split between the workers registered now). A transaction's use
    /// is the entry size of every tuple it accessed, so tables with small
    /// and large rows count in one unit.
    pub(super) fn alpha_limit(&self) -> u64 {
        (self.s.config.adaptive_alpha * self.s.worker_cache_budget_bytes() as f64) as u64
    }
}
