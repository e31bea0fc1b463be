//! Zen's side of Zen+ NUMA (§4.2.2): where a worker's accesses land.
//!
//! Space management gives NUMA-local NVM writes (each worker allocates heap
//! pages for itself), and the Met-Cache gives NUMA-local DRAM writes once
//! every protocol writes rows only into its own region: silo and occ copy a
//! foreign entry they update (C2) anyway; in `local-write` and
//! `soft-partition` modes every other protocol (2PL, TicToc, H-Store, and the
//! multi-version ones when an insert would fill a foreign absent entry) moves
//! a tuple homed on another node into the writer's region at install
//! (`numa_write_must_move`, used by `txn::commit`). What remains is to home
//! those regions and pages on the worker's node (`crate::numa::accounting`)
//! and to count every tuple access as local or remote. These hooks are
//! called from the read and write paths of `txn`; each costs one branch when
//! NUMA is off.

use std::sync::atomic::Ordering;

use zen_pmem::{PmemBackend, Pool};

use super::Shared;
use crate::config::EngineConfig;
use crate::error::{Error, Result};
use crate::numa::{NumaMode, NumaStats};

/// A per-node pool used with NUMA on must have one member file per node
/// (with NUMA off, one node, its members are simply one pool).
pub(crate) fn check_pool_nodes<B: PmemBackend>(
    pool: &Pool<B>,
    config: &EngineConfig,
) -> Result<()> {
    let members = pool.members().len();
    if !pool.is_per_node() {
        return Ok(());
    }
    let nodes = crate::numa::Numa::new(&config.numa, config.max_workers).map_or(1, |n| n.nodes());
    if nodes > 1 && nodes != members {
        return Err(Error::InvalidConfig(format!(
            "{}: the per-node pool has {members} member files but the engine runs on {nodes} NUMA nodes; run with --numa-nodes {members}",
            pool.path().display()
        )));
    }
    Ok(())
}

impl<B: PmemBackend> Shared<B> {
    /// Worker `worker` read (`write == false`) or wrote entry `index` of
    /// worker `region`'s Met-Cache region.
    #[inline]
    pub(crate) fn numa_entry(&self, worker: usize, region: usize, index: u32, write: bool) {
        if let Some(numa) = &self.numa {
            numa.access(worker, numa.entry_node(region, index), write);
        }
    }

    /// Must worker `worker` move the tuple of entry `index` of `region` into
    /// its own region to write it (N1 of `numa::accounting`)? False when
    /// NUMA is off or the mode promises no local writes.
    #[inline]
    pub(crate) fn numa_write_must_move(&self, worker: usize, region: usize, index: u32) -> bool {
        self.numa.as_ref().is_some_and(|numa| numa.write_must_move(worker, region, index))
    }

    /// Worker `worker` read or wrote the heap slot at pool offset `slot`.
    /// On a per-node pool a page's home is the node of the file it lives in.
    #[inline]
    pub(crate) fn numa_slot(&self, worker: usize, slot: u64, write: bool) {
        if let Some(numa) = &self.numa {
            let page = slot / self.pool.page_size();
            let home = if self.pool.members().len() > 1 {
                self.pool.page_member(page)
            } else {
                let owner = self
                    .page_worker
                    .get(page as usize)
                    .map_or(u32::MAX, |o| o.load(Ordering::Relaxed));
                numa.page_node(page, owner)
            };
            numa.access(worker, home, write);
        }
    }

    /// The member file a new heap page of `worker` comes from: the node the
    /// mode homes the page on (`naive` interleaves the files page by page).
    /// 0 on a single-file pool or with NUMA off.
    pub(crate) fn home_member(&self, worker: usize) -> usize {
        let members = self.pool.members().len();
        match &self.numa {
            Some(numa) if members > 1 => {
                let node = match numa.layout.mode {
                    NumaMode::Naive => {
                        self.heap_pages_allocated.fetch_add(1, Ordering::Relaxed) as usize
                    }
                    _ => numa.page_node(0, worker as u32),
                };
                node % members
            }
            _ => 0,
        }
    }

    /// The NUMA report, with the heap pages homed on each node.
    pub(crate) fn numa_stats(&self) -> Option<NumaStats> {
        let numa = self.numa.as_ref()?;
        let owners = self.page_worker.iter().enumerate().filter_map(|(page, o)| {
            let owner = o.load(Ordering::Relaxed);
            (owner != u32::MAX).then_some((page as u64, owner))
        });
        let mut stats = numa.stats(owners);
        if self.pool.members().len() > 1 {
            // A per-node pool's pages are homed by the file they live in.
            stats.pages_per_node = vec![0; numa.nodes()];
            for (page, o) in self.page_worker.iter().enumerate() {
                if o.load(Ordering::Relaxed) != u32::MAX {
                    let member = self.pool.page_member(page as u64);
                    if let Some(n) = stats.pages_per_node.get_mut(member) {
                        *n += 1;
                    }
                }
            }
        }
        if let Some(binder) = &self.memory_binder {
            stats.memory_binding = binder.report();
        }
        Some(stats)
    }
}
