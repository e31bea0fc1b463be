//! `wbl`: write-behind logging (Arulraj et al., PVLDB 10(4) 2016), as the
//! Zen paper describes and measures it (Zen §2.2, Fig. 1(b), §4): versions
//! with per-tuple CC metadata in NVM, a DRAM tuple cache, and a log that
//! holds no tuple data, only (cp, cd) timestamp pairs.
//!
//! WHAT LIVES WHERE
//! ```text
//!   DRAM   indexes; record words (TID, head version's slot, version count,
//!          cache entry); the tuple cache (`wbl/cache.rs`)
//!   NVM    catalog; meta page with the ring of write-behind records;
//!          heap pages of version slots per (table, worker) region:
//!          [key|deleted][begin cts][end cts][txn id][prev][-][row]  (`wbl/layout.rs`)
//! ```
//!
//! COMMIT
//! ```text
//!   lock      the TID in DRAM, and the txn id into the head version's NVM
//!             header (per-tuple CC metadata: an NVM write, not persisted)
//!   prepare   if cts > cd, write a record first (no version above cd may
//!             reach NVM); a free slot per write from the worker's region
//!   persist   per written tuple: the new version (key, cts, prev → old head,
//!             row), the old version's end cts and txn id := 0, flush both,
//!             ONE fence — WBL persists every version as it creates it, which
//!             is why the paper counts many more fences for it than for MMDB
//!   install   head := new slot, cache updated, superseded slot → garbage
//!   group     the transaction is durable-committed once a record with
//!             cp ≥ cts is durable: Immediate waits for it (a record is due
//!             every `group_commit_interval_us`, 100 µs by default, and any
//!             waiting worker writes it); Lazy returns and is acknowledged
//!             (Marker::Ack) at a later commit or `sync`
//! ```
//!
//! RECOVERY (`wbl/recovery.rs`): read the last whole record (cp, cd); scan
//! every heap page; a version with cts ≤ cp is committed, one in (cp, cd] is
//! undone (its slot zeroed), one above cd cannot exist (`Corrupt`); per key
//! the newest committed version wins, older ones and winning tombstones are
//! zeroed (tombstones last); indexes and free lists are rebuilt from the
//! winners. No log replay: recovery reads each version once.
//!
//! SPACE (`wbl/space.rs`): Zen's lightweight management, as the paper applied
//! it to WBL: DRAM free lists per region, zeroing before reuse, nothing
//! persisted per allocation.
//!
//! WHAT IT DELIBERATELY DOES NOT DO
//!   Only `--cc silo` (reads take the newest version; the version chain's
//!   prev pointers and end timestamps are written, as WBL does, but no
//!   snapshot reader follows them; recovery scans instead). No per-tuple
//!   metadata writes on reads (Silo has none). Heap pages are never returned
//!   to the pool. A read-only transaction may read a committed version whose
//!   record is not yet durable (as any early-lock-release group commit).
//!
//! Invariants (checked by `check_invariants`): (W1) a live record's head
//! slot holds its key, not deleted, with the TID's cts; an absent record's
//! head is 0 or its tombstone; (W2) no slot is the head of two records;
//! (W3) free slots are empty and no head; (W4) a published cache entry
//! holding a record's current cts holds its row; (W5) the last record in
//! the ring is the (cp, cd) the workers see.

pub mod cache;
pub mod group_commit;
pub mod layout;
mod recovery;
pub mod space;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sched::Mutex;
use zen_pmem::{CounterSnapshot, Marker, PageOwner, PmemBackend, Pool, SYSTEM_THREAD};

use super::occ::{Core, OccEngine, Store, Table, Tables, WriteItem, dram_budget_bytes, tid};
use super::{BACKGROUND_THREAD, backend_options, volatile_thread, worker_thread};
use crate::api::{Durability, EngineStatus, TableId};
use crate::catalog::{self, CatalogDoc};
use crate::config::{BaselineFault, EngineConfig, EngineKind};
use crate::error::{AbortReason, Error, Result};
use crate::schema::TableSchema;
use crate::ts::Clock;
use cache::{CacheBudget, TupleCache};
use group_commit::{DIRTY_WINDOW, GroupCommit};
use layout::WblRecord;
use space::{Garbage, Region};

