//! Single-worker behaviour of the Zen engine: CRUD, scans, errors, counters,
//! reopen and crash recovery on a file pool.

mod common;

use common::*;
use zen_engine::{CcKind, Durability, Error, Transaction, TxnOptions};

fn opts() -> TxnOptions {
    TxnOptions::default()
}

#[test]
fn insert_get_update_delete_and_scan() {
    for cc in CcKind::ALL {
        insert_get_update_delete_and_scan_with(cc);
    }
}

fn insert_get_update_delete_and_scan_with(cc: CcKind) {
    let engine = zen_engine::open(&dram_config(cc)).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    let mut w = engine.worker().unwrap();
    w.run(&opts(), |tx| {
        for k in 0..100 {
            tx.insert(t, k, &row(k as i64))?;
        }
        Ok(())
    })
    .unwrap();
    let mut out = vec![0u8; ROW];
    w.run(&opts(), |tx| {
        assert!(tx.get(t, 7, &mut out)?);
        assert_eq!(value(&out), 7);
        tx.update(t, 7, &row(700))?;
        tx.delete(t, 8)?;
        Ok(())
    })
    .unwrap();
    let (sum, n) = w
        .run(&opts(), |tx| {
            let mut sum = 0;
            let n = tx.scan(t, 5..=9, 100, &mut |_, r| {
                sum += value(r);
                true
            })?;
            Ok((sum, n))
        })
        .unwrap();
    assert_eq!((n, sum), (4, 5 + 6 + 700 + 9));
    let missing = w.run(&opts(), |tx| tx.update(t, 8, &row(1)));
    assert!(matches!(missing, Err(Error::KeyNotFound { .. })));
    let dup = w.run(&opts(), |tx| tx.insert(t, 9, &row(1)));
    assert!(matches!(dup, Err(Error::DuplicateKey { .. })));
    w.run(&opts(), |tx| tx.insert(t, 8, &row(88))).unwrap();
    assert!(w.run(&opts(), |tx| tx.get(t, 8, &mut out)).unwrap());
    assert_eq!(value(&out), 88);
    drop(w);
    engine.check_invariants().unwrap();
}

#[test]
fn bad_input_gives_typed_errors() {
    for cc in CcKind::ALL {
        bad_input_gives_typed_errors_with(cc);
    }
}

fn bad_input_gives_typed_errors_with(cc: CcKind) {
    let engine = zen_engine::open(&dram_config(cc)).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    assert!(matches!(engine.table_id("nope"), Err(Error::UnknownTable(_))));
    let other = accounts().column("extra", zen_engine::ColumnType::I32);
    assert!(matches!(engine.create_table(&other), Err(Error::SchemaMismatch(_))));
    let mut w = engine.worker().unwrap();
    let short = w.run(&opts(), |tx| tx.insert(t, 1, &[0u8; 3]));
    assert!(matches!(short, Err(Error::WrongTupleSize { expected: ROW, actual: 3, .. })));
    let big = w.run(&opts(), |tx| tx.insert(t, u64::MAX, &row(0)));
    assert!(matches!(big, Err(Error::KeyOutOfRange { .. })));
    let bad_table = w.run(&opts(), |tx| tx.insert(zen_engine::TableId(9), 1, &row(0)));
    assert!(matches!(bad_table, Err(Error::UnknownTableId(9))));
    drop(w);
    let workers: Vec<_> = (0..8).map(|_| engine.worker().unwrap()).collect();
    assert!(matches!(engine.worker(), Err(Error::TooManyWorkers { max: 8 })));
    drop(workers);
}

#[test]
fn counters_per_transaction_match_alg_1() {
    for cc in CcKind::ALL {
        counters_per_transaction_match_alg_1_with(cc);
    }
}

