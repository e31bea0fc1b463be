//! `zen crash-test <bank|list-append|ycsb|smallbank|tpcc> --engine
//! <zen|mmdb|wbl|falcon|nvcaracal> [--epochs K] [--nvcaracal-minor-gc
//! on|off] [--nvcaracal-row-bytes R]`: a crash campaign of a
//! whole workload (with `--epochs`, of one-shot epochs) on the crash
//! simulator (`zen_workload::crash`, where the oracle and the sampling are
//! described). Prints what it covered; a violation exits 5 with the check
//! that fired and the command that replays it; a refused configuration
//! (e.g. `--engine ideal`) is a usage error (2); a harness failure (a
//! panic) exits 1 and prints itself.

use std::io::IsTerminal;

use zen_engine::Durability;
use zen_pmem::sim::CrashMode;
use zen_workload::crash::{self, CampaignConfig, CampaignError, CrashWorkload, InjectedFault};

use crate::cli::{CrashTestArgs, CrashWorkloadKind, Format};
use crate::error::{CliError, CliResult};
use crate::resolve;

fn workload(kind: CrashWorkloadKind) -> CrashWorkload {
    match kind {
        CrashWorkloadKind::Bank => CrashWorkload::Bank,
        CrashWorkloadKind::ListAppend => CrashWorkload::ListAppend,
        CrashWorkloadKind::Ycsb => CrashWorkload::Ycsb,
        CrashWorkloadKind::Smallbank => CrashWorkload::SmallBank,
        CrashWorkloadKind::Tpcc => CrashWorkload::Tpcc,
    }
}

/// Flags → campaign config; every refusal names the flag.
fn campaign_config(args: &CrashTestArgs) -> CliResult<CampaignConfig> {
    if args.format == Format::Csv {
        return Err(CliError::usage("`zen crash-test` prints text or json, not csv"));
    }
    let mode = CrashMode::parse(&args.mode).ok_or_else(|| {
        CliError::usage(format!(
            "invalid value `{}` for --mode: strict, paranoid or eadr",
            args.mode
        ))
    })?;
    let durability = Durability::parse(&args.durability).ok_or_else(|| {
        CliError::usage(format!(
            "invalid value `{}` for --durability: lazy or immediate",
            args.durability
        ))
    })?;
    let fault = match &args.inject_fault {
        None => None,
        Some(name) => Some(InjectedFault::parse(name).ok_or_else(|| {
            let names: Vec<String> = InjectedFault::all().into_iter().map(|f| f.name()).collect();
            CliError::usage(format!(
                "invalid value `{name}` for --inject-fault: one of {}",
                names.join(", ")
            ))
        })?),
    };
    let nvcaracal_minor_gc = match args.nvcaracal_minor_gc.as_deref() {
        None => None,
        Some("on") => Some(true),
        Some("off") => Some(false),
        Some(other) => {
            return Err(CliError::usage(format!(
                "invalid value `{other}` for --nvcaracal-minor-gc: on or off"
            )));
        }
    };
    let tuning = crash::Tuning {
        nvcaracal_minor_gc,
        nvcaracal_row_bytes: args.nvcaracal_row_bytes,
        ..crash::Tuning::default()
    };
    let config = CampaignConfig {
        workload: workload(args.workload),
        engine: resolve::engine_kind(&args.engine)?,
        cc: resolve::cc_kind(&args.cc)?,
        mode,
        durability,
        crash_points: args.crash_points,
        images_per_point: args.images_per_point,
        nested_depth: args.nested_depth,
        seed: resolve::seed_or_random(args.seed),
        threads: args.threads,
        recovery_threads: args.recovery_threads,
        txns: args.txns,
        epochs: args.epochs,
        fault,
        save_failing: args.save_failing.clone(),
        tuning,
    };
    config.validate().map_err(|e| CliError::usage(e.to_string()))?;
    Ok(config)
}

pub fn crash_test(args: &CrashTestArgs) -> CliResult {
    let config = campaign_config(args)?;
    let replay = format!("zen crash-test {}", config.replay_args());
    eprintln!("zen crash-test · zenplus {}", env!("CARGO_PKG_VERSION"));
    eprintln!("  replay with   {replay}");
    if let Some(knobs) = config.nvcaracal_knobs() {
        eprintln!("  nvcaracal     {knobs}");
    }
    let interactive = std::io::stderr().is_terminal();
    let mut last_tenth = 0;
    let report = crash::run_campaign(&config, &mut |p| {
        let tenth = p.points_done * 10 / p.points_total.max(1);
        if interactive && tenth > last_tenth {
            last_tenth = tenth;
            eprintln!("  … {}/{} crash points, {} images", p.points_done, p.points_total, p.images);
        }
    })
    .map_err(|e| match e {
        CampaignError::Config(c) => CliError::usage(c.to_string()),
        CampaignError::Harness(h) => CliError::Failed(h.to_string()),
    })?;
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report)
                .map_err(|e| CliError::Failed(format!("json: {e}")))?
        ),
        _ => print!("{}", report.render_text()),
    }
    match &report.failure {
        None => Ok(()),
        Some(f) => {
            let mut message = f.message.clone();
            if config.threads > 1 {
                message.push_str(&format!(
                    "\n  replay: {replay}\n  (with --threads {} the workers' interleaving differs between runs; \
                     --threads 1 replays the same requests{})",
                    config.threads,
                    if f.saved_image.is_some() { ", and the saved image is the reproducer" } else { "" }
                ));
            } else {
                message.push_str(&format!("\n  replay: {replay}"));
            }
            Err(CliError::CrashViolation(message))
        }
    }
}
