//! Commit phase 4, PUBLISH: make the new versions visible and unlock.
//!
//! For each write, still locked: keep the secondary indexes in step, retire
//! the superseded slot (and a deletion's tombstone) into this worker's
//! garbage pipeline (`maintain.rs`), then install the new version: in
//! place; into a copy in this worker's region (Zen's copy-on-foreign-write,
//! §3.2, or a move out of another node's memory, N1); as a new head of the
//! version chain (multi-version, `versions.rs`); or, for a Zen+ privileged
//! transaction whose record is not cached, by pointing the record at the
//! new heap slot. Storing the version word (or the new head) is the unlock.
//!
//! INVARIANTS
//! (U1) Runs after phase 3 and cannot fail (K2 of `commit.rs`): every slot
//!      and entry it needs was reserved.
//! (U2) A superseded slot is retired before its record is unlocked, so a
//!      transaction that sees the new version also sees the old one pending
//!      (S3 of `space.rs`).
//! (U3) Single-version deletes unlink the key from the ordered index while
//!      still locked (I1 of `index/mod.rs`); multi-version ones keep it for
//!      older snapshots and queue it: it leaves once its tombstone is below
//!      the watermark (`maintain.rs`, `unlink_old_tombstones`).
//! (U4) No in-place install writes another node's memory in a
//!      NUMA-local-write mode (N1), checked by `assert!` in every build;
//!      only a privileged multi-version transaction with a full region may.
//! (U5) A delete swaps its record's spare word to `SPARE_DEAD` and retires
//!      the spare it held, still locked (S7 of `space.rs`).

use std::sync::atomic::{Ordering, fence};

use zen_pmem::PmemBackend;