fn counters_per_transaction_match_alg_1_with(cc: CcKind) {
    for (durability, fences) in [(Durability::Lazy, 1), (Durability::Immediate, 2)] {
        let engine = zen_engine::open(&dram_config(cc)).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        let o = TxnOptions { durability: Some(durability), ..Default::default() };
        w.run(&o, |tx| (0..4).try_for_each(|k| tx.insert(t, k, &row(1)))).unwrap();
        w.sync().unwrap();
        let before = w.counters();
        let mut out = vec![0u8; ROW];
        w.run(&o, |tx| tx.get(t, 1, &mut out)).unwrap();
        let read_only = w.counters().since(&before);
        assert_eq!((read_only.bytes_written, read_only.fences), (0, 0), "reads never write NVM");
        let before = w.counters();
        w.run(&o, |tx| (0..3).try_for_each(|k| tx.update(t, k, &row(2)))).unwrap();
        let d = w.counters().since(&before);
        let slot = zen_engine::heap::slot_size(ROW);
        assert_eq!(d.fences, fences, "{durability:?}");
        // Every byte of the three slots is written once: the LP tuple's
        // word 1 only by the LP store after the fence (Alg. 1, LP word
        // written once), not also with the LP bit clear before it.
        assert_eq!(d.bytes_written, 3 * slot, "3 slots, the LP word written once");
        let before = w.counters();
        let aborted = w.execute(&o, &mut |tx| {
            tx.update(t, 1, &row(3))?;
            Err(zen_engine::user_abort())
        });
        assert!(aborted.is_err());
        let d = w.counters().since(&before);
        assert_eq!((d.bytes_written, d.fences), (0, 0), "aborts never write NVM");
    }
}

#[test]
fn committed_state_survives_clean_reopen_and_crash() {
    for cc in CcKind::ALL {
        committed_state_survives_clean_reopen_and_crash_with(cc);
    }
}

fn committed_state_survives_clean_reopen_and_crash_with(cc: CcKind) {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = zen_engine::open(&fs_config(dir.path(), true, cc)).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        for k in 0..300u64 {
            w.run(&opts(), |tx| tx.insert(t, k, &row(k as i64))).unwrap();
        }
        for k in (0..300u64).step_by(3) {
            w.run(&opts(), |tx| tx.update(t, k, &row(-(k as i64)))).unwrap();
        }
        for k in (1..300u64).step_by(5) {
            w.run(&opts(), |tx| tx.delete(t, k)).unwrap();
        }
        drop(w);
        engine.close().unwrap();
    }
    let expect = |k: u64| -> Option<i64> {
        if k % 5 == 1 {
            None
        } else if k.is_multiple_of(3) {
            Some(-(k as i64))
        } else {
            Some(k as i64)
        }
    };
    for round in 0..2 {
        let engine = zen_engine::open(&fs_config(dir.path(), false, cc)).unwrap();
        let report = engine.recovery_report().unwrap();
        assert_eq!(
            report.tuples_recovered,
            (0..300).filter(|&k| expect(k).is_some()).count() as u64
        );
        engine.check_invariants().unwrap();
        let t = engine.table_id("accounts").unwrap();
        let mut w = engine.worker().unwrap();
        let mut out = vec![0u8; ROW];
        for k in 0..300u64 {
            let found = w.run(&opts(), |tx| tx.get(t, k, &mut out)).unwrap();
            assert_eq!(found.then(|| value(&out)), expect(k), "key {k} round {round}");
        }
        drop(w);
        if round == 0 {
            // Simulate a crash: no clean shutdown.
            engine.abandon();
        } else {
            engine.close().unwrap();
        }
    }
}

