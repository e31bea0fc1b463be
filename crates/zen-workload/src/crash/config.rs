//! What defines a campaign: [`CampaignConfig`] (the flags of `zen crash-test`),
//! [`Tuning`] (engine knobs and sizes the tests' scenarios need), the
//! workloads and the injectable faults, and [`CampaignConfig::validate`],
//! whose every refusal is a typed [`ConfigError`] naming the flag.

use std::path::PathBuf;

use serde::Serialize;
use zen_engine::{BaselineFault, CcKind, Durability, EngineKind, Fault};
use zen_pmem::PersistenceDomain;
use zen_pmem::sim::CrashMode;

use super::violation::ConfigError;

/// Most workers of a campaign.
pub const MAX_THREADS: usize = 4;
/// Most epochs of an epoch-mode campaign.
pub const MAX_EPOCHS: u64 = 64;
/// Most recovery threads of a campaign.
pub const MAX_RECOVERY_THREADS: usize = 8;

/// The workloads a campaign runs (`Script` is the tests' scripted subject,
/// not offered by `zen crash-test`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrashWorkload {
    Bank,
    ListAppend,
    Ycsb,
    SmallBank,
    Tpcc,
    Script,
}

impl CrashWorkload {
    /// The workloads `zen crash-test` offers.
    pub const ALL: [CrashWorkload; 5] = [
        CrashWorkload::Bank,
        CrashWorkload::ListAppend,
        CrashWorkload::Ycsb,
        CrashWorkload::SmallBank,
        CrashWorkload::Tpcc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CrashWorkload::Bank => "bank",
            CrashWorkload::ListAppend => "list-append",
            CrashWorkload::Ycsb => "ycsb",
            CrashWorkload::SmallBank => "smallbank",
            CrashWorkload::Tpcc => "tpcc",
            CrashWorkload::Script => "script",
        }
    }

    pub fn parse(s: &str) -> Option<CrashWorkload> {
        CrashWorkload::ALL.into_iter().find(|w| w.name() == s)
    }
}

/// A deliberate bug switched on for the campaign (the bug-injection suite).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum InjectedFault {
    Zen(Fault),
    Baseline(BaselineFault),
}

impl InjectedFault {
    /// Every injectable fault: each `Fault`, then each `BaselineFault`.
    pub fn all() -> Vec<InjectedFault> {
        Fault::ALL
            .into_iter()
            .map(InjectedFault::Zen)
            .chain(BaselineFault::ALL.into_iter().map(InjectedFault::Baseline))
            .collect()
    }

    /// The engine whose code the fault breaks.
    pub fn engine(self) -> EngineKind {
        match self {
            InjectedFault::Zen(f) => f.engine(),
            InjectedFault::Baseline(f) => f.engine(),
        }
    }

    /// The name `--inject-fault` takes (`no-fence-before-lp`).
    pub fn name(self) -> String {
        let value = match self {
            InjectedFault::Zen(f) => serde_json::to_value(f),
            InjectedFault::Baseline(f) => serde_json::to_value(f),
        };
        value
            .ok()
            .and_then(|v| v.as_str().map(|s| s.replace('_', "-")))
            .unwrap_or_else(|| format!("{self:?}"))
    }

    /// The fault named `name` (`no-fence-before-lp` or `no_fence_before_lp`).
    pub fn parse(name: &str) -> Option<InjectedFault> {
        let name = name.replace('_', "-");
        InjectedFault::all().into_iter().find(|f| f.name() == name)
    }
}

