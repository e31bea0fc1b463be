//! Where memory lives, and counting local versus remote accesses.
//!
//! HOMING. Memory is homed on a node by the mode ([`NumaMode`]):
//!
//! ```text
//!   mode            Met-Cache entry (region r, chunk c)   heap page p (owner worker o)
//!   local           node 0                                node 0
//!   remote          node 1                                node 1
//!   naive           (r + c) mod nodes  (interleaved)      p mod nodes (interleaved)
//!   local-write     node of r                             node of o
//!   soft-partition  node of r                             node of o
//! ```
//!
//! A heap page's owner worker is already recorded (the pool's page table and
//! `Shared::page_worker`), so homing needs no new persistent state and
//! survives recovery: a page comes back homed where its owner runs. On
//! virtual nodes the per-node page pools are this homing; a per-node pool
//! (`--pool-per-node`) also takes each page from its home node's file, and
//! on real nodes the cache regions are bound to their node (`bind.rs`).
//!
//! COUNTING. Each tuple access of a worker (reading a cache entry's row,
//! reading a heap slot on a cache miss, writing a row into a cache entry,
//! writing a new version into a heap slot) is classified local or remote by
//! comparing the worker's node with the memory's home, and counted in the
//! worker's own cache-padded counters. A remote access is charged
//! `remote_penalty_ns` of busy-waiting. Lock and CC-metadata words are not
//! counted (neither does the paper).
//!
//! INVARIANT (N1): in `local-write` and `soft-partition` modes, a worker
//! writes tuple data only to memory of its own node (its cache region and
//! its heap pages), so `remote_writes` stays 0 under every protocol. Where a
//! write would land in an entry homed on another node
//! ([`Numa::write_must_move`]), the engine moves the tuple into the writer's
//! region instead (`zen::txn::commit`); the one exception is a privileged
//! Zen+ transaction whose region is full (see `docs/design/numa.md`).

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use serde::Serialize;

use super::{Layout, NumaConfig, NumaMode, SoftPartitioner};

/// Met-Cache entries per interleaving unit in `naive` mode (one chunk).
pub const CACHE_INTERLEAVE_ENTRIES: u64 = 1024;

/// One worker's access counters.
#[derive(Debug, Default)]
pub struct WorkerNumaCounters {
    pub local_reads: AtomicU64,
    pub remote_reads: AtomicU64,
    pub local_writes: AtomicU64,
    pub remote_writes: AtomicU64,
    pub penalty_ns: AtomicU64,
}

/// A snapshot of access counters (one worker's or a sum).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct NumaCounters {
    pub local_reads: u64,
    pub remote_reads: u64,
    pub local_writes: u64,
    pub remote_writes: u64,
    /// Busy-wait charged for remote accesses.
    pub penalty_ns: u64,
}

impl NumaCounters {
    pub fn add(&self, o: &NumaCounters) -> NumaCounters {
        NumaCounters {
            local_reads: self.local_reads + o.local_reads,
            remote_reads: self.remote_reads + o.remote_reads,
            local_writes: self.local_writes + o.local_writes,
            remote_writes: self.remote_writes + o.remote_writes,
            penalty_ns: self.penalty_ns + o.penalty_ns,
        }
    }

    pub fn since(&self, start: &NumaCounters) -> NumaCounters {
        NumaCounters {
            local_reads: self.local_reads.saturating_sub(start.local_reads),
            remote_reads: self.remote_reads.saturating_sub(start.remote_reads),
            local_writes: self.local_writes.saturating_sub(start.local_writes),
            remote_writes: self.remote_writes.saturating_sub(start.remote_writes),
            penalty_ns: self.penalty_ns.saturating_sub(start.penalty_ns),
        }
    }

    /// Remote share of all accesses (0 when there were none).
    pub fn remote_fraction(&self) -> f64 {
        let all = self.local_reads + self.remote_reads + self.local_writes + self.remote_writes;
        ratio(self.remote_reads + self.remote_writes, all)
    }

    pub fn remote_read_fraction(&self) -> f64 {
        ratio(self.remote_reads, self.local_reads + self.remote_reads)
    }

