//! Phase 1 (scan, Alg. 2 lines 9–18) and phase 2 (settle, lines 19–24),
//! one share of the heap pages per thread.
//!
//! SCAN. Each page's header is checked, then every slot's 16-byte header is
//! read (the rows are not: nothing but secondary indexes needs them), all of
//! a page's back to back; then the page's keys are looked up in the primary
//! index back to back (a warm-up: the lookups' cache misses overlap, and the
//! offers find the lines cached). A non-empty slot of worker `w` is
//!
//! - on a fresh page (torn header): uncommitted, counted, never offered;
//! - at or below `bound[w]`: committed, offered to the index at once;
//! - above it: *uncertain*, pushed on the pending list of `w`.
//!
//! `bound[w]` starts at the worker's commit floor and rises with every LP
//! Tx-CTS of `w` that any thread finds (each thread keeps a local copy and
//! publishes raises with `fetch_max`). Every Tx-CTS of `w` at or below one
//! of `w`'s LP timestamps (or its floor) is committed (§5 of
//! `commit-and-recovery.md`), so any value the bound takes on the way is a
//! sound test, not only its final value.
//!
//! PENDING LIST. Alg. 2 revisits its pending list once, after the scan. We
//! also settle it early: whenever a bound rises (an LP in this share, or a
//! raise by another thread seen at the end of a page), the entries at or
//! below it are offered. The list is a min-heap by Tx-CTS per worker, so
//! what is left at any time is only the versions newer than every LP seen
//! so far: in a region written in timestamp order, the one transaction
//! whose LP the scan has not reached yet (Theorem 3.1 bounds the revisits
//! by O(ln n) for a random order). `pending_peak` in the report says how
//! long it got.
//!
//! SETTLE. Once every share is scanned, `bound[w]` is ts-commit[w]; what is
//! still pending is either committed (offered now) or uncommitted.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::atomic::Ordering;

use zen_pmem::{Persister, PmemBackend};

use super::Context;
use super::install::{Offer, offer};
use super::pages::HeapPage;
use crate::error::{Error, Result};
use crate::heap::{self, SlotHeader};

/// What one thread keeps about its share between phases.
pub(super) struct Share {
    /// Recovery thread index (its persist slot is `Context::thread_slot`).
    pub thread: usize,
    /// Indices into `HeapPages::pages`.
    pub pages: Range<usize>,
    /// Pages of the share whose header is torn: `clean` rewrites them.
    pub fresh: Vec<usize>,
    /// Per worker, uncertain versions (min-heap by Tx-CTS).
    pending: Vec<BinaryHeap<Reverse<Offer>>>,
    pending_now: u64,
    /// Tombstones that were their key's newest version when offered.
    pub tombstones: Vec<Offer>,
    /// The non-empty slot headers of the page being scanned.
    headers: Vec<(u64, SlotHeader)>,
    pub stats: ShareStats,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct ShareStats {
    pub slots: u64,
    /// Non-empty slots.
    pub versions: u64,
    pub uncommitted: u64,
    pub pending_peak: u64,
    /// Versions offered from the pending list (early or at settle).
    pub settled: u64,
    pub max_cts: u64,
}

impl Share {
    pub fn new(thread: usize, pages: Range<usize>, regions: usize) -> Share {
        Share {
            thread,
            pages,
            fresh: Vec::new(),
            pending: (0..regions).map(|_| BinaryHeap::new()).collect(),
            pending_now: 0,
            tombstones: Vec::new(),
            headers: Vec::new(),
            stats: ShareStats::default(),
        }
    }

    /// DRAM the share's lists hold at their largest (peak pending entries,
    /// the tombstone list, the fresh-page list).
    pub fn scratch_bytes(&self) -> u64 {
        let entry = size_of::<Reverse<Offer>>() as u64;
        self.stats.pending_peak * entry
            + (self.tombstones.capacity() * size_of::<Offer>()) as u64
            + (self.fresh.capacity() * size_of::<usize>()) as u64
            + (self.headers.capacity() * size_of::<(u64, SlotHeader)>()) as u64
            + (self.pending.len() * size_of::<BinaryHeap<Reverse<Offer>>>()) as u64
    }

    fn push_pending(&mut self, worker: usize, o: Offer) {
        self.pending[worker].push(Reverse(o));
        self.pending_now += 1;
        self.stats.pending_peak = self.stats.pending_peak.max(self.pending_now);
    }

    /// Offer a committed version; a tombstone that wins goes on the list.
    fn offer<B: PmemBackend>(&mut self, ctx: &Context<'_, B>, o: Offer) -> Result<()> {
        if offer(ctx, o)? && o.deleted {
            self.tombstones.push(o);
        }
        Ok(())
    }

