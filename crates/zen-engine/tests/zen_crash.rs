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

/// Catalog rewrites while transactions run: one thread creates tables (each
/// a copy-on-write catalog page, a root switch and the old page's release)
/// while another commits transactions. Every crash image must recover to a
/// data state that is a prefix of the transactions (with every acknowledged
/// one) and a catalog that holds the original tables plus a prefix of the
/// created ones, each usable; creating one more table and committing into it
/// must work; nested crashes of recovery change nothing.
#[test]
fn crash_during_catalog_rewrites_while_transactions_run() {
    catalog_campaign::<zen_engine::cc::Silo>().unwrap_or_else(|e| panic!("{e}"));
    catalog_campaign::<zen_engine::cc::Mvcc>().unwrap_or_else(|e| panic!("{e}"));
}

fn extra_table(i: usize) -> zen_engine::TableSchema {
    zen_engine::TableSchema::new(format!("extra_{i}"))
        .column("amount", zen_engine::ColumnType::I64)
        .column("pad", zen_engine::ColumnType::Bytes(24))
}

fn catalog_campaign<P: zen_engine::cc::Protocol>() -> Result<(), String> {
    use zen_engine::{Engine, TxnOptions};
    use zen_pmem::PersistenceDomain;
    use zen_pmem::sim::{CheckPlan, CrashMode, SimBackend, seed_from_env};

    const CREATED: usize = 3;
    let name = format!("catalog-rewrites/{}", P::KIND.name());
    let steps: Vec<Step> = (0..6)
        .map(|i| vec![(0, i % 8, Some(200 + i as i64), false), (1, 700 + i, Some(i as i64), true)])
        .collect();
    let (backend, initial) = loaded_backend::<P>();
    let engine = recover_with::<P>(backend, &config::<P>(None)).unwrap();
    let id = {
        let e: &dyn Engine = &engine;
        engine.shared().pool.backend().reset_trace();
        let opts = TxnOptions {
            durability: Some(zen_engine::Durability::Immediate),
            ..Default::default()
        };
        let mut w = e.worker().unwrap();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for i in 0..CREATED {
                    e.create_table(&extra_table(i)).unwrap();
                }
            });
            for s in &steps {
                run_step_with(&mut w, s, &opts);
            }
        });
        w.id()
    };
    let keys = steps.iter().flatten().map(|&(t, k, _, _)| (t, k)).collect();
    let mut model = WorkerModel { id, keys, states: Vec::new() };
    let mut state = model.restrict(&initial);
    model.states.push(state.clone());
    for s in &steps {
        apply(&mut state, s);
        model.states.push(state.clone());
    }
    let models = [model];
    let pool = engine.into_pool().unwrap();
    let trace = pool.backend().trace();
    pool.abandon();
    if !trace.lints().is_clean() {
        return Err(format!("{name}: lints: {}", trace.lints().summary()));
    }
    let seed = seed_from_env(0x5EED);
    let mut created_seen = [0u64; CREATED + 1];
    for (mode, budget) in
        [(CrashMode::Strict, 128), (CrashMode::Paranoid, 32), (CrashMode::Eadr, 32)]
    {
        let stats = trace
            .check(CheckPlan::new(mode, budget, seed), |point, image| {
                let acked: Vec<u64> = point.acked_txns().collect();
                let backend = SimBackend::from_image(image.bytes.to_vec(), PersistenceDomain::Adr);
                let engine = recover::<P>(backend, None)?;
                let e: &dyn Engine = &engine;
                for original in ["accounts", "orders"] {
                    e.table_id(original).map_err(|x| format!("lost table {original}: {x}"))?;
                }
                let present: Vec<bool> =
                    (0..CREATED).map(|i| e.table_id(&format!("extra_{i}")).is_ok()).collect();
                let k = present.iter().take_while(|&&p| p).count();
                if present[k..].iter().any(|&p| p) {
                    return Err(format!("created tables are not a prefix: {present:?}"));
                }
                created_seen[k] += 1;
                let before = max_cts_in(&engine);
                oracle(&engine, &models, &acked, before)?;
                // Every recovered table is usable, and the catalog can grow.
                let next = e.create_table(&extra_table(k)).map_err(|x| format!("create: {x}"))?;
                let mut w = e.worker().map_err(|x| x.to_string())?;
                w.execute(&TxnOptions::default(), &mut |tx| tx.insert(next, 1, &row(1)))
                    .map_err(|x| format!("insert into a new table: {x}"))?;
                drop(w);
                e.check_invariants().map_err(|x| format!("structure after create: {x}"))?;
                engine.into_pool().unwrap().abandon();
                Ok(())
            })
            .map_err(|f| format!("{name} ({}): {f}", mode.name()))?;
        eprintln!(
            "{name} {}: {} crash points, {} images, 0 failures",
            mode.name(),
            stats.points,
            stats.images
        );
    }
    // Crashes fell before, between and after the rewrites.
    if created_seen[0] == 0 || created_seen[CREATED] == 0 {
        return Err(format!("{name}: images by created tables {created_seen:?}"));
    }
    eprintln!("{name}: images by number of created tables {created_seen:?}");
    nested::<P>(&name, &trace, seed, None)
}
