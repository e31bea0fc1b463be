//! Workers and transactions of the OCC core: reads, writes, scans and the
//! `Transaction` implementation (commit is in `commit.rs`).
//!
//! A worker owns reusable read / write / scan sets (no allocation on the hot
//! path once they have grown) and runs one transaction at a time.
//!
//! READ (stable read of a record): TID, row, acquire fence, TID again; retry
//! while they differ or the record is locked by a committer. An absent record
//! that an inserter holds locked reads as absent *unlocked* (its state before
//! the insert): validation fails if the insert commits, holds if it aborts.
//!
//! WRITES are buffered. An insert locks its (absent) record at once, so two
//! inserts of one key conflict at the second (`InsertConflict`); update and
//! delete read the record first (so it is validated) and lock at commit.
//!
//! PROTOCOLS (`protocol.rs`). Under 2PL, every read takes a shared lock
//! first and every write an exclusive one (released in `end`), and a
//! conflict waits or aborts by the protocol's policy (`lock_record`); under
//! timestamp ordering (TO, MVCC), reads go to `read_version` at the
//! transaction's timestamp.

use std::collections::VecDeque;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use zen_pmem::CounterSnapshot;

use super::engine::Core;
use super::protocol::{self, Deadlock, Garbage};
use super::table::Table;
use super::{Store, hit_or_miss, tid};
use crate::api::{
    CacheStats, CommitInfo, Durability, EngineWorker, TableId, Transaction, TxnOptions,
};
use crate::error::{AbortReason, Error, Result};
use crate::schema::MAX_KEY;

/// Spins on a record locked by a committer before giving up.
pub(super) const SPIN_LIMIT: u32 = 1 << 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Insert,
    Update,
    Delete,
}

/// One buffered write.
#[derive(Debug, Clone, Copy)]
pub struct WriteItem {
    pub table: u32,
    pub key: u64,
    pub rid: u64,
    pub kind: WriteKind,
    /// Offset of the new row in the worker's write data (a delete has a
    /// zeroed placeholder row there).
    pub data_at: usize,
    /// The TID before this transaction locked the record, once locked.
    pub locked: Option<u64>,
    /// Scratch for the store (wbl: the new version's slot).
    pub aux: u64,
}

impl WriteItem {
    pub fn deleted(&self) -> bool {
        self.kind == WriteKind::Delete
    }
}

#[derive(Debug, Clone, Copy)]
pub(super) struct ReadItem {
    pub table: u32,
    pub rid: u64,
    pub observed: u64,
}

/// A scanned range and the (key, rid) pairs it met, in key order.
#[derive(Debug, Clone, Copy)]
pub(super) struct ScanItem {
    pub table: u32,
    pub low: u64,
    pub high: u64,
    pub seen_at: usize,
    pub seen_len: usize,
}

pub struct OccWorker<'e, S: Store> {
    pub(super) core: &'e Core<S>,
    pub(super) id: usize,
    pub(super) local: S::Local,
    pub(super) tables: Arc<Vec<Arc<Table<S::TableExt>>>>,
    tables_version: u64,
    pub(super) reads: Vec<ReadItem>,
    pub(super) writes: Vec<WriteItem>,
    /// Which (table, record) pairs `writes` may hold (`find_write`).
    written: crate::access::WriteFilter,
    pub(super) data: Vec<u8>,
    pub(super) scans: Vec<ScanItem>,
    pub(super) seen: Vec<(u64, u64)>,
    pub(super) durability: Durability,
    pub(super) stats: CacheStats,
    pub(super) last_cts: u64,
    pub(super) row_buf: Vec<u8>,
    /// The options of the explicit transaction open on this worker, if any.
    explicit: Option<TxnOptions>,
    /// TO / MVCC: the running transaction's timestamp (its Tx-CTS).
    pub(super) ts: u64,
    /// 2PL: the records whose lock this transaction holds.
    held: Vec<(u32, u64)>,
    /// wait-die: the priority of a transaction that died, for its retry.
    kept_priority: Option<u64>,
    /// TO / MVCC: versions (TO: deletions) this worker superseded, oldest
    /// first.
    pub(super) garbage: VecDeque<Garbage>,
}

