//! The Zen engine (Zen §3, Zen+ §3): Met-Cache in DRAM, log-free persistent
//! transactions with the LP bit, lightweight NVM space management and
//! scan-based parallel recovery.
//!
//! LIFECYCLE OF A TRANSACTION
//!   perform   in DRAM under the protocol (reads from Met-Cache entries, cache
//!             misses bring NVM tuples into the worker's region; writes buffered)
//!   persist   Alg. 1: each new version to a free slot of the worker's heap
//!             region, flush, ONE fence, LP bit on the last tuple's Tx-CTS word
//!             (one aligned 8-byte store), flush; `Durability::Immediate` adds a
//!             second fence so `commit` returns only once durable
//!   maintain  install into the Met-Cache, unlock, queue old versions as garbage
//!
//! Aborts never write NVM; read-only transactions never write NVM.
//!
//! Module map: `cache` (Met-Cache regions), `space` (heap regions, garbage),
//! `table` (indexes, location words), `txn` (transactions and commit),
//! `recovery` (Alg. 2), this file (engine, workers, GC watermark).

pub mod adaptive;
pub mod cache;
pub mod cache_plan;
pub mod numa;
pub mod recovery;
pub mod space;
pub mod table;
pub mod txn;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::sched::{Mutex, RwLock};
use crossbeam_utils::CachePadded;
use zen_pmem::{CounterSnapshot, PageOwner, PmemBackend, Pool, PoolOptions};

use crate::api::{
    Engine, EngineCounters, EngineStatus, EngineWorker, RecoveryReport, TableId, TableStatus,
};
use crate::catalog::{self, CatalogDoc};
use crate::cc::{Protocol, Silo};
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::schema::TableSchema;
use crate::ts::Clock;
use table::Table;

/// The lock-free handoff of reclaimed slots to their owner: many workers
/// push, one owner drains.
///
/// Zen's space management is per worker (§3.4: "no thread contention"): a
/// worker reclaims the slots it superseded itself, but a slot lives in the
/// heap region of the worker that *wrote* it, and only that owner changes its
/// region's free lists. The last step of reclaiming another worker's slot,
/// "this durably zeroed slot is free again", is therefore handed to the owner
/// through this bounded queue instead of taking the owner's region lock. A
/// full queue refuses the item (`push` returns it) and the holder frees the
/// slot under the owner's lock instead (`maintain.rs`, `free_reclaimed`); an
/// item is popped at most once, and none is lost. The Met-Cache's
/// copied-away hints (C5, `cache.rs`) travel the same kind of queue.
/// crossbeam's bounded array queue (Vyukov's design), which replaced a
/// hand-written copy of the same algorithm (docs/benchmarks.md, session 20).
pub type FreedSlots = crossbeam_queue::ArrayQueue<(u32, u64)>;

/// Met-Cache entries every table keeps per worker region (C_min of §3.2).
pub const MIN_CACHE_ENTRIES: u64 = 16;

/// Which worker ids are held by a registered worker, and which were left
/// with garbage still pending by a worker that is gone (`release_worker`).
struct WorkerIds {
    used: Vec<bool>,
    orphaned: Vec<bool>,
}

impl WorkerIds {
    fn new(ids: usize) -> WorkerIds {
        WorkerIds { used: vec![false; ids], orphaned: vec![false; ids] }
    }
}

