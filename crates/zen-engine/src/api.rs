//! The `Engine` seam: what workloads, tests and the CLI see of any engine.
//!
//! The traits are object safe so that workload code is compiled once and runs
//! on every engine (`&mut dyn Transaction`); the engines themselves are generic
//! over their backend and protocol inside, so the hot paths are monomorphised.
//!
//! One transaction attempt is `EngineWorker::execute(opts, body)`: begin, run
//! the body, commit; an error from the body or from commit aborts (nothing is
//! written to NVM by an abort). `run` retries retryable aborts a bounded number
//! of times.

use std::ops::RangeInclusive;

use serde::Serialize;
use zen_pmem::CounterSnapshot;

use crate::error::{AbortReason, Error, Result};
use crate::schema::TableSchema;

/// Identifies a table of an engine (index into its catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TableId(pub u32);

/// When `commit` returns relative to durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// A second fence after the LP flush: `commit` returns only once durable.
    #[default]
    Immediate,
    /// The paper's mode: one fence per transaction; the commit becomes durable
    /// at the worker's next fence (its next commit or `sync`).
    Lazy,
}

impl Durability {
    pub fn name(self) -> &'static str {
        match self {
            Durability::Immediate => "immediate",
            Durability::Lazy => "lazy",
        }
    }
    pub fn parse(s: &str) -> Option<Durability> {
        match s {
            "immediate" => Some(Durability::Immediate),
            "lazy" => Some(Durability::Lazy),
            _ => None,
        }
    }
}

/// Per-transaction options.
#[derive(Debug, Clone, Copy, Default)]
pub struct TxnOptions {
    /// Declared read-only: may run on a snapshot and never writes.
    pub read_only: bool,
    /// Overrides the engine's default durability.
    pub durability: Option<Durability>,
}

impl TxnOptions {
    pub fn read_only() -> Self {
        TxnOptions { read_only: true, durability: None }
    }
}

/// What a successful commit reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CommitInfo {
    /// The commit timestamp (Tx-CTS), 0 for a read-only transaction.
    pub cts: u64,
    /// True when the commit is durable as `commit` returns.
    pub durable: bool,
    /// Number of tuples written (inserted, updated, deleted).
    pub writes: u32,
}

/// One running transaction.
pub trait Transaction {
    /// Copy the row of `key` into `out`; `Ok(false)` when absent.
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool>;
    /// As `get`, declaring the intent to update (2PL takes the write lock now).
    fn get_for_update(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool>;
    /// Insert a new row; `DuplicateKey` when the key exists.
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()>;
    /// Replace the row of `key`; `KeyNotFound` when absent.
    fn update(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()>;
    /// Delete the row of `key`; `KeyNotFound` when absent.
    fn delete(&mut self, table: TableId, key: u64) -> Result<()>;
    /// Visit rows with keys in `range` in key order, at most `limit`; `f` returns
    /// false to stop. Returns the number of rows visited.
    fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize>;
    /// Primary keys whose secondary-index key (`index`-th index) starts with
    /// `prefix`, in index order, at most `limit`.
    fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()>;
    /// A hint that the transaction will soon read the rows of `keys` in
    /// `table`: an engine may start loading what those reads will touch
    /// (index lines, record words, rows), stage by stage over all the keys,
    /// so that the cache misses of independent reads overlap instead of
    /// following one another. No effect on the transaction's result, its
    /// read set or its isolation; never fails (unknown tables and keys are
    /// ignored). The default does nothing.
    fn prefetch(&mut self, _table: TableId, _keys: &[u64]) {}
}

/// Counters of a worker's Met-Cache (or of an engine's equivalent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

impl CacheStats {
    pub fn add(&self, o: &CacheStats) -> CacheStats {
        CacheStats {
            hits: self.hits + o.hits,
            misses: self.misses + o.misses,
            evictions: self.evictions + o.evictions,
        }
    }
    pub fn hit_ratio(&self) -> f64 {
        let total = self.hits + self.misses;
        if total == 0 { 1.0 } else { self.hits as f64 / total as f64 }
    }
}

/// A thread registered with an engine. One per thread; not shared.
pub trait EngineWorker: Send {
    /// The worker's id (0-based, dense).
    fn id(&self) -> usize;
    /// One attempt: begin, `body`, commit. Any error aborts the attempt.
    fn execute(
        &mut self,
        opts: &TxnOptions,
        body: &mut dyn FnMut(&mut dyn Transaction) -> Result<()>,
    ) -> Result<CommitInfo>;
    /// Make every commit of this worker durable (one fence).
    fn sync(&mut self) -> Result<()>;
    /// Explicit transactions (see [`Txn`]): begin one. Engines that only
    /// offer `execute` return `Unsupported`.
    fn begin_txn(&mut self, _opts: &TxnOptions) -> Result<()> {
        Err(Error::Unsupported("explicit transactions: use execute/run".into()))
    }
    /// The transaction opened by `begin_txn`.
    fn current_txn(&mut self) -> Option<&mut dyn Transaction> {
        None
    }
    /// Commit the transaction opened by `begin_txn` (an error aborts it).
    fn commit_txn(&mut self) -> Result<CommitInfo> {
        Err(Error::Unsupported("explicit transactions: use execute/run".into()))
    }
    /// Abort the transaction opened by `begin_txn` (nothing reaches NVM).
    fn abort_txn(&mut self) {}
    /// This worker's NVM counters.
    fn counters(&self) -> CounterSnapshot;
    /// This worker's cache counters.
    fn cache_stats(&self) -> CacheStats;
}

/// An explicit transaction: `worker.begin(opts)`, then the [`Transaction`]
/// operations on it, then `commit()` or `abort()`; dropping it without
/// committing aborts it.
pub struct Txn<'w, 'e> {
    worker: &'w mut (dyn EngineWorker + 'e),
    open: bool,
}

impl<'w, 'e> Txn<'w, 'e> {
    pub fn commit(mut self) -> Result<CommitInfo> {
        self.open = false;
        self.worker.commit_txn()
    }