/// The wbl engine on backend `B`.
pub type WblEngine<B> = OccEngine<WblStore<B>>;

/// Garbage items examined per commit.
const GC_BATCH: usize = 64;
/// Lazily committed transactions a worker may leave unacknowledged before
/// it forces a record.
const MAX_UNACKED: usize = 4096;

/// The store of wbl. See the module docs.
pub struct WblStore<B: PmemBackend> {
    pub pool: Pool<B>,
    meta_page: u64,
    regions: usize,
    pub group: GroupCommit,
    budget: CacheBudget,
    gc_reclaimed: AtomicU64,
}

/// Per-table state: the worker regions of version slots and the tuple cache.
pub struct WblTable {
    pub slot_size: u64,
    pub regions: Box<[Mutex<Region>]>,
    pub cache: TupleCache,
}

/// Per-worker state: garbage queues and unacknowledged commits.
pub struct WblLocal {
    worker: usize,
    txn_seq: u64,
    garbage: VecDeque<Garbage>,
    zero_pending: Vec<Garbage>,
    unacked: VecDeque<u64>,
}

impl<B: PmemBackend> WblEngine<B> {
    /// Create a new pool per `config` and an empty engine on it.
    pub fn create(config: &EngineConfig) -> Result<Self> {
        Self::create_on(super::create_pool(config)?, config)
    }

    /// Build an empty engine on a freshly formatted pool: meta page with the
    /// first record (cp 0, cd one window ahead), then the catalog.
    pub fn create_on(pool: Pool<B>, config: &EngineConfig) -> Result<Self> {
        super::require_no_catalog(&pool)?;
        let meta_page = pool.allocate_page(SYSTEM_THREAD, PageOwner::SYSTEM)?;
        let base = pool.page_offset(meta_page);
        let first = WblRecord { seq: 1, cp: 0, cd: DIRTY_WINDOW };
        let p = pool.persister(SYSTEM_THREAD);
        p.write_u64_atomic(base, layout::META_MAGIC);
        p.flush(base, 8);
        let at = WblRecord::offset(base, first.seq);
        p.write(at, &first.encode());
        p.persist(at, 32);
        let doc = CatalogDoc { engine: "wbl".into(), floor_page: meta_page, tables: Vec::new() };
        catalog::write(&pool, SYSTEM_THREAD, &doc)?;
        let store = WblStore::new(pool, meta_page, config, config.max_workers, first, None);
        let core = Core::new(store, config, Clock::resume_above(0), Vec::new(), None);
        Ok(OccEngine::from_core(core))
    }

    /// Open an existing pool per `config` and recover it.
    pub fn open(config: &EngineConfig) -> Result<Self> {
        config.validate()?;
        Self::open_on(Pool::<B>::open(&backend_options(config))?, config)
    }

    /// Recover an engine from an opened pool.
    pub fn open_on(pool: Pool<B>, config: &EngineConfig) -> Result<Self> {
        Ok(OccEngine::from_core(recovery::recover(pool, config)?))
    }

    /// The last write-behind record the workers see.
    pub fn last_record(&self) -> WblRecord {
        self.core().store.group.last()
    }

    /// Close without the clean shutdown and hand back the pool (tests).
    pub fn into_pool(self) -> Option<Pool<B>> {
        self.into_inner().map(|core| core.store.pool)
    }
}

impl<B: PmemBackend> WblStore<B> {
    fn new(
        pool: Pool<B>,
        meta_page: u64,
        config: &EngineConfig,
        regions: usize,
        last: WblRecord,
        data_bytes: Option<u64>,
    ) -> Self {
        let fault_ack_early = config.baseline_fault == Some(BaselineFault::WblAckBeforeRecord);
        let meta = pool.page_offset(meta_page);
        let group =
            GroupCommit::new(regions, meta, last, config.group_commit_interval_us, fault_ack_early);
        WblStore {
            pool,
            meta_page,
            regions,
            group,
            budget: CacheBudget {
                limit_bytes: dram_budget_bytes(config, data_bytes),
                used_bytes: AtomicU64::new(0),
            },
            gc_reclaimed: AtomicU64::new(0),
        }
    }

