//! Recovery of mmdb: checkpoint + log replay.
//!
//! PHASES
//! ```text
//!   pages     classify every owned page: catalog and meta (kept), orphan
//!             system pages (a crashed catalog rewrite: released), log pages
//!             (per worker), checkpoint pages (kept if the root names them,
//!             else released), table pages = rows placed in NVM as volatile
//!             memory by the crashed run (all released)
//!   load      the checkpoint the root names: every row, placed in DRAM while
//!             the budget lasts (budget sized from the checkpoint's row bytes)
//!   logs      each worker's valid prefix (`log.rs`); the bytes after it are
//!             zeroed and the pages after it released, then ONE fence
//!   replay    complete transactions with cts ≥ the checkpoint's ts, in cts
//!             order across workers (the serialisation order of Silo)
//!   indexes   secondary indexes from the final rows; the clock resumes above
//!             every cts seen
//! ```
//! Idempotence: a crash during recovery leaves the same root, the same
//! checkpoint and the same valid log prefixes (zeroing after a prefix and
//! releasing pages after it cannot change it), so the next recovery reaches
//! the same state.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use zen_pmem::{PageOwner, PmemBackend, Pool, SYSTEM_TABLE};

use super::checkpoint::{self, Directory};
use super::layout::{self, CHECKPOINT_TABLE, LOG_TABLE};
use super::log::{self, LogScan, LoggedTxn, WorkerLog};
use super::{CheckpointState, MmdbStore, MmdbTable};
use crate::api::{RecoveryReport, TableId};
use crate::baseline::occ::{Core, Store, Table, dram_budget_bytes, tid};
use crate::baseline::{BACKGROUND_THREAD, recovery_threads, volatile_thread, worker_thread};
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::ts::{self, Clock};

type Tables = Vec<Arc<Table<MmdbTable>>>;

