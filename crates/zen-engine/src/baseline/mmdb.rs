//! `mmdb`: a main-memory database with NVM capacity (Zen §2.2, Fig. 1(a)):
//! tuples in DRAM up to the DRAM budget, the rest in NVM used as *volatile*
//! memory; durability from a per-worker redo log in NVM and checkpoints.
//!
//! WHAT LIVES WHERE
//! ```text
//!   DRAM   indexes, record words (the TID each thread synchronises on), rows
//!          placed while the budget lasts (first come, first placed)
//!   NVM    volatile   rows beyond the budget: [TID copy u64][row], written in
//!                     place, never flushed, released by recovery
//!          durable    catalog, meta page, one redo log per worker, checkpoints
//!                     (byte layouts in `mmdb/layout.rs`)
//! ```
//! A row placed in NVM keeps its CC metadata there too: every TID change of
//! such a row (lock, install, unlock after an abort) is also stored to the
//! row's NVM copy, and reads copy it with the row. Those writes are counted
//! as NVM writes (through the worker's "volatile" thread slot, see
//! `baseline::volatile_thread`), which is the cost the paper attributes to
//! MMDB: 0.75 × (1 + 1) + 1 NVM writes per tuple write at P = 4.
//!
//! COMMIT (the paper's optimised MMDB logging)
//! ```text
//!   prepare   give new keys a row (DRAM if the budget has room, else NVM);
//!             serialise the transaction's writes as ONE redo record and
//!             reserve its log pages (page allocation is the only way to fail)
//!   persist   write the record's fragments sequentially, flush them, ONE
//!             fence, then acknowledge (Marker::Ack) -- never before the fence
//!   install   rows in place (DRAM words or NVM), TIDs released
//! ```
//! Every commit is durable when it returns (`Durability::Lazy` changes
//! nothing: deferring the fence would let a dependent transaction of another
//! worker become durable before the one it read from).
//!
//! CHECKPOINTS (`mmdb/checkpoint.rs`) on demand (`MmdbEngine::checkpoint`),
//! at every clean `close`, every `checkpoint_interval_ms` in a background
//! thread (off by default, as in the paper's throughput runs), and when the
//! redo log fills the pool (a committing worker takes one before it enters
//! the commit gate: fewer than a quarter of the pages free and at least an
//! eighth of them log); each truncates the log pages it covers.
//!
//! RECOVERY (`mmdb/recovery.rs`): release every volatile page, load the last
//! checkpoint, read each worker's valid log prefix, zero what follows it,
//! replay the transactions with cts ≥ the checkpoint's ts in cts order across
//! workers, rebuild the secondary indexes. Idempotent: it changes nothing a
//! second recovery would read differently.
//!
//! WHAT IT DELIBERATELY DOES NOT DO
//!   No caching or migration between DRAM and NVM (placement is static, like
//!   the paper's design); no group commit; only `--cc silo`; commits pause
//!   during a checkpoint; deleted keys keep their row storage.
//!
//! Invariants (checked by `check_invariants`): (M1) every live record has a
//! row; no two records share one; an NVM row lies in a volatile page of its
//! table and its TID copy equals the TID; (M2) every log page is owned by its
//! worker's log in the page table; (M3) the root names the checkpoint the
//! engine believes current; (M4) no background checkpoint has failed.

pub mod checkpoint;
pub mod layout;
pub mod log;
mod recovery;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::sched::Mutex;
use serde::Serialize;
use zen_pmem::{CounterSnapshot, PageOwner, PmemBackend, Pool, SYSTEM_THREAD};

use super::occ::{
    Core, DramRows, OccEngine, Store, Table, Tables, WriteItem, WriteKind, dram_budget_bytes, tid,
};
use super::{BACKGROUND_THREAD, backend_options, volatile_thread, worker_thread};
use crate::api::{Durability, EngineStatus, TableId};
use crate::catalog::{self, CatalogDoc};
use crate::config::{BaselineFault, EngineConfig, EngineKind};
use crate::error::{AbortReason, Error, Result};
use crate::schema::TableSchema;
use crate::ts::Clock;
use checkpoint::Gate;
use layout::{CHECKPOINT_TABLE, LOG_TABLE};
use log::{Appender, RecordBuffer, WorkerLog};

