//! `nvcaracal`: a deterministic database on NVM (NVCaracal, Wu et al.,
//! EuroSys '23), behind the deterministic seam (`crate::det`) and, for
//! interactive callers, the `Engine` trait.
//!
//! WHAT LIVES WHERE
//! ```text
//!   DRAM   per table an ordered index key → (slot, newest version, its
//!          epoch), its secondary indexes (over the committed rows; rebuilt
//!          from the rows by recovery) and the slot allocator (free list +
//!          bump over pages), the value pool's allocator (free list + bump
//!          over value pages; rebuilt from the slots by recovery); during
//!          an epoch the version arrays (transient versions)
//!   NVM    catalog; meta page (durable epoch, log seal, persistent row
//!          size R, log pages); the input log; per row ONE dual-version
//!          slot of R bytes (`nvcaracal/layout.rs`), whose versions hold
//!          the row inline or, when it does not fit the inline heap, the
//!          offset of a value in the table's persistent value pool
//! ```
//!
//! AN EPOCH (`run_epoch`; one at a time, under the sequencer lock)
//! ```text
//!   log       the epoch's inputs (procedure, declared writes, input bytes)
//!             written to the log pages, flushed, ONE fence; then the seal
//!             word = e, persisted (the inputs are durable before anything
//!             of the epoch runs)
//!   init      the major collector: the stale version of every slot the
//!             last epoch wrote in a pooled table (with minor GC off, in
//!             every table) is deleted (epoch word zeroed, flushed; one
//!             fence per thread), then the deleted versions' values are
//!             free (the paper's non-revertible GC frees); cached versions
//!             unused in K epochs evicted; then
//!             N threads (txn i on thread i mod N): for every declared
//!             write a pending version in the row's version array, sorted
//!             by serial id (created with the row's committed state as its
//!             base); batch append and split-on-demand as configured
//!             (`nvcaracal/versions.rs`)
//!   execute   N threads; transaction i on thread i mod N, each thread in
//!             serial order. A read takes the newest version with a smaller
//!             serial id, waiting while it is pending (the smallest pending
//!             transaction never waits, so no deadlock and no abort); writes
//!             are buffered and published at the end of the transaction
//!             (written, or ignore when the procedure failed or did not
//!             write a declared key)
//!   persist   per row written, its final version only, into the older of
//!             the slot's two versions (epoch word e): an empty one, or a
//!             stale one, deleted by this write (the minor collector,
//!             NVCaracal §4.4, on by default); each thread fences
//!   mark      the durable epoch word = e, persisted; then the index is
//!             updated, deleted slots return to the free list, the cached
//!             versions take the updated rows (and drop deleted ones), the
//!             version arrays are dropped, and the results are returned
//! ```
//! RECOVERY (`nvcaracal/recovery.rs`): E = durable epoch, S = seal. The
//! log is validated first when S = E + 1 (a corrupt one is a typed error
//! with the pool unchanged); every slot is scanned, versions newer than E
//! are reverted (epoch word zeroed, persisted), the index and free lists
//! rebuilt; then epoch E + 1 is replayed from its logged inputs.
//!
//! The `Engine` adapter (`NvWorker::execute`): the body runs at submission
//! against the committed state (one transaction at a time, under the
//! sequencer lock), its writes become the input of the built-in APPLY
//! procedure, and that one-transaction epoch runs as above. So interactive
//! workloads and the crash harness drive the same log/persist/mark path;
//! the batch path is `DeterministicEngine::submit_epoch`.
//!
//! A read of a committed row (not written earlier in the epoch) takes its
//! cached version (NVCaracal §4.2; `nvcaracal/cache.rs`) or reads NVM and
//! caches it.
//!
//! WHAT IT DOES NOT DO (`docs/design/nvcaracal.md`): the value pool's
//! free list is not persisted (recovery computes it from the slots).
//! Secondary indexes are DRAM only and describe the last
//! durable epoch: procedures cannot use them inside an epoch; a workload
//! reads them (and scans) as reconnaissance before it submits the epoch
//! (`zen_workload::oneshot::tpcc`).
//!
//! A batch whose transient versions may exceed the DRAM budget
//! (`EngineConfig::nvcaracal_dram_budget_bytes`), or whose inputs do not
//! fit the input log, runs as consecutive epochs (`run_locked`).

mod cache;
pub mod layout;
mod recovery;
mod versions;

pub use cache::{CacheCounters, ENTRY_OVERHEAD as CACHE_ENTRY_OVERHEAD};
pub use versions::SPLIT_THRESHOLD;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use zen_pmem::{CounterSnapshot, Marker, PageOwner, PmemBackend, Pool, SYSTEM_THREAD};

use super::{backend_options, worker_thread};
use crate::api::{
    CacheStats, CommitInfo, Engine, EngineStatus, EngineWorker, RecoveryReport, TableId,
    TableStatus, Transaction, TxnOptions,
};
use crate::catalog::{self, CatalogDoc};
use crate::config::{BaselineFault, EngineConfig};
use crate::det::{
    DeterministicEngine, EpochOutcome, EpochPhase, EpochStats, OneShot, OneShotTx, ProcId,
    ProcedureSet,
};
use crate::error::{Error, Result};
use crate::index::{SecondaryIndex, maintain_secondary};
use crate::sched::{Mutex, RwLock};
use crate::schema::{MAX_KEY, TableSchema};
use versions::{Epoch, IGNORE, Key, WRITTEN};

/// Where a committed row lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowRef {
    pub slot: u64,
    /// The version (0 or 1) holding the row.
    pub newest: u8,
    /// That version's epoch.
    pub epoch: u64,
}

/// Slot (or value) allocator of a table: free slots (with the older
/// version of each) and a bump pointer over the table's last page.
#[derive(Debug, Default)]
struct Alloc {
    free: Vec<u64>,
    pages: Vec<u64>,
    next: u64,
    end: u64,
}

/// A table: schema, index, secondary indexes, allocator.
pub struct Table {
    pub schema: TableSchema,
    pub id: u32,
    pub row: usize,
    pub slot_size: u64,
    /// The slot format: inline versions, or offsets into the value pool.
    pub lay: layout::SlotLayout,
    index: RwLock<BTreeMap<u64, RowRef>>,
    /// DRAM only, over the committed rows (the last durable epoch):
    /// maintained when an epoch's changes are applied, rebuilt from the rows
    /// by recovery's scan. Read by reconnaissance reads (the `Engine`
    /// adapter's `lookup_secondary`), never inside an epoch.
    secondary: Vec<SecondaryIndex>,
    alloc: Mutex<Alloc>,
    /// The persistent value pool (pooled tables; NVCaracal §5.5): free
    /// values and a bump pointer over the table's value pages. A value
    /// freed by the major collector is free at once (that deletion is
    /// persisted before the execution phase); the free list is rebuilt from
    /// the slots by recovery (a value is live iff a version <= E names it).
    values: Mutex<Alloc>,
}

impl Table {
    fn new(schema: TableSchema, id: u32, row_bytes: u64) -> Table {
        let row = schema.row_size();
        let lay = layout::SlotLayout::new(row, row_bytes);
        let secondary = (0..schema.secondary.len())
            .map(|i| SecondaryIndex::new(schema.secondary_layout(i).expect("validated schema")))
            .collect();
        Table {
            schema,
            id,
            row,
            slot_size: lay.size,
            lay,
            index: RwLock::new(BTreeMap::new()),
            secondary,
            alloc: Mutex::new(Alloc::default()),
            values: Mutex::new(Alloc::default()),
        }
    }

    /// Offset of version `v` within a slot.
    fn version_offset(&self, v: usize) -> u64 {
        self.lay.version_offset(v)
    }

    fn check_key(&self, key: u64) -> Result<()> {
        if key > MAX_KEY {
            return Err(Error::KeyOutOfRange { table: self.schema.name.clone(), key });
        }
        Ok(())
    }

    fn check_row(&self, len: usize) -> Result<()> {
        if len != self.row {
            return Err(Error::WrongTupleSize {
                table: self.schema.name.clone(),
                expected: self.row,
                actual: len,
            });
        }
        Ok(())
    }
}

/// The nvcaracal engine on backend `B`. See the module docs.
pub struct NvcaracalEngine<B: PmemBackend> {
    pool: Pool<B>,
    meta_page: u64,
    log_pages: Vec<u64>,
    tables: RwLock<Vec<Arc<Table>>>,
    /// One epoch (or catalog change) at a time.
    seq: Mutex<()>,
    durable: AtomicU64,
    procedures: Arc<ProcedureSet>,
    config: EngineConfig,
    workers_in_use: Mutex<Vec<bool>>,
    recovery: Option<RecoveryReport>,
    fault: Option<BaselineFault>,
    /// Cached versions of committed rows (DRAM only; `nvcaracal/cache.rs`).
    cache: cache::RowCache,
    /// Minor GC off: the slots (table, slot) whose stale version the major
    /// collector deletes in the next epoch's init phase: every slot the
    /// last epoch wrote, or, after recovery, every slot the scan found with
    /// two versions (DRAM only; rebuilt by the scan).
    gc_pending: Mutex<Vec<(u32, u64)>>,
    /// Bytes of a persistent row (the pool's, from its meta page).
    row_bytes: u64,
}

