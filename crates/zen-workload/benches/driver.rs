//! What the benchmark driver costs per transaction (issue 13, item 6).
//!
//! What: three measurements on the `ideal` engine (DRAM), one worker.
//! - `engine_empty_txn`: `EngineWorker::execute` of a transaction whose body
//!   does nothing, in a tight loop: the engine's begin and commit alone.
//! - `driver_empty_txn`: `run_benchmark` of a workload whose transactions do
//!   nothing: the driver's loop (request, retry loop, TSC latency, histogram,
//!   live counters) plus the same empty transaction. The driver's own cost
//!   is the difference of the two.
//! - `driver_ycsb_a`: `run_benchmark` of single-op YCSB-A (θ 0.99, 100,000
//!   rows of 1 KiB), the transaction the driver's cost is compared with.
//!
//! How: criterion, `iter_custom` over the driver's measured interval;
//! `cargo bench -p zen-workload --bench driver`. Figures are in
//! docs/benchmarks.md ("Driver").

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rand::rngs::SmallRng;
use zen_engine::{Engine, EngineConfig, EngineKind, TableSchema, Transaction, TxnOptions};
use zen_workload::{
    CheckReport, CoreWorkload, DriverConfig, Stop, Workload, Ycsb, YcsbConfig, run_benchmark,
};

/// A workload whose transactions do nothing.
struct Null;

impl Workload for Null {
    type Request = ();
    type Local = ();

    fn name(&self) -> &'static str {
        "null"
    }
    fn txn_types(&self) -> &'static [&'static str] {
        &["null"]
    }
    fn tables(&self) -> Vec<TableSchema> {
        Vec::new()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    fn load(&self, _engine: &dyn Engine, _threads: usize) -> zen_workload::Result<()> {
        Ok(())
    }
    fn local(&self, _: &dyn Engine, _: usize, _: usize) -> zen_workload::Result<()> {
        Ok(())
    }
    fn next(&self, _local: &mut (), _rng: &mut SmallRng) {}
    fn txn_type(&self, _request: &()) -> usize {
        0
    }
    fn options(&self, _request: &()) -> TxnOptions {
        TxnOptions::default()
    }
    fn execute(&self, _: &mut (), _: &mut dyn Transaction, _: &()) -> zen_engine::Result<()> {
        Ok(())
    }
    fn check(&self, _engine: &dyn Engine) -> zen_workload::Result<CheckReport> {
        Ok(CheckReport::new("null"))
    }
}

fn ideal() -> Box<dyn Engine> {
    let config =
        EngineConfig { engine: EngineKind::Ideal, max_workers: 4, ..EngineConfig::default() };
    zen_engine::open(&config).expect("an ideal engine opens")
}

fn measured<W: Workload>(engine: &dyn Engine, workload: &W, txns: u64) -> Duration {
    let config = DriverConfig {
        threads: 1,
        warmup: Duration::ZERO,
        stop: Stop::Transactions(txns),
        seed: 1,
        ..DriverConfig::default()
    };
    let run = run_benchmark(engine, workload, &config, &mut |_| {}).expect("the run succeeds");
    Duration::from_secs_f64(run.measured_s)
}

fn driver(c: &mut Criterion) {
    let mut g = c.benchmark_group("driver");
    let engine = ideal();
    {
        let mut worker = engine.worker().expect("a worker");
        let opts = TxnOptions::default();
        g.bench_function("engine_empty_txn", |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(worker.execute(&opts, &mut |_| Ok(())).expect("commits"));
                }
                start.elapsed()
            })
        });
    }
    g.bench_function("driver_empty_txn", |b| {
        b.iter_custom(|iters| measured(engine.as_ref(), &Null, iters))
    });
    let ycsb = Ycsb::new(YcsbConfig::core(100_000, CoreWorkload::A)).expect("a valid YCSB");
    ycsb.load(engine.as_ref(), 1).expect("YCSB loads");
    g.bench_function("driver_ycsb_a", |b| {
        b.iter_custom(|iters| measured(engine.as_ref(), &ycsb, iters))
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500))
        .sample_size(20)
}

criterion_group! { name = benches; config = config(); targets = driver }
criterion_main!(benches);
