//! One-shot forms of the workloads, for deterministic engines
//! (`zen_engine::det`): a stored procedure plus an input whose write set is
//! known before it runs, drawn from the same generator as the interactive
//! form, and an epoch driver ([`run_epochs`]) that measures each
//! transaction from its submission to its durable result.
//!
//! Built: YCSB in paper mode ([`ycsb`]: reads and read-modify-write updates
//! of one field), SmallBank ([`smallbank`]: all six types) and TPC-C
//! ([`tpcc`]: all five, with reconnaissance reads for the keys its requests
//! do not name). Not built: YCSB core workloads with inserts or scans
//! (refused with a typed error).
//!
//! [`procedures`] is the one procedure set every engine configuration of
//! the `zen` CLI carries, so a pool written by one command replays under
//! another (the set's fingerprint is logged with each epoch).

pub mod smallbank;
pub mod tpcc;
pub mod ycsb;

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Serialize;
use zen_engine::{
    AbortReason, DeterministicEngine, Engine, Error as EngineError, OneShot, ProcId, ProcedureSet,
    Procedures,
};

use crate::driver::RunResult;
use crate::driver::stats::WorkerStats;
use crate::error::{Error, Result};
use crate::workload::Workload;

pub use smallbank::register_smallbank;
pub use tpcc::register_tpcc;
pub use ycsb::{register_ycsb, ycsb_oneshot};

/// A workload with a one-shot form.
pub trait OneShotWorkload: Workload {
    /// What a run resolves once: procedure ids, table ids.
    type Plan;
    /// Resolve the plan on `engine`, whose procedures are `procedures`.
    fn plan(&self, engine: &dyn Engine, procedures: &ProcedureSet) -> Result<Self::Plan>;
    /// The one-shot forms of `requests`, one epoch's batch in its serial
    /// order. A workload whose requests do not name every key they write
    /// (TPC-C) finds them here by reconnaissance reads on `engine`'s
    /// committed state; its procedures then check what the reconnaissance
    /// read and fail with `StaleReconnaissance` when it no longer holds.
    fn batch(
        &self,
        engine: &dyn Engine,
        plan: &Self::Plan,
        requests: &[Self::Request],
    ) -> Result<Vec<OneShot>>;
}

/// The id of procedure `name`, or an error saying the set lacks it.
pub(crate) fn procedure(set: &ProcedureSet, name: &str) -> Result<ProcId> {
    set.id(name).ok_or_else(|| Error::InvalidParameter {
        parameter: "procedures",
        value: format!("no `{name}`"),
        allowed: "open the engine with zen_workload::oneshot::procedures()".into(),
    })
}

/// Every one-shot procedure of every workload, in a fixed order.
pub fn register_all(set: &mut ProcedureSet) -> zen_engine::Result<()> {
    register_ycsb(set)?;
    register_smallbank(set)?;
    register_tpcc(set)
}

/// [`register_all`] as an engine configuration's procedure set.
pub fn procedures() -> Procedures {
    let mut set = ProcedureSet::new();
    register_all(&mut set).expect("the workloads' procedure names are distinct");
    Procedures::new(set)
}

