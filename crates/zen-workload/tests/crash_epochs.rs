//! Epoch-mode crash campaigns (`zen_workload::crash`, `--epochs`): one-shot
//! TPC-C, SmallBank and YCSB submitted to nvcaracal in epochs through its
//! deterministic seam, crashed inside the epochs' phases (input log, seal,
//! row persist, epoch mark; init and exec write nothing to NVM unless the
//! major collector runs in init) in strict, paranoid and eADR modes with
//! nested crashes, with the minor garbage collector (the default: TPC-C's
//! final writes delete stale versions in the row-persist phase the crashes
//! cut) and with the major collector instead. After every recovery the
//! rows must equal the serial replay of the durable epochs, every
//! acknowledged epoch must be durable, and the workload's conditions hold
//! (`crash/epochs.rs`). The bug injections of epoch mode are in
//! `crash_bug_injection.rs`.

mod crash_common;

use crash_common::*;
use zen_engine::{CcKind, Durability, EngineKind};
use zen_pmem::sim::CrashMode;
use zen_workload::crash::{
    self, CampaignConfig, CampaignError, CampaignReport, ConfigError, CrashWorkload, EpochReport,
    Tuning,
};

/// A tiny epoch campaign of `workload` on nvcaracal.
fn epochs(workload: CrashWorkload, mode: CrashMode, threads: usize) -> CampaignConfig {
    CampaignConfig {
        workload,
        engine: EngineKind::Nvcaracal,
        cc: CcKind::Silo,
        mode,
        durability: Durability::Immediate,
        threads,
        recovery_threads: 1,
        txns: 6,
        epochs: Some(3),
        crash_points: 24,
        images_per_point: if mode == CrashMode::Strict { 8 } else { 4 },
        nested_depth: 1,
        seed: seed(),
        // Strict: every checked point's first image is also crashed during
        // its recovery (the replays included); the others at 4 points.
        tuning: Tuning {
            nested_crash_points: if mode == CrashMode::Strict { None } else { Some(4) },
            ..Tuning::default()
        },
        ..CampaignConfig::default()
    }
}

fn phase(e: &EpochReport, name: &str) -> u64 {
    e.points_by_phase.get(name).copied().unwrap_or(0)
}

/// The epoch campaign of each case, its config tuned by `tune`: every
/// recovery must pass, every campaign nest crashes, lint cleanly and
/// recover an unacknowledged epoch; `check` asserts the rest of each
/// passing campaign's report. Violations are collected and shown together.
fn campaigns(
    cases: &[(CrashWorkload, CrashMode, usize)],
    tune: impl Fn(&mut CampaignConfig),
    check: impl Fn(CrashWorkload, &CampaignReport, &EpochReport),
) {
    let mut violations = Vec::new();
    for &(workload, mode, threads) in cases {
        let mut cfg = epochs(workload, mode, threads);
        tune(&mut cfg);
        let report = run(&cfg);
        if !report.passed() {
            violations.push(report.summary_line());
            continue;
        }
        let e = report.epochs.as_ref().expect("an epoch campaign reports its epochs");
        assert!(report.lint_errors == 0 && report.nested.recoveries > 0, "{report:?}");
        assert!(e.recovered_unacked > 0, "{e:?}");
        check(workload, &report, e);
    }
    assert!(violations.is_empty(), "{} violations:\n{}", violations.len(), violations.join("\n"));
}

