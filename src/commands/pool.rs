//! Commands on a pool that outlives them: `load`, `run`, `recover`, `check`.
//!
//! `load` creates the pool and stores the workload's spec in it; the others
//! open it (which is recovery) and read the spec back, so `zen run --pool P`
//! needs no workload flags beyond the run-time ones. Opening failures are
//! recovery failures (exit 4); a violated check exits 3.

use serde_json::json;
use zen_engine::{EngineConfig, RecoveryReport};
use zen_pmem::BackendKind;
use zen_workload::{Workload, read_spec};

use crate::cli::{EngineArgs, Format, LoadArgs, PoolArgs, RunArgs, WorkloadArgs};
use crate::commands::{self, RunRequest};
use crate::error::{CliError, CliResult};
use crate::output;
use crate::resolve::{self, EngineRequest};
use crate::with_workload;
use crate::workloads;

fn refuse_volatile(pmem: &str, command: &str) -> CliResult {
    if resolve::backend(pmem)? == BackendKind::Dram {
        return Err(CliError::usage(format!(
            "--pmem dram keeps nothing after the process ends, so `zen {command}` cannot use it; \
             use --pmem fs, emu or dax (or `zen bench` for a throw-away run)"
        )));
    }
    Ok(())
}

pub fn load(args: &LoadArgs) -> CliResult {
    refuse_volatile(&args.engine.pmem, "load")?;
    if args.threads == 0 || args.threads > 248 {
        return Err(CliError::usage(format!(
            "invalid value `{}` for --threads: 1..=248",
            args.threads
        )));
    }
    let seed = resolve::seed_or_random(args.seed);
    let workload = workloads::from_flags(args.workload, &args.params, args.threads, seed)?;
    let request = EngineRequest {
        pool: Some(args.pool.clone()),
        create: true,
        threads: args.threads,
        data_bytes: workload.estimated_data_bytes(),
    };
    let engine_config = resolve::engine_config(&args.engine, request)?;
    output::banner("load", &engine_config, None, &workload.parameters());
    eprintln!("  seed          {seed}");
    let engine = zen_engine::open(&engine_config)?;
    let loaded = commands::load(engine.as_ref(), &workload, args.threads);
    let closed = commands::close(engine);
    loaded.map_err(|e| partial_load(e, workload.name(), &args.pool)).and(closed)?;
    println!("loaded {} into {}", workload.name(), args.pool.display());
    Ok(())
}

/// A load that failed part-way: say what the pool now holds.
fn partial_load(e: CliError, workload: &str, pool: &std::path::Path) -> CliError {
    match e {
        CliError::Failed(message) => CliError::Failed(format!(
            "loading {workload} into {} failed: {message}; the pool keeps the rows loaded so far \
             and records that its load did not finish (`zen run` and `zen check` refuse it): \
             remove it before loading again",
            pool.display()
        )),
        other => other,
    }
}

pub fn run(args: &RunArgs) -> CliResult {
    refuse_volatile(&args.engine.pmem, "run")?;
    let driver = resolve::driver_config(&args.driver)?;
    let request = EngineRequest {
        pool: Some(args.pool.clone()),
        create: false,
        threads: driver.threads,
        data_bytes: 0,
    };
    let mut engine_config = resolve::engine_config(&args.engine, request)?;
    if args.expected_state.is_some() {
        // An ack in the expected-state file must mean "durable".
        engine_config.durability = zen_engine::Durability::Immediate;
    }
    let engine = commands::open_existing(&engine_config)?;
    let workload = read_spec(engine.as_ref())
        .map_err(CliError::from)
        .and_then(|spec| workloads::from_spec(spec, args.workload, &args.params));
    let workload = match workload {
        Ok(w) => w,
        Err(e) => return Err(commands::close_after(engine, e)),
    };
    output::banner("run", &engine_config, Some(&driver), &workload.parameters());
    let request = RunRequest {
        command: "run",
        engine_config: &engine_config,
        driver: &driver,
        format: args.driver.format,
        out: args.driver.out.as_deref(),
        recovery: engine.recovery_report(),
    };
    let result = match &args.expected_state {
        Some(path) => commands::expected::run_and_report(engine.as_ref(), &workload, request, path),
        None => commands::run_and_report(engine.as_ref(), &workload, request),
    };
    if args.crash_at_end {
        engine.abandon();
        return result;
    }
    result.and(commands::close(engine))
}

/// `--format csv` is the time series of a run; other commands have none.
pub fn refuse_csv(format: Format, command: &str) -> CliResult {
    if format == Format::Csv {
        return Err(CliError::usage(format!(
            "`zen {command}` prints text or json; --format csv is the time series of `bench` and `run`"
        )));
    }
    Ok(())
}

