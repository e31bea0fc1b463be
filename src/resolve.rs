//! From flags to configs: sizes, durations, names, and the combinations the
//! CLI refuses. Every refusal is a [`CliError::Usage`] that names the flag,
//! the value and what is allowed.

use std::path::PathBuf;
use std::time::Duration;

use zen_engine::{CcKind, Durability, EngineConfig, EngineKind};
use zen_pmem::{BackendKind, NvmProfile, PersistenceDomain};
use zen_workload::{DriverConfig, Stop};

use crate::cli::{DriverArgs, EngineArgs};
use crate::error::{CliError, CliResult};

/// Backends a user may pick with `--pmem`.
pub const USER_BACKENDS: [BackendKind; 4] =
    [BackendKind::Dax, BackendKind::Fs, BackendKind::Emu, BackendKind::Dram];
/// Met-Cache budget when neither `--cache-size` nor `--dram-ratio` is given.
pub const DEFAULT_CACHE_BYTES: u64 = 256 << 20;
const MIN_POOL_BYTES: u64 = 1 << 30;
const POOL_HEADROOM_BYTES: u64 = 512 << 20;
const PAGE_BYTES: u64 = 2 << 20;

fn bad(flag: &str, value: &str, allowed: &str) -> CliError {
    CliError::usage(format!("invalid value `{value}` for {flag}: {allowed}"))
}

/// "256MiB", "1GiB", "64KiB", "512M", "1G", "4096" (bytes).
pub fn parse_size(flag: &str, text: &str) -> CliResult<u64> {
    let allowed = "a byte count with an optional unit: B, KiB, MiB, GiB, TiB (or K, M, G, T; powers of 1024), e.g. 256MiB";
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad(flag, text, allowed))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad(flag, text, allowed)),
    };
    let bytes = number * (1u64 << shift) as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < 2f64.powi(62)) {
        return Err(bad(flag, text, allowed));
    }
    Ok(bytes as u64)
}

/// "10s", "500ms", "2m", "1.5s", "0s", "1h".
pub fn parse_duration(flag: &str, text: &str) -> CliResult<Duration> {
    let allowed = "a number with a unit: ms, s, m or h, e.g. 10s or 500ms";
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad(flag, text, allowed))?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "s" => number,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        "" if number == 0.0 => 0.0,
        _ => return Err(bad(flag, text, allowed)),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| bad(flag, text, allowed))
}

fn names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> String {
    all.iter().map(|k| name(*k)).collect::<Vec<_>>().join(", ")
}

pub fn engine_kind(text: &str) -> CliResult<EngineKind> {
    EngineKind::parse(text).ok_or_else(|| {
        bad("--engine", text, &format!("one of {}", names(&EngineKind::ALL, EngineKind::name)))
    })
}

pub fn cc_kind(text: &str) -> CliResult<CcKind> {
    CcKind::parse(text).ok_or_else(|| {
        bad("--cc", text, &format!("one of {}", names(&CcKind::EVERY, CcKind::name)))
    })
}

pub fn backend(text: &str) -> CliResult<BackendKind> {
    BackendKind::parse(text).filter(|k| USER_BACKENDS.contains(k)).ok_or_else(|| {
        bad("--pmem", text, &format!("one of {}", names(&USER_BACKENDS, BackendKind::name)))
    })
}

/// The device model of `--pmem emu`: `--nvm-profile` and the `--nvm-*` overrides.
pub fn device_params(args: &EngineArgs, pmem: BackendKind) -> CliResult<zen_pmem::DeviceParams> {
    crate::nvm_args::device_params(&args.nvm, profile(args, pmem)?, pmem)
}

fn profile(args: &EngineArgs, pmem: BackendKind) -> CliResult<NvmProfile> {
    match (&args.nvm_profile, pmem) {
        (None, _) => Ok(NvmProfile::Optane),
        (Some(p), BackendKind::Emu) => NvmProfile::parse(p).ok_or_else(|| {
            bad(
                "--nvm-profile",
                p,
                &format!("one of {}", names(&NvmProfile::ALL, NvmProfile::name)),
            )
        }),
        (Some(_), other) => Err(CliError::usage(format!(
            "--nvm-profile applies to --pmem emu only (the latency model); --pmem {} runs at the medium's own speed",
            other.name()
        ))),
    }
}

/// What a command needs from the engine flags.
pub struct EngineRequest {
    /// Pool path (`None` for `--pmem dram`).
    pub pool: Option<PathBuf>,
    pub create: bool,
    /// Driver or loader threads that will hold workers at once.
    pub threads: usize,
    /// Estimated bytes of the population (for the pool size and `--dram-ratio`).
    pub data_bytes: u64,
}

