//! The DRAM OCC core shared by the baseline engines: Silo (Tu et al., SOSP
//! '13) over DRAM records, with the storage of rows and the persist path left
//! to a [`Store`].
//!
//! WHAT IS SHARED
//!   Tables and indexes in DRAM (`table.rs`), the worker with its read, write
//!   and scan sets, every `Transaction` operation, validation and the commit
//!   skeleton (`txn.rs`, `commit.rs`), and the `Engine` implementation
//!   (`engine.rs`). A baseline is a `Store`: where a row lives (DRAM words,
//!   NVM used as volatile memory, a version in NVM behind a DRAM cache), what
//!   a commit persists, and how the engine recovers.
//!
//! THE TID WORD (one per record, always in DRAM)
//!   `cts << 2 | PRESENT | LOCK`: the commit timestamp of the record's current
//!   version, whether that version is a row (clear: a deletion, or the key was
//!   never inserted; the all-zero word is a record never written), and the
//!   write lock. Engines that keep per-tuple CC metadata in NVM (mmdb
//!   for rows it placed in NVM, wbl for every version) *also* write the word's
//!   changes there, through [`Store::on_lock`] / [`Store::on_unlock`]: those
//!   writes are counted as NVM writes, but the word that threads synchronise
//!   on is the DRAM one, because NVM offers no compare-and-swap through the
//!   `Persister`.
//!
//! COMMIT (`commit.rs`), as named phases:
//! ```text
//!   lock_write_set  TID locks in (table, rid) order; Store::on_lock per record
//!   enter_commit    Store hook (mmdb: checkpoint gate; wbl: publish in-flight)
//!   cts             drawn from the global clock, above every TID read or locked
//!   validate        read set (TID unchanged, not locked by others), scans
//!                   (no new live record in any scanned range)
//!   prepare         Store hook: reserve space (may abort; nothing durable yet)
//!   persist         Store hook: the engine's durability work (log / versions)
//!   install         Store::install_row, secondary indexes, TID := (cts, absent?)
//!   leave_commit    Store hook: acknowledge (wbl waits for group commit)
//!   after_commit    Store hook: space reclamation
//! ```
//!
//! GUARANTEES
//!   Serializable and strict for Silo (`--cc silo`): writes are
//!   installed after the commit decision; a reader never returns a locked
//!   row. Scans are phantom-safe: the index range is re-scanned at commit and
//!   any record that appeared in it live (or locked) aborts. Reading a missing
//!   key creates an absent placeholder record, so a later insert is detected.
//!
//! WHAT IT DOES NOT DO
//!   Of `CcKind`, only Silo, the three 2PL variants, TO and MVCC
//!   (`protocol.rs`; falcon enables all but Silo too,
//!   `EngineKind::supported_cc`); the others are Zen's (they live on the
//!   Met-Cache). No epochs, no
//!   snapshot reads for read-only transactions, no record or index garbage
//!   collection (deleted keys keep an absent record). Secondary-index lookups
//!   are not validated (as in Zen).

pub mod commit;
pub mod engine;
pub mod protocol;
pub mod table;
pub mod txn;

use std::sync::Arc;

use zen_pmem::CounterSnapshot;

pub use engine::{Core, OccEngine};
pub use table::{DramRows, Record, Table};
pub use txn::{WriteItem, WriteKind};

use crate::api::{CacheStats, Durability, EngineStatus, TableId};
use crate::config::{EngineConfig, EngineKind};
use crate::error::Result;
use crate::schema::TableSchema;

/// The TID word of a record (see the module docs).
pub mod tid {
    use std::sync::atomic::{AtomicU64, Ordering};

    pub const LOCK: u64 = 1;
    /// Set when the version is a row; clear when it is a deletion or the
    /// key was never inserted. (A set bit for "present" rather than for
    /// "absent" makes the all-zero word a never-written record, so records
    /// start in zero-mapped memory, `table.rs`.)
    pub const PRESENT: u64 = 2;
    const FLAG_BITS: u32 = 2;

    #[inline]
    pub fn make(cts: u64, absent: bool) -> u64 {
        (cts << FLAG_BITS) | if absent { 0 } else { PRESENT }
    }

    #[inline]
    pub fn cts_of(word: u64) -> u64 {
        word >> FLAG_BITS
    }

    #[inline]
    pub fn is_absent(word: u64) -> bool {
        word & PRESENT == 0
    }

    #[inline]
    pub fn is_locked(word: u64) -> bool {
        word & LOCK != 0
    }

    /// Try to take the lock; `Some(previous word)` on success.
    #[inline]
    pub fn try_lock(word: &AtomicU64) -> Option<u64> {
        crate::sched::point();
        let cur = word.load(Ordering::Acquire);
        if cur & LOCK != 0 {
            return None;
        }
        word.compare_exchange(cur, cur | LOCK, Ordering::AcqRel, Ordering::Acquire).ok()
    }

    /// Release a lock without changing the version.
    #[inline]
    pub fn unlock(word: &AtomicU64, previous: u64) {
        crate::sched::point();
        word.store(previous & !LOCK, Ordering::Release);
    }
}

/// The tables of an engine, as handed to `Store` hooks.
pub type Tables<X> = [Arc<Table<X>>];

