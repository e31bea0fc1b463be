//! The benchmark driver: worker threads, warmup, measurement, retries.
//!
//! PHASES. `run_benchmark` starts `threads` workers, each with its own
//! `EngineWorker`, per-worker state and a `SmallRng` seeded from the run's
//! seed and the worker index (so a seed reproduces every worker's request
//! stream). The coordinating thread moves a shared phase word WARMUP →
//! MEASURE → STOP. A worker notices MEASURE before its next transaction,
//! throws its warmup statistics away and snapshots its cache counters; the
//! coordinator snapshots the engine's NVM counters at the same switch, so
//! everything reported covers the measured interval only. At that switch it
//! also asks the engine to re-plan its cache shares from the accesses the
//! warmup counted (`Engine::rebalance_cache`). With
//! `Stop::Transactions(n)` workers claim measured transactions from a shared
//! budget and stop when it is spent.
//!
//! RETRIES. The workload's `execute` is one attempt. A retryable abort is
//! counted (by reason, as a CC abort) and the same request runs again after
//! a short growing back-off; the run fails only once a request has made
//! `max_attempts` attempts AND retried for `zen_engine::api::RETRY_PATIENCE`
//! (a descheduled lock holder is not a reason to fail); a user abort
//! (e.g. TPC-C's 1 % New-Order rollback) is counted apart and not retried;
//! any other error stops the run with the worker and transaction named.
//! Latency is measured per request, retries included.
//!
//! NUMA (Zen+ §4.2). When the engine runs NUMA-aware (`Engine::numa`), each
//! worker is pinned to its node's CPU where one exists, and in
//! `soft-partition` mode every drawn transaction goes through the [`route`]
//! module (Alg. 3, with Alg. 4 run periodically). The run result carries the
//! local/remote access counts of the measured interval ([`NumaRun`]).
//!
//! PROGRESS. Every `interval` the coordinator sums the workers' live
//! counters ([`live`]) and the engine's NVM counters into an
//! [`IntervalSample`], keeps it for `timeseries.csv` and hands it to the
//! progress callback.

mod exclusive;
pub mod live;
pub mod route;
pub mod stats;

use std::sync::atomic::{AtomicI64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Serialize;
use zen_engine::api::{CheckpointStats, EngineCounters};
use zen_engine::zen::adaptive::AdaptiveStats;
use zen_engine::{AbortReason, CacheStats, Engine, EngineWorker};
use zen_pmem::CounterSnapshot;

use crate::error::{Error, Result};
use crate::meta;
use crate::workload::Workload;
use live::LiveCounters;
use route::{RouteStats, Router};
use stats::WorkerStats;
use zen_engine::numa::{NumaCounters, NumaStats};

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// When measurement ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// After this much measured time.
    Duration(Duration),
    /// After this many measured transactions (committed or user-aborted).
    Transactions(u64),
}

/// How to drive a workload.
#[derive(Debug, Clone, Serialize)]
pub struct DriverConfig {
    pub threads: usize,
    pub warmup: Duration,
    pub stop: Stop,
    pub seed: u64,
    /// Progress and time-series interval.
    pub interval: Duration,
    /// Attempts of one request before the run may fail (it also has to have
    /// retried for `zen_engine::api::RETRY_PATIENCE`).
    pub max_attempts: u32,
}

impl Default for DriverConfig {
    fn default() -> Self {
        DriverConfig {
            threads: 1,
            warmup: Duration::from_secs(1),
            stop: Stop::Duration(Duration::from_secs(5)),
            seed: 0,
            interval: Duration::from_secs(1),
            max_attempts: zen_engine::api::MAX_ATTEMPTS,
        }
    }
}

impl DriverConfig {
    pub fn validate(&self) -> Result<()> {
        meta::check_worker_count(self.threads)?;
        if self.interval.is_zero() {
            return Err(Error::invalid("interval", "0", "a positive duration"));
        }
        if self.max_attempts == 0 {
            return Err(Error::invalid("max attempts", 0, "at least 1"));
        }
        match self.stop {
            Stop::Duration(d) if d.is_zero() => {
                Err(Error::invalid("duration", "0s", "a positive duration, e.g. 10s"))
            }
            Stop::Transactions(0) => Err(Error::invalid("txns", 0, "at least 1")),
            _ => Ok(()),
        }
    }
}

