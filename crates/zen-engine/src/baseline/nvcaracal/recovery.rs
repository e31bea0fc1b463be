//! nvcaracal recovery (NVCaracal §4.3, §5.4): validate, scan and revert,
//! replay.
//!
//! 1. **load**: catalog and meta page; E = durable epoch, S = seal. S must
//!    be E or E + 1. When S = E + 1 the input log of epoch S is read and
//!    checked (header epoch, checksum, procedure-set fingerprint, every
//!    procedure and table known, every entry in bounds) — *before anything
//!    is written*, so a corrupt log is a typed error with the pool unchanged.
//! 2. **scan**: every slot of every table page. A version with epoch > E
//!    was written by the crashed epoch: it is to be reverted (and is only
//!    legal when S = E + 1: otherwise the pool is corrupt). The newest
//!    remaining version is the row (live, or a tombstone: free slot). The
//!    primary index and, from the live rows' bytes, the secondary indexes
//!    (DRAM only, never persisted) are rebuilt here; so is the major
//!    collector's list (slots with two versions ≤ E, live or free: of
//!    pooled tables, and of every table with minor GC off), which the next
//!    epoch's init phase collects (NVCaracal §5.5), and each pooled table's
//!    value free list: every value on its value pages that no version ≤ E
//!    names (the crashed epoch's allocations are named only by versions
//!    being reverted); a version naming anything but a value of its
//!    table's pool, or a value named twice, is `Corrupt` (before any
//!    write).
//!
//!    `RecoveryReport::bytes_scanned` is exactly what steps 1 and 2 read
//!    from the pool's data (each phase's share in its `bytes`): the meta
//!    page's five words and its log page ids, the crashed epoch's log
//!    (header and payload) when S = E + 1, then per slot both versions'
//!    epoch words, per kept version its flags (and a pooled live one its
//!    value offset), per live row its key, and the rows of tables with
//!    secondary indexes (a pooled one through its offset). The catalog
//!    and page table (read by every engine's open) and the replay's reads
//!    (a normal epoch's, in `nvm_bytes_read`) are not in it.
//! 3. **revert**: each such version's epoch word zeroed, flushed; one fence.
//!    Idempotent, so a crash inside recovery is recovered the same way.
//! 4. **replay**: epoch S re-run from its logged inputs on one thread
//!    (deterministic: the same final state as the crashed run would have
//!    reached), writing rows and the epoch mark as a normal epoch does.
//!    A version the crashed epoch wrote was zeroed in step 3, so the
//!    replay's final write of a row finds that version empty and simply
//!    writes it: NVCaracal's rule (§4.5, case 3: a second version with the
//!    crashed epoch's SID is overwritten, not collected) by construction.

use std::sync::Arc;
use std::time::Instant;

use zen_pmem::{PageOwner, PmemBackend, Pool};

use super::{NvcaracalEngine, RowRef, Table, layout};
use crate::api::{RecoveryPhase, RecoveryReport, TableId};
use crate::catalog;
use crate::config::EngineConfig;
use crate::det::{OneShot, ProcId};
use crate::error::{Error, Result};

