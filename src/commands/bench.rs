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
