//! Zen's parallel recovery (Alg. 2, `zen/recovery/`) on file pools: the
//! same pool recovered with 1, 2, 3 and 4 threads gives the same state and
//! the same counts; the pending list stays as short as a transaction; a
//! corrupt page stops every thread before anything is written. (Crashes
//! during a parallel recovery are the crash campaigns' job:
//! `zen-workload/tests/crash_*.rs` recover with 1, 2 and 4 threads.)

mod common;

use std::path::Path;

use common::*;
use zen_engine::{CcKind, ColumnType, Engine, EngineConfig, Error, TableSchema, TxnOptions};

fn opts() -> TxnOptions {
    TxnOptions::default()
}

/// A table with a secondary index on its `group` column.
fn grouped() -> TableSchema {
    TableSchema::new("grouped")
        .column("group", ColumnType::I64)
        .column("pad", ColumnType::Bytes(24))
        .secondary_index("by_group", &["group"])
}

fn config(dir: &Path, create: bool, threads: Option<usize>) -> EngineConfig {
    EngineConfig { recovery_threads: threads, ..fs_config(dir, create, CcKind::Silo) }
}

/// Rows (key, value) of `accounts` and `grouped`, and the keys of each group
/// in the secondary index.
type State = (Vec<(u64, i64)>, Vec<(u64, i64)>, Vec<Vec<u64>>);

/// Every row of both tables and every (group → keys) of the secondary index.
fn state(engine: &dyn Engine) -> State {
    let a = engine.table_id("accounts").unwrap();
    let g = engine.table_id("grouped").unwrap();
    let mut w = engine.worker().unwrap();
    let mut rows = |t| {
        let mut out = Vec::new();
        w.run(&opts(), |tx| {
            out.clear();
            tx.scan(t, 0..=u64::MAX >> 1, usize::MAX, &mut |k, r| {
                out.push((k, value(r)));
                true
            })
        })
        .unwrap();
        out
    };
    let (accounts, groups) = (rows(a), rows(g));
    let mut by_group = Vec::new();
    for group in 0..5i64 {
        let mut keys = Vec::new();
        w.run(&opts(), |tx| tx.lookup_secondary(g, 0, &group.to_le_bytes(), usize::MAX, &mut keys))
            .unwrap();
        keys.sort_unstable();
        by_group.push(keys);
    }
    (accounts, groups, by_group)
}

/// Four workers, each on its own thread, insert, update (so other workers'
/// regions hold superseded versions) and delete (tombstones) in two tables,
/// one with a secondary index; then the engine is abandoned (a crash).
fn populate(dir: &Path) {
    let engine = zen_engine::open(&config(dir, true, None)).unwrap();
    let a = engine.create_table(&accounts()).unwrap();
    let g = engine.create_table(&grouped()).unwrap();
    let inserted = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for me in 0..4u64 {
            let (engine, inserted) = (&engine, &inserted);
            s.spawn(move || {
                let mut w = engine.worker().unwrap();
                for k in (me * 200)..(me * 200 + 200) {
                    w.run(&opts(), |tx| {
                        tx.insert(a, k, &row(k as i64))?;
                        tx.insert(g, k, &row(k as i64 % 5))
                    })
                    .unwrap();
                }
                inserted.wait();
                // Every worker updates keys the others inserted.
                for k in (0..800u64).filter(|k| k % 4 == me && k % 3 == 0) {
                    w.run(&opts(), |tx| {
                        tx.update(a, k, &row(-(k as i64)))?;
                        tx.update(g, k, &row((k as i64 + 1) % 5))
                    })
                    .unwrap();
                }
                for k in (0..800u64).filter(|k| k % 4 == me && k % 7 == 1) {
                    w.run(&opts(), |tx| {
                        tx.delete(a, k)?;
                        tx.delete(g, k)
                    })
                    .unwrap();
                }
            });
        }
    });
    engine.abandon();
}

fn copy_pool(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(from.join("test.pool"), to.join("test.pool")).unwrap();
}

