//! `falcon`: in-place updates for persistent caches (Falcon, Zhang et al.,
//! SOSP '23), in its "DRAM Index" configuration, on the shared OCC core.
//!
//! WHAT LIVES WHERE
//! ```text
//!   DRAM   indexes; record words (TID, the tuple's slot); per worker the
//!          hot-tuple LRU and the garbage queue of tombstones
//!   NVM    catalog; meta page; the tuple heap: ONE slot per tuple, updated
//!          in place ([key|deleted][cts][row], `falcon/layout.rs`); one log
//!          page per worker holding its redo ring (`falcon/window.rs`)
//! ```
//! No tuple cache: reads copy the row from its NVM slot (counted as NVM
//! reads), as Falcon does.
//!
//! COMMIT (Falcon Alg. 1 on Silo; the OCC core's phases, `occ.rs`)
//! ```text
//!   prepare   a slot for each new key; the redo record (every written row,
//!             whole, with its slot) built in DRAM; its size checked against
//!             the ring (LogWindowOverflow: a typed, non-retryable abort)
//!   persist   the record into the ring, sealed (the seal is the commit
//!             mark). ADR: flush it, ONE fence, acknowledge. eADR: nothing
//!             to flush (the Inp variants write it back as a hint); the
//!             record stays in the cache
//!   install   each row written in place, slot header [key, cts] with it;
//!             the core releases each TID as it goes
//!   leave     `sfence` (eADR: acknowledge now; a store is in the
//!             persistent cache once a fence drained the store buffer), then
//!             the hinted flush: `clwb` of the contiguous lines of each
//!             written tuple, except hot ones (eADR only)
//! ```
//! Every commit is durable when it returns (`Durability::Lazy` changes
//! nothing: the in-place writes may not start before the record is
//! durable). Fences per commit: 2 under ADR, 1 under eADR.
//!
//! RECOVERY (`falcon/recovery.rs`): every sealed record of every ring,
//! replayed in cts order (an entry is applied to its slot unless the slot
//! holds a newer write: slot cts never decreases, so replaying a stale
//! record changes nothing); write-backs and one fence; then the heap is
//! scanned to rebuild the DRAM indexes and free lists ("DRAM Index"); the
//! log pages are released.
//!
//! SPACE: Zen's lightweight management as in wbl (`wbl/space.rs`): DRAM
//! free lists per (table, worker) region. A key keeps its slot for as long
//! as its record lives, deletes included (a delete writes a tombstone in
//! place, and a re-insert reuses the slot). A tombstone goes back to the
//! free list once it is durable; its slot is then reused by another key
//! with a larger cts, or stays a tombstone.
//!
//! Invariants (checked by `check_invariants`): (F1) a live record's slot
//! holds its key, not deleted, with the TID's cts; an absent record has no
//! slot or its tombstone with the TID's cts; (F2) no slot belongs to two
//! records; (F3) free slots belong to no record; (F4) every record's slot
//! lies on a slot boundary of a heap page of its table.
//!
//! PROTOCOLS (Falcon §5.2.1): `--cc silo` (Falcon's OCC), `no-wait` (its
//! 2PL; `wait-die` and `dl-detect` too), `to` (single-version timestamp
//! ordering) and `mvcc` (timestamp ordering, old versions in the core's
//! DRAM version heap), all in the OCC core (`occ/protocol.rs`); the persist
//! path above is the same for each.
//!
//! WHAT IT DOES NOT DO (and `docs/design/falcon.md` says why)
//!   MV2PL / MVOCC (the version heap serves MVCC, i.e. MVTO, only); no persistent index
//!   (Falcon's default NVM index is Dash/NBTree in NVM; we implement its
//!   "DRAM Index" variant); rows are written and logged whole (the API
//!   updates whole rows; Falcon logs and writes the changed columns).

