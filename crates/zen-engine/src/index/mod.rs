//! The primary index of every engine: key → record id.
//!
//! Two structures with two jobs. A hash index ([`PointIndex`], lock-free for
//! readers) is the authority on
//! record ids: it maps every key that was ever given a record to that record,
//! decides races between inserters of one key, and answers point lookups with
//! one probe. An ordered set ([`OrderedSet`], an adaptive radix tree with
//! optimistic lock coupling) holds, in key order, the keys that may hold a
//! live row: scans, phantom re-scans, checks and checkpoints walk it.
//!
//! The hash index never shrinks (a deleted record stays, absent, and a later
//! insert of its key reuses it, so a reader that validated the absence of a
//! key sees the insert change the record it read). The ordered set does: a
//! key leaves it when its deletion is installed ([`PrimaryIndex::unlink`])
//! and comes back when an insert locks its record ([`PrimaryIndex::link`]).
//! Both calls are made by the holder of the record's lock, so they are
//! serialised per key, and the invariant the engines rely on holds at every
//! moment:
//!
//! > (I1) every record that is live, or locked by an inserter, has its key in
//! > the ordered set.
//!
//! Keys of absent records may be there too (an aborted insert, a deletion
//! replayed by recovery): scans skip them. A placeholder record made by a read
//! of a missing key is not linked. Deleted keys no longer
//! are, so a scan costs O(log n + k) in the live keys of its range, not in
//! everything ever deleted there (TPC-C Delivery's "oldest new order" scan
//! walked every order delivered before it). Engines whose snapshots may still
//! read a deleted version (multi-version protocols) unlink later: Zen once
//! the tombstone is below the watermark, the OCC core's TO and MVCC at
//! garbage collection.
//!
//! PHANTOMS AND UNLINKS. A range walk of the ordered set is not atomic: a
//! key unlinked before the walk reaches its place and linked again after the
//! walk has passed it is missed, though it was live before and after (a row
//! that moves from key A to key B and back, with the walk between A's unlink
//! and B's). A commit-time re-scan alone can therefore miss a key that moved
//! twice during the transaction, and a read-only transaction would commit a
//! total one row short (it did: `wbl_bank_transfers_stay_serializable`). So
//! every unlink first counts itself in one of [`UNLINK_STRIPES`] counters,
//! chosen by the key's 2^32-key segment, and a re-scan runs inside
//! [`PrimaryIndex::rescan_stable`]: the sum of the counters its range covers
//! is read before and after, and a change fails it. With no unlink in its
//! range while it ran, the re-scan met every key linked when it started (keys
//! only joined), so the records it met are the range at that instant; the
//! engines re-scan before they check their reads, so the reads are current
//! at that instant too (the transaction's serialisation point). An unlink is
//! a delete's install (or a collector's), so a segment's counter is written
//! by the deletes in that segment only; a range in one segment reads two
//! counters (TPC-C's are a district's), one over more than
//! [`UNLINK_STRIPES`] segments reads them all.
//!
//! Why not one structure: scc's `TreeIndex` was measured to scan from the
//! middle of a large tree in time that grows with the start position, and an
//! ordered-structure lookup walks several nodes with an epoch pin; in a
//! profile of YCSB on 100,000 rows the (then) skip-list search took 24–31 %
//! of the CPU time of every engine. The skip list was later replaced as the
//! ordered set too (`ordered.rs`): its inserts were 13 % of TPC-C's time.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crossbeam_utils::CachePadded;

mod ordered;
mod point;
mod rids;
mod secondary;
pub use ordered::OrderedSet;
pub use point::PointIndex;
pub use rids::{RID_BLOCK, RecordIds};
pub use secondary::{
    MAX_SECONDARY_KEY_BYTES, SecondaryIndex, maintain as maintain_secondary,
    removes_an_entry as secondary_removes_an_entry,
};

/// Keys `Transaction::prefetch` handles a stage at a time: enough misses in
/// flight to fill a core's miss buffers, few enough that the first key's lines
/// are still in L1 when its read comes.
pub const PREFETCH_GROUP: usize = 16;

/// Counters of unlinks per table (see "Phantoms and unlinks" above).
pub const UNLINK_STRIPES: usize = 64;
/// Keys with the same `key >> UNLINK_SEGMENT_BITS` share an unlink counter.
const UNLINK_SEGMENT_BITS: u32 = 32;

