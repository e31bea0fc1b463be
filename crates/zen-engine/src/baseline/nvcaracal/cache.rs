//! Cached versions (NVCaracal §4.1, §4.2, §5.2): a DRAM copy of committed
//! rows, so a row read again in a later epoch is not read from NVM again.
//!
//! ```text
//!  what     the committed row (the last durable epoch's version) of a key,
//!           whole; never an uncommitted or transient version
//!  filled   when an epoch's procedure (or an interactive/reconnaissance
//!           read through the `Engine` adapter) reads a committed row from
//!           NVM; and after the epoch mark, from each updated row's final
//!           version (the paper's "the final write creates a cached
//!           version"). Rows inserted by the epoch are not cached until a
//!           later epoch reads them (§4.1: only rows that are accessed)
//!  dropped  a row deleted by the epoch (after the mark); every entry not
//!           read or updated in the last K epochs, evicted in the init
//!           phase of an epoch (epoch-based LRU with per-epoch eviction
//!           lists, §5.2), when no procedure runs
//!  bound    `bound_bytes` (the engine's DRAM cache budget, `--cache-size`
//!           or `--dram-ratio`): a fill that would pass it is refused
//!           (counted); nothing is evicted during execution, as in the paper
//!  crash    DRAM only: recovery starts with it empty
//! ```
//!
//! Rows of a table have one fixed size, so replacing an entry's bytes never
//! changes the cache's size.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use super::versions::{self, Key};
use crate::sched::RwLock;

/// Counted DRAM per entry besides the row bytes: the map slot (key, entry,
/// control byte) and one eviction-list slot.
pub const ENTRY_OVERHEAD: u64 =
    (std::mem::size_of::<(Key, Entry)>() + 1 + std::mem::size_of::<Key>()) as u64;

/// One cached version.
pub struct Entry {
    bytes: Box<[u8]>,
    /// The last epoch that read or updated it.
    last: AtomicU64,
    /// The epoch whose eviction list holds it.
    listed: u64,
}

/// foldhash: a few cycles per key (the default SipHash cost the epoch's
/// commit step about a third of its time).
type Fast = foldhash::fast::RandomState;

#[derive(Default)]
struct Shard {
    map: HashMap<Key, Entry, Fast>,
    /// Eviction lists: epoch → keys entered in (or moved to) it. A key is
    /// in the list its entry's `listed` names; other occurrences (of an
    /// entry dropped since, or moved) are skipped.
    lists: BTreeMap<u64, Vec<Key>>,
}

/// Cumulative counters of the cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    pub hits: u64,
    /// Committed rows read from NVM (with the cache off, every such read).
    pub misses: u64,
    /// Fills refused because the cache was at its bound.
    pub refused: u64,
    /// Entries evicted by the epoch-based LRU.
    pub evicted: u64,
    pub entries: u64,
    /// Counted DRAM of the entries (row bytes + `ENTRY_OVERHEAD` each).
    pub bytes: u64,
}

/// The cached versions of an engine.
pub struct RowCache {
    on: bool,
    keep_epochs: u64,
    bound_bytes: u64,
    shards: Vec<RwLock<Shard>>,
    bytes: AtomicU64,
    entries: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    refused: AtomicU64,
    evicted: AtomicU64,
}