impl<'e, S: Store> OccWorker<'e, S> {
    pub(super) fn new(core: &'e Core<S>, id: usize) -> Self {
        OccWorker {
            core,
            id,
            local: S::local(core, id),
            tables: core.worker_tables(),
            tables_version: core.tables_version(),
            reads: Vec::new(),
            writes: Vec::new(),
            written: crate::access::WriteFilter::default(),
            data: Vec::new(),
            scans: Vec::new(),
            seen: Vec::new(),
            durability: core.config.durability,
            stats: CacheStats::default(),
            last_cts: 0,
            row_buf: Vec::new(),
            explicit: None,
            ts: 0,
            held: Vec::new(),
            kept_priority: None,
            garbage: VecDeque::new(),
        }
    }

    fn begin(&mut self) {
        let version = self.core.tables_version();
        if version != self.tables_version {
            self.tables = self.core.worker_tables();
            self.tables_version = version;
        }
        let p = self.core.protocol;
        if p.timestamp_order {
            self.ts = self.core.begin_versioned(self.id);
        }
        if p.locking == Some(Deadlock::WaitDie) {
            let priority =
                self.kept_priority.take().unwrap_or_else(|| self.core.clock.next(self.id));
            self.core.lock_priority[self.id].store(priority, Ordering::Release);
        }
    }

    fn end(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.written.clear();
        self.data.clear();
        self.scans.clear();
        self.seen.clear();
        for (table, rid) in self.held.drain(..) {
            protocol::unlock(&self.tables[table as usize].records.get(rid).cc, self.id);
        }
        match self.core.protocol.locking {
            Some(Deadlock::WaitDie) => {
                self.core.lock_priority[self.id].store(u64::MAX, Ordering::Release);
            }
            Some(Deadlock::Detect) => self.stop_waiting(),
            _ => {}
        }
        if self.core.protocol.timestamp_order {
            self.core.end_versioned(self.id);
            self.collect_versions();
        }
    }

    /// TO / MVCC: drop the versions this worker superseded that no
    /// transaction can read any more; a key deleted that long ago leaves the
    /// ordered index (`protocol.rs`, gc).
    fn collect_versions(&mut self) {
        let Some(first) = self.garbage.front() else { return };
        let horizon = self.core.min_active();
        if first.until > horizon {
            return;
        }
        while let Some(&g) = self.garbage.front() {
            if g.until > horizon {
                break;
            }
            self.garbage.pop_front();
            if !self.core.versions.collect(g.table, g.rid, horizon) {
                continue;
            }
            let t = &self.tables[g.table as usize];
            let word = &t.records.get(g.rid).tid;
            let cur = word.load(Ordering::Acquire);
            if !tid::is_absent(cur) || tid::cts_of(cur) > horizon {
                continue;
            }
            if let Some(prev) = tid::try_lock(word) {
                S::on_lock(self.core, &mut self.local, t, g.rid);
                if prev == cur {
                    t.index.unlink(g.key);
                }
                S::on_unlock(self.core, &mut self.local, t, g.rid);
                tid::unlock(word, prev);
            }
        }
    }

