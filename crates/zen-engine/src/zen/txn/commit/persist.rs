//! Commit phase 3, PERSIST (Alg. 1), and the reservation that precedes it.
//!
//! RESERVE (`allocate_slots`, before the decision): a free slot in this
//! worker's heap region for every write, and a Met-Cache entry for every new
//! version that will not replace its entry in place (multi-version updates
//! and deletes; moves out of another node's memory, N1). A full pool or
//! region aborts here (`OutOfSpace`, `CacheFull`); `free_unwritten_slots`
//! gives everything back. Single-version writes of a record cached in another
//! worker's region also reserve their copy here (copy-on-foreign-write,
//! §3.2), best effort: a full region leaves them in place, no abort. Every
//! reserved entry's lines are prefetched for writing, so they arrive while
//! phase 3's fence waits instead of when phase 4 fills them.
//!
//! PERSIST (`persist_new_versions`), in this order:
//!   `Marker::Begin` → every new version, the LP tuple last: word 0, word 1
//!   (not the LP tuple's), the row; flush the slot → the maintenance that
//!   misses (`before_fence`: earlier garbage's zero stores and free lists)
//!   → fence → maintenance (`after_fence`, `maintain.rs`) → the LP tuple's
//!   word 1 := `cts << 1 | 1` (one atomic store) → flush it → [Immediate,
//!   or a transaction that hides keys: the same three steps again].
//!
//! INVARIANTS
//! (P1) The LP tuple is the write of the table of lowest `persist_rank`, and
//!      its word 1 is stored once, after the fence that made every other
//!      slot of the transaction durable: a durable LP bit means the whole
//!      transaction is durable (C-3 of `commit-and-recovery.md`). Until then
//!      that word is the durable zero S1 left, so the slot reads as free,
//!      or, in the record's spare (S7 of `space.rs`), the spare's own older
//!      header, which loses to the durable version that superseded it.
//! (P2) Every slot written is flushed whole, header line included (one
//!      extra line per transaction instead of relying on in-line ordering).
//! (P3) The writers this transaction read from are flushed before its fence
//!      (`deps.rs`), and a transaction that hides keys from scans is durable
//!      before it publishes.
//! (P4) Acknowledgement (`durable_cts`) happens only in `after_fence`, after
//!      a fence by this thread; the return value says whether this commit is
//!      durable on return.
//! (P5) Once a slot is reserved, publishing cannot fail (K2 of `commit.rs`).
//! (P6) An update of a record whose spare (S7) is in this worker's region
//!      writes the spare instead of a free slot, and takes it (stores 0 in
//!      the record's spare word) only after every fallible reservation.

use std::sync::atomic::Ordering;

use zen_pmem::{Marker, PmemBackend};