/// State shared by all workers of one engine.
pub struct Shared<B: PmemBackend> {
    pub pool: Pool<B>,
    pub config: EngineConfig,
    pub tables: RwLock<Arc<Vec<Arc<Table>>>>,
    /// The same tables by id, for workers to borrow (`registry.rs`).
    pub registry: crate::registry::TableRegistry<Table>,
    pub tables_version: AtomicU64,
    pub clock: Clock,
    /// Regions per table (= most workers, including workers found in the pool).
    pub regions: usize,
    workers_in_use: Mutex<WorkerIds>,
    /// How many of `workers_in_use` are set (read per transaction by α).
    registered: AtomicU64,
    /// How many worker ids are orphaned (`WorkerIds::orphaned`): read at
    /// every maintenance, written only when a worker leaves or registers.
    pub orphans: AtomicU64,
    /// Begin timestamp of each worker's running transaction, `u64::MAX` if idle.
    pub active_ts: Box<[CachePadded<AtomicU64>]>,
    /// The largest watermark any worker computed for reuse decisions
    /// (`refresh_reuse_watermark`); 0 until the first.
    reuse_watermark: CachePadded<AtomicU64>,
    /// Largest Tx-CTS of each worker known to be durable.
    pub durable_cts: Box<[CachePadded<AtomicU64>]>,
    /// Pool offset of the LP word of each worker's newest lazy commit, stored
    /// after its LP store and before its install; a reader that finds the
    /// writer not yet durable flushes this line (`txn/deps.rs`).
    pub unfenced_lp: Box<[CachePadded<AtomicU64>]>,
    /// Commit floors: per worker, the value last stored to its floor word
    /// (stores serialised by `floor_locks`; flushed, maybe not yet fenced).
    pub floors: Box<[CachePadded<AtomicU64>]>,
    /// Per worker, a floor value known durable: the thread that flushed the
    /// floor line has fenced since (S4 relies on this one, not on `floors`).
    pub floors_durable: Box<[CachePadded<AtomicU64>]>,
    pub floor_page: u64,
    /// Owner worker of every pool page (a reclaimed slot goes back to its owner).
    pub page_worker: Box<[AtomicU32]>,
    /// Each worker's garbage pipeline (`space.rs`; taken by its worker once
    /// per maintenance, by another only in the exclusive stage).
    pub gc: Box<[CachePadded<Mutex<space::WorkerGc>>]>,
    /// Per worker: at most the smallest Tx-CTS of its pending non-tombstone
    /// garbage (S3); stored only by that worker.
    pub gc_low: Box<[CachePadded<AtomicU64>]>,
    /// Per owner worker: durably zeroed slots (table, slot) other workers
    /// reclaimed, for the owner to put back on its free lists.
    pub freed_slots: Box<[std::sync::OnceLock<FreedSlots>]>,
    /// Serialises the NVM stores of one worker's commit floor (S4): the
    /// worker itself and the holders of its superseded slots raise it.
    floor_locks: Box<[CachePadded<Mutex<()>>]>,
    catalog_lock: Mutex<()>,
    pub recovery: Option<RecoveryReport>,
    /// Met-Cache byte budget of each worker.
    pub cache_budget_bytes: u64,
    /// Slots reclaimed (freed, or kept as their record's spare: S7 of
    /// `space.rs`), per worker that reclaimed them (summed by `status`).
    pub gc_reclaimed: Box<[CachePadded<AtomicU64>]>,
    /// Superseded slots kept as their record's spare (S7 of `space.rs`), per
    /// worker that kept them.
    pub gc_spared: Box<[CachePadded<AtomicU64>]>,
    /// Set for good when a page allocation finds the pool full: from then on
    /// no slot becomes a spare (S7), so spares give their space back.
    pub spares_off: std::sync::atomic::AtomicBool,
    /// Transactions attempted per worker (for f_i of the cache plan).
    pub txns: Box<[CachePadded<AtomicU64>]>,
    /// 2PL: begin timestamp of each worker's running transaction (wait-die).
    pub lock_priority: Box<[CachePadded<AtomicU64>]>,
    /// 2PL dl-detect: whom each worker waits for (bitmap of workers).
    pub waits_for: Mutex<Vec<u64>>,
    /// H-Store: owner (worker + 1) of each partition, 0 when free.
    pub partition_locks: Box<[AtomicU64]>,
    /// TicToc: per worker, the largest logical timestamp it used (a version
    /// cached back from NVM restarts above the largest of all). Each worker
    /// raises only its own: one global word was a shared write per commit.
    tictoc_high: Box<[CachePadded<AtomicU64>]>,
    /// OCC: the critical section of serial validation.
    pub validation: Mutex<()>,
    /// Zen+ NUMA runtime (`None` on one node: nothing placed or counted).
    pub numa: Option<crate::numa::Numa>,
    /// Zen+ adaptive execution: G-EX, begin timestamps, counters (`adaptive.rs`).
    pub adaptive: adaptive::Adaptive,
    /// Heap pages allocated so far (spreads `naive` mode over per-node files).
    pub heap_pages_allocated: AtomicU64,
    /// `mbind` of cache regions, on real NUMA nodes only (`numa/bind.rs`).
    pub memory_binder: Option<Arc<crate::numa::MemoryBinder>>,
}