pub(super) fn recover<B: PmemBackend>(
    pool: Pool<B>,
    config: &EngineConfig,
) -> Result<NvcaracalEngine<B>> {
    let t0 = Instant::now();
    let doc = catalog::read(&pool)?
        .ok_or_else(|| Error::Corrupt(format!("{}: no catalog", pool.path().display())))?;
    if doc.engine != "nvcaracal" {
        return Err(Error::WrongEngine { expected: "nvcaracal".into(), found: doc.engine });
    }
    let b = pool.backend();
    let meta = pool.page_offset(doc.floor_page);
    let corrupt = |m: String| Error::Corrupt(format!("{}: {m}", pool.path().display()));
    if b.load_u64(meta) != layout::META_MAGIC {
        return Err(corrupt(format!("meta page {} has no nvcaracal magic", doc.floor_page)));
    }
    let durable = b.load_u64(meta + layout::META_EPOCH);
    let seal = b.load_u64(meta + layout::META_SEAL);
    let count = b.load_u64(meta + layout::META_LOG_PAGES);
    if count == 0 || layout::META_LOG_IDS + count * 8 > pool.page_size() {
        return Err(corrupt(format!("meta page names {count} log pages")));
    }
    let mut log_pages = Vec::new();
    for i in 0..count {
        let p = b.load_u64(meta + layout::META_LOG_IDS + 8 * i);
        if p == 0 || p >= pool.page_count() || pool.page_owner(p)? != Some(PageOwner::SYSTEM) {
            return Err(corrupt(format!("log page {i} ({p}) is not a system page")));
        }
        log_pages.push(p);
    }
    let row_bytes = b.load_u64(meta + layout::META_ROW_BYTES);
    // Bytes read from the pool's data, phase by phase (the catalog and
    // the page table, which every engine's open reads, are not counted):
    // here the meta page's five words and its log page ids.
    let mut load_bytes = 5 * 8 + count * 8;
    if layout::check_row_bytes(row_bytes).is_err() {
        return Err(corrupt(format!("meta page names a persistent row of {row_bytes} bytes")));
    }
    if seal != durable && seal != durable + 1 {
        return Err(corrupt(format!("log seal {seal} is neither epoch {durable} nor the next")));
    }
    let tables: Vec<Arc<Table>> = doc
        .tables
        .iter()
        .enumerate()
        .map(|(i, s)| Arc::new(Table::new(s.clone(), i as u32, row_bytes)))
        .collect();
    let mut engine = NvcaracalEngine::assemble(
        pool,
        doc.floor_page,
        log_pages,
        tables,
        durable,
        row_bytes,
        config,
        None,
    );
    let before = engine.pool.total_counters();

    // 1. The crashed epoch's inputs, validated before any write.
    let replay = if seal == durable + 1 {
        let (txns, read) = load_log(&engine, seal)?;
        load_bytes += read;
        Some(txns)
    } else {
        None
    };
    let load_ms = t0.elapsed().as_secs_f64() * 1e3;

    // 2. Scan every slot.
    let t1 = Instant::now();
    let b = engine.pool.backend();
    let mut reverts: Vec<u64> = Vec::new();
    // Slots with two versions for the major collector: all, with minor GC
    // off; else those of pooled tables (NVCaracal §5.5).
    let mut gc: Vec<(u32, u64)> = Vec::new();
    // Per table, the values named by versions <= E (live values).
    let mut named: Vec<Vec<u64>> = vec![Vec::new(); engine.tables.read().len()];
    let mut value_pages: Vec<(u64, PageOwner)> = Vec::new();
    let (mut pages, mut slots, mut live) = (0u64, 0u64, 0u64);
    // Bytes the scan reads: per slot both versions' epoch words; per
    // version kept its flags word, and a pooled live version's value
    // offset; per live row its key; the rows of tables with secondary
    // indexes (through the value's offset when pooled). Value pages are
    // not read: their free lists are computed from the offsets.
    let mut scan_bytes = 0u64;
    let tables = engine.tables.read().clone();
    let owned = engine.pool.owned_pages()?;
    let thread = super::super::BACKGROUND_THREAD;
    let mut row = Vec::new();
    for (page, owner) in owned {
        if owner == PageOwner::SYSTEM {
            continue;
        }
        let t = tables.get(owner.table as usize).ok_or_else(|| {
            Error::Corrupt(format!("page {page} owned by unknown table {}", owner.table))
        })?;
        if owner.worker == layout::VALUE_PAGE && t.lay.pooled {
            value_pages.push((page, owner));
            continue;
        }
        if owner.worker != 0 {
            return Err(Error::Corrupt(format!(
                "page {page} of table {} has owner word {} (not a slot or value page)",
                t.schema.name, owner.worker
            )));
        }
        pages += 1;
        let start = engine.pool.page_offset(page);
        let per_page = engine.pool.page_size() / t.slot_size;
        let mut a = t.alloc.lock();
        let mut index = t.index.write();
        for i in 0..per_page {
            slots += 1;
            let slot = start + i * t.slot_size;
            let mut best: Option<(u64, usize, u64)> = None;
            let mut kept = 0;
            for v in 0..2 {
                let at = slot + t.version_offset(v);
                let e = b.load_u64(at);
                scan_bytes += 8;
                if e == 0 {
                    continue;
                }
                if e > durable {
                    if e != seal || seal != durable + 1 {
                        return Err(Error::Corrupt(format!(
                            "table {} slot {slot}: version of epoch {e}, but the durable epoch is {durable} and the log seal {seal}",
                            t.schema.name
                        )));
                    }
                    reverts.push(at);
                    continue;
                }
                kept += 1;
                let flags = b.load_u64(at + 8);
                scan_bytes += 8;
                if t.lay.pooled && flags & layout::FLAG_TOMBSTONE == 0 {
                    named[t.id as usize].push(b.load_u64(at + layout::VERSION_HEADER));
                    scan_bytes += 8;
                }
                if best.is_none_or(|(be, _, _)| e > be) {
                    best = Some((e, v, flags));
                }
            }
            if kept == 2 && (!config.nvcaracal_minor_gc || t.lay.pooled) {
                gc.push((t.id, slot));
            }
            match best {
                Some((e, v, flags)) if flags & layout::FLAG_TOMBSTONE == 0 => {
                    let key = b.load_u64(slot);
                    scan_bytes += 8;
                    let r = RowRef { slot, newest: v as u8, epoch: e };
                    if !t.secondary.is_empty() {
                        row.resize(t.row, 0);
                        engine.read_row(thread, t, r, &mut row);
                        scan_bytes += t.row as u64 + if t.lay.pooled { 8 } else { 0 };
                        for s in &t.secondary {
                            s.insert(&row, key);
                        }
                    }
                    if index.insert(key, r).is_some() {
                        return Err(Error::Corrupt(format!(
                            "table {}: key {key} in two slots",
                            t.schema.name
                        )));
                    }
                    live += 1;
                }
                _ => a.free.push(slot),
            }
        }
        a.pages.push(page);
        a.next = start + per_page * t.slot_size;
        a.end = a.next;
    }
    // The value pools: every value on a table's value pages that no
    // version <= E names is free (the crashed epoch's allocations, named
    // only by reverted versions, included); a version naming anything else
    // is a corrupt pointer (a typed error, before any write).
    value_pages.sort_unstable_by_key(|&(page, _)| page);
    for (id, named) in named.iter_mut().enumerate() {
        let t = &tables[id];
        if !t.lay.pooled {
            continue;
        }
        let pages: Vec<u64> =
            value_pages.iter().filter(|(_, o)| o.table == t.id).map(|&(p, _)| p).collect();
        let free = super::value_pool_free(&engine.pool, t, &pages, named)?;
        let mut a = t.values.lock();
        a.free = free;
        a.pages = pages;
        (a.next, a.end) = (0, 0);
    }
    drop(tables);
    *engine.gc_pending.lock() = gc;
    let scan_ms = t1.elapsed().as_secs_f64() * 1e3;

    // 3. Revert the crashed epoch's versions.
    let t2 = Instant::now();
    {
        let p = engine.pool.persister(thread);
        for &at in &reverts {
            p.write_u64_atomic(at, 0);
            p.flush(at, 8);
        }
        if !reverts.is_empty() {
            p.fence();
        }
    }
    let revert_ms = t2.elapsed().as_secs_f64() * 1e3;

    // 4. Replay the crashed epoch from its inputs.
    let t3 = Instant::now();
    let replayed = match &replay {
        Some(txns) => {
            let _g = engine.seq.lock();
            engine.run_epoch(seal, txns, &[thread], false)?;
            txns.len() as u64
        }
        None => 0,
    };
    let replay_ms = t3.elapsed().as_secs_f64() * 1e3;
    let read = engine.pool.total_counters().since(&before).bytes_read;
    let total_ms = t0.elapsed().as_secs_f64() * 1e3;
    let scanned = load_bytes + scan_bytes;
    engine.recovery = Some(RecoveryReport {
        threads: 1,
        pages_scanned: pages,
        slots_scanned: slots,
        bytes_scanned: scanned,
        nvm_bytes_read: read,
        tuples_recovered: live,
        uncommitted_discarded: reverts.len() as u64,
        scan_ms,
        clean_ms: revert_ms,
        total_ms,
        phases: vec![
            RecoveryPhase::new(
                "load-log",
                load_ms,
                load_bytes,
                replay.as_ref().map_or(0, |r| r.len() as u64),
            ),
            RecoveryPhase::new("scan", scan_ms, scan_bytes, live),
            RecoveryPhase::new("revert", revert_ms, reverts.len() as u64 * 8, reverts.len() as u64),
            RecoveryPhase::new("replay", replay_ms, 0, replayed),
        ],
        ..RecoveryReport::default()
    });
    engine.pool.mark_in_use();
    Ok(engine)
}

