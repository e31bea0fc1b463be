//! The crash-campaign harness shared by `zen_crash.rs` and `zen_bug_injection.rs`.
//!
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
#![allow(dead_code)]

use std::collections::BTreeMap;

use crate::common::*;
use zen_engine::cc::{Mvcc, Protocol, Silo};
use zen_engine::{
    ColumnType, Durability, Engine, EngineConfig, TableSchema, TxnOptions, ZenEngine,
};
use zen_pmem::sim::{CheckPlan, CrashMode, SimBackend, for_each_nested, seed_from_env};
use zen_pmem::{PersistenceDomain, Pool, PoolOptions};

pub type State = BTreeMap<(u32, u64), i64>;

pub const POOL_BYTES: u64 = 24 * (64 << 10);

pub fn config<P: Protocol>(fault: Option<zen_engine::Fault>) -> EngineConfig {
    EngineConfig {
        fault,
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

pub fn orders() -> TableSchema {
    TableSchema::new("orders")
        .column("amount", ColumnType::I64)
        .column("pad", ColumnType::Bytes(24))
}

/// One transaction of a scenario: (table, key, Some(value) | None = delete, insert?).
pub type Step = Vec<(u32, u64, Option<i64>, bool)>;

pub fn apply(state: &mut State, step: &Step) {
    for &(table, key, value, _) in step {
        match value {
            Some(v) => state.insert((table, key), v),
            None => state.remove(&(table, key)),
        };
    }
}

pub fn read_state(engine: &dyn Engine) -> State {
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
pub fn loaded_backend<P: Protocol>() -> (SimBackend, State) {
    let sim = SimBackend::new(POOL_BYTES, PersistenceDomain::Adr);
    let pool = Pool::format(sim, &PoolOptions { page_size: 64 << 10, features: 0 }).unwrap();
    let engine = ZenEngine::<SimBackend, P>::create_on(pool, &config::<P>(None)).unwrap();
    let initial: Step = (0..8).map(|k| (0, k, Some(100), true)).collect();
    let mut state = State::new();
    {
        let e: &dyn Engine = &engine;
        e.create_table(&accounts()).unwrap();
        e.create_table(&orders()).unwrap();
        let mut w = e.worker().unwrap();
        run_step_with(&mut w, &initial, &TxnOptions::default());
        w.sync().unwrap();
        w.sync().unwrap();
    }
    apply(&mut state, &initial);
    let pool = engine.into_pool().unwrap();
    let image = pool.backend().visible_image();
    pool.abandon();
    (SimBackend::from_image(image, PersistenceDomain::Adr), state)
}

pub fn recover<P: Protocol>(
    backend: SimBackend,
    fault: Option<zen_engine::Fault>,
) -> Result<ZenEngine<SimBackend, P>, String> {
    recover_with::<P>(backend, &config::<P>(fault))
}

pub fn recover_with<P: Protocol>(
    backend: SimBackend,
    config: &EngineConfig,
) -> Result<ZenEngine<SimBackend, P>, String> {
    let pool = Pool::open_on(backend).map_err(|e| format!("pool open: {e}"))?;
    ZenEngine::<SimBackend, P>::open_on(pool, config).map_err(|e| format!("recovery: {e}"))
}

/// A crash campaign: per worker (one thread each), its transactions.
pub struct Scenario<'a> {
    pub name: &'a str,
    /// Run before recording starts (part of the initial state).
    pub warm: Vec<Step>,
    pub workers: Vec<Vec<Step>>,
    pub durability: Durability,
    pub strict_budget: u64,
    pub paranoid_budget: u64,
    /// An injected bug (bug-injection suite), `None` for real campaigns.
    pub fault: Option<zen_engine::Fault>,
    /// Zen+ α for the recorded run (a tiny α makes every read-write
    /// transaction privileged: the whole run is exclusive stages).
    pub alpha: Option<f64>,
}

impl<'a> Scenario<'a> {
    pub fn one(name: &'a str, steps: Vec<Step>) -> Self {
        Scenario {
            name,
            warm: Vec::new(),
            workers: vec![steps],
            durability: Durability::Immediate,
            strict_budget: 256,
            paranoid_budget: 64,
            fault: None,
            alpha: None,
        }
    }
}

/// What one worker of a recorded run did: its engine id, the keys it owns,
/// and the model restricted to them after each prefix of its transactions.
pub struct WorkerModel {
    pub id: usize,
    pub keys: std::collections::BTreeSet<(u32, u64)>,
    pub states: Vec<State>,
}

impl WorkerModel {
    pub fn restrict(&self, state: &State) -> State {
        state.iter().filter(|(k, _)| self.keys.contains(k)).map(|(k, v)| (*k, *v)).collect()
    }
}

/// Run the scenario on a recorded backend; returns the trace and the models.
pub fn record<P: Protocol>(
    sc: &Scenario,
) -> Result<(zen_pmem::sim::Trace, Vec<WorkerModel>), String> {
    let (backend, mut initial) = loaded_backend::<P>();
    let mut tuned = config::<P>(sc.fault);
    if let Some(alpha) = sc.alpha {
        tuned.adaptive_alpha = alpha;
    }
    let engine = recover_with::<P>(backend, &tuned).unwrap();
    let ids: Vec<usize> = {
        let e: &dyn Engine = &engine;
        {
            let mut w = e.worker().unwrap();
            for s in &sc.warm {
                run_step_with(&mut w, s, &TxnOptions::default());
                apply(&mut initial, s);
            }
            w.sync().unwrap();
            w.sync().unwrap();
        }
        engine.shared().pool.backend().reset_trace();
        let opts = TxnOptions { durability: Some(sc.durability), ..Default::default() };
        // Register every worker first, so ids are not reused by a late thread.
        let workers: Vec<_> = sc.workers.iter().map(|_| e.worker().unwrap()).collect();
        std::thread::scope(|scope| {
            let handles: Vec<_> = sc
                .workers
                .iter()
                .zip(workers)
                .map(|(steps, mut w)| {
                    scope.spawn(move || {
                        for s in steps {
                            run_step_with(&mut w, s, &opts);
                        }
                        w.id()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    let models = sc
        .workers
        .iter()
        .zip(ids)
        .map(|(steps, id)| {
            let keys = steps.iter().flatten().map(|&(t, k, _, _)| (t, k)).collect();
            let mut model = WorkerModel { id, keys, states: Vec::new() };
            let mut state = model.restrict(&initial);
            model.states.push(state.clone());
            for s in steps {
                apply(&mut state, s);
                model.states.push(state.clone());
            }
            model
        })
        .collect();
    if sc.alpha.is_some() {
        let e: &dyn Engine = &engine;
        let switches = e.status().adaptive.map_or(0, |a| a.stage_switches);
        if switches == 0 {
            return Err(format!("{}: no exclusive stage ran", sc.name));
        }
    }
    let pool = engine.into_pool().unwrap();
    let trace = pool.backend().trace();
    pool.abandon();
    if !trace.lints().is_clean() {
        return Err(format!("{}: lints: {}", sc.name, trace.lints().summary()));
    }
    Ok((trace, models))
}

pub fn run_step_with(
    w: &mut Box<dyn zen_engine::EngineWorker + '_>,
    step: &Step,
    opts: &TxnOptions,
) {
    w.run(opts, |tx| {
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

/// Durability, atomicity, per-worker order, structure and liveness.
pub fn oracle<P: Protocol>(
    engine: &ZenEngine<SimBackend, P>,
    models: &[WorkerModel],
    acked: &[u64],
    resumed_above: u64,
) -> Result<(), String> {
    let e: &dyn Engine = engine;
    e.check_invariants().map_err(|x| format!("structure: {x}"))?;
    let got = read_state(e);
    for m in models {
        let mine = m.restrict(&got);
        let k = m
            .states
            .iter()
            .position(|s| *s == mine)
            .ok_or_else(|| format!("worker {}: state matches no prefix: {mine:?}", m.id))?;
        let acked_here = acked.iter().filter(|&&c| zen_engine::ts::worker_of(c) == m.id).count();
        if k < acked_here {
            return Err(format!(
                "worker {}: {k} transactions survived, {acked_here} acknowledged (acked {acked:?}); state {mine:?}",
                m.id
            ));
        }
    }
    let mut w = e.worker().map_err(|x| x.to_string())?;
    let cts = w
        .execute(&TxnOptions::default(), &mut |tx| tx.insert(zen_engine::TableId(1), 999, &row(1)))
        .map_err(|x| format!("liveness: {x}"))?
        .cts;
    if cts <= resumed_above {
        return Err(format!(
            "timestamp {cts} after restart is not above the recovered {resumed_above}"
        ));
    }
    drop(w);
    e.check_invariants().map_err(|x| format!("structure after liveness: {x}"))
}

pub fn campaign(name: &str, steps: &[Step]) {
    run_scenario(&Scenario::one(name, steps.to_vec()));
}

pub fn run_scenario(sc: &Scenario) {
    campaign_with::<Silo>(sc).unwrap_or_else(|e| panic!("{e}"));
    campaign_with::<Mvcc>(sc).unwrap_or_else(|e| panic!("{e}"));
}

/// Record the scenario, then check every crash image and nested crashes.
/// `Err` describes the first violation (with its seed).
pub fn campaign_with<P: Protocol>(sc: &Scenario) -> Result<(), String> {
    let name = &format!("{}/{}", sc.name, P::KIND.name());
    let (trace, models) = record::<P>(sc)?;
    let seed = seed_from_env(0x5EED);
    for (mode, budget) in [
        (CrashMode::Strict, sc.strict_budget),
        (CrashMode::Paranoid, sc.paranoid_budget),
        (CrashMode::Eadr, sc.paranoid_budget),
    ] {
        let stats = trace
            .check(CheckPlan::new(mode, budget, seed), |point, image| {
                let acked: Vec<u64> = point.acked_txns().collect();
                let backend = SimBackend::from_image(image.bytes.to_vec(), PersistenceDomain::Adr);
                let engine = recover::<P>(backend, sc.fault)?;
                let before = max_cts_in(&engine);
                oracle(&engine, &models, &acked, before)?;
                engine.into_pool().unwrap().abandon();
                Ok(())
            })
            .map_err(|f| format!("{name} ({}): {f}", mode.name()))?;
        let txns: usize = sc.workers.iter().map(Vec::len).sum();
        assert!(stats.points > txns as u64, "{name}: too few crash points {stats:?}");
        eprintln!(
            "{name} {}: {} crash points, {} images, 0 failures",
            mode.name(),
            stats.points,
            stats.images
        );
    }
    nested::<P>(name, &trace, seed, sc.fault)
}

/// The largest Tx-CTS a recovered engine holds (its clock must resume above it).
pub fn max_cts_in<P: Protocol>(engine: &ZenEngine<SimBackend, P>) -> u64 {
    engine.shared().clock.now().saturating_sub(1 << zen_engine::ts::WORKER_BITS)
}

/// Idempotence: crash the recovery of the end image at each of its fences.
pub fn nested<P: Protocol>(
    name: &str,
    trace: &zen_pmem::sim::Trace,
    seed: u64,
    fault: Option<zen_engine::Fault>,
) -> Result<(), String> {
    let end = trace.crash_points().last().unwrap().durable_image();
    let first = {
        let engine =
            recover::<P>(SimBackend::from_image(end.clone(), PersistenceDomain::Adr), fault)?;
        let s = read_state(&engine);
        engine.into_pool().unwrap().abandon();
        s
    };
    let plan = CheckPlan::new(CrashMode::Strict, 16, seed);
    let nested = for_each_nested(end, PersistenceDomain::Adr, plan, 2, |backend, _| {
        let engine = recover::<P>(backend, fault)?;
        if read_state(&engine) != first {
            return Err("nested recovery changed the logical state".into());
        }
        let pool = engine.into_pool().unwrap();
        let t = pool.backend().trace();
        pool.abandon();
        Ok(t)
    })
    .map_err(|f| format!("{name} nested: {f}"))?;
    eprintln!("{name} nested: {} recoveries", nested.total_recoveries());
    Ok(())
}
