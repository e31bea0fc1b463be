//! Every workload on the Zen engine (DRAM backend) under every protocol of
//! `CcKind::ALL`: load, check the initial population, run the driver with
//! several workers, check again.
//!
//! These are the end-to-end guarantees the CLI relies on: TPC-C's initial
//! population satisfies all twelve consistency conditions and keeps them
//! through a run; SmallBank conserves money across concurrent workers; YCSB
//! keeps every field well-formed and its inserted keys dense.

use std::time::Duration;

use zen_engine::numa::{Binding, NumaConfig, NumaMode};
use zen_engine::{CcKind, Engine, EngineConfig, EngineKind, RaceFault};
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

/// SmallBank on 20 accounts with 2 workers for half a second: nearly every
/// transaction conflicts with the other worker's, so a race in a protocol's
/// write path shows up as money that is not conserved.
///
/// On a file pool (`fs`, in the temp directory) as `zen run` uses, so that
/// commits flush and fence while they hold their locks (`ideal`, which keeps
/// nothing, on DRAM). Unwidened, the session-21 race showed up in about 1
/// half-second run in 8 here, on `dram` and on `fs` alike.
fn hot_bank_run(
    engine: EngineKind,
    cc: CcKind,
    numa: bool,
    race_fault: Option<RaceFault>,
    seed: u64,
) -> CheckReport {
    let dir = tempfile::tempdir().unwrap();
    let mut placement = NumaConfig::default();
    if numa {
        // Zen+ local writes on two virtual nodes: every write of a record
        // homed on the other node moves it (N1), as a foreign write copies.
        placement.nodes = Some(2);
        placement.mode = NumaMode::LocalWrite;
        placement.binding = Binding::Even;
        placement.pin = false;
    }
    let pmem = if engine == EngineKind::Ideal {
        zen_pmem::BackendKind::Dram
    } else {
        zen_pmem::BackendKind::Fs
    };
    let config = EngineConfig {
        engine,
        numa: placement,
        cc,
        race_fault,
        pmem,
        pool: Some(dir.path().join("bank.pool")),
        create: true,
        pool_size_bytes: 64 << 20,
        page_size_bytes: 64 << 10,
        cache_size_bytes: 16 << 20,
        max_workers: 8,
        ..EngineConfig::default()
    };
    let engine = zen_engine::open(&config).expect("the engine opens");
    let bank = SmallBank::new(SmallBankConfig::new(20)).unwrap();
    bank.load(engine.as_ref(), 2).unwrap();
    let mut d = driver(2, 0, seed);
    d.stop = Stop::Duration(Duration::from_millis(500));
    let run = run_benchmark(engine.as_ref(), &bank, &d, &mut |_| {}).unwrap();
    assert!(run.stats.commits > 1000, "{} {}: {:?}", engine.name(), cc.name(), run.stats);
    engine.check_invariants().unwrap();
    bank.check(engine.as_ref()).unwrap()
}

/// Every protocol keeps SmallBank's money on 20 hot accounts, and so do
/// Zen+'s local writes for one protocol of each family and the baseline
/// engines. Silo lost updates until session 21 (`RaceFault::OwnLockOnCopyCounts`,
/// found by the process-kill test about once in 60 runs on 2,000 accounts).
#[test]
fn smallbank_on_twenty_hot_accounts_conserves_money_under_every_protocol() {
    for cc in CcKind::ALL {
        eprintln!("protocol: {}", cc.name());
        assert_passed(&hot_bank_run(EngineKind::Zen, cc, false, None, 21));
    }
    for cc in [CcKind::NoWait, CcKind::Silo, CcKind::Tictoc, CcKind::Mvcc, CcKind::Hstore] {
        eprintln!("protocol: {}, Zen+ local writes on 2 virtual nodes", cc.name());
        assert_passed(&hot_bank_run(EngineKind::Zen, cc, true, None, 22));
    }
    for engine in [EngineKind::Ideal, EngineKind::Mmdb, EngineKind::Wbl, EngineKind::Falcon] {
        eprintln!("engine: {}", engine.name());
        assert_passed(&hot_bank_run(engine, CcKind::Silo, false, None, 23));
    }
}

/// The run above does catch a lost update: with Silo's validation counting
/// a lock on the record's copy as its own (the session-21 bug put back, its
/// window widened by 2 µs), a half-second run loses money. Without the
/// widening about 1 run in 8 did here (6 of 6 one-second `zen run`s on 20
/// accounts before the fix); up to 10 runs are allowed.
#[test]
fn the_hot_bank_catches_silos_lost_update_through_a_copy() {
    let caught = (0..10).find(|&seed| {
        !hot_bank_run(
            EngineKind::Zen,
            CcKind::Silo,
            false,
            Some(RaceFault::OwnLockOnCopyCounts),
            seed,
        )
        .passed()
    });
    eprintln!("caught in run {caught:?}");
    assert!(caught.is_some(), "10 runs with the lost-update race on and money still conserved");
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
