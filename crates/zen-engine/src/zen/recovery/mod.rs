//! Recovery (Zen §3.3.3, Alg. 2), parallel from end to end, and the
//! engine's structural invariant check.
//!
//! SHARES
//!   The heap pages, sorted by (worker, page), are dealt to the recovery
//!   threads in contiguous runs of equal length (`pages.rs`). Every phase
//!   below runs on all threads, each on its own share and its own persist
//!   slot; the only shared state is the engine's concurrent indexes, one
//!   atomic bound per worker, and two bitmaps per page.
//!
//! PHASES
//!   1 scan     every slot header of the share is read once; committed
//!              versions go straight into the primary index (newest wins,
//!              `install.rs`), uncertain ones into the pending list
//!              (`scan.rs`). Nothing is written.
//!   2 settle   ts-commit\[w\] = max(largest LP Tx-CTS of w, floor\[w\]) is now
//!              final: pending versions at or below it are offered, the
//!              rest are uncommitted. Nothing is written.
//!   3 clean    floors (fenced), then older losers (each thread fences),
//!              then winning tombstones (each thread fences): `clean.rs`.
//!   4 rebuild  secondary indexes from the winners' rows, free lists per
//!              page, page owners (DRAM only).
//!
//!   Phases are separated by joining the threads (a crash or an error in
//!   one share stops everything before the next phase): in particular no
//!   byte is written before every page has been validated (phases 1–2),
//!   and no tombstone is zeroed before every thread's older losers are
//!   durably zero.
//!
//! MEMORY
//!   Besides what it builds (indexes, free lists), recovery holds two bits
//!   per slot (`pages.rs`), the pending lists (their peak is reported) and
//!   the tombstones that won when offered. The scan used to keep a 48-byte
//!   record of every non-empty slot and a map of every winner.
//!
//! IDEMPOTENCE
//!   Crashing anywhere in here and recovering again reaches the same
//!   logical state (R-0 … R-6 of `docs/design/commit-and-recovery.md`); the
//!   crash campaigns crash recoveries with 1, 2 and 4 threads at their own
//!   fences, two levels deep.
//!
//! Corrupt pools (unknown table in a page, a page header that disagrees with
//! the catalog, a timestamp beyond the clock's range) give `Error::Corrupt`,
//! never an unchecked offset, and nothing is written to them.

mod check;
mod clean;
mod install;
mod pages;
mod scan;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use zen_pmem::{PageOwner, Persister, PmemBackend, Pool, SYSTEM_TABLE};

use super::Shared;
use super::table::Table;
use crate::api::{RecoveryPhase, RecoveryReport};
use crate::catalog::{self, CatalogDoc};
use crate::config::{EngineConfig, Fault};
use crate::error::{Error, Result};
use crate::heap;
use crate::ts::{self, Clock};
pub use check::check_invariants;
use pages::HeapPages;
use scan::Share;

/// Most recovery threads (each needs a persist slot of its own).
pub const MAX_RECOVERY_THREADS: usize = 64;
/// Persist slot of recovery thread 0; above every worker's (`Shared::thread_of`).
const FIRST_RECOVERY_SLOT: u32 = 256;

/// What every recovery thread reads.
struct Context<'a, B: PmemBackend> {
    shared: &'a Shared<B>,
    tables: Arc<Vec<Arc<Table>>>,
    pages: &'a HeapPages,
    /// Per worker: the largest LP Tx-CTS found so far, or the commit floor
    /// (ts-commit[w] once every share is scanned).
    bound: Box<[AtomicU64]>,
    /// A Tx-CTS at or above this is corruption.
    cts_limit: u64,
    /// Injected bug: winning tombstones in the older losers' fence epoch.
    tombstones_first: bool,
}

impl<B: PmemBackend> Context<'_, B> {
    fn persister(&self, thread: usize) -> Persister<'_, B> {
        self.shared.pool.persister(FIRST_RECOVERY_SLOT + thread as u32)
    }

    fn backend(&self) -> &B {
        self.shared.pool.backend()
    }
}