/// The logged inputs of epoch `epoch`, fully validated, and the bytes of
/// the log read (its header and payload).
fn load_log<B: PmemBackend>(
    engine: &NvcaracalEngine<B>,
    epoch: u64,
) -> Result<(Vec<OneShot>, u64)> {
    let bad = |detail: String| Error::InputLogCorrupt { epoch, detail };
    let thread = super::super::BACKGROUND_THREAD;
    let mut h = [0u8; 64];
    engine.log_read(thread, 0, &mut h);
    let (e, txns, len, crc, fingerprint) = layout::decode_header(&h);
    if e != epoch {
        return Err(bad(format!("the log holds epoch {e}")));
    }
    if layout::LOG_HEADER.saturating_add(len) > engine.log_capacity() {
        return Err(bad(format!("payload of {len} bytes exceeds the log")));
    }
    if fingerprint != engine.procedures.fingerprint() {
        return Err(bad(format!(
            "logged with procedure set {fingerprint:#x}, this engine has {:#x} (open it with the same procedures)",
            engine.procedures.fingerprint()
        )));
    }
    let mut payload = vec![0u8; len as usize];
    engine.log_read(thread, layout::LOG_HEADER, &mut payload);
    if u64::from(crc32c::crc32c(&payload)) != crc {
        return Err(bad("checksum mismatch".into()));
    }
    let tables = engine.tables.read().len();
    let txns = layout::decode_payload(epoch, &payload, txns)?
        .into_iter()
        .map(|t| {
            if !engine.procedures.contains(ProcId(t.proc)) {
                return Err(bad(format!("unknown procedure id {}", t.proc)));
            }
            if let Some(&(tb, _)) = t.writes.iter().find(|w| w.0 as usize >= tables) {
                return Err(bad(format!("unknown table id {tb}")));
            }
            Ok(OneShot {
                proc: ProcId(t.proc),
                input: t.input,
                writes: t.writes.into_iter().map(|(tb, k)| (TableId(tb), k)).collect(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((txns, layout::LOG_HEADER + len))
}
