//! The baseline engines Zen is measured against (Zen §2, §4; DESIGN §6),
//! behind the same `Engine` trait, workloads and NVM counters:
//!
//! | engine | rows | commit persists | recovery |
//! | --- | --- | --- | --- |
//! | [`ideal`] | DRAM | nothing | none |
//! | [`mmdb`] | DRAM up to the budget, the rest in NVM as volatile memory | one redo record per transaction, one fence | last checkpoint + log replay |
//! | [`wbl`] | versions in NVM with per-tuple CC metadata, DRAM tuple cache | each new version (one fence per tuple), a (cp, cd) record per group | undo versions in (cp, cd], rebuild indexes |
//! | [`nvcaracal`] | one dual-version slot per row in NVM, pending versions of the running epoch in DRAM | the epoch's inputs (logged before it runs), each row's final version once per epoch, then the epoch number | revert the crashed epoch's versions, replay its logged inputs |
//! | [`falcon`] | one slot per tuple in NVM, updated in place | a redo record in a small per-worker window (flushed under ADR only), then the tuples (selective write-back) | replay the windows, rebuild indexes |
//!
//! ideal, mmdb, wbl and falcon run on [`occ`], a Silo core in DRAM (falcon
//! also with 2PL, TO and MVCC protocols, `occ/protocol.rs`); a design is
//! a [`occ::Store`]. nvcaracal runs its own deterministic epochs.
//! Every NVM byte goes through `zen_pmem::Persister`, so bytes, flushes and
//! fences are counted exactly as Zen's are.

pub mod falcon;
pub mod ideal;
pub mod mmdb;
pub mod nvcaracal;
pub mod occ;
pub mod wbl;

pub use falcon::FalconEngine;
pub use ideal::IdealEngine;
pub use mmdb::MmdbEngine;
pub use nvcaracal::NvcaracalEngine;
pub use wbl::WblEngine;

use zen_pmem::{
    BackendKind, DaxBackend, DramBackend, EmuBackend, FsBackend, HeapBackend, PmemBackend, Pool,
};

use crate::api::Engine;
use crate::catalog::{self, CatalogDoc};
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

/// A new pool per a validated `config` (every baseline's `create`).
pub(crate) fn create_pool<B: PmemBackend>(config: &EngineConfig) -> Result<Pool<B>> {
    config.validate()?;
    Ok(Pool::<B>::create(
        &backend_options(config),
        config.pool_size_bytes,
        &zen_pmem::PoolOptions { page_size: config.page_size_bytes, features: 0 },
    )?)
}

/// Refuse to build an empty engine on a pool that already holds a catalog
/// (every baseline's `create_on`): it is opened, never overwritten.
pub(crate) fn require_no_catalog<B: PmemBackend>(pool: &Pool<B>) -> Result<()> {
    if pool.catalog_root().is_some() {
        return Err(Error::InvalidConfig(format!(
            "{}: pool already holds a catalog; open it instead",
            pool.path().display()
        )));
    }
    Ok(())
}

/// Read the catalog of a pool that engine `engine` made (`a_engine`: its
/// name with the article, for the message) and check the magic word of its
/// meta page (the catalog's floor page). The catalog and the meta page's
/// offset; a pool of another engine is `WrongEngine`.
pub(crate) fn open_catalog<B: PmemBackend>(
    pool: &Pool<B>,
    engine: &str,
    a_engine: &str,
    magic: u64,
) -> Result<(CatalogDoc, u64)> {
    let doc = catalog::read(pool)?.ok_or_else(|| {
        Error::Corrupt(format!(
            "{}: pool has no catalog (not {a_engine} pool, or its creation crashed)",
            pool.path().display()
        ))
    })?;
    if doc.engine != engine {
        return Err(Error::WrongEngine { expected: engine.into(), found: doc.engine });
    }
    let meta = pool.page_offset(doc.floor_page);
    if pool.backend().load_u64(meta) != magic {
        return Err(Error::Corrupt(format!("meta page {}: bad magic", doc.floor_page)));
    }
    Ok((doc, meta))
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
        (EngineKind::Nvcaracal, true) => Ok(Box::new(NvcaracalEngine::<B>::create(config)?)),
        (EngineKind::Nvcaracal, false) => Ok(Box::new(NvcaracalEngine::<B>::open(config)?)),
        (other, _) => Err(Error::InvalidConfig(format!(
            "engine {} is not a persistent baseline",
            other.name()
        ))),
    }
}