/// The mmdb engine on backend `B`.
pub type MmdbEngine<B> = OccEngine<MmdbStore<B>>;

/// Location bit of a row in DRAM (`loc = DRAM_BIT | row index`); any other
/// non-zero `loc` is the NVM offset of the row's TID copy.
const DRAM_BIT: u64 = 1 << 63;

/// The store of mmdb. See the module docs.
pub struct MmdbStore<B: PmemBackend> {
    pub pool: Pool<B>,
    meta_page: u64,
    logs: Box<[Mutex<WorkerLog>]>,
    gate: Gate,
    dram_budget_bytes: u64,
    dram_used_bytes: AtomicU64,
    checkpoint: Mutex<CheckpointState>,
    background_error: Mutex<Option<String>>,
    ack_before_flush: bool,
    /// A worker is taking a checkpoint because the log fills the pool.
    pressure_checkpointing: AtomicBool,
    /// Checkpoints taken because of log pressure, and how many of them failed.
    pressure_checkpoints: AtomicU64,
    pressure_failures: AtomicU64,
}

/// The current checkpoint (what the meta page's root names).
#[derive(Debug, Clone, Default)]
pub struct CheckpointState {
    pub seq: u64,
    pub ts: u64,
    pub directory: Option<u64>,
    pub pages: Vec<u64>,
}

/// What one checkpoint did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckpointReport {
    pub seq: u64,
    /// Every transaction with a cts below this is in the checkpoint.
    pub ts: u64,
    pub rows: u64,
    pub row_bytes: u64,
    pub pages: u64,
    pub log_pages_released: u64,
    pub ms: f64,
}

/// Per-table state: the DRAM rows and the NVM pages used as volatile rows.
pub struct MmdbTable {
    pub rows: DramRows,
    volatile: Mutex<VolatileRows>,
    /// Bytes of an NVM row: TID copy + row padded to 8.
    nvm_row_bytes: u64,
}

#[derive(Default)]
struct VolatileRows {
    pages: Vec<u64>,
    next: u64,
    end: u64,
}

/// Per-worker state: its log buffer.
pub struct MmdbLocal {
    worker: usize,
    buf: RecordBuffer,
    /// Commit attempts since this worker last looked at log pressure.
    since_pressure_check: u32,
}

/// Commit attempts between two looks at log pressure (a look locks the
/// pool's free lists).
const PRESSURE_CHECK_EVERY: u32 = 64;

impl<B: PmemBackend> MmdbEngine<B> {
    /// Create a new pool per `config` and an empty engine on it.
    pub fn create(config: &EngineConfig) -> Result<Self> {
        Self::create_on(super::create_pool(config)?, config)
    }

    /// Build an empty engine on a freshly formatted pool.
    pub fn create_on(pool: Pool<B>, config: &EngineConfig) -> Result<Self> {
        super::require_no_catalog(&pool)?;
        let meta_page = pool.allocate_page(SYSTEM_THREAD, PageOwner::SYSTEM)?;
        let p = pool.persister(SYSTEM_THREAD);
        let base = pool.page_offset(meta_page);
        p.write_u64_atomic(base, layout::META_MAGIC);
        p.persist(base, 8);
        let doc = CatalogDoc { engine: "mmdb".into(), floor_page: meta_page, tables: Vec::new() };
        catalog::write(&pool, SYSTEM_THREAD, &doc)?;
        let logs = (0..config.max_workers).map(|_| WorkerLog::default()).collect();
        let budget = dram_budget_bytes(config, None);
        let store = MmdbStore::new(pool, meta_page, config, logs, budget, Default::default());
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

    /// Take a checkpoint now and truncate the logs it covers.
    pub fn checkpoint(&self) -> Result<CheckpointReport> {
        take_checkpoint(self.core())
    }

    /// Checkpoints taken because the log filled the pool: (taken, failed).
    pub fn pressure_checkpoints(&self) -> (u64, u64) {
        let store = &self.core().store;
        (
            store.pressure_checkpoints.load(Ordering::Relaxed),
            store.pressure_failures.load(Ordering::Relaxed),
        )
    }

    /// The checkpoint the engine runs on (seq 0: none yet).
    pub fn checkpoint_state(&self) -> CheckpointState {
        self.core().store.checkpoint.lock().clone()
    }

    /// Close without the clean shutdown and hand back the pool (tests).
    pub fn into_pool(self) -> Option<Pool<B>> {
        self.into_inner().map(|core| core.store.pool)
    }
}

impl<B: PmemBackend> MmdbStore<B> {
    fn new(
        pool: Pool<B>,
        meta_page: u64,
        config: &EngineConfig,
        logs: Vec<WorkerLog>,
        dram_budget_bytes: u64,
        checkpoint: CheckpointState,
    ) -> Self {
        MmdbStore {
            pool,
            meta_page,
            logs: logs.into_iter().map(Mutex::new).collect(),
            gate: Gate::new(config.max_workers),
            dram_budget_bytes,
            dram_used_bytes: AtomicU64::new(0),
            checkpoint: Mutex::new(checkpoint),
            background_error: Mutex::new(None),
            ack_before_flush: config.baseline_fault == Some(BaselineFault::WalAckBeforeFlush),
            pressure_checkpointing: AtomicBool::new(false),
            pressure_checkpoints: AtomicU64::new(0),
            pressure_failures: AtomicU64::new(0),
        }
    }

