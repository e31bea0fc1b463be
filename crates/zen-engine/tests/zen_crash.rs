//! Crash-simulator campaigns for the Zen engine (VERIFICATION.md §1–2).
//!
//! Each scenario loads a small pool on `SimBackend`, starts recording, runs
//! transactions, and then, for every crash point (just before each fence and
//! at the end) and every image (exhaustive strict within the budget, sampled
//! paranoid), recovers the image and applies the oracle:
//! durability (every acknowledged transaction present), atomicity and order
//! (the state equals the model after some prefix of each worker's
//! transactions, at least as long as its acknowledged prefix), structure
//! (`check_invariants`), liveness (a new transaction commits and the
//! invariants still hold) and, on sampled images, idempotence (nested crashes
//! during recovery give the same logical state).

mod common;

use std::collections::BTreeMap;

use common::*;
use zen_engine::cc::{Mvcc, Protocol, Silo};
use zen_engine::{
    ColumnType, Durability, Engine, EngineConfig, TableSchema, TxnOptions, ZenEngine,
};
use zen_pmem::sim::{CheckPlan, CrashMode, SimBackend, for_each_nested, seed_from_env};
use zen_pmem::{PersistenceDomain, Pool, PoolOptions};

type State = BTreeMap<(u32, u64), i64>;

const POOL_BYTES: u64 = 24 * (64 << 10);

fn config<P: Protocol>() -> EngineConfig {
    EngineConfig {
        cc: P::KIND,
        pmem: zen_pmem::BackendKind::Sim,
        page_size_bytes: 64 << 10,
        max_workers: 2,
        cache_size_bytes: 1 << 20,
        durability: Durability::Immediate,
        recovery_threads: Some(1),
        ..Default::default()
    }
}

fn orders() -> TableSchema {
    TableSchema::new("orders")
        .column("amount", ColumnType::I64)
        .column("pad", ColumnType::Bytes(24))
}

/// One transaction of a scenario: (table, key, Some(value) | None = delete, insert?).
type Step = Vec<(u32, u64, Option<i64>, bool)>;

fn run_step(engine: &dyn Engine, w: &mut Box<dyn zen_engine::EngineWorker + '_>, step: &Step) {
    let _ = engine;
    w.run(&TxnOptions::default(), |tx| {
        for &(table, key, value, insert) in step {
            let t = zen_engine::TableId(table);
            match (value, insert) {
                (Some(v), true) => tx.insert(t, key, &row(v))?,
                (Some(v), false) => tx.update(t, key, &row(v))?,
                (None, _) => tx.delete(t, key)?,
            }
        }
        Ok(())
    })
    .unwrap();
}

fn apply(state: &mut State, step: &Step) {
    for &(table, key, value, _) in step {
        match value {
            Some(v) => state.insert((table, key), v),
            None => state.remove(&(table, key)),
        };
    }
}

fn read_state(engine: &dyn Engine) -> State {
    let mut state = State::new();
    let mut w = engine.worker().unwrap();
    for table in 0..2u32 {
        w.run(&TxnOptions::default(), |tx| {
            tx.scan(zen_engine::TableId(table), 0..=u64::from(u32::MAX), usize::MAX, &mut |k, r| {
                state.insert((table, k), value(r));
                true
            })
        })
        .unwrap();
    }
    state
}

/// Build the loaded pool image: two tables, keys 0..8 in table 0.
fn loaded_backend<P: Protocol>() -> (SimBackend, State) {
    let sim = SimBackend::new(POOL_BYTES, PersistenceDomain::Adr);
    let pool = Pool::format(sim, &PoolOptions { page_size: 64 << 10, features: 0 }).unwrap();
    let engine = ZenEngine::<SimBackend, P>::create_on(pool, &config::<P>()).unwrap();
    let initial: Step = (0..8).map(|k| (0, k, Some(100), true)).collect();
    let mut state = State::new();
    {
        let e: &dyn Engine = &engine;
        e.create_table(&accounts()).unwrap();
        e.create_table(&orders()).unwrap();
        let mut w = e.worker().unwrap();
        run_step(e, &mut w, &initial);
        w.sync().unwrap();
        w.sync().unwrap();
    }
    apply(&mut state, &initial);
    let pool = engine.into_pool().unwrap();
    let image = pool.backend().visible_image();
    pool.abandon();
    (SimBackend::from_image(image, PersistenceDomain::Adr), state)
}

fn recover<P: Protocol>(backend: SimBackend) -> Result<ZenEngine<SimBackend, P>, String> {
    let pool = Pool::open_on(backend).map_err(|e| format!("pool open: {e}"))?;
    ZenEngine::<SimBackend, P>::open_on(pool, &config::<P>()).map_err(|e| format!("recovery: {e}"))
}

