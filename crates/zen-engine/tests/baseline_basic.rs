//! Single-worker behaviour of the baseline engines (ideal, mmdb, wbl): CRUD,
//! scans, secondary indexes, typed errors, refused configurations, counters,
//! reopen and kill -9 recovery, mmdb's NVM placement and checkpoints, wbl's
//! group commit and space reclamation.

mod baseline_common;

use baseline_common::*;
use zen_engine::baseline::{MmdbEngine, WblEngine};
use zen_engine::{
    BaselineFault, CcKind, Durability, Engine, EngineConfig, EngineKind, Error, Fault, TableId,
    TxnOptions,
};
use zen_pmem::{BackendKind, FsBackend};

fn opts() -> TxnOptions {
    TxnOptions::default()
}

fn crud_and_scans(engine: &dyn Engine) {
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
        // Read-your-writes inside the transaction.
        assert!(tx.get(t, 7, &mut out)?);
        assert_eq!(value(&out), 700);
        assert!(!tx.get(t, 8, &mut out)?);
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
    assert_eq!((n, sum), (4, 5 + 6 + 700 + 9), "{}", engine.name());
    let limited = w.run(&opts(), |tx| tx.scan(t, 0..=99, 3, &mut |_, _| true)).unwrap();
    assert_eq!(limited, 3);
    let missing = w.run(&opts(), |tx| tx.update(t, 8, &row(1)));
    assert!(matches!(missing, Err(Error::KeyNotFound { .. })), "{missing:?}");
    let missing = w.run(&opts(), |tx| tx.delete(t, 1000));
    assert!(matches!(missing, Err(Error::KeyNotFound { .. })), "{missing:?}");
    let dup = w.run(&opts(), |tx| tx.insert(t, 9, &row(1)));
    assert!(matches!(dup, Err(Error::DuplicateKey { .. })), "{dup:?}");
    w.run(&opts(), |tx| tx.insert(t, 8, &row(88))).unwrap();
    assert!(w.run(&opts(), |tx| tx.get(t, 8, &mut out)).unwrap());
    assert_eq!(value(&out), 88);
    // Insert then delete in one transaction leaves nothing.
    w.run(&opts(), |tx| {
        tx.insert(t, 500, &row(5))?;
        tx.delete(t, 500)
    })
    .unwrap();
    assert!(!w.run(&opts(), |tx| tx.get(t, 500, &mut out)).unwrap());
    // A user abort changes nothing.
    let aborted: zen_engine::Result<()> = w.run(&opts(), |tx| {
        tx.update(t, 1, &row(-1))?;
        Err(zen_engine::user_abort())
    });
    assert!(aborted.is_err());
    assert!(w.run(&opts(), |tx| tx.get(t, 1, &mut out)).unwrap());
    assert_eq!(value(&out), 1);
    drop(w);
    engine.check_invariants().unwrap();
    let status = engine.status();
    assert_eq!(status.engine, engine.name());
    assert_eq!(status.tables[0].rows, 100);
}

fn secondary_index(engine: &dyn Engine) {
    let t = engine.create_table(&owners()).unwrap();
    let owner_row = |owner: u64, balance: i64| {
        let mut r = vec![0u8; 16];
        r[0..8].copy_from_slice(&owner.to_le_bytes());
        r[8..16].copy_from_slice(&balance.to_le_bytes());
        r
    };
    let mut w = engine.worker().unwrap();
    w.run(&opts(), |tx| {
        for k in 0..20u64 {
            tx.insert(t, k, &owner_row(k % 4, k as i64))?;
        }
        Ok(())
    })
    .unwrap();
    let lookup = |w: &mut Box<dyn zen_engine::EngineWorker + '_>, owner: u64| {
        w.run(&opts(), |tx| {
            let mut out = Vec::new();
            tx.lookup_secondary(t, 0, &owner.to_le_bytes(), 100, &mut out)?;
            Ok(out)
        })
        .unwrap()
    };
    assert_eq!(lookup(&mut w, 1), vec![1, 5, 9, 13, 17]);
    w.run(&opts(), |tx| {
        tx.update(t, 5, &owner_row(2, 0))?;
        tx.delete(t, 9)
    })
    .unwrap();
    assert_eq!(lookup(&mut w, 1), vec![1, 13, 17]);
    assert_eq!(lookup(&mut w, 2), vec![2, 5, 6, 10, 14, 18]);
    let bad = w.run(&opts(), |tx| tx.lookup_secondary(t, 3, &[], 1, &mut Vec::new()));
    assert!(matches!(bad, Err(Error::InvalidSchema { .. })), "{bad:?}");
    drop(w);
    engine.check_invariants().unwrap();
}