/// A table's persistent value pool, counted from the slots
/// (`NvcaracalEngine::value_pool`): values on its value pages, free
/// (the allocator's free list and its bump remainder) and live (named by
/// a version of epoch <= E, stale versions included).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ValuePool {
    pub table: u32,
    pub capacity: u64,
    pub free: u64,
    pub live: u64,
}

/// The free values of pooled table `t`, whose value pages are `pages`,
/// given every value a version <= E names (`named`, sorted here): each must
/// be a value on those pages, named once (else `Corrupt`, a typed error);
/// the free ones are the rest, in page order.
fn value_pool_free<B: PmemBackend>(
    pool: &Pool<B>,
    t: &Table,
    pages: &[u64],
    named: &mut [u64],
) -> Result<Vec<u64>> {
    let size = t.lay.value_size;
    let per_page = pool.page_size() / size;
    named.sort_unstable();
    for w in named.windows(2) {
        if w[0] == w[1] {
            return Err(Error::Corrupt(format!(
                "table {}: value at {} is named by two versions",
                t.schema.name, w[0]
            )));
        }
    }
    for &v in named.iter() {
        let page = v.checked_sub(pool.page_offset(0)).map(|o| o / pool.page_size());
        let ok = page.is_some_and(|p| {
            pages.binary_search(&p).is_ok() && {
                let off = v - pool.page_offset(p);
                off.is_multiple_of(size) && off / size < per_page
            }
        });
        if !ok {
            return Err(Error::Corrupt(format!(
                "table {}: a version names value offset {v}, which is not a value of the table's value pool",
                t.schema.name
            )));
        }
    }
    let mut free = Vec::new();
    for &p in pages {
        let start = pool.page_offset(p);
        free.extend(
            (0..per_page).map(|i| start + i * size).filter(|v| named.binary_search(v).is_err()),
        );
    }
    // Popped from the end: the lowest offsets first.
    free.reverse();
    Ok(free)
}

/// A transaction of the epoch, validated.
struct Prepared<'a> {
    proc: ProcId,
    input: &'a [u8],
    /// Declared writes, deduplicated.
    writes: Vec<Key>,
}

/// A transaction's serial id, result and waits, from an execution thread.
type Ran = (usize, Result<Vec<u8>>, u64);

/// `f(w)` for workers `0..n`, results in worker order: inline when `n == 1`,
/// else each on a scoped thread of its own (every parallel phase of an
/// epoch: init, execution, persist, the cached versions' commit, major GC).
/// A panicking worker's panic is resumed on the caller.
fn on_workers<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    if n == 1 {
        return vec![f(0)];
    }
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..n).map(|w| s.spawn(move || f(w))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

/// An index change applied once the epoch is durable: table, key, the new
/// place of the row, the row it replaces (`old`), and, for a table with
/// secondary indexes, the new row's bytes and, when the epoch read it, the
/// old row's (`RowVersions::base_bytes`), borrowed from the epoch's
/// versions.
enum Change<'r> {
    Put {
        table: u32,
        key: u64,
        row: RowRef,
        old: Option<RowRef>,
        bytes: Option<&'r [u8]>,
        old_bytes: Option<&'r [u8]>,
    },
    Delete {
        table: u32,
        key: u64,
        row: RowRef,
        old: RowRef,
        old_bytes: Option<&'r [u8]>,
    },
}

impl<B: PmemBackend> NvcaracalEngine<B> {
    /// Create a new pool per `config` and an empty engine on it.
    pub fn create(config: &EngineConfig) -> Result<Self> {
        Self::create_on(super::create_pool(config)?, config)
    }

    /// Build an empty engine on a freshly formatted pool.
    pub fn create_on(pool: Pool<B>, config: &EngineConfig) -> Result<Self> {
        super::require_no_catalog(&pool)?;
        let page = pool.page_size();
        let count = config.nvcaracal_log_bytes.div_ceil(page).max(1);
        if layout::META_LOG_IDS + count * 8 > page {
            return Err(Error::InvalidConfig(format!(
                "--nvcaracal-log-bytes {} needs {count} log pages, a meta page names at most {}",
                config.nvcaracal_log_bytes,
                (page - layout::META_LOG_IDS) / 8
            )));
        }
        let meta_page = pool.allocate_page(SYSTEM_THREAD, PageOwner::SYSTEM)?;
        let mut log_pages = Vec::new();
        for _ in 0..count {
            log_pages.push(pool.allocate_page(SYSTEM_THREAD, PageOwner::SYSTEM)?);
        }
        let p = pool.persister(SYSTEM_THREAD);
        let base = pool.page_offset(meta_page);
        p.write_u64_atomic(base + layout::META_LOG_PAGES, count);
        p.write_u64_atomic(base + layout::META_ROW_BYTES, config.nvcaracal_row_bytes);
        for (i, lp) in log_pages.iter().enumerate() {
            p.write_u64_atomic(base + layout::META_LOG_IDS + 8 * i as u64, *lp);
        }
        p.flush(
            base + layout::META_LOG_PAGES,
            layout::META_LOG_IDS - layout::META_LOG_PAGES + 8 * count,
        );
        p.fence();
        p.write_u64_atomic(base, layout::META_MAGIC);
        p.persist(base, 8);
        let doc =
            CatalogDoc { engine: "nvcaracal".into(), floor_page: meta_page, tables: Vec::new() };
        catalog::write(&pool, SYSTEM_THREAD, &doc)?;
        let row_bytes = config.nvcaracal_row_bytes;
        Ok(Self::assemble(pool, meta_page, log_pages, Vec::new(), 0, row_bytes, config, None))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        pool: Pool<B>,
        meta_page: u64,
        log_pages: Vec<u64>,
        tables: Vec<Arc<Table>>,
        durable: u64,
        row_bytes: u64,
        config: &EngineConfig,
        recovery: Option<RecoveryReport>,
    ) -> Self {
        NvcaracalEngine {
            pool,
            meta_page,
            log_pages,
            tables: RwLock::new(tables),
            seq: Mutex::new(()),
            durable: AtomicU64::new(durable),
            procedures: Arc::clone(&config.procedures.0),
            config: config.clone(),
            workers_in_use: Mutex::new(vec![false; config.max_workers]),
            recovery,
            fault: config.baseline_fault,
            cache: cache::RowCache::new(
                config.nvcaracal_cached_versions,
                config.nvcaracal_cache_epochs,
                super::occ::dram_budget_bytes(config, None),
            ),
            gc_pending: Mutex::new(Vec::new()),
            row_bytes,
        }
    }

    /// Open an existing pool per `config` and recover it.
    pub fn open(config: &EngineConfig) -> Result<Self> {
        config.validate()?;
        Self::open_on(Pool::<B>::open(&backend_options(config))?, config)
    }

    /// Recover an engine from an opened pool.
    pub fn open_on(pool: Pool<B>, config: &EngineConfig) -> Result<Self> {
        recovery::recover(pool, config)
    }

    /// Drop the engine without the clean shutdown and hand back the pool.
    pub fn into_pool(self) -> Option<Pool<B>> {
        Some(self.pool)
    }

    pub fn pool(&self) -> &Pool<B> {
        &self.pool
    }

    /// The meta page (durable epoch, log seal, log page ids).
    pub fn meta_page(&self) -> u64 {
        self.meta_page
    }

    /// The cached versions' counters (cumulative since open).
    pub fn cache_counters(&self) -> CacheCounters {
        self.cache.counters()
    }

    /// Bytes of a persistent row (0: inline-only), as the pool records it.
    pub fn row_bytes(&self) -> u64 {
        self.row_bytes
    }

    /// Every pooled table's value pool, counted from the slots: capacity,
    /// free (the allocator's) and live (named by a version <= E). Checks
    /// that the two are disjoint and cover the pool (no leak, no value
    /// named twice): `Corrupt` otherwise.
    pub fn value_pool(&self) -> Result<Vec<ValuePool>> {
        let _g = self.seq.lock();
        self.value_pool_locked()
    }

