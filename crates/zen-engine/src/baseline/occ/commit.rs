//! Commit of the OCC core, as named phases (see `occ.rs` for the order and
//! the `Store` hooks between them).
//!
//! Any failure before `persist` aborts: the worker unlocks every record it
//! holds and, after `enter_commit`, calls `leave_commit(None)`. Nothing has
//! been made durable by then; what `prepare` reserved it gives back itself.

use std::sync::atomic::{Ordering, fence};

use super::protocol::Garbage;
use super::tid;
use super::txn::{OccWorker, ScanItem, WriteKind, backoff};
use super::{Store, Tables};
use crate::api::CommitInfo;
use crate::error::{AbortReason, Error, Result};

/// Spins on a locked record at commit before aborting (no waiting on locks
/// beyond this: Silo's no-wait commit locking).
const LOCK_SPINS: u32 = 64;

impl<S: Store> OccWorker<'_, S> {
    pub(super) fn commit(&mut self) -> Result<CommitInfo> {
        let versioned = self.core.protocol.timestamp_order;
        if self.writes.is_empty() {
            if !versioned {
                self.validate()?;
            }
            return Ok(CommitInfo { cts: 0, durable: true, writes: 0 });
        }
        self.lock_write_set()?;
        let core = self.core;
        S::enter_commit(core, &mut self.local);
        let cts = if versioned { self.ts } else { core.clock.next(self.id) };
        let tables = self.tables.clone();
        let checked = if versioned { self.check_timestamp_order() } else { self.validate() };
        let decided = checked.and_then(|()| {
            S::prepare(core, &mut self.local, cts, &mut self.writes, &self.data, &tables)
        });
        if let Err(e) = decided {
            S::leave_commit(core, &mut self.local, None, self.durability);
            return Err(e);
        }
        debug_assert!(cts > self.last_cts, "cts {cts} not above the previous {}", self.last_cts);
        self.last_cts = cts;
        S::persist(core, &mut self.local, cts, &self.writes, &self.data, &tables);
        self.install(cts, &tables);
        let durable = S::leave_commit(core, &mut self.local, Some(cts), self.durability);
        Ok(CommitInfo { cts, durable, writes: self.writes.len() as u32 })
    }

    /// Lock every written record in (table, rid) order (deadlock-free).
    fn lock_write_set(&mut self) -> Result<()> {
        // (table, rid) pairs are unique in the write set (`find_write` merges
        // a second write of a record), so an unstable sort gives the same
        // order; it needs no scratch buffer (the stable sort allocated one
        // for Delivery's ~130 writes).
        self.writes.sort_unstable_by_key(|w| (w.table, w.rid));
        let tables = self.tables.clone();
        for i in 0..self.writes.len() {
            if self.writes[i].locked.is_some() {
                continue;
            }
            let t = &tables[self.writes[i].table as usize];
            let rid = self.writes[i].rid;
            let word = &t.records.get(rid).tid;
            let mut spin = 0;
            let prev = loop {
                if let Some(prev) = tid::try_lock(word) {
                    break prev;
                }
                if spin >= LOCK_SPINS {
                    return Err(Error::Abort(AbortReason::WriteLocked));
                }
                backoff(spin);
                spin += 1;
            };
            self.writes[i].locked = Some(prev);
            S::on_lock(self.core, &mut self.local, t, rid);
        }
        Ok(())
    }

    /// Does this transaction hold the lock of (table, rid)? (Write set sorted.)
    fn holds(&self, table: u32, rid: u64) -> bool {
        self.writes
            .binary_search_by_key(&(table, rid), |w| (w.table, w.rid))
            .is_ok_and(|i| self.writes[i].locked.is_some())
    }

    /// TO / MVCC (`protocol.rs`, commit): with the write set locked, each head
    /// must be older than the transaction and unread by younger ones; an
    /// insert also needs the table unscanned by younger ones.
    fn check_timestamp_order(&self) -> Result<()> {
        // The writer's half of the head check (readers: `protocol::raise`).
        fence(Ordering::SeqCst);
        let ts = self.ts;
        for w in &self.writes {
            let t = &self.tables[w.table as usize];
            let prev = w.locked.expect("the write set is locked");
            let rts = t.records.get(w.rid).cc.load(Ordering::SeqCst);
            if tid::cts_of(prev) >= ts
                || rts > ts
                || (w.kind == WriteKind::Insert && t.scan_rts.load(Ordering::SeqCst) > ts)
            {
                return Err(Error::Abort(AbortReason::TimestampOrder));
            }
        }
        Ok(())
    }

    /// Every scanned range (phantoms), then Silo's read validation: a
    /// re-scan holds the range as it was when it started (`rescan_stable`),
    /// and the reads checked after it were current then too.
    fn validate(&self) -> Result<()> {
        for scan in &self.scans {
            if !self.scan_still_valid(scan) {
                return Err(Error::Abort(AbortReason::Phantom));
            }
        }
        for r in &self.reads {
            crate::sched::point();
            let word = &self.tables[r.table as usize].records.get(r.rid).tid;
            let cur = word.load(Ordering::Acquire);
            if cur & !tid::LOCK != r.observed
                || (tid::is_locked(cur) && !self.holds(r.table, r.rid))
            {
                return Err(Error::Abort(AbortReason::ReadValidation));
            }
        }
        Ok(())
    }

    /// Every record in the scanned range now was met live by the scan (and
    /// is validated as a read), or is this transaction's write, or is not
    /// live and not being inserted (unlocked absent); and no key of the range
    /// left the index meanwhile (`index::PrimaryIndex::rescan_stable`).
    fn scan_still_valid(&self, scan: &ScanItem) -> bool {
        let t = &self.tables[scan.table as usize];
        t.index.rescan_stable(scan.low, scan.high, || self.rescan_matches(t, scan))
    }

    fn rescan_matches(&self, t: &super::Table<S::TableExt>, scan: &ScanItem) -> bool {
        let seen = &self.seen[scan.seen_at..scan.seen_at + scan.seen_len];
        let mut next_seen = seen.iter().peekable();
        for (key, rid) in t.range(scan.low..=scan.high) {
            while next_seen.peek().is_some_and(|&&(k, _)| k < key) {
                next_seen.next();
            }
            if next_seen.peek().is_some_and(|&&(k, r)| k == key && r == rid) {
                next_seen.next();
                continue;
            }
            if self.find_write(scan.table, rid).is_some() {
                continue;
            }
            let cur = t.records.get(rid).tid.load(Ordering::Acquire);
            if !tid::is_absent(cur) || tid::is_locked(cur) {
                return false;
            }
        }
        true
    }

    /// Put every new version in place, maintain secondary indexes, unlock.
    fn install(&mut self, cts: u64, tables: &Tables<S::TableExt>) {
        // The worker's row buffer holds old rows for the secondary indexes.
        let mut old = std::mem::take(&mut self.row_buf);
        let versioned = self.core.protocol.timestamp_order;
        let old_versions = self.core.protocol.old_versions;
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            let t = &tables[w.table as usize];
            let prev = w.locked.expect("the write set is locked at install");
            let new_row = (w.kind != WriteKind::Delete)
                .then(|| &self.data[w.data_at..w.data_at + t.row_bytes]);
            let had_old = !tid::is_absent(prev);
            if had_old && (old_versions || !t.secondary.is_empty()) {
                old.resize(t.row_bytes, 0);
                S::read_row(self.core, &mut self.local, t, w.rid, prev, &mut old);
            }
            if !t.secondary.is_empty() {
                t.maintain_secondary(w.key, had_old.then_some(&old[..]), new_row);
            }
            if old_versions {
                // Before the new head is published (`protocol.rs`, install).
                let row = had_old.then_some(&old[..]);
                self.core.versions.push(w.table, w.rid, tid::cts_of(prev), cts, row);
            }
            if old_versions || (versioned && w.deleted()) {
                // TO queues deletions only: the key leaves the index later.
                let key = w.key;
                self.garbage.push_back(Garbage { table: w.table, rid: w.rid, key, until: cts });
            }
            S::install_row(self.core, &mut self.local, t, &w, new_row, cts);
            if w.deleted() && !versioned {
                // Still locked: the deleted key leaves the ordered index, so
                // scans no longer walk it (I1, `index.rs`; no snapshots here).
                t.index.unlink(w.key);
            }
            crate::sched::point();
            t.records.get(w.rid).tid.store(tid::make(cts, w.deleted()), Ordering::Release);
            self.writes[i].locked = None;
        }
        self.row_buf = old;
    }

    /// Release every lock this transaction holds (abort).
    pub(super) fn unlock_all(&mut self) {
        let tables = self.tables.clone();
        for w in &mut self.writes {
            if let Some(prev) = w.locked.take() {
                let t = &tables[w.table as usize];
                S::on_unlock(self.core, &mut self.local, t, w.rid);
                tid::unlock(&t.records.get(w.rid).tid, prev);
            }
        }
    }
}
