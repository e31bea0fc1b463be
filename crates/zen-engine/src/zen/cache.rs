//! The Met-Cache: per-(table, worker) regions of DRAM entries.
//!
//! An entry holds a tuple's data, a pointer to its NVM slot, its key and
//! record id, a copy flag, an "active" stamp and the protocol's CC-Meta
//! (three atomic words interpreted by the protocol). Its CLOCK reference bit
//! is not in the entry: each chunk keeps its entries' bits in a bitmap
//! (`Chunk::refs`), so the hand passes 64 recently used entries with one word
//! instead of 64 entry lines (on TPC-C at a 70 % hit ratio the per-entry
//! flags made the hand 11 % of Zen's time, each step an entry-line miss).
//! Until the hand first runs in a region, uses set no bit (`hand_started`):
//! a region that has never evicted has nothing for them to order, and the
//! bitmap word is a miss of its own on every read of a cached run. Data is stored as atomic
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
//! (C6) Single-version protocols: a record's location leaves an entry only
//!      while the entry's version word is locked, and the word is then left
//!      obsolete (eviction, C2's copy, a NUMA move). With C4, an unlocked
//!      word equal to the one a running transaction read proves the record
//!      still points at the entry: read validation loads the word alone
//!      (`cc::silo::read_still_valid`). Version chains break this (a new
//!      head is linked before the old one unlocks, unchanged). The word may
//!      still be locked after the record has left the entry (a copy is
//!      installed before the original is made obsolete), so a locked word
//!      passes only for the transaction holding *that* lock, not for one
//!      holding the record's lock on the copy (`holds_write_lock`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::CachePadded;
use zen_pmem::zeroed::ZeroedSlice;

use crate::sched::Mutex;

/// Entries of a region's first chunk; chunk `c` holds `FIRST_CHUNK << c`
/// (see `locate`).
const FIRST_CHUNK: usize = 1024;
const _: () = assert!(FIRST_CHUNK.is_power_of_two(), "doubling_locate needs a power of two");
/// Chunks enough for every `u32` entry index:
/// `FIRST_CHUNK * (2^MAX_CHUNKS - 1) > u32::MAX`.
const MAX_CHUNKS: usize = 23;
const _: () = assert!(FIRST_CHUNK as u128 * ((1u128 << MAX_CHUNKS) - 1) > u32::MAX as u128);

/// Chunk and position in it of entry `index`: chunk `c` starts at entry
/// `FIRST_CHUNK * (2^c - 1)`. Every chunk starts at a multiple of 64
/// entries, so a reference-bit word never spans two chunks.
#[inline]
fn locate(index: u32) -> (usize, usize) {
    let (c, i) = zen_pmem::zeroed::doubling_locate(u64::from(index), FIRST_CHUNK as u64);
    (c, i as usize)
}
/// Capacity of a region's queue of copied-away entries (C5).
const COPIED_CAPACITY: usize = 256;

/// The entry was copied into another region (C2, C5).
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
#[derive(Debug, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub struct Entry {
    pub cc: [AtomicU64; 4],
    pub touch_ts: AtomicU64,
    pub flags: AtomicU64,
    pub record: AtomicU64,
    pub slot: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 64);

/// A run of a region's entries. Its arrays are mapped zero
/// (`zen_pmem::zeroed`): opening a chunk stores nothing, and its pages are
/// backed as the owner fills its entries, lowest first.
struct Chunk {
    entries: ZeroedSlice<Entry>,
    /// CLOCK reference bits, one per entry (bit `i % 64` of word `i / 64`):
    /// set when the entry is filled or used, cleared by the hand.
    refs: ZeroedSlice<AtomicU64>,
    /// The key of each entry (cold: written when the entry is filled).
    keys: ZeroedSlice<AtomicU64>,
    data: ZeroedSlice<AtomicU64>,
}

struct RegionState {
    allocated: u32,
    /// Free entries below `allocated`, lowest first (see `allocate`).
    free: FreeSet,
    retired: std::collections::VecDeque<(u32, u64)>,
    hand: u32,
}

/// A set of entry indices with "take the lowest" and "remove this one", as
/// a hierarchical bitmap: no allocation per operation (a `BTreeSet`
/// allocated and freed nodes as entries came and went, about one allocation
/// per Zen insert), and O(log64 n) per operation. Level 0 has one bit per
/// entry; bit `j` of level `l + 1` is set when word `j` of level `l` is not
/// zero; the top level is one word. (A flat bitmap that scanned forward from
/// its lowest non-empty word was 86 % of `allocate` on YCSB-A with 2
/// workers: copies freed entries scattered over a 1M-entry region, and each
/// allocation walked the empty words between them.)
#[derive(Default)]
struct FreeSet {
    levels: Vec<Vec<u64>>,
    len: usize,
}

