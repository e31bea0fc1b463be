//! Crash-simulator campaigns for the persistent baselines, mmdb and wbl (the
//! harness and the oracle are in `baseline_common/crash.rs`), and the
//! injected bugs they must catch.
//!
//! `ideal` has no campaign: it persists nothing and refuses to reopen a pool
//! (`--engine ideal` needs `--pmem dram` and `create: true`), so there is no
//! crash state to recover and nothing for the oracle to check.

mod baseline_common;

use baseline_common::crash::*;
use zen_engine::{BaselineFault, Durability};

fn single() -> Vec<Step> {
    vec![
        vec![(0, 20, Some(1), true)],
        vec![(0, 3, Some(7), false), (0, 5, Some(8), false)],
        vec![(0, 4, None, false)],
        vec![(0, 1, Some(50), false), (1, 1, Some(50), true), (0, 2, Some(150), false)],
        vec![(1, 1, None, false), (0, 6, Some(0), false), (1, 2, Some(3), true)],
    ]
}

fn two_workers() -> Vec<Vec<Step>> {
    let worker = |base: u64| -> Vec<Step> {
        (0..4)
            .map(|i| {
                vec![(0, base, Some(i), false), (1, 500 + base * 10 + i as u64, Some(i), true)]
            })
            .collect()
    };
    vec![worker(1), worker(2)]
}

fn blobs_warm() -> Vec<Step> {
    vec![(0..4).map(|k| (2, k, Some(k as i64), true)).collect()]
}