/// Map the engine flags to an `EngineConfig`.
pub fn engine_config(args: &EngineArgs, request: EngineRequest) -> CliResult<EngineConfig> {
    let pmem = backend(&args.pmem)?;
    let latency = device_params(args, pmem)?;
    let domain = PersistenceDomain::parse(&args.persistence_domain)
        .ok_or_else(|| bad("--persistence-domain", &args.persistence_domain, "adr or eadr"))?;
    let durability = Durability::parse(&args.durability)
        .ok_or_else(|| bad("--durability", &args.durability, "lazy or immediate"))?;
    if let Some(r) = args.dram_ratio
        && !(r.is_finite() && r >= 1.0)
    {
        return Err(bad(
            "--dram-ratio",
            &r.to_string(),
            "a number >= 1 (cache = data size / P, e.g. 4, 8, 16)",
        ));
    }
    let cache_size_bytes = match &args.cache_size {
        Some(s) => parse_size("--cache-size", s)?,
        None => DEFAULT_CACHE_BYTES,
    };
    let pool_size_bytes = match &args.pool_size {
        Some(s) => parse_size("--pool-size", s)?,
        None => {
            (request.data_bytes * 4 + POOL_HEADROOM_BYTES).max(MIN_POOL_BYTES).div_ceil(PAGE_BYTES)
                * PAGE_BYTES
        }
    };
    let pool_per_node = if args.pool_per_node {
        Some(per_node_count(args, pmem, request.pool.as_deref(), request.create)?)
    } else {
        refuse_member_names(pmem, request.pool.as_deref(), request.create)?;
        None
    };
    let pool = if pmem == BackendKind::Dram { None } else { request.pool };
    let adaptive = match args.adaptive.as_str() {
        "on" => true,
        "off" => false,
        other => return Err(bad("--adaptive", other, "on or off")),
    };
    let defaults = EngineConfig::default();
    let falcon_variant = match &args.falcon_variant {
        Some(v) => zen_engine::FalconVariant::parse(v).ok_or_else(|| {
            bad(
                "--falcon-variant",
                v,
                &format!(
                    "one of {}",
                    names(&zen_engine::FalconVariant::ALL, zen_engine::FalconVariant::name)
                ),
            )
        })?,
        None => defaults.falcon_variant,
    };
    let falcon_window_bytes = match &args.falcon_window {
        Some(s) => parse_size("--falcon-window", s)?,
        None => defaults.falcon_window_bytes,
    };
    let on_off = |flag: &str, v: &Option<String>, default: bool| match v.as_deref() {
        None => Ok(default),
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        Some(other) => Err(bad(flag, other, "on or off")),
    };
    let nvcaracal_dram_budget_bytes = match &args.nvcaracal_dram_budget {
        Some(s) => parse_size("--nvcaracal-dram-budget", s)?,
        None => defaults.nvcaracal_dram_budget_bytes,
    };
    let config = EngineConfig {
        engine: engine_kind(&args.engine)?,
        cc: cc_kind(&args.cc)?,
        pmem,
        pool,
        pool_per_node,
        pool_size_bytes,
        latency,
        domain,
        // The driver's workers, plus one for spec/ledger reads and checks.
        max_workers: request.threads + 2,
        cache_size_bytes,
        dram_ratio: args.dram_ratio,
        expected_data_bytes: Some(request.data_bytes),
        durability,
        create: request.create,
        numa: crate::numa_args::numa_config(&args.numa, request.threads)?,
        adaptive,
        adaptive_alpha: args.alpha.unwrap_or(defaults.adaptive_alpha),
        adaptive_beta: args.beta.unwrap_or(defaults.adaptive_beta),
        adaptive_gamma_tuples: args.gamma.unwrap_or(defaults.adaptive_gamma_tuples),
        falcon_variant,
        falcon_window_bytes,
        falcon_hot_tuples: args.falcon_hot_tuples.unwrap_or(defaults.falcon_hot_tuples),
        nvcaracal_batch_append: on_off(
            "--nvcaracal-batch-append",
            &args.nvcaracal_batch_append,
            defaults.nvcaracal_batch_append,
        )?,
        nvcaracal_split_on_demand: on_off(
            "--nvcaracal-split-on-demand",
            &args.nvcaracal_split_on_demand,
            defaults.nvcaracal_split_on_demand,
        )?,
        nvcaracal_dram_budget_bytes,
        nvcaracal_cached_versions: on_off(
            "--nvcaracal-cached-versions",
            &args.nvcaracal_cached_versions,
            defaults.nvcaracal_cached_versions,
        )?,
        nvcaracal_cache_epochs: args
            .nvcaracal_cache_epochs
            .unwrap_or(defaults.nvcaracal_cache_epochs),
        nvcaracal_minor_gc: on_off(
            "--nvcaracal-minor-gc",
            &args.nvcaracal_minor_gc,
            defaults.nvcaracal_minor_gc,
        )?,
        nvcaracal_row_bytes: args.nvcaracal_row_bytes.unwrap_or(defaults.nvcaracal_row_bytes),
        // Every command carries every workload's one-shot procedures, so a
        // deterministic engine's pool replays under any of them.
        procedures: zen_workload::oneshot::procedures(),
        ..defaults.clone()
    };
    config.validate()?;
    Ok(config)
}