    fn appender(&self, worker: usize) -> Appender<'_, B> {
        Appender {
            pool: &self.pool,
            thread: worker_thread(worker),
            worker,
            ack_before_flush: self.ack_before_flush,
        }
    }

    /// Give record `rid` of `t` a row: DRAM while the budget lasts, else NVM.
    fn place_row(&self, t: &Table<MmdbTable>, rid: u64, thread: u32) -> Result<u64> {
        let bytes = t.row_bytes as u64;
        let loc = if self.dram_used_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes
            <= self.dram_budget_bytes
        {
            DRAM_BIT | t.ext.rows.allocate().ok_or(Error::Abort(AbortReason::OutOfSpace))?
        } else {
            self.dram_used_bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.allocate_nvm_row(t, thread)?
        };
        let r = t.records.get(rid);
        r.loc.store(loc, Ordering::Release);
        if loc & DRAM_BIT == 0 {
            let word = r.tid.load(Ordering::Acquire) & !tid::LOCK;
            self.pool.persister(thread).write_u64_atomic(loc, word);
        }
        Ok(loc)
    }

    fn allocate_nvm_row(&self, t: &Table<MmdbTable>, thread: u32) -> Result<u64> {
        let mut v = t.ext.volatile.lock();
        if v.next + t.ext.nvm_row_bytes > v.end {
            let owner = PageOwner { table: t.id.0, worker: 0 };
            let page = self.pool.allocate_page(thread, owner).map_err(|e| {
                if e.is_retryable() { Error::Abort(AbortReason::OutOfSpace) } else { e.into() }
            })?;
            v.pages.push(page);
            v.next = self.pool.page_offset(page);
            v.end = v.next + self.pool.page_size();
        }
        let at = v.next;
        v.next += t.ext.nvm_row_bytes;
        Ok(at)
    }

    /// Store row and TID of `rid` (placed) through `thread` (recovery, install).
    fn write_row(
        &self,
        t: &Table<MmdbTable>,
        rid: u64,
        thread: u32,
        row: Option<&[u8]>,
        word: u64,
    ) {
        let loc = t.records.get(rid).loc.load(Ordering::Acquire);
        if loc & DRAM_BIT != 0 {
            if let Some(row) = row {
                t.ext.rows.write(loc & !DRAM_BIT, row);
            }
        } else if loc != 0 {
            let p = self.pool.persister(thread);
            if let Some(row) = row {
                p.write(loc + 8, row);
            }
            p.write_u64_atomic(loc, word);
        }
    }

    /// Store the TID copy of an NVM row (CC metadata in NVM).
    fn mirror_tid(&self, t: &Table<MmdbTable>, rid: u64, worker: usize) {
        let r = t.records.get(rid);
        let loc = r.loc.load(Ordering::Acquire);
        if loc != 0 && loc & DRAM_BIT == 0 {
            let word = r.tid.load(Ordering::Acquire);
            self.pool.persister(volatile_thread(worker)).write_u64_atomic(loc, word);
        }
    }

