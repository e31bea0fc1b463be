//! Recovery of falcon and its structural invariant check.
//!
//! PHASES (reported as the `scan`, `index` and `free lists` phases)
//! ```text
//!   rings     every log page: each sealed record (a committed transaction,
//!             whole); a page whose header is not whole is skipped
//!   replay    the records of every worker in cts order; an entry is applied
//!             (slot header [key|deleted, cts], then the row) unless its slot
//!             holds a write with a larger cts; write-backs; ONE fence
//!   scan      every heap page once: header whole (or torn: each word zero
//!             or right, rewritten), each slot live (key, cts), a tombstone
//!             or never written
//!   index     per (table, key) the live slot of largest cts; records,
//!             secondary indexes
//!   free      every other slot to its region's free list; the log pages
//!             released (each worker formats a new ring at its first commit)
//! ```
//!
//! WHY REPLAYING EVERY SEALED RECORD IS SAFE. A slot's cts never decreases:
//! updates and deletes of its key draw larger timestamps (the core draws a
//! cts above every TID it read or locked), and a reclaimed tombstone's slot
//! is reused only by an insert drawn after the tombstone was durable. A
//! record whose writes are all durable is "stale": each of its entries
//! meets a slot whose cts is at least its own, and is skipped (or, equal,
//! rewritten with the same bytes). A record whose writes may not all be
//! durable is intact (`window.rs`, REUSE) and replayed. So recovery needs
//! no per-worker watermark, only the seals.
//!
//! Idempotence: recovery writes only replayed slots (the same bytes each
//! time) and torn page headers, then releases log pages after the fence
//! that made the replay durable; a crash anywhere in it leaves the next
//! recovery the same records to replay and the same heap to scan.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use zen_pmem::{PageOwner, PmemBackend, Pool, SYSTEM_TABLE};

use super::layout::{self, LOG_TABLE};
use super::window::{self, FoundRecord};
use super::{FalconStore, FalconTable};
use crate::api::{RecoveryReport, TableId};
use crate::baseline::occ::{Core, Store, Table, tid};
use crate::baseline::{BACKGROUND_THREAD, recovery_threads, worker_thread};
use crate::catalog;
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::ts::{self, Clock};