    /// Offer every pending version of `worker` at or below `bound`.
    fn settle_up_to<B: PmemBackend>(
        &mut self,
        ctx: &Context<'_, B>,
        worker: usize,
        bound: u64,
    ) -> Result<()> {
        while let Some(&Reverse(o)) = self.pending[worker].peek() {
            if o.cts > bound {
                break;
            }
            self.pending[worker].pop();
            self.pending_now -= 1;
            self.stats.settled += 1;
            self.offer(ctx, o)?;
        }
        Ok(())
    }
}

/// Phase 1 for one share.
pub(super) fn scan<B: PmemBackend>(ctx: &Context<'_, B>, share: &mut Share) -> Result<()> {
    let p = ctx.persister(share.thread);
    for index in share.pages.clone() {
        scan_page(ctx, share, &p, index)?;
    }
    Ok(())
}

fn scan_page<B: PmemBackend>(
    ctx: &Context<'_, B>,
    share: &mut Share,
    p: &Persister<'_, B>,
    index: usize,
) -> Result<()> {
    let page = &ctx.pages.pages[index];
    let worker = usize::from(page.owner.worker);
    let mut header = [0u8; 24];
    p.read(page.base, &mut header);
    let expected = heap::page_header(page.owner.table, page.owner.worker, page.slot_size);
    // A header is flushed before the fence of the first commit that uses
    // its page, so a torn header (every word zero or right) means no commit
    // ever reached the page: its slots are all uncommitted. A page
    // allocated just before a crash may have no header at all.
    let fresh = header != expected;
    if fresh {
        let torn = header
            .chunks_exact(8)
            .zip(expected.chunks_exact(8))
            .all(|(got, want)| got == want || got.iter().all(|&b| b == 0));
        if !torn {
            return Err(Error::Corrupt(format!(
                "page {}: header disagrees with catalog/page table",
                page.page
            )));
        }
        share.fresh.push(index);
    }
    read_headers(page, p, &mut share.headers);
    share.stats.slots += page.slots;
    if !fresh {
        // Look every key up once before the offers, back to back: the
        // lookups' cache misses overlap here, and the offers then find the
        // index's lines in the cache (a hash index costs one miss per key).
        let table = &ctx.tables[page.owner.table as usize];
        for &(_, h) in &share.headers {
            std::hint::black_box(table.index.get(h.key));
        }
    }
    let mut bound = ctx.bound[worker].load(Ordering::Acquire);
    for i in 0..share.headers.len() {
        let (slot, h) = share.headers[i];
        share.stats.versions += 1;
        if h.cts >= ctx.cts_limit {
            return Err(Error::Corrupt(format!(
                "slot {slot}: timestamp {:#x} beyond the clock's range",
                h.cts
            )));
        }
        share.stats.max_cts = share.stats.max_cts.max(h.cts);
        if h.lp && h.cts > bound {
            bound = h.cts;
            ctx.bound[worker].fetch_max(bound, Ordering::AcqRel);
            share.settle_up_to(ctx, worker, bound)?;
        }
        if fresh {
            share.stats.uncommitted += 1;
            continue;
        }
        let o = Offer { cts: h.cts, table: page.owner.table, key: h.key, slot, deleted: h.deleted };
        if h.cts <= bound {
            share.offer(ctx, o)?;
        } else {
            share.push_pending(worker, o);
        }
    }
    // Another thread scanning this worker may have raised its bound.
    let published = ctx.bound[worker].load(Ordering::Acquire);
    if published > bound {
        share.settle_up_to(ctx, worker, published)?;
    }
    Ok(())
}

/// Read every slot header of `page` (one 16-byte read each), keep the
/// non-empty ones in `out` and record them in the page's `occupied` bits.
fn read_headers<B: PmemBackend>(
    page: &HeapPage,
    p: &Persister<'_, B>,
    out: &mut Vec<(u64, SlotHeader)>,
) {
    out.clear();
    let mut words = [0u8; 16];
    let mut occupied = 0u64;
    for i in 0..page.slots {
        if i % 64 == 0 && i > 0 {
            page.store_occupied(i / 64 - 1, std::mem::take(&mut occupied));
        }
        let slot = page.slot(i);
        p.read(slot, &mut words);
        let (w0, w1) = words.split_at(8);
        let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
        if let Some(h) = SlotHeader::decode(word(w0), word(w1)) {
            occupied |= 1 << (i % 64);
            out.push((slot, h));
        }
    }
    if page.slots > 0 {
        page.store_occupied((page.slots - 1) / 64, occupied);
    }
}

/// Phase 2 for one share: `ts_commit` is final (every share is scanned).
pub(super) fn settle<B: PmemBackend>(
    ctx: &Context<'_, B>,
    share: &mut Share,
    ts_commit: &[u64],
) -> Result<()> {
    for (worker, &ts) in ts_commit.iter().enumerate() {
        share.settle_up_to(ctx, worker, ts)?;
        // What is left is newer than the worker's last committed
        // transaction: its transaction crashed while persisting.
        let left = share.pending[worker].len() as u64;
        share.stats.uncommitted += left;
        share.pending_now -= left;
        share.pending[worker] = BinaryHeap::new();
    }
    Ok(())
}