impl FreeSet {
    /// Make room for `index` in level 0, keeping the upper levels a summary.
    fn grow_for(&mut self, index: u32) {
        let words = index as usize / 64 + 1;
        if self.levels.first().is_some_and(|l0| l0.len() >= words) {
            return;
        }
        // Grow geometrically, so that a region filled one entry at a time
        // resizes O(log n) times.
        if self.levels.is_empty() {
            self.levels.push(Vec::new());
        }
        let mut want = words.max(2 * self.levels[0].len());
        let mut l = 0;
        loop {
            if l == self.levels.len() {
                // A new top level summarising the level below it.
                let below = &self.levels[l - 1];
                let mut top = vec![0u64; want];
                for (j, &w) in below.iter().enumerate() {
                    if w != 0 {
                        top[j / 64] |= 1 << (j % 64);
                    }
                }
                self.levels.push(top);
            } else if self.levels[l].len() < want {
                self.levels[l].resize(want, 0);
            }
            if want == 1 {
                break;
            }
            want = want.div_ceil(64);
            l += 1;
        }
    }

    fn insert(&mut self, index: u32) {
        self.grow_for(index);
        let (w, bit) = (index as usize / 64, 1u64 << (index % 64));
        let was = self.levels[0][w];
        if was & bit != 0 {
            return;
        }
        self.levels[0][w] = was | bit;
        self.len += 1;
        // A word that became non-empty is marked in the level above, and so on.
        let mut i = w;
        let mut was = was;
        for level in &mut self.levels[1..] {
            if was != 0 {
                break;
            }
            let (w, bit) = (i / 64, 1u64 << (i % 64));
            was = level[w];
            level[w] = was | bit;
            i = w;
        }
    }

    fn remove(&mut self, index: u32) -> bool {
        let (w, bit) = (index as usize / 64, 1u64 << (index % 64));
        if self.levels.first().and_then(|l0| l0.get(w)).is_none_or(|word| word & bit == 0) {
            return false;
        }
        self.len -= 1;
        let mut i = index as usize;
        for level in &mut self.levels {
            let (w, bit) = (i / 64, 1u64 << (i % 64));
            level[w] &= !bit;
            if level[w] != 0 {
                break;
            }
            i = w;
        }
        true
    }

