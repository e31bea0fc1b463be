//! The `zen` command line: clap definitions only.
//!
//! Flags are parsed into plain values here (strings for names the engine
//! owns, so the error can list what `EngineKind::ALL` and friends allow);
//! `resolve.rs` turns them into the engine, driver and workload configs and
//! refuses invalid combinations. Defaults are chosen so that
//! `zen bench ycsb` finishes in well under a minute on two cores.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "zen",
    version,
    about = "zenplus: Zen/Zen+ OLTP engines for persistent memory, and a benchmark testbed",
    long_about = "zenplus: Zen/Zen+ OLTP engines for persistent memory, and a benchmark testbed.\n\n\
        Exit codes: 0 ok, 2 usage, 3 check failed, 4 recovery failed, 5 crash-test violation, 1 other errors."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a temporary pool, load, warm up, run, report, remove the pool.
    Bench(BenchArgs),
    /// Create a pool and load a workload's initial population into it.
    Load(LoadArgs),
    /// Run a workload against an existing, loaded pool.
    Run(RunArgs),
    /// Open a pool (which recovers it) and print the recovery phases.
    Recover(PoolArgs),
    /// Check the workload's consistency conditions and the engine's invariants.
    Check(CheckArgs),
    /// Print a pool's header, features and page ownership (read-only).
    Inspect(InspectArgs),
    /// List the engines, concurrency-control protocols or workloads.
    List(ListArgs),
    /// Run a workload on the crash simulator, crash it before fences, recover
    /// every crash image and check the post-crash oracle (exit 5 on a violation).
    CrashTest(CrashTestArgs),
    /// Run paper figures (figures/*.toml) and compare with the paper: results, SVGs, report.md.
    Reproduce(ReproduceArgs),
    /// Draw a figure from `zen reproduce` results files into an SVG.
    Plot(PlotArgs),
    /// Write a markdown document (e.g. docs/results.md) from `zen reproduce` result directories.
    Report(ReportArgs),
    /// Measure NVM read latency, persist latency and bandwidth through the
    /// persist primitives, beside the device model's targets (Intel MLC-like).
    Probe(crate::commands::probe::ProbeArgs),
}

/// The benchmark workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadKind {
    Ycsb,
    Tpcc,
    Smallbank,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Ycsb => "ycsb",
            WorkloadKind::Tpcc => "tpcc",
            WorkloadKind::Smallbank => "smallbank",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Csv,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListWhat {
    Engines,
    Cc,
    Workloads,
}

