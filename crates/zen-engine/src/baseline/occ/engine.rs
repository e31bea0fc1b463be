//! `OccEngine<S>`: the `Engine` implementation every baseline shares, and the
//! `Core` its workers and store hooks see.
//!
//! The engine owns the core behind an `Arc` (so a background thread, when
//! the store asks for one, can hold a `Weak` to it) and the background
//! thread's handle. `close` stops the thread, takes the core back and hands
//! it to `Store::close`; `abandon` does the same with `Store::abandon`.
//!
//! Invariants of a quiescent engine, checked by `check_invariants` before the
//! store's own: (O1) no record is locked; (O2) no two keys share a record;
//! (O3) each secondary index holds exactly the entries of the live rows;
//! (O4) under 2PL, no lock is held.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

use crate::sched::{Mutex, RwLock};
use crossbeam_utils::CachePadded;
use zen_pmem::CounterSnapshot;

use super::protocol::{Protocol, VersionHeap};
use super::table::Table;
use super::txn::OccWorker;
use super::{Store, tid};
use crate::api::{Engine, EngineStatus, EngineWorker, RecoveryReport, TableId, TableStatus};
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::schema::TableSchema;
use crate::ts::Clock;

/// The tables of an engine, shared by the workers (replaced on create_table).
type TableList<S> = Arc<Vec<Arc<Table<<S as Store>::TableExt>>>>;

/// Everything the workers of one engine share.
pub struct Core<S: Store> {
    pub store: S,
    pub config: EngineConfig,
    pub clock: Clock,
    tables: RwLock<TableList<S>>,
    /// The same tables by id, for workers to borrow (`registry.rs`).
    pub registry: crate::registry::TableRegistry<Table<S::TableExt>>,
    tables_version: AtomicU64,
    catalog_lock: Mutex<()>,
    workers_in_use: Mutex<Vec<bool>>,
    pub recovery: Option<RecoveryReport>,
    stop: AtomicBool,
    /// The protocol (`protocol.rs`).
    pub protocol: Protocol,
    /// TO / MVCC: per worker, a bound below its running transaction's
    /// timestamp (`u64::MAX` when idle). Padded, as `lock_priority`: each
    /// worker stores its own twice per transaction.
    active: Box<[CachePadded<AtomicU64>]>,
    /// wait-die: per worker, the priority of its transaction (smaller is
    /// older; `u64::MAX` when idle).
    pub lock_priority: Box<[CachePadded<AtomicU64>]>,
    /// dl-detect: per worker, the workers it waits for (a bitmap).
    pub waits_for: Mutex<Vec<u64>>,
    /// MVCC: old versions (`protocol.rs`).
    pub versions: VersionHeap,
}

impl<S: Store> Core<S> {
    /// A core over `store` with `tables` already built (by create or recovery).
    pub fn new(
        store: S,
        config: &EngineConfig,
        clock: Clock,
        tables: Vec<Arc<Table<S::TableExt>>>,
        recovery: Option<RecoveryReport>,
    ) -> Core<S> {
        let registry = crate::registry::TableRegistry::default();
        for t in &tables {
            // Past the registry's limit a table stays unusable (operations
            // on it fail with `UnknownTableId`); `create_table` refuses it.
            let _ = registry.publish(t.id.0 as usize, t);
        }
        Core {
            registry,
            store,
            config: config.clone(),
            clock,
            tables: RwLock::new(Arc::new(tables)),
            tables_version: AtomicU64::new(0),
            catalog_lock: Mutex::new(()),
            workers_in_use: Mutex::new(vec![false; config.max_workers]),
            recovery,
            stop: AtomicBool::new(false),
            protocol: Protocol::of(config.cc).unwrap_or(Protocol::SILO),
            active: (0..config.max_workers)
                .map(|_| CachePadded::new(AtomicU64::new(u64::MAX)))
                .collect(),
            lock_priority: (0..config.max_workers)
                .map(|_| CachePadded::new(AtomicU64::new(u64::MAX)))
                .collect(),
            waits_for: Mutex::new(vec![0; config.max_workers]),
            versions: VersionHeap::default(),
        }
    }

    /// TO / MVCC: publish worker `id` as active, then draw its timestamp.
    pub(super) fn begin_versioned(&self, id: usize) -> u64 {
        self.active[id].store(self.clock.now(), Ordering::SeqCst);
        self.clock.next(id)
    }

    /// TO / MVCC: worker `id` runs no transaction.
    pub(super) fn end_versioned(&self, id: usize) {
        self.active[id].store(u64::MAX, Ordering::Release);
    }