/// Engine knobs and sizes beyond the flags (the tests' scenarios set them;
/// `zen crash-test` sets only nvcaracal's, from `--nvcaracal-minor-gc` and
/// `--nvcaracal-row-bytes`, and leaves the rest at the defaults).
#[derive(Debug, Clone, Serialize)]
pub struct Tuning {
    /// Zen+ α (a tiny α makes every read-write transaction privileged).
    pub adaptive_alpha: Option<f64>,
    /// wbl's group-commit interval.
    pub group_commit_interval_us: Option<u64>,
    /// mmdb: DRAM for tuples (the rest lives in NVM as volatile memory).
    pub dram_budget_bytes: Option<u64>,
    /// Record from the recovery of the loaded pool on (no trace reset): for
    /// engines that leave volatile NVM stores pending, which a reset refuses.
    pub trace_from_open: bool,
    /// Pool size in 64 KiB pages (`None`: sized from the population).
    pub pool_pages: Option<u64>,
    /// Met-Cache (and mmdb/wbl DRAM) budget (`None`: 8 MiB for YCSB,
    /// SmallBank and TPC-C, 1 MiB for the small subjects).
    pub cache_bytes: Option<u64>,
    /// Persistence-lint errors of the recorded run are violations (the
    /// bug-injection suite turns this off to show the oracle alone catches
    /// an early acknowledgement).
    pub lints_are_violations: bool,
    /// Crash points per recovery that nested crashes visit.
    pub nested_points: u64,
    /// Images per nested crash point.
    pub nested_images: u64,
    /// Of every checked crash point, the first this many images are also
    /// crashed during their own recovery (the third strict image is the
    /// first with a line partly applied: a torn tail for recovery).
    pub nested_images_per_point: u64,
    /// At most this many of the checked crash points (spread evenly, the
    /// first and the last included) get nested crashes; `None`: every one.
    pub nested_crash_points: Option<u64>,
    /// falcon: bytes of each worker's log window (`None`: the engine's
    /// default, 64 KiB less the page header here; small windows make the
    /// scenarios wrap the ring and overwrite old records).
    pub falcon_window_bytes: Option<u64>,
    /// falcon: the design variant (`None`: the full design).
    pub falcon_variant: Option<zen_engine::FalconVariant>,
    /// nvcaracal: the minor garbage collector (`None`: the engine's
    /// default, on; `Some(false)`: the major collector instead).
    pub nvcaracal_minor_gc: Option<bool>,
    /// nvcaracal: bytes of a persistent row (`None`: the engine's default,
    /// 256; `Some(0)`: inline-only, no value pool).
    pub nvcaracal_row_bytes: Option<u64>,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            adaptive_alpha: None,
            group_commit_interval_us: None,
            dram_budget_bytes: None,
            trace_from_open: false,
            pool_pages: None,
            cache_bytes: None,
            lints_are_violations: true,
            nested_points: 4,
            nested_images: 2,
            nested_images_per_point: 1,
            nested_crash_points: None,
            falcon_window_bytes: None,
            falcon_variant: None,
            nvcaracal_minor_gc: None,
            nvcaracal_row_bytes: None,
        }
    }
}

/// Everything that defines a campaign.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignConfig {
    pub workload: CrashWorkload,
    pub engine: EngineKind,
    /// Zen's protocol (the baselines run their own OCC and ignore it).
    pub cc: CcKind,
    pub mode: CrashMode,
    /// Durability of the recorded run's writing transactions.
    pub durability: Durability,
    /// Most crash points checked (sampled as the module docs say).
    pub crash_points: u64,
    /// Most images per crash point (exhaustive when the point has no more).
    pub images_per_point: u64,
    /// Levels of crashes during recovery (0 = none).
    pub nested_depth: u32,
    pub seed: u64,
    /// Workers of the recorded run (1..=4).
    pub threads: usize,
    /// Threads of every recovery the campaign runs, nested ones included
    /// (1..=8; Zen, mmdb and wbl recover in parallel).
    pub recovery_threads: usize,
    /// Requests each worker runs in the recorded run (scripts: ignored);
    /// in epoch mode, the requests of each epoch.
    pub txns: u64,
    /// Epoch mode (`--epochs K`): the recorded run is K epochs of `txns`
    /// one-shot requests each, submitted to the engine's deterministic
    /// seam and run on `threads` epoch threads (`crash/epochs.rs`); `None`:
    /// interactive transactions, `txns` per worker.
    pub epochs: Option<u64>,
    /// An injected bug (the bug-injection suite), `None` for real campaigns.
    pub fault: Option<InjectedFault>,
    /// Directory the failing image is written to.
    pub save_failing: Option<PathBuf>,
    pub tuning: Tuning,
}

impl Default for CampaignConfig {
    fn default() -> Self {
        CampaignConfig {
            workload: CrashWorkload::Bank,
            engine: EngineKind::Zen,
            cc: CcKind::Silo,
            mode: CrashMode::Strict,
            durability: Durability::Immediate,
            crash_points: 200,
            images_per_point: 16,
            nested_depth: 1,
            seed: 0x5EED,
            threads: 2,
            recovery_threads: 1,
            txns: 8,
            epochs: None,
            fault: None,
            save_failing: None,
            tuning: Tuning::default(),
        }
    }
}

fn out_of_range(flag: &'static str, value: impl ToString, allowed: &str) -> ConfigError {
    ConfigError::OutOfRange { flag, value: value.to_string(), allowed: allowed.into() }
}

