//! Micro-benchmarks of the secondary index on TPC-C's access pattern: the
//! index every engine uses (`zen_engine::index::SecondaryIndex`: a point
//! index from the index key's hash to its group of primary keys, the groups
//! in an arena, plus an ordered set of the distinct keys) against the same
//! groups in a `papaya` hash map (its design until session 24), the crossbeam
//! `SkipSet` of (key, primary key) before that, and `scc::TreeIndex` (a
//! B+-tree with lock-free readers), holding the same entries.
//!
//! What: 10^6 entries keyed like `customer_by_last_name` (warehouse, district,
//! a 16-byte last name; ~3 primary keys per name), two groups:
//! - `lookup`: the primary keys under one full index key (Payment and
//!   Order-Status by last name);
//! - `insert`: a new (key, primary key) entry for a random existing key
//!   (New-Order's `orders_by_customer` entry: the customer has orders).
//!
//! How: criterion, 2 s measurement, 20 samples; `cargo bench -p zen-engine
//! --bench secondary`. Figures are in docs/benchmarks.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use smallvec::SmallVec;
use zen_engine::index::{MAX_SECONDARY_KEY_BYTES, SecondaryIndex};

const ENTRIES: u64 = 1_000_000;
/// Distinct index keys: ~3 entries each, as TPC-C's last names per district.
const NAMES: u64 = ENTRIES / 3;
/// Row layout: w (2 bytes), d (1 byte), last name (16 bytes).
const WIDTH: usize = 19;

type Key = [u8; MAX_SECONDARY_KEY_BYTES];

fn row_of(name: u64) -> [u8; WIDTH] {
    let mut row = [0u8; WIDTH];
    row[..2].copy_from_slice(&((name % 64) as u16).to_be_bytes());
    row[2] = (name / 64 % 10) as u8;
    row[3..11].copy_from_slice(b"BARPRICE");
    row[11..19].copy_from_slice(&(name / 640).to_be_bytes());
    row
}

fn key_of(row: &[u8; WIDTH]) -> Key {
    let mut k = [0u8; MAX_SECONDARY_KEY_BYTES];
    k[..WIDTH].copy_from_slice(row);
    k
}

fn filled_index() -> SecondaryIndex {
    let s = SecondaryIndex::new(vec![(0, WIDTH)]);
    for pk in 0..ENTRIES {
        s.insert(&row_of(pk % NAMES), pk);
    }
    s
}

/// The groups in a papaya map keyed by the index key (`SecondaryIndex`'s
/// table until session 24): three dependent misses before the group.
type PapayaGroups = papaya::HashMap<Key, Mutex<SmallVec<[u64; 4]>>, foldhash::fast::RandomState>;

fn filled_papaya() -> PapayaGroups {
    let m = PapayaGroups::with_hasher(foldhash::fast::RandomState::default());
    {
        let pinned = m.pin();
        for pk in 0..ENTRIES {
            let g = pinned.get_or_insert_with(key_of(&row_of(pk % NAMES)), Mutex::default);
            g.lock().push(pk);
        }
    }
    m
}

fn papaya_lookup(m: &PapayaGroups, row: &[u8; WIDTH], out: &mut Vec<u64>) {
    if let Some(g) = m.pin().get(&key_of(row)) {
        out.extend(g.lock().iter().take(16));
    }
}

fn papaya_insert(m: &PapayaGroups, row: &[u8; WIDTH], pk: u64) {
    let pinned = m.pin();
    let key = key_of(row);
    let g = match pinned.get(&key) {
        Some(g) => g,
        None => pinned.get_or_insert_with(key, Mutex::default),
    };
    let mut pks = g.lock();
    if let Err(at) = pks.binary_search(&pk) {
        pks.insert(at, pk);
    }
}

/// The design before the groups: one skip-list entry per (key, primary
/// key).
fn filled_skiplist() -> crossbeam_skiplist::SkipSet<(Key, u64)> {
    let s = crossbeam_skiplist::SkipSet::new();
    for pk in 0..ENTRIES {
        s.insert((key_of(&row_of(pk % NAMES)), pk));
    }
    s
}