/// How the engine and its pool are configured.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Engine design (see `zen list engines`).
    #[arg(long, default_value = "zen")]
    pub engine: String,
    /// Concurrency-control protocol (see `zen list cc`).
    #[arg(long, default_value = "silo")]
    pub cc: String,
    /// Persistent-memory backend: dax (fsdax + MAP_SYNC), fs (a file), emu (fs + NVM latency model), dram (volatile).
    #[arg(long, default_value = "fs")]
    pub pmem: String,
    /// Device model of `--pmem emu`: dram, optane or cxl (default optane); see --nvm-* to override its parameters.
    #[arg(long)]
    pub nvm_profile: Option<String>,
    #[command(flatten)]
    pub nvm: crate::nvm_args::NvmArgs,
    /// Persistence domain the engine assumes: adr (flush + fence) or eadr (caches persistent).
    #[arg(long, default_value = "adr")]
    pub persistence_domain: String,
    /// Pool size when creating, e.g. 4GiB (default: 4 × the estimated data size, at least 1 GiB).
    #[arg(long)]
    pub pool_size: Option<String>,
    /// Split the pool into one member file per NUMA node (fs, emu, dax): `--pool P` names them P.node0, P.node1, ..., or replaces `{node}` in P (e.g. /mnt/pmem{node}/zen.pool, one fsdax mount per node). A node's heap pages come from its file.
    #[arg(long)]
    pub pool_per_node: bool,
    /// DRAM budget of the Met-Cache, e.g. 256MiB (default 256MiB).
    #[arg(long, conflicts_with = "dram_ratio")]
    pub cache_size: Option<String>,
    /// DRAM budget as data size / P (the paper's 4, 8, 16).
    #[arg(long)]
    pub dram_ratio: Option<f64>,
    /// Commit durability: lazy (the paper's one fence per transaction; benchmarks' default) or immediate.
    #[arg(long, default_value = "lazy")]
    pub durability: String,
    #[command(flatten)]
    pub numa: crate::numa_args::NumaArgs,
    /// Zen+ MVCC-based adaptive execution (read-only snapshots, detecting and exclusive stages): on (default) or off. Acts with --cc mvcc or hekaton.
    #[arg(long, default_value = "on")]
    pub adaptive: String,
    /// Zen+ α: a read-write transaction using more than this share of its worker's Met-Cache region becomes privileged (default 0.95).
    #[arg(long)]
    pub alpha: Option<f64>,
    /// Zen+ β: when free NVM falls below this share of the pool, the largest running transaction becomes privileged (default 0.05).
    #[arg(long)]
    pub beta: Option<f64>,
    /// Zen+ γ: a transaction whose retries wasted more tuple accesses than this becomes privileged (default 16000000).
    #[arg(long)]
    pub gamma: Option<u64>,
    /// falcon: design variant (Falcon's ablations): falcon (default), no-flush, all-flush, small-log-window, hot-tracking, inp, inp-no-flush. no-flush, hot-tracking and inp-no-flush need --persistence-domain eadr.
    #[arg(long)]
    pub falcon_variant: Option<String>,
    /// falcon: bytes of each worker's small log window, e.g. 64KiB (default; at most a pool page).
    #[arg(long)]
    pub falcon_window: Option<String>,
    /// falcon: tuples in each worker's hot-tuple LRU (default 256; 0 = none hot).
    #[arg(long)]
    pub falcon_hot_tuples: Option<usize>,
    /// nvcaracal: batch append in the init phase, on (default) or off: each
    /// thread appends its pending versions to a row in one locked merge
    /// instead of one locked sorted insert per version.
    #[arg(long)]
    pub nvcaracal_batch_append: Option<String>,
    /// nvcaracal: split-on-demand, on (default) or off: a row with many
    /// pending versions in an epoch gets one version array per thread.
    #[arg(long)]
    pub nvcaracal_split_on_demand: Option<String>,
    /// nvcaracal: DRAM budget of one epoch's transient versions, e.g. 256MiB
    /// (default 1GiB); a larger epoch runs as several smaller ones.
    #[arg(long)]
    pub nvcaracal_dram_budget: Option<String>,
    /// nvcaracal: cached versions, on (default) or off: a DRAM copy of the
    /// committed rows recent epochs read or updated, within --cache-size
    /// (or --dram-ratio); off, every read of a committed row goes to NVM.
    #[arg(long)]
    pub nvcaracal_cached_versions: Option<String>,
    /// nvcaracal: evict cached versions not read or updated in the last K
    /// epochs (default 20).
    #[arg(long)]
    pub nvcaracal_cache_epochs: Option<u64>,
    /// nvcaracal: the minor garbage collector, on (default) or off: a final
    /// write that finds two versions in its row's slot overwrites the stale
    /// one; off, the major collector deletes the stale versions of the last
    /// epoch's rows in the next epoch's init phase instead.
    #[arg(long)]
    pub nvcaracal_minor_gc: Option<String>,
    /// nvcaracal: bytes of a persistent row (a multiple of 64, default
    /// 256, the paper's): rows that fit a version's inline heap
    /// ((R - 16) / 2 - 16 bytes: 104 at 256) stay inline, larger ones go
    /// to the table's persistent value pool and always use the major
    /// collector; 0: inline-only (every version in its slot, sized to the
    /// row). Used when the pool is created.
    #[arg(long)]
    pub nvcaracal_row_bytes: Option<u64>,
}

