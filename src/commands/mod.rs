//! One module per `zen` subcommand; helpers they share live here.

pub mod bench;
pub mod crash_test;
pub mod expected;
pub mod inspect;
pub mod list;
pub mod plot;
pub mod pool;
pub mod probe;
pub mod reproduce;

use std::path::Path;
use std::time::Instant;

use zen_engine::{Engine, EngineConfig, RecoveryReport};
use zen_workload::{DriverConfig, Report, ReportConfig, RunResult, Workload, run_benchmark};

use crate::cli::Format;
use crate::error::{CliError, CliResult};
use crate::output::{self, Progress};
use crate::with_workload;
use crate::workloads::AnyWorkload;

/// Load the workload's population, reporting the time on stderr.
pub fn load(engine: &dyn Engine, workload: &AnyWorkload, threads: usize) -> CliResult {
    let started = Instant::now();
    eprintln!("loading {} with {threads} threads …", workload.name());
    with_workload!(workload, |w| w.load(engine, threads))?;
    let rows: u64 = engine.status().tables.iter().map(|t| t.rows).sum();
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "loaded {rows} rows in {seconds:.2} s ({:.0} rows/s)",
        rows as f64 / seconds.max(1e-9)
    );
    Ok(())
}

/// What `run_and_report` needs besides the engine and workload.
pub struct RunRequest<'a> {
    pub command: &'a str,
    pub engine_config: &'a EngineConfig,
    pub driver: &'a DriverConfig,
    pub format: Format,
    pub out: Option<&'a Path>,
    pub recovery: Option<RecoveryReport>,
}

/// Drive the workload, then print and write the report.
pub fn run_and_report(engine: &dyn Engine, workload: &AnyWorkload, r: RunRequest<'_>) -> CliResult {
    let progress = Progress::new(r.driver);
    let result = with_workload!(workload, |w| {
        run_benchmark(engine, w, r.driver, &mut |sample| progress.update(sample))
    });
    progress.finish();
    report_run(engine, &result?, workload, r)
}

/// Print and write the report of a finished run on `engine`.
pub fn report_run(
    engine: &dyn Engine,
    run: &RunResult,
    workload: &AnyWorkload,
    r: RunRequest<'_>,
) -> CliResult {
    let mut config = ReportConfig::new(
        r.command,
        r.engine_config,
        r.driver,
        workload.name(),
        workload.parameters(),
    );
    // The protocol the engine runs, not the flag: an engine without a
    // protocol choice names its own (nvcaracal: `deterministic`).
    config.cc = engine.cc_name().to_string();
    let report = Report::new(config, run, r.recovery);
    output::emit(&report, &run.timeseries, r.format, r.out)
}

/// Open an existing pool; a failure to open is a recovery failure (exit 4).
pub fn open_existing(config: &EngineConfig) -> CliResult<Box<dyn Engine>> {
    zen_engine::open(config).map_err(|e| match e {
        zen_engine::Error::InvalidConfig(_) => CliError::from(e),
        other => CliError::Recovery(other.to_string()),
    })
}

/// Close cleanly, reporting (not hiding) a failure to.
pub fn close(engine: Box<dyn Engine>) -> CliResult {
    engine.close().map_err(|e| CliError::Failed(format!("closing the engine: {e}")))
}

/// Close after `error` stopped the command: `error` is what the user must
/// act on (e.g. an unfinished load), so it keeps its exit code, and a
/// failure to close (a full pool can fail to) is added to its message.
pub fn close_after(engine: Box<dyn Engine>, error: CliError) -> CliError {
    match close(engine) {
        Ok(()) => error,
        Err(closing) => error.with_note(&format!("also {closing}")),
    }
}