pub fn recover<B: PmemBackend>(pool: Pool<B>, config: &EngineConfig) -> Result<Shared<B>> {
    let started = Instant::now();
    let doc = read_catalog(&pool)?;
    let owned = heap_pages(&pool, &doc)?;
    let regions = owned
        .iter()
        .map(|(_, o)| usize::from(o.worker) + 1)
        .max()
        .unwrap_or(0)
        .max(config.max_workers);
    if regions > 250 || regions as u64 * 8 > pool.page_size() {
        return Err(Error::Corrupt(format!("pool has pages of worker {}", regions - 1)));
    }
    // Timestamps stay far below `ts::MAX_CTS` in any pool we wrote (2^52
    // commits): one beyond half of it is corruption, and resuming the clock
    // above it would exhaust the timestamp space.
    let cts_limit = ts::MAX_CTS / 2;
    let floors: Vec<u64> = (0..regions)
        .map(|w| pool.backend().load_u64(catalog::floor_offset(&pool, doc.floor_page, w)))
        .collect();
    if let Some(cts) = floors.iter().find(|&&c| c >= cts_limit) {
        return Err(Error::Corrupt(format!("timestamp {cts:#x} beyond the clock's range")));
    }
    let slot_sizes: Vec<u64> = doc.tables.iter().map(|t| heap::slot_size(t.row_size())).collect();
    let pages = HeapPages::new(&pool, &owned, &slot_sizes);
    let threads = config
        .recovery_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, owned.len().clamp(1, MAX_RECOVERY_THREADS));
    // The Met-Cache budget of `--dram-ratio` depends on the data recovered;
    // the tables (which hold the indexes the scan fills) are made first, with
    // the heap's capacity as the data size, and the budget is set at the end.
    let capacity_bytes: u64 = pages
        .pages
        .iter()
        .map(|p| p.slots * doc.tables[p.owner.table as usize].row_size() as u64)
        .sum();
    let clock = Clock::resume_above(0);
    let mut shared =
        Shared::new(pool, config, regions, doc.floor_page, clock, None, capacity_bytes);
    shared.install_tables(&doc.tables);
    let ctx = Context {
        shared: &shared,
        tables: shared.tables(),
        pages: &pages,
        bound: floors.iter().map(|&f| AtomicU64::new(f)).collect(),
        cts_limit,
        tombstones_first: config.fault == Some(Fault::RecoveryTombstonesFirst),
    };
    let mut shares: Vec<Share> = pages::shares(pages.pages.len(), threads)
        .into_iter()
        .enumerate()
        .map(|(i, range)| Share::new(i, range, regions))
        .collect();
    let run = run_phases(&ctx, &mut shares, &floors, config, doc.floor_page)?;
    drop(ctx);

    let ts_commit = &run.ts_commit;
    let max_cts = shares.iter().map(|s| s.stats.max_cts).max().unwrap_or(0);
    shared.clock = Clock::resume_above(max_cts.max(ts_commit.iter().copied().max().unwrap_or(0)));
    for (w, &c) in ts_commit.iter().enumerate() {
        shared.floors[w].store(c, Ordering::Relaxed);
        shared.floors_durable[w].store(c, Ordering::Relaxed);
        shared.durable_cts[w].store(c, Ordering::Relaxed);
    }
    // As `Shared::new` sizes it, from the rows recovered.
    shared.cache_budget_bytes = config.cache_bytes(run.data_bytes).max(4 << 10);
    shared.rebalance_cache();
    // Each thread's buffers: a flag per slot of a page and one slot.
    let buffers = pages.pages.iter().map(|p| p.slots + p.slot_size).max().unwrap_or(0);
    let scratch = pages.bitmap_bytes()
        + shares.iter().map(Share::scratch_bytes).sum::<u64>()
        + threads as u64 * buffers;
    let page_size = shared.pool.page_size();
    shared.recovery = Some(report(&run, &shares, &pages, page_size, scratch, started));
    Ok(shared)
}

/// What the phases found and did.
struct Run {
    ts_commit: Vec<u64>,
    /// Slots zeroed by phase 3 (older losers and winning tombstones).
    zeroed: u64,
    winners: u64,
    data_bytes: u64,
    /// Pending versions phase 2 settled or discarded.
    settled: u64,
    /// Rows read by the rebuild (secondary indexes).
    rows_read_bytes: u64,
    /// Per phase, milliseconds: scan, settle, clean, rebuild.
    ms: [f64; 4],
}

fn run_phases<B: PmemBackend>(
    ctx: &Context<'_, B>,
    shares: &mut [Share],
    floors: &[u64],
    config: &EngineConfig,
    floor_page: u64,
) -> Result<Run> {
    let mut clock = Instant::now();
    let mut lap = || {
        let ms = clock.elapsed().as_secs_f64() * 1e3;
        clock = Instant::now();
        ms
    };
    in_parallel(shares, |s| scan::scan(ctx, s)).into_iter().collect::<Result<Vec<()>>>()?;
    let scan_ms = lap();
    let ts_commit: Vec<u64> = ctx.bound.iter().map(|b| b.load(Ordering::Acquire)).collect();
    let before: u64 = shares.iter().map(|s| s.stats.settled + s.stats.uncommitted).sum();
    in_parallel(shares, |s| scan::settle(ctx, s, &ts_commit))
        .into_iter()
        .collect::<Result<Vec<()>>>()?;
    let after: u64 = shares.iter().map(|s| s.stats.settled + s.stats.uncommitted).sum();
    let settle_ms = lap();

    // Everything is validated: from here on recovery writes to the pool.
    let pool = &ctx.shared.pool;
    pool.mark_in_use();
    release_orphan_system_pages(pool, floor_page)?;
    let skip_floors = config.fault == Some(Fault::NoCommitFloor);
    clean::raise_floors(pool, floor_page, &ts_commit, floors, skip_floors);
    let older: u64 = in_parallel(shares, |s| clean::zero_older_losers(ctx, s)).into_iter().sum();
    let tombstones: u64 =
        in_parallel(shares, |s| clean::zero_winning_tombstones(ctx, s)).into_iter().sum();
    let clean_ms = lap();
    let rebuilt = in_parallel(shares, |s| clean::rebuild(ctx, s));
    let winners = rebuilt.iter().map(|r| r.0).sum();
    let data_bytes = ctx
        .pages
        .pages
        .iter()
        .map(|p| p.live_count() * ctx.tables[p.owner.table as usize].row_bytes as u64)
        .sum();
    Ok(Run {
        ts_commit,
        zeroed: older + tombstones,
        winners,
        data_bytes,
        settled: after - before,
        rows_read_bytes: rebuilt.iter().map(|r| r.1).sum(),
        ms: [scan_ms, settle_ms, clean_ms, lap()],
    })
}

