//! Zen+ MVCC-based adaptive execution (`zen/adaptive.rs`): read-only
//! snapshots under churn and GC, GC progress around a long transaction, each
//! trigger (α, β, γ) with its privileged transaction committing, two
//! transactions qualifying at once, a workload that runs out of NVM without
//! Zen+ and completes with it. (Crashes during exclusive stages are
//! `zen-workload/tests/crash_scenarios.rs::zen_crash_during_exclusive_stages_recovers`.)

mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use rand::{Rng, SeedableRng};
use zen_engine::{AbortReason, CcKind, Engine, EngineConfig, Error, TableId, TxnOptions};

const ACCOUNTS: u64 = 64;
const INITIAL: i64 = 1_000;

fn engine(config: &EngineConfig) -> Box<dyn Engine> {
    engine_with(config, ACCOUNTS)
}

fn engine_with(config: &EngineConfig, accounts: u64) -> Box<dyn Engine> {
    let e = zen_engine::open(config).unwrap();
    let t = e.create_table(&common::accounts()).unwrap();
    let mut w = e.worker().unwrap();
    for chunk in (0..accounts).collect::<Vec<_>>().chunks(16) {
        w.run(&TxnOptions::default(), |tx| {
            chunk.iter().try_for_each(|&k| tx.insert(t, k, &row(INITIAL)))
        })
        .unwrap();
    }
    drop(w);
    e
}

fn adaptive(e: &dyn Engine) -> zen_engine::zen::adaptive::AdaptiveStats {
    e.status().adaptive.expect("adaptive execution is on")
}

/// A small Met-Cache, so that heads are evicted to NVM and snapshots read
/// NVM tuples in place; a small pool with 64 KiB pages, so GC matters.
fn churn_config(cc: CcKind) -> EngineConfig {
    EngineConfig { max_workers: 3, cache_size_bytes: 64 << 10, ..dram_config(cc) }
}

fn transfer(w: &mut Box<dyn zen_engine::EngineWorker + '_>, t: TableId, from: u64, to: u64) {
    let (mut a, mut b) = (vec![0u8; ROW], vec![0u8; ROW]);
    w.run(&TxnOptions::default(), |tx| {
        tx.get_for_update(t, from, &mut a)?;
        tx.get_for_update(t, to, &mut b)?;
        tx.update(t, from, &row(value(&a) - 7))?;
        tx.update(t, to, &row(value(&b) + 7))
    })
    .unwrap();
}

/// Snapshot scans beside transfers: every snapshot sums to the invariant
/// total and no snapshot attempt aborts for a conflict, while writers supersede versions,
/// heads are evicted to NVM and GC recycles slots (so a recycled slot under a
/// snapshot would show up as a wrong sum or a corrupt read).
fn snapshots_under_churn(cc: CcKind) {
    // Many more accounts than a region holds: most heads live in NVM.
    const ACCOUNTS: u64 = 2048;
    let e = engine_with(&churn_config(cc), ACCOUNTS);
    let t = e.table_id("accounts").unwrap();
    let reclaimed_before = e.status().gc_reclaimed_slots;
    let done = AtomicBool::new(false);
    let scans = std::thread::scope(|s| {
        for seed in 0..2u64 {
            let (e, done) = (&e, &done);
            s.spawn(move || {
                let mut w = e.worker().unwrap();
                let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
                for _ in 0..2000 {
                    let from = rng.random_range(0..ACCOUNTS);
                    let to = (from + rng.random_range(1..ACCOUNTS)) % ACCOUNTS;
                    transfer(&mut w, t, from, to);
                }
                done.store(true, Ordering::Release);
            });
        }
        let mut w = e.worker().unwrap();
        let mut scans = 0;
        while !done.load(Ordering::Acquire) || scans < 20 {
            let mut sum = 0;
            let mut rows = 0;
            let scanned = w.execute(&TxnOptions::read_only(), &mut |tx| {
                sum = 0;
                rows = tx.scan(t, 0..=ACCOUNTS, usize::MAX, &mut |_, r| {
                    sum += value(r);
                    true
                })?;
                Ok(())
            });
            match scanned {
                Ok(_) => {}
                // The tiny cache makes writers fill their regions (α): a
                // snapshot yields to the exclusive stage, never to a conflict.
                Err(Error::Abort(AbortReason::Exclusive)) => continue,
                Err(x) => panic!("{}: a snapshot aborted: {x}", e.cc_name()),
            }
            assert_eq!(
                (rows, sum),
                (ACCOUNTS as usize, ACCOUNTS as i64 * INITIAL),
                "{}",
                e.cc_name()
            );
            scans += 1;
        }
        scans
    });
    let a = adaptive(e.as_ref());
    assert!(a.snapshot_txns >= scans, "{a:?}");
    assert!(a.nvm_direct_reads > 0, "no snapshot read NVM in place: {a:?}");
    assert!(e.status().gc_reclaimed_slots > reclaimed_before + 1000, "GC stalled");
    e.check_invariants().unwrap();
}

