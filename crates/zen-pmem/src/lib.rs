//! `zen-pmem`: everything zenplus knows about persistent memory.
//!
//! - [`PmemBackend`]: the only door to persistent memory (`dax`, `fs`, `emu`,
//!   `dram`, `sim`, `heap`), chosen once and monomorphised.
//! - [`Pool`]: the on-media format (header, page table), the page allocator
//!   (the only persistent work of space management) and [`Persister`], the
//!   per-thread persist primitives (`write`, `write_u64_atomic`, `flush`,
//!   `fence`, `persist`, `read`) that count every NVM byte, line and fence.
//! - [`device`]: the NVM device model of the `emu` backend (latency,
//!   shared bandwidth, media granularity, write combining).
//! - [`sim`]: the crash simulator (strict Px86, paranoid and eADR images).
//! - [`sigbus`]: a SIGBUS inside a pool mapping reported with the pool's
//!   path (pools reserve their storage, `backend/space.rs`, so a full file
//!   system cannot cause one).
//!
//! All `unsafe` code of the project lives in this crate; `UNSAFE.md` at the
//! repository root lists the sites.

pub mod affinity;
pub mod alloc_count;
pub mod backend;
pub mod counters;
pub mod cpu;
pub mod device;
pub mod error;
pub mod expected;
pub mod header;
pub mod page_table;
pub mod pool;
pub mod sigbus;
pub mod sim;
pub mod zeroed;

pub use backend::{
    BackendKind, BackendOptions, DaxBackend, DramBackend, EmuBackend, FsBackend, HeapBackend,
    Marker, MemberFile, PersistenceDomain, PmemBackend,
};
pub use counters::{CounterSnapshot, WorkerCounters};
pub use device::{Charge, DeviceParams, NvmProfile, ParamError};
pub use error::{PmemError, Result};
/// The device parameters under their earlier name (`EngineConfig::latency`).
pub type LatencyModel = DeviceParams;
pub use page_table::{PageOwner, SYSTEM_TABLE};
pub use pool::{
    MAX_THREADS, MemberInfo, OwnerPages, Persister, Pool, PoolInfo, PoolMember, PoolOptions,
    SYSTEM_THREAD,
};
pub use sim::{CrashMode, SimBackend};