    fn value_pool_locked(&self) -> Result<Vec<ValuePool>> {
        let b = self.pool.backend();
        let durable = self.durable.load(Ordering::Acquire);
        let mut out = Vec::new();
        for t in self.tables.read().iter().filter(|t| t.lay.pooled) {
            let mut named = Vec::new();
            let slot_pages = t.alloc.lock().pages.clone();
            for page in slot_pages {
                let start = self.pool.page_offset(page);
                for i in 0..self.pool.page_size() / t.slot_size {
                    for v in 0..2 {
                        let at = start + i * t.slot_size + t.version_offset(v);
                        let e = b.load_u64(at);
                        if e != 0
                            && e <= durable
                            && b.load_u64(at + 8) & layout::FLAG_TOMBSTONE == 0
                        {
                            named.push(b.load_u64(at + layout::VERSION_HEADER));
                        }
                    }
                }
            }
            let a = t.values.lock();
            let mut pages = a.pages.clone();
            pages.sort_unstable();
            let mut unnamed = value_pool_free(&self.pool, t, &pages, &mut named)?;
            // The bump remainder of the last page is free too.
            let bump: Vec<u64> = (0..(a.end - a.next) / t.lay.value_size)
                .map(|i| a.next + i * t.lay.value_size)
                .collect();
            let mut free: Vec<u64> = a.free.iter().copied().chain(bump).collect();
            free.sort_unstable();
            unnamed.sort_unstable();
            if free != unnamed {
                let leaked = unnamed.iter().filter(|v| free.binary_search(v).is_err()).count();
                let extra = free.iter().filter(|v| unnamed.binary_search(v).is_err()).count();
                return Err(Error::Corrupt(format!(
                    "table {}: value pool of {} values has {} free and {} live: {leaked} unnamed values not free (leaked), {extra} free values named or listed twice",
                    t.schema.name,
                    pages.len() as u64 * (self.pool.page_size() / t.lay.value_size),
                    free.len(),
                    named.len()
                )));
            }
            out.push(ValuePool {
                table: t.id,
                capacity: pages.len() as u64 * (self.pool.page_size() / t.lay.value_size),
                free: free.len() as u64,
                live: named.len() as u64,
            });
        }
        Ok(out)
    }

    /// The input log's pages, in log order.
    pub fn log_pages(&self) -> &[u64] {
        &self.log_pages
    }

    fn table(&self, id: u32) -> Result<Arc<Table>> {
        self.tables.read().get(id as usize).cloned().ok_or(Error::UnknownTableId(id))
    }

    fn meta(&self, off: u64) -> u64 {
        self.pool.page_offset(self.meta_page) + off
    }

    /// Bytes the input log holds.
    pub fn log_capacity(&self) -> u64 {
        self.log_pages.len() as u64 * self.pool.page_size()
    }

    /// Write `bytes` at logical offset `at` of the log, flushing each piece.
    fn log_write(&self, thread: u32, mut at: u64, mut bytes: &[u8], flush: bool) {
        let p = self.pool.persister(thread);
        let page = self.pool.page_size();
        while !bytes.is_empty() {
            let (i, off) = (at / page, at % page);
            let n = (page - off).min(bytes.len() as u64) as usize;
            let dst = self.pool.page_offset(self.log_pages[i as usize]) + off;
            p.write(dst, &bytes[..n]);
            if flush {
                p.flush(dst, n as u64);
            }
            bytes = &bytes[n..];
            at += n as u64;
        }
    }

    /// Read `out.len()` bytes at logical offset `at` of the log.
    fn log_read(&self, thread: u32, mut at: u64, out: &mut [u8]) {
        let p = self.pool.persister(thread);
        let page = self.pool.page_size();
        let mut done = 0;
        while done < out.len() {
            let (i, off) = (at / page, at % page);
            let n = (page - off).min((out.len() - done) as u64) as usize;
            p.read(
                self.pool.page_offset(self.log_pages[i as usize]) + off,
                &mut out[done..done + n],
            );
            done += n;
            at += n as u64;
        }
    }

    /// The committed row `r` of `t` into `out`.
    fn read_row(&self, thread: u32, t: &Table, r: RowRef, out: &mut [u8]) {
        let at = r.slot + t.version_offset(r.newest as usize) + layout::VERSION_HEADER;
        let p = self.pool.persister(thread);
        if t.lay.pooled {
            // The version names its value: two dependent reads.
            let mut word = [0u8; 8];
            p.read(at, &mut word);
            p.read(u64::from_le_bytes(word), out);
        } else {
            p.read(at, out);
        }
    }

