//! Lightweight NVM space management (Zen §3.4): per-(table, worker) heap
//! regions with DRAM free lists and per-page live counters, and per-worker
//! garbage pipelines.
//!
//! The only persistent work is page allocation (done by the pool) and the
//! zeroing of reclaimed slots, which a slot kept as its record's spare (S7)
//! skips. A slot's life:
//!
//! ```text
//!  free ──allocate──▶ written by a commit ──superseded──▶ staged (the superseding worker's, DRAM only)
//!   ▲  ▲                                                    │ next fence of that worker
//!   │  │ owner drains its handoff queue                     ▼
//!   │  └──── slot of another owner ◀──┐                  garbage (FIFO, Tx-CTS order)
//!   │ own slot                        │                     │ newer version durable and older
//!   │                                 │                     │ than the global minimum Tx-CTS (S2, S3)
//!  freeable ◀─ zero_pending ◀──word 1 := 0, flush── zero_now ◀── to_zero ◀── (LP slot: raise the owner's commit floor, flush; S4)
//!                                                                 │
//!                                     superseded by an update and ┘ the record has no spare (S7):
//!                                     the record's spare, rewritten whole by its owner's next update of it
//! ```
//!
//! Each arrow is taken at a fence of the holder: after it (`after_fence`),
//! the steps that need what it made durable (into `zero_now`, spares, into
//! `freeable`, and the floors of newly ready items); just before the next
//! one (`before_fence`), once the commit has issued its own flushes, the
//! steps that touch cold memory: the zero stores of `zero_now` and the free
//! lists of `freeable`. Their misses then overlap the fence's write-backs
//! instead of following them.
//!
//! WHO DOES WHAT. The worker whose commit superseded a slot (the *holder*)
//! takes it through the whole pipeline in its own `WorkerGc`: staging at
//! install, then FIFO queue, zeroing and fencing at its own fences. Only the
//! last step, putting the slot back on a free list, belongs to the slot's
//! *owner* (the worker whose region holds the page, who wrote the version):
//! the holder frees its own slots directly and hands other owners' slots over
//! a lock-free queue (`Shared::freed_slots`, `FreedSlots` in `zen/mod.rs`)
//! that the owner drains at its next fence;
//! only when that queue is full (its owner does not run, or is behind) does
//! the holder free the slot into the owner's region itself, under the
//! region's mutex. So a commit touches only its own pipeline and the regions
//! of the tables it wrote, takes no running worker's lock but in that case,
//! and a read-only commit touches none.
//! The `WorkerGc` mutex is taken by its worker once per maintenance; only the
//! Zen+ exclusive stage (`adaptive.rs`, `reclaim_all`) takes another worker's,
//! while that worker is idle, and a running worker takes that of a worker
//! that left with items pending (`Shared::adopt_orphans`, the same pass):
//! otherwise those items would hold its `gc_low`, and with it every
//! tombstone (S3), until the id is used again.
//!
//! (S1) A slot is reused only after its word 1 was zeroed *durably* (hazard 1),
//!      except by an update of the record whose spare it is (S7).
//! (S2) A slot is zeroed only when the version that superseded it is durable
//!      and no running transaction can read it (hazard 4): `cts <= durable[w]`
//!      and `cts < global minimum Tx-CTS`.
//! (S3) A tombstone of Tx-CTS c is zeroed only when no non-tombstone garbage
//!      item with a timestamp ≤ c is pending anywhere (not yet durably zero):
//!      every older version of the deleted key is gone first (hazard 2,
//!      resurrection). Each worker publishes `gc_low[w]`, at most the smallest
//!      timestamp of its pending non-tombstone items: it lowers it at install,
//!      before the new version is unlocked, and recomputes it from its queues
//!      at maintenance. Only worker `w` stores `gc_low[w]`.
//! (S4) Before a slot is zeroed, the commit floor of the slot's owner is
//!      durably at or above the Tx-CTS of the version in it (see
//!      `catalog.rs`), so zeroing an LP word never lowers the owner's
//!      ts-commit. This is decided from the version's Tx-CTS, which the
//!      Met-Cache knows, not by reading the slot's LP bit (a cache miss per
//!      reclaimed slot). Raising a floor to c is sound once every transaction
//!      of the owner up to c is durable: true for the superseded version's
//!      own commit (the superseding commit is durable, S2, and depended on
//!      it, `txn/deps.rs`) and so for all the owner's earlier ones (per-worker
//!      LP order); a raise goes up to the owner's `durable_cts` at once, so
//!      one floor store serves many slots.
//! (S5) A page whose slots are all free is released to the pool.
//! (S6) A worker's Tx-CTS values increase (`ts.rs`), so its queue is sorted
//!      by Tx-CTS; readiness (S2) is monotone in it, so the pipeline takes
//!      items from the front only, and the non-tombstone items of
//!      `zero_pending`, `zero_now`, `to_zero`, `garbage` are ever newer in
//!      that order (`freeable` is durably zero: no longer pending).
//!      A tombstone that passed S2 waits for S3 in `tombstones`, out of the
//!      way: the older versions it waits for may be behind it (same Tx-CTS).
//! (S7) Spares. An item superseded by an update or insert (`spare_of`), at
//!      the step where it would be zeroed (S2 holds, S4's floor is durable),
//!      becomes its record's *spare* if the record's spare word
//!      (`table::Records::spare`) is 0: one compare-and-swap, no NVM store.
//!      The slot keeps its version, and stays live in its owner's region. The
//!      owner's next update of that record (under its lock) takes the spare
//!      instead of a free slot and writes it whole (`persist.rs`). Without
//!      S1's zero, a crash in that write can leave word 0 (the same key: a
//!      spare only ever holds versions of its record, and updates never set
//!      the deleted bit) with the spare's old word 1, or the old header with
//!      new row bytes: a version of the key *older* than the version that
//!      superseded the spare. That one was durable (S2) and stays until a
//!      newer version of the key is durable: the newest durable version of a
//!      key is reclaimed only when a newer one is durable (S2), except a
//!      tombstone, which waits (S3) for the spare, because a delete swaps
//!      the spare word to `SPARE_DEAD` before it unlocks and retires the old
//!      spare as a non-tombstone item with the tombstone's Tx-CTS. So
//!      recovery always finds a newer durable version of the key beside the
//!      spare, takes it and zeroes the spare as superseded (hazard 1 does not
//!      arise; hazard 2 is S3's). A `SPARE_DEAD` record never gets a spare
//!      again: items of its key's older incarnations may still be pending.
//!      At most one spare per record, and only for a version that lived
//!      fewer than `SPARE_WINDOW` commits (a hot key, `maintain.rs`): the
//!      heap holds at most one extra slot per hot record. A pool that runs
//!      out of pages stops new spares for good (`Shared::spares_off`), and
//!      each worker that finds it full zeroes and frees its own spares once
//!      (`sweep_own_spares`) before it gives up with `OutOfSpace`.