#[test]
fn crud_scans_and_secondary_indexes_on_every_baseline() {
    for kind in BASELINES {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(kind, dir.path(), true);
        assert_eq!(engine.name(), kind.name());
        assert_eq!(engine.cc_name(), "silo");
        crud_and_scans(engine.as_ref());
        secondary_index(engine.as_ref());
        engine.close().unwrap();
    }
}

#[test]
fn explicit_transactions_commit_and_drop_aborts() {
    use zen_engine::Transaction;
    for kind in BASELINES {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(kind, dir.path(), true);
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        let mut tx = w.begin(&immediate()).unwrap();
        tx.insert(t, 1, &row(10)).unwrap();
        tx.insert(t, 2, &row(20)).unwrap();
        let info = tx.commit().unwrap();
        assert_eq!(info.writes, 2);
        let mut tx = w.begin(&opts()).unwrap();
        tx.update(t, 1, &row(-1)).unwrap();
        drop(tx);
        let mut tx = w.begin(&opts()).unwrap();
        let mut out = vec![0u8; ROW];
        assert!(tx.get(t, 1, &mut out).unwrap());
        assert_eq!(value(&out), 10, "{}: a dropped transaction left a write", kind.name());
        tx.abort();
        drop(w);
        engine.check_invariants().unwrap();
    }
}

#[test]
fn bad_input_gives_typed_errors() {
    for kind in BASELINES {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(kind, dir.path(), true);
        let t = engine.create_table(&accounts()).unwrap();
        assert_eq!(engine.create_table(&accounts()).unwrap(), t, "same schema, same table");
        assert!(matches!(engine.table_id("nope"), Err(Error::UnknownTable(_))));
        let other = accounts().column("extra", zen_engine::ColumnType::I32);
        assert!(matches!(engine.create_table(&other), Err(Error::SchemaMismatch(_))));
        assert!(matches!(engine.schema(TableId(7)), Err(Error::UnknownTableId(7))));
        let mut w = engine.worker().unwrap();
        let short = w.run(&opts(), |tx| tx.insert(t, 1, &[0u8; 3]));
        assert!(matches!(short, Err(Error::WrongTupleSize { expected: ROW, actual: 3, .. })));
        let big = w.run(&opts(), |tx| tx.insert(t, u64::MAX, &row(0)));
        assert!(matches!(big, Err(Error::KeyOutOfRange { .. })));
        let bad_table = w.run(&opts(), |tx| tx.insert(TableId(9), 1, &row(0)));
        assert!(matches!(bad_table, Err(Error::UnknownTableId(9))));
        let wrote = w.run(&TxnOptions::read_only(), |tx| tx.insert(t, 1, &row(0)));
        assert!(matches!(wrote, Err(Error::Unsupported(_))));
        drop(w);
        let workers: Vec<_> = (0..8).map(|_| engine.worker().unwrap()).collect();
        assert!(matches!(engine.worker(), Err(Error::TooManyWorkers { max: 8 })));
        drop(workers);
        engine.check_invariants().unwrap();
    }
}

