//! NUMA-aware transaction routing (Zen+ §4.2.2, Alg. 3 and the periodic
//! Alg. 4) for the driver's closed-loop workers.
//!
//! The paper assigns incoming transactions to threads. Our workers draw
//! their own, so each worker is also the dispatcher of what it draws, and
//! draws exactly one transaction per transaction it runs (so no worker
//! floods another):
//!
//! ```text
//!   worker w:  draw a transaction, extract its partition keys
//!              Alg. 3 → node n (affinity / least loaded / random)
//!              target = w if n is w's node, else n's next worker (round-robin)
//!              append it to target's queue (full: run it here, now)
//!              w's queue non-empty? ──yes──▶ run its head (oldest first)
//!                 │ no (everything went elsewhere)
//!                 ▼
//!              draw again (at most FORWARD_LIMIT times, then run one here)
//! ```
//!
//! A node's LOAD is the occupancy of its workers' queues (0 = empty, 1 =
//! full), so δ compares how far behind the nodes are. Every queue is a
//! bounded ring allocated up front (no allocation on the hot path).
//! Transactions still queued when the run stops are dropped: a transaction
//! budget counts executed transactions, so totals are unaffected. Every
//! `REMAP_EVERY` transactions a worker offers to run Alg. 4 (at most once
//! per remap interval across all workers).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crossbeam_utils::CachePadded;
use rand::Rng;
use rand::rngs::SmallRng;
use serde::Serialize;
use zen_engine::numa::assign::Choice;
use zen_engine::numa::{MAX_NODES, SoftPartitioner};

/// Transactions a worker's queue holds. Deep enough that δ = 0.3 means ~20
/// transactions behind: with one worker per node, the queue length is a
/// random walk, and a shallow queue would trip the least-loaded rule on noise.
pub const QUEUE_DEPTH: usize = 64;
/// Transactions a worker may forward before it runs one itself.
pub const FORWARD_LIMIT: usize = 8;
/// How often (in transactions) a worker offers to run Alg. 4.
pub const REMAP_EVERY: u64 = 64;

/// What the router decided during the measured interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RouteStats {
    /// Alg. 3 chose by affinity (votes).
    pub affinity: u64,
    /// Alg. 3 chose the least-loaded node (loads differed by more than δ).
    pub least_loaded: u64,
    /// No partition key known: a random node.
    pub random: u64,
    /// Transactions handed to a worker of another node.
    pub forwarded: u64,
    /// Forwarding failed (target queue full) and the drawer ran it.
    pub overflow: u64,
}

#[derive(Default)]
struct Counters {
    affinity: AtomicU64,
    least_loaded: AtomicU64,
    random: AtomicU64,
    forwarded: AtomicU64,
    overflow: AtomicU64,
}

/// The routing state of one run, shared by its workers.
pub struct Router<'e, R> {
    partitioner: &'e SoftPartitioner,
    queues: Vec<parking_lot::Mutex<VecDeque<R>>>,
    depth: Vec<CachePadded<AtomicUsize>>,
    node_sizes: Vec<usize>,
    counters: Counters,
}

