//! `EngineConfig`: every knob of an engine, with documented defaults and `validate()`.
//!
//! The CLI turns flags into this struct; `crate::open` turns it into a running
//! engine with one `match` per axis (engine design × protocol × backend).

use std::path::PathBuf;

use serde::Serialize;
use zen_pmem::{BackendKind, LatencyModel, NvmProfile, PersistenceDomain};

use crate::api::Durability;
use crate::error::{Error, Result};

/// Engine designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Zen,
}

impl EngineKind {
    pub const ALL: [EngineKind; 1] = [EngineKind::Zen];
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Zen => "zen",
        }
    }
    pub fn parse(s: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|k| k.name() == s)
    }
    pub fn describe(self) -> &'static str {
        match self {
            EngineKind::Zen => {
                "Zen: Met-Cache in DRAM, log-free persistent transactions (LP bit), scan-based recovery"
            }
        }
    }
}

/// Concurrency-control protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CcKind {
    Silo,
    Mvcc,
}

impl CcKind {
    pub const ALL: [CcKind; 2] = [CcKind::Silo, CcKind::Mvcc];
    pub fn name(self) -> &'static str {
        match self {
            CcKind::Silo => "silo",
            CcKind::Mvcc => "mvcc",
        }
    }
    pub fn parse(s: &str) -> Option<CcKind> {
        CcKind::ALL.into_iter().find(|k| k.name() == s)
    }
    /// One line: family and guarantees.
    pub fn describe(self) -> &'static str {
        match self {
            CcKind::Silo => {
                "single-version OCC (Silo): serializable, strict; scans re-validated at commit (phantom-safe)"
            }
            CcKind::Mvcc => {
                "multi-version timestamp ordering, versions in the Met-Cache: serializable; scans re-validated (phantom-safe)"
            }
        }
    }
}

/// A deliberate bug, switched on at run time by the bug-injection suite to
/// prove that the crash campaigns catch it (VERIFICATION §1). Never set in
/// production; `None` in every configuration the CLI builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Alg. 1 without the fence between the tuples and the LP store.
    NoFenceBeforeLp,
    /// Acknowledge an Immediate commit before the fence after the LP store.
    AckBeforeLpFence,
    /// Write the LP word as two 4-byte halves.
    TornLpWord,
    /// Reuse a reclaimed slot without first zeroing its Tx-CTS durably (S1).
    ReuseWithoutZeroing,
    /// Zero a tombstone without waiting for older versions (S3).
    EarlyTombstone,
    /// Assume eADR on an ADR machine: no cache-line flushes.
    SkipFlushes,
    /// Recovery zeroes winning tombstones with (before) the older versions.
    RecoveryTombstonesFirst,
    /// Zero a worker's newest LP slot without raising its commit floor first
    /// (S4), at run time and in recovery.
    NoCommitFloor,
}

impl Fault {
    pub const ALL: [Fault; 8] = [
        Fault::NoFenceBeforeLp,
        Fault::AckBeforeLpFence,
        Fault::TornLpWord,
        Fault::ReuseWithoutZeroing,
        Fault::EarlyTombstone,
        Fault::SkipFlushes,
        Fault::RecoveryTombstonesFirst,
        Fault::NoCommitFloor,
    ];
}

/// Everything needed to create or open an engine.
#[derive(Debug, Clone, Serialize)]
pub struct EngineConfig {
    pub engine: EngineKind,
    pub cc: CcKind,
    /// Backend (`--pmem`).
    pub pmem: BackendKind,
    /// Pool file for file backends.
    pub pool: Option<PathBuf>,
    /// Pool size in bytes when creating (default 1 GiB).
    pub pool_size_bytes: u64,
    /// Pool page size when creating (default 2 MiB).
    pub page_size_bytes: u64,
    /// Latency model for `emu` (default: the optane preset).
    pub latency: LatencyModel,
    pub domain: PersistenceDomain,
    /// Most workers that may register (default 64).
    pub max_workers: usize,
    /// Met-Cache budget in bytes for all workers and tables (default 256 MiB);
    /// overridden by `dram_ratio` when set.
    pub cache_size_bytes: u64,
    /// Cache budget = data size / ratio (the paper's P: 4, 8, 16), computed when
    /// the engine is opened on a loaded pool or from `expected_data_bytes`.
    pub dram_ratio: Option<f64>,
    /// Hint for `dram_ratio` when creating an empty pool.
    pub expected_data_bytes: Option<u64>,
    /// Default durability of commits (the library default is Immediate).
    pub durability: Durability,
    /// Recovery threads (default: one per region, at most the CPU count).
    pub recovery_threads: Option<usize>,
    /// Tables in persist order: the LP tuple comes from the first of these the
    /// transaction writes (§3.3.4). Empty = table creation order.
    pub persist_order: Vec<String>,
    /// Create a new pool (true) or open and recover an existing one (false).
    pub create: bool,
    /// Bug injection for the verification suite only (`None` otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            engine: EngineKind::Zen,
            cc: CcKind::Silo,
            pmem: BackendKind::Dram,
            pool: None,
            pool_size_bytes: 1 << 30,
            page_size_bytes: 2 << 20,
            latency: NvmProfile::Optane.model(),
            domain: PersistenceDomain::Adr,
            max_workers: 64,
            cache_size_bytes: 256 << 20,
            dram_ratio: None,
            expected_data_bytes: None,
            durability: Durability::Immediate,
            recovery_threads: None,
            persist_order: Vec::new(),
            create: true,
            fault: None,
        }
    }
}

impl EngineConfig {
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if self.max_workers == 0 || self.max_workers > 250 {
            return bad(format!("max_workers {} outside 1..=250", self.max_workers));
        }
        if let Some(r) = self.dram_ratio
            && !(r.is_finite() && r >= 1.0)
        {
            return bad(format!("dram ratio {r} must be a number >= 1"));
        }
        if self.cache_size_bytes < 64 << 10 {
            return bad(format!("cache size {} bytes is below 64 KiB", self.cache_size_bytes));
        }
        if matches!(self.pmem, BackendKind::Dax | BackendKind::Fs | BackendKind::Emu)
            && self.pool.is_none()
        {
            return bad(format!("--pmem {} needs --pool PATH", self.pmem.name()));
        }
        if !self.create && !self.pmem.is_reopenable() {
            return bad(format!("a `{}` pool cannot be reopened", self.pmem.name()));
        }
        if self.recovery_threads == Some(0) {
            return bad("recovery threads must be at least 1".into());
        }
        Ok(())
    }
}
