//! Secondary indexes: (column bytes ‖ primary key), ordered.
//!
//! One design for every engine. An index key is the named columns' bytes,
//! concatenated (at most [`MAX_SECONDARY_KEY_BYTES`]), held inline in a
//! fixed zero-padded array; all keys of one index have the same width, so
//! comparing the arrays orders them as the byte strings. The primary keys
//! that share an index key form a **group**, kept sorted:
//!
//! - `groups`, a table from index key to its group: a lookup of a whole key
//!   (TPC-C's customers by last name, orders by customer) is one probe of a
//!   `PointIndex` (`point.rs`) keyed by the key's 64-bit hash, whose value names the
//!   group in a grow-only arena; the group holds the key itself, in its first
//!   line, so the probe and the group are the two misses of a cold lookup
//!   (papaya's map, before, was three before the group: its metadata byte,
//!   its entry pointer, the boxed entry's key). Keys whose hashes collide
//!   are chained through the groups;
//! - `keys`, a skip list of the distinct index keys, for lookups by a
//!   shorter prefix (they walk the keys in order and read each one's group).
//!   A key enters it once, when its group is made, so adding a primary key
//!   to an existing group (an order of a customer who has orders) does not
//!   touch it.
//!
//! A group is a small vector of primary keys (four inline) under its own
//! mutex: writers are the installers of committed writes, under the record's
//! lock (a changed key is removed from the old group, then added to the new
//! one); a reader locks the group only to copy its keys and allocates
//! nothing. What a lookup returns is a set of candidate primary keys: the
//! transaction then reads (and validates) those rows.
//!
//! A group stays once made, empty when its rows left (as the point index
//! keeps a deleted key's record): the groups are the distinct index keys
//! ever indexed, not the live ones. Before the groups, a skip list of (key,
//! primary key) entries walked ~20 scattered nodes per New-Order insert and
//! per lookup (`benches/secondary.rs` measures it, the papaya map and this
//! table side by side; docs/benchmarks.md); before that, an
//! `RwLock<BTreeSet<(Vec<u8>, u64)>>` that every New-Order took for writing.

use std::hash::BuildHasher;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_skiplist::SkipSet;
use smallvec::SmallVec;

use super::point::PointIndex;
use crate::error::{Error, Result};
use crate::sched::Mutex;

/// The widest secondary-index key a schema may define (`TableSchema::validate`).
pub const MAX_SECONDARY_KEY_BYTES: usize = 48;

/// An index key, zero-padded.
type Key = [u8; MAX_SECONDARY_KEY_BYTES];

/// Primary keys a group holds without a heap allocation (TPC-C: ~3
/// customers per last name, one order per customer at load).
const INLINE_PKS: usize = 4;

/// Words of an index key.
const KEY_WORDS: usize = MAX_SECONDARY_KEY_BYTES / 8;

/// One index key and its primary keys, ascending. The key and the chain
/// word share the first line (what a lookup compares), the primary keys the
/// second.
#[derive(Default)]
#[repr(C, align(64))]
struct Group {
    /// The index key (set before the group is published, never changed).
    key: [AtomicU64; KEY_WORDS],
    /// The next group whose key has the same hash: its id + 1 (0: none).
    next: AtomicU64,
    /// Whether the key is in `SecondaryIndex::keys` (set by the first
    /// inserter that finds it missing, after inserting it there).
    listed: AtomicBool,
    pks: Mutex<SmallVec<[u64; INLINE_PKS]>>,
}

/// The words of `key`.
#[inline]
fn words(key: &Key) -> [u64; KEY_WORDS] {
    std::array::from_fn(|i| u64::from_ne_bytes(key[8 * i..8 * i + 8].try_into().expect("8 bytes")))
}

impl Group {
    /// Is this group's key `key`?
    #[inline]
    fn holds(&self, key: &[u64; KEY_WORDS]) -> bool {
        self.key.iter().zip(key).all(|(w, k)| w.load(Ordering::Relaxed) == *k)
    }

    /// Append this group's keys to `out` until it holds `limit`.
    fn copy_into(&self, limit: usize, out: &mut Vec<u64>) {
        let pks = self.pks.lock();
        let room = limit.saturating_sub(out.len());
        out.extend(pks.iter().take(room));
    }
}

/// Groups of the first arena chunk; chunk `c` holds `FIRST_GROUPS << c`.
const FIRST_GROUPS: u64 = 64;
const _: () = assert!(FIRST_GROUPS.is_power_of_two(), "doubling_locate needs a power of two");
/// Arena chunks (the last ends past 2^40 groups).
const CHUNKS: usize = 34;