    /// A free slot of `worker`'s region of `t` (a new page if needed).
    fn allocate_slot(&self, t: &Table<WblTable>, worker: usize) -> Result<u64> {
        let mut region = t.ext.regions[worker].lock();
        if let Some(slot) = region.allocate() {
            return Ok(slot);
        }
        let thread = worker_thread(worker);
        let owner = PageOwner { table: t.id.0, worker: worker as u16 };
        let page = self.pool.allocate_page(thread, owner).map_err(|e| {
            if e.is_retryable() { Error::Abort(AbortReason::OutOfSpace) } else { e.into() }
        })?;
        let offset = self.pool.page_offset(page);
        let p = self.pool.persister(thread);
        p.write(offset, &layout::page_header(t.id.0, worker as u16, t.ext.slot_size));
        p.flush(offset, 24);
        region.add_page(page, offset);
        Ok(region.allocate().expect("a new page has free slots"))
    }

    /// The region a slot belongs to (from the page table).
    fn region_of<'t>(&self, tables: &'t Tables<WblTable>, slot: u64) -> Option<&'t Mutex<Region>> {
        let owner = self.pool.page_owner(slot / self.pool.page_size()).ok()??;
        tables.get(owner.table as usize)?.ext.regions.get(usize::from(owner.worker))
    }

    fn txn_id(local: &WblLocal) -> u64 {
        ((local.worker as u64 + 1) << 48) | (local.txn_seq & ((1 << 48) - 1))
    }

    /// Store the txn-id word of `rid`'s head version (per-tuple CC metadata).
    fn mark_head(&self, t: &Table<WblTable>, rid: u64, worker: usize, txn: u64) {
        let r = t.records.get(rid);
        let head = r.loc.load(Ordering::Acquire);
        if head != 0 && !tid::is_absent(r.tid.load(Ordering::Acquire)) {
            self.pool
                .persister(volatile_thread(worker))
                .write_u64_atomic(head + layout::OFF_TXN, txn);
        }
    }
}

/// Acknowledge every unacknowledged commit with cts ≤ `cp`.
fn ack_up_to<B: PmemBackend>(pool: &Pool<B>, local: &mut WblLocal, cp: u64) {
    let p = pool.persister(worker_thread(local.worker));
    while local.unacked.front().is_some_and(|&c| c <= cp) {
        let cts = local.unacked.pop_front().expect("checked");
        p.marker(Marker::Ack { txn: cts });
    }
}

/// Write a record (forced) from this worker and acknowledge what it covers.
fn force_record<B: PmemBackend>(core: &Core<WblStore<B>>, local: &mut WblLocal) {
    let store = &core.store;
    let thread = worker_thread(local.worker);
    store.group.write(&store.pool, thread, &core.clock, &mut |r| {
        ack_up_to(&store.pool, local, r.cp);
    });
    after_fence(core, local);
    ack_up_to(&store.pool, local, store.group.cp());
}