    /// The committed row `r` of `key` in `t` (a version this epoch did not
    /// overwrite) in `buf`: its cached version when there (`epoch` notes
    /// the use), else read from NVM; `.1`: whether it was cached.
    fn committed_row<'b>(
        &self,
        thread: u32,
        t: &Table,
        key: u64,
        r: RowRef,
        epoch: u64,
        buf: &'b mut Vec<u8>,
    ) -> (&'b [u8], bool) {
        buf.resize(t.row, 0);
        let hit = self.fetch_committed(thread, t, key, r, epoch, buf, false);
        (buf, hit)
    }

    /// The committed row `r` of `key` in `t` into `out`, from the cached
    /// versions when there, else from NVM (and then cached); whether it
    /// was cached. The caller counts it.
    fn read_committed(
        &self,
        thread: u32,
        t: &Table,
        key: u64,
        r: RowRef,
        epoch: u64,
        out: &mut [u8],
    ) -> bool {
        self.fetch_committed(thread, t, key, r, epoch, out, true)
    }

    /// The cached version of `key` into `out` (noting its use in `epoch`),
    /// else row `r` from NVM, cached when `fill`; whether it was cached.
    #[allow(clippy::too_many_arguments)]
    fn fetch_committed(
        &self,
        thread: u32,
        t: &Table,
        key: u64,
        r: RowRef,
        epoch: u64,
        out: &mut [u8],
        fill: bool,
    ) -> bool {
        if self.cache.get((t.id, key), epoch, out) {
            return true;
        }
        self.read_row(thread, t, r, out);
        if fill {
            self.cache.fill((t.id, key), epoch, out);
        }
        false
    }

    /// A free slot of `t` and the version to write first (its older one).
    fn allocate_slot(&self, thread: u32, t: &Table) -> Result<(u64, usize)> {
        let mut a = t.alloc.lock();
        let slot = if let Some(s) = a.free.pop() {
            s
        } else {
            if a.next + t.slot_size > a.end {
                let page = self
                    .pool
                    .allocate_page(thread, PageOwner { table: t.id, worker: 0 })
                    .map_err(|_| Error::Abort(crate::error::AbortReason::OutOfSpace))?;
                let start = self.pool.page_offset(page);
                a.pages.push(page);
                a.next = start;
                a.end = start + self.pool.page_size() / t.slot_size * t.slot_size;
            }
            let s = a.next;
            a.next += t.slot_size;
            s
        };
        let e0 = self.pool.backend().load_u64(slot + t.version_offset(0));
        let e1 = self.pool.backend().load_u64(slot + t.version_offset(1));
        Ok((slot, usize::from(e1 < e0)))
    }

    /// A free value of pooled table `t` (NVCaracal §5.5): the free list
    /// (values the major collector freed, whose deletion is durable), else
    /// a bump pointer over the table's value pages. Nothing is persisted:
    /// the version that names the value records the allocation, so a
    /// crashed epoch's allocations are reverted with its versions.
    fn allocate_value(&self, thread: u32, t: &Table) -> Result<u64> {
        let mut a = t.values.lock();
        if let Some(v) = a.free.pop() {
            return Ok(v);
        }
        if a.next + t.lay.value_size > a.end {
            let page = self
                .pool
                .allocate_page(thread, PageOwner { table: t.id, worker: layout::VALUE_PAGE })
                .map_err(|_| Error::Abort(crate::error::AbortReason::OutOfSpace))?;
            let start = self.pool.page_offset(page);
            a.pages.push(page);
            a.next = start;
            a.end = start + self.pool.page_size() / t.lay.value_size * t.lay.value_size;
        }
        let v = a.next;
        a.next += t.lay.value_size;
        Ok(v)
    }

    /// Validate a batch: procedures known, tables known, keys in range;
    /// the log image of it and its size checked against the log.
    fn prepare<'a>(&self, txns: &'a [OneShot]) -> Result<(Vec<Prepared<'a>>, Vec<u8>)> {
        let tables = self.tables.read();
        let mut out = Vec::with_capacity(txns.len());
        for t in txns {
            if !self.procedures.contains(t.proc) {
                return Err(Error::InvalidArgument(format!("unknown procedure id {}", t.proc.0)));
            }
            let mut writes: Vec<Key> = Vec::with_capacity(t.writes.len());
            for &(table, key) in &t.writes {
                let tb = tables.get(table.0 as usize).ok_or(Error::UnknownTableId(table.0))?;
                tb.check_key(key)?;
                if !writes.contains(&(table.0, key)) {
                    writes.push((table.0, key));
                }
            }
            out.push(Prepared { proc: t.proc, input: &t.input, writes });
        }
        let payload = layout::encode_payload(
            txns.iter().map(|t| (t.proc.0, t.writes.as_slice(), t.input.as_slice())),
        );
        let needed = layout::LOG_HEADER + payload.len() as u64;
        if needed > self.log_capacity() {
            // `run_locked` cut the batch to fit; a logged epoch fitted.
            return Err(Error::Corrupt(format!(
                "an epoch of {} transactions needs {needed} bytes of input log, over its {}",
                txns.len(),
                self.log_capacity()
            )));
        }
        Ok((out, payload))
    }

    /// Log the epoch's inputs durably, then seal them (`seal` = e).
    fn log_epoch(&self, thread: u32, epoch: u64, txns: u64, payload: &[u8]) {
        let unpersisted = self.fault == Some(BaselineFault::NvcaracalInputLogUnpersisted);
        let header = layout::encode_header(epoch, txns, payload, self.procedures.fingerprint());
        self.log_write(thread, 0, &header, !unpersisted);
        self.log_write(thread, layout::LOG_HEADER, payload, !unpersisted);
        let p = self.pool.persister(thread);
        if !unpersisted {
            p.fence();
        }
        self.note(thread, EpochPhase::Seal);
        p.write_u64_atomic(self.meta(layout::META_SEAL), epoch);
        p.persist(self.meta(layout::META_SEAL), 8);
    }

    /// Note the phase the epoch enters in the trace (crash simulator only).
    fn note(&self, thread: u32, phase: EpochPhase) {
        self.pool
            .persister(thread)
            .marker(Marker::Note { tag: EpochPhase::NOTE_TAG, value: phase.note_value() });
    }

    /// Persist the durable epoch word.
    fn mark_epoch(&self, thread: u32, epoch: u64) {
        self.note(thread, EpochPhase::EpochMark);
        let p = self.pool.persister(thread);
        p.write_u64_atomic(self.meta(layout::META_EPOCH), epoch);
        p.persist(self.meta(layout::META_EPOCH), 8);
    }

    /// Run one epoch (module docs). The caller holds `seq`. `log`: write
    /// the inputs first (false only when recovery replays a logged epoch).
    /// `threads`: the pool thread slots of the executing threads.
    fn run_epoch(
        &self,
        epoch: u64,
        txns: &[OneShot],
        threads: &[u32],
        log: bool,
    ) -> Result<EpochOutcome> {
        let (prepared, payload) = self.prepare(txns)?;
        let mut stats = EpochStats {
            epoch,
            txns: txns.len() as u64,
            log_bytes: layout::LOG_HEADER + payload.len() as u64,
            parts: 1,
            ..EpochStats::default()
        };
        let lead = threads[0];
        let started = Instant::now();
        if log {
            // Begin/Ack name the epoch: a crash campaign checks that every
            // acknowledged epoch survives.
            self.pool.persister(lead).marker(Marker::Begin { txn: epoch });
            self.note(lead, EpochPhase::InputLog);
            self.log_epoch(lead, epoch, txns.len() as u64, &payload);
        }
        drop(payload);
        stats.log_us = started.elapsed().as_secs_f64() * 1e6;
        let n = threads.len().clamp(1, txns.len().max(1));

        // Initialisation: a pending version per declared write, on every
        // thread at once (`nvcaracal/versions.rs`).
        let started = Instant::now();
        self.note(lead, EpochPhase::Init);
        let cache_before = self.cache.counters();
        let tables: Vec<Arc<Table>> = self.tables.read().clone();
        let pending = std::mem::take(&mut *self.gc_pending.lock());
        (stats.gc_major, stats.values_freed) = self.major_gc(&tables, &pending, &threads[..n]);
        self.cache.evict(epoch);
        let building = versions::Building::new(versions::Options {
            batch_append: self.config.nvcaracal_batch_append,
            split_on_demand: self.config.nvcaracal_split_on_demand,
            threads: n,
        });
        let base = |(table, key): Key| tables[table as usize].index.read().get(&key).copied();
        let writes = |sid: usize| prepared[sid].writes.as_slice();
        on_workers(n, |w| building.init_thread(w, txns.len(), writes, &base));
        let rows = building.freeze();
        stats.versions = rows.versions();
        stats.split_rows = rows.split_rows();
        stats.init_us = started.elapsed().as_secs_f64() * 1e6;

        // Execution: transaction i on thread i mod N, in serial order.
        let started = Instant::now();
        self.note(lead, EpochPhase::Exec);
        let ctx = EpochCtx {
            engine: self,
            epoch,
            tables: &tables,
            rows: &rows,
            prepared: &prepared,
            value_bytes: AtomicU64::new(0),
        };
        let mut results: Vec<Option<Result<Vec<u8>>>> = (0..txns.len()).map(|_| None).collect();
        let mut waits = 0;
        let per: Vec<Vec<Ran>> = on_workers(n, |w| {
            (w..txns.len())
                .step_by(n)
                .map(|sid| {
                    let (r, waits) = ctx.execute(sid, threads[w]);
                    (sid, r, waits)
                })
                .collect()
        });
        for (sid, r, w) in per.into_iter().flatten() {
            results[sid] = Some(r);
            waits += w;
        }
        stats.waits = waits;
        stats.exec_us = started.elapsed().as_secs_f64() * 1e6;
        let results: Vec<Result<Vec<u8>>> =
            results.into_iter().map(|r| r.expect("every transaction ran")).collect();
        stats.failed = results.iter().filter(|r| r.is_err()).count() as u64;
        stats.transient_bytes = rows.bytes() + ctx.value_bytes.load(Ordering::Relaxed);

        // Persist: each row's final version, then the epoch number.
        let started = Instant::now();
        let mark_first = self.fault == Some(BaselineFault::NvcaracalEpochMarkFirst);
        if mark_first {
            self.mark_epoch(lead, epoch);
        }
        self.note(lead, EpochPhase::RowPersist);
        let changes: Vec<Result<(Vec<Change>, u64, u64)>> =
            on_workers(n, |w| self.persist_rows(&tables, &rows, w, n, epoch, threads[w]));
        let mut all = Vec::new();
        for c in changes {
            let (c, minor, values) = c?;
            all.extend(c);
            stats.gc_minor += minor;
            stats.values_allocated += values;
        }
        if !mark_first {
            self.mark_epoch(lead, epoch);
        }
        stats.rows_persisted = all.len() as u64;
        // The major collector deletes these slots' stale versions in the
        // next epoch's init phase: every slot written, with minor GC off;
        // else those of pooled tables (NVCaracal §5.3: the minor collector
        // only for inline versions, so the value pool's deletions by GC
        // never meet a transaction's).
        let minor_gc = self.config.nvcaracal_minor_gc;
        self.gc_pending.lock().extend(all.iter().filter_map(|c| match c {
            Change::Put { table, row, .. } | Change::Delete { table, row, .. } => {
                (!minor_gc || tables[*table as usize].lay.pooled).then_some((*table, row.slot))
            }
        }));
        let mut old_row = Vec::new();
        let (mut hits, mut misses) = (0, 0);
        for c in all {
            match c {
                Change::Put { table, key, row, old, bytes, old_bytes } => {
                    let tb = &tables[table as usize];
                    if let Some(new) = bytes {
                        // The old row as the epoch read it, else from NVM
                        // (a blind write); an unchanged index key is left
                        // alone.
                        let old = match (old, old_bytes) {
                            (Some(_), Some(cached)) => Some(cached),
                            (Some(o), None) => {
                                let (bytes, hit) =
                                    self.committed_row(lead, tb, key, o, epoch, &mut old_row);
                                *if hit { &mut hits } else { &mut misses } += 1;
                                Some(bytes)
                            }
                            (None, _) => None,
                        };
                        maintain_secondary(&tb.secondary, key, old, Some(new));
                    }
                    tb.index.write().insert(key, row);
                }
                Change::Delete { table, key, row, old, old_bytes } => {
                    let tb = &tables[table as usize];
                    if !tb.secondary.is_empty() {
                        let old = match old_bytes {
                            Some(cached) => cached,
                            None => {
                                let (bytes, hit) =
                                    self.committed_row(lead, tb, key, old, epoch, &mut old_row);
                                *if hit { &mut hits } else { &mut misses } += 1;
                                bytes
                            }
                        };
                        maintain_secondary(&tb.secondary, key, Some(old), None);
                    }
                    tb.index.write().remove(&key);
                    tb.alloc.lock().free.push(row.slot);
                }
            }
        }
        self.cache.count(hits, misses);
        // The cached versions follow the committed rows.
        if self.cache.is_on() {
            self.commit_cache(&rows, epoch, n);
        }
        let after = self.cache.counters();
        stats.cache_hits = after.hits - cache_before.hits;
        stats.cache_misses = after.misses - cache_before.misses;
        stats.cache_refused = after.refused - cache_before.refused;
        stats.cache_evicted = after.evicted - cache_before.evicted;
        stats.cache_entries = after.entries;
        stats.cache_bytes = after.bytes;
        self.durable.store(epoch, Ordering::Release);
        if log {
            self.pool.persister(lead).marker(Marker::Ack { txn: epoch });
        }
        stats.persist_us = started.elapsed().as_secs_f64() * 1e6;
        drop(rows);
        Ok(EpochOutcome { results, stats })
    }

    /// After the mark: the cached versions take the final versions of the
    /// rows the epoch updated and drop the rows it deleted (inserted rows
    /// are not cached until read), on `n` threads, thread w committing the
    /// shards w, w + n, … (the epoch's row shards are the cache's).
    fn commit_cache(&self, rows: &Epoch, epoch: u64, n: usize) {
        let shard = |s: usize| {
            let changes = rows.shard_rows(s).iter().filter_map(|r| {
                let value =
                    r.last_written()?.value.get().expect("a written version holds its value");
                match (r.base, value) {
                    (None, _) => None,
                    (Some(_), v) => Some(((r.table, r.key), v.as_deref())),
                }
            });
            self.cache.commit(s, epoch, changes);
        };
        on_workers(n, |w| (w..versions::SHARDS).step_by(n).for_each(&shard));
    }

    /// The major collector (NVCaracal §4.4, §5.5): in the init phase, each
    /// of `slots` that holds two versions loses its stale one (the older:
    /// its epoch word zeroed and flushed), so this epoch's final write of
    /// the row finds an empty version. The newer version, the row, is never
    /// touched, so a crash anywhere in it leaves every row as it was
    /// (recovery's scan lists the slots again). Both epoch words are read
    /// from NVM, counted and charged (the collector's cold accesses). A
    /// stale version in the value pool frees its value: the deletion is
    /// not revertible (the version is gone), so it is persisted (one fence
    /// per thread) before the value joins the free list, all before the
    /// execution phase; a crash during execution keeps it. On the epoch's
    /// threads (`threads`); (versions deleted, values freed).
    fn major_gc(&self, tables: &[Arc<Table>], slots: &[(u32, u64)], threads: &[u32]) -> (u64, u64) {
        let unpersisted = self.fault == Some(BaselineFault::NvcaracalValueFreeUnpersisted);
        let collect = |part: &[(u32, u64)], thread: u32| {
            let p = self.pool.persister(thread);
            let mut deleted = 0;
            let mut freed: Vec<(u32, u64)> = Vec::new();
            for &(table, slot) in part {
                let t = &tables[table as usize];
                let at = [0, 1].map(|v| slot + t.version_offset(v));
                let e = at.map(|a| {
                    let mut word = [0u8; 8];
                    p.read(a, &mut word);
                    u64::from_le_bytes(word)
                });
                if e[0] == 0 || e[1] == 0 {
                    continue;
                }
                let stale = at[usize::from(e[1] < e[0])];
                if t.lay.pooled {
                    // Flags and value offset: the 16 bytes after the epoch.
                    let mut words = [0u8; 16];
                    p.read(stale + 8, &mut words);
                    let flags = u64::from_le_bytes(words[..8].try_into().expect("8 bytes"));
                    if flags & layout::FLAG_TOMBSTONE == 0 {
                        freed.push((table, u64::from_le_bytes(words[8..].try_into().expect("8"))));
                    }
                }
                p.write_u64_atomic(stale, 0);
                if !unpersisted {
                    p.flush(stale, 8);
                }
                deleted += 1;
            }
            if deleted > 0 && !unpersisted {
                p.fence();
            }
            // The deletions are durable: the values are free.
            for &(table, value) in &freed {
                tables[table as usize].values.lock().free.push(value);
            }
            (deleted, freed.len() as u64)
        };
        if slots.is_empty() {
            return (0, 0);
        }
        let per = slots.len().div_ceil(threads.len());
        let parts: Vec<&[(u32, u64)]> = slots.chunks(per).collect();
        on_workers(parts.len(), |w| collect(parts[w], threads[w]))
            .into_iter()
            .fold((0, 0), |(d, f), (d2, f2)| (d + d2, f + f2))
    }

    /// Persist the final versions of rows `w, w + n, …`; one fence. Each
    /// goes into the version of its slot that is not the row: empty, or
    /// the stale version, which the write deletes (the minor collector,
    /// NVCaracal §4.4; counted, `.1`). With the major collector that
    /// version is always empty (its init phase deleted the stale one).
    fn persist_rows<'r>(
        &self,
        tables: &[Arc<Table>],
        rows: &'r Epoch,
        w: usize,
        n: usize,
        epoch: u64,
        thread: u32,
    ) -> Result<(Vec<Change<'r>>, u64, u64)> {
        let p = self.pool.persister(thread);
        let mut changes = Vec::new();
        let (mut minor, mut values) = (0, 0);
        for r in rows.rows().skip(w).step_by(n) {
            let Some(last) = r.last_written() else {
                continue;
            };
            let value = last.value.get().expect("a written version holds its value");
            let t = &tables[r.table as usize];
            let (slot, v) = match (r.base, value) {
                (None, None) => continue,
                (Some(b), _) => (b.slot, 1 - b.newest as usize),
                (None, Some(_)) => {
                    let (slot, v) = self.allocate_slot(thread, t)?;
                    p.write_u64_atomic(slot, r.key);
                    p.flush(slot, 8);
                    (slot, v)
                }
            };
            let at = slot + t.version_offset(v);
            // The epoch word of the version about to be overwritten (on the
            // line the write touches anyway; not charged as a read): a
            // stale version the minor collector deletes by this write.
            let stale = self.pool.backend().load_u64(at) != 0;
            if stale && t.lay.pooled {
                // The major collector empties a pooled row's older version
                // in the init phase; overwriting it would leak its value.
                return Err(Error::Corrupt(format!(
                    "{} key {}: a final write found a stale pooled version in slot {slot}",
                    t.schema.name, r.key
                )));
            }
            minor += u64::from(stale);
            let flags = if value.is_none() { layout::FLAG_TOMBSTONE } else { 0 };
            let len = match value {
                Some(row) if t.lay.pooled => {
                    // The value first, then the version naming it; one
                    // fence (below) covers both before the epoch mark.
                    let to = self.allocate_value(thread, t)?;
                    values += 1;
                    p.write(to, row);
                    p.flush(to, row.len() as u64);
                    p.write_u64_atomic(at + layout::VERSION_HEADER, to);
                    layout::VERSION_HEADER + 8
                }
                Some(row) => {
                    p.write(at + layout::VERSION_HEADER, row);
                    layout::VERSION_HEADER + row.len() as u64
                }
                None => {
                    if t.lay.pooled {
                        p.write_u64_atomic(at + layout::VERSION_HEADER, 0);
                    }
                    layout::VERSION_HEADER
                }
            };
            p.write_u64_atomic(at + 8, flags);
            p.write_u64_atomic(at, epoch);
            p.flush(at, len);
            let rref = RowRef { slot, newest: v as u8, epoch };
            let (table, key) = (r.table, r.key);
            let old_bytes = r.base_bytes.get().map(|b| &b[..]);
            changes.push(match (value, r.base) {
                (Some(row), old) => Change::Put {
                    table,
                    key,
                    row: rref,
                    old,
                    bytes: (!t.secondary.is_empty()).then_some(&row[..]),
                    old_bytes,
                },
                // A deletion of an absent row was skipped above.
                (None, old) => match old {
                    Some(old) => Change::Delete { table, key, row: rref, old, old_bytes },
                    None => continue,
                },
            });
        }
        p.fence();
        Ok((changes, minor, values))
    }

    /// Run `txns` as one epoch, or as consecutive epochs when the bound of
    /// their transient versions exceeds the DRAM budget or their inputs the
    /// input log (the serial order is kept, so results and the final state
    /// are the same). Every part is validated before the first runs. The
    /// caller holds `seq`.
    fn run_locked(&self, txns: &[OneShot], threads: &[u32]) -> Result<EpochOutcome> {
        let (parts, log_cuts) = self.parts(txns)?;
        if let [_] = parts.as_slice() {
            let epoch = self.durable.load(Ordering::Acquire) + 1;
            return self.run_epoch(epoch, txns, threads, true);
        }
        for part in &parts {
            self.prepare(&txns[part.clone()])?;
        }
        let mut merged = EpochOutcome {
            results: Vec::with_capacity(txns.len()),
            stats: EpochStats { log_cuts, ..EpochStats::default() },
        };
        for part in parts {
            let epoch = self.durable.load(Ordering::Acquire) + 1;
            let out = self.run_epoch(epoch, &txns[part], threads, true)?;
            merged.results.extend(out.results);
            let (m, s) = (&mut merged.stats, out.stats);
            m.epoch = s.epoch;
            m.parts += 1;
            m.txns += s.txns;
            m.failed += s.failed;
            m.cc_aborts += s.cc_aborts;
            m.waits += s.waits;
            m.versions += s.versions;
            m.split_rows += s.split_rows;
            m.rows_persisted += s.rows_persisted;
            m.log_bytes += s.log_bytes;
            m.transient_bytes = m.transient_bytes.max(s.transient_bytes);
            m.cache_hits += s.cache_hits;
            m.cache_misses += s.cache_misses;
            m.cache_refused += s.cache_refused;
            m.cache_evicted += s.cache_evicted;
            m.cache_entries = s.cache_entries;
            m.cache_bytes = s.cache_bytes;
            m.gc_minor += s.gc_minor;
            m.gc_major += s.gc_major;
            m.values_allocated += s.values_allocated;
            m.values_freed += s.values_freed;
            m.log_us += s.log_us;
            m.init_us += s.init_us;
            m.exec_us += s.exec_us;
            m.persist_us += s.persist_us;
        }
        Ok(merged)
    }

    /// Consecutive ranges of `txns` whose transient-version bound
    /// (`versions::bound_per_write` per declared write) fits the DRAM
    /// budget and whose logged inputs fit the input log, cut greedily; and
    /// how many cuts the log made. A transaction that alone does not fit
    /// one or the other is refused.
    fn parts(&self, txns: &[OneShot]) -> Result<(Vec<std::ops::Range<usize>>, u64)> {
        let budget = self.config.nvcaracal_dram_budget_bytes;
        let log = self.log_capacity() - layout::LOG_HEADER;
        let tables = self.tables.read();
        let row = |t: TableId| tables.get(t.0 as usize).map_or(0, |t| t.row);
        let (mut parts, mut start, mut log_cuts) = (Vec::new(), 0, 0);
        let (mut dram, mut logged) = (0u64, 0u64);
        for (index, t) in txns.iter().enumerate() {
            let entry = layout::entry_bytes(t.writes.len(), t.input.len());
            if entry > log {
                return Err(Error::EpochTooLarge {
                    index,
                    needed_bytes: layout::LOG_HEADER + entry,
                    capacity_bytes: self.log_capacity(),
                });
            }
            let needed: u64 = t.writes.iter().map(|w| versions::bound_per_write(row(w.0))).sum();
            if needed > budget {
                return Err(Error::EpochOverBudget {
                    index,
                    needed_bytes: needed,
                    budget_bytes: budget,
                });
            }
            let over_log = logged + entry > log;
            if over_log || dram + needed > budget {
                parts.push(start..index);
                log_cuts += u64::from(over_log);
                (start, dram, logged) = (index, 0, 0);
            }
            dram += needed;
            logged += entry;
        }
        parts.push(start..txns.len());
        Ok((parts, log_cuts))
    }
}