#[derive(Debug, Clone, Copy)]
struct Live {
    table: u32,
    key: u64,
    cts: u64,
    slot: u64,
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

pub fn recover<B: PmemBackend>(
    pool: Pool<B>,
    config: &EngineConfig,
) -> Result<Core<FalconStore<B>>> {
    let started = Instant::now();
    let doc = catalog::read(&pool)?.ok_or_else(|| {
        Error::Corrupt(format!(
            "{}: pool has no catalog (not a falcon pool, or its creation crashed)",
            pool.path().display()
        ))
    })?;
    if doc.engine != "falcon" {
        return Err(Error::WrongEngine { expected: "falcon".into(), found: doc.engine });
    }
    let meta = pool.page_offset(doc.floor_page);
    if pool.backend().load_u64(meta) != layout::META_MAGIC {
        return Err(Error::Corrupt(format!("meta page {}: bad magic", doc.floor_page)));
    }
    let thread = BACKGROUND_THREAD;
    let root = pool.catalog_root().map(u64::from);
    let (mut heap, mut logs) = (Vec::new(), Vec::new());
    for (page, owner) in pool.owned_pages()? {
        match owner.table {
            SYSTEM_TABLE if Some(page) == root || page == doc.floor_page => {}
            SYSTEM_TABLE => pool.release_page(thread, page, owner)?,
            LOG_TABLE => logs.push((page, owner)),
            t if (t as usize) < doc.tables.len() => heap.push((page, owner)),
            t => return Err(Error::Corrupt(format!("page {page} belongs to unknown table {t}"))),
        }
    }
    let regions = heap
        .iter()
        .chain(&logs)
        .map(|(_, o)| usize::from(o.worker) + 1)
        .max()
        .unwrap_or(0)
        .max(config.max_workers);
    if regions > 250 {
        return Err(Error::Corrupt(format!("pool has pages of worker {}", regions - 1)));
    }
    let row_bytes: Vec<usize> = doc.tables.iter().map(|t| t.row_size()).collect();
    let slot_sizes: Vec<u64> = row_bytes.iter().map(|&r| layout::slot_size(r)).collect();
    let heap_owner: HashMap<u64, PageOwner> = heap.iter().copied().collect();
    let mut report = RecoveryReport::default();
    let (records, max_seq) = read_rings(&pool, &logs, &row_bytes, &mut report)?;
    let max_record_cts = records.iter().map(|r| r.cts).max().unwrap_or(0);
    let geometry = Geometry { pool: &pool, heap_owner: &heap_owner, slot_sizes: &slot_sizes };
    replay(&geometry, &records, &mut report)?;
    let threads = recovery_threads(config, heap.len());
    report.threads = threads;
    let scan = scan_pages(&pool, &heap, &slot_sizes, threads, &mut report)?;
    report.scan_ms = ms(started);
    let index_started = Instant::now();
    let (winners, duplicates) = choose(&scan.live);
    report.superseded_discarded += duplicates as u64;
    let store = FalconStore::new(pool, doc.floor_page, config, regions, max_seq + 1);
    let tables: Vec<Arc<Table<FalconTable>>> = doc
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
    rebuild_free_lists(&store, &tables, &heap, &winners);
    for &(page, owner) in &logs {
        store.pool.release_page(thread, page, owner)?;
    }
    for w in store.windows.iter() {
        w.lock().durable_seq = max_seq;
    }
    report.free_list_ms = ms(free_started);
    report.total_ms = ms(started);
    let top = max_record_cts.max(scan.max_cts);
    if top >= ts::MAX_CTS / 2 {
        return Err(Error::Corrupt(format!("timestamp {top} beyond the clock")));
    }
    Ok(Core::new(store, config, Clock::resume_above(top), tables, Some(report)))
}

/// Every sealed record of every ring, and the largest seq found.
fn read_rings<B: PmemBackend>(
    pool: &Pool<B>,
    logs: &[(u64, PageOwner)],
    row_bytes: &[usize],
    report: &mut RecoveryReport,
) -> Result<(Vec<FoundRecord>, u64)> {
    let mut buf = vec![0u8; pool.page_size() as usize];
    let p = pool.persister(BACKGROUND_THREAD);
    let (mut records, mut max_seq) = (Vec::new(), 0);
    for &(page, owner) in logs {
        p.read(pool.page_offset(page), &mut buf);
        report.pages_scanned += 1;
        report.bytes_scanned += buf.len() as u64;
        let Some(scan) = window::scan_ring(&buf, owner.worker, row_bytes)? else { continue };
        report.uncommitted_discarded += scan.unsealed;
        max_seq = scan.records.iter().map(|r| r.seq).fold(max_seq, u64::max);
        records.extend(scan.records);
    }
    Ok((records, max_seq))
}

/// Where slots may be.
struct Geometry<'a, B: PmemBackend> {
    pool: &'a Pool<B>,
    heap_owner: &'a HashMap<u64, PageOwner>,
    slot_sizes: &'a [u64],
}

impl<B: PmemBackend> Geometry<'_, B> {
    /// Check that `slot` is a slot of a heap page of `table`.
    fn check_slot(&self, table: u32, slot: u64) -> Result<()> {
        let page_size = self.pool.page_size();
        let page = slot / page_size;
        let owner = self.heap_owner.get(&page);
        let size = self.slot_sizes.get(table as usize).copied().unwrap_or(0);
        let within = slot % page_size;
        let ok = owner.is_some_and(|o| o.table == table)
            && size > 0
            && within >= layout::PAGE_HEADER
            && (within - layout::PAGE_HEADER).is_multiple_of(size)
            && within + size <= page_size;
        if !ok {
            return Err(Error::Corrupt(format!(
                "a sealed record names slot {slot} of table {table}, which is not one"
            )));
        }
        Ok(())
    }
}