/// The seed of worker `worker`'s generator (SplitMix64 of seed and index).
pub fn worker_seed(seed: u64, worker: usize) -> u64 {
    let mut z = seed.wrapping_add((worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One progress interval.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IntervalSample {
    /// Seconds since the workers started (warmup included).
    pub elapsed_s: f64,
    /// `warmup` or `measure`.
    pub phase: &'static str,
    pub interval_s: f64,
    pub commits: u64,
    pub cc_aborts: u64,
    pub user_aborts: u64,
    pub throughput_tps: f64,
    /// Percent of attempts that aborted (CC and user).
    pub abort_pct: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub nvm_bytes_written: u64,
    pub nvm_write_gb_per_s: f64,
    pub flushes_per_txn: f64,
    pub fences_per_txn: f64,
    /// Zen+: switches to the exclusive stage during the interval.
    pub stage_switches: u64,
    /// Zen+: exclusive stages that ended during the interval, in ms.
    pub exclusive_ms: f64,
    /// Zen+: a privileged transaction ran alone when the interval closed.
    pub exclusive_now: bool,
}

/// What a run measured, before it is turned into a report.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub seed: u64,
    pub threads: usize,
    pub txn_types: Vec<&'static str>,
    pub warmup_s: f64,
    /// Wall time of the measured interval.
    pub measured_s: f64,
    pub stats: WorkerStats,
    /// Engine NVM counters over the measured interval.
    pub nvm: CounterSnapshot,
    /// Zen+ adaptive-execution counters over the measured interval.
    pub adaptive: Option<AdaptiveStats>,
    /// Checkpoints of the engine over the measured interval (mmdb).
    pub checkpoints: Option<CheckpointWindow>,
    /// Slots the engine's GC reclaimed in the measured interval.
    pub gc: GcWindow,
    pub timeseries: Vec<IntervalSample>,
    /// NUMA placement and accesses when the engine runs NUMA-aware.
    pub numa: Option<NumaRun>,
    /// Epoch runs of a deterministic engine (`crate::oneshot::run_epochs`).
    pub epochs: Option<crate::oneshot::EpochRun>,
}

/// Checkpoints (mmdb) over the measured interval: the counters are the
/// window's, like every other counter of a run; `seq` is the current
/// checkpoint's sequence number at the window's start and at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CheckpointWindow {
    pub seq_at_start: u64,
    pub seq: u64,
    /// Checkpoints taken in the window because the log filled the pool.
    pub on_log_pressure: u64,
    /// Of those, the ones that failed (e.g. no room left for the copy).
    pub failed_on_log_pressure: u64,
}

impl CheckpointWindow {
    /// The window from `start` (when it opened) to `end`.
    pub fn between(start: CheckpointStats, end: CheckpointStats) -> CheckpointWindow {
        CheckpointWindow {
            seq_at_start: start.seq,
            seq: end.seq,
            on_log_pressure: end.on_log_pressure.saturating_sub(start.on_log_pressure),
            failed_on_log_pressure: end
                .failed_on_log_pressure
                .saturating_sub(start.failed_on_log_pressure),
        }
    }
}

/// The engine's space reclamation over the measured interval
/// ([`EngineCounters`] at its two edges).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GcWindow {
    /// Superseded or deleted versions' slots reclaimed.
    pub reclaimed_slots: u64,
    /// Zen: of those, the slots kept as their record's spare (S7).
    pub spared_slots: u64,
}

impl GcWindow {
    pub fn between(start: &EngineCounters, end: &EngineCounters) -> GcWindow {
        GcWindow {
            reclaimed_slots: end.gc_reclaimed_slots.saturating_sub(start.gc_reclaimed_slots),
            spared_slots: end.gc_spared_slots.saturating_sub(start.gc_spared_slots),
        }
    }
}

