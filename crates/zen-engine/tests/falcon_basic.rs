//! Behaviour specific to falcon (the shared baseline suites run it too):
//! its persist costs per commit under ADR and eADR and for each ablation
//! variant, the log window's size limit as a typed abort, refused
//! configurations, and a pool of another engine left untouched.

mod baseline_common;

use baseline_common::*;
use zen_engine::{Durability, EngineConfig, EngineKind, Error, FalconVariant, TableId, TxnOptions};
use zen_pmem::{CounterSnapshot, PersistenceDomain};

fn falcon(dir: &std::path::Path, f: impl FnOnce(&mut EngineConfig)) -> EngineConfig {
    let mut c = config(EngineKind::Falcon, dir, true);
    f(&mut c);
    c
}

/// The counters of the second of two updates of keys 1 and 2 (the first
/// makes them hot), after ten inserts.
fn update_costs(c: &EngineConfig) -> CounterSnapshot {
    let engine = zen_engine::open(c).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    let mut w = engine.worker().unwrap();
    w.run(&immediate(), |tx| (0..10).try_for_each(|k| tx.insert(t, k, &row(0)))).unwrap();
    let update = |w: &mut Box<dyn zen_engine::EngineWorker + '_>, v: i64| {
        w.run(&immediate(), |tx| {
            tx.update(t, 1, &row(v))?;
            tx.update(t, 2, &row(v))
        })
        .unwrap()
    };
    update(&mut w, 1);
    let before = w.counters();
    update(&mut w, 2);
    let cost = w.counters().since(&before);
    drop(w);
    engine.check_invariants().unwrap();
    engine.close().unwrap();
    cost
}

/// Lines of a record of two 32-byte rows (32 + 2 × (24 + 32) + 8 = 152
/// bytes, from a 64-byte aligned page start: at most 4 lines) and of two
/// tuples (16 + 32 bytes each: one or two lines).
const SLOT: u64 = 16 + ROW as u64;

#[test]
fn adr_commits_take_two_fences_and_write_back_the_record_and_every_tuple() {
    let dir = tempfile::tempdir().unwrap();
    let cost = update_costs(&falcon(dir.path(), |_| {}));
    assert_eq!(cost.fences, 2, "record fence, then Alg. 1's sfence: {cost:?}");
    let record = 32 + 2 * (24 + ROW as u64) + 8;
    assert_eq!(cost.bytes_written, record + 2 * SLOT, "{cost:?}");
    // Under ADR hot tracking is off: both tuples are written back.
    assert!(cost.lines_flushed >= 2 + 2, "record and both tuples: {cost:?}");
    assert_eq!(cost.bytes_read, 2 * ROW as u64, "rows read from NVM: no tuple cache");
}

#[test]
fn under_eadr_the_variants_differ_only_in_write_backs() {
    let dir = tempfile::tempdir().unwrap();
    let costs = |variant: FalconVariant| {
        let d = dir.path().join(variant.name());
        std::fs::create_dir_all(&d).unwrap();
        update_costs(&falcon(&d, |c| {
            c.domain = PersistenceDomain::Eadr;
            c.falcon_variant = variant;
        }))
    };
    let full = costs(FalconVariant::Falcon);
    let no_flush = costs(FalconVariant::NoFlush);
    let all_flush = costs(FalconVariant::AllFlush);
    let window_only = costs(FalconVariant::SmallLogWindow);
    let hot_only = costs(FalconVariant::HotTracking);
    let inp = costs(FalconVariant::Inp);
    let inp_no_flush = costs(FalconVariant::InpNoFlush);
    for c in [full, no_flush, all_flush, window_only, hot_only, inp, inp_no_flush] {
        assert_eq!(c.fences, 1, "eADR: Alg. 1's one sfence: {c:?}");
        assert_eq!(c.bytes_written, full.bytes_written, "same stores in every variant");
    }
    // Keys 1 and 2 were written by the previous commit: hot, not written back.
    assert_eq!(full.lines_flushed, 0, "window in cache, hot tuples skipped: {full:?}");
    assert_eq!(no_flush.lines_flushed, 0);
    assert_eq!(inp_no_flush.lines_flushed, 0);
    assert!(all_flush.lines_flushed >= 2, "every tuple written back: {all_flush:?}");
    assert_eq!(window_only, all_flush, "Inp + small log window is Falcon (All Flush)");
    assert!(hot_only.lines_flushed >= 3, "the log is written back: {hot_only:?}");
    assert!(
        inp.lines_flushed >= hot_only.lines_flushed + 2,
        "Inp writes back log and tuples: {inp:?} vs {hot_only:?}"
    );
}

#[test]
fn a_transaction_larger_than_the_window_aborts_with_both_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let c = falcon(dir.path(), |c| c.falcon_window_bytes = 1024);
    let engine = zen_engine::open(&c).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    let mut w = engine.worker().unwrap();
    // 32 + 20 × 56 + 8 = 1160 bytes of record.
    let big = w.run(&immediate(), |tx| (0..20).try_for_each(|k| tx.insert(t, k, &row(1))));
    match big {
        Err(Error::LogWindowOverflow { needed_bytes: 1160, window_bytes: 1024 }) => {}
        other => panic!("expected the window overflow, got {other:?}"),
    }
    assert!(!Error::LogWindowOverflow { needed_bytes: 1, window_bytes: 0 }.is_retryable());
    // Nothing of it happened, and the engine goes on.
    w.run(&immediate(), |tx| (0..10).try_for_each(|k| tx.insert(t, k, &row(2)))).unwrap();
    drop(w);
    assert_eq!(dump(engine.as_ref(), t), (0..10).map(|k| (k, 2)).collect::<Vec<_>>());
    engine.check_invariants().unwrap();
    engine.close().unwrap();
}