use std::collections::{HashMap, VecDeque};

use crate::heap;

/// A superseded slot (or a tombstone) waiting to be reclaimed by the worker
/// that holds it (the one whose commit superseded it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Garbage {
    /// Table whose heap holds the slot.
    pub table: u32,
    pub slot: u64,
    /// Timestamp of the version that superseded it (of the tombstone itself
    /// for a tombstone): a Tx-CTS of the holding worker.
    pub cts: u64,
    /// Tx-CTS of the version the slot holds (known from the Met-Cache, so
    /// reclamation never reads the slot to find out; S4).
    pub version_cts: u64,
    /// The slot is a tombstone: reclaimed only under S3.
    pub tombstone: bool,
    /// Record id whose spare the slot may become (S7): set when the version
    /// was superseded by an update or insert, never by a delete.
    pub spare_of: Option<u64>,
}

impl Garbage {
    /// Slot `slot` of `table`, holding a version of Tx-CTS `version_cts`,
    /// superseded by this worker's commit `cts`; `spare_of` names the record
    /// when that commit did not delete it (S7).
    pub fn superseded(
        table: u32,
        slot: u64,
        version_cts: u64,
        cts: u64,
        spare_of: Option<u64>,
    ) -> Garbage {
        Garbage { table, slot, cts, version_cts, tombstone: false, spare_of }
    }

    /// The tombstone this worker's commit `cts` wrote to `slot`.
    pub fn tombstone(table: u32, slot: u64, cts: u64) -> Garbage {
        Garbage { table, slot, cts, version_cts: cts, tombstone: true, spare_of: None }
    }

    /// The spare a delete of Tx-CTS `cts` took from its record (S7): an
    /// older version, pending like the one the delete superseded, so the
    /// tombstone waits for it (S3). Its owner's floor already covers it: it
    /// became a spare only after S4's floor was durable, and floors never
    /// go down, so `version_cts` 0 asks `cover_with_floor` for nothing.
    pub fn former_spare(table: u32, slot: u64, cts: u64) -> Garbage {
        Garbage { table, slot, cts, version_cts: 0, tombstone: false, spare_of: None }
    }
}

