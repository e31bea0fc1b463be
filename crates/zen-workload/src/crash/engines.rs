//! The engines a campaign runs, behind one seam: [`registration`] maps an
//! (engine, protocol) to a [`Registration`] (how to create and recover it
//! on a simulated pool), one line per engine and protocol. `ideal` has no
//! line: it persists nothing and cannot reopen a pool, so
//! [`super::CampaignConfig::validate`] refuses it with
//! [`super::ConfigError::EngineNotCrashCheckable`]. nvcaracal runs the
//! interactive campaigns through its `Engine` adapter (each interactive
//! transaction is a one-transaction epoch: logged, executed, persisted,
//! marked), and epoch mode through its deterministic seam (`epochs.rs`),
//! found with `Engine::deterministic()`, not by name.

use zen_engine::baseline::{FalconEngine, MmdbEngine, NvcaracalEngine, WblEngine};
use zen_engine::cc::{self, Protocol};
use zen_engine::{CcKind, Engine, EngineConfig, EngineKind, EngineWorker, ZenEngine};
use zen_pmem::Pool;
use zen_pmem::sim::SimBackend;

use super::violation::ConfigError;

/// An engine opened on a simulated pool, behind a trait object so the
/// campaign is generic over the subject only.
pub trait SimOpened: Send + Sync {
    fn engine(&self) -> &dyn Engine;
    fn backend(&self) -> &SimBackend;
    /// Drop the engine and hand back its pool (`None` if still referenced).
    fn release(self: Box<Self>) -> Option<Pool<SimBackend>>;
    /// A scripted step with no transaction: what the engine does between
    /// transactions that a crash should meet (mmdb: a checkpoint, which
    /// truncates the log; Zen and wbl: a sync).
    fn maintenance(&self, worker: &mut dyn EngineWorker) -> zen_engine::Result<()> {
        worker.sync()
    }
}

impl<P: Protocol> SimOpened for ZenEngine<SimBackend, P> {
    fn engine(&self) -> &dyn Engine {
        self
    }
    fn backend(&self) -> &SimBackend {
        self.shared().pool.backend()
    }
    fn release(self: Box<Self>) -> Option<Pool<SimBackend>> {
        self.into_pool()
    }
}

impl SimOpened for MmdbEngine<SimBackend> {
    fn engine(&self) -> &dyn Engine {
        self
    }
    fn backend(&self) -> &SimBackend {
        self.core().store.pool.backend()
    }
    fn release(self: Box<Self>) -> Option<Pool<SimBackend>> {
        self.into_pool()
    }
    fn maintenance(&self, _worker: &mut dyn EngineWorker) -> zen_engine::Result<()> {
        self.checkpoint().map(|_| ())
    }
}

impl SimOpened for WblEngine<SimBackend> {
    fn engine(&self) -> &dyn Engine {
        self
    }
    fn backend(&self) -> &SimBackend {
        self.core().store.pool.backend()
    }
    fn release(self: Box<Self>) -> Option<Pool<SimBackend>> {
        self.into_pool()
    }
}

impl SimOpened for FalconEngine<SimBackend> {
    fn engine(&self) -> &dyn Engine {
        self
    }
    fn backend(&self) -> &SimBackend {
        self.core().store.pool.backend()
    }
    fn release(self: Box<Self>) -> Option<Pool<SimBackend>> {
        self.into_pool()
    }
}

impl SimOpened for NvcaracalEngine<SimBackend> {
    fn engine(&self) -> &dyn Engine {
        self
    }
    fn backend(&self) -> &SimBackend {
        self.pool().backend()
    }
    fn release(self: Box<Self>) -> Option<Pool<SimBackend>> {
        self.into_pool()
    }
}

type OpenFn = fn(Pool<SimBackend>, &EngineConfig) -> zen_engine::Result<Box<dyn SimOpened>>;

/// How to create and recover one engine × protocol on the simulator.
#[derive(Clone, Copy)]
pub struct Registration {
    pub kind: EngineKind,
    pub create: OpenFn,
    pub open: OpenFn,
}

impl Registration {
    fn zen<P: Protocol>() -> Registration {
        Registration {
            kind: EngineKind::Zen,
            create: |pool, c| Ok(Box::new(ZenEngine::<SimBackend, P>::create_on(pool, c)?)),
            open: |pool, c| Ok(Box::new(ZenEngine::<SimBackend, P>::open_on(pool, c)?)),
        }
    }
}

/// The engine × protocol a campaign runs: one line each.
pub fn registration(engine: EngineKind, protocol: CcKind) -> Result<Registration, ConfigError> {
    Ok(match (engine, protocol) {
        (EngineKind::Zen, CcKind::NoWait) => Registration::zen::<cc::NoWait>(),
        (EngineKind::Zen, CcKind::WaitDie) => Registration::zen::<cc::WaitDie>(),
        (EngineKind::Zen, CcKind::DlDetect) => Registration::zen::<cc::DlDetect>(),
        (EngineKind::Zen, CcKind::Occ) => Registration::zen::<cc::Occ>(),
        (EngineKind::Zen, CcKind::Silo) => Registration::zen::<cc::Silo>(),
        (EngineKind::Zen, CcKind::Tictoc) => Registration::zen::<cc::TicToc>(),
        (EngineKind::Zen, CcKind::Mvcc) => Registration::zen::<cc::Mvcc>(),
        (EngineKind::Zen, CcKind::Hekaton) => Registration::zen::<cc::Hekaton>(),
        (EngineKind::Zen, CcKind::Cicada) => Registration::zen::<cc::Cicada>(),
        (EngineKind::Zen, CcKind::Hstore) => Registration::zen::<cc::HStore>(),
        (EngineKind::Zen, CcKind::To) => {
            return Err(ConfigError::OutOfRange {
                flag: "--cc",
                value: "to".into(),
                allowed: "zen runs the ten protocols of Zen+ §5.4, not single-version TO".into(),
            });
        }
        (EngineKind::Mmdb, _) => Registration {
            kind: EngineKind::Mmdb,
            create: |pool, c| Ok(Box::new(MmdbEngine::create_on(pool, c)?)),
            open: |pool, c| Ok(Box::new(MmdbEngine::open_on(pool, c)?)),
        },
        (EngineKind::Wbl, _) => Registration {
            kind: EngineKind::Wbl,
            create: |pool, c| Ok(Box::new(WblEngine::create_on(pool, c)?)),
            open: |pool, c| Ok(Box::new(WblEngine::open_on(pool, c)?)),
        },
        (EngineKind::Falcon, _) => Registration {
            kind: EngineKind::Falcon,
            create: |pool, c| Ok(Box::new(FalconEngine::create_on(pool, c)?)),
            open: |pool, c| Ok(Box::new(FalconEngine::open_on(pool, c)?)),
        },
        (EngineKind::Nvcaracal, _) => Registration {
            kind: EngineKind::Nvcaracal,
            create: |pool, c| Ok(Box::new(NvcaracalEngine::create_on(pool, c)?)),
            open: |pool, c| Ok(Box::new(NvcaracalEngine::open_on(pool, c)?)),
        },
        (EngineKind::Ideal, _) => {
            return Err(ConfigError::EngineNotCrashCheckable { engine: engine.name() });
        }
    })
}
