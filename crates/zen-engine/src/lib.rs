//! `zen-engine`: the Zen engine (Met-Cache, log-free persistent transactions,
//! lightweight NVM space management, scan-based recovery) and the
//! concurrency-control protocols that plug into it, behind the `Engine` trait.

pub mod api;
pub mod config;
pub mod error;
pub mod schema;

pub use api::{
    CacheStats, CommitInfo, Durability, Engine, EngineStatus, EngineWorker, RecoveryReport,
    TableId, TableStatus, Transaction, TxnOptions, user_abort,
};
pub use error::{AbortReason, Error, Result};
pub use schema::{Column, ColumnType, SecondaryIndex, TableSchema};
pub use config::{CcKind, EngineConfig, EngineKind};