pub mod hot;
pub mod layout;
mod recovery;
pub mod variant;
pub mod window;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sched::Mutex;
use zen_pmem::{
    CounterSnapshot, Marker, PageOwner, PersistenceDomain, PmemBackend, Pool, SYSTEM_THREAD,
};

use super::occ::{Core, OccEngine, Store, Table, Tables, WriteItem, WriteKind, tid};
use super::wbl::space::Region;
use super::{BACKGROUND_THREAD, backend_options, worker_thread};
use crate::api::{Durability, EngineStatus, TableId};
use crate::catalog::{self, CatalogDoc};
use crate::config::{BaselineFault, EngineConfig, EngineKind};
use crate::error::{AbortReason, Error, Result};
use crate::schema::TableSchema;
use crate::ts::Clock;
use hot::HotTuples;
pub use variant::{DataFlush, FalconVariant};
use window::Window;

/// The falcon engine on backend `B`.
pub type FalconEngine<B> = OccEngine<FalconStore<B>>;

/// Tombstones examined per commit for reclamation.
const GC_BATCH: usize = 64;

/// The store of falcon. See the module docs.
pub struct FalconStore<B: PmemBackend> {
    pub pool: Pool<B>,
    meta_page: u64,
    regions: usize,
    variant: FalconVariant,
    eadr: bool,
    /// Bytes of each worker's ring.
    ring_bytes: u64,
    hot_tuples: usize,
    windows: Box<[Mutex<Window>]>,
    fault: Option<BaselineFault>,
    gc_reclaimed: AtomicU64,
}

/// Per-table state: the worker regions of tuple slots.
pub struct FalconTable {
    pub slot_size: u64,
    pub regions: Box<[Mutex<Region>]>,
}

/// A tombstone waiting to be reclaimed.
#[derive(Debug, Clone, Copy)]
struct Tombstone {
    table: u32,
    rid: u64,
    slot: u64,
    cts: u64,
    seq: u64,
}

/// Per-worker state.
pub struct FalconLocal {
    worker: usize,
    /// The redo record being committed: header room, entries, seal room.
    record: Vec<u8>,
    entries: u32,
    /// Tuples written by the transaction being committed: (slot, bytes).
    written: Vec<(u64, u64)>,
    hot: HotTuples,
    tombstones: VecDeque<Tombstone>,
}

impl<B: PmemBackend> FalconEngine<B> {
    /// Create a new pool per `config` and an empty engine on it.
    pub fn create(config: &EngineConfig) -> Result<Self> {
        Self::create_on(super::create_pool(config)?, config)
    }

    /// Build an empty engine on a freshly formatted pool.
    pub fn create_on(pool: Pool<B>, config: &EngineConfig) -> Result<Self> {
        check_protocol(config)?;
        super::require_no_catalog(&pool)?;
        let meta_page = pool.allocate_page(SYSTEM_THREAD, PageOwner::SYSTEM)?;
        let p = pool.persister(SYSTEM_THREAD);
        let base = pool.page_offset(meta_page);
        p.write_u64_atomic(base, layout::META_MAGIC);
        p.persist(base, 8);
        let doc = CatalogDoc { engine: "falcon".into(), floor_page: meta_page, tables: Vec::new() };
        catalog::write(&pool, SYSTEM_THREAD, &doc)?;
        let store = FalconStore::new(pool, meta_page, config, config.max_workers, 1);
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
        check_protocol(config)?;
        Ok(OccEngine::from_core(recovery::recover(pool, config)?))
    }

    /// Close without the clean shutdown and hand back the pool (tests).
    pub fn into_pool(self) -> Option<Pool<B>> {
        self.into_inner().map(|core| core.store.pool)
    }

    /// The variant this engine runs.
    pub fn variant(&self) -> FalconVariant {
        self.core().store.variant
    }
}