    fn read_placed(&self, t: &Table<MmdbTable>, rid: u64, thread: u32, out: &mut [u8]) -> bool {
        let loc = t.records.get(rid).loc.load(Ordering::Acquire);
        if loc & DRAM_BIT != 0 {
            t.ext.rows.read(loc & !DRAM_BIT, out);
            return true;
        }
        if loc != 0 {
            self.pool.persister(thread).read(loc + 8, out);
        }
        false
    }
}

impl<B: PmemBackend> Store for MmdbStore<B> {
    type TableExt = MmdbTable;
    type Local = MmdbLocal;

    const ENGINE: EngineKind = EngineKind::Mmdb;

    fn new_table_ext(&self, _id: TableId, schema: &TableSchema) -> MmdbTable {
        MmdbTable {
            rows: DramRows::new(schema.row_size()),
            volatile: Mutex::new(VolatileRows::default()),
            nvm_row_bytes: 8 + layout::pad8(schema.row_size()) as u64,
        }
    }

    fn check_schema(&self, schema: &TableSchema) -> Result<()> {
        let page = self.pool.page_size() as usize;
        let row = layout::pad8(schema.row_size());
        let log = layout::LOG_PAGE_HEADER as usize + layout::FRAGMENT_HEADER + layout::ENTRY_HEADER;
        let ckpt = layout::CHECKPOINT_HEADER as usize + layout::CHECKPOINT_ENTRY_HEADER;
        if row + log.max(ckpt) > page {
            return Err(Error::InvalidSchema {
                table: schema.name.clone(),
                detail: format!("a {row}-byte row does not fit one {page}-byte log page"),
            });
        }
        Ok(())
    }

    fn persist_catalog(&self, schemas: &[TableSchema]) -> Result<()> {
        let doc = CatalogDoc {
            engine: "mmdb".into(),
            floor_page: self.meta_page,
            tables: schemas.to_vec(),
        };
        catalog::write(&self.pool, SYSTEM_THREAD, &doc)
    }

    fn local(_core: &Core<Self>, worker: usize) -> MmdbLocal {
        MmdbLocal { worker, buf: RecordBuffer::default(), since_pressure_check: 0 }
    }

    fn read_row(
        core: &Core<Self>,
        local: &mut MmdbLocal,
        t: &Table<MmdbTable>,
        rid: u64,
        _tid: u64,
        out: &mut [u8],
    ) -> bool {
        core.store.read_placed(t, rid, volatile_thread(local.worker), out)
    }

    fn prefetch_row(core: &Core<Self>, t: &Table<MmdbTable>, rid: u64) {
        let loc = t.records.get(rid).loc.load(Ordering::Relaxed);
        if loc & DRAM_BIT != 0 {
            if loc & !DRAM_BIT < t.ext.rows.count() {
                t.ext.rows.prefetch(loc & !DRAM_BIT);
            }
        } else if loc != 0 {
            core.store.pool.persister(BACKGROUND_THREAD).prefetch(loc + 8, t.ext.nvm_row_bytes - 8);
        }
    }

    fn read_row_quiescent(
        core: &Core<Self>,
        t: &Table<MmdbTable>,
        rid: u64,
        out: &mut [u8],
    ) -> Result<()> {
        if t.records.get(rid).loc.load(Ordering::Acquire) == 0 {
            return Err(Error::Corrupt(format!(
                "table {}: live record {rid} has no row",
                t.schema.name
            )));
        }
        core.store.read_placed(t, rid, BACKGROUND_THREAD, out);
        Ok(())
    }

    fn on_lock(core: &Core<Self>, local: &mut MmdbLocal, t: &Table<MmdbTable>, rid: u64) {
        core.store.mirror_tid(t, rid, local.worker);
    }

    fn on_unlock(core: &Core<Self>, local: &mut MmdbLocal, t: &Table<MmdbTable>, rid: u64) {
        let r = t.records.get(rid);
        let loc = r.loc.load(Ordering::Acquire);
        if loc != 0 && loc & DRAM_BIT == 0 {
            let word = r.tid.load(Ordering::Acquire) & !tid::LOCK;
            core.store.pool.persister(volatile_thread(local.worker)).write_u64_atomic(loc, word);
        }
    }