/// What a NUMA-aware run measured.
#[derive(Debug, Clone, Serialize)]
pub struct NumaRun {
    /// Local and remote accesses during the measured interval.
    pub measured: NumaCounters,
    /// Placement and whole-run counters at the end (warmup included, so
    /// the JSON name says so: one window for every counter, issue 19).
    #[serde(rename = "engine_whole_run")]
    pub engine: NumaStats,
    /// Routing decisions of the whole run (soft-partition mode only).
    #[serde(rename = "route_whole_run")]
    pub route: Option<RouteStats>,
    /// Each table's partition key, as the workload declares it.
    pub partition_keys: Vec<(String, String)>,
}

impl RunResult {
    pub fn cache(&self) -> CacheStats {
        self.stats.cache
    }
}

/// State shared by the coordinator and the workers.
struct Shared {
    phase: AtomicU8,
    /// Measured transactions left to claim (`Stop::Transactions`), else unused.
    budget: AtomicI64,
    live: Vec<CachePadded<LiveCounters>>,
}

/// Run `workload` on `engine` as `config` says; `progress` sees every interval.
pub fn run_benchmark<W: Workload>(
    engine: &dyn Engine,
    workload: &W,
    config: &DriverConfig,
    progress: &mut dyn FnMut(&IntervalSample),
) -> Result<RunResult> {
    config.validate()?;
    workload.prepare(engine)?;
    // Calibrate the latency clock before any worker starts (20 ms, once).
    let _ = zen_pmem::cpu::tsc_ticks_per_ns();
    let budget = match config.stop {
        Stop::Transactions(n) => i64::try_from(n).unwrap_or(i64::MAX),
        Stop::Duration(_) => i64::MAX,
    };
    let start_phase = if config.warmup.is_zero() { MEASURE } else { WARMUP };
    let shared = Shared {
        phase: AtomicU8::new(start_phase),
        budget: AtomicI64::new(budget),
        live: (0..config.threads).map(|_| CachePadded::new(LiveCounters::default())).collect(),
    };
    let numa = engine.numa();
    let router: Option<Router<'_, W::Request>> = numa.and_then(|n| {
        let p = n.partitioner.as_ref()?;
        Some(Router::new(p, config.threads.min(n.layout.workers)))
    });
    // The clock and the counters of the measured interval start before any
    // worker does: without a warmup the workers measure from their first
    // transaction, and a short run can finish before the coordinator runs.
    // (`counters`, not `status`: status counts every table's rows, a walk
    // of 100–170 ms over 2M rows that ran inside the measured interval.)
    let start = Start {
        at: Instant::now(),
        nvm: engine.pmem_counters(),
        numa: engine.numa_stats().map(|s| s.total).unwrap_or_default(),
        adaptive: engine.adaptive_stats(),
        counters: engine.counters(),
    };
    // Registered here, in index order, not by the threads as they start:
    // on an engine with no other worker, thread `i` is then worker `i`
    // every run, the worker whose regions the load filled with the rows
    // thread `i` works on (`meta::load_parallel_by`; TPC-C's home
    // warehouses). Racing threads paired them at random.
    let workers = (0..config.threads).map(|_| engine.worker()).collect::<Result<Vec<_>, _>>()?;
    std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .enumerate()
            .map(|(i, worker)| {
                let shared = &shared;
                let router = router.as_ref();
                scope
                    .spawn(move || worker_main(worker, engine, workload, config, shared, router, i))
            })
            .collect();
        let timing = coordinate(engine, config, &shared, &handles, start, progress);
        let mut merged = WorkerStats::new(workload.txn_types().len());
        let mut first_error = None;
        for (i, handle) in handles.into_iter().enumerate() {
            match handle.join().unwrap_or(Err(Error::WorkerPanicked(i))) {
                Ok(stats) => merged.merge(&stats),
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let nvm = engine.pmem_counters().since(&timing.nvm_start);
        let end_counters = engine.counters();
        let numa = engine.numa_stats().map(|stats| NumaRun {
            measured: stats.total.since(&timing.numa_start),
            engine: stats,
            route: router.as_ref().map(Router::stats),
            partition_keys: workload
                .partition_key_columns()
                .into_iter()
                .map(|(t, c)| (t.to_string(), c.to_string()))
                .collect(),
        });
        // A transaction budget ends when the last worker finishes its share.
        let end = match config.stop {
            Stop::Transactions(_) => merged.finished_at.unwrap_or(timing.end),
            Stop::Duration(_) => timing.end,
        };
        let adaptive = engine.adaptive_stats().zip(timing.adaptive_start).map(|(a, b)| {
            let mut d = a.since(&b);
            // Cut at the window's edges, like every other counter (exclusive.rs).
            d.exclusive_us = timing.exclusive.window_us(d.exclusive_us, timing.measure_start, end);
            d
        });
        Ok(RunResult {
            seed: config.seed,
            threads: config.threads,
            txn_types: workload.txn_types().to_vec(),
            warmup_s: timing.warmup_s,
            measured_s: end.saturating_duration_since(timing.measure_start).as_secs_f64().max(1e-9),
            stats: merged,
            nvm,
            adaptive,
            checkpoints: end_counters.checkpoints.map(|end| {
                CheckpointWindow::between(
                    timing.counters_start.checkpoints.unwrap_or_default(),
                    end,
                )
            }),
            gc: GcWindow::between(&timing.counters_start, &end_counters),
            timeseries: timing.samples,
            numa,
            epochs: None,
        })
    })
}

