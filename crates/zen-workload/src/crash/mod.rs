//! The crash harness (VERIFICATION.md §1–2): one harness for every engine
//! that persists (Zen with each protocol, mmdb, wbl, falcon, nvcaracal), used by `zen
//! crash-test` and by the crash tests (`crates/zen-workload/tests/crash_*.rs`).
//!
//! What: [`run_campaign`] loads a small population of a [`Subject`] into an
//! engine on the crash simulator (64 KiB pages), records 1–4 workers running
//! it (each writing transaction also inserts its receipt,
//! `crash_receipts.rs`), crashes the recorded run just before fences (at
//! most `crash_points` of them), builds up to `images_per_point` strict,
//! paranoid or eADR images at each, recovers every image and applies the
//! oracle, in this order (the first violation stops the campaign and names
//! its [`Check`]):
//!
//! 1. the recorded run is free of persistence-lint errors ([`Check::Lint`]);
//! 2. recovery returns `Ok` ([`Check::Recovery`]); `check_invariants`
//!    holds ([`Check::Structure`]);
//! 3. each worker's surviving transactions are a prefix of what it
//!    committed ([`Check::ReceiptsNotPrefix`]), with the contents it wrote
//!    ([`Check::UnknownReceipt`]);
//! 4. every transaction acknowledged durable (`Marker::Ack`) before the
//!    crash point is present ([`Check::AckedLost`]);
//! 5. dependency closure: no surviving transaction read a version whose
//!    writer is absent ([`Check::DependencyNotClosed`]; `bank` and
//!    `list-append` record what they read in their receipts);
//! 6. the subject's rows equal what the surviving transactions wrote
//!    ([`Check::StateMismatch`]) and its own conditions hold
//!    ([`Check::WorkloadCheck`]: TPC-C 1–12, SmallBank's ledger);
//! 7. liveness: more transactions commit, their Tx-CTS above every
//!    surviving one, and the invariants hold again ([`Check::Liveness`]);
//! 8. idempotence: the first image(s) of every checked point are also
//!    crashed during their own recovery (`nested_points` spread crash
//!    points, `nested_images` images each, recursively to `nested_depth`),
//!    and each such recovery must reach the same logical state (a hash of
//!    every row) ([`Check::NestedRecovery`]).
//!
//! A panic anywhere (engine, subject, harness) is no violation: it is a
//! [`HarnessFailure`], which fails the test or the command and prints
//! itself. So "detected" in the bug-injection suite means the check meant
//! for the bug fired.
//!
//! Crash points: when the trace has more than `crash_points`, the end of
//! the trace is always checked, then the first crash point of every *fence
//! site* not yet covered, then points spread evenly over the trace. A fence
//! site is the signature of a fence: (stores, flushes, markers) that the
//! fencing thread issued since its own previous fence.
//!
//! Seeds: one seed drives each worker's requests, the image choice and the
//! nested crashes. With one worker a seed replays the same requests; with
//! more, the interleaving (and so the trace) differs from run to run. The
//! saved image (`save_failing`) is the exact reproducer.
//!
//! Epoch mode (`CampaignConfig::epochs`): for an engine with the
//! deterministic seam, the recorded run is epochs of one-shot transactions
//! and the oracle is the serial replay of the durable epochs (`epochs.rs`,
//! whose module docs list its checks).
//!
//! Modules: `config` (flags, tuning, faults), `violation` (what can be
//! found), `engines` (the seam: one registration per engine), `subject`
//! (the trait; YCSB, SmallBank, TPC-C), `bank`, `list_append`, `script`
//! (the subjects), `campaign` (record, crash, oracle, nested), `epochs`
//! (epoch mode), `report`.

mod campaign;
mod config;
mod engines;
mod epochs;
mod report;
mod subject;
mod violation;

pub mod bank;
pub mod list_append;
pub mod script;

pub use campaign::{LIVENESS_TXNS, PAGE_BYTES};
pub use config::{
    CampaignConfig, CrashWorkload, InjectedFault, MAX_EPOCHS, MAX_RECOVERY_THREADS, MAX_THREADS,
    Tuning,
};
pub use engines::{Registration, SimOpened, registration};
pub use report::{
    CampaignReport, EpochReport, Failure, FenceSites, ImageCounts, NestedCounts, Progress,
};
pub use subject::{Subject, Survivors, workload_check};
pub use violation::{
    CampaignError, Check, ConfigError, HarnessFailure, LintKind, TxnRef, Violation,
};

use crate::oneshot::OneShotWorkload;
use crate::smallbank::{SmallBank, SmallBankConfig};
use crate::tpcc::{Tpcc, TpccConfig, TpccSpec};
use crate::ycsb::{PaperMix, Ycsb, YcsbConfig};

/// Accounts of the `bank` population.
pub const BANK_ACCOUNTS: u64 = 8;
/// Lists of the `list-append` population.
pub const LISTS: u64 = 4;