/// Run `f` on every share, one thread each (inline when there is one).
fn in_parallel<R: Send>(shares: &mut [Share], f: impl Fn(&mut Share) -> R + Sync) -> Vec<R> {
    if let [only] = shares {
        return vec![f(only)];
    }
    std::thread::scope(|scope| {
        let f = &f;
        let handles: Vec<_> = shares.iter_mut().map(|s| scope.spawn(move || f(s))).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    })
}

fn report(
    run: &Run,
    shares: &[Share],
    pages: &HeapPages,
    page_size: u64,
    scratch_bytes_peak: u64,
    started: Instant,
) -> RecoveryReport {
    let heap_bytes = pages.pages.len() as u64 * page_size;
    let stat = |f: fn(&scan::ShareStats) -> u64| shares.iter().map(|s| f(&s.stats)).sum::<u64>();
    let uncommitted = stat(|s| s.uncommitted);
    let versions = stat(|s| s.versions);
    let slots = stat(|s| s.slots);
    let [scan_ms, settle_ms, clean_ms, rebuild_ms] = run.ms;
    let total_ms = started.elapsed().as_secs_f64() * 1e3;
    RecoveryReport {
        threads: shares.len(),
        pages_scanned: pages.pages.len() as u64,
        slots_scanned: slots,
        bytes_scanned: heap_bytes,
        nvm_bytes_read: pages.pages.len() as u64 * 24
            + slots * heap::SLOT_HEADER_BYTES
            + run.rows_read_bytes,
        tuples_recovered: run.winners,
        uncommitted_discarded: uncommitted,
        superseded_discarded: run.zeroed.saturating_sub(uncommitted),
        pending_peak: shares.iter().map(|s| s.stats.pending_peak).max().unwrap_or(0),
        scratch_bytes_peak,
        scan_ms,
        index_ms: settle_ms,
        clean_ms,
        free_list_ms: rebuild_ms,
        total_ms,
        phases: vec![
            RecoveryPhase::new("scan", scan_ms, heap_bytes, versions),
            RecoveryPhase::new("settle", settle_ms, 0, run.settled),
            RecoveryPhase::new("clean", clean_ms, run.zeroed * 8, run.zeroed),
            RecoveryPhase::new("rebuild", rebuild_ms, heap_bytes, run.winners),
            RecoveryPhase::new("total", total_ms, heap_bytes, run.winners),
        ],
    }
}

fn read_catalog<B: PmemBackend>(pool: &Pool<B>) -> Result<CatalogDoc> {
    let doc = catalog::read(pool)?.ok_or_else(|| {
        Error::Corrupt(format!(
            "{}: pool has no catalog (not a zen pool, or its creation crashed)",
            pool.path().display()
        ))
    })?;
    if doc.engine != "zen" {
        return Err(Error::WrongEngine { expected: "zen".into(), found: doc.engine });
    }
    Ok(doc)
}

/// The owned pages that are not the system's, each of a known table.
fn heap_pages<B: PmemBackend>(pool: &Pool<B>, doc: &CatalogDoc) -> Result<Vec<(u64, PageOwner)>> {
    let pages: Vec<(u64, PageOwner)> =
        pool.owned_pages()?.into_iter().filter(|(_, o)| o.table != SYSTEM_TABLE).collect();
    for &(page, owner) in &pages {
        if owner.table as usize >= doc.tables.len() {
            return Err(Error::Corrupt(format!(
                "page {page} belongs to unknown table {}",
                owner.table
            )));
        }
    }
    Ok(pages)
}

/// A crash during a catalog rewrite can leave a system page that is neither
/// the catalog nor the floor page (the new page before the root switch, or the
/// old one after it): give it back.
fn release_orphan_system_pages<B: PmemBackend>(pool: &Pool<B>, floor_page: u64) -> Result<()> {
    let root = pool.catalog_root().map(u64::from);
    for (page, owner) in pool.owned_pages()? {
        if owner.table == SYSTEM_TABLE && Some(page) != root && page != floor_page {
            pool.release_page(zen_pmem::SYSTEM_THREAD, page, owner)?;
        }
    }
    Ok(())
}
