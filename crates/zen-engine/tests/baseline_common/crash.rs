//! Crash-simulator campaigns for the persistent baselines (mmdb, wbl).
//!
//! Each scenario builds a small loaded pool on `SimBackend`, recovers it,
//! starts recording, runs each worker's transactions on its own thread, and
//! then, for every crash point (just before each fence, and at the end) and
//! every image (strict: exhaustive within the budget; paranoid: sampled),
//! recovers the image and applies the oracle:
//!
//! - durability: every acknowledged transaction (a `Marker::Ack { txn: cts }`
//!   in the trace before the crash point) is in the recovered state;
//! - atomicity and order: for each worker, the state of the keys it writes
//!   equals the model after some prefix of its transactions, at least as long
//!   as its acknowledged prefix;
//! - structure: `check_invariants`, and rows are whole (the 4 KiB rows carry a
//!   pattern that a torn copy would break);
//! - liveness: a new transaction commits after recovery, with a cts above
//!   every acknowledged one, and the invariants still hold.
//!
//! Nested crashes (idempotence): the end image and a mid-run image are
//! recovered, that recovery is crashed at each of its fences (and those
//! recoveries again), and every one must reach the same logical state.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use zen_engine::baseline::{MmdbEngine, WblEngine};
use zen_engine::{
    BaselineFault, CcKind, ColumnType, Durability, Engine, EngineConfig, EngineKind, EngineWorker,
    TableId, TableSchema, TxnOptions,
};
use zen_pmem::sim::{CheckPlan, CrashMode, SimBackend, Trace, for_each_nested, seed_from_env};
use zen_pmem::{BackendKind, PersistenceDomain, Pool, PoolOptions};

pub type State = BTreeMap<(u32, u64), i64>;
/// One transaction: (table, key, Some(value) | None = delete, insert?).
/// An empty step is not a transaction: mmdb takes a checkpoint, wbl syncs.
pub type Step = Vec<(u32, u64, Option<i64>, bool)>;

pub const PAGE_BYTES: u64 = 64 << 10;
pub const POOL_BYTES: u64 = 18 * PAGE_BYTES;
/// Row bytes of the "blobs" table (table 2): 16 rows fill a log page.
pub const BLOB_BYTES: usize = 4096;
pub const TABLES: u32 = 3;

pub fn schemas() -> Vec<TableSchema> {
    let small = |name: &str| {
        TableSchema::new(name).column("value", ColumnType::I64).column("pad", ColumnType::Bytes(24))
    };
    vec![
        small("accounts"),
        small("orders"),
        TableSchema::new("blobs")
            .column("value", ColumnType::I64)
            .column("pattern", ColumnType::Bytes(BLOB_BYTES as u16 - 8)),
    ]
}

/// A row of `table` holding `value` (blobs: a pattern derived from it).
pub fn make_row(table: u32, value: i64) -> Vec<u8> {
    let len = if table == 2 { BLOB_BYTES } else { 32 };
    let mut r: Vec<u8> = (0..len).map(|i| (value as u8).wrapping_add(i as u8)).collect();
    r[0..8].copy_from_slice(&value.to_le_bytes());
    r
}

fn decode_row(table: u32, r: &[u8]) -> Result<i64, String> {
    let value = i64::from_le_bytes(r[0..8].try_into().unwrap());
    if r != make_row(table, value).as_slice() {
        return Err(format!("table {table}: torn row for value {value}"));
    }
    Ok(value)
}

pub fn apply(state: &mut State, step: &Step) {
    for &(table, key, value, _) in step {
        match value {
            Some(v) => state.insert((table, key), v),
            None => state.remove(&(table, key)),
        };
    }
}

/// What the campaigns need from an engine beyond the `Engine` trait.
pub trait Subject: 'static {
    const KIND: EngineKind;
    type E: Engine + 'static;
    fn create(pool: Pool<SimBackend>, c: &EngineConfig) -> zen_engine::Result<Self::E>;
    fn recover(pool: Pool<SimBackend>, c: &EngineConfig) -> zen_engine::Result<Self::E>;
    fn backend(e: &Self::E) -> &SimBackend;
    fn into_pool(e: Self::E) -> Option<Pool<SimBackend>>;
    fn clock_now(e: &Self::E) -> u64;
    /// The no-transaction step: mmdb checkpoints, wbl writes a record.
    fn maintenance(e: &Self::E, w: &mut Box<dyn EngineWorker + '_>);
}

pub struct Mmdb;
pub struct Wbl;