struct Timing {
    warmup_s: f64,
    measure_start: Instant,
    /// When the coordinator stopped the workers.
    end: Instant,
    nvm_start: CounterSnapshot,
    numa_start: NumaCounters,
    adaptive_start: Option<AdaptiveStats>,
    counters_start: EngineCounters,
    exclusive: exclusive::ExclusiveWatch,
    samples: Vec<IntervalSample>,
}

/// When the run started, and the engine's counters then.
struct Start {
    at: Instant,
    nvm: CounterSnapshot,
    numa: NumaCounters,
    adaptive: Option<AdaptiveStats>,
    counters: EngineCounters,
}

/// The coordinator: phases, sampling, stopping. Returns when workers should stop.
fn coordinate<T>(
    engine: &dyn Engine,
    config: &DriverConfig,
    shared: &Shared,
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
    start: Start,
    progress: &mut dyn FnMut(&IntervalSample),
) -> Timing {
    let started = start.at;
    let mut sampler = Sampler::new(engine, shared, started);
    let mut measure_start = if config.warmup.is_zero() { Some(started) } else { None };
    let mut nvm_start = start.nvm;
    let numa_total = || engine.numa_stats().map(|s| s.total).unwrap_or_default();
    let mut numa_start = start.numa;
    let mut adaptive_start = start.adaptive;
    let mut counters_start = start.counters;
    let tick = Duration::from_millis(20).min(config.interval);
    let mut exclusive = exclusive::ExclusiveWatch::default();
    loop {
        std::thread::sleep(tick);
        let now = Instant::now();
        if let Some(a) = engine.adaptive_stats() {
            exclusive.observe(now, &a);
        }
        let all_done = handles.iter().all(|h| h.is_finished());
        if measure_start.is_none() && now - started >= config.warmup {
            // Close the warmup's last interval so no sample straddles the phases.
            if let Some(sample) = sampler.sample(engine, shared, now, false) {
                progress(&sample);
            }
            // Re-plan the Met-Cache shares from the accesses the warmup counted.
            engine.rebalance_cache();
            nvm_start = engine.pmem_counters();
            numa_start = numa_total();
            adaptive_start = engine.adaptive_stats();
            counters_start = engine.counters();
            exclusive.open(now);
            shared.phase.store(MEASURE, Ordering::Release);
            measure_start = Some(now);
        }
        let over = match (config.stop, measure_start) {
            (Stop::Duration(d), Some(m)) => now - m >= d,
            (Stop::Transactions(_), Some(_)) => {
                shared.budget.load(Ordering::Relaxed) <= 0 && all_done
            }
            _ => false,
        };
        if over || all_done {
            shared.phase.store(STOP, Ordering::Release);
            let end = Instant::now();
            if let Some(sample) = sampler.sample(engine, shared, end, measure_start.is_some()) {
                progress(&sample);
            }
            let measure_start = measure_start.unwrap_or(end);
            return Timing {
                warmup_s: (measure_start - started).as_secs_f64(),
                measure_start,
                end,
                nvm_start,
                numa_start,
                adaptive_start,
                counters_start,
                exclusive,
                samples: sampler.samples,
            };
        }
        if now - sampler.last >= config.interval
            && let Some(sample) = sampler.sample(engine, shared, now, measure_start.is_some())
        {
            progress(&sample);
        }
    }
}