#[test]
fn explicit_transactions_commit_and_abort_on_drop() {
    let dir = tempfile::tempdir().unwrap();
    let db = zen_engine::Db::builder()
        .pool(dir.path().join("db.pool"))
        .pool_size_bytes(16 << 20)
        .config(|c| c.page_size_bytes = 64 << 10)
        .max_workers(4)
        .create()
        .unwrap();
    let t = db.create_table(&accounts()).unwrap();
    let other = db.clone();
    std::thread::spawn(move || other.table_id("accounts").unwrap()).join().unwrap();
    let mut w = db.worker().unwrap();
    use zen_engine::Transaction;
    {
        let mut tx = w.begin(&TxnOptions::default()).unwrap();
        tx.insert(t, 1, &row(10)).unwrap();
        tx.commit().unwrap();
    }
    {
        let mut tx = w.begin(&TxnOptions::default()).unwrap();
        tx.update(t, 1, &row(20)).unwrap();
        // dropped without commit: aborted
    }
    {
        let mut tx = w.begin(&TxnOptions::default()).unwrap();
        tx.update(t, 1, &row(30)).unwrap();
        tx.abort();
    }
    let mut out = vec![0u8; ROW];
    assert!(w.run(&TxnOptions::default(), |tx| tx.get(t, 1, &mut out)).unwrap());
    assert_eq!(value(&out), 10);
    drop(w);
    db.close().unwrap();
    let db = zen_engine::Db::builder().pool(dir.path().join("db.pool")).open().unwrap();
    let t = db.table_id("accounts").unwrap();
    let mut w = db.worker().unwrap();
    assert!(w.run(&TxnOptions::default(), |tx| tx.get(t, 1, &mut out)).unwrap());
    assert_eq!(value(&out), 10);
}

#[test]
fn access_set_over_its_limit_is_a_typed_error() {
    for cc in CcKind::ALL {
        let config = zen_engine::EngineConfig { max_access_set: 10, ..dram_config(cc) };
        let engine = zen_engine::open(&config).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        let r =
            w.run(&TxnOptions::default(), |tx| (0..11).try_for_each(|k| tx.insert(t, k, &row(1))));
        assert!(matches!(r, Err(Error::AccessSetFull { limit: 10 })), "{cc:?}: {r:?}");
        w.run(&TxnOptions::default(), |tx| (0..5).try_for_each(|k| tx.insert(t, k, &row(1))))
            .unwrap();
    }
}

/// A table eight times larger than the Met-Cache, read sixteen random keys
/// per transaction: evicted entries wait for the watermark before reuse, and
/// the region must keep a reserve of them rather than grow until every
/// reusable entry is still waiting (a regression: 12 % of such transactions
/// used to abort with `CacheFull`). No transaction may abort, and the entries
/// in use stay within the budget.
#[test]
fn a_cache_smaller_than_the_table_never_refuses_transactions() {
    for cc in CcKind::ALL {
        let config = zen_engine::EngineConfig { cache_size_bytes: 64 << 10, ..dram_config(cc) };
        let engine = zen_engine::open(&config).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        let rows = 8 * (64 << 10) / ROW as u64;
        for batch in 0..rows / 512 {
            w.run(&opts(), |tx| {
                (batch * 512..(batch + 1) * 512).try_for_each(|k| tx.insert(t, k, &row(k as i64)))
            })
            .unwrap();
        }
        let mut out = vec![0u8; ROW];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..600 {
            let mut tx = w.begin(&opts()).unwrap();
            for r in 0..16 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = x % rows;
                let result = if r == 0 && i % 4 == 0 {
                    tx.update(t, key, &row(key as i64))
                } else {
                    tx.get(t, key, &mut out)
                        .map(|found| assert!(found && value(&out) == key as i64))
                };
                if let Err(e) = result {
                    panic!("{cc:?}: transaction {i} failed at request {r}: {e}");
                }
            }
            if let Err(e) = tx.commit() {
                panic!("{cc:?}: transaction {i} failed to commit: {e}");
            }
        }
        let status = engine.status();
        assert!(
            status.cache_entries_used <= status.cache_entries_capacity + 16,
            "{cc:?}: cache not bounded by the budget: {status:?}"
        );
        assert!(w.cache_stats().evictions > 0, "{cc:?}: nothing was evicted");
        drop(w);
        engine.check_invariants().unwrap();
    }
}