/// How the driver runs and reports.
#[derive(Debug, Clone, Args)]
pub struct DriverArgs {
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Measured run time, e.g. 10s, 500ms, 2m (ignored with --txns).
    #[arg(long, default_value = "5s")]
    pub duration: String,
    /// Warmup before measurement, excluded from every figure.
    #[arg(long, default_value = "1s")]
    pub warmup: String,
    /// Run this many measured transactions instead of a duration.
    #[arg(long)]
    pub txns: Option<u64>,
    /// Seed of every random choice (random when absent; always printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Progress interval, e.g. 1s.
    #[arg(long, default_value = "1s")]
    pub interval: String,
    /// Summary format on stdout: text, json (the summary JSON) or csv (the time series).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write RUN.summary.json, RUN.timeseries.csv and RUN.config.json into DIR (RUN: the run's id).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Parameters of the workloads; each applies to one workload only.
#[derive(Debug, Clone, Default, Args)]
pub struct WorkloadArgs {
    /// YCSB: rows loaded (default 100000).
    #[arg(long)]
    pub records: Option<u64>,
    /// YCSB paper mode: RO, RH, BA or WH (100/90/50/10 % reads; default RH).
    #[arg(long)]
    pub mix: Option<String>,
    /// YCSB: Zipf skew θ (default 0.6 in paper mode, 0.99 for core workloads).
    #[arg(long, allow_negative_numbers = true)]
    pub theta: Option<f64>,
    /// YCSB core workload a..f instead of paper mode.
    #[arg(short = 'w', long = "core")]
    pub core: Option<String>,
    /// YCSB: use YCSB's FNV-scrambled Zipfian.
    #[arg(long)]
    pub scramble: bool,
    /// YCSB: requests per transaction (default 16 in paper mode, 1 for core workloads).
    #[arg(long)]
    pub requests: Option<usize>,
    /// YCSB: worker 0 also runs long transactions: scan (read-only, from key 0) or update (the last --long-txn-tuples keys, disjoint from the others' keys). Zen+ Fig. 24-26.
    #[arg(long)]
    pub long_txn: Option<String>,
    /// YCSB: tuples a long transaction scans or updates (default records / 10).
    #[arg(long)]
    pub long_txn_tuples: Option<u64>,
    /// YCSB: normal transactions worker 0 runs between two long ones (default 1000).
    #[arg(long)]
    pub long_txn_every: Option<u64>,
    /// TPC-C: warehouses (default: one per thread).
    #[arg(long)]
    pub warehouses: Option<u64>,
    /// TPC-C scaled-down mode: items (default 100000).
    #[arg(long)]
    pub items: Option<u64>,
    /// TPC-C scaled-down mode: customers per district (default 3000).
    #[arg(long)]
    pub customers: Option<u64>,
    /// TPC-C scaled-down mode: initial orders per district (default 3000).
    #[arg(long)]
    pub orders: Option<u64>,
    /// SmallBank: customers (default 100000).
    #[arg(long)]
    pub accounts: Option<u64>,
    /// SmallBank: hotspot size (default 100).
    #[arg(long)]
    pub hotspot_accounts: Option<u64>,
    /// SmallBank: probability of picking a hotspot account (default 0.9).
    #[arg(long)]
    pub hotspot_probability: Option<f64>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// ycsb, tpcc or smallbank.
    #[arg(value_enum)]
    pub workload: WorkloadKind,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub driver: DriverArgs,
    #[command(flatten)]
    pub params: WorkloadArgs,
    /// A deterministic engine (nvcaracal): one-shot transactions per epoch
    /// (default 1000; tpcc finds the keys its requests do not name by
    /// reconnaissance reads before each epoch). Latency is measured from a
    /// transaction's first submission to its durable result.
    #[arg(long)]
    pub epoch_size: Option<usize>,
    /// Directory for the temporary pool (default: /dev/shm, else $TMPDIR),
    /// e.g. an fsdax mount, or a tmpfs mounted with huge=always so that the
    /// pool sits on 2 MiB pages as a 2 MiB-aligned DAX mapping does.
    #[arg(long, value_name = "DIR")]
    pub pool_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// ycsb, tpcc or smallbank.
    #[arg(value_enum)]
    pub workload: WorkloadKind,
    /// The pool file to create.
    #[arg(long)]
    pub pool: PathBuf,
    /// Loader threads.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Seed of TPC-C's population (random when absent; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub params: WorkloadArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The workload to expect in the pool (default: whatever was loaded).
    #[arg(value_enum)]
    pub workload: Option<WorkloadKind>,
    /// A pool created by `zen load`.
    #[arg(long)]
    pub pool: PathBuf,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub driver: DriverArgs,
    #[command(flatten)]
    pub params: WorkloadArgs,
    /// Process-kill testing: record each worker's intent/ack words in FILE (an
    /// mmapped file outside the pool; created if missing) and a receipt row per
    /// writing transaction. Forces --durability immediate. Verify with
    /// `zen check --pool P --expected-state FILE`.
    #[arg(long, value_name = "FILE")]
    pub expected_state: Option<PathBuf>,
    /// End as a power failure would: skip the engine's clean shutdown (no
    /// final sync, no clean-shutdown flag), so that the next open of the pool
    /// runs crash recovery. For recovery-time measurements (`zen recover`).
    #[arg(long)]
    pub crash_at_end: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub pool: PoolArgs,
    /// Also verify the intent/ack words `zen run --expected-state FILE` wrote:
    /// every acknowledged transaction present, none beyond a worker's intent.
    #[arg(long, value_name = "FILE")]
    pub expected_state: Option<PathBuf>,
}

/// The workloads of `zen crash-test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CrashWorkloadKind {
    Bank,
    ListAppend,
    Ycsb,
    Smallbank,
    Tpcc,
}

