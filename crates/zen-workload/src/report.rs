//! The result of a run: a versioned, serde-serialisable [`Report`], its
//! human rendering, and the files `--out DIR` writes.
//!
//! `docs/summary.schema.json` describes the JSON; `docs/benchmarks.md`
//! explains every field. Bump [`SCHEMA_VERSION`] when a field changes
//! meaning or disappears (adding a field is compatible).
//!
//! Definitions used throughout:
//! - `attempts = commits + cc_aborts + user_aborts` (every retry is an attempt);
//! - `throughput_tps = commits / measured_s`, measured wall time only;
//! - `abort_ratio = (cc_aborts + user_aborts) / attempts`,
//!   `cc_abort_ratio = cc_aborts / attempts`;
//! - latencies are per request, from the first attempt's start to the
//!   commit, retries included, for committed requests;
//! - NVM figures are the engine's counters over the measured interval, and
//!   `per_commit` divides them by `commits`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use serde::Serialize;
use zen_engine::zen::adaptive::AdaptiveStats;
use zen_engine::{AbortReason, EngineConfig, RecoveryReport};

use crate::driver::{DriverConfig, IntervalSample, RunResult, Stop};
use crate::error::{Error, Result};

/// Version of the summary JSON layout.
pub const SCHEMA_VERSION: u32 = 1;

/// The resolved configuration of a run, as stored in every result file.
#[derive(Debug, Clone, Serialize)]
pub struct ReportConfig {
    /// `bench` or `run`.
    pub command: String,
    pub workload: String,
    pub workload_parameters: serde_json::Value,
    pub engine: String,
    pub cc: String,
    pub pmem: String,
    /// What a commit survives on this backend.
    pub durable_across: String,
    /// Latency profile of the `emu` backend, `none` for the other backends.
    pub nvm_profile: String,
    /// The device model's parameters (`emu` only; docs/design/nvm-emulation.md).
    pub nvm_device: Option<zen_pmem::DeviceParams>,
    /// `--nvm-share N`: what the figures model, `null` when they model the
    /// device as it is (or no device).
    pub nvm_model_note: Option<String>,
    pub persistence_domain: String,
    pub durability: String,
    pub pool: Option<String>,
    pub pool_size_bytes: u64,
    pub cache_size_bytes: u64,
    pub dram_ratio: Option<f64>,
    /// Zen+ adaptive execution and its thresholds (α, β shares; γ tuples).
    pub adaptive: bool,
    pub adaptive_alpha: f64,
    pub adaptive_beta: f64,
    pub adaptive_gamma_tuples: u64,
    pub threads: usize,
    pub seed: u64,
    pub warmup_s: f64,
    pub duration_s: Option<f64>,
    pub txns: Option<u64>,
    pub zenplus_version: String,
}

