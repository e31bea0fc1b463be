//! One-shot TPC-C on nvcaracal (`zen_workload::oneshot::tpcc`): the five
//! transactions as stored procedures whose unknown keys (order ids,
//! customers by last name, the oldest undelivered orders, C_PAYMENT_CNT)
//! come from reconnaissance reads before each epoch. The same requests give
//! the same outputs and final state on 1, 2 and 4 workers with no cc aborts
//! and no re-submissions; TPC-C's consistency conditions hold after the
//! epochs, after the epoch driver, and after a crash past the seal
//! (revert + replay, secondary indexes rebuilt from the rows); a
//! reconnaissance made against an older state is caught by the procedures'
//! checks (`StaleReconnaissance`, nothing written) and the transaction runs
//! when re-submitted with a new one.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use zen_engine::schema::MAX_KEY;
use zen_engine::{Engine, EngineConfig, EngineKind, Error as EngineError};
use zen_pmem::BackendKind;
use zen_workload::oneshot::{OneShotWorkload, procedures, run_epochs};
use zen_workload::tpcc::{TXN_TYPES, TpccRequest, schema};
use zen_workload::{Tpcc, TpccConfig, TpccSpec, Workload, meta};

fn config(pmem: BackendKind, pool: Option<std::path::PathBuf>) -> EngineConfig {
    EngineConfig {
        engine: EngineKind::Nvcaracal,
        pmem,
        pool,
        pool_size_bytes: 96 << 20,
        page_size_bytes: 64 << 10,
        nvcaracal_log_bytes: 4 << 20,
        max_workers: 8,
        procedures: procedures(),
        ..EngineConfig::default()
    }
}

fn engine() -> Box<dyn Engine> {
    zen_engine::open(&config(BackendKind::Dram, None)).unwrap()
}

fn tpcc() -> Tpcc {
    Tpcc::new(TpccConfig {
        spec: TpccSpec {
            warehouses: 2,
            items: 200,
            customers_per_district: 30,
            orders_per_district: 30,
        },
        load_seed: 3,
    })
    .unwrap()
}

/// Rows as (table, key, bytes).
type State = Vec<(String, u64, Vec<u8>)>;

/// Every row of the nine tables. The load stamps C_SINCE, H_DATE,
/// O_ENTRY_D and OL_DELIVERY_D with the clock, so two loads differ there;
/// `dates: false` zeroes those columns (the dates of the run's own
/// transactions come from the shared requests).
fn state_of(engine: &dyn Engine, dates: bool) -> State {
    let mut out = Vec::new();
    for s in schema::tables() {
        let t = meta::table(engine, &s.name).unwrap();
        let date = match s.name.as_str() {
            schema::customer::NAME => Some(schema::customer::SINCE),
            schema::history::NAME => Some(schema::history::DATE),
            schema::orders::NAME => Some(schema::orders::ENTRY_D),
            schema::order_line::NAME => Some(schema::order_line::DELIVERY_D),
            _ => None,
        };
        meta::scan_all(engine, t, 0..=MAX_KEY, &mut |k, row| {
            let mut row = row.to_vec();
            if let (Some(at), false) = (date, dates) {
                row[at..at + 8].fill(0);
            }
            out.push((s.name.clone(), k, row));
            Ok(())
        })
        .unwrap();
    }
    out
}

fn state(engine: &dyn Engine) -> State {
    state_of(engine, true)
}

/// `epochs` batches of `size` requests from `seed` (drawn once, so their
/// dates are the same for every engine they are given to).
fn requests(
    t: &Tpcc,
    engine: &dyn Engine,
    epochs: usize,
    size: usize,
    seed: u64,
) -> Vec<Vec<TpccRequest>> {
    let mut local = t.local(engine, 0, 1).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..epochs).map(|_| (0..size).map(|_| t.next(&mut local, &mut rng)).collect()).collect()
}

fn loaded() -> (Box<dyn Engine>, Tpcc) {
    let e = engine();
    let t = tpcc();
    t.load(e.as_ref(), 2).unwrap();
    (e, t)
}