use super::super::{WriteKind, ZenWorker};
use crate::api::Durability;
use crate::cc::{Protocol, silo};
use crate::config::Fault;
use crate::error::{AbortReason, Error, Result};
use crate::heap::{self, SlotHeader};
use crate::zen::cache::loc_entry;
use crate::zen::table::{Table, spare_slot};

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Take a free heap slot for every write; pages come from the pool.
    pub(super) fn allocate_slots(&mut self) -> Result<()> {
        for i in 0..self.writes.len() {
            let t = self.written_table(self.writes[i].table);
            let slot = match self.own_spare(t, i) {
                Some(spare) => {
                    self.writes[i].spare = true;
                    spare
                }
                None => self.allocate_slot(t)?,
            };
            self.writes[i].slot = slot;
            let reserve =
                if P::MULTI_VERSION { self.needs_new_entry(i) } else { self.must_move(i) };
            if reserve {
                // Reserved now: once persisted, installing must not fail. A
                // full region aborts (retryable) rather than write in place,
                // which for `must_move` would be a remote write (N1).
                self.writes[i].new_entry = match self.allocate_entry(t) {
                    Ok(idx) => Some(idx),
                    // Zen+ step 3 (multi-version only): alone, a full region
                    // installs in place or in NVM (`install`).
                    Err(Error::Abort(AbortReason::CacheFull)) if self.privileged_on_full()? => None,
                    Err(e) => return Err(e),
                };
            } else if self.copies_on_foreign_write(i) {
                // Best effort (§3.2): a full region leaves the write in place.
                self.writes[i].new_entry = self.allocate_entry(t).ok();
            }
            // Phase 4 fills the entry after the fence: its lines arrive, for
            // writing, while the fence waits.
            if let Some(idx) = self.writes[i].new_entry {
                let row = self.writes[i].kind != WriteKind::Delete;
                t.caches[self.id].prefetch_for_fill(idx, row);
            }
        }
        // Nothing can fail from here on: take the spares (P6). Their words
        // still hold them: we hold the records' locks, and a holder only
        // stores a spare into a word that is 0.
        for w in &self.writes {
            if w.spare {
                self.tables[w.table as usize].records.spare(w.rid).store(0, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// S7 of `space.rs`: the spare slot of write `i`'s record, if it is an
    /// update and the spare is in this worker's region (slots are written
    /// only by their owner, N1 and the per-worker recovery rule).
    fn own_spare(&self, t: &Table, i: usize) -> Option<u64> {
        let w = &self.writes[i];
        if w.kind != WriteKind::Update {
            return None;
        }
        // Acquire: the holder kept it after the fence that made its floor
        // durable (S4), so this update may overwrite the header.
        spare_slot(t.records.spare(w.rid).load(Ordering::Acquire))
            .filter(|&spare| self.s.slot_owner(spare) == self.id)
    }

    /// Multi-version: does write `i` install a new version entry? Updates
    /// and deletes do. An insert fills its locked absent entry in place (an
    /// older reader then aborts rather than seeing "absent"), unless that
    /// entry is a tombstone, i.e. a version some snapshot may still read
    /// (R4 of `adaptive.rs`), or is homed on another node (N1, a reader
    /// there created it): then the insert goes above it.
    fn needs_new_entry(&self, i: usize) -> bool {
        let w = &self.writes[i];
        match w.locked {
            Some((loc, prev)) if w.kind == WriteKind::Insert => {
                loc_entry(loc).is_some() && (silo::cts_of(prev) != 0 || self.must_move(i))
            }
            Some((loc, _)) => loc_entry(loc).is_some(),
            None => true,
        }
    }

    /// Single-version: will write `i` be installed as Zen's copy on a
    /// foreign write (§3.2), its record cached in another worker's region?
    fn copies_on_foreign_write(&self, i: usize) -> bool {
        P::COPY_ON_FOREIGN_WRITE
            && !P::MULTI_VERSION
            && self.locked_entry(i).is_some_and(|(owner, _)| owner != self.id)
    }

    /// The Met-Cache entry (owner region, index) write `i` locked, if its
    /// record is cached.
    fn locked_entry(&self, i: usize) -> Option<(usize, u32)> {
        self.writes[i].locked.and_then(|(loc, _)| loc_entry(loc))
    }

    /// Would installing write `i` where its record is cached write another
    /// node's memory in a NUMA-local-write mode? Then it moves to this
    /// worker's region (a copy, or a new version above the foreign entry).
    fn must_move(&self, i: usize) -> bool {
        let Some((owner, idx)) = self.locked_entry(i) else {
            return false;
        };
        self.s.numa_write_must_move(self.id, owner, idx)
    }

    fn allocate_slot(&mut self, t: &Table) -> Result<u64> {
        let mut region = t.heaps[self.id].lock();
        if let Some(slot) = region.allocate() {
            return Ok(slot);
        }
        drop(region);
        let page = match self.s.allocate_heap_page(self.id, t) {
            Err(Error::Pmem(p)) if p.is_retryable() => {
                // A full pool: give this worker's spares back once (S7),
                // then try again; still full is `OutOfSpace`.
                if self.sweep_own_spares() > 0 {
                    if let Some(slot) = t.heaps[self.id].lock().allocate() {
                        return Ok(slot);
                    }
                    self.s.allocate_heap_page(self.id, t)
                } else {
                    Err(Error::Pmem(p))
                }
            }
            other => other,
        };
        let (page, offset) = page.map_err(|e| match e {
            Error::Pmem(p) if p.is_retryable() => Error::Abort(AbortReason::OutOfSpace),
            other => other,
        })?;
        let mut region = t.heaps[self.id].lock();
        region.add_page(page, offset);
        Ok(region.allocate().expect("a new page has free slots"))
    }

    pub(super) fn free_unwritten_slots(&mut self) {
        for w in &mut self.writes {
            if let Some(idx) = w.new_entry.take() {
                let t = &self.tables[w.table as usize];
                t.caches[self.id].free_unpublished(idx);
            }
            if w.spare {
                // Not taken yet (taking is the last step): it stays the
                // record's spare.
                w.spare = false;
                w.slot = 0;
            }
            if w.slot != 0 {
                let t = &self.tables[w.table as usize];
                let mut region = t.heaps[self.id].lock();
                if let Some(page) = region.free(w.slot) {
                    self.s.release_heap_page(self.thread, self.id, t, &mut region, page);
                }
                w.slot = 0;
            }
        }
    }

    /// Alg. 1. Returns whether the commit is durable on return.
    pub(super) fn persist_new_versions(&mut self, cts: u64) -> bool {
        let lp = self
            .writes
            .iter()
            .enumerate()
            .min_by_key(|(_, w)| self.tables[w.table as usize].persist_rank)
            .map(|(i, _)| i)
            .expect("a writing transaction");
        // Before anything of ours can persist: a transaction that hides keys
        // from scans is made durable before it installs, and the writers we
        // read from are flushed for the fence below (`deps.rs`).
        let hides = self.hides_keys();
        self.flush_dependencies(true);
        let p = self.s.pool.persister(self.thread);
        p.marker(Marker::Begin { txn: cts });
        let skip_flushes = self.fault(Fault::SkipFlushes);
        for (i, w) in self
            .writes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != lp)
            .chain(std::iter::once((lp, &self.writes[lp])))
        {
            let t = &self.tables[w.table as usize];
            let deleted = w.kind == WriteKind::Delete;
            // Header and row go out from one buffer, with one flush: the
            // header's bytes are reserved before the row (`push_write`).
            let head = w.data_at - heap::SLOT_HEADER_BYTES as usize;
            let row_end = if deleted { w.data_at } else { w.data_at + t.row_bytes };
            let word0 = SlotHeader::word0(w.key, deleted).to_le_bytes();
            if i == lp {
                // The LP tuple's word 1 is written once, after the fence,
                // with the LP bit: until then it stays durably zero (S1), so
                // the slot reads as free, which recovery treats as this
                // uncommitted transaction's tuple would be; in a spare it
                // keeps the spare's older header (P1).
                p.write(w.slot, &word0);
                p.write(w.slot + heap::SLOT_HEADER_BYTES, &self.write_data[w.data_at..row_end]);
            } else {
                let word1 = SlotHeader::word1(cts, false).to_le_bytes();
                self.write_data[head..head + 8].copy_from_slice(&word0);
                self.write_data[head + 8..head + 16].copy_from_slice(&word1);
                p.write(w.slot, &self.write_data[head..row_end]);
            }
            if !skip_flushes {
                p.flush(w.slot, (row_end - head) as u64);
            }
            self.s.numa_slot(self.id, w.slot, true);
        }
        if !self.fault(Fault::NoFenceBeforeLp) {
            self.fence_and_maintain();
        }
        let lp_word = self.writes[lp].slot + 8;
        let word = SlotHeader::word1(cts, true);
        if self.fault(Fault::TornLpWord) {
            p.write(lp_word, &word.to_le_bytes()[..4]);
            p.write(lp_word + 4, &word.to_le_bytes()[4..]);
        } else {
            p.write_u64_atomic(lp_word, word);
        }
        if !self.fault(Fault::SkipFlushes) {
            p.flush(lp_word, 8);
        }
        self.unfenced_cts = Some(cts);
        if self.durability == Durability::Lazy && !hides {
            // Readers that find this commit not yet durable flush this line
            // (published before the install makes our versions visible).
            self.s.unfenced_lp[self.id].store(lp_word, Ordering::Release);
        }
        if self.durability == Durability::Immediate || hides {
            if self.fault(Fault::AckBeforeLpFence) {
                p.marker(Marker::Ack { txn: cts });
                self.unfenced_cts = None;
                self.s.durable_cts[self.id].store(cts, Ordering::Release);
            }
            self.fence_and_maintain();
            return true;
        }
        false
    }
}