impl<B: PmemBackend> FalconStore<B> {
    fn new(
        pool: Pool<B>,
        meta_page: u64,
        config: &EngineConfig,
        regions: usize,
        first_seq: u64,
    ) -> Self {
        let ring_bytes = ring_bytes(config, pool.page_size());
        let windows = (0..regions.max(config.max_workers))
            .map(|_| Mutex::new(Window { seq: first_seq, ..Window::default() }))
            .collect();
        FalconStore {
            eadr: pool.domain() == PersistenceDomain::Eadr,
            pool,
            meta_page,
            regions,
            variant: config.falcon_variant,
            ring_bytes,
            hot_tuples: config.falcon_hot_tuples,
            windows,
            fault: config.baseline_fault,
            gc_reclaimed: AtomicU64::new(0),
        }
    }

    /// A free slot of `worker`'s region of `t` (a new page if needed).
    fn allocate_slot(&self, t: &Table<FalconTable>, worker: usize) -> Result<u64> {
        let mut region = t.ext.regions[worker].lock();
        if let Some(slot) = region.allocate() {
            return Ok(slot);
        }
        let thread = worker_thread(worker);
        let owner = PageOwner { table: t.id.0, worker: worker as u16 };
        let page = self.pool.allocate_page(thread, owner).map_err(|e| {
            if e.is_retryable() { Error::Abort(AbortReason::OutOfSpace) } else { e.into() }
        })?;
        let offset = self.pool.page_offset(page);
        let p = self.pool.persister(thread);
        p.write(offset, &layout::heap_header(t.id.0, worker as u16, t.ext.slot_size));
        p.flush(offset, 24);
        region.add_page(page, offset);
        Ok(region.allocate().expect("a new page has free slots"))
    }

    /// Under eADR, which tuples a commit writes back; under ADR all of them.
    fn data_flush(&self) -> DataFlush {
        if self.eadr { self.variant.data_flush() } else { DataFlush::All }
    }
}

/// The protocols falcon runs (`occ/protocol.rs`); the crash harness builds
/// engines on pools without `EngineConfig::validate`, so this is checked
/// here too.
fn check_protocol(config: &EngineConfig) -> Result<()> {
    if EngineKind::Falcon.supports(config.cc) {
        return Ok(());
    }
    let allowed: Vec<&str> = EngineKind::Falcon.supported_cc().iter().map(|c| c.name()).collect();
    Err(Error::InvalidConfig(format!(
        "--engine falcon does not run --cc {}; it supports: {}",
        config.cc.name(),
        allowed.join(", ")
    )))
}

/// Bytes of each worker's ring: the window (at most a page's room), or the
/// whole page for the Inp variants.
pub fn ring_bytes(config: &EngineConfig, page_size: u64) -> u64 {
    let room = page_size - layout::PAGE_HEADER;
    if config.falcon_variant.small_window() {
        config.falcon_window_bytes.min(room) / 8 * 8
    } else {
        room / 8 * 8
    }
}

/// Give back the slots `prepare` took for new keys (an abort).
fn free_new_slots(writes: &mut [WriteItem], tables: &Tables<FalconTable>, worker: usize) {
    for w in writes.iter_mut().filter(|w| w.aux & NEW_SLOT != 0) {
        tables[w.table as usize].ext.regions[worker].lock().free(w.aux & !NEW_SLOT);
        w.aux = 0;
    }
}

/// Marks a slot in `WriteItem::aux` that `prepare` allocated (slots are
/// pool offsets, far below 2^62).
const NEW_SLOT: u64 = 1 << 62;

fn slot_of(w: &WriteItem) -> u64 {
    w.aux & !NEW_SLOT
}

