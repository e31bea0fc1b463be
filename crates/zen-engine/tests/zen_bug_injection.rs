//! The bug-injection suite (VERIFICATION §1): each `Fault` breaks the
//! persistence protocol in one known way; the crash campaign of
//! `crash/mod.rs` must catch every one. Prints "k/k injected bugs detected".

mod common;
mod crash;

use std::panic::{AssertUnwindSafe, catch_unwind};

use crash::*;
use zen_engine::cc::Silo;
use zen_engine::{Durability, Fault};

fn scenario(fault: Fault) -> Scenario<'static> {
    let single = || {
        Scenario::one(
            "single",
            vec![
                vec![(0, 20, Some(1), true)],
                vec![(0, 3, Some(7), false), (0, 5, Some(8), false)],
                vec![(0, 4, None, false)],
            ],
        )
    };
    let sc = match fault {
        Fault::NoFenceBeforeLp
        | Fault::AckBeforeLpFence
        | Fault::TornLpWord
        | Fault::SkipFlushes => single(),
        Fault::RecoveryTombstonesFirst => single(),
        Fault::ReuseWithoutZeroing => {
            // Key 1's old slots are reclaimed; key 2 (last written at load)
            // then gets one of them: a torn write must not pass key 2 off
            // with key 1's newer, committed timestamp.
            let mut steps: Vec<Step> = (0..8).map(|i| vec![(0, 1, Some(i), false)]).collect();
            steps.extend((0..2).map(|i| vec![(0, 2, Some(50 + i), false)]));
            Scenario { paranoid_budget: 256, ..Scenario::one("reuse", steps) }
        }
        Fault::EarlyTombstone => {
            let mut steps: Vec<Step> = (0..4).map(|i| vec![(0, 3, Some(i), false)]).collect();
            steps.push(vec![(0, 3, None, false)]);
            steps.extend((0..12).map(|i| vec![(0, 5, Some(i), false)]));
            Scenario::one("resurrection", steps)
        }
        Fault::LazyDependencyUnflushed => {
            unreachable!("needs cross-worker reads: checked by the multi-worker lazy campaigns")
        }
        Fault::NoCommitFloor => Scenario {
            // Worker 0 commits a row of each table before recording (the LP
            // goes to table 0, first in persist order); worker 1 then
            // supersedes that row, so recovery zeroes worker 0's newest LP slot.
            name: "floor",
            warm: vec![vec![(0, 1, Some(5), false), (1, 2, Some(6), true)]],
            workers: vec![vec![], vec![vec![(0, 1, Some(7), false)]]],
            durability: Durability::Immediate,
            strict_budget: 64,
            paranoid_budget: 16,
            fault: None,
            alpha: None,
        },
    };
    Scenario { fault: Some(fault), ..sc }
}

/// The faults whose scenarios fit this harness (workers own disjoint keys).
const SINGLE_KEY_OWNER: [Fault; 8] = [
    Fault::NoFenceBeforeLp,
    Fault::AckBeforeLpFence,
    Fault::TornLpWord,
    Fault::ReuseWithoutZeroing,
    Fault::EarlyTombstone,
    Fault::SkipFlushes,
    Fault::RecoveryTombstonesFirst,
    Fault::NoCommitFloor,
];

#[test]
fn every_injected_bug_is_detected() {
    // The correct protocol passes the same scenarios (the control).
    for fault in SINGLE_KEY_OWNER {
        let control = Scenario { fault: None, ..scenario(fault) };
        campaign_with::<Silo>(&control)
            .unwrap_or_else(|e| panic!("control for {fault:?} failed: {e}"));
    }
    let mut detected = Vec::new();
    let mut missed = Vec::new();
    for fault in SINGLE_KEY_OWNER {
        let sc = scenario(fault);
        let outcome = catch_unwind(AssertUnwindSafe(|| campaign_with::<Silo>(&sc)));
        match outcome {
            Ok(Err(why)) => {
                eprintln!("{fault:?}: detected: {}", why.lines().next().unwrap_or(""));
                detected.push(fault);
            }
            Err(_) => {
                eprintln!("{fault:?}: detected (the engine panicked on the corrupted state)");
                detected.push(fault);
            }
            Ok(Ok(())) => missed.push(fault),
        }
    }
    eprintln!("{}/{} injected bugs detected", detected.len(), SINGLE_KEY_OWNER.len());
    assert!(missed.is_empty(), "injected bugs not detected: {missed:?}");
}