/// Run `steps` (one worker) on a recorded backend; returns the trace and model states.
fn record<P: Protocol>(steps: &[Step]) -> (zen_pmem::sim::Trace, Vec<State>) {
    let (backend, initial) = loaded_backend::<P>();
    let engine = recover::<P>(backend).unwrap();
    {
        let e: &dyn Engine = &engine;
        let mut w = e.worker().unwrap();
        w.sync().unwrap();
        w.sync().unwrap();
        engine.shared().pool.backend().reset_trace();
        for s in steps {
            run_step(e, &mut w, s);
        }
    }
    let mut states = vec![initial];
    for s in steps {
        let mut next = states.last().unwrap().clone();
        apply(&mut next, s);
        states.push(next);
    }
    let pool = engine.into_pool().unwrap();
    let trace = pool.backend().trace();
    assert!(trace.lints().is_clean(), "lints: {}", trace.lints().summary());
    pool.abandon();
    (trace, states)
}

fn oracle<P: Protocol>(
    engine: &ZenEngine<SimBackend, P>,
    states: &[State],
    acked: usize,
) -> Result<(), String> {
    let e: &dyn Engine = engine;
    e.check_invariants().map_err(|x| format!("structure: {x}"))?;
    let got = read_state(e);
    let k = states
        .iter()
        .position(|s| *s == got)
        .ok_or_else(|| format!("state matches no prefix: {got:?}"))?;
    if k < acked {
        return Err(format!("only {k} transactions survived but {acked} were acknowledged"));
    }
    let mut w = e.worker().map_err(|x| x.to_string())?;
    w.run(&TxnOptions::default(), |tx| tx.insert(zen_engine::TableId(1), 999, &row(1)))
        .map_err(|x| format!("liveness: {x}"))?;
    drop(w);
    e.check_invariants().map_err(|x| format!("structure after liveness: {x}"))
}

fn campaign(name: &str, steps: &[Step]) {
    campaign_with::<Silo>(name, steps);
    campaign_with::<Mvcc>(name, steps);
}

fn campaign_with<P: Protocol>(name: &str, steps: &[Step]) {
    let name = &format!("{name}/{}", P::KIND.name());
    let (trace, states) = record::<P>(steps);
    let seed = seed_from_env(0x5EED);
    for (mode, budget) in [(CrashMode::Strict, 256), (CrashMode::Paranoid, 64)] {
        let stats = trace
            .check(CheckPlan::new(mode, budget, seed), |point, image| {
                let acked = point.acked_txns().count();
                let engine = recover::<P>(SimBackend::from_image(
                    image.bytes.to_vec(),
                    PersistenceDomain::Adr,
                ))?;
                oracle(&engine, &states, acked)?;
                engine.into_pool().unwrap().abandon();
                Ok(())
            })
            .unwrap_or_else(|f| panic!("{name} ({}): {f}", mode.name()));
        assert!(stats.points > steps.len() as u64, "{name}: too few crash points {stats:?}");
        eprintln!(
            "{name} {}: {} crash points, {} images, 0 failures",
            mode.name(),
            stats.points,
            stats.images
        );
    }
    // Idempotence: crash the recovery of the end image at each of its fences.
    let end = trace.crash_points().last().unwrap().durable_image();
    let first = {
        let engine =
            recover::<P>(SimBackend::from_image(end.clone(), PersistenceDomain::Adr)).unwrap();
        let s = read_state(&engine);
        engine.into_pool().unwrap().abandon();
        s
    };
    let nested = for_each_nested(
        end,
        PersistenceDomain::Adr,
        CheckPlan::new(CrashMode::Strict, 16, seed),
        2,
        |backend, _| {
            let engine = recover::<P>(backend)?;
            if read_state(&engine) != first {
                return Err("nested recovery changed the logical state".into());
            }
            let pool = engine.into_pool().unwrap();
            let t = pool.backend().trace();
            pool.abandon();
            Ok(t)
        },
    )
    .unwrap_or_else(|f| panic!("{name} nested: {f}"));
    eprintln!("{name} nested: {} recoveries", nested.total_recoveries());
}

#[test]
fn crash_during_insert_update_delete() {
    campaign(
        "single",
        &[vec![(0, 20, Some(1), true)], vec![(0, 3, Some(7), false)], vec![(0, 4, None, false)]],
    );
}

#[test]
fn crash_during_multi_table_transactions() {
    campaign(
        "multi-table",
        &[
            vec![(0, 1, Some(50), false), (1, 1, Some(50), true), (0, 2, Some(150), false)],
            vec![(1, 1, None, false), (0, 5, Some(0), false), (1, 2, Some(3), true)],
        ],
    );
}

#[test]
fn crash_during_slot_reuse_after_gc_and_delete_then_reinsert() {
    let mut steps: Vec<Step> =
        (0..12).map(|i| vec![(0, 6, Some(i), false), (0, 7, Some(-i), false)]).collect();
    steps.push(vec![(0, 6, None, false)]);
    steps.push(vec![(0, 7, Some(5), false)]);
    steps.push(vec![(0, 6, Some(66), true)]);
    campaign("reuse", &steps);
}
