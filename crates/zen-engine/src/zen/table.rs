//! A table of the Zen engine: schema, DRAM indexes, location words, and the
//! per-worker Met-Cache and heap regions.
//!
//! INDEXES. The primary index maps key → record id and is never touched by
//! updates: a record's current location (a Met-Cache entry or an NVM slot,
//! see `cache::LOC_*`) is an atomic word in the record table, so moving a
//! tuple between cache and heap is one store. Records of deleted keys stay in
//! the point index (a later insert reuses them); single-version protocols
//! unlink a deleted key from the ordered set at install (I1, `index/mod.rs`).
//! Secondary indexes map (column bytes ‖ primary key) and are maintained at
//! install.

use crate::index::RecordIds;
pub use crate::index::{PrimaryIndex, SecondaryIndex};
use std::sync::atomic::AtomicU64;
use zen_pmem::zeroed::DoublingArray;

use crate::sched::Mutex;

use super::cache::CacheRegion;
use super::space::HeapRegion;
use crate::api::TableId;
use crate::heap;
use crate::schema::TableSchema;

/// Records of a table's first chunk of location words (64 KiB); chunk `c`
/// holds `RECORD_CHUNK << c`.
const RECORD_CHUNK: u64 = 1 << 12;
/// Key buckets of the scan read timestamps (`2^SCAN_BUCKET_SHIFT` keys each).
const SCAN_BUCKETS: usize = 256;
const SCAN_BUCKET_SHIFT: u32 = 12;
/// Chunks enough for 2^32 records: `RECORD_CHUNK * (2^21 - 1) >= 2^32`.
const RECORD_CHUNKS: usize = 21;
/// Record ids a table may hand out.
const MAX_RECORDS: u64 = 1 << 32;
const _: () = assert!(RECORD_CHUNK * ((1 << RECORD_CHUNKS) - 1) >= MAX_RECORDS);

/// The location words of a table's records, addressed by record id, each
/// beside its spare word (`space.rs`, S7: the record's superseded slot kept
/// for its next update), so an update finds its spare in the line it loaded
/// the location from. The words live in chunks that double, mapped zero
/// on first use (`zen_pmem::zeroed::DoublingArray`): a table costs a few
/// hundred bytes until it holds records. (A boxed slice of 65,536 chunk
/// descriptors cost 1.5 MiB written per table at creation: every open, every
/// recovery, and 1.5 GiB for the 1,024 tables a database may hold.)
pub struct Records {
    words: DoublingArray<RecordWords, RECORD_CHUNKS>,
    /// Record ids, in per-thread blocks (`index/rids.rs`): an insert takes
    /// its id without a shared write.
    ids: RecordIds,
}

impl Records {
    fn new() -> Records {
        Records { words: DoublingArray::new(RECORD_CHUNK), ids: RecordIds::new(MAX_RECORDS) }
    }

    /// A new record id with an empty location.
    pub fn allocate(&self) -> Option<u64> {
        self.ids.allocate()
    }

    #[inline]
    fn words(&self, id: u64) -> &RecordWords {
        self.words.get(id)
    }

    /// The record's location word (`cache::LOC_*`).
    #[inline]
    pub fn loc(&self, id: u64) -> &AtomicU64 {
        &self.words(id).loc
    }

    /// The record's spare word: 0 (none), [`SPARE_DEAD`] (the key was
    /// deleted once: never a spare again), or the offset of a heap slot that
    /// holds one of the record's superseded, durably superseded versions
    /// (S7 of `space.rs`).
    #[inline]
    pub fn spare(&self, id: u64) -> &AtomicU64 {
        &self.words(id).spare
    }

    /// The spare word of `id` if its chunk exists (no allocation: for walks
    /// over every record id, most of whose chunks may never have been used).
    pub fn spare_if_present(&self, id: u64) -> Option<&AtomicU64> {
        self.words.get_if_mapped(id).map(|w| &w.spare)
    }

    /// Record ids reserved so far: every record id is below it.
    pub fn count(&self) -> u64 {
        self.ids.reserved()
    }
}

/// A record's words: location and spare, in one 16-byte half-line.
#[derive(bytemuck::Zeroable)]
#[repr(C, align(16))]
struct RecordWords {
    loc: AtomicU64,
    spare: AtomicU64,
}

/// The spare word of a record whose key was deleted (S7 of `space.rs`).
pub const SPARE_DEAD: u64 = u64::MAX;

