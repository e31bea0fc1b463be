//! Secondary indexes: (column bytes ‖ primary key), ordered, lock-free.
//!
//! One design for every engine. An entry is the index key (the named
//! columns' bytes, concatenated, at most [`MAX_SECONDARY_KEY_BYTES`]) held
//! inline in a fixed array, and the primary key; entries live in a lock-free
//! skip list. All keys of one index have the same width, so comparing the
//! zero-padded arrays orders them as the byte strings.
//!
//! Writers are the installers of committed writes, under the record's lock
//! (a changed key is removed, then the new one inserted); readers take no
//! lock and allocate nothing. What a lookup returns is a set of candidate
//! primary keys: the transaction then reads (and validates) those rows.
//! This replaces an `RwLock<BTreeSet<(Vec<u8>, u64)>>` that every New-Order
//! took for writing (orders by customer) and that allocated a key per use.

use crossbeam_skiplist::SkipSet;

use crate::error::{Error, Result};

/// The widest secondary-index key a schema may define (`TableSchema::validate`).
pub const MAX_SECONDARY_KEY_BYTES: usize = 48;

/// An index key, zero-padded.
type Key = [u8; MAX_SECONDARY_KEY_BYTES];

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
    entries: SkipSet<(Key, u64)>,
}

impl SecondaryIndex {
    /// An empty index over `layout` (a validated schema's, so the key fits).
    pub fn new(layout: Vec<(usize, usize)>) -> SecondaryIndex {
        let width = layout.iter().map(|l| l.1).sum();
        assert!(width <= MAX_SECONDARY_KEY_BYTES, "schema validation bounds the key width");
        SecondaryIndex { layout, width, entries: SkipSet::new() }
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

    pub fn insert(&self, row: &[u8], pk: u64) {
        self.entries.insert((self.key_of(row), pk));
    }

    pub fn remove(&self, row: &[u8], pk: u64) {
        self.entries.remove(&(self.key_of(row), pk));
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
        for e in self.entries.range((low, 0)..) {
            let (k, pk) = e.value();
            if k[..prefix.len()] != *prefix || out.len() >= limit {
                break;
            }
            out.push(*pk);
        }
        Ok(())
    }

    /// Every (key bytes, primary key) entry in order (checks; quiescent use).
    pub fn entries(&self) -> Vec<(Vec<u8>, u64)> {
        self.entries.iter().map(|e| (e.value().0[..self.width].to_vec(), e.value().1)).collect()
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
