//! Helpers shared by the baseline engines' tests (`baseline_*.rs`).
#![allow(dead_code)]

use std::path::Path;

use zen_engine::{
    CcKind, ColumnType, Durability, Engine, EngineConfig, EngineKind, TableId, TableSchema,
    TxnOptions,
};
use zen_pmem::BackendKind;

pub const ROW: usize = 32;

/// The baseline designs under test.
pub const BASELINES: [EngineKind; 4] =
    [EngineKind::Ideal, EngineKind::Mmdb, EngineKind::Wbl, EngineKind::Falcon];
/// The baselines that persist (reopen, recovery, crash campaigns).
pub const PERSISTENT: [EngineKind; 3] = [EngineKind::Mmdb, EngineKind::Wbl, EngineKind::Falcon];

pub fn accounts() -> TableSchema {
    TableSchema::new("accounts")
        .column("balance", ColumnType::I64)
        .column("pad", ColumnType::Bytes(24))
}

/// A table with a secondary index on `owner` (8 bytes) and a balance.
pub fn owners() -> TableSchema {
    TableSchema::new("owners")
        .column("owner", ColumnType::U64)
        .column("balance", ColumnType::I64)
        .secondary_index("by_owner", &["owner"])
}

pub fn row(v: i64) -> Vec<u8> {
    let mut r = vec![0u8; ROW];
    r[0..8].copy_from_slice(&v.to_le_bytes());
    r
}

pub fn value(r: &[u8]) -> i64 {
    i64::from_le_bytes(r[0..8].try_into().unwrap())
}

/// `ideal` on DRAM, or a persistent baseline on a pool file in `dir`.
pub fn config(engine: EngineKind, dir: &Path, create: bool) -> EngineConfig {
    let pmem = if engine == EngineKind::Ideal { BackendKind::Dram } else { BackendKind::Fs };
    EngineConfig {
        engine,
        cc: CcKind::Silo,
        pmem,
        pool: (pmem == BackendKind::Fs).then(|| dir.join("baseline.pool")),
        pool_size_bytes: 16 << 20,
        page_size_bytes: 64 << 10,
        max_workers: 8,
        cache_size_bytes: 4 << 20,
        group_commit_interval_us: 20,
        create,
        ..Default::default()
    }
}

pub fn open(engine: EngineKind, dir: &Path, create: bool) -> Box<dyn Engine> {
    zen_engine::open(&config(engine, dir, create))
        .unwrap_or_else(|e| panic!("{}: open (create {create}): {e}", engine.name()))
}

pub fn immediate() -> TxnOptions {
    TxnOptions { durability: Some(Durability::Immediate), ..Default::default() }
}

/// Every (key, value) of a table, by a scan.
pub fn dump(engine: &dyn Engine, t: TableId) -> Vec<(u64, i64)> {
    let mut w = engine.worker().unwrap();
    w.run(&TxnOptions::default(), |tx| {
        let mut out = Vec::new();
        tx.scan(t, 0..=u64::from(u32::MAX), usize::MAX, &mut |k, r| {
            out.push((k, value(r)));
            true
        })?;
        Ok(out)
    })
    .unwrap()
}