#[derive(Debug, Args)]
pub struct CrashTestArgs {
    /// bank, list-append, ycsb, smallbank or tpcc (small fixed populations; see docs/testing.md).
    #[arg(value_enum)]
    pub workload: CrashWorkloadKind,
    /// Engine design: zen, mmdb, wbl, falcon or nvcaracal (ideal persists nothing and is refused).
    #[arg(long, default_value = "zen")]
    pub engine: String,
    /// Concurrency-control protocol of zen (see `zen list cc`; mmdb and wbl run their own OCC).
    #[arg(long, default_value = "silo")]
    pub cc: String,
    /// Crash images: strict (Px86 under ADR), paranoid (any subset of pending stores) or eadr.
    #[arg(long, default_value = "strict")]
    pub mode: String,
    /// Durability of the recorded run's commits: immediate or lazy (durable at the worker's next fence).
    #[arg(long, default_value = "immediate")]
    pub durability: String,
    /// Most crash points checked (sampled when the trace has more).
    #[arg(long, default_value_t = 200)]
    pub crash_points: u64,
    /// Most images per crash point (exhaustive when a point has no more).
    #[arg(long, default_value_t = 16)]
    pub images_per_point: u64,
    /// Levels of crashes during recovery (0 = none).
    #[arg(long, default_value_t = 1)]
    pub nested_depth: u32,
    /// Seed of the requests, image choice and nested crashes (random when absent; printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Workers of the recorded run (1..=4; with one, a seed replays the same requests).
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Threads of every recovery of the campaign, nested ones included (1..=8).
    #[arg(long, default_value_t = 1)]
    pub recovery_threads: usize,
    /// Requests per worker in the recorded run (with --epochs: per epoch).
    #[arg(long, default_value_t = 8)]
    pub txns: u64,
    /// Epoch mode: record K epochs of --txns one-shot transactions each,
    /// submitted to the engine's deterministic seam on --threads epoch
    /// threads (nvcaracal; ycsb, smallbank and tpcc; 1..=64).
    #[arg(long, value_name = "K")]
    pub epochs: Option<u64>,
    /// Output: text or json.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the failing crash image into DIR (a pool file `zen recover` opens).
    #[arg(long, value_name = "DIR")]
    pub save_failing: Option<PathBuf>,
    /// nvcaracal: the minor garbage collector, on (the engine's default) or
    /// off (the major collector deletes stale versions in the next epoch's
    /// init phase instead, so crash points cut through that GC).
    #[arg(long, value_name = "on|off")]
    pub nvcaracal_minor_gc: Option<String>,
    /// nvcaracal: bytes of a persistent row: 0 (inline-only, no value pool)
    /// or a multiple of 64 in 64..=4096 (default 256; rows larger than a
    /// version's inline heap go to the table's value pool).
    #[arg(long, value_name = "R")]
    pub nvcaracal_row_bytes: Option<u64>,
    /// Test-only: switch on one injected bug (a zen_engine::Fault such as no-fence-before-lp, or a BaselineFault).
    #[arg(long, hide = true, value_name = "NAME")]
    pub inject_fault: Option<String>,
}