/// Key → record id, ordered, lock-free.
pub struct PrimaryIndex {
    ordered: OrderedSet,
    point: PointIndex,
    unlinks: Box<[CachePadded<AtomicU64>]>,
}

impl Default for PrimaryIndex {
    fn default() -> Self {
        PrimaryIndex {
            ordered: OrderedSet::default(),
            point: PointIndex::default(),
            unlinks: (0..UNLINK_STRIPES).map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
        }
    }
}

impl PrimaryIndex {
    /// The record id of `key`, if the key was ever given one (one probe).
    #[inline]
    pub fn get(&self, key: u64) -> Option<u64> {
        self.point.get(key)
    }

    /// The stages of [`crate::api::Transaction::prefetch`] that every engine
    /// shares, in groups of [`PREFETCH_GROUP`] keys: ask for every key's
    /// point-index line; then look each key up (its line is on its way) and
    /// hand its record id to `record`, which asks for the record's words;
    /// then hand the group's record ids to `rows`, which asks for what those
    /// words name. The misses of each stage overlap.
    pub fn prefetch(
        &self,
        keys: &[u64],
        mut record: impl FnMut(u64),
        mut rows: impl FnMut(&[u64]),
    ) {
        let mut rids = [0u64; PREFETCH_GROUP];
        let mut hashes = [0u64; PREFETCH_GROUP];
        for group in keys.chunks(PREFETCH_GROUP) {
            for (hash, &key) in hashes.iter_mut().zip(group) {
                *hash = self.point.prefetch(key);
            }
            let mut found = 0;
            for (&hash, &key) in hashes.iter().zip(group) {
                if let Some(rid) = self.point.get_hashed(key, hash) {
                    record(rid);
                    rids[found] = rid;
                    found += 1;
                }
            }
            rows(&rids[..found]);
        }
    }

    /// Give `key` the record `rid` unless it has one; returns the record id
    /// in the index (the first inserter's). The ordered set is not touched:
    /// whoever makes the record live links it ([`PrimaryIndex::link`]).
    pub fn get_or_insert(&self, key: u64, rid: u64) -> u64 {
        match self.point.insert(key, rid) {
            Ok(()) => rid,
            // Another thread gave the key its record first.
            Err(existing) => existing,
        }
    }

    /// Put `key` (record `rid`) in the ordered set if it is not there. The
    /// caller holds the record's lock, or no transaction runs (recovery).
    #[inline]
    pub fn link(&self, key: u64, rid: u64) {
        self.ordered.link(key, rid);
    }

    /// Take `key` out of the ordered set: its record's deletion is being
    /// installed by the caller, who holds the record's lock (I1). Counted
    /// first, so a re-scan that misses the key sees the count change.
    #[inline]
    pub fn unlink(&self, key: u64) {
        let stripe = (key >> UNLINK_SEGMENT_BITS) as usize % UNLINK_STRIPES;
        // SeqCst (a locked add on x86): ordered before the removal.
        self.unlinks[stripe].fetch_add(1, Ordering::SeqCst);
        self.ordered.unlink(key);
    }

    /// The sum of the unlink counters that keys in `low..=high` use (it only
    /// grows, and grows with every unlink in the range).
    fn unlink_stamp(&self, low: u64, high: u64) -> u64 {
        let (first, last) = (low >> UNLINK_SEGMENT_BITS, high >> UNLINK_SEGMENT_BITS);
        // Segments wrap onto the counters: more than there are cover them all.
        let segments = if last - first >= UNLINK_STRIPES as u64 {
            0..UNLINK_STRIPES as u64
        } else {
            first..last + 1
        };
        segments.fold(0u64, |sum, s| {
            sum.wrapping_add(self.unlinks[s as usize % UNLINK_STRIPES].load(Ordering::SeqCst))
        })
    }

    /// Run `rescan`, a phantom check that walks `low..=high`, and hold it
    /// only if no key of the range was unlinked while it ran (see "Phantoms
    /// and unlinks" above): then what it met is the range at one instant.
    pub fn rescan_stable(&self, low: u64, high: u64, rescan: impl FnOnce() -> bool) -> bool {
        let before = self.unlink_stamp(low, high);
        if !rescan() {
            return false;
        }
        fence(Ordering::SeqCst);
        self.unlink_stamp(low, high) == before
    }

