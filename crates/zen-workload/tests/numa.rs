//! Zen+ NUMA end to end on two virtual nodes (docs/design/numa.md):
//! NUMA-local writes never write remote memory (N1, via the counters), the
//! placements the counters classify are the ones each mode promises, and
//! routing, placement and penalties leave the committed data unchanged.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zen_engine::numa::{NumaConfig, NumaMode};
use zen_engine::{CcKind, Engine, EngineConfig, TxnOptions};
use zen_workload::{
    DriverConfig, PaperMix, SmallBank, SmallBankConfig, Stop, Tpcc, TpccConfig, TpccSpec, Workload,
    Ycsb, YcsbConfig, run_benchmark,
};

fn numa(mode: NumaMode, penalty_ns: u64) -> NumaConfig {
    NumaConfig {
        nodes: Some(2),
        mode,
        workers: Some(2),
        pin: false,
        remote_penalty_ns: penalty_ns,
        remap_interval_ms: 5,
        ..NumaConfig::default()
    }
}

fn engine(cc: CcKind, numa: NumaConfig) -> Box<dyn Engine> {
    engine_with_cache(cc, numa, 64 << 20)
}

fn engine_with_cache(cc: CcKind, numa: NumaConfig, cache_size_bytes: u64) -> Box<dyn Engine> {
    let config =
        EngineConfig { cc, cache_size_bytes, max_workers: 4, numa, ..EngineConfig::default() };
    zen_engine::open(&config).expect("a DRAM engine opens")
}

fn driver(txns: u64, seed: u64) -> DriverConfig {
    DriverConfig {
        threads: 2,
        warmup: Duration::ZERO,
        stop: Stop::Transactions(txns),
        seed,
        ..DriverConfig::default()
    }
}

fn small_tpcc() -> Tpcc {
    let spec =
        TpccSpec { warehouses: 4, items: 200, customers_per_district: 30, orders_per_district: 30 };
    Tpcc::new(TpccConfig { spec, load_seed: 1 }).unwrap()
}

fn ycsb() -> Ycsb {
    Ycsb::new(YcsbConfig::paper(4000, PaperMix::WH, 0.9)).unwrap()
}

fn smallbank() -> SmallBank {
    SmallBank::new(SmallBankConfig::new(2000)).unwrap()
}

/// Load, run 1500 transactions on 2 workers, check; returns the engine.
fn run_on<W: Workload>(workload: &W, cc: CcKind, mode: NumaMode) -> Box<dyn Engine> {
    let engine = engine(cc, numa(mode, 0));
    workload.load(engine.as_ref(), 2).unwrap();
    let run = run_benchmark(engine.as_ref(), workload, &driver(1500, 7), &mut |_| {}).unwrap();
    assert!(run.stats.commits > 0);
    let numa = run.numa.expect("a NUMA-aware run reports its accesses");
    assert!(numa.measured.local_reads + numa.measured.remote_reads > 0);
    assert_eq!(numa.route.is_some(), mode == NumaMode::SoftPartition);
    let report = workload.check(engine.as_ref()).unwrap();
    assert!(report.passed(), "{}", report.render_text());
    engine
}

/// N1 for one protocol in one local-write mode: load and run included,
/// every row either engine wrote went to the writer's node, under every
/// protocol (the in-place ones move a tuple homed on the other node into the
/// writer's region; the multi-version ones put an insert above a foreign
/// absent entry; none falls back to an in-place install).
fn assert_no_remote_write(cc: CcKind, mode: NumaMode) {
    for (name, engine) in [
        ("ycsb", run_on(&ycsb(), cc, mode)),
        ("tpcc", run_on(&small_tpcc(), cc, mode)),
        ("smallbank", run_on(&smallbank(), cc, mode)),
    ] {
        let stats = engine.numa_stats().unwrap();
        let t = stats.total;
        assert_eq!(t.remote_writes, 0, "{name} under {} in {mode:?}: {stats:?}", cc.name());
        assert!(t.local_writes > 0);
        // Every worker that ran wrote to its own node. The run is a shared
        // budget of 1,500 transactions: under a loaded machine one worker
        // can finish it before the other is scheduled (seen once in a full
        // suite), and a worker that ran nothing has nothing to show.
        let ran = |w: &zen_engine::numa::NumaCounters| w.local_reads + w.remote_reads > 0;
        assert!(
            stats.workers.iter().filter(|w| ran(w)).all(|w| w.local_writes > 0),
            "{name}: {stats:?}"
        );
        let workers_ran = stats.workers.iter().filter(|w| ran(w)).count();
        assert!(workers_ran > 0);
        // The zero is not for lack of sharing: with both workers running,
        // each also used rows homed on the other node. A lone worker may
        // have read only rows of its own node (seen once in a full suite:
        // SmallBank under OCC, one worker ran the whole budget, 0 remote
        // reads), so the check needs two.
        if workers_ran > 1 {
            assert!(t.remote_reads > 0, "{name} under {}: {stats:?}", cc.name());
        }
        if mode == NumaMode::SoftPartition {
            assert!(stats.remap_rounds > 0 || name == "smallbank", "{name}: Alg. 4 ran");
        }
    }
}