impl CampaignConfig {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !matches!(
            self.engine,
            EngineKind::Zen
                | EngineKind::Mmdb
                | EngineKind::Wbl
                | EngineKind::Falcon
                | EngineKind::Nvcaracal
        ) {
            return Err(ConfigError::EngineNotCrashCheckable { engine: self.engine.name() });
        }
        if let Some(f) = self.fault
            && f.engine() != self.engine
        {
            return Err(ConfigError::FaultOfOtherEngine {
                fault: f.name(),
                fault_engine: f.engine().name(),
                engine: self.engine.name(),
            });
        }
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(out_of_range("--threads", self.threads, "1..=4"));
        }
        if !(1..=MAX_RECOVERY_THREADS).contains(&self.recovery_threads) {
            return Err(out_of_range("--recovery-threads", self.recovery_threads, "1..=8"));
        }
        if self.txns == 0 || self.txns > 100_000 {
            return Err(out_of_range("--txns", self.txns, "1..=100000"));
        }
        if self.crash_points == 0 {
            return Err(out_of_range("--crash-points", 0, "at least 1"));
        }
        if self.images_per_point == 0 {
            return Err(out_of_range("--images-per-point", 0, "at least 1"));
        }
        if let Some(k) = self.epochs
            && !(1..=MAX_EPOCHS).contains(&k)
        {
            return Err(out_of_range("--epochs", k, "1..=64"));
        }
        if self.nested_depth > 4 {
            return Err(out_of_range("--nested-depth", self.nested_depth, "0..=4"));
        }
        let t = &self.tuning;
        for (flag, set) in [
            ("--nvcaracal-minor-gc", t.nvcaracal_minor_gc.is_some()),
            ("--nvcaracal-row-bytes", t.nvcaracal_row_bytes.is_some()),
        ] {
            if set && self.engine != EngineKind::Nvcaracal {
                return Err(ConfigError::KnobOfOtherEngine {
                    flag,
                    knob_engine: EngineKind::Nvcaracal.name(),
                    engine: self.engine.name(),
                });
            }
        }
        if let Some(bytes) = t.nvcaracal_row_bytes
            && zen_engine::baseline::nvcaracal::layout::check_row_bytes(bytes).is_err()
        {
            return Err(out_of_range(
                "--nvcaracal-row-bytes",
                bytes,
                "0 (inline-only) or a multiple of 64 in 64..=4096",
            ));
        }
        Ok(())
    }

    /// The flags that replay this campaign (after `zen crash-test`).
    pub fn replay_args(&self) -> String {
        let mut s = format!(
            "{} --engine {} --cc {} --mode {} --durability {} --crash-points {} --images-per-point {} --nested-depth {} --seed {} --threads {} --recovery-threads {} --txns {}",
            self.workload.name(),
            self.engine.name(),
            self.cc.name(),
            self.mode.name(),
            self.durability.name(),
            self.crash_points,
            self.images_per_point,
            self.nested_depth,
            self.seed,
            self.threads,
            self.recovery_threads,
            self.txns
        );
        if let Some(k) = self.epochs {
            s.push_str(&format!(" --epochs {k}"));
        }
        if let Some(minor) = self.tuning.nvcaracal_minor_gc {
            s.push_str(&format!(" --nvcaracal-minor-gc {}", if minor { "on" } else { "off" }));
        }
        if let Some(bytes) = self.tuning.nvcaracal_row_bytes {
            s.push_str(&format!(" --nvcaracal-row-bytes {bytes}"));
        }
        if let Some(f) = self.fault {
            s.push_str(&format!(" --inject-fault {}", f.name()));
        }
        s
    }

    /// nvcaracal's collector and row layout as the campaign runs them (the
    /// tuning, else the engine's defaults): "minor GC on, 256-byte rows";
    /// `None` for the other engines.
    pub fn nvcaracal_knobs(&self) -> Option<String> {
        if self.engine != EngineKind::Nvcaracal {
            return None;
        }
        let defaults = zen_engine::EngineConfig::default();
        let minor = self.tuning.nvcaracal_minor_gc.unwrap_or(defaults.nvcaracal_minor_gc);
        let rows = match self.tuning.nvcaracal_row_bytes.unwrap_or(defaults.nvcaracal_row_bytes) {
            0 => "inline-only rows (row bytes 0)".to_string(),
            r => format!("{r}-byte persistent rows"),
        };
        Some(format!("minor GC {}, {rows}", if minor { "on" } else { "off (major collector)" }))
    }

    /// "zen/silo", "mmdb".
    pub fn design(&self) -> String {
        match self.engine {
            EngineKind::Zen => format!("zen/{}", self.cc.name()),
            other => other.name().to_string(),
        }
    }

    pub(crate) fn domain(&self) -> PersistenceDomain {
        match self.mode {
            CrashMode::Eadr => PersistenceDomain::Eadr,
            CrashMode::Strict | CrashMode::Paranoid => PersistenceDomain::Adr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_round_trip() {
        for f in InjectedFault::all() {
            assert_eq!(InjectedFault::parse(&f.name()), Some(f));
        }
        assert_eq!(
            InjectedFault::parse("no_fence_before_lp"),
            Some(InjectedFault::Zen(Fault::NoFenceBeforeLp))
        );
        assert_eq!(
            InjectedFault::parse("wal-ack-before-flush"),
            Some(InjectedFault::Baseline(BaselineFault::WalAckBeforeFlush))
        );
        assert_eq!(InjectedFault::parse("nonsense"), None);
    }

    #[test]
    fn ideal_and_foreign_faults_are_refused_with_a_typed_reason() {
        let ideal = CampaignConfig { engine: EngineKind::Ideal, ..CampaignConfig::default() };
        assert_eq!(ideal.validate(), Err(ConfigError::EngineNotCrashCheckable { engine: "ideal" }));
        let foreign = CampaignConfig {
            engine: EngineKind::Mmdb,
            fault: Some(InjectedFault::Zen(Fault::TornLpWord)),
            ..CampaignConfig::default()
        };
        assert!(matches!(foreign.validate(), Err(ConfigError::FaultOfOtherEngine { .. })));
    }
}
