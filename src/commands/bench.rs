//! `zen bench <workload>`: a self-contained benchmark on a temporary pool.
//!
//! The pool lives in `--pool-dir` when given (an fsdax mount, or a tmpfs
//! mounted with `huge=always` for 2 MiB pages), else in `/dev/shm` when it
//! exists (so a `fs` pool is backed by memory, as close to NVM as an
//! ordinary machine gets) and in the system temporary directory otherwise;
//! it is removed when the command ends, whether it succeeded or not.

use std::path::PathBuf;

use crate::cli::BenchArgs;
use crate::commands::{self, RunRequest};
use crate::error::{CliError, CliResult};
use crate::output;
use crate::resolve::{self, EngineRequest};
use crate::with_workload;
use crate::workloads;
use zen_workload::Workload;

fn temp_base() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() { shm } else { std::env::temp_dir() }
}

pub fn bench(args: &BenchArgs) -> CliResult {
    let driver = resolve::driver_config(&args.driver)?;
    let workload = workloads::from_flags(args.workload, &args.params, driver.threads, driver.seed)?;
    let pmem = resolve::backend(&args.engine.pmem)?;
    let dir = if pmem == zen_pmem::BackendKind::Dram {
        if let Some(d) = &args.pool_dir {
            return Err(CliError::Usage(format!(
                "--pool-dir {}: --pmem dram keeps no pool file; give --pool-dir with fs, emu or dax",
                d.display()
            )));
        }
        None
    } else {
        let base = args.pool_dir.clone().unwrap_or_else(temp_base);
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
    if let Some(needed) = workload.access_set_needed() {
        engine_config.max_access_set = engine_config.max_access_set.max(needed);
    }
    output::banner("bench", &engine_config, Some(&driver), &workload.parameters());
    let engine = zen_engine::open(&engine_config)?;
    let epochs = match epoch_mode(args, engine.as_ref()) {
        Ok(e) => e,
        Err(e) => return Err(commands::close_after(engine, e)),
    };
    if let Err(e) = commands::load(engine.as_ref(), &workload, driver.threads) {
        // The load error is the one to report; the pool is thrown away anyway.
        let _ = commands::close(engine);
        return Err(e);
    }
    let request = RunRequest {
        command: "bench",
        engine_config: &engine_config,
        driver: &driver,
        format: args.driver.format,
        out: args.driver.out.as_deref(),
        recovery: None,
    };
    let result = match epochs {
        Some(size) => run_epochs(engine.as_ref(), &workload, size, request),
        None => commands::run_and_report(engine.as_ref(), &workload, request),
    };
    let closed = commands::close(engine);
    // `dir` is dropped here, removing the pool.
    result.and(closed)
}

/// The epoch size when this run is a batch run: an engine with the
/// deterministic seam (nvcaracal; every workload has a one-shot form),
/// default 1000 transactions per epoch; `--epoch-size` elsewhere is a
/// usage error naming what it needs.
fn epoch_mode(args: &BenchArgs, engine: &dyn zen_engine::Engine) -> CliResult<Option<usize>> {
    let deterministic = engine.deterministic().is_some();
    match (args.epoch_size, deterministic) {
        (Some(0), _) => Err(CliError::usage("--epoch-size must be at least 1")),
        (Some(_), false) => Err(CliError::usage(
            "--epoch-size runs one-shot transactions on a deterministic engine (--engine nvcaracal)",
        )),
        (size, true) => Ok(Some(size.unwrap_or(1000))),
        (None, false) => Ok(None),
    }
}

/// The batch run: epochs of one-shot transactions, reported like any run
/// (plus its `epochs` section), then the workload's own check.
fn run_epochs(
    engine: &dyn zen_engine::Engine,
    workload: &workloads::AnyWorkload,
    size: usize,
    request: RunRequest<'_>,
) -> CliResult {
    let driver = request.driver;
    let duration = match driver.stop {
        zen_workload::Stop::Duration(d) => d,
        zen_workload::Stop::Transactions(_) => {
            return Err(CliError::usage("epoch mode runs for --duration, not --txns"));
        }
    };
    eprintln!("epoch mode: {size} one-shot transactions per epoch on {} threads", driver.threads);
    let (threads, warmup, seed) = (driver.threads, driver.warmup, driver.seed);
    let run = with_workload!(workload, |w| {
        zen_workload::oneshot::run_epochs(engine, w, size, threads, warmup, duration, seed)
    })?;
    commands::report_run(engine, &run, workload, request)?;
    let checked = with_workload!(workload, |w| w.check(engine)).map_err(CliError::from)?;
    if !checked.passed() {
        return Err(CliError::Failed(format!(
            "the workload's check failed after the epoch run:\n{}",
            checked.render_text()
        )));
    }
    eprintln!("check: {} passed after the epoch run", workload.name());
    Ok(())
}
