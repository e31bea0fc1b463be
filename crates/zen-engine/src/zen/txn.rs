//! Workers and transactions of the Zen engine, for every protocol of `cc/`.
//!
//! A worker owns reusable read/write/scan sets (no allocation on the hot
//! path once they have grown), runs one transaction at a time, and performs
//! its share of space management around its fences (see `space.rs`).
//!
//! COMMIT, as named phases, one file each under `txn/commit/` (`commit.rs`
//! runs them and states the invariants across them):
//!   `lock_write_set` (`lock.rs`) → `validate` (`validate.rs`, after drawing
//!   the Tx-CTS; the read checks are the protocol's, `cc/`) →
//!   `allocate_slots` → `persist_new_versions` (`persist.rs`, Alg. 1) →
//!   `publish` (`publish.rs`, retiring the superseded slots) → `end`;
//!   maintenance (`maintain.rs`) runs at each fence of the worker, inside
//!   `persist_new_versions` and `sync`.
//! Any failure before `persist_new_versions` unlocks and returns an abort;
//! nothing has been written to NVM by then (slot allocation may allocate and
//! zero a *page*, which is space management, not transaction data).

use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};

use zen_pmem::PmemBackend;

use super::Shared;
use super::cache::{Alloc, FLAG_COPY, LOC_EMPTY, loc_cached, loc_entry};
use super::table::Table;
use crate::api::{CacheStats, Durability, TableId, TxnOptions};
use crate::cc::{Protocol, ReadItem, silo};
use crate::error::{AbortReason, Error, Result};
use crate::heap::{self, SlotHeader};
use crate::sched;
use crate::schema::MAX_KEY;

/// Spins on a locked tuple before giving up.
const SPIN_LIMIT: u32 = 1 << 16;
/// Garbage items examined per table per transaction.
const GC_BATCH: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    Insert,
    Update,
    Delete,
}

#[derive(Debug, Clone, Copy)]
struct WriteItem {
    table: u32,
    key: u64,
    rid: u64,
    kind: WriteKind,
    /// Where the row starts in `write_data`; the slot header's 16 bytes
    /// are reserved just before it.
    data_at: usize,
    /// (location, TID before locking) once the record is locked.
    locked: Option<(u64, u64)>,
    slot: u64,
    /// Multi-version protocols: the entry reserved for the new version.
    new_entry: Option<u32>,
    /// `slot` is the record's spare (S7 of `space.rs`, P6 of `persist.rs`).
    spare: bool,
}

#[derive(Debug, Clone, Copy)]
struct ScanItem {
    table: u32,
    low: u64,
    high: u64,
    rids_at: usize,
    rids_len: usize,
}

pub struct ZenWorker<'e, B: PmemBackend, P: Protocol> {
    s: &'e Shared<B>,
    id: usize,
    thread: u32,
    tables: Arc<Vec<Arc<Table>>>,
    tables_version: u64,
    reads: Vec<ReadItem>,
    writes: Vec<WriteItem>,
    /// Which (table, record) pairs `writes` may hold (`find_write`).
    written: crate::access::WriteFilter,
    write_data: Vec<u8>,
    scans: Vec<ScanItem>,
    scan_rids: Vec<u64>,
    begin_ts: u64,
    unfenced_cts: Option<u64>,
    durability: Durability,
    /// The pool is in an eADR domain: stores are durable once visible.
    eadr: bool,
    /// Per worker, the largest Tx-CTS this worker has seen durable there
    /// (a local copy of `Shared::durable_cts`, `txn/deps.rs`).
    known_durable: Vec<u64>,
    /// Tx-CTS of the versions a snapshot transaction read (its read set).
    snapshot_deps: Vec<u64>,
    stats: CacheStats,
    /// Set by `cache_in`: the read that follows it is that miss, not a hit.
    just_cached: bool,
    victims: Vec<u32>,
    slot_buf: Vec<u8>,
    row_buf: Vec<u8>,
    /// The protocol's begin timestamp (MVCC: also the Tx-CTS).
    txn_ts: Option<u64>,
    /// Global minimum Tx-CTS when the transaction began.
    watermark: u64,
    /// Calls of `reuse_watermark` left before this worker computes one again.
    reuse_watermark_left: u32,
    /// Tx-CTS of this worker's previous commit (timestamps are monotone per worker).
    last_cts: u64,
    /// The worker's own clock (Cicada).
    local_clock: u64,
    /// 2PL: entries this transaction holds a lock on, as (table, location).
    locks: Vec<(u32, u64)>,
    /// H-Store: partitions this transaction holds.
    partitions: Vec<usize>,
    /// TicToc: the wts observed by the last `read_current`.
    last_wts: u64,
    /// Wait-die: the priority a transaction that died restarts with, so that it
    /// ages and eventually wins (no starvation).
    kept_priority: Option<u64>,
    /// The options of the explicit transaction open on this worker, if any.
    explicit: Option<TxnOptions>,
    /// Zen+: the snapshot S of a read-only snapshot transaction (`adaptive.rs`).
    snapshot: Option<u64>,
    /// Zen+: tuples accessed by the running attempt (β, γ).
    accessed: u64,
    /// Zen+: Met-Cache bytes of the tuples accessed by the running attempt (α).
    accessed_bytes: u64,
    /// Zen+: tuples accessed by this transaction's aborted attempts (γ).
    wasted: u64,
    /// Zen+: when this worker took G-EX, while its transaction is privileged.
    privileged: Option<std::time::Instant>,
    /// Zen+: α in Met-Cache bytes for this worker, computed at begin.
    alpha_limit: u64,
    /// Slots superseded by this worker's commits since its last fence; they
    /// enter its garbage pipeline at the next fence (`maintain.rs`).
    staged: Vec<crate::zen::space::Garbage>,
    /// The worker's garbage pipeline was empty after its last maintenance.
    gc_idle: bool,
    /// `after_fence` left zero stores or free-list pushes for the next
    /// `before_fence` (`maintain.rs`).
    gc_before_fence: bool,
    /// This worker has given back its spares once, after the pool ran out
    /// of pages (S7, `sweep_own_spares`).
    spares_swept: bool,
    /// Commit floors (worker, value) this worker flushed since its last
    /// fence; durable at the next one (S4, `maintain.rs`).
    floors_flushed: Vec<(usize, u64)>,
    /// Multi-version protocols: keys this worker deleted, as (table, key,
    /// record, Tx-CTS), to leave the ordered index once no snapshot can read
    /// below the tombstone (`maintain.rs`, `unlink_old_tombstones`).
    unlinks: std::collections::VecDeque<(u32, u64, u64, u64)>,
    protocol: std::marker::PhantomData<P>,
}