    /// (key, record id) pairs of the ordered set with keys in `range`, in
    /// key order.
    pub fn range(
        &self,
        range: std::ops::RangeInclusive<u64>,
    ) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ordered.range(*range.start(), *range.end())
    }

    /// Every (key, record id) pair of the ordered set (every live key, I1),
    /// in key order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ordered.range(0, crate::schema::MAX_KEY)
    }

    /// Keys in the ordered set (walks it: not for hot paths).
    pub fn len(&self) -> usize {
        self.ordered.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }

    /// Keys ever given a record id (the hash index; it never shrinks).
    pub fn records(&self) -> usize {
        self.point.len()
    }
}

/// A scan's range must not be inverted (`low > high` is an error, not an
/// empty result: it is a caller's bug).
pub fn check_range(table: &str, low: u64, high: u64) -> crate::error::Result<()> {
    if low > high {
        return Err(crate::error::Error::InvalidArgument(format!(
            "table `{table}`: scan range {low}..={high} is inverted"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_inserter_wins_and_lookups_agree_with_the_order() {
        let index = PrimaryIndex::default();
        assert_eq!(index.get(5), None);
        assert_eq!(index.get_or_insert(5, 50), 50);
        assert_eq!(index.get_or_insert(5, 51), 50);
        assert_eq!(index.get_or_insert(3, 30), 30);
        assert_eq!(index.get(5), Some(50));
        assert_eq!(index.range(0..=9).count(), 0, "records are linked by their inserter");
        index.link(5, 50);
        index.link(3, 30);
        assert_eq!(index.range(0..=4).collect::<Vec<_>>(), vec![(3, 30)]);
        assert_eq!(index.iter().collect::<Vec<_>>(), vec![(3, 30), (5, 50)]);
        assert_eq!(index.len(), 2);
    }

    #[test]
    fn racing_inserters_agree_on_one_record_id() {
        let index = PrimaryIndex::default();
        let winners: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4u64)
                .map(|t| {
                    let index = &index;
                    s.spawn(move || (0..2000).map(|k| index.get_or_insert(k, k * 10 + t)).collect())
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for k in 0..2000 {
            let rid = index.get(k).unwrap();
            assert!(winners.iter().all(|w| w[k as usize] == rid), "key {k}");
            assert_eq!(rid / 10, k);
        }
        assert_eq!(index.records(), 2000);
    }

    #[test]
    fn a_rescan_fails_when_a_key_of_its_range_is_unlinked_while_it_runs() {
        let index = PrimaryIndex::default();
        let far = 5 << 32; // another 2^32-key segment, another counter
        for k in [1, 2, 3, far] {
            index.link(k, index.get_or_insert(k, k));
        }
        let walk = |low, high| index.range(low..=high).count() > 0;
        assert!(index.rescan_stable(0, 9, || walk(0, 9)));
        // An unlink in the range, during the re-scan: the walk cannot tell.
        assert!(!index.rescan_stable(0, 9, || {
            index.unlink(2);
            walk(0, 9)
        }));
        // A link during it (keys only joined), or an unlink in another
        // segment, leaves it standing; a failed walk fails it anyway.
        assert!(index.rescan_stable(0, 9, || {
            index.link(2, 2);
            index.unlink(far);
            walk(0, 9)
        }));
        assert!(!index.rescan_stable(0, 9, || false));
        // A range over more segments than counters covers every counter.
        assert!(!index.rescan_stable(0, u64::MAX >> 1, || {
            index.unlink(far + (64 << 32));
            true
        }));
    }

    #[test]
    fn unlinked_keys_leave_scans_and_keep_their_record() {
        let index = PrimaryIndex::default();
        for k in 0..10 {
            index.link(k, index.get_or_insert(k, 100 + k));
        }
        for k in 0..8 {
            index.unlink(k);
        }
        assert_eq!(index.range(0..=9).collect::<Vec<_>>(), vec![(8, 108), (9, 109)]);
        // The record id stays: a later insert of the key reuses it.
        assert_eq!(index.get(3), Some(103));
        assert_eq!(index.get_or_insert(3, 999), 103);
        assert_eq!(index.range(0..=9).map(|(k, _)| k).collect::<Vec<_>>(), vec![8, 9]);
        index.link(3, 103);
        index.link(5, 105);
        assert_eq!(index.range(0..=9).map(|(k, _)| k).collect::<Vec<_>>(), vec![3, 5, 8, 9]);
        assert_eq!((index.len(), index.records()), (4, 10));
    }
}
