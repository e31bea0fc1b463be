//! Secondary indexes: (column bytes ‖ primary key), ordered.
//!
//! One design for every engine. An index key is the named columns' bytes,
//! concatenated (at most [`MAX_SECONDARY_KEY_BYTES`]), held inline in a
//! fixed zero-padded array; all keys of one index have the same width, so
//! comparing the arrays orders them as the byte strings. The primary keys
//! that share an index key form a **group**, kept sorted:
//!
//! - `groups`, a hash map (papaya: lock-free readers) from index key to its
//!   group: a lookup of a whole key (TPC-C's customers by last name, orders
//!   by customer) is one hash probe and one group, whatever the index holds;
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
//! ever indexed, not the live ones. The skip list of (key, primary key)
//! entries this replaces walked ~20 scattered nodes per New-Order insert and
//! per lookup (`benches/secondary.rs`, docs/benchmarks.md); it replaced an
//! `RwLock<BTreeSet<(Vec<u8>, u64)>>` that every New-Order took for writing.

use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_skiplist::SkipSet;
use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::sched::Mutex;

/// The widest secondary-index key a schema may define (`TableSchema::validate`).
pub const MAX_SECONDARY_KEY_BYTES: usize = 48;

/// An index key, zero-padded.
type Key = [u8; MAX_SECONDARY_KEY_BYTES];

/// Primary keys a group holds without a heap allocation (TPC-C: ~3
/// customers per last name, one order per customer at load).
const INLINE_PKS: usize = 4;

/// The primary keys of one index key, ascending.
#[derive(Default)]
struct Group {
    pks: Mutex<SmallVec<[u64; INLINE_PKS]>>,
    /// Whether the key is in `SecondaryIndex::keys` (set by the first
    /// inserter that finds it missing, after inserting it there).
    listed: AtomicBool,
}

impl Group {
    /// Append this group's keys to `out` until it holds `limit`.
    fn copy_into(&self, limit: usize, out: &mut Vec<u64>) {
        let pks = self.pks.lock();
        let room = limit.saturating_sub(out.len());
        out.extend(pks.iter().take(room));
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
    groups: papaya::HashMap<Key, Group, foldhash::fast::RandomState>,
    keys: SkipSet<Key>,
}

impl SecondaryIndex {
    /// An empty index over `layout` (a validated schema's, so the key fits).
    pub fn new(layout: Vec<(usize, usize)>) -> SecondaryIndex {
        let width = layout.iter().map(|l| l.1).sum();
        assert!(width <= MAX_SECONDARY_KEY_BYTES, "schema validation bounds the key width");
        SecondaryIndex {
            layout,
            width,
            groups: papaya::HashMap::with_hasher(foldhash::fast::RandomState::default()),
            keys: SkipSet::new(),
        }
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
        let guard = self.groups.guard();
        // The key's group usually exists (TPC-C: a customer's orders group is
        // made at load): a plain lookup finds it. `get_or_insert_with` takes
        // papaya's compute path even for a present key, which cost twice a
        // lookup (docs/benchmarks.md, session 12).
        let group = match self.groups.get(&key, &guard) {
            Some(group) => group,
            None => self.groups.get_or_insert_with(key, Group::default, &guard),
        };
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
        let guard = self.groups.guard();
        if let Some(group) = self.groups.get(&key, &guard) {
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
        let guard = self.groups.guard();
        if prefix.len() == self.width {
            // A whole key: its group alone.
            if let Some(group) = self.groups.get(&low, &guard) {
                group.copy_into(limit, out);
            }
            return Ok(());
        }
        for e in self.keys.range(low..) {
            let key = e.value();
            if key[..prefix.len()] != *prefix || out.len() >= limit {
                break;
            }
            if let Some(group) = self.groups.get(key, &guard) {
                group.copy_into(limit, out);
            }
        }
        Ok(())
    }

    /// Every (key bytes, primary key) entry in order (checks; quiescent use).
    pub fn entries(&self) -> Vec<(Vec<u8>, u64)> {
        let guard = self.groups.guard();
        let mut all = Vec::new();
        for e in self.keys.iter() {
            let key = e.value();
            if let Some(group) = self.groups.get(key, &guard) {
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
}
