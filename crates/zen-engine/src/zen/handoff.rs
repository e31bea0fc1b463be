//! A bounded, lock-free handoff queue: many workers push, one owner drains.
//!
//! WHY. Zen's space management is per worker (§3.4: "no thread contention"):
//! a worker reclaims the slots it superseded itself, but a slot lives in the
//! heap region of the worker that *wrote* it, and only that owner changes its
//! region's free lists. The last step of reclaiming another worker's slot,
//! "this durably zeroed slot is free again", is therefore handed to the owner
//! through this queue instead of taking the owner's region lock. The same
//! queue carries "this entry of yours was copied away" hints to a Met-Cache
//! region's owner (`cache.rs`, C2), so obsolete copies are retired at once
//! instead of waiting for the CLOCK hand.
//!
//! HOW. Vyukov's bounded array queue: every cell has a sequence number that
//! says whose turn it is. A producer claims position `pos` when the cell's
//! sequence equals `pos` (CAS on `tail`), writes the payload, then publishes
//! with `seq := pos + 1` (Release). The consumer takes position `pos` when the
//! sequence is `pos + 1`, reads the payload, and frees the cell for the next
//! lap with `seq := pos + capacity`. No allocation after `new`, no lock, no
//! waiting: a full queue makes `push` return `false` (the caller keeps the
//! item and retries later), an item still being written is simply not seen
//! by this drain.
//!
//! INVARIANTS
//! (H1) Every pushed item is popped at most once (the CAS on `head` decides).
//! (H2) A pushed item is popped eventually if the owner drains (no item is
//!      lost: a producer either publishes its cell or reports `false`).
//! (H3) Payload words are read only after the Acquire load of the sequence
//!      that the producer's Release store published.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

struct Cell {
    seq: AtomicU64,
    a: AtomicU64,
    b: AtomicU64,
}

/// A bounded multi-producer queue of `(u64, u64)` pairs.
pub struct Handoff {
    cells: Box<[Cell]>,
    mask: u64,
    tail: CachePadded<AtomicU64>,
    head: CachePadded<AtomicU64>,
}

impl Handoff {
    /// A queue of `capacity` (rounded up to a power of two, at least 2) items.
    pub fn new(capacity: usize) -> Handoff {
        let capacity = capacity.max(2).next_power_of_two();
        Handoff {
            cells: (0..capacity as u64)
                .map(|i| Cell {
                    seq: AtomicU64::new(i),
                    a: AtomicU64::new(0),
                    b: AtomicU64::new(0),
                })
                .collect(),
            mask: capacity as u64 - 1,
            tail: CachePadded::new(AtomicU64::new(0)),
            head: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Push `(a, b)`; `false` when the queue is full (nothing was pushed).
    pub fn push(&self, a: u64, b: u64) -> bool {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[(pos & self.mask) as usize];
            let seq = cell.seq.load(Ordering::Acquire);
            if seq == pos {
                match self.tail.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        cell.a.store(a, Ordering::Relaxed);
                        cell.b.store(b, Ordering::Relaxed);
                        cell.seq.store(pos + 1, Ordering::Release);
                        return true;
                    }
                    Err(now) => pos = now,
                }
            } else if seq < pos {
                return false;
            } else {
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Pop the oldest published item, if any.
    pub fn pop(&self) -> Option<(u64, u64)> {
        let mut pos = self.head.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[(pos & self.mask) as usize];
            let seq = cell.seq.load(Ordering::Acquire);
            if seq == pos + 1 {
                match self.head.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let item = (cell.a.load(Ordering::Relaxed), cell.b.load(Ordering::Relaxed));
                        cell.seq.store(pos + self.mask + 1, Ordering::Release);
                        return Some(item);
                    }
                    Err(now) => pos = now,
                }
            } else if seq <= pos {
                return None;
            } else {
                pos = self.head.load(Ordering::Relaxed);
            }
        }
    }

    /// Whether an item may be waiting (one load; exact when quiescent).
    #[inline]
    pub fn maybe_nonempty(&self) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        self.cells[(head & self.mask) as usize].seq.load(Ordering::Acquire) == head + 1
    }
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff")
            .field("capacity", &(self.mask + 1))
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_out_once_in_order_and_a_full_queue_refuses() {
        let q = Handoff::new(4);
        assert!(!q.maybe_nonempty());
        for i in 0..4 {
            assert!(q.push(i, i * 10));
        }
        assert!(!q.push(9, 9), "full");
        assert!(q.maybe_nonempty());
        assert_eq!(q.pop(), Some((0, 0)));
        assert!(q.push(4, 40), "a popped cell is reused on the next lap");
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(rest, vec![(1, 10), (2, 20), (3, 30), (4, 40)]);
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn concurrent_producers_lose_and_duplicate_nothing() {
        let q = std::sync::Arc::new(Handoff::new(64));
        let producers: Vec<_> = (0..3u64)
            .map(|p| {
                let q = std::sync::Arc::clone(&q);
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        while !q.push(p, i) {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut next = [0u64; 3];
        let mut got = 0;
        while got < 30_000 {
            if let Some((p, i)) = q.pop() {
                assert_eq!(next[p as usize], i, "producer {p}: items in order, none lost");
                next[p as usize] += 1;
                got += 1;
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(q.pop(), None);
    }
}