/// The Zen engine on backend `B` with concurrency-control protocol `P`.
pub struct ZenEngine<B: PmemBackend, P: Protocol = Silo> {
    shared: Arc<Shared<B>>,
    protocol: std::marker::PhantomData<P>,
}

impl<B: PmemBackend, P: Protocol> ZenEngine<B, P> {
    /// Create a new pool per `config` and an empty engine on it.
    pub fn create(config: &EngineConfig) -> Result<Self> {
        config.validate()?;
        let pool = Pool::<B>::create(
            &backend_options(config),
            config.pool_size_bytes,
            &PoolOptions { page_size: config.page_size_bytes, features: 0 },
        )?;
        Self::create_on(pool, config)
    }

    /// Build an empty engine on a freshly formatted pool.
    pub fn create_on(pool: Pool<B>, config: &EngineConfig) -> Result<Self> {
        numa::check_pool_nodes(&pool, config)?;
        if pool.catalog_root().is_some() {
            return Err(Error::InvalidConfig(format!(
                "{}: pool already holds a catalog; open it instead",
                pool.path().display()
            )));
        }
        let floor_page = pool.allocate_page(zen_pmem::SYSTEM_THREAD, PageOwner::SYSTEM)?;
        let doc = CatalogDoc { engine: "zen".into(), floor_page, tables: Vec::new() };
        catalog::write(&pool, zen_pmem::SYSTEM_THREAD, &doc)?;
        let regions = config.max_workers;
        let data = config.expected_data_bytes.unwrap_or(0);
        let shared =
            Shared::new(pool, config, regions, floor_page, Clock::resume_above(0), None, data);
        Ok(ZenEngine { shared: Arc::new(shared), protocol: std::marker::PhantomData })
    }

    /// Open an existing pool per `config` and recover it.
    pub fn open(config: &EngineConfig) -> Result<Self> {
        config.validate()?;
        let pool = Pool::<B>::open(&backend_options(config))?;
        Self::open_on(pool, config)
    }

    /// Recover an engine from an opened pool (Alg. 2).
    pub fn open_on(pool: Pool<B>, config: &EngineConfig) -> Result<Self> {
        numa::check_pool_nodes(&pool, config)?;
        let shared = recovery::recover(pool, config)?;
        Ok(ZenEngine { shared: Arc::new(shared), protocol: std::marker::PhantomData })
    }

    pub fn shared(&self) -> &Shared<B> {
        &self.shared
    }

    /// Drop the engine without closing the pool cleanly (as a crash would).
    pub fn abandon(self) {
        if let Ok(shared) = Arc::try_unwrap(self.shared) {
            shared.pool.abandon();
        }
    }

    /// Close and hand back the pool (tests inspect it afterwards).
    pub fn into_pool(self) -> Option<Pool<B>> {
        Arc::try_unwrap(self.shared).ok().map(|s| s.pool)
    }
}

pub fn backend_options(config: &EngineConfig) -> zen_pmem::BackendOptions {
    let members = match (&config.pool, config.pool_per_node) {
        (Some(pool), Some(count)) => zen_pmem::pool::member_paths(pool, count),
        _ => Vec::new(),
    };
    zen_pmem::BackendOptions {
        path: members.first().cloned().or_else(|| config.pool.clone()),
        members,
        domain: config.domain,
        latency: config.latency,
    }
}