/// Reclaim this worker's durable tombstones (module docs, SPACE).
fn collect_tombstones<B: PmemBackend>(core: &Core<FalconStore<B>>, local: &mut FalconLocal) {
    let durable = core.store.windows[local.worker].lock().durable_seq;
    let tables = core.tables();
    for _ in 0..GC_BATCH {
        let Some(&g) = local.tombstones.front() else { break };
        if g.seq > durable {
            break;
        }
        local.tombstones.pop_front();
        let t = &tables[g.table as usize];
        let r = t.records.get(g.rid);
        let want = tid::make(g.cts, true);
        let Some(prev) = tid::try_lock(&r.tid) else {
            local.tombstones.push_back(g);
            continue;
        };
        if prev == want && r.loc.load(Ordering::Acquire) == g.slot {
            r.loc.store(0, Ordering::Release);
            local.hot.forget(g.slot);
            t.ext.regions[local.worker].lock().free(g.slot);
            core.store.gc_reclaimed.fetch_add(1, Ordering::Relaxed);
        }
        tid::unlock(&r.tid, prev);
    }
}

impl<B: PmemBackend> Store for FalconStore<B> {
    type TableExt = FalconTable;
    type Local = FalconLocal;

    const ENGINE: EngineKind = EngineKind::Falcon;

    fn new_table_ext(&self, _id: TableId, schema: &TableSchema) -> FalconTable {
        let slot_size = layout::slot_size(schema.row_size());
        FalconTable {
            slot_size,
            regions: (0..self.regions)
                .map(|_| Mutex::new(Region::new(slot_size, self.pool.page_size())))
                .collect(),
        }
    }

    fn check_schema(&self, schema: &TableSchema) -> Result<()> {
        let slot = layout::slot_size(schema.row_size());
        if layout::PAGE_HEADER + slot > self.pool.page_size() {
            return Err(Error::InvalidSchema {
                table: schema.name.clone(),
                detail: format!("a {slot}-byte tuple slot does not fit a page"),
            });
        }
        Ok(())
    }

    fn persist_catalog(&self, schemas: &[TableSchema]) -> Result<()> {
        let doc = CatalogDoc {
            engine: "falcon".into(),
            floor_page: self.meta_page,
            tables: schemas.to_vec(),
        };
        catalog::write(&self.pool, SYSTEM_THREAD, &doc)
    }

    fn local(core: &Core<Self>, worker: usize) -> FalconLocal {
        FalconLocal {
            worker,
            record: Vec::new(),
            entries: 0,
            written: Vec::new(),
            hot: HotTuples::new(core.store.hot_tuples),
            tombstones: VecDeque::new(),
        }
    }

    fn read_row(
        core: &Core<Self>,
        local: &mut FalconLocal,
        t: &Table<FalconTable>,
        rid: u64,
        _tid: u64,
        out: &mut [u8],
    ) -> bool {
        let slot = t.records.get(rid).loc.load(Ordering::Acquire);
        if slot != 0 {
            core.store
                .pool
                .persister(worker_thread(local.worker))
                .read(slot + layout::SLOT_HEADER, out);
        }
        false
    }

    fn prefetch_row(core: &Core<Self>, t: &Table<FalconTable>, rid: u64) {
        let slot = t.records.get(rid).loc.load(Ordering::Relaxed);
        if slot != 0 {
            core.store
                .pool
                .persister(BACKGROUND_THREAD)
                .prefetch(slot + layout::SLOT_HEADER, t.row_bytes as u64);
        }
    }

    fn read_row_quiescent(
        core: &Core<Self>,
        t: &Table<FalconTable>,
        rid: u64,
        out: &mut [u8],
    ) -> Result<()> {
        let slot = t.records.get(rid).loc.load(Ordering::Acquire);
        if slot == 0 {
            return Err(Error::Corrupt(format!(
                "table {}: live record {rid} has no slot",
                t.schema.name
            )));
        }
        core.store.pool.persister(BACKGROUND_THREAD).read(slot + layout::SLOT_HEADER, out);
        Ok(())
    }