    /// 2PL: take the lock of (t, rid), shared or exclusive; a conflict
    /// aborts or waits (bounded) by the protocol's policy.
    fn lock_record(&mut self, t: &Table<S::TableExt>, rid: u64, exclusive: bool) -> Result<()> {
        let word = &t.records.get(rid).cc;
        let held = word.load(Ordering::Acquire) & (1 << self.id) != 0;
        for spin in 0..SPIN_LIMIT {
            let granted = if exclusive {
                protocol::lock_exclusive(word, self.id)
            } else {
                protocol::lock_shared(word, self.id)
            };
            match granted {
                Ok(()) => {
                    if spin > 0 {
                        self.stop_waiting();
                    }
                    if !held {
                        self.held.push((t.id.0, rid));
                    }
                    return Ok(());
                }
                Err(holders) => self.on_conflict(holders)?,
            }
            backoff(spin);
        }
        self.stop_waiting();
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// 2PL: a lock is held by `holders` (a bitmap of workers): `Ok` to wait,
    /// or the abort the protocol's policy gives (`protocol.rs`, conflict).
    fn on_conflict(&mut self, holders: u64) -> Result<()> {
        match self.core.protocol.locking {
            Some(Deadlock::WaitDie) => {
                let mine = self.core.lock_priority[self.id].load(Ordering::Acquire);
                let mut h = holders;
                while h != 0 {
                    let other = h.trailing_zeros() as usize;
                    h &= h - 1;
                    if self.core.lock_priority[other].load(Ordering::Acquire) < mine {
                        self.kept_priority = Some(mine);
                        return Err(Error::Abort(AbortReason::Deadlock));
                    }
                }
                Ok(())
            }
            Some(Deadlock::Detect) => {
                let mut graph = self.core.waits_for.lock();
                graph[self.id] = holders;
                if crate::cc::two_phase::has_cycle_through(&graph, self.id) {
                    graph[self.id] = 0;
                    return Err(Error::Abort(AbortReason::Deadlock));
                }
                Ok(())
            }
            Some(Deadlock::NoWait) | None => Err(Error::Abort(AbortReason::WriteLocked)),
        }
    }

    /// dl-detect: this worker waits for nobody (any other policy: no-op).
    fn stop_waiting(&self) {
        if self.core.protocol.locking == Some(Deadlock::Detect) {
            self.core.waits_for.lock()[self.id] = 0;
        }
    }

    /// A read under the core's protocol: the TID observed (`read_current`,
    /// after a shared lock under 2PL; `read_version` under TO and MVCC).
    fn read_record(&mut self, t: &Table<S::TableExt>, rid: u64, out: &mut [u8]) -> Result<u64> {
        let p = self.core.protocol;
        if p.timestamp_order {
            return self.read_version(t, rid, out);
        }
        if p.locking.is_some() {
            self.lock_record(t, rid, false)?;
        }
        self.read_current(t, rid, out)
    }

    /// TO / MVCC: the version of `rid` visible at the transaction's
    /// timestamp (`protocol.rs`, read); returns `tid::make(wts, absent)`.
    /// A head newer than the timestamp: MVCC reads the version heap, TO
    /// aborts.
    fn read_version(&mut self, t: &Table<S::TableExt>, rid: u64, out: &mut [u8]) -> Result<u64> {
        let r = t.records.get(rid);
        let ts = self.ts;
        for spin in 0..SPIN_LIMIT {
            let t1 = r.tid.load(Ordering::SeqCst);
            if tid::is_locked(t1) {
                backoff(spin);
                continue;
            }
            if tid::cts_of(t1) > ts {
                if !self.core.protocol.old_versions {
                    return Err(Error::Abort(AbortReason::TimestampOrder));
                }
                let (wts, present) = self
                    .core
                    .versions
                    .read(t.id.0, rid, ts, out)
                    .ok_or(Error::Abort(AbortReason::TimestampOrder))?;
                return Ok(tid::make(wts, !present));
            }
            protocol::raise(&r.cc, ts);
            let hit =
                !tid::is_absent(t1) && S::read_row(self.core, &mut self.local, t, rid, t1, out);
            fence(Ordering::Acquire);
            if r.tid.load(Ordering::SeqCst) == t1 {
                if !tid::is_absent(t1) {
                    hit_or_miss(&mut self.stats, hit);
                }
                return Ok(t1);
            }
        }
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// `Transaction::prefetch` (`PrimaryIndex::prefetch`'s stages): index
    /// lines, then the record words, then the row (`Store::prefetch_row`,
    /// which may read the record's location word, now on its way). Reads
    /// nothing into the read set and writes nothing.
    fn prefetch(&mut self, table: TableId, keys: &[u64]) {
        let Ok(t) = self.table(table) else { return };
        let core = self.core;
        t.index.prefetch(
            keys,
            |rid| zen_pmem::cpu::prefetch(t.records.get(rid)),
            |rids| rids.iter().for_each(|&rid| S::prefetch_row(core, t, rid)),
        );
    }

    /// Table `table`, borrowed from the engine's registry for as long as the
    /// worker borrows the engine: no reference count is touched per
    /// operation (`registry.rs`). Only tables this transaction's table list
    /// knows (the one its commit indexes) are given out.
    fn table(&self, table: TableId) -> Result<&'e Table<S::TableExt>> {
        let id = table.0 as usize;
        let core: &'e Core<S> = self.core;
        match core.registry.get(id) {
            Some(t) if id < self.tables.len() => Ok(t),
            _ => Err(Error::UnknownTableId(table.0)),
        }
    }

    fn check_key(t: &Table<S::TableExt>, key: u64) -> Result<()> {
        if key > MAX_KEY {
            return Err(Error::KeyOutOfRange { table: t.schema.name.clone(), key });
        }
        Ok(())
    }

    fn check_row(t: &Table<S::TableExt>, len: usize) -> Result<()> {
        if len != t.row_bytes {
            return Err(Error::WrongTupleSize {
                table: t.schema.name.clone(),
                expected: t.row_bytes,
                actual: len,
            });
        }
        Ok(())
    }

    /// The access set is bounded (`EngineConfig::max_access_set`).
    fn check_access_limit(&self) -> Result<()> {
        let limit = self.core.config.max_access_set;
        if self.reads.len() + self.writes.len() >= limit {
            return Err(Error::AccessSetFull { limit });
        }
        Ok(())
    }

    /// The TID this transaction observed for (table, rid), if it read it.
    fn observed(&self, table: u32, rid: u64) -> Option<u64> {
        self.reads.iter().rev().find(|r| r.table == table && r.rid == rid).map(|r| r.observed)
    }

    pub(super) fn find_write(&self, table: u32, rid: u64) -> Option<usize> {
        if !self.written.may_hold(table, rid) {
            return None;
        }
        self.writes.iter().position(|w| w.table == table && w.rid == rid)
    }

    /// Stable read of a record: its TID (unlocked) and, when present, its row.
    fn read_current(&mut self, t: &Table<S::TableExt>, rid: u64, out: &mut [u8]) -> Result<u64> {
        let r = t.records.get(rid);
        for spin in 0..SPIN_LIMIT {
            let t1 = r.tid.load(Ordering::Acquire);
            if tid::is_absent(t1) {
                return Ok(t1 & !tid::LOCK);
            }
            if tid::is_locked(t1) {
                backoff(spin);
                continue;
            }
            let hit = S::read_row(self.core, &mut self.local, t, rid, t1, out);
            fence(Ordering::Acquire);
            if r.tid.load(Ordering::Relaxed) == t1 {
                hit_or_miss(&mut self.stats, hit);
                return Ok(t1);
            }
        }
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// Read `key` (read-your-writes first); `Ok(false)` when absent.
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.get_locking(table, key, out, false)
    }

    /// `get`; `exclusive`: under no-wait, lock for the write to come.
    fn get_locking(
        &mut self,
        table: TableId,
        key: u64,
        out: &mut [u8],
        exclusive: bool,
    ) -> Result<bool> {
        let t = self.table(table)?;
        Self::check_key(t, key)?;
        Self::check_row(t, out.len())?;
        self.check_access_limit()?;
        let rid = t.lookup_or_create(key).ok_or(Error::Abort(AbortReason::OutOfSpace))?;
        if exclusive && self.core.protocol.locking.is_some() {
            self.lock_record(t, rid, true)?;
        }
        if let Some(i) = self.find_write(table.0, rid) {
            let w = self.writes[i];
            if w.deleted() {
                return Ok(false);
            }
            out.copy_from_slice(&self.data[w.data_at..w.data_at + t.row_bytes]);
            return Ok(true);
        }
        let observed = self.read_record(t, rid, out)?;
        self.reads.push(ReadItem { table: table.0, rid, observed });
        Ok(!tid::is_absent(observed))
    }

    fn push_write(&mut self, t: &Table<S::TableExt>, key: u64, rid: u64, kind: WriteKind) {
        let data_at = self.data.len();
        self.data.resize(data_at + t.row_bytes, 0);
        self.written.add(t.id.0, rid);
        self.writes.push(WriteItem {
            table: t.id.0,
            key,
            rid,
            kind,
            data_at,
            locked: None,
            aux: 0,
        });
    }

    fn set_row(&mut self, i: usize, row: &[u8]) {
        let at = self.writes[i].data_at;
        self.data[at..at + row.len()].copy_from_slice(row);
    }

    fn update_or_delete(&mut self, table: TableId, key: u64, row: Option<&[u8]>) -> Result<()> {
        let t = self.table(table)?;
        Self::check_key(t, key)?;
        if let Some(r) = row {
            Self::check_row(t, r.len())?;
        }
        let not_found = || Error::KeyNotFound { table: t.schema.name.clone(), key };
        // A missing key gets an absent record too: the read of its absence
        // is validated, so a concurrent insert aborts us (phantom-safe).
        let rid = t.lookup_or_create(key).ok_or(Error::Abort(AbortReason::OutOfSpace))?;
        if let Some(i) = self.find_write(table.0, rid) {
            match (self.writes[i].kind, row) {
                (WriteKind::Delete, _) => return Err(not_found()),
                (WriteKind::Insert, None) => {
                    let w = self.writes.remove(i);
                    if let Some(prev) = w.locked {
                        S::on_unlock(self.core, &mut self.local, t, rid);
                        tid::unlock(&t.records.get(rid).tid, prev);
                    }
                }
                (_, None) => self.writes[i].kind = WriteKind::Delete,
                (_, Some(r)) => self.set_row(i, r),
            }
            return Ok(());
        }
        if self.core.protocol.locking.is_some() {
            self.lock_record(t, rid, true)?;
        }
        // A record this transaction read already is not read again: acting
        // on a second, different view (e.g. "deleted meanwhile") would turn a
        // conflict into a wrong answer; commit validates the first view.
        let present = match self.observed(table.0, rid) {
            Some(observed) => !tid::is_absent(observed),
            None => {
                let mut scratch = std::mem::take(&mut self.row_buf);
                scratch.resize(t.row_bytes, 0);
                let present = self.get(table, key, &mut scratch);
                self.row_buf = scratch;
                present?
            }
        };
        if !present {
            return Err(not_found());
        }
        let kind = if row.is_some() { WriteKind::Update } else { WriteKind::Delete };
        self.push_write(t, key, rid, kind);
        if let Some(r) = row {
            self.set_row(self.writes.len() - 1, r);
        }
        Ok(())
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.table(table)?;
        Self::check_key(t, key)?;
        Self::check_row(t, row.len())?;
        self.check_access_limit()?;
        let duplicate = || Error::DuplicateKey { table: t.schema.name.clone(), key };
        let rid = t.lookup_or_create(key).ok_or(Error::Abort(AbortReason::OutOfSpace))?;
        if let Some(i) = self.find_write(table.0, rid) {
            if !self.writes[i].deleted() {
                return Err(duplicate());
            }
            self.writes[i].kind = WriteKind::Update;
            self.set_row(i, row);
            return Ok(());
        }
        let p = self.core.protocol;
        if p.locking.is_some() {
            self.lock_record(t, rid, true)?;
        }
        if p.timestamp_order {
            // What the key holds at our timestamp decides "duplicate"; a
            // head newer than that cannot be superseded by us.
            let mut scratch = std::mem::take(&mut self.row_buf);
            scratch.resize(t.row_bytes, 0);
            let observed = self.read_version(t, rid, &mut scratch);
            self.row_buf = scratch;
            let observed = observed?;
            if !tid::is_absent(observed) {
                self.reads.push(ReadItem { table: table.0, rid, observed });
                return Err(duplicate());
            }
            let head = t.records.get(rid).tid.load(Ordering::Acquire);
            if tid::cts_of(head) > self.ts {
                return Err(Error::Abort(AbortReason::TimestampOrder));
            }
        }
        let word = &t.records.get(rid).tid;
        let cur = word.load(Ordering::Acquire);
        if !tid::is_absent(cur) {
            if self.observed(table.0, rid).is_some_and(tid::is_absent) {
                // It was absent when this transaction read it: a conflict.
                return Err(Error::Abort(AbortReason::ReadValidation));
            }
            // The key exists: that is a read of it (validated at commit).
            self.reads.push(ReadItem { table: table.0, rid, observed: cur & !tid::LOCK });
            return Err(duplicate());
        }
        crate::sched::point();
        if tid::is_locked(cur)
            || word
                .compare_exchange(cur, cur | tid::LOCK, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return Err(Error::Abort(AbortReason::InsertConflict));
        }
        S::on_lock(self.core, &mut self.local, t, rid);
        // Locked: the key goes (back) into the ordered index (I1, `index.rs`).
        t.index.link(key, rid);
        self.push_write(t, key, rid, WriteKind::Insert);
        let last = self.writes.len() - 1;
        self.writes[last].locked = Some(cur);
        self.set_row(last, row);
        Ok(())
    }

    fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        let t = self.table(table)?;
        let (low, high) = (*range.start(), *range.end());
        crate::index::check_range(&t.schema.name, low, high)?;
        // The worker's row buffer (nothing a scan calls uses it): no
        // allocation per scan.
        let mut row = std::mem::take(&mut self.row_buf);
        row.resize(t.row_bytes, 0);
        let scanned = self.scan_into(t, low, high, limit, f, &mut row);
        self.row_buf = row;
        scanned
    }

