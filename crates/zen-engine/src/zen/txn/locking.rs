//! Lock-based pieces of the protocols: two-phase locking on entry lock words
//! (`cc::two_phase`), H-Store partition locks (`cc::hstore`), and Cicada's
//! early timestamp check.
//!
//! (L1) A 2PL lock word holds one bit per holder and an exclusive flag; only
//!      CAS changes it, and a worker clears only its own bit (or the whole word
//!      when it is the exclusive holder).
//! (L2) The evictor claims an entry by setting the exclusive flag with no
//!      holder bit; a reader that finds such a word retries from the record's
//!      location (the entry is on its way out).
//! (L3) Every wait is bounded by `SPIN_LIMIT`; waiting happens only where the
//!      deadlock policy allows it (wait-die: older than every holder;
//!      dl-detect: no cycle in the waits-for graph).

use std::sync::atomic::Ordering;

use zen_pmem::PmemBackend;

use super::{SPIN_LIMIT, ZenWorker, backoff};
use crate::cc::two_phase::{EXCLUSIVE, has_cycle_through};
use crate::cc::{Deadlock, Protocol, hstore, silo};
use crate::error::{AbortReason, Error, Result};
use crate::zen::cache::{Entry, LOC_EMPTY, loc_entry};
use crate::zen::table::Table;

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// 2PL read: lock the record's current entry (shared, or exclusive when
    /// `exclusive`), then copy the row.
    pub(super) fn read_locked(
        &mut self,
        t: &Table,
        rid: u64,
        out: &mut [u8],
        exclusive: bool,
    ) -> Result<(u64, u64)> {
        let locw = t.records.loc(rid);
        for _ in 0..SPIN_LIMIT {
            let loc = locw.load(Ordering::Acquire);
            if loc == LOC_EMPTY {
                return Ok((LOC_EMPTY, 0));
            }
            let Some((w, idx)) = loc_entry(loc) else {
                self.cache_in(t, rid, loc)?;
                continue;
            };
            let e = t.caches[w].touch(idx, self.begin_ts, P::MULTI_VERSION);
            if !self.lock_2pl(t, loc, exclusive)? {
                continue;
            }
            let version = e.cc[0].load(Ordering::Acquire);
            if locw.load(Ordering::Acquire) != loc || version & silo::OBSOLETE != 0 {
                continue;
            }
            if version & silo::ABSENT == 0 {
                t.caches[w].read_row(idx, out);
                self.s.numa_entry(self.id, w, idx, false);
            }
            self.count_hit();
            return Ok((loc, version & !silo::LOCK));
        }
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// Take the 2PL lock of the entry at `loc`. `Ok(false)`: the entry is being
    /// evicted (L2), re-read the location.
    pub(super) fn lock_2pl(&mut self, t: &Table, loc: u64, exclusive: bool) -> Result<bool> {
        let (w, idx) = loc_entry(loc).expect("2PL locks cached entries");
        let word = &t.caches[w].entry(idx).cc[1];
        let me = 1u64 << self.id;
        for spin in 0..SPIN_LIMIT {
            let cur = word.load(Ordering::Acquire);
            if cur == EXCLUSIVE {
                return Ok(false);
            }
            let mine = cur & me != 0;
            let others = cur & !EXCLUSIVE & !me;
            let want = if exclusive {
                (others == 0).then_some(EXCLUSIVE | me)
            } else if mine {
                return Ok(true);
            } else {
                (cur & EXCLUSIVE == 0).then_some(cur | me)
            };
            if let Some(next) = want {
                if next == cur {
                    return Ok(true);
                }
                crate::sched::point();
                if word.compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    if !mine {
                        self.locks.push((t.id.0, loc));
                    }
                    self.stop_waiting();
                    return Ok(true);
                }
                continue;
            }
            self.on_conflict(others | (cur & !EXCLUSIVE & !me))?;
            backoff(spin);
        }
        self.stop_waiting();
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// Apply the deadlock policy to a conflict with `holders` (a bitmap).
    fn on_conflict(&mut self, holders: u64) -> Result<()> {
        match P::LOCKING.expect("2PL protocol") {
            Deadlock::NoWait => Err(Error::Abort(AbortReason::WriteLocked)),
            Deadlock::WaitDie => {
                let mine = self.s.lock_priority[self.id].load(Ordering::Acquire);
                let mut h = holders;
                while h != 0 {
                    let other = h.trailing_zeros() as usize;
                    h &= h - 1;
                    if self.s.lock_priority[other].load(Ordering::Acquire) < mine {
                        self.kept_priority = Some(mine);
                        return Err(Error::Abort(AbortReason::Deadlock));
                    }
                }
                Ok(())
            }
            Deadlock::Detect => {
                let mut graph = self.s.waits_for.lock();
                graph[self.id] = holders;
                if has_cycle_through(&graph, self.id) {
                    graph[self.id] = 0;
                    return Err(Error::Abort(AbortReason::Deadlock));
                }
                Ok(())
            }
        }
    }

    fn stop_waiting(&self) {
        if P::LOCKING == Some(Deadlock::Detect) {
            self.s.waits_for.lock()[self.id] = 0;
        }
    }

    /// Release every 2PL lock and partition lock of the transaction (L1).
    pub(super) fn release_locks(&mut self) {
        let me = 1u64 << self.id;
        for (table, loc) in self.locks.drain(..) {
            let (w, idx) = loc_entry(loc).expect("2PL locks cached entries");
            let word = &self.tables[table as usize].caches[w].entry(idx).cc[1];
            crate::sched::point();
            if word.load(Ordering::Acquire) & EXCLUSIVE != 0 {
                word.store(0, Ordering::Release);
            } else {
                word.fetch_and(!me, Ordering::AcqRel);
            }
        }
        for p in self.partitions.drain(..) {
            crate::sched::point();
            self.s.partition_locks[p].store(0, Ordering::Release);
        }
        if P::LOCKING.is_some() || P::PARTITIONED {
            self.s.lock_priority[self.id].store(u64::MAX, Ordering::Release);
        }
    }

    /// Claim an unlocked entry for eviction (L2).
    pub(super) fn claim_for_eviction(&self, e: &Entry) -> bool {
        e.cc[1].compare_exchange(0, EXCLUSIVE, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Undo `claim_for_eviction` when the eviction does not go ahead.
    pub(super) fn unclaim(&self, e: &Entry) {
        if P::LOCKING.is_some() {
            let _ = e.cc[1].compare_exchange(EXCLUSIVE, 0, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// H-Store: hold the partition of `key` in `t`. Partitions are discovered
    /// on the fly, so there is no global acquisition order: conflicts follow
    /// wait-die (an older transaction waits, a younger one aborts and retries
    /// with its old priority), which rules out both deadlock and the livelock
    /// of two transactions that each hold the partition the other wants.
    pub(super) fn lock_partition(&mut self, t: &Table, key: u64) -> Result<()> {
        let p = hstore::partition_of(key, t.schema.partition_shift, self.s.partition_locks.len());
        let me = self.id as u64 + 1;
        let word = &self.s.partition_locks[p];
        let mine = self.s.lock_priority[self.id].load(Ordering::Acquire);
        for spin in 0..SPIN_LIMIT {
            crate::sched::point();
            match word.compare_exchange(0, me, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.partitions.push(p);
                    return Ok(());
                }
                Err(holder) if holder == me => return Ok(()),
                Err(0) => {}
                Err(holder) => {
                    let theirs = self.s.lock_priority[holder as usize - 1].load(Ordering::Acquire);
                    if theirs < mine {
                        self.kept_priority = Some(mine);
                        return Err(Error::Abort(AbortReason::Deadlock));
                    }
                    backoff(spin);
                }
            }
        }
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// Cicada's early abort: check timestamp order when the write is issued.
    pub(super) fn check_early(&self, t: &Table, loc: u64) -> Result<()> {
        let Some((w, idx)) = loc_entry(loc) else { return Ok(()) };
        let e = t.caches[w].entry(idx);
        let head = e.cc[0].load(Ordering::Acquire);
        let rts = e.cc[1].load(Ordering::Acquire);
        P::may_supersede(self.txn_ts, head & !silo::LOCK, rts).map_err(Error::Abort)
    }
}