    fn pop_first(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        // Descend from the top word along the lowest set bits.
        let mut i = 0usize;
        for level in self.levels.iter().rev() {
            i = i * 64 + level[i].trailing_zeros() as usize;
        }
        let index = i as u32;
        self.remove(index);
        Some(index)
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
///
/// `repr(C)`: the fields every read of an entry loads (`chunks`,
/// `hand_started`) share a line that nobody writes once the region is warm;
/// the owner's allocation state and the other workers' hand-offs start on
/// lines of their own, so they do not bounce that line between cores.
#[repr(C)]
pub struct CacheRegion {
    /// Chunk `c` holds `FIRST_CHUNK << c` entries (the last one a region
    /// can open is cut at its capacity). Entries used to come in chunks of
    /// 1,024 behind a boxed slice of descriptors, which every access loaded:
    /// one descriptor per 1,024 entries is 17 KB for a 256 MiB region of
    /// 1 KiB rows and megabytes at the papers' tens of GB, so those loads
    /// missed (7 % of `read_current`'s samples on TPC-C sat on one). Now the
    /// descriptors are a fixed array inside the region (≈ 2.4 KB, of which
    /// the chunks in use are a few lines) and `locate` is arithmetic.
    chunks: [OnceLock<Chunk>; MAX_CHUNKS],
    words_per_row: usize,
    capacity: u32,
    /// Set by the hand's first call, never cleared: from then on uses set
    /// reference bits. Before, none is set, so the first pass finds every
    /// bit clear, as a pass after a full turn of disuse would.
    hand_started: AtomicBool,
    state: CachePadded<Mutex<RegionState>>,
    /// Entries of this region that another worker detached (MVCC chain cuts).
    pub retire_inbox: RetireInbox,
    /// Items pushed to `retire_inbox` and not yet drained (a lock-free check).
    retire_pending: AtomicU64,
    /// Entries of this region that another worker copied away (C5).
    copied: OnceLock<ArrayQueue<u32>>,
    /// Real NUMA node new chunks are bound to (`numa/bind.rs`); unset: none.
    binding: OnceLock<(std::sync::Arc<crate::numa::MemoryBinder>, usize)>,
}

/// Set bit `i % 64` of word `i / 64` of `refs` (a load first: a used
/// entry's bit is usually set already, and the word is shared by 64 entries).
#[inline]
fn reference(refs: &[AtomicU64], i: usize) {
    let (word, bit) = (&refs[i / 64], 1u64 << (i % 64));
    if word.load(Ordering::Relaxed) & bit == 0 {
        word.fetch_or(bit, Ordering::Relaxed);
    }
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
        CacheRegion {
            chunks: std::array::from_fn(|_| OnceLock::new()),
            words_per_row: row_bytes.div_ceil(8),
            capacity,
            state: CachePadded::new(Mutex::new(RegionState {
                allocated: 0,
                free: Default::default(),
                retired: Default::default(),
                hand: 0,
            })),
            retire_inbox: Mutex::new(Vec::new()),
            retire_pending: AtomicU64::new(0),
            copied: OnceLock::new(),
            binding: OnceLock::new(),
            hand_started: AtomicBool::new(false),
        }
    }

    /// Set entry `i`'s reference bit in chunk `c`, once the hand has run.
    #[inline]
    fn reference(&self, c: &Chunk, i: usize) {
        if self.hand_started.load(Ordering::Relaxed) {
            reference(&c.refs, i);
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

    /// The chunk holding entry `index` (opened on first use) and the
    /// entry's position in it.
    #[inline]
    fn chunk(&self, index: u32) -> (&Chunk, usize) {
        let (c, i) = locate(index);
        let chunk = self.chunks[c].get_or_init(|| {
            let start = FIRST_CHUNK * ((1 << c) - 1);
            let len = (FIRST_CHUNK << c).min((self.capacity as usize).saturating_sub(start));
            let chunk = Chunk {
                entries: ZeroedSlice::new(len),
                refs: ZeroedSlice::new(len.div_ceil(64)),
                keys: ZeroedSlice::new(len),
                data: ZeroedSlice::new(len * self.words_per_row),
            };
            if let Some((binder, node)) = self.binding.get() {
                binder.bind(&chunk.entries[..], *node);
                binder.bind(&chunk.refs[..], *node);
                binder.bind(&chunk.keys[..], *node);
                binder.bind(&chunk.data[..], *node);
                binder.chunk_done();
            }
            chunk
        });
        (chunk, i)
    }

    #[inline]
    pub fn entry(&self, index: u32) -> &Entry {
        let (c, i) = self.chunk(index);
        &c.entries[i]
    }

    /// Mark entry `index` used by a transaction that began at `begin_ts`:
    /// its active stamp (C3) and its CLOCK reference bit. Returns the entry.
    ///
    /// With `exact` the stamp only rises (a `fetch_max`, the version chains'
    /// rule); without it a stale stamp is overwritten with a plain store,
    /// which two readers racing on one entry may leave at the older one's
    /// `begin_ts`. That is enough for the single-version protocols: for them
    /// the stamp keeps CLOCK off entries in use (fewer aborts), and an entry
    /// evicted under a reader is still safe to read (C4) and fails the
    /// reader's validation (C6). The store is not ordered against the
    /// evictor's load in any case (a fresh stamp may reach the evictor late
    /// either way), so C3 was never what a reader's safety rested on. The
    /// `fetch_max` was a locked instruction per read of an entry whose stamp
    /// predates the last commit: 13 % of `read_current`'s samples on TPC-C.
    #[inline]
    pub fn touch(&self, index: u32, begin_ts: u64, exact: bool) -> &Entry {
        let (c, i) = self.chunk(index);
        let e = &c.entries[i];
        if e.touch_ts.load(Ordering::Relaxed) < begin_ts {
            if exact {
                e.touch_ts.fetch_max(begin_ts, Ordering::AcqRel);
            } else {
                e.touch_ts.store(begin_ts, Ordering::Release);
            }
        }
        self.reference(c, i);
        e
    }

    /// Fill entry `index` (not yet published) for record `rid` of `key`
    /// whose version is in `slot` (0: none): no copy flag, referenced, used
    /// at `touch`, CC-Meta words 1–3 cleared. The caller sets the version
    /// word and the row, then publishes. Returns the entry.
    pub fn fill(&self, index: u32, key: u64, rid: u64, slot: u64, touch: u64) -> &Entry {
        let (c, i) = self.chunk(index);
        let e = &c.entries[i];
        c.keys[i].store(key, Ordering::Relaxed);
        e.record.store(rid + 1, Ordering::Relaxed);
        e.slot.store(slot, Ordering::Relaxed);
        e.flags.store(0, Ordering::Relaxed);
        self.reference(c, i);
        e.touch_ts.store(touch, Ordering::Relaxed);
        for w in &e.cc[1..] {
            w.store(0, Ordering::Relaxed);
        }
        e
    }

    /// Ask for the lines that [`fill`](Self::fill) and, with `row`,
    /// [`write_row`](Self::write_row) will store into, for writing: entry
    /// `index` was reserved for a copy that is filled after the commit's
    /// fence, so the misses overlap with that wait.
    #[inline]
    pub fn prefetch_for_fill(&self, index: u32, row: bool) {
        let (c, i) = self.chunk(index);
        zen_pmem::cpu::prefetch_line_for_write(&c.entries[i]);
        zen_pmem::cpu::prefetch_line_for_write(&c.keys[i]);
        if row {
            zen_pmem::cpu::prefetch_for_write(self.data(index));
        }
    }

    /// The key of entry `index`.
    #[inline]
    pub fn key(&self, index: u32) -> &AtomicU64 {
        let (c, i) = self.chunk(index);
        &c.keys[i]
    }

    #[inline]
    pub fn data(&self, index: u32) -> &[AtomicU64] {
        let (c, i) = self.chunk(index);
        let at = i * self.words_per_row;
        &c.data[at..at + self.words_per_row]
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
        let queue = self.copied.get_or_init(|| ArrayQueue::new(COPIED_CAPACITY));
        let _ = queue.push(index);
    }

    /// Owner only: retire the entries others detached or copied away, with
    /// the clock time `now()` (asked only when there is something to retire).
    pub fn drain_retire_inbox(&self, now: impl FnOnce() -> u64) -> usize {
        let copied = self.copied.get().filter(|q| !q.is_empty());
        let detached = self.retire_pending.load(Ordering::Acquire) != 0;
        if !detached && copied.is_none() {
            return 0;
        }
        let now = now();
        let mut n = 0;
        // The inbox (MVCC chain cuts) is locked only when something waits in
        // it: copies (C5) come through the lock-free queue, one state lock.
        let inbox = detached.then(|| self.retire_inbox.lock());
        let mut s = self.state.lock();
        if let Some(mut inbox) = inbox {
            self.retire_pending.fetch_sub(inbox.len() as u64, Ordering::AcqRel);
            for index in inbox.drain(..) {
                s.retired.push_back((index, now));
                n += 1;
            }
        }
        if let Some(queue) = copied {
            for _ in 0..COPIED_CAPACITY {
                let Some(index) = queue.pop() else { break };
                let e = self.entry(index);
                let flags = e.flags.load(Ordering::Acquire);
                if flags & FLAG_COPY == 0 || e.record.load(Ordering::Acquire) == 0 {
                    continue;
                }
                e.record.store(0, Ordering::Release);
                e.flags.store(0, Ordering::Relaxed);
                s.retired.push_back((index, now));
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
    /// record whose reference bit was clear (bits are cleared as the hand
    /// passes). Free and retired entries (no record) are passed over, not
    /// returned: were they returned, a region with many of them would report
    /// nothing evictable while it is full of victims. The hand moves at most
    /// `8 * max + 64` entries per call, so one call costs O(max) however many
    /// entries are free or recently used; the next call goes on from there.
    /// It reads the reference bits a word (64 entries) at a time and loads
    /// only the entries whose bit is clear.
    pub fn clock_candidates(&self, max: usize, out: &mut Vec<u32>) {
        let mut s = self.state.lock();
        if !self.hand_started.load(Ordering::Relaxed) {
            self.hand_started.store(true, Ordering::Relaxed);
        }
        let n = s.allocated;
        if n == 0 {
            return;
        }
        /// Candidates of a word whose lines are requested at once.
        const AHEAD: usize = 8;
        let mut left = (2 * n as usize).min(8 * max + 64);
        let mut index = s.hand % n;
        while left > 0 {
            let (c, i) = self.chunk(index);
            let (word, first) = (&c.refs[i / 64], i % 64);
            // The entries of this word from `index` on: up to the word's end,
            // the last allocated entry and the steps left.
            let span = (64 - first).min((n - index) as usize).min(left);
            let bits = word.load(Ordering::Relaxed);
            let span_mask = (u64::MAX >> (64 - span)) << first;
            // The first candidates' lines are requested before the first is
            // read, so their misses overlap (the hand's cost is these misses:
            // a candidate is an entry nobody used lately). Requesting every
            // candidate of the word was slower (clock_candidates 11.8 % of
            // TPC-C's time against 8.1 %: the misses queue).
            let mut ahead = !bits & span_mask;
            for _ in 0..AHEAD {
                if ahead == 0 {
                    break;
                }
                zen_pmem::cpu::prefetch(&c.entries[i - first + ahead.trailing_zeros() as usize]);
                ahead &= ahead - 1;
            }
            let mut passed = 0;
            let mut full = false;
            while passed < span {
                let b = first + passed;
                passed += 1;
                if bits & (1 << b) != 0 {
                    continue;
                }
                if c.entries[i - first + b].record.load(Ordering::Acquire) == 0 {
                    continue;
                }
                out.push(index + (b - first) as u32);
                if out.len() >= max {
                    full = true;
                    break;
                }
            }
            // Second chance: clear the bits the hand passed (a bit set since
            // the load stays set).
            let cleared = bits & span_mask & (u64::MAX >> (64 - (first + passed)));
            if cleared != 0 {
                word.fetch_and(!cleared, Ordering::Relaxed);
            }
            left -= passed;
            index += passed as u32;
            if index >= n {
                index = 0;
            }
            s.hand = index;
            if full {
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
    fn chunks_double_and_cover_every_entry_index() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(1023), (0, 1023));
        assert_eq!(locate(1024), (1, 0));
        assert_eq!(locate(3071), (1, 2047));
        assert_eq!(locate(3072), (2, 0));
        let (c, i) = locate(u32::MAX);
        assert!(c < MAX_CHUNKS && i < FIRST_CHUNK << c, "the top index lies in the last chunk");
    }

    #[test]
    fn entries_past_the_first_chunks_keep_their_own_words() {
        // 5,000 entries reach chunk 2 (entries 3,072..7,167), cut at the
        // capacity; each keeps its row, key and record apart.
        let region = CacheRegion::new(24, 5000);
        for index in (0..5000).step_by(7).chain([1023, 1024, 3071, 3072, 4999]) {
            let e = region.fill(index, u64::from(index) * 3, u64::from(index), 0, 1);
            e.cc[0].store(u64::from(index), Ordering::Relaxed);
            let row: Vec<u8> = (0..24).map(|b| (index as u8).wrapping_add(b)).collect();
            region.write_row(index, &row);
        }
        for index in (0..5000).step_by(7).chain([1023, 1024, 3071, 3072, 4999]) {
            let e = region.entry(index);
            assert_eq!(e.cc[0].load(Ordering::Relaxed), u64::from(index));
            assert_eq!(e.record.load(Ordering::Relaxed), u64::from(index) + 1);
            assert_eq!(region.key(index).load(Ordering::Relaxed), u64::from(index) * 3);
            let mut out = [0u8; 24];
            region.read_row(index, &mut out);
            assert!(out.iter().enumerate().all(|(b, &v)| v == (index as u8).wrapping_add(b as u8)));
        }
        assert_eq!(std::mem::align_of_val(region.entry(4999)), 64);
        assert_eq!(region.entry(4999) as *const Entry as usize % 64, 0);
    }

    #[test]
    fn a_touch_raises_the_stamp_and_never_lowers_it() {
        let region = CacheRegion::new(8, 64);
        let stamp = |r: &CacheRegion| r.entry(3).touch_ts.load(Ordering::Relaxed);
        region.fill(3, 1, 3, 0, 5);
        region.touch(3, 4, true);
        region.touch(3, 4, false);
        assert_eq!(stamp(&region), 5, "an older transaction's use leaves the stamp");
        region.touch(3, 9, false);
        assert_eq!(stamp(&region), 9, "a single-version use stores its begin timestamp");
        region.touch(3, 12, true);
        assert_eq!(stamp(&region), 12, "a multi-version use raises it");
    }

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

    proptest::proptest! {
        /// The hierarchical free set behaves as an ordered set, whatever
        /// the order of inserts, removes and pops, across level boundaries
        /// (indices up to 300,000: three levels).
        #[test]
        fn the_free_set_is_an_ordered_set(
            ops in proptest::collection::vec((0u8..3, 0u32..300_000, 0u32..70), 1..400)
        ) {
            let mut f = FreeSet::default();
            let mut model = std::collections::BTreeSet::new();
            for (op, far, near) in ops {
                // Half the indices are near 0, so that pops and levels interact.
                let index = if far % 2 == 0 { far } else { near };
                match op {
                    0 => {
                        f.insert(index);
                        model.insert(index);
                    }
                    1 => proptest::prop_assert_eq!(f.remove(index), model.remove(&index)),
                    _ => proptest::prop_assert_eq!(f.pop_first(), model.pop_first()),
                }
                proptest::prop_assert_eq!(f.len(), model.len());
            }
            while let Some(i) = model.pop_first() {
                proptest::prop_assert_eq!(f.pop_first(), Some(i));
            }
            proptest::prop_assert_eq!(f.pop_first(), None);
        }
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

    #[test]
    fn uses_set_reference_bits_only_once_the_hand_has_run() {
        let region = CacheRegion::new(8, 256);
        for i in 0..4u32 {
            assert!(matches!(region.allocate(|| u64::MAX), Alloc::Entry(j) if j == i));
            region.entry(i).record.store(u64::from(i) + 1, Ordering::Relaxed);
        }
        let bits = || region.chunk(0).0.refs[0].load(Ordering::Relaxed);
        region.touch(1, 1, true);
        region.fill(2, 7, 2, 0, 1);
        assert_eq!(bits(), 0, "a region that never evicted keeps no bits");
        // The first pass finds every bit clear: every entry is a candidate.
        let mut out = Vec::new();
        region.clock_candidates(4, &mut out);
        assert_eq!(out, vec![0, 1, 2, 3]);
        region.touch(1, 2, true);
        region.fill(2, 7, 2, 0, 2);
        assert_eq!(bits(), 0b110, "after the hand's first call, uses set their bit");
        out.clear();
        region.clock_candidates(2, &mut out);
        assert_eq!(out, vec![0, 3], "the used entries get their second chance");
    }

    #[test]
    fn the_hand_gives_unreferenced_entries_and_clears_the_bits_it_passes() {
        // 200 entries over four reference words; entry 5 is free (no record).
        let region = CacheRegion::new(8, 256);
        for i in 0..200u32 {
            assert!(matches!(region.allocate(|| u64::MAX), Alloc::Entry(j) if j == i));
            if i != 5 {
                region.entry(i).record.store(u64::from(i) + 1, Ordering::Relaxed);
            }
        }
        let used: Vec<u32> = (0..200).filter(|i| i % 3 == 0 || (60..140).contains(i)).collect();
        // As after an earlier pass (before the hand's first call, uses set no bit).
        region.hand_started.store(true, Ordering::Relaxed);
        for &i in &used {
            region.touch(i, 1, true);
        }
        let referenced = |i: u32| {
            region.chunk(i).0.refs[i as usize / 64].load(Ordering::Relaxed) >> (i % 64) & 1 == 1
        };
        let mut out = Vec::new();
        region.clock_candidates(10, &mut out);
        // The first ten with a clear bit and a record, in order (5 is free).
        let want: Vec<u32> = (0..200).filter(|&i| i != 5 && !used.contains(&i)).take(10).collect();
        assert_eq!(out, want);
        // Passed bits are cleared, bits beyond the hand are not.
        let last = *want.last().unwrap();
        assert!((0..=last).all(|i| !referenced(i)), "a passed bit is still set");
        assert!(used.iter().filter(|&&i| i > last).all(|&i| referenced(i)));
        // Two turns (the most one call walks): the hand goes on from where
        // it stopped, and on its second pass over an entry that was used its
        // second chance is spent, so every entry with a record comes out.
        out.clear();
        region.clock_candidates(400, &mut out);
        let next = (last + 1..200).find(|i| !used.contains(i)).unwrap();
        assert_eq!(out[0], next, "the hand goes on after {last}");
        assert!((0..200).filter(|&i| i != 5).all(|i| out.contains(&i)));
        assert!(!out.contains(&5), "a free entry is never a candidate");
        // A used entry is skipped again once.
        region.touch(0, 2, true);
        out.clear();
        region.clock_candidates(1, &mut out);
        assert_ne!(out, vec![0]);
    }
}