#[test]
fn configurations_that_make_no_sense_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |c: zen_engine::EngineConfig, needle: &str| {
        let err = zen_engine::open(&c).err().expect("refused");
        assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
        assert!(err.to_string().contains(needle), "`{err}` should mention `{needle}`");
    };
    let ideal = config(EngineKind::Ideal, dir.path(), true);
    refused(
        zen_engine::EngineConfig {
            pmem: BackendKind::Fs,
            pool: Some(dir.path().join("x")),
            ..ideal.clone()
        },
        "--pmem dram",
    );
    refused(zen_engine::EngineConfig { create: false, ..ideal.clone() }, "no recovery");
    for kind in BASELINES {
        let c = config(kind, dir.path(), true);
        if kind == EngineKind::Falcon {
            let six = [
                CcKind::Silo,
                CcKind::NoWait,
                CcKind::WaitDie,
                CcKind::DlDetect,
                CcKind::To,
                CcKind::Mvcc,
            ];
            assert_eq!(kind.supported_cc(), &six);
            refused(
                zen_engine::EngineConfig { cc: CcKind::Tictoc, ..c.clone() },
                "supports: silo, no-wait, wait-die, dl-detect, to, mvcc",
            );
        } else {
            assert_eq!(kind.supported_cc(), &[CcKind::Silo]);
            refused(zen_engine::EngineConfig { cc: CcKind::Mvcc, ..c.clone() }, "supports: silo");
            refused(zen_engine::EngineConfig { cc: CcKind::To, ..c.clone() }, "supports: silo");
        }
        refused(
            zen_engine::EngineConfig { fault: Some(Fault::NoFenceBeforeLp), ..c.clone() },
            "applies to --engine zen",
        );
    }
    assert_eq!(EngineKind::Zen.supported_cc(), &CcKind::ALL);
    let zen_to =
        zen_engine::EngineConfig { cc: CcKind::To, ..config(EngineKind::Zen, dir.path(), true) };
    refused(zen_to, "--engine zen does not run --cc to");
    let wbl = config(EngineKind::Wbl, dir.path(), true);
    refused(
        zen_engine::EngineConfig {
            baseline_fault: Some(BaselineFault::WalAckBeforeFlush),
            ..wbl.clone()
        },
        "applies to --engine mmdb",
    );
    refused(zen_engine::EngineConfig { pmem: BackendKind::Sim, ..wbl }, "crash simulator");
    for kind in EngineKind::ALL {
        assert_eq!(EngineKind::parse(kind.name()), Some(kind));
        assert!(!kind.describe().is_empty());
    }
}

#[test]
fn persistent_baselines_survive_close_and_kill() {
    for kind in PERSISTENT {
        let dir = tempfile::tempdir().unwrap();
        {
            let engine = open(kind, dir.path(), true);
            let t = engine.create_table(&accounts()).unwrap();
            let mut w = engine.worker().unwrap();
            for k in 0..50u64 {
                w.run(&immediate(), |tx| tx.insert(t, k, &row(k as i64))).unwrap();
            }
            drop(w);
            engine.close().unwrap();
        }
        let expected: Vec<(u64, i64)> = (0..50u64).map(|k| (k, k as i64)).collect();
        {
            let engine = open(kind, dir.path(), false);
            let t = engine.table_id("accounts").unwrap();
            assert_eq!(dump(engine.as_ref(), t), expected, "{} after close", kind.name());
            engine.check_invariants().unwrap();
            assert!(engine.recovery_report().is_some());
            let mut w = engine.worker().unwrap();
            w.run(&immediate(), |tx| {
                tx.update(t, 3, &row(333))?;
                tx.delete(t, 4)?;
                tx.insert(t, 77, &row(77))
            })
            .unwrap();
            drop(w);
            // kill -9: no clean shutdown, nothing flushed beyond what commits did.
            engine.abandon();
        }
        let engine = open(kind, dir.path(), false);
        let t = engine.table_id("accounts").unwrap();
        let mut want = expected.clone();
        want[3].1 = 333;
        want.remove(4);
        want.push((77, 77));
        assert_eq!(dump(engine.as_ref(), t), want, "{} after kill", kind.name());
        engine.check_invariants().unwrap();
        let report = engine.recovery_report().unwrap();
        assert_eq!(report.tuples_recovered, want.len() as u64, "{report:?}");
        engine.close().unwrap();
        let other = if kind == EngineKind::Mmdb { EngineKind::Wbl } else { EngineKind::Mmdb };
        let wrong = zen_engine::open(&config(other, dir.path(), false)).err().unwrap();
        assert!(matches!(wrong, Error::WrongEngine { .. }), "{wrong}");
        let zen =
            zen_engine::EngineConfig { engine: EngineKind::Zen, ..config(kind, dir.path(), false) };
        assert!(matches!(zen_engine::open(&zen).err().unwrap(), Error::WrongEngine { .. }));
    }
}