use super::super::{WriteItem, WriteKind, ZenWorker};
use crate::cc::{Protocol, silo};
use crate::config::{Fault, RaceFault};
use crate::zen::cache::{FLAG_COPY, LOC_EMPTY, loc_cached, loc_entry};
use crate::zen::space::Garbage;
use crate::zen::table::{SPARE_DEAD, Table, spare_slot};

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Make the new versions visible, unlock, and queue superseded slots.
    pub(super) fn publish(&mut self, cts: u64, logical: u64) {
        fence(Ordering::Release);
        let data = std::mem::take(&mut self.write_data);
        for i in 0..self.writes.len() {
            crate::sched::point();
            let w = self.writes[i];
            let t = self.written_table(w.table);
            let (loc, prev) = w.locked.expect("locked at commit");
            let deleted = w.kind == WriteKind::Delete;
            let spare_of = (!deleted).then_some(w.rid);
            let Some((owner, idx)) = loc_entry(loc) else {
                let old = Garbage::superseded(w.table, loc, silo::cts_of(prev), cts, spare_of);
                self.install_direct(t, w.rid, old, w.slot, deleted);
                self.writes[i].locked = None;
                continue;
            };
            let entry = t.caches[owner].entry(idx);
            let old_slot = entry.slot.load(Ordering::Acquire);
            let new_row = &data[w.data_at..w.data_at + t.row_bytes];
            maintain_secondary(
                t,
                (owner, idx, prev),
                w.key,
                (!deleted).then_some(new_row),
                &mut self.row_buf,
            );
            let new_slot = if deleted { 0 } else { w.slot };
            // Garbage is queued (`gc_low` lowered) before the new version is
            // unlocked, so any transaction that sees the new version also
            // sees it pending (S3).
            if old_slot != 0 {
                let old = Garbage::superseded(w.table, old_slot, silo::cts_of(prev), cts, spare_of);
                self.retire_slot(old);
            }
            if deleted {
                self.retire_spare(t, w.rid, cts);
                self.retire_slot(Garbage::tombstone(w.table, w.slot, cts));
                if P::MULTI_VERSION {
                    // U3's deferred half: the key leaves the ordered index
                    // once no snapshot can read below this tombstone.
                    self.unlinks.push_back((w.table, w.key, w.rid, cts));
                }
            }
            if P::MULTI_VERSION
                && let Some(new_idx) = w.new_entry
            {
                self.install_version(
                    t, w.rid, w.key, new_idx, new_slot, new_row, cts, deleted, loc,
                );
                entry.cc[0].store(prev & !silo::LOCK, Ordering::Release);
                self.writes[i].locked = None;
                self.writes[i].new_entry = None;
                continue;
            }
            self.writes[i].new_entry = None;
            let version = Version { slot: new_slot, cts, logical, deleted };
            self.install_single(t, &w, (owner, idx, prev), new_row, version);
            self.writes[i].locked = None;
        }
        self.write_data = data;
    }

    /// Install a single-version write (or a multi-version one in place, see
    /// `allocate_slots`) of the record locked in entry `idx` of `owner`'s
    /// region, whose version word was `prev`: into a copy reserved because
    /// staying would be a remote write (N1), or Zen's best-effort copy on a
    /// foreign write, or else in place.
    fn install_single(
        &mut self,
        t: &Table,
        w: &WriteItem,
        (owner, idx, prev): (usize, u32, u64),
        new_row: &[u8],
        v: Version,
    ) {
        let entry = t.caches[owner].entry(idx);
        if v.deleted && !P::MULTI_VERSION {
            // Still locked: the deleted key leaves the ordered index, so scans
            // no longer walk it (I1, `index.rs`). Single-version protocols
            // have no snapshot that could still read the deleted row;
            // multi-version ones keep the key for their older readers.
            t.index.unlink(w.key);
        }
        // Reserved in `allocate_slots`: a move (N1), or Zen's best-effort
        // copy on a foreign write, which a full region left unreserved.
        if let Some(copy) = w.new_entry {
            self.install_copy(t, w.rid, w.key, copy, new_row, v);
            // The record points at the copy while the original is still
            // locked: a writer that read the original may lock the copy now,
            // and its validation must not count that lock as the one on the
            // word it read (`holds_write_lock`).
            crate::sched::point();
            if self.race(RaceFault::OwnLockOnCopyCounts) {
                // The injected bug's window, widened so that a short
                // OS-thread run meets it too (`workloads_on_zen.rs`).
                zen_pmem::cpu::busy_wait_ns(2_000);
            }
            entry.flags.fetch_or(FLAG_COPY, Ordering::AcqRel);
            // Obsolete before unlocked: single-version read validation
            // trusts the word alone (C6 of `cache.rs`).
            let obsolete =
                if self.race(RaceFault::CopyLeavesOriginalValid) { 0 } else { silo::OBSOLETE };
            entry.cc[0].store(obsolete | (prev & !silo::LOCK), Ordering::Release);
            // C5: the owner retires the original at its next allocation.
            t.caches[owner].push_copied(idx);
            return;
        }
        // In place: local, or a mode that promises nothing, or a privileged
        // multi-version transaction whose region is full.
        // N1, checked in every build (one branch when NUMA is off); the
        // NUMA tests also assert that no remote write was counted.
        assert!(
            !self.s.numa_write_must_move(self.id, owner, idx)
                || (P::MULTI_VERSION && self.exclusive_mine()),
            "remote in-place install of record {} (N1)",
            w.rid
        );
        if !v.deleted {
            t.caches[owner].write_row(idx, new_row);
            self.s.numa_entry(self.id, owner, idx, true);
        }
        entry.slot.store(v.slot, Ordering::Release);
        if P::TICTOC {
            entry.cc[1].store(v.logical, Ordering::Release);
            entry.cc[2].store(v.logical, Ordering::Release);
        }
        crate::sched::point();
        entry.cc[0].store(silo::tid(v.cts, v.deleted), Ordering::Release);
    }

    /// A delete of Tx-CTS `cts`, still locked: the record never gets a spare
    /// again, and the one it had is retired so that the tombstone waits for
    /// it (S7, S3 of `space.rs`).
    fn retire_spare(&mut self, t: &Table, rid: u64, cts: u64) {
        if self.fault(Fault::SpareKeptOnDelete) {
            return;
        }
        if let Some(spare) = spare_slot(t.records.spare(rid).swap(SPARE_DEAD, Ordering::AcqRel)) {
            self.retire_slot(Garbage::former_spare(t.id.0, spare, cts));
        }
    }

    /// Zen+ step 3: the privileged transaction's new version of a record whose
    /// version was in NVM stays in NVM; the record points at the new slot.
    /// `old` is the superseded slot, as a garbage item.
    fn install_direct(&mut self, t: &Table, rid: u64, old: Garbage, slot: u64, deleted: bool) {
        debug_assert!(self.exclusive_mine() && t.secondary.is_empty());
        let cts = old.cts;
        self.retire_slot(old);
        let home = if deleted {
            self.retire_spare(t, rid, cts);
            self.retire_slot(Garbage::tombstone(t.id.0, slot, cts));
            LOC_EMPTY
        } else {
            slot
        };
        t.records.loc(rid).store(home, Ordering::Release);
        self.s.adaptive.nvm_direct_writes.fetch_add(1, Ordering::Relaxed);
    }

    /// Copy-on-foreign-write (§3.2), single-version protocols: the new
    /// version goes to entry `idx` of this worker's region and the record
    /// points there; the caller then marks the old entry copied and obsolete.
    ///
    /// The old entry stays locked (the version word's LOCK, and for 2PL the
    /// exclusive lock word) until then, so no writer can slip in between;
    /// readers that still find the old entry see it obsolete, or see the
    /// location changed, and re-read the location (as after an eviction).
    /// CC-Meta of the copy starts clean: no 2PL holder (a lock word left from
    /// the entry's previous use would block it), TicToc's wts = rts = the
    /// commit's logical timestamp, as an in-place install would set.
    fn install_copy(&mut self, t: &Table, rid: u64, key: u64, idx: u32, row: &[u8], v: Version) {
        let region = &t.caches[self.id];
        let e = region.fill(idx, key, rid, v.slot, self.begin_ts);
        if P::TICTOC {
            e.cc[1].store(v.logical, Ordering::Relaxed);
            e.cc[2].store(v.logical, Ordering::Relaxed);
        }
        if !v.deleted {
            region.write_row(idx, row);
            self.s.numa_entry(self.id, self.id, idx, true);
        }
        e.cc[0].store(silo::tid(v.cts, v.deleted), Ordering::Release);
        t.records.loc(rid).store(loc_cached(self.id, idx), Ordering::Release);
    }
}

/// What `install_copy` writes: the new version's heap slot (0 for a
/// deletion), Tx-CTS, TicToc timestamp and whether it deletes the record.
#[derive(Debug, Clone, Copy)]
struct Version {
    slot: u64,
    cts: u64,
    logical: u64,
    deleted: bool,
}

/// Keep secondary indexes in step with an installed write (lock held);
/// the entry `idx` of `owner`'s region held the version word `prev`. `old`
/// is a scratch buffer for the old row (the worker's, so no allocation).
fn maintain_secondary(
    t: &Table,
    (owner, idx, prev): (usize, u32, u64),
    key: u64,
    new_row: Option<&[u8]>,
    old: &mut Vec<u8>,
) {
    if t.secondary.is_empty() {
        return;
    }
    old.resize(t.row_bytes, 0);
    let had_old = prev & silo::ABSENT == 0;
    if had_old {
        t.caches[owner].read_row(idx, old);
    }
    crate::index::maintain_secondary(&t.secondary, key, had_old.then_some(&old[..]), new_row);
}
