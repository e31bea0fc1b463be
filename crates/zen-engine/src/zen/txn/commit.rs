//! Commit (Alg. 1) and abort: phases 1–4 of a commit (lock the write set,
//! validate, persist, publish); phase 5, maintain, is `maintain.rs`, run at
//! each fence of the worker.

use std::sync::atomic::{Ordering, fence};

use zen_pmem::{CounterSnapshot, Marker, PmemBackend};

use super::scan::ZenTxn;
use super::{ReadItem, SPIN_LIMIT, WriteItem, WriteKind, ZenWorker, backoff};
use crate::api::{CacheStats, CommitInfo, Durability, EngineWorker, Transaction, TxnOptions};
use crate::cc::{Protocol, silo};
use crate::config::{Fault, RaceFault};
use crate::error::{AbortReason, Error, Result};
use crate::heap::{self, SlotHeader};
use crate::zen::cache::{FLAG_CLOCK, FLAG_COPY, LOC_EMPTY, loc_cached, loc_entry};
use crate::zen::space::Garbage;
use crate::zen::table::Table;

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    fn commit(&mut self) -> Result<CommitInfo> {
        if self.snapshot.is_some() {
            // R1: the snapshot is complete and fixed; nothing to validate.
            let durable = self.read_only_durable();
            return Ok(CommitInfo { cts: 0, durable, writes: 0 });
        }
        if self.adaptive_on() && !self.exclusive_mine() {
            // The last safe point: a transaction not yet committing yields to
            // a privileged one.
            self.check_exclusive()?;
        }
        if self.writes.is_empty() {
            // TicToc: a read-only transaction commits at the largest wts it
            // read, and every read must be valid at that logical time (its
            // rts reaches it, or is extended to it while unlocked). Validating
            // at 0 instead let any read pass the `rts >= commit_ts` shortcut,
            // even one locked by a writer about to commit below the reader's
            // other reads: the reader saw a later write on one key and an
            // earlier version on another (found by the shuttle schedules).
            let logical = if P::TICTOC && !self.race(RaceFault::TictocReadOnlyAtZero) {
                self.tictoc_commit_ts()
            } else {
                0
            };
            self.validate(logical)?;
            let durable = self.read_only_durable();
            return Ok(CommitInfo { cts: 0, durable, writes: 0 });
        }
        // Kung–Robinson: validation and write phase in one critical section.
        let shared = self.s;
        let _serial = P::SERIAL_VALIDATION.then(|| shared.validation.lock());
        if let Err(e) = self.lock_write_set().and_then(|()| self.check_inserts()) {
            self.unlock_all();
            return Err(e);
        }
        let cts = match self.txn_ts {
            Some(ts) if P::TIMESTAMP_ORDERING => ts,
            _ => self.s.clock.next(self.id),
        };
        let logical = if P::TICTOC { self.tictoc_commit_ts() } else { 0 };
        if let Err(e) = self.validate(logical).and_then(|()| self.allocate_slots()) {
            self.free_unwritten_slots();
            self.unlock_all();
            return Err(e);
        }
        // Recovery's per-worker LP rule and the FIFO garbage pipeline (S6)
        // rely on it; one comparison, checked in every build.
        assert!(
            cts > self.last_cts && crate::ts::worker_of(cts) == self.id % 256,
            "Tx-CTS {cts} not above this worker's previous {} or not this worker's ({})",
            self.last_cts,
            self.id
        );
        self.last_cts = cts;
        let durable = self.persist_new_versions(cts);
        crate::sched::point();
        if P::TICTOC {
            self.s.tictoc_high.fetch_max(logical, Ordering::AcqRel);
        }
        self.install(cts, logical);
        Ok(CommitInfo { cts, durable, writes: self.writes.len() as u32 })
    }

    /// Lock every written record in (table, record) order (deadlock-free).
    fn lock_write_set(&mut self) -> Result<()> {
        self.writes.sort_by_key(|w| (w.table, w.rid));
        for i in 0..self.writes.len() {
            if self.writes[i].locked.is_some() {
                continue;
            }
            let t = self.tables[self.writes[i].table as usize].clone();
            let locked = self.lock_record(&t, self.writes[i].rid)?;
            self.writes[i].locked = Some(locked);
        }
        Ok(())
    }

    fn lock_record(&mut self, t: &Table, rid: u64) -> Result<(u64, u64)> {
        let locw = t.records.loc(rid);
        for spin in 0..SPIN_LIMIT {
            let loc = locw.load(Ordering::Acquire);
            if loc == LOC_EMPTY {
                return Err(Error::Abort(AbortReason::ReadValidation));
            }
            let Some((w, idx)) = loc_entry(loc) else {
                match self.cache_in(t, rid, loc) {
                    Err(Error::Abort(AbortReason::CacheFull))
                        if t.secondary.is_empty() && self.privileged_on_full()? =>
                    {
                        return self.lock_direct(t, loc);
                    }
                    r => r?,
                }
                continue;
            };
            let e = t.caches[w].entry(idx);
            e.touch(self.begin_ts);
            match silo::try_lock(&e.cc[0]) {
                Some(prev) if locw.load(Ordering::Acquire) == loc => {
                    let rts = e.cc[1].load(Ordering::SeqCst);
                    if let Err(reason) = P::may_supersede(self.txn_ts, prev, rts) {
                        silo::unlock(&e.cc[0], prev);
                        return Err(Error::Abort(reason));
                    }
                    return Ok((loc, prev));
                }
                Some(prev) => silo::unlock(&e.cc[0], prev),
                None if spin > 64 => return Err(Error::Abort(AbortReason::WriteLocked)),
                None => backoff(spin),
            }
        }
        Err(Error::Abort(AbortReason::WriteLocked))
    }

    /// Zen+ step 3: a privileged transaction runs alone, so a record whose
    /// version is in NVM needs no lock word; it is written straight to NVM.
    fn lock_direct(&mut self, t: &Table, slot: u64) -> Result<(u64, u64)> {
        let mut row = std::mem::take(&mut self.row_buf);
        row.resize(t.row_bytes, 0);
        let read = self.read_direct(t, slot, &mut row);
        self.row_buf = row;
        let (loc, prev) = read?;
        P::may_supersede(self.txn_ts, prev, 0).map_err(Error::Abort)?;
        Ok((loc, prev))
    }

    /// Timestamp ordering for inserts (locked since execution): the absent
    /// entry's read timestamp, and any newer scan of the key's range (phantoms).
    fn check_inserts(&self) -> Result<()> {
        let Some(ts) = self.txn_ts.filter(|_| P::MULTI_VERSION) else { return Ok(()) };
        for w in self.writes.iter().filter(|w| w.kind == WriteKind::Insert) {
            let t = &self.tables[w.table as usize];
            let (loc, prev) = w.locked.expect("inserts are locked at execution");
            let (owner, idx) = loc_entry(loc).expect("locked records are cached");
            let rts = t.caches[owner].entry(idx).cc[1].load(Ordering::SeqCst);
            P::may_supersede(Some(ts), prev, rts.max(t.scan_rts_of(w.key)))
                .map_err(Error::Abort)?;
        }
        Ok(())
    }

    fn unlock_all(&mut self) {
        for w in &mut self.writes {
            if let Some((loc, prev)) = w.locked.take() {
                // Direct writes of a privileged transaction hold no lock word.
                let Some((wk, idx)) = loc_entry(loc) else { continue };
                silo::unlock(&self.tables[w.table as usize].caches[wk].entry(idx).cc[0], prev);
            }
        }
    }

    /// Read validation as the protocol requires, plus phantom checks of every
    /// scanned range (all protocols). `logical` is TicToc's commit timestamp.
    fn validate(&self, logical: u64) -> Result<()> {
        // Locks (2PL, partitions) and timestamp ordering (rts) already
        // protected the reads; the others validate them now.
        let validate_reads = !(P::LOCKING.is_some() || P::PARTITIONED || P::TIMESTAMP_ORDERING);
        if validate_reads {
            for r in &self.reads {
                let ok = if P::TICTOC {
                    self.tictoc_read_valid(r, logical)
                } else {
                    self.read_still_valid(r)
                };
                if !ok {
                    return Err(Error::Abort(AbortReason::ReadValidation));
                }
            }
        }
        if self.scans.iter().any(|s| !self.scan_still_valid(s)) {
            return Err(Error::Abort(AbortReason::Phantom));
        }
        Ok(())
    }

    /// TicToc: commit_ts = max(writes' rts + 1, reads' wts).
    fn tictoc_commit_ts(&self) -> u64 {
        let mut ts = self.reads.iter().map(|r| r.wts).max().unwrap_or(0);
        for w in &self.writes {
            let (loc, _) = w.locked.expect("locked at commit");
            let (owner, idx) = loc_entry(loc).expect("locked records are cached");
            let rts =
                self.tables[w.table as usize].caches[owner].entry(idx).cc[2].load(Ordering::SeqCst);
            ts = ts.max(rts + 1);
        }
        ts
    }

    /// TicToc: the version read is still current at `commit_ts` (extend its rts).
    fn tictoc_read_valid(&self, r: &ReadItem, commit_ts: u64) -> bool {
        let t = &self.tables[r.table as usize];
        if t.records.loc(r.rid).load(Ordering::Acquire) != r.loc {
            return false;
        }
        let Some((w, idx)) = loc_entry(r.loc) else { return r.loc == LOC_EMPTY };
        let e = t.caches[w].entry(idx);
        let mine =
            self.writes.iter().any(|x| x.table == r.table && x.rid == r.rid && x.locked.is_some());
        loop {
            let word = e.cc[0].load(Ordering::Acquire);
            if word & !silo::LOCK != r.observed || e.cc[1].load(Ordering::Acquire) != r.wts {
                return false;
            }
            let rts = e.cc[2].load(Ordering::Acquire);
            if rts >= commit_ts || mine {
                return true;
            }
            if word & silo::LOCK != 0 {
                return false;
            }
            crate::sched::point();
            if e.cc[2].compare_exchange(rts, commit_ts, Ordering::SeqCst, Ordering::Acquire).is_ok()
            {
                self.s.tictoc_high.fetch_max(commit_ts, Ordering::AcqRel);
                // Re-check that no writer slipped in between: its install
                // changes the version word, and a writer that locked the
                // record after our lock check may have read the rts before
                // this extension, so its commit timestamp need not be above
                // ours: any lock now fails the read. (The lock CAS and this
                // load, and the extension and the writer's rts load, are
                // SeqCst: one of the two sides sees the other.) The lock
                // case let write skews commit before (found by the shuttle
                // schedules, `tests/schedules.rs`).
                let now = e.cc[0].load(Ordering::SeqCst);
                if self.race(RaceFault::TictocExtendUnderLock) {
                    return now & !silo::LOCK == r.observed;
                }
                return now == r.observed;
            }
        }
    }

    fn read_still_valid(&self, r: &ReadItem) -> bool {
        let t = &self.tables[r.table as usize];
        let current = t.records.loc(r.rid).load(Ordering::Acquire);
        if current != r.loc {
            return false;
        }
        // An unchanged empty or heap location is the same version: a heap
        // slot is not reclaimed while this transaction runs (S2).
        let Some((w, idx)) = loc_entry(r.loc) else { return true };
        let mine =
            self.writes.iter().any(|x| x.table == r.table && x.rid == r.rid && x.locked.is_some());
        // A multi-version install points the record at its new head *before*
        // it unlocks the old head with the old head's word unchanged (the
        // version stays valid for older snapshots), so the unlocked, unchanged
        // word alone does not prove the version is still the newest: the
        // location is checked again after the word (found by the shuttle
        // schedules, `tests/schedules.rs`: hekaton committed write
        // skews before).
        silo::still_valid(&t.caches[w].entry(idx).cc[0], r.observed, mine)
            && (self.race(RaceFault::NoLocationRecheck)
                || t.records.loc(r.rid).load(Ordering::Acquire) == r.loc)
    }

    /// Take a free heap slot for every write; pages come from the pool.
    fn allocate_slots(&mut self) -> Result<()> {
        for i in 0..self.writes.len() {
            let t = self.tables[self.writes[i].table as usize].clone();
            let slot = self.allocate_slot(&t)?;
            self.writes[i].slot = slot;
            let reserve =
                if P::MULTI_VERSION { self.needs_new_entry(i) } else { self.must_move(i) };
            if reserve {
                // Reserved now: once persisted, installing must not fail. A
                // full region aborts (retryable) rather than write in place,
                // which for `must_move` would be a remote write (N1).
                self.writes[i].new_entry = match self.allocate_entry(&t) {
                    Ok(idx) => Some(idx),
                    // Zen+ step 3 (multi-version only): alone, a full region
                    // installs in place or in NVM (`install`).
                    Err(Error::Abort(AbortReason::CacheFull)) if self.privileged_on_full()? => None,
                    Err(e) => return Err(e),
                };
            }
        }
        Ok(())
    }

    /// Multi-version: does write `i` install a new version entry? Updates
    /// and deletes do. An insert fills its locked absent entry in place (an
    /// older reader then aborts rather than seeing "absent"), unless that
    /// entry is a tombstone, i.e. a version some snapshot may still read
    /// (R4 of `adaptive.rs`), or is homed on another node (N1, a reader
    /// there created it): then the insert goes above it.
    fn needs_new_entry(&self, i: usize) -> bool {
        let w = &self.writes[i];
        match w.locked {
            Some((loc, prev)) if w.kind == WriteKind::Insert => {
                loc_entry(loc).is_some() && (silo::cts_of(prev) != 0 || self.must_move(i))
            }
            Some((loc, _)) => loc_entry(loc).is_some(),
            None => true,
        }
    }

    /// Would installing write `i` where its record is cached write another
    /// node's memory in a NUMA-local-write mode? Then it moves to this
    /// worker's region (a copy, or a new version above the foreign entry).
    fn must_move(&self, i: usize) -> bool {
        let w = &self.writes[i];
        let Some((owner, idx)) = w.locked.and_then(|(loc, _)| loc_entry(loc)) else {
            return false;
        };
        self.s.numa_write_must_move(self.id, owner, idx)
    }

    fn allocate_slot(&mut self, t: &Table) -> Result<u64> {
        let mut region = t.heaps[self.id].lock();
        if let Some(slot) = region.allocate() {
            return Ok(slot);
        }
        drop(region);
        let (page, offset) = self.s.allocate_heap_page(self.id, t).map_err(|e| match e {
            Error::Pmem(p) if p.is_retryable() => Error::Abort(AbortReason::OutOfSpace),
            other => other,
        })?;
        let mut region = t.heaps[self.id].lock();
        region.add_page(page, offset);
        Ok(region.allocate().expect("a new page has free slots"))
    }

    fn free_unwritten_slots(&mut self) {
        for w in &mut self.writes {
            if let Some(idx) = w.new_entry.take() {
                let t = &self.tables[w.table as usize];
                t.caches[self.id].free_unpublished(idx);
            }
            if w.slot != 0 {
                let t = &self.tables[w.table as usize];
                let mut region = t.heaps[self.id].lock();
                if let Some(page) = region.free(w.slot) {
                    self.s.release_heap_page(self.id, t, &mut region, page);
                }
                w.slot = 0;
            }
        }
    }

    /// Alg. 1. Returns whether the commit is durable on return.
    fn persist_new_versions(&mut self, cts: u64) -> bool {
        let lp = self
            .writes
            .iter()
            .enumerate()
            .min_by_key(|(_, w)| self.tables[w.table as usize].persist_rank)
            .map(|(i, _)| i)
            .expect("a writing transaction");
        // Before anything of ours can persist: a transaction that hides keys
        // from scans is made durable before it installs, and the writers we
        // read from are flushed for the fence below (`deps.rs`).
        let hides = self.hides_keys();
        self.flush_dependencies(true);
        let p = self.s.pool.persister(self.thread);
        p.marker(Marker::Begin { txn: cts });
        for (i, w) in self
            .writes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != lp)
            .chain(std::iter::once((lp, &self.writes[lp])))
        {
            let t = &self.tables[w.table as usize];
            let deleted = w.kind == WriteKind::Delete;
            if i == lp {
                // The LP tuple's word 1 is written once, after the fence,
                // with the LP bit: until then it stays durably zero (S1), so
                // the slot reads as free, which recovery treats as this
                // uncommitted transaction's tuple would be.
                p.write(w.slot, &SlotHeader::word0(w.key, deleted).to_le_bytes());
            } else {
                let mut head = [0u8; 16];
                head[0..8].copy_from_slice(&SlotHeader::word0(w.key, deleted).to_le_bytes());
                head[8..16].copy_from_slice(&SlotHeader::word1(cts, false).to_le_bytes());
                p.write(w.slot, &head);
            }
            let mut len = heap::SLOT_HEADER_BYTES;
            if !deleted {
                p.write(w.slot + len, &self.write_data[w.data_at..w.data_at + t.row_bytes]);
                len += t.row_bytes as u64;
            }
            if !self.fault(Fault::SkipFlushes) {
                p.flush(w.slot, len);
            }
            self.s.numa_slot(self.id, w.slot, true);
        }
        if !self.fault(Fault::NoFenceBeforeLp) {
            p.fence();
            self.after_fence();
        }
        let lp_word = self.writes[lp].slot + 8;
        let word = SlotHeader::word1(cts, true);
        if self.fault(Fault::TornLpWord) {
            p.write(lp_word, &word.to_le_bytes()[..4]);
            p.write(lp_word + 4, &word.to_le_bytes()[4..]);
        } else {
            p.write_u64_atomic(lp_word, word);
        }
        if !self.fault(Fault::SkipFlushes) {
            p.flush(lp_word, 8);
        }
        self.unfenced_cts = Some(cts);
        if self.durability == Durability::Lazy && !hides {
            // Readers that find this commit not yet durable flush this line
            // (published before the install makes our versions visible).
            self.s.unfenced_lp[self.id].store(lp_word, Ordering::Release);
        }
        if self.durability == Durability::Immediate || hides {
            if self.fault(Fault::AckBeforeLpFence) {
                p.marker(Marker::Ack { txn: cts });
                self.unfenced_cts = None;
                self.s.durable_cts[self.id].store(cts, Ordering::Release);
            }
            p.fence();
            self.after_fence();
            return true;
        }
        false
    }

    /// Make the new versions visible, unlock, and queue superseded slots.
    fn install(&mut self, cts: u64, logical: u64) {
        fence(Ordering::Release);
        let data = std::mem::take(&mut self.write_data);
        for i in 0..self.writes.len() {
            crate::sched::point();
            let w = self.writes[i];
            let t = self.tables[w.table as usize].clone();
            let (loc, prev) = w.locked.expect("locked at commit");
            let deleted = w.kind == WriteKind::Delete;
            let Some((owner, idx)) = loc_entry(loc) else {
                let old = Garbage::superseded(w.table, loc, silo::cts_of(prev), cts);
                self.install_direct(&t, w.rid, old, w.slot, deleted);
                self.writes[i].locked = None;
                continue;
            };
            let entry = t.caches[owner].entry(idx);
            let old_slot = entry.slot.load(Ordering::Acquire);
            let new_row = &data[w.data_at..w.data_at + t.row_bytes];
            maintain_secondary(
                &t,
                (owner, idx, prev),
                w.key,
                (!deleted).then_some(new_row),
                &mut self.row_buf,
            );
            let new_slot = if deleted { 0 } else { w.slot };
            // Garbage is queued (`gc_low` lowered) before the new version is
            // unlocked, so any transaction that sees the new version also
            // sees it pending (S3).
            if old_slot != 0 {
                self.retire_slot(Garbage::superseded(w.table, old_slot, silo::cts_of(prev), cts));
            }
            if deleted {
                self.retire_slot(Garbage::tombstone(w.table, w.slot, cts));
            }
            if P::MULTI_VERSION
                && let Some(new_idx) = w.new_entry
            {
                self.install_version(
                    &t, w.rid, w.key, new_idx, new_slot, new_row, cts, deleted, loc,
                );
                entry.cc[0].store(prev & !silo::LOCK, Ordering::Release);
                self.writes[i].locked = None;
                self.writes[i].new_entry = None;
                continue;
            }
            self.writes[i].new_entry = None;
            let version = Version { slot: new_slot, cts, logical, deleted };
            self.install_single(&t, &w, (owner, idx, prev), new_row, version);
            self.writes[i].locked = None;
        }
        self.write_data = data;
    }

    /// Install a single-version write (or a multi-version one in place, see
    /// `allocate_slots`) of the record locked in entry `idx` of `owner`'s
    /// region, whose version word was `prev`: into a copy reserved because
    /// staying would be a remote write (N1), or Zen's best-effort copy on a
    /// foreign write, or else in place.
    fn install_single(
        &mut self,
        t: &Table,
        w: &WriteItem,
        (owner, idx, prev): (usize, u32, u64),
        new_row: &[u8],
        v: Version,
    ) {
        let entry = t.caches[owner].entry(idx);
        if v.deleted && !P::MULTI_VERSION {
            // Still locked: the deleted key leaves the ordered index, so scans
            // no longer walk it (I1, `index.rs`). Single-version protocols
            // have no snapshot that could still read the deleted row;
            // multi-version ones keep the key for their older readers.
            t.index.unlink(w.key);
        }
        let copy = match w.new_entry {
            Some(reserved) => Some(reserved),
            None if P::COPY_ON_FOREIGN_WRITE && owner != self.id => self.allocate_entry(t).ok(),
            None => None,
        };
        if let Some(copy) = copy {
            self.install_copy(t, w.rid, w.key, copy, new_row, v);
            entry.flags.fetch_or(FLAG_COPY, Ordering::AcqRel);
            entry.cc[0].store(silo::OBSOLETE | (prev & !silo::LOCK), Ordering::Release);
            // C5: the owner retires the original at its next allocation.
            t.caches[owner].push_copied(idx);
            return;
        }
        // In place: local, or a mode that promises nothing, or a privileged
        // multi-version transaction whose region is full.
        // N1, checked in every build (one branch when NUMA is off); the
        // NUMA tests also assert that no remote write was counted.
        assert!(
            !self.s.numa_write_must_move(self.id, owner, idx)
                || (P::MULTI_VERSION && self.exclusive_mine()),
            "remote in-place install of record {} (N1)",
            w.rid
        );
        if !v.deleted {
            t.caches[owner].write_row(idx, new_row);
            self.s.numa_entry(self.id, owner, idx, true);
        }
        entry.slot.store(v.slot, Ordering::Release);
        if P::TICTOC {
            entry.cc[1].store(v.logical, Ordering::Release);
            entry.cc[2].store(v.logical, Ordering::Release);
        }
        crate::sched::point();
        entry.cc[0].store(silo::tid(v.cts, v.deleted), Ordering::Release);
    }

    /// Zen+ step 3: the privileged transaction's new version of a record whose
    /// version was in NVM stays in NVM; the record points at the new slot.
    /// `old` is the superseded slot, as a garbage item.
    fn install_direct(&mut self, t: &Table, rid: u64, old: Garbage, slot: u64, deleted: bool) {
        debug_assert!(self.exclusive_mine() && t.secondary.is_empty());
        let cts = old.cts;
        self.retire_slot(old);
        let home = if deleted {
            self.retire_slot(Garbage::tombstone(t.id.0, slot, cts));
            LOC_EMPTY
        } else {
            slot
        };
        t.records.loc(rid).store(home, Ordering::Release);
        self.s.adaptive.nvm_direct_writes.fetch_add(1, Ordering::Relaxed);
    }

    /// Copy-on-foreign-write (§3.2), single-version protocols: the new
    /// version goes to entry `idx` of this worker's region and the record
    /// points there; the caller then marks the old entry copied and obsolete.
    ///
    /// The old entry stays locked (the version word's LOCK, and for 2PL the
    /// exclusive lock word) until then, so no writer can slip in between;
    /// readers that still find the old entry see it obsolete, or see the
    /// location changed, and re-read the location (as after an eviction).
    /// CC-Meta of the copy starts clean: no 2PL holder (a lock word left from
    /// the entry's previous use would block it), TicToc's wts = rts = the
    /// commit's logical timestamp, as an in-place install would set.
    fn install_copy(&mut self, t: &Table, rid: u64, key: u64, idx: u32, row: &[u8], v: Version) {
        let region = &t.caches[self.id];
        let e = region.entry(idx);
        e.key.store(key, Ordering::Relaxed);
        e.record.store(rid + 1, Ordering::Relaxed);
        e.slot.store(v.slot, Ordering::Relaxed);
        e.flags.store(FLAG_CLOCK, Ordering::Relaxed);
        e.touch_ts.store(self.begin_ts, Ordering::Relaxed);
        for word in &e.cc[1..] {
            word.store(0, Ordering::Relaxed);
        }
        if P::TICTOC {
            e.cc[1].store(v.logical, Ordering::Relaxed);
            e.cc[2].store(v.logical, Ordering::Relaxed);
        }
        if !v.deleted {
            region.write_row(idx, row);
            self.s.numa_entry(self.id, self.id, idx, true);
        }
        e.cc[0].store(silo::tid(v.cts, v.deleted), Ordering::Release);
        t.records.loc(rid).store(loc_cached(self.id, idx), Ordering::Release);
    }

    fn abort(&mut self) {
        self.unlock_all();
    }

    /// Is the injected bug `f` switched on (verification only)?
    #[inline]
    pub(super) fn fault(&self, f: Fault) -> bool {
        self.s.config.fault == Some(f)
    }

    /// Is the injected race `f` switched on (schedule tests only)?
    #[inline]
    fn race(&self, f: RaceFault) -> bool {
        self.s.config.race_fault == Some(f)
    }
}

