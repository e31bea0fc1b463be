//! Commit phase 2, VALIDATE: phantoms, then the protocol's read checks.
//!
//! The read checks are the protocol's (`cc/`): `P::VALIDATES_READS` says
//! whether there are any, `P::read_still_valid` runs them one read at a
//! time, at the logical time `P::commit_logical_ts` chose (TicToc's; 0 for
//! the others). They see the transaction through [`CommitView`], implemented
//! here on the worker.
//!
//! INVARIANTS
//! (V1) Runs with the whole write set locked (phase 1), after the Tx-CTS is
//!      drawn, so a read that is valid now stays valid until the new
//!      versions are published (Silo's serialisation point); a read-only
//!      transaction validates with nothing locked.
//! (V2) Every scanned range is re-scanned, first, and must hold the same
//!      records with no key of it unlinked during the re-scan
//!      (`Abort(Phantom)`), whatever the protocol (`scan.rs`, `index/mod.rs`).
//! (V3) Validation writes no NVM; the only shared stores are TicToc's rts
//!      extensions (and the worker's own `tictoc_high` word), which are valid
//!      whatever the outcome.

use std::sync::atomic::{AtomicU64, Ordering};

use zen_pmem::PmemBackend;

use super::super::ZenWorker;
use crate::cc::{CommitView, Protocol, ReadItem};
use crate::config::RaceFault;
use crate::error::{AbortReason, Error, Result};
use crate::zen::cache::{LOC_EMPTY, loc_entry};

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Phantom checks of every scanned range (all protocols), then read
    /// validation as the protocol requires: a re-scan holds the range as it
    /// was when it started (`index::PrimaryIndex::rescan_stable`), so reads
    /// checked after it were current at that instant too. `logical` is
    /// TicToc's commit timestamp.
    pub(super) fn validate(&self, logical: u64) -> Result<()> {
        if self.scans.iter().any(|s| !self.scan_still_valid(s)) {
            return Err(Error::Abort(AbortReason::Phantom));
        }
        debug_assert!(
            self.writes.is_sorted_by_key(|w| (w.table, w.rid)),
            "validation runs on a write set sorted by lock_write_set (holds_write_lock)"
        );
        if P::VALIDATES_READS {
            // Each check loads the entry's version word, and the record's
            // location word where the version was not cached or versions
            // are chained (`silo::read_still_valid`), usually evicted since
            // the read: start all the loads first so the misses overlap
            // instead of queueing.
            for r in &self.reads {
                let t = &self.tables[r.table as usize];
                match loc_entry(r.loc) {
                    Some((owner, idx)) if owner < t.caches.len() => {
                        zen_pmem::cpu::prefetch(&t.caches[owner].entry(idx).cc[0]);
                        if P::MULTI_VERSION {
                            zen_pmem::cpu::prefetch(t.records.loc(r.rid));
                        }
                    }
                    _ => zen_pmem::cpu::prefetch(t.records.loc(r.rid)),
                }
            }
            for r in &self.reads {
                if !P::read_still_valid(self, r, logical) {
                    return Err(Error::Abort(AbortReason::ReadValidation));
                }
            }
        }
        Ok(())
    }
}

impl<B: PmemBackend, P: Protocol> CommitView for ZenWorker<'_, B, P> {
    fn reads(&self) -> &[ReadItem] {
        &self.reads
    }

    fn location_now(&self, r: &ReadItem) -> u64 {
        self.tables[r.table as usize].records.loc(r.rid).load(Ordering::Acquire)
    }

    fn entry_cc(&self, table: u32, loc: u64) -> Option<&[AtomicU64; 4]> {
        let (owner, idx) = loc_entry(loc)?;
        Some(&self.tables[table as usize].caches[owner].entry(idx).cc)
    }

    fn is_empty_location(loc: u64) -> bool {
        loc == LOC_EMPTY
    }

    /// Validation runs after `lock_write_set`, which sorted the write set by
    /// (table, record) with each record once, or on a read-only commit with
    /// no writes: a binary search finds the record's write. (A linear scan
    /// here made validation O(reads × writes): Delivery reads and writes
    /// about 130 records.)
    fn holds_write_lock(&self, r: &ReadItem) -> bool {
        if !self.written.may_hold(r.table, r.rid) {
            return false;
        }
        let Ok(i) = self.writes.binary_search_by_key(&(r.table, r.rid), |w| (w.table, w.rid))
        else {
            return false;
        };
        self.writes[i]
            .locked
            .is_some_and(|(loc, _)| loc == r.loc || self.race(RaceFault::OwnLockOnCopyCounts))
    }

    fn locked_write_entries(&self) -> impl Iterator<Item = &[AtomicU64; 4]> {
        self.writes.iter().map(|w| {
            let (loc, _) = w.locked.expect("locked at commit");
            let (owner, idx) = loc_entry(loc).expect("locked records are cached");
            &self.tables[w.table as usize].caches[owner].entry(idx).cc
        })
    }

    fn raise_logical_high(&self, ts: u64) {
        self.s.raise_tictoc_high(self.id, ts);
    }

    fn race(&self, f: RaceFault) -> bool {
        ZenWorker::race(self, f)
    }
}