#[test]
fn soft_partitioning_never_writes_remote_memory() {
    for cc in CcKind::ALL {
        assert_no_remote_write(cc, NumaMode::SoftPartition);
    }
}

#[test]
fn local_writes_never_write_remote_memory() {
    for cc in CcKind::ALL {
        assert_no_remote_write(cc, NumaMode::LocalWrite);
    }
}

#[test]
fn a_full_cache_region_never_makes_a_write_remote() {
    // A Met-Cache a fraction of YCSB's data: regions evict all the time, so
    // moving a tuple to the writer's region must find its entry by evicting
    // (or abort and retry), never fall back to an in-place remote install.
    let w = ycsb();
    for cc in [CcKind::NoWait, CcKind::Tictoc, CcKind::Hstore, CcKind::Silo, CcKind::Mvcc] {
        let engine = engine_with_cache(cc, numa(NumaMode::LocalWrite, 0), 256 << 10);
        w.load(engine.as_ref(), 2).unwrap();
        let run = run_benchmark(engine.as_ref(), &w, &driver(1500, 9), &mut |_| {}).unwrap();
        assert!(run.stats.commits > 0);
        assert!(run.stats.cache.evictions > 0, "{}: the cache is small enough", cc.name());
        let t = engine.numa_stats().unwrap().total;
        assert_eq!(t.remote_writes, 0, "{} with a full cache: {t:?}", cc.name());
        let report = w.check(engine.as_ref()).unwrap();
        assert!(report.passed(), "{}", report.render_text());
    }
}

#[test]
fn naive_placement_still_writes_in_place_remotely() {
    // Moving tuples is for the modes that promise local writes: under
    // `naive`, 2PL still installs in place wherever the tuple is cached,
    // so about half of its writes stay remote, as before.
    let naive = run_on(&ycsb(), CcKind::NoWait, NumaMode::Naive).numa_stats().unwrap().total;
    assert!(naive.remote_writes * 4 > naive.local_writes, "{naive:?}");
}

#[test]
fn each_mode_homes_memory_where_it_promises() {
    let w = ycsb();
    // naive: interleaved memory, so writes land remote about half the time.
    let naive = run_on(&w, CcKind::Silo, NumaMode::Naive).numa_stats().unwrap().total;
    assert!(naive.remote_writes > 0 && naive.local_writes > 0, "{naive:?}");
    // local-write: no remote writes, remote reads of the other node's data.
    let lw = run_on(&w, CcKind::Silo, NumaMode::LocalWrite).numa_stats().unwrap().total;
    assert_eq!(lw.remote_writes, 0);
    assert!(lw.remote_reads > 0, "{lw:?}");
    // remote: workers on node 0, memory on node 1: nothing is local.
    let remote = run_on(&w, CcKind::Silo, NumaMode::Remote).numa_stats().unwrap().total;
    assert_eq!((remote.local_reads, remote.local_writes), (0, 0), "{remote:?}");
    // local: everything on node 0: nothing is remote.
    let local = run_on(&w, CcKind::Silo, NumaMode::Local).numa_stats().unwrap().total;
    assert_eq!((local.remote_reads, local.remote_writes), (0, 0), "{local:?}");
}

/// (table, key, row) of every committed row.
type Rows = Vec<(String, u64, Vec<u8>)>;

/// TPC-C stamps rows with the wall clock (C_SINCE, H_DATE, O_ENTRY_D,
/// OL_DELIVERY_D, at load and in requests): two runs differ there whatever
/// the engine does, so those fields are compared as "set or not".
fn without_clock(table: &str, row: &[u8]) -> Vec<u8> {
    use zen_workload::tpcc::schema::{customer, history, order_line, orders};
    let mut row = row.to_vec();
    let at = match table {
        "customer" => customer::SINCE,
        "history" => history::DATE,
        "orders" => orders::ENTRY_D,
        "order_line" => order_line::DELIVERY_D,
        _ => return row,
    };
    let set = row[at..at + 8].iter().any(|&b| b != 0);
    row[at..at + 8].copy_from_slice(&u64::from(set).to_le_bytes());
    row
}