/// Index key → group: a point index from the key's hash to the id of the
/// first group with that hash, the groups in a grow-only arena of chunks
/// that double in size. Readers take no lock; a group, once published,
/// stays where it is until the index is dropped. (The OCC core's two-level
/// `ChunkDir` would do, at one more dependent load per group: TPC-C
/// `ideal` 0.985 with it, docs/benchmarks.md session 24; the 34 chunk
/// handles here, 816 bytes, stay cached.)
struct Groups {
    first: PointIndex,
    chunks: Box<[OnceLock<Box<[Group]>>]>,
    allocated: AtomicU64,
    hasher: foldhash::fast::RandomState,
}

impl Groups {
    fn new() -> Groups {
        Groups {
            first: PointIndex::default(),
            chunks: (0..CHUNKS).map(|_| OnceLock::new()).collect(),
            allocated: AtomicU64::new(0),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The point-index key of `key`: its hash, within `MAX_KEY`.
    #[inline]
    fn hash(&self, key: &Key) -> u64 {
        self.hasher.hash_one(key) >> 1
    }

    /// Chunk and position of group `id`.
    #[inline]
    fn locate(id: u64) -> (usize, usize) {
        let (c, i) = zen_pmem::zeroed::doubling_locate(id, FIRST_GROUPS);
        (c, i as usize)
    }

    /// Group `id` (allocated: its chunk exists).
    #[inline]
    fn group(&self, id: u64) -> &Group {
        let (c, at) = Self::locate(id);
        &self.chunks[c].get().expect("an allocated group's chunk exists")[at]
    }

    /// The group of `key`, if it has one.
    #[inline]
    fn get(&self, key: &Key) -> Option<&Group> {
        self.get_hashed(key, self.hash(key))
    }

    /// [`Groups::get`] of `key` whose hash is `hash`.
    #[inline]
    fn get_hashed(&self, key: &Key, hash: u64) -> Option<&Group> {
        let id = self.first.get(hash)?;
        self.find_from(id, &words(key)).ok()
    }

    /// Walk the chain from group `id`: `Ok` with the group holding `key`,
    /// else `Err` with the chain's last group.
    fn find_from(
        &self,
        mut id: u64,
        key: &[u64; KEY_WORDS],
    ) -> std::result::Result<&Group, &Group> {
        loop {
            let g = self.group(id);
            if g.holds(key) {
                return Ok(g);
            }
            match g.next.load(Ordering::Acquire) {
                0 => return Err(g),
                next => id = next - 1,
            }
        }
    }

    /// The group of `key`, made if it has none.
    #[inline]
    fn get_or_make(&self, key: &Key) -> &Group {
        self.get_or_make_hashed(key, self.hash(key))
    }

    /// [`Groups::get_or_make`] of `key` whose hash is `hash` (tests give
    /// different keys one hash to exercise the chains).
    fn get_or_make_hashed(&self, key: &Key, hash: u64) -> &Group {
        if let Some(g) = self.get_hashed(key, hash) {
            return g;
        }
        // A new group, its key set before anyone can reach it (the point
        // index and the chain publish with release ordering).
        let kw = words(key);
        let id = self.allocated.fetch_add(1, Ordering::Relaxed);
        let (c, at) = Self::locate(id);
        let chunk = self.chunks[c]
            .get_or_init(|| (0..FIRST_GROUPS << c).map(|_| Group::default()).collect());
        let mine = &chunk[at];
        for (w, k) in mine.key.iter().zip(&kw) {
            w.store(*k, Ordering::Relaxed);
        }
        let Err(first) = self.first.insert(hash, id) else {
            return mine;
        };
        // The hash has a chain: another inserter made this key's group
        // first (ours is left unreachable and empty), or a different key
        // shares the hash (ours goes at the chain's end).
        let mut from = first;
        loop {
            match self.find_from(from, &kw) {
                Ok(g) => return g,
                Err(last) => {
                    match last.next.compare_exchange(0, id + 1, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => return mine,
                        Err(next) => from = next - 1,
                    }
                }
            }
        }
    }
}

/// Keep a table's secondary `indexes` in step with one installed write of
/// primary key `key`: `old` is the row it replaces (`None`: absent), `new`
/// the row it installs (`None`: a deletion). The caller holds the record's
/// lock; an unchanged index key is left alone.
pub fn maintain(indexes: &[SecondaryIndex], key: u64, old: Option<&[u8]>, new: Option<&[u8]>) {
    for s in indexes {
        match (old, new) {
            (Some(o), Some(n)) if s.same_key(o, n) => {}
            (o, n) => {
                if let Some(o) = o {
                    s.remove(o, key);
                }
                if let Some(n) = n {
                    s.insert(n, key);
                }
            }
        }
    }
}

/// Would [`maintain`] remove an entry, i.e. hide primary key `key` from a
/// scan of some index (a deletion, or a change of an index key)?
pub fn removes_an_entry(
    indexes: &[SecondaryIndex],
    old: Option<&[u8]>,
    new: Option<&[u8]>,
) -> bool {
    match (old, new) {
        (None, _) => false,
        (Some(_), None) => !indexes.is_empty(),
        (Some(o), Some(n)) => indexes.iter().any(|s| !s.same_key(o, n)),
    }
}

/// One secondary index of a table.
pub struct SecondaryIndex {
    /// (offset, width) of each column in a row.
    layout: Vec<(usize, usize)>,
    width: usize,
    groups: Groups,
    keys: SkipSet<Key>,
}

impl SecondaryIndex {
    /// An empty index over `layout` (a validated schema's, so the key fits).
    pub fn new(layout: Vec<(usize, usize)>) -> SecondaryIndex {
        let width = layout.iter().map(|l| l.1).sum();
        assert!(width <= MAX_SECONDARY_KEY_BYTES, "schema validation bounds the key width");
        SecondaryIndex { layout, width, groups: Groups::new(), keys: SkipSet::new() }
    }

    /// Width of this index's keys in bytes.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The index key of `row`.
    #[inline]
    fn key_of(&self, row: &[u8]) -> Key {
        let mut k = [0u8; MAX_SECONDARY_KEY_BYTES];
        let mut at = 0;
        for &(off, len) in &self.layout {
            k[at..at + len].copy_from_slice(&row[off..off + len]);
            at += len;
        }
        k
    }

    /// The index key of `row` as bytes.
    pub fn key_bytes(&self, row: &[u8]) -> Vec<u8> {
        self.key_of(row)[..self.width].to_vec()
    }

    /// Do two rows have the same key in this index?
    #[inline]
    pub fn same_key(&self, a: &[u8], b: &[u8]) -> bool {
        self.layout.iter().all(|&(off, len)| a[off..off + len] == b[off..off + len])
    }

    /// Add primary key `pk` under `row`'s index key.
    pub fn insert(&self, row: &[u8], pk: u64) {
        let key = self.key_of(row);
        let group = self.groups.get_or_make(&key);
        {
            let mut pks = group.pks.lock();
            if let Err(at) = pks.binary_search(&pk) {
                pks.insert(at, pk);
            }
        }
        // Listed before this insert returns, so a prefix lookup that starts
        // after it finds `pk` (whoever made the group may not have listed
        // it yet).
        if !group.listed.load(Ordering::Acquire) {
            self.keys.insert(key);
            group.listed.store(true, Ordering::Release);
        }
    }

    /// Remove primary key `pk` from `row`'s index key (its group stays).
    pub fn remove(&self, row: &[u8], pk: u64) {
        let key = self.key_of(row);
        if let Some(group) = self.groups.get(&key) {
            let mut pks = group.pks.lock();
            if let Ok(at) = pks.binary_search(&pk) {
                pks.remove(at);
            }
        }
    }

    /// Does `row`'s key start with `prefix`?
    pub fn key_starts_with(&self, row: &[u8], prefix: &[u8]) -> bool {
        prefix.len() <= self.width && self.key_of(row)[..prefix.len()] == *prefix
    }

    /// Primary keys whose index key starts with `prefix`, in index order,
    /// appended to `out` until it holds `limit`. A prefix wider than the key
    /// is refused (`table` names it in the error).
    pub fn lookup(
        &self,
        table: &str,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        if prefix.len() > self.width {
            return Err(Error::InvalidArgument(format!(
                "table `{table}`: a secondary-index prefix of {} bytes is wider than the index key ({} bytes)",
                prefix.len(),
                self.width
            )));
        }
        let mut low = [0u8; MAX_SECONDARY_KEY_BYTES];
        low[..prefix.len()].copy_from_slice(prefix);
        if prefix.len() == self.width {
            // A whole key: its group alone.
            if let Some(group) = self.groups.get(&low) {
                group.copy_into(limit, out);
            }
            return Ok(());
        }
        for e in self.keys.range(low..) {
            let key = e.value();
            if key[..prefix.len()] != *prefix || out.len() >= limit {
                break;
            }
            if let Some(group) = self.groups.get(key) {
                group.copy_into(limit, out);
            }
        }
        Ok(())
    }

    /// Every (key bytes, primary key) entry in order (checks; quiescent use).
    pub fn entries(&self) -> Vec<(Vec<u8>, u64)> {
        let mut all = Vec::new();
        for e in self.keys.iter() {
            let key = e.value();
            if let Some(group) = self.groups.get(key) {
                all.extend(group.pks.lock().iter().map(|&pk| (key[..self.width].to_vec(), pk)));
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_lookups_follow_the_byte_order() {
        let s = SecondaryIndex::new(vec![(0, 2), (4, 1)]);
        for (pk, row) in [(1u64, [1u8, 2, 0, 0, 9]), (2, [1, 2, 0, 0, 3]), (3, [1, 3, 0, 0, 0])] {
            s.insert(&row, pk);
        }
        let mut out = Vec::new();
        s.lookup("t", &[1, 2], 10, &mut out).unwrap();
        assert_eq!(out, vec![2, 1]);
        out.clear();
        s.lookup("t", &[1], 2, &mut out).unwrap();
        assert_eq!(out, vec![2, 1]);
        s.remove(&[1, 2, 0, 0, 3], 2);
        out.clear();
        s.lookup("t", &[1, 2, 3], 10, &mut out).unwrap();
        assert!(out.is_empty());
        assert!(matches!(s.lookup("t", &[0; 4], 10, &mut out), Err(Error::InvalidArgument(_))));
        assert!(s.same_key(&[1, 2, 7, 7, 9], &[1, 2, 0, 0, 9]));
        assert_eq!(s.entries(), vec![(vec![1, 2, 9], 1), (vec![1, 3, 0], 3)]);
    }

    fn key(n: u64) -> Key {
        let mut k = [0u8; MAX_SECONDARY_KEY_BYTES];
        k[..8].copy_from_slice(&n.to_be_bytes());
        k[40..48].copy_from_slice(&(!n).to_be_bytes());
        k
    }

    #[test]
    fn arena_positions_cover_every_id_once_across_chunks() {
        let mut expect = (0usize, 0usize);
        for id in 0..FIRST_GROUPS * 70 {
            assert_eq!(Groups::locate(id), expect, "id {id}");
            expect.1 += 1;
            if expect.1 as u64 == FIRST_GROUPS << expect.0 {
                expect = (expect.0 + 1, 0);
            }
        }
        // The arena's last id (2^40 groups: memory runs out long before).
        let last = FIRST_GROUPS * ((1 << CHUNKS) - 1) - 1;
        assert_eq!(Groups::locate(last), (CHUNKS - 1, (FIRST_GROUPS << (CHUNKS - 1)) as usize - 1));
    }

    #[test]
    fn keys_sharing_a_hash_get_groups_of_their_own() {
        let g = Groups::new();
        // 300 keys on one hash: one chain across several arena chunks.
        for n in 0..300u64 {
            g.get_or_make_hashed(&key(n), 7).pks.lock().push(n);
        }
        for n in 0..300u64 {
            let found = g.get_hashed(&key(n), 7).expect("made above");
            assert_eq!(found.pks.lock().as_slice(), &[n], "key {n}");
            assert!(std::ptr::eq(found, g.get_or_make_hashed(&key(n), 7)), "made once");
        }
        assert!(g.get_hashed(&key(300), 7).is_none());
        assert!(g.get_hashed(&key(0), 8).is_none(), "another hash has no chain");
        // Real hashes: every key finds its own group.
        for n in 0..5_000u64 {
            g.get_or_make(&key(n)).pks.lock().push(n);
        }
        for n in 0..5_000u64 {
            assert_eq!(g.get(&key(n)).expect("made").pks.lock().as_slice(), &[n]);
        }
        assert!(g.get(&key(5_000)).is_none());
    }

    #[test]
    fn racing_makers_of_one_key_share_its_group() {
        for round in 0..200u64 {
            let g = Groups::new();
            // Odd rounds: every key on one hash, so the makers race on the
            // chain as well as on the point index.
            let hash_of = |n: u64| if round % 2 == 1 { 3 } else { g.hash(&key(n)) };
            let made: Vec<Vec<usize>> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            (0..8u64)
                                .map(|n| {
                                    std::ptr::from_ref(g.get_or_make_hashed(&key(n), hash_of(n)))
                                        as usize
                                })
                                .collect::<Vec<usize>>()
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().expect("no panic")).collect()
            });
            assert_eq!(made[0], made[1], "round {round}: both makers got the same groups");
            for n in 0..8u64 {
                let found = g.get_hashed(&key(n), hash_of(n)).expect("made");
                assert_eq!(std::ptr::from_ref(found) as usize, made[0][n as usize]);
            }
        }
    }
}