/// One worker's garbage pipeline (S1–S6). Only its worker changes it, except
/// during a Zen+ exclusive stage (`reclaim_all`) while that worker is idle
/// and, once the worker is gone, `Shared::adopt_orphans`.
#[derive(Debug, Default)]
pub struct WorkerGc {
    /// Items whose reclamation conditions (S2, S3) are not yet known to hold.
    pub garbage: VecDeque<Garbage>,
    /// Tombstones that passed S2 and wait for S3, set aside so that they do
    /// not stop the items behind them (which they may be waiting for).
    pub tombstones: VecDeque<Garbage>,
    /// Ready items (floors raised) to be zeroed after the next fence.
    pub to_zero: Vec<Garbage>,
    /// Items whose floors are durable (S4) and that did not become spares
    /// (S7): their zero stores go out just before the worker's next fence
    /// (`before_fence` in `txn/maintain.rs`), while its write-backs drain.
    pub zero_now: Vec<Garbage>,
    /// Items whose zero store waits for the next fence (S1).
    pub zero_pending: Vec<Garbage>,
    /// Durably zero (S1), not pending any more: back on their free lists
    /// just before the worker's next fence (`before_fence`).
    pub freeable: Vec<Garbage>,
}

impl WorkerGc {
    /// Whether nothing is pending at all.
    pub fn is_idle(&self) -> bool {
        self.garbage.is_empty()
            && self.tombstones.is_empty()
            && self.to_zero.is_empty()
            && self.zero_now.is_empty()
            && self.zero_pending.is_empty()
            && self.freeable.is_empty()
    }

    /// The next queued item that passed S2 (its Tx-CTS durable and below
    /// `watermark`), in queue order; tombstones that passed it on the way are
    /// set aside in `tombstones` to wait for S3.
    pub fn next_due(&mut self, durable: u64, watermark: u64) -> Option<Garbage> {
        while let Some(&g) = self.garbage.front() {
            if g.cts > durable || g.cts >= watermark {
                return None;
            }
            self.garbage.pop_front();
            if !g.tombstone {
                return Some(g);
            }
            self.tombstones.push_back(g);
        }
        None
    }

    /// Smallest timestamp of a pending non-tombstone item, `u64::MAX` if none
    /// (S3). By S6 it is the first non-tombstone item in pipeline order.
    pub fn pending_low(&self) -> u64 {
        self.zero_pending
            .iter()
            .chain(&self.zero_now)
            .chain(&self.to_zero)
            .chain(&self.garbage)
            .find(|g| !g.tombstone)
            .map_or(u64::MAX, |g| g.cts)
    }
}

#[derive(Debug, Default)]
struct PageSlots {
    offset: u64,
    bump: u64,
    free: Vec<u32>,
    live: u64,
}

/// One worker's heap region of one table. Its owner mutates it; others only
/// under its mutex, which is uncontended but for recovery, status, the
/// exclusive stage and a holder whose handoff to the owner found the queue
/// full (`txn/maintain.rs`, `free_reclaimed`).
#[derive(Debug)]
pub struct HeapRegion {
    pub slot_size: u64,
    pub slots_per_page: u64,
    page_size: u64,
    /// Keyed by pool page number; foldhash, not SipHash: one lookup per
    /// slot allocated or freed, on every writing commit.
    pages: HashMap<u64, PageSlots, foldhash::fast::RandomState>,
    /// Pages that have a free slot or room to bump.
    available: Vec<u64>,
}

impl HeapRegion {
    pub fn new(slot_size: u64, page_size: u64) -> HeapRegion {
        HeapRegion {
            slot_size,
            slots_per_page: heap::slots_per_page(page_size, slot_size),
            page_size,
            pages: HashMap::default(),
            available: Vec::new(),
        }
    }

    pub fn page_count(&self) -> u64 {
        self.pages.len() as u64
    }

    /// Add a freshly allocated (zeroed) page.
    pub fn add_page(&mut self, page: u64, offset: u64) {
        // The free list is sized once for the whole page: no reallocation as
        // its slots come back (they did, one doubling at a time, per commit).
        let free = Vec::with_capacity(self.slots_per_page as usize);
        self.pages.insert(page, PageSlots { offset, free, ..Default::default() });
        self.available.push(page);
    }

