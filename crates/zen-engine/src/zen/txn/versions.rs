//! The multi-version side of the Met-Cache (for `cc::mvcc` and any protocol
//! with `MULTI_VERSION`): version-chain reads, new versions as new entries,
//! and cutting chains below the global minimum Tx-CTS.
//!
//! (V1) A version entry is immutable once published (new versions are new
//!      entries), so readers copy its data without re-validation.
//! (V2) A chain is cut only below a version whose wts is under the global
//!      minimum Tx-CTS: every running transaction reads that version or a
//!      newer one, so nothing below it can be reached by them. The cut is one
//!      CAS on the newer version's `cc[2]`; its winner retires the detached
//!      entries to their owners (C4 then delays their reuse).

use std::sync::atomic::Ordering;

use zen_pmem::PmemBackend;

use super::{SPIN_LIMIT, ZenWorker, backoff};
use crate::cc::{Protocol, mvcc, silo};
use crate::error::{AbortReason, Error, Result};
use crate::zen::cache::{Entry, LOC_EMPTY, loc_cached, loc_entry};
use crate::zen::table::Table;

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// The newest version visible at the transaction's timestamp.
    pub(super) fn read_version(
        &mut self,
        t: &Table,
        key: u64,
        rid: u64,
        out: &mut [u8],
    ) -> Result<(u64, u64)> {
        let ts = self.txn_ts.expect("multi-version protocols draw a timestamp at begin");
        let locw = t.records.loc(rid);
        for spin in 0..SPIN_LIMIT {
            let loc = locw.load(Ordering::Acquire);
            if loc == LOC_EMPTY {
                match self.publish_placeholder(t, key, rid) {
                    // A privileged transaction runs alone: nothing to register.
                    Err(Error::Abort(AbortReason::CacheFull)) if self.privileged_on_full()? => {
                        return Ok((LOC_EMPTY, 0));
                    }
                    r => r?,
                }
                continue;
            }
            let Some((w, idx)) = loc_entry(loc) else {
                match self.cache_in(t, rid, loc) {
                    // Zen+ step 3: its region is full; read NVM in place.
                    Err(Error::Abort(AbortReason::CacheFull)) if self.privileged_on_full()? => {
                        return self.read_direct(t, loc, out);
                    }
                    r => r?,
                }
                continue;
            };
            let head = t.caches[w].touch(idx, self.begin_ts, true);
            let v = head.cc[0].load(Ordering::SeqCst);
            if v & silo::OBSOLETE != 0 {
                continue;
            }
            if silo::cts_of(v) > ts {
                return self.read_older(t, head, ts, out);
            }
            if v & silo::LOCK != 0 {
                backoff(spin);
                continue;
            }
            if P::TIMESTAMP_ORDERING {
                mvcc::raise_rts(&head.cc[1], ts);
            }
            if head.cc[0].load(Ordering::SeqCst) != v || locw.load(Ordering::Acquire) != loc {
                continue;
            }
            if v & silo::ABSENT == 0 {
                t.caches[w].read_row(idx, out);
                self.s.numa_entry(self.id, w, idx, false);
            }
            self.count_hit();
            if silo::cts_of(v) < self.watermark {
                self.cut_chain(t, head);
            }
            return Ok((loc, v));
        }
        Err(Error::Abort(AbortReason::LockTimeout))
    }

    fn read_older(
        &mut self,
        t: &Table,
        head: &Entry,
        ts: u64,
        out: &mut [u8],
    ) -> Result<(u64, u64)> {
        let mut p = head.cc[2].load(Ordering::Acquire);
        while let Some((w, idx)) = loc_entry(p) {
            let e = t.caches[w].entry(idx);
            let v = e.cc[0].load(Ordering::Acquire);
            if silo::cts_of(v) <= ts {
                if v & silo::ABSENT == 0 {
                    t.caches[w].read_row(idx, out);
                    self.s.numa_entry(self.id, w, idx, false);
                }
                self.count_hit();
                return Ok((p, v));
            }
            p = e.cc[2].load(Ordering::Acquire);
        }
        // The version this old transaction needs was evicted to NVM.
        Err(Error::Abort(AbortReason::TimestampOrder))
    }

    /// Give an empty record an absent entry, so reads of a missing key leave a
    /// read timestamp that a later (older) insert must respect.
    fn publish_placeholder(&mut self, t: &Table, key: u64, rid: u64) -> Result<()> {
        let idx = self.allocate_entry(t)?;
        let region = &t.caches[self.id];
        let e = region.fill(idx, key, rid, 0, self.txn_ts.unwrap_or(self.begin_ts));
        e.cc[0].store(silo::ABSENT, Ordering::Relaxed);
        let mine = loc_cached(self.id, idx);
        let locw = t.records.loc(rid);
        crate::sched::point();
        if locw.compare_exchange(LOC_EMPTY, mine, Ordering::AcqRel, Ordering::Acquire).is_err() {
            e.record.store(0, Ordering::Relaxed);
            region.free_unpublished(idx);
        }
        Ok(())
    }

    /// Detach every version below `newer` (V2) and retire them.
    pub(super) fn cut_chain(&mut self, t: &Table, newer: &Entry) {
        let below = newer.cc[2].load(Ordering::Acquire);
        crate::sched::point();
        if below == 0
            || newer.cc[2].compare_exchange(below, 0, Ordering::AcqRel, Ordering::Acquire).is_err()
        {
            return;
        }
        let mut p = below;
        let mut limit = 1 << 20;
        while let Some((w, idx)) = loc_entry(p) {
            let e = t.caches[w].entry(idx);
            p = e.cc[2].swap(0, Ordering::AcqRel);
            e.record.store(0, Ordering::Release);
            if w == self.id {
                t.caches[w].retire(idx, self.s.clock.now());
            } else {
                t.caches[w].push_detached(idx);
            }
            limit -= 1;
            assert!(limit > 0, "version chain longer than 2^20");
        }
    }

    /// Eviction of a superseded version of this worker's region: cut it off its
    /// newer version when that one is below the watermark. Returns true if cut.
    pub(super) fn evict_old_version(&mut self, t: &Table, idx: u32, watermark: u64) -> bool {
        let e = t.caches[self.id].entry(idx);
        let Some((w, n)) = loc_entry(e.cc[3].load(Ordering::Acquire)) else { return false };
        let newer = t.caches[w].entry(n);
        if silo::cts_of(newer.cc[0].load(Ordering::Acquire)) >= watermark
            || newer.cc[2].load(Ordering::Acquire) != loc_cached(self.id, idx)
        {
            return false;
        }
        self.cut_chain(t, newer);
        true
    }

    /// Install a new version as a new entry `idx` of this worker's region,
    /// above the old head at `head_loc` (which stays locked until the caller
    /// unlocks it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn install_version(
        &mut self,
        t: &Table,
        rid: u64,
        key: u64,
        idx: u32,
        slot: u64,
        row: &[u8],
        cts: u64,
        deleted: bool,
        head_loc: u64,
    ) {
        let region = &t.caches[self.id];
        let e = region.fill(idx, key, rid, slot, cts);
        if !deleted {
            region.write_row(idx, row);
            self.s.numa_entry(self.id, self.id, idx, true);
        }
        e.cc[1].store(cts, Ordering::Relaxed);
        e.cc[2].store(head_loc, Ordering::Relaxed);
        e.cc[0].store(silo::tid(cts, deleted), Ordering::Release);
        let (hw, hidx) = loc_entry(head_loc).expect("heads are cached");
        let mine = loc_cached(self.id, idx);
        t.caches[hw].entry(hidx).cc[3].store(mine, Ordering::Release);
        t.records.loc(rid).store(mine, Ordering::Release);
    }
}
