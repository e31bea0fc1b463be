//! The point index: key → record id, grow-only, lock-free for readers.
//!
//! Every engine's primary index asks it one question per access ("which
//! record holds this key?"), so it is built for that and nothing else:
//!
//! - keys are never removed (a deleted key keeps its record, `mod.rs`), so no
//!   reader can meet a removed entry and nothing needs epoch reclamation;
//! - 64 shards, chosen by the top bits of the hash, each an open-addressing
//!   table of interleaved (key, record id) words with linear probing: a hit
//!   is one probe into one cache line in the common case;
//! - a reader takes no lock and writes nothing: it loads the shard's current
//!   table and probes it (an insert stores the record id, then publishes the
//!   key with release ordering; the reader loads the key with acquire);
//! - inserts take their shard's mutex (inserts are rarer than lookups, and
//!   one shard of 64 serialises only the inserts that hash to it). A table
//!   over 70 % full is copied into one twice its size, which is then
//!   published; the old table stays mapped (readers may still probe it,
//!   and it holds every entry it ever held) until the index is dropped, so
//!   the old tables of a shard cost at most as much as its current one;
//! - the tables of one level, every shard's, are one zero-mapped slice
//!   (`zen_pmem::zeroed::ZeroedSlice`): a key word holds the key + 1, so
//!   zero is an empty pair and a new table costs no stores; a level's slice
//!   of 2 MiB or more (from 2,048 pairs a shard) is on transparent huge
//!   pages, so a lookup's miss walks a short page table.
//!
//! Measured against `scc::HashIndex` (what it replaces) and `papaya` on 2 M
//! keys, random lookups, one thread (`benches/index.rs`, docs/benchmarks.md).

use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use zen_pmem::zeroed::ZeroedSlice;

use crate::sched::Mutex;

/// foldhash: a few cycles per u64 key, randomly seeded per index.
type Fast = foldhash::fast::RandomState;

const SHARD_BITS: u32 = 6;
const SHARDS: usize = 1 << SHARD_BITS;
/// Pairs in a shard's first table.
const FIRST_PAIRS: usize = 8;
/// Tables a shard may grow through (the last holds 8 << 27 pairs).
const LEVELS: usize = 28;
/// An empty pair's key word (a key word holds the key + 1; keys are at most
/// `MAX_KEY` = 2^63 − 1).
const EMPTY: u64 = 0;

/// The shards' current levels, in one cache line: every lookup reads it.
#[repr(align(64))]
struct Levels([AtomicU8; SHARDS]);

/// Probe `table` for `key` from `hash`: `Ok(rid)` when found, `Err(pair)`
/// with the first empty pair otherwise.
#[inline]
fn probe(table: &[AtomicU64], key: u64, hash: u64) -> Result<u64, usize> {
    let mask = table.len() / 2 - 1;
    let stored = key + 1;
    let mut i = hash as usize & mask;
    loop {
        let k = table[2 * i].load(Ordering::Acquire);
        if k == stored {
            return Ok(table[2 * i + 1].load(Ordering::Relaxed));
        }
        if k == EMPTY {
            return Err(i);
        }
        i = (i + 1) & mask;
    }
}

/// Words of one shard's table at `level`.
const fn table_words(level: usize) -> usize {
    2 * (FIRST_PAIRS << level)
}

/// Key → record id; see the module docs.
///
/// Laid out for the lookup, which reads the shard's current level and then
/// that level's table: the 64 levels share one line (`current`), and the
/// descriptors of the levels' slices sit inside the index, so a shard's
/// table is arithmetic on a line that stays cached. (Shard-major handles, a
/// shard's level word and its table handle were two lines per shard, 128 per
/// index: TPC-C's lookups missed the L1 on both before the probe's own miss.)
pub struct PointIndex {
    current: Levels,
    /// Level `l`: every shard's table of `FIRST_PAIRS << l` pairs (2 words
    /// each), shard `s`'s at `s * table_words(l)`; mapped when the first
    /// shard reaches the level.
    levels: [OnceLock<ZeroedSlice<AtomicU64>>; LEVELS],
    /// Keys in each shard's current table; held by its inserters.
    keys: Box<[CachePadded<Mutex<usize>>]>,
    hasher: Fast,
}

impl Default for PointIndex {
    fn default() -> Self {
        PointIndex {
            current: Levels(std::array::from_fn(|_| AtomicU8::new(0))),
            levels: std::array::from_fn(|_| OnceLock::new()),
            keys: (0..SHARDS).map(|_| CachePadded::new(Mutex::new(0))).collect(),
            hasher: Fast::default(),
        }
    }
}

impl PointIndex {
    /// The hash of `key` (its shard is the top bits).
    #[inline]
    fn hash(&self, key: u64) -> u64 {
        self.hasher.hash_one(key)
    }

    /// The current table of the shard of `hash`, if it has one.
    #[inline]
    fn table(&self, hash: u64) -> Option<&[AtomicU64]> {
        let shard = (hash >> (64 - SHARD_BITS)) as usize;
        let level = self.current.0[shard].load(Ordering::Acquire) as usize;
        let words = table_words(level);
        self.levels[level].get().map(|all| &all[shard * words..(shard + 1) * words])
    }

