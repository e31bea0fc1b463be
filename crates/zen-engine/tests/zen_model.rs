//! Model-based test: random single-worker operation sequences against a
//! `BTreeMap`, with clean reopens and crashes (abandon) in between; after
//! every reopen the engine must equal the model (all commits were Immediate).

mod common;

use std::collections::BTreeMap;

use common::*;
use proptest::prelude::*;
use zen_engine::{CcKind, Engine, Error, TxnOptions};

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, i64),
    Update(u64, i64),
    Delete(u64),
    Get(u64),
    Scan(u64, u64),
    /// Several writes in one transaction, then abort.
    Aborted(u64, i64),
    Reopen {
        crash: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u64..40;
    prop_oneof![
        4 => (key.clone(), any::<i64>()).prop_map(|(k, v)| Op::Insert(k, v)),
        4 => (key.clone(), any::<i64>()).prop_map(|(k, v)| Op::Update(k, v)),
        2 => key.clone().prop_map(Op::Delete),
        2 => key.clone().prop_map(Op::Get),
        1 => (key.clone(), key.clone()).prop_map(|(a, b)| Op::Scan(a.min(b), a.max(b))),
        1 => (key, any::<i64>()).prop_map(|(k, v)| Op::Aborted(k, v)),
        1 => any::<bool>().prop_map(|crash| Op::Reopen { crash }),
    ]
}

fn apply(engine: &dyn Engine, model: &mut BTreeMap<u64, i64>, op: &Op) {
    let t = engine.table_id("accounts").unwrap();
    let mut w = engine.worker().unwrap();
    let o = TxnOptions::default();
    let mut out = vec![0u8; ROW];
    match *op {
        Op::Insert(k, v) => match w.run(&o, |tx| tx.insert(t, k, &row(v))) {
            Ok(()) => assert!(model.insert(k, v).is_none()),
            Err(Error::DuplicateKey { .. }) => assert!(model.contains_key(&k)),
            Err(e) => panic!("{e}"),
        },
        Op::Update(k, v) => match w.run(&o, |tx| tx.update(t, k, &row(v))) {
            Ok(()) => assert!(model.insert(k, v).is_some()),
            Err(Error::KeyNotFound { .. }) => assert!(!model.contains_key(&k)),
            Err(e) => panic!("{e}"),
        },
        Op::Delete(k) => match w.run(&o, |tx| tx.delete(t, k)) {
            Ok(()) => assert!(model.remove(&k).is_some()),
            Err(Error::KeyNotFound { .. }) => assert!(!model.contains_key(&k)),
            Err(e) => panic!("{e}"),
        },
        Op::Get(k) => {
            let found = w.run(&o, |tx| tx.get(t, k, &mut out)).unwrap();
            assert_eq!(found.then(|| value(&out)), model.get(&k).copied());
        }
        Op::Scan(a, b) => {
            let mut seen = Vec::new();
            w.run(&o, |tx| {
                seen.clear();
                tx.scan(t, a..=b, usize::MAX, &mut |k, r| {
                    seen.push((k, value(r)));
                    true
                })
            })
            .unwrap();
            let expect: Vec<_> = model.range(a..=b).map(|(k, v)| (*k, *v)).collect();
            assert_eq!(seen, expect);
        }
        Op::Aborted(k, v) => {
            let r = w.execute(&o, &mut |tx| {
                let _ = tx.insert(t, k + 100, &row(v));
                let _ = tx.update(t, k, &row(v));
                Err(zen_engine::user_abort())
            });
            assert!(r.is_err());
        }
        Op::Reopen { .. } => unreachable!("handled by the driver"),
    }
}

fn check_equal(engine: &dyn Engine, model: &BTreeMap<u64, i64>) {
    engine.check_invariants().unwrap();
    apply(engine, &mut model.clone(), &Op::Scan(0, 200));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_a_btreemap_across_reopen_and_crash(
        ops in proptest::collection::vec(op(), 1..120),
        cc in proptest::sample::select(CcKind::ALL.to_vec()),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut engine = zen_engine::open(&fs_config(dir.path(), true, cc)).unwrap();
        engine.create_table(&accounts()).unwrap();
        let mut model = BTreeMap::new();
        for op in &ops {
            if let Op::Reopen { crash } = op {
                if *crash { engine.abandon() } else { engine.close().unwrap() }
                engine = zen_engine::open(&fs_config(dir.path(), false, cc)).unwrap();
                check_equal(engine.as_ref(), &model);
            } else {
                apply(engine.as_ref(), &mut model, op);
            }
        }
        check_equal(engine.as_ref(), &model);
        engine.close().unwrap();
    }
}
