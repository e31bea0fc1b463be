//! Scripted crash campaigns of particular code paths, on the one harness
//! (`zen_workload::crash`, subject `script`): Zen (Silo and MVCC, Zen+
//! exclusive stages on MVCC and Hekaton), mmdb, wbl and falcon. Each scenario runs in
//! strict (every crash point, exhaustive within 256 images), paranoid and
//! eADR modes; the oracle holds each worker's keys to the model after
//! exactly its surviving transactions, every acknowledged one present, plus
//! structure, liveness and (strict) nested crashes of recovery two deep.
//!
//! These were `zen-engine/tests/zen_crash.rs`, `zen_adaptive.rs`'s crash
//! test and `baseline_crash.rs`, each on its own harness.

mod crash_common;

use crash_common::*;
use zen_engine::heap::{slot_size, slots_per_page};
use zen_engine::{CcKind, Durability, EngineKind};
use zen_pmem::sim::CrashMode;
use zen_workload::crash::script::{ROW_BYTES, Script, Step};

fn zen(script: &Script, budgets: Budgets) {
    for cc in [CcKind::Silo, CcKind::Mvcc] {
        scenario(EngineKind::Zen, cc, script, budgets, |c| c.tuning.pool_pages = Some(32));
    }
}

#[test]
fn zen_crash_during_insert_update_delete() {
    let steps =
        vec![vec![(0, 20, Some(1), true)], vec![(0, 3, Some(7), false)], vec![(0, 4, None, false)]];
    zen(&Script::one("single", steps), Budgets::DEFAULT);
}

#[test]
fn zen_crash_during_multi_table_transactions() {
    let steps = vec![
        vec![(0, 1, Some(50), false), (1, 1, Some(50), true), (0, 2, Some(150), false)],
        vec![(1, 1, None, false), (0, 5, Some(0), false), (1, 2, Some(3), true)],
    ];
    zen(&Script::one("multi-table", steps), Budgets::DEFAULT);
}

#[test]
fn zen_crash_during_slot_reuse_after_gc_and_delete_then_reinsert() {
    let mut steps: Vec<Step> =
        (0..12).map(|i| vec![(0, 6, Some(i), false), (0, 7, Some(-i), false)]).collect();
    steps.push(vec![(0, 6, None, false)]);
    steps.push(vec![(0, 7, Some(5), false)]);
    steps.push(vec![(0, 6, Some(66), true)]);
    zen(&Script::one("reuse", steps), Budgets::DEFAULT);
}

#[test]
fn zen_hazard_torn_header_on_slot_reuse() {
    // Hazard 1: slots are reused after GC; a crash while a reused slot is half
    // written must never show a new key with an old committed timestamp.
    let steps: Vec<Step> =
        (0..12).map(|i| vec![(0, 1, Some(i), false), (0, 2, Some(i), false)]).collect();
    zen(&Script::one("torn-header", steps), Budgets { paranoid: 32, ..Budgets::DEFAULT });
}

#[test]
fn zen_hazard_no_resurrection_after_many_versions_and_gc() {
    // Hazard 2: key 3 gets several versions, is deleted, then churn on other
    // keys lets GC reclaim the versions and the tombstone; key 3 must never
    // come back at any crash point.
    let mut steps: Vec<Step> = (0..4).map(|i| vec![(0, 3, Some(i), false)]).collect();
    steps.push(vec![(0, 3, None, false)]);
    steps.extend((0..12).map(|i| vec![(0, 5, Some(i), false)]));
    zen(&Script::one("resurrection", steps), Budgets::DEFAULT);
}

#[test]
fn zen_hazard_lazy_commits_are_acknowledged_only_after_a_fence() {
    // Hazard 3: under Lazy durability an acknowledgement (Ack marker) comes
    // only from the next fence; the oracle holds every acked commit durable
    // and the simulator's lint rejects an ack with pending stores.
    let steps: Vec<Step> = (0..6).map(|i| vec![(0, i, Some(i as i64 * 10), false)]).collect();
    let script = Script::one("lazy", steps);
    for cc in [CcKind::Silo, CcKind::Mvcc] {
        scenario(EngineKind::Zen, cc, &script, Budgets::DEFAULT, |c| {
            c.tuning.pool_pages = Some(32);
            c.durability = Durability::Lazy;
        });
    }
}

#[test]
fn zen_hazard_crash_during_page_allocation() {
    // Hazard 5: enough inserts to allocate new heap pages inside the trace.
    // The warm-up fills table 1's first page but for four slots, so the
    // recorded transactions allocate (and zero, and publish) a second page.
    let per_page = slots_per_page(64 << 10, slot_size(ROW_BYTES)) as u64;
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
    zen(&Script { warm, ..Script::one("page-alloc", steps) }, Budgets::DEFAULT);
}