    fn enter_commit(core: &Core<Self>, local: &mut MmdbLocal) {
        local.since_pressure_check += 1;
        if local.since_pressure_check >= PRESSURE_CHECK_EVERY {
            local.since_pressure_check = 0;
            checkpoint_on_log_pressure(core);
        }
        core.store.gate.enter(local.worker);
    }

    fn prepare(
        core: &Core<Self>,
        local: &mut MmdbLocal,
        _cts: u64,
        writes: &mut [WriteItem],
        data: &[u8],
        tables: &Tables<MmdbTable>,
    ) -> Result<()> {
        let store = &core.store;
        local.buf.clear();
        for w in writes.iter() {
            let t = &tables[w.table as usize];
            if w.kind == WriteKind::Insert && t.records.get(w.rid).loc.load(Ordering::Acquire) == 0
            {
                store.place_row(t, w.rid, volatile_thread(local.worker))?;
            }
            let row = (!w.deleted()).then(|| &data[w.data_at..w.data_at + t.row_bytes]);
            local.buf.push(w.table, w.key, row);
        }
        let mut log = store.logs[local.worker].lock();
        store.appender(local.worker).reserve(&mut log, &local.buf)
    }

    fn persist(
        core: &Core<Self>,
        local: &mut MmdbLocal,
        cts: u64,
        _writes: &[WriteItem],
        _data: &[u8],
        _tables: &Tables<MmdbTable>,
    ) {
        let store = &core.store;
        let mut log = store.logs[local.worker].lock();
        store.appender(local.worker).append(&mut log, &mut local.buf, cts);
    }

    fn install_row(
        core: &Core<Self>,
        local: &mut MmdbLocal,
        t: &Table<MmdbTable>,
        w: &WriteItem,
        row: Option<&[u8]>,
        cts: u64,
    ) {
        let word = tid::make(cts, w.deleted());
        core.store.write_row(t, w.rid, volatile_thread(local.worker), row, word);
    }

    fn leave_commit(
        core: &Core<Self>,
        local: &mut MmdbLocal,
        committed: Option<u64>,
        _durability: Durability,
    ) -> bool {
        core.store.gate.leave(local.worker);
        committed.is_some()
    }

    fn sync(_core: &Core<Self>, _local: &mut MmdbLocal) -> Result<()> {
        // Every commit fenced its record before it returned.
        Ok(())
    }

    fn counters(core: &Core<Self>, local: &MmdbLocal) -> CounterSnapshot {
        let pool = &core.store.pool;
        pool.counters(worker_thread(local.worker))
            .snapshot()
            .add(&pool.counters(volatile_thread(local.worker)).snapshot())
    }

    fn pmem_counters(core: &Core<Self>) -> CounterSnapshot {
        core.store.pool.total_counters()
    }

    fn status(core: &Core<Self>, status: &mut EngineStatus) {
        let store = &core.store;
        status.free_pages = store.pool.free_page_count();
        status.page_count = store.pool.page_count();
        let row_bytes: Vec<u64> = core.tables().iter().map(|t| t.row_bytes as u64).collect();
        for (t, s) in core.tables().iter().zip(&mut status.tables) {
            s.heap_pages = t.ext.volatile.lock().pages.len() as u64;
        }
        status.cache_entries_used = core.tables().iter().map(|t| t.ext.rows.count()).sum();
        let mean = row_bytes.iter().sum::<u64>().max(1) / row_bytes.len().max(1) as u64;
        status.cache_entries_capacity = store.dram_budget_bytes / mean.max(1);
    }

    fn engine_counters(core: &Core<Self>) -> crate::api::EngineCounters {
        let store = &core.store;
        crate::api::EngineCounters {
            checkpoints: Some(crate::api::CheckpointStats {
                seq: store.checkpoint.lock().seq,
                on_log_pressure: store.pressure_checkpoints.load(Ordering::Relaxed),
                failed_on_log_pressure: store.pressure_failures.load(Ordering::Relaxed),
            }),
            ..Default::default()
        }
    }

