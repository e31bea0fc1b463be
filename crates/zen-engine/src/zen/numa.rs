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

use zen_pmem::PmemBackend;

use super::Shared;
use crate::numa::NumaStats;

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
    #[inline]
    pub(crate) fn numa_slot(&self, worker: usize, slot: u64, write: bool) {
        if let Some(numa) = &self.numa {
            let page = slot / self.pool.page_size();
            let owner =
                self.page_worker.get(page as usize).map_or(u32::MAX, |o| o.load(Ordering::Relaxed));
            numa.access(worker, numa.page_node(page, owner), write);
        }
    }

    /// The NUMA report, with the heap pages homed on each node.
    pub(crate) fn numa_stats(&self) -> Option<NumaStats> {
        let numa = self.numa.as_ref()?;
        let owners = self.page_worker.iter().enumerate().filter_map(|(page, o)| {
            let owner = o.load(Ordering::Relaxed);
            (owner != u32::MAX).then_some((page as u64, owner))
        });
        Some(numa.stats(owners))
    }
}
