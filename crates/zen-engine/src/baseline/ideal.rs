//! `ideal`: the physical limit. Tuples, indexes and CC metadata in DRAM, no
//! persistence and no recovery (the "ideal MMDB" of Zen Fig. 16 / Zen+ Fig. 19
//! when the data set fits in DRAM).
//!
//! WHAT LIVES WHERE
//! ```text
//!   DRAM   primary index (key → record), secondary indexes,
//!          record words (TID, row location), rows (atomic words, `DramRows`)
//!   NVM    nothing: the engine opens no pool at all
//! ```
//!
//! COMMIT
//!   The OCC core's Silo commit with every persistence hook empty: lock the
//!   write set, draw the timestamp, validate, install in place, unlock. Record
//!   `rid`'s row is DRAM row `rid` (so a read finds the row from the record id
//!   alone, in parallel with the TID); `prepare` marks it in use for a new key
//!   (rows are never freed: a deleted key keeps its row for a later insert). `CommitInfo::durable` is false: nothing
//!   is ever durable, and every NVM counter stays zero.
//!
//! RECOVERY
//!   None. `open` refuses `create: false` and any backend but `--pmem dram`
//!   (`EngineConfig::validate`), so a run can never believe it recovered.
//!
//! WHAT IT DELIBERATELY DOES NOT DO
//!   No logging, no checkpoints, no DRAM budget (it holds the whole data set),
//!   only `--cc silo` (see `EngineKind::supported_cc`). It is the yardstick the
//!   persistent designs are measured against, not a database.
//!
//! Invariants (checked by `check_invariants`): (I1) every live record has a
//! row; (I2) no two records share a row (a record's row is its own, `rid`).

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use zen_pmem::CounterSnapshot;

use super::occ::{Core, DramRows, OccEngine, Store, Table, Tables, WriteItem, WriteKind, tid};
use crate::api::{Durability, EngineStatus, TableId};
use crate::config::{EngineConfig, EngineKind};
use crate::error::{AbortReason, Error, Result};
use crate::schema::TableSchema;
use crate::ts::Clock;

/// The ideal engine: the OCC core over DRAM rows.
pub type IdealEngine = OccEngine<IdealStore>;

/// The store of `ideal`: rows in DRAM, nothing persisted.
pub struct IdealStore;

impl IdealEngine {
    /// An empty ideal engine (`config.create` must be true).
    pub fn create(config: &EngineConfig) -> Result<IdealEngine> {
        config.validate()?;
        if config.engine != EngineKind::Ideal {
            return Err(Error::InvalidConfig("IdealEngine::create needs --engine ideal".into()));
        }
        let core = Core::new(IdealStore, config, Clock::resume_above(0), Vec::new(), None);
        Ok(OccEngine::from_core(core))
    }
}

/// Row index + 1 of a record (0 = no row yet). A record's row, once it has
/// one, is row `rid` itself: reads address it without loading `loc` first,
/// so the row's cache misses overlap the TID's instead of following them.
fn row_of(t: &Table<DramRows>, rid: u64) -> Option<u64> {
    t.records.get(rid).loc.load(Ordering::Acquire).checked_sub(1)
}

impl Store for IdealStore {
    type TableExt = DramRows;
    type Local = ();

    const ENGINE: EngineKind = EngineKind::Ideal;

    fn new_table_ext(&self, _id: TableId, schema: &TableSchema) -> DramRows {
        DramRows::new(schema.row_size())
    }

    fn persist_catalog(&self, _schemas: &[TableSchema]) -> Result<()> {
        Ok(())
    }

    fn local(_core: &Core<Self>, _worker: usize) {}

    fn read_row(
        _core: &Core<Self>,
        _local: &mut (),
        t: &Table<DramRows>,
        rid: u64,
        _tid: u64,
        out: &mut [u8],
    ) -> bool {
        // Row `rid` (see `row_of`); a record that never had a row reads as
        // zeroes there, and the caller ignores the bytes of an absent one.
        if rid < t.ext.capacity() {
            t.ext.read(rid, out);
        }
        true
    }

    fn prefetch_row(_core: &Core<Self>, t: &Table<DramRows>, rid: u64) {
        if rid < t.ext.capacity() {
            t.ext.prefetch(rid);
        }
    }

    fn read_row_quiescent(
        _core: &Core<Self>,
        t: &Table<DramRows>,
        rid: u64,
        out: &mut [u8],
    ) -> Result<()> {
        let row = row_of(t, rid).ok_or_else(|| {
            Error::Corrupt(format!("table {}: live record {rid} has no row", t.schema.name))
        })?;
        t.ext.read(row, out);
        Ok(())
    }

    fn prepare(
        _core: &Core<Self>,
        _local: &mut (),
        _cts: u64,
        writes: &mut [WriteItem],
        _data: &[u8],
        tables: &Tables<DramRows>,
    ) -> Result<()> {
        for w in writes.iter().filter(|w| w.kind == WriteKind::Insert) {
            let t = &tables[w.table as usize];
            let r = t.records.get(w.rid);
            if r.loc.load(Ordering::Acquire) == 0 {
                if w.rid >= t.ext.capacity() {
                    return Err(Error::Abort(AbortReason::OutOfSpace));
                }
                r.loc.store(w.rid + 1, Ordering::Release);
            }
        }
        Ok(())
    }

    fn persist(
        _core: &Core<Self>,
        _local: &mut (),
        _cts: u64,
        _writes: &[WriteItem],
        _data: &[u8],
        _tables: &Tables<DramRows>,
    ) {
    }

    fn install_row(
        _core: &Core<Self>,
        _local: &mut (),
        t: &Table<DramRows>,
        w: &WriteItem,
        row: Option<&[u8]>,
        _cts: u64,
    ) {
        if let Some(row) = row {
            let index = row_of(t, w.rid).expect("prepare gave every insert a row");
            t.ext.write(index, row);
        }
    }

    fn leave_commit(
        _core: &Core<Self>,
        _local: &mut (),
        _committed: Option<u64>,
        _durability: Durability,
    ) -> bool {
        false
    }

    fn sync(_core: &Core<Self>, _local: &mut ()) -> Result<()> {
        Ok(())
    }

    fn counters(_core: &Core<Self>, _local: &()) -> CounterSnapshot {
        CounterSnapshot::default()
    }

    fn pmem_counters(_core: &Core<Self>) -> CounterSnapshot {
        CounterSnapshot::default()
    }

    /// Rows addressable: one per record id reserved (ids come in per-thread
    /// blocks, so this counts a block's unused ids too).
    fn status(core: &Core<Self>, status: &mut EngineStatus) {
        let rows: u64 = core.tables().iter().map(|t| t.records.count()).sum();
        status.cache_entries_used = rows;
        status.cache_entries_capacity = rows;
    }

    /// (I1) and (I2).
    fn check_invariants(core: &Core<Self>) -> Result<()> {
        for t in core.tables().iter() {
            let mut rows = HashSet::new(); // (I2)
            for (key, rid) in t.entries() {
                let absent = tid::is_absent(t.records.get(rid).tid.load(Ordering::Acquire));
                match row_of(t, rid) {
                    None if absent => {}
                    Some(row) if row == rid && rows.insert(row) => {}
                    other => {
                        return Err(Error::Corrupt(format!(
                            "table {}: key {key}: row {other:?} missing, out of range or shared",
                            t.schema.name
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn close(_core: Core<Self>) -> Result<()> {
        Ok(())
    }

    fn abandon(_core: Core<Self>) {}
}
