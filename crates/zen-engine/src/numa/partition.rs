//! Soft partitions (§4.2.2): the partition function, the shared partition →
//! node map, per-(worker, partition) access counts, and the glue that runs
//! Alg. 3 ([`super::choose_node`]) and Alg. 4 ([`super::map_partitions`]).
//!
//! A table's partition key is its primary key or a foreign key (TPC-C: the
//! warehouse id of every table that has one), so related tuples share a
//! partition. Workloads extract the partition-key values of a transaction's
//! requests before it runs (`Workload::partition_keys`); the partition of a
//! value is `mix(value) mod P`. Partitions are logical: nothing is copied.
//! NUMA-local writes make the new versions of a partition's tuples land on
//! the node that runs its transactions, so a partition drifts to its node.
//!
//! SIZE. The map is one byte per partition and the access counts one `u32`
//! per (worker, partition): with P = 2048, 2 KiB plus 8 KiB per worker, which
//! stays in the last-level cache (the paper's reason for P = 2048).
//!
//! CONCURRENCY. Routing reads the map with relaxed loads and bumps access
//! counts with relaxed adds; one remapper at a time (a `try_lock`) snapshots
//! the counts, runs Alg. 4 and publishes the new map. A routing decision
//! taken on a stale map is only a worse placement, never an error. After each
//! round the counts are halved, so old behaviour fades and a shifting
//! workload is followed (the paper does not say how its counts age).

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::sched::Mutex;
use crossbeam_utils::CachePadded;

use super::{Choice, Layout, MAX_NODES, NumaConfig, RemapOutcome, choose_node, map_partitions};

/// Partition of a partition-key value: a 64-bit mix, then `mod partitions`.
#[inline]
pub fn partition_of(key: u64, partitions: usize) -> usize {
    let mut z = key.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) % partitions as u64) as usize
}

/// Where Alg. 3 sent a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    pub worker: usize,
    pub choice: Choice,
}

struct RemapState {
    last: Instant,
    counts: Vec<u32>,
    map: Vec<u8>,
}

/// The soft-partition state shared by every worker of an engine.
pub struct SoftPartitioner {
    partitions: usize,
    delta: f64,
    eta: f64,
    interval: Duration,
    worker_node: Vec<u8>,
    node_workers: Vec<Vec<usize>>,
    eligible: Vec<bool>,
    map: Box<[AtomicU8]>,
    /// `workers × partitions` access counts, row per worker.
    access: Box<[AtomicU32]>,
    /// Round-robin cursor of each node.
    next: Box<[CachePadded<AtomicUsize>]>,
    remap: Mutex<RemapState>,
    rounds: AtomicU64,
    moved: AtomicU64,
}

impl SoftPartitioner {
    /// Partitions spread evenly (p ↦ the (p mod k)-th node with workers).
    pub fn new(config: &NumaConfig, layout: &Layout) -> SoftPartitioner {
        let node_workers = layout.node_workers();
        let eligible: Vec<bool> = node_workers.iter().map(|w| !w.is_empty()).collect();
        let with_workers: Vec<u8> =
            (0..layout.nodes).filter(|&n| eligible[n]).map(|n| n as u8).collect();
        let parts = config.partitions;
        SoftPartitioner {
            partitions: parts,
            delta: config.delta,
            eta: config.eta,
            interval: Duration::from_millis(config.remap_interval_ms),
            worker_node: layout.worker_node[..layout.workers].to_vec(),
            node_workers,
            eligible,
            map: (0..parts).map(|p| AtomicU8::new(with_workers[p % with_workers.len()])).collect(),
            access: (0..layout.workers * parts).map(|_| AtomicU32::new(0)).collect(),
            next: (0..layout.nodes).map(|_| CachePadded::new(AtomicUsize::new(0))).collect(),
            remap: Mutex::new(RemapState {
                last: Instant::now(),
                counts: vec![0; layout.workers * parts],
                map: vec![0; parts],
            }),
            rounds: AtomicU64::new(0),
            moved: AtomicU64::new(0),
        }
    }

