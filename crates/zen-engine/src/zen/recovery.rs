//! Recovery (Alg. 2) and the engine's structural invariant check.
//!
//! PHASES
//!   scan      one thread per group of regions reads every heap page once and
//!             lists the non-empty slots; per worker it tracks the largest LP
//!             timestamp. ts-commit[w] = max(that, the worker's commit floor).
//!   classify  a slot is committed iff its Tx-CTS ≤ ts-commit of the worker
//!             whose region holds it (all of a transaction's tuples are in its
//!             worker's region, and its LP is set only after they are durable);
//!             per (table, key) the newest committed version wins.
//!   clean     floors are raised to ts-commit and fenced FIRST, then word 1 of
//!             every losing slot (uncommitted, superseded, or a winning
//!             tombstone) is zeroed and one fence makes it durable. Raising the
//!             floors first keeps the next recovery's ts-commit unchanged even
//!             if a zeroed slot carried the LP bit, so recovery is idempotent.
//!   index     the primary and secondary indexes are rebuilt from the winners;
//!             free lists are rebuilt from the slot states; the clock resumes
//!             above every timestamp seen.
//!
//! Corrupt pools (unknown table in a page, a page header that disagrees with
//! the catalog) give `Error::Corrupt`, never an unchecked offset.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use zen_pmem::{PageOwner, PmemBackend, Pool, SYSTEM_TABLE};

use super::Shared;
use super::cache::{LOC_EMPTY, loc_entry};
use crate::api::RecoveryReport;
use crate::catalog;
use crate::cc::silo;
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::heap::{self, SlotHeader};
use crate::ts::{self, Clock};

/// A non-empty slot found by the scan.
#[derive(Debug, Clone, Copy)]
struct Found {
    table: u32,
    worker: usize,
    key: u64,
    cts: u64,
    deleted: bool,
    slot: u64,
    /// On a page whose header was not yet durable: necessarily uncommitted.
    fresh: bool,
}

struct ScanResult {
    found: Vec<Found>,
    /// Pages whose header is torn (each word zero or right): rewritten by `clean`.
    fresh_pages: Vec<(u64, [u8; 24])>,
    max_lp: HashMap<usize, u64>,
    max_cts: u64,
    slots: u64,
    bytes: u64,
}

