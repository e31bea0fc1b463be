//! `zen-engine`: the Zen engine (Met-Cache, log-free persistent transactions,
//! lightweight NVM space management, scan-based recovery) and the
//! concurrency-control protocols that plug into it, behind the `Engine` trait.

pub mod api;
pub mod config;
pub mod db;
pub mod det;
pub mod error;
pub mod schema;

pub use api::{
    CacheStats, CommitInfo, Durability, Engine, EngineCounters, EngineStatus, EngineWorker,
    RecoveryReport, TableId, TableStatus, Transaction, Txn, TxnOptions, user_abort,
};
pub use config::{
    BaselineFault, CcKind, EngineConfig, EngineKind, FalconVariant, Fault, RaceFault,
};
pub use db::{Db, DbBuilder};
pub use det::{
    DeterministicEngine, EpochOutcome, EpochPhase, EpochStats, OneShot, OneShotTx, ProcId,
    ProcedureSet, Procedures,
};
pub use error::{AbortReason, Error, Result};
pub use schema::{Column, ColumnType, SecondaryIndex, TableSchema};

pub mod access;
pub mod baseline;
pub mod catalog;
pub mod cc;
pub mod heap;
pub mod index;
pub mod numa;
pub mod registry;
pub mod sched;
pub mod ts;
pub mod words;
pub mod zen;

pub use zen::ZenEngine;

use zen_pmem::{
    BackendKind, DaxBackend, DramBackend, EmuBackend, FsBackend, HeapBackend, PmemBackend,
};

/// Create (`config.create`) or open and recover an engine: one `match` per
/// axis (design × backend); the protocol is chosen inside the engine.
pub fn open(config: &EngineConfig) -> Result<Box<dyn Engine>> {
    config.validate()?;
    match config.engine {
        EngineKind::Zen => match config.pmem {
            BackendKind::Dax => open_zen::<DaxBackend>(config),
            BackendKind::Fs => open_zen::<FsBackend>(config),
            BackendKind::Emu => open_zen::<EmuBackend>(config),
            BackendKind::Dram => open_zen::<DramBackend>(config),
            BackendKind::Heap => open_zen::<HeapBackend>(config),
            BackendKind::Sim => Err(Error::InvalidConfig(
                "the crash simulator is driven by `zen crash-test` and the tests, not by --pmem"
                    .into(),
            )),
        },
        EngineKind::Ideal => baseline::open_ideal(config),
        EngineKind::Mmdb | EngineKind::Wbl | EngineKind::Falcon | EngineKind::Nvcaracal => {
            baseline::open_persistent(config)
        }
    }
}

fn open_zen<B: PmemBackend>(config: &EngineConfig) -> Result<Box<dyn Engine>> {
    match config.cc {
        CcKind::NoWait => open_zen_with::<B, cc::NoWait>(config),
        CcKind::WaitDie => open_zen_with::<B, cc::WaitDie>(config),
        CcKind::DlDetect => open_zen_with::<B, cc::DlDetect>(config),
        CcKind::Occ => open_zen_with::<B, cc::Occ>(config),
        CcKind::Silo => open_zen_with::<B, cc::Silo>(config),
        CcKind::Tictoc => open_zen_with::<B, cc::TicToc>(config),
        CcKind::Mvcc => open_zen_with::<B, cc::Mvcc>(config),
        CcKind::Hekaton => open_zen_with::<B, cc::Hekaton>(config),
        CcKind::Cicada => open_zen_with::<B, cc::Cicada>(config),
        CcKind::Hstore => open_zen_with::<B, cc::HStore>(config),
        CcKind::To => Err(Error::InvalidConfig(
            "--engine zen does not run --cc to (single-version TO is a baseline protocol)".into(),
        )),
    }
}

fn open_zen_with<B: PmemBackend, P: cc::Protocol>(
    config: &EngineConfig,
) -> Result<Box<dyn Engine>> {
    if config.create {
        Ok(Box::new(ZenEngine::<B, P>::create(config)?))
    } else {
        Ok(Box::new(ZenEngine::<B, P>::open(config)?))
    }
}