fn run<S: Subject>(sc: &Scenario) {
    campaign_with::<S>(sc, true).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn mmdb_crash_during_single_and_multi_table_transactions() {
    run::<Mmdb>(&Scenario::one("single", single()));
}

#[test]
fn mmdb_crash_with_two_workers() {
    run::<Mmdb>(&Scenario {
        workers: two_workers(),
        strict_budget: 256,
        paranoid_budget: 16,
        ..Scenario::one("two-workers", Vec::new())
    });
}

#[test]
fn mmdb_crash_with_rows_in_nvm_as_volatile_memory() {
    // A 128-byte DRAM budget: 4 rows fit, the rest (and every new key) live
    // in NVM pages used as volatile memory, with their TID copies. Recovery
    // must ignore and release those pages and rebuild from the log alone;
    // the trace starts at the loaded pool's recovery (so recovery itself is
    // crashed too), since pending volatile stores forbid a trace reset.
    let mut steps = single();
    steps.push(vec![(0, 7, Some(70), false), (1, 900, Some(9), true)]);
    run::<Mmdb>(&Scenario {
        dram_budget_bytes: Some(128),
        trace_from_open: true,
        ..Scenario::one("nvm-rows", steps)
    });
}

#[test]
fn mmdb_crash_around_checkpoints_and_log_truncation() {
    // Three 4 KiB rows per transaction: a log page holds five such records,
    // so the updates below roll the log over a page; each empty step is a
    // checkpoint, which truncates the pages it covers and releases the
    // previous checkpoint.
    let blobs = |i: i64| (0..3).map(move |k| (2, k, Some(10 * (i + 1) + k as i64), false));
    let mut steps: Vec<Step> = (0..6).map(|i| blobs(i).collect()).collect();
    steps.push(Vec::new());
    steps.extend((0..3).map(|i| vec![(0, i, Some(-(i as i64)), false)]));
    steps.push(Vec::new());
    steps.push(vec![(2, 9, Some(9), true), (0, 7, None, false)]);
    run::<Mmdb>(&Scenario {
        warm: blobs_warm(),
        strict_budget: 256,
        paranoid_budget: 8,
        ..Scenario::one("checkpoints", steps)
    });
}

#[test]
fn mmdb_crash_during_a_transaction_spanning_log_pages() {
    // 20 rows of 4 KiB: one redo record of three fragments on three pages,
    // under one fence; no fragment may be replayed without the others.
    let big: Step = (0..20).map(|k| (2, 100 + k, Some(k as i64), true)).collect();
    run::<Mmdb>(&Scenario {
        strict_budget: 256,
        paranoid_budget: 16,
        ..Scenario::one(
            "spanning",
            vec![vec![(0, 1, Some(1), false)], big, vec![(0, 2, Some(2), false)]],
        )
    });
}

#[test]
fn wbl_crash_during_single_and_multi_table_transactions() {
    run::<Wbl>(&Scenario::one("single", single()));
}

#[test]
fn wbl_crash_with_two_workers_sharing_group_commits() {
    run::<Wbl>(&Scenario {
        workers: two_workers(),
        group_commit_interval_us: 50,
        strict_budget: 256,
        paranoid_budget: 8,
        ..Scenario::one("two-workers", Vec::new())
    });
}

#[test]
fn wbl_crash_during_slot_reuse_tombstones_and_reinsert() {
    // Key 6 gets many versions (reclaimed and reused once a record covers
    // them), key 3 is deleted (its tombstone may go only after its older
    // versions), then key 6 is deleted and inserted again.
    let mut steps: Vec<Step> =
        (0..5).map(|i| vec![(0, 6, Some(i), false), (0, 3, Some(-i), false)]).collect();
    steps.push(vec![(0, 3, None, false)]);
    steps.extend((0..4).map(|i| vec![(0, 5, Some(i), false)]));
    steps.push(vec![(0, 6, None, false)]);
    steps.push(vec![(0, 6, Some(66), true)]);
    run::<Wbl>(&Scenario { paranoid_budget: 16, ..Scenario::one("reuse", steps) });
}

#[test]
fn wbl_crash_during_page_allocation_of_large_versions() {
    // 4 KiB versions: 15 to a page, so the updates (three versions each)
    // allocate a new heap page, then reuse reclaimed slots.
    let blobs = |i: i64| (0..3).map(move |k| (2, k, Some(20 * (i + 1) + k as i64), false));
    let steps: Vec<Step> = (0..5).map(|i| blobs(i).collect()).collect();
    run::<Wbl>(&Scenario {
        warm: blobs_warm(),
        strict_budget: 256,
        paranoid_budget: 8,
        ..Scenario::one("pages", steps)
    });
}

#[test]
fn wbl_crash_with_lazy_group_commit() {
    // Lazy commits are acknowledged only when a later record covers them;
    // the empty step is a sync (a forced record).
    let mut steps: Vec<Step> = (0..6).map(|i| vec![(0, i, Some(i as i64 * 10), false)]).collect();
    steps.insert(4, Vec::new());
    run::<Wbl>(&Scenario {
        durability: Durability::Lazy,
        group_commit_interval_us: 200,
        ..Scenario::one("lazy", steps)
    });
}

/// The scenario each injected bug is run on.
fn bug_scenario(fault: BaselineFault) -> Scenario {
    let steps = single().into_iter().take(3).collect();
    Scenario {
        fault: Some(fault),
        strict_budget: 64,
        paranoid_budget: 16,
        ..Scenario::one("bug", steps)
    }
}

fn check_bug<S: Subject>(fault: BaselineFault) {
    let sc = bug_scenario(fault);
    // The control: the correct protocol passes the same scenario.
    campaign_with::<S>(&Scenario { fault: None, ..sc.clone() }, true)
        .unwrap_or_else(|e| panic!("control for {fault:?} failed: {e}"));
    // The oracle alone must catch the bug (lints ignored) ...
    let found = campaign_with::<S>(&sc, false).expect_err("the injected bug went unnoticed");
    eprintln!("{fault:?}: detected by the oracle: {}", found.lines().next().unwrap_or(""));
    // ... and the simulator's lint flags the early acknowledgement too.
    let (_, _, lints) = record::<S>(&sc);
    assert!(!lints.is_empty(), "{fault:?}: the acked-with-pending lint stayed silent");
}

#[test]
fn every_injected_baseline_bug_is_detected() {
    let mut detected = 0;
    for fault in BaselineFault::ALL {
        match fault.engine() {
            zen_engine::EngineKind::Mmdb => check_bug::<Mmdb>(fault),
            zen_engine::EngineKind::Wbl => check_bug::<Wbl>(fault),
            other => panic!("{fault:?} belongs to {other:?}"),
        }
        detected += 1;
    }
    eprintln!("{detected}/{} injected baseline bugs detected", BaselineFault::ALL.len());
}