impl<B: PmemBackend> Shared<B> {
    pub(crate) fn new(
        pool: Pool<B>,
        config: &EngineConfig,
        regions: usize,
        floor_page: u64,
        clock: Clock,
        recovery: Option<RecoveryReport>,
        data_bytes: u64,
    ) -> Self {
        let per_worker =
            |v: u64| (0..regions).map(|_| CachePadded::new(AtomicU64::new(v))).collect();
        let budget = config.cache_bytes(data_bytes);
        let numa = crate::numa::Numa::new(&config.numa, regions.max(config.max_workers));
        let memory_binder = numa.as_ref().filter(|n| n.layout.real).map(|_| {
            Arc::new(crate::numa::MemoryBinder::new(crate::numa::Topology::detect_node_ids()))
        });
        Shared {
            page_worker: (0..pool.page_count()).map(|_| AtomicU32::new(u32::MAX)).collect(),
            gc: (0..regions).map(|_| CachePadded::new(Mutex::new(Default::default()))).collect(),
            gc_low: per_worker(u64::MAX),
            freed_slots: (0..regions).map(|_| std::sync::OnceLock::new()).collect(),
            floor_locks: (0..regions).map(|_| CachePadded::new(Mutex::new(()))).collect(),
            pool,
            config: config.clone(),
            tables: RwLock::new(Arc::new(Vec::new())),
            registry: Default::default(),
            tables_version: AtomicU64::new(0),
            clock,
            regions,
            workers_in_use: Mutex::new(WorkerIds::new(config.max_workers.min(regions))),
            registered: AtomicU64::new(0),
            orphans: AtomicU64::new(0),
            active_ts: per_worker(u64::MAX),
            reuse_watermark: CachePadded::new(AtomicU64::new(0)),
            durable_cts: per_worker(0),
            unfenced_lp: per_worker(0),
            floors: per_worker(0),
            floors_durable: per_worker(0),
            floor_page,
            catalog_lock: Mutex::new(()),
            recovery,
            cache_budget_bytes: budget.max(4 << 10),
            gc_reclaimed: per_worker(0),
            gc_spared: per_worker(0),
            spares_off: Default::default(),
            txns: per_worker(0),
            lock_priority: per_worker(u64::MAX),
            waits_for: Mutex::new(vec![0; regions]),
            partition_locks: (0..config.hstore_partitions.unwrap_or(config.max_workers))
                .map(|_| AtomicU64::new(0))
                .collect(),
            tictoc_high: per_worker(0),
            validation: Mutex::new(()),
            numa,
            heap_pages_allocated: AtomicU64::new(0),
            memory_binder,
            adaptive: adaptive::Adaptive::new(regions),
        }
    }

    /// Pool thread slot of a worker (slot 0 is the pool's own).
    pub fn thread_of(worker: usize) -> u32 {
        worker as u32 + 1
    }

    /// Global minimum Tx-CTS: no running transaction began before it.
    pub fn watermark(&self) -> u64 {
        let now = self.clock.now();
        self.active_ts.iter().map(|a| a.load(Ordering::Acquire)).fold(now, u64::min)
    }

    /// Compute the watermark and publish it for reuse decisions, if it is
    /// above the one published.
    pub fn refresh_reuse_watermark(&self) {
        let w = self.watermark();
        if self.reuse_watermark.load(Ordering::Relaxed) < w {
            self.reuse_watermark.fetch_max(w, Ordering::AcqRel);
        }
    }

    /// The watermark last published by `refresh_reuse_watermark`: a safe
    /// one however old (see `ZenWorker::reuse_watermark`).
    pub fn published_reuse_watermark(&self) -> u64 {
        self.reuse_watermark.load(Ordering::Acquire)
    }

    /// Workers registered now (at least 1): the Met-Cache budget is split
    /// between them.
    pub fn registered_workers(&self) -> u64 {
        self.registered.load(Ordering::Relaxed).max(1)
    }

    /// One registered worker's part of the Met-Cache budget, in bytes.
    pub fn worker_cache_budget_bytes(&self) -> u64 {
        self.cache_budget_bytes / self.registered_workers()
    }

    pub fn tables(&self) -> Arc<Vec<Arc<Table>>> {
        self.tables.read().clone()
    }

    /// A worker's own copy of the table list, so that cloning its `Arc`
    /// (eviction's walk over the tables) touches a line only that worker
    /// uses, not one every worker shares.
    pub fn worker_tables(&self) -> Arc<Vec<Arc<Table>>> {
        Arc::new(Vec::clone(&self.tables.read()))
    }

