//! Recovery of wbl and its structural invariant check.
//!
//! PHASES
//! ```text
//!   record    the valid ring record of the largest seq: (cp, cd)
//!   scan      every heap page once (header: whole, torn = each word zero or
//!             right, else Corrupt); every non-empty slot classified:
//!               cts ≤ cp        committed, a candidate for its key
//!               cp < cts ≤ cd   undone (a transaction not covered by a record)
//!               cts > cd        Corrupt: no version is written above cd
//!   classify  per (table, key) the committed version of largest cts wins
//!   clean     torn page headers rewritten; undone and superseded slots
//!             zeroed; ONE fence; then winning tombstones zeroed; a fence
//!   rebuild   records (TID = winner's cts, head = its slot, one version),
//!             secondary indexes, free lists; the clock resumes above cd
//! ```
//! Idempotence: the record is not changed, zeroing a loser never changes a
//! winner, and a tombstone is zeroed only after every older version of its
//! key is durably gone, so a crash inside recovery leaves the same logical
//! state to the next one. The first commit after recovery draws a cts above
//! cd and so writes a new record before any version; by then every version
//! in (cp, cd] is durably zero, so the new record's cp, which covers them,
//! resurrects nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use zen_pmem::{PageOwner, PmemBackend, Pool, SYSTEM_TABLE};

use super::layout::{self, WblRecord};
use super::{WblStore, WblTable, space};
use crate::api::{RecoveryReport, TableId};
use crate::baseline::occ::{Core, Store, Table, tid};
use crate::baseline::{BACKGROUND_THREAD, recovery_threads, worker_thread};
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::ts::{self, Clock};

#[derive(Debug, Clone, Copy)]
struct Found {
    table: u32,
    key: u64,
    cts: u64,
    deleted: bool,
    slot: u64,
}

pub fn recover<B: PmemBackend>(pool: Pool<B>, config: &EngineConfig) -> Result<Core<WblStore<B>>> {
    let started = Instant::now();
    let (doc, meta) = crate::baseline::open_catalog(&pool, "wbl", "a wbl", layout::META_MAGIC)?;
    let last = last_record(&pool, meta)?;
    if last.cd >= ts::MAX_CTS / 2 {
        return Err(Error::Corrupt(format!("write-behind record {last:?}: cd beyond the clock")));
    }
    let thread = BACKGROUND_THREAD;
    let root = pool.catalog_root().map(u64::from);
    let mut pages = Vec::new();
    for (page, owner) in pool.owned_pages()? {
        match owner.table {
            SYSTEM_TABLE if Some(page) == root || page == doc.floor_page => {}
            SYSTEM_TABLE => pool.release_page(thread, page, owner)?,
            t if (t as usize) < doc.tables.len() => pages.push((page, owner)),
            t => return Err(Error::Corrupt(format!("page {page} belongs to unknown table {t}"))),
        }
    }
    let regions = pages
        .iter()
        .map(|(_, o)| usize::from(o.worker) + 1)
        .max()
        .unwrap_or(0)
        .max(config.max_workers);
    if regions > 250 {
        return Err(Error::Corrupt(format!("pool has pages of worker {}", regions - 1)));
    }
    let slot_sizes: Vec<u64> = doc.tables.iter().map(|t| layout::slot_size(t.row_size())).collect();
    let mut report = RecoveryReport { threads: 1, ..Default::default() };
    let threads = recovery_threads(config, pages.len());
    report.threads = threads;
    let scan = scan_pages(&pool, &pages, &slot_sizes, last, threads, &mut report)?;
    report.scan_ms = ms(started);
    let (winners, losers, tombstones) = classify(&scan.found, &scan.undone);
    report.uncommitted_discarded = scan.undone.len() as u64;
    report.superseded_discarded = (losers.len() + tombstones.len() - scan.undone.len()) as u64;
    clean(&pool, &scan.torn_headers, &losers, &tombstones);
    let index_started = Instant::now();
    let data_bytes: u64 =
        winners.iter().map(|w| doc.tables[w.table as usize].row_size() as u64).sum();
    let store = WblStore::new(pool, doc.floor_page, config, regions, last, Some(data_bytes));
    let tables: Vec<Arc<Table<WblTable>>> = doc
        .tables
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let id = TableId(i as u32);
            Arc::new(Table::new(id, s.clone(), store.new_table_ext(id, s)))
        })
        .collect();
    rebuild_records(&store, &tables, &winners)?;
    report.tuples_recovered = winners.len() as u64;
    report.index_ms = ms(index_started);
    let free_started = Instant::now();
    rebuild_free_lists(&store, &tables, &pages, &winners);
    report.free_list_ms = ms(free_started);
    report.total_ms = ms(started);
    let clock = Clock::resume_above(last.cd.max(scan.max_cts));
    Ok(Core::new(store, config, clock, tables, Some(report)))
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// The valid record of the largest seq in the ring.
pub fn last_record<B: PmemBackend>(pool: &Pool<B>, meta: u64) -> Result<WblRecord> {
    let mut buf = vec![0u8; (layout::RING_RECORDS * layout::RECORD_BYTES) as usize];
    pool.persister(BACKGROUND_THREAD).read(meta + layout::RING_OFFSET, &mut buf);
    buf.chunks(layout::RECORD_BYTES as usize)
        .enumerate()
        .filter_map(|(i, b)| {
            WblRecord::decode(b).filter(|r| r.seq % layout::RING_RECORDS == i as u64)
        })
        .max_by_key(|r| r.seq)
        .ok_or_else(|| Error::Corrupt("no whole write-behind record in the ring".into()))
}

