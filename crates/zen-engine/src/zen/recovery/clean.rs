//! Phases 3–5: the only writes recovery makes to the heap, in three fence
//! epochs, then the DRAM rebuild of each share.
//!
//! 3. **Floors** (the calling thread, slot 0): every `floor[w]` below
//!    ts-commit[w] is raised to it, flushed, one **fence**. Before any slot
//!    is zeroed, so zeroing a slot that carries an LP bit cannot lower the
//!    next recovery's ts-commit.
//! 4. **Older losers** (every share, in parallel): the torn headers of
//!    fresh pages are rewritten, word 1 of every `occupied & !live` slot
//!    (uncommitted and superseded versions) is zeroed and flushed, and each
//!    thread **fences** its own stores.
//! 5. **Winning tombstones** (every share, once *every* share has fenced its
//!    phase 4): a tombstone that is still its key's version makes the key
//!    absent (location word emptied, key unlinked from the ordered set),
//!    then its word 1 is zeroed, flushed, **fenced** (R-5). Zeroing it in
//!    phase 4 could let it persist before an older version's zero, in
//!    another thread's share or in this one, and the deleted key would come
//!    back (hazard 2).
//!
//! Then each share rebuilds, in DRAM only, the secondary-index entries of
//! its winners and the free lists of its pages (every slot that is not
//! live is free: it is durably empty after phases 4 and 5), and records its
//! pages' owners in `page_worker`.

use std::sync::atomic::Ordering;

use zen_pmem::{PmemBackend, Pool};

use super::Context;
use super::scan::Share;
use crate::catalog;
use crate::heap::{self, SlotHeader};
use crate::zen::cache::LOC_EMPTY;

/// Phase 3: raise the floors to ts-commit, then fence.
pub(super) fn raise_floors<B: PmemBackend>(
    pool: &Pool<B>,
    floor_page: u64,
    ts_commit: &[u64],
    floors: &[u64],
    skip: bool,
) {
    let p = pool.persister(zen_pmem::SYSTEM_THREAD);
    for (w, (&c, &f)) in ts_commit.iter().zip(floors).enumerate() {
        if c > f && !skip {
            let at = catalog::floor_offset(pool, floor_page, w);
            p.write_u64_atomic(at, c);
            p.flush(at, 8);
        }
    }
    p.fence();
}

/// Phase 4 for one share; returns the slots zeroed.
pub(super) fn zero_older_losers<B: PmemBackend>(ctx: &Context<'_, B>, share: &Share) -> u64 {
    let p = ctx.persister(share.thread);
    for &index in &share.fresh {
        let page = &ctx.pages.pages[index];
        let header = heap::page_header(page.owner.table, page.owner.worker, page.slot_size);
        p.write(page.base, &header);
        p.flush(page.base, header.len() as u64);
    }
    let mut zeroed = 0;
    for page in &ctx.pages.pages[share.pages.clone()] {
        for i in page.losers() {
            let word1 = page.slot(i) + 8;
            p.write_u64_atomic(word1, 0);
            p.flush(word1, 8);
            zeroed += 1;
        }
    }
    if ctx.tombstones_first {
        // Injected bug: the winning tombstones in the same fence epoch.
        zeroed += zero_winning_tombstones_unfenced(ctx, share);
    }
    p.fence();
    zeroed
}

/// Phase 5 for one share; returns the tombstones zeroed.
pub(super) fn zero_winning_tombstones<B: PmemBackend>(ctx: &Context<'_, B>, share: &Share) -> u64 {
    let zeroed = zero_winning_tombstones_unfenced(ctx, share);
    if zeroed > 0 {
        ctx.persister(share.thread).fence();
    }
    zeroed
}

fn zero_winning_tombstones_unfenced<B: PmemBackend>(ctx: &Context<'_, B>, share: &Share) -> u64 {
    let p = ctx.persister(share.thread);
    let mut zeroed = 0;
    for o in &share.tombstones {
        let (page, i) = ctx.pages.locate(o.slot);
        if !page.is_live(i) {
            continue; // superseded by a newer version, or already done
        }
        let t = &ctx.tables[o.table as usize];
        if let Some(rid) = t.index.get(o.key) {
            t.records.loc(rid).store(LOC_EMPTY, Ordering::Release);
        }
        t.index.unlink(o.key);
        ctx.pages.clear_live(o.slot);
        p.write_u64_atomic(o.slot + 8, 0);
        p.flush(o.slot + 8, 8);
        zeroed += 1;
    }
    zeroed
}

/// The DRAM rebuild of one share (module docs); returns the winners and
/// the NVM bytes read (rows of tables with secondary indexes).
pub(super) fn rebuild<B: PmemBackend>(ctx: &Context<'_, B>, share: &Share) -> (u64, u64) {
    let p = ctx.persister(share.thread);
    let mut flags = Vec::new();
    let mut slot_bytes = Vec::new();
    let (mut winners, mut read) = (0, 0);
    for page in &ctx.pages.pages[share.pages.clone()] {
        let t = &ctx.tables[page.owner.table as usize];
        let worker = usize::from(page.owner.worker);
        ctx.shared.page_worker[page.page as usize].store(worker as u32, Ordering::Release);
        if !t.secondary.is_empty() {
            slot_bytes.resize(heap::SLOT_HEADER_BYTES as usize + t.row_bytes, 0);
            for i in page.winners() {
                p.read(page.slot(i), &mut slot_bytes);
                read += slot_bytes.len() as u64;
                let (header, row) = slot_bytes.split_at(heap::SLOT_HEADER_BYTES as usize);
                let word =
                    |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
                if let Some(h) = SlotHeader::decode(word(0), word(8)) {
                    t.add_secondary(row, h.key);
                }
            }
        }
        page.live_flags(&mut flags);
        winners += page.live_count();
        t.heaps[worker].lock().add_recovered_page(page.page, page.base, &flags);
    }
    (winners, read)
}