pub fn recover<B: PmemBackend>(pool: Pool<B>, config: &EngineConfig) -> Result<Core<MmdbStore<B>>> {
    let started = Instant::now();
    let (doc, meta) = crate::baseline::open_catalog(&pool, "mmdb", "an mmdb", layout::META_MAGIC)?;
    let root = layout::decode_root(pool.backend().load_u64(meta + layout::OFF_CHECKPOINT_ROOT))
        .map_err(|w| Error::Corrupt(format!("checkpoint root word {w:#x} does not check")))?;
    let thread = BACKGROUND_THREAD;
    let directory = root.map(|page| checkpoint::read_directory(&pool, thread, page)).transpose()?;
    let log_pages = classify_pages(&pool, doc.floor_page, directory.as_ref(), doc.tables.len())?;
    let workers = log_pages.keys().map(|&w| w + 1).max().unwrap_or(0).max(config.max_workers);
    let budget = dram_budget_bytes(config, directory.as_ref().map(|d| d.row_bytes));
    let checkpoint = directory.as_ref().map_or_else(CheckpointState::default, |d| {
        CheckpointState { seq: d.seq, ts: d.ts, directory: Some(d.page), pages: d.pages.clone() }
    });
    let covered = checkpoint.ts;
    if covered >= ts::MAX_CTS / 2 {
        return Err(Error::Corrupt(format!("checkpoint ts {covered} beyond the clock")));
    }
    let row_bytes: Vec<usize> = doc.tables.iter().map(|t| t.row_size()).collect();
    let mut store = MmdbStore::new(pool, doc.floor_page, config, Vec::new(), budget, checkpoint);
    let tables: Tables = doc
        .tables
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let id = TableId(i as u32);
            Arc::new(Table::new(id, s.clone(), store.new_table_ext(id, s)))
        })
        .collect();
    let units = directory.as_ref().map_or(0, |d| d.pages.len()).max(workers);
    let threads = recovery_threads(config, units);
    let mut report = RecoveryReport { threads, ..Default::default() };
    if let Some(d) = &directory {
        load_checkpoint(&store, &tables, d, &row_bytes, threads, &mut report)?;
    }
    report.scan_ms = ms(started);
    let replay_started = Instant::now();
    let mut scans = scan_logs(&store.pool, &log_pages, workers, &row_bytes, covered, threads)?;
    if let Some(t) = scans.iter().flat_map(|s| &s.txns).find(|t| t.cts >= ts::MAX_CTS / 2) {
        return Err(Error::Corrupt(format!(
            "logged transaction with cts {} beyond the clock",
            t.cts
        )));
    }
    for (w, scan) in scans.iter().enumerate() {
        report.pages_scanned += log_pages.get(&w).map_or(0, Vec::len) as u64;
        report.bytes_scanned += scan.bytes;
        report.uncommitted_discarded += scan.incomplete;
    }
    let cleanup_started = Instant::now();
    let logs = clean_log_tails(&store.pool, &mut scans)?;
    store.logs = logs.into_iter().map(crate::sched::Mutex::new).collect();
    let cleanup_ms = ms(cleanup_started);
    let mut txns: Vec<LoggedTxn> = scans.into_iter().flat_map(|s| s.txns).collect();
    txns.sort_by_key(|t| t.cts);
    if let Some(pair) = txns.windows(2).find(|p| p[0].cts == p[1].cts) {
        return Err(Error::Corrupt(format!("two logged transactions share cts {}", pair[0].cts)));
    }
    let max_cts = txns.last().map_or(0, |t| t.cts).max(covered);
    let skipped = txns.iter().take_while(|t| t.cts < covered).count();
    report.superseded_discarded = skipped as u64;
    for txn in &txns[skipped..] {
        replay(&store, &tables, txn)?;
    }
    report.tuples_recovered = rebuild_secondary(&store, &tables)?;
    report.index_ms = ms(replay_started) - cleanup_ms;
    report.free_list_ms = cleanup_ms;
    report.total_ms = ms(started);
    let clock = Clock::resume_above(max_cts);
    Ok(Core::new(store, config, clock, tables, Some(report)))
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// The `pages` phase: release what the crashed run left behind; return each
/// worker's log pages as (page, seq), seq 0 … for a page whose header does
/// not check (ordered after every valid one: only a log's newest page can be
/// torn, since allocating the next one fences).
fn classify_pages<B: PmemBackend>(
    pool: &Pool<B>,
    meta_page: u64,
    directory: Option<&Directory>,
    tables: usize,
) -> Result<HashMap<usize, Vec<(u64, u64)>>> {
    let thread = BACKGROUND_THREAD;
    let root = pool.catalog_root().map(u64::from);
    let live_checkpoint: Vec<u64> =
        directory.map(|d| d.pages.iter().copied().chain([d.page]).collect()).unwrap_or_default();
    let mut logs: HashMap<usize, Vec<(u64, u64)>> = HashMap::new();
    let mut header = [0u8; 32];
    for (page, owner) in pool.owned_pages()? {
        match owner.table {
            SYSTEM_TABLE if Some(page) == root || page == meta_page => {}
            LOG_TABLE => {
                pool.persister(thread).read(pool.page_offset(page), &mut header);
                let seq = layout::decode_log_page_header(&header).map_or(u64::MAX, |(_, s)| s);
                logs.entry(usize::from(owner.worker)).or_default().push((page, seq));
            }
            CHECKPOINT_TABLE if live_checkpoint.contains(&page) => {}
            SYSTEM_TABLE | CHECKPOINT_TABLE => pool.release_page(thread, page, owner)?,
            t if (t as usize) < tables => pool.release_page(thread, page, owner)?,
            t => return Err(Error::Corrupt(format!("page {page} belongs to unknown table {t}"))),
        }
    }
    // Pages whose header does not check go last, each with a distinct seq
    // past the valid ones (the scan stops at the first of them).
    for pages in logs.values_mut() {
        let top = pages.iter().filter(|p| p.1 != u64::MAX).map(|p| p.1).max().unwrap_or(0);
        for (seq, p) in (top + 1..).zip(pages.iter_mut().filter(|p| p.1 == u64::MAX)) {
            p.1 = seq;
        }
    }
    Ok(logs)
}