/// What `install_copy` writes: the new version's heap slot (0 for a
/// deletion), Tx-CTS, TicToc timestamp and whether it deletes the record.
#[derive(Debug, Clone, Copy)]
struct Version {
    slot: u64,
    cts: u64,
    logical: u64,
    deleted: bool,
}

/// Keep secondary indexes in step with an installed write (lock held);
/// the entry `idx` of `owner`'s region held the version word `prev`. `old`
/// is a scratch buffer for the old row (the worker's, so no allocation).
fn maintain_secondary(
    t: &Table,
    (owner, idx, prev): (usize, u32, u64),
    key: u64,
    new_row: Option<&[u8]>,
    old: &mut Vec<u8>,
) {
    if t.secondary.is_empty() {
        return;
    }
    old.resize(t.row_bytes, 0);
    let had_old = prev & silo::ABSENT == 0;
    if had_old {
        t.caches[owner].read_row(idx, old);
    }
    crate::index::maintain_secondary(&t.secondary, key, had_old.then_some(&old[..]), new_row);
}

impl<B: PmemBackend, P: Protocol> EngineWorker for ZenWorker<'_, B, P> {
    fn id(&self) -> usize {
        self.id
    }

    fn execute(
        &mut self,
        opts: &TxnOptions,
        body: &mut dyn FnMut(&mut dyn Transaction) -> Result<()>,
    ) -> Result<CommitInfo> {
        self.durability = opts.durability.unwrap_or(self.s.config.durability);
        let txns = &self.s.txns[self.id];
        txns.store(txns.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let result = self.begin(opts.read_only).and_then(|()| {
            body(&mut ZenTxn { w: self }).and_then(|()| {
                if opts.read_only && !self.writes.is_empty() {
                    return Err(Error::Unsupported("a read-only transaction wrote".into()));
                }
                self.commit()
            })
        });
        if result.is_err() {
            self.abort();
        }
        self.end();
        self.finish(&result);
        result
    }

    fn sync(&mut self) -> Result<()> {
        self.s.pool.persister(self.thread).fence();
        self.after_fence();
        Ok(())
    }

    fn begin_txn(&mut self, opts: &TxnOptions) -> Result<()> {
        if self.explicit.is_some() {
            return Err(Error::Unsupported("a transaction is already open on this worker".into()));
        }
        self.durability = opts.durability.unwrap_or(self.s.config.durability);
        let txns = &self.s.txns[self.id];
        txns.store(txns.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if let Err(e) = self.begin(opts.read_only) {
            self.end();
            self.finish_adaptive(false, e.is_retryable());
            return Err(e);
        }
        self.explicit = Some(*opts);
        Ok(())
    }

    fn current_txn(&mut self) -> Option<&mut dyn Transaction> {
        if self.explicit.is_some() { Some(self) } else { None }
    }

    fn commit_txn(&mut self) -> Result<CommitInfo> {
        let opts =
            self.explicit.take().ok_or_else(|| Error::Unsupported("no open transaction".into()))?;
        let result = if opts.read_only && !self.writes.is_empty() {
            Err(Error::Unsupported("a read-only transaction wrote".into()))
        } else {
            self.commit()
        };
        if result.is_err() {
            self.abort();
        }
        self.end();
        self.finish(&result);
        result
    }

    fn abort_txn(&mut self) {
        if self.explicit.take().is_some() {
            self.abort();
            self.end();
            self.finish_adaptive(false, false);
        }
    }

    fn counters(&self) -> CounterSnapshot {
        self.s.pool.counters(self.thread).snapshot()
    }

    fn cache_stats(&self) -> CacheStats {
        self.stats
    }
}

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Zen+ bookkeeping once an attempt ended (`adaptive.rs`).
    fn finish(&mut self, result: &Result<CommitInfo>) {
        let retryable = result.as_ref().err().is_some_and(Error::is_retryable);
        self.finish_adaptive(result.is_ok(), retryable);
    }
}

impl<B: PmemBackend, P: Protocol> Drop for ZenWorker<'_, B, P> {
    fn drop(&mut self) {
        // Make lazily committed transactions durable before the worker goes;
        // the second fence covers the slot zeroing the first one's
        // maintenance issued, and the last fence the zeroing and floor
        // raises of the second, so nothing of this worker is left pending
        // (its pipeline keeps what is left for the worker id's next user).
        let _ = EngineWorker::sync(self);
        let _ = EngineWorker::sync(self);
        self.s.pool.persister(self.thread).fence();
        self.s.release_worker(self.id);
    }
}