    pub fn partitions(&self) -> usize {
        self.partitions
    }

    pub fn nodes(&self) -> usize {
        self.eligible.len()
    }

    /// Node a partition is mapped to now.
    pub fn node_of_partition(&self, partition: usize) -> usize {
        usize::from(self.map[partition].load(Ordering::Relaxed))
    }

    /// Node of a spread worker.
    pub fn node_of_worker(&self, worker: usize) -> usize {
        self.worker_node.get(worker).map_or(0, |&n| usize::from(n))
    }

    /// Alg. 3 for a transaction whose known partition-key values are `keys`,
    /// with node loads `loads` (0..=1). When `me` (the worker that drew the
    /// transaction) is on the chosen node it keeps the transaction; otherwise
    /// the node's workers take turns (round-robin). Counts the accesses.
    pub fn route(&self, keys: &[u64], loads: &[f64], random: u64, me: Option<usize>) -> Assignment {
        let mut votes = [0u32; MAX_NODES];
        for &k in keys {
            votes[self.node_of_partition(partition_of(k, self.partitions))] += 1;
        }
        let choice = choose_node(loads, &votes[..self.nodes()], &self.eligible, self.delta, random);
        let node = choice.node();
        let worker = match me {
            Some(w) if self.node_of_worker(w) == node && w < self.worker_node.len() => w,
            _ => {
                let members = &self.node_workers[node];
                members[self.next[node].fetch_add(1, Ordering::Relaxed) % members.len()]
            }
        };
        self.record(worker, keys);
        Assignment { worker, choice }
    }