#[test]
fn counters_reflect_each_design() {
    let per_txn = |kind: EngineKind| {
        let dir = tempfile::tempdir().unwrap();
        let engine = open(kind, dir.path(), true);
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        w.run(&immediate(), |tx| {
            for k in 0..10 {
                tx.insert(t, k, &row(0))?;
            }
            Ok(())
        })
        .unwrap();
        let before = w.counters();
        w.run(&immediate(), |tx| {
            tx.update(t, 1, &row(1))?;
            tx.update(t, 2, &row(2))
        })
        .unwrap();
        let write = w.counters().since(&before);
        let before = w.counters();
        let mut out = vec![0u8; ROW];
        w.run(&TxnOptions::read_only(), |tx| tx.get(t, 1, &mut out)).unwrap();
        let read = w.counters().since(&before);
        drop(w);
        assert!(engine.pmem_counters().bytes_written >= write.bytes_written);
        (write, read)
    };
    let (write, read) = per_txn(EngineKind::Ideal);
    assert_eq!((write.bytes_written, write.fences, read.bytes_read), (0, 0, 0));
    let (write, read) = per_txn(EngineKind::Mmdb);
    assert_eq!(write.fences, 1, "mmdb: one fence per transaction, {write:?}");
    assert!(write.bytes_written >= 2 * ROW as u64);
    assert_eq!((read.bytes_written, read.fences), (0, 0), "rows in DRAM: reads are free");
    let (write, read) = per_txn(EngineKind::Wbl);
    // One fence per tuple version, plus the write-behind record it waits for.
    assert!(write.fences >= 2, "wbl: a fence per written tuple, {write:?}");
    assert!(write.bytes_written >= 2 * (48 + ROW) as u64);
    assert_eq!((read.bytes_written, read.fences), (0, 0));
}

#[test]
fn mmdb_places_rows_beyond_the_budget_in_nvm_and_checkpoints_truncate_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let config = zen_engine::EngineConfig {
        cache_size_bytes: 64 << 10,
        ..config(EngineKind::Mmdb, dir.path(), true)
    };
    let rows = 4000u64;
    {
        let engine = MmdbEngine::<FsBackend>::create(&config).unwrap();
        let e: &dyn Engine = &engine;
        let t = e.create_table(&accounts()).unwrap();
        let mut w = e.worker().unwrap();
        for chunk in 0..rows / 100 {
            w.run(&opts(), |tx| {
                for k in chunk * 100..(chunk + 1) * 100 {
                    tx.insert(t, k, &row(k as i64))?;
                }
                Ok(())
            })
            .unwrap();
        }
        let status = e.status();
        assert!(status.tables[0].heap_pages > 0, "rows beyond 64 KiB go to NVM: {status:?}");
        // An update of a row placed in NVM writes it (and its TID) there.
        let before = w.counters();
        w.run(&opts(), |tx| tx.update(t, rows - 1, &row(-1))).unwrap();
        let cost = w.counters().since(&before);
        assert!(cost.bytes_written >= 3 * 8 + 2 * ROW as u64, "{cost:?}");
        let mut out = vec![0u8; ROW];
        let before = w.counters();
        w.run(&opts(), |tx| tx.get(t, rows - 2, &mut out)).unwrap();
        assert!(w.counters().since(&before).bytes_read >= ROW as u64);
        drop(w);
        let log_pages = |e: &dyn Engine| e.status().page_count - e.status().free_pages;
        let pages_before = log_pages(e);
        let report = engine.checkpoint().unwrap();
        assert_eq!(report.rows, rows);
        assert!(report.log_pages_released > 0, "{report:?}");
        assert!(log_pages(e) < pages_before + report.pages, "the log shrank");
        let mut w = e.worker().unwrap();
        w.run(&opts(), |tx| {
            tx.update(t, 5, &row(55))?;
            tx.delete(t, 6)
        })
        .unwrap();
        drop(w);
        e.check_invariants().unwrap();
        engine.abandon_engine();
    }
    let engine =
        MmdbEngine::<FsBackend>::open(&zen_engine::EngineConfig { create: false, ..config })
            .unwrap();
    let e: &dyn Engine = &engine;
    let t = e.table_id("accounts").unwrap();
    let got = dump(e, t);
    assert_eq!(got.len(), rows as usize - 1);
    assert!(got.contains(&(5, 55)) && got.contains(&(rows - 1, -1)));
    assert!(!got.iter().any(|&(k, _)| k == 6));
    let report = e.recovery_report().unwrap();
    assert_eq!(report.tuples_recovered, rows - 1, "{report:?}");
    assert_eq!(engine.checkpoint_state().seq, 1);
    e.check_invariants().unwrap();
}