/// Shared state of an epoch's execution phase.
struct EpochCtx<'a, B: PmemBackend> {
    engine: &'a NvcaracalEngine<B>,
    epoch: u64,
    tables: &'a [Arc<Table>],
    rows: &'a Epoch,
    prepared: &'a [Prepared<'a>],
    value_bytes: AtomicU64,
}

impl<B: PmemBackend> EpochCtx<'_, B> {
    /// Run transaction `sid`, publish its versions; (result, waits).
    fn execute(&self, sid: usize, thread: u32) -> (Result<Vec<u8>>, u64) {
        let t = &self.prepared[sid];
        let mut tx = ExecTx {
            ctx: self,
            sid: sid as u32,
            thread,
            buffer: Vec::new(),
            waits: 0,
            hits: 0,
            misses: 0,
        };
        let result = if t.proc == ProcId::APPLY {
            apply(&mut tx, t.input).map(|()| Vec::new())
        } else {
            match self.engine.procedures.get(t.proc) {
                Some(f) => f(&mut tx, t.input),
                None => Err(Error::InvalidArgument(format!("unknown procedure id {}", t.proc.0))),
            }
        };
        let ok = result.is_ok();
        self.engine.cache.count(tx.hits, tx.misses);
        let mut buffer = std::mem::take(&mut tx.buffer);
        for &key in &t.writes {
            let version = self
                .rows
                .find(key)
                .and_then(|r| r.own(sid as u32))
                .expect("the init phase made a version for every declared write");
            let written = if ok { buffer.iter().position(|(k, _)| *k == key) } else { None };
            match written {
                Some(i) => {
                    let value = buffer.swap_remove(i).1;
                    let bytes = value.as_ref().map_or(0, |v| v.len() as u64);
                    self.value_bytes.fetch_add(bytes, Ordering::Relaxed);
                    // The version is set once: only this transaction owns it.
                    let _ = version.value.set(value.map(Vec::into_boxed_slice));
                    version.state.store(WRITTEN, Ordering::Release);
                }
                None => version.state.store(IGNORE, Ordering::Release),
            }
        }
        (result, tx.waits)
    }
}

