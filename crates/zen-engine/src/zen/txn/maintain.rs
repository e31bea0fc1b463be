//! Commit phase 5, MAINTAIN: the worker's share of space management, run
//! after each of its fences (`space.rs` has the slot life cycle, S1–S6).
//!
//! Cost per writing commit, whatever the number of tables: one load of the
//! worker's handoff queue, one uncontended lock of its own `WorkerGc`, and
//! per reclaimed slot one region lock of the slot's table (or one push to the
//! owner's handoff queue). A commit whose pipeline is empty skips the lock;
//! a read-only commit never gets here (it has no fence, unless `Immediate`
//! durability makes it wait for a writer it read from).
//!
//! Around each fence: `before_fence` (after the commit's own flushes) does
//! the work that misses, the zero stores and free-list pushes `after_fence`
//! set up at the previous fence, so that it overlaps the fence's
//! write-backs; `after_fence` does what needs the fence.
//!
//! INVARIANTS this file keeps (numbers of `space.rs`)
//! (S1) `zero_pending` is issued only by `before_fence`, which a fence
//!      follows at once, and becomes `freeable` only at the fence after its
//!      zero stores.
//! (S2) An item leaves `garbage` only when its Tx-CTS is durable (this
//!      worker's `durable_cts`) and below the watermark.
//! (S3) A tombstone leaves `garbage` only when no older non-tombstone item is
//!      pending here (ahead of it) or at any other worker (`gc_low`).
//! (S4) A slot's owner's floor is flushed *by this worker* one fence before
//!      the slot's zero store, unless a floor that high is known durable
//!      (`floors_durable`): a floor another holder stored is durable only at
//!      that holder's next fence, which may come later (issue 14).
//! (S6) Items are taken from the front of `garbage` only.
//! (S7) An item becomes its record's spare, instead of being zeroed, only
//!      where its zero store would have been issued: after the fence that
//!      made its floor durable.

use std::sync::atomic::{AtomicU64, Ordering};

use zen_pmem::{Marker, PmemBackend};