/// Turns successive reads of the live counters into interval samples.
struct Sampler {
    started: Instant,
    last: Instant,
    totals: [u64; 3],
    latency: Vec<u64>,
    nvm: CounterSnapshot,
    adaptive: Option<AdaptiveStats>,
    samples: Vec<IntervalSample>,
}

impl Sampler {
    fn new(engine: &dyn Engine, shared: &Shared, started: Instant) -> Sampler {
        let mut s = Sampler {
            started,
            last: started,
            totals: [0; 3],
            latency: vec![0; live::BUCKETS],
            nvm: engine.pmem_counters(),
            adaptive: engine.adaptive_stats(),
            samples: Vec::new(),
        };
        s.read(shared);
        s
    }

    fn read(&mut self, shared: &Shared) -> ([u64; 3], Vec<u64>) {
        let mut totals = [0u64; 3];
        let mut latency = vec![0u64; live::BUCKETS];
        for l in &shared.live {
            totals[0] += l.commits.load(Ordering::Relaxed);
            totals[1] += l.cc_aborts.load(Ordering::Relaxed);
            totals[2] += l.user_aborts.load(Ordering::Relaxed);
            l.latency.accumulate(&mut latency);
        }
        let previous = (
            std::mem::replace(&mut self.totals, totals),
            std::mem::replace(&mut self.latency, latency.clone()),
        );
        let delta_totals = [0, 1, 2].map(|i| totals[i] - previous.0[i]);
        let delta_latency = latency.iter().zip(&previous.1).map(|(a, b)| a - b).collect();
        (delta_totals, delta_latency)
    }

    fn sample(
        &mut self,
        engine: &dyn Engine,
        shared: &Shared,
        now: Instant,
        measuring: bool,
    ) -> Option<IntervalSample> {
        let interval_s = (now - self.last).as_secs_f64();
        if interval_s <= 0.0 {
            return None;
        }
        self.last = now;
        let ([commits, cc_aborts, user_aborts], latency) = self.read(shared);
        let nvm_now = engine.pmem_counters();
        let nvm = nvm_now.since(&self.nvm);
        self.nvm = nvm_now;
        let adaptive_now = engine.adaptive_stats();
        let adaptive = match (&adaptive_now, &self.adaptive) {
            (Some(now), Some(before)) => now.since(before),
            _ => AdaptiveStats::default(),
        };
        self.adaptive = adaptive_now;
        let attempts = (commits + cc_aborts + user_aborts).max(1) as f64;
        let per_txn = |v: u64| if commits == 0 { 0.0 } else { v as f64 / commits as f64 };
        let sample = IntervalSample {
            elapsed_s: (now - self.started).as_secs_f64(),
            phase: if measuring { "measure" } else { "warmup" },
            interval_s,
            commits,
            cc_aborts,
            user_aborts,
            throughput_tps: commits as f64 / interval_s,
            abort_pct: (cc_aborts + user_aborts) as f64 / attempts * 100.0,
            p50_us: live::quantile_ns(&latency, 0.5) as f64 / 1000.0,
            p99_us: live::quantile_ns(&latency, 0.99) as f64 / 1000.0,
            nvm_bytes_written: nvm.bytes_written,
            nvm_write_gb_per_s: nvm.bytes_written as f64 / interval_s / 1e9,
            flushes_per_txn: per_txn(nvm.lines_flushed),
            fences_per_txn: per_txn(nvm.fences),
            stage_switches: adaptive.stage_switches,
            exclusive_ms: adaptive.exclusive_us as f64 / 1000.0,
            exclusive_now: adaptive.exclusive_now,
        };
        self.samples.push(sample.clone());
        Some(sample)
    }
}