/// How many member files `--pool-per-node` means: one per NUMA node when
/// creating (`--numa-nodes`, else the machine's nodes); when opening, the
/// count the pool's first member records, which must match `--numa-nodes`
/// when given (with NUMA off, the members are used as one pool).
fn per_node_count(
    args: &EngineArgs,
    pmem: BackendKind,
    pool: Option<&std::path::Path>,
    create: bool,
) -> CliResult<usize> {
    if !matches!(pmem, BackendKind::Fs | BackendKind::Emu | BackendKind::Dax) {
        return Err(CliError::usage(format!(
            "--pool-per-node splits the pool into files: it needs --pmem fs, emu or dax, not --pmem {}",
            pmem.name()
        )));
    }
    let Some(pool) = pool else {
        return Err(CliError::usage("--pool-per-node needs --pool PATH".to_string()));
    };
    if create {
        let machine = || zen_engine::numa::Topology::detect().nodes.len();
        return Ok(args.numa.numa_nodes.unwrap_or_else(machine));
    }
    let count = zen_pmem::pool::member_count(pool)?;
    match args.numa.numa_nodes {
        Some(nodes) if nodes != count => Err(CliError::usage(format!(
            "{}: the per-node pool has {count} member files (one per NUMA node) but --numa-nodes is {nodes}; run with --numa-nodes {count}",
            pool.display()
        ))),
        _ => Ok(count),
    }
}

/// Opening `P` that does not exist while `P.node0` does: the user forgot
/// `--pool-per-node`; say so instead of "no such file".
fn refuse_member_names(
    pmem: BackendKind,
    pool: Option<&std::path::Path>,
    create: bool,
) -> CliResult {
    let Some(pool) = pool.filter(|_| !create && pmem != BackendKind::Dram) else {
        return Ok(());
    };
    let first = zen_pmem::pool::member_paths(pool, 1).remove(0);
    if !pool.exists() && first.exists() {
        return Err(CliError::usage(format!(
            "{}: no such file, but {} is there: a per-node pool; add --pool-per-node",
            pool.display(),
            first.display()
        )));
    }
    Ok(())
}

/// A seed from the clock and the process id when `--seed` is absent.
pub fn seed_or_random(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        zen_workload::driver::worker_seed(nanos ^ u64::from(std::process::id()) << 32, 0)
    })
}

/// Map the driver flags to a `DriverConfig`.
pub fn driver_config(args: &DriverArgs) -> CliResult<DriverConfig> {
    if args.threads == 0 || args.threads > 248 {
        return Err(bad("--threads", &args.threads.to_string(), "1..=248"));
    }
    let stop = match args.txns {
        Some(0) => return Err(bad("--txns", "0", "at least 1 transaction")),
        Some(n) => Stop::Transactions(n),
        None => {
            let d = parse_duration("--duration", &args.duration)?;
            if d.is_zero() {
                return Err(bad("--duration", &args.duration, "a positive duration, e.g. 10s"));
            }
            Stop::Duration(d)
        }
    };
    let interval = parse_duration("--interval", &args.interval)?;
    if interval < Duration::from_millis(10) {
        return Err(bad("--interval", &args.interval, "at least 10ms"));
    }
    Ok(DriverConfig {
        threads: args.threads,
        warmup: parse_duration("--warmup", &args.warmup)?,
        stop,
        seed: seed_or_random(args.seed),
        interval,
        ..DriverConfig::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_accept_binary_units_and_refuse_garbage() {
        assert_eq!(parse_size("--cache-size", "256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_size("--cache-size", "1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("--cache-size", "1.5KiB").unwrap(), 1536);
        assert_eq!(parse_size("--cache-size", "4096").unwrap(), 4096);
        let err = parse_size("--cache-size", "lots").unwrap_err().to_string();
        assert!(err.contains("--cache-size") && err.contains("MiB"), "{err}");
        assert!(parse_size("--pool-size", "0").is_err());
        assert!(parse_size("--pool-size", "12XB").is_err());
    }

    #[test]
    fn durations_need_a_unit_except_zero() {
        assert_eq!(parse_duration("--duration", "10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("--duration", "250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("--duration", "2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("--warmup", "0").unwrap(), Duration::ZERO);
        assert!(parse_duration("--duration", "10").is_err());
        assert!(parse_duration("--duration", "-1s").is_err());
    }

    #[test]
    fn names_outside_the_lists_are_refused_with_the_lists() {
        let err = backend("sim").err().unwrap().to_string();
        assert!(err.contains("dax, fs, emu, dram"), "{err}");
        assert!(cc_kind("2pl").err().unwrap().to_string().contains("silo"));
        assert!(engine_kind("zen").is_ok());
    }
}