/// Read every worker's log, `threads` logs at a time (read-only).
fn scan_logs<B: PmemBackend>(
    pool: &Pool<B>,
    log_pages: &HashMap<usize, Vec<(u64, u64)>>,
    workers: usize,
    row_bytes: &[usize],
    covered: u64,
    threads: usize,
) -> Result<Vec<LogScan>> {
    let ids: Vec<usize> = (0..workers).collect();
    let part = workers.div_ceil(threads).max(1);
    let results: Vec<Result<Vec<LogScan>>> = std::thread::scope(|s| {
        let handles: Vec<_> = ids
            .chunks(part)
            .enumerate()
            .map(|(i, mine)| {
                s.spawn(move || {
                    mine.iter()
                        .map(|&w| {
                            let pages = log_pages.get(&w).cloned().unwrap_or_default();
                            log::scan(pool, worker_thread(i), w, pages, row_bytes, covered)
                        })
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a log scan thread panicked")).collect()
    });
    let mut scans = Vec::with_capacity(workers);
    for r in results {
        scans.extend(r?);
    }
    Ok(scans)
}

/// Load the checkpoint's data pages, `threads` at a time: thread i reads
/// with worker i's counters and places rows through its volatile slot.
fn load_checkpoint<B: PmemBackend>(
    store: &MmdbStore<B>,
    tables: &Tables,
    d: &Directory,
    row_bytes: &[usize],
    threads: usize,
    report: &mut RecoveryReport,
) -> Result<()> {
    let part = d.pages.len().div_ceil(threads).max(1);
    let results: Vec<Result<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = d
            .pages
            .chunks(part)
            .enumerate()
            .map(|(i, mine)| s.spawn(move || load_pages(store, tables, d, row_bytes, mine, i)))
            .collect();
        handles.into_iter().map(|h| h.join().expect("a checkpoint load thread panicked")).collect()
    });
    for r in results {
        report.bytes_scanned += r?;
    }
    report.pages_scanned += d.pages.len() as u64;
    Ok(())
}

fn load_pages<B: PmemBackend>(
    store: &MmdbStore<B>,
    tables: &Tables,
    d: &Directory,
    row_bytes: &[usize],
    pages: &[u64],
    thread_index: usize,
) -> Result<u64> {
    let mut bytes = 0;
    for &page in pages {
        bytes += checkpoint::read_data_page(
            &store.pool,
            worker_thread(thread_index),
            page,
            d.seq,
            row_bytes,
            &mut |t, key, row| {
                let t = &tables[t as usize];
                let rid = t.lookup_or_create(key).ok_or_else(|| too_many(t))?;
                t.index.link(key, rid);
                if t.records.get(rid).loc.load(Ordering::Acquire) != 0 {
                    return Err(Error::Corrupt(format!(
                        "checkpoint holds key {key} of table {} twice",
                        t.schema.name
                    )));
                }
                put(store, t, rid, row, 0, volatile_thread(thread_index))
            },
        )?;
    }
    Ok(bytes)
}

fn too_many(t: &Table<MmdbTable>) -> Error {
    Error::Corrupt(format!("table {}: more records than an engine holds", t.schema.name))
}

/// Make `row` the version of `rid` with timestamp `cts`.
fn put<B: PmemBackend>(
    store: &MmdbStore<B>,
    t: &Table<MmdbTable>,
    rid: u64,
    row: &[u8],
    cts: u64,
    thread: u32,
) -> Result<()> {
    let r = t.records.get(rid);
    if r.loc.load(Ordering::Acquire) == 0 {
        store.place_row(t, rid, thread)?;
    }
    let word = tid::make(cts, false);
    store.write_row(t, rid, thread, Some(row), word);
    r.tid.store(word, Ordering::Release);
    Ok(())
}

fn replay<B: PmemBackend>(store: &MmdbStore<B>, tables: &Tables, txn: &LoggedTxn) -> Result<()> {
    for e in &txn.entries {
        let t = tables.get(e.table as usize).ok_or_else(|| {
            Error::Corrupt(format!(
                "logged transaction {} writes unknown table {}",
                txn.cts, e.table
            ))
        })?;
        let rid = t.lookup_or_create(e.key).ok_or_else(|| too_many(t))?;
        match &e.row {
            Some(row) => {
                t.index.link(e.key, rid);
                put(store, t, rid, row, txn.cts, BACKGROUND_THREAD)?
            }
            None => {
                t.index.unlink(e.key);
                let word = tid::make(txn.cts, true);
                store.write_row(t, rid, BACKGROUND_THREAD, None, word);
                t.records.get(rid).tid.store(word, Ordering::Release);
            }
        }
    }
    Ok(())
}

/// Zero each log after its valid prefix, release the pages after it, fence
/// once; returns the logs to append to.
fn clean_log_tails<B: PmemBackend>(
    pool: &Pool<B>,
    scans: &mut [LogScan],
) -> Result<Vec<WorkerLog>> {
    let thread = BACKGROUND_THREAD;
    let p = pool.persister(thread);
    let mut logs = Vec::with_capacity(scans.len());
    let mut wrote = false;
    for (w, scan) in scans.iter_mut().enumerate() {
        if let Some((from, to)) = scan.zero_from {
            // Only bytes that are not already zero need a store.
            let mut tail = vec![0u8; (to - from) as usize];
            pool.backend().read(from, &mut tail);
            if let Some(last) = tail.iter().rposition(|&b| b != 0) {
                p.write_zeros(from, last as u64 + 1);
                p.flush(from, last as u64 + 1);
                wrote = true;
            }
        }
        let owner = PageOwner { table: LOG_TABLE, worker: w as u16 };
        for &page in &scan.drop_pages {
            pool.release_page(thread, page, owner)?;
        }
        logs.push(std::mem::take(&mut scan.kept));
    }
    if wrote {
        p.fence();
    }
    Ok(logs)
}

/// Secondary indexes from the recovered rows; returns the live rows.
fn rebuild_secondary<B: PmemBackend>(store: &MmdbStore<B>, tables: &Tables) -> Result<u64> {
    let mut live = 0;
    for t in tables {
        let mut row = vec![0u8; t.row_bytes];
        for (key, rid) in t.entries() {
            if tid::is_absent(t.records.get(rid).tid.load(Ordering::Acquire)) {
                continue;
            }
            live += 1;
            if !t.secondary.is_empty() {
                store.read_placed(t, rid, BACKGROUND_THREAD, &mut row);
                t.add_secondary(&row, key);
            }
        }
    }
    Ok(live)
}