/// The procedure's view of the database in an epoch.
struct ExecTx<'a, 'c, B: PmemBackend> {
    ctx: &'c EpochCtx<'a, B>,
    sid: u32,
    thread: u32,
    buffer: Vec<layout::RowWrite>,
    waits: u64,
    /// Committed rows read from the cached versions, and from NVM.
    hits: u64,
    misses: u64,
}

impl<B: PmemBackend> ExecTx<'_, '_, B> {
    /// The committed row `r` of `key` into `out` (cached or NVM), counted.
    fn committed(&mut self, t: &Table, key: u64, r: RowRef, out: &mut [u8]) {
        let e = self.ctx.engine;
        if e.read_committed(self.thread, t, key, r, self.ctx.epoch, out) {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
    }

    fn declared(&self, table: u32, key: u64) -> Result<()> {
        let t = &self.ctx.prepared[self.sid as usize];
        if t.writes.contains(&(table, key)) {
            return Ok(());
        }
        let name = self
            .ctx
            .tables
            .get(table as usize)
            .map_or_else(|| format!("#{table}"), |t| t.schema.name.clone());
        Err(Error::UndeclaredWrite { table: name, key })
    }

    fn write(&mut self, table: TableId, key: u64, row: Option<&[u8]>) -> Result<()> {
        let t = self.ctx.tables.get(table.0 as usize).ok_or(Error::UnknownTableId(table.0))?;
        t.check_key(key)?;
        if let Some(r) = row {
            t.check_row(r.len())?;
        }
        self.declared(table.0, key)?;
        let value = row.map(<[u8]>::to_vec);
        match self.buffer.iter_mut().find(|(k, _)| *k == (table.0, key)) {
            Some(slot) => slot.1 = value,
            None => self.buffer.push(((table.0, key), value)),
        }
        Ok(())
    }
}

impl<B: PmemBackend> OneShotTx for ExecTx<'_, '_, B> {
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        let t = self.ctx.tables.get(table.0 as usize).ok_or(Error::UnknownTableId(table.0))?;
        t.check_key(key)?;
        t.check_row(out.len())?;
        if let Some((_, v)) = self.buffer.iter().find(|(k, _)| *k == (table.0, key)) {
            return Ok(match v {
                Some(row) => {
                    out.copy_from_slice(row);
                    true
                }
                None => false,
            });
        }
        let (base, written) = match self.ctx.rows.find((table.0, key)) {
            Some(row) => match row.read(self.sid, &mut self.waits) {
                Some(v) => {
                    return Ok(match v.value.get().expect("written versions hold values") {
                        Some(bytes) => {
                            out.copy_from_slice(bytes);
                            true
                        }
                        None => false,
                    });
                }
                None => (row.base, Some(row)),
            },
            None => {
                // A row the epoch does not write: its cached version (which
                // only a committed row has), else the index and NVM.
                if self.ctx.engine.cache.get((table.0, key), self.ctx.epoch, out) {
                    self.hits += 1;
                    return Ok(true);
                }
                (t.index.read().get(&key).copied(), None)
            }
        };
        let Some(r) = base else {
            return Ok(false);
        };
        match written {
            // The committed row of a row the epoch writes, in a table with
            // secondary indexes: kept, so the index upkeep after the mark
            // compares keys without reading it again.
            Some(row) if !t.secondary.is_empty() => match row.base_bytes.get() {
                Some(cached) => out.copy_from_slice(cached),
                None => {
                    self.committed(t, key, r, out);
                    if row.base_bytes.set(out.into()).is_ok() {
                        self.ctx.value_bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
                    }
                }
            },
            Some(_) => self.committed(t, key, r, out),
            None => {
                self.ctx.engine.read_row(self.thread, t, r, out);
                self.misses += 1;
                self.ctx.engine.cache.fill((table.0, key), self.ctx.epoch, out);
            }
        }
        Ok(true)
    }

