//! What the CLI prints: the start banner and progress on stderr, the
//! summary on stdout in the chosen format, and the result files.
//!
//! Progress is an indicatif bar when stderr is a terminal and one plain line
//! per interval otherwise (CI logs, pipes), so both a person and a log
//! reader see elapsed time, throughput, abort %, p50/p99, NVM GB/s and
//! fences per transaction.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use zen_engine::EngineConfig;
use zen_workload::report::{bytes, timeseries_csv};
use zen_workload::{DriverConfig, IntervalSample, Report, Stop};

use crate::cli::Format;
use crate::error::{CliError, CliResult};

/// The resolved configuration, one fact per line, on stderr.
pub fn banner(
    command: &str,
    engine: &EngineConfig,
    driver: Option<&DriverConfig>,
    params: &serde_json::Value,
) {
    let pool =
        engine.pool.as_ref().map_or("(anonymous memory)".to_string(), |p| p.display().to_string());
    eprintln!("zen {command} · zenplus {}", env!("CARGO_PKG_VERSION"));
    eprintln!("  engine        {} / cc {}", engine.engine.name(), engine.cc.name());
    eprintln!(
        "  pmem          {} · pool {pool} ({})",
        engine.pmem.name(),
        bytes(engine.pool_size_bytes)
    );
    eprintln!("  durable       across {}", engine.pmem.durable_across());
    if engine.pmem == zen_pmem::BackendKind::Emu {
        eprintln!("  nvm device    {}", engine.latency.describe());
        if let Some(n) = engine.latency.share_threads {
            eprintln!("  nvm share     {}", zen_workload::report::share_note(n));
        }
    }
    let cache = match engine.dram_ratio {
        Some(p) => format!("data size / {p}"),
        None => bytes(engine.cache_size_bytes),
    };
    eprintln!("  cache         {cache} · persistence domain {}", engine.domain.name());
    let default_note =
        if command == "bench" || command == "run" { " (benchmark default: lazy)" } else { "" };
    eprintln!("  durability    {}{default_note}", engine.durability.name());
    if engine.engine == zen_engine::EngineKind::Zen {
        let acts = if engine.cc.supports_snapshots() { "" } else { " (no effect with this cc)" };
        eprintln!(
            "  zen+ adaptive {} · α {} · β {} · γ {} tuples{acts}",
            if engine.adaptive { "on" } else { "off" },
            engine.adaptive_alpha,
            engine.adaptive_beta,
            engine.adaptive_gamma_tuples
        );
    }
    if engine.engine == zen_engine::EngineKind::Falcon {
        let hot = if engine.domain == zen_pmem::PersistenceDomain::Eadr {
            format!("{} hot tuples", engine.falcon_hot_tuples)
        } else {
            "ADR: every write-back issued, hot tracking off".to_string()
        };
        eprintln!(
            "  falcon        {} · window {} · {hot}",
            engine.falcon_variant.name(),
            bytes(engine.falcon_window_bytes)
        );
        if engine.domain == zen_pmem::PersistenceDomain::Eadr
            && matches!(engine.pmem, zen_pmem::BackendKind::Fs | zen_pmem::BackendKind::Dram)
        {
            eprintln!(
                "  note          eadr on --pmem {}: flushes the engine skips are modelled (counted as not issued); the medium is DRAM, so no timing effect of persistent caches is measured",
                engine.pmem.name()
            );
        }
    }
    if let Some(d) = driver {
        let stop = match d.stop {
            Stop::Duration(t) => format!("{:.1} s", t.as_secs_f64()),
            Stop::Transactions(n) => format!("{n} transactions"),
        };
        eprintln!(
            "  run           {} threads · warmup {:.1} s · measure {stop}",
            d.threads,
            d.warmup.as_secs_f64()
        );
        eprintln!("  seed          {}", d.seed);
    }
    eprintln!("  workload      {params}");
}

/// One progress line (the non-terminal form, also the bar's message).
pub fn progress_line(s: &IntervalSample) -> String {
    format!(
        "[{:>6.1}s {:<7}] {:>11.0} txn/s · abort {:>5.2} % · p50 {:>7.1} µs · p99 {:>8.1} µs · nvm {:>6.3} GB/s · {:.2} fences/txn",
        s.elapsed_s,
        s.phase,
        s.throughput_tps,
        s.abort_pct,
        s.p50_us,
        s.p99_us,
        s.nvm_write_gb_per_s,
        s.fences_per_txn
    )
}

/// Shows progress on stderr; see the module docs.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    pub fn new(driver: &DriverConfig) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let total_s = match driver.stop {
            Stop::Duration(d) => (driver.warmup + d).as_secs(),
            Stop::Transactions(_) => 0,
        };
        let bar = if total_s > 0 { ProgressBar::new(total_s) } else { ProgressBar::new_spinner() };
        let style = ProgressStyle::with_template("{bar:30} {pos:>4}/{len}s {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar: Some(bar) }
    }

    pub fn update(&self, s: &IntervalSample) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(s.elapsed_s as u64);
                bar.set_message(progress_line(s));
            }
            None => eprintln!("{}", progress_line(s)),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Print the summary on stdout in `format`, and write files into `out`.
pub fn emit(
    report: &Report,
    timeseries: &[IntervalSample],
    format: Format,
    out: Option<&Path>,
) -> CliResult {
    match format {
        Format::Text => print!("{}", report.render_text()),
        Format::Json => {
            let json = serde_json::to_string_pretty(report)
                .map_err(|e| CliError::Failed(e.to_string()))?;
            println!("{json}");
        }
        Format::Csv => print!("{}", timeseries_csv(timeseries)?),
    }
    if let Some(dir) = out {
        for path in report.write_files(dir, timeseries)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}