#[test]
fn one_shot_epochs_recover_to_the_serial_replay_of_the_durable_epochs() {
    let cases = [
        (CrashWorkload::Tpcc, CrashMode::Strict, 2),
        (CrashWorkload::Tpcc, CrashMode::Paranoid, 2),
        (CrashWorkload::Tpcc, CrashMode::Eadr, 1),
        (CrashWorkload::SmallBank, CrashMode::Strict, 2),
        (CrashWorkload::SmallBank, CrashMode::Eadr, 2),
        (CrashWorkload::Ycsb, CrashMode::Paranoid, 2),
    ];
    campaigns(
        &cases,
        |_| {},
        |workload, report, e| {
            eprintln!(
                "    {}",
                report.render_text().lines().skip(2).take(3).collect::<Vec<_>>().join(" | ")
            );
            assert_eq!(e.epochs, 3);
            assert_eq!(report.committed + report.user_aborts + e.stale, 18, "{report:?}");
            assert_eq!(e.stale, 0, "synchronous epochs predict exactly");
            for p in ["input-log", "seal", "row-persist", "epoch-mark"] {
                assert!(phase(e, p) > 0, "{}: no crash point in phase {p}: {e:?}", workload.name());
            }
            // Both outcomes of a crashed epoch were seen: lost (recovery ends
            // before it) and kept (replayed from its logged inputs, or marked).
            assert!(e.recovered_to_epoch.len() >= 3, "{e:?}");
            // Per row the paper's collector (the default 256-byte persistent
            // rows): TPC-C's small rows (warehouse: 101 bytes; orders, order
            // lines, …) are inline and collected by final writes in the
            // row-persist phase; its larger ones (district 113, stock 318,
            // customer 691 bytes: over the 104-byte inline heap) are in the value
            // pool and collected by the major collector in the init phase, where
            // crash points lie too (inside the collection and the fence that
            // persists the values' deletions before execution). SmallBank's
            // rows are inline (only the driver's spec row, in its meta table,
            // is pooled).
            match workload {
                CrashWorkload::Tpcc => {
                    assert!(e.gc_minor > 0, "TPC-C rewrites its warehouses every epoch: {e:?}");
                    assert!(e.gc_major > 0 && phase(e, "init") > 0, "pooled TPC-C rows: {e:?}");
                }
                CrashWorkload::SmallBank => assert!(e.gc_minor > 0, "{e:?}"),
                _ => {}
            }
        },
    );
}

/// With the minor collector off, the major collector deletes the previous
/// epoch's stale versions in each init phase: crash points lie there too,
/// and every recovery (the scan lists the slots with two versions again)
/// still reaches the serial replay of the durable epochs.
#[test]
fn epochs_with_the_major_collector_recover_to_the_serial_replay() {
    let cases = [
        (CrashWorkload::Tpcc, CrashMode::Strict, 2),
        (CrashWorkload::SmallBank, CrashMode::Paranoid, 2),
        (CrashWorkload::Tpcc, CrashMode::Eadr, 1),
    ];
    let minor_off = |cfg: &mut CampaignConfig| cfg.tuning.nvcaracal_minor_gc = Some(false);
    campaigns(&cases, minor_off, |workload, _, e| {
        assert_eq!(e.gc_minor, 0, "every final write found an empty version: {e:?}");
        assert!(e.gc_major > 0, "{}: {e:?}", workload.name());
        for p in ["input-log", "seal", "init", "row-persist", "epoch-mark"] {
            assert!(phase(e, p) > 0, "{}: no crash point in phase {p}: {e:?}", workload.name());
        }
    });
}

/// Inline-only rows (`nvcaracal_row_bytes` 0: no value pool, every
/// version in its slot): the minor collector alone with minor GC on, and
/// the same recoveries as with the pool.
#[test]
fn inline_only_epochs_recover_to_the_serial_replay() {
    let cases =
        [(CrashWorkload::Tpcc, CrashMode::Strict, 2), (CrashWorkload::Tpcc, CrashMode::Eadr, 1)];
    let inline_only = |cfg: &mut CampaignConfig| cfg.tuning.nvcaracal_row_bytes = Some(0);
    campaigns(&cases, inline_only, |_, _, e| {
        assert!(e.gc_minor > 0 && e.gc_major == 0, "inline rows, minor GC on: {e:?}");
    });
}

#[test]
fn epoch_mode_refuses_workloads_without_a_one_shot_form_and_engines_without_the_seam() {
    let bank = CampaignConfig {
        workload: CrashWorkload::Bank,
        ..epochs(CrashWorkload::Bank, CrashMode::Strict, 1)
    };
    let err = crash::run_campaign(&bank, &mut |_| {}).unwrap_err();
    assert!(
        matches!(err, CampaignError::Config(ConfigError::NoOneShotForm { workload: "bank" })),
        "{err}"
    );
    let zen = CampaignConfig {
        engine: EngineKind::Zen,
        ..epochs(CrashWorkload::SmallBank, CrashMode::Strict, 1)
    };
    let err = crash::run_campaign(&zen, &mut |_| {}).unwrap_err();
    assert!(
        matches!(err, CampaignError::Config(ConfigError::NotDeterministic { engine: "zen" })),
        "{err}"
    );
    assert!(err.to_string().contains("--epochs"), "{err}");
    let many =
        CampaignConfig { epochs: Some(65), ..epochs(CrashWorkload::Tpcc, CrashMode::Strict, 1) };
    assert!(matches!(many.validate(), Err(ConfigError::OutOfRange { flag: "--epochs", .. })));
}