/// What an epoch run measured besides the driver's usual counts (the
/// report's `epochs` section).
#[derive(Debug, Clone, Default, Serialize)]
pub struct EpochRun {
    /// Transactions submitted per epoch (`--epoch-size`).
    pub epoch_size: usize,
    pub epochs: u64,
    pub committed: u64,
    /// User aborts (deterministic: SmallBank's insufficient funds).
    pub user_aborts: u64,
    /// Procedures that failed otherwise (none expected: a bug or bad input).
    pub failed: u64,
    /// Transactions whose reconnaissance was stale at their place in the
    /// serial order (`StaleReconnaissance`), re-submitted in a later epoch
    /// (not concurrency-control aborts; latency runs from the first
    /// submission).
    pub resubmitted: u64,
    pub cc_aborts: u64,
    pub waits: u64,
    pub seconds: f64,
    pub txns_per_s: f64,
    /// A transaction's first submission (the start of the batch it first
    /// joined, before any reconnaissance) to its durable result.
    pub latency_p50_us: f64,
    pub latency_p99_us: f64,
    /// Mean per epoch: the workload's reconnaissance reads before it (0
    /// for workloads without them), then the engine's phases.
    pub recon_us: f64,
    pub log_us: f64,
    pub init_us: f64,
    pub exec_us: f64,
    pub persist_us: f64,
    /// Peak DRAM of one epoch's transient versions (version arrays and
    /// values; freed at the epoch's end).
    pub transient_bytes_peak: u64,
    /// Batches the engine ran as several epochs to stay within its DRAM
    /// budget or its input log.
    pub budget_splits: u64,
    /// Of the cuts between those epochs, the ones the input log made.
    pub log_cuts: u64,
    pub rows_persisted: u64,
    pub versions: u64,
    /// Rows split per core (split-on-demand) over the run.
    pub split_rows: u64,
    /// Committed rows the epochs read from the engine's cached versions
    /// (DRAM) and from NVM, rows not cached for the cache's bound, cached
    /// versions evicted (not used in K epochs); the cache's peak entries and
    /// counted DRAM (kept across epochs).
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub cache_refused: u64,
    pub cache_evicted: u64,
    pub cache_entries_peak: u64,
    pub cache_bytes_peak: u64,
    /// Stale row versions deleted by the minor collector (at the final
    /// write) and by the major collector (in the init phase: pooled rows,
    /// or every row with minor GC off).
    pub gc_minor: u64,
    pub gc_major: u64,
    /// nvcaracal's persistent values (rows over the inline heap) allocated
    /// by final writes and freed by the major collector.
    pub values_allocated: u64,
    pub values_freed: u64,
    pub nvm_bytes_read_per_commit: f64,
    pub nvm_bytes_written_per_commit: f64,
    pub lines_flushed_per_commit: f64,
    pub fences_per_commit: f64,
}

