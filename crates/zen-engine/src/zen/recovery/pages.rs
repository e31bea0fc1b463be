//! The heap pages recovery walks, their per-slot bitmaps, and how they are
//! dealt to recovery threads.
//!
//! Every heap page gets two bitmaps, one bit per slot:
//!
//! - `occupied`: word 1 was non-zero when the scan read it. Only the thread
//!   whose share holds the page writes it (during the scan) and reads it
//!   (when it zeroes the losers).
//! - `live`: the slot is the version some record's location word points at
//!   now. Any thread sets or clears it, with atomic bit operations, when it
//!   moves a location word (`install.rs`, (W2)); once every offer is done it
//!   marks exactly the winners.
//!
//! After the last offer, a page's losers are `occupied & !live` (uncommitted
//! and superseded versions) and its free slots are `!live`. Two bits per
//! slot is recovery's only per-slot memory: 504 bytes per 2 MiB page of
//! 1 KiB tuples, against 48 bytes per non-empty slot for the list of every
//! slot the scan used to keep.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use zen_pmem::{PageOwner, PmemBackend, Pool};

use crate::heap;

/// One heap page of the pool.
pub(super) struct HeapPage {
    pub page: u64,
    pub owner: PageOwner,
    /// Pool offset of the page's first byte.
    pub base: u64,
    pub slot_size: u64,
    pub slots: u64,
    occupied: Box<[AtomicU64]>,
    live: Box<[AtomicU64]>,
}

impl HeapPage {
    /// Pool offset of slot `index`.
    pub fn slot(&self, index: u64) -> u64 {
        heap::slot_offset(self.base, self.slot_size, index)
    }

    /// Store the occupied bits of slots `64 · word ..` (the scanning thread
    /// builds each word locally: it is the only writer).
    pub fn store_occupied(&self, word: u64, bits: u64) {
        self.occupied[word as usize].store(bits, Ordering::Relaxed);
    }

    fn set_live(&self, index: u64) {
        self.live[(index / 64) as usize].fetch_or(1 << (index % 64), Ordering::AcqRel);
    }

    fn clear_live(&self, index: u64) {
        self.live[(index / 64) as usize].fetch_and(!(1 << (index % 64)), Ordering::AcqRel);
    }

    pub fn is_live(&self, index: u64) -> bool {
        self.live[(index / 64) as usize].load(Ordering::Acquire) & (1 << (index % 64)) != 0
    }

    /// Slot indices that were occupied and are not live (the losers, once
    /// every offer is done).
    pub fn losers(&self) -> impl Iterator<Item = u64> + '_ {
        self.bits(|w| {
            self.occupied[w].load(Ordering::Relaxed) & !self.live[w].load(Ordering::Acquire)
        })
    }

    /// Slot indices that are live (the winners, once every offer is done).
    pub fn winners(&self) -> impl Iterator<Item = u64> + '_ {
        self.bits(|w| self.live[w].load(Ordering::Acquire))
    }

    pub fn live_count(&self) -> u64 {
        self.live.iter().map(|w| u64::from(w.load(Ordering::Acquire).count_ones())).sum()
    }

    /// One flag per slot: live or not (what `HeapRegion::add_recovered_page` takes).
    pub fn live_flags(&self, out: &mut Vec<bool>) {
        out.clear();
        out.extend((0..self.slots).map(|i| self.is_live(i)));
    }

    fn bits(&self, word: impl Fn(usize) -> u64) -> impl Iterator<Item = u64> {
        let slots = self.slots;
        (0..self.live.len()).flat_map(move |w| {
            let mut bits = word(w);
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let i = bits.trailing_zeros();
                bits &= bits - 1;
                Some(w as u64 * 64 + u64::from(i))
            })
            .filter(move |&i| i < slots)
        })
    }
}

/// Every heap page, and the way from a slot offset back to its page.
pub(super) struct HeapPages {
    pub pages: Vec<HeapPage>,
    /// Pool page number → index in `pages` (`u32::MAX`: not a heap page).
    by_number: Vec<u32>,
    page_size: u64,
}

impl HeapPages {
    /// `owned` are the heap pages in page order; `slot_sizes` per table.
    pub fn new<B: PmemBackend>(
        pool: &Pool<B>,
        owned: &[(u64, PageOwner)],
        slot_sizes: &[u64],
    ) -> HeapPages {
        let mut by_number = vec![u32::MAX; pool.page_count() as usize];
        let mut sorted = owned.to_vec();
        // Worker, then page number: a share is mostly one worker's pages in
        // the order they were allocated, which keeps the pending lists short.
        sorted.sort_by_key(|(page, o)| (o.worker, *page));
        let pages = sorted
            .iter()
            .enumerate()
            .map(|(i, &(page, owner))| {
                by_number[page as usize] = i as u32;
                let slot_size = slot_sizes[owner.table as usize];
                let slots = heap::slots_per_page(pool.page_size(), slot_size);
                let words = slots.div_ceil(64) as usize;
                HeapPage {
                    page,
                    owner,
                    base: pool.page_offset(page),
                    slot_size,
                    slots,
                    occupied: (0..words).map(|_| AtomicU64::new(0)).collect(),
                    live: (0..words).map(|_| AtomicU64::new(0)).collect(),
                }
            })
            .collect();
        HeapPages { pages, by_number, page_size: pool.page_size() }
    }

    /// The page holding pool offset `slot`, and the slot's index in it.
    /// Recovery offers only slots it found on heap pages.
    pub fn locate(&self, slot: u64) -> (&HeapPage, u64) {
        let page = &self.pages[self.by_number[(slot / self.page_size) as usize] as usize];
        (page, (slot - page.base - heap::PAGE_HEADER_BYTES) / page.slot_size)
    }

    pub fn set_live(&self, slot: u64) {
        let (page, index) = self.locate(slot);
        page.set_live(index);
    }

    pub fn clear_live(&self, slot: u64) {
        let (page, index) = self.locate(slot);
        page.clear_live(index);
    }

    /// DRAM the bitmaps and the page map take.
    pub fn bitmap_bytes(&self) -> u64 {
        let words: usize = self.pages.iter().map(|p| p.live.len() * 2).sum();
        (words * 8 + self.by_number.len() * 4 + self.pages.len() * size_of::<HeapPage>()) as u64
    }
}

/// Deal `pages` pages to `threads` threads: contiguous runs of (almost)
/// equal length, so every thread scans the same number of bytes.
pub(super) fn shares(pages: usize, threads: usize) -> Vec<Range<usize>> {
    (0..threads).map(|i| (i * pages / threads)..((i + 1) * pages / threads)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_page_once_and_differ_by_at_most_one() {
        for pages in [0, 1, 2, 7, 64, 2049] {
            for threads in 1..=5 {
                let s = shares(pages, threads);
                assert_eq!(s.len(), threads);
                assert_eq!(s.first().unwrap().start, 0);
                assert_eq!(s.last().unwrap().end, pages);
                assert!(s.windows(2).all(|w| w[0].end == w[1].start));
                let lens: Vec<usize> = s.iter().map(|r| r.len()).collect();
                let (lo, hi) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
                assert!(hi - lo <= 1, "{pages} pages on {threads} threads: {lens:?}");
            }
        }
    }
}