    /// TO / MVCC: no running or future transaction has a timestamp below this.
    pub(super) fn min_active(&self) -> u64 {
        let now = self.clock.now();
        self.active.iter().map(|a| a.load(Ordering::SeqCst)).fold(now, u64::min)
    }

    pub fn tables(&self) -> Arc<Vec<Arc<Table<S::TableExt>>>> {
        self.tables.read().clone()
    }

    /// A worker's own copy of the table list: the commit clones its `Arc`
    /// once per phase, an atomic on a line only that worker touches (a
    /// list shared by every worker would make it a shared write per commit).
    pub fn worker_tables(&self) -> Arc<Vec<Arc<Table<S::TableExt>>>> {
        Arc::new(Vec::clone(&self.tables.read()))
    }

    pub fn tables_version(&self) -> u64 {
        self.tables_version.load(Ordering::Acquire)
    }

    pub(super) fn release_worker(&self, id: usize) {
        self.workers_in_use.lock()[id] = false;
    }

    /// True once the engine is closing (background work should stop).
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn create_table(&self, schema: &TableSchema) -> Result<TableId> {
        schema.validate()?;
        let _guard = self.catalog_lock.lock();
        let tables = self.tables();
        if let Some(t) = tables.iter().find(|t| t.schema.name == schema.name) {
            return if t.schema == *schema {
                Ok(t.id)
            } else {
                Err(Error::SchemaMismatch(schema.name.clone()))
            };
        }
        self.store.check_schema(schema)?;
        crate::registry::check_room(tables.len())?;
        let mut schemas: Vec<TableSchema> = tables.iter().map(|t| t.schema.clone()).collect();
        schemas.push(schema.clone());
        self.store.persist_catalog(&schemas)?;
        let id = TableId(tables.len() as u32);
        let mut list: Vec<_> = tables.iter().cloned().collect();
        let ext = self.store.new_table_ext(id, schema);
        let table = Arc::new(Table::new(id, schema.clone(), ext));
        self.registry.publish(id.0 as usize, &table)?;
        list.push(table);
        *self.tables.write() = Arc::new(list);
        self.tables_version.fetch_add(1, Ordering::AcqRel);
        Ok(id)
    }

    /// (O1)–(O3) of the module docs.
    fn check_core_invariants(&self) -> Result<()> {
        for t in self.tables().iter() {
            let corrupt = |what: String| Error::Corrupt(format!("table {}: {what}", t.schema.name));
            let mut rids = BTreeSet::new();
            let mut expected: Vec<BTreeSet<(Vec<u8>, u64)>> =
                t.secondary.iter().map(|_| BTreeSet::new()).collect();
            let mut row = vec![0u8; t.row_bytes];
            for (key, rid) in t.entries() {
                if !rids.insert(rid) || rid >= t.records.count() {
                    return Err(corrupt(format!("key {key}: record {rid} shared or out of range")));
                }
                let word = t.records.get(rid).tid.load(Ordering::Acquire);
                if tid::is_locked(word) {
                    return Err(corrupt(format!("key {key}: record locked in a quiescent engine")));
                }
                let locking = self.protocol.locking.is_some();
                if locking && t.records.get(rid).cc.load(Ordering::Acquire) != 0 {
                    return Err(corrupt(format!("key {key}: 2PL lock held in a quiescent engine")));
                }
                if tid::is_absent(word) || t.secondary.is_empty() {
                    continue;
                }
                S::read_row_quiescent(self, t, rid, &mut row)?;
                for (s, set) in t.secondary.iter().zip(&mut expected) {
                    set.insert((s.key_bytes(&row), key));
                }
            }
            for (i, (s, want)) in t.secondary.iter().zip(&expected).enumerate() {
                if !s.entries().into_iter().eq(want.iter().cloned()) {
                    return Err(corrupt(format!("secondary index #{i} disagrees with the rows")));
                }
            }
        }
        Ok(())
    }
}

/// A baseline engine: the OCC core over store `S`.
pub struct OccEngine<S: Store> {
    core: Arc<Core<S>>,
    background: Option<JoinHandle<()>>,
}

impl<S: Store> OccEngine<S> {
    /// Wrap a built core; starts the store's periodic work if it has any.
    pub fn from_core(core: Core<S>) -> OccEngine<S> {
        let core = Arc::new(core);
        let background = S::periodic_interval(&core.config).map(|period| {
            let weak: Weak<Core<S>> = Arc::downgrade(&core);
            std::thread::spawn(move || background_loop(weak, period))
        });
        OccEngine { core, background }
    }