/// Run `workload` one-shot in epochs of `epoch_size` on `workers` threads
/// for `duration` (after `warmup`), drawing requests from `seed`. The result
/// is the driver's (`RunResult`, so reports are the usual ones) with its
/// `epochs` section.
pub fn run_epochs<W: OneShotWorkload>(
    engine: &dyn Engine,
    workload: &W,
    epoch_size: usize,
    workers: usize,
    warmup: Duration,
    duration: Duration,
    seed: u64,
) -> Result<RunResult> {
    let det: &dyn DeterministicEngine =
        engine.deterministic().ok_or_else(|| Error::InvalidParameter {
            parameter: "--engine",
            value: engine.name().into(),
            allowed: "an engine with the deterministic seam (nvcaracal)".into(),
        })?;
    if epoch_size == 0 {
        return Err(Error::invalid("epoch size", 0, "1 or more"));
    }
    workload.prepare(engine)?;
    let plan = workload.plan(engine, det.procedures())?;
    let mut local = workload.local(engine, 0, 1)?;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut run = EpochRun { epoch_size, ..EpochRun::default() };
    let mut stats = WorkerStats::new(workload.txn_types().len());
    let started = Instant::now();
    let mut measuring: Option<(Instant, zen_pmem::CounterSnapshot)> = None;
    let mut sums = [0f64; 5];
    let mut carried: Vec<(W::Request, Instant)> = Vec::new();
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
        // The batch: re-submitted transactions first (in their order),
        // then new requests, each with its first submission time.
        let now = Instant::now();
        let mut requests = std::mem::take(&mut carried);
        while requests.len() < epoch_size {
            requests.push((workload.next(&mut local, &mut rng), now));
        }
        let (batch_requests, submitted): (Vec<W::Request>, Vec<Instant>) =
            requests.into_iter().unzip();
        let recon = Instant::now();
        let batch = workload.batch(engine, &plan, &batch_requests)?;
        let recon_us = recon.elapsed().as_secs_f64() * 1e6;
        let out = det.submit_epoch(&batch, workers)?;
        let done = Instant::now();
        let s = &out.stats;
        if measuring.is_some() {
            run.epochs += 1;
            run.cc_aborts += s.cc_aborts;
            run.waits += s.waits;
            run.rows_persisted += s.rows_persisted;
            run.versions += s.versions;
            run.split_rows += s.split_rows;
            run.budget_splits += u64::from(s.parts > 1);
            run.log_cuts += s.log_cuts;
            run.cache_hits += s.cache_hits;
            run.cache_misses += s.cache_misses;
            run.cache_refused += s.cache_refused;
            run.cache_evicted += s.cache_evicted;
            run.gc_minor += s.gc_minor;
            run.gc_major += s.gc_major;
            run.values_allocated += s.values_allocated;
            run.values_freed += s.values_freed;
            run.cache_entries_peak = run.cache_entries_peak.max(s.cache_entries);
            run.cache_bytes_peak = run.cache_bytes_peak.max(s.cache_bytes);
            run.transient_bytes_peak = run.transient_bytes_peak.max(s.transient_bytes);
            let phases = [recon_us, s.log_us, s.init_us, s.exec_us, s.persist_us];
            for (i, v) in phases.into_iter().enumerate() {
                sums[i] += v;
            }
        }
        // Every transaction was answered when the epoch was durable.
        for ((result, request), at) in out.results.iter().zip(batch_requests).zip(submitted) {
            if let Err(EngineError::StaleReconnaissance { .. }) = result {
                run.resubmitted += u64::from(measuring.is_some());
                carried.push((request, at));
                continue;
            }
            if measuring.is_none() {
                continue;
            }
            let kind = workload.txn_type(&request);
            let latency_ns = done.duration_since(at).as_nanos() as u64;
            match result {
                Ok(_) => stats.on_commit(kind, latency_ns),
                Err(EngineError::Abort(AbortReason::User)) => {
                    run.user_aborts += 1;
                    stats.on_user_abort(kind);
                }
                Err(_) => run.failed += 1,
            }
        }
    }
    let (t0, before) = measuring.expect("the loop measures before it stops");
    run.seconds = t0.elapsed().as_secs_f64().max(1e-9);
    let nvm = engine.pmem_counters().since(&before);
    run.committed = stats.commits;
    let n = run.committed.max(1) as f64;
    run.txns_per_s = run.committed as f64 / run.seconds;
    run.nvm_bytes_read_per_commit = nvm.bytes_read as f64 / n;
    run.nvm_bytes_written_per_commit = nvm.bytes_written as f64 / n;
    run.lines_flushed_per_commit = nvm.lines_flushed as f64 / n;
    run.fences_per_commit = nvm.fences as f64 / n;
    let epochs = run.epochs.max(1) as f64;
    [run.recon_us, run.log_us, run.init_us, run.exec_us, run.persist_us] = sums.map(|s| s / epochs);
    let latency = stats.latency_ns();
    if !latency.is_empty() {
        run.latency_p50_us = latency.value_at_quantile(0.5) as f64 / 1e3;
        run.latency_p99_us = latency.value_at_quantile(0.99) as f64 / 1e3;
    }
    stats.finished_at = Some(Instant::now());
    Ok(RunResult {
        seed,
        threads: workers,
        txn_types: workload.txn_types().to_vec(),
        warmup_s: warmup.as_secs_f64(),
        measured_s: run.seconds,
        stats,
        nvm,
        adaptive: None,
        checkpoints: None,
        gc: crate::driver::GcWindow::default(),
        timeseries: Vec::new(),
        numa: None,
        epochs: Some(run),
    })
}
