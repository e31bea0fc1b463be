//! Helpers of the crash tests (`crash_*.rs`): every campaign goes through
//! `zen_workload::crash` (the one harness); these only size campaigns and
//! turn a harness failure (a panic anywhere in a campaign) into a failed
//! test that prints it.
#![allow(dead_code)]

use zen_engine::{CcKind, Durability, EngineKind};
use zen_pmem::sim::{CrashMode, seed_from_env};
use zen_workload::crash::{
    self, CampaignConfig, CampaignReport, CrashWorkload, Tuning, script::Script,
};

/// The three crash modes, in the order the tests run them.
pub const MODES: [CrashMode; 3] = [CrashMode::Strict, CrashMode::Paranoid, CrashMode::Eadr];

/// Recovery threads the campaigns rotate through (a campaign's recoveries,
/// nested ones included, all use one count).
pub const RECOVERY_THREADS: [usize; 3] = [1, 2, 4];

/// The recovery threads of the `i`-th campaign of a test, for `cc`: the
/// rotation starts one step further for each protocol, so the strict
/// (nested) campaigns of Silo, MVCC and the others recover with 1, 2 and 4
/// threads, and each mode sees every count.
pub fn recovery_threads(cc: CcKind, i: usize) -> usize {
    let start = match cc {
        CcKind::Silo => 0,
        CcKind::Mvcc => 1,
        _ => 2,
    };
    RECOVERY_THREADS[(start + i) % RECOVERY_THREADS.len()]
}

/// The seed of every campaign (`ZEN_SEED=… cargo test NAME` replays one).
pub fn seed() -> u64 {
    seed_from_env(0x5EED)
}

/// Run a campaign; a refused configuration or a harness failure fails the test.
pub fn run(cfg: &CampaignConfig) -> CampaignReport {
    let report = crash::run_campaign(cfg, &mut |_| {}).unwrap_or_else(|e| {
        panic!("{} on {} ({}): {e}", cfg.workload.name(), cfg.design(), cfg.mode.name())
    });
    eprintln!("  {} [{:.2} s]", report.summary_line(), report.record_s + report.check_s);
    report
}

/// Run a script campaign; a refused configuration or a harness failure fails the test.
pub fn run_script(cfg: &CampaignConfig, script: &Script) -> CampaignReport {
    let report = crash::run_subject(cfg, script, &mut |_| {}).unwrap_or_else(|e| {
        panic!("script {} on {} ({}): {e}", script.name, cfg.design(), cfg.mode.name())
    });
    eprintln!(
        "  {}: {} [{:.2} s]",
        script.name,
        report.summary_line(),
        report.record_s + report.check_s
    );
    report
}

/// Images per crash point of a scripted scenario, by mode.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    pub strict: u64,
    pub paranoid: u64,
    pub eadr: u64,
}

impl Budgets {
    /// Strict images are exhaustive within the budget (most points of the
    /// scenarios have fewer); paranoid and eADR images are sampled.
    pub const DEFAULT: Budgets = Budgets { strict: 64, paranoid: 16, eadr: 4 };

    pub fn of(self, mode: CrashMode) -> u64 {
        match mode {
            CrashMode::Strict => self.strict,
            CrashMode::Paranoid => self.paranoid,
            CrashMode::Eadr => self.eadr,
        }
    }
}

/// A scripted scenario's campaign: every crash point, the mode's budget per
/// point; in strict mode nested crashes (2 deep, 4 crash points of each
/// recovery, 2 images each) of the first image at the first and the last
/// crash point (the end of the run, as the old engine harness did).
pub fn script_config(
    engine: EngineKind,
    cc: CcKind,
    mode: CrashMode,
    budget: u64,
) -> CampaignConfig {
    CampaignConfig {
        workload: CrashWorkload::Script,
        engine,
        cc,
        mode,
        durability: Durability::Immediate,
        crash_points: u64::MAX,
        images_per_point: budget,
        nested_depth: if mode == CrashMode::Strict { 2 } else { 0 },
        seed: seed(),
        threads: 1,
        recovery_threads: 1,
        txns: 1,
        epochs: None,
        fault: None,
        save_failing: None,
        tuning: Tuning {
            nested_crash_points: Some(2),
            nested_images_per_point: 1,
            nested_points: 4,
            nested_images: 2,
            ..Tuning::default()
        },
    }
}

/// Run `script` on `engine`/`cc` in every mode with `budgets`, each under
/// `tweak` (the modes recover with the [`recovery_threads`] rotation);
/// every campaign must pass and see more crash points than the script has
/// transactions.
pub fn scenario(
    engine: EngineKind,
    cc: CcKind,
    script: &Script,
    budgets: Budgets,
    tweak: impl Fn(&mut CampaignConfig),
) -> Vec<CampaignReport> {
    let mut reports = Vec::new();
    for (i, mode) in MODES.into_iter().enumerate() {
        let mut cfg = script_config(engine, cc, mode, budgets.of(mode));
        cfg.threads = script.workers.len().max(1);
        cfg.recovery_threads = recovery_threads(cc, i);
        tweak(&mut cfg);
        let report = run_script(&cfg, script);
        assert!(report.passed(), "{}", report.render_text());
        assert!(
            report.crash_points_total > script.txns() as u64,
            "{}: too few crash points\n{}",
            script.name,
            report.render_text()
        );
        reports.push(report);
    }
    reports
}