pub fn recover<B: PmemBackend>(pool: Pool<B>, config: &EngineConfig) -> Result<Shared<B>> {
    let started = Instant::now();
    let doc = catalog::read(&pool)?.ok_or_else(|| {
        Error::Corrupt(format!(
            "{}: pool has no catalog (not a zen pool, or its creation crashed)",
            pool.path().display()
        ))
    })?;
    if doc.engine != "zen" {
        return Err(Error::WrongEngine { expected: "zen".into(), found: doc.engine });
    }
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
    let regions = pages
        .iter()
        .map(|(_, o)| usize::from(o.worker) + 1)
        .max()
        .unwrap_or(0)
        .max(config.max_workers);
    if regions > 250 || regions as u64 * 8 > pool.page_size() {
        return Err(Error::Corrupt(format!("pool has pages of worker {}", regions - 1)));
    }
    let slot_sizes: Vec<u64> = doc.tables.iter().map(|t| heap::slot_size(t.row_size())).collect();
    let threads = config
        .recovery_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, regions.max(1));
    let scan = scan_pages(&pool, &pages, &slot_sizes, threads)?;
    let scan_ms = ms(started);

    let floors: Vec<u64> = (0..regions)
        .map(|w| pool.backend().load_u64(catalog::floor_offset(&pool, doc.floor_page, w)))
        .collect();
    let ts_commit: Vec<u64> =
        (0..regions).map(|w| scan.max_lp.get(&w).copied().unwrap_or(0).max(floors[w])).collect();
    // Timestamps stay far below `ts::MAX_CTS` in any pool we wrote (2^52
    // commits): one beyond half of it is corruption, and resuming the clock
    // above it would exhaust the timestamp space.
    let limit = ts::MAX_CTS / 2;
    if let Some(cts) =
        std::iter::once(scan.max_cts).chain(floors.iter().copied()).find(|&c| c >= limit)
    {
        return Err(Error::Corrupt(format!("timestamp {cts:#x} beyond the clock's range")));
    }
    let (winners, losers, uncommitted) = classify(&scan.found, &ts_commit);
    // Everything is validated: from here on recovery writes to the pool.
    pool.mark_in_use();
    release_orphan_system_pages(&pool, doc.floor_page)?;
    let tombstones_first = config.fault == Some(crate::config::Fault::RecoveryTombstonesFirst);
    let skip_floors = config.fault == Some(crate::config::Fault::NoCommitFloor);
    clean(
        &pool,
        doc.floor_page,
        &ts_commit,
        &floors,
        &losers,
        &scan.fresh_pages,
        tombstones_first,
        skip_floors,
    );

    let index_started = Instant::now();
    let floor_max = ts_commit.iter().copied().max().unwrap_or(0);
    let clock = Clock::resume_above(scan.max_cts.max(floor_max));
    let data_bytes: u64 =
        winners.values().map(|w| doc.tables[w.table as usize].row_size() as u64).sum();
    let mut shared = Shared::new(pool, config, regions, doc.floor_page, clock, None, data_bytes);
    for (w, &c) in ts_commit.iter().enumerate() {
        shared.floors[w].store(c, Ordering::Relaxed);
        shared.durable_cts[w].store(c, Ordering::Relaxed);
    }
    shared.install_tables(&doc.tables);
    let tuples = rebuild_indexes(&shared, &winners)?;
    let index_ms = ms(index_started);
    let free_started = Instant::now();
    rebuild_free_lists(&shared, &pages, &winners)?;
    shared.rebalance_cache();
    let report = RecoveryReport {
        threads,
        pages_scanned: pages.len() as u64,
        slots_scanned: scan.slots,
        bytes_scanned: scan.bytes,
        tuples_recovered: tuples,
        uncommitted_discarded: uncommitted,
        superseded_discarded: losers.len() - uncommitted,
        scan_ms,
        index_ms,
        free_list_ms: ms(free_started),
        total_ms: ms(started),
    };
    shared.recovery = Some(report);
    Ok(shared)
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

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Phase 1, in parallel: pages are dealt to threads by worker, so each
/// thread reads with the counters of the workers it scans.
fn scan_pages<B: PmemBackend>(
    pool: &Pool<B>,
    pages: &[(u64, PageOwner)],
    slot_sizes: &[u64],
    threads: usize,
) -> Result<ScanResult> {
    let results: Vec<Result<ScanResult>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let mine: Vec<_> = pages
                    .iter()
                    .filter(|(_, o)| usize::from(o.worker) % threads == i)
                    .copied()
                    .collect();
                scope.spawn(move || scan_some(pool, &mine, slot_sizes))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("recovery scan thread panicked")).collect()
    });
    let mut all = ScanResult {
        found: Vec::new(),
        fresh_pages: Vec::new(),
        max_lp: HashMap::new(),
        max_cts: 0,
        slots: 0,
        bytes: 0,
    };
    for r in results {
        let r = r?;
        all.found.extend(r.found);
        all.fresh_pages.extend(r.fresh_pages);
        for (w, lp) in r.max_lp {
            let e = all.max_lp.entry(w).or_default();
            *e = (*e).max(lp);
        }
        all.max_cts = all.max_cts.max(r.max_cts);
        all.slots += r.slots;
        all.bytes += r.bytes;
    }
    Ok(all)
}

