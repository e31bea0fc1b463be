//! Silo: single-version optimistic concurrency control (Tu et al., SOSP '13),
//! on Met-Cache entries.
//!
//! CC-META
//!   `cc[0]`, the TID word:  `cts << 3 | OBSOLETE | ABSENT | LOCK`
//!   - LOCK: a committing writer (or an inserter, from insert to commit) holds it;
//!   - ABSENT: the record has no live version (deleted, or insert not committed);
//!   - OBSOLETE: the entry no longer holds the record's current version (evicted,
//!     or copied to another region by a foreign write); readers must re-read
//!     the record's location.
//!
//! PHASES
//!   read      stable copy: TID, data, TID again, location again (retry on change)
//!   write     buffered in the transaction (inserts lock a new absent entry now)
//!   commit    lock the write set in (table, record) order → draw Tx-CTS from the
//!             global clock (above every TID read or locked) → validate the read
//!             set (TID unchanged, not locked by others, still current) and every
//!             scanned range (same records) → persist → install, unlock.
//!
//! GUARANTEES
//!   Serializable and strict (no dirty reads: writes are installed after the
//!   commit decision; a reader never sees a locked, uncommitted version). Scans
//!   are phantom-safe: the index range is re-scanned at commit and any new
//!   record in it aborts the transaction (instead of Silo's B-tree node-set
//!   validation, which a foreign index crate does not expose). Missing point
//!   reads insert an empty placeholder record so a later insert is detected.
//!
//! WHAT IT DOES NOT DO
//!   No epoch-based group commit (Zen persists each transaction itself); no
//!   snapshot reads for read-only transactions (that is Zen+'s MVCC path).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{CommitView, Protocol, ReadItem};
use crate::config::{CcKind, RaceFault};

/// Silo, as a [`Protocol`].
pub struct Silo;

impl Protocol for Silo {
    const KIND: CcKind = CcKind::Silo;
    const COPY_ON_FOREIGN_WRITE: bool = true;
}

pub const LOCK: u64 = 1;
pub const ABSENT: u64 = 2;
pub const OBSOLETE: u64 = 4;
const FLAG_BITS: u32 = 3;

#[inline]
pub fn tid(cts: u64, absent: bool) -> u64 {
    (cts << FLAG_BITS) | if absent { ABSENT } else { 0 }
}

#[inline]
pub fn cts_of(tid: u64) -> u64 {
    tid >> FLAG_BITS
}

/// Try to take the lock; `Some(previous word)` on success.
#[inline]
pub fn try_lock(word: &AtomicU64) -> Option<u64> {
    crate::sched::point();
    let cur = word.load(Ordering::Acquire);
    if cur & (LOCK | OBSOLETE) != 0 {
        return None;
    }
    // SeqCst: TicToc's read validation relies on a writer's lock and a
    // reader's rts extension not both missing each other (`tictoc_read_valid`).
    word.compare_exchange(cur, cur | LOCK, Ordering::SeqCst, Ordering::Acquire).ok()
}

/// Release a lock without changing the version.
#[inline]
pub fn unlock(word: &AtomicU64, previous: u64) {
    crate::sched::point();
    word.store(previous & !LOCK, Ordering::Release);
}

/// Commit-time validation of the read `r` (the default of
/// [`Protocol::read_still_valid`]; Silo, OCC and Hekaton use it): the
/// record still has the version read, and no other transaction has it
/// locked. `chained` = the protocol keeps version chains (`MULTI_VERSION`).
///
/// An unchanged empty or heap location is the same version: a heap slot is
/// not reclaimed while the transaction runs (S2 of `zen/space.rs`).
///
/// A version read from a Met-Cache entry: for single-version protocols the
/// entry's word alone decides. A record leaves an entry only while the
/// entry is locked, and the entry is then left obsolete (eviction, the copy
/// of C2, N1's move) and not reused while this transaction runs (C4, C6 of
/// `zen/cache.rs`): an unlocked word equal to the one read proves the
/// record still points at the entry, so the location word (a dependent miss
/// per read) is not loaded again. A multi-version install points the record
/// at its new head *before* it unlocks the old head with the old head's
/// word unchanged (the version stays valid for older snapshots), so there
/// the unchanged word does not prove the version is still the newest: the
/// location is checked before and after the word (found by the shuttle
/// schedules, `tests/schedules.rs`: hekaton committed write skews before).
pub fn read_still_valid<V: CommitView>(view: &V, r: &ReadItem, chained: bool) -> bool {
    let Some(cc) = view.entry_cc(r.table, r.loc) else { return view.location_now(r) == r.loc };
    if !chained {
        return still_valid(&cc[0], r.observed, || view.holds_write_lock(r));
    }
    view.location_now(r) == r.loc
        && still_valid(&cc[0], r.observed, || view.holds_write_lock(r))
        && (view.race(RaceFault::NoLocationRecheck) || view.location_now(r) == r.loc)
}

/// Is the read of `observed` still valid? `mine` says whether the reader
/// holds the lock; it is asked only when the word is locked (a search of the
/// write set, which every read paid before: O(reads × writes) per commit).
#[inline]
pub fn still_valid(word: &AtomicU64, observed: u64, mine: impl FnOnce() -> bool) -> bool {
    crate::sched::point();
    let cur = word.load(Ordering::Acquire);
    if cur & LOCK != 0 && !mine() {
        return false;
    }
    cur & !LOCK == observed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_blocks_others_and_validation_sees_changes() {
        let w = AtomicU64::new(tid(5, false));
        let prev = try_lock(&w).unwrap();
        assert!(try_lock(&w).is_none());
        assert!(!still_valid(&w, prev, || false));
        assert!(still_valid(&w, prev, || true));
        unlock(&w, prev);
        assert!(still_valid(&w, prev, || unreachable!("asked only when the word is locked")));
        w.store(tid(6, false), Ordering::Release);
        assert!(!still_valid(&w, prev, || false));
        assert_eq!(cts_of(w.load(Ordering::Relaxed)), 6);
    }
}