    fn put(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.write(table, key, Some(row))
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<()> {
        self.write(table, key, None)
    }
}

/// The built-in APPLY procedure: the logged writes, in order.
fn apply(tx: &mut dyn OneShotTx, input: &[u8]) -> Result<()> {
    for (t, k, row) in layout::decode_apply(input)? {
        match row {
            Some(r) => tx.put(TableId(t), k, r)?,
            None => tx.delete(TableId(t), k)?,
        }
    }
    Ok(())
}

impl<B: PmemBackend> DeterministicEngine for NvcaracalEngine<B> {
    fn procedures(&self) -> &ProcedureSet {
        &self.procedures
    }

    fn submit_epoch(&self, txns: &[OneShot], workers: usize) -> Result<EpochOutcome> {
        if workers == 0 || workers > self.config.max_workers {
            return Err(Error::InvalidArgument(format!(
                "epoch workers {workers} outside 1..={}",
                self.config.max_workers
            )));
        }
        let _g = self.seq.lock();
        let threads: Vec<u32> = (0..workers).map(worker_thread).collect();
        self.run_locked(txns, &threads)
    }

    fn durable_epoch(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }
}

impl<B: PmemBackend> Engine for NvcaracalEngine<B> {
    fn name(&self) -> &'static str {
        "nvcaracal"
    }

    fn cc_name(&self) -> &'static str {
        "deterministic"
    }

    fn create_table(&self, schema: &TableSchema) -> Result<TableId> {
        schema.validate()?;
        let _g = self.seq.lock();
        let mut tables = self.tables.write();
        if let Some(t) = tables.iter().find(|t| t.schema.name == schema.name) {
            if t.schema == *schema {
                return Ok(TableId(t.id));
            }
            return Err(Error::SchemaMismatch(schema.name.clone()));
        }
        crate::registry::check_room(tables.len())?;
        let t = Table::new(schema.clone(), tables.len() as u32, self.row_bytes);
        if t.slot_size.max(t.lay.value_size) > self.pool.page_size() {
            return Err(Error::InvalidSchema {
                table: schema.name.clone(),
                detail: format!(
                    "a slot of {} bytes or a value of {} bytes does not fit a {}-byte page",
                    t.slot_size,
                    t.lay.value_size,
                    self.pool.page_size()
                ),
            });
        }
        let mut doc = CatalogDoc {
            engine: "nvcaracal".into(),
            floor_page: self.meta_page,
            tables: tables.iter().map(|t| t.schema.clone()).collect(),
        };
        doc.tables.push(schema.clone());
        catalog::write(&self.pool, SYSTEM_THREAD, &doc)?;
        let id = t.id;
        tables.push(Arc::new(t));
        Ok(TableId(id))
    }

    fn table_id(&self, name: &str) -> Result<TableId> {
        self.tables
            .read()
            .iter()
            .find(|t| t.schema.name == name)
            .map(|t| TableId(t.id))
            .ok_or_else(|| Error::UnknownTable(name.to_string()))
    }

    fn schema(&self, table: TableId) -> Result<TableSchema> {
        Ok(self.table(table.0)?.schema.clone())
    }

    fn worker(&self) -> Result<Box<dyn EngineWorker + '_>> {
        let mut used = self.workers_in_use.lock();
        let id = used.iter().position(|u| !u).ok_or(Error::TooManyWorkers { max: used.len() })?;
        used[id] = true;
        Ok(Box::new(NvWorker { engine: self, id, cache: CacheStats::default() }))
    }

    fn pmem_counters(&self) -> CounterSnapshot {
        self.pool.total_counters()
    }

    fn status(&self) -> EngineStatus {
        let mut status = EngineStatus {
            engine: "nvcaracal".into(),
            cc: "deterministic".into(),
            ..Default::default()
        };
        for t in self.tables.read().iter() {
            status.tables.push(TableStatus {
                name: t.schema.name.clone(),
                rows: t.index.read().len() as u64,
                row_bytes: t.row,
                heap_pages: (t.alloc.lock().pages.len() + t.values.lock().pages.len()) as u64,
                ordered_keys: t.index.read().len() as u64,
            });
        }
        status.free_pages = self.pool.free_page_count();
        status.page_count = self.pool.page_count();
        status
    }

    fn recovery_report(&self) -> Option<RecoveryReport> {
        self.recovery.clone()
    }

    /// (N1) every index entry's slot holds its key and, in the version the
    /// entry names, a live row of the entry's epoch, newer than the other
    /// version and not newer than the durable epoch; (N2) no slot is named
    /// twice; (N3) free slots are named by no entry and lie on the table's
    /// pages; (N4) each secondary index holds exactly one entry per row,
    /// with the row's index key; (N5) every cached version is its row's
    /// committed bytes, and the cache is within its bound; (N6) with minor
    /// GC off, or in a pooled table, every row whose slot holds two
    /// versions is on the major collector's list (so the next final write
    /// finds an empty version); (N7) per pooled table, the values named by
    /// versions <= E are values of its pool, each named once, and the free
    /// ones are exactly the rest (no leak, no double allocation).
    fn check_invariants(&self) -> Result<()> {
        let _g = self.seq.lock();
        let durable = self.durable.load(Ordering::Acquire);
        let b = self.pool.backend();
        let pending: std::collections::HashSet<(u32, u64)> =
            self.gc_pending.lock().iter().copied().collect();
        for t in self.tables.read().iter() {
            let name = &t.schema.name;
            let mut slots = std::collections::HashSet::new();
            for (&key, r) in t.index.read().iter() {
                let v = t.version_offset(r.newest as usize);
                let o = t.version_offset(1 - r.newest as usize);
                let (k, e, f, other) = (
                    b.load_u64(r.slot),
                    b.load_u64(r.slot + v),
                    b.load_u64(r.slot + v + 8),
                    b.load_u64(r.slot + o),
                );
                if k != key || e != r.epoch || e == 0 || e > durable || f != 0 || other >= e {
                    return Err(Error::Corrupt(format!(
                        "{name} key {key}: slot {} holds key {k}, version epoch {e} flags {f}, other {other} (index says epoch {}, durable {durable})",
                        r.slot, r.epoch
                    )));
                }
                if !slots.insert(r.slot) {
                    return Err(Error::Corrupt(format!("{name}: slot {} named twice", r.slot)));
                }
                if (!self.config.nvcaracal_minor_gc || t.lay.pooled)
                    && other != 0
                    && !pending.contains(&(t.id, r.slot))
                {
                    return Err(Error::Corrupt(format!(
                        "{name} key {key}: slot {} holds two versions (epochs {e}, {other}) but is not on the major collector's list",
                        r.slot
                    )));
                }
            }
            let index = t.index.read();
            let mut row = vec![0u8; t.row];
            for (i, s) in t.secondary.iter().enumerate() {
                let entries = s.entries();
                if entries.len() != index.len() {
                    return Err(Error::Corrupt(format!(
                        "{name}: secondary index #{i} holds {} entries for {} rows",
                        entries.len(),
                        index.len()
                    )));
                }
                for (bytes, pk) in entries {
                    let Some(r) = index.get(&pk) else {
                        return Err(Error::Corrupt(format!(
                            "{name}: secondary index #{i} names absent key {pk}"
                        )));
                    };
                    self.read_row(SYSTEM_THREAD, t, *r, &mut row);
                    if s.key_bytes(&row) != bytes {
                        return Err(Error::Corrupt(format!(
                            "{name}: secondary index #{i} entry of key {pk} is not the row's key"
                        )));
                    }
                }
            }
            drop(index);
            let a = t.alloc.lock();
            for s in &a.free {
                let page = (s - self.pool.page_offset(0)) / self.pool.page_size();
                if slots.contains(s) || !a.pages.contains(&page) {
                    return Err(Error::Corrupt(format!(
                        "{name}: free slot {s} in use or off-table"
                    )));
                }
            }
        }
        let tables = self.tables.read();
        let mut bad = None;
        let mut row = Vec::new();
        self.cache.for_each(|(table, key), cached| {
            if bad.is_some() {
                return;
            }
            let Some(t) = tables.get(table as usize) else {
                bad = Some(format!("cached version of unknown table #{table}"));
                return;
            };
            let Some(r) = t.index.read().get(&key).copied() else {
                bad = Some(format!("{} key {key}: cached but not committed", t.schema.name));
                return;
            };
            row.resize(t.row, 0);
            self.read_row(SYSTEM_THREAD, t, r, &mut row);
            if row != cached {
                bad =
                    Some(format!("{} key {key}: the cached version is not the row", t.schema.name));
            }
        });
        if let Some(detail) = bad {
            return Err(Error::Corrupt(detail));
        }
        drop(tables);
        self.value_pool_locked()?;
        let c = self.cache.counters();
        if c.bytes > super::occ::dram_budget_bytes(&self.config, None) {
            return Err(Error::Corrupt(format!(
                "cached versions take {} bytes, over the bound",
                c.bytes
            )));
        }
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.pool.close()?)
    }

    fn abandon(self: Box<Self>) {
        self.pool.abandon();
    }

    fn deterministic(&self) -> Option<&dyn DeterministicEngine> {
        Some(self)
    }
}