#[derive(Debug, Args)]
pub struct PoolArgs {
    /// The pool file.
    #[arg(long)]
    pub pool: PathBuf,
    /// Backend the pool lives on: fs, emu or dax.
    #[arg(long, default_value = "fs")]
    pub pmem: String,
    /// The pool is split into per-node member files named after --pool (P.node0, ... or `{node}` replaced); their count is read from the first.
    #[arg(long)]
    pub pool_per_node: bool,
    /// Engine design of the pool.
    #[arg(long, default_value = "zen")]
    pub engine: String,
    /// Concurrency-control protocol to open it with.
    #[arg(long, default_value = "silo")]
    pub cc: String,
    /// Threads of the recovery that opening runs (default: one per CPU).
    #[arg(long)]
    pub recovery_threads: Option<usize>,
    /// Output: text or json.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The pool file (opened with the fs backend; only the clean-shutdown flag is touched).
    #[arg(long)]
    pub pool: PathBuf,
    /// The pool is split into per-node member files named after --pool (P.node0, ... or `{node}` replaced).
    #[arg(long)]
    pub pool_per_node: bool,
    /// Output: text or json.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// engines, cc or workloads.
    #[arg(value_enum)]
    pub what: ListWhat,
}

#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// A figure id (see --list), several separated by commas, `all` (every paper figure) or `studies` (every study).
    pub figure: Option<String>,
    /// List every figure, its engines and whether it can run here.
    #[arg(long)]
    pub list: bool,
    /// Scale preset: tiny (seconds, for tests), small (this machine, minutes) or paper.
    #[arg(long, default_value = "small")]
    pub scale: String,
    /// Result directory: DIR/FIGURE/results.json, runs/, FIGURE.svg (FIGURE: each figure's id), and DIR/report.md.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue (or add figures to) a result directory of the same scale; finished runs are kept.
    #[arg(long)]
    pub resume: bool,
    /// Directory of the figure files (default: ./figures, else the source tree's).
    #[arg(long, value_name = "DIR")]
    pub figures: Option<PathBuf>,
    /// Seed of repetition r is SEED + r, the same for every run of that repetition.
    #[arg(long, default_value_t = 20261126)]
    pub seed: u64,
    /// A run while other processes used more CPU than this (in cores) is contended.
    #[arg(long, default_value_t = 0.15)]
    pub max_other_load: f64,
    /// Extra tries of a contended run (it is kept, flagged, after the last).
    #[arg(long, default_value_t = 2)]
    pub retries: u32,
    /// With --resume: make again the runs the directory records as contended (kept otherwise).
    #[arg(long, requires = "resume")]
    pub redo_contended: bool,
    /// Hold an exclusive lock on FILE around every run (repeat for several, taken in order).
    #[arg(long, value_name = "FILE")]
    pub lock: Vec<PathBuf>,
    /// Kill a run after this many seconds.
    #[arg(long, default_value_t = 900)]
    pub run_timeout: u64,
    /// Run nothing, write nothing: print per figure the runs it needs, how many it shares with
    /// figures listed before it (a run of the same arguments is made once), the seconds each
    /// measures and an estimated wall time (per-run overhead from the wall_s of earlier results
    /// of the scale: --out DIR's and docs/reproduction/'s); then the distinct total.
    #[arg(long, conflicts_with = "list")]
    pub plan: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result directories of `zen reproduce` (each holds reproduce.json), in the order shown.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The markdown file to write (replaced).
    #[arg(long, value_name = "FILE.md")]
    pub out: PathBuf,
    /// The document's title.
    #[arg(long, default_value = "Benchmark results")]
    pub title: String,
    /// Directory of the figure files, for figures that did not run (default: ./figures, else the source tree's).
    #[arg(long, value_name = "DIR")]
    pub figures: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// results.json files of one figure (written by `zen reproduce`).
    #[arg(required = true)]
    pub results: Vec<PathBuf>,
    /// The SVG file to write.
    #[arg(long, value_name = "FILE.svg")]
    pub out: PathBuf,
    /// Draw with this figure file (its current text, e.g. figures/ID.toml)
    /// instead of the definition recorded in the results; it must be the
    /// results' figure. For a change of how a figure is drawn (labels,
    /// `y.beside`) without running it again.
    #[arg(long, value_name = "FILE.toml")]
    pub figure: Option<PathBuf>,
}