impl Subject for Mmdb {
    const KIND: EngineKind = EngineKind::Mmdb;
    type E = MmdbEngine<SimBackend>;
    fn create(pool: Pool<SimBackend>, c: &EngineConfig) -> zen_engine::Result<Self::E> {
        MmdbEngine::create_on(pool, c)
    }
    fn recover(pool: Pool<SimBackend>, c: &EngineConfig) -> zen_engine::Result<Self::E> {
        MmdbEngine::open_on(pool, c)
    }
    fn backend(e: &Self::E) -> &SimBackend {
        e.core().store.pool.backend()
    }
    fn into_pool(e: Self::E) -> Option<Pool<SimBackend>> {
        e.into_pool()
    }
    fn clock_now(e: &Self::E) -> u64 {
        e.clock_now()
    }
    fn maintenance(e: &Self::E, _w: &mut Box<dyn EngineWorker + '_>) {
        e.checkpoint().unwrap();
    }
}

impl Subject for Wbl {
    const KIND: EngineKind = EngineKind::Wbl;
    type E = WblEngine<SimBackend>;
    fn create(pool: Pool<SimBackend>, c: &EngineConfig) -> zen_engine::Result<Self::E> {
        WblEngine::create_on(pool, c)
    }
    fn recover(pool: Pool<SimBackend>, c: &EngineConfig) -> zen_engine::Result<Self::E> {
        WblEngine::open_on(pool, c)
    }
    fn backend(e: &Self::E) -> &SimBackend {
        e.core().store.pool.backend()
    }
    fn into_pool(e: Self::E) -> Option<Pool<SimBackend>> {
        e.into_pool()
    }
    fn clock_now(e: &Self::E) -> u64 {
        e.clock_now()
    }
    fn maintenance(_e: &Self::E, w: &mut Box<dyn EngineWorker + '_>) {
        w.sync().unwrap();
    }
}

/// A crash campaign: per worker (one thread each), its transactions.
#[derive(Clone)]
pub struct Scenario {
    pub name: &'static str,
    /// Run (and made durable) before recording starts.
    pub warm: Vec<Step>,
    pub workers: Vec<Vec<Step>>,
    pub durability: Durability,
    pub group_commit_interval_us: u64,
    pub strict_budget: u64,
    pub paranoid_budget: u64,
    pub fault: Option<BaselineFault>,
    /// DRAM budget for tuples (mmdb places the rest in NVM as volatile memory).
    pub dram_budget_bytes: Option<u64>,
    /// Record from the recovery of the loaded image on (no trace reset): for
    /// runs that leave volatile NVM writes pending, which a reset refuses.
    pub trace_from_open: bool,
}

impl Scenario {
    pub fn one(name: &'static str, steps: Vec<Step>) -> Scenario {
        Scenario {
            name,
            warm: Vec::new(),
            workers: vec![steps],
            durability: Durability::Immediate,
            group_commit_interval_us: 0,
            strict_budget: 256,
            paranoid_budget: 24,
            fault: None,
            dram_budget_bytes: None,
            trace_from_open: false,
        }
    }
}

pub fn config(kind: EngineKind, sc: &Scenario) -> EngineConfig {
    EngineConfig {
        engine: kind,
        cc: CcKind::Silo,
        pmem: BackendKind::Sim,
        page_size_bytes: PAGE_BYTES,
        pool_size_bytes: POOL_BYTES,
        max_workers: 2,
        cache_size_bytes: 1 << 20,
        durability: sc.durability,
        group_commit_interval_us: sc.group_commit_interval_us,
        baseline_fault: sc.fault,
        dram_ratio: sc.dram_budget_bytes.map(|_| 1.0),
        expected_data_bytes: sc.dram_budget_bytes,
        ..Default::default()
    }
}

pub fn run_step(w: &mut Box<dyn EngineWorker + '_>, step: &Step, opts: &TxnOptions) {
    w.run(opts, |tx| {
        for &(table, key, value, insert) in step {
            let t = TableId(table);
            match (value, insert) {
                (Some(v), true) => tx.insert(t, key, &make_row(table, v))?,
                (Some(v), false) => tx.update(t, key, &make_row(table, v))?,
                (None, _) => tx.delete(t, key)?,
            }
        }
        Ok(())
    })
    .unwrap();
}

pub fn read_state(engine: &dyn Engine) -> Result<State, String> {
    let mut state = State::new();
    let mut w = engine.worker().map_err(|e| e.to_string())?;
    for table in 0..TABLES {
        let mut torn = None;
        w.run(&TxnOptions::default(), |tx| {
            tx.scan(TableId(table), 0..=u64::from(u32::MAX), usize::MAX, &mut |k, r| {
                match decode_row(table, r) {
                    Ok(v) => {
                        state.insert((table, k), v);
                    }
                    Err(e) => torn = Some(e),
                }
                true
            })
        })
        .map_err(|e| format!("scan: {e}"))?;
        if let Some(e) = torn {
            return Err(e);
        }
    }
    Ok(state)
}

