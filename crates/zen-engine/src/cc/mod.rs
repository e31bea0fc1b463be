//! Concurrency-control protocols. CC-Meta lives only in DRAM (Met-Cache
//! entries, `Entry::cc`), never in the heap: that is the point of the
//! Met-Cache. Protocol code never touches persistent memory.

pub mod silo;