    /// Most entries a region of a table with `row_bytes` rows may allocate:
    /// twice the whole budget (one worker may be the only one running, and
    /// evicted entries wait, retired (C4), until the watermark passes before
    /// they are reused). Chunks are allocated on first use, so the capacity
    /// costs nothing until it is used; the entries in use are bounded by the
    /// region's share (`cache_limit`), enforced by `allocate_entry`.
    pub(crate) fn region_capacity(&self, row_bytes: usize) -> u32 {
        let entry = (std::mem::size_of::<cache::Entry>() + row_bytes.div_ceil(8) * 8) as u64;
        u32::try_from(2 * self.cache_budget_bytes / entry).unwrap_or(u32::MAX).clamp(16, 1 << 30)
    }

    pub(crate) fn install_tables(&self, schemas: &[TableSchema]) {
        let mut tables = Vec::with_capacity(schemas.len());
        for (i, s) in schemas.iter().enumerate() {
            let table = Arc::new(self.make_table(i, s.clone()));
            // Past the registry's limit a table stays unusable (operations
            // on it fail with `UnknownTableId`); `create_table` refuses it.
            let _ = self.registry.publish(i, &table);
            tables.push(table);
        }
        *self.tables.write() = Arc::new(tables);
        self.tables_version.fetch_add(1, Ordering::AcqRel);
        self.rebalance_cache();
    }

    /// Re-plan every table's Met-Cache share with the greedy f_i/S_i rule
    /// (`cache_plan.rs`), from the accesses counted so far.
    pub fn rebalance_cache(&self) {
        let tables = self.tables();
        let txns: u64 = self.txns.iter().map(|t| t.load(Ordering::Relaxed)).sum();
        let demands: Vec<cache_plan::TableDemand> = tables
            .iter()
            .map(|t| {
                let accesses: u64 = t.accesses.iter().map(|a| a.load(Ordering::Relaxed)).sum();
                cache_plan::TableDemand {
                    accesses_per_txn: if txns == 0 { 1.0 } else { accesses as f64 / txns as f64 },
                    // Keys ever given a record (O(shards)); the ordered
                    // set's `len` walks the tree, which cost a full scan of
                    // every table per worker registration and recovery.
                    rows: t.index.records() as u64,
                    entry_bytes: t.caches[0].entry_bytes() as u64,
                }
            })
            .collect();
        // The minimum covers one worker's transactions (f_i is per
        // transaction), so it is reserved in every registered region.
        let workers = self.registered_workers();
        let per_worker = |d: &cache_plan::TableDemand| d.min_share(MIN_CACHE_ENTRIES);
        let demands_all: Vec<cache_plan::TableDemand> = demands
            .iter()
            .map(|d| cache_plan::TableDemand {
                accesses_per_txn: d.accesses_per_txn * workers as f64,
                ..*d
            })
            .collect();
        let shares =
            cache_plan::plan(self.cache_budget_bytes, MIN_CACHE_ENTRIES * workers, &demands_all);
        // A table's share is split between the workers registered now: the
        // regions of idle worker slots get nothing.
        for ((t, share), d) in tables.iter().zip(shares).zip(&demands) {
            let cap = u64::from(t.caches[0].capacity() / 2);
            let per_region = (share / workers).max(per_worker(d)).min(cap);
            t.cache_limit.store(u32::try_from(per_region).unwrap_or(u32::MAX), Ordering::Relaxed);
            t.planned_records.store(t.records.count(), Ordering::Relaxed);
        }
    }

    /// Plan the cache again if `t` has grown by more than a quarter (and
    /// `REPLAN_SLACK` records) since the plan was made; true if it did.
    /// Called when a region of `t` reaches its share, before evicting: a
    /// table planned small is planned for the size it has now. Without it a
    /// table planned empty kept the share it got then: YCSB's, created
    /// beside the one-row spec table, got half the budget, and a 2M-row load
    /// into a 4 GiB cache evicted what it had just written (the run then
    /// started with a 90 % hit ratio); TPC-C's growing tables evicted at 2
    /// threads while static ones held budget they never used. One load of a
    /// shared counter (written once per block of record ids) per call;
    /// geometric growth means few plans.
    pub(crate) fn replan_if_grown(&self, t: &Table) -> bool {
        const REPLAN_SLACK: u64 = 4096;
        let planned = t.planned_records.load(Ordering::Relaxed);
        if t.records.count() <= planned + planned / 4 + REPLAN_SLACK {
            return false;
        }
        self.rebalance_cache();
        true
    }