/// The slot a spare word holds, if any (neither 0 nor [`SPARE_DEAD`]).
pub fn spare_slot(word: u64) -> Option<u64> {
    (word != 0 && word != SPARE_DEAD).then_some(word)
}

pub struct Table {
    pub id: TableId,
    pub schema: TableSchema,
    pub row_bytes: usize,
    pub slot_size: u64,
    pub index: PrimaryIndex,
    pub records: Records,
    pub secondary: Vec<SecondaryIndex>,
    pub caches: Box<[CacheRegion]>,
    pub heaps: Box<[Mutex<HeapRegion>]>,
    /// Persist-order rank: the LP tuple comes from the table of lowest rank.
    pub persist_rank: u32,
    /// Entries each worker region of this table may hold (the cache plan's C_i).
    pub cache_limit: std::sync::atomic::AtomicU32,
    /// Record ids reserved (`Records::count`) when the cache plan was last
    /// made: the size the plan assumed (`Shared::replan_if_grown`).
    pub planned_records: std::sync::atomic::AtomicU64,
    /// Multi-version protocols: largest timestamp that scanned each key bucket
    /// (phantom protection for inserts by older transactions), and the whole table.
    pub scan_rts: Box<[std::sync::atomic::AtomicU64]>,
    pub scan_rts_all: std::sync::atomic::AtomicU64,
    /// Tuples accessed, per worker (f_i of the cache plan; owner-only counters).
    pub accesses: Box<[crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>]>,
}

impl Table {
    pub fn new(
        id: TableId,
        schema: TableSchema,
        regions: usize,
        cache_entries_per_region: u32,
        page_size: u64,
        persist_rank: u32,
    ) -> Table {
        let row_bytes = schema.row_size();
        let slot_size = heap::slot_size(row_bytes);
        let secondary = (0..schema.secondary.len())
            .map(|i| SecondaryIndex::new(schema.secondary_layout(i).expect("validated schema")))
            .collect();
        Table {
            id,
            row_bytes,
            slot_size,
            index: PrimaryIndex::default(),
            records: Records::new(),
            secondary,
            caches: (0..regions)
                .map(|_| CacheRegion::new(row_bytes, cache_entries_per_region))
                .collect(),
            heaps: (0..regions)
                .map(|_| Mutex::new(HeapRegion::new(slot_size, page_size)))
                .collect(),
            schema,
            persist_rank,
            cache_limit: std::sync::atomic::AtomicU32::new(cache_entries_per_region),
            planned_records: std::sync::atomic::AtomicU64::new(0),
            accesses: (0..regions).map(|_| Default::default()).collect(),
            scan_rts: (0..SCAN_BUCKETS).map(|_| Default::default()).collect(),
            scan_rts_all: Default::default(),
        }
    }

    /// The record id of `key`, if the index has it.
    #[inline]
    pub fn lookup(&self, key: u64) -> Option<u64> {
        self.index.get(key)
    }

    /// The record id of `key`, creating an empty record if needed.
    pub fn lookup_or_create(&self, key: u64) -> Option<u64> {
        if let Some(rid) = self.lookup(key) {
            return Some(rid);
        }
        // Losing a race leaves our record id unused; the index's is the one.
        let rid = self.records.allocate()?;
        crate::sched::point();
        Some(self.index.get_or_insert(key, rid))
    }

    /// Record that a transaction with timestamp `ts` scanned `[low, high]`.
    pub fn raise_scan_rts(&self, low: u64, high: u64, ts: u64) {
        use std::sync::atomic::Ordering::SeqCst;
        let (first, last) = (low >> SCAN_BUCKET_SHIFT, high >> SCAN_BUCKET_SHIFT);
        if last - first >= SCAN_BUCKETS as u64 / 4 {
            self.scan_rts_all.fetch_max(ts, SeqCst);
            return;
        }
        for b in first..=last {
            self.scan_rts[b as usize % SCAN_BUCKETS].fetch_max(ts, SeqCst);
        }
    }

    /// Largest timestamp of a scan that may have covered `key`.
    pub fn scan_rts_of(&self, key: u64) -> u64 {
        use std::sync::atomic::Ordering::SeqCst;
        let bucket = (key >> SCAN_BUCKET_SHIFT) as usize % SCAN_BUCKETS;
        self.scan_rts[bucket].load(SeqCst).max(self.scan_rts_all.load(SeqCst))
    }

    pub fn add_secondary(&self, row: &[u8], key: u64) {
        for s in &self.secondary {
            s.insert(row, key);
        }
    }
}
