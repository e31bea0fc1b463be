//! `Db`: the embedding API. A cheap-to-clone handle (`Clone + Send + Sync`) on
//! an engine, built with [`DbBuilder`]:
//!
//! ```no_run
//! use zen_engine::{ColumnType, Db, TableSchema, TxnOptions};
//! let db = Db::builder().pool("/dev/shm/app.pool").pool_size_bytes(64 << 20).create()?;
//! let t = db.create_table(&TableSchema::new("kv").column("v", ColumnType::I64))?;
//! let mut worker = db.worker()?;                       // one per thread
//! worker.run(&TxnOptions::default(), |tx| tx.insert(t, 1, &7i64.to_le_bytes()))?;
//! let mut tx = worker.begin(&TxnOptions::default())?;  // explicit; drop = abort
//! let mut row = [0u8; 8];
//! use zen_engine::Transaction;
//! tx.get(t, 1, &mut row)?;
//! tx.commit()?;
//! drop(worker);
//! db.close()?;
//! # Ok::<(), zen_engine::Error>(())
//! ```

use std::path::PathBuf;
use std::sync::Arc;

use zen_pmem::BackendKind;

use crate::api::{Durability, Engine, EngineWorker, TableId};
use crate::config::{CcKind, EngineConfig, EngineKind};
use crate::error::{Error, Result};
use crate::schema::TableSchema;

/// A handle on an open engine; clones share it.
#[derive(Clone)]
pub struct Db {
    engine: Arc<Box<dyn Engine>>,
}

impl Db {
    pub fn builder() -> DbBuilder {
        DbBuilder { config: EngineConfig { pmem: BackendKind::Fs, ..EngineConfig::default() } }
    }

    /// Wrap an engine opened with [`crate::open`].
    pub fn from_engine(engine: Box<dyn Engine>) -> Db {
        Db { engine: Arc::new(engine) }
    }

    pub fn engine(&self) -> &dyn Engine {
        self.engine.as_ref().as_ref()
    }

    pub fn create_table(&self, schema: &TableSchema) -> Result<TableId> {
        self.engine().create_table(schema)
    }

    pub fn table_id(&self, name: &str) -> Result<TableId> {
        self.engine().table_id(name)
    }

    /// Register a worker for the calling thread (drop it to unregister).
    pub fn worker(&self) -> Result<Box<dyn EngineWorker + '_>> {
        self.engine().worker()
    }

    /// Close cleanly; fails while other clones or workers are alive.
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.engine) {
            Ok(engine) => engine.close(),
            Err(_) => Err(Error::InvalidConfig("close: other handles of this Db are alive".into())),
        }
    }
}

/// Builds a [`Db`] from an [`EngineConfig`] with readable setters.
pub struct DbBuilder {
    config: EngineConfig,
}

impl DbBuilder {
    pub fn pool(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.pool = Some(path.into());
        self
    }
    pub fn pmem(mut self, kind: BackendKind) -> Self {
        self.config.pmem = kind;
        self
    }
    pub fn engine(mut self, kind: EngineKind) -> Self {
        self.config.engine = kind;
        self
    }
    pub fn cc(mut self, cc: CcKind) -> Self {
        self.config.cc = cc;
        self
    }
    pub fn pool_size_bytes(mut self, bytes: u64) -> Self {
        self.config.pool_size_bytes = bytes;
        self
    }
    pub fn cache_size_bytes(mut self, bytes: u64) -> Self {
        self.config.cache_size_bytes = bytes;
        self
    }
    pub fn max_workers(mut self, workers: usize) -> Self {
        self.config.max_workers = workers;
        self
    }
    pub fn durability(mut self, durability: Durability) -> Self {
        self.config.durability = durability;
        self
    }
    /// Every other knob.
    pub fn config(mut self, f: impl FnOnce(&mut EngineConfig)) -> Self {
        f(&mut self.config);
        self
    }
    /// Create a new pool (never overwrites an existing file).
    pub fn create(mut self) -> Result<Db> {
        self.config.create = true;
        Ok(Db::from_engine(crate::open(&self.config)?))
    }
    /// Open an existing pool and recover it.
    pub fn open(mut self) -> Result<Db> {
        self.config.create = false;
        Ok(Db::from_engine(crate::open(&self.config)?))
    }
}
