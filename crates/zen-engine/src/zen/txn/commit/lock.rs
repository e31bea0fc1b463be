//! Commit phase 1, LOCK THE WRITE SET (and the insert checks of timestamp
//! ordering), and the unlock every abort runs.
//!
//! INVARIANTS
//! (L1) Records are locked in (table, record) order, each with a bounded
//!      spin, so lockers never wait in a cycle; a lock still held after the
//!      spin aborts (`WriteLocked`).
//! (L2) A record whose location is a heap slot is cached in first: every
//!      lock is the LOCK bit of a Met-Cache entry's version word `cc[0]`,
//!      except a Zen+ privileged transaction's direct write, which runs alone
//!      and holds no lock word.
//! (L3) `P::may_supersede` runs with the lock held, on the version word
//!      taken with it; an abort releases the lock it just took.
//! (L4) `writes[i].locked` is `Some((location, previous word))` exactly
//!      while write `i` holds its lock; `unlock_all` restores each previous
//!      word (the version is unchanged) and clears it.

use std::sync::atomic::Ordering;

use zen_pmem::PmemBackend;

use super::super::{SPIN_LIMIT, WriteKind, ZenWorker, backoff};
use crate::cc::{Protocol, silo};
use crate::error::{AbortReason, Error, Result};
use crate::zen::cache::{LOC_EMPTY, loc_entry};
use crate::zen::table::Table;

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Lock every written record in (table, record) order (deadlock-free).
    /// A record is written once per transaction (`find_write` merges repeats),
    /// so the keys are distinct and an unstable sort gives the same order
    /// without the stable sort's scratch allocation.
    pub(super) fn lock_write_set(&mut self) -> Result<()> {
        self.writes.sort_unstable_by_key(|w| (w.table, w.rid));
        for i in 0..self.writes.len() {
            if self.writes[i].locked.is_some() {
                continue;
            }
            let t = self.written_table(self.writes[i].table);
            let locked = self.lock_record(t, self.writes[i].rid)?;
            self.writes[i].locked = Some(locked);
        }
        Ok(())
    }

    fn lock_record(&mut self, t: &Table, rid: u64) -> Result<(u64, u64)> {
        let locw = t.records.loc(rid);
        for spin in 0..SPIN_LIMIT {
            let loc = locw.load(Ordering::Acquire);
            if loc == LOC_EMPTY {
                return Err(Error::Abort(AbortReason::ReadValidation));
            }
            let Some((w, idx)) = loc_entry(loc) else {
                match self.cache_in(t, rid, loc) {
                    Err(Error::Abort(AbortReason::CacheFull))
                        if t.secondary.is_empty() && self.privileged_on_full()? =>
                    {
                        return self.lock_direct(t, loc);
                    }
                    r => r?,
                }
                continue;
            };
            let e = t.caches[w].touch(idx, self.begin_ts, P::MULTI_VERSION);
            match silo::try_lock(&e.cc[0]) {
                Some(prev) if locw.load(Ordering::Acquire) == loc => {
                    let rts = e.cc[1].load(Ordering::SeqCst);
                    if let Err(reason) = P::may_supersede(self.txn_ts, prev, rts) {
                        silo::unlock(&e.cc[0], prev);
                        return Err(Error::Abort(reason));
                    }
                    return Ok((loc, prev));
                }
                Some(prev) => silo::unlock(&e.cc[0], prev),
                None if spin > 64 => return Err(Error::Abort(AbortReason::WriteLocked)),
                None => backoff(spin),
            }
        }
        Err(Error::Abort(AbortReason::WriteLocked))
    }

    /// Zen+ step 3: a privileged transaction runs alone, so a record whose
    /// version is in NVM needs no lock word; it is written straight to NVM.
    fn lock_direct(&mut self, t: &Table, slot: u64) -> Result<(u64, u64)> {
        let mut row = std::mem::take(&mut self.row_buf);
        row.resize(t.row_bytes, 0);
        let read = self.read_direct(t, slot, &mut row);
        self.row_buf = row;
        let (loc, prev) = read?;
        P::may_supersede(self.txn_ts, prev, 0).map_err(Error::Abort)?;
        Ok((loc, prev))
    }

    /// Timestamp ordering for inserts (locked since execution): the absent
    /// entry's read timestamp, and any newer scan of the key's range (phantoms).
    pub(super) fn check_inserts(&self) -> Result<()> {
        let Some(ts) = self.txn_ts.filter(|_| P::MULTI_VERSION) else { return Ok(()) };
        for w in self.writes.iter().filter(|w| w.kind == WriteKind::Insert) {
            let t = &self.tables[w.table as usize];
            let (loc, prev) = w.locked.expect("inserts are locked at execution");
            let (owner, idx) = loc_entry(loc).expect("locked records are cached");
            let rts = t.caches[owner].entry(idx).cc[1].load(Ordering::SeqCst);
            P::may_supersede(Some(ts), prev, rts.max(t.scan_rts_of(w.key)))
                .map_err(Error::Abort)?;
        }
        Ok(())
    }

    pub(super) fn unlock_all(&mut self) {
        for w in &mut self.writes {
            if let Some((loc, prev)) = w.locked.take() {
                // Direct writes of a privileged transaction hold no lock word.
                let Some((wk, idx)) = loc_entry(loc) else { continue };
                silo::unlock(&self.tables[w.table as usize].caches[wk].entry(idx).cc[0], prev);
            }
        }
    }
}