/// Deleted keys leave the ordered index, so scans stop walking them: at
/// once under the single-version protocols, and under the multi-version
/// ones (mvcc, hekaton, cicada) once no snapshot can read below their
/// tombstones, at a later commit of the deleting worker. A key inserted
/// again is linked again; a key deleted while a snapshot could still need
/// it stays until then.
#[test]
fn deleted_keys_leave_the_ordered_index_under_every_protocol() {
    for cc in CcKind::ALL {
        let engine = zen_engine::open(&dram_config(cc)).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let keys = || engine.status().tables[0].ordered_keys;
        let mut w = engine.worker().unwrap();
        w.run(&opts(), |tx| (0..100).try_for_each(|k| tx.insert(t, k, &row(k as i64)))).unwrap();
        w.run(&opts(), |tx| (0..90).try_for_each(|k| tx.delete(t, k))).unwrap();
        // Another writing commit of the same worker: its maintenance runs
        // with the watermark above the deletes.
        w.run(&opts(), |tx| tx.update(t, 95, &row(950))).unwrap();
        assert_eq!(keys(), 10, "{}: deleted keys still in the ordered index", cc.name());
        let scanned = w
            .run(&TxnOptions::read_only(), |tx| tx.scan(t, 0..=200, 200, &mut |_, _| true))
            .unwrap();
        assert_eq!(scanned, 10, "{}", cc.name());
        // Inserted again: linked again, and scans see it.
        w.run(&opts(), |tx| tx.insert(t, 3, &row(33))).unwrap();
        assert_eq!(keys(), 11, "{}", cc.name());
        let mut seen = Vec::new();
        w.run(&TxnOptions::read_only(), |tx| {
            seen.clear();
            tx.scan(t, 0..=9, 10, &mut |k, r| {
                seen.push((k, value(r)));
                true
            })
        })
        .unwrap();
        assert_eq!(seen, vec![(3, 33)], "{}", cc.name());
        let multi = matches!(cc, CcKind::Mvcc | CcKind::Hekaton | CcKind::Cicada);
        if multi {
            // A running transaction that began before a delete holds the
            // watermark below it (it could read the deleted row): the key
            // stays while it runs.
            let mut reader = engine.worker().unwrap();
            let mut out = vec![0u8; ROW];
            let mut held = reader.begin(&opts()).unwrap();
            assert!(held.get(t, 92, &mut out).unwrap(), "{}", cc.name());
            w.run(&opts(), |tx| tx.delete(t, 91)).unwrap();
            w.run(&opts(), |tx| tx.update(t, 95, &row(951))).unwrap();
            assert_eq!(keys(), 11, "{}: while a reader runs", cc.name());
            drop(held);
            drop(reader);
            w.run(&opts(), |tx| tx.update(t, 95, &row(952))).unwrap();
            assert_eq!(keys(), 10, "{}: after the reader", cc.name());
        }
        drop(w);
        engine.check_invariants().unwrap();
    }
}

/// S7 of `zen/space.rs`: a record updated again and again rewrites the
/// slot kept as its spare instead of taking free slots, so one key's
/// updates keep the heap where it was; the spare always holds an older
/// version of the key (R4 of `check_invariants`); a delete retires the
/// spare, and after GC and a reopen the key stays deleted.
/// A new `fs` pool in a temporary directory (kept alive by the caller), a
/// `cc` engine on it and the accounts table.
fn fresh(cc: CcKind) -> (tempfile::TempDir, Box<dyn zen_engine::Engine>, zen_engine::TableId) {
    let dir = tempfile::tempdir().unwrap();
    let engine = zen_engine::open(&fs_config(dir.path(), true, cc)).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    (dir, engine, t)
}

fn lazy() -> TxnOptions {
    TxnOptions { durability: Some(Durability::Lazy), ..Default::default() }
}