    fn check_invariants(core: &Core<Self>) -> Result<()> {
        check_rows(core)?;
        check_logs_and_checkpoint(core)?;
        if let Some(e) = core.store.background_error.lock().clone() {
            return Err(Error::Corrupt(format!("background checkpoint failed: {e}")));
        }
        Ok(())
    }

    fn periodic_interval(config: &EngineConfig) -> Option<std::time::Duration> {
        config.checkpoint_interval_ms.map(std::time::Duration::from_millis)
    }

    fn periodic(core: &Core<Self>) {
        if let Err(e) = take_checkpoint(core) {
            *core.store.background_error.lock() = Some(e.to_string());
        }
    }

    /// A clean shutdown takes a checkpoint, so the next open loads it and
    /// replays nothing (and a benchmark's run starts from a checkpoint, as
    /// the paper's recovery experiment assumes).
    fn close(core: Core<Self>) -> Result<()> {
        take_checkpoint(&core)?;
        Ok(core.store.pool.close()?)
    }

    fn abandon(core: Core<Self>) {
        core.store.pool.abandon();
    }
}

/// (M1) of the module docs.
fn check_rows<B: PmemBackend>(core: &Core<MmdbStore<B>>) -> Result<()> {
    let store = &core.store;
    let mut used = HashSet::new();
    for t in core.tables().iter() {
        let pages: HashSet<u64> = t.ext.volatile.lock().pages.iter().copied().collect();
        for (key, rid) in t.entries() {
            let r = t.records.get(rid);
            let word = r.tid.load(Ordering::Acquire);
            let loc = r.loc.load(Ordering::Acquire);
            let corrupt = |what: &str| {
                Error::Corrupt(format!("table {}: key {key}: {what} (loc {loc:#x})", t.schema.name))
            };
            if loc == 0 {
                if tid::is_absent(word) {
                    continue;
                }
                return Err(corrupt("live record without a row"));
            }
            if !used.insert((t.id.0, loc)) {
                return Err(corrupt("row shared by two records"));
            }
            if loc & DRAM_BIT != 0 {
                if loc & !DRAM_BIT >= t.ext.rows.count() {
                    return Err(corrupt("DRAM row out of range"));
                }
                continue;
            }
            if !pages.contains(&(loc / store.pool.page_size())) {
                return Err(corrupt("NVM row outside the table's volatile pages"));
            }
            if store.pool.backend().load_u64(loc) != word {
                return Err(corrupt("NVM TID copy differs from the TID"));
            }
        }
    }
    Ok(())
}

/// (M2) and (M3) of the module docs.
fn check_logs_and_checkpoint<B: PmemBackend>(core: &Core<MmdbStore<B>>) -> Result<()> {
    let store = &core.store;
    for (w, log) in store.logs.iter().enumerate() {
        let log = log.lock();
        let owner = PageOwner { table: LOG_TABLE, worker: w as u16 };
        for p in &log.pages {
            if store.pool.page_owner(p.page)? != Some(owner) {
                return Err(Error::Corrupt(format!("log page {} of worker {w} not owned", p.page)));
            }
        }
        if !log.pages.is_empty() && log.tail_page >= log.pages.len() {
            return Err(Error::Corrupt(format!("log of worker {w}: tail past its pages")));
        }
    }
    let state = store.checkpoint.lock();
    let root = store.pool.backend().load_u64(store.pool.page_offset(store.meta_page) + 8);
    if layout::decode_root(root) != Ok(state.directory) {
        return Err(Error::Corrupt(format!(
            "checkpoint root {root:#x} is not the current checkpoint {:?}",
            state.directory
        )));
    }
    let data_owner = PageOwner { table: CHECKPOINT_TABLE, worker: layout::CHECKPOINT_DATA_WORKER };
    for &page in &state.pages {
        if store.pool.page_owner(page)? != Some(data_owner) {
            return Err(Error::Corrupt(format!("checkpoint page {page} not owned")));
        }
    }
    Ok(())
}