impl RowCache {
    /// `on`: whether anything is cached; `keep_epochs`: K; `bound_bytes`:
    /// the most counted DRAM the entries may take.
    pub fn new(on: bool, keep_epochs: u64, bound_bytes: u64) -> RowCache {
        RowCache {
            on,
            keep_epochs,
            bound_bytes,
            shards: (0..versions::SHARDS).map(|_| RwLock::new(Shard::default())).collect(),
            bytes: AtomicU64::new(0),
            entries: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    pub fn is_on(&self) -> bool {
        self.on
    }

    fn shard(&self, key: Key) -> &RwLock<Shard> {
        &self.shards[versions::shard_of(key)]
    }

    /// Copy the cached row of `key` into `out` and note that `epoch` read
    /// it; `false` when it is not cached.
    pub fn get(&self, key: Key, epoch: u64, out: &mut [u8]) -> bool {
        if !self.on {
            return false;
        }
        let shard = self.shard(key).read();
        let Some(e) = shard.map.get(&key) else {
            return false;
        };
        out.copy_from_slice(&e.bytes);
        if e.last.load(Ordering::Relaxed) < epoch {
            e.last.store(epoch, Ordering::Relaxed);
        }
        true
    }

    /// Enter `bytes`, the committed row of `key` just read from NVM, unless
    /// it is cached already or the cache is at its bound.
    pub fn fill(&self, key: Key, epoch: u64, bytes: &[u8]) {
        if !self.on {
            return;
        }
        let mut shard = self.shard(key).write();
        if let Some(e) = shard.map.get(&key) {
            e.last.store(epoch.max(e.last.load(Ordering::Relaxed)), Ordering::Relaxed);
            return;
        }
        if !self.reserve(bytes.len()) {
            return;
        }
        shard
            .map
            .insert(key, Entry { bytes: bytes.into(), last: AtomicU64::new(epoch), listed: epoch });
        shard.lists.entry(epoch).or_default().push(key);
    }

    /// Count an entry of `row` bytes in, unless that passes the bound.
    fn reserve(&self, row: usize) -> bool {
        let cost = row as u64 + ENTRY_OVERHEAD;
        let now = self.bytes.fetch_add(cost, Ordering::Relaxed) + cost;
        if now > self.bound_bytes {
            self.bytes.fetch_sub(cost, Ordering::Relaxed);
            self.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.entries.fetch_add(1, Ordering::Relaxed);
        true
    }

    fn release(&self, row: usize) {
        self.bytes.fetch_sub(row as u64 + ENTRY_OVERHEAD, Ordering::Relaxed);
        self.entries.fetch_sub(1, Ordering::Relaxed);
    }

    /// After epoch `epoch` is durable: the committed rows of shard `s`
    /// changed by it, each (key, its new bytes or `None` when deleted).
    /// Updated rows' entries take the new bytes, or are created; deleted
    /// rows' entries go. Rows the epoch inserted are not passed (not
    /// cached until a later epoch reads them). Shard `s` holds exactly the
    /// keys whose `versions::shard_of` is `s`, so threads that commit
    /// different shards never meet.
    pub fn commit<'r>(
        &self,
        s: usize,
        epoch: u64,
        changes: impl Iterator<Item = (Key, Option<&'r [u8]>)>,
    ) {
        if !self.on {
            return;
        }
        let mut shard = self.shards[s].write();
        let Shard { map, lists } = &mut *shard;
        for (key, row) in changes {
            debug_assert_eq!(versions::shard_of(key), s);
            match row {
                None => {
                    if let Some(e) = map.remove(&key) {
                        self.release(e.bytes.len());
                    }
                }
                Some(bytes) => {
                    if let Some(e) = map.get_mut(&key) {
                        e.bytes.copy_from_slice(bytes);
                        *e.last.get_mut() = epoch;
                    } else if self.reserve(bytes.len()) {
                        let entry = Entry {
                            bytes: bytes.into(),
                            last: AtomicU64::new(epoch),
                            listed: epoch,
                        };
                        map.insert(key, entry);
                        lists.entry(epoch).or_default().push(key);
                    }
                }
            }
        }
    }

    /// The init phase of epoch `epoch`: evict every entry that no epoch in
    /// the last K read or updated (its last epoch ≤ `epoch` − K − 1); a
    /// listed entry used since moves to the list of its last epoch.
    pub fn evict(&self, epoch: u64) {
        if !self.on || epoch <= self.keep_epochs + 1 {
            return;
        }
        let cutoff = epoch - self.keep_epochs - 1;
        let mut evicted = 0;
        for shard in &self.shards {
            let mut shard = shard.write();
            let newer = shard.lists.split_off(&(cutoff + 1));
            let old = std::mem::replace(&mut shard.lists, newer);
            let Shard { map, lists } = &mut *shard;
            for (listed, keys) in old {
                for key in keys {
                    let Some(e) = map.get_mut(&key) else { continue };
                    if e.listed != listed {
                        continue;
                    }
                    let last = *e.last.get_mut();
                    if last > cutoff {
                        e.listed = last;
                        lists.entry(last).or_default().push(key);
                    } else if let Some(e) = map.remove(&key) {
                        self.release(e.bytes.len());
                        evicted += 1;
                    }
                }
            }
        }
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Count hits and NVM reads of committed rows.
    pub fn count(&self, hits: u64, misses: u64) {
        if hits > 0 {
            self.hits.fetch_add(hits, Ordering::Relaxed);
        }
        if misses > 0 {
            self.misses.fetch_add(misses, Ordering::Relaxed);
        }
    }

    pub fn counters(&self) -> CacheCounters {
        CacheCounters {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            entries: self.entries.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
        }
    }

    /// Every cached (key, row), for the invariant check.
    pub fn for_each(&self, mut f: impl FnMut(Key, &[u8])) {
        for shard in &self.shards {
            for (k, e) in &shard.read().map {
                f(*k, &e.bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(v: u8) -> Vec<u8> {
        vec![v; 24]
    }

    #[test]
    fn an_entry_not_used_in_k_epochs_is_evicted_and_a_used_one_stays() {
        let c = RowCache::new(true, 2, 1 << 20);
        c.fill((0, 1), 1, &row(1));
        c.fill((0, 2), 1, &row(2));
        let mut out = row(0);
        // Epoch 3 reads key 2 only; key 1 was last used in epoch 1.
        assert!(c.get((0, 2), 3, &mut out) && out == row(2));
        c.evict(4); // cutoff 1: key 1 (last 1) goes, key 2 (last 3) moves on
        assert!(!c.get((0, 1), 4, &mut out));
        assert!(c.get((0, 2), 4, &mut out));
        assert_eq!((c.counters().evicted, c.counters().entries), (1, 1));
        c.evict(7); // cutoff 4: key 2 was last read in epoch 4
        assert_eq!(c.counters().entries, 0);
        assert_eq!(c.counters().bytes, 0);
    }

    #[test]
    fn the_bound_refuses_fills_and_commit_replaces_or_drops() {
        let cost = 24 + ENTRY_OVERHEAD;
        let c = RowCache::new(true, 20, 2 * cost);
        c.fill((0, 1), 1, &row(1));
        c.fill((0, 2), 1, &row(2));
        c.fill((0, 3), 1, &row(3));
        let k = c.counters();
        assert_eq!((k.entries, k.bytes, k.refused), (2, 2 * cost, 1));
        let commit = |key: Key, r: Option<&[u8]>| {
            c.commit(versions::shard_of(key), 2, std::iter::once((key, r)));
        };
        commit((0, 1), Some(&row(9)));
        let mut out = row(0);
        assert!(c.get((0, 1), 2, &mut out) && out == row(9));
        commit((0, 2), None);
        assert!(!c.get((0, 2), 2, &mut out));
        // An updated row not cached yet is entered (there is room now).
        commit((0, 5), Some(&row(5)));
        assert!(c.get((0, 5), 2, &mut out) && out == row(5));
        let off = RowCache::new(false, 20, 1 << 20);
        off.fill((0, 1), 1, &row(1));
        assert!(!off.get((0, 1), 1, &mut out));
        assert_eq!(off.counters().entries, 0);
    }
}
