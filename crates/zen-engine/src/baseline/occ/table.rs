//! Tables of the baseline engines: schema, DRAM indexes, record words, and
//! the DRAM row arena that `ideal` and `mmdb` keep rows in.
//!
//! RECORDS. The primary index maps key → record id (`rid`); a record is three
//! atomic words that never move, so an index entry is never rewritten:
//!
//! ```text
//!   tid   cts << 2 | PRESENT | LOCK     the Silo TID word (see `occ.rs`)
//!   loc   where the row lives           engine-defined (`DramRows` index, NVM offset)
//!   aux   engine-defined                (wbl: versions << 32 | cache entry + 1)
//!   cc    protocol-defined              (2PL: lock word; MVCC: read timestamp;
//!                                        Silo: unused), `occ/protocol.rs`
//! ```
//!
//! Records are created on first insert *and* on a read of a missing key (an
//! absent placeholder), so that a later insert changes a word the reader
//! validates. Records of deleted keys stay in the point index, absent; a
//! later insert reuses them. The ordered set that scans walk holds every
//! live or being-inserted key (I1, `index/mod.rs`): a deletion unlinks its
//! key at install and an insert links it under the record's lock, which is
//! what makes the commit-time re-scan of a range a complete phantom check.

use crate::index::{PrimaryIndex, RecordIds, SecondaryIndex};
use std::ops::RangeInclusive;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use zen_pmem::zeroed::DoublingArray;

use super::tid;
use crate::api::TableId;
use crate::schema::TableSchema;

/// A lazily allocated, two-level directory of up to `MAX_CHUNKS` chunks:
/// creating one costs a few KiB (recovery builds many tables, crash
/// campaigns many engines), and an access is two atomic loads.
pub struct ChunkDir<C> {
    top: Box<[OnceLock<Leaf<C>>]>,
}

type Leaf<C> = Box<[OnceLock<C>]>;

const DIR_TOP: usize = 1 << 8;
const DIR_LEAF: usize = 1 << 10;
/// Most chunks a directory holds.
pub const MAX_CHUNKS: usize = DIR_TOP * DIR_LEAF;

impl<C> Default for ChunkDir<C> {
    fn default() -> Self {
        ChunkDir { top: (0..DIR_TOP).map(|_| OnceLock::new()).collect() }
    }
}

impl<C> ChunkDir<C> {
    /// Chunk `index` (< MAX_CHUNKS), made by `init` on first use.
    #[inline]
    pub fn get_or_init(&self, index: usize, init: impl FnOnce() -> C) -> &C {
        let leaf = self.top[index / DIR_LEAF]
            .get_or_init(|| (0..DIR_LEAF).map(|_| OnceLock::new()).collect());
        leaf[index % DIR_LEAF].get_or_init(init)
    }
}

/// The words of a record (see the module docs). All zero is an absent
/// record never written (`tid::PRESENT` clear, timestamp 0, unlocked, no
/// row), so records start in zero-mapped chunks.
#[derive(Debug, Default, bytemuck::Zeroable)]
pub struct Record {
    pub tid: AtomicU64,
    pub loc: AtomicU64,
    pub aux: AtomicU64,
    pub cc: AtomicU64,
}

/// Record words of the first chunk; chunks double from it.
const RECORD_CHUNK: u64 = 1 << 12;
/// Chunks of record words: 4,096 · (2^19 − 1) records, above `MAX_RECORDS`.
const RECORD_CHUNKS: usize = 19;
/// Records a table may hold.
const MAX_RECORDS: u64 = 1 << 30;
const _: () = assert!(RECORD_CHUNK * ((1 << RECORD_CHUNKS) - 1) >= MAX_RECORDS);

/// The records of a table, addressed by record id, in chunks that double
/// and are mapped zero on first use (`zen_pmem::zeroed::DoublingArray`): a
/// record's words are one shift, one load of an inline chunk descriptor
/// and the record's own line away, with no directory to walk.
pub struct Records {
    words: DoublingArray<Record, RECORD_CHUNKS>,
    /// Record ids, in per-thread blocks (`index/rids.rs`).
    ids: RecordIds,
}

impl Records {
    fn new() -> Records {
        Records { words: DoublingArray::new(RECORD_CHUNK), ids: RecordIds::new(MAX_RECORDS) }
    }

    /// A new, absent record; `None` when the table has 2^30 records.
    fn allocate(&self) -> Option<u64> {
        self.ids.allocate()
    }

    #[inline]
    pub fn get(&self, rid: u64) -> &Record {
        self.words.get(rid)
    }

    /// Record ids reserved so far: every record id is below it.
    pub fn count(&self) -> u64 {
        self.ids.reserved()
    }
}

/// A table: schema, indexes, records and the engine's per-table state `X`.
pub struct Table<X> {
    pub id: TableId,
    pub schema: TableSchema,
    pub row_bytes: usize,
    /// Primary index, shared with Zen (`crate::index`).
    pub index: PrimaryIndex,
    pub records: Records,
    pub secondary: Vec<SecondaryIndex>,
    /// MVCC: the largest timestamp of a transaction that scanned this table
    /// (an insert by an older transaction aborts, `occ/protocol.rs`).
    pub scan_rts: AtomicU64,
    pub ext: X,
}