use super::{GC_BATCH, ZenWorker};
use crate::cc::{Protocol, silo};
use crate::config::Fault;
use crate::zen::Shared;
use crate::zen::cache::loc_entry;
use crate::zen::space::{Garbage, WorkerGc};
use crate::zen::table::spare_slot;

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Queue a slot superseded (or, for a tombstone, written) by this
    /// worker's commit `g.cts`. Called at install, before the new version is
    /// unlocked: `gc_low` is lowered first (S3).
    pub(super) fn retire_slot(&mut self, g: Garbage) {
        if !g.tombstone {
            let low = &self.s.gc_low[self.id];
            if low.load(Ordering::Relaxed) > g.cts {
                low.store(g.cts, Ordering::SeqCst);
            }
        }
        self.staged.push(g);
    }

    /// `before_fence`, a fence of this worker's thread, `after_fence` (which
    /// acknowledges what the fence made durable).
    pub(super) fn fence_and_maintain(&mut self) {
        self.before_fence();
        self.s.pool.persister(self.thread).fence();
        self.after_fence();
    }

    /// Just before a fence of this worker (the caller fences at once): the
    /// zero stores of `zero_now` (S1: they become `zero_pending`, durable at
    /// that fence) and the free-list pushes of `freeable`, both set up by
    /// the previous `after_fence`. Their lines are cold (a superseded slot
    /// written long ago, a page's free list): here their misses overlap the
    /// write-backs the fence waits for.
    pub(super) fn before_fence(&mut self) {
        if !self.gc_before_fence {
            return;
        }
        self.gc_before_fence = false;
        let shared = self.s;
        let mut guard = shared.gc[self.id].lock();
        let gc = &mut *guard;
        for g in gc.freeable.drain(..) {
            self.free_reclaimed(g.table, g.slot);
        }
        let p = shared.pool.persister(self.thread);
        for g in gc.zero_now.drain(..) {
            p.write_u64_atomic(g.slot + 8, 0);
            p.flush(g.slot + 8, 8);
            gc.zero_pending.push(g);
        }
    }

    /// After each fence of this worker: acknowledge, then advance the
    /// garbage pipeline.
    pub(super) fn after_fence(&mut self) {
        if P::MULTI_VERSION && !self.unlinks.is_empty() {
            self.unlink_old_tombstones();
        }
        if let Some(cts) = self.unfenced_cts.take() {
            self.s.durable_cts[self.id].store(cts, Ordering::Release);
            self.s.pool.persister(self.thread).marker(Marker::Ack { txn: cts });
        }
        // S4: the floor lines this worker flushed are durable now.
        if !self.floors_flushed.is_empty() {
            self.s.floors_fenced(&self.floors_flushed);
            self.floors_flushed.clear();
        }
        self.take_back_freed_slots();
        // Garbage of workers that left (S3: their pending items hold every
        // tombstone back). Our own staged items are covered: `retire_slot`
        // lowered our `gc_low` for them.
        if self.s.orphans.load(Ordering::Relaxed) != 0 {
            self.s.adopt_orphans(self.id);
        }
        if self.staged.is_empty() && self.gc_idle {
            return;
        }
        let shared = self.s;
        let mut gc = shared.gc[self.id].lock();
        gc.garbage.extend(self.staged.drain(..));
        // S1: the zero stores of `zero_pending` were fenced just now; the
        // slots go back on their free lists before the next fence.
        {
            let gc = &mut *gc;
            gc.freeable.append(&mut gc.zero_pending);
        }
        // The floors of `to_zero` were raised and flushed by this worker
        // before this fence (S4): each becomes its record's spare (S7), or
        // is zeroed before the next fence. The zero store's line, long
        // evicted, is asked for now so that the store finds it.
        let p = shared.pool.persister(self.thread);
        let mut to_zero = std::mem::take(&mut gc.to_zero);
        for g in to_zero.drain(..) {
            if self.keep_as_spare(&g) {
                continue;
            }
            p.prefetch(g.slot + 8, 8);
            gc.zero_now.push(g);
        }
        gc.to_zero = to_zero;
        self.collect_ready(&mut gc);
        shared.gc_low[self.id].store(gc.pending_low(), Ordering::SeqCst);
        self.gc_idle = gc.is_idle();
        self.gc_before_fence = !gc.freeable.is_empty() || !gc.zero_now.is_empty();
    }

    /// S7, once per worker, when the pool has no free page (new spares are
    /// off by then, `Shared::spares_off`): zero and free every spare in this
    /// worker's region, except those this transaction is about to write.
    /// Only the owner takes its spares (P6), so the compare-and-swap races
    /// only with deletes, which swap the word themselves; `gc_low` is 0
    /// from before the first swap until the zeroes are durable, so a
    /// tombstone of a key whose spare is taken here waits for it (S3), as
    /// it would for the spare a delete retires. The spares became spares
    /// after their floors were durable (S4). Returns the slots freed.
    pub(super) fn sweep_own_spares(&mut self) -> usize {
        if self.spares_swept {
            return 0;
        }
        self.spares_swept = true;
        let shared = self.s;
        shared.gc_low[self.id].store(0, Ordering::SeqCst);
        let mut swept = Vec::new();
        for t in shared.tables().iter() {
            for rid in 0..t.records.count() {
                let Some(word) = t.records.spare_if_present(rid) else { continue };
                let Some(spare) = spare_slot(word.load(Ordering::Acquire)) else { continue };
                if shared.slot_owner(spare) != self.id
                    || self.writes.iter().any(|w| w.spare && w.slot == spare)
                {
                    continue;
                }
                if word.compare_exchange(spare, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                    swept.push((t.id.0, spare));
                }
            }
        }
        let p = shared.pool.persister(self.thread);
        for &(_, slot) in &swept {
            p.write_u64_atomic(slot + 8, 0);
            p.flush(slot + 8, 8);
        }
        if !swept.is_empty() {
            // Like a page allocation's fences: durable, nothing acknowledged.
            p.fence();
        }
        // Not counted again: they were counted as reclaimed when they
        // became spares.
        for &(table, slot) in &swept {
            self.return_slot(self.id, table, slot);
        }
        let staged_low =
            self.staged.iter().filter(|g| !g.tombstone).map(|g| g.cts).min().unwrap_or(u64::MAX);
        let low = shared.gc[self.id].lock().pending_low().min(staged_low);
        shared.gc_low[self.id].store(low, Ordering::SeqCst);
        swept.len()
    }

    /// Multi-version protocols keep a deleted key in the ordered index while
    /// a snapshot may read the version below its tombstone; once the
    /// tombstone's Tx-CTS is below the watermark none can (every watermark
    /// is ≤ a running snapshot's S + 1, R2 of `adaptive.rs`), so the key
    /// leaves, and scans stop walking it (TPC-C's Delivery walked every
    /// order delivered before). Under the tombstone entry's lock, as an
    /// insert links under it, and only if the entry is still the record's
    /// head with that tombstone: a key re-inserted since is live again; one
    /// whose tombstone was evicted to NVM (no entry to lock) stays, as it
    /// did before; one whose entry another worker holds locked goes to the
    /// back of the queue. Bounded per call.
    fn unlink_old_tombstones(&mut self) {
        const UNLINK_BATCH: usize = 64;
        let watermark = self.s.watermark();
        for _ in 0..UNLINK_BATCH {
            let Some(&(table, key, rid, cts)) = self.unlinks.front() else { break };
            if cts >= watermark {
                break;
            }
            self.unlinks.pop_front();
            let Some(t) = self.tables.get(table as usize) else { continue };
            let locw = t.records.loc(rid);
            let loc = locw.load(Ordering::Acquire);
            let Some((w, idx)) = loc_entry(loc) else { continue };
            let e = t.caches[w].entry(idx);
            let Some(prev) = silo::try_lock(&e.cc[0]) else {
                // Another worker holds it (an insert of the key, or an
                // unlink): try again at a later fence, after the others.
                self.unlinks.push_back((table, key, rid, cts));
                break;
            };
            if prev & silo::ABSENT != 0
                && prev & silo::OBSOLETE == 0
                && silo::cts_of(prev) == cts
                && locw.load(Ordering::Acquire) == loc
            {
                t.index.unlink(key);
            }
            silo::unlock(&e.cc[0], prev);
        }
    }

    /// Move ready items (S2, S3) from the front of `garbage` to `to_zero`,
    /// raising their owners' floors where needed (S4); at most `GC_BATCH`
    /// non-tombstone items per fence (tombstones are only set aside).
    fn collect_ready(&mut self, gc: &mut WorkerGc) {
        if gc.garbage.is_empty() {
            return;
        }
        let watermark = self.reuse_watermark();
        let durable = self.s.durable_cts[self.id].load(Ordering::Acquire);
        for _ in 0..GC_BATCH {
            let Some(g) = gc.next_due(durable, watermark) else { break };
            if self.fault(Fault::ReuseWithoutZeroing) {
                self.free_reclaimed(g.table, g.slot);
                continue;
            }
            if !self.fault(Fault::NoCommitFloor) {
                self.s.cover_with_floor(self.thread, &g, &mut self.floors_flushed);
            }
            gc.to_zero.push(g);
        }
        while let Some(&g) = gc.tombstones.front() {
            if !self.tombstone_may_go(gc, g.cts) {
                break;
            }
            gc.tombstones.pop_front();
            if !self.fault(Fault::NoCommitFloor) {
                self.s.cover_with_floor(self.thread, &g, &mut self.floors_flushed);
            }
            gc.to_zero.push(g);
        }
    }

    /// The spare word of `g`'s record, if `g` may become a spare at all
    /// (S7: superseded by a non-delete, a hot version, spares not off).
    fn spare_word_for(&self, g: &Garbage) -> Option<&AtomicU64> {
        let rid = g.spare_of?;
        if !spare_worthy(g) || self.s.spares_off.load(Ordering::Relaxed) {
            return None;
        }
        Some(self.s.registry.get(g.table as usize)?.records.spare(rid))
    }

    /// S7: make `g`'s slot its record's spare, if the item may become one
    /// and the record has none. Called only after the fence that made the
    /// floor covering `g` durable (S4): the record's next update may
    /// overwrite the slot's header at once. The slot stays live in its
    /// owner's region.
    fn keep_as_spare(&self, g: &Garbage) -> bool {
        let kept = self.spare_word_for(g).is_some_and(|word| {
            word.compare_exchange(0, g.slot, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        });
        if kept {
            // Reclaimed (for its record's next version), and counted apart.
            for counter in [&self.s.gc_spared[self.id], &self.s.gc_reclaimed[self.id]] {
                counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
        }
        kept
    }

    /// May a tombstone of Tx-CTS `cts` be zeroed (S3)? Not while any
    /// non-tombstone item of Tx-CTS ≤ `cts` is pending here (the older
    /// version its own commit superseded has the same Tx-CTS) or elsewhere.
    fn tombstone_may_go(&self, gc: &WorkerGc, cts: u64) -> bool {
        if self.fault(Fault::EarlyTombstone) {
            return true;
        }
        gc.pending_low() > cts
            && self
                .s
                .gc_low
                .iter()
                .enumerate()
                .all(|(w, low)| w == self.id || low.load(Ordering::SeqCst) > cts)
    }

    /// A durably zero slot goes back to its owner's free list: directly if
    /// it is ours, else through the owner's handoff queue, or, when that is
    /// full, directly into the owner's region under its lock. A queue stays
    /// full when its owner does not run (a pool loaded by more workers than
    /// now use it: nobody drains the queue of a worker id no thread holds);
    /// keeping such slots for later retries held them forever and retried
    /// all of them at every maintenance (a run reopened with fewer workers
    /// than loaded it fell from 560k to 40k txn/s on YCSB-A).
    fn free_reclaimed(&mut self, table: u32, slot: u64) {
        let owner = self.s.slot_owner(slot);
        if owner == self.id || self.s.freed_slots_of(owner).push((table, slot)).is_err() {
            self.free_slot(owner, table, slot);
        }
    }

    /// Free a slot of `owner`'s region and count it reclaimed.
    fn free_slot(&mut self, owner: usize, table: u32, slot: u64) {
        self.return_slot(owner, table, slot);
        let reclaimed = &self.s.gc_reclaimed[self.id];
        reclaimed.store(reclaimed.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Put a slot back on `owner`'s region's free list, under the region's
    /// lock (S5: release a page left empty, written by this thread).
    fn return_slot(&mut self, owner: usize, table: u32, slot: u64) {
        let Some(t) = self.s.registry.get(table as usize) else { return };
        let mut region = t.heaps[owner].lock();
        if let Some(page) = region.free(slot) {
            self.s.release_heap_page(self.thread, owner, t, &mut region, page);
        }
    }

    /// Put back the slots other workers reclaimed for us (bounded per call).
    fn take_back_freed_slots(&mut self) {
        let Some(queue) = self.s.freed_slots[self.id].get() else { return };
        if queue.is_empty() {
            return;
        }
        for _ in 0..FREED_SLOTS_CAPACITY {
            let Some((table, slot)) = queue.pop() else { break };
            self.free_slot(self.id, table, slot);
        }
    }
}

/// Commits (of the shared clock) a version may have lived for its slot to
/// become a spare (S7): a key updated again that soon is likely updated
/// again soon, so its spare is soon rewritten. A slot of a colder key is
/// zeroed and freed as before, so spares, at most one per record, are held
/// by the keys that were hot, not by every key ever updated twice.
pub(crate) const SPARE_WINDOW: u64 = 1 << 16;

/// Whether `g`'s version lived fewer than `SPARE_WINDOW` commits (Tx-CTS
/// values are `counter << 8 | worker`).
fn spare_worthy(g: &Garbage) -> bool {
    let counter = |cts: u64| cts >> crate::ts::WORKER_BITS;
    counter(g.cts).saturating_sub(counter(g.version_cts)) < SPARE_WINDOW
}

/// Capacity of each owner's queue of slots freed by others.
pub(crate) const FREED_SLOTS_CAPACITY: usize = 1024;

impl<B: PmemBackend> Shared<B> {
    /// The worker whose heap region holds `slot`.
    pub(crate) fn slot_owner(&self, slot: u64) -> usize {
        let page = slot / self.pool.page_size();
        let owner = self.page_worker[page as usize].load(Ordering::Acquire) as usize;
        assert!(owner < self.regions, "slot {slot} on page {page} without an owner worker");
        owner
    }

    /// S4: make the floor of `g.slot`'s owner durably at least
    /// `g.version_cts` by `thread`'s next fence, before which the caller
    /// issues no zero store for `g`. One load when a high enough floor is
    /// durable already, or this thread flushed one since its last fence (in
    /// `flushed`); else the floor line is raised if needed and flushed on
    /// `thread` (raised to `max(version_cts, durable_cts[owner])`, so one
    /// store serves many slots), and `(owner, floor)` joins `flushed`, which
    /// the caller reports with `floors_fenced` after that fence. A floor
    /// another holder stored but has not fenced yet does not count: that
    /// holder may fence much later than this thread zeroes the slot.
    pub(crate) fn cover_with_floor(
        &self,
        thread: u32,
        g: &Garbage,
        flushed: &mut Vec<(usize, u64)>,
    ) {
        let owner = self.slot_owner(g.slot);
        if self.floors_durable[owner].load(Ordering::Acquire) >= g.version_cts
            || flushed.iter().any(|&(w, floor)| w == owner && floor >= g.version_cts)
        {
            return;
        }
        let durable = self.durable_cts[owner].load(Ordering::Acquire);
        let floor = self.raise_floor(thread, owner, g.version_cts.max(durable));
        flushed.push((owner, floor));
    }

    /// The queue of slots freed for `owner` by other workers.
    pub(crate) fn freed_slots_of(&self, owner: usize) -> &crate::zen::FreedSlots {
        self.freed_slots[owner].get_or_init(|| crate::zen::FreedSlots::new(FREED_SLOTS_CAPACITY))
    }

    /// Release an empty heap page of `worker`'s region of `t` (S5); the
    /// page table store is `thread`'s, the thread doing it.
    pub(crate) fn release_heap_page(
        &self,
        thread: u32,
        worker: usize,
        t: &crate::zen::table::Table,
        region: &mut crate::zen::space::HeapRegion,
        page: u64,
    ) {
        let owner = zen_pmem::PageOwner { table: t.id.0, worker: worker as u16 };
        // Free slots of the page are durably zero; the page table entry is the
        // only thing that changes, with one atomic store.
        if self.pool.release_page(thread, page, owner).is_ok() {
            region.remove_page(page);
            self.page_worker[page as usize].store(u32::MAX, Ordering::Release);
        }
    }
}