    fn scan_into(
        &mut self,
        t: &Table<S::TableExt>,
        low: u64,
        high: u64,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
        row: &mut [u8],
    ) -> Result<usize> {
        if self.core.protocol.timestamp_order {
            protocol::raise(&t.scan_rts, self.ts);
        }
        let seen_at = self.seen.len();
        let mut visited = 0;
        let mut last = high;
        let mut stopped = false;
        for (key, rid) in t.range(low..=high) {
            last = key;
            if self.visit(t, key, rid, row)? {
                visited += 1;
                if !f(key, row) || visited >= limit {
                    stopped = true;
                    break;
                }
            }
        }
        if !stopped {
            last = high;
        }
        let seen_len = self.seen.len() - seen_at;
        self.scans.push(ScanItem { table: t.id.0, low, high: last, seen_at, seen_len });
        Ok(visited)
    }

    /// Read one record met by a scan; true when it has a live row in `row`.
    /// Live rows are registered as reads (and met, for the re-scan); an
    /// absent record (a deleted key, a placeholder) is not: the commit-time
    /// re-scan treats it as new and aborts if it became live, so tables with
    /// many deleted keys neither fill the access set nor slow validation.
    fn visit(
        &mut self,
        t: &Table<S::TableExt>,
        key: u64,
        rid: u64,
        row: &mut [u8],
    ) -> Result<bool> {
        if let Some(i) = self.find_write(t.id.0, rid) {
            let w = self.writes[i];
            if w.deleted() {
                return Ok(false);
            }
            row.copy_from_slice(&self.data[w.data_at..w.data_at + t.row_bytes]);
            return Ok(true);
        }
        let observed = self.read_record(t, rid, row)?;
        if tid::is_absent(observed) {
            return Ok(false);
        }
        self.check_access_limit()?;
        self.seen.push((key, rid));
        self.reads.push(ReadItem { table: t.id.0, rid, observed });
        Ok(true)
    }

    fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        let t = self.table(table)?;
        let s = t.secondary.get(index).ok_or_else(|| Error::InvalidSchema {
            table: t.schema.name.clone(),
            detail: format!("no secondary index #{index}"),
        })?;
        s.lookup(&t.schema.name, prefix, limit, out)
    }
}

#[inline]
pub(super) fn backoff(spin: u32) {
    if crate::sched::point() {
        return;
    }
    if spin % 1024 == 1023 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// The transaction handed to a body: a view of the worker.
pub struct OccTxn<'w, 'e, S: Store> {
    w: &'w mut OccWorker<'e, S>,
}

impl<S: Store> Transaction for OccTxn<'_, '_, S> {
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.w.get(table, key, out)
    }
    fn get_for_update(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.w.get_locking(table, key, out, true)
    }
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.w.insert(table, key, row)
    }
    fn update(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.w.update_or_delete(table, key, Some(row))
    }
    fn delete(&mut self, table: TableId, key: u64) -> Result<()> {
        self.w.update_or_delete(table, key, None)
    }
    fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        self.w.scan(table, range, limit, f)
    }
    fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        self.w.lookup_secondary(table, index, prefix, limit, out)
    }
    fn prefetch(&mut self, table: TableId, keys: &[u64]) {
        self.w.prefetch(table, keys)
    }
}