/// Every row of the workload's tables, in key order.
fn dump<W: Workload>(engine: &dyn Engine, workload: &W) -> Rows {
    let mut worker = engine.worker().unwrap();
    let mut rows = Vec::new();
    for schema in workload.tables() {
        let table = engine.table_id(&schema.name).unwrap();
        worker
            .execute(&TxnOptions::read_only(), &mut |tx| {
                rows.retain(|(t, _, _): &(String, u64, Vec<u8>)| *t != schema.name);
                tx.scan(table, 0..=u64::MAX, usize::MAX, &mut |k, row| {
                    rows.push((schema.name.clone(), k, without_clock(&schema.name, row)));
                    true
                })?;
                Ok(())
            })
            .unwrap();
    }
    rows
}

/// Load, then run `txns` transactions one at a time (drawn by the two
/// workers' generators in turn, from one seed); with
/// NUMA, Alg. 3 picks the worker that runs each. Returns the committed rows
/// and how many transactions each worker ran.
fn serial_run<W: Workload>(
    workload: &W,
    cc: CcKind,
    numa: NumaConfig,
    txns: usize,
) -> (Rows, [usize; 2]) {
    let engine = engine(cc, numa);
    workload.load(engine.as_ref(), 2).unwrap();
    workload.prepare(engine.as_ref()).unwrap();
    let partitioner = engine.numa().and_then(|n| n.partitioner.as_ref());
    let mut workers = [engine.worker().unwrap(), engine.worker().unwrap()];
    let mut locals = [
        workload.local(engine.as_ref(), 0, 2).unwrap(),
        workload.local(engine.as_ref(), 1, 2).unwrap(),
    ];
    let mut rng = SmallRng::seed_from_u64(11);
    let mut route_rng = SmallRng::seed_from_u64(12);
    let mut keys = Vec::new();
    let mut ran = [0usize; 2];
    for i in 0..txns {
        let request = workload.next(&mut locals[i % 2], &mut rng);
        let w = match partitioner {
            None => i % 2,
            Some(p) => {
                keys.clear();
                workload.partition_keys(&request, &mut keys);
                p.route(&keys, &[0.0, 0.0], route_rng.random(), None).worker
            }
        };
        if let Some(p) = partitioner
            && i % 100 == 99
        {
            p.remap_now();
        }
        ran[w] += 1;
        let opts = workload.options(&request);
        let result =
            workers[w].execute(&opts, &mut |tx| workload.execute(&mut locals[w], tx, &request));
        if let Err(e) = result {
            assert_eq!(
                e.abort_reason(),
                Some(zen_engine::AbortReason::User),
                "serial runs never conflict"
            );
        }
    }
    drop(workers);
    (dump(engine.as_ref(), workload), ran)
}

#[test]
fn numa_features_leave_the_committed_data_unchanged() {
    // Serial runs from one seed commit the same data whatever the protocol,
    // so every protocol with soft partitioning (local writes, moved tuples,
    // routing, remapping, penalties) must end where plain silo ends.
    fn same<W: Workload>(name: &str, workload: impl Fn() -> W) {
        let (plain, _) = serial_run(&workload(), CcKind::Silo, NumaConfig::default(), 600);
        assert!(!plain.is_empty());
        let soft = NumaConfig { remote_penalty_ns: 50, ..numa(NumaMode::SoftPartition, 0) };
        for cc in CcKind::ALL {
            let (routed, ran) = serial_run(&workload(), cc, soft.clone(), 600);
            assert!(ran[0] > 0 && ran[1] > 0, "{name}: Alg. 3 used both nodes: {ran:?}");
            assert!(
                plain == routed,
                "{name} under {}: committed data differs with NUMA features on",
                cc.name()
            );
        }
        let (naive, _) = serial_run(&workload(), CcKind::Silo, numa(NumaMode::Naive, 0), 600);
        assert!(plain == naive, "{name}: committed data differs under naive placement");
    }
    same("ycsb", ycsb);
    same("tpcc", small_tpcc);
    same("smallbank", smallbank);
}

#[test]
fn concurrent_deliveries_of_one_warehouse_retry_instead_of_failing() {
    // Regression: soft partitioning routes one warehouse's transactions to
    // any worker of its node, so two Deliveries of one district can run at
    // once (as they could before with fewer warehouses than workers). The
    // loser's delete of the new order the winner took returned KeyNotFound
    // and failed the whole run; it must abort and retry.
    let spec =
        TpccSpec { warehouses: 1, items: 200, customers_per_district: 30, orders_per_district: 30 };
    let tpcc = Tpcc::new(TpccConfig { spec, load_seed: 3 }).unwrap();
    let engine = engine(CcKind::Silo, NumaConfig::default());
    tpcc.load(engine.as_ref(), 2).unwrap();
    let run = run_benchmark(engine.as_ref(), &tpcc, &driver(30_000, 42), &mut |_| {}).unwrap();
    assert!(run.stats.per_type[3].commits > 0, "deliveries ran");
    let report = tpcc.check(engine.as_ref()).unwrap();
    assert!(report.passed(), "{}", report.render_text());
}