/// Run a campaign of `cfg.workload` (not `Script`: see [`run_subject`]).
/// `Err` is a refused configuration or a harness failure; a violation is
/// `Ok` with `failures > 0`.
pub fn run_campaign(
    cfg: &CampaignConfig,
    progress: &mut dyn FnMut(Progress),
) -> Result<CampaignReport, CampaignError> {
    let population = |e: crate::Error| ConfigError::Population(e.to_string());
    let no_oneshot = || -> Result<CampaignReport, CampaignError> {
        Err(ConfigError::NoOneShotForm { workload: cfg.workload.name() }.into())
    };
    match cfg.workload {
        CrashWorkload::Bank | CrashWorkload::ListAppend if cfg.epochs.is_some() => no_oneshot(),
        CrashWorkload::Bank => {
            run_subject(cfg, &bank::Bank::new(BANK_ACCOUNTS).map_err(population)?, progress)
        }
        CrashWorkload::ListAppend => {
            run_subject(cfg, &list_append::ListAppend::new(LISTS).map_err(population)?, progress)
        }
        CrashWorkload::Ycsb => {
            let mut y = YcsbConfig::paper(64, PaperMix::WH, 0.6);
            y.requests = 4;
            run_either(cfg, &Ycsb::new(y).map_err(population)?, progress)
        }
        CrashWorkload::SmallBank => {
            let mut s = SmallBankConfig::new(64);
            s.hotspot_accounts = 8;
            run_either(cfg, &SmallBank::new(s).map_err(population)?, progress)
        }
        CrashWorkload::Tpcc => {
            let spec = TpccSpec {
                warehouses: 1,
                items: 20,
                customers_per_district: 10,
                orders_per_district: 10,
            };
            let tpcc = Tpcc::new(TpccConfig { spec, load_seed: cfg.seed }).map_err(population)?;
            run_either(cfg, &tpcc, progress)
        }
        CrashWorkload::Script => Err(ConfigError::Population(
            "a script campaign needs its script: call run_subject".into(),
        )
        .into()),
    }
}

/// A subject with a one-shot form: epoch mode when `cfg.epochs` is set.
fn run_either<S: Subject + OneShotWorkload>(
    cfg: &CampaignConfig,
    subject: &S,
    progress: &mut dyn FnMut(Progress),
) -> Result<CampaignReport, CampaignError> {
    if cfg.epochs.is_none() {
        return run_subject(cfg, subject, progress);
    }
    cfg.validate()?;
    let engine = registration(cfg.engine, cfg.cc)?;
    campaign::Campaign::new(cfg, engine, subject).run_epochs(progress)
}

/// Run a campaign of `subject` (the tests' scripts, or any [`Subject`]).
pub fn run_subject<S: Subject>(
    cfg: &CampaignConfig,
    subject: &S,
    progress: &mut dyn FnMut(Progress),
) -> Result<CampaignReport, CampaignError> {
    cfg.validate()?;
    if cfg.epochs.is_some() {
        return Err(ConfigError::NoOneShotForm { workload: cfg.workload.name() }.into());
    }
    let engine = registration(cfg.engine, cfg.cc)?;
    campaign::Campaign::new(cfg, engine, subject).run(progress)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::campaign::{select_points, spread};
    use super::*;

    #[test]
    fn point_selection_covers_sites_first_and_keeps_the_end() {
        let sigs = vec![(1, 1, 0), (1, 1, 0), (2, 1, 0), (1, 1, 0), (3, 0, 0), (1, 1, 0)];
        let all = select_points(&sigs, 100);
        assert_eq!(all.len(), 7);
        let three = select_points(&sigs, 3);
        assert_eq!(three.len(), 3);
        assert!(three.contains(&6) && three.contains(&0) && three.contains(&2), "{three:?}");
        assert_eq!(select_points(&sigs, 5).len(), 5);
        assert_eq!(spread(10, 3), BTreeSet::from([0, 4, 9]));
    }

    #[test]
    fn a_tiny_bank_campaign_passes_and_counts_what_it_did() {
        let cfg = CampaignConfig {
            crash_points: 12,
            images_per_point: 4,
            txns: 3,
            threads: 2,
            ..CampaignConfig::default()
        };
        let report = run_campaign(&cfg, &mut |_| {}).unwrap();
        assert!(report.passed(), "{}", report.render_text());
        assert_eq!(report.committed, 6);
        assert_eq!(report.crash_points_checked, 12);
        assert!(report.images.total >= 12 && report.nested.recoveries > 0, "{report:?}");
        assert!(report.fence_sites.hit <= report.fence_sites.total);
    }

    #[test]
    fn ideal_is_refused_with_a_typed_reason() {
        let cfg =
            CampaignConfig { engine: zen_engine::EngineKind::Ideal, ..CampaignConfig::default() };
        let err = run_campaign(&cfg, &mut |_| {}).unwrap_err();
        assert!(
            matches!(err, CampaignError::Config(ConfigError::EngineNotCrashCheckable { .. })),
            "{err}"
        );
        assert!(err.to_string().contains("persists nothing"), "{err}");
    }
}