/// Run `batches` on `workers`; outputs (as text) and the final state.
fn run(batches: &[Vec<TpccRequest>], workers: usize) -> (Vec<String>, State) {
    let (e, t) = loaded();
    let det = e.deterministic().unwrap();
    let plan = t.plan(e.as_ref(), det.procedures()).unwrap();
    let (mut outputs, mut per_type, mut user_aborts) = (Vec::new(), [0u32; 5], 0);
    for requests in batches {
        let batch = t.batch(e.as_ref(), &plan, requests).unwrap();
        let out = det.submit_epoch(&batch, workers).unwrap();
        assert_eq!(out.stats.cc_aborts, 0, "{workers} workers: {:?}", out.stats);
        for (r, request) in out.results.iter().zip(requests) {
            match r {
                Ok(v) => {
                    per_type[t.txn_type(request)] += 1;
                    outputs.push(format!("ok {v:?}"));
                }
                Err(EngineError::Abort(zen_engine::AbortReason::User)) => {
                    user_aborts += 1;
                    outputs.push("user abort".into());
                }
                Err(other) => panic!("{workers} workers: {request:?} failed: {other}"),
            }
        }
    }
    assert!(per_type.iter().all(|&n| n > 0), "every type committed: {per_type:?} of {TXN_TYPES:?}");
    assert!(user_aborts > 0, "New-Orders with an unused item roll back: {per_type:?}");
    let report = t.check(e.as_ref()).unwrap();
    assert!(report.passed(), "{workers} workers:\n{}", report.render_text());
    let (_, deliveries) = meta::ledger_totals(e.as_ref()).unwrap();
    assert!(deliveries > 0, "Deliveries committed and counted");
    e.check_invariants().unwrap();
    let s = state_of(e.as_ref(), false);
    e.close().unwrap();
    (outputs, s)
}

#[test]
fn one_shot_tpcc_is_deterministic_on_1_2_and_4_workers_and_consistent() {
    let (e, t) = loaded();
    let batches = requests(&t, e.as_ref(), 3, 400, 22);
    e.close().unwrap();
    let (outputs, state) = run(&batches, 1);
    for workers in [2, 4] {
        let (o, s) = run(&batches, workers);
        assert_eq!(o, outputs, "{workers} workers: other outputs");
        assert!(s == state, "{workers} workers: another final state");
    }
}

#[test]
fn a_stale_reconnaissance_writes_nothing_and_runs_when_resubmitted() {
    let (e, t) = loaded();
    let det = e.deterministic().unwrap();
    let plan = t.plan(e.as_ref(), det.procedures()).unwrap();
    let batches = requests(&t, e.as_ref(), 1, 300, 5);
    // Two reconnaissances of the same requests against the same state: the
    // second batch's predictions are stale once the first has run.
    let first = t.batch(e.as_ref(), &plan, &batches[0]).unwrap();
    let second = t.batch(e.as_ref(), &plan, &batches[0]).unwrap();
    assert_eq!(first, second);
    let out = det.submit_epoch(&first, 2).unwrap();
    assert!(out.results.iter().all(|r| matches!(r, Ok(_) | Err(EngineError::Abort(_)))));
    let before = state(e.as_ref());
    let out = det.submit_epoch(&second, 2).unwrap();
    let mut stale_types = [0u32; 5];
    let mut again = Vec::new();
    for (r, request) in out.results.iter().zip(&batches[0]) {
        match r {
            Err(EngineError::StaleReconnaissance { detail }) => {
                assert!(!detail.is_empty());
                stale_types[t.txn_type(request)] += 1;
                again.push(request.clone());
            }
            Ok(_) | Err(EngineError::Abort(zen_engine::AbortReason::User)) => {}
            Err(other) => panic!("{request:?}: {other}"),
        }
    }
    assert_eq!(out.stats.cc_aborts, 0);
    // The second batch repeats the first: every New-Order (order id),
    // Payment (payment count) and Delivery (oldest order) depends on what
    // the first changed, so all of them are stale, and they wrote nothing.
    let mut writers = [0u32; 5];
    for r in &batches[0] {
        writers[t.txn_type(r)] += 1;
    }
    assert!(writers[0] > 0 && writers[1] > 0 && writers[3] > 0, "{writers:?}");
    assert_eq!(
        [stale_types[0], stale_types[1], stale_types[3]],
        [writers[0], writers[1], writers[3]],
        "{stale_types:?} of {writers:?}"
    );
    assert!(state(e.as_ref()) == before, "stale transactions wrote nothing");
    let report = t.check(e.as_ref()).unwrap();
    assert!(report.passed(), "{}", report.render_text());
    // Re-submitted with a new reconnaissance, they all run.
    let batch = t.batch(e.as_ref(), &plan, &again).unwrap();
    let out = det.submit_epoch(&batch, 2).unwrap();
    for (r, request) in out.results.iter().zip(&again) {
        assert!(
            matches!(r, Ok(_) | Err(EngineError::Abort(zen_engine::AbortReason::User))),
            "{request:?}: {r:?}"
        );
    }
    assert!(t.check(e.as_ref()).unwrap().passed());
    e.check_invariants().unwrap();
    e.close().unwrap();
}

