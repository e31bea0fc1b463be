//! Record ids, handed out in per-thread blocks.
//!
//! Every engine's table gives a new key a record id (`PrimaryIndex` maps the
//! key to it). Taking each id from the table's one counter is a shared write
//! per insert: TPC-C's New-Order inserts about 12 rows, 10 of them into
//! `order_line`, so at 16–64 cores every worker would write the same line
//! for every row it inserts, and recovery's region threads did the same for
//! every tuple they offered. Instead a thread reserves [`RID_BLOCK`] ids of a
//! table at a time (one `fetch_add`) and takes the next id of its block
//! without a shared write; one worker's new records also fill whole lines of
//! the record table instead of interleaving with the other workers'.
//!
//! Ids are unique, not dense: a block a thread gives up (it keeps blocks of
//! [`BLOCKS_PER_THREAD`] tables, the least recently added one goes) or never
//! finishes leaves its unused ids unused, so [`RecordIds::reserved`] bounds
//! the ids in use; it does not count them. Record ids are DRAM-only in every
//! engine (rebuilt by recovery), so nothing persistent depends on them.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Record ids a thread reserves from a table at a time.
pub const RID_BLOCK: u64 = 64;
/// Most tables a thread keeps a block of.
pub const BLOCKS_PER_THREAD: usize = 16;

/// Distinguishes tables (of every engine in the process) in a thread's blocks.
static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// A thread's current block of one table's record ids: `next..end`.
struct Block {
    instance: u64,
    next: u64,
    end: u64,
}

thread_local! {
    static BLOCKS: RefCell<Vec<Block>> = const { RefCell::new(Vec::new()) };
}

/// The record-id source of one table: ids `0..max`, in per-thread blocks.
pub struct RecordIds {
    /// Ids reserved so far (whole blocks).
    next: AtomicU64,
    /// This table's key in the threads' block lists (unique per process).
    instance: u64,
    max: u64,
}

impl RecordIds {
    /// Ids `0..max` of a new table.
    pub fn new(max: u64) -> RecordIds {
        RecordIds {
            next: AtomicU64::new(0),
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            max,
        }
    }

    /// A record id no one else was given, from this thread's block of the
    /// table; `None` when every id below `max` is reserved.
    #[inline]
    pub fn allocate(&self) -> Option<u64> {
        BLOCKS.with_borrow_mut(|blocks| {
            let at = match blocks.iter().position(|b| b.instance == self.instance) {
                Some(at) => at,
                None => {
                    if blocks.len() == BLOCKS_PER_THREAD {
                        blocks.remove(0);
                    }
                    blocks.push(Block { instance: self.instance, next: 0, end: 0 });
                    blocks.len() - 1
                }
            };
            let b = &mut blocks[at];
            if b.next == b.end {
                let start = self.next.fetch_add(RID_BLOCK, Ordering::AcqRel);
                if start >= self.max {
                    return None;
                }
                (b.next, b.end) = (start, (start + RID_BLOCK).min(self.max));
            }
            b.next += 1;
            Some(b.next - 1)
        })
    }

    /// Ids reserved so far: every id given out is below it.
    pub fn reserved(&self) -> u64 {
        self.next.load(Ordering::Acquire).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_across_threads_and_tables_and_stop_at_max() {
        let a = RecordIds::new(10_000);
        let b = RecordIds::new(10_000);
        let ids: Vec<Vec<(u8, u64)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let (a, b) = (&a, &b);
                    s.spawn(move || {
                        let mut out = Vec::new();
                        for i in 0..1000 {
                            let (t, ids) = if i % 3 == 0 { (1, b) } else { (0, a) };
                            out.push((t, ids.allocate().unwrap()));
                        }
                        out
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let all: Vec<(u8, u64)> = ids.into_iter().flatten().collect();
        let unique: HashSet<_> = all.iter().copied().collect();
        assert_eq!(unique.len(), all.len(), "no id is given twice");
        assert!(all.iter().all(|&(t, id)| id < [&a, &b][t as usize].reserved()));
        // One thread's ids of one table come from its blocks, in order.
        let small = RecordIds::new(RID_BLOCK + 3);
        let got: Vec<u64> = std::iter::from_fn(|| small.allocate()).collect();
        assert_eq!(got, (0..RID_BLOCK + 3).collect::<Vec<_>>());
        assert_eq!(small.allocate(), None, "every id below max is reserved");
        assert_eq!(small.reserved(), RID_BLOCK + 3);
    }

    #[test]
    fn a_thread_gives_up_its_oldest_block_past_the_limit() {
        let tables: Vec<RecordIds> =
            (0..=BLOCKS_PER_THREAD).map(|_| RecordIds::new(1 << 20)).collect();
        std::thread::scope(|s| {
            s.spawn(|| {
                for t in &tables {
                    assert_eq!(t.allocate(), Some(0));
                }
                // Table 0's block was given up: its next id starts a new block.
                assert_eq!(tables[0].allocate(), Some(RID_BLOCK));
                assert_eq!(tables[BLOCKS_PER_THREAD].allocate(), Some(1));
            });
        });
    }
}
