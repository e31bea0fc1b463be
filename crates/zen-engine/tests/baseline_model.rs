//! Model-based test of the baseline engines: random sequences of single- and
//! multi-operation transactions (committed and user-aborted), compared at
//! every step with a `BTreeMap`; for mmdb and wbl also clean close + reopen,
//! `abandon` (kill -9) + recovery, and mmdb checkpoints, after each of which
//! the whole state must equal the model.

mod baseline_common;

use std::collections::BTreeMap;

use baseline_common::*;
use proptest::prelude::*;
use zen_engine::baseline::MmdbEngine;
use zen_engine::{Engine, EngineKind, Error, TableId};
use zen_pmem::FsBackend;

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, i64),
    Update(u64, i64),
    Delete(u64),
    Get(u64),
    Scan(u64, u64),
}

#[derive(Debug, Clone)]
enum Step {
    Txn(Vec<Op>),
    Aborted(Vec<Op>),
    Reopen,
    Crash,
    Checkpoint,
}

fn op() -> BoxedStrategy<Op> {
    let key = 0..24u64;
    prop_oneof![
        (key.clone(), any::<i32>()).prop_map(|(k, v)| Op::Insert(k, i64::from(v))),
        (key.clone(), any::<i32>()).prop_map(|(k, v)| Op::Update(k, i64::from(v))),
        key.clone().prop_map(Op::Delete),
        key.clone().prop_map(Op::Get),
        (key.clone(), key).prop_map(|(a, b)| Op::Scan(a.min(b), a.max(b))),
    ]
    .boxed()
}

fn step(persistent: bool) -> BoxedStrategy<Step> {
    let ops = proptest::collection::vec(op(), 1..6);
    if persistent {
        prop_oneof![
            8 => ops.clone().prop_map(Step::Txn),
            1 => ops.prop_map(Step::Aborted),
            1 => Just(Step::Reopen),
            1 => Just(Step::Crash),
            1 => Just(Step::Checkpoint),
        ]
        .boxed()
    } else {
        prop_oneof![8 => ops.clone().prop_map(Step::Txn), 1 => ops.prop_map(Step::Aborted)].boxed()
    }
}

type Model = BTreeMap<u64, i64>;

/// Apply `ops` to `model` as one transaction would; the first error stops it
/// (and the transaction aborts: the caller discards the copy).
fn model_ops(model: &mut Model, ops: &[Op]) -> Result<Vec<String>, &'static str> {
    let mut seen = Vec::new();
    for op in ops {
        match *op {
            Op::Insert(k, v) => {
                if model.contains_key(&k) {
                    return Err("duplicate");
                }
                model.insert(k, v);
            }
            Op::Update(k, v) => {
                *model.get_mut(&k).ok_or("not found")? = v;
            }
            Op::Delete(k) => {
                model.remove(&k).ok_or("not found")?;
            }
            Op::Get(k) => seen.push(format!("{k}:{:?}", model.get(&k))),
            Op::Scan(a, b) => seen.push(format!("{:?}", model.range(a..=b).collect::<Vec<_>>())),
        }
    }
    Ok(seen)
}

fn engine_ops(
    engine: &dyn Engine,
    t: TableId,
    ops: &[Op],
    abort: bool,
) -> Result<Vec<String>, &'static str> {
    let mut w = engine.worker().unwrap();
    let mut seen = Vec::new();
    let result = w.run(&immediate(), |tx| {
        seen.clear();
        let mut out = vec![0u8; ROW];
        for op in ops {
            match *op {
                Op::Insert(k, v) => tx.insert(t, k, &row(v))?,
                Op::Update(k, v) => tx.update(t, k, &row(v))?,
                Op::Delete(k) => tx.delete(t, k)?,
                Op::Get(k) => {
                    let v = tx.get(t, k, &mut out)?.then(|| value(&out));
                    seen.push(format!("{k}:{v:?}"));
                }
                Op::Scan(a, b) => {
                    let mut rows = Vec::new();
                    tx.scan(t, a..=b, usize::MAX, &mut |k, r| {
                        rows.push((k, value(r)));
                        true
                    })?;
                    let refs: Vec<(&u64, &i64)> = rows.iter().map(|(k, v)| (k, v)).collect();
                    seen.push(format!("{refs:?}"));
                }
            }
        }
        if abort { Err(zen_engine::user_abort()) } else { Ok(()) }
    });
    match result {
        Ok(()) => Ok(seen),
        Err(Error::DuplicateKey { .. }) => Err("duplicate"),
        Err(Error::KeyNotFound { .. }) => Err("not found"),
        Err(Error::Abort(zen_engine::AbortReason::User)) => Err("user"),
        Err(e) => panic!("unexpected error {e}"),
    }
}

