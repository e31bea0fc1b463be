//! Micro-benchmarks of the primary index on our access patterns: the index
//! every engine shares (`zen_engine::index::PrimaryIndex`) against the one
//! it replaced, and its point index against the hash maps we considered.
//!
//! What: five groups, each over 10^6 keys (TPC-C-like: dense, ordered).
//! - `point_get`: a random existing key → record id. `primary` (ours: the
//!   grow-only sharded open-addressing `PointIndex`), `replaced` (skip-list
//!   authority + `scc::HashIndex` front, the previous design), and the bare
//!   hash maps `scc_hash_index` and `papaya` (pinned per lookup, as an
//!   engine without a per-transaction guard would).
//! - `insert`: give a new key a record and link it in the ordered set.
//!   `skiplist` is the same point index with the crossbeam skip list as the
//!   ordered set (what `primary` used before its adaptive radix tree); it is
//!   measured in `insert`, `delete` and both scans.
//! - `delete`: what a committed delete costs the index (ours unlinks the
//!   key; the replaced design did nothing, the key stayed).
//! - `scan_20_after_deletes`: the first 20 live keys of a range after the
//!   10^6 keys below it were deleted (TPC-C Delivery's "oldest new order").
//!   The replaced design walks every deleted key (each costs a record check,
//!   modelled by a lookup in a `live` bitmap); ours starts at the first live
//!   key.
//! - `scan_20`: 20 consecutive keys from a random start, nothing deleted.
//!
//! How: criterion, 2 s measurement, 20 samples; `cargo bench -p zen-engine
//! --bench index`. Figures are in docs/benchmarks.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zen_engine::index::PrimaryIndex;

const KEYS: u64 = 1_000_000;

type Fast = foldhash::fast::RandomState;

/// The previous primary index, kept here only to be measured against: a
/// skip list of every key ever inserted (deleted keys stayed) that decided
/// races, and a hash index in front of it for point lookups.
#[derive(Default)]
struct Replaced {
    ordered: crossbeam_skiplist::SkipMap<u64, u64>,
    point: scc::HashIndex<u64, u64, Fast>,
}

impl Replaced {
    fn get(&self, key: u64) -> Option<u64> {
        if let Some(rid) = self.point.peek_with(&key, |_, rid| *rid) {
            return Some(rid);
        }
        let rid = self.ordered.get(&key).map(|e| *e.value())?;
        let _ = self.point.insert(key, rid);
        Some(rid)
    }
    fn get_or_insert(&self, key: u64, rid: u64) -> u64 {
        if let Some(existing) = self.point.peek_with(&key, |_, rid| *rid) {
            return existing;
        }
        let winner = *self.ordered.get_or_insert(key, rid).value();
        let _ = self.point.insert(key, winner);
        winner
    }
}

/// The ordered set this session replaced by an adaptive radix tree
/// (`index/ordered.rs`): a crossbeam skip list, measured on the same calls
/// (`link`, `unlink`, ranges); the point index in front is the same.
#[derive(Default)]
struct SkipOrdered {
    ordered: crossbeam_skiplist::SkipMap<u64, u64>,
    point: zen_engine::index::PointIndex,
}

impl SkipOrdered {
    fn get_or_insert(&self, key: u64, rid: u64) -> u64 {
        match self.point.insert(key, rid) {
            Ok(()) => rid,
            Err(existing) => existing,
        }
    }
    fn link(&self, key: u64, rid: u64) {
        self.ordered.get_or_insert(key, rid);
    }
    fn unlink(&self, key: u64) {
        self.ordered.remove(&key);
    }
    fn range(&self, r: std::ops::RangeInclusive<u64>) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.ordered.range(r).map(|e| (*e.key(), *e.value()))
    }
}

fn filled_skiplist() -> SkipOrdered {
    let index = SkipOrdered::default();
    for k in 0..KEYS {
        index.link(k, index.get_or_insert(k, k));
    }
    index
}

fn filled_primary() -> PrimaryIndex {
    let index = PrimaryIndex::default();
    for k in 0..KEYS {
        index.link(k, index.get_or_insert(k, k));
    }
    index
}

fn filled_replaced() -> Replaced {
    let index = Replaced::default();
    for k in 0..KEYS {
        index.get_or_insert(k, k);
    }
    index
}

