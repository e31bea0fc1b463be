//! The DRAM tuple cache of wbl: copies of the newest versions, per table,
//! under one byte budget for the engine (first come, first cached; CLOCK
//! within a table once the budget is spent).
//!
//! An entry is (seq, rid + 1, cts, row words). It is a seqlock: a writer
//! claims it by moving `seq` from even to odd (compare-and-swap, so two
//! writers never fill one entry), writes, and publishes `seq + 2`. A reader
//! uses an entry only if `seq` was even and unchanged across its copy and the
//! entry holds exactly the record and the cts its TID names; the OCC read
//! then re-checks the TID, so a stale or torn entry can only cost a retry.
//! A record points at its entry (low half of its `aux` word); a pointer to an
//! entry since reused for another record is harmless (the rid tag differs).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};

use crate::sched::Mutex;

use crate::baseline::occ::table::{ChunkDir, MAX_CHUNKS};

const CHUNK: usize = 256;
/// Entries every table may hold even when the budget is spent.
const MIN_ENTRIES: u64 = 16;
/// Victims the CLOCK hand examines per eviction at most.
const CLOCK_SCAN: u32 = 64;

#[derive(Default)]
struct Entry {
    seq: AtomicU64,
    rid: AtomicU64,
    cts: AtomicU64,
    referenced: AtomicBool,
}

struct Chunk {
    entries: Box<[Entry]>,
    data: Box<[AtomicU64]>,
}

/// The cache of one table.
pub struct TupleCache {
    words_per_row: usize,
    chunks: ChunkDir<Chunk>,
    /// Entries in use (a multiple of CHUNK), grown under `grow`.
    entries: AtomicU64,
    grow: Mutex<()>,
    hand: AtomicU64,
}

/// The engine's cache budget, shared by every table's cache.
#[derive(Debug, Default)]
pub struct CacheBudget {
    pub limit_bytes: u64,
    pub used_bytes: AtomicU64,
}

impl TupleCache {
    pub fn new(row_bytes: usize) -> TupleCache {
        TupleCache {
            words_per_row: row_bytes.div_ceil(8),
            chunks: ChunkDir::default(),
            entries: AtomicU64::new(0),
            grow: Mutex::new(()),
            hand: AtomicU64::new(0),
        }
    }

    fn entry_bytes(&self) -> u64 {
        (std::mem::size_of::<Entry>() + self.words_per_row * 8) as u64
    }