struct Scan {
    found: Vec<Found>,
    undone: Vec<u64>,
    torn_headers: Vec<(u64, [u8; 24])>,
    max_cts: u64,
}

/// The scan phase, pages dealt to `threads` threads; thread i reads with
/// worker i's counters (no worker is registered during recovery).
fn scan_pages<B: PmemBackend>(
    pool: &Pool<B>,
    pages: &[(u64, PageOwner)],
    slot_sizes: &[u64],
    last: WblRecord,
    threads: usize,
    report: &mut RecoveryReport,
) -> Result<Scan> {
    let part = pages.len().div_ceil(threads).max(1);
    let results: Vec<Result<(Scan, RecoveryReport)>> = std::thread::scope(|s| {
        let handles: Vec<_> = pages
            .chunks(part)
            .enumerate()
            .map(|(i, mine)| {
                s.spawn(move || {
                    let mut r = RecoveryReport::default();
                    scan_some(pool, worker_thread(i), mine, slot_sizes, last, &mut r)
                        .map(|x| (x, r))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a recovery scan thread panicked")).collect()
    });
    let mut out =
        Scan { found: Vec::new(), undone: Vec::new(), torn_headers: Vec::new(), max_cts: 0 };
    for result in results {
        let (scan, r) = result?;
        out.found.extend(scan.found);
        out.undone.extend(scan.undone);
        out.torn_headers.extend(scan.torn_headers);
        out.max_cts = out.max_cts.max(scan.max_cts);
        report.pages_scanned += r.pages_scanned;
        report.bytes_scanned += r.bytes_scanned;
        report.slots_scanned += r.slots_scanned;
    }
    Ok(out)
}

fn scan_some<B: PmemBackend>(
    pool: &Pool<B>,
    thread: u32,
    pages: &[(u64, PageOwner)],
    slot_sizes: &[u64],
    last: WblRecord,
    report: &mut RecoveryReport,
) -> Result<Scan> {
    let mut out =
        Scan { found: Vec::new(), undone: Vec::new(), torn_headers: Vec::new(), max_cts: 0 };
    let mut buf = vec![0u8; pool.page_size() as usize];
    let p = pool.persister(thread);
    for &(page, owner) in pages {
        let base = pool.page_offset(page);
        p.read(base, &mut buf);
        report.pages_scanned += 1;
        report.bytes_scanned += buf.len() as u64;
        let slot_size = slot_sizes[owner.table as usize];
        let expected = layout::page_header(owner.table, owner.worker, slot_size);
        if buf[..24] != expected {
            let torn = (0..3).all(|i| {
                let got = &buf[i * 8..i * 8 + 8];
                got == &expected[i * 8..i * 8 + 8] || got.iter().all(|&b| b == 0)
            });
            if !torn {
                return Err(Error::Corrupt(format!(
                    "page {page}: header disagrees with the page table"
                )));
            }
            out.torn_headers.push((base, expected));
        }
        let word = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
        for i in 0..layout::slots_per_page(pool.page_size(), slot_size) {
            let at = (layout::PAGE_HEADER + i * slot_size) as usize;
            report.slots_scanned += 1;
            let cts = word(at + layout::OFF_CTS as usize);
            if cts == 0 {
                continue;
            }
            let slot = base + at as u64;
            if cts > last.cd {
                return Err(Error::Corrupt(format!(
                    "slot {slot}: version cts {cts} above the dirty bound {}",
                    last.cd
                )));
            }
            out.max_cts = out.max_cts.max(cts);
            if cts > last.cp {
                out.undone.push(slot);
                continue;
            }
            let w0 = word(at);
            out.found.push(Found {
                table: owner.table,
                key: w0 & !layout::DELETED,
                cts,
                deleted: w0 & layout::DELETED != 0,
                slot,
            });
        }
    }
    Ok(out)
}

/// Winners (live, by key), losers (undone + superseded), winning tombstones.
fn classify(found: &[Found], undone: &[u64]) -> (Vec<Found>, Vec<u64>, Vec<u64>) {
    let mut best: HashMap<(u32, u64), Found> = HashMap::new();
    let mut losers: Vec<u64> = undone.to_vec();
    for f in found {
        match best.get_mut(&(f.table, f.key)) {
            Some(w) if w.cts >= f.cts => losers.push(f.slot),
            Some(w) => {
                losers.push(w.slot);
                *w = *f;
            }
            None => {
                best.insert((f.table, f.key), *f);
            }
        }
    }
    let mut tombstones = Vec::new();
    let mut winners = Vec::new();
    for w in best.into_values() {
        if w.deleted {
            tombstones.push(w.slot);
        } else {
            winners.push(w);
        }
    }
    (winners, losers, tombstones)
}

/// Torn headers and losers first (one fence), winning tombstones after.
fn clean<B: PmemBackend>(pool: &Pool<B>, torn: &[(u64, [u8; 24])], losers: &[u64], tombs: &[u64]) {
    let p = pool.persister(BACKGROUND_THREAD);
    for (base, header) in torn {
        p.write(*base, header);
        p.flush(*base, header.len() as u64);
    }
    for &slot in losers {
        p.write_u64_atomic(slot + layout::OFF_CTS, 0);
        p.flush(slot + layout::OFF_CTS, 8);
    }
    if !torn.is_empty() || !losers.is_empty() {
        p.fence();
    }
    for &slot in tombs {
        p.write_u64_atomic(slot + layout::OFF_CTS, 0);
        p.flush(slot + layout::OFF_CTS, 8);
    }
    if !tombs.is_empty() {
        p.fence();
    }
}

fn rebuild_records<B: PmemBackend>(
    store: &WblStore<B>,
    tables: &[Arc<Table<WblTable>>],
    winners: &[Found],
) -> Result<()> {
    let mut row = Vec::new();
    let p = store.pool.persister(BACKGROUND_THREAD);
    for w in winners {
        let t = &tables[w.table as usize];
        let rid = t.lookup_or_create(w.key).ok_or_else(|| {
            Error::Corrupt(format!("table {}: more records than an engine holds", t.schema.name))
        })?;
        t.index.link(w.key, rid);
        let r = t.records.get(rid);
        if r.loc.load(Ordering::Acquire) != 0 {
            return Err(Error::Corrupt(format!("table {}: key {} twice", t.schema.name, w.key)));
        }
        r.loc.store(w.slot, Ordering::Release);
        r.tid.store(tid::make(w.cts, false), Ordering::Release);
        space::add_version(&r.aux);
        if !t.secondary.is_empty() {
            row.resize(t.row_bytes, 0);
            p.read(w.slot + layout::SLOT_HEADER, &mut row);
            t.add_secondary(&row, w.key);
        }
    }
    Ok(())
}

fn rebuild_free_lists<B: PmemBackend>(
    store: &WblStore<B>,
    tables: &[Arc<Table<WblTable>>],
    pages: &[(u64, PageOwner)],
    winners: &[Found],
) {
    crate::baseline::wbl::space::rebuild_regions(
        store.pool.page_size(),
        |page| store.pool.page_offset(page),
        pages,
        winners.iter().map(|w| (w.table, w.slot)),
        |table| tables[table as usize].ext.slot_size,
        |table, worker| &tables[table as usize].ext.regions[worker],
    );
}

/// (W1)–(W5) of `wbl.rs`, for a quiescent engine.
pub fn check_invariants<B: PmemBackend>(core: &Core<WblStore<B>>) -> Result<()> {
    let store = &core.store;
    let backend = store.pool.backend();
    let mut seen = HashSet::new();
    let mut row = Vec::new();
    for t in core.tables().iter() {
        let corrupt = |what: String| Error::Corrupt(format!("table {}: {what}", t.schema.name));
        for (key, rid) in t.entries() {
            let r = t.records.get(rid);
            let word = r.tid.load(Ordering::Acquire);
            let head = r.loc.load(Ordering::Acquire);
            if head == 0 {
                if tid::is_absent(word) {
                    continue;
                }
                return Err(corrupt(format!("key {key}: live record without a version")));
            }
            let w0 = backend.load_u64(head);
            let cts = backend.load_u64(head + layout::OFF_CTS);
            let deleted = w0 & layout::DELETED != 0;
            if w0 & !layout::DELETED != key
                || cts != tid::cts_of(word)
                || deleted != tid::is_absent(word)
            {
                return Err(corrupt(format!(
                    "key {key}: head slot {head} holds key {} cts {cts} deleted {deleted}, TID {word:#x}",
                    w0 & !layout::DELETED
                )));
            }
            if !seen.insert(head) {
                return Err(corrupt(format!("slot {head} is the head of two records")));
            }
        }
        for region in t.ext.regions.iter() {
            for slot in region.lock().free_slots() {
                if seen.contains(&slot) || backend.load_u64(slot + layout::OFF_CTS) != 0 {
                    return Err(corrupt(format!("free slot {slot} is a head or not empty")));
                }
            }
        }
        for (rid, cts, cached) in t.ext.cache.published() {
            let r = t.records.get(rid);
            let word = r.tid.load(Ordering::Acquire);
            if tid::is_absent(word) || tid::cts_of(word) != cts {
                continue;
            }
            row.resize(t.row_bytes, 0);
            backend.read(r.loc.load(Ordering::Acquire) + layout::SLOT_HEADER, &mut row);
            if cached[..t.row_bytes] != row[..] {
                return Err(corrupt(format!("cache entry of record {rid} differs from NVM")));
            }
        }
    }
    let ring = last_record(&store.pool, store.pool.page_offset(store.meta_page))?;
    let seen_by_workers = store.group.last();
    if ring != seen_by_workers {
        return Err(Error::Corrupt(format!(
            "last record in NVM {ring:?} is not the one the workers see {seen_by_workers:?}"
        )));
    }
    Ok(())
}