/// The engine config of a command that only opens a pool.
fn pool_engine_config(p: &PoolArgs, command: &str) -> CliResult<EngineConfig> {
    refuse_csv(p.format, command)?;
    refuse_volatile(&p.pmem, command)?;
    let args = EngineArgs {
        engine: p.engine.clone(),
        cc: p.cc.clone(),
        pmem: p.pmem.clone(),
        nvm_profile: None,
        nvm: crate::nvm_args::NvmArgs::default(),
        persistence_domain: "adr".into(),
        pool_size: None,
        pool_per_node: p.pool_per_node,
        cache_size: None,
        dram_ratio: None,
        durability: "immediate".into(),
        numa: crate::numa_args::NumaArgs::default(),
        adaptive: "on".into(),
        alpha: None,
        beta: None,
        gamma: None,
        falcon_variant: None,
        falcon_window: None,
        falcon_hot_tuples: None,
        nvcaracal_batch_append: None,
        nvcaracal_split_on_demand: None,
        nvcaracal_dram_budget: None,
        nvcaracal_cached_versions: None,
        nvcaracal_cache_epochs: None,
        nvcaracal_minor_gc: None,
        nvcaracal_row_bytes: None,
    };
    let request =
        EngineRequest { pool: Some(p.pool.clone()), create: false, threads: 1, data_bytes: 0 };
    if p.recovery_threads == Some(0) {
        return Err(CliError::usage("invalid value `0` for --recovery-threads: at least 1"));
    }
    let mut config = resolve::engine_config(&args, request)?;
    config.recovery_threads = p.recovery_threads;
    Ok(config)
}

fn render_recovery(r: &RecoveryReport) -> String {
    let mut out = format!(
        "recovery of {} tuples with {} threads in {:.2} ms\n  \
         scan        {:.2} ms ({} pages, {} slots, {} bytes; {} bytes read)\n  \
         index       {:.2} ms\n  \
         clean       {:.2} ms\n  \
         free lists  {:.2} ms\n  \
         discarded   {} uncommitted, {} superseded versions\n  \
         scratch     {} bytes of DRAM at most; pending list peak {} versions\n",
        r.tuples_recovered,
        r.threads,
        r.total_ms,
        r.scan_ms,
        r.pages_scanned,
        r.slots_scanned,
        r.bytes_scanned,
        r.nvm_bytes_read,
        r.index_ms,
        r.clean_ms,
        r.free_list_ms,
        r.uncommitted_discarded,
        r.superseded_discarded,
        r.scratch_bytes_peak,
        r.pending_peak,
    );
    for phase in &r.phases {
        out.push_str(&format!(
            "  phase {:<8} {:>9.2} ms  {:>8.3} GB/s  {:>8.3} M tuples/s  ({} bytes, {} tuples)\n",
            phase.name,
            phase.ms,
            phase.bytes_per_s / 1e9,
            phase.tuples_per_s / 1e6,
            phase.bytes,
            phase.tuples
        ));
    }
    out
}

pub fn recover(p: &PoolArgs) -> CliResult {
    let engine_config = pool_engine_config(p, "recover")?;
    let engine = commands::open_existing(&engine_config)?;
    let report = engine.recovery_report();
    commands::close(engine)?;
    match (p.format, report) {
        (Format::Json, r) => {
            println!("{}", json!({ "pool": p.pool.display().to_string(), "recovery": r }))
        }
        (_, Some(r)) => print!("{}", render_recovery(&r)),
        (_, None) => println!("opened {} without a recovery report", p.pool.display()),
    }
    Ok(())
}

pub fn check(p: &PoolArgs, expected_state: Option<&std::path::Path>) -> CliResult {
    let engine_config = pool_engine_config(p, "check")?;
    let state = expected_state.map(commands::expected::open_state).transpose()?;
    let engine = commands::open_existing(&engine_config)?;
    let workload = match read_spec(engine.as_ref())
        .map_err(CliError::from)
        .and_then(|spec| workloads::from_spec(spec, None, &WorkloadArgs::default()))
    {
        Ok(w) => w,
        // Nothing to check against (no population, or an unfinished load).
        Err(e) => return Err(commands::close_after(engine, e)),
    };
    let checked = with_workload!(&workload, |w| w.check(engine.as_ref())).map_err(CliError::from);
    let invariants = engine.check_invariants();
    let expected = state.as_ref().map(|s| commands::expected::check(engine.as_ref(), s));
    commands::close(engine)?;
    let report = checked?;
    let expected = expected.transpose()?;
    let passed =
        report.passed() && invariants.is_ok() && expected.as_ref().is_none_or(|e| e.passed());
    if p.format == Format::Json {
        let invariants = json!({ "ok": invariants.is_ok(), "error": invariants.as_ref().err().map(|e| e.to_string()) });
        let mut out =
            json!({ "passed": passed, "workload": report, "engine_invariants": invariants });
        if let Some(e) = &expected {
            out["expected_state"] = json!(e);
        }
        println!("{out}");
    } else {
        print!("{}", report.render_text());
        match &invariants {
            Ok(()) => println!("engine invariants hold"),
            Err(e) => println!("engine invariants FAILED: {e}"),
        }
        if let Some(e) = &expected {
            print!("{}", e.render_text());
        }
    }
    if passed {
        return Ok(());
    }
    let mut failed: Vec<String> =
        report.failures().map(|c| format!("{} ({})", c.id, c.description)).collect();
    if let Err(e) = invariants {
        failed.push(format!("engine invariants: {e}"));
    }
    if let Some(e) = expected {
        failed.extend(e.violations.into_iter().map(|v| format!("expected state: {v}")));
    }
    Err(CliError::CheckFailed(failed.join("; ")))
}