    fn make_table(&self, index: usize, schema: TableSchema) -> Table {
        let rank = self
            .config
            .persist_order
            .iter()
            .position(|n| *n == schema.name)
            .map_or(u32::MAX - 1024 + index as u32, |p| p as u32);
        let capacity = self.region_capacity(schema.row_size());
        let table = Table::new(
            TableId(index as u32),
            schema,
            self.regions,
            capacity,
            self.pool.page_size(),
            rank,
        );
        if let (Some(binder), Some(numa)) = (&self.memory_binder, &self.numa) {
            for (region, cache) in table.caches.iter().enumerate() {
                cache.bind_to_node(Arc::clone(binder), numa.layout.node_of(region));
            }
        }
        table
    }

    /// Make worker `w`'s commit floor at least `cts` in the line, and flush
    /// that line on `thread`: the caller's next fence makes the returned
    /// floor value (`>= cts`) durable, and the caller then reports it with
    /// [`Shared::floors_fenced`].
    ///
    /// Several threads may raise one worker's floor (the holders of its
    /// superseded slots, `space.rs`, and the exclusive stage); their stores
    /// are serialised, so the value in the line only grows. The flush is
    /// issued even when another thread stored a high enough value already:
    /// that thread's flush is durable only at *its* next fence, which may be
    /// far away, and the caller zeroes slots right after its own (S4). Any
    /// thread may write back any line, as in `txn/deps.rs`.
    pub(crate) fn raise_floor(&self, thread: u32, worker: usize, cts: u64) -> u64 {
        let _serial = self.floor_locks[worker].lock();
        let p = self.pool.persister(thread);
        let at = catalog::floor_offset(&self.pool, self.floor_page, worker);
        let mut stored = self.floors[worker].load(Ordering::Acquire);
        if stored < cts {
            p.write_u64_atomic(at, cts);
            self.floors[worker].store(cts, Ordering::Release);
            stored = cts;
        }
        p.flush(at, 8);
        stored
    }

    /// TicToc: worker `w` used logical timestamp `ts` (only `w` calls this).
    pub(crate) fn raise_tictoc_high(&self, w: usize, ts: u64) {
        let mine = &self.tictoc_high[w];
        if mine.load(Ordering::Relaxed) < ts {
            mine.store(ts, Ordering::Release);
        }
    }

    /// TicToc: the largest logical timestamp any worker has used.
    pub(crate) fn tictoc_high(&self) -> u64 {
        self.tictoc_high.iter().map(|h| h.load(Ordering::Acquire)).max().unwrap_or(0)
    }

    /// `thread` fenced after flushing these (worker, floor) pairs
    /// ([`Shared::raise_floor`]): they are durable.
    pub(crate) fn floors_fenced(&self, flushed: &[(usize, u64)]) {
        for &(w, floor) in flushed {
            self.floors_durable[w].fetch_max(floor, Ordering::AcqRel);
        }
    }

    /// Allocate a heap page for (table, worker) and write its header (flushed;
    /// the next fence of the worker makes it durable before any LP).
    pub(crate) fn allocate_heap_page(&self, worker: usize, table: &Table) -> Result<(u64, u64)> {
        let thread = Self::thread_of(worker);
        let owner = PageOwner { table: table.id.0, worker: worker as u16 };
        let page = self
            .pool
            .allocate_page_on(thread, owner, self.home_member(worker))
            .inspect_err(|e| {
                // A full pool: spares (S7) give their space back from now on.
                if matches!(e, zen_pmem::PmemError::NoFreePage { .. }) {
                    self.spares_off.store(true, Ordering::Relaxed);
                }
            })?;
        self.page_worker[page as usize].store(worker as u32, Ordering::Release);
        let offset = self.pool.page_offset(page);
        let p = self.pool.persister(thread);
        p.write(offset, &crate::heap::page_header(table.id.0, worker as u16, table.slot_size));
        p.flush(offset, 24);
        Ok((page, offset))
    }
}