fn point_get(c: &mut Criterion) {
    let mut g = c.benchmark_group("point_get");
    let primary = filled_primary();
    let replaced = filled_replaced();
    let scc: scc::HashIndex<u64, u64, Fast> = scc::HashIndex::with_hasher(Fast::default());
    let papaya: papaya::HashMap<u64, u64, Fast> = papaya::HashMap::with_hasher(Fast::default());
    for k in 0..KEYS {
        let _ = scc.insert(k, k);
        papaya.pin().insert(k, k);
    }
    let mut rng = SmallRng::seed_from_u64(1);
    g.bench_function("primary", |b| b.iter(|| black_box(primary.get(rng.random_range(0..KEYS)))));
    g.bench_function("replaced", |b| b.iter(|| black_box(replaced.get(rng.random_range(0..KEYS)))));
    g.bench_function("scc_hash_index", |b| {
        b.iter(|| black_box(scc.peek_with(&rng.random_range(0..KEYS), |_, v| *v)))
    });
    g.bench_function("papaya", |b| {
        b.iter(|| black_box(papaya.pin().get(&rng.random_range(0..KEYS)).copied()))
    });
    g.finish();
}

fn insert(c: &mut Criterion) {
    let mut g = c.benchmark_group("insert");
    let primary = filled_primary();
    let replaced = filled_replaced();
    let mut next = KEYS;
    g.bench_function("primary", |b| {
        b.iter(|| {
            next += 1;
            primary.link(next, primary.get_or_insert(next, next));
        })
    });
    let skiplist = filled_skiplist();
    let mut next = KEYS;
    g.bench_function("skiplist", |b| {
        b.iter(|| {
            next += 1;
            skiplist.link(next, skiplist.get_or_insert(next, next));
        })
    });
    let mut next = KEYS;
    g.bench_function("replaced", |b| {
        b.iter(|| {
            next += 1;
            black_box(replaced.get_or_insert(next, next));
        })
    });
    g.finish();
}

fn delete(c: &mut Criterion) {
    let mut g = c.benchmark_group("delete");
    g.bench_function("primary", |b| {
        b.iter_batched(
            || {
                let index = PrimaryIndex::default();
                for k in 0..10_000 {
                    index.link(k, index.get_or_insert(k, k));
                }
                index
            },
            |index| {
                for k in 0..10_000 {
                    index.unlink(k);
                }
                index
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("skiplist", |b| {
        b.iter_batched(
            || {
                let index = SkipOrdered::default();
                for k in 0..10_000 {
                    index.link(k, index.get_or_insert(k, k));
                }
                index
            },
            |index| {
                for k in 0..10_000 {
                    index.unlink(k);
                }
                index
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

fn scan_after_deletes(c: &mut Criterion) {
    let mut g = c.benchmark_group("scan_20_after_deletes");
    // Keys 0..KEYS deleted, KEYS..KEYS+100 live.
    let primary = PrimaryIndex::default();
    let skiplist = SkipOrdered::default();
    let replaced = Replaced::default();
    let mut live = vec![false; KEYS as usize + 100];
    for k in 0..KEYS + 100 {
        primary.link(k, primary.get_or_insert(k, k));
        skiplist.link(k, skiplist.get_or_insert(k, k));
        replaced.get_or_insert(k, k);
        live[k as usize] = k >= KEYS;
    }
    for k in 0..KEYS {
        primary.unlink(k);
        skiplist.unlink(k);
    }
    g.bench_function("skiplist", |b| {
        b.iter(|| {
            let found: u64 = skiplist
                .range(0..=u64::MAX >> 1)
                .filter(|&(_, rid)| live[rid as usize])
                .take(20)
                .map(|(k, _)| k)
                .sum();
            black_box(found)
        })
    });
    g.bench_function("primary", |b| {
        b.iter(|| {
            let found: u64 = primary
                .range(0..=u64::MAX >> 1)
                .filter(|&(_, rid)| live[rid as usize])
                .take(20)
                .map(|(k, _)| k)
                .sum();
            black_box(found)
        })
    });
    g.bench_function("replaced", |b| {
        b.iter(|| {
            let found: u64 = replaced
                .ordered
                .range(0..=u64::MAX >> 1)
                .map(|e| (*e.key(), *e.value()))
                .filter(|&(_, rid)| live[rid as usize])
                .take(20)
                .map(|(k, _)| k)
                .sum();
            black_box(found)
        })
    });
    g.finish();
}

fn scan(c: &mut Criterion) {
    let mut g = c.benchmark_group("scan_20");
    let primary = filled_primary();
    let skiplist = filled_skiplist();
    let mut rng = SmallRng::seed_from_u64(2);
    g.bench_function("primary", |b| {
        b.iter(|| {
            let start = rng.random_range(0..KEYS - 20);
            black_box(primary.range(start..=start + 19).map(|(_, rid)| rid).sum::<u64>())
        })
    });
    g.bench_function("skiplist", |b| {
        b.iter(|| {
            let start = rng.random_range(0..KEYS - 20);
            black_box(skiplist.range(start..=start + 19).map(|(_, rid)| rid).sum::<u64>())
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20)
}

criterion_group! { name = benches; config = config(); targets = point_get, insert, delete, scan_after_deletes, scan }
criterion_main!(benches);
