//! `script`: the tests' scripted scenarios. Each worker runs a fixed list of
//! steps; a step is one transaction of inserts, updates and deletes (or,
//! when empty, the engine's maintenance: mmdb checkpoints, Zen and wbl
//! sync). Used by the crash tests of particular code paths (slot reuse,
//! page allocation, log truncation, catalog rewrites, …) and by the
//! bug-injection suite, whose faults each need a particular shape.
//!
//! Tables: `accounts` (0) and `orders` (1), 32-byte rows, and with
//! [`Script::blobs`] `blobs` (2), 4 KiB rows. Every row is a pattern derived
//! from its value, so a torn row is seen. The load puts keys 0..8 of table 0
//! at 100; [`Script::warm`] steps run (and are made durable) before
//! recording starts.
//!
//! The oracle (with the receipts): worker `w`'s keys must equal the model
//! after exactly its surviving steps (its receipts say how many), the
//! per-step model check of the old engine harness made exact; every key no
//! step writes must keep its loaded or warmed-up value. With
//! [`Script::create_tables`], a thread creates that many tables while the
//! workers run; every image must hold the original tables plus a prefix of
//! the created ones, and after liveness one more table must be creatable and
//! writable (counted in [`Script::catalog_seen`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use rand::rngs::SmallRng;
use serde_json::json;
use zen_engine::schema::MAX_KEY;
use zen_engine::{ColumnType, Engine, TableId, TableSchema, Transaction, TxnOptions};

use super::subject::{Subject, Survivors};
use super::violation::{TxnRef, Violation};
use crate::error::Result;
use crate::meta;
use crate::workload::{CheckReport, Workload};

/// One transaction: (table, key, Some(value) | None = delete, insert?).
/// An empty step is the engine's maintenance, not a transaction.
pub type Step = Vec<(u32, u64, Option<i64>, bool)>;
/// Logical state: (table, key) → value.
pub type State = BTreeMap<(u32, u64), i64>;

/// Row bytes of the `blobs` table: 16 rows fill a 64 KiB log page.
pub const BLOB_BYTES: usize = 4096;
/// Row bytes of `accounts` and `orders`.
pub const ROW_BYTES: usize = 32;
/// The key liveness transactions insert into `orders` (and up; above every
/// key a script uses).
pub const LIVENESS_KEY: u64 = 1 << 30;

/// A scripted scenario. See the module docs.
#[derive(Debug, Default)]
pub struct Script {
    pub name: &'static str,
    pub warm: Vec<Step>,
    /// Per worker, its steps (the campaign runs one thread per worker).
    pub workers: Vec<Vec<Step>>,
    /// Also create the `blobs` table (4 KiB rows).
    pub blobs: bool,
    /// Tables `extra_0..` a thread creates while the workers run.
    pub create_tables: usize,
    /// Images by number of created tables they held (catalog scenarios).
    pub catalog_seen: Mutex<Vec<u64>>,
}

/// A request: a step of a worker, maintenance, or a liveness insert.
#[derive(Debug, Clone)]
pub enum ScriptRequest {
    Step { index: u64, step: Step },
    Maintenance,
    Liveness { key: u64 },
}

/// Per-worker state.
pub struct ScriptLocal {
    worker: usize,
    /// Steps drawn so far (maintenance included).
    drawn: usize,
    /// Transactions drawn so far.
    txns: u64,
}

/// A row of `table` holding `value` (a pattern derived from it).
pub fn make_row(table: u32, value: i64) -> Vec<u8> {
    let len = if table == 2 { BLOB_BYTES } else { ROW_BYTES };
    let mut r: Vec<u8> = (0..len).map(|i| (value as u8).wrapping_add(i as u8)).collect();
    r[0..8].copy_from_slice(&value.to_le_bytes());
    r
}

fn decode_row(table: u32, r: &[u8]) -> std::result::Result<i64, String> {
    let value = i64::from_le_bytes(r[0..8].try_into().map_err(|_| "short row".to_string())?);
    if r != make_row(table, value).as_slice() {
        return Err(format!("table {table}: torn row for value {value}"));
    }
    Ok(value)
}

/// Apply one step to a state.
pub fn apply(state: &mut State, step: &Step) {
    for &(table, key, value, _) in step {
        match value {
            Some(v) => state.insert((table, key), v),
            None => state.remove(&(table, key)),
        };
    }
}

fn run_step(tx: &mut dyn Transaction, step: &Step) -> zen_engine::Result<()> {
    for &(table, key, value, insert) in step {
        let t = TableId(table);
        match (value, insert) {
            (Some(v), true) => tx.insert(t, key, &make_row(table, v))?,
            (Some(v), false) => tx.update(t, key, &make_row(table, v))?,
            (None, _) => tx.delete(t, key)?,
        }
    }
    Ok(())
}

/// The schema of the `i`-th table a catalog scenario creates.
pub fn extra_table(i: usize) -> TableSchema {
    TableSchema::new(format!("extra_{i}"))
        .column("value", ColumnType::I64)
        .column("pad", ColumnType::Bytes(24))
}