#[test]
fn zen_crash_with_two_workers() {
    let worker = |base: u64| -> Vec<Step> {
        (0..6)
            .map(|i| {
                vec![(0, base, Some(i), false), (1, 500 + base * 10 + i as u64, Some(i), true)]
            })
            .collect()
    };
    let script =
        Script { workers: vec![worker(1), worker(2)], ..Script::one("two-workers", vec![]) };
    zen(&script, Budgets { strict: 64, paranoid: 16, eadr: 8 });
}

/// Parallel recovery crashed at its own fences. The scenarios above recover
/// with 1, 2 or 4 threads (`crash_common::recovery_threads`), but only their
/// Silo and MVCC strict campaigns crash recoveries, with 1 and 2 threads.
/// Here two workers' versions, tombstones and reused slots are recovered by
/// 4 threads (each with a page or two), and every checked crash point's
/// recovery is crashed at 6 of its fences, two levels deep.
#[test]
fn zen_recovery_on_four_threads_is_idempotent_under_nested_crashes() {
    let worker = |base: u64| -> Vec<Step> {
        let mut steps: Vec<Step> = (0..5)
            .map(|i| {
                vec![(0, base, Some(i), false), (1, 500 + base * 10 + i as u64, Some(i), true)]
            })
            .collect();
        steps.push(vec![(0, base, None, false), (1, 500 + base * 10, None, false)]);
        steps.push(vec![(0, base, Some(9), true)]);
        steps
    };
    let script = Script {
        workers: vec![worker(1), worker(2)],
        ..Script::one("four-recovery-threads", vec![])
    };
    for cc in [CcKind::Silo, CcKind::Mvcc] {
        let mut cfg = script_config(EngineKind::Zen, cc, zen_pmem::sim::CrashMode::Strict, 16);
        cfg.threads = 2;
        cfg.recovery_threads = 4;
        cfg.tuning.pool_pages = Some(32);
        cfg.tuning.nested_crash_points = Some(4);
        cfg.tuning.nested_points = 6;
        let report = run_script(&cfg, &script);
        assert!(report.passed(), "{}", report.render_text());
        assert!(report.nested.recoveries >= 24, "{}", report.render_text());
    }
}

/// Catalog rewrites while transactions run: a thread creates tables (each
/// a copy-on-write catalog page, a root switch and the old page's release)
/// while a worker commits transactions. Every crash image must recover to
/// the worker's surviving prefix and a catalog that holds the original
/// tables plus a prefix of the created ones; creating one more table and
/// committing into it must work; nested crashes of recovery change nothing.
#[test]
fn zen_crash_during_catalog_rewrites_while_transactions_run() {
    const CREATED: usize = 3;
    let steps: Vec<Step> = (0..6)
        .map(|i| vec![(0, i % 8, Some(200 + i as i64), false), (1, 700 + i, Some(i as i64), true)])
        .collect();
    for cc in [CcKind::Silo, CcKind::Mvcc] {
        let script =
            Script { create_tables: CREATED, ..Script::one("catalog-rewrites", steps.clone()) };
        scenario(
            EngineKind::Zen,
            cc,
            &script,
            Budgets { strict: 64, paranoid: 16, eadr: 8 },
            |c| c.tuning.pool_pages = Some(32),
        );
        // Crashes fell before, between and after the rewrites.
        let seen = script.catalog_seen.lock().unwrap().clone();
        assert!(
            seen[0] > 0 && seen[CREATED] > 0,
            "{}: images by created tables {seen:?}",
            cc.name()
        );
        eprintln!("catalog-rewrites/{}: images by number of created tables {seen:?}", cc.name());
    }
}