/// One worker thread: generate, execute with retries, count.
fn worker_main<W: Workload>(
    worker: Box<dyn EngineWorker + '_>,
    engine: &dyn Engine,
    workload: &W,
    config: &DriverConfig,
    shared: &Shared,
    router: Option<&Router<'_, W::Request>>,
    index: usize,
) -> Result<WorkerStats> {
    let result = worker_loop(worker, engine, workload, config, shared, router, index);
    if result.is_err() {
        // Stop the others: the run has failed.
        shared.phase.store(STOP, Ordering::Release);
    }
    result
}

fn worker_loop<W: Workload>(
    mut worker: Box<dyn EngineWorker + '_>,
    engine: &dyn Engine,
    workload: &W,
    config: &DriverConfig,
    shared: &Shared,
    router: Option<&Router<'_, W::Request>>,
    index: usize,
) -> Result<WorkerStats> {
    pin_to_node(engine, worker.id())?;
    let mut keys = Vec::with_capacity(64);
    let mut done = 0u64;
    let mut local = workload.local(engine, index, config.threads)?;
    let mut rng = SmallRng::seed_from_u64(worker_seed(config.seed, index));
    let live = &shared.live[index];
    let types = workload.txn_types().len();
    let mut stats = WorkerStats::new(types);
    let mut cache_start = worker.cache_stats();
    let mut allocations_start = zen_pmem::alloc_count::thread_allocations();
    let mut measuring = false;
    let mut attempt = Attempt {
        config,
        index,
        names: workload.txn_types(),
        ticks_per_ns: zen_pmem::cpu::tsc_ticks_per_ns(),
    };
    // Only a transaction budget needs the shared counter; a timed run never touches it.
    let counted = matches!(config.stop, Stop::Transactions(_));
    // The request, refilled in place (`Workload::next_into`).
    let mut request: Option<W::Request> = None;
    loop {
        let phase = shared.phase.load(Ordering::Acquire);
        if phase == STOP {
            break;
        }
        if phase == MEASURE && !measuring {
            measuring = true;
            stats = WorkerStats::new(types);
            cache_start = worker.cache_stats();
            allocations_start = zen_pmem::alloc_count::thread_allocations();
        }
        if measuring && counted && shared.budget.fetch_sub(1, Ordering::Relaxed) <= 0 {
            break;
        }
        let request = match (router, request.as_mut()) {
            (None, Some(request)) => {
                workload.next_into(&mut local, &mut rng, request);
                request
            }
            (None, None) => request.insert(workload.next(&mut local, &mut rng)),
            (Some(r), _) => request.insert(r.next_request(
                worker.id(),
                &mut |rng| workload.next(&mut local, rng),
                &|req, out| workload.partition_keys(req, out),
                &mut keys,
                &mut rng,
                measuring,
            )),
        };
        attempt.run(workload, worker.as_mut(), &mut local, request, &mut stats, live)?;
        done += 1;
        if let Some(r) = router {
            r.after_transaction(done);
        }
    }
    stats.finished_at = Some(Instant::now());
    if measuring {
        stats.allocations = zen_pmem::alloc_count::thread_allocations() - allocations_start;
    }
    stats.cache = if measuring {
        cache_stats_since(&worker.cache_stats(), &cache_start)
    } else {
        CacheStats::default()
    };
    // Lazy durability: make this worker's last commits durable before the report.
    worker.sync()?;
    Ok(stats)
}

/// Pin the calling worker thread to its node's CPU when NUMA pinning applies.
fn pin_to_node(engine: &dyn Engine, worker: usize) -> Result<()> {
    let Some(numa) = engine.numa() else { return Ok(()) };
    let Some(cpu) = numa.layout.worker_cpu.get(worker).copied().flatten() else { return Ok(()) };
    zen_pmem::affinity::pin_current_thread(cpu).map_err(|e| {
        Error::invalid("NUMA pinning", format!("worker {worker} to cpu {cpu}"), e.to_string())
    })
}

