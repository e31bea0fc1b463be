//! One-shot SmallBank on nvcaracal (`zen_workload::oneshot::smallbank`):
//! all six transaction types run as stored procedures with declared write
//! sets; the same seed gives the same outputs and the same final state on
//! 1, 2 and 4 workers with no concurrency-control aborts, and SmallBank's
//! own check (rows, conservation of money with the ledger, no negative
//! savings) holds after the epochs and after an epoch-driver run.

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use zen_engine::{Engine, EngineConfig, EngineKind, Error as EngineError};
use zen_pmem::BackendKind;
use zen_workload::oneshot::{OneShotWorkload, procedures, run_epochs};
use zen_workload::smallbank::{ACCOUNTS, CHECKING, SAVINGS, TXN_TYPES};
use zen_workload::{SmallBank, SmallBankConfig, Workload, meta};

fn engine() -> Box<dyn Engine> {
    zen_engine::open(&EngineConfig {
        engine: EngineKind::Nvcaracal,
        pmem: BackendKind::Dram,
        pool_size_bytes: 64 << 20,
        page_size_bytes: 64 << 10,
        nvcaracal_log_bytes: 4 << 20,
        max_workers: 8,
        procedures: procedures(),
        ..EngineConfig::default()
    })
    .unwrap()
}

fn bank() -> SmallBank {
    let mut c = SmallBankConfig::new(400);
    c.hotspot_accounts = 10;
    SmallBank::new(c).unwrap()
}

/// Rows as (table, key, bytes).
type State = Vec<(String, u64, Vec<u8>)>;

/// Every row of the bank's tables and the ledger.
fn state(engine: &dyn Engine) -> State {
    let mut out = Vec::new();
    for name in [ACCOUNTS, SAVINGS, CHECKING, meta::LEDGER_TABLE] {
        let t = meta::table(engine, name).unwrap();
        meta::scan_all(engine, t, 0..=zen_engine::schema::MAX_KEY, &mut |k, row| {
            out.push((name.to_string(), k, row.to_vec()));
            Ok(())
        })
        .unwrap();
    }
    out
}

/// Four epochs of 300 requests from seed 11 on `workers`; outputs, state.
fn run(workers: usize) -> (Vec<String>, State) {
    let e = engine();
    let b = bank();
    b.load(e.as_ref(), 1).unwrap();
    let det = e.deterministic().unwrap();
    let plan = b.plan(e.as_ref(), det.procedures()).unwrap();
    let mut local = b.local(e.as_ref(), 0, 1).unwrap();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut outputs = Vec::new();
    let mut per_type = [0u32; 6];
    let mut user_aborts = 0;
    for _ in 0..4 {
        let mut batch = Vec::new();
        for i in 0..300 {
            let request = b.next(&mut local, &mut rng);
            per_type[b.txn_type(&request)] += 1;
            batch.push(b.oneshot(&plan, &request, i).unwrap());
        }
        let out = det.submit_epoch(&batch, workers).unwrap();
        assert_eq!(out.stats.cc_aborts, 0, "{workers} workers: {:?}", out.stats);
        for r in &out.results {
            match r {
                Ok(v) => outputs.push(format!("ok {v:?}")),
                Err(EngineError::Abort(zen_engine::AbortReason::User)) => {
                    user_aborts += 1;
                    outputs.push("user abort".into());
                }
                Err(other) => panic!("{workers} workers: a procedure failed: {other}"),
            }
        }
        assert_eq!(out.stats.failed, out.results.iter().filter(|r| r.is_err()).count() as u64);
    }
    assert!(per_type.iter().all(|&n| n > 0), "every type ran: {per_type:?} of {TXN_TYPES:?}");
    assert!(user_aborts > 0, "send_payment from emptied hot accounts aborts");
    let report = b.check(e.as_ref()).unwrap();
    assert!(report.passed(), "{workers} workers:\n{}", report.render_text());
    let (net, events) = meta::ledger_totals(e.as_ref()).unwrap();
    assert!(events > 0 && net != 0, "deposits and checks went through the ledger");
    e.check_invariants().unwrap();
    let s = state(e.as_ref());
    e.close().unwrap();
    (outputs, s)
}

#[test]
fn one_shot_smallbank_is_deterministic_on_1_2_and_4_workers_and_conserves_money() {
    let (outputs, state) = run(1);
    for workers in [2, 4] {
        let (o, s) = run(workers);
        assert_eq!(o, outputs, "{workers} workers: other outputs");
        assert!(s == state, "{workers} workers: another final state");
    }
}

#[test]
fn the_epoch_driver_runs_smallbank_and_the_check_holds() {
    let e = engine();
    let b = bank();
    b.load(e.as_ref(), 1).unwrap();
    let result =
        run_epochs(e.as_ref(), &b, 200, 2, Duration::ZERO, Duration::from_millis(60), 5).unwrap();
    let epochs = result.epochs.clone().unwrap();
    assert!(epochs.epochs > 0 && epochs.cc_aborts == 0 && epochs.failed == 0, "{epochs:?}");
    assert_eq!(result.stats.commits, epochs.committed);
    assert_eq!(result.stats.user_aborts, epochs.user_aborts);
    assert!(epochs.transient_bytes_peak > 0 && epochs.rows_persisted < epochs.versions);
    assert!(b.check(e.as_ref()).unwrap().passed());
    e.close().unwrap();
}