/// A registered worker: interactive transactions through the adapter.
struct NvWorker<'e, B: PmemBackend> {
    engine: &'e NvcaracalEngine<B>,
    id: usize,
    /// The cached versions' counters for this worker's transactions: its
    /// reads of committed rows (hits, misses: read from NVM) and what its
    /// one-transaction epochs read and evicted.
    cache: CacheStats,
}

impl<B: PmemBackend> Drop for NvWorker<'_, B> {
    fn drop(&mut self) {
        self.engine.workers_in_use.lock()[self.id] = false;
    }
}

impl<B: PmemBackend> EngineWorker for NvWorker<'_, B> {
    fn id(&self) -> usize {
        self.id
    }

    fn execute(
        &mut self,
        opts: &TxnOptions,
        body: &mut dyn FnMut(&mut dyn Transaction) -> Result<()>,
    ) -> Result<CommitInfo> {
        let e = self.engine;
        let thread = worker_thread(self.id);
        let _g = e.seq.lock();
        let mut tx = AdapterTx {
            engine: e,
            thread,
            writes: BTreeMap::new(),
            hits: Cell::new(0),
            misses: Cell::new(0),
        };
        let ran = body(&mut tx);
        self.cache.hits += tx.hits.get();
        self.cache.misses += tx.misses.get();
        ran?;
        if tx.writes.is_empty() {
            return Ok(CommitInfo { cts: 0, durable: true, writes: 0 });
        }
        if opts.read_only {
            return Err(Error::InvalidArgument("a read-only transaction wrote".into()));
        }
        let writes: Vec<layout::RowWrite> = tx.writes.into_iter().collect();
        let one = OneShot {
            proc: ProcId::APPLY,
            input: layout::encode_apply(&writes),
            writes: writes.iter().map(|((t, k), _)| (TableId(*t), *k)).collect(),
        };
        // `run_epoch` marks Begin and Ack { txn: epoch } in the trace.
        let mut out = e.run_locked(std::slice::from_ref(&one), &[thread])?;
        self.cache.hits += out.stats.cache_hits;
        self.cache.misses += out.stats.cache_misses;
        self.cache.evictions += out.stats.cache_evicted;
        let epoch = out.stats.epoch;
        out.results.pop().expect("one result per transaction")?;
        Ok(CommitInfo { cts: epoch, durable: true, writes: writes.len() as u32 })
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    fn counters(&self) -> CounterSnapshot {
        self.engine.pool.counters(worker_thread(self.id)).snapshot()
    }

    /// The cached versions (NVCaracal §4.2) as this worker used them: hits
    /// are committed rows read from DRAM, misses rows read from NVM (every
    /// one with the cached versions off), evictions those of its epochs.
    fn cache_stats(&self) -> CacheStats {
        self.cache
    }
}

/// An interactive transaction: reads the committed state, buffers writes.
struct AdapterTx<'e, B: PmemBackend> {
    engine: &'e NvcaracalEngine<B>,
    thread: u32,
    writes: BTreeMap<(u32, u64), Option<Vec<u8>>>,
    /// Its committed-row reads from the cached versions and from NVM.
    hits: Cell<u64>,
    misses: Cell<u64>,
}

impl<B: PmemBackend> AdapterTx<'_, B> {
    /// The committed row `r` of `key` into `out`: its cached version, else
    /// NVM (then cached); counted. Uses are noted for the next epoch.
    fn committed(&self, t: &Table, key: u64, r: RowRef, out: &mut [u8]) {
        let e = self.engine;
        let next = e.durable.load(Ordering::Acquire) + 1;
        let hit = e.read_committed(self.thread, t, key, r, next, out);
        e.cache.count(u64::from(hit), u64::from(!hit));
        let counter = if hit { &self.hits } else { &self.misses };
        counter.set(counter.get() + 1);
    }

    fn exists(&self, t: &Table, key: u64) -> bool {
        match self.writes.get(&(t.id, key)) {
            Some(v) => v.is_some(),
            None => t.index.read().contains_key(&key),
        }
    }
}

impl<B: PmemBackend> Transaction for AdapterTx<'_, B> {
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        let t = self.engine.table(table.0)?;
        t.check_key(key)?;
        t.check_row(out.len())?;
        if let Some(v) = self.writes.get(&(table.0, key)) {
            return Ok(match v {
                Some(row) => {
                    out.copy_from_slice(row);
                    true
                }
                None => false,
            });
        }
        let r = t.index.read().get(&key).copied();
        match r {
            Some(r) => {
                self.committed(&t, key, r, out);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn get_for_update(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.get(table, key, out)
    }

    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.engine.table(table.0)?;
        t.check_key(key)?;
        t.check_row(row.len())?;
        if self.exists(&t, key) {
            return Err(Error::DuplicateKey { table: t.schema.name.clone(), key });
        }
        self.writes.insert((table.0, key), Some(row.to_vec()));
        Ok(())
    }

    fn update(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        let t = self.engine.table(table.0)?;
        t.check_key(key)?;
        t.check_row(row.len())?;
        if !self.exists(&t, key) {
            return Err(Error::KeyNotFound { table: t.schema.name.clone(), key });
        }
        self.writes.insert((table.0, key), Some(row.to_vec()));
        Ok(())
    }

    fn delete(&mut self, table: TableId, key: u64) -> Result<()> {
        let t = self.engine.table(table.0)?;
        t.check_key(key)?;
        if !self.exists(&t, key) {
            return Err(Error::KeyNotFound { table: t.schema.name.clone(), key });
        }
        self.writes.insert((table.0, key), None);
        Ok(())
    }

    fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        let t = self.engine.table(table.0)?;
        let mut keys: BTreeMap<u64, Option<RowRef>> =
            t.index.read().range(range.clone()).map(|(k, r)| (*k, Some(*r))).collect();
        for ((tb, k), _) in self.writes.range((table.0, *range.start())..=(table.0, *range.end())) {
            debug_assert_eq!(*tb, table.0);
            keys.insert(*k, None);
        }
        let mut row = vec![0u8; t.row];
        let mut n = 0;
        for (k, r) in keys {
            if n >= limit {
                break;
            }
            match (self.writes.get(&(table.0, k)), r) {
                (Some(Some(buffered)), _) => row.copy_from_slice(buffered),
                (Some(None), _) => continue,
                (None, Some(r)) => self.committed(&t, k, r, &mut row),
                (None, None) => continue,
            }
            n += 1;
            if !f(k, &row) {
                break;
            }
        }
        Ok(n)
    }

    /// The committed index (the last durable epoch) merged with this
    /// transaction's own buffered writes. Reconnaissance reads are
    /// read-only transactions through here.
    fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        let t = self.engine.table(table.0)?;
        let s = t.secondary.get(index).ok_or_else(|| Error::InvalidSchema {
            table: t.schema.name.clone(),
            detail: format!("no secondary index #{index}"),
        })?;
        let mine = self.writes.range((table.0, 0)..=(table.0, u64::MAX));
        if mine.clone().next().is_none() {
            return s.lookup(&t.schema.name, prefix, limit, out);
        }
        // Committed candidates not overwritten here, then this
        // transaction's rows with the prefix, in index order.
        let mut committed = Vec::new();
        s.lookup(&t.schema.name, prefix, usize::MAX, &mut committed)?;
        let mut found: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut row = vec![0u8; t.row];
        let index_map = t.index.read();
        for pk in committed {
            if self.writes.contains_key(&(table.0, pk)) {
                continue;
            }
            if let Some(r) = index_map.get(&pk) {
                self.committed(&t, pk, *r, &mut row);
                found.push((s.key_bytes(&row), pk));
            }
        }
        drop(index_map);
        for ((_, pk), v) in mine {
            if let Some(r) = v
                && s.key_starts_with(r, prefix)
            {
                found.push((s.key_bytes(r), *pk));
            }
        }
        found.sort_unstable();
        out.extend(found.into_iter().take(limit.saturating_sub(out.len())).map(|(_, pk)| pk));
        Ok(())
    }
}