#[test]
fn mmdb_periodic_checkpoints_run_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let config = zen_engine::EngineConfig {
        checkpoint_interval_ms: Some(5),
        ..config(EngineKind::Mmdb, dir.path(), true)
    };
    let engine = MmdbEngine::<FsBackend>::create(&config).unwrap();
    let e: &dyn Engine = &engine;
    let t = e.create_table(&accounts()).unwrap();
    let mut w = e.worker().unwrap();
    let started = std::time::Instant::now();
    let mut k = 0;
    while engine.checkpoint_state().seq < 3 && started.elapsed().as_secs() < 10 {
        w.run(&opts(), |tx| tx.insert(t, k, &row(k as i64))).unwrap();
        k += 1;
    }
    drop(w);
    assert!(engine.checkpoint_state().seq >= 3, "checkpoints ran: {:?}", engine.checkpoint_state());
    e.check_invariants().unwrap();
    assert_eq!(dump(e, t).len(), k as usize);
    Box::new(engine).close().unwrap();
}

#[test]
fn mmdb_checkpoints_when_the_log_fills_the_pool() {
    // 16 MiB pool, no periodic checkpoints: updates of 64 hot accounts write
    // far more log than the pool holds; log-pressure checkpoints truncate it.
    let dir = tempfile::tempdir().unwrap();
    let config = config(EngineKind::Mmdb, dir.path(), true);
    assert_eq!(config.checkpoint_interval_ms, None);
    let engine = MmdbEngine::<FsBackend>::create(&config).unwrap();
    let e: &dyn Engine = &engine;
    let t = e.create_table(&accounts()).unwrap();
    let mut w = e.worker().unwrap();
    w.run(&opts(), |tx| (0..64).try_for_each(|k| tx.insert(t, k, &row(0)))).unwrap();
    let mut logged = 0u64;
    let mut n = 0i64;
    while logged < 3 * config.pool_size_bytes {
        let before = w.counters();
        w.run(&opts(), |tx| (0..64).try_for_each(|k| tx.update(t, k, &row(n + k as i64)))).unwrap();
        logged += w.counters().since(&before).bytes_written;
        n += 1;
    }
    drop(w);
    let (taken, failed) = engine.pressure_checkpoints();
    assert!(taken > 0 && failed == 0, "taken {taken}, failed {failed}");
    assert!(engine.checkpoint_state().seq >= taken);
    // What a benchmark reads at its window's edges agrees with the status.
    let checkpoints = e.counters().checkpoints.expect("mmdb counts checkpoints");
    assert_eq!(Some(checkpoints), e.status().checkpoints);
    assert_eq!((checkpoints.on_log_pressure, checkpoints.failed_on_log_pressure), (taken, failed));
    e.check_invariants().unwrap();
    let expected: Vec<(u64, i64)> = (0..64).map(|k| (k, n - 1 + k as i64)).collect();
    assert_eq!(dump(e, t), expected);
    engine.abandon_engine();
    let engine =
        MmdbEngine::<FsBackend>::open(&zen_engine::EngineConfig { create: false, ..config })
            .unwrap();
    assert_eq!(dump(&engine, t), expected, "recovered from the last checkpoint and the log");
}

#[test]
fn wbl_lazy_commits_are_durable_after_sync() {
    let dir = tempfile::tempdir().unwrap();
    let config = zen_engine::EngineConfig {
        group_commit_interval_us: 1_000_000,
        durability: Durability::Lazy,
        ..config(EngineKind::Wbl, dir.path(), true)
    };
    {
        let engine = WblEngine::<FsBackend>::create(&config).unwrap();
        let e: &dyn Engine = &engine;
        let t = e.create_table(&accounts()).unwrap();
        let mut w = e.worker().unwrap();
        let info = w.execute(&opts(), &mut |tx| tx.insert(t, 1, &row(1))).unwrap();
        assert!(!info.durable, "no record within a second: not yet durable");
        w.sync().unwrap();
        assert!(engine.last_record().cp >= info.cts);
        drop(w);
        engine.abandon_engine();
    }
    let engine =
        WblEngine::<FsBackend>::open(&zen_engine::EngineConfig { create: false, ..config })
            .unwrap();
    let t = engine.table_id("accounts").unwrap();
    assert_eq!(dump(&engine, t), vec![(1, 1)]);
}

