//! Crash-simulator campaigns for the Zen engine: the scenarios (the harness
//! and the oracle are in `crash/mod.rs`).

mod common;
mod crash;

use common::*;
use crash::*;
use zen_engine::Durability;

#[test]
fn crash_during_insert_update_delete() {
    campaign(
        "single",
        &[vec![(0, 20, Some(1), true)], vec![(0, 3, Some(7), false)], vec![(0, 4, None, false)]],
    );
}

#[test]
fn crash_during_multi_table_transactions() {
    campaign(
        "multi-table",
        &[
            vec![(0, 1, Some(50), false), (1, 1, Some(50), true), (0, 2, Some(150), false)],
            vec![(1, 1, None, false), (0, 5, Some(0), false), (1, 2, Some(3), true)],
        ],
    );
}

#[test]
fn crash_during_slot_reuse_after_gc_and_delete_then_reinsert() {
    let mut steps: Vec<Step> =
        (0..12).map(|i| vec![(0, 6, Some(i), false), (0, 7, Some(-i), false)]).collect();
    steps.push(vec![(0, 6, None, false)]);
    steps.push(vec![(0, 7, Some(5), false)]);
    steps.push(vec![(0, 6, Some(66), true)]);
    campaign("reuse", &steps);
}

#[test]
fn hazard_torn_header_on_slot_reuse() {
    // Hazard 1: slots are reused after GC; a crash while a reused slot is half
    // written must never show a new key with an old committed timestamp.
    let steps: Vec<Step> =
        (0..12).map(|i| vec![(0, 1, Some(i), false), (0, 2, Some(i), false)]).collect();
    run_scenario(&Scenario { paranoid_budget: 128, ..Scenario::one("torn-header", steps) });
}

#[test]
fn hazard_no_resurrection_after_many_versions_and_gc() {
    // Hazard 2: key 3 gets several versions, is deleted, then churn on other
    // keys lets GC reclaim the versions and the tombstone; key 3 must never
    // come back at any crash point.
    let mut steps: Vec<Step> = (0..4).map(|i| vec![(0, 3, Some(i), false)]).collect();
    steps.push(vec![(0, 3, None, false)]);
    steps.extend((0..12).map(|i| vec![(0, 5, Some(i), false)]));
    run_scenario(&Scenario::one("resurrection", steps));
}

#[test]
fn hazard_lazy_commits_are_acknowledged_only_after_a_fence() {
    // Hazard 3: under Lazy durability an acknowledgement (Ack marker) comes
    // only from the next fence; the oracle holds every acked commit durable
    // and the simulator's lint rejects an ack with pending stores.
    let steps: Vec<Step> = (0..6).map(|i| vec![(0, i, Some(i as i64 * 10), false)]).collect();
    run_scenario(&Scenario { durability: Durability::Lazy, ..Scenario::one("lazy", steps) });
}

#[test]
fn hazard_crash_during_page_allocation() {
    // Hazard 5: enough inserts to allocate new heap pages inside the trace.
    // The warm-up fills table 1's first page but for four slots, so the
    // recorded transactions allocate (and zero, and publish) a second page.
    let per_page =
        zen_engine::heap::slots_per_page(64 << 10, zen_engine::heap::slot_size(ROW)) as u64;
    let warm: Vec<Step> = (0..(per_page - 4) / 64)
        .map(|b| (0..64).map(|i| (1, 1000 + b * 64 + i, Some(1), true)).collect())
        .chain(std::iter::once(
            (((per_page - 4) / 64) * 64..per_page - 4)
                .map(|k| (1, 1000 + k, Some(1), true))
                .collect(),
        ))
        .collect();
    let steps: Vec<Step> =
        (0..3).map(|b| (0..3).map(|i| (1, 5000 + b * 3 + i, Some(2), true)).collect()).collect();
    run_scenario(&Scenario { warm, ..Scenario::one("page-alloc", steps) });
}

#[test]
fn crash_with_two_workers() {
    let worker = |base: u64| -> Vec<Step> {
        (0..6)
            .map(|i| {
                vec![(0, base, Some(i), false), (1, 500 + base * 10 + i as u64, Some(i), true)]
            })
            .collect()
    };
    run_scenario(&Scenario {
        name: "two-workers",
        warm: Vec::new(),
        workers: vec![worker(1), worker(2)],
        durability: Durability::Immediate,
        strict_budget: 128,
        paranoid_budget: 32,
        fault: None,
        alpha: None,
    });
}