    fn prepare(
        core: &Core<Self>,
        local: &mut FalconLocal,
        _cts: u64,
        writes: &mut [WriteItem],
        data: &[u8],
        tables: &Tables<FalconTable>,
    ) -> Result<()> {
        let store = &core.store;
        local.record.clear();
        local.record.resize(layout::RECORD_HEADER, 0);
        for i in 0..writes.len() {
            let w = writes[i];
            let t = &tables[w.table as usize];
            let loc = t.records.get(w.rid).loc.load(Ordering::Acquire);
            let slot = if loc != 0 {
                loc
            } else if w.kind == WriteKind::Insert {
                match store.allocate_slot(t, local.worker) {
                    Ok(slot) => {
                        writes[i].aux = slot | NEW_SLOT;
                        slot
                    }
                    Err(e) => {
                        free_new_slots(writes, tables, local.worker);
                        return Err(e);
                    }
                }
            } else {
                unreachable!("an update or delete of a live record with no slot (F1)");
            };
            if writes[i].aux == 0 {
                writes[i].aux = slot;
            }
            let row = (!w.deleted()).then(|| &data[w.data_at..w.data_at + t.row_bytes]);
            layout::push_entry(&mut local.record, w.table, w.key, slot, row);
        }
        local.entries = writes.len() as u32;
        local.record.resize(local.record.len() + layout::SEAL_BYTES, 0);
        let thread = worker_thread(local.worker);
        let mut window = store.windows[local.worker].lock();
        let checked = window
            .ensure_page(&store.pool, thread, local.worker, store.ring_bytes)
            .and_then(|()| window.check_fits(local.record.len()));
        if let Err(e) = checked {
            free_new_slots(writes, tables, local.worker);
            return Err(e);
        }
        Ok(())
    }

    fn persist(
        core: &Core<Self>,
        local: &mut FalconLocal,
        cts: u64,
        _writes: &[WriteItem],
        _data: &[u8],
        _tables: &Tables<FalconTable>,
    ) {
        let store = &core.store;
        let p = store.pool.persister(worker_thread(local.worker));
        p.marker(Marker::Begin { txn: cts });
        let mut window = store.windows[local.worker].lock();
        let len = local.record.len() as u64;
        let at = window.place(len);
        if window.overlaps_pending(at, len) {
            // ADR: the tuples of the record about to be overwritten are
            // written back but not fenced yet (window.rs, REUSE).
            p.fence();
            window.pending = None;
            window.durable_seq = window.seq - 1;
        }
        let seq = window.seq;
        layout::fill_record_header(&mut local.record, seq, cts, local.entries);
        let end = local.record.len() - layout::SEAL_BYTES;
        let seal = layout::seal(&local.record[..end], at);
        let seal_late = store.fault == Some(BaselineFault::FalconSealAfterInstall);
        if !seal_late {
            local.record[end..].copy_from_slice(&seal.to_le_bytes());
        }
        let base = window.base;
        p.write(base + at, &local.record);
        window.current = (at, at + len);
        window.next = at + len;
        window.seq += 1;
        if seal_late {
            // Injected bug: the commit mark is written after the in-place
            // updates (in `leave_commit`), so tuples can reach NVM before it.
            local.record[end..].copy_from_slice(&seal.to_le_bytes());
            return;
        }
        if store.eadr {
            if store.variant.flushes_log() {
                p.flush_hint(base + at, len);
            }
            // Acknowledged after Alg. 1's fence (`leave_commit`): until a
            // fence drains the store buffer, the record is not in the
            // (persistent) cache yet.
            return;
        }
        if store.fault != Some(BaselineFault::FalconRecordUnflushed) {
            p.flush(base + at, len);
        }
        p.fence();
        // This fence also drained the previous commit's write-backs.
        window.pending = None;
        window.durable_seq = seq - 1;
        p.marker(Marker::Ack { txn: cts });
    }

    fn install_row(
        core: &Core<Self>,
        local: &mut FalconLocal,
        t: &Table<FalconTable>,
        w: &WriteItem,
        row: Option<&[u8]>,
        cts: u64,
    ) {
        let p = core.store.pool.persister(worker_thread(local.worker));
        let slot = slot_of(w);
        p.write(slot, &layout::slot_header(w.key, w.deleted(), cts));
        let mut bytes = layout::SLOT_HEADER;
        if let Some(row) = row {
            p.write(slot + layout::SLOT_HEADER, row);
            bytes += row.len() as u64;
        }
        local.written.push((slot, bytes));
        t.records.get(w.rid).loc.store(slot, Ordering::Release);
        if w.deleted() {
            let seq = core.store.windows[local.worker].lock().seq - 1;
            local.tombstones.push_back(Tombstone { table: t.id.0, rid: w.rid, slot, cts, seq });
        }
    }