fn replay<B: PmemBackend>(
    g: &Geometry<'_, B>,
    records: &[FoundRecord],
    report: &mut RecoveryReport,
) -> Result<()> {
    let mut order: Vec<&FoundRecord> = records.iter().collect();
    order.sort_by_key(|r| r.cts);
    let p = g.pool.persister(BACKGROUND_THREAD);
    let mut wrote = false;
    for r in order {
        for e in &r.entries {
            g.check_slot(e.table, e.slot)?;
            if g.pool.backend().load_u64(e.slot + layout::OFF_CTS) > r.cts {
                report.superseded_discarded += 1;
                continue;
            }
            p.write(e.slot, &layout::slot_header(e.key, e.row.is_none(), r.cts));
            let mut bytes = layout::SLOT_HEADER;
            if let Some(row) = &e.row {
                p.write(e.slot + layout::SLOT_HEADER, row);
                bytes += row.len() as u64;
            }
            p.flush(e.slot, bytes);
            wrote = true;
        }
    }
    if wrote {
        p.fence();
    }
    Ok(())
}

#[derive(Default)]
struct Scan {
    live: Vec<Live>,
    torn_headers: Vec<(u64, [u8; 24])>,
    max_cts: u64,
}

/// The scan phase, pages dealt to `threads` threads.
fn scan_pages<B: PmemBackend>(
    pool: &Pool<B>,
    pages: &[(u64, PageOwner)],
    slot_sizes: &[u64],
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
                    scan_some(pool, worker_thread(i), mine, slot_sizes, &mut r).map(|x| (x, r))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a recovery scan thread panicked")).collect()
    });
    let mut out = Scan::default();
    for result in results {
        let (scan, r) = result?;
        out.live.extend(scan.live);
        out.torn_headers.extend(scan.torn_headers);
        out.max_cts = out.max_cts.max(scan.max_cts);
        report.pages_scanned += r.pages_scanned;
        report.bytes_scanned += r.bytes_scanned;
        report.slots_scanned += r.slots_scanned;
    }
    let p = pool.persister(BACKGROUND_THREAD);
    for (base, header) in &out.torn_headers {
        p.write(*base, header);
        p.flush(*base, header.len() as u64);
    }
    if !out.torn_headers.is_empty() {
        p.fence();
    }
    Ok(out)
}

fn scan_some<B: PmemBackend>(
    pool: &Pool<B>,
    thread: u32,
    pages: &[(u64, PageOwner)],
    slot_sizes: &[u64],
    report: &mut RecoveryReport,
) -> Result<Scan> {
    let mut out = Scan::default();
    let mut buf = vec![0u8; pool.page_size() as usize];
    let p = pool.persister(thread);
    for &(page, owner) in pages {
        let base = pool.page_offset(page);
        p.read(base, &mut buf);
        report.pages_scanned += 1;
        report.bytes_scanned += buf.len() as u64;
        let slot_size = slot_sizes[owner.table as usize];
        let expected = layout::heap_header(owner.table, owner.worker, slot_size);
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
            out.max_cts = out.max_cts.max(cts);
            let w0 = word(at);
            if w0 & layout::DELETED == 0 {
                out.live.push(Live { table: owner.table, key: w0, cts, slot: base + at as u64 });
            }
        }
    }
    Ok(out)
}

/// Per (table, key) the live slot of largest cts; how many were passed over.
fn choose(live: &[Live]) -> (Vec<Live>, usize) {
    let mut best: HashMap<(u32, u64), Live> = HashMap::new();
    let mut passed = 0;
    for l in live {
        match best.get_mut(&(l.table, l.key)) {
            Some(w) => {
                passed += 1;
                if l.cts > w.cts {
                    *w = *l;
                }
            }
            None => {
                best.insert((l.table, l.key), *l);
            }
        }
    }
    (best.into_values().collect(), passed)
}