fn check_all(engine: &dyn Engine, t: TableId, model: &Model, when: &str) {
    let got = dump(engine, t);
    let want: Vec<(u64, i64)> = model.iter().map(|(&k, &v)| (k, v)).collect();
    assert_eq!(got, want, "{} {when}", engine.name());
    engine.check_invariants().unwrap_or_else(|e| panic!("{} {when}: {e}", engine.name()));
}

fn run_model(kind: EngineKind, steps: Vec<Step>) {
    let dir = tempfile::tempdir().unwrap();
    let reopen = |create| -> Box<dyn Engine> {
        let c = zen_engine::EngineConfig {
            pool_size_bytes: 4 << 20,
            ..config(kind, dir.path(), create)
        };
        if kind == EngineKind::Mmdb {
            let e = if create {
                MmdbEngine::<FsBackend>::create(&c)
            } else {
                MmdbEngine::<FsBackend>::open(&c)
            };
            Box::new(e.unwrap())
        } else {
            zen_engine::open(&c).unwrap()
        }
    };
    let mut engine = reopen(true);
    let mut t = engine.create_table(&accounts()).unwrap();
    let mut model = Model::new();
    for (i, s) in steps.into_iter().enumerate() {
        match s {
            Step::Txn(ops) | Step::Aborted(ops) if ops.is_empty() => {}
            Step::Txn(ops) => {
                let mut next = model.clone();
                let want = model_ops(&mut next, &ops);
                let got = engine_ops(engine.as_ref(), t, &ops, false);
                assert_eq!(got, want, "step {i}: {ops:?}");
                if want.is_ok() {
                    model = next;
                }
            }
            Step::Aborted(ops) => {
                let got = engine_ops(engine.as_ref(), t, &ops, true);
                assert!(got.is_err(), "an aborted transaction reported success");
            }
            Step::Reopen => {
                engine.close().unwrap();
                engine = reopen(false);
                t = engine.table_id("accounts").unwrap();
                check_all(engine.as_ref(), t, &model, &format!("after reopen at step {i}"));
            }
            Step::Crash => {
                engine.abandon();
                engine = reopen(false);
                t = engine.table_id("accounts").unwrap();
                check_all(engine.as_ref(), t, &model, &format!("after crash at step {i}"));
            }
            Step::Checkpoint => {
                if kind == EngineKind::Mmdb {
                    // Through the concrete type: close, reopen as MmdbEngine.
                    engine.close().unwrap();
                    let c = zen_engine::EngineConfig {
                        pool_size_bytes: 4 << 20,
                        ..config(kind, dir.path(), false)
                    };
                    let m = MmdbEngine::<FsBackend>::open(&c).unwrap();
                    m.checkpoint().unwrap();
                    engine = Box::new(m);
                    t = engine.table_id("accounts").unwrap();
                }
            }
        }
    }
    check_all(engine.as_ref(), t, &model, "at the end");
    engine.close().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn ideal_matches_a_btreemap(steps in proptest::collection::vec(step(false), 1..40)) {
        run_model(EngineKind::Ideal, steps);
    }

    #[test]
    fn mmdb_matches_a_btreemap_across_reopen_crash_and_checkpoints(
        steps in proptest::collection::vec(step(true), 1..40)
    ) {
        run_model(EngineKind::Mmdb, steps);
    }

    #[test]
    fn wbl_matches_a_btreemap_across_reopen_and_crash(
        steps in proptest::collection::vec(step(true), 1..40)
    ) {
        run_model(EngineKind::Wbl, steps);
    }

    #[test]
    fn falcon_matches_a_btreemap_across_reopen_and_crash(
        steps in proptest::collection::vec(step(true), 1..40)
    ) {
        run_model(EngineKind::Falcon, steps);
    }
}