impl Script {
    /// One worker running `steps`.
    pub fn one(name: &'static str, steps: Vec<Step>) -> Script {
        Script { name, workers: vec![steps], ..Script::default() }
    }

    fn table_count(&self) -> u32 {
        if self.blobs { 3 } else { 2 }
    }

    /// The state after the load and the warm-up.
    pub fn initial(&self) -> State {
        let mut state = State::new();
        apply(&mut state, &(0..8).map(|k| (0, k, Some(100), true)).collect());
        for s in &self.warm {
            apply(&mut state, s);
        }
        state
    }

    /// Steps of worker `w` (maintenance included).
    pub fn steps_of(&self, w: usize) -> u64 {
        self.workers.get(w).map_or(0, |s| s.len() as u64)
    }

    /// The transactions (non-empty steps) of the script.
    pub fn txns(&self) -> usize {
        self.workers.iter().flatten().filter(|s| !s.is_empty()).count()
    }

    /// Every (table, key) → value of the recovered engine.
    pub fn read_state(&self, engine: &dyn Engine) -> std::result::Result<State, String> {
        let mut state = State::new();
        for table in 0..self.table_count() {
            let mut torn = None;
            meta::scan_all(engine, TableId(table), 0..=MAX_KEY, &mut |k, r| {
                match decode_row(table, r) {
                    Ok(v) => {
                        state.insert((table, k), v);
                    }
                    Err(e) => torn = Some(e),
                }
                Ok(())
            })
            .map_err(|e| format!("scan of table {table}: {e}"))?;
            if let Some(e) = torn {
                return Err(e);
            }
        }
        Ok(state)
    }

    /// Check the catalog of a recovered engine (module docs); counts it.
    fn verify_catalog(&self, engine: &dyn Engine) -> std::result::Result<(), Violation> {
        for original in ["accounts", "orders"] {
            engine
                .table_id(original)
                .map_err(|x| Violation::state(format!("lost table {original}: {x}")))?;
        }
        let present: Vec<bool> = (0..self.create_tables)
            .map(|i| engine.table_id(&format!("extra_{i}")).is_ok())
            .collect();
        let k = present.iter().take_while(|&&p| p).count();
        if present[k..].iter().any(|&p| p) {
            return Err(Violation::state(format!("created tables are not a prefix: {present:?}")));
        }
        let mut seen = self.catalog_seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.resize(self.create_tables + 1, 0);
        seen[k] += 1;
        Ok(())
    }
}

impl Workload for Script {
    type Request = ScriptRequest;
    type Local = ScriptLocal;

    fn name(&self) -> &'static str {
        "script"
    }

    fn txn_types(&self) -> &'static [&'static str] {
        &["step", "liveness"]
    }

    fn tables(&self) -> Vec<TableSchema> {
        let small = |name: &str| {
            TableSchema::new(name)
                .column("value", ColumnType::I64)
                .column("pad", ColumnType::Bytes(ROW_BYTES as u16 - 8))
        };
        let mut t = vec![small("accounts"), small("orders")];
        if self.blobs {
            t.push(
                TableSchema::new("blobs")
                    .column("value", ColumnType::I64)
                    .column("pattern", ColumnType::Bytes(BLOB_BYTES as u16 - 8)),
            );
        }
        t
    }

    fn parameters(&self) -> serde_json::Value {
        json!({ "script": self.name, "workers": self.workers.len() })
    }

    fn load(&self, engine: &dyn Engine, _threads: usize) -> Result<()> {
        for (i, schema) in self.tables().iter().enumerate() {
            let id = engine.create_table(schema)?;
            assert_eq!(id, TableId(i as u32), "a script's tables are the pool's first");
        }
        let mut loader = meta::Loader::new(engine)?;
        for k in 0..8 {
            loader.insert(TableId(0), k, &make_row(0, 100))?;
        }
        loader.finish()
    }

    fn prepare(&self, engine: &dyn Engine) -> Result<()> {
        let mut w = engine.worker()?;
        for s in &self.warm {
            w.run(&TxnOptions::default(), |tx| run_step(tx, s))?;
        }
        w.sync()?;
        Ok(())
    }

    fn local(&self, _engine: &dyn Engine, worker: usize, _workers: usize) -> Result<ScriptLocal> {
        Ok(ScriptLocal { worker, drawn: 0, txns: 0 })
    }

    fn next(&self, local: &mut ScriptLocal, _rng: &mut SmallRng) -> ScriptRequest {
        let Some(steps) = self.workers.get(local.worker) else {
            local.drawn += 1;
            return ScriptRequest::Liveness { key: LIVENESS_KEY + local.drawn as u64 - 1 };
        };
        let step = steps.get(local.drawn).cloned().unwrap_or_default();
        local.drawn += 1;
        if step.is_empty() {
            return ScriptRequest::Maintenance;
        }
        local.txns += 1;
        ScriptRequest::Step { index: local.txns - 1, step }
    }

    fn txn_type(&self, request: &ScriptRequest) -> usize {
        usize::from(matches!(request, ScriptRequest::Liveness { .. }))
    }

    fn options(&self, _request: &ScriptRequest) -> TxnOptions {
        TxnOptions::default()
    }

    fn execute(
        &self,
        _local: &mut ScriptLocal,
        tx: &mut dyn Transaction,
        request: &ScriptRequest,
    ) -> zen_engine::Result<()> {
        match request {
            ScriptRequest::Step { step, .. } => run_step(tx, step),
            ScriptRequest::Maintenance => Ok(()),
            ScriptRequest::Liveness { key } => tx.insert(TableId(1), *key, &make_row(1, 1)),
        }
    }

    fn check(&self, _engine: &dyn Engine) -> Result<CheckReport> {
        Ok(CheckReport::new("script"))
    }
}

