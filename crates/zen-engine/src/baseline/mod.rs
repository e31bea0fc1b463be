//! The baseline engines Zen is measured against (Zen §2, §4; DESIGN §6),
//! behind the same `Engine` trait, workloads and NVM counters:
//!
//! | engine | rows | commit persists | recovery |
//! | --- | --- | --- | --- |
//! | [`ideal`] | DRAM | nothing | none |
//! | [`mmdb`] | DRAM up to the budget, the rest in NVM as volatile memory | one redo record per transaction, one fence | last checkpoint + log replay |
//! | [`wbl`] | versions in NVM with per-tuple CC metadata, DRAM tuple cache | each new version (one fence per tuple), a (cp, cd) record per group | undo versions in (cp, cd], rebuild indexes |
//! | [`falcon`] | one slot per tuple in NVM, updated in place | a redo record in a small per-worker window (flushed under ADR only), then the tuples (selective write-back) | replay the windows, rebuild indexes |
//!
//! All three run on [`occ`], a Silo core in DRAM; a design is a [`occ::Store`].
//! Every NVM byte goes through `zen_pmem::Persister`, so bytes, flushes and
//! fences are counted exactly as Zen's are.

pub mod falcon;
pub mod ideal;
pub mod mmdb;
pub mod occ;
pub mod wbl;

pub use falcon::FalconEngine;
pub use ideal::IdealEngine;
pub use mmdb::MmdbEngine;
pub use wbl::WblEngine;

use zen_pmem::{BackendKind, DaxBackend, DramBackend, EmuBackend, FsBackend, HeapBackend};

use crate::api::Engine;
use crate::config::{EngineConfig, EngineKind};
use crate::error::{Error, Result};

/// Pool thread slot of a worker's persister (slot 0 is the pool's own).
pub fn worker_thread(worker: usize) -> u32 {
    worker as u32 + 1
}

/// Pool thread slot through which a worker writes NVM it uses as *volatile*
/// memory (mmdb rows placed in NVM, CC metadata words): counted like any NVM
/// write, never flushed, and kept apart from the worker's durable writes so
/// the crash simulator's "acknowledged with pending stores" lint only sees
/// the latter.
pub fn volatile_thread(worker: usize) -> u32 {
    256 + worker as u32 + 1
}

/// Recovery threads: `recovery_threads`, else one per CPU, at most one per
/// unit of work (and at most 64).
pub fn recovery_threads(config: &EngineConfig, units: usize) -> usize {
    config
        .recovery_threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, units.clamp(1, 64))
}

/// Pool thread slot of checkpoints and other background persistence.
pub const BACKGROUND_THREAD: u32 = zen_pmem::MAX_THREADS as u32 - 1;

/// Backend options of a configuration (path, persistence domain, latency).
pub fn backend_options(config: &EngineConfig) -> zen_pmem::BackendOptions {
    let members = match (&config.pool, config.pool_per_node) {
        (Some(pool), Some(count)) => zen_pmem::pool::member_paths(pool, count),
        _ => Vec::new(),
    };
    zen_pmem::BackendOptions {
        path: members.first().cloned().or_else(|| config.pool.clone()),
        members,
        domain: config.domain,
        latency: config.latency,
    }
}

/// `ideal`: create only (validated by `EngineConfig::validate`).
pub(crate) fn open_ideal(config: &EngineConfig) -> Result<Box<dyn Engine>> {
    Ok(Box::new(IdealEngine::create(config)?))
}

/// `mmdb` and `wbl`: one `match` per axis (design × backend).
pub(crate) fn open_persistent(config: &EngineConfig) -> Result<Box<dyn Engine>> {
    match config.pmem {
        BackendKind::Dax => open_on::<DaxBackend>(config),
        BackendKind::Fs => open_on::<FsBackend>(config),
        BackendKind::Emu => open_on::<EmuBackend>(config),
        BackendKind::Dram => open_on::<DramBackend>(config),
        BackendKind::Heap => open_on::<HeapBackend>(config),
        BackendKind::Sim => Err(Error::InvalidConfig(
            "the crash simulator is driven by `zen crash-test` and the tests, not by --pmem".into(),
        )),
    }
}

fn open_on<B: zen_pmem::PmemBackend>(config: &EngineConfig) -> Result<Box<dyn Engine>> {
    match (config.engine, config.create) {
        (EngineKind::Mmdb, true) => Ok(Box::new(MmdbEngine::<B>::create(config)?)),
        (EngineKind::Mmdb, false) => Ok(Box::new(MmdbEngine::<B>::open(config)?)),
        (EngineKind::Wbl, true) => Ok(Box::new(WblEngine::<B>::create(config)?)),
        (EngineKind::Wbl, false) => Ok(Box::new(WblEngine::<B>::open(config)?)),
        (EngineKind::Falcon, true) => Ok(Box::new(FalconEngine::<B>::create(config)?)),
        (EngineKind::Falcon, false) => Ok(Box::new(FalconEngine::<B>::open(config)?)),
        (other, _) => Err(Error::InvalidConfig(format!(
            "engine {} is not a persistent baseline",
            other.name()
        ))),
    }
}