/// Wait until a record covers `cts`, writing records when they are due.
fn wait_durable<B: PmemBackend>(core: &Core<WblStore<B>>, local: &mut WblLocal, cts: u64) {
    let store = &core.store;
    let thread = worker_thread(local.worker);
    let mut spins = 0u32;
    while store.group.cp() < cts {
        if store.group.due() || spins >= 1 << 20 {
            let wrote = store.group.try_write(&store.pool, thread, &core.clock, &mut |r| {
                ack_up_to(&store.pool, local, r.cp);
            });
            if wrote {
                after_fence(core, local);
            }
            spins = 0;
        } else {
            spins += 1;
            if crate::sched::point() {
                continue;
            }
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
    ack_up_to(&store.pool, local, store.group.cp());
}

/// After a fence of this worker: its zeroed slots are durably free (S1).
fn after_fence<B: PmemBackend>(core: &Core<WblStore<B>>, local: &mut WblLocal) {
    if local.zero_pending.is_empty() {
        return;
    }
    let tables = core.tables();
    for g in local.zero_pending.drain(..) {
        if let Some(region) = core.store.region_of(&tables, g.slot) {
            region.lock().free(g.slot);
        }
        space::remove_version(&tables[g.table as usize].records.get(g.rid).aux);
        core.store.gc_reclaimed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Zero a slot's begin-cts word (flushed; durable at this worker's next fence).
fn zero_slot<B: PmemBackend>(pool: &Pool<B>, worker: usize, slot: u64) {
    let p = pool.persister(worker_thread(worker));
    p.write_u64_atomic(slot + layout::OFF_CTS, 0);
    p.flush(slot + layout::OFF_CTS, 8);
}

/// (S2)/(S3): reclaim this worker's garbage covered by the durable cp.
fn collect_garbage<B: PmemBackend>(core: &Core<WblStore<B>>, local: &mut WblLocal) {
    let cp = core.store.group.cp();
    let tables = core.tables();
    for _ in 0..GC_BATCH {
        let Some(&g) = local.garbage.front() else { break };
        if g.cts > cp {
            break;
        }
        local.garbage.pop_front();
        if !g.tombstone {
            zero_slot(&core.store.pool, local.worker, g.slot);
            local.zero_pending.push(g);
        } else if !reclaim_tombstone(core, local, &tables[g.table as usize], g) {
            local.garbage.push_back(g);
        }
    }
}

/// Zero a tombstone that is its record's last version (S3). False = retry later.
fn reclaim_tombstone<B: PmemBackend>(
    core: &Core<WblStore<B>>,
    local: &mut WblLocal,
    t: &Table<WblTable>,
    g: Garbage,
) -> bool {
    let r = t.records.get(g.rid);
    let want = tid::make(g.cts, true);
    if r.tid.load(Ordering::Acquire) & !tid::LOCK != want {
        return true;
    }
    if space::versions(&r.aux) > 1 {
        return false;
    }
    let Some(prev) = tid::try_lock(&r.tid) else { return false };
    if prev != want || r.loc.load(Ordering::Acquire) != g.slot || space::versions(&r.aux) > 1 {
        tid::unlock(&r.tid, prev);
        return prev != want;
    }
    zero_slot(&core.store.pool, local.worker, g.slot);
    r.loc.store(0, Ordering::Release);
    tid::unlock(&r.tid, prev);
    local.zero_pending.push(g);
    true
}

impl<B: PmemBackend> Store for WblStore<B> {
    type TableExt = WblTable;
    type Local = WblLocal;

    const ENGINE: EngineKind = EngineKind::Wbl;

    fn new_table_ext(&self, _id: TableId, schema: &TableSchema) -> WblTable {
        let slot_size = layout::slot_size(schema.row_size());
        WblTable {
            slot_size,
            regions: (0..self.regions)
                .map(|_| Mutex::new(Region::new(slot_size, self.pool.page_size())))
                .collect(),
            cache: TupleCache::new(schema.row_size()),
        }
    }

    fn check_schema(&self, schema: &TableSchema) -> Result<()> {
        let slot = layout::slot_size(schema.row_size());
        if layout::PAGE_HEADER + slot > self.pool.page_size() {
            return Err(Error::InvalidSchema {
                table: schema.name.clone(),
                detail: format!("a {slot}-byte version slot does not fit a page"),
            });
        }
        Ok(())
    }

    fn persist_catalog(&self, schemas: &[TableSchema]) -> Result<()> {
        let doc = CatalogDoc {
            engine: "wbl".into(),
            floor_page: self.meta_page,
            tables: schemas.to_vec(),
        };
        catalog::write(&self.pool, SYSTEM_THREAD, &doc)
    }

    fn local(_core: &Core<Self>, worker: usize) -> WblLocal {
        WblLocal {
            worker,
            txn_seq: 1,
            garbage: VecDeque::new(),
            zero_pending: Vec::new(),
            unacked: VecDeque::new(),
        }
    }

    fn read_row(
        core: &Core<Self>,
        local: &mut WblLocal,
        t: &Table<WblTable>,
        rid: u64,
        tid: u64,
        out: &mut [u8],
    ) -> bool {
        let r = t.records.get(rid);
        let cts = tid::cts_of(tid);
        if t.ext.cache.read(&r.aux, rid, cts, out) {
            return true;
        }
        let head = r.loc.load(Ordering::Acquire);
        if head != 0 {
            core.store
                .pool
                .persister(worker_thread(local.worker))
                .read(head + layout::SLOT_HEADER, out);
            t.ext.cache.install(&r.aux, rid, cts, out, &core.store.budget);
        }
        false
    }

    fn prefetch_row(core: &Core<Self>, t: &Table<WblTable>, rid: u64) {
        let r = t.records.get(rid);
        if !t.ext.cache.prefetch(&r.aux) {
            let head = r.loc.load(Ordering::Relaxed);
            if head != 0 {
                core.store
                    .pool
                    .persister(BACKGROUND_THREAD)
                    .prefetch(head + layout::SLOT_HEADER, t.row_bytes as u64);
            }
        }
    }

    fn read_row_quiescent(
        core: &Core<Self>,
        t: &Table<WblTable>,
        rid: u64,
        out: &mut [u8],
    ) -> Result<()> {
        let head = t.records.get(rid).loc.load(Ordering::Acquire);
        if head == 0 {
            return Err(Error::Corrupt(format!(
                "table {}: live record {rid} has no version",
                t.schema.name
            )));
        }
        core.store.pool.persister(BACKGROUND_THREAD).read(head + layout::SLOT_HEADER, out);
        Ok(())
    }

    fn on_lock(core: &Core<Self>, local: &mut WblLocal, t: &Table<WblTable>, rid: u64) {
        core.store.mark_head(t, rid, local.worker, WblStore::<B>::txn_id(local));
    }

    fn on_unlock(core: &Core<Self>, local: &mut WblLocal, t: &Table<WblTable>, rid: u64) {
        core.store.mark_head(t, rid, local.worker, 0);
    }

    fn enter_commit(core: &Core<Self>, local: &mut WblLocal) {
        core.store.group.publish(local.worker, &core.clock);
    }

    fn prepare(
        core: &Core<Self>,
        local: &mut WblLocal,
        cts: u64,
        writes: &mut [WriteItem],
        _data: &[u8],
        tables: &Tables<WblTable>,
    ) -> Result<()> {
        let store = &core.store;
        if cts > store.group.cd() {
            force_record(core, local);
        }
        for i in 0..writes.len() {
            let t = &tables[writes[i].table as usize];
            match store.allocate_slot(t, local.worker) {
                Ok(slot) => writes[i].aux = slot,
                Err(e) => {
                    for w in &mut writes[..i] {
                        tables[w.table as usize].ext.regions[local.worker].lock().free(w.aux);
                        w.aux = 0;
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn persist(
        core: &Core<Self>,
        local: &mut WblLocal,
        cts: u64,
        writes: &[WriteItem],
        data: &[u8],
        tables: &Tables<WblTable>,
    ) {
        let p = core.store.pool.persister(worker_thread(local.worker));
        p.marker(Marker::Begin { txn: cts });
        for w in writes {
            let t = &tables[w.table as usize];
            let r = t.records.get(w.rid);
            let head = r.loc.load(Ordering::Acquire);
            let slot = w.aux;
            p.write(slot, &layout::version_header(w.key, w.deleted(), cts, head));
            let mut len = layout::SLOT_HEADER;
            if !w.deleted() {
                p.write(slot + len, &data[w.data_at..w.data_at + t.row_bytes]);
                len += t.row_bytes as u64;
            }
            p.flush(slot, len);
            if head != 0 {
                let mut meta = [0u8; 16];
                meta[0..8].copy_from_slice(&cts.to_le_bytes());
                p.write(head + layout::OFF_END, &meta);
                p.flush(head + layout::OFF_END, 16);
            }
            p.fence();
            space::add_version(&r.aux);
            after_fence(core, local);
        }
    }

    fn install_row(
        core: &Core<Self>,
        local: &mut WblLocal,
        t: &Table<WblTable>,
        w: &WriteItem,
        row: Option<&[u8]>,
        cts: u64,
    ) {
        let r = t.records.get(w.rid);
        let head = r.loc.swap(w.aux, Ordering::AcqRel);
        if let Some(row) = row {
            t.ext.cache.install(&r.aux, w.rid, cts, row, &core.store.budget);
        }
        let g = Garbage { table: t.id.0, rid: w.rid, slot: head, cts, tombstone: false };
        if head != 0 {
            local.garbage.push_back(g);
        }
        if w.deleted() {
            local.garbage.push_back(Garbage { slot: w.aux, tombstone: true, ..g });
        }
    }

    fn leave_commit(
        core: &Core<Self>,
        local: &mut WblLocal,
        committed: Option<u64>,
        durability: Durability,
    ) -> bool {
        let store = &core.store;
        store.group.retire(local.worker);
        local.txn_seq += 1;
        let Some(cts) = committed else { return false };
        local.unacked.push_back(cts);
        if durability == Durability::Immediate {
            wait_durable(core, local, cts);
            return true;
        }
        if local.unacked.len() > MAX_UNACKED {
            force_record(core, local);
        } else if store.group.due() {
            let thread = worker_thread(local.worker);
            if store.group.try_write(&store.pool, thread, &core.clock, &mut |r| {
                ack_up_to(&store.pool, local, r.cp);
            }) {
                after_fence(core, local);
            }
        }
        ack_up_to(&store.pool, local, store.group.cp());
        store.group.cp() >= cts
    }

    fn after_commit(core: &Core<Self>, local: &mut WblLocal) {
        collect_garbage(core, local);
    }

    fn sync(core: &Core<Self>, local: &mut WblLocal) -> Result<()> {
        // Garbage first: the record's fence then makes its zeroing durable
        // too, so nothing of this worker is left pending.
        collect_garbage(core, local);
        force_record(core, local);
        Ok(())
    }

    fn counters(core: &Core<Self>, local: &WblLocal) -> CounterSnapshot {
        let pool = &core.store.pool;
        pool.counters(worker_thread(local.worker))
            .snapshot()
            .add(&pool.counters(volatile_thread(local.worker)).snapshot())
    }

    fn pmem_counters(core: &Core<Self>) -> CounterSnapshot {
        core.store.pool.total_counters()
    }

    fn engine_counters(core: &Core<Self>) -> crate::api::EngineCounters {
        crate::api::EngineCounters {
            gc_reclaimed_slots: core.store.gc_reclaimed.load(Ordering::Relaxed),
            ..Default::default()
        }
    }

    fn status(core: &Core<Self>, status: &mut EngineStatus) {
        let store = &core.store;
        status.free_pages = store.pool.free_page_count();
        status.page_count = store.pool.page_count();
        for (t, s) in core.tables().iter().zip(&mut status.tables) {
            s.heap_pages = t.ext.regions.iter().map(|r| r.lock().pages.len() as u64).sum();
            status.cache_entries_used += t.ext.cache.capacity();
        }
        status.cache_entries_capacity = status.cache_entries_used.max(1);
    }

    fn check_invariants(core: &Core<Self>) -> Result<()> {
        recovery::check_invariants(core)
    }

    fn close(core: Core<Self>) -> Result<()> {
        let store = &core.store;
        store.group.write(&store.pool, BACKGROUND_THREAD, &core.clock, &mut |_| {});
        Ok(core.store.pool.close()?)
    }

    fn abandon(core: Core<Self>) {
        core.store.pool.abandon();
    }
}
