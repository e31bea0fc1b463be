//! H-Store (Kallman et al., VLDB '08): partition locks instead of tuple-level
//! concurrency control.
//!
//! CC-META  none per tuple (the version word's latch only guards installs
//! against eviction); one lock word per partition in the engine.
//!
//! PARTITIONS  partition = hash(key >> the table's `partition_shift`) mod P,
//!             P = the engine's `hstore_partitions` (default: the worker count).
//!             A workload makes a foreign key the partition key by packing it
//!             in the high bits and setting the shift (TPC-C: warehouse id).
//!
//! PHASES
//!   access    before touching a key, the transaction takes its partition's
//!             lock (exclusive; waits a bounded time, then aborts — there is no
//!             global lock order for partitions discovered on the fly)
//!   read      the entry, without validation (nobody else is in the partition)
//!   commit    persist, install in place (moved to the writer's region when
//!             homed on another node in a NUMA-local-write mode), release
//!             every partition lock
//!
//! GUARANTEES
//!   Serializable: transactions on disjoint partitions never conflict, the
//!   others are serialised by the partition locks (strict 2PL on partitions).
//!   Scans lock the partitions of the rows they meet; new rows in unlocked
//!   gaps are caught by the commit-time re-scan.
//!
//! WHAT IT DOES NOT DO
//!   Stored procedures declaring their partitions up front, and the single-
//!   threaded partition executors of H-Store: workers stay general-purpose.

use super::Protocol;
use crate::config::CcKind;

pub struct HStore;

impl Protocol for HStore {
    const KIND: CcKind = CcKind::Hstore;
    const PARTITIONED: bool = true;
}

/// The partition of `key` in a table partitioned by `key >> shift`.
pub fn partition_of(key: u64, shift: u8, partitions: usize) -> usize {
    let k = key >> shift;
    // Fibonacci hashing spreads consecutive partition keys.
    (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % partitions.max(1)
}
