//! Lightweight NVM space management (Zen §3.4): per-(table, worker) heap
//! regions with DRAM free lists, garbage queues and per-page live counters.
//!
//! The only persistent work is page allocation (done by the pool). A slot's
//! life:
//!
//! ```text
//!  free ──allocate──▶ written by a commit ──superseded──▶ garbage (inbox of the slot's owner)
//!   ▲                                                       │ newer version durable and older
//!   │                                                       │ than the global minimum Tx-CTS
//!   │ next fence                                            ▼
//!  zero_pending ◀──word 1 := 0, flush── to_zero ◀── (LP slot: raise commit floor, flush)
//! ```
//!
//! (S1) A slot is reused only after its word 1 was zeroed *durably* (hazard 1).
//! (S2) A slot is zeroed only when the version that superseded it is durable
//!      and no running transaction can read it (hazard 4): `cts <= durable[w]`
//!      and `cts < global minimum Tx-CTS`.
//! (S3) A tombstone of Tx-CTS c is zeroed only when no garbage item of its
//!      table with a timestamp ≤ c is pending anywhere (not yet durably zero):
//!      every older version of the deleted key is gone first (hazard 2,
//!      resurrection). Each (table, worker) publishes `gc_low`, the smallest
//!      timestamp of its pending non-tombstone items; pushers lower it under
//!      the inbox lock, the owner recomputes it under the same lock.
//! (S4) Zeroing a slot whose word 1 carries the LP bit first raises the
//!      worker's commit floor durably (see `catalog.rs`).
//! (S5) A page whose slots are all free is released to the pool.

use std::collections::{HashMap, VecDeque};

use crate::heap;

/// A superseded slot (or a tombstone) waiting to be reclaimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Garbage {
    pub slot: u64,
    /// Timestamp of the version that superseded it (of the tombstone itself
    /// for a tombstone).
    pub cts: u64,
    /// Worker that wrote that version (its durability gates reclamation).
    pub writer: usize,
    /// The slot is a tombstone: reclaimed only under S3.
    pub tombstone: bool,
}

#[derive(Debug, Default)]
struct PageSlots {
    offset: u64,
    bump: u64,
    free: Vec<u32>,
    live: u64,
}

/// One worker's heap region of one table. Only its owner mutates it.
#[derive(Debug)]
pub struct HeapRegion {
    pub slot_size: u64,
    pub slots_per_page: u64,
    page_size: u64,
    pages: HashMap<u64, PageSlots>,
    /// Pages that have a free slot or room to bump.
    available: Vec<u64>,
    pub garbage: VecDeque<Garbage>,
    pub to_zero: Vec<Garbage>,
    pub zero_pending: Vec<Garbage>,
}

impl HeapRegion {
    pub fn new(slot_size: u64, page_size: u64) -> HeapRegion {
        HeapRegion {
            slot_size,
            slots_per_page: heap::slots_per_page(page_size, slot_size),
            page_size,
            pages: HashMap::new(),
            available: Vec::new(),
            garbage: VecDeque::new(),
            to_zero: Vec::new(),
            zero_pending: Vec::new(),
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

    fn locate(&self, slot: u64) -> (u64, u32) {
        let page = slot / self.page_size;
        let p = &self.pages[&page];
        let index = (slot - p.offset - heap::PAGE_HEADER_BYTES) / self.slot_size;
        (page, index as u32)
    }

    /// Return a slot to the free list (its word 1 is durably zero, or it was
    /// never written). Returns a page that became empty and may be released.
    pub fn free(&mut self, slot: u64) -> Option<u64> {
        let (page, index) = self.locate(slot);
        let p = self.pages.get_mut(&page).expect("slot of a known page");
        p.free.push(index);
        p.live -= 1;
        if p.free.len() == 1 && p.bump >= self.slots_per_page {
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

    /// Smallest timestamp of a pending non-tombstone item (S3), `u64::MAX` if none.
    pub fn pending_low(&self) -> u64 {
        self.garbage
            .iter()
            .chain(&self.to_zero)
            .chain(&self.zero_pending)
            .filter(|g| !g.tombstone)
            .map(|g| g.cts)
            .min()
            .unwrap_or(u64::MAX)
    }

    pub fn pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.pages.keys().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
