//! Every workload on the Zen engine (DRAM backend) under every protocol of
//! `CcKind::ALL`: load, check the initial population, run the driver with
//! several workers, check again.
//!
//! These are the end-to-end guarantees the CLI relies on: TPC-C's initial
//! population satisfies all twelve consistency conditions and keeps them
//! through a run; SmallBank conserves money across concurrent workers; YCSB
//! keeps every field well-formed and its inserted keys dense.

use std::time::Duration;

use zen_engine::{CcKind, Engine, EngineConfig};
use zen_workload::meta;
use zen_workload::{
    CheckReport, CoreWorkload, DriverConfig, Outcome, PaperMix, SmallBank, SmallBankConfig, Stop,
    Tpcc, TpccConfig, TpccSpec, Workload, WorkloadSpec, Ycsb, YcsbConfig, run_benchmark,
};

fn engine(cc: CcKind) -> Box<dyn Engine> {
    let config =
        EngineConfig { cc, cache_size_bytes: 64 << 20, max_workers: 8, ..EngineConfig::default() };
    zen_engine::open(&config).expect("a DRAM engine opens")
}

fn driver(threads: usize, txns: u64, seed: u64) -> DriverConfig {
    DriverConfig {
        threads,
        warmup: Duration::ZERO,
        stop: Stop::Transactions(txns),
        seed,
        ..DriverConfig::default()
    }
}

fn assert_passed(report: &CheckReport) {
    assert!(report.passed(), "{}", report.render_text());
}

fn small_tpcc(warehouses: u64) -> TpccSpec {
    TpccSpec { warehouses, items: 200, customers_per_district: 30, orders_per_district: 30 }
}

#[test]
fn tpcc_initial_population_satisfies_all_twelve_conditions() {
    for cc in CcKind::ALL {
        eprintln!("protocol: {}", cc.name());
        let engine = engine(cc);
        let tpcc = Tpcc::new(TpccConfig { spec: small_tpcc(2), load_seed: 1 }).unwrap();
        tpcc.load(engine.as_ref(), 2).unwrap();
        let report = tpcc.check(engine.as_ref()).unwrap();
        assert_passed(&report);
        assert_eq!(report.conditions.len(), 12);
        assert!(report.conditions.iter().all(|c| c.outcome == Outcome::Passed));
        engine.check_invariants().unwrap();
    }
}

#[test]
fn tpcc_conditions_hold_after_a_multi_threaded_run() {
    for cc in CcKind::ALL {
        eprintln!("protocol: {}", cc.name());
        let engine = engine(cc);
        let tpcc = Tpcc::new(TpccConfig { spec: small_tpcc(2), load_seed: 2 }).unwrap();
        tpcc.load(engine.as_ref(), 2).unwrap();
        let run = run_benchmark(engine.as_ref(), &tpcc, &driver(2, 3000, 5), &mut |_| {}).unwrap();
        let s = &run.stats;
        assert!(s.commits > 0 && s.per_type.iter().all(|t| t.commits > 0), "{s:?}");
        assert!(s.user_aborts > 0, "1 % of New-Orders roll back");
        let report = tpcc.check(engine.as_ref()).unwrap();
        assert_passed(&report);
        let c11 = report.conditions.iter().find(|c| c.id == "3.3.2.11").unwrap();
        assert!(matches!(c11.outcome, Outcome::Skipped { .. }), "Deliveries ran, so 11 is skipped");
        engine.check_invariants().unwrap();
    }
}

#[test]
fn smallbank_conserves_money_across_concurrent_workers() {
    for cc in CcKind::ALL {
        eprintln!("protocol: {}", cc.name());
        let engine = engine(cc);
        let mut config = SmallBankConfig::new(500);
        config.hotspot_accounts = 20;
        let bank = SmallBank::new(config).unwrap();
        bank.load(engine.as_ref(), 2).unwrap();
        assert_passed(&bank.check(engine.as_ref()).unwrap());
        let run = run_benchmark(engine.as_ref(), &bank, &driver(3, 6000, 9), &mut |_| {}).unwrap();
        assert_eq!(run.stats.commits + run.stats.user_aborts, 6000);
        assert_passed(&bank.check(engine.as_ref()).unwrap());
        let (net, events) = meta::ledger_totals(engine.as_ref()).unwrap();
        assert!(events > 0 && net != 0, "deposits and withdrawals were accounted");
    }
}

#[test]
fn ycsb_rows_stay_well_formed_and_inserts_dense() {
    for cc in CcKind::ALL {
        eprintln!("protocol: {}", cc.name());
        let engine = engine(cc);
        let ycsb = Ycsb::new(YcsbConfig::core(2000, CoreWorkload::D)).unwrap();
        ycsb.load(engine.as_ref(), 2).unwrap();
        let run = run_benchmark(engine.as_ref(), &ycsb, &driver(2, 4000, 3), &mut |_| {}).unwrap();
        assert!(run.stats.per_type[2].commits > 0, "workload D inserts");
        assert_passed(&ycsb.check(engine.as_ref()).unwrap());
        let paper = Ycsb::new(YcsbConfig::paper(2000, PaperMix::WH, 0.9)).unwrap();
        run_benchmark(engine.as_ref(), &paper, &driver(2, 1000, 4), &mut |_| {}).unwrap();
        assert_passed(&paper.check(engine.as_ref()).unwrap());
        assert_eq!(
            meta::read_spec(engine.as_ref()).unwrap(),
            WorkloadSpec::Ycsb(paper.config().spec.clone())
        );
    }
}

#[test]
fn a_timed_run_reports_its_measured_interval_and_samples() {
    for cc in CcKind::ALL {
        eprintln!("protocol: {}", cc.name());
        let engine = engine(cc);
        let ycsb = Ycsb::new(YcsbConfig::paper(1000, PaperMix::RH, 0.6)).unwrap();
        ycsb.load(engine.as_ref(), 1).unwrap();
        let config = DriverConfig {
            threads: 2,
            warmup: Duration::from_millis(200),
            stop: Stop::Duration(Duration::from_millis(600)),
            interval: Duration::from_millis(200),
            seed: 11,
            ..DriverConfig::default()
        };
        let mut samples = 0;
        let run = run_benchmark(engine.as_ref(), &ycsb, &config, &mut |_| samples += 1).unwrap();
        assert!((run.measured_s - 0.6).abs() < 0.15, "measured {}", run.measured_s);
        assert!(run.warmup_s >= 0.2);
        assert!(samples >= 3 && run.timeseries.iter().any(|s| s.phase == "warmup"));
        assert!(run.stats.commits > 0);
        assert!(run.nvm.bytes_written > 0, "updates persist to NVM");
    }
}

/// `load_parallel_by` registers its loaders in thread order before any
/// starts: on an engine with no other worker, thread `t` is worker `t` and
/// runs exactly the parts `owner` gives it (the driver registers its
/// workers the same way, so a workload's thread `t` runs as worker `t`).
#[test]
fn a_parallel_load_runs_each_part_as_the_worker_its_owner_names() {
    let engine = engine(CcKind::Silo);
    let seen = std::sync::Mutex::new(Vec::new());
    let owner = |part: usize, threads: usize| (part * 7 + 1) % threads;
    meta::load_parallel_by(engine.as_ref(), 3, 10, &owner, &|loader, part| {
        seen.lock().unwrap().push((part, loader.worker_id()));
        Ok(())
    })
    .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    assert_eq!(seen, (0..10).map(|p| (p, owner(p, 3))).collect::<Vec<_>>());
}
