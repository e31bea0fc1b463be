//! Helpers shared by the engine's integration tests.
#![allow(dead_code)]

use zen_engine::{CcKind, ColumnType, EngineConfig, TableSchema};
use zen_pmem::BackendKind;

pub const ROW: usize = 32;

pub fn accounts() -> TableSchema {
    TableSchema::new("accounts")
        .column("balance", ColumnType::I64)
        .column("pad", ColumnType::Bytes(24))
}

pub fn row(v: i64) -> Vec<u8> {
    let mut r = vec![0u8; ROW];
    r[0..8].copy_from_slice(&v.to_le_bytes());
    r
}

pub fn value(r: &[u8]) -> i64 {
    i64::from_le_bytes(r[0..8].try_into().unwrap())
}

/// A small config on a pool file in `dir` (64 KiB pages keep pools tiny).
pub fn fs_config(dir: &std::path::Path, create: bool, cc: CcKind) -> EngineConfig {
    EngineConfig {
        cc,
        pmem: BackendKind::Fs,
        pool: Some(dir.join("test.pool")),
        pool_size_bytes: 16 << 20,
        page_size_bytes: 64 << 10,
        max_workers: 8,
        cache_size_bytes: 4 << 20,
        create,
        ..Default::default()
    }
}

pub fn dram_config(cc: CcKind) -> EngineConfig {
    EngineConfig {
        cc,
        pmem: BackendKind::Dram,
        pool_size_bytes: 64 << 20,
        page_size_bytes: 64 << 10,
        max_workers: 8,
        cache_size_bytes: 8 << 20,
        ..Default::default()
    }
}