#[test]
fn snapshot_scans_see_a_consistent_total_while_writers_churn_and_gc_runs_mvcc() {
    snapshots_under_churn(CcKind::Mvcc);
}

#[test]
fn snapshot_scans_see_a_consistent_total_while_writers_churn_and_gc_runs_hekaton() {
    snapshots_under_churn(CcKind::Hekaton);
}

/// GC keeps up while no long transaction runs, holds back (only) what a long
/// snapshot may read while it runs, and resumes after it ends; the snapshot
/// keeps reading the values of when it began.
#[test]
fn gc_keeps_up_without_a_long_transaction_and_resumes_after_one() {
    let e = engine(&dram_config(CcKind::Mvcc));
    let t = e.table_id("accounts").unwrap();
    let mut writer = e.worker().unwrap();
    let mut long = e.worker().unwrap();
    let reclaimed = |e: &dyn Engine| e.status().gc_reclaimed_slots;
    let r0 = reclaimed(e.as_ref());
    for i in 0..400 {
        transfer(&mut writer, t, i % ACCOUNTS, (i + 1) % ACCOUNTS);
    }
    let r1 = reclaimed(e.as_ref());
    assert!(r1 - r0 >= 700, "GC fell behind without a long transaction: {}", r1 - r0);

    long.begin_txn(&TxnOptions::read_only()).unwrap();
    let mut out = vec![0u8; ROW];
    let before = {
        let tx = long.current_txn().unwrap();
        assert!(tx.get(t, 5, &mut out).unwrap());
        value(&out)
    };
    for i in 0..400 {
        transfer(&mut writer, t, 5, (i % (ACCOUNTS - 6)) + 6);
    }
    let r2 = reclaimed(e.as_ref());
    assert!(r2 - r1 < 100, "GC reclaimed {} slots a running snapshot may read", r2 - r1);
    {
        let tx = long.current_txn().unwrap();
        assert!(tx.get(t, 5, &mut out).unwrap());
        assert_eq!(value(&out), before, "the snapshot moved");
    }
    long.commit_txn().unwrap();
    for i in 0..400 {
        transfer(&mut writer, t, i % ACCOUNTS, (i + 3) % ACCOUNTS);
    }
    let r3 = reclaimed(e.as_ref());
    assert!(r3 - r2 >= 1200, "GC did not resume after the snapshot ended: {}", r3 - r2);
    drop((writer, long));
    e.check_invariants().unwrap();
}