/// Crashes during Zen+ exclusive stages: α so small that every read-write
/// transaction of both workers is privileged, so each commit is followed by
/// the privileged reclamation of every worker's garbage (floors, zeroing,
/// page release).
#[test]
fn zen_crash_during_exclusive_stages_recovers() {
    let mut a: Vec<Step> =
        (0..5).map(|i| vec![(0, 1, Some(i), false), (0, 2, Some(-i), false)]).collect();
    a.push(vec![(0, 2, None, false)]);
    a.push(vec![(0, 2, Some(9), true)]);
    let b: Vec<Step> = (0..5u64).map(|i| vec![(1, 10 + i, Some(i as i64), true)]).collect();
    let script = Script { workers: vec![a, b], ..Script::one("exclusive", vec![]) };
    for cc in [CcKind::Mvcc, CcKind::Hekaton] {
        let reports = scenario(
            EngineKind::Zen,
            cc,
            &script,
            Budgets { strict: 32, paranoid: 8, eadr: 8 },
            |c| {
                c.tuning.pool_pages = Some(32);
                c.tuning.adaptive_alpha = Some(1e-9);
            },
        );
        for r in reports {
            assert!(r.adaptive_stage_switches.unwrap_or(0) > 0, "no exclusive stage ran: {r:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// mmdb and wbl. `ideal` has no campaign: it persists nothing and refuses to
// reopen a pool (the harness refuses it with a typed reason).

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

const BASELINE: Budgets = Budgets { strict: 64, paranoid: 12, eadr: 4 };

fn baseline(
    engine: EngineKind,
    script: &Script,
    budgets: Budgets,
    tweak: impl Fn(&mut zen_workload::crash::CampaignConfig),
) {
    scenario(engine, CcKind::Silo, script, budgets, |c| {
        c.tuning.pool_pages = Some(18);
        // As the old baseline harness: also the middle crash point, and its
        // third strict image (after "nothing pending" and "all of it" comes
        // one line partly applied: a torn tail for recovery to clean up).
        c.tuning.nested_crash_points = Some(3);
        c.tuning.nested_images_per_point = 3;
        tweak(c);
    });
}

#[test]
fn mmdb_crash_during_single_and_multi_table_transactions() {
    baseline(
        EngineKind::Mmdb,
        &Script { blobs: true, ..Script::one("single", single()) },
        BASELINE,
        |_| {},
    );
}

#[test]
fn mmdb_crash_with_two_workers() {
    let script =
        Script { blobs: true, workers: two_workers(), ..Script::one("two-workers", vec![]) };
    baseline(EngineKind::Mmdb, &script, Budgets { paranoid: 8, ..BASELINE }, |_| {});
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
    let script = Script { blobs: true, ..Script::one("nvm-rows", steps) };
    baseline(EngineKind::Mmdb, &script, BASELINE, |c| {
        c.tuning.dram_budget_bytes = Some(128);
        c.tuning.trace_from_open = true;
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
    let script = Script { blobs: true, warm: blobs_warm(), ..Script::one("checkpoints", steps) };
    baseline(EngineKind::Mmdb, &script, Budgets { paranoid: 6, ..BASELINE }, |_| {});
}

#[test]
fn mmdb_crash_during_a_transaction_spanning_log_pages() {
    // 20 rows of 4 KiB: one redo record of three fragments on three pages,
    // under one fence; no fragment may be replayed without the others.
    let big: Step = (0..20).map(|k| (2, 100 + k, Some(k as i64), true)).collect();
    let steps = vec![vec![(0, 1, Some(1), false)], big, vec![(0, 2, Some(2), false)]];
    let script = Script { blobs: true, ..Script::one("spanning", steps) };
    baseline(EngineKind::Mmdb, &script, Budgets { paranoid: 8, ..BASELINE }, |_| {});
}

#[test]
fn wbl_crash_during_single_and_multi_table_transactions() {
    baseline(
        EngineKind::Wbl,
        &Script { blobs: true, ..Script::one("single", single()) },
        BASELINE,
        |_| {},
    );
}

#[test]
fn wbl_crash_with_two_workers_sharing_group_commits() {
    let script =
        Script { blobs: true, workers: two_workers(), ..Script::one("two-workers", vec![]) };
    baseline(EngineKind::Wbl, &script, Budgets { paranoid: 6, ..BASELINE }, |c| {
        c.tuning.group_commit_interval_us = Some(50)
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
    let script = Script { blobs: true, ..Script::one("reuse", steps) };
    baseline(EngineKind::Wbl, &script, Budgets { paranoid: 8, ..BASELINE }, |_| {});
}

#[test]
fn wbl_crash_during_page_allocation_of_large_versions() {
    // 4 KiB versions: 15 to a page, so the updates (three versions each)
    // allocate a new heap page, then reuse reclaimed slots.
    let blobs = |i: i64| (0..3).map(move |k| (2, k, Some(20 * (i + 1) + k as i64), false));
    let steps: Vec<Step> = (0..5).map(|i| blobs(i).collect()).collect();
    let script = Script { blobs: true, warm: blobs_warm(), ..Script::one("pages", steps) };
    baseline(EngineKind::Wbl, &script, Budgets { paranoid: 6, ..BASELINE }, |_| {});
}

#[test]
fn wbl_crash_with_lazy_group_commit() {
    // Lazy commits are acknowledged only when a later record covers them;
    // the empty step is a sync (a forced record).
    let mut steps: Vec<Step> = (0..6).map(|i| vec![(0, i, Some(i as i64 * 10), false)]).collect();
    steps.insert(4, Vec::new());
    let script = Script { blobs: true, ..Script::one("lazy", steps) };
    baseline(EngineKind::Wbl, &script, BASELINE, |c| {
        c.durability = Durability::Lazy;
        c.tuning.group_commit_interval_us = Some(200);
    });
}

// ---------------------------------------------------------------------------
// falcon: small log windows, so the scenarios wrap the ring and overwrite
// old records (20 KiB holds the warm-up's four 4 KiB blob rows).

fn falcon(script: &Script, budgets: Budgets, window_bytes: u64) {
    baseline(EngineKind::Falcon, script, budgets, |c| {
        c.tuning.falcon_window_bytes = Some(window_bytes);
    });
}

#[test]
fn falcon_crash_during_single_and_multi_table_transactions() {
    falcon(&Script { blobs: true, ..Script::one("single", single()) }, BASELINE, 1024);
}

#[test]
fn falcon_crash_with_two_workers() {
    let script =
        Script { blobs: true, workers: two_workers(), ..Script::one("two-workers", vec![]) };
    falcon(&script, Budgets { paranoid: 8, ..BASELINE }, 1024);
}

#[test]
fn falcon_crash_while_the_window_wraps_over_blob_records() {
    // Three 4 KiB rows per transaction (12.4 KiB records) in a 20 KiB
    // window: every record overwrites the previous one's bytes, so under
    // ADR each commit first fences the write-backs of the one before.
    let blobs = |i: i64| (0..3).map(move |k| (2, k, Some(10 * (i + 1) + k as i64), false));
    let mut steps: Vec<Step> = (0..5).map(|i| blobs(i).collect()).collect();
    steps.push(vec![(2, 9, Some(9), true), (0, 7, None, false)]);
    let script = Script { blobs: true, warm: blobs_warm(), ..Script::one("wrap", steps) };
    falcon(&script, Budgets { paranoid: 6, ..BASELINE }, 20 << 10);
}

#[test]
fn falcon_crash_during_tombstone_reuse_and_reinsert() {
    // Key 3 is deleted (its tombstone reclaimed once durable, its slot
    // reused by key 8's insert), key 6 deleted and inserted again in place.
    let mut steps: Vec<Step> =
        (0..3).map(|i| vec![(0, 6, Some(i), false), (0, 3, Some(-i), false)]).collect();
    steps.push(vec![(0, 3, None, false)]);
    steps.extend((0..3).map(|i| vec![(0, 5, Some(i), false)]));
    steps.push(vec![(0, 8, Some(88), true)]);
    steps.push(vec![(0, 6, None, false)]);
    steps.push(vec![(0, 6, Some(66), true)]);
    let script = Script { blobs: true, ..Script::one("reuse", steps) };
    falcon(&script, Budgets { paranoid: 8, ..BASELINE }, 1024);
}

#[test]
fn falcon_crash_with_two_workers_and_reuse_under_no_wait_mvcc_and_to() {
    // falcon's other protocols (`occ/protocol.rs`): the persist path is
    // Silo's, but MVCC and TO commit with the timestamp drawn at begin and
    // keep deleted keys indexed until no transaction can read them (MVCC
    // also keeps old versions in DRAM), and no-wait holds 2PL locks to the
    // end (wait-die and dl-detect differ from it only in waiting:
    // crash_multi_worker runs them).
    let mut reuse: Vec<Step> =
        (0..3).map(|i| vec![(0, 6, Some(i), false), (0, 3, Some(-i), false)]).collect();
    reuse.push(vec![(0, 3, None, false)]);
    reuse.push(vec![(0, 8, Some(88), true)]);
    reuse.push(vec![(0, 6, None, false)]);
    reuse.push(vec![(0, 6, Some(66), true)]);
    let scripts = [
        Script { blobs: true, workers: two_workers(), ..Script::one("two-workers", vec![]) },
        Script { blobs: true, ..Script::one("reuse", reuse) },
    ];
    for cc in [CcKind::NoWait, CcKind::Mvcc, CcKind::To] {
        for script in &scripts {
            baseline(EngineKind::Falcon, script, Budgets { paranoid: 6, ..BASELINE }, |c| {
                c.cc = cc;
                c.tuning.falcon_window_bytes = Some(1024);
            });
        }
    }
}

#[test]
fn falcon_inp_crash_with_a_page_sized_log_under_eadr() {
    // The Inp variant (page-sized log, written back) in eADR mode only:
    // the other modes are ADR, where it behaves as the full design.
    let mut cfg = script_config(EngineKind::Falcon, CcKind::Silo, CrashMode::Eadr, 8);
    cfg.tuning.pool_pages = Some(18);
    cfg.tuning.falcon_variant = Some(zen_engine::FalconVariant::Inp);
    let script = Script { blobs: true, ..Script::one("inp", single()) };
    let report = run_script(&cfg, &script);
    assert!(report.passed(), "{}", report.render_text());
}
