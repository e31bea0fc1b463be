//! Hazards of DESIGN §3 that need a running engine rather than the crash
//! simulator: out of space (7), timestamps (6), recycling under readers (4).
//! The crash-simulator side of every hazard is in
//! `zen-workload/tests/crash_scenarios.rs` (the one crash harness).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use zen_engine::{AbortReason, CcKind, Error, TxnOptions};

fn small_pool(dir: &std::path::Path, cc: CcKind) -> zen_engine::EngineConfig {
    zen_engine::EngineConfig { pool_size_bytes: 1 << 20, ..fs_config(dir, true, cc) }
}

#[test]
fn out_of_space_aborts_cleanly_and_the_engine_keeps_working() {
    for cc in CcKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let engine = zen_engine::open(&small_pool(dir.path(), cc)).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let free_at_start = engine.status().free_pages;
        let mut w = engine.worker().unwrap();
        let o = TxnOptions::default();
        let mut inserted = 0u64;
        let err = loop {
            match w.run(&o, |tx| (0..16).try_for_each(|i| tx.insert(t, inserted + i, &row(1)))) {
                Ok(()) => inserted += 16,
                Err(e) => break e,
            }
            assert!(inserted < 1 << 20, "the pool never filled");
        };
        assert!(matches!(err, Error::Abort(AbortReason::OutOfSpace)), "{cc:?}: {err}");
        assert_eq!(engine.status().tables[0].rows, inserted, "the failed transaction left nothing");
        engine.check_invariants().unwrap();
        // Free space by deleting; GC reclaims it and inserts succeed again.
        for k in 0..inserted {
            w.run(&o, |tx| tx.delete(t, k)).unwrap();
        }
        for round in 0..64 {
            w.run(&o, |tx| tx.insert(t, 1 << 40 | round, &row(2))).unwrap();
            w.run(&o, |tx| tx.delete(t, 1 << 40 | round)).unwrap();
            w.sync().unwrap();
        }
        w.run(&o, |tx| (0..16).try_for_each(|i| tx.insert(t, i, &row(3)))).unwrap();
        drop(w);
        engine.check_invariants().unwrap();
        let free = engine.status().free_pages;
        assert!(
            free + 2 >= free_at_start,
            "{cc:?}: pages leaked: {free} free, {free_at_start} at start"
        );
        engine.close().unwrap();
    }
}

#[test]
fn timestamps_are_monotone_per_worker_and_newer_versions_are_larger() {
    for cc in CcKind::ALL {
        let engine = Arc::new(zen_engine::open(&dram_config(cc)).unwrap());
        let t = engine.create_table(&accounts()).unwrap();
        engine
            .worker()
            .unwrap()
            .run(&TxnOptions::default(), |tx| tx.insert(t, 0, &row(0)))
            .unwrap();
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let engine = engine.clone();
                std::thread::spawn(move || {
                    let mut w = engine.worker().unwrap();
                    let mut commits = Vec::new();
                    let mut out = vec![0u8; ROW];
                    for _ in 0..500 {
                        let mut next = 0;
                        let info = loop {
                            let r = w.execute(&TxnOptions::default(), &mut |tx| {
                                tx.get_for_update(t, 0, &mut out)?;
                                next = value(&out) + 1;
                                tx.update(t, 0, &row(next))
                            });
                            match r {
                                Ok(info) => break info,
                                Err(e) if e.is_retryable() => continue,
                                Err(e) => panic!("{e}"),
                            }
                        };
                        commits.push((next, info.cts));
                    }
                    commits
                })
            })
            .collect();
        let per_thread: Vec<Vec<(i64, u64)>> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        for commits in &per_thread {
            // One thread is one worker for its whole life: its Tx-CTS increase.
            assert!(
                commits.windows(2).all(|p| p[0].1 < p[1].1),
                "{cc:?}: per-worker Tx-CTS not increasing"
            );
        }
        let mut all: Vec<(i64, u64)> = per_thread.into_iter().flatten().collect();
        all.sort();
        assert_eq!(all.len(), 1000);
        assert!(all.windows(2).all(|p| p[0].0 + 1 == p[1].0), "{cc:?}: lost update");
        assert!(
            all.windows(2).all(|p| p[0].1 < p[1].1),
            "{cc:?}: a newer version has a smaller Tx-CTS"
        );
    }
}