impl<'e, B: PmemBackend, P: Protocol> ZenWorker<'e, B, P> {
    pub fn new(s: &'e Shared<B>, id: usize) -> Self {
        ZenWorker {
            s,
            id,
            thread: Shared::<B>::thread_of(id),
            tables: s.worker_tables(),
            tables_version: s.tables_version.load(Ordering::Acquire),
            reads: Vec::new(),
            writes: Vec::new(),
            written: crate::access::WriteFilter::default(),
            write_data: Vec::new(),
            scans: Vec::new(),
            scan_rids: Vec::new(),
            begin_ts: 0,
            unfenced_cts: None,
            durability: s.config.durability,
            eadr: s.pool.domain() == zen_pmem::PersistenceDomain::Eadr,
            known_durable: vec![0; s.regions],
            snapshot_deps: Vec::new(),
            stats: CacheStats::default(),
            just_cached: false,
            victims: Vec::new(),
            slot_buf: Vec::new(),
            row_buf: Vec::new(),
            txn_ts: None,
            watermark: 0,
            reuse_watermark_left: 0,
            last_cts: 0,
            local_clock: 0,
            locks: Vec::new(),
            partitions: Vec::new(),
            last_wts: 0,
            kept_priority: None,
            explicit: None,
            snapshot: None,
            accessed: 0,
            accessed_bytes: 0,
            wasted: 0,
            privileged: None,
            alpha_limit: u64::MAX,
            staged: Vec::new(),
            gc_idle: false,
            gc_before_fence: false,
            spares_swept: false,
            floors_flushed: Vec::new(),
            unlinks: std::collections::VecDeque::new(),
            protocol: std::marker::PhantomData,
        }
    }