fn scan_some<B: PmemBackend>(
    pool: &Pool<B>,
    pages: &[(u64, PageOwner)],
    slot_sizes: &[u64],
) -> Result<ScanResult> {
    let mut out = ScanResult {
        found: Vec::new(),
        fresh_pages: Vec::new(),
        max_lp: HashMap::new(),
        max_cts: 0,
        slots: 0,
        bytes: 0,
    };
    let mut buf = vec![0u8; pool.page_size() as usize];
    for &(page, owner) in pages {
        let worker = usize::from(owner.worker);
        let base = pool.page_offset(page);
        pool.persister(Shared::<B>::thread_of(worker)).read(base, &mut buf);
        out.bytes += buf.len() as u64;
        let slot_size = slot_sizes[owner.table as usize];
        let word = |at: usize| u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"));
        // A page allocated just before a crash may have no header yet (all
        // zero): it is `fresh` below, and `clean` writes its header.
        let expected = heap::page_header(owner.table, owner.worker, slot_size);
        // A header is flushed before the fence of the first commit that uses
        // its page, so a torn header (every word zero or right) means no
        // commit ever reached the page: its slots are all uncommitted.
        let fresh = buf[..24] != expected;
        if fresh {
            let torn = (0..3).all(|i| {
                let got = &buf[i * 8..i * 8 + 8];
                got == &expected[i * 8..i * 8 + 8] || got.iter().all(|&b| b == 0)
            });
            if !torn {
                return Err(Error::Corrupt(format!(
                    "page {page}: header disagrees with catalog/page table"
                )));
            }
            out.fresh_pages.push((base, expected));
        }
        for i in 0..heap::slots_per_page(pool.page_size(), slot_size) {
            let at = (heap::PAGE_HEADER_BYTES + i * slot_size) as usize;
            out.slots += 1;
            let Some(h) = SlotHeader::decode(word(at), word(at + 8)) else { continue };
            if h.lp {
                let e = out.max_lp.entry(worker).or_default();
                *e = (*e).max(h.cts);
            }
            out.max_cts = out.max_cts.max(h.cts);
            out.found.push(Found {
                table: owner.table,
                worker,
                key: h.key,
                cts: h.cts,
                deleted: h.deleted,
                slot: base + at as u64,
                fresh,
            });
        }
    }
    Ok(out)
}

/// Phase 2: winners by (table, key); losing slots, with winning tombstones
/// last (`Losers::tombstones`); and the number of uncommitted slots.
struct Losers {
    older: Vec<u64>,
    tombstones: Vec<u64>,
}

impl Losers {
    fn len(&self) -> u64 {
        (self.older.len() + self.tombstones.len()) as u64
    }
}

fn classify(found: &[Found], ts_commit: &[u64]) -> (HashMap<(u32, u64), Found>, Losers, u64) {
    let mut winners: HashMap<(u32, u64), Found> = HashMap::new();
    let mut losers = Vec::new();
    let mut uncommitted = 0;
    for f in found {
        if f.fresh || f.cts > ts_commit[f.worker] {
            losers.push(f.slot);
            uncommitted += 1;
            continue;
        }
        match winners.get_mut(&(f.table, f.key)) {
            Some(w) if w.cts >= f.cts => losers.push(f.slot),
            Some(w) => {
                losers.push(w.slot);
                *w = *f;
            }
            None => {
                winners.insert((f.table, f.key), *f);
            }
        }
    }
    let mut tombstones = Vec::new();
    winners.retain(|_, w| {
        if w.deleted {
            tombstones.push(w.slot);
        }
        !w.deleted
    });
    (winners, Losers { older: losers, tombstones }, uncommitted)
}

#[allow(clippy::too_many_arguments)]
/// Phase 3: floors first (fenced); then torn page headers rewritten and every
/// losing slot's word 1 zeroed (fenced); winning tombstones last (fenced), so
/// no crash can leave a tombstone gone while an older version remains.
fn clean<B: PmemBackend>(
    pool: &Pool<B>,
    floor_page: u64,
    ts_commit: &[u64],
    floors: &[u64],
    losers: &Losers,
    fresh_pages: &[(u64, [u8; 24])],
    tombstones_first: bool,
    skip_floors: bool,
) {
    let p = pool.persister(zen_pmem::SYSTEM_THREAD);
    for (w, (&c, &f)) in ts_commit.iter().zip(floors).enumerate() {
        if c > f && !skip_floors {
            let at = catalog::floor_offset(pool, floor_page, w);
            p.write_u64_atomic(at, c);
            p.flush(at, 8);
        }
    }
    p.fence();
    for (base, header) in fresh_pages {
        p.write(*base, header);
        p.flush(*base, header.len() as u64);
    }
    let first = if tombstones_first { &losers.tombstones } else { &losers.older };
    for &slot in first {
        p.write_u64_atomic(slot + 8, 0);
        p.flush(slot + 8, 8);
    }
    if tombstones_first {
        // Injected bug: tombstones and older versions in one fence epoch.
        for &slot in &losers.older {
            p.write_u64_atomic(slot + 8, 0);
            p.flush(slot + 8, 8);
        }
        p.fence();
        return;
    }
    p.fence();
    if !losers.tombstones.is_empty() {
        for &slot in &losers.tombstones {
            p.write_u64_atomic(slot + 8, 0);
            p.flush(slot + 8, 8);
        }
        p.fence();
    }
}

