//! The Met-Cache: per-(table, worker) regions of DRAM entries.
//!
//! An entry holds a tuple's data, a pointer to its NVM slot, its key and
//! record id, CLOCK / copy flags, an "active" stamp and the protocol's CC-Meta
//! (three atomic words interpreted by the protocol). Data is stored as atomic
//! words so that optimistic readers may copy it while a writer installs a new
//! version (the protocol's version word tells them to retry).
//!
//! Ownership rules (Zen §3.2):
//! (C1) Only the owner worker allocates, evicts and reuses entries of its region;
//!      anyone may read any entry.
//! (C2) A worker that commits an update to an entry of another region copies it
//!      into its own region and marks the original obsolete (the copy bit).
//! (C3) An entry is *active* while a running transaction may use it: its
//!      `touch_ts` is at or above the global minimum Tx-CTS. CLOCK never evicts
//!      an active or recently used entry.
//! (C4) An evicted or obsolete entry is retired with the clock time; it is
//!      reused only when the global minimum Tx-CTS passes that time, so no
//!      running transaction can still hold a reference to it (no ABA).
//! (C5) The writer of C2 tells the owner through the region's `copied`
//!      queue; the owner retires the obsolete original at its next
//!      allocation, so copies do not crowd live entries out of the region
//!      (before, they waited for the CLOCK hand, which evicted live cold
//!      entries on its way: 12 % misses on YCSB-WH with the data set cached).
//!      The hint is best-effort (a full queue drops it; the hand still finds
//!      the entry), and an entry is retired only while it still carries the
//!      copy flag and a record, so a hint never retires an entry twice.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sched::Mutex;

const CHUNK_ENTRIES: usize = 1024;
/// Capacity of a region's queue of copied-away entries (C5).
const COPIED_CAPACITY: usize = 256;

pub const FLAG_CLOCK: u64 = 1;
pub const FLAG_COPY: u64 = 2;

/// Location word of a record: `0` = no version, `CACHED | worker << 40 | index`
/// = a Met-Cache entry, anything else = the offset of an NVM slot.
pub const LOC_EMPTY: u64 = 0;
pub const LOC_CACHED: u64 = 1 << 63;

pub fn loc_cached(worker: usize, index: u32) -> u64 {
    LOC_CACHED | ((worker as u64) << 40) | u64::from(index)
}

/// (worker, index) of a cached location.
pub fn loc_entry(loc: u64) -> Option<(usize, u32)> {
    (loc & LOC_CACHED != 0).then_some((((loc >> 40) & 0xFFFF) as usize, loc as u32))
}

/// The hot words of a Met-Cache entry: exactly one cache line, line-aligned,
/// so that a read (`touch`, the version word), validation and locking miss
/// once per entry, not twice (nine words straddled two lines). The entry's
/// key, read only by the invariant check, lives beside it in its chunk
/// (`CacheRegion::key`).
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct Entry {
    pub cc: [AtomicU64; 4],
    pub touch_ts: AtomicU64,
    pub flags: AtomicU64,
    pub record: AtomicU64,
    pub slot: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 64);

impl Entry {
    /// Mark the entry used by a transaction that began at `begin_ts`.
    #[inline]
    pub fn touch(&self, begin_ts: u64) {
        if self.touch_ts.load(Ordering::Relaxed) < begin_ts {
            self.touch_ts.fetch_max(begin_ts, Ordering::AcqRel);
        }
        if self.flags.load(Ordering::Relaxed) & FLAG_CLOCK == 0 {
            self.flags.fetch_or(FLAG_CLOCK, Ordering::Relaxed);
        }
    }
}

struct Chunk {
    entries: Box<[Entry]>,
    /// The key of each entry (cold: written when the entry is filled).
    keys: Box<[AtomicU64]>,
    data: Box<[AtomicU64]>,
}

struct RegionState {
    allocated: u32,
    /// Free entries below `allocated`, lowest first (see `allocate`).
    free: FreeSet,
    retired: std::collections::VecDeque<(u32, u64)>,
    hand: u32,
}