    /// Add a recovered page whose slot states recovery determined: `live` slot
    /// indices hold versions, every other slot is free (and durably zero).
    pub fn add_recovered_page(&mut self, page: u64, offset: u64, live: &[bool]) {
        let free: Vec<u32> =
            (0..self.slots_per_page as u32).rev().filter(|&i| !live[i as usize]).collect();
        let live_count = self.slots_per_page - free.len() as u64;
        let has_room = !free.is_empty();
        self.pages
            .insert(page, PageSlots { offset, bump: self.slots_per_page, free, live: live_count });
        if has_room {
            self.available.push(page);
        }
    }

    /// A free slot's offset, or `None` when the region needs a new page.
    pub fn allocate(&mut self) -> Option<u64> {
        while let Some(&page) = self.available.last() {
            let p = self.pages.get_mut(&page).expect("available pages are known");
            let index = if let Some(i) = p.free.pop() {
                u64::from(i)
            } else if p.bump < self.slots_per_page {
                p.bump += 1;
                p.bump - 1
            } else {
                self.available.pop();
                continue;
            };
            p.live += 1;
            return Some(heap::slot_offset(p.offset, self.slot_size, index));
        }
        None
    }

    /// Return a slot to the free list (its word 1 is durably zero, or it was
    /// never written). Returns a page that became empty and may be released.
    pub fn free(&mut self, slot: u64) -> Option<u64> {
        let page = slot / self.page_size;
        // One lookup of the page (it was two: locate, then get_mut).
        let (slot_size, slots_per_page) = (self.slot_size, self.slots_per_page);
        let p = self.pages.get_mut(&page).expect("slot of a known page");
        let index = ((slot - p.offset - heap::PAGE_HEADER_BYTES) / slot_size) as u32;
        p.free.push(index);
        p.live -= 1;
        if p.free.len() == 1 && p.bump >= slots_per_page {
            self.available.push(page);
        }
        (p.live == 0 && self.pages.len() > 1).then_some(page)
    }

    /// Forget a page that is being released to the pool.
    pub fn remove_page(&mut self, page: u64) {
        self.pages.remove(&page);
        self.available.retain(|&p| p != page);
    }

    /// Live (not free) slots in the region.
    pub fn live_slots(&self) -> u64 {
        self.pages.values().map(|p| p.live).sum()
    }

    /// Every free slot offset (for invariant checks).
    pub fn free_slots(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for p in self.pages.values() {
            for &i in &p.free {
                out.push(heap::slot_offset(p.offset, self.slot_size, u64::from(i)));
            }
            for i in p.bump..self.slots_per_page {
                out.push(heap::slot_offset(p.offset, self.slot_size, i));
            }
        }
        out
    }

    pub fn pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.pages.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_low_is_the_oldest_non_tombstone_item_in_pipeline_order() {
        let item = |cts, tombstone| Garbage {
            table: 0,
            slot: 64,
            cts,
            version_cts: 1,
            tombstone,
            spare_of: None,
        };
        let mut gc = WorkerGc::default();
        assert!(gc.is_idle());
        assert_eq!(gc.pending_low(), u64::MAX);
        // S6: zero_pending < to_zero < garbage in Tx-CTS; tombstones do not count.
        gc.zero_pending.push(item(10, true));
        gc.to_zero.push(item(20, false));
        gc.tombstones.push_back(item(30, true));
        gc.garbage.push_back(item(30, false));
        assert_eq!(gc.pending_low(), 20);
        gc.to_zero.clear();
        assert_eq!(gc.pending_low(), 30);
        gc.garbage.clear();
        assert_eq!(gc.pending_low(), u64::MAX, "tombstones do not count");
        assert!(!gc.is_idle());
    }

    #[test]
    fn slots_are_allocated_freed_and_empty_pages_reported() {
        let page_size = 64 << 10;
        let mut r = HeapRegion::new(heap::slot_size(1000), page_size);
        r.add_page(1, page_size);
        r.add_page(2, 2 * page_size);
        let a = r.allocate().unwrap();
        let b = r.allocate().unwrap();
        assert_ne!(a, b);
        assert_eq!(r.live_slots(), 2);
        assert_eq!(r.free(a), None);
        assert_eq!(r.free(b), Some(2));
        r.remove_page(2);
        assert_eq!(r.page_count(), 1);
        let mut n = 0;
        while r.allocate().is_some() {
            n += 1;
        }
        assert_eq!(n, r.slots_per_page);
    }
}