#[test]
fn recycling_under_readers_keeps_long_scans_consistent() {
    // Hazard 4: with a Met-Cache far smaller than the data, long scans read
    // heap slots while writers churn and GC recycles slots; every scan must
    // still see a consistent total.
    for cc in CcKind::ALL {
        let dir = tempfile::tempdir().unwrap();
        let config = zen_engine::EngineConfig {
            cache_size_bytes: 64 << 10,
            ..fs_config(dir.path(), true, cc)
        };
        let engine = Arc::new(zen_engine::open(&config).unwrap());
        let t = engine.create_table(&accounts()).unwrap();
        let n = 400u64;
        let mut loader = engine.worker().unwrap();
        for batch in 0..n / 50 {
            let keys = batch * 50..batch * 50 + 50;
            loader
                .run(&TxnOptions::default(), |tx| {
                    keys.clone().try_for_each(|k| tx.insert(t, k, &row(10)))
                })
                .unwrap();
        }
        drop(loader);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2u64)
            .map(|seed| {
                let (engine, stop) = (engine.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut w = engine.worker().unwrap();
                    let (mut a, mut b) = (vec![0u8; ROW], vec![0u8; ROW]);
                    let mut i = seed;
                    while !stop.load(Ordering::Relaxed) {
                        i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        // Transfers stay inside a block of 100 keys: block sums are invariant.
                        let block = (i >> 40) % (n / 100) * 100;
                        let (x, y) = (block + (i >> 33) % 100, block + (i >> 13) % 100);
                        if x == y {
                            continue;
                        }
                        w.run(&TxnOptions::default(), |tx| {
                            tx.get_for_update(t, x, &mut a)?;
                            tx.get_for_update(t, y, &mut b)?;
                            tx.update(t, x, &row(value(&a) - 1))?;
                            tx.update(t, y, &row(value(&b) + 1))
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        let mut w = engine.worker().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut i = 0;
        // Scan until GC has recycled slots under the scans (and at least 80 times).
        while i < 80 || engine.status().gc_reclaimed_slots == 0 {
            assert!(std::time::Instant::now() < deadline, "{cc:?}: GC never reclaimed a slot");
            i += 1;
            let low = i % (n / 100) * 100;
            let sum = w
                .run(&TxnOptions::default(), |tx| {
                    let mut s = 0;
                    tx.scan(t, low..=low + 99, usize::MAX, &mut |_, r| {
                        s += value(r);
                        true
                    })?;
                    Ok(s)
                })
                .unwrap();
            assert_eq!(sum, 1000, "{cc:?}: block {low}");
        }
        stop.store(true, Ordering::Relaxed);
        for h in writers {
            h.join().unwrap();
        }
        drop(w);
        assert!(engine.status().gc_reclaimed_slots > 0, "{cc:?}: GC never ran");
        engine.check_invariants().unwrap();
    }
}

/// S7 of `zen/space.rs`: spares hold up to one extra slot per updated
/// record; when the pool runs out of pages, a worker gives its spares back
/// (`sweep_own_spares`), so a pool whose rows were all updated takes about
/// as many new rows as one whose rows never were.
#[test]
fn spares_are_given_back_when_the_pool_is_full() {
    const ROWS: u64 = 2048;
    let fill = |cc: CcKind, update_rounds: i64| -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let engine = zen_engine::open(&small_pool(dir.path(), cc)).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        let o = TxnOptions::default();
        for k in (0..ROWS).step_by(16) {
            w.run(&o, |tx| (k..k + 16).try_for_each(|k| tx.insert(t, k, &row(0)))).unwrap();
        }
        for r in 1..=update_rounds {
            for k in (0..ROWS).step_by(16) {
                w.run(&o, |tx| (k..k + 16).try_for_each(|k| tx.update(t, k, &row(r)))).unwrap();
            }
        }
        w.sync().unwrap();
        if update_rounds > 0 {
            let spared = engine.status().gc_spared_slots;
            assert!(spared >= ROWS / 2, "{cc:?}: only {spared} spares to give back");
        }
        let mut next = 1 << 40;
        loop {
            match w.run(&o, |tx| (next..next + 16).try_for_each(|k| tx.insert(t, k, &row(9)))) {
                Ok(()) => next += 16,
                Err(Error::Abort(AbortReason::OutOfSpace)) => break,
                Err(e) => panic!("{cc:?}: {e}"),
            }
        }
        drop(w);
        engine.check_invariants().unwrap();
        let rows = engine.status().tables[0].rows;
        engine.close().unwrap();
        rows
    };
    for cc in CcKind::ALL {
        let (plain, updated) = (fill(cc, 0), fill(cc, 3));
        // The garbage still in the pipeline when the pool fills (a few
        // fences' worth) is all the updated pool may lack.
        assert!(
            updated + 256 >= plain,
            "{cc:?}: {updated} rows fit after updates, {plain} without"
        );
        println!("{cc:?}: {plain} rows without updates, {updated} after 3 rounds of updates");
    }
}