#[test]
fn wbl_reclaims_superseded_versions_and_caches_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let config = zen_engine::EngineConfig {
        cache_size_bytes: 64 << 10,
        ..config(EngineKind::Wbl, dir.path(), true)
    };
    let engine = WblEngine::<FsBackend>::create(&config).unwrap();
    let e: &dyn Engine = &engine;
    let t = e.create_table(&accounts()).unwrap();
    let mut w = e.worker().unwrap();
    w.run(&immediate(), |tx| {
        for k in 0..3000 {
            tx.insert(t, k, &row(k as i64))?;
        }
        Ok(())
    })
    .unwrap();
    for i in 0..2000 {
        w.run(&immediate(), |tx| tx.update(t, i % 10, &row(i as i64))).unwrap();
    }
    w.run(&immediate(), |tx| tx.delete(t, 2999)).unwrap();
    for i in 0..200 {
        w.run(&immediate(), |tx| tx.update(t, 20, &row(i))).unwrap();
    }
    let mut out = vec![0u8; ROW];
    let mut sum = 0;
    for k in 0..2999 {
        w.run(&opts(), |tx| tx.get(t, k, &mut out)).unwrap();
        sum += value(&out);
    }
    let stats = w.cache_stats();
    drop(w);
    let status = e.status();
    assert!(status.gc_reclaimed_slots >= 2000, "{status:?}");
    assert_eq!(e.counters().gc_reclaimed_slots, status.gc_reclaimed_slots);
    // 3000 rows of 80-byte slots fill 4 pages; 2200 more versions reuse slots.
    assert!(status.tables[0].heap_pages <= 5, "reclaimed slots are reused: {status:?}");
    assert!(stats.misses > 0 && stats.hits > 0, "{stats:?}");
    let expected: i64 =
        (10..2999).filter(|&k| k != 20).sum::<i64>() + (1990..2000).sum::<i64>() + 199;
    assert_eq!(sum, expected);
    e.check_invariants().unwrap();
    Box::new(engine).close().unwrap();
}

/// `Transaction::prefetch` is a hint and nothing more, on every engine and
/// protocol: keys that are absent, out of range or of an unknown table are
/// ignored; reads after it see the committed rows; and a prefetched key is
/// not in the read set (a concurrent update of it does not abort the
/// transaction that prefetched it).
#[test]
fn prefetch_is_a_hint_on_every_engine_and_protocol() {
    use zen_engine::Transaction;
    for kind in EngineKind::ALL {
        for &cc in kind.supported_cc() {
            let dir = tempfile::tempdir().unwrap();
            let base = config(kind, dir.path(), true);
            let engine = zen_engine::open(&EngineConfig { cc, pool_size_bytes: 64 << 20, ..base })
                .unwrap_or_else(|e| panic!("{} {}: {e}", kind.name(), cc.name()));
            let what = format!("{} / {}", kind.name(), cc.name());
            let t = engine.create_table(&accounts()).unwrap();
            let mut w = engine.worker().unwrap();
            w.run(&immediate(), |tx| (0..50).try_for_each(|k| tx.insert(t, k, &row(k as i64))))
                .unwrap();
            let keys: Vec<u64> =
                (0..60).chain([zen_engine::schema::MAX_KEY + 5, u64::MAX]).collect();
            let mut out = vec![0u8; ROW];
            w.run(&opts(), |tx| {
                tx.prefetch(TableId(99), &keys);
                tx.prefetch(t, &keys);
                for k in 0..50 {
                    assert!(tx.get(t, k, &mut out)?, "{what}: key {k} after prefetch");
                    assert_eq!(value(&out), k as i64, "{what}: key {k}");
                }
                assert!(!tx.get(t, 55, &mut out)?, "{what}: absent key 55 after prefetch");
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{what}: {e}"));

            // Prefetch key 7 in an open transaction; another worker updates
            // it; the first transaction then writes key 8 and commits.
            let mut other = engine.worker().unwrap();
            match w.begin(&immediate()) {
                Ok(mut tx) => {
                    tx.prefetch(t, &[7]);
                    other.run(&immediate(), |o| o.update(t, 7, &row(-7))).unwrap();
                    tx.update(t, 8, &row(-8)).unwrap();
                    tx.commit()
                        .unwrap_or_else(|e| panic!("{what}: prefetch joined the read set: {e}"));
                }
                Err(Error::Unsupported(_)) => {}
                Err(e) => panic!("{what}: begin: {e}"),
            }
            drop((w, other));
            engine.check_invariants().unwrap_or_else(|e| panic!("{what}: {e}"));
        }
    }
}