fn rebuild_indexes<B: PmemBackend>(
    shared: &Shared<B>,
    winners: &HashMap<(u32, u64), Found>,
) -> Result<u64> {
    let tables = shared.tables();
    let mut row = Vec::new();
    for w in winners.values() {
        let t = &tables[w.table as usize];
        let rid = t.records.allocate().ok_or_else(|| Error::Corrupt("too many records".into()))?;
        t.records.loc(rid).store(w.slot, Ordering::Relaxed);
        if t.index.get_or_insert(w.key, rid) != rid {
            return Err(Error::Corrupt(format!(
                "duplicate key {} in table {}",
                w.key, t.schema.name
            )));
        }
        t.index.link(w.key, rid);
        if !t.secondary.is_empty() {
            row.resize(t.row_bytes, 0);
            shared.pool.backend().read(w.slot + heap::SLOT_HEADER_BYTES, &mut row);
            t.add_secondary(&row, w.key);
        }
    }
    Ok(winners.len() as u64)
}

fn rebuild_free_lists<B: PmemBackend>(
    shared: &Shared<B>,
    pages: &[(u64, PageOwner)],
    winners: &HashMap<(u32, u64), Found>,
) -> Result<()> {
    let tables = shared.tables();
    let mut live: HashMap<u64, Vec<bool>> = HashMap::new();
    for w in winners.values() {
        let page = w.slot / shared.pool.page_size();
        let t = &tables[w.table as usize];
        let per_page = heap::slots_per_page(shared.pool.page_size(), t.slot_size) as usize;
        let index =
            (w.slot - shared.pool.page_offset(page) - heap::PAGE_HEADER_BYTES) / t.slot_size;
        live.entry(page).or_insert_with(|| vec![false; per_page])[index as usize] = true;
    }
    for &(page, owner) in pages {
        let t = &tables[owner.table as usize];
        let worker = usize::from(owner.worker);
        shared.page_worker[page as usize].store(worker as u32, Ordering::Release);
        let per_page = heap::slots_per_page(shared.pool.page_size(), t.slot_size) as usize;
        let bits = live.remove(&page).unwrap_or_else(|| vec![false; per_page]);
        t.heaps[worker].lock().add_recovered_page(page, shared.pool.page_offset(page), &bits);
    }
    Ok(())
}

/// Structural invariants, for a quiescent engine (no running transactions):
/// (R1) every index entry's location holds a version of that key;
/// (R2) no two records share a slot; (R3) free slots are disjoint from live ones.
pub fn check_invariants<B: PmemBackend>(shared: &Shared<B>) -> Result<()> {
    let mut live = std::collections::HashSet::new();
    for t in shared.tables().iter() {
        for (key, rid) in t.index.iter() {
            let loc = t.records.loc(rid).load(Ordering::Acquire);
            let slot = match loc_entry(loc) {
                _ if loc == LOC_EMPTY => continue,
                Some((w, idx)) => {
                    let e = t.caches[w].entry(idx);
                    let tid = e.cc[0].load(Ordering::Acquire);
                    if e.record.load(Ordering::Acquire) != rid + 1
                        || e.key.load(Ordering::Acquire) != key
                        || tid & silo::OBSOLETE != 0
                    {
                        return Err(Error::Corrupt(format!(
                            "table {}: key {key}: cache entry mismatch",
                            t.schema.name
                        )));
                    }
                    if tid & silo::ABSENT != 0 {
                        continue;
                    }
                    e.slot.load(Ordering::Acquire)
                }
                None => loc,
            };
            let h = SlotHeader::decode(
                shared.pool.backend().load_u64(slot),
                shared.pool.backend().load_u64(slot + 8),
            );
            match h {
                Some(h) if h.key == key && !h.deleted => {}
                other => {
                    return Err(Error::Corrupt(format!(
                        "table {}: key {key}: slot {slot} holds {other:?}",
                        t.schema.name
                    )));
                }
            }
            if !live.insert(slot) {
                return Err(Error::Corrupt(format!(
                    "slot {slot} is reachable from two index entries"
                )));
            }
        }
        for h in t.heaps.iter() {
            for slot in h.lock().free_slots() {
                if live.contains(&slot) {
                    return Err(Error::Corrupt(format!(
                        "table {}: slot {slot} is both free and live",
                        t.schema.name
                    )));
                }
            }
        }
    }
    Ok(())
}