/// A set of entry indices with "take the lowest" and "remove this one", as
/// a bitmap: no allocation per operation (a `BTreeSet` allocated and freed
/// nodes as entries came and went, about one allocation per Zen insert).
#[derive(Default)]
struct FreeSet {
    words: Vec<u64>,
    len: usize,
    /// No set bit below word `lowest`.
    lowest: usize,
}

impl FreeSet {
    fn insert(&mut self, index: u32) {
        let (w, bit) = (index as usize / 64, 1u64 << (index % 64));
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        if self.words[w] & bit == 0 {
            self.words[w] |= bit;
            self.len += 1;
            self.lowest = self.lowest.min(w);
        }
    }

    fn remove(&mut self, index: u32) -> bool {
        let (w, bit) = (index as usize / 64, 1u64 << (index % 64));
        if self.words.get(w).is_some_and(|word| word & bit != 0) {
            self.words[w] &= !bit;
            self.len -= 1;
            return true;
        }
        false
    }

    fn pop_first(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        while self.words[self.lowest] == 0 {
            self.lowest += 1;
        }
        let word = &mut self.words[self.lowest];
        let bit = word.trailing_zeros();
        *word &= *word - 1;
        self.len -= 1;
        Some((self.lowest * 64) as u32 + bit)
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl RegionState {
    /// Lower `allocated` past free entries at its top. With the lowest free
    /// entry taken first, the entries in use gather at the bottom of the
    /// region and `allocated` follows them down, so the CLOCK hand (which
    /// walks `0..allocated`) walks entries that hold records, not a region
    /// emptied by a smaller cache share: TPC-C's insert-only tables were
    /// loaded into 120,000–230,000 entries, then planned 16, and every
    /// eviction walked ~600 empty entries (42 % of the run's CPU time).
    fn trim(&mut self) {
        while self.allocated > 0 && self.free.remove(self.allocated - 1) {
            self.allocated -= 1;
        }
    }
}

/// Entries other workers detached from version chains, for the owner to retire.
pub type RetireInbox = Mutex<Vec<u32>>;

/// One worker's region of one table's Met-Cache.
pub struct CacheRegion {
    chunks: Box<[OnceLock<Chunk>]>,
    words_per_row: usize,
    capacity: u32,
    state: Mutex<RegionState>,
    /// Entries of this region that another worker detached (MVCC chain cuts).
    pub retire_inbox: RetireInbox,
    /// Items pushed to `retire_inbox` and not yet drained (a lock-free check).
    retire_pending: AtomicU64,
    /// Entries of this region that another worker copied away (C5).
    copied: OnceLock<super::handoff::Handoff>,
    /// Real NUMA node new chunks are bound to (`numa/bind.rs`); unset: none.
    binding: OnceLock<(std::sync::Arc<crate::numa::MemoryBinder>, usize)>,
}

/// Result of asking a region for an entry.
pub enum Alloc {
    Entry(u32),
    /// The region is at capacity; the caller should evict and retry.
    Full,
}

impl CacheRegion {
    pub fn new(row_bytes: usize, capacity: u32) -> CacheRegion {
        let capacity = capacity.max(8);
        let chunks = (capacity as usize).div_ceil(CHUNK_ENTRIES);
        CacheRegion {
            chunks: (0..chunks).map(|_| OnceLock::new()).collect(),
            words_per_row: row_bytes.div_ceil(8),
            capacity,
            state: Mutex::new(RegionState {
                allocated: 0,
                free: Default::default(),
                retired: Default::default(),
                hand: 0,
            }),
            retire_inbox: Mutex::new(Vec::new()),
            retire_pending: AtomicU64::new(0),
            copied: OnceLock::new(),
            binding: OnceLock::new(),
        }
    }

    /// Bind every chunk allocated from now on to layout node `node`
    /// (set once, before the owner worker's first entry).
    pub fn bind_to_node(&self, binder: std::sync::Arc<crate::numa::MemoryBinder>, node: usize) {
        let _ = self.binding.set((binder, node));
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    pub fn entry_bytes(&self) -> usize {
        std::mem::size_of::<Entry>() + 8 + self.words_per_row * 8
    }

    fn chunk(&self, index: u32) -> &Chunk {
        let c = index as usize / CHUNK_ENTRIES;
        self.chunks[c].get_or_init(|| {
            let chunk = Chunk {
                entries: (0..CHUNK_ENTRIES).map(|_| Entry::default()).collect(),
                keys: (0..CHUNK_ENTRIES).map(|_| AtomicU64::new(0)).collect(),
                data: (0..CHUNK_ENTRIES * self.words_per_row).map(|_| AtomicU64::new(0)).collect(),
            };
            if let Some((binder, node)) = self.binding.get() {
                binder.bind(&chunk.entries, *node);
                binder.bind(&chunk.keys, *node);
                binder.bind(&chunk.data, *node);
                binder.chunk_done();
            }
            chunk
        })
    }

    #[inline]
    pub fn entry(&self, index: u32) -> &Entry {
        &self.chunk(index).entries[index as usize % CHUNK_ENTRIES]
    }

    /// The key of entry `index`.
    #[inline]
    pub fn key(&self, index: u32) -> &AtomicU64 {
        &self.chunk(index).keys[index as usize % CHUNK_ENTRIES]
    }

    #[inline]
    pub fn data(&self, index: u32) -> &[AtomicU64] {
        let at = index as usize % CHUNK_ENTRIES * self.words_per_row;
        &self.chunk(index).data[at..at + self.words_per_row]
    }

    /// Entries in use (allocated and not free or retired).
    pub fn used(&self) -> u32 {
        let s = self.state.lock();
        s.allocated - s.free.len() as u32 - s.retired.len() as u32
    }

    /// Hand entry `index` (detached from a version chain by another
    /// worker) to the owner, who retires it at its next allocation.
    pub fn push_detached(&self, index: u32) {
        let mut inbox = self.retire_inbox.lock();
        inbox.push(index);
        self.retire_pending.fetch_add(1, Ordering::Release);
    }

    /// Tell the owner that entry `index` was copied away (C5; best-effort).
    pub fn push_copied(&self, index: u32) {
        let queue = self.copied.get_or_init(|| super::handoff::Handoff::new(COPIED_CAPACITY));
        let _ = queue.push(u64::from(index), 0);
    }

    /// Owner only: retire the entries others detached or copied away, with
    /// the clock time `now()` (asked only when there is something to retire).
    pub fn drain_retire_inbox(&self, now: impl FnOnce() -> u64) -> usize {
        let copied = self.copied.get().filter(|q| q.maybe_nonempty());
        if self.retire_pending.load(Ordering::Acquire) == 0 && copied.is_none() {
            return 0;
        }
        let now = now();
        let mut n = 0;
        {
            let mut inbox = self.retire_inbox.lock();
            self.retire_pending.fetch_sub(inbox.len() as u64, Ordering::AcqRel);
            let mut s = self.state.lock();
            for index in inbox.drain(..) {
                s.retired.push_back((index, now));
                n += 1;
            }
        }
        if let Some(queue) = copied {
            let mut s = self.state.lock();
            for _ in 0..COPIED_CAPACITY {
                let Some((index, _)) = queue.pop() else { break };
                let e = self.entry(index as u32);
                let flags = e.flags.load(Ordering::Acquire);
                if flags & FLAG_COPY == 0 || e.record.load(Ordering::Acquire) == 0 {
                    continue;
                }
                e.record.store(0, Ordering::Release);
                e.flags.store(0, Ordering::Relaxed);
                s.retired.push_back((index as u32, now));
                n += 1;
            }
        }
        n
    }

    /// Take a free entry, reusing retired ones older than the watermark
    /// (computed only when a retired entry waits).
    pub fn allocate(&self, watermark: impl FnOnce() -> u64) -> Alloc {
        let mut s = self.state.lock();
        if !s.retired.is_empty() {
            let watermark = watermark();
            while let Some(&(index, retired_at)) = s.retired.front() {
                if retired_at >= watermark {
                    break;
                }
                s.retired.pop_front();
                s.free.insert(index);
            }
        }
        s.trim();
        if let Some(index) = s.free.pop_first() {
            return Alloc::Entry(index);
        }
        if s.allocated < self.capacity {
            s.allocated += 1;
            return Alloc::Entry(s.allocated - 1);
        }
        Alloc::Full
    }

    /// Give back an entry that was never published.
    pub fn free_unpublished(&self, index: u32) {
        let mut s = self.state.lock();
        s.free.insert(index);
        s.trim();
    }

    /// Retire a published entry at clock time `now` (C4).
    pub fn retire(&self, index: u32, now: u64) {
        self.state.lock().retired.push_back((index, now));
    }

    /// Advance the CLOCK hand and return candidate victims: entries holding a
    /// record whose clock bit was clear (bits are cleared as the hand passes).
    /// Free and retired entries (no record) are passed over, not returned:
    /// were they returned, a region with many of them would report nothing
    /// evictable while it is full of victims. The hand moves at most
    /// `8 * max + 64` entries per call, so one call costs O(max) however many
    /// entries are free or recently used; the next call goes on from there.
    pub fn clock_candidates(&self, max: usize, out: &mut Vec<u32>) {
        let mut s = self.state.lock();
        let n = s.allocated;
        if n == 0 {
            return;
        }
        let steps = (2 * n as usize).min(8 * max + 64);
        /// Entries ahead of the hand whose lines are requested early.
        const AHEAD: u32 = 8;
        let mut next = s.hand % n;
        for _ in 0..steps {
            let index = next;
            next = if index + 1 < n { index + 1 } else { 0 };
            s.hand = next;
            if index + AHEAD < n {
                zen_pmem::cpu::prefetch(self.entry(index + AHEAD));
            }
            let e = self.entry(index);
            if e.record.load(Ordering::Acquire) == 0 {
                continue;
            }
            let flags = e.flags.load(Ordering::Relaxed);
            if flags & FLAG_CLOCK != 0 {
                e.flags.fetch_and(!FLAG_CLOCK, Ordering::Relaxed);
                continue;
            }
            out.push(index);
            if out.len() >= max {
                return;
            }
        }
    }

    /// Copy the entry's row into `out` (relaxed word loads; validated by the protocol).
    #[inline]
    pub fn read_row(&self, index: u32, out: &mut [u8]) {
        crate::words::load_row(self.data(index), out);
    }

    /// Store `row` into the entry's data words.
    #[inline]
    pub fn write_row(&self, index: u32, row: &[u8]) {
        crate::words::store_row(self.data(index), row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_free_set_gives_the_lowest_entry_and_removes_any() {
        let mut f = FreeSet::default();
        for i in [130, 5, 64, 7, 200] {
            f.insert(i);
        }
        f.insert(7);
        assert_eq!(f.len(), 5);
        assert_eq!(f.pop_first(), Some(5));
        assert!(f.remove(200));
        assert!(!f.remove(200));
        assert_eq!(f.pop_first(), Some(7));
        f.insert(3);
        assert_eq!(f.pop_first(), Some(3));
        assert_eq!(f.pop_first(), Some(64));
        assert_eq!(f.pop_first(), Some(130));
        assert_eq!((f.pop_first(), f.len()), (None, 0));
    }

    #[test]
    fn a_region_trims_free_entries_at_its_top_and_reuses_the_lowest() {
        let region = CacheRegion::new(8, 64);
        let got: Vec<u32> = (0..10)
            .map(|_| match region.allocate(|| u64::MAX) {
                Alloc::Entry(i) => i,
                Alloc::Full => panic!("room left"),
            })
            .collect();
        assert_eq!(got, (0..10).collect::<Vec<_>>());
        for i in [9, 8, 2, 7] {
            region.free_unpublished(i);
        }
        // 7, 8 and 9 were the top: the region shrank to 7 entries.
        assert_eq!(region.state.lock().allocated, 7);
        assert_eq!(region.used(), 6);
        assert!(matches!(region.allocate(|| u64::MAX), Alloc::Entry(2)));
        assert!(matches!(region.allocate(|| u64::MAX), Alloc::Entry(7)));
    }
}
