//! Deterministic schedule exploration of whole engines with `shuttle`
//! (VERIFICATION §3): for every protocol, small list-append runs (three
//! threads, a few transactions on three hot keys) are executed under
//! shuttle's random scheduler and its PCT scheduler (probabilistic
//! concurrency testing, bug depth 3), both from recorded seeds. Every
//! execution's history must be serializable for our dependency-graph checker
//! and for `adya`, and the final state must be exactly the committed appends.
//!
//! How an engine runs under shuttle: the engine marks its schedule points
//! (`zen_engine::sched`: lock-word and location CAS, row copies, lock
//! releases, back-offs, its own mutexes) and this test installs the hook that
//! turns each point into `shuttle::thread::yield_now` on threads that run
//! inside a model. Threads of other tests in this binary are unaffected.
//!
//! A failure prints shuttle's schedule; rerun with the printed seed through
//! `ZEN_TEST_SEED=<seed> cargo test --release -p zen-engine --test schedules`.

mod common;
mod history;

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{ROW, accounts, row, value};
use history::*;
use shuttle::rand::Rng as _;
use shuttle::scheduler::{PctScheduler, RandomScheduler, Scheduler};
use shuttle::{Config, MaxSteps, Runner};
use zen_engine::numa::{Binding, NumaConfig, NumaMode};
use zen_engine::{CcKind, Engine, EngineConfig, EngineKind, RaceFault, TxnOptions};
use zen_pmem::BackendKind;

/// Hot keys every transaction draws from.
const KEYS: u64 = 3;
/// Executions per scheduler and protocol (`ZEN_SCHEDULE_ITERATIONS` for
/// longer explorations).
const ITERATIONS: usize = 1000;
/// PCT's bug depth (number of priority change points + 1).
const PCT_DEPTH: usize = 3;

thread_local! {
    /// The finding of the execution that failed on this OS thread (shuttle
    /// runs a model's executions on the thread that called `run`).
    static FOUND: std::cell::RefCell<Option<Finding>> = const { std::cell::RefCell::new(None) };
    static IN_MODEL: Cell<bool> = const { Cell::new(false) };
    /// Schedule points hit under a model on this OS thread (a report).
    static POINTS: Cell<u64> = const { Cell::new(0) };
    /// Remote reads of the NUMA designs on this OS thread: shows that the
    /// writers do run on different nodes.
    static REMOTE_READS: Cell<u64> = const { Cell::new(0) };
}

fn hook() -> bool {
    if IN_MODEL.with(Cell::get) {
        POINTS.with(|p| p.set(p.get() + 1));
        shuttle::thread::yield_now();
        true
    } else {
        false
    }
}

/// Marks the OS thread as running a model while alive (shuttle's threads are
/// coroutines on it, so they all see the flag).
struct InModel;

impl InModel {
    fn enter() -> InModel {
        assert!(zen_engine::sched::install_hook(hook));
        IN_MODEL.with(|m| m.set(true));
        InModel
    }
}

impl Drop for InModel {
    fn drop(&mut self) {
        IN_MODEL.with(|m| m.set(false));
    }
}

/// An engine configuration under test.
#[derive(Debug, Clone, Copy)]
struct Design {
    engine: EngineKind,
    cc: CcKind,
    /// Zen+ NUMA-local writes on two virtual nodes (copies on foreign writes).
    numa: bool,
}

/// Every design under test: Zen with each protocol, Zen+ local writes for
/// one protocol of each family, and each baseline (one line per engine
/// added later).
fn designs() -> Vec<Design> {
    let zen = |cc, numa| Design { engine: EngineKind::Zen, cc, numa };
    let mut designs: Vec<_> = CcKind::ALL.into_iter().map(|cc| zen(cc, false)).collect();
    for cc in [CcKind::NoWait, CcKind::Silo, CcKind::Tictoc, CcKind::Mvcc, CcKind::Hstore] {
        designs.push(zen(cc, true));
    }
    for engine in [EngineKind::Ideal, EngineKind::Mmdb, EngineKind::Wbl] {
        designs.push(Design { engine, cc: CcKind::Silo, numa: false });
    }
    designs
}