    pub fn abort(mut self) {
        self.open = false;
        self.worker.abort_txn();
    }
}

impl Txn<'_, '_> {
    fn inner(&mut self) -> &mut dyn Transaction {
        self.worker.current_txn().expect("a Txn exists only while its transaction is open")
    }
}

impl Transaction for Txn<'_, '_> {
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.inner().get(table, key, out)
    }
    fn get_for_update(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.inner().get_for_update(table, key, out)
    }
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.inner().insert(table, key, row)
    }
    fn update(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.inner().update(table, key, row)
    }
    fn delete(&mut self, table: TableId, key: u64) -> Result<()> {
        self.inner().delete(table, key)
    }
    fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        self.inner().scan(table, range, limit, f)
    }
    fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        self.inner().lookup_secondary(table, index, prefix, limit, out)
    }
    fn prefetch(&mut self, table: TableId, keys: &[u64]) {
        self.inner().prefetch(table, keys)
    }
}

impl Drop for Txn<'_, '_> {
    fn drop(&mut self) {
        if self.open {
            self.worker.abort_txn();
        }
    }
}

/// Attempts `run` makes before it may give up on retryable aborts.
pub const MAX_ATTEMPTS: u32 = 1000;

/// How long `run` keeps retrying once past [`MAX_ATTEMPTS`]: a count alone
/// gave up after half a second of back-off while an older transaction's
/// thread was descheduled on a loaded machine (wait-die kills the younger
/// one at every attempt until the older commits), which is no reason to fail.
pub const RETRY_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Whether a request that has made `attempts` attempts since `started` has
/// retried long enough to give up: at least `max_attempts` attempts and
/// [`RETRY_PATIENCE`] (both bounds are past).
pub fn retries_exhausted(attempts: u32, max_attempts: u32, started: std::time::Instant) -> bool {
    attempts >= max_attempts && started.elapsed() >= RETRY_PATIENCE
}

impl<'e> dyn EngineWorker + 'e {
    /// Begin an explicit transaction (drop = abort).
    pub fn begin(&mut self, opts: &TxnOptions) -> Result<Txn<'_, 'e>> {
        self.begin_txn(opts)?;
        Ok(Txn { worker: self, open: true })
    }