fn rebuild_records<B: PmemBackend>(
    store: &FalconStore<B>,
    tables: &[Arc<Table<FalconTable>>],
    winners: &[Live],
) -> Result<()> {
    let mut row = Vec::new();
    let p = store.pool.persister(BACKGROUND_THREAD);
    for w in winners {
        let t = &tables[w.table as usize];
        if w.key > crate::schema::MAX_KEY {
            return Err(Error::Corrupt(format!(
                "table {}: key {} out of range",
                t.schema.name, w.key
            )));
        }
        let rid = t.lookup_or_create(w.key).ok_or_else(|| {
            Error::Corrupt(format!("table {}: more records than an engine holds", t.schema.name))
        })?;
        t.index.link(w.key, rid);
        let r = t.records.get(rid);
        r.loc.store(w.slot, Ordering::Release);
        r.tid.store(tid::make(w.cts, false), Ordering::Release);
        if !t.secondary.is_empty() {
            row.resize(t.row_bytes, 0);
            p.read(w.slot + layout::SLOT_HEADER, &mut row);
            t.add_secondary(&row, w.key);
        }
    }
    Ok(())
}

fn rebuild_free_lists<B: PmemBackend>(
    store: &FalconStore<B>,
    tables: &[Arc<Table<FalconTable>>],
    pages: &[(u64, PageOwner)],
    winners: &[Live],
) {
    let page_size = store.pool.page_size();
    let mut live: HashMap<u64, Vec<bool>> = HashMap::new();
    for w in winners {
        let t = &tables[w.table as usize];
        let page = w.slot / page_size;
        let per_page = layout::slots_per_page(page_size, t.ext.slot_size) as usize;
        let index = (w.slot - page * page_size - layout::PAGE_HEADER) / t.ext.slot_size;
        live.entry(page).or_insert_with(|| vec![false; per_page])[index as usize] = true;
    }
    for &(page, owner) in pages {
        let t = &tables[owner.table as usize];
        let bits = live.remove(&page).unwrap_or_default();
        t.ext.regions[usize::from(owner.worker)].lock().add_recovered_page(
            page,
            store.pool.page_offset(page),
            &bits,
        );
    }
}

/// (F1)–(F4) of `falcon.rs`, for a quiescent engine.
pub fn check_invariants<B: PmemBackend>(core: &Core<FalconStore<B>>) -> Result<()> {
    let store = &core.store;
    let backend = store.pool.backend();
    let page_size = store.pool.page_size();
    let mut seen = HashSet::new();
    for t in core.tables().iter() {
        let corrupt = |what: String| Error::Corrupt(format!("table {}: {what}", t.schema.name));
        let pages: HashSet<u64> =
            t.ext.regions.iter().flat_map(|r| r.lock().pages.clone()).collect();
        for (key, rid) in t.entries() {
            let r = t.records.get(rid);
            let word = r.tid.load(Ordering::Acquire);
            let slot = r.loc.load(Ordering::Acquire);
            if slot == 0 {
                if tid::is_absent(word) {
                    continue;
                }
                return Err(corrupt(format!("key {key}: live record without a slot")));
            }
            let within = slot % page_size;
            if !pages.contains(&(slot / page_size))
                || within < layout::PAGE_HEADER
                || !(within - layout::PAGE_HEADER).is_multiple_of(t.ext.slot_size)
            {
                return Err(corrupt(format!("key {key}: slot {slot} is not a slot of its table")));
            }
            let w0 = backend.load_u64(slot);
            let cts = backend.load_u64(slot + layout::OFF_CTS);
            let deleted = w0 & layout::DELETED != 0;
            if w0 & !layout::DELETED != key
                || cts != tid::cts_of(word)
                || deleted != tid::is_absent(word)
            {
                return Err(corrupt(format!(
                    "key {key}: slot {slot} holds key {} cts {cts} deleted {deleted}, TID {word:#x}",
                    w0 & !layout::DELETED
                )));
            }
            if !seen.insert(slot) {
                return Err(corrupt(format!("slot {slot} belongs to two records")));
            }
        }
        for region in t.ext.regions.iter() {
            for slot in region.lock().free_slots() {
                if seen.contains(&slot) {
                    return Err(corrupt(format!("free slot {slot} belongs to a record")));
                }
            }
        }
    }
    Ok(())
}