/// Slots of a worker id that no longer runs (a pool loaded by more workers
/// than now use it) are freed by whoever reclaims them once the owner's
/// handoff queue is full: before, they waited for an owner that never came,
/// and every maintenance retried all of them.
#[test]
fn slots_of_a_worker_that_no_longer_runs_are_freed_by_their_reclaimer() {
    const KEYS: u64 = 3000; // more than an owner's handoff queue holds (1024)
    for cc in CcKind::ALL {
        let (_dir, engine, t) = fresh(cc);
        let lazy = lazy();
        let mut w0 = engine.worker().unwrap();
        let mut w1 = engine.worker().unwrap();
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(100) {
            w1.run(&lazy, |tx| chunk.iter().try_for_each(|&k| tx.insert(t, k, &row(k as i64))))
                .unwrap();
        }
        drop(w1);
        let before = engine.status().gc_reclaimed_slots;
        for k in 0..KEYS {
            w0.run(&lazy, |tx| tx.delete(t, k).map(|_| ())).unwrap();
        }
        for i in 0..64 {
            w0.run(&lazy, |tx| tx.insert(t, KEYS + i, &row(0))).unwrap();
            w0.sync().unwrap();
        }
        let s = engine.status();
        // Each delete supersedes one of worker 1's slots; all of them are
        // free again (a few tombstones of worker 0 may be too).
        assert!(s.gc_reclaimed_slots - before >= KEYS, "{cc:?}: {s:?}");
        engine.check_invariants().unwrap();
        drop(w0);
        engine.close().unwrap();
    }
}

/// A worker that leaves with garbage still pending (a reader kept its
/// versions above the watermark) does not hold every later tombstone back:
/// the running workers reclaim what it left (`Shared::adopt_orphans`).
/// Before, its pending items pinned its `gc_low` until its id was used
/// again, and no deleted row's slot came back (599 of 999 here).
#[test]
fn garbage_left_by_a_worker_that_left_is_reclaimed_and_tombstones_go() {
    for cc in CcKind::ALL {
        let (_dir, engine, t) = fresh(cc);
        let lazy = lazy();
        let mut w0 = engine.worker().unwrap();
        w0.run(&lazy, |tx| (0..1000).try_for_each(|k| tx.insert(t, k, &row(0)))).unwrap();
        w0.sync().unwrap();
        let (open, left) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
        std::thread::scope(|s| {
            let (e, open, left) = (&engine, &open, &left);
            s.spawn(move || {
                let mut w1 = e.worker().unwrap();
                open.wait();
                for i in 0..50 {
                    w1.run(&lazy, |tx| tx.update(t, 500, &row(i))).unwrap();
                }
                drop(w1);
                left.wait();
            });
            let mut out = vec![0u8; ROW];
            w0.run(&TxnOptions::default(), |tx| {
                tx.get(t, 1, &mut out)?;
                open.wait();
                left.wait(); // worker 1 updated and left while this was open
                Ok(())
            })
            .unwrap();
        });
        let before = engine.status().gc_reclaimed_slots;
        for k in 0..400 {
            w0.run(&lazy, |tx| tx.delete(t, k).map(|_| ())).unwrap();
        }
        for i in 0..200 {
            w0.run(&lazy, |tx| tx.update(t, 900, &row(i))).unwrap();
            w0.sync().unwrap();
        }
        let s = engine.status();
        // 400 superseded versions, 400 tombstones, 199 or so of key 900's
        // versions, and worker 1's 50.
        assert!(s.gc_reclaimed_slots - before >= 999, "{cc:?}: {s:?}");
        engine.check_invariants().unwrap();
        drop(w0);
        engine.close().unwrap();
    }
}

#[test]
fn repeated_updates_of_a_key_rewrite_its_spare_and_a_delete_retires_it() {
    for cc in CcKind::ALL {
        let (dir, engine, t) = fresh(cc);
        let mut w = engine.worker().unwrap();
        let lazy = lazy();
        w.run(&lazy, |tx| (0..2).try_for_each(|k| tx.insert(t, k, &row(0)))).unwrap();
        let pages = engine.status().tables[0].heap_pages;
        const UPDATES: i64 = 3000;
        for i in 1..=UPDATES {
            w.run(&lazy, |tx| tx.update(t, 1, &row(i))).unwrap();
            if i % 500 == 0 {
                engine.check_invariants().unwrap();
            }
        }
        w.sync().unwrap();
        let s = engine.status();
        // Each superseded slot becomes the spare unless the record holds
        // one already: about one update in two reuses it.
        assert!(s.gc_spared_slots >= UPDATES as u64 / 3, "{cc:?}: {s:?}");
        assert_eq!(s.tables[0].heap_pages, pages, "{cc:?}: the heap grew: {s:?}");
        engine.check_invariants().unwrap();
        w.run(&lazy, |tx| tx.delete(t, 1)).unwrap();
        for i in 0..64 {
            w.run(&lazy, |tx| tx.update(t, 0, &row(i))).unwrap();
            w.sync().unwrap();
        }
        engine.check_invariants().unwrap();
        drop(w);
        engine.abandon();
        let engine = zen_engine::open(&fs_config(dir.path(), false, cc)).unwrap();
        engine.check_invariants().unwrap();
        let t = engine.table_id("accounts").unwrap();
        let mut w = engine.worker().unwrap();
        let mut out = vec![0u8; ROW];
        assert!(!w.run(&opts(), |tx| tx.get(t, 1, &mut out)).unwrap(), "{cc:?}: key 1 came back");
        assert!(w.run(&opts(), |tx| tx.get(t, 0, &mut out)).unwrap());
        assert_eq!(value(&out), 63, "{cc:?}");
        drop(w);
        engine.close().unwrap();
    }
}