    /// Run `body` as a transaction, retrying retryable aborts with a short
    /// growing back-off until at least [`MAX_ATTEMPTS`] attempts and
    /// [`RETRY_PATIENCE`] have passed. Returns the body's value from the
    /// attempt that committed.
    pub fn run<R>(
        &mut self,
        opts: &TxnOptions,
        mut body: impl FnMut(&mut dyn Transaction) -> Result<R>,
    ) -> Result<R> {
        let started = std::time::Instant::now();
        let mut attempt = 0u32;
        loop {
            let mut value = None;
            let result = self.execute(opts, &mut |tx| {
                value = Some(body(tx)?);
                Ok(())
            });
            match result {
                Ok(_) => return Ok(value.expect("a committed body produced a value")),
                Err(e)
                    if e.is_retryable()
                        && !retries_exhausted(attempt + 1, MAX_ATTEMPTS, started) =>
                {
                    attempt += 1;
                    backoff(attempt);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Back-off before retry `attempt`: spin briefly at first, then yield, then
/// sleep `attempt` µs up to 1 ms, so that conflicting transactions stop
/// colliding and a preempted lock holder gets a core back (1,000 attempts
/// span about half a second).
pub fn backoff(attempt: u32) {
    if crate::sched::point() {
        return;
    }
    if attempt < 4 {
        for _ in 0..(64u32 << attempt) {
            std::hint::spin_loop();
        }
    } else if attempt < 16 {
        std::thread::yield_now();
    } else {
        let micros = u64::from(attempt.min(1000));
        std::thread::sleep(std::time::Duration::from_micros(micros));
    }
}

/// How an engine was recovered, phase by phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryReport {
    pub threads: usize,
    pub pages_scanned: u64,
    pub slots_scanned: u64,
    /// What the scan covered, per engine: Zen, the heap bytes (pages ×
    /// page size); nvcaracal, exactly the bytes its load-log and scan
    /// phases read from the pool's data (meta page words, the crashed
    /// epoch's input log, every slot's epoch words, kept versions' flags
    /// and value offsets, live keys, rows of indexed tables).
    pub bytes_scanned: u64,
    /// Bytes recovery read from NVM (Zen: page and slot headers, and the
    /// rows of tables with secondary indexes).
    pub nvm_bytes_read: u64,
    pub tuples_recovered: u64,
    pub uncommitted_discarded: u64,
    pub superseded_discarded: u64,
    /// Most versions waiting in one thread's pending list (Zen, Alg. 2).
    pub pending_peak: u64,
    /// Peak DRAM recovery held besides what it rebuilt (indexes, free lists).
    pub scratch_bytes_peak: u64,
    pub scan_ms: f64,
    pub index_ms: f64,
    /// Writes that make the pool consistent (Zen: floors, losers, tombstones).
    pub clean_ms: f64,
    pub free_list_ms: f64,
    pub total_ms: f64,
    /// Each phase with its throughput (Zen; empty for the baselines).
    pub phases: Vec<RecoveryPhase>,
}

/// One phase of a recovery: what it covered and how fast.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RecoveryPhase {
    pub name: String,
    pub ms: f64,
    /// Bytes the phase covered (heap bytes, or NVM bytes written by `clean`).
    pub bytes: u64,
    /// Tuple versions it handled.
    pub tuples: u64,
    pub bytes_per_s: f64,
    pub tuples_per_s: f64,
}

impl RecoveryPhase {
    pub fn new(name: &str, ms: f64, bytes: u64, tuples: u64) -> RecoveryPhase {
        let per_s = |n: u64| if ms > 0.0 { n as f64 * 1e3 / ms } else { 0.0 };
        RecoveryPhase {
            name: name.into(),
            ms,
            bytes,
            tuples,
            bytes_per_s: per_s(bytes),
            tuples_per_s: per_s(tuples),
        }
    }
}

/// A snapshot of engine-wide state for reports and `zen check`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EngineStatus {
    pub engine: String,
    pub cc: String,
    pub tables: Vec<TableStatus>,
    pub free_pages: u64,
    pub page_count: u64,
    pub gc_reclaimed_slots: u64,
    /// Zen: superseded slots kept as their record's spare instead of being
    /// zeroed and freed (S7 of `zen/space.rs`), each rewritten by the
    /// record's next update; they count in `gc_reclaimed_slots` too.
    pub gc_spared_slots: u64,
    /// Met-Cache entries holding a record now.
    pub cache_entries_used: u64,
    /// Entries the DRAM budget allows in use (for Zen: every table's share
    /// times the workers registered now).
    pub cache_entries_capacity: u64,
    /// Zen+ adaptive execution counters, when it is on (`zen::adaptive`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<crate::zen::adaptive::AdaptiveStats>,
    /// Checkpoints of engines that take them (mmdb).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<CheckpointStats>,
}

/// Counters an engine keeps as it runs, read with a few atomic loads and no
/// walk over its data: what a benchmark reads at the edges of its measured
/// interval ([`Engine::counters`]). [`EngineStatus`] repeats them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EngineCounters {
    /// Superseded or deleted versions' slots reclaimed so far.
    pub gc_reclaimed_slots: u64,
    /// Zen: of those, the slots kept as their record's spare (S7).
    pub gc_spared_slots: u64,
    /// Checkpoints of engines that take them (mmdb).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<CheckpointStats>,
}

/// Checkpoints of an engine that takes them (mmdb).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CheckpointStats {
    /// Sequence number of the current checkpoint (0: none yet).
    pub seq: u64,
    /// Checkpoints taken by this process because the log filled the pool.
    pub on_log_pressure: u64,
    /// Of those, the ones that failed (e.g. no room left for the copy).
    pub failed_on_log_pressure: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TableStatus {
    pub name: String,
    pub rows: u64,
    pub row_bytes: usize,
    pub heap_pages: u64,
    /// Keys in the ordered index, which scans walk: the live rows, plus
    /// deleted keys a multi-version protocol's snapshots may still read and
    /// keys of aborted inserts.
    pub ordered_keys: u64,
}

/// An engine: tables, workers, counters, lifecycle.
pub trait Engine: Send + Sync {
    /// The design, e.g. `zen`.
    fn name(&self) -> &'static str;
    /// The concurrency-control protocol, e.g. `silo`.
    fn cc_name(&self) -> &'static str;
    /// Create a table, or return the existing one if its schema is identical
    /// (`SchemaMismatch` otherwise).
    fn create_table(&self, schema: &TableSchema) -> Result<TableId>;
    fn table_id(&self, name: &str) -> Result<TableId>;
    fn schema(&self, table: TableId) -> Result<TableSchema>;
    /// Register a worker (one thread uses it at a time; it may be handed to
    /// another thread). It takes the lowest free worker id, so workers
    /// registered one after another on an engine with none get 0, 1, …
    /// (the benchmark driver and `Loader`s rely on it to pair thread `i`
    /// with worker `i`).
    fn worker(&self) -> Result<Box<dyn EngineWorker + '_>>;
    /// Sum of every worker's NVM counters.
    fn pmem_counters(&self) -> CounterSnapshot;
    /// State for reports and `zen check`: counts every table's live rows,
    /// a walk over the data (O(rows)); a running benchmark reads
    /// [`Engine::counters`] instead.
    fn status(&self) -> EngineStatus;
    /// The running counters, cheaply (no walk over the data). The default,
    /// all zero, is for engines that reclaim nothing and take no
    /// checkpoints.
    fn counters(&self) -> EngineCounters {
        EngineCounters::default()
    }
    /// Re-plan DRAM cache shares across tables from the accesses measured so
    /// far (Zen's greedy f_i/S_i rule); engines without a cache ignore it.
    fn rebalance_cache(&self) {}
    /// The Zen+ NUMA runtime when NUMA is active (more than one node).
    fn numa(&self) -> Option<&crate::numa::Numa> {
        None
    }
    /// NUMA placement and local/remote access counts when NUMA is active.
    fn numa_stats(&self) -> Option<crate::numa::NumaStats> {
        None
    }
    /// Zen+ adaptive-execution counters (cheap; `None` where it is off or
    /// the engine has none).
    fn adaptive_stats(&self) -> Option<crate::zen::adaptive::AdaptiveStats> {
        None
    }
    /// The deterministic seam (`det.rs`) of engines that run one-shot
    /// transactions in epochs (nvcaracal); `None` for the others.
    fn deterministic(&self) -> Option<&dyn crate::det::DeterministicEngine> {
        None
    }
    /// The report of the recovery that opened this engine, if it recovered.
    fn recovery_report(&self) -> Option<RecoveryReport>;
    /// Check structural invariants (index ↔ heap, no duplicate keys, free
    /// slots disjoint from live ones); `Err(Corrupt)` names the first violation.
    fn check_invariants(&self) -> Result<()>;
    /// Make every commit durable and close cleanly.
    fn close(self: Box<Self>) -> Result<()>;
    /// Drop the engine without the clean shutdown, as a crash would (tests;
    /// lazily committed transactions that were never fenced may be lost).
    fn abandon(self: Box<Self>);
}

/// Convenience for a body that wants to abort on purpose (e.g. TPC-C's 1%).
pub fn user_abort() -> Error {
    Error::Abort(AbortReason::User)
}