#[test]
fn variants_that_leave_tuples_unflushed_need_eadr() {
    let dir = tempfile::tempdir().unwrap();
    for v in [FalconVariant::NoFlush, FalconVariant::HotTracking, FalconVariant::InpNoFlush] {
        let err = zen_engine::open(&falcon(dir.path(), |c| c.falcon_variant = v)).err().unwrap();
        assert!(err.to_string().contains("--persistence-domain eadr"), "{err}");
    }
    let tiny = falcon(dir.path(), |c| c.falcon_window_bytes = 100);
    assert!(matches!(zen_engine::open(&tiny), Err(Error::InvalidConfig(_))));
}

#[test]
fn a_pool_of_another_engine_is_refused_and_left_unchanged() {
    for other in [EngineKind::Mmdb, EngineKind::Wbl, EngineKind::Zen] {
        let dir = tempfile::tempdir().unwrap();
        let made = EngineConfig { engine: other, ..config(EngineKind::Falcon, dir.path(), true) };
        let engine = zen_engine::open(&made).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        w.run(&immediate(), |tx| tx.insert(t, 1, &row(1))).unwrap();
        drop(w);
        engine.close().unwrap();
        let path = dir.path().join("baseline.pool");
        let before = std::fs::read(&path).unwrap();
        let err = zen_engine::open(&config(EngineKind::Falcon, dir.path(), false)).err().unwrap();
        assert!(matches!(err, Error::WrongEngine { .. }), "{}: {err}", other.name());
        assert!(before == std::fs::read(&path).unwrap(), "{}: the pool changed", other.name());
    }
}

#[test]
fn recovery_replays_the_window_and_reports_its_phases() {
    let dir = tempfile::tempdir().unwrap();
    let c = falcon(dir.path(), |c| c.falcon_window_bytes = 2048);
    let engine = zen_engine::open(&c).unwrap();
    let t = engine.create_table(&owners()).unwrap();
    let mut w = engine.worker().unwrap();
    let owner_row = |owner: u64, v: i64| {
        let mut r = vec![0u8; 16];
        r[0..8].copy_from_slice(&owner.to_le_bytes());
        r[8..16].copy_from_slice(&v.to_le_bytes());
        r
    };
    // Enough commits to wrap the 2 KiB window several times, deletes and
    // re-inserts among them (tombstones reclaimed and reused).
    for round in 0..40i64 {
        w.run(&immediate(), |tx| {
            for k in 0..5u64 {
                let r = owner_row(k % 2, round);
                if round == 0 { tx.insert(t, k, &r) } else { tx.update(t, k, &r) }?;
            }
            if round % 3 == 1 {
                tx.delete(t, 4)?;
            }
            Ok(())
        })
        .or_else(|e| match e {
            Error::KeyNotFound { .. } => Ok(()),
            e => Err(e),
        })
        .unwrap();
        if round % 3 == 1 {
            w.run(&immediate(), |tx| tx.insert(t, 4, &owner_row(1, round))).unwrap();
        }
    }
    drop(w);
    let expected = {
        let mut w = engine.worker().unwrap();
        let mut out = Vec::new();
        w.run(&TxnOptions::default(), |tx| {
            out.clear();
            tx.scan(t, 0..=10, 100, &mut |k, r| {
                out.push((k, r.to_vec()));
                true
            })
            .map(|_| ())
        })
        .unwrap();
        out
    };
    engine.abandon();
    let engine = zen_engine::open(&EngineConfig { create: false, ..c }).unwrap();
    let t: TableId = engine.table_id("owners").unwrap();
    let mut w = engine.worker().unwrap();
    let mut got = Vec::new();
    w.run(&TxnOptions { durability: Some(Durability::Immediate), ..Default::default() }, |tx| {
        got.clear();
        tx.scan(t, 0..=10, 100, &mut |k, r| {
            got.push((k, r.to_vec()));
            true
        })
        .map(|_| ())
    })
    .unwrap();
    let mut by_owner = Vec::new();
    w.run(&TxnOptions::default(), |tx| {
        tx.lookup_secondary(t, 0, &1u64.to_le_bytes(), 10, &mut by_owner)
    })
    .unwrap();
    drop(w);
    assert_eq!(got, expected);
    assert_eq!(by_owner.len(), got.iter().filter(|(_, r)| r[0] == 1).count());
    let report = engine.recovery_report().unwrap();
    assert_eq!(report.tuples_recovered, 5, "{report:?}");
    assert!(report.pages_scanned >= 2, "a log page and a heap page: {report:?}");
    assert!(report.total_ms >= report.index_ms + report.free_list_ms, "{report:?}");
    engine.check_invariants().unwrap();
    engine.close().unwrap();
}