/// Executions per scheduler: `ZEN_SCHEDULE_ITERATIONS`, else `default`.
fn iterations_from_env(default: usize) -> usize {
    std::env::var("ZEN_SCHEDULE_ITERATIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The designs to explore: all, or the one `ZEN_SCHEDULE_CC=<name>` names
/// (to replay a failure).
fn selected_designs() -> Vec<Design> {
    let only = std::env::var("ZEN_SCHEDULE_CC").ok();
    designs().into_iter().filter(|&d| only.as_deref().is_none_or(|o| o == name(d))).collect()
}

fn name(d: Design) -> String {
    match (d.engine, d.numa) {
        (EngineKind::Zen, false) => d.cc.name().to_string(),
        (EngineKind::Zen, true) => format!("{}+numa", d.cc.name()),
        _ => d.engine.name().to_string(),
    }
}

fn tiny_config(d: Design, race_fault: Option<RaceFault>) -> EngineConfig {
    let mut numa = NumaConfig::default();
    if d.numa {
        numa.nodes = Some(2);
        numa.mode = NumaMode::LocalWrite;
        numa.binding = Binding::Even;
        numa.pin = false;
    }
    EngineConfig {
        engine: d.engine,
        cc: d.cc,
        numa,
        race_fault,
        pmem: BackendKind::Dram,
        pool_size_bytes: 4 << 20,
        page_size_bytes: 64 << 10,
        max_workers: 4,
        cache_size_bytes: 1 << 20,
        ..Default::default()
    }
}

/// The transactions of each thread, drawn from shuttle's random source (so
/// an execution replays with its schedule): two writers with two
/// transactions of two or three (key, append?) operations each, and a
/// declared read-only reader of every key (a Zen+ snapshot under mvcc and
/// hekaton).
fn plans() -> [Vec<Vec<(u64, bool)>>; 3] {
    let mut rng = shuttle::rand::thread_rng();
    let mut writer = || -> Vec<Vec<(u64, bool)>> {
        (0..2)
            .map(|_| {
                let n = rng.gen_range(2..=3);
                let mut ops: Vec<(u64, bool)> =
                    (0..n).map(|_| (rng.gen_range(0..KEYS), rng.gen_bool(0.5))).collect();
                // At least one append, so every transaction writes.
                if ops.iter().all(|&(_, append)| !append) {
                    ops[0].1 = true;
                }
                ops
            })
            .collect()
    };
    [writer(), writer(), vec![(0..KEYS).map(|k| (k, false)).collect()]]
}

/// One execution: returns the history (every attempt) and the final lists.
fn execution(design: Design, race_fault: Option<RaceFault>) -> (Vec<TxnRecord>, Vec<Vec<u32>>) {
    let engine: Arc<Box<dyn Engine>> =
        Arc::new(zen_engine::open(&tiny_config(design, race_fault)).unwrap());
    let t = create_lists(engine.as_ref().as_ref(), KEYS);
    let history = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = plans()
        .into_iter()
        .enumerate()
        .map(|(p, txns)| {
            let (engine, history) = (engine.clone(), history.clone());
            shuttle::thread::spawn(move || {
                let mut w = engine.worker().unwrap();
                let read_only = txns.iter().flatten().all(|&(_, append)| !append);
                let opts = if read_only { TxnOptions::read_only() } else { TxnOptions::default() };
                let mut row = vec![0u8; ROW_BYTES.max(ROW)];
                for (i, plan) in txns.iter().enumerate() {
                    // Up to eight attempts; every attempt is part of the history.
                    for attempt in 0..8u32 {
                        let mut ops = Vec::new();
                        let r = w.execute(&opts, &mut |tx| {
                            ops.clear();
                            for (j, &(k, append)) in plan.iter().enumerate() {
                                if append {
                                    tx.get_for_update(t, k, &mut row[..ROW_BYTES])?;
                                    let mut list = decode(&row);
                                    let v = (p as u32) << 20
                                        | (i as u32) << 12
                                        | attempt << 4
                                        | j as u32;
                                    list.push(v);
                                    tx.update(t, k, &encode(&list))?;
                                    ops.push(Op::Append(k, v));
                                } else {
                                    ops.push(read(tx, t, k, &mut row[..ROW_BYTES])?);
                                }
                            }
                            Ok(())
                        });
                        let committed = r.is_ok();
                        if let Err(e) = &r {
                            assert!(e.is_retryable(), "{}: {e}", name(design));
                        }
                        history.lock().unwrap().push(TxnRecord { process: p, ops, committed });
                        if committed {
                            break;
                        }
                        zen_engine::api::backoff(attempt + 1);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let lists = read_lists(engine.as_ref().as_ref(), t, KEYS);
    let mut history = std::mem::take(&mut *history.lock().unwrap());
    history.push(TxnRecord {
        process: 3,
        committed: true,
        ops: (0..KEYS).map(|k| Op::Read(k, Some(lists[k as usize].clone()))).collect(),
    });
    if design.numa {
        // N1: local writes never write another node's memory, even in the
        // middle of a conflict.
        let numa = engine.numa_stats().expect("NUMA is on");
        assert_eq!(numa.total.remote_writes, 0, "{}: a remote write", name(design));
        REMOTE_READS.with(|r| r.set(r.get() + numa.total.remote_reads));
    }
    (history, lists)
}

/// What a check of an execution found: which checker reported what. A race
/// counts as found only through one of these (never through another panic).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Finding {
    /// Our dependency-graph checker named an anomaly.
    Ours(String),
    /// `adya` judged the history invalid.
    Adya(Vec<String>),
    /// The final lists are not exactly the committed appends.
    FinalState(String),
}

impl Finding {
    fn checker(&self) -> &'static str {
        match self {
            Finding::Ours(_) => "our checker",
            Finding::Adya(_) => "adya",
            Finding::FinalState(_) => "the final-state check",
        }
    }
}

/// The checks every execution must pass; the first finding otherwise.
fn check_execution(design: Design, history: &[TxnRecord], lists: &[Vec<u32>]) {
    if let Err(finding) = find_anomaly(history, lists) {
        FOUND.with(|f| *f.borrow_mut() = Some(finding.clone()));
        panic!("{}: {}: {finding:?}\n{history:?}", name(design), finding.checker());
    }
}

fn find_anomaly(history: &[TxnRecord], lists: &[Vec<u32>]) -> Result<(), Finding> {
    let edges = check_ours(history).map_err(Finding::Ours)?;
    // `adya` declines to judge a history without dependencies (every writer
    // aborted); ours must then have found no edge either.
    let adya = check_adya(history);
    let agree = adya.valid == adya::Valid::True
        || (edges == 0 && adya.anomaly_types == ["empty-transaction-graph"]);
    if !agree {
        return Err(Finding::Adya(adya.anomaly_types.clone()));
    }
    // The final lists hold exactly the committed appends.
    let mut committed: BTreeMap<u64, HashSet<u32>> = BTreeMap::new();
    for op in history.iter().filter(|t| t.committed).flat_map(|t| &t.ops) {
        if let Op::Append(k, v) = op {
            committed.entry(*k).or_default().insert(*v);
        }
    }
    for (k, list) in lists.iter().enumerate() {
        let got: HashSet<u32> = list.iter().copied().collect();
        if got.len() != list.len() {
            return Err(Finding::FinalState(format!("duplicate append on key {k}: {list:?}")));
        }
        let want = committed.remove(&(k as u64)).unwrap_or_default();
        if got != want {
            return Err(Finding::FinalState(format!(
                "key {k} holds {got:?}, the committed appends are {want:?}"
            )));
        }
    }
    Ok(())
}

/// Run the executions of `design` under `scheduler`; returns how many had
/// at least one aborted attempt (a conflict the protocol saw, so the
/// transactions did interleave).
fn explore<S: Scheduler + 'static>(
    design: Design,
    race_fault: Option<RaceFault>,
    scheduler: S,
) -> usize {
    let conflicted = Arc::new(AtomicU64::new(0));
    let seen = conflicted.clone();
    let mut config = Config::default();
    config.stack_size = 1 << 20;
    config.max_steps = MaxSteps::FailAfter(200_000);
    Runner::new(scheduler, config).run(move || {
        let _model = InModel::enter();
        let (history, lists) = execution(design, race_fault);
        check_execution(design, &history, &lists);
        if history.iter().any(|t| !t.committed) {
            seen.fetch_add(1, Ordering::Relaxed);
        }
    });
    conflicted.load(Ordering::Relaxed) as usize
}

#[test]
fn random_and_pct_schedules_of_every_protocol_are_serializable() {
    let seed = zen_pmem::sim::seed_from_env(0x5C4ED);
    let iterations = iterations_from_env(ITERATIONS);
    for design in selected_designs() {
        let before = POINTS.with(Cell::get);
        let started = std::time::Instant::now();
        let random = explore(design, None, RandomScheduler::new_from_seed(seed, iterations));
        let pct = explore(design, None, PctScheduler::new_from_seed(seed, PCT_DEPTH, iterations));
        let points = POINTS.with(Cell::get) - before;
        if design.numa {
            assert!(REMOTE_READS.with(Cell::get) > 0, "{}: nothing crossed nodes", name(design));
            REMOTE_READS.with(|r| r.set(0));
        }
        eprintln!(
            "{}: {iterations} random + {iterations} PCT (depth {PCT_DEPTH}) schedules, seed {seed}: \
             {random} + {pct} with a conflict, {points} schedule points, {:.1} s",
            name(design),
            started.elapsed().as_secs_f64()
        );
        // The schedules do interleave the transactions: under both
        // schedulers some executions have a conflict the protocol resolved.
        assert!(
            random > 0 && pct > 0,
            "{}: no schedule interleaved two transactions",
            name(design)
        );
    }
}

/// The races the schedules found, injected back one at a time
/// (`RaceFault`): the random scheduler must find each within its budget,
/// and "found" means a checker reported it (a [`Finding`]): any other panic
/// (a step limit, an unrelated assertion) fails this test and prints itself.
#[test]
fn every_injected_race_is_found() {
    let seed = zen_pmem::sim::seed_from_env(0x5C4ED);
    let mut found = 0;
    for race in RaceFault::ALL {
        let design = Design { engine: EngineKind::Zen, cc: race.cc(), numa: false };
        let started = std::time::Instant::now();
        FOUND.with(|f| f.borrow_mut().take());
        let outcome = std::panic::catch_unwind(|| match race {
            // Found by the moving-row model, not by list appends (no deletes).
            RaceFault::RescanIgnoresUnlinks => {
                explore_moving_row(design, Some(race), RandomScheduler::new_from_seed(seed, 20_000))
            }
            _ => explore(design, Some(race), RandomScheduler::new_from_seed(seed, 20_000)),
        });
        let finding = match outcome {
            Ok(_) => None,
            Err(panic) => match FOUND.with(|f| f.borrow_mut().take()) {
                Some(finding) => Some(finding),
                // Not a checker's finding: a harness failure, not a detection.
                None => std::panic::resume_unwind(panic),
            },
        };
        eprintln!(
            "{race:?} on {}: {} in {:.1} s",
            name(design),
            match &finding {
                Some(f) => format!("found by {}: {f:?}", f.checker()),
                None => "NOT found".into(),
            },
            started.elapsed().as_secs_f64()
        );
        found += usize::from(finding.is_some());
    }
    eprintln!("{found}/{} injected races found", RaceFault::ALL.len());
    assert_eq!(found, RaceFault::ALL.len(), "an injected race went unnoticed");
}

/// Accounts of the moving-row schedules, and the key a row moves to and back.
const MOVING_ACCOUNTS: u64 = 8;
const MOVED: u64 = 3;
const FAR: u64 = 100;
/// Moves of the row (there and back, so an even number).
const MOVES: u64 = 8;
/// Moving-row executions per design.
const MOVING_ITERATIONS: usize = 300;

/// One execution: a mover moves account `MOVED` to key `FAR` and back twice
/// (delete + insert in one transaction) while an auditor sums every account
/// in a read-only scan. The ordered set is read in batches with a schedule
/// point between them, so a scan can pass `MOVED` while it is away and reach
/// `FAR` after it came back; the commit-time re-scan can do so too. Every
/// committed audit must see every account once.
fn moving_row_execution(design: Design, race_fault: Option<RaceFault>) {
    let engine: Arc<Box<dyn Engine>> =
        Arc::new(zen_engine::open(&tiny_config(design, race_fault)).unwrap());
    let t = engine.create_table(&accounts()).unwrap();
    {
        let mut w = engine.worker().unwrap();
        w.execute(&TxnOptions::default(), &mut |tx| {
            (0..MOVING_ACCOUNTS).try_for_each(|k| tx.insert(t, k, &row(100)))
        })
        .unwrap();
    }
    let mover = {
        let engine = engine.clone();
        shuttle::thread::spawn(move || {
            let mut w = engine.worker().unwrap();
            let mut buf = vec![0u8; ROW];
            for i in 0..MOVES {
                let (from, to) = if i % 2 == 0 { (MOVED, FAR) } else { (FAR, MOVED) };
                for attempt in 0..64u32 {
                    let r = w.execute(&TxnOptions::default(), &mut |tx| {
                        assert!(tx.get(t, from, &mut buf)?, "the row is at {from}");
                        tx.delete(t, from)?;
                        tx.insert(t, to, &buf)
                    });
                    match r {
                        Ok(_) => break,
                        Err(e) if e.is_retryable() => zen_engine::api::backoff(attempt + 1),
                        Err(e) => panic!("{}: move {from} → {to}: {e}", name(design)),
                    }
                }
            }
        })
    };
    let auditor = {
        let engine = engine.clone();
        shuttle::thread::spawn(move || {
            let mut w = engine.worker().unwrap();
            for attempt in 0..8u32 {
                let mut seen = Vec::new();
                let r = w.execute(&TxnOptions::read_only(), &mut |tx| {
                    seen.clear();
                    tx.scan(t, 0..=u64::MAX >> 1, usize::MAX, &mut |k, r| {
                        seen.push((k, value(r)));
                        true
                    })?;
                    Ok(())
                });
                match r {
                    Ok(_) => {
                        let total: i64 = seen.iter().map(|&(_, v)| v).sum();
                        if total != 100 * MOVING_ACCOUNTS as i64 {
                            let finding = format!("a committed audit saw {seen:?}");
                            FOUND.with(|f| *f.borrow_mut() = Some(Finding::Ours(finding.clone())));
                            panic!("{}: {finding}", name(design));
                        }
                        return;
                    }
                    Err(e) if e.is_retryable() => zen_engine::api::backoff(attempt + 1),
                    Err(e) => panic!("{}: audit: {e}", name(design)),
                }
            }
        })
    };
    mover.join().unwrap();
    auditor.join().unwrap();
}

/// Run moving-row executions of `design` under `scheduler`.
fn explore_moving_row<S: Scheduler + 'static>(
    design: Design,
    race_fault: Option<RaceFault>,
    scheduler: S,
) -> usize {
    let mut config = Config::default();
    config.stack_size = 1 << 20;
    config.max_steps = MaxSteps::FailAfter(200_000);
    Runner::new(scheduler, config).run(move || {
        let _model = InModel::enter();
        moving_row_execution(design, race_fault);
    })
}

/// A row that moves between two keys and back while a scan runs is never
/// missed (nor counted twice) by a committed scan, on every design: a
/// re-scan that passes the row's keys at the wrong moments cannot see it
/// either, so the re-scan also checks that no key of its range was unlinked
/// while it ran (`index/mod.rs`, "Phantoms and unlinks"). Without that
/// check (`RaceFault::RescanIgnoresUnlinks`, `every_injected_race_is_found`)
/// the random scheduler finds a committed audit one account short.
#[test]
fn a_scan_never_misses_a_row_that_moves_between_keys() {
    let seed = zen_pmem::sim::seed_from_env(0x5C4ED);
    let iterations = iterations_from_env(MOVING_ITERATIONS);
    for design in selected_designs() {
        let started = std::time::Instant::now();
        explore_moving_row(design, None, RandomScheduler::new_from_seed(seed, iterations));
        eprintln!(
            "{}: {iterations} moving-row schedules, seed {seed}, {:.1} s",
            name(design),
            started.elapsed().as_secs_f64()
        );
    }
}