    /// Table `table`, borrowed from the engine's registry for as long as the
    /// worker borrows the engine: no reference count is touched per
    /// operation (`registry.rs`). Only tables this transaction's table list
    /// knows (the one its commit indexes) are given out.
    fn table(&self, table: TableId) -> Result<&'e Table> {
        let id = table.0 as usize;
        let shared: &'e Shared<B> = self.s;
        match shared.registry.get(id) {
            Some(t) if id < self.tables.len() => Ok(t),
            _ => Err(Error::UnknownTableId(table.0)),
        }
    }

    /// The table of a write-set item, borrowed from the registry for as long
    /// as the worker borrows the engine. The commit phases used to clone its
    /// `Arc` per write per phase: an atomic read-modify-write on the table's
    /// reference count, a line every worker writing the table shares.
    fn written_table(&self, table: u32) -> &'e Table {
        // Every write went through `table()`, which found it; published
        // tables are never removed (`registry.rs`).
        self.table(TableId(table)).expect("a written table is in the registry")
    }

    /// Begin a transaction; a declared read-only one runs on a snapshot when
    /// adaptive execution is on. Fails only with `Exclusive` (Zen+ stage).
    fn begin(&mut self, read_only: bool) -> Result<()> {
        let version = self.s.tables_version.load(Ordering::Acquire);
        if version != self.tables_version {
            self.tables = self.s.worker_tables();
            self.tables_version = version;
        }
        if self.adaptive_on() {
            self.wait_exclusive_free()?;
            if read_only {
                return self.begin_snapshot();
            }
            self.alpha_limit = self.alpha_limit();
        }
        // Publish before drawing the timestamp: the watermark computation reads
        // the clock before the active words (SeqCst), so it never passes us.
        let published = self.s.clock.now();
        self.s.active_ts[self.id].store(published, Ordering::SeqCst);
        if self.adaptive_on() {
            self.check_exclusive()?;
        }
        self.txn_ts = P::begin_ts(&self.s.clock, self.id, &mut self.local_clock);
        // One shared-clock operation per transaction at most (DESIGN §3):
        // the begin timestamp of the protocols that draw their Tx-CTS at
        // commit is the published `now()`, a load. It is what C3 needs (at or
        // above the watermark while the transaction runs); retired entries
        // are stamped with `Clock::now_and_advance`, so they still become
        // reusable when nothing commits (C4).
        self.begin_ts = match self.txn_ts {
            Some(ts) if P::TIMESTAMP_ORDERING => ts,
            // Wait-die and H-Store order lock waits by age, which needs
            // distinct begin timestamps in begin order: these protocols
            // still tick (two clock RMWs per writing transaction).
            _ if P::LOCKING.is_some() || P::PARTITIONED => self.s.clock.tick(),
            _ => published,
        };
        if P::LOCKING.is_some() || P::PARTITIONED {
            let priority = self.kept_priority.take().unwrap_or(self.begin_ts);
            self.s.lock_priority[self.id].store(priority, Ordering::Release);
        }
        if P::SNAPSHOT_READS {
            self.s.adaptive.begin_ts[self.id].store(self.begin_ts, Ordering::SeqCst);
        }
        if P::MULTI_VERSION {
            // Only version-chain cuts use it (`versions.rs`): an O(workers)
            // scan the single-version protocols skip.
            self.watermark = self.s.watermark();
        }
        Ok(())
    }

    fn end(&mut self) {
        self.release_locks();
        self.reads.clear();
        self.snapshot_deps.clear();
        self.writes.clear();
        self.written.clear();
        self.write_data.clear();
        self.scans.clear();
        self.scan_rids.clear();
        self.just_cached = false;
        if P::SNAPSHOT_READS {
            let begin = &self.s.adaptive.begin_ts[self.id];
            begin.store(super::adaptive::NO_BEGIN, Ordering::SeqCst);
        }
        self.s.active_ts[self.id].store(u64::MAX, Ordering::Release);
    }

    // ---------------------------------------------------------------- reads

    /// Stable read of a record's current version: (location, TID) and the row
    /// in `out` when present. Brings heap tuples into the worker's region.
    fn read_current(
        &mut self,
        t: &Table,
        key: u64,
        rid: u64,
        out: &mut [u8],
    ) -> Result<(u64, u64)> {
        if P::MULTI_VERSION {
            return self.read_version(t, key, rid, out);
        }
        if P::LOCKING.is_some() {
            return self.read_locked(t, rid, out, false);
        }
        if P::PARTITIONED {
            self.lock_partition(t, key)?;
        }
        let locw = t.records.loc(rid);
        for spin in 0..SPIN_LIMIT {
            let loc = locw.load(Ordering::Acquire);
            if loc == LOC_EMPTY {
                return Ok((LOC_EMPTY, 0));
            }
            let Some((w, idx)) = loc_entry(loc) else {
                self.cache_in(t, rid, loc)?;
                continue;
            };
            let region = &t.caches[w];
            // The entry and its row are both misses for a cold entry: start
            // the row's load now so that the two overlap.
            zen_pmem::cpu::prefetch(&region.data(idx)[0]);
            let e = region.touch(idx, self.begin_ts, P::MULTI_VERSION);
            let t1 = e.cc[0].load(Ordering::Acquire);
            if t1 & (silo::LOCK | silo::OBSOLETE) != 0 {
                backoff(spin);
                continue;
            }
            if t1 & silo::ABSENT == 0 {
                region.read_row(idx, out);
                self.s.numa_entry(self.id, w, idx, false);
            }
            if P::TICTOC {
                self.last_wts = e.cc[1].load(Ordering::Acquire);
            }
            fence(Ordering::Acquire);
            if e.cc[0].load(Ordering::Relaxed) == t1 && locw.load(Ordering::Acquire) == loc {
                self.count_hit();
                return Ok((loc, t1));
            }
        }
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    /// Bring the heap version at `slot` into this worker's Met-Cache region.
    ///
    /// The entry is taken first and its lines asked for, for writing, so that
    /// their misses overlap with the slot's (every line of both is usually
    /// cold: the entry was evicted, the slot written long ago).
    fn cache_in(&mut self, t: &Table, rid: u64, slot: u64) -> Result<()> {
        let idx = self.allocate_entry(t)?;
        let region = &t.caches[self.id];
        region.prefetch_for_fill(idx, true);
        let len = heap::SLOT_HEADER_BYTES as usize + t.row_bytes;
        self.slot_buf.resize(len, 0);
        let p = self.s.pool.persister(self.thread);
        p.read(slot, &mut self.slot_buf[..len]);
        self.s.numa_slot(self.id, slot, false);
        let locw = t.records.loc(rid);
        let w0 = u64::from_le_bytes(self.slot_buf[0..8].try_into().expect("8 bytes"));
        let w1 = u64::from_le_bytes(self.slot_buf[8..16].try_into().expect("8 bytes"));
        let Some(h) = SlotHeader::decode(w0, w1) else {
            region.free_unpublished(idx);
            if locw.load(Ordering::Acquire) != slot {
                return Ok(());
            }
            return Err(Error::Corrupt(format!("record {rid} points at empty slot {slot}")));
        };
        let e = region.fill(idx, h.key, rid, slot, self.begin_ts);
        e.cc[0].store(silo::tid(h.cts, h.deleted), Ordering::Relaxed);
        if P::TICTOC {
            // Logical timestamps of an evicted version are gone: restart above
            // every logical timestamp used so far (never below an old rts).
            let high = self.s.tictoc_high();
            e.cc[1].store(high, Ordering::Relaxed);
            e.cc[2].store(high, Ordering::Relaxed);
        }
        region.write_row(idx, &self.slot_buf[heap::SLOT_HEADER_BYTES as usize..len]);
        self.s.numa_entry(self.id, self.id, idx, true);
        sched::point();
        let published = locw
            .compare_exchange(slot, loc_cached(self.id, idx), Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if published {
            self.stats.misses += 1;
            self.just_cached = true;
        } else {
            e.record.store(0, Ordering::Relaxed);
            region.free_unpublished(idx);
        }
        Ok(())
    }

    /// A watermark for reuse decisions (retired entries, C4; garbage slots,
    /// S2 of `space.rs`). Computing one loads every worker's active word,
    /// each a line its owner writes at every begin and end: O(workers)
    /// misses, which every writing commit (garbage) and every
    /// copy-on-foreign-write paid, so the cost per commit grew with the
    /// workers. Now each worker computes it once every `workers` calls and
    /// publishes it (`Shared::refresh_reuse_watermark`); between, it uses the
    /// largest published one. With n workers someone refreshes about once per
    /// commit of one worker, so a value is about one commit old (with one
    /// worker, never old: the spare of a record updated by every commit, S7,
    /// depends on its slot being collected at the next fence). An older
    /// watermark is still a safe one: whatever was retired before it was
    /// computed was unreachable to every transaction then running and to
    /// every one that began afterwards, so a stale value only delays reuse.
    fn reuse_watermark(&mut self) -> u64 {
        if self.reuse_watermark_left == 0 {
            self.reuse_watermark_left = self.s.registered_workers().min(64) as u32;
            self.s.refresh_reuse_watermark();
        }
        self.reuse_watermark_left -= 1;
        self.s.published_reuse_watermark()
    }

    /// A free entry of this worker's region of `t`, evicting if needed.
    ///
    /// The table's planned share (`cache_limit`, §3.2) bounds the entries in
    /// use: whatever is over it is evicted first (a bounded batch per call).
    /// Evicted entries wait for the watermark before reuse (C4), so a region
    /// may allocate up to twice its share; the second half holds the retired
    /// entries that are still waiting. Keeping the entries in use at the share
    /// is what keeps that reserve: a region that let them grow to its capacity
    /// would find every reusable entry still waiting and refuse transactions.
    ///
    /// A region at its share first asks whether the plan is stale
    /// (`Shared::replan_if_grown`: the table grew by a quarter since).
    ///
    /// At the share, one call evicts a batch (1/32 of the share, 1 to 64
    /// entries) rather than the one entry it needs: the hand's pass and its
    /// clock stamp then serve the next misses too. Evicting one victim per
    /// miss walked 17 candidates or more for each (9 % of zen's TPC-C time).
    fn allocate_entry(&mut self, t: &Table) -> Result<u32> {
        const EVICT_BATCH: u32 = 64;
        let region = &t.caches[self.id];
        region.drain_retire_inbox(|| self.s.clock.now());
        let mut limit = t.cache_limit.load(Ordering::Relaxed);
        let used = region.used();
        if used >= limit && self.s.replan_if_grown(t) {
            limit = t.cache_limit.load(Ordering::Relaxed);
        }
        if used >= limit {
            let batch = (limit / 32).clamp(1, EVICT_BATCH);
            self.evict(t, (used - limit + batch).min(EVICT_BATCH) as usize);
        }
        for round in 0..4 {
            // The first try may take entries retired before an earlier
            // watermark; a region that finds none asks for the current one.
            // Asked only when a retired entry waits, as before.
            let got = if round == 0 {
                region.allocate(|| self.reuse_watermark())
            } else {
                region.allocate(|| self.s.watermark())
            };
            if let Alloc::Entry(idx) = got {
                return Ok(idx);
            }
            // At capacity and every retired entry still waits: make room in
            // this table or in tables over their share.
            if self.evict(t, 16) == 0 && !self.evict_over_limit(t) {
                break;
            }
        }
        // The retired entries wait for the watermark to pass their stamps
        // (C4), and begin does not tick the clock: if every transaction
        // aborts here, no commit advances it and the region stays full
        // forever. Advance it (only on this path), so that the retry begins
        // above the stamps and the watermark can pass them.
        self.s.clock.tick();
        Err(Error::Abort(AbortReason::CacheFull))
    }

    /// Evict from other tables that hold more than their planned share.
    fn evict_over_limit(&mut self, except: &Table) -> bool {
        let tables = self.tables.clone();
        let me = self.id;
        tables
            .iter()
            .filter(|t| t.id != except.id)
            .filter(|t| t.caches[me].used() > t.cache_limit.load(Ordering::Relaxed))
            .any(|t| self.evict(t, 16) > 0)
    }

    /// CLOCK over this worker's region of `t`: retire about `want` victims.
    ///
    /// The hand offers as many candidates as are still wanted, and every one
    /// that can go goes. Some cannot (active, locked, a version still
    /// visible): the hand is asked again for the rest, `EVICT_ROUNDS` times
    /// at most. (It used to offer 16 more than wanted and drop the surplus:
    /// the hand then walked ~44 entries per eviction on TPC-C, half of them
    /// candidates it skipped until its next round.)
    fn evict(&mut self, t: &Table, want: usize) -> usize {
        const EVICT_ROUNDS: usize = 4;
        let region = &t.caches[self.id];
        let mut victims = std::mem::take(&mut self.victims);
        let watermark = self.s.watermark();
        let mut evicted = 0;
        // One retire stamp per batch (C4), drawn at the first victim.
        let mut stamp = None;
        for _ in 0..EVICT_ROUNDS {
            if evicted >= want {
                break;
            }
            victims.clear();
            region.clock_candidates(want - evicted, &mut victims);
            if victims.is_empty() {
                break;
            }
            for &idx in &victims {
                let e = region.entry(idx);
                let record = e.record.load(Ordering::Acquire);
                if record == 0 || e.touch_ts.load(Ordering::Acquire) >= watermark {
                    continue;
                }
                if e.flags.load(Ordering::Acquire) & FLAG_COPY != 0 {
                    e.record.store(0, Ordering::Release);
                    e.flags.store(0, Ordering::Relaxed);
                    region
                        .retire(idx, *stamp.get_or_insert_with(|| self.s.clock.now_and_advance()));
                    evicted += 1;
                    continue;
                }
                let locw = t.records.loc(record - 1);
                let is_head = locw.load(Ordering::Acquire) == loc_cached(self.id, idx);
                if P::MULTI_VERSION {
                    if !is_head {
                        evicted += usize::from(self.evict_old_version(t, idx, watermark));
                        continue;
                    }
                    if silo::cts_of(e.cc[0].load(Ordering::Acquire)) >= watermark {
                        continue;
                    }
                    self.cut_chain(t, e);
                }
                if P::LOCKING.is_some() && !self.claim_for_eviction(e) {
                    continue;
                }
                let Some(prev) = silo::try_lock(&e.cc[0]) else {
                    self.unclaim(e);
                    continue;
                };
                if locw.load(Ordering::Acquire) != loc_cached(self.id, idx) {
                    silo::unlock(&e.cc[0], prev);
                    self.unclaim(e);
                    continue;
                }
                let home = if prev & silo::ABSENT != 0 {
                    LOC_EMPTY
                } else {
                    e.slot.load(Ordering::Acquire)
                };
                locw.store(home, Ordering::Release);
                e.cc[0].store(silo::OBSOLETE | (prev & !silo::LOCK), Ordering::Release);
                e.record.store(0, Ordering::Release);
                region.retire(idx, *stamp.get_or_insert_with(|| self.s.clock.now_and_advance()));
                self.stats.evictions += 1;
                evicted += 1;
            }
        }
        self.victims = victims;
        evicted
    }

    /// Count a read served by the Met-Cache (one right after a `cache_in`
    /// is the miss it completes).
    #[inline]
    pub(super) fn count_hit(&mut self) {
        if !std::mem::take(&mut self.just_cached) {
            self.stats.hits += 1;
        }
    }

    /// A snapshot transaction is read-only by declaration.
    fn refuse_snapshot_write(&self) -> Result<()> {
        if self.snapshot.is_some() {
            return Err(Error::Unsupported("a read-only transaction wrote".into()));
        }
        Ok(())
    }

    fn find_write(&self, table: u32, rid: u64) -> Option<usize> {
        if !self.written.may_hold(table, rid) {
            return None;
        }
        self.writes.iter().position(|w| w.table == table && w.rid == rid)
    }

    fn check_key(t: &Table, key: u64) -> Result<()> {
        if key > MAX_KEY {
            return Err(Error::KeyOutOfRange { table: t.schema.name.clone(), key });
        }
        Ok(())
    }

    fn check_row(t: &Table, len: usize) -> Result<()> {
        if len != t.row_bytes {
            return Err(Error::WrongTupleSize {
                table: t.schema.name.clone(),
                expected: t.row_bytes,
                actual: len,
            });
        }
        Ok(())
    }

    /// Count an access for the cache plan (f_i; owner-only counter).
    #[inline]
    fn count_access(&self, t: &Table) {
        let c = &t.accesses[self.id];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn check_access_limit(&self) -> Result<()> {
        let limit = self.s.config.max_access_set;
        if self.reads.len() + self.writes.len() >= limit {
            return Err(Error::AccessSetFull { limit });
        }
        Ok(())
    }

    /// Read `key` (read-your-writes first); `Ok(false)` when absent.
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.get_impl(table, key, out, false)
    }

    /// `get` declaring the intent to write: 2PL takes the exclusive lock now.
    fn get_for_update(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.get_impl(table, key, out, true)
    }

    fn get_impl(
        &mut self,
        table: TableId,
        key: u64,
        out: &mut [u8],
        for_update: bool,
    ) -> Result<bool> {
        let t = self.table(table)?;
        Self::check_key(t, key)?;
        Self::check_row(t, out.len())?;
        self.safe_point(t)?;
        if self.snapshot.is_some() {
            return match t.lookup(key) {
                Some(rid) => self.read_snapshot(t, rid, out),
                None => Ok(false),
            };
        }
        self.check_access_limit()?;
        self.count_access(t);
        if P::PARTITIONED {
            self.lock_partition(t, key)?;
        }
        let rid = t.lookup_or_create(key).ok_or(Error::Abort(AbortReason::OutOfSpace))?;
        if let Some(i) = self.find_write(table.0, rid) {
            let w = self.writes[i];
            if w.kind == WriteKind::Delete {
                return Ok(false);
            }
            out.copy_from_slice(&self.write_data[w.data_at..w.data_at + t.row_bytes]);
            return Ok(true);
        }
        let (loc, observed) = if for_update && P::LOCKING.is_some() {
            self.read_locked(t, rid, out, true)?
        } else {
            self.read_current(t, key, rid, out)?
        };
        if for_update && P::EARLY_ABORT {
            self.check_early(t, loc)?;
        }
        self.reads.push(ReadItem {
            table: table.0,
            for_update,
            rid,
            loc,
            observed,
            wts: self.last_wts,
        });
        Ok(found(loc, observed))
    }

    /// `Transaction::prefetch` (`PrimaryIndex::prefetch`'s stages): the
    /// point-index lines, then each found record's location word, then the
    /// Met-Cache entry header and row it names, or the heap slot that
    /// `cache_in` will read: the four dependent misses of a cold read,
    /// overlapped across a group of keys. Reads nothing into the read set and
    /// writes nothing.
    pub(crate) fn prefetch(&mut self, table: TableId, keys: &[u64]) {
        let Ok(t) = self.table(table) else { return };
        let (shared, thread) = (self.s, self.thread);
        let row_stage = |rids: &[u64]| {
            // Every entry's line first, the rows' lines second: a read waits
            // on its entry's line before it copies the row, and a group's
            // hundred-odd row lines would otherwise queue ahead of the later
            // entries' lines.
            let mut locs = [LOC_EMPTY; crate::index::PREFETCH_GROUP];
            for (l, &rid) in locs.iter_mut().zip(rids) {
                *l = t.records.loc(rid).load(Ordering::Relaxed);
                if let Some((w, idx)) = loc_entry(*l).filter(|&(w, _)| w < t.caches.len()) {
                    // The entry's hot words are one line.
                    zen_pmem::cpu::prefetch(&t.caches[w].entry(idx).cc[0]);
                }
            }
            for &loc in &locs[..rids.len()] {
                match loc_entry(loc) {
                    Some((w, idx)) if w < t.caches.len() => {
                        zen_pmem::cpu::prefetch_lines(t.caches[w].data(idx));
                    }
                    Some(_) => {}
                    None if loc != LOC_EMPTY => shared
                        .pool
                        .persister(thread)
                        .prefetch(loc, heap::SLOT_HEADER_BYTES + t.row_bytes as u64),
                    None => {}
                }
            }
        };
        t.index.prefetch(keys, |rid| zen_pmem::cpu::prefetch(t.records.loc(rid)), row_stage);
    }

    fn push_write(&mut self, t: &Table, key: u64, rid: u64, kind: WriteKind, row: Option<&[u8]>) {
        // Room for the slot header before the row, so that commit writes
        // header and row to the slot from one buffer (`persist.rs`).
        let data_at = self.write_data.len() + heap::SLOT_HEADER_BYTES as usize;
        self.write_data.resize(data_at, 0);
        match row {
            Some(r) => self.write_data.extend_from_slice(r),
            None => self.write_data.resize(data_at + t.row_bytes, 0),
        }
        self.written.add(t.id.0, rid);
        self.writes.push(WriteItem {
            table: t.id.0,
            key,
            rid,
            kind,
            data_at,
            locked: None,
            slot: 0,
            new_entry: None,
            spare: false,
        });
    }

    fn update_or_delete(&mut self, table: TableId, key: u64, row: Option<&[u8]>) -> Result<()> {
        self.refuse_snapshot_write()?;
        let t = self.table(table)?;
        Self::check_key(t, key)?;
        if let Some(r) = row {
            Self::check_row(t, r.len())?;
        }
        let not_found = || Error::KeyNotFound { table: t.schema.name.clone(), key };
        if P::PARTITIONED {
            self.lock_partition(t, key)?;
        }
        let rid = t.lookup(key).ok_or_else(not_found)?;
        if let Some(i) = self.find_write(table.0, rid) {
            let w = &mut self.writes[i];
            match (w.kind, row) {
                (WriteKind::Delete, _) => return Err(not_found()),
                (WriteKind::Insert, None) => {
                    let w = self.writes.remove(i);
                    if let Some((loc, prev)) = w.locked {
                        let (wk, idx) = loc_entry(loc).expect("inserts lock a cache entry");
                        silo::unlock(&t.caches[wk].entry(idx).cc[0], prev);
                    }
                    return Ok(());
                }
                (_, None) => w.kind = WriteKind::Delete,
                (_, Some(r)) => {
                    let at = w.data_at;
                    self.write_data[at..at + r.len()].copy_from_slice(r);
                }
            }
            return Ok(());
        }
        // A record this transaction read already is not read again (as in
        // the baselines' OCC core): a second view (say, "deleted meanwhile")
        // would answer from a state the first read did not see, and commit
        // validates the first view anyway. The second read also cost a row
        // copy and a read-set entry validated twice. After a plain read,
        // the locking protocols still read again for update (to take the
        // exclusive lock), Cicada too (its early check), and the
        // multi-version ones (reads for update are theirs to judge).
        let plain_read_suffices = P::LOCKING.is_none() && !P::MULTI_VERSION && !P::EARLY_ABORT;
        let earlier = self
            .earlier_read(table.0, rid)
            .filter(|r| r.for_update || plain_read_suffices)
            .map(|r| found(r.loc, r.observed));
        let present = match earlier {
            Some(present) => present,
            None => {
                let mut scratch = std::mem::take(&mut self.row_buf);
                scratch.resize(t.row_bytes, 0);
                let present = self.get_for_update(table, key, &mut scratch);
                self.row_buf = scratch;
                present?
            }
        };
        if !present {
            return Err(not_found());
        }
        let kind = if row.is_some() { WriteKind::Update } else { WriteKind::Delete };
        self.push_write(t, key, rid, kind, row);
        Ok(())
    }

    /// This transaction's latest read of (table, rid), if it read the
    /// record. Searched from the end: an update usually follows its read.
    fn earlier_read(&self, table: u32, rid: u64) -> Option<&ReadItem> {
        self.reads.iter().rev().find(|r| r.table == table && r.rid == rid)
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.refuse_snapshot_write()?;
        let t = self.table(table)?;
        Self::check_key(t, key)?;
        Self::check_row(t, row.len())?;
        self.safe_point(t)?;
        self.check_access_limit()?;
        self.count_access(t);
        let duplicate = || Error::DuplicateKey { table: t.schema.name.clone(), key };
        let rid = t.lookup_or_create(key).ok_or(Error::Abort(AbortReason::OutOfSpace))?;
        if let Some(i) = self.find_write(table.0, rid) {
            let w = &mut self.writes[i];
            if w.kind != WriteKind::Delete {
                return Err(duplicate());
            }
            w.kind = WriteKind::Update;
            let at = w.data_at;
            self.write_data[at..at + row.len()].copy_from_slice(row);
            return Ok(());
        }
        if P::PARTITIONED {
            self.lock_partition(t, key)?;
        }
        let locked = match self.lock_for_insert(t, rid, key) {
            Ok(locked) => locked,
            // A key this transaction read as absent and someone else
            // inserted since: the read is stale, so this is a conflict
            // (retryable), not a duplicate the caller made. The read set is
            // searched only on a duplicate (every insert scanning it was
            // O(inserts × reads)).
            Err(Error::DuplicateKey { .. })
                if self
                    .reads
                    .iter()
                    .any(|r| r.table == table.0 && r.rid == rid && !found(r.loc, r.observed)) =>
            {
                return Err(Error::Abort(AbortReason::InsertConflict));
            }
            Err(Error::DuplicateKey { .. }) => return Err(duplicate()),
            Err(other) => return Err(other),
        };
        if P::LOCKING.is_some()
            && let Err(e) = self.lock_2pl(t, locked.0, true)
        {
            let (w, idx) = loc_entry(locked.0).expect("inserts lock a cache entry");
            silo::unlock(&t.caches[w].entry(idx).cc[0], locked.1);
            return Err(e);
        }
        // Locked: the key goes (back) into the ordered index (I1, `index.rs`).
        t.index.link(key, rid);
        self.push_write(t, key, rid, WriteKind::Insert, Some(row));
        self.writes.last_mut().expect("just pushed").locked = Some(locked);
        Ok(())
    }

    /// Lock an absent record for insertion (creating its entry if it has none).
    fn lock_for_insert(&mut self, t: &Table, rid: u64, key: u64) -> Result<(u64, u64)> {
        let locw = t.records.loc(rid);
        for _ in 0..8 {
            let loc = locw.load(Ordering::Acquire);
            if loc == LOC_EMPTY {
                let idx = self.allocate_entry(t)?;
                let region = &t.caches[self.id];
                let e = region.fill(idx, key, rid, 0, self.begin_ts);
                let prev = silo::ABSENT;
                e.cc[0].store(prev | silo::LOCK, Ordering::Relaxed);
                let mine = loc_cached(self.id, idx);
                sched::point();
                if locw
                    .compare_exchange(LOC_EMPTY, mine, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Ok((mine, prev));
                }
                e.record.store(0, Ordering::Relaxed);
                region.free_unpublished(idx);
                continue;
            }
            let Some((w, idx)) = loc_entry(loc) else {
                return Err(Error::DuplicateKey { table: t.schema.name.clone(), key });
            };
            let e = t.caches[w].touch(idx, self.begin_ts, P::MULTI_VERSION);
            let cur = e.cc[0].load(Ordering::Acquire);
            if cur & silo::ABSENT == 0 && cur & silo::OBSOLETE == 0 {
                return Err(Error::DuplicateKey { table: t.schema.name.clone(), key });
            }
            let Some(prev) = silo::try_lock(&e.cc[0]) else {
                return Err(Error::Abort(AbortReason::InsertConflict));
            };
            if locw.load(Ordering::Acquire) == loc && prev & silo::ABSENT != 0 {
                return Ok((loc, prev));
            }
            silo::unlock(&e.cc[0], prev);
        }
        Err(Error::Abort(AbortReason::InsertConflict))
    }
}

/// Whether a read of location `loc` with version word `observed` found a
/// live version (what `get` answers).
#[inline]
pub(super) fn found(loc: u64, observed: u64) -> bool {
    loc != LOC_EMPTY && observed & silo::ABSENT == 0
}

#[inline]
fn backoff(spin: u32) {
    if sched::point() {
        return;
    }
    if spin % 1024 == 1023 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Number of live rows of a table (for status and checks).
pub fn count_live(t: &Table) -> u64 {
    let mut rows = 0;
    for (_, rid) in t.index.iter() {
        let loc = t.records.loc(rid).load(Ordering::Acquire);
        match loc_entry(loc) {
            None if loc != LOC_EMPTY => rows += 1,
            None => {}
            Some((w, idx))
                if t.caches[w].entry(idx).cc[0].load(Ordering::Acquire) & silo::ABSENT == 0 =>
            {
                rows += 1;
            }
            Some(_) => {}
        }
    }
    rows
}

mod adaptive;
mod commit;
mod deps;
mod locking;
mod maintain;
mod scan;
mod versions;