/// A table is planned when it is created, empty, beside another: each gets
/// half the Met-Cache budget. When a region of the table reaches that share
/// and the table has grown since, the plan is made again
/// (`Shared::replan_if_grown`), so a load that fits the budget stays cached
/// (before, a YCSB load of 2M rows into a 4 GiB cache evicted a tenth of it).
#[test]
fn a_table_that_outgrows_the_share_it_was_planned_with_is_planned_again() {
    let engine = zen_engine::open(&dram_config(CcKind::Silo)).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    let other = zen_engine::schema::TableSchema::new("other")
        .column("balance", zen_engine::ColumnType::I64)
        .column("pad", zen_engine::ColumnType::Bytes(24));
    engine.create_table(&other).unwrap();
    let mut w = engine.worker().unwrap();
    // 8 MiB of entries of 104 bytes: ≈ 80k in all, ≈ 40k per table at first.
    const ROWS: u64 = 60_000;
    for batch in 0..ROWS / 500 {
        w.run(&opts(), |tx| {
            for k in batch * 500..(batch + 1) * 500 {
                tx.insert(t, k, &row(k as i64))?;
            }
            Ok(())
        })
        .unwrap();
    }
    assert_eq!(w.cache_stats().evictions, 0, "a load that fits the budget evicted");
    let status = engine.status();
    assert!(status.cache_entries_used >= ROWS, "{} entries cached", status.cache_entries_used);
    drop(w);
    engine.check_invariants().unwrap();
}

/// A read-modify-write reads its record once. `update` after
/// `get_for_update` takes the record's presence from that read under every
/// protocol, and after a plain `get` under the single-version optimistic
/// ones, instead of reading the row a second time (a second copy out of the
/// Met-Cache and a second read-set entry to validate; session 22). Each read
/// of a cached version counts one cache hit.
#[test]
fn a_read_modify_write_reads_its_record_once() {
    for cc in CcKind::ALL {
        let engine = zen_engine::open(&dram_config(cc)).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        w.run(&opts(), |tx| tx.insert(t, 1, &row(10))).unwrap();
        let mut out = vec![0u8; ROW];
        let single_version_optimistic =
            matches!(cc, CcKind::Occ | CcKind::Silo | CcKind::Tictoc | CcKind::Hstore);
        for for_update in [true, false] {
            let before = w.cache_stats();
            w.run(&opts(), |tx| {
                let found = if for_update {
                    tx.get_for_update(t, 1, &mut out)?
                } else {
                    tx.get(t, 1, &mut out)?
                };
                assert!(found, "{cc:?}: key 1 is there");
                tx.update(t, 1, &row(value(&out) + 1))
            })
            .unwrap();
            let after = w.cache_stats();
            let reads = after.hits + after.misses - before.hits - before.misses;
            if for_update || single_version_optimistic {
                assert_eq!(reads, 1, "{cc:?}: read for update {for_update}: reads of record 1");
            }
        }
        assert!(w.run(&opts(), |tx| tx.get(t, 1, &mut out)).unwrap());
        assert_eq!(value(&out), 12, "{cc:?}: both increments committed");
        drop(w);
        engine.check_invariants().unwrap();
    }
}
