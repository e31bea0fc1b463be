//! Lightweight NVM space management for wbl, as the paper applied Zen's to
//! it (Zen §3.4): per-(table, worker) regions of heap pages, DRAM free lists,
//! and no persistent allocation metadata beyond the pool's page table.
//!
//! A slot's life:
//! ```text
//!  free ──allocate──▶ new version (persisted at commit) ──superseded by cts c──▶ garbage
//!   ▲                                                     (queue of the superseding worker)
//!   │ that worker's next fence                                  │ c ≤ durable cp
//!   └──────────── zero_pending ◀── begin-cts word := 0, flush ◀─┘
//! ```
//! (S1) A slot is reused only after its begin-cts word is durably zero.
//! (S2) A superseded slot is zeroed only once the version that superseded it
//!      is covered by a durable write-behind record (c ≤ cp): until then a
//!      crash would undo that version and the old one must survive. Readers
//!      need no further protection: a reader of a reused slot sees the
//!      record's TID change and retries (OCC).
//! (S3) A tombstone is zeroed only when it is the record's only version left
//!      in NVM (`versions == 1`, decremented when a zeroing is durable), so a
//!      crash can never resurrect an older version of a deleted key.
//! Pages are never released back to the pool (a region only grows).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use zen_pmem::PageOwner;

use super::layout;
use crate::sched::Mutex;

/// A slot waiting to be reclaimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Garbage {
    pub table: u32,
    pub rid: u64,
    pub slot: u64,
    /// The superseding version's cts (the tombstone's own for a tombstone).
    pub cts: u64,
    pub tombstone: bool,
}

/// One worker's region of one table.
#[derive(Debug)]
pub struct Region {
    pub slot_size: u64,
    slots_per_page: u64,
    pub pages: Vec<u64>,
    free: Vec<u64>,
    /// Next never-used slot of the newest page, and that page's end.
    bump: u64,
    bump_end: u64,
}

impl Region {
    pub fn new(slot_size: u64, page_size: u64) -> Region {
        Region {
            slot_size,
            slots_per_page: layout::slots_per_page(page_size, slot_size),
            pages: Vec::new(),
            free: Vec::new(),
            bump: 0,
            bump_end: 0,
        }
    }

    /// A free slot, if the region has one without a new page.
    pub fn allocate(&mut self) -> Option<u64> {
        if let Some(slot) = self.free.pop() {
            return Some(slot);
        }
        if self.bump + self.slot_size <= self.bump_end {
            let slot = self.bump;
            self.bump += self.slot_size;
            return Some(slot);
        }
        None
    }

    /// Adopt a fresh (zeroed, headed) page at `offset`.
    pub fn add_page(&mut self, page: u64, offset: u64) {
        self.pages.push(page);
        self.bump = offset + layout::PAGE_HEADER;
        self.bump_end = self.bump + self.slots_per_page * self.slot_size;
    }

    /// Adopt a recovered page: every slot not in `live` is free (and zero).
    pub fn add_recovered_page(&mut self, page: u64, offset: u64, live: &[bool]) {
        self.pages.push(page);
        for i in 0..self.slots_per_page {
            if !live.get(i as usize).copied().unwrap_or(false) {
                self.free.push(offset + layout::PAGE_HEADER + i * self.slot_size);
            }
        }
    }

    /// Give back a slot whose begin-cts word is durably zero (S1).
    pub fn free(&mut self, slot: u64) {
        self.free.push(slot);
    }

    /// Slots free now (for checks).
    pub fn free_slots(&self) -> impl Iterator<Item = u64> + '_ {
        self.free.iter().copied().chain((self.bump..self.bump_end).step_by(self.slot_size as usize))
    }

    pub fn slots_per_page(&self) -> u64 {
        self.slots_per_page
    }
}

/// Adopt the recovered heap `pages` of an engine into its regions, with the
/// slots in `live` ((table, slot offset) pairs) taken and every other slot
/// free. Shared by wbl and falcon, whose heap pages have the same header and
/// slot arithmetic (`layout.rs` of each).
pub fn rebuild_regions<'a>(
    page_size: u64,
    page_offset: impl Fn(u64) -> u64,
    pages: &[(u64, PageOwner)],
    live: impl IntoIterator<Item = (u32, u64)>,
    slot_size: impl Fn(u32) -> u64,
    region: impl Fn(u32, usize) -> &'a Mutex<Region>,
) {
    let mut taken: HashMap<u64, Vec<bool>> = HashMap::new();
    for (table, slot) in live {
        let slot_size = slot_size(table);
        let page = slot / page_size;
        let per_page = layout::slots_per_page(page_size, slot_size) as usize;
        let index = (slot - page * page_size - layout::PAGE_HEADER) / slot_size;
        taken.entry(page).or_insert_with(|| vec![false; per_page])[index as usize] = true;
    }
    for &(page, owner) in pages {
        let bits = taken.remove(&page).unwrap_or_default();
        region(owner.table, usize::from(owner.worker)).lock().add_recovered_page(
            page,
            page_offset(page),
            &bits,
        );
    }
}

/// Versions of a record still in NVM, kept in the high half of `aux`.
pub fn versions(aux: &AtomicU64) -> u64 {
    aux.load(Ordering::Acquire) >> 32
}

pub fn add_version(aux: &AtomicU64) {
    aux.fetch_add(1 << 32, Ordering::AcqRel);
}

pub fn remove_version(aux: &AtomicU64) {
    let before = aux.fetch_sub(1 << 32, Ordering::AcqRel);
    debug_assert!(before >> 32 > 0, "version count underflow");
}
