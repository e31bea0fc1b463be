//! Shared helpers of the zenplus fuzz targets: the small base images the
//! targets mutate, and the mutation encoding.
//!
//! A fuzz input is a list of 11-byte records `[tag, index (u16 LE), value
//! (u64 LE)]`. Each record overwrites one aligned word of the base image,
//! aimed by `tag` at a part of the format where a corruption means
//! something: the pool header, the page table, page headers, slot headers,
//! the catalog page, or any word; tag 6 truncates the image instead. Aiming
//! at words (rather than at random byte offsets of a 1.5 MiB image) lets
//! libFuzzer reach the interesting checks in a few thousand executions,
//! while the "any word" tag keeps every byte reachable.

use std::sync::OnceLock;

use zen_engine::cc::Silo;
use zen_engine::{
    ColumnType, Durability, Engine, EngineConfig, TableSchema, TxnOptions, ZenEngine,
};
use zen_pmem::sim::SimBackend;
use zen_pmem::{BackendKind, PageOwner, PersistenceDomain, Pool, PoolOptions};

pub const PAGE_BYTES: u64 = 64 << 10;
const RECORD: usize = 11;
/// Slot size of the base Zen image's tables (32-byte rows).
pub const SLOT_BYTES: u64 = 48;

/// A base image and where its parts are.
pub struct Base {
    pub image: Vec<u8>,
    pub pages: u64,
    pub catalog: Option<u64>,
    /// Pages owned by a heap (non-system) owner.
    pub heap_pages: Vec<u64>,
}

fn base_of(image: Vec<u8>) -> Base {
    let word = |at: usize| u64::from_le_bytes(image[at..at + 8].try_into().unwrap());
    let pages = image.len() as u64 / PAGE_BYTES;
    let root = word(64);
    let catalog = (root != 0).then_some(root & 0xFFFF_FFFF);
    let heap_pages = (1..pages)
        .filter(|&p| {
            let e = word(4096 + 8 * p as usize);
            e != 0 && e & 0xFFFF_FFFF != 0xFFFF_FFFF
        })
        .collect();
    Base { image, pages, catalog, heap_pages }
}

/// A 6-page pool: pages owned by three owners, one released again.
pub fn pool_base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let sim = SimBackend::new(6 * PAGE_BYTES, PersistenceDomain::Adr);
        let pool = Pool::format(sim, &PoolOptions { page_size: PAGE_BYTES, features: 0 }).unwrap();
        let a = PageOwner { table: 0, worker: 0 };
        let b = PageOwner { table: 1, worker: 3 };
        let p1 = pool.allocate_page(1, a).unwrap();
        pool.allocate_page(1, b).unwrap();
        pool.allocate_page(0, PageOwner::SYSTEM).unwrap();
        pool.release_page(1, p1, a).unwrap();
        pool.allocate_page(2, a).unwrap();
        let image = pool.backend().visible_image();
        pool.abandon();
        base_of(image)
    })
}

/// The engine configuration of the Zen base image (and of its recovery).
pub fn zen_config() -> EngineConfig {
    EngineConfig {
        pmem: BackendKind::Sim,
        page_size_bytes: PAGE_BYTES,
        max_workers: 3,
        cache_size_bytes: 1 << 20,
        durability: Durability::Immediate,
        recovery_threads: Some(1),
        ..EngineConfig::default()
    }
}

fn row(v: i64) -> [u8; 32] {
    let mut r = [0u8; 32];
    r[..8].copy_from_slice(&v.to_le_bytes());
    r
}

/// A 16-page Zen pool: two tables of 32-byte rows with inserts, updates
/// (superseded versions) and deletes (tombstones) by two workers.
pub fn zen_base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let sim = SimBackend::new(16 * PAGE_BYTES, PersistenceDomain::Adr);
        let pool = Pool::format(sim, &PoolOptions { page_size: PAGE_BYTES, features: 0 }).unwrap();
        let engine = ZenEngine::<SimBackend, Silo>::create_on(pool, &zen_config()).unwrap();
        {
            let e: &dyn Engine = &engine;
            let schema = |name: &str| {
                TableSchema::new(name)
                    .column("v", ColumnType::I64)
                    .column("pad", ColumnType::Bytes(24))
            };
            let t0 = e.create_table(&schema("a")).unwrap();
            let t1 = e.create_table(&schema("b")).unwrap();
            let mut w0 = e.worker().unwrap();
            let mut w1 = e.worker().unwrap();
            let o = TxnOptions::default();
            w0.run(&o, |tx| (0..12).try_for_each(|k| tx.insert(t0, k, &row(k as i64)))).unwrap();
            for k in 0..6u64 {
                w1.run(&o, |tx| {
                    tx.update(t0, k, &row(100 + k as i64))?;
                    tx.insert(t1, k, &row(1))
                })
                .unwrap();
            }
            w0.run(&o, |tx| (8..10).try_for_each(|k| tx.delete(t0, k))).unwrap();
            w1.run(&o, |tx| tx.update(t0, 1, &row(7))).unwrap();
            w0.sync().unwrap();
            w1.sync().unwrap();
        }
        let pool = engine.into_pool().unwrap();
        let image = pool.backend().visible_image();
        pool.abandon();
        base_of(image)
    })
}

/// Apply the records of `data` (module docs) to a copy of `base`.
pub fn mutate(base: &Base, data: &[u8]) -> Vec<u8> {
    let mut image = base.image.clone();
    for rec in data.chunks_exact(RECORD) {
        let tag = rec[0];
        let index = u64::from(u16::from_le_bytes([rec[1], rec[2]]));
        let value = u64::from_le_bytes(rec[3..11].try_into().unwrap());
        let len = image.len() as u64;
        let at = match tag % 7 {
            0 => 8 * (index % 10),
            1 => 4096 + 8 * (index % base.pages),
            2 => PAGE_BYTES * (index % base.pages) + 8 * ((index / base.pages) % 8),
            3 if !base.heap_pages.is_empty() => {
                let page = base.heap_pages[index as usize % base.heap_pages.len()];
                let slot = (index / base.heap_pages.len() as u64) % 64;
                PAGE_BYTES * page + 64 + slot * SLOT_BYTES + 8 * (u64::from(tag >> 3) % 6)
            }
            4 if base.catalog.is_some() => {
                PAGE_BYTES * base.catalog.unwrap_or(0) + 8 * (index % 64)
            }
            6 => {
                image.truncate((value % len.max(1)) as usize);
                continue;
            }
            _ => 8 * ((index | (value >> 48) << 16) % (len / 8).max(1)),
        };
        if at + 8 <= image.len() as u64 {
            image[at as usize..at as usize + 8].copy_from_slice(&value.to_le_bytes());
        }
    }
    image
}