impl<S: Store> EngineWorker for OccWorker<'_, S> {
    fn id(&self) -> usize {
        self.id
    }

    fn execute(
        &mut self,
        opts: &TxnOptions,
        body: &mut dyn FnMut(&mut dyn Transaction) -> Result<()>,
    ) -> Result<CommitInfo> {
        self.durability = opts.durability.unwrap_or(self.core.config.durability);
        self.begin();
        let result = body(&mut OccTxn { w: self }).and_then(|()| self.finish(opts));
        self.conclude(&result);
        result
    }

    fn begin_txn(&mut self, opts: &TxnOptions) -> Result<()> {
        if self.explicit.is_some() {
            return Err(Error::Unsupported("a transaction is already open on this worker".into()));
        }
        self.durability = opts.durability.unwrap_or(self.core.config.durability);
        self.begin();
        self.explicit = Some(*opts);
        Ok(())
    }

    fn current_txn(&mut self) -> Option<&mut dyn Transaction> {
        if self.explicit.is_some() { Some(self) } else { None }
    }

    fn commit_txn(&mut self) -> Result<CommitInfo> {
        let opts =
            self.explicit.take().ok_or_else(|| Error::Unsupported("no open transaction".into()))?;
        let result = self.finish(&opts);
        self.conclude(&result);
        result
    }

    fn abort_txn(&mut self) {
        if self.explicit.take().is_some() {
            self.unlock_all();
            self.end();
        }
    }

    fn sync(&mut self) -> Result<()> {
        S::sync(self.core, &mut self.local)
    }

    fn counters(&self) -> CounterSnapshot {
        S::counters(self.core, &self.local)
    }

    fn cache_stats(&self) -> CacheStats {
        self.stats
    }
}