    fn leave_commit(
        core: &Core<Self>,
        local: &mut FalconLocal,
        committed: Option<u64>,
        _durability: Durability,
    ) -> bool {
        let Some(cts) = committed else { return false };
        let store = &core.store;
        let p = store.pool.persister(worker_thread(local.worker));
        let mut window = store.windows[local.worker].lock();
        // Alg. 1 line 7: the updated tuples are in the (persistent) cache.
        p.fence();
        let policy = store.data_flush();
        for &(slot, bytes) in &local.written {
            let flush = match policy {
                DataFlush::All => true,
                DataFlush::Selective => !local.hot.touch(slot),
                DataFlush::None => false,
            };
            if !flush {
                continue;
            }
            if store.eadr { p.flush_hint(slot, bytes) } else { p.flush(slot, bytes) }
        }
        local.written.clear();
        if store.fault == Some(BaselineFault::FalconSealAfterInstall) {
            // Injected bug (see `persist`): the commit mark only now.
            let (at, end) = window.current;
            let seal_at = window.base + end - layout::SEAL_BYTES as u64;
            let seal_word = &local.record[local.record.len() - layout::SEAL_BYTES..];
            p.write(seal_at, seal_word);
            p.flush(window.base + at, end - at);
            p.fence();
            p.marker(Marker::Ack { txn: cts });
        }
        if store.eadr {
            // Record and in-place writes are in the persistent cache.
            window.durable_seq = window.seq - 1;
            if store.fault != Some(BaselineFault::FalconSealAfterInstall) {
                p.marker(Marker::Ack { txn: cts });
            }
        } else {
            window.pending = Some(window.current);
        }
        true
    }

    fn after_commit(core: &Core<Self>, local: &mut FalconLocal) {
        if !local.tombstones.is_empty() {
            collect_tombstones(core, local);
        }
    }

    fn sync(core: &Core<Self>, local: &mut FalconLocal) -> Result<()> {
        let store = &core.store;
        {
            let mut window = store.windows[local.worker].lock();
            if window.page.is_some() {
                store.pool.persister(worker_thread(local.worker)).fence();
                window.pending = None;
                window.durable_seq = window.seq - 1;
            }
        }
        collect_tombstones(core, local);
        Ok(())
    }

    fn counters(core: &Core<Self>, local: &FalconLocal) -> CounterSnapshot {
        core.store.pool.counters(worker_thread(local.worker)).snapshot()
    }

    fn pmem_counters(core: &Core<Self>) -> CounterSnapshot {
        core.store.pool.total_counters()
    }

    fn engine_counters(core: &Core<Self>) -> crate::api::EngineCounters {
        crate::api::EngineCounters {
            gc_reclaimed_slots: core.store.gc_reclaimed.load(Ordering::Relaxed),
            ..Default::default()
        }
    }

    fn status(core: &Core<Self>, status: &mut EngineStatus) {
        let store = &core.store;
        status.free_pages = store.pool.free_page_count();
        status.page_count = store.pool.page_count();
        for (t, s) in core.tables().iter().zip(&mut status.tables) {
            s.heap_pages = t.ext.regions.iter().map(|r| r.lock().pages.len() as u64).sum();
        }
    }

    fn check_invariants(core: &Core<Self>) -> Result<()> {
        recovery::check_invariants(core)
    }

    fn close(core: Core<Self>) -> Result<()> {
        Ok(core.store.pool.close()?)
    }

    fn abandon(core: Core<Self>) {
        core.store.pool.abandon();
    }
}