impl<B: PmemBackend, P: Protocol> Engine for ZenEngine<B, P> {
    fn name(&self) -> &'static str {
        "zen"
    }

    fn cc_name(&self) -> &'static str {
        P::KIND.name()
    }

    fn create_table(&self, schema: &TableSchema) -> Result<TableId> {
        schema.validate()?;
        let s = &self.shared;
        let slot = crate::heap::slot_size(schema.row_size());
        if crate::heap::slots_per_page(s.pool.page_size(), slot) == 0 {
            return Err(Error::InvalidSchema {
                table: schema.name.clone(),
                detail: format!(
                    "rows of {} bytes do not fit a {}-byte heap page",
                    schema.row_size(),
                    s.pool.page_size()
                ),
            });
        }
        let _guard = s.catalog_lock.lock();
        let tables = s.tables();
        if let Some(t) = tables.iter().find(|t| t.schema.name == schema.name) {
            return if t.schema == *schema {
                Ok(t.id)
            } else {
                Err(Error::SchemaMismatch(schema.name.clone()))
            };
        }
        crate::registry::check_room(tables.len())?;
        let mut schemas: Vec<TableSchema> = tables.iter().map(|t| t.schema.clone()).collect();
        schemas.push(schema.clone());
        let doc = CatalogDoc { engine: "zen".into(), floor_page: s.floor_page, tables: schemas };
        catalog::write(&s.pool, zen_pmem::SYSTEM_THREAD, &doc)?;
        let mut list: Vec<Arc<Table>> = tables.iter().cloned().collect();
        let id = list.len();
        let table = Arc::new(s.make_table(id, schema.clone()));
        s.registry.publish(id, &table)?;
        list.push(table);
        *s.tables.write() = Arc::new(list);
        s.tables_version.fetch_add(1, Ordering::AcqRel);
        s.rebalance_cache();
        Ok(TableId(id as u32))
    }

    fn table_id(&self, name: &str) -> Result<TableId> {
        self.shared
            .tables()
            .iter()
            .find(|t| t.schema.name == name)
            .map(|t| t.id)
            .ok_or_else(|| Error::UnknownTable(name.to_string()))
    }

    fn schema(&self, table: TableId) -> Result<TableSchema> {
        self.shared
            .tables()
            .get(table.0 as usize)
            .map(|t| t.schema.clone())
            .ok_or(Error::UnknownTableId(table.0))
    }

    fn worker(&self) -> Result<Box<dyn EngineWorker + '_>> {
        let s = &self.shared;
        let mut ids = s.workers_in_use.lock();
        let id = ids
            .used
            .iter()
            .position(|u| !u)
            .ok_or(Error::TooManyWorkers { max: ids.used.len() })?;
        ids.used[id] = true;
        // The id's new worker takes over what its predecessor left.
        if std::mem::replace(&mut ids.orphaned[id], false) {
            s.orphans.fetch_sub(1, Ordering::Relaxed);
        }
        s.registered.fetch_add(1, Ordering::Relaxed);
        drop(ids);
        s.rebalance_cache();
        Ok(Box::new(txn::ZenWorker::<B, P>::new(s, id)))
    }

    fn pmem_counters(&self) -> CounterSnapshot {
        self.shared.pool.total_counters()
    }

    fn status(&self) -> EngineStatus {
        let s = &self.shared;
        let tables = s.tables();
        let counters = self.counters();
        let mut status = EngineStatus {
            engine: "zen".into(),
            cc: P::KIND.name().into(),
            free_pages: s.pool.free_page_count(),
            page_count: s.pool.page_count(),
            gc_reclaimed_slots: counters.gc_reclaimed_slots,
            gc_spared_slots: counters.gc_spared_slots,
            adaptive: self.adaptive_stats(),
            ..Default::default()
        };
        let registered = s.registered_workers();
        for t in tables.iter() {
            let rows = txn::count_live(t);
            let heap_pages = t.heaps.iter().map(|h| h.lock().page_count()).sum();
            status.tables.push(TableStatus {
                name: t.schema.name.clone(),
                rows,
                row_bytes: t.row_bytes,
                heap_pages,
                ordered_keys: t.index.len() as u64,
            });
            status.cache_entries_used += t.caches.iter().map(|c| u64::from(c.used())).sum::<u64>();
            status.cache_entries_capacity +=
                u64::from(t.cache_limit.load(Ordering::Relaxed)) * registered;
        }
        status
    }

    fn counters(&self) -> EngineCounters {
        let s = &self.shared;
        EngineCounters {
            gc_reclaimed_slots: s.gc_reclaimed.iter().map(|c| c.load(Ordering::Relaxed)).sum(),
            gc_spared_slots: s.gc_spared.iter().map(|c| c.load(Ordering::Relaxed)).sum(),
            checkpoints: None,
        }
    }

    fn rebalance_cache(&self) {
        self.shared.rebalance_cache();
    }

    fn numa(&self) -> Option<&crate::numa::Numa> {
        self.shared.numa.as_ref()
    }

    fn numa_stats(&self) -> Option<crate::numa::NumaStats> {
        self.shared.numa_stats()
    }

    fn adaptive_stats(&self) -> Option<adaptive::AdaptiveStats> {
        let s = &self.shared;
        (s.config.adaptive && P::SNAPSHOT_READS).then(|| s.adaptive.stats())
    }

    fn recovery_report(&self) -> Option<RecoveryReport> {
        self.shared.recovery.clone()
    }

    fn check_invariants(&self) -> Result<()> {
        recovery::check_invariants(&self.shared)
    }

    fn abandon(self: Box<Self>) {
        ZenEngine::abandon(*self);
    }

    fn close(self: Box<Self>) -> Result<()> {
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => {
                let p = shared.pool.persister(zen_pmem::SYSTEM_THREAD);
                p.fence();
                Ok(shared.pool.close()?)
            }
            Err(_) => Err(Error::InvalidConfig("close: workers are still registered".into())),
        }
    }
}