/// Where rows live and what a commit persists: one implementation per
/// baseline design. Hooks take the [`Core`] so they reach the clock, the
/// configuration and the store itself.
pub trait Store: Send + Sync + Sized + 'static {
    /// Per-table state of the store (row arena, NVM regions, tuple cache).
    type TableExt: Send + Sync + 'static;
    /// Per-worker state of the store (persister slot, log buffer, GC queues).
    type Local: Send;

    const ENGINE: EngineKind;

    fn new_table_ext(&self, id: TableId, schema: &TableSchema) -> Self::TableExt;
    /// Reject schemas the store cannot hold (e.g. a row larger than a page).
    fn check_schema(&self, _schema: &TableSchema) -> Result<()> {
        Ok(())
    }
    /// Make the new list of schemas durable (the catalog); called under the
    /// core's catalog lock before the table becomes visible.
    fn persist_catalog(&self, schemas: &[TableSchema]) -> Result<()>;

    fn local(core: &Core<Self>, worker: usize) -> Self::Local;

    /// Copy the row of `rid` (whose TID was `tid`, present) into `out`,
    /// unvalidated: the core re-reads the TID afterwards. True when the row
    /// came from DRAM (a cache hit, for the cache counters).
    fn read_row(
        core: &Core<Self>,
        local: &mut Self::Local,
        t: &Table<Self::TableExt>,
        rid: u64,
        tid: u64,
        out: &mut [u8],
    ) -> bool;

    /// Start loading the row of `rid` (a hint for
    /// [`crate::api::Transaction::prefetch`]; the core asked for the
    /// record's words just before, so its location word is on its way). No
    /// counter moves. The default does nothing.
    fn prefetch_row(_core: &Core<Self>, _t: &Table<Self::TableExt>, _rid: u64) {}

    /// Read the live row of `rid` in a quiescent engine (checks, checkpoints).
    fn read_row_quiescent(
        core: &Core<Self>,
        t: &Table<Self::TableExt>,
        rid: u64,
        out: &mut [u8],
    ) -> Result<()>;

    /// The core locked `rid` (its TID word now carries the lock).
    fn on_lock(_core: &Core<Self>, _l: &mut Self::Local, _t: &Table<Self::TableExt>, _rid: u64) {}
    /// The core released `rid` without a new version (abort).
    fn on_unlock(_core: &Core<Self>, _l: &mut Self::Local, _t: &Table<Self::TableExt>, _rid: u64) {}

    /// Before the commit timestamp is drawn.
    fn enter_commit(_core: &Core<Self>, _local: &mut Self::Local) {}
    /// After validation: reserve what persisting and installing need. An
    /// error aborts the transaction; the hook undoes its own reservations.
    fn prepare(
        _core: &Core<Self>,
        _local: &mut Self::Local,
        _cts: u64,
        _writes: &mut [WriteItem],
        _data: &[u8],
        _tables: &Tables<Self::TableExt>,
    ) -> Result<()> {
        Ok(())
    }
    /// The design's durability work for a validated transaction (infallible).
    fn persist(
        core: &Core<Self>,
        local: &mut Self::Local,
        cts: u64,
        writes: &[WriteItem],
        data: &[u8],
        tables: &Tables<Self::TableExt>,
    );
    /// Put the new version of one write in place (the record is locked; the
    /// core then updates the secondary indexes and releases the TID).
    fn install_row(
        core: &Core<Self>,
        local: &mut Self::Local,
        t: &Table<Self::TableExt>,
        w: &WriteItem,
        row: Option<&[u8]>,
        cts: u64,
    );
    /// After install (`Some(cts)`) or after an abort that followed
    /// `enter_commit` (`None`). Returns whether the commit is durable.
    fn leave_commit(
        core: &Core<Self>,
        local: &mut Self::Local,
        committed: Option<u64>,
        durability: Durability,
    ) -> bool;
    /// Space reclamation and other work after a commit returned.
    fn after_commit(_core: &Core<Self>, _local: &mut Self::Local) {}
    /// Make every commit of this worker durable (and acknowledge it).
    fn sync(core: &Core<Self>, local: &mut Self::Local) -> Result<()>;
    /// This worker's NVM counters.
    fn counters(core: &Core<Self>, local: &Self::Local) -> CounterSnapshot;

    /// Sum of every NVM counter of the engine.
    fn pmem_counters(core: &Core<Self>) -> CounterSnapshot;
    /// Fill the engine-specific parts of `status` (pages, cache entries);
    /// the core adds [`Storage::engine_counters`].
    fn status(core: &Core<Self>, status: &mut EngineStatus);
    /// The running counters ([`crate::api::Engine::counters`]): none by
    /// default.
    fn engine_counters(_core: &Core<Self>) -> crate::api::EngineCounters {
        crate::api::EngineCounters::default()
    }
    /// The store's structural invariants (the core checks its own first).
    fn check_invariants(core: &Core<Self>) -> Result<()>;
    /// Periodic background work and its period (mmdb: checkpoints).
    fn periodic_interval(_config: &EngineConfig) -> Option<std::time::Duration> {
        None
    }
    fn periodic(_core: &Core<Self>) {}
    /// Clean shutdown of a quiescent engine.
    fn close(core: Core<Self>) -> Result<()>;
    /// Drop without the clean shutdown, as a crash would.
    fn abandon(core: Core<Self>);
}

/// Cache counters of a worker, for `EngineWorker::cache_stats`.
pub fn hit_or_miss(stats: &mut CacheStats, hit: bool) {
    if hit {
        stats.hits += 1;
    } else {
        stats.misses += 1;
    }
}

/// DRAM bytes the design may use for tuples: `data / dram_ratio` when both
/// are known (`data_bytes` measured on a loaded pool, else the configured
/// expectation), otherwise `cache_size_bytes`.
pub fn dram_budget_bytes(config: &EngineConfig, data_bytes: Option<u64>) -> u64 {
    match (config.dram_ratio, data_bytes.or(config.expected_data_bytes)) {
        (Some(ratio), Some(data)) => (data as f64 / ratio) as u64,
        _ => config.cache_size_bytes,
    }
}