    pub fn core(&self) -> &Core<S> {
        &self.core
    }

    /// A timestamp above every commit timestamp handed out or recovered so far.
    pub fn clock_now(&self) -> u64 {
        self.core.clock.now()
    }

    fn stop_background(&mut self) {
        self.core.stop.store(true, Ordering::Release);
        if let Some(handle) = self.background.take() {
            let _ = handle.join();
        }
    }

    /// Stop background work and take the core back (no worker may be alive).
    fn into_core(mut self) -> Result<Core<S>> {
        self.stop_background();
        let core = self.core.clone();
        drop(self);
        Arc::try_unwrap(core)
            .map_err(|_| Error::InvalidConfig("close: workers are still registered".into()))
    }

    /// Drop the engine without the clean shutdown, as a crash would.
    pub fn abandon_engine(self) {
        if let Ok(core) = self.into_core() {
            S::abandon(core);
        }
    }

    /// Close and hand back the core (tests inspect the pool afterwards).
    pub fn into_inner(self) -> Option<Core<S>> {
        self.into_core().ok()
    }
}

impl<S: Store> Drop for OccEngine<S> {
    fn drop(&mut self) {
        self.stop_background();
    }
}

fn background_loop<S: Store>(core: Weak<Core<S>>, period: std::time::Duration) {
    let tick = period.min(std::time::Duration::from_millis(5));
    let mut waited = std::time::Duration::ZERO;
    loop {
        std::thread::sleep(tick);
        waited += tick;
        let Some(core) = core.upgrade() else { return };
        if core.stopping() {
            return;
        }
        if waited >= period {
            waited = std::time::Duration::ZERO;
            S::periodic(&core);
        }
    }
}

impl<S: Store> Engine for OccEngine<S> {
    fn name(&self) -> &'static str {
        S::ENGINE.name()
    }

    fn cc_name(&self) -> &'static str {
        self.core.config.cc.name()
    }

    fn create_table(&self, schema: &TableSchema) -> Result<TableId> {
        self.core.create_table(schema)
    }

    fn table_id(&self, name: &str) -> Result<TableId> {
        self.core
            .tables()
            .iter()
            .find(|t| t.schema.name == name)
            .map(|t| t.id)
            .ok_or_else(|| Error::UnknownTable(name.to_string()))
    }

    fn schema(&self, table: TableId) -> Result<TableSchema> {
        self.core
            .tables()
            .get(table.0 as usize)
            .map(|t| t.schema.clone())
            .ok_or(Error::UnknownTableId(table.0))
    }

    fn worker(&self) -> Result<Box<dyn EngineWorker + '_>> {
        let mut used = self.core.workers_in_use.lock();
        let id = used.iter().position(|u| !u).ok_or(Error::TooManyWorkers { max: used.len() })?;
        used[id] = true;
        drop(used);
        Ok(Box::new(OccWorker::<S>::new(&self.core, id)))
    }

    fn pmem_counters(&self) -> CounterSnapshot {
        S::pmem_counters(&self.core)
    }

    fn status(&self) -> EngineStatus {
        let mut status = EngineStatus {
            engine: S::ENGINE.name().into(),
            cc: self.core.config.cc.name().into(),
            ..Default::default()
        };
        for t in self.core.tables().iter() {
            status.tables.push(TableStatus {
                name: t.schema.name.clone(),
                rows: t.live_rows(),
                row_bytes: t.row_bytes,
                heap_pages: 0,
                ordered_keys: t.index.len() as u64,
            });
        }
        S::status(&self.core, &mut status);
        let counters = S::engine_counters(&self.core);
        status.gc_reclaimed_slots = counters.gc_reclaimed_slots;
        status.gc_spared_slots = counters.gc_spared_slots;
        status.checkpoints = counters.checkpoints;
        status
    }

    fn counters(&self) -> crate::api::EngineCounters {
        S::engine_counters(&self.core)
    }

    fn recovery_report(&self) -> Option<RecoveryReport> {
        self.core.recovery.clone()
    }

    fn check_invariants(&self) -> Result<()> {
        self.core.check_core_invariants()?;
        S::check_invariants(&self.core)
    }

    fn close(self: Box<Self>) -> Result<()> {
        S::close(self.into_core()?)
    }

    fn abandon(self: Box<Self>) {
        self.abandon_engine();
    }
}