impl<X> Table<X> {
    pub fn new(id: TableId, schema: TableSchema, ext: X) -> Table<X> {
        let secondary = (0..schema.secondary.len())
            .map(|i| SecondaryIndex::new(schema.secondary_layout(i).expect("validated schema")))
            .collect();
        Table {
            id,
            row_bytes: schema.row_size(),
            schema,
            index: PrimaryIndex::default(),
            records: Records::new(),
            secondary,
            scan_rts: AtomicU64::new(0),
            ext,
        }
    }

    /// The record id of `key`, if the index has it.
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<u64> {
        self.index.get(key)
    }

    /// The record id of `key`, creating an absent record if needed.
    pub fn lookup_or_create(&self, key: u64) -> Option<u64> {
        if let Some(rid) = self.lookup(key) {
            return Some(rid);
        }
        // Losing a race leaves our record unused: the index keeps the first.
        let rid = self.records.allocate()?;
        Some(self.index.get_or_insert(key, rid))
    }

    pub fn add_secondary(&self, row: &[u8], key: u64) {
        for s in &self.secondary {
            s.insert(row, key);
        }
    }

    /// Keep the secondary indexes in step with one installed write.
    pub fn maintain_secondary(&self, key: u64, old: Option<&[u8]>, new: Option<&[u8]>) {
        crate::index::maintain_secondary(&self.secondary, key, old, new);
    }

    /// (key, rid) pairs with keys in `range`, in key order.
    pub fn range(&self, range: RangeInclusive<u64>) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.index.range(range)
    }

    /// Every (key, rid) of the primary index, in key order (quiescent use).
    pub fn entries(&self) -> Vec<(u64, u64)> {
        self.index.iter().collect()
    }

    /// Keys whose record holds a live row now (not absent).
    pub fn live_rows(&self) -> u64 {
        self.index
            .iter()
            .filter(|&(_, rid)| !tid::is_absent(self.records.get(rid).tid.load(Ordering::Acquire)))
            .count() as u64
    }
}

/// Rows kept in DRAM as atomic words (so optimistic readers may copy a row
/// while a writer that holds the record's lock replaces it; the TID tells the
/// reader to retry). Rows are allocated by a bump counter and never freed: a
/// deleted record keeps its row for a later insert of the same key.
pub struct DramRows {
    rows: DoublingArray<AtomicU64, ROW_CHUNKS>,
    next: AtomicU64,
}

/// Rows of the first chunk of a `DramRows`; chunks double from it.
const ROW_CHUNK: u64 = 1 << 10;
/// Chunks of rows: 1,024 · (2^21 − 1) rows, above `MAX_ROWS`.
const ROW_CHUNKS: usize = 21;
/// Rows a `DramRows` hands out.
const MAX_ROWS: u64 = 1 << 30;
const _: () = assert!(ROW_CHUNK * ((1 << ROW_CHUNKS) - 1) >= MAX_ROWS);

impl DramRows {
    pub fn new(row_bytes: usize) -> DramRows {
        DramRows { rows: DoublingArray::of_runs(ROW_CHUNK, row_bytes.div_ceil(8)), next: 0.into() }
    }

    /// A new row index; `None` when 2^30 rows are allocated.
    pub fn allocate(&self) -> Option<u64> {
        let id = self.next.fetch_add(1, Ordering::AcqRel);
        (id < MAX_ROWS).then_some(id)
    }

    /// Row indexes the table can address (`0..capacity`).
    pub fn capacity(&self) -> u64 {
        MAX_ROWS
    }

    /// Rows allocated so far.
    pub fn count(&self) -> u64 {
        self.next.load(Ordering::Acquire).min(MAX_ROWS)
    }

    /// Row `index`'s words: one shift, one load of an inline chunk
    /// descriptor (the rows' chunks double and are mapped zero).
    #[inline]
    fn words(&self, index: u64) -> &[AtomicU64] {
        self.rows.run(index)
    }

    /// Copy row `index` into `out` (relaxed loads; the caller validates the TID).
    #[inline]
    pub fn read(&self, index: u64, out: &mut [u8]) {
        crate::words::load_row(self.words(index), out);
    }

    /// Start loading every line of row `index`.
    #[inline]
    pub fn prefetch(&self, index: u64) {
        zen_pmem::cpu::prefetch_lines(self.words(index));
    }

    /// Store `row` into row `index` (the caller holds the record's lock).
    #[inline]
    pub fn write(&self, index: u64, row: &[u8]) {
        crate::words::store_row(self.words(index), row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::RID_BLOCK;
    use std::collections::HashSet;

    #[test]
    fn record_ids_are_unique_across_threads_and_contiguous_within_a_block() {
        let (a, b) = (Records::new(), Records::new());
        let per_thread: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        // Interleave two tables so that each thread holds two blocks.
                        (0..1000)
                            .map(|_| (a.allocate().unwrap(), b.allocate().unwrap()).0)
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut seen = HashSet::new();
        for ids in &per_thread {
            for w in ids.windows(2) {
                // Within a block ids follow each other; a new block starts a fresh run.
                assert!(w[1] == w[0] + 1 || w[1] % RID_BLOCK == 0, "{} then {}", w[0], w[1]);
            }
            for &id in ids {
                assert!(seen.insert(id), "record id {id} handed out twice");
                assert!(id < a.count());
            }
        }
        assert_eq!(seen.len(), 4000);
        // A thread that has never used `a` starts its own block.
        let fresh = std::thread::scope(|s| s.spawn(|| a.allocate().unwrap()).join().unwrap());
        assert!(!seen.contains(&fresh) && fresh % RID_BLOCK == 0);
    }
}