/// A pool with the tables and keys 0..8 of table 0 at 100, as an image.
fn loaded_image<S: Subject>(sc: &Scenario) -> (Vec<u8>, State) {
    let sim = SimBackend::new(POOL_BYTES, PersistenceDomain::Adr);
    let pool = Pool::format(sim, &PoolOptions { page_size: PAGE_BYTES, features: 0 }).unwrap();
    let c = EngineConfig { baseline_fault: None, ..config(S::KIND, sc) };
    let engine = S::create(pool, &c).unwrap();
    let initial: Step = (0..8).map(|k| (0, k, Some(100), true)).collect();
    let mut state = State::new();
    {
        let e: &dyn Engine = &engine;
        for s in schemas() {
            e.create_table(&s).unwrap();
        }
        let mut w = e.worker().unwrap();
        run_step(&mut w, &initial, &TxnOptions::default());
        w.sync().unwrap();
    }
    apply(&mut state, &initial);
    let pool = S::into_pool(engine).unwrap();
    let image = pool.backend().visible_image();
    pool.abandon();
    (image, state)
}

pub fn recover<S: Subject>(image: Vec<u8>, c: &EngineConfig) -> Result<S::E, String> {
    let backend = SimBackend::from_image(image, PersistenceDomain::Adr);
    let pool = Pool::open_on(backend).map_err(|e| format!("pool open: {e}"))?;
    S::recover(pool, c).map_err(|e| format!("recovery: {e}"))
}

/// One worker of a recorded run: its id, keys, and the model restricted to
/// them after each prefix of its transactions.
pub struct WorkerModel {
    pub id: usize,
    pub keys: BTreeSet<(u32, u64)>,
    pub states: Vec<State>,
}

impl WorkerModel {
    pub fn restrict(&self, state: &State) -> State {
        state.iter().filter(|(k, _)| self.keys.contains(k)).map(|(k, v)| (*k, *v)).collect()
    }
}

