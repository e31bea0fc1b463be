//! Process-kill testing: `zen run --expected-state FILE` and
//! `zen check --expected-state FILE`.
//!
//! `run` wraps the workload in `zen_workload::crash_receipts::Receipted`:
//! every writing transaction also inserts a receipt row (worker, seq) in
//! the same transaction, each worker stores its intent word in FILE before a
//! writing transaction and its ack word once the commit returned, and every
//! commit is `Durability::Immediate` (so an ack means durable). FILE is an
//! mmapped file of atomic words outside the pool (`zen_pmem::expected`),
//! so a `SIGKILL` loses none of its stores. `check` recovers the pool and
//! verifies that every acknowledged transaction's receipt is present, that
//! each worker's receipts are dense, and that none lies beyond its intent.

use std::path::Path;

use zen_engine::Engine;
use zen_pmem::expected::{ExpectedState, MAX_WORKERS};
use zen_workload::crash_receipts::{ExpectedStateReport, Receipted, check_expected_state};
use zen_workload::run_benchmark;

use crate::commands::RunRequest;
use crate::error::{CliError, CliResult};
use crate::output::Progress;
use crate::with_workload;
use crate::workloads::AnyWorkload;

/// Open an existing expected-state file (for `check`).
pub fn open_state(path: &Path) -> CliResult<ExpectedState> {
    ExpectedState::open(path).map_err(|e| CliError::Failed(format!("--expected-state: {e}")))
}

/// Verify the file against a recovered engine.
pub fn check(engine: &dyn Engine, state: &ExpectedState) -> CliResult<ExpectedStateReport> {
    check_expected_state(engine, state).map_err(CliError::from)
}

/// `run_and_report` with receipts and intent/ack words.
pub fn run_and_report(
    engine: &dyn Engine,
    workload: &AnyWorkload,
    r: RunRequest<'_>,
    path: &Path,
) -> CliResult {
    let state = ExpectedState::open_or_create(path, MAX_WORKERS)
        .map_err(|e| CliError::Failed(format!("--expected-state: {e}")))?;
    if r.driver.threads > state.workers() {
        return Err(CliError::usage(format!(
            "--threads {}: {} records at most {} workers",
            r.driver.threads,
            path.display(),
            state.workers()
        )));
    }
    eprintln!(
        "  expected      {} (intent/ack words per worker; commits forced to --durability immediate)",
        path.display()
    );
    let progress = Progress::new(r.driver);
    let result = with_workload!(workload, |w| {
        Receipted::new(w, engine, Some(&state)).and_then(|wrapped| {
            run_benchmark(engine, &wrapped, r.driver, &mut |sample| progress.update(sample))
        })
    });
    progress.finish();
    super::report_run(engine, &result?, workload, r)
}
