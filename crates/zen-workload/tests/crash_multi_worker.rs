//! Multi-worker crash campaigns with cross-worker reads, for every design
//! that persists: Zen with each of the ten protocols, mmdb, wbl, falcon with each of its six and nvcaracal; each in
//! strict, paranoid and eADR modes (the one harness, `zen_workload::crash`);
//! and TPC-C on nvcaracal (its secondary indexes rebuilt by recovery).
//!
//! Per design:
//! - `bank` and `list-append` with **lazy** commits (a commit is durable at
//!   its worker's next fence) on 2–4 workers (by design, so every count is
//!   covered): transactions read versions other workers wrote, maybe not yet
//!   durable; the oracle requires every surviving transaction's read-from
//!   predecessors to have survived (dependency closure) and every
//!   acknowledged transaction to be present. This is issue 15's hole: a
//!   Zen reader must flush its writer's LP line before its own fence.
//! - `bank` with **immediate** commits on 2 workers (the old
//!   `zen_crash_bank.rs`, now with read-from checked too).
//!
//! Each workload recovers with 1, 2 and 4 threads across the three modes
//! (`crash_common::recovery_threads`).
//!
//! Every campaign of a design runs; the test fails listing each violation
//! with the check that fired. `zen crash-test … --durability lazy --threads
//! 4` runs the longer sizes (README, Reliability).

mod crash_common;

use crash_common::*;
use zen_engine::{CcKind, Durability, EngineKind};
use zen_pmem::sim::CrashMode;
use zen_workload::crash::{CampaignConfig, CrashWorkload, Tuning};

/// Campaigns of one design (module docs); panics listing every violation.
fn design(engine: EngineKind, cc: CcKind, lazy_threads: usize) {
    let mut violations = Vec::new();
    let mut runs = Vec::new();
    for (m, mode) in MODES.into_iter().enumerate() {
        runs.push((CrashWorkload::Bank, Durability::Lazy, lazy_threads, mode, m));
        runs.push((CrashWorkload::ListAppend, Durability::Lazy, lazy_threads, mode, m + 1));
        runs.push((CrashWorkload::Bank, Durability::Immediate, 2, mode, m + 2));
    }
    for (workload, durability, threads, mode, rotation) in runs {
        let cfg = CampaignConfig {
            workload,
            engine,
            cc,
            mode,
            durability,
            threads,
            recovery_threads: recovery_threads(cc, rotation),
            txns: 6,
            crash_points: 16,
            images_per_point: if mode == CrashMode::Strict { 6 } else { 4 },
            nested_depth: 1,
            seed: seed(),
            tuning: Tuning { nested_crash_points: Some(1), ..Tuning::default() },
            ..CampaignConfig::default()
        };
        let report = run(&cfg);
        if report.passed() {
            assert!(report.committed > 0 && report.images.total >= report.crash_points_checked);
        } else {
            violations.push(report.summary_line());
        }
    }
    assert!(violations.is_empty(), "{} violations:\n{}", violations.len(), violations.join("\n"));
}

#[test]
fn zen_no_wait() {
    design(EngineKind::Zen, CcKind::NoWait, 2);
}
#[test]
fn zen_wait_die() {
    design(EngineKind::Zen, CcKind::WaitDie, 3);
}
#[test]
fn zen_dl_detect() {
    design(EngineKind::Zen, CcKind::DlDetect, 4);
}
#[test]
fn zen_occ() {
    design(EngineKind::Zen, CcKind::Occ, 2);
}
#[test]
fn zen_silo() {
    design(EngineKind::Zen, CcKind::Silo, 3);
}
#[test]
fn zen_tictoc() {
    design(EngineKind::Zen, CcKind::Tictoc, 4);
}
#[test]
fn zen_mvcc() {
    design(EngineKind::Zen, CcKind::Mvcc, 2);
}
#[test]
fn zen_hekaton() {
    design(EngineKind::Zen, CcKind::Hekaton, 3);
}
#[test]
fn zen_cicada() {
    design(EngineKind::Zen, CcKind::Cicada, 4);
}
#[test]
fn zen_hstore() {
    design(EngineKind::Zen, CcKind::Hstore, 2);
}
#[test]
fn mmdb() {
    design(EngineKind::Mmdb, CcKind::Silo, 4);
}
#[test]
fn wbl() {
    design(EngineKind::Wbl, CcKind::Silo, 3);
}

#[test]
fn falcon() {
    design(EngineKind::Falcon, CcKind::Silo, 2);
}

#[test]
fn nvcaracal() {
    design(EngineKind::Nvcaracal, CcKind::Silo, 4);
}

/// TPC-C on nvcaracal (through its `Engine` adapter, one epoch per
/// transaction; secondary indexes rebuilt by each recovery) with immediate
/// commits, strict and eADR images, nested crashes: its consistency
/// conditions and every acknowledged transaction after each recovery.
#[test]
fn nvcaracal_tpcc() {
    let mut violations = Vec::new();
    for mode in [CrashMode::Strict, CrashMode::Eadr] {
        let cfg = CampaignConfig {
            workload: CrashWorkload::Tpcc,
            engine: EngineKind::Nvcaracal,
            cc: CcKind::Silo,
            mode,
            durability: Durability::Immediate,
            threads: 2,
            recovery_threads: 1,
            txns: 5,
            crash_points: 10,
            images_per_point: 4,
            nested_depth: 1,
            seed: seed(),
            tuning: Tuning { nested_crash_points: Some(1), ..Tuning::default() },
            ..CampaignConfig::default()
        };
        let report = run(&cfg);
        if report.passed() {
            assert!(report.committed > 0 && report.images.total >= report.crash_points_checked);
        } else {
            violations.push(report.summary_line());
        }
    }
    assert!(violations.is_empty(), "{} violations:\n{}", violations.len(), violations.join("\n"));
}
#[test]
fn falcon_no_wait() {
    design(EngineKind::Falcon, CcKind::NoWait, 2);
}
#[test]
fn falcon_mvcc() {
    design(EngineKind::Falcon, CcKind::Mvcc, 2);
}
#[test]
fn falcon_to() {
    design(EngineKind::Falcon, CcKind::To, 3);
}
#[test]
fn falcon_wait_die() {
    design(EngineKind::Falcon, CcKind::WaitDie, 3);
}
#[test]
fn falcon_dl_detect() {
    design(EngineKind::Falcon, CcKind::DlDetect, 4);
}