    fn chunk(&self, index: u64) -> &Chunk {
        self.chunks.get_or_init(index as usize / CHUNK, || Chunk {
            entries: (0..CHUNK).map(|_| Entry::default()).collect(),
            data: (0..CHUNK * self.words_per_row).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn slot(&self, index: u64) -> (&Entry, &[AtomicU64]) {
        let c = self.chunk(index);
        let i = index as usize % CHUNK;
        (&c.entries[i], &c.data[i * self.words_per_row..(i + 1) * self.words_per_row])
    }

    pub fn capacity(&self) -> u64 {
        self.entries.load(Ordering::Acquire)
    }

    /// Start loading the entry and row that `aux` names; false when it names
    /// none (the row is in NVM only).
    pub fn prefetch(&self, aux: &AtomicU64) -> bool {
        let Some(index) = (aux.load(Ordering::Relaxed) as u32).checked_sub(1) else {
            return false;
        };
        let index = u64::from(index);
        if index >= self.capacity() {
            return false;
        }
        let (e, data) = self.slot(index);
        zen_pmem::cpu::prefetch(e);
        zen_pmem::cpu::prefetch_lines(data);
        true
    }

    /// Copy the cached row of `rid` at version `cts` into `out`, if cached.
    pub fn read(&self, aux: &AtomicU64, rid: u64, cts: u64, out: &mut [u8]) -> bool {
        let Some(index) = (aux.load(Ordering::Acquire) as u32).checked_sub(1) else {
            return false;
        };
        let index = u64::from(index);
        if index >= self.capacity() {
            return false;
        }
        let (e, data) = self.slot(index);
        let s1 = e.seq.load(Ordering::Acquire);
        if s1 % 2 == 1
            || e.rid.load(Ordering::Relaxed) != rid + 1
            || e.cts.load(Ordering::Relaxed) != cts
        {
            return false;
        }
        crate::words::load_row(data, out);
        fence(Ordering::Acquire);
        if e.seq.load(Ordering::Relaxed) != s1 {
            return false;
        }
        e.referenced.store(true, Ordering::Relaxed);
        true
    }

    /// Cache `row` as version `cts` of `rid` (best effort: gives up when the
    /// entry it picks is being written by someone else).
    pub fn install(&self, aux: &AtomicU64, rid: u64, cts: u64, row: &[u8], budget: &CacheBudget) {
        let current = (aux.load(Ordering::Acquire) as u32).checked_sub(1).map(u64::from);
        let index = match current {
            Some(i)
                if i < self.capacity() && self.slot(i).0.rid.load(Ordering::Relaxed) == rid + 1 =>
            {
                i
            }
            _ => match self.victim(budget) {
                Some(i) => i,
                None => return,
            },
        };
        let (e, data) = self.slot(index);
        let s = e.seq.load(Ordering::Acquire);
        if s % 2 == 1
            || e.seq.compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed).is_err()
        {
            return;
        }
        fence(Ordering::Release);
        e.rid.store(rid + 1, Ordering::Relaxed);
        e.cts.store(cts, Ordering::Relaxed);
        crate::words::store_row(data, row);
        e.referenced.store(true, Ordering::Relaxed);
        e.seq.store(s + 2, Ordering::Release);
        let link = index + 1;
        let _ = aux
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |a| Some((a & !0xFFFF_FFFF) | link));
    }

    /// An entry to (re)use: a new one while the budget allows, else CLOCK.
    fn victim(&self, budget: &CacheBudget) -> Option<u64> {
        if let Some(i) = self.grow_one_chunk(budget) {
            return Some(i);
        }
        let cap = self.capacity();
        if cap == 0 {
            return None;
        }
        for _ in 0..CLOCK_SCAN {
            let i = self.hand.fetch_add(1, Ordering::Relaxed) % cap;
            let e = self.slot(i).0;
            if !e.referenced.swap(false, Ordering::Relaxed) {
                return Some(i);
            }
        }
        Some(self.hand.fetch_add(1, Ordering::Relaxed) % cap)
    }

    /// Grow by a chunk if the budget (or the per-table minimum) allows;
    /// returns the first new entry.
    fn grow_one_chunk(&self, budget: &CacheBudget) -> Option<u64> {
        let cap = self.capacity();
        let bytes = CHUNK as u64 * self.entry_bytes();
        let under_minimum = cap < MIN_ENTRIES;
        if !under_minimum && budget.used_bytes.load(Ordering::Relaxed) + bytes > budget.limit_bytes
        {
            return None;
        }
        let _g = self.grow.try_lock()?;
        if self.capacity() != cap || cap as usize >= CHUNK * MAX_CHUNKS {
            return None;
        }
        budget.used_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.chunk(cap);
        self.entries.store(cap + CHUNK as u64, Ordering::Release);
        Some(cap)
    }

    /// (rid, cts, row) of every published entry (quiescent checks).
    pub fn published(&self) -> Vec<(u64, u64, Vec<u8>)> {
        let mut out = Vec::new();
        for i in 0..self.capacity() {
            let (e, data) = self.slot(i);
            let rid = e.rid.load(Ordering::Acquire);
            if e.seq.load(Ordering::Acquire) % 2 == 0 && rid != 0 {
                let row =
                    data.iter().flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes()).collect();
                out.push((rid - 1, e.cts.load(Ordering::Acquire), row));
            }
        }
        out
    }
}
