//! One-shot forms of the workloads, for deterministic engines
//! (`zen_engine::det`): a stored procedure plus an input whose write set is
//! known before it runs, drawn from the same generator as the interactive
//! form, and an epoch driver ([`run_epochs`]) that measures each
//! transaction from its submission to its durable result.
//!
//! Built: YCSB in paper mode (reads and read-modify-write updates of one
//! field; the keys, and so the write set, come from the request). Not built:
//! SmallBank and TPC-C one-shot forms, YCSB core workloads with inserts or
//! scans (refused with a typed error).

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Serialize;
use zen_engine::{DeterministicEngine, Engine, OneShot, OneShotTx, ProcId, ProcedureSet, TableId};

use crate::error::{Error, Result};
use crate::workload::Workload;
use crate::ycsb::{FIELD_BYTES, Op, ROW_BYTES, Ycsb, fill_field};

/// Bytes of one logged YCSB operation: kind u8 | field u8 | 6 pad | key | seed.
const OP_BYTES: usize = 24;

/// Register the one-shot YCSB procedure (`ycsb`) in `set`.
pub fn register_ycsb(set: &mut ProcedureSet) -> zen_engine::Result<ProcId> {
    set.register("ycsb", |tx, input| ycsb_procedure(tx, input))
}

/// The procedure: input = table u32 | 0 u32 | operations; reads every key,
/// rewrites one field of each updated key; returns the number of rows read.
fn ycsb_procedure(tx: &mut dyn OneShotTx, input: &[u8]) -> zen_engine::Result<Vec<u8>> {
    let bad = |m: &str| zen_engine::Error::InvalidArgument(format!("ycsb one-shot input: {m}"));
    let head = input.get(..8).ok_or_else(|| bad("no table"))?;
    let table = TableId(u32::from_le_bytes(head[..4].try_into().expect("4 bytes")));
    let ops = &input[8..];
    if !ops.len().is_multiple_of(OP_BYTES) {
        return Err(bad("truncated operation"));
    }
    let mut row = vec![0u8; ROW_BYTES];
    let mut read = 0u64;
    for op in ops.chunks_exact(OP_BYTES) {
        let key = u64::from_le_bytes(op[8..16].try_into().expect("8 bytes"));
        if !tx.get(table, key, &mut row)? {
            return Err(bad(&format!("key {key} is not loaded")));
        }
        read += 1;
        if op[0] == 1 {
            let field = op[1];
            let seed = u64::from_le_bytes(op[16..24].try_into().expect("8 bytes"));
            let at = usize::from(field) * FIELD_BYTES;
            let out = row.get_mut(at..at + FIELD_BYTES).ok_or_else(|| bad("field"))?;
            fill_field(out, key, field, seed);
            tx.put(table, key, &row)?;
        }
    }
    Ok(read.to_le_bytes().to_vec())
}

/// The one-shot form of a YCSB request: its updated keys are the write set.
pub fn ycsb_oneshot(
    table: TableId,
    proc: ProcId,
    request: &crate::ycsb::YcsbRequest,
) -> Result<OneShot> {
    let mut input = Vec::with_capacity(8 + request.ops().len() * OP_BYTES);
    input.extend_from_slice(&table.0.to_le_bytes());
    input.extend_from_slice(&0u32.to_le_bytes());
    let mut writes = Vec::new();
    for op in request.ops() {
        let (kind, key, field, seed) = match *op {
            Op::Read { key } => (0u8, key, 0u8, 0u64),
            Op::Update { key, field, seed } | Op::ReadModifyWrite { key, field, seed } => {
                writes.push((table, key));
                (1, key, field, seed)
            }
            Op::Insert { .. } | Op::Scan { .. } => {
                return Err(Error::InvalidParameter {
                    parameter: "ycsb mode",
                    value: "core workload with inserts or scans".into(),
                    allowed: "one-shot YCSB runs reads and updates (paper mode, --mix)".into(),
                });
            }
        };
        input.push(kind);
        input.push(field);
        input.extend_from_slice(&[0; 6]);
        input.extend_from_slice(&key.to_le_bytes());
        input.extend_from_slice(&seed.to_le_bytes());
    }
    Ok(OneShot { proc, input, writes })
}