    pub fn remote_write_fraction(&self) -> f64 {
        ratio(self.remote_writes, self.local_writes + self.remote_writes)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The engine's NUMA state, for reports.
#[derive(Debug, Clone, Serialize)]
pub struct NumaStats {
    /// The resolved configuration.
    pub config: NumaConfig,
    pub nodes: usize,
    pub real_nodes: bool,
    pub mode: NumaMode,
    pub binding: super::Binding,
    pub remote_penalty_ns: u64,
    /// Node of each spread worker.
    pub worker_nodes: Vec<u8>,
    /// CPU each spread worker is pinned to (`None`: not pinned).
    pub worker_cpus: Vec<Option<usize>>,
    /// Counters of each spread worker, then the total.
    pub workers: Vec<NumaCounters>,
    pub total: NumaCounters,
    /// Heap pages homed on each node.
    pub pages_per_node: Vec<u64>,
    /// Soft partitions: dynamic-mapping rounds and partitions moved so far.
    pub remap_rounds: u64,
    pub partitions_moved: u64,
    /// `mbind` of the cache regions (real nodes only; `bind.rs`).
    pub memory_binding: super::MemoryBindingReport,
}

/// The NUMA runtime of one engine: layout, homing, counters, partitioner.
pub struct Numa {
    pub config: NumaConfig,
    pub layout: Layout,
    counters: Box<[CachePadded<WorkerNumaCounters>]>,
    /// Present in `soft-partition` mode.
    pub partitioner: Option<SoftPartitioner>,
}

impl Numa {
    /// Resolve `config` for `max_workers` workers on the detected topology.
    /// `None` when only one node results (nothing to place or count).
    pub fn new(config: &NumaConfig, max_workers: usize) -> Option<Numa> {
        let layout = Layout::resolve(config, max_workers, &super::Topology::detect());
        (layout.nodes > 1).then(|| Self::with_layout(config.clone(), layout))
    }

    /// Build on a given layout (tests use hand-made layouts).
    pub fn with_layout(config: NumaConfig, layout: Layout) -> Numa {
        let partitioner = (config.mode == NumaMode::SoftPartition)
            .then(|| SoftPartitioner::new(&config, &layout));
        Numa {
            counters: (0..layout.worker_node.len())
                .map(|_| CachePadded::new(WorkerNumaCounters::default()))
                .collect(),
            config,
            layout,
            partitioner,
        }
    }

    pub fn nodes(&self) -> usize {
        self.layout.nodes
    }

    /// Home node of entry `index` of worker `region`'s Met-Cache region.
    #[inline]
    pub fn entry_node(&self, region: usize, index: u32) -> usize {
        match self.layout.mode {
            NumaMode::Local => 0,
            NumaMode::Remote => 1,
            NumaMode::Naive => {
                ((region as u64 + u64::from(index) / CACHE_INTERLEAVE_ENTRIES)
                    % self.layout.nodes as u64) as usize
            }
            NumaMode::LocalWrite | NumaMode::SoftPartition => self.layout.node_of(region),
        }
    }

    /// Home node of heap page `page` owned by worker `owner` (`u32::MAX`:
    /// a system page, homed on node 0).
    #[inline]
    pub fn page_node(&self, page: u64, owner: u32) -> usize {
        match self.layout.mode {
            NumaMode::Local => 0,
            NumaMode::Remote => 1,
            NumaMode::Naive => (page % self.layout.nodes as u64) as usize,
            NumaMode::LocalWrite | NumaMode::SoftPartition => {
                if owner == u32::MAX {
                    0
                } else {
                    self.layout.node_of(owner as usize)
                }
            }
        }
    }

    /// Would `worker` writing a row into entry `index` of `region` break
    /// N1, i.e. write another node's memory in a mode that promises local
    /// writes? The caller then moves the tuple into its own region. Never
    /// true in `naive`, `local` or `remote` mode, which promise nothing.
    #[inline]
    pub fn write_must_move(&self, worker: usize, region: usize, index: u32) -> bool {
        matches!(self.layout.mode, NumaMode::LocalWrite | NumaMode::SoftPartition)
            && self.entry_node(region, index) != self.layout.node_of(worker)
    }

    /// Count (and charge) one access by `worker` to memory homed on `home`.
    #[inline]
    pub fn access(&self, worker: usize, home: usize, write: bool) {
        let Some(c) = self.counters.get(worker) else { return };
        let local = self.layout.node_of(worker) == home;
        let counter = match (write, local) {
            (false, true) => &c.local_reads,
            (false, false) => &c.remote_reads,
            (true, true) => &c.local_writes,
            (true, false) => &c.remote_writes,
        };
        // Only the owner worker updates its counters: load + store is enough.
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if !local && self.config.remote_penalty_ns > 0 {
            let spent = zen_pmem::cpu::busy_wait_ns(self.config.remote_penalty_ns);
            c.penalty_ns.fetch_add(spent, Ordering::Relaxed);
        }
    }

    /// Counters of worker `w`.
    pub fn counters(&self, worker: usize) -> NumaCounters {
        let Some(c) = self.counters.get(worker) else { return NumaCounters::default() };
        NumaCounters {
            local_reads: c.local_reads.load(Ordering::Relaxed),
            remote_reads: c.remote_reads.load(Ordering::Relaxed),
            local_writes: c.local_writes.load(Ordering::Relaxed),
            remote_writes: c.remote_writes.load(Ordering::Relaxed),
            penalty_ns: c.penalty_ns.load(Ordering::Relaxed),
        }
    }

    /// Sum over every worker.
    pub fn total(&self) -> NumaCounters {
        (0..self.counters.len()).fold(NumaCounters::default(), |acc, w| acc.add(&self.counters(w)))
    }

    /// A report; `page_owners` lists the owner of every allocated heap page.
    pub fn stats(&self, page_owners: impl Iterator<Item = (u64, u32)>) -> NumaStats {
        let mut pages_per_node = vec![0u64; self.layout.nodes];
        for (page, owner) in page_owners {
            pages_per_node[self.page_node(page, owner)] += 1;
        }
        let spread = self.layout.workers;
        let (rounds, moved) = self.partitioner.as_ref().map_or((0, 0), |p| p.remap_totals());
        NumaStats {
            config: self.config.clone(),
            nodes: self.layout.nodes,
            real_nodes: self.layout.real,
            mode: self.layout.mode,
            binding: self.config.binding,
            remote_penalty_ns: self.config.remote_penalty_ns,
            worker_nodes: self.layout.worker_node[..spread].to_vec(),
            worker_cpus: self.layout.worker_cpu[..spread].to_vec(),
            workers: (0..spread).map(|w| self.counters(w)).collect(),
            total: self.total(),
            pages_per_node,
            remap_rounds: rounds,
            partitions_moved: moved,
            memory_binding: super::MemoryBinder::virtual_report(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numa::{Binding, Topology};

    fn numa(mode: NumaMode) -> Numa {
        let config = NumaConfig {
            nodes: Some(2),
            mode,
            binding: Binding::Even,
            workers: Some(4),
            pin: false,
            ..NumaConfig::default()
        };
        let layout = Layout::resolve(&config, 4, &Topology { nodes: vec![vec![0, 1]] });
        Numa::with_layout(config, layout)
    }

    #[test]
    fn local_write_homes_memory_with_its_owner() {
        let n = numa(NumaMode::LocalWrite);
        assert_eq!((0..4).map(|w| n.layout.node_of(w)).collect::<Vec<_>>(), vec![0, 0, 1, 1]);
        assert_eq!(n.entry_node(3, 5000), 1);
        assert_eq!(n.page_node(17, 1), 0);
        assert_eq!(n.page_node(17, u32::MAX), 0);
        n.access(3, n.entry_node(3, 7), true);
        n.access(3, n.page_node(2, 0), false);
        assert_eq!(
            n.counters(3),
            NumaCounters { local_writes: 1, remote_reads: 1, ..NumaCounters::default() }
        );
        assert!((n.total().remote_fraction() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn only_local_write_modes_move_a_write_off_another_node() {
        for mode in [NumaMode::LocalWrite, NumaMode::SoftPartition] {
            let n = numa(mode);
            // Workers 0, 1 on node 0; 2, 3 on node 1.
            assert!(!n.write_must_move(0, 0, 9));
            assert!(!n.write_must_move(0, 1, 9), "another region of the same node");
            assert!(n.write_must_move(0, 2, 9));
            assert!(n.write_must_move(3, 1, 9));
        }
        for mode in [NumaMode::Naive, NumaMode::Local, NumaMode::Remote] {
            let n = numa(mode);
            assert!((0..4).all(|r| !n.write_must_move(0, r, 1024)), "{mode:?}");
        }
    }

    #[test]
    fn naive_interleaves_and_remote_puts_everything_on_node_one() {
        let n = numa(NumaMode::Naive);
        assert_eq!(n.page_node(4, 0), 0);
        assert_eq!(n.page_node(5, 0), 1);
        assert_eq!(n.entry_node(0, 0), 0);
        assert_eq!(n.entry_node(0, 1024), 1);
        let r = numa(NumaMode::Remote);
        assert!((0..4).all(|w| r.layout.node_of(w) == 0));
        assert_eq!((r.page_node(4, 0), r.entry_node(2, 0)), (1, 1));
        let l = numa(NumaMode::Local);
        assert_eq!((l.page_node(5, 3), l.entry_node(3, 0)), (0, 0));
    }

    #[test]
    fn the_remote_penalty_is_charged_only_for_remote_accesses() {
        let mut n = numa(NumaMode::LocalWrite);
        n.config.remote_penalty_ns = 2_000;
        n.access(0, 0, false);
        assert_eq!(n.counters(0).penalty_ns, 0);
        n.access(0, 1, false);
        assert!(n.counters(0).penalty_ns >= 2_000);
    }
}
