//! `zen bench <workload>`: a self-contained benchmark on a temporary pool.
//!
//! The pool lives in `/dev/shm` when it exists (so a `fs` pool is backed by
//! memory, as close to NVM as an ordinary machine gets) and in the system
//! temporary directory otherwise; it is removed when the command ends,
//! whether it succeeded or not.

use std::path::PathBuf;

use crate::cli::BenchArgs;
use crate::commands::{self, RunRequest};
use crate::error::{CliError, CliResult};
use crate::output;
use crate::resolve::{self, EngineRequest};
use crate::workloads;

fn temp_base() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() { shm } else { std::env::temp_dir() }
}

pub fn bench(args: &BenchArgs) -> CliResult {
    let driver = resolve::driver_config(&args.driver)?;
    let workload = workloads::from_flags(args.workload, &args.params, driver.threads, driver.seed)?;
    let pmem = resolve::backend(&args.engine.pmem)?;
    let dir = if pmem == zen_pmem::BackendKind::Dram {
        None
    } else {
        let base = temp_base();
        let dir = tempfile::Builder::new().prefix("zen-bench-").tempdir_in(&base).map_err(|e| {
            CliError::Failed(format!(
                "{}: cannot create a temporary pool directory: {e}",
                base.display()
            ))
        })?;
        Some(dir)
    };
    let request = EngineRequest {
        pool: dir.as_ref().map(|d| d.path().join("bench.pool")),
        create: true,
        threads: driver.threads,
        data_bytes: workload.estimated_data_bytes(),
    };
    let mut engine_config = resolve::engine_config(&args.engine, request)?;
    let epochs = epoch_mode(args, &engine_config, &workload)?;
    if epochs.is_some() {
        let mut set = zen_engine::ProcedureSet::new();
        zen_workload::oneshot::register_ycsb(&mut set)?;
        engine_config.procedures = zen_engine::Procedures::new(set);
    }
    if let Some(needed) = workload.access_set_needed() {
        engine_config.max_access_set = engine_config.max_access_set.max(needed);
    }
    output::banner("bench", &engine_config, Some(&driver), &workload.parameters());
    let engine = zen_engine::open(&engine_config)?;
    if let Err(e) = commands::load(engine.as_ref(), &workload, driver.threads) {
        // The load error is the one to report; the pool is thrown away anyway.
        let _ = commands::close(engine);
        return Err(e);
    }
    if let (Some(size), workloads::AnyWorkload::Ycsb(ycsb)) = (epochs, &workload) {
        let result = run_epochs(engine.as_ref(), ycsb, size, &driver, args.driver.format);
        let closed = commands::close(engine);
        return result.and(closed);
    }
    let request = RunRequest {
        command: "bench",
        engine_config: &engine_config,
        driver: &driver,
        format: args.driver.format,
        out: args.driver.out.as_deref(),
        recovery: None,
    };
    let result = commands::run_and_report(engine.as_ref(), &workload, request);
    let closed = commands::close(engine);
    // `dir` is dropped here, removing the pool.
    result.and(closed)
}

/// The epoch size when this run is a batch run: `--engine nvcaracal` with
/// ycsb (default 1000 transactions per epoch); `--epoch-size` elsewhere is
/// a usage error naming what it needs.
fn epoch_mode(
    args: &BenchArgs,
    config: &zen_engine::EngineConfig,
    workload: &workloads::AnyWorkload,
) -> CliResult<Option<usize>> {
    let nvcaracal = config.engine == zen_engine::EngineKind::Nvcaracal;
    let ycsb = matches!(workload, workloads::AnyWorkload::Ycsb(_));
    match (args.epoch_size, nvcaracal && ycsb) {
        (Some(0), _) => Err(CliError::usage("--epoch-size must be at least 1")),
        (Some(_), false) => Err(CliError::usage(
            "--epoch-size runs one-shot YCSB on --engine nvcaracal (bench ycsb --engine nvcaracal)",
        )),
        (size, true) => Ok(Some(size.unwrap_or(1000))),
        (None, false) => Ok(None),
    }
}

/// The batch run: epochs of one-shot YCSB; prints the summary.
fn run_epochs(
    engine: &dyn zen_engine::Engine,
    ycsb: &zen_workload::Ycsb,
    size: usize,
    driver: &zen_workload::DriverConfig,
    format: crate::cli::Format,
) -> CliResult {
    let duration = match driver.stop {
        zen_workload::Stop::Duration(d) => d,
        zen_workload::Stop::Transactions(_) => {
            return Err(CliError::usage("epoch mode runs for --duration, not --txns"));
        }
    };
    eprintln!("epoch mode: {size} one-shot transactions per epoch on {} threads", driver.threads);
    let run = zen_workload::oneshot::run_epochs(
        engine,
        ycsb,
        size,
        driver.threads,
        driver.warmup,
        duration,
        driver.seed,
    )?;
    match format {
        crate::cli::Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&run)
                .map_err(|e| CliError::Failed(format!("json: {e}")))?
        ),
        _ => {
            println!(
                "engine nvcaracal (epochs of {size}), ycsb one-shot, {} threads",
                driver.threads
            );
            println!(
                "throughput   {:.0} txn/s ({} committed, {} failed, {} cc aborts, {} waits) in {:.2} s",
                run.txns_per_s, run.committed, run.failed, run.cc_aborts, run.waits, run.seconds
            );
            println!(
                "latency      p50 {:.0} us, p99 {:.0} us (submission to durable result)",
                run.latency_p50_us, run.latency_p99_us
            );
            println!(
                "epoch phases log {:.0} us, init {:.0} us, exec {:.0} us, persist {:.0} us (mean of {} epochs); transient peak {} bytes",
                run.log_us,
                run.init_us,
                run.exec_us,
                run.persist_us,
                run.epochs,
                run.transient_bytes_peak
            );
            println!(
                "nvm/commit   {:.0} bytes written, {:.2} lines flushed, {:.3} fences; {} rows persisted for {} versions",
                run.nvm_bytes_written_per_commit,
                run.lines_flushed_per_commit,
                run.fences_per_commit,
                run.rows_persisted,
                run.versions
            );
        }
    }
    Ok(())
}