/// What an epoch run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EpochRun {
    pub epochs: u64,
    pub committed: u64,
    /// Procedures that returned an error (deterministic; none expected).
    pub failed: u64,
    pub cc_aborts: u64,
    pub waits: u64,
    pub seconds: f64,
    pub txns_per_s: f64,
    /// Submission (the start of the epoch's batch) to durable result.
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    /// Mean per epoch.
    pub log_us: f64,
    pub init_us: f64,
    pub exec_us: f64,
    pub persist_us: f64,
    pub transient_bytes_peak: u64,
    pub rows_persisted: u64,
    pub versions: u64,
    pub nvm_bytes_written_per_commit: f64,
    pub lines_flushed_per_commit: f64,
    pub fences_per_commit: f64,
}

/// Run YCSB one-shot in epochs of `epoch_size` on `workers` threads for
/// `duration` (after `warmup`), drawing requests from `seed`.
pub fn run_epochs(
    engine: &dyn Engine,
    ycsb: &Ycsb,
    epoch_size: usize,
    workers: usize,
    warmup: Duration,
    duration: Duration,
    seed: u64,
) -> Result<EpochRun> {
    let det: &dyn DeterministicEngine =
        engine.deterministic().ok_or_else(|| Error::InvalidParameter {
            parameter: "--engine",
            value: engine.name().into(),
            allowed: "an engine with the deterministic seam (nvcaracal)".into(),
        })?;
    let proc = det.procedures().id("ycsb").ok_or_else(|| Error::InvalidParameter {
        parameter: "procedures",
        value: "no `ycsb`".into(),
        allowed: "open the engine with oneshot::register_ycsb".into(),
    })?;
    let table = engine.table_id(crate::ycsb::TABLE)?;
    let mut local = ycsb.local(engine, 0, 1)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut run = EpochRun::default();
    let mut latencies: Vec<f64> = Vec::new();
    let started = Instant::now();
    let mut measuring: Option<(Instant, zen_pmem::CounterSnapshot)> = None;
    let mut sums = [0f64; 4];
    loop {
        let now = Instant::now();
        if measuring.is_none() && now.duration_since(started) >= warmup {
            measuring = Some((now, engine.pmem_counters()));
        }
        if let Some((t0, _)) = measuring
            && now.duration_since(t0) >= duration
        {
            break;
        }
        let submitted = Instant::now();
        let batch = (0..epoch_size)
            .map(|_| ycsb_oneshot(table, proc, &ycsb.next(&mut local, &mut rng)))
            .collect::<Result<Vec<_>>>()?;
        let out = det.submit_epoch(&batch, workers)?;
        let latency = submitted.elapsed().as_secs_f64() * 1e6;
        if measuring.is_none() {
            continue;
        }
        let s = &out.stats;
        run.epochs += 1;
        run.failed += s.failed;
        run.committed += s.txns - s.failed;
        run.cc_aborts += s.cc_aborts;
        run.waits += s.waits;
        run.rows_persisted += s.rows_persisted;
        run.versions += s.versions;
        run.transient_bytes_peak = run.transient_bytes_peak.max(s.transient_bytes);
        for (i, v) in [s.log_us, s.init_us, s.exec_us, s.persist_us].into_iter().enumerate() {
            sums[i] += v;
        }
        // Every transaction of the batch was submitted at its start and
        // answered when the epoch was durable.
        latencies.extend(std::iter::repeat_n(latency, batch.len()));
    }
    let (t0, before) = measuring.expect("the loop measures before it stops");
    run.seconds = t0.elapsed().as_secs_f64();
    let used = engine.pmem_counters().since(&before);
    let n = run.committed.max(1) as f64;
    run.txns_per_s = run.committed as f64 / run.seconds.max(1e-9);
    run.nvm_bytes_written_per_commit = used.bytes_written as f64 / n;
    run.lines_flushed_per_commit = used.lines_flushed as f64 / n;
    run.fences_per_commit = used.fences as f64 / n;
    let epochs = run.epochs.max(1) as f64;
    [run.log_us, run.init_us, run.exec_us, run.persist_us] = sums.map(|s| s / epochs);
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        latencies
            .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
    };
    run.latency_p50_us = pct(0.5).copied().unwrap_or(0.0);
    run.latency_p99_us = pct(0.99).copied().unwrap_or(0.0);
    Ok(run)
}