/// Run the scenario on a recorded backend; the trace, the models, and the
/// lint errors of the run (empty when clean).
pub fn record<S: Subject>(sc: &Scenario) -> (Trace, Vec<WorkerModel>, Vec<String>) {
    let (image, mut initial) = loaded_image::<S>(sc);
    let c = config(S::KIND, sc);
    let engine = recover::<S>(image, &c).unwrap();
    let ids: Vec<usize> = {
        let e: &dyn Engine = &engine;
        {
            let mut w = e.worker().unwrap();
            for s in &sc.warm {
                run_step(&mut w, s, &TxnOptions::default());
                apply(&mut initial, s);
            }
            w.sync().unwrap();
        }
        if sc.trace_from_open {
            assert!(sc.warm.is_empty(), "warm-up steps would be in the trace");
        } else {
            S::backend(&engine).reset_trace();
        }
        let opts = TxnOptions { durability: Some(sc.durability), ..Default::default() };
        let workers: Vec<_> = sc.workers.iter().map(|_| e.worker().unwrap()).collect();
        let engine_ref = &engine;
        std::thread::scope(|scope| {
            let handles: Vec<_> = sc
                .workers
                .iter()
                .zip(workers)
                .map(|(steps, mut w)| {
                    scope.spawn(move || {
                        for s in steps {
                            if s.is_empty() {
                                S::maintenance(engine_ref, &mut w);
                            } else {
                                run_step(&mut w, s, &opts);
                            }
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
            for s in steps.iter().filter(|s| !s.is_empty()) {
                apply(&mut state, s);
                model.states.push(state.clone());
            }
            model
        })
        .collect();
    let pool = S::into_pool(engine).unwrap();
    let trace = pool.backend().trace();
    pool.abandon();
    let lints = trace.lints().errors();
    (trace, models, lints)
}

/// Durability, atomicity, per-worker order, structure and liveness.
pub fn oracle<S: Subject>(
    engine: &S::E,
    models: &[WorkerModel],
    acked: &[u64],
) -> Result<(), String> {
    let e: &dyn Engine = engine;
    e.check_invariants().map_err(|x| format!("structure: {x}"))?;
    let got = read_state(e)?;
    for m in models {
        let mine = m.restrict(&got);
        // Some prefix at least as long as the acknowledged one must explain
        // the state (two prefixes may leave equal states: any one will do).
        let acked_here = acked.iter().filter(|&&c| zen_engine::ts::worker_of(c) == m.id).count();
        let matching: Vec<usize> =
            m.states.iter().enumerate().filter(|(_, s)| **s == mine).map(|(k, _)| k).collect();
        if matching.is_empty() {
            return Err(format!("worker {}: state matches no prefix: {mine:?}", m.id));
        }
        if !matching.iter().any(|&k| k >= acked_here) {
            return Err(format!(
                "worker {}: prefixes {matching:?} survived, {acked_here} acknowledged (acked {acked:?})",
                m.id
            ));
        }
    }
    let above = acked.iter().copied().max().unwrap_or(0);
    let mut w = e.worker().map_err(|x| x.to_string())?;
    let cts = w
        .execute(&TxnOptions::default(), &mut |tx| tx.insert(TableId(1), 999, &make_row(1, 1)))
        .map_err(|x| format!("liveness: {x}"))?
        .cts;
    if cts <= above {
        return Err(format!("timestamp {cts} after restart is not above acknowledged {above}"));
    }
    drop(w);
    e.check_invariants().map_err(|x| format!("structure after liveness: {x}"))
}

/// What a campaign covered.
#[derive(Debug, Default, Clone, Copy)]
pub struct Coverage {
    pub points: u64,
    pub exhaustive_points: u64,
    pub images: u64,
    pub nested_recoveries: u64,
}

/// Record the scenario and check every image; `Err` names the first
/// violation (with its seed). Lint errors fail the campaign when `lints`.
pub fn campaign_with<S: Subject>(sc: &Scenario, lints: bool) -> Result<Coverage, String> {
    let name = format!("{}/{}", S::KIND.name(), sc.name);
    let (trace, models, lint_errors) = record::<S>(sc);
    if lints && !lint_errors.is_empty() {
        return Err(format!("{name}: lints: {}", lint_errors.join("; ")));
    }
    let c = config(S::KIND, sc);
    let seed = seed_from_env(0xBA5E);
    let mut cov = Coverage::default();
    for (mode, budget) in
        [(CrashMode::Strict, sc.strict_budget), (CrashMode::Paranoid, sc.paranoid_budget)]
    {
        let stats = trace
            .check(CheckPlan::new(mode, budget, seed), |point, image| {
                let acked: Vec<u64> = point.acked_txns().collect();
                let engine = recover::<S>(image.bytes.to_vec(), &c)?;
                oracle::<S>(&engine, &models, &acked)?;
                S::into_pool(engine).unwrap().abandon();
                Ok(())
            })
            .map_err(|f| format!("{name} ({}): {f}", mode.name()))?;
        let txns: usize = sc.workers.iter().flatten().filter(|s| !s.is_empty()).count();
        assert!(stats.points > txns as u64, "{name}: too few crash points {stats:?}");
        eprintln!(
            "{name} {}: {} crash points ({} exhaustive), {} images, 0 failures",
            mode.name(),
            stats.points,
            stats.exhaustive_points,
            stats.images
        );
        cov.points += stats.points;
        cov.exhaustive_points += stats.exhaustive_points;
        cov.images += stats.images;
    }
    cov.nested_recoveries = nested::<S>(&name, &trace, seed, &c)?;
    Ok(cov)
}

/// Idempotence: crash the recovery of the end image and of a mid-run image.
pub fn nested<S: Subject>(
    name: &str,
    trace: &Trace,
    seed: u64,
    c: &EngineConfig,
) -> Result<u64, String> {
    // At the mid-run point, the third strict image (after "nothing pending"
    // and "all of it" comes one line partly applied: a torn tail for
    // recovery to clean up); and the end of the run.
    let count = trace.fence_count() + 1;
    let mut points: Vec<Vec<u8>> = Vec::new();
    for (i, p) in trace.crash_points().enumerate() {
        if i == count / 2 {
            let mut cursor = p.cursor(CrashMode::Strict, 3, seed);
            let mut last = None;
            while let Some(image) = cursor.next_image() {
                last = Some(image.bytes.to_vec());
            }
            points.extend(last);
        } else if i == count - 1 {
            points.push(p.durable_image());
        }
    }
    let mut recoveries = 0;
    for image in points {
        let first = {
            let engine = recover::<S>(image.clone(), c)?;
            let s = read_state(&engine)?;
            S::into_pool(engine).unwrap().abandon();
            s
        };
        let plan = CheckPlan::new(CrashMode::Strict, 8, seed);
        let stats = for_each_nested(image, PersistenceDomain::Adr, plan, 2, |backend, _| {
            let pool = Pool::open_on(backend).map_err(|e| format!("pool open: {e}"))?;
            let engine = S::recover(pool, c).map_err(|e| format!("recovery: {e}"))?;
            engine.check_invariants().map_err(|e| format!("structure: {e}"))?;
            if read_state(&engine)? != first {
                return Err("nested recovery changed the logical state".into());
            }
            let pool = S::into_pool(engine).unwrap();
            let t = pool.backend().trace();
            pool.abandon();
            Ok(t)
        })
        .map_err(|f| format!("{name} nested: {f}"))?;
        recoveries += stats.total_recoveries();
    }
    eprintln!("{name} nested: {recoveries} recoveries, 0 failures");
    Ok(recoveries)
}