/// α: one read-write transaction updates four times as many tuples as its
/// Met-Cache region holds. It becomes privileged when it passes α of the
/// region, then reads and writes NVM directly once the region is full, and
/// commits; every update is there afterwards.
#[test]
fn alpha_makes_a_cache_filling_update_privileged_and_it_commits() {
    let config =
        EngineConfig { max_workers: 2, cache_size_bytes: 64 << 10, ..dram_config(CcKind::Mvcc) };
    let e = zen_engine::open(&config).unwrap();
    let t = e.create_table(&accounts()).unwrap();
    let keys = 4000u64;
    let mut w = e.worker().unwrap();
    for chunk in (0..keys).collect::<Vec<_>>().chunks(64) {
        w.run(&TxnOptions::default(), |tx| {
            chunk.iter().try_for_each(|&k| tx.insert(t, k, &row(1)))
        })
        .unwrap();
    }
    let capacity = e.status().cache_entries_capacity;
    assert!(capacity < keys, "the cache holds {capacity} entries: too large for the test");
    let mut out = vec![0u8; ROW];
    w.execute(&TxnOptions::default(), &mut |tx| {
        for k in 0..keys {
            tx.get_for_update(t, k, &mut out)?;
            tx.update(t, k, &row(value(&out) + 1))?;
        }
        Ok(())
    })
    .unwrap_or_else(|x| panic!("{x}: {:?} {:?}", adaptive(e.as_ref()), e.status()));
    let a = adaptive(e.as_ref());
    assert_eq!((a.stage_switches, a.privileged_alpha), (1, 1), "{a:?}");
    assert!(a.nvm_direct_writes > 0 && a.nvm_direct_reads > 0, "{a:?}");
    let sum = w
        .run(&TxnOptions::read_only(), |tx| {
            let mut sum = 0;
            tx.scan(t, 0..=keys, usize::MAX, &mut |_, r| {
                sum += value(r);
                true
            })?;
            Ok(sum)
        })
        .unwrap();
    assert_eq!(sum, 2 * keys as i64);
    drop(w);
    e.check_invariants().unwrap();
}