    /// Count one access of `worker` to the partition of each key (Alg. 3 line 10).
    pub fn record(&self, worker: usize, keys: &[u64]) {
        if worker >= self.worker_node.len() {
            return;
        }
        let row = worker * self.partitions;
        for &k in keys {
            let c = &self.access[row + partition_of(k, self.partitions)];
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Run Alg. 4 if the remap interval has passed and no one else is at it.
    pub fn maybe_remap(&self) -> Option<RemapOutcome> {
        let mut state = self.remap.try_lock()?;
        if state.last.elapsed() < self.interval {
            return None;
        }
        Some(self.remap_locked(&mut state))
    }

    /// Run Alg. 4 now (waits for a running round).
    pub fn remap_now(&self) -> RemapOutcome {
        let mut state = self.remap.lock();
        self.remap_locked(&mut state)
    }

    fn remap_locked(&self, state: &mut RemapState) -> RemapOutcome {
        let RemapState { last, counts, map } = state;
        for (c, a) in counts.iter_mut().zip(self.access.iter()) {
            *c = a.load(Ordering::Relaxed);
        }
        for (m, a) in map.iter_mut().zip(self.map.iter()) {
            *m = a.load(Ordering::Relaxed);
        }
        let outcome = map_partitions(counts, &self.worker_node, &self.eligible, map, self.eta);
        for (m, a) in map.iter().zip(self.map.iter()) {
            a.store(*m, Ordering::Relaxed);
        }
        // Age the statistics: a racing increment may be lost, which only
        // blurs a count.
        for (a, c) in self.access.iter().zip(counts.iter()) {
            a.store(c / 2, Ordering::Relaxed);
        }
        *last = Instant::now();
        self.rounds.fetch_add(1, Ordering::Relaxed);
        self.moved.fetch_add(outcome.moved as u64, Ordering::Relaxed);
        outcome
    }

    /// (rounds of Alg. 4 run, partitions moved) so far.
    pub fn remap_totals(&self) -> (u64, u64) {
        (self.rounds.load(Ordering::Relaxed), self.moved.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numa::{Binding, Topology};

    fn partitioner(workers: usize, partitions: usize) -> SoftPartitioner {
        let config = NumaConfig {
            nodes: Some(2),
            binding: Binding::Even,
            workers: Some(workers),
            partitions,
            pin: false,
            ..NumaConfig::default()
        };
        let layout = Layout::resolve(&config, workers, &Topology { nodes: vec![vec![0]] });
        SoftPartitioner::new(&config, &layout)
    }

    /// Keys whose partitions are `wanted`, found by trying values in order.
    fn keys_in(partitions: usize, wanted: impl Fn(usize) -> bool, n: usize) -> Vec<u64> {
        (0u64..).filter(|&k| wanted(partition_of(k, partitions))).take(n).collect()
    }

    #[test]
    fn partitions_start_evenly_spread_and_hash_uniformly() {
        let p = partitioner(4, 2048);
        let on_one = (0..2048).filter(|&i| p.node_of_partition(i) == 1).count();
        assert_eq!(on_one, 1024);
        let mut hits = vec![0u32; 16];
        for k in 0..16_000 {
            hits[partition_of(k, 16)] += 1;
        }
        assert!(hits.iter().all(|&h| (800..1200).contains(&h)), "{hits:?}");
    }

    #[test]
    fn routing_follows_the_map_and_round_robins_inside_the_node() {
        let p = partitioner(4, 64); // workers 0, 1 on node 0; 2, 3 on node 1
        let on_one = keys_in(64, |x| x % 2 == 1, 16);
        let a = p.route(&on_one, &[0.0, 0.0], 0, Some(0));
        let b = p.route(&on_one, &[0.0, 0.0], 0, Some(0));
        assert_eq!((a.choice, b.choice), (Choice::Affinity(1), Choice::Affinity(1)));
        assert_eq!((a.worker, b.worker), (2, 3));
        // A worker on the chosen node keeps its own transaction.
        assert_eq!(p.route(&on_one, &[0.0, 0.0], 0, Some(3)).worker, 3);
        // Unbalanced: node 1's queues are full, node 0 takes it.
        let c = p.route(&on_one, &[0.0, 0.9], 0, Some(3));
        assert_eq!(c.choice, Choice::LeastLoaded(0));
    }

    #[test]
    fn partitions_converge_to_the_node_that_uses_them_as_the_workload_shifts() {
        let p = partitioner(4, 64); // workers 0, 1 on node 0; 2, 3 on node 1
        // Ten transactions per round on each of 32 hot partitions: set A
        // (even numbers, all on node 0 at first) and set B (odd, on node 1).
        let tens = |set: &dyn Fn(usize) -> bool| -> Vec<u64> {
            (0..32)
                .filter(|&x| set(x))
                .flat_map(|x| std::iter::repeat_n(keys_in(64, |y| y == x, 1)[0], 10))
                .collect()
        };
        let (a, b) = (tens(&|x| x % 2 == 0), tens(&|x| x % 2 == 1));
        let all_on = |set: &dyn Fn(usize) -> bool, node: usize| {
            (0..32).filter(|&x| set(x)).all(|x| p.node_of_partition(x) == node)
        };
        // Phase 1: node 1's workers run A, node 0's run B: the opposite of the
        // initial map. One round of Alg. 4 swaps both sets.
        for _ in 0..3 {
            p.record(2, &a);
            p.record(0, &b);
            p.remap_now();
            assert!(all_on(&|x| x % 2 == 0, 1) && all_on(&|x| x % 2 == 1, 0));
        }
        // Phase 2: the workload shifts back; the halved old counts fade and
        // the partitions follow within a few rounds.
        let mut rounds = 0;
        while !(all_on(&|x| x % 2 == 0, 0) && all_on(&|x| x % 2 == 1, 1)) {
            rounds += 1;
            assert!(rounds <= 4, "partitions did not follow the shift");
            p.record(1, &a);
            p.record(3, &b);
            p.remap_now();
        }
        assert_eq!(p.remap_totals().1, 64);
    }
}