fn skiplist_lookup(s: &crossbeam_skiplist::SkipSet<(Key, u64)>, prefix: &[u8], out: &mut Vec<u64>) {
    let mut low = [0u8; MAX_SECONDARY_KEY_BYTES];
    low[..prefix.len()].copy_from_slice(prefix);
    for e in s.range((low, 0)..) {
        let (k, pk) = e.value();
        if k[..prefix.len()] != *prefix || out.len() >= 16 {
            break;
        }
        out.push(*pk);
    }
}

fn filled_tree() -> scc::TreeIndex<(Key, u64), ()> {
    let t = scc::TreeIndex::new();
    for pk in 0..ENTRIES {
        let _ = t.insert((key_of(&row_of(pk % NAMES)), pk), ());
    }
    t
}

fn tree_lookup(t: &scc::TreeIndex<(Key, u64), ()>, prefix: &[u8], out: &mut Vec<u64>) {
    let mut low = [0u8; MAX_SECONDARY_KEY_BYTES];
    low[..prefix.len()].copy_from_slice(prefix);
    let guard = scc::ebr::Guard::new();
    for ((k, pk), ()) in t.range((low, 0)..(low, u64::MAX), &guard) {
        if k[..prefix.len()] != *prefix {
            break;
        }
        out.push(*pk);
    }
    // Entries of the same key with the largest primary key end the range above.
}

fn lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("secondary_lookup");
    let index = filled_index();
    let papaya = filled_papaya();
    let skip = filled_skiplist();
    let tree = filled_tree();
    let mut rng = SmallRng::seed_from_u64(1);
    let mut out = Vec::with_capacity(16);
    g.bench_function("groups", |b| {
        b.iter(|| {
            out.clear();
            let row = row_of(rng.random_range(0..NAMES));
            index.lookup("customer", &row, 16, &mut out).unwrap();
            black_box(out.len())
        })
    });
    g.bench_function("papaya_groups", |b| {
        b.iter(|| {
            out.clear();
            papaya_lookup(&papaya, &row_of(rng.random_range(0..NAMES)), &mut out);
            black_box(out.len())
        })
    });
    g.bench_function("skiplist", |b| {
        b.iter(|| {
            out.clear();
            let row = row_of(rng.random_range(0..NAMES));
            skiplist_lookup(&skip, &row, &mut out);
            black_box(out.len())
        })
    });
    g.bench_function("scc_tree_index", |b| {
        b.iter(|| {
            out.clear();
            let row = row_of(rng.random_range(0..NAMES));
            tree_lookup(&tree, &row, &mut out);
            black_box(out.len())
        })
    });
    g.finish();
}

fn insert(c: &mut Criterion) {
    let mut g = c.benchmark_group("secondary_insert");
    let index = filled_index();
    let papaya = filled_papaya();
    let skip = filled_skiplist();
    let tree = filled_tree();
    let mut rng = SmallRng::seed_from_u64(2);
    let mut next = ENTRIES;
    g.bench_function("groups", |b| {
        b.iter(|| {
            next += 1;
            index.insert(&row_of(rng.random_range(0..NAMES)), next);
        })
    });
    let mut next = ENTRIES;
    g.bench_function("papaya_groups", |b| {
        b.iter(|| {
            next += 1;
            papaya_insert(&papaya, &row_of(rng.random_range(0..NAMES)), next);
        })
    });
    let mut next = ENTRIES;
    g.bench_function("skiplist", |b| {
        b.iter(|| {
            next += 1;
            skip.insert((key_of(&row_of(rng.random_range(0..NAMES))), next));
        })
    });
    let mut next = ENTRIES;
    g.bench_function("scc_tree_index", |b| {
        b.iter(|| {
            next += 1;
            black_box(tree.insert((key_of(&row_of(rng.random_range(0..NAMES))), next), ()).is_ok());
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

criterion_group! { name = benches; config = config(); targets = lookup, insert }
criterion_main!(benches);