/// A checkpoint taken by a committing worker (outside the commit gate, so
/// the gate's close does not wait for it) when the redo log fills the pool:
/// fewer than a quarter of the pages free, and the log holds at least an
/// eighth of them (so that truncation has something to release; a pool full
/// of rows is not helped by checkpoints). Without it a throughput run on a
/// 1 GiB pool ran out of log space in under 3 s. One worker at a time; the
/// others go on (and abort with `OutOfSpace`, retryable, if the pool is
/// exhausted before the truncation).
fn checkpoint_on_log_pressure<B: PmemBackend>(core: &Core<MmdbStore<B>>) {
    let store = &core.store;
    let total = store.pool.page_count();
    if store.pool.free_page_count() * 4 >= total {
        return;
    }
    let log_pages: u64 = store.logs.iter().map(|l| l.lock().pages.len() as u64).sum();
    if log_pages * 8 < total {
        return;
    }
    if store
        .pressure_checkpointing
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    let counter = match take_checkpoint(core) {
        Ok(_) => &store.pressure_checkpoints,
        Err(_) => &store.pressure_failures,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    store.pressure_checkpointing.store(false, Ordering::Release);
}

/// The checkpoint protocol of `mmdb/checkpoint.rs`.
fn take_checkpoint<B: PmemBackend>(core: &Core<MmdbStore<B>>) -> Result<CheckpointReport> {
    let store = &core.store;
    let started = Instant::now();
    let mut state = store.checkpoint.lock();
    let seq = state.seq + 1;
    let thread = BACKGROUND_THREAD;
    store.gate.close();
    let ts = core.clock.now();
    let mut writer = checkpoint::Writer::new(&store.pool, thread, seq);
    let copied = copy_live_rows(core, &mut writer);
    let (rows, row_bytes) = (writer.rows, writer.row_bytes);
    let finished = match copied {
        Ok(()) => writer.finish(ts),
        Err(e) => {
            writer.abort();
            Err(e)
        }
    };
    let (directory, pages) = match finished {
        Ok(done) => done,
        Err(e) => {
            store.gate.open();
            return Err(e);
        }
    };
    let p = store.pool.persister(thread);
    let root_at = store.pool.page_offset(store.meta_page) + layout::OFF_CHECKPOINT_ROOT;
    p.write_u64_atomic(root_at, layout::encode_root(Some(directory)));
    p.persist(root_at, 8);
    store.gate.open();
    let old = std::mem::replace(
        &mut *state,
        CheckpointState { seq, ts, directory: Some(directory), pages: pages.clone() },
    );
    release_checkpoint(&store.pool, thread, &old)?;
    let mut released = 0;
    for (w, log) in store.logs.iter().enumerate() {
        released += log.lock().truncate(&store.pool, thread, w, ts)?;
    }
    Ok(CheckpointReport {
        seq,
        ts,
        rows,
        row_bytes,
        pages: pages.len() as u64 + 1,
        log_pages_released: released,
        ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

fn copy_live_rows<B: PmemBackend>(
    core: &Core<MmdbStore<B>>,
    writer: &mut checkpoint::Writer<'_, B>,
) -> Result<()> {
    for t in core.tables().iter() {
        let mut row = vec![0u8; t.row_bytes];
        for (key, rid) in t.entries() {
            if tid::is_absent(t.records.get(rid).tid.load(Ordering::Acquire)) {
                continue;
            }
            MmdbStore::read_row_quiescent(core, t, rid, &mut row)?;
            writer.push(checkpoint::Row { table: t.id.0, key, row: &row })?;
        }
    }
    Ok(())
}

/// Release the pages of a superseded checkpoint (its root is gone).
fn release_checkpoint<B: PmemBackend>(
    pool: &Pool<B>,
    thread: u32,
    old: &CheckpointState,
) -> Result<()> {
    let data = PageOwner { table: CHECKPOINT_TABLE, worker: layout::CHECKPOINT_DATA_WORKER };
    for &page in &old.pages {
        pool.release_page(thread, page, data)?;
    }
    if let Some(dir) = old.directory {
        let owner = PageOwner { table: CHECKPOINT_TABLE, worker: layout::CHECKPOINT_DIR_WORKER };
        pool.release_page(thread, dir, owner)?;
    }
    Ok(())
}