impl ReportConfig {
    pub fn new(
        command: &str,
        engine: &EngineConfig,
        driver: &DriverConfig,
        workload: &str,
        workload_parameters: serde_json::Value,
    ) -> ReportConfig {
        let (duration_s, txns) = match driver.stop {
            Stop::Duration(d) => (Some(d.as_secs_f64()), None),
            Stop::Transactions(n) => (None, Some(n)),
        };
        ReportConfig {
            command: command.to_string(),
            workload: workload.to_string(),
            workload_parameters,
            engine: engine.engine.name().to_string(),
            cc: engine.cc.name().to_string(),
            pmem: engine.pmem.name().to_string(),
            durable_across: engine.pmem.durable_across().to_string(),
            // Only `emu` applies a latency model; other media run at their own speed.
            nvm_profile: if engine.pmem == zen_pmem::BackendKind::Emu {
                engine.latency.profile.name().to_string()
            } else {
                "none".to_string()
            },
            nvm_device: (engine.pmem == zen_pmem::BackendKind::Emu).then_some(engine.latency),
            nvm_model_note: engine
                .latency
                .share_threads
                .filter(|_| engine.pmem == zen_pmem::BackendKind::Emu)
                .map(share_note),
            persistence_domain: engine.domain.name().to_string(),
            durability: engine.durability.name().to_string(),
            pool: engine.pool.as_ref().map(|p| p.display().to_string()),
            pool_size_bytes: engine.pool_size_bytes,
            cache_size_bytes: engine.cache_size_bytes,
            dram_ratio: engine.dram_ratio,
            adaptive: engine.adaptive,
            adaptive_alpha: engine.adaptive_alpha,
            adaptive_beta: engine.adaptive_beta,
            adaptive_gamma_tuples: engine.adaptive_gamma_tuples,
            threads: driver.threads,
            seed: driver.seed,
            warmup_s: driver.warmup.as_secs_f64(),
            duration_s,
            txns,
            zenplus_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// What `--nvm-share N` makes of a run's figures (banner and summary).
pub fn share_note(threads: u32) -> String {
    format!(
        "MODEL: each running thread gets the NVM bandwidth share of one of {threads} threads (1/{threads} of the modelled device with {threads} writers); throughput is per-thread pressure of a {threads}-thread run, not a measurement of {threads} threads"
    )
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub p9999: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    fn from_ns(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            p9999: us(h.value_at_quantile(0.9999)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub commits: u64,
    pub cc_aborts: u64,
    pub user_aborts: u64,
    pub attempts: u64,
    pub throughput_tps: f64,
    pub abort_ratio: f64,
    pub cc_abort_ratio: f64,
    pub measured_s: f64,
    pub warmup_s: f64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct TypeSummary {
    pub commits: u64,
    pub cc_aborts: u64,
    pub user_aborts: u64,
    pub throughput_tps: f64,
    /// Share of all commits.
    pub commit_share: f64,
    pub latency_us: Latency,
}

#[derive(Debug, Clone, Serialize)]
pub struct PerCommit {
    pub bytes: f64,
    /// Media bytes written per commit (`emu`).
    pub media_bytes: f64,
    pub bytes_read: f64,
    pub flushes: f64,
    pub fences: f64,
    /// The modelled stall split per commit, in µs (`emu`; 0 otherwise):
    /// `nvm.read_latency_ns`, `write_latency_ns`, `bandwidth_wait_ns` over commits.
    pub read_latency_us: f64,
    pub write_latency_us: f64,
    pub bandwidth_wait_us: f64,
    /// Worker-thread time per commit outside the modelled stall, in µs:
    /// `threads × measured_s / commits − stall_ns / commits` (at least 0).
    /// The engine's own work per commit, with what the model charges taken out.
    pub unstalled_us: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NvmSummary {
    pub bytes_written: u64,
    pub bytes_read: u64,
    /// Cache lines written back.
    pub flushes: u64,
    pub fences: u64,
    /// Distinct 256-byte blocks written.
    pub blocks_written: u64,
    /// Emulated NVM latency charged (the `emu` backend), all workers together.
    pub stall_ns: u64,
    /// Bytes the modelled medium wrote: flushed lines after write combining,
    /// rounded to its granularity (`emu`; 0 for the other backends).
    pub media_bytes_written: u64,
    /// The stall split: modelled read latency, persist latency at fences,
    /// and waits for read or write bandwidth (sum: `stall_ns`).
    pub read_latency_ns: u64,
    pub write_latency_ns: u64,
    pub bandwidth_wait_ns: u64,
    pub write_gb_per_s: f64,
    pub per_commit: PerCommit,
}

#[derive(Debug, Clone, Serialize)]
pub struct CacheSummary {
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
    pub hit_ratio: f64,
}

/// Everything a run reports. See the module docs.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub run_id: String,
    pub config: ReportConfig,
    pub summary: Summary,
    pub aborts_by_reason: BTreeMap<String, u64>,
    pub per_txn_type: BTreeMap<String, TypeSummary>,
    pub nvm: NvmSummary,
    pub cache: CacheSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryReport>,
    /// Zen+ NUMA placement and local/remote accesses (NUMA-aware runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa: Option<NumaSummary>,
    /// Zen+ adaptive execution over the measured interval (Zen with a
    /// protocol that runs it, adaptive on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveStats>,
    /// Checkpoints over the measured interval (mmdb).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<crate::driver::CheckpointWindow>,
    /// Slots the engine's GC reclaimed over the measured interval (engines
    /// that reclaim slots, when they reclaimed any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc: Option<GcSummary>,
    /// Heap allocations of the worker threads in the measured interval
    /// (when the counting allocator is installed, as in the `zen` binary).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocations: Option<AllocationSummary>,
    /// One-shot transactions in epochs on a deterministic engine
    /// (`zen bench ycsb|smallbank --engine nvcaracal`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epochs: Option<crate::oneshot::EpochRun>,
}

/// Space reclamation over the measured interval: the counts, and per commit.
#[derive(Debug, Clone, Serialize)]
pub struct GcSummary {
    #[serde(flatten)]
    pub window: crate::driver::GcWindow,
    pub reclaimed_per_commit: f64,
    pub spared_per_commit: f64,
}

/// Heap allocations of the worker threads over the measured interval.
#[derive(Debug, Clone, Serialize)]
pub struct AllocationSummary {
    pub total: u64,
    pub per_commit: f64,
}

/// The NUMA part of a report: the measured interval's accesses and shares.
#[derive(Debug, Clone, Serialize)]
pub struct NumaSummary {
    /// Remote share of all counted tuple accesses.
    pub remote_fraction: f64,
    pub remote_read_fraction: f64,
    pub remote_write_fraction: f64,
    #[serde(flatten)]
    pub run: crate::driver::NumaRun,
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

impl Report {
    pub fn new(config: ReportConfig, run: &RunResult, recovery: Option<RecoveryReport>) -> Report {
        let s = &run.stats;
        let attempts = s.commits + s.cc_aborts + s.user_aborts;
        let summary = Summary {
            commits: s.commits,
            cc_aborts: s.cc_aborts,
            user_aborts: s.user_aborts,
            attempts,
            throughput_tps: s.commits as f64 / run.measured_s,
            abort_ratio: ratio(s.cc_aborts + s.user_aborts, attempts),
            cc_abort_ratio: ratio(s.cc_aborts, attempts),
            measured_s: run.measured_s,
            warmup_s: run.warmup_s,
            latency_us: Latency::from_ns(&s.latency_ns()),
        };
        let aborts_by_reason = AbortReason::ALL
            .iter()
            .zip(s.aborts_by_reason)
            .map(|(r, n)| (r.name().to_string(), n))
            .collect();
        let per_txn_type = run
            .txn_types
            .iter()
            .zip(&s.per_type)
            .map(|(name, t)| {
                let summary = TypeSummary {
                    commits: t.commits,
                    cc_aborts: t.cc_aborts,
                    user_aborts: t.user_aborts,
                    throughput_tps: t.commits as f64 / run.measured_s,
                    commit_share: ratio(t.commits, s.commits),
                    latency_us: Latency::from_ns(&t.latency_ns),
                };
                (name.to_string(), summary)
            })
            .collect();
        Report {
            schema_version: SCHEMA_VERSION,
            run_id: run_id(&config),
            config,
            summary,
            aborts_by_reason,
            per_txn_type,
            nvm: nvm_summary(run),
            cache: cache_summary(run),
            recovery,
            numa: run.numa.clone().map(|run| NumaSummary {
                remote_fraction: run.measured.remote_fraction(),
                remote_read_fraction: run.measured.remote_read_fraction(),
                remote_write_fraction: run.measured.remote_write_fraction(),
                run,
            }),
            adaptive: run.adaptive,
            checkpoints: run.checkpoints,
            gc: (run.gc.reclaimed_slots > 0).then(|| GcSummary {
                window: run.gc,
                reclaimed_per_commit: ratio(run.gc.reclaimed_slots, s.commits),
                spared_per_commit: ratio(run.gc.spared_slots, s.commits),
            }),
            // Epoch runs allocate on the engine's epoch threads, which the
            // counting allocator does not attribute to the run.
            allocations: (zen_pmem::alloc_count::installed() && run.epochs.is_none()).then(|| {
                AllocationSummary {
                    total: s.allocations,
                    per_commit: ratio(s.allocations, s.commits),
                }
            }),
            epochs: run.epochs.clone(),
        }
    }

    /// The human summary printed on stdout.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        self.render_header(&mut out);
        self.render_types(&mut out);
        self.render_nvm(&mut out);
        self.render_adaptive(&mut out);
        self.render_checkpoints(&mut out);
        self.render_epochs(&mut out);
        out
    }

    fn render_epochs(&self, out: &mut String) {
        let Some(e) = &self.epochs else { return };
        let _ = writeln!(
            out,
            "epochs            {} of {} one-shot txns · {} cc aborts · {} waits · {} failed · {} re-submitted (stale reconnaissance) · {} split (DRAM budget or input log)",
            group(e.epochs),
            group(e.epoch_size as u64),
            group(e.cc_aborts),
            group(e.waits),
            group(e.failed),
            group(e.resubmitted),
            group(e.budget_splits)
        );
        let _ = writeln!(
            out,
            "epoch phases      recon {:.0} us · log {:.0} us · init {:.0} us · exec {:.0} us · persist {:.0} us (mean per epoch); latency = first submission to durable result",
            e.recon_us, e.log_us, e.init_us, e.exec_us, e.persist_us
        );
        let _ = writeln!(
            out,
            "epoch memory      transient peak {} bytes (DRAM, freed per epoch) · {} rows persisted for {} versions · {} rows split per core",
            group(e.transient_bytes_peak),
            group(e.rows_persisted),
            group(e.versions),
            group(e.split_rows)
        );
        let looked = (e.cache_hits + e.cache_misses).max(1) as f64;
        let _ = writeln!(
            out,
            "epoch cache       {} hits · {} NVM reads of committed rows ({:.1} % hits) · {} not cached (bound) · {} evicted · peak {} entries, {} bytes · {:.0} NVM bytes read per commit",
            group(e.cache_hits),
            group(e.cache_misses),
            100.0 * e.cache_hits as f64 / looked,
            group(e.cache_refused),
            group(e.cache_evicted),
            group(e.cache_entries_peak),
            group(e.cache_bytes_peak),
            e.nvm_bytes_read_per_commit
        );
        let _ = writeln!(
            out,
            "epoch gc          {} stale versions deleted by the minor collector (at the final write) · {} by the major collector (init phase) · {} values allocated, {} freed (value pool) · {:.0} NVM bytes written per commit",
            group(e.gc_minor),
            group(e.gc_major),
            group(e.values_allocated),
            group(e.values_freed),
            e.nvm_bytes_written_per_commit
        );
        if e.log_cuts > 0 {
            let _ = writeln!(
                out,
                "epoch splits      {} cuts made because the input log could not hold the rest of a batch",
                group(e.log_cuts)
            );
        }
    }

    fn render_checkpoints(&self, out: &mut String) {
        let Some(c) = &self.checkpoints else { return };
        let failed = match c.failed_on_log_pressure {
            0 => String::new(),
            n => format!(" ({} failed)", group(n)),
        };
        let _ = writeln!(
            out,
            "checkpoints       seq {} → {} · {} taken in the measured interval because the log filled the pool{failed}",
            group(c.seq_at_start),
            group(c.seq),
            group(c.on_log_pressure),
        );
    }

    fn render_adaptive(&self, out: &mut String) {
        let Some(a) = &self.adaptive else { return };
        let _ = writeln!(
            out,
            "zen+ adaptive     {} exclusive stages (α {} · β {} · γ {}) · {:.1} ms exclusive · {} snapshots · nvm direct {} reads / {} writes · {} slots reclaimed by privileged",
            group(a.stage_switches),
            group(a.privileged_alpha),
            group(a.privileged_beta),
            group(a.privileged_gamma),
            a.exclusive_us as f64 / 1000.0,
            group(a.snapshot_txns),
            group(a.nvm_direct_reads),
            group(a.nvm_direct_writes),
            group(a.exclusive_reclaimed_slots)
        );
    }

    fn render_header(&self, out: &mut String) {
        let (c, s, l) = (&self.config, &self.summary, &self.summary.latency_us);
        let _ = writeln!(
            out,
            "== {} on {}/{} · pmem {} · {} durability ==",
            c.workload, c.engine, c.cc, c.pmem, c.durability
        );
        let _ = writeln!(
            out,
            "seed {} · {} threads · measured {:.2} s after {:.2} s warmup",
            c.seed, c.threads, s.measured_s, s.warmup_s
        );
        if let Some(dist) = c.workload_parameters.get("key_distribution").and_then(|v| v.as_str()) {
            let _ = writeln!(out, "key distribution  {dist}");
        }
        if let Some(note) = &c.nvm_model_note {
            let _ = writeln!(out, "nvm share         {note}");
        }
        let _ = writeln!(
            out,
            "throughput        {} txn/s  ({} commits)",
            group(s.throughput_tps as u64),
            group(s.commits)
        );
        let _ = writeln!(
            out,
            "aborts            {:.2} % of attempts · cc {} · user {}",
            s.abort_ratio * 100.0,
            group(s.cc_aborts),
            group(s.user_aborts)
        );
        let reasons: Vec<String> = self
            .aborts_by_reason
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| format!("{r} {}", group(*n)))
            .collect();
        if !reasons.is_empty() {
            let _ = writeln!(out, "aborts by reason  {}", reasons.join(" · "));
        }
        let _ = writeln!(
            out,
            "latency µs        p50 {:.1} · p90 {:.1} · p99 {:.1} · p99.9 {:.1} · max {:.1}",
            l.p50, l.p90, l.p99, l.p999, l.max
        );
    }

    fn render_types(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "{:<18} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10}",
            "per type", "commits", "txn/s", "cc aborts", "user ab.", "p50 µs", "p99 µs"
        );
        for (name, t) in
            self.per_txn_type.iter().filter(|(_, t)| t.commits + t.cc_aborts + t.user_aborts > 0)
        {
            let _ = writeln!(
                out,
                "  {:<16} {:>12} {:>12} {:>10} {:>10} {:>10.1} {:>10.1}",
                name,
                group(t.commits),
                group(t.throughput_tps as u64),
                group(t.cc_aborts),
                group(t.user_aborts),
                t.latency_us.p50,
                t.latency_us.p99
            );
        }
    }

    fn render_nvm(&self, out: &mut String) {
        let (n, p) = (&self.nvm, &self.nvm.per_commit);
        let _ = writeln!(
            out,
            "nvm               {} written ({:.3} GB/s), {} read · stall {:.3} s",
            bytes(n.bytes_written),
            n.write_gb_per_s,
            bytes(n.bytes_read),
            n.stall_ns as f64 / 1e9
        );
        let _ = writeln!(
            out,
            "nvm per commit    {:.0} B written · {:.0} B read · {:.2} flushes · {:.2} fences",
            p.bytes, p.bytes_read, p.flushes, p.fences
        );
        if n.media_bytes_written > 0 || n.stall_ns > 0 {
            let ms = |ns: u64| ns as f64 / 1e6;
            let _ = writeln!(
                out,
                "nvm device model  {} media written ({:.0} B per commit, {:.2}× the bytes written) · stall read {:.1} ms · write {:.1} ms · bandwidth wait {:.1} ms",
                bytes(n.media_bytes_written),
                p.media_bytes,
                n.media_bytes_written as f64 / n.bytes_written.max(1) as f64,
                ms(n.read_latency_ns),
                ms(n.write_latency_ns),
                ms(n.bandwidth_wait_ns)
            );
        }
        if let Some(g) = &self.gc {
            let _ = writeln!(
                out,
                "gc per commit     {:.2} slots reclaimed, {:.2} of them kept as spares ({} and {} in the measured interval)",
                g.reclaimed_per_commit,
                g.spared_per_commit,
                group(g.window.reclaimed_slots),
                group(g.window.spared_slots)
            );
        }
        let _ = writeln!(
            out,
            "cache             hit ratio {:.2} % ({} misses, {} evictions)",
            self.cache.hit_ratio * 100.0,
            group(self.cache.misses),
            group(self.cache.evictions)
        );
        if let Some(a) = &self.allocations {
            let _ = writeln!(
                out,
                "heap allocations  {:.2} per commit ({} in the measured interval, all workers)",
                a.per_commit,
                group(a.total)
            );
        }
        if let Some(r) = &self.recovery {
            let _ = writeln!(
                out,
                "recovery          {:.1} ms · {} tuples · {} threads",
                r.total_ms,
                group(r.tuples_recovered),
                r.threads
            );
        }
        if let Some(n) = &self.numa {
            render_numa(n, out);
        }
        let _ = writeln!(out, "durable across    {}", self.config.durable_across);
    }

    /// Write `<run>.summary.json`, `<run>.timeseries.csv` and `<run>.config.json`
    /// into `dir`; returns the paths written.
    pub fn write_files(&self, dir: &Path, timeseries: &[IntervalSample]) -> Result<Vec<PathBuf>> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let summary = dir.join(format!("{}.summary.json", self.run_id));
        let config = dir.join(format!("{}.config.json", self.run_id));
        let series = dir.join(format!("{}.timeseries.csv", self.run_id));
        let json = |path: &Path, value: String| {
            std::fs::write(path, value + "\n").map_err(|e| Error::io(path, e))
        };
        json(&summary, serde_json::to_string_pretty(self)?)?;
        json(&config, serde_json::to_string_pretty(&self.config)?)?;
        write_timeseries(&series, timeseries)?;
        Ok(vec![summary, series, config])
    }
}

/// Write the interval samples as CSV with a header row.
pub fn write_timeseries(path: &Path, samples: &[IntervalSample]) -> Result<()> {
    std::fs::write(path, timeseries_csv(samples)?).map_err(|e| Error::io(path, e))
}

/// The time series as CSV text: a header row, then one row per interval.
pub fn timeseries_csv(samples: &[IntervalSample]) -> Result<String> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for s in samples {
        writer.serialize(s)?;
    }
    let bytes = writer.into_inner().map_err(|e| Error::Metadata(format!("csv buffer: {e}")))?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if !samples.is_empty() {
        return Ok(text);
    }
    // No rows: still give a reader the columns, taken from an empty sample.
    let header = timeseries_csv(&[IntervalSample::default()])?;
    Ok(header.lines().next().unwrap_or_default().to_string() + "\n")
}

fn render_numa(n: &NumaSummary, out: &mut String) {
    let e = &n.run.engine;
    let mut per_node = vec![0usize; e.nodes];
    for &node in &e.worker_nodes {
        per_node[usize::from(node)] += 1;
    }
    let _ = writeln!(
        out,
        "numa              {} {} nodes · {} · {} binding · workers per node {:?} · remote penalty {} ns",
        e.nodes,
        if e.real_nodes { "real" } else { "virtual" },
        e.mode.name(),
        e.binding.name(),
        per_node,
        e.remote_penalty_ns
    );
    let m = &n.run.measured;
    let _ = writeln!(
        out,
        "numa accesses     remote {:.2} % (reads {:.2} %, writes {:.2} %) · {} remote reads · {} remote writes · penalty {:.3} s",
        n.remote_fraction * 100.0,
        n.remote_read_fraction * 100.0,
        n.remote_write_fraction * 100.0,
        group(m.remote_reads),
        group(m.remote_writes),
        m.penalty_ns as f64 / 1e9
    );
    let b = &e.memory_binding;
    if b.attempted {
        let _ = writeln!(
            out,
            "numa memory       cache regions bound to their nodes (mbind {}): {} chunks, {:.1} MiB · {} failures{}",
            b.policy.name(),
            group(b.chunks_bound),
            b.bound_bytes as f64 / (1 << 20) as f64,
            b.failures,
            b.first_error.as_ref().map_or(String::new(), |m| format!(" · warning: {m}"))
        );
    } else {
        let _ = writeln!(
            out,
            "numa memory       virtual nodes: nothing bound (heap pages per node {:?})",
            e.pages_per_node
        );
    }
    if let Some(r) = &n.run.route {
        let routed = (r.affinity + r.least_loaded + r.random).max(1) as f64;
        let _ = writeln!(
            out,
            "numa routing      affinity {:.1} % · least-loaded {:.1} % · random {:.1} % · forwarded {} · remaps {} (moved {})",
            r.affinity as f64 / routed * 100.0,
            r.least_loaded as f64 / routed * 100.0,
            r.random as f64 / routed * 100.0,
            group(r.forwarded),
            e.remap_rounds,
            group(e.partitions_moved)
        );
    }
}

fn nvm_summary(run: &RunResult) -> NvmSummary {
    let (n, commits) = (&run.nvm, run.stats.commits);
    let per = |v: u64| if commits == 0 { 0.0 } else { v as f64 / commits as f64 };
    let us = |ns: u64| per(ns) / 1e3;
    let worker_us =
        if commits == 0 { 0.0 } else { run.threads as f64 * run.measured_s * 1e6 / commits as f64 };
    NvmSummary {
        bytes_written: n.bytes_written,
        bytes_read: n.bytes_read,
        flushes: n.lines_flushed,
        fences: n.fences,
        blocks_written: n.blocks_written,
        stall_ns: n.stall_ns,
        media_bytes_written: n.media_bytes_written,
        read_latency_ns: n.read_latency_ns,
        write_latency_ns: n.write_latency_ns,
        bandwidth_wait_ns: n.bandwidth_wait_ns,
        write_gb_per_s: n.bytes_written as f64 / run.measured_s / 1e9,
        per_commit: PerCommit {
            bytes: per(n.bytes_written),
            media_bytes: per(n.media_bytes_written),
            bytes_read: per(n.bytes_read),
            flushes: per(n.lines_flushed),
            fences: per(n.fences),
            read_latency_us: us(n.read_latency_ns),
            write_latency_us: us(n.write_latency_ns),
            bandwidth_wait_us: us(n.bandwidth_wait_ns),
            unstalled_us: (worker_us - us(n.stall_ns)).max(0.0),
        },
    }
}

fn cache_summary(run: &RunResult) -> CacheSummary {
    let c = run.cache();
    CacheSummary {
        hits: c.hits,
        misses: c.misses,
        evictions: c.evictions,
        hit_ratio: c.hit_ratio(),
    }
}

/// `<workload>-<engine>-<cc>-t<threads>-<UTC time>`, e.g. `ycsb-zen-silo-t2-20250101T120000Z`.
fn run_id(c: &ReportConfig) -> String {
    format!("{}-{}-{}-t{}-{}", c.workload, c.engine, c.cc, c.threads, utc_timestamp())
}

fn utc_timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// 1234567 → "1,234,567".
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units: "1.50 MiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{n} B") } else { format!("{value:.2} {}", UNITS[unit]) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::stats::WorkerStats;
    use zen_pmem::CounterSnapshot;

    fn sample_run() -> RunResult {
        let mut stats = WorkerStats::new(2);
        for i in 0..100 {
            stats.on_commit(i % 2, 1000 + i as u64 * 10);
        }
        stats.on_cc_abort(0, AbortReason::ReadValidation);
        stats.on_user_abort(1);
        RunResult {
            seed: 7,
            threads: 2,
            txn_types: vec!["alpha", "beta"],
            warmup_s: 1.0,
            measured_s: 2.0,
            stats,
            nvm: CounterSnapshot {
                bytes_written: 10_000,
                lines_flushed: 200,
                fences: 100,
                ..Default::default()
            },
            adaptive: None,
            checkpoints: None,
            gc: crate::driver::GcWindow { reclaimed_slots: 150, spared_slots: 50 },
            timeseries: vec![IntervalSample {
                elapsed_s: 1.0,
                phase: "measure",
                commits: 50,
                ..Default::default()
            }],
            numa: None,
            epochs: None,
        }
    }

    fn config() -> ReportConfig {
        let driver = DriverConfig { seed: 7, ..DriverConfig::default() };
        ReportConfig::new("bench", &EngineConfig::default(), &driver, "demo", serde_json::json!({}))
    }

    #[test]
    fn summary_figures_are_derived_from_the_counts() {
        let report = Report::new(config(), &sample_run(), None);
        let s = &report.summary;
        assert_eq!((s.commits, s.cc_aborts, s.user_aborts, s.attempts), (100, 1, 1, 102));
        assert!((s.throughput_tps - 50.0).abs() < 1e-9);
        assert!((s.abort_ratio - 2.0 / 102.0).abs() < 1e-12);
        assert!((report.nvm.per_commit.bytes - 100.0).abs() < 1e-9);
        assert!((report.nvm.per_commit.fences - 1.0).abs() < 1e-9);
        assert_eq!(report.aborts_by_reason["read_validation"], 1);
        assert_eq!(report.aborts_by_reason["user"], 1);
        assert_eq!(report.per_txn_type["beta"].user_aborts, 1);
        assert!(s.latency_us.p50 >= 1.0 && s.latency_us.max <= 2.0);
        let gc = report.gc.as_ref().expect("slots were reclaimed");
        assert!((gc.reclaimed_per_commit - 1.5).abs() < 1e-9, "{gc:?}");
        assert!((gc.spared_per_commit - 0.5).abs() < 1e-9, "{gc:?}");
        assert!(report.render_text().contains(
            "gc per commit     1.50 slots reclaimed, 0.50 of them kept as spares (150 and 50 in the measured interval)"
        ));
        let mut none = sample_run();
        none.gc = crate::driver::GcWindow::default();
        let report = Report::new(config(), &none, None);
        assert!(report.gc.is_none() && !report.render_text().contains("gc per commit"));
    }

    #[test]
    fn the_modelled_stall_is_split_per_commit_and_taken_out_of_the_worker_time() {
        let mut run = sample_run();
        run.nvm.stall_ns = 1_000_000;
        run.nvm.read_latency_ns = 200_000;
        run.nvm.write_latency_ns = 100_000;
        run.nvm.bandwidth_wait_ns = 700_000;
        let p = Report::new(config(), &run, None).nvm.per_commit;
        // 100 commits: 2, 1 and 7 µs of stall each.
        assert!((p.read_latency_us - 2.0).abs() < 1e-9, "{p:?}");
        assert!((p.write_latency_us - 1.0).abs() < 1e-9, "{p:?}");
        assert!((p.bandwidth_wait_us - 7.0).abs() < 1e-9, "{p:?}");
        // 2 threads × 2 s over 100 commits is 40 000 µs of worker time per
        // commit, 10 µs of it the modelled stall.
        assert!((p.unstalled_us - 39_990.0).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn the_summary_json_validates_against_the_documented_schema() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../../docs/summary.schema.json")).unwrap();
        let report = Report::new(config(), &sample_run(), Some(RecoveryReport::default()));
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(crate::jsonschema::validate(&json, &schema), Vec::<String>::new());
        let mut broken = json.clone();
        broken["summary"].as_object_mut().unwrap().remove("commits");
        assert!(!crate::jsonschema::validate(&broken, &schema).is_empty());
    }

    #[test]
    fn files_are_written_with_the_run_id() {
        let dir = tempfile::tempdir().unwrap();
        let run = sample_run();
        let report = Report::new(config(), &run, None);
        let paths = report.write_files(dir.path(), &run.timeseries).unwrap();
        assert_eq!(paths.len(), 3);
        let csv = std::fs::read_to_string(&paths[1]).unwrap();
        assert!(csv.starts_with("elapsed_s,phase,"));
        assert_eq!(csv.lines().count(), 2);
        let text = report.render_text();
        assert!(text.contains("throughput") && text.contains("seed 7"));
    }

    #[test]
    fn an_empty_time_series_still_has_its_header() {
        let csv = timeseries_csv(&[]).unwrap();
        assert_eq!(csv.lines().count(), 1);
        assert!(csv.starts_with("elapsed_s,phase,interval_s,commits,"));
    }

    #[test]
    fn dates_and_numbers_are_formatted() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(group(12), "12");
        assert_eq!(bytes(1536), "1.50 KiB");
    }
}