/// γ: a transaction whose attempts keep aborting (here its body reports a
/// retryable conflict) becomes privileged once the tuples its attempts
/// wasted pass γ, and then commits.
#[test]
fn gamma_makes_a_transaction_that_keeps_retrying_privileged_and_it_commits() {
    let config = EngineConfig { adaptive_gamma_tuples: 50, ..dram_config(CcKind::Mvcc) };
    let e = engine(&config);
    let t = e.table_id("accounts").unwrap();
    let mut w = e.worker().unwrap();
    let mut attempts = 0;
    let mut out = vec![0u8; ROW];
    w.run(&TxnOptions::default(), |tx| {
        attempts += 1;
        for k in 0..20 {
            tx.get(t, k, &mut out)?;
        }
        tx.update(t, 0, &row(5))?;
        if attempts < 3 {
            // Wasted: 21 tuples per attempt, 42 after two.
            return Err(Error::Abort(AbortReason::ReadValidation));
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(attempts, 3);
    let a = adaptive(e.as_ref());
    assert_eq!((a.stage_switches, a.privileged_gamma), (1, 1), "{a:?}");
    drop(w);
    e.check_invariants().unwrap();
}

/// Two workers whose every transaction qualifies (α so small that one
/// access passes it) contend for G-EX: the loser aborts and retries, nobody
/// waits for anybody holding what it needs, and all transactions commit.
#[test]
fn two_transactions_qualifying_at_once_do_not_deadlock() {
    let config = EngineConfig { adaptive_alpha: 1e-9, ..dram_config(CcKind::Mvcc) };
    let e = engine(&config);
    let t = e.table_id("accounts").unwrap();
    std::thread::scope(|s| {
        for half in 0..2u64 {
            let e = &e;
            s.spawn(move || {
                let mut w = e.worker().unwrap();
                for i in 0..150 {
                    let from = half * 32 + i % 32;
                    transfer(&mut w, t, from, half * 32 + (i + 1) % 32);
                }
            });
        }
    });
    let a = adaptive(e.as_ref());
    assert!(a.stage_switches >= 300 && a.privileged_alpha == a.stage_switches, "{a:?}");
    let mut w = e.worker().unwrap();
    let sum = w
        .run(&TxnOptions::read_only(), |tx| {
            let mut sum = 0;
            tx.scan(t, 0..=ACCOUNTS, usize::MAX, &mut |_, r| {
                sum += value(r);
                true
            })?;
            Ok(sum)
        })
        .unwrap();
    assert_eq!(sum, ACCOUNTS as i64 * INITIAL);
}

/// A long read-only transaction holds back GC while another worker keeps
/// updating, on a pool of 24 pages. Without Zen+ the writer runs out of NVM;
/// with it β fires, the long transaction (the largest running one) becomes
/// privileged, commits, reclaims everyone's garbage, and the writer
/// completes all its updates.
fn long_reader_beside_updates(adaptive_on: bool) -> Result<(), Error> {
    let config = EngineConfig {
        adaptive: adaptive_on,
        pool_size_bytes: 24 * (64 << 10),
        max_workers: 2,
        ..dram_config(CcKind::Mvcc)
    };
    let e = engine(&config);
    let t = e.table_id("accounts").unwrap();
    let mut writer = e.worker().unwrap();
    let mut long = e.worker().unwrap();
    long.begin_txn(&TxnOptions::read_only()).unwrap();
    let mut open = true;
    let mut out = vec![0u8; ROW];
    for i in 0..60_000u64 {
        let key = i % ACCOUNTS;
        writer.run(&TxnOptions::default(), |tx| tx.update(t, key, &row(i as i64)))?;
        if open {
            let tx = long.current_txn().unwrap();
            assert!(tx.get(t, key, &mut out)?);
            if e.status().adaptive.is_some_and(|a| a.stage_switches > 0) {
                long.commit_txn()?;
                open = false;
            }
        }
    }
    if open {
        long.abort_txn();
    }
    drop((writer, long));
    if adaptive_on {
        let a = adaptive(e.as_ref());
        assert_eq!((a.stage_switches, a.privileged_beta), (1, 1), "{a:?}");
        assert!(a.exclusive_reclaimed_slots > 0, "{a:?}");
    }
    e.check_invariants()
}

#[test]
fn a_workload_that_runs_out_of_nvm_without_zen_plus_completes_with_it() {
    let without = long_reader_beside_updates(false);
    assert!(
        matches!(without, Err(Error::Abort(AbortReason::OutOfSpace))),
        "without Zen+: {without:?}"
    );
    long_reader_beside_updates(true).unwrap();
}

/// β alone: with β = 100% every check finds NVM "low", so the running
/// transaction with the most accesses becomes privileged at its 256th access
/// and commits.
#[test]
fn beta_makes_the_largest_running_transaction_privileged_and_it_commits() {
    let config = EngineConfig { adaptive_beta: 1.0, ..dram_config(CcKind::Hekaton) };
    let e = engine(&config);
    let t = e.table_id("accounts").unwrap();
    let mut w = e.worker().unwrap();
    w.run(&TxnOptions::default(), |tx| {
        for _ in 0..5 {
            tx.scan(t, 0..=ACCOUNTS, usize::MAX, &mut |_, _| true)?;
        }
        tx.update(t, 1, &row(INITIAL))
    })
    .unwrap();
    let a = adaptive(e.as_ref());
    assert_eq!((a.stage_switches, a.privileged_beta), (1, 1), "{a:?}");
    drop(w);
    e.check_invariants().unwrap();
}

/// The options are validated with messages naming the knob.
#[test]
fn adaptive_thresholds_are_validated() {
    let base = dram_config(CcKind::Mvcc);
    for (config, needle) in [
        (EngineConfig { adaptive_alpha: 0.0, ..base.clone() }, "alpha"),
        (EngineConfig { adaptive_alpha: 1.5, ..base.clone() }, "alpha"),
        (EngineConfig { adaptive_beta: f64::NAN, ..base.clone() }, "beta"),
        (EngineConfig { adaptive_gamma_tuples: 0, ..base.clone() }, "gamma"),
    ] {
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
}