impl Subject for Script {
    fn population(&self) -> String {
        format!(
            "script `{}`: {} workers, {} transactions, {} warm-up steps",
            self.name,
            self.workers.len(),
            self.txns(),
            self.warm.len()
        )
    }

    fn run_txn(
        &self,
        local: &mut ScriptLocal,
        tx: &mut dyn Transaction,
        request: &ScriptRequest,
        _me: TxnRef,
    ) -> zen_engine::Result<[i64; 3]> {
        self.execute(local, tx, request)?;
        Ok(match request {
            ScriptRequest::Step { index, .. } => [*index as i64, 0, 0],
            _ => [-1, 0, 0],
        })
    }

    fn requests(&self, worker: usize, _configured: u64) -> u64 {
        self.steps_of(worker)
    }

    fn is_maintenance(&self, request: &ScriptRequest) -> bool {
        matches!(request, ScriptRequest::Maintenance)
    }

    fn verify(
        &self,
        engine: &dyn Engine,
        survivors: &Survivors,
    ) -> std::result::Result<(), Violation> {
        if self.create_tables > 0 {
            self.verify_catalog(engine)?;
        }
        let got = self.read_state(engine).map_err(Violation::state)?;
        let initial = self.initial();
        for (w, steps) in self.workers.iter().enumerate() {
            let keys: BTreeSet<(u32, u64)> =
                steps.iter().flatten().map(|&(t, k, _, _)| (t, k)).collect();
            let restrict = |s: &State| -> State {
                s.iter().filter(|(k, _)| keys.contains(k)).map(|(k, v)| (*k, *v)).collect()
            };
            let n = survivors.count(w) as usize;
            let mut model = initial.clone();
            for s in steps.iter().filter(|s| !s.is_empty()).take(n) {
                apply(&mut model, s);
            }
            let (want, have) = (restrict(&model), restrict(&got));
            if want != have {
                return Err(Violation::state(format!(
                    "worker {w}: {n} transactions survived, their model is {want:?}, the recovered keys are {have:?}"
                )));
            }
        }
        // Keys no step writes (the load's and the warm-up's) keep their
        // initial values: a lost warm-up row was invisible to the
        // per-worker checks above.
        let touched: BTreeSet<(u32, u64)> =
            self.workers.iter().flatten().flatten().map(|&(t, k, _, _)| (t, k)).collect();
        let untouched = |s: &State| -> State {
            s.iter()
                .filter(|(k, _)| !touched.contains(k) && k.1 < LIVENESS_KEY)
                .map(|(k, v)| (*k, *v))
                .collect()
        };
        let (want, have) = (untouched(&initial), untouched(&got));
        if want != have {
            return Err(Violation::state(format!(
                "keys no step writes: loaded and warmed up as {want:?}, the recovered keys are {have:?}"
            )));
        }
        Ok(())
    }

    fn after_liveness(&self, engine: &dyn Engine) -> std::result::Result<(), Violation> {
        if self.create_tables == 0 {
            return Ok(());
        }
        let k = (0..self.create_tables)
            .take_while(|i| engine.table_id(&format!("extra_{i}")).is_ok())
            .count();
        let fail = |x: String| Violation::liveness(x);
        let next =
            engine.create_table(&extra_table(k)).map_err(|x| fail(format!("create: {x}")))?;
        let mut w = engine.worker().map_err(|x| fail(x.to_string()))?;
        w.execute(&TxnOptions::default(), &mut |tx| tx.insert(next, 1, &make_row(1, 1)))
            .map_err(|x| fail(format!("insert into a new table: {x}")))?;
        drop(w);
        engine.check_invariants().map_err(|x| Violation::structure(format!("after create: {x}")))
    }

    fn concurrent(&self, engine: &dyn Engine) -> std::result::Result<(), String> {
        for i in 0..self.create_tables {
            engine.create_table(&extra_table(i)).map_err(|e| format!("create extra_{i}: {e}"))?;
        }
        Ok(())
    }
}