impl<S: Store> OccWorker<'_, S> {
    fn finish(&mut self, opts: &TxnOptions) -> Result<CommitInfo> {
        if opts.read_only && !self.writes.is_empty() {
            return Err(Error::Unsupported("a read-only transaction wrote".into()));
        }
        self.commit()
    }

    /// After commit or abort: release what an abort holds, reset, reclaim.
    fn conclude(&mut self, result: &Result<CommitInfo>) {
        if result.is_err() {
            self.unlock_all();
        }
        self.end();
        if result.is_ok() {
            S::after_commit(self.core, &mut self.local);
        }
    }
}

/// The worker is the transaction of `begin_txn` (explicit transactions).
impl<S: Store> Transaction for OccWorker<'_, S> {
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        OccWorker::get(self, table, key, out)
    }
    fn get_for_update(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.get_locking(table, key, out, true)
    }
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        OccWorker::insert(self, table, key, row)
    }
    fn update(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.update_or_delete(table, key, Some(row))
    }
    fn delete(&mut self, table: TableId, key: u64) -> Result<()> {
        self.update_or_delete(table, key, None)
    }
    fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        OccWorker::scan(self, table, range, limit, f)
    }
    fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        OccWorker::lookup_secondary(self, table, index, prefix, limit, out)
    }
    fn prefetch(&mut self, table: TableId, keys: &[u64]) {
        OccWorker::prefetch(self, table, keys)
    }
}

impl<S: Store> Drop for OccWorker<'_, S> {
    fn drop(&mut self) {
        self.abort_txn();
        // Make lazily committed transactions durable before the worker goes.
        let _ = S::sync(self.core, &mut self.local);
        self.core.release_worker(self.id);
    }
}