fn cache_stats_since(now: &CacheStats, start: &CacheStats) -> CacheStats {
    CacheStats {
        hits: now.hits.wrapping_sub(start.hits),
        misses: now.misses.wrapping_sub(start.misses),
        evictions: now.evictions.wrapping_sub(start.evictions),
    }
}

/// Runs one request to completion: commit, user abort, or failure.
struct Attempt<'a> {
    config: &'a DriverConfig,
    index: usize,
    names: &'static [&'static str],
    /// Latency is timed on the TSC (`rdtsc`, a few ns) rather than the
    /// monotonic clock (a vDSO call, ~20 ns, twice per transaction: 4 % of
    /// an `ideal` YCSB-A transaction); calibrated once per process.
    ticks_per_ns: f64,
}

impl Attempt<'_> {
    fn run<W: Workload>(
        &mut self,
        workload: &W,
        worker: &mut dyn EngineWorker,
        local: &mut W::Local,
        request: &W::Request,
        stats: &mut WorkerStats,
        live: &LiveCounters,
    ) -> Result<()> {
        let txn_type = workload.txn_type(request);
        let opts = workload.options(request);
        let started = zen_pmem::cpu::rdtsc();
        // The retry patience runs from the first abort (most requests never
        // abort and never read the clock).
        let mut first_abort: Option<Instant> = None;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let result = worker.execute(&opts, &mut |tx| workload.execute(local, tx, request));
            let error = match result {
                Ok(_) => {
                    let ticks = zen_pmem::cpu::rdtsc().wrapping_sub(started);
                    let ns = (ticks as f64 / self.ticks_per_ns) as u64;
                    stats.on_commit(txn_type, ns);
                    live.on_commit(ns);
                    return Ok(());
                }
                Err(e) => e,
            };
            match error.abort_reason() {
                Some(AbortReason::User) => {
                    stats.on_user_abort(txn_type);
                    live.on_user_abort();
                    return Ok(());
                }
                Some(reason) if reason.is_retryable() => {
                    stats.on_cc_abort(txn_type, reason);
                    live.on_cc_abort();
                    if zen_engine::api::retries_exhausted(
                        attempt,
                        self.config.max_attempts,
                        *first_abort.get_or_insert_with(Instant::now),
                    ) {
                        return Err(Error::RetriesExhausted {
                            worker: self.index,
                            txn: self.names[txn_type],
                            attempts: attempt,
                            reason: reason.name(),
                        });
                    }
                    back_off(attempt);
                }
                _ => {
                    return Err(Error::Transaction {
                        worker: self.index,
                        txn: self.names[txn_type],
                        source: error,
                    });
                }
            }
        }
    }
}

/// Spin a little longer after every failed attempt; yield now and then.
/// The engine's back-off (spin, then yield, then sleep): the attempts of one
/// transaction span about half a second, so a lock holder that the scheduler
/// preempted (2 cores, more runnable threads) is waited out; a spin-only
/// back-off used up 1,000 attempts in a few milliseconds and failed the run.
fn back_off(attempt: u32) {
    zen_engine::api::backoff(attempt);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_seeds_differ_per_worker_and_repeat_per_seed() {
        let seeds: Vec<u64> = (0..64).map(|w| worker_seed(42, w)).collect();
        let mut unique = seeds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 64);
        assert_eq!(worker_seed(42, 3), seeds[3]);
        assert_ne!(worker_seed(43, 3), seeds[3]);
    }

    #[test]
    fn invalid_driver_settings_are_refused() {
        let ok = DriverConfig::default();
        ok.validate().unwrap();
        assert!(DriverConfig { threads: 0, ..ok.clone() }.validate().is_err());
        assert!(DriverConfig { threads: 1000, ..ok.clone() }.validate().is_err());
        assert!(DriverConfig { stop: Stop::Transactions(0), ..ok.clone() }.validate().is_err());
        assert!(DriverConfig { stop: Stop::Duration(Duration::ZERO), ..ok }.validate().is_err());
    }
}