#[test]
fn every_thread_count_recovers_the_same_state_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source");
    std::fs::create_dir_all(&source).unwrap();
    populate(&source);
    let live = (0..800u64).filter(|k| k % 7 != 1).count() as u64;
    let mut reference = None;
    for threads in [1, 2, 3, 4] {
        let here = dir.path().join(format!("t{threads}"));
        copy_pool(&source, &here);
        for round in 0..2 {
            let engine = zen_engine::open(&config(&here, false, Some(threads))).unwrap();
            engine.check_invariants().unwrap();
            let r = engine.recovery_report().unwrap();
            assert_eq!(r.threads, threads);
            assert_eq!(r.tuples_recovered, 2 * live, "{threads} threads, round {round}");
            if round == 1 {
                // The first recovery zeroed every loser, durably.
                assert_eq!((r.uncommitted_discarded, r.superseded_discarded), (0, 0));
            }
            let names: Vec<&str> = r.phases.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(names, ["scan", "settle", "clean", "rebuild", "total"]);
            let total = r.phases.last().unwrap();
            assert_eq!((total.bytes, total.tuples), (r.bytes_scanned, r.tuples_recovered));
            assert!(r.scratch_bytes_peak > 0 && r.nvm_bytes_read >= r.slots_scanned * 16);
            let s = state(engine.as_ref());
            assert_eq!(s.0.len() as u64, live);
            assert!(s.0.iter().all(|&(k, v)| v == if k % 3 == 0 { -(k as i64) } else { k as i64 }));
            assert_eq!(s.2.iter().map(Vec::len).sum::<usize>() as u64, live);
            match &reference {
                None => reference = Some((s, r.superseded_discarded)),
                Some((expected, superseded)) if round == 0 => {
                    assert_eq!(&s, expected, "{threads} threads");
                    assert_eq!(r.superseded_discarded, *superseded, "{threads} threads");
                }
                Some((expected, _)) => assert_eq!(&s, expected, "{threads} threads, again"),
            }
            if round == 1 {
                // The recovered engine takes more work.
                let a = engine.table_id("accounts").unwrap();
                let mut w = engine.worker().unwrap();
                w.run(&opts(), |tx| tx.update(a, 2, &row(2))).unwrap();
                w.run(&opts(), |tx| tx.insert(a, 5000, &row(1))).unwrap();
            }
            engine.abandon();
        }
    }
}

#[test]
fn the_pending_list_holds_at_most_one_transaction_of_a_region_written_in_order() {
    // Regression guard for the scan's memory: it kept every non-empty slot
    // (O(n)); Alg. 2 keeps only versions newer than the last LP seen.
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = zen_engine::open(&config(dir.path(), true, None)).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        for batch in 0..500u64 {
            w.run(&opts(), |tx| {
                for k in batch * 4..batch * 4 + 4 {
                    tx.insert(t, k, &row(1))?;
                }
                Ok(())
            })
            .unwrap();
        }
        drop(w);
        engine.abandon();
    }
    let engine = zen_engine::open(&config(dir.path(), false, Some(1))).unwrap();
    let r = engine.recovery_report().unwrap();
    assert_eq!(r.tuples_recovered, 2000);
    assert!(r.pending_peak <= 4, "pending list peaked at {} versions", r.pending_peak);
}

#[test]
fn a_corrupt_page_stops_every_thread_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    populate(dir.path());
    let path = dir.path().join("test.pool");
    // Break the header of the last heap page (every thread has pages to
    // scan; the one holding it must fail the recovery for all of them).
    let mut bytes = std::fs::read(&path).unwrap();
    let page = 64 << 10;
    let magic = zen_engine::heap::PAGE_MAGIC.to_le_bytes();
    let last = (0..bytes.len() / page).rev().find(|&p| bytes[p * page..p * page + 8] == magic);
    let at = last.expect("a heap page") * page;
    bytes[at + 8] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let err = zen_engine::open(&config(dir.path(), false, Some(4))).err().expect("corrupt");
    assert!(matches!(err, Error::Corrupt(_)), "{err}");
    assert!(err.to_string().contains("header disagrees"), "{err}");
    let after = std::fs::read(&path).unwrap();
    // Only the pool's own open may have touched page 0 (the clean-shutdown
    // word); no heap page and no floor changed.
    assert_eq!(after[page..], bytes[page..], "recovery wrote to a corrupt pool");
}