    /// Shard `shard`'s table at `level`, mapping the level on first use
    /// (its inserters hold the shard's lock).
    fn table_mut(&self, level: usize, shard: usize) -> &[AtomicU64] {
        let words = table_words(level);
        let all = self.levels[level].get_or_init(|| ZeroedSlice::new(SHARDS * words));
        &all[shard * words..(shard + 1) * words]
    }

    /// The record id of `key`, if it has one.
    #[inline]
    pub fn get(&self, key: u64) -> Option<u64> {
        self.get_hashed(key, self.hash(key))
    }

    /// [`PointIndex::get`] with the hash [`PointIndex::prefetch`] returned.
    #[inline]
    pub fn get_hashed(&self, key: u64, hash: u64) -> Option<u64> {
        // u64::MAX has no key + 1 and is never inserted.
        if key == u64::MAX {
            return None;
        }
        probe(self.table(hash)?, key, hash).ok()
    }

    /// Start loading the line where a lookup of `key` begins its probe
    /// (a hint: [`PointIndex::get`] of several keys overlaps their misses
    /// when their lines were asked for first). Returns the key's hash for
    /// [`PointIndex::get_hashed`].
    #[inline]
    pub fn prefetch(&self, key: u64) -> u64 {
        let hash = self.hash(key);
        if let Some(table) = self.table(hash) {
            let mask = table.len() / 2 - 1;
            zen_pmem::cpu::prefetch(&table[2 * (hash as usize & mask)]);
        }
        hash
    }

    /// Give `key` (≤ `MAX_KEY`) the record `rid`; `Err(existing)` when it
    /// has one already.
    pub fn insert(&self, key: u64, rid: u64) -> Result<(), u64> {
        assert!(key < u64::MAX, "point index: key {key} has no key + 1");
        let hash = self.hash(key);
        let shard = (hash >> (64 - SHARD_BITS)) as usize;
        let mut keys = self.keys[shard].lock();
        let mut level = self.current.0[shard].load(Ordering::Acquire) as usize;
        let mut table = self.table_mut(level, shard);
        if let Ok(existing) = probe(table, key, hash) {
            return Err(existing);
        }
        let pairs = table.len() / 2;
        if (*keys + 1) * 10 > pairs * 7 && level + 1 < LEVELS {
            // The next level's table of this shard is zero and no one else's:
            // fill it, then publish the level.
            let bigger = self.table_mut(level + 1, shard);
            for pair in table.chunks_exact(2) {
                let stored = pair[0].load(Ordering::Relaxed);
                if stored != EMPTY {
                    let k = stored - 1;
                    let at =
                        probe(bigger, k, self.hash(k)).expect_err("keys are unique in a table");
                    bigger[2 * at + 1].store(pair[1].load(Ordering::Relaxed), Ordering::Relaxed);
                    bigger[2 * at].store(stored, Ordering::Relaxed);
                }
            }
            level += 1;
            table = bigger;
            self.current.0[shard].store(level as u8, Ordering::Release);
        }
        let at = probe(table, key, hash).expect_err("checked above, under the shard lock");
        table[2 * at + 1].store(rid, Ordering::Relaxed);
        table[2 * at].store(key + 1, Ordering::Release);
        *keys += 1;
        Ok(())
    }

    /// Keys in the index.
    pub fn len(&self) -> usize {
        self.keys.iter().map(|k| *k.lock()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups_find_every_key_across_growth() {
        let index = PointIndex::default();
        for k in 0..100_000u64 {
            assert_eq!(index.insert(k * 3, k), Ok(()));
        }
        for k in 0..100_000u64 {
            assert_eq!(index.get(k * 3), Some(k));
            assert_eq!(index.get(k * 3 + 1), None);
        }
        assert_eq!(index.insert(300, 7), Err(100));
        assert_eq!(index.len(), 100_000);
        assert_eq!(index.get(crate::schema::MAX_KEY), None);
        assert_eq!(index.get(u64::MAX), None, "the one key that cannot be stored");
        assert_eq!(index.get(0), Some(0), "key 0 is stored as 1, not as an empty pair");
        assert_eq!(index.insert(0, 9), Err(0));
        assert_eq!(index.insert(crate::schema::MAX_KEY, 5), Ok(()));
        assert_eq!(index.get(crate::schema::MAX_KEY), Some(5));
    }

    #[test]
    fn readers_racing_inserters_never_miss_a_published_key() {
        let index = PointIndex::default();
        let published = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                for k in 1..=50_000u64 {
                    index.insert(k, k + 1).unwrap();
                    published.store(k, Ordering::Release);
                }
            });
            s.spawn(|| {
                let mut checked = 0;
                while checked < 50_000 {
                    let upto = published.load(Ordering::Acquire);
                    for k in (checked + 1)..=upto {
                        assert_eq!(index.get(k), Some(k + 1), "key {k}");
                    }
                    checked = upto;
                }
            });
        });
    }
}