#[test]
fn the_epoch_driver_runs_tpcc_and_the_check_holds() {
    let (e, t) = loaded();
    let result =
        run_epochs(e.as_ref(), &t, 250, 2, Duration::ZERO, Duration::from_millis(80), 9).unwrap();
    let epochs = result.epochs.clone().unwrap();
    assert!(epochs.epochs > 0 && epochs.cc_aborts == 0 && epochs.failed == 0, "{epochs:?}");
    assert_eq!(epochs.resubmitted, 0, "synchronous epochs predict exactly: {epochs:?}");
    assert!(epochs.recon_us > 0.0 && epochs.exec_us > 0.0, "{epochs:?}");
    assert_eq!(result.stats.commits, epochs.committed);
    assert!(t.check(e.as_ref()).unwrap().passed());
    e.close().unwrap();
}

#[test]
fn a_crash_after_the_seal_replays_tpcc_and_rebuilds_the_secondary_indexes() {
    use zen_engine::DeterministicEngine;
    use zen_engine::baseline::NvcaracalEngine;
    use zen_engine::baseline::nvcaracal::layout;
    use zen_pmem::FsBackend;
    let dir = tempfile::tempdir().unwrap();
    let c = EngineConfig {
        create: true,
        ..config(BackendKind::Fs, Some(dir.path().join("tpcc.pool")))
    };
    let engine = NvcaracalEngine::<FsBackend>::create(&c).unwrap();
    let t = tpcc();
    t.load(&engine, 2).unwrap();
    let plan = t.plan(&engine, engine.procedures()).unwrap();
    for requests in requests(&t, &engine, 2, 300, 13) {
        let batch = t.batch(&engine, &plan, &requests).unwrap();
        engine.submit_epoch(&batch, 2).unwrap();
    }
    let expected = state(&engine);
    let durable = engine.durable_epoch();
    // The crash: the last epoch's rows and seal are durable, its mark is not.
    let meta_at = engine.pool().page_offset(engine.meta_page());
    let pool = engine.into_pool().unwrap();
    let p = pool.persister(0);
    p.write_u64_atomic(meta_at + layout::META_EPOCH, durable - 1);
    p.persist(meta_at + layout::META_EPOCH, 8);
    pool.abandon();
    let reopened = zen_engine::open(&EngineConfig { create: false, ..c }).unwrap();
    let report = reopened.recovery_report().unwrap();
    let phase = |n: &str| report.phases.iter().find(|p| p.name == n).unwrap().tuples;
    assert_eq!(phase("replay"), 300, "{report:?}");
    assert!(phase("revert") > 0, "{report:?}");
    assert!(state(reopened.as_ref()) == expected, "replay reaches the crashed run's state");
    // (N4): every secondary index holds one entry per row, with its key.
    reopened.check_invariants().unwrap();
    let checked = t.check(reopened.as_ref()).unwrap();
    assert!(checked.passed(), "{}", checked.render_text());
    // Reconnaissance (by-name lookups, orders by customer) works on the
    // rebuilt indexes.
    let det = reopened.deterministic().unwrap();
    let plan = t.plan(reopened.as_ref(), det.procedures()).unwrap();
    let more = requests(&t, reopened.as_ref(), 1, 300, 14).remove(0);
    let batch = t.batch(reopened.as_ref(), &plan, &more).unwrap();
    let out = det.submit_epoch(&batch, 2).unwrap();
    assert!(out.results.iter().all(|r| matches!(r, Ok(_) | Err(EngineError::Abort(_)))));
    assert!(t.check(reopened.as_ref()).unwrap().passed());
    reopened.close().unwrap();
}
