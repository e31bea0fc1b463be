//! Hot-tuple tracking (Falcon §4.4, Alg. 1 lines 8–11): a small per-worker
//! LRU of the tuples this worker wrote last. A tuple found in it is *hot*
//! and is not written back after its update (the next update will dirty
//! the same lines again, so writing them back now only adds media writes);
//! a tuple not in it is written back (the hinted flush) and enters it.
//!
//! Exact LRU over slot offsets: a hash map to an intrusive doubly linked
//! list in preallocated arrays, so a lookup is O(1) and nothing allocates
//! once the worker has started (the map is sized for the capacity).

use std::collections::HashMap;

const NONE: u32 = u32::MAX;

/// The hot-tuple set of one worker.
#[derive(Debug)]
pub struct HotTuples {
    capacity: usize,
    index: HashMap<u64, u32>,
    keys: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    /// Most and least recently used entries (`NONE` when empty).
    head: u32,
    tail: u32,
}

impl HotTuples {
    /// A set of at most `capacity` tuples (0: nothing is ever hot).
    pub fn new(capacity: usize) -> HotTuples {
        let capacity = capacity.min(NONE as usize - 1);
        HotTuples {
            capacity,
            index: HashMap::with_capacity(capacity),
            keys: Vec::with_capacity(capacity),
            prev: Vec::with_capacity(capacity),
            next: Vec::with_capacity(capacity),
            head: NONE,
            tail: NONE,
        }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Record a write of `slot`: true if it was hot (tracked already; it
    /// becomes the most recent), false if it was not (it is tracked now,
    /// displacing the least recently written tuple when full).
    pub fn touch(&mut self, slot: u64) -> bool {
        if self.capacity == 0 {
            return false;
        }
        if let Some(&i) = self.index.get(&slot) {
            self.unlink(i);
            self.push_front(i);
            return true;
        }
        let i = if self.keys.len() < self.capacity {
            self.keys.push(slot);
            self.prev.push(NONE);
            self.next.push(NONE);
            (self.keys.len() - 1) as u32
        } else {
            let victim = self.tail;
            self.unlink(victim);
            self.index.remove(&self.keys[victim as usize]);
            self.keys[victim as usize] = slot;
            victim
        };
        self.index.insert(slot, i);
        self.push_front(i);
        false
    }

    /// Forget `slot` (its tuple was deleted and the slot may be reused).
    pub fn forget(&mut self, slot: u64) {
        let Some(i) = self.index.remove(&slot) else { return };
        self.unlink(i);
        // Move the last array entry into the hole so the arrays stay dense.
        let last = (self.keys.len() - 1) as u32;
        if i != last {
            let moved = self.keys[last as usize];
            self.unlink(last);
            self.keys[i as usize] = moved;
            self.index.insert(moved, i);
            self.push_front(i);
        }
        self.keys.pop();
        self.prev.pop();
        self.next.pop();
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        if p == NONE {
            self.head = n
        } else {
            self.next[p as usize] = n
        }
        if n == NONE {
            self.tail = p
        } else {
            self.prev[n as usize] = p
        }
        self.prev[i as usize] = NONE;
        self.next[i as usize] = NONE;
    }

    fn push_front(&mut self, i: u32) {
        self.next[i as usize] = self.head;
        self.prev[i as usize] = NONE;
        if self.head != NONE {
            self.prev[self.head as usize] = i;
        }
        self.head = i;
        if self.tail == NONE {
            self.tail = i;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_written_tuple_is_displaced() {
        let mut hot = HotTuples::new(2);
        assert!(!hot.touch(10), "first write: not hot, now tracked");
        assert!(!hot.touch(20));
        assert!(hot.touch(10), "tracked: hot, and now the most recent");
        assert!(!hot.touch(30), "displaces 20, the least recent");
        assert!(hot.touch(10));
        assert!(!hot.touch(20), "20 was displaced");
        assert_eq!(hot.len(), 2);
    }

    #[test]
    fn forgotten_tuples_are_not_hot_and_capacity_zero_tracks_nothing() {
        let mut hot = HotTuples::new(3);
        for s in [1, 2, 3] {
            hot.touch(s);
        }
        hot.forget(1);
        hot.forget(99);
        assert_eq!(hot.len(), 2);
        assert!(!hot.touch(1));
        assert!(hot.touch(2) && hot.touch(3));
        let mut none = HotTuples::new(0);
        assert!(!none.touch(5) && !none.touch(5));
        assert!(none.is_empty());
    }
}