impl<B: PmemBackend> Shared<B> {
    /// Worker `id` leaves. Garbage it leaves pending (its versions not yet
    /// below the watermark) makes the id *orphaned*: running workers' next
    /// maintenance reclaims it (`adopt_orphans`), as the id's next user
    /// would. Without that, a pending item would hold `gc_low[id]` down, and
    /// with it every worker's tombstones (S3), until the id is used again.
    pub(crate) fn release_worker(&self, id: usize) {
        let pending = !self.gc[id].lock().is_idle();
        let mut ids = self.workers_in_use.lock();
        if std::mem::replace(&mut ids.used[id], false) {
            self.registered.fetch_sub(1, Ordering::Relaxed);
        }
        if pending && !std::mem::replace(&mut ids.orphaned[id], true) {
            self.orphans.fetch_add(1, Ordering::Relaxed);
        }
        drop(ids);
        self.rebalance_cache();
    }

    /// Reclaim the garbage of orphaned worker ids (`release_worker`) on
    /// `me`'s thread, as the exclusive stage does (`reclaim_pipelines`),
    /// then set their `gc_low` to what is left (the items taken are durably
    /// zero by then, so it may rise, which is what frees tombstones). Holds
    /// the registry of ids throughout, so no worker takes an id over while
    /// its pipeline is being reclaimed; skipped when another thread holds
    /// it (the next maintenance tries again).
    pub(crate) fn adopt_orphans(&self, me: usize) {
        let Some(mut ids) = self.workers_in_use.try_lock() else { return };
        let adopt: Vec<usize> =
            (0..ids.used.len()).filter(|&w| ids.orphaned[w] && !ids.used[w]).collect();
        if adopt.is_empty() {
            return;
        }
        let freed = self.reclaim_pipelines(Shared::<B>::thread_of(me), |w| adopt.contains(&w));
        for &w in &adopt {
            let gc = self.gc[w].lock();
            // Every item taken is durably zero now (the pass fenced): what is
            // left is what `gc_low` must cover.
            self.gc_low[w].store(gc.pending_low(), Ordering::SeqCst);
            if gc.is_idle() {
                ids.orphaned[w] = false;
                self.orphans.fetch_sub(1, Ordering::Relaxed);
            }
        }
        drop(ids);
        self.gc_reclaimed[me].fetch_add(freed, Ordering::Relaxed);
    }
}
