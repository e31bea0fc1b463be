//! Binding each worker's DRAM cache region to its node's memory (`mbind`).
//!
//! On REAL nodes a Met-Cache chunk (1,024 entries and their rows) is bound
//! to the node of the worker whose region it belongs to as soon as it is
//! allocated, with `MPOL_PREFERRED` and `MPOL_MF_MOVE`
//! (`zen_pmem::affinity::bind_memory`): the owner worker, pinned to that
//! node, first-touches it anyway (C1: only the owner allocates entries), so
//! binding makes the placement explicit and moves pages the allocator had
//! already placed elsewhere. Preferred rather than bind: a full node spills
//! to another one instead of failing an allocation. On VIRTUAL nodes
//! nothing is bound (all memory is physically on the machine's one node);
//! heap pages are placed by their per-node pool file (`--pool-per-node`),
//! not here.
//!
//! A refused `mbind` (`ENOSYS` without NUMA support, `EPERM` in a restricted
//! container) is counted and its first message kept for the run report: a
//! warning, never an error, since placement changes speed, not results.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use zen_pmem::affinity::{self, MemoryPolicy};

/// The policy every cache chunk is bound with.
pub const CACHE_POLICY: MemoryPolicy = MemoryPolicy::Preferred;

/// Binding counters of one engine (shared by every cache region).
#[derive(Debug, Default)]
pub struct MemoryBinder {
    /// Kernel node number of each layout node.
    node_ids: Vec<usize>,
    bound_bytes: AtomicU64,
    chunks_bound: AtomicU64,
    failures: AtomicU64,
    first_error: OnceLock<String>,
}

/// What the run report says about memory binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryBindingReport {
    /// `mbind` was used (real nodes); false on virtual nodes.
    pub attempted: bool,
    pub policy: MemoryPolicy,
    pub chunks_bound: u64,
    pub bound_bytes: u64,
    pub failures: u64,
    /// The first refusal's message, e.g. "Operation not permitted (os error 1)".
    pub first_error: Option<String>,
}

impl MemoryBinder {
    /// A binder for layout nodes numbered by the kernel as `node_ids`.
    pub fn new(node_ids: Vec<usize>) -> MemoryBinder {
        MemoryBinder { node_ids, ..MemoryBinder::default() }
    }

    /// Bind `memory` to layout node `node`; failures are counted, not returned.
    pub fn bind<T>(&self, memory: &[T], node: usize) {
        let Some(&kernel_node) = self.node_ids.get(node) else {
            self.fail(format!("layout node {node} has no kernel node number"));
            return;
        };
        match affinity::bind_memory(memory, kernel_node, CACHE_POLICY) {
            Ok(bytes) => {
                self.bound_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
            }
            Err(e) => self.fail(format!("mbind to node {kernel_node}: {e}")),
        }
    }

    /// Count one chunk (both of its allocations) as bound.
    pub fn chunk_done(&self) {
        self.chunks_bound.fetch_add(1, Ordering::Relaxed);
    }

    fn fail(&self, message: String) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let _ = self.first_error.set(message);
    }

    pub fn report(&self) -> MemoryBindingReport {
        MemoryBindingReport {
            attempted: true,
            policy: CACHE_POLICY,
            chunks_bound: self.chunks_bound.load(Ordering::Relaxed),
            bound_bytes: self.bound_bytes.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            first_error: self.first_error.get().cloned(),
        }
    }

    /// The report on virtual nodes: nothing attempted.
    pub fn virtual_report() -> MemoryBindingReport {
        MemoryBindingReport {
            attempted: false,
            policy: CACHE_POLICY,
            chunks_bound: 0,
            bound_bytes: 0,
            failures: 0,
            first_error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_to_node_0_is_counted_and_an_unknown_node_is_a_counted_failure() {
        let binder = MemoryBinder::new(vec![0]);
        let memory = vec![0u64; 1 << 16];
        binder.bind(&memory, 0);
        binder.chunk_done();
        let r = binder.report();
        assert!(r.attempted && r.bound_bytes >= (1 << 19) - 8192, "{r:?}");
        assert_eq!((r.chunks_bound, r.failures, r.first_error), (1, 0, None));
        binder.bind(&memory, 1);
        let r = binder.report();
        assert_eq!(r.failures, 1);
        assert!(r.first_error.unwrap().contains("layout node 1"));
    }

    #[test]
    fn a_bound_cache_region_binds_each_chunk_as_it_is_allocated() {
        let binder = std::sync::Arc::new(MemoryBinder::new(vec![0]));
        let region = crate::zen::cache::CacheRegion::new(100, 4096);
        region.bind_to_node(std::sync::Arc::clone(&binder), 0);
        assert_eq!(binder.report().chunks_bound, 0, "chunks are allocated lazily");
        let _ = region.entry(0);
        let _ = region.entry(5);
        let _ = region.entry(2000);
        let r = binder.report();
        assert_eq!((r.chunks_bound, r.failures), (2, 0), "{r:?}");
        assert!(r.bound_bytes > 0, "{r:?}");
    }
}