impl<'e, R> Router<'e, R> {
    /// A router over the partitioner's spread workers.
    pub fn new(partitioner: &'e SoftPartitioner, workers: usize) -> Router<'e, R> {
        let mut node_sizes = vec![0; partitioner.nodes()];
        for w in 0..workers {
            node_sizes[partitioner.node_of_worker(w)] += 1;
        }
        Router {
            partitioner,
            queues: (0..workers)
                .map(|_| parking_lot::Mutex::new(VecDeque::with_capacity(QUEUE_DEPTH)))
                .collect(),
            depth: (0..workers).map(|_| CachePadded::new(AtomicUsize::new(0))).collect(),
            node_sizes,
            counters: Counters::default(),
        }
    }

    /// Queue occupancy of each node (0..=1).
    fn loads(&self, out: &mut [f64; MAX_NODES]) {
        out.fill(0.0);
        for (w, d) in self.depth.iter().enumerate() {
            out[self.partitioner.node_of_worker(w)] += d.load(Ordering::Relaxed) as f64;
        }
        for (n, size) in self.node_sizes.iter().enumerate() {
            if *size > 0 {
                out[n] /= (*size * QUEUE_DEPTH) as f64;
            }
        }
    }

    fn pop(&self, me: usize) -> Option<R> {
        let queue = self.queues.get(me)?;
        if self.depth[me].load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut q = queue.lock();
        let r = q.pop_front();
        self.depth[me].store(q.len(), Ordering::Relaxed);
        r
    }

    fn push(&self, to: usize, request: R) -> Result<(), R> {
        let mut q = self.queues[to].lock();
        if q.len() >= QUEUE_DEPTH {
            return Err(request);
        }
        q.push_back(request);
        self.depth[to].store(q.len(), Ordering::Relaxed);
        Ok(())
    }

    /// The next transaction worker `me` runs (see the module docs): it
    /// draws with `draw`, routes by Alg. 3, and runs the head of its own
    /// queue. `keys` extracts partition keys into the reused buffer `buf`.
    /// Counts decisions when `measuring`.
    pub fn next_request(
        &self,
        me: usize,
        draw: &mut dyn FnMut(&mut SmallRng) -> R,
        keys: &dyn Fn(&R, &mut Vec<u64>),
        buf: &mut Vec<u64>,
        rng: &mut SmallRng,
        measuring: bool,
    ) -> R {
        if me >= self.queues.len() {
            // Not one of the spread workers: it runs what it draws.
            return draw(rng);
        }
        let c = &self.counters;
        let count = |counter: &AtomicU64| {
            if measuring {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        };
        let mut loads = [0.0; MAX_NODES];
        for _ in 0..FORWARD_LIMIT {
            let request = draw(rng);
            buf.clear();
            keys(&request, buf);
            self.loads(&mut loads);
            let a = self.partitioner.route(buf, &loads, rng.random(), Some(me));
            count(match a.choice {
                Choice::Affinity(_) => &c.affinity,
                Choice::LeastLoaded(_) => &c.least_loaded,
                Choice::Random(_) => &c.random,
            });
            let target = if a.worker < self.queues.len() { a.worker } else { me };
            if let Err(request) = self.push(target, request) {
                count(&c.overflow);
                return request;
            }
            if target != me {
                count(&c.forwarded);
            }
            if let Some(r) = self.pop(me) {
                return r;
            }
        }
        // Handed out FORWARD_LIMIT without getting work back: run one here.
        let request = draw(rng);
        buf.clear();
        keys(&request, buf);
        self.partitioner.record(me, buf);
        request
    }

    /// Offer to run Alg. 4 (call after each transaction with its count).
    pub fn after_transaction(&self, done: u64) {
        if done.is_multiple_of(REMAP_EVERY) {
            self.partitioner.maybe_remap();
        }
    }

    pub fn stats(&self) -> RouteStats {
        let c = &self.counters;
        RouteStats {
            affinity: c.affinity.load(Ordering::Relaxed),
            least_loaded: c.least_loaded.load(Ordering::Relaxed),
            random: c.random.load(Ordering::Relaxed),
            forwarded: c.forwarded.load(Ordering::Relaxed),
            overflow: c.overflow.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use zen_engine::numa::{Binding, Layout, NumaConfig, Topology, partition_of};

    fn partitioner() -> SoftPartitioner {
        let config = NumaConfig {
            nodes: Some(2),
            binding: Binding::Even,
            workers: Some(2),
            partitions: 8,
            pin: false,
            ..NumaConfig::default()
        };
        SoftPartitioner::new(
            &config,
            &Layout::resolve(&config, 2, &Topology { nodes: vec![vec![0]] }),
        )
    }

    #[test]
    fn a_transaction_for_the_other_node_is_queued_there_and_run_by_its_worker() {
        let p = partitioner();
        let router: Router<'_, u64> = Router::new(&p, 2);
        let key_on = |node: usize| {
            (0u64..).find(|&k| p.node_of_partition(partition_of(k, 8)) == node).unwrap()
        };
        let (k0, k1) = (key_on(0), key_on(1));
        let mut rng = SmallRng::seed_from_u64(1);
        let mut buf = Vec::new();
        let keys = |r: &u64, out: &mut Vec<u64>| out.push(*r);
        // Worker 0 draws k1 (node 1's), forwards it, then draws k0 and runs it.
        let mut drawn = vec![k0, k1]; // popped from the back: k1 first
        let mut draw = |_: &mut SmallRng| drawn.pop().unwrap();
        let mine = router.next_request(0, &mut draw, &keys, &mut buf, &mut rng, true);
        assert_eq!(mine, k0);
        // Worker 1 draws another key of its own node, queues it
        // behind the forwarded k1, and runs the oldest: k1.
        let k1b = (k1 + 1..).find(|&k| p.node_of_partition(partition_of(k, 8)) == 1).unwrap();
        let mut draw1 = |_: &mut SmallRng| k1b;
        assert_eq!(router.next_request(1, &mut draw1, &keys, &mut buf, &mut rng, true), k1);
        assert_eq!(router.depth[1].load(Ordering::Relaxed), 1);
        let s = router.stats();
        assert_eq!((s.affinity, s.forwarded, s.overflow), (3, 1, 0));
    }

    #[test]
    fn a_node_falling_behind_by_more_than_delta_gets_no_more_work() {
        let p = partitioner();
        let router: Router<'_, u64> = Router::new(&p, 2);
        let k1 = (0u64..).find(|&k| p.node_of_partition(partition_of(k, 8)) == 1).unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut buf = Vec::new();
        let keys = |r: &u64, out: &mut Vec<u64>| out.push(*r);
        let mut draw = |_: &mut SmallRng| k1;
        // Every draw goes to node 1 (worker 0 runs every FORWARD_LIMIT + 1-th
        // itself) until node 1's queue is more than δ = 0.3 fuller than node
        // 0's: 20 of 64. Then Alg. 3 picks the least-loaded node 0, and worker
        // 0 queues the transaction for itself and runs it.
        while router.stats().least_loaded == 0 {
            assert_eq!(router.next_request(0, &mut draw, &keys, &mut buf, &mut rng, true), k1);
        }
        let s = router.stats();
        assert_eq!((s.forwarded, s.overflow), (20, 0), "{s:?}");
        assert_eq!(router.depth[1].load(Ordering::Relaxed), 20);
    }
}
