//! Concurrency: workers transfer money between accounts; the total balance
//! is invariant in every committed snapshot, after the run, and after
//! recovery. Also a high-contention run must make progress (bounded retries).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use rand::{Rng, SeedableRng};
use zen_engine::{CcKind, Engine, TxnOptions};

const ACCOUNTS: u64 = 64;
const INITIAL: i64 = 1_000;

fn total(engine: &dyn Engine) -> i64 {
    let t = engine.table_id("accounts").unwrap();
    let mut w = engine.worker().unwrap();
    w.run(&TxnOptions::default(), |tx| {
        let mut sum = 0;
        tx.scan(t, 0..=ACCOUNTS, usize::MAX, &mut |_, r| {
            sum += value(r);
            true
        })?;
        Ok(sum)
    })
    .unwrap()
}

fn transfers(engine: &dyn Engine, seed: u64, txns: usize, hot: u64, stop: &AtomicBool) {
    let t = engine.table_id("accounts").unwrap();
    let mut w = engine.worker().unwrap();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut a = vec![0u8; ROW];
    let mut b = vec![0u8; ROW];
    for _ in 0..txns {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let from = rng.random_range(0..hot);
        let to = (from + rng.random_range(1..hot)) % hot;
        let amount = rng.random_range(1..50);
        w.run(&TxnOptions::default(), |tx| {
            tx.get_for_update(t, from, &mut a)?;
            tx.get_for_update(t, to, &mut b)?;
            tx.update(t, from, &row(value(&a) - amount))?;
            tx.update(t, to, &row(value(&b) + amount))?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", engine.cc_name()));
    }
}

fn bank_run(engine: Arc<Box<dyn Engine>>, workers: usize, txns: usize, hot: u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let auditor = {
        let (engine, stop) = (engine.clone(), stop.clone());
        std::thread::spawn(move || {
            // At least one audit, then as many as fit while the writers run.
            let mut audits = 0;
            loop {
                assert_eq!(total(engine.as_ref().as_ref()), ACCOUNTS as i64 * INITIAL);
                audits += 1;
                if stop.load(Ordering::Relaxed) {
                    break audits;
                }
            }
        })
    };
    let handles: Vec<_> = (0..workers)
        .map(|i| {
            let (engine, stop) = (engine.clone(), stop.clone());
            std::thread::spawn(move || {
                transfers(engine.as_ref().as_ref(), i as u64, txns, hot, &stop)
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(auditor.join().unwrap() > 0);
    assert_eq!(total(engine.as_ref().as_ref()), ACCOUNTS as i64 * INITIAL);
}

fn setup(engine: &dyn Engine) {
    let t = engine.create_table(&accounts()).unwrap();
    let mut w = engine.worker().unwrap();
    w.run(&TxnOptions::default(), |tx| {
        (0..ACCOUNTS).try_for_each(|k| tx.insert(t, k, &row(INITIAL)))
    })
    .unwrap();
}

#[test]
fn bank_transfers_keep_the_total_with_2_to_4_workers() {
    for (cc, workers) in CcKind::ALL.into_iter().flat_map(|cc| [(cc, 2), (cc, 4)]) {
        let engine = Arc::new(zen_engine::open(&dram_config(cc)).unwrap());
        setup(engine.as_ref().as_ref());
        bank_run(engine.clone(), workers, 2_000, ACCOUNTS);
        engine.check_invariants().unwrap();
    }
}

#[test]
fn high_contention_makes_progress_with_bounded_retries() {
    for cc in CcKind::ALL {
        let engine = Arc::new(zen_engine::open(&dram_config(cc)).unwrap());
        setup(engine.as_ref().as_ref());
        bank_run(engine, 4, 1_000, 3);
    }
}

#[test]
fn bank_total_survives_recovery_and_a_small_cache() {
    for cc in CcKind::ALL {
        bank_total_survives_recovery_and_a_small_cache_with(cc);
    }
}

fn bank_total_survives_recovery_and_a_small_cache_with(cc: CcKind) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = fs_config(dir.path(), true, cc);
    config.cache_size_bytes = 64 << 10; // fewer entries than accounts: forces eviction
    let engine = Arc::new(zen_engine::open(&config).unwrap());
    setup(engine.as_ref().as_ref());
    bank_run(engine.clone(), 2, 1_500, ACCOUNTS);
    // Then one worker alone. A superseded slot is reclaimed once the
    // watermark passes its Tx-CTS, and a transaction that the scheduler
    // preempts holds the watermark back (the auditor is in a transaction
    // almost all the time): with the test binary's other tests on the same
    // 2 cores, the contended run above reclaimed nothing in 5 of 8 runs.
    // Alone, nothing holds the watermark, so the worker's own garbage must
    // be reclaimed within these transactions.
    transfers(engine.as_ref().as_ref(), 99, 200, ACCOUNTS, &AtomicBool::new(false));
    let engine = Arc::try_unwrap(engine).ok().unwrap();
    let status = engine.status();
    // With every worker gone, the capacity is the table's whole share; the
    // regions of the workers that ran were bounded by their part of it (each
    // may be over by the entries its last transaction still held). Versions
    // a running transaction may still read are never evicted (§3.3.2), so
    // under this contention the multi-version protocols may exceed the share,
    // up to the regions' capacity: twice the budget for each of the three
    // workers that ran at once, the two writers and the auditor (its reads
    // bring tuples into its own region; a full suite on 2 cores once left
    // 2,569 entries in use under Hekaton, over the 2 × 2 × 630 this bound
    // had counted for the writers alone).
    let bound = match cc {
        CcKind::Mvcc | CcKind::Hekaton | CcKind::Cicada => 3 * 2 * status.cache_entries_capacity,
        _ => status.cache_entries_capacity + 2 * 16,
    };
    assert!(status.cache_entries_used <= bound, "cache not bounded by the budget: {status:?}");
    assert!(status.gc_reclaimed_slots > 0, "GC reclaimed nothing: {status:?}");
    let counters = engine.counters();
    assert_eq!(
        (counters.gc_reclaimed_slots, counters.gc_spared_slots),
        (status.gc_reclaimed_slots, status.gc_spared_slots)
    );
    engine.abandon();
    let engine = zen_engine::open(&fs_config(dir.path(), false, cc)).unwrap();
    engine.check_invariants().unwrap();
    assert_eq!(total(engine.as_ref()), ACCOUNTS as i64 * INITIAL);
    engine.close().unwrap();
}

/// Copy-on-foreign-write (§3.2, C2 of `zen/cache.rs`): a Silo or OCC update
/// of a record cached in another worker's region installs the new version
/// in an entry of the writer's own region, reserved before the commit's
/// fence, and leaves the original obsolete and flagged as copied. The
/// writer's region holds exactly the copy (the reservation leaks nothing),
/// and both workers read the new row.
#[test]
fn a_foreign_write_copies_into_the_writers_region() {
    foreign_write_copies::<zen_engine::cc::Silo>(CcKind::Silo);
    foreign_write_copies::<zen_engine::cc::Occ>(CcKind::Occ);
}

fn foreign_write_copies<P: zen_engine::cc::Protocol>(cc: CcKind) {
    use zen_engine::zen::cache::{FLAG_COPY, loc_entry};
    let engine =
        zen_engine::ZenEngine::<zen_pmem::DramBackend, P>::create(&dram_config(cc)).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    let (mut w0, mut w1) = (engine.worker().unwrap(), engine.worker().unwrap());
    assert_eq!((w0.id(), w1.id()), (0, 1));
    let o = TxnOptions::default();
    w0.run(&o, |tx| (0..4).try_for_each(|k| tx.insert(t, k, &row(k as i64)))).unwrap();
    let table = engine.shared().registry.get(t.0 as usize).unwrap();
    let rid = table.lookup(2).unwrap();
    let where_is = || loc_entry(table.records.loc(rid).load(Ordering::Acquire));
    let (owner, original) = where_is().expect("cached by its inserter");
    assert_eq!(owner, 0, "{cc:?}");
    let mine_before = table.caches[1].used();
    w1.run(&o, |tx| tx.update(t, 2, &row(200))).unwrap();
    let (owner, copy) = where_is().expect("still cached");
    assert_eq!(owner, 1, "{cc:?}: the new version lives in the writer's region");
    assert_eq!(table.caches[1].used(), mine_before + 1, "{cc:?}: one entry, the copy");
    let e = table.caches[0].entry(original);
    assert_ne!(e.flags.load(Ordering::Acquire) & FLAG_COPY, 0, "{cc:?}: original flagged");
    assert_ne!(
        e.cc[0].load(Ordering::Acquire) & zen_engine::cc::silo::OBSOLETE,
        0,
        "{cc:?}: original obsolete"
    );
    assert_ne!((owner, copy), (0, original));
    let mut out = vec![0u8; ROW];
    for w in [&mut w0, &mut w1] {
        assert!(w.run(&o, |tx| tx.get(t, 2, &mut out)).unwrap());
        assert_eq!(value(&out), 200, "{cc:?}");
    }
    drop((w0, w1));
    engine.check_invariants().unwrap();
}
