//! Recovery over mutated small pools (VERIFICATION §4) for mmdb and wbl:
//! whatever a corruption does to the bytes of the catalog, the meta page, the
//! redo logs, the checkpoint, the version heap or the page table, opening
//! the pool gives a typed error or an engine that passes its own checks far
//! enough not to panic (check_invariants, reading every row, committing).
//!
//! How: one small pool per engine on `fs` (64 KiB pages; for mmdb a
//! checkpoint plus log records after it), left as a crash would (`abandon`);
//! each case mutates a copy of its bytes (seeded: a bit flip, a random or a
//! zero word, a zeroed cache line, in an owned page or the page table) and
//! opens it.

mod baseline_common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use baseline_common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zen_engine::{Engine, EngineConfig, EngineKind, TableId, TxnOptions};

const PAGE: usize = 64 << 10;
const PAGE_TABLE: usize = 4096;
const CASES: u64 = 300;

fn small(kind: EngineKind, dir: &Path, create: bool) -> EngineConfig {
    EngineConfig { pool_size_bytes: 2 << 20, max_workers: 4, ..config(kind, dir, create) }
}

/// The base pool's bytes: two tables (one with a secondary index), inserts,
/// updates and deletes; mmdb closes once (a checkpoint) and logs more.
fn base_pool(kind: EngineKind, dir: &Path) -> Vec<u8> {
    let work = |engine: &dyn Engine, round: i64| {
        let t = engine.create_table(&accounts()).unwrap();
        let o = engine.create_table(&owners()).unwrap();
        let mut w = engine.worker().unwrap();
        for k in (0..60u64).filter(|&k| round == 0 || k != 7) {
            w.run(&immediate(), |tx| {
                let r = row(k as i64 + round);
                if round == 0 { tx.insert(t, k, &r) } else { tx.update(t, k, &r) }?;
                let mut owner = vec![0u8; 16];
                owner[0..8].copy_from_slice(&(k % 5).to_le_bytes());
                if round == 0 { tx.insert(o, k, &owner) } else { tx.update(o, k, &owner) }
            })
            .unwrap();
        }
        w.run(&immediate(), |tx| tx.delete(t, 7 + round as u64)).unwrap();
    };
    let engine = zen_engine::open(&small(kind, dir, true)).unwrap();
    work(engine.as_ref(), 0);
    engine.close().unwrap();
    let engine = zen_engine::open(&small(kind, dir, false)).unwrap();
    work(engine.as_ref(), 1);
    engine.abandon();
    std::fs::read(dir.join("baseline.pool")).unwrap()
}

fn owned_pages(bytes: &[u8]) -> Vec<usize> {
    (1..bytes.len() / PAGE)
        .filter(|p| {
            let at = PAGE_TABLE + p * 8;
            u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) >> 56 == 0xA5
        })
        .collect()
}

/// Mutate `bytes` per `seed`; returns what it did.
fn mutate(bytes: &mut [u8], seed: u64) -> String {
    let mut rng = SmallRng::seed_from_u64(seed);
    let pages = owned_pages(bytes);
    let (what, at) = if rng.random_range(0..8) == 0 {
        ("page-table word", PAGE_TABLE + pages[rng.random_range(0..pages.len())] * 8)
    } else {
        let page = pages[rng.random_range(0..pages.len())];
        // Mostly near the start of a page, where headers and records are.
        let within = if rng.random_bool(0.7) {
            rng.random_range(0..4096)
        } else {
            rng.random_range(0..PAGE)
        };
        ("page", page * PAGE + within / 8 * 8)
    };
    match rng.random_range(0..4) {
        0 => {
            let bit = rng.random_range(0..64);
            bytes[at + bit / 8] ^= 1 << (bit % 8);
            format!("{what}: bit {bit} flipped at {at}")
        }
        1 => {
            bytes[at..at + 8].copy_from_slice(&rng.random::<u64>().to_le_bytes());
            format!("{what}: random word at {at}")
        }
        2 => {
            bytes[at..at + 8].fill(0);
            format!("{what}: zero word at {at}")
        }
        _ => {
            let line = at / 64 * 64;
            bytes[line..line + 64].fill(0);
            format!("{what}: zero line at {line}")
        }
    }
}

/// Open the mutated pool and use it; Err(message) on a panic.
fn exercise(kind: EngineKind, dir: &Path) -> Result<bool, String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let Ok(engine) = zen_engine::open(&small(kind, dir, false)) else { return false };
        let _ = engine.check_invariants();
        let mut w = engine.worker().unwrap();
        for t in 0..2 {
            let _ = w.run(&TxnOptions::default(), |tx| {
                tx.scan(TableId(t), 0..=u64::MAX >> 1, usize::MAX, &mut |_, _| true)
            });
        }
        let _ = w.run(&immediate(), |tx| tx.insert(TableId(0), 1000, &row(1)));
        drop(w);
        let _ = engine.check_invariants();
        engine.abandon();
        true
    }));
    outcome.map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    })
}

fn corpus(kind: EngineKind) {
    let dir = tempfile::tempdir().unwrap();
    let base = base_pool(kind, dir.path());
    let path = dir.path().join("baseline.pool");
    let (mut opened, mut refused) = (0, 0);
    let mut panics = Vec::new();
    for seed in 0..CASES {
        let mut bytes = base.clone();
        let what = mutate(&mut bytes, seed);
        std::fs::write(&path, &bytes).unwrap();
        match exercise(kind, dir.path()) {
            Ok(true) => opened += 1,
            Ok(false) => refused += 1,
            Err(message) => panics.push(format!("seed {seed} ({what}): {message}")),
        }
    }
    eprintln!("{}: {CASES} mutated pools, {opened} opened, {refused} refused", kind.name());
    assert!(panics.is_empty(), "{}: panics:\n{}", kind.name(), panics.join("\n"));
    assert!(refused > 0, "some mutations must be caught");
}

#[test]
fn mutated_mmdb_pools_never_panic() {
    corpus(EngineKind::Mmdb);
}

#[test]
fn mutated_wbl_pools_never_panic() {
    corpus(EngineKind::Wbl);
}

#[test]
fn mutated_falcon_pools_never_panic() {
    corpus(EngineKind::Falcon);
}
