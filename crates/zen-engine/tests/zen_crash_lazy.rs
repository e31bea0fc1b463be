//! Lazy commits on two workers that read each other's newest, not yet
//! durable, versions (issue 15; `docs/design/commit-and-recovery.md`, "Lazy
//! commits and read-from dependencies"), for EVERY protocol.
//!
//! The workers take turns (A B A B …), so each transfer reads and overwrites
//! accounts that the other worker's previous transfer wrote and has not yet
//! fenced: the exact shape of the hole (a reader durable before the writer
//! it read from). Each transfer inserts a receipt row naming itself. Oracle
//! on every crash image:
//! 1. every balance equals its initial value plus the transfers whose
//!    receipts survived: with two workers taking turns on shared accounts,
//!    any surviving transfer whose read-from predecessor was dropped makes
//!    a balance disagree (dependency closure);
//! 2. every transfer acknowledged durable before the crash point survived;
//! 3. the engine's structural invariants hold; a new transaction commits.
//!
//! Under eADR the run itself uses an eADR pool: no line is ever flushed and
//! the images are prefixes of the store order. With the fault
//! `LazyDependencyUnflushed` re-injected, the ADR campaign must fail with a
//! balance that disagrees with the receipts (the check meant for it).

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use zen_engine::cc::{
    Cicada, DlDetect, HStore, Hekaton, Mvcc, NoWait, Occ, Protocol, Silo, TicToc, WaitDie,
};
use zen_engine::{
    ColumnType, Durability, Engine, EngineConfig, Fault, TableId, TableSchema, Transaction,
    TxnOptions, ZenEngine,
};
use zen_pmem::sim::{CheckPlan, CrashMode, SimBackend, seed_from_env};
use zen_pmem::{PersistenceDomain, Pool, PoolOptions};

const POOL_BYTES: u64 = 24 * (64 << 10);

fn receipts_table() -> TableSchema {
    TableSchema::new("receipts")
        .column("amount", ColumnType::I64)
        .column("pad", ColumnType::Bytes(24))
}

/// Every row of both tables, by (table, key).
fn read_state(engine: &dyn Engine) -> BTreeMap<(u32, u64), i64> {
    let mut state = BTreeMap::new();
    let mut w = engine.worker().unwrap();
    for table in 0..2u32 {
        w.run(&TxnOptions::default(), |tx| {
            tx.scan(TableId(table), 0..=u64::from(u32::MAX), usize::MAX, &mut |k, r| {
                state.insert((table, k), value(r));
                true
            })
        })
        .unwrap();
    }
    state
}

fn recover_with<P: Protocol>(
    backend: SimBackend,
    config: &EngineConfig,
) -> Result<ZenEngine<SimBackend, P>, String> {
    let pool = Pool::open_on(backend).map_err(|e| format!("pool open: {e}"))?;
    ZenEngine::<SimBackend, P>::open_on(pool, config).map_err(|e| format!("recovery: {e}"))
}

const ACCOUNTS: u64 = 3;
const INITIAL: i64 = 100;
const PER_WORKER: u64 = 6;
const WORKERS: u64 = 2;

/// A transfer as its receipt row encodes it: (from, to, amount).
fn transfer(worker: u64, seq: u64) -> (u64, u64, i64) {
    let from = (worker + seq) % ACCOUNTS;
    let to = (from + 1) % ACCOUNTS;
    (from, to, (seq as i64 + 1) * (worker as i64 + 1))
}

fn receipt_key(worker: u64, seq: u64) -> u64 {
    10_000 + worker * 100 + seq
}

fn lazy_config<P: Protocol>(fault: Option<Fault>) -> EngineConfig {
    EngineConfig {
        fault,
        cc: P::KIND,
        pmem: zen_pmem::BackendKind::Sim,
        page_size_bytes: 64 << 10,
        max_workers: 2,
        cache_size_bytes: 1 << 20,
        durability: Durability::Lazy,
        recovery_threads: Some(1),
        ..Default::default()
    }
}

/// Record the turn-taking run; returns its trace and the flushes it issued.
fn run<P: Protocol>(
    domain: PersistenceDomain,
    fault: Option<Fault>,
) -> (zen_pmem::sim::Trace, u64) {
    let sim = SimBackend::new(POOL_BYTES, domain);
    let pool = Pool::format(sim, &PoolOptions { page_size: 64 << 10, features: 0 }).unwrap();
    let engine = ZenEngine::<SimBackend, P>::create_on(pool, &lazy_config::<P>(fault)).unwrap();
    let e: &dyn Engine = &engine;
    let accounts = e.create_table(&accounts()).unwrap();
    let receipts = e.create_table(&receipts_table()).unwrap();
    {
        let mut w = e.worker().unwrap();
        let immediate =
            TxnOptions { durability: Some(Durability::Immediate), ..Default::default() };
        w.run(&immediate, |tx| {
            (0..ACCOUNTS).try_for_each(|k| tx.insert(accounts, k, &row(INITIAL)))
        })
        .unwrap();
        w.sync().unwrap();
    }
    engine.shared().pool.backend().reset_trace();
    let before = engine.shared().pool.total_counters().lines_flushed;
    let turn = AtomicU64::new(0);
    let workers: Vec<_> = (0..WORKERS).map(|_| e.worker().unwrap()).collect();
    std::thread::scope(|scope| {
        for (i, mut w) in workers.into_iter().enumerate() {
            let turn = &turn;
            scope.spawn(move || {
                let (mut a, mut b) = (vec![0u8; ROW], vec![0u8; ROW]);
                for seq in 0..PER_WORKER {
                    while turn.load(Ordering::Acquire) != seq * WORKERS + i as u64 {
                        std::thread::yield_now();
                    }
                    let (from, to, amount) = transfer(i as u64, seq);
                    w.run(&TxnOptions::default(), |tx| {
                        tx.get_for_update(accounts, from, &mut a)?;
                        tx.get_for_update(accounts, to, &mut b)?;
                        tx.update(accounts, from, &row(value(&a) - amount))?;
                        tx.update(accounts, to, &row(value(&b) + amount))?;
                        tx.insert(receipts, receipt_key(i as u64, seq), &row(amount))?;
                        Ok(())
                    })
                    .unwrap();
                    turn.fetch_add(1, Ordering::AcqRel);
                }
                // The worker is dropped without `sync`: its last commit stays
                // unfenced in the trace.
            });
        }
    });
    let flushed = engine.shared().pool.total_counters().lines_flushed - before;
    let pool = engine.into_pool().unwrap();
    let trace = pool.backend().trace();
    pool.abandon();
    assert!(trace.lints().is_clean(), "{}: {}", P::KIND.name(), trace.lints().summary());
    (trace, flushed)
}

/// The oracle (module docs) on one recovered engine.
fn check<P: Protocol>(engine: &ZenEngine<SimBackend, P>, acked: usize) -> Result<(), String> {
    let e: &dyn Engine = engine;
    e.check_invariants().map_err(|x| format!("structure: {x}"))?;
    let state = read_state(e);
    let mut expect = [INITIAL; ACCOUNTS as usize];
    let mut present = 0;
    for worker in 0..WORKERS {
        for seq in 0..PER_WORKER {
            if state.contains_key(&(1, receipt_key(worker, seq))) {
                let (from, to, amount) = transfer(worker, seq);
                expect[from as usize] -= amount;
                expect[to as usize] += amount;
                present += 1;
            }
        }
    }
    for k in 0..ACCOUNTS {
        let got = state.get(&(0, k)).copied();
        if got != Some(expect[k as usize]) {
            return Err(format!(
                "dependency closure: account {k} is {got:?}, the surviving receipts say {}",
                expect[k as usize]
            ));
        }
    }
    if present < acked {
        return Err(format!(
            "durability: {present} receipts survived, {acked} transfers acknowledged"
        ));
    }
    let mut w = e.worker().map_err(|x| x.to_string())?;
    w.run(&TxnOptions::default(), |tx| tx.insert(TableId(1), 99_999, &row(1)))
        .map_err(|x| format!("liveness: {x}"))
}

/// Crash-check `trace` in `mode`; `Err` names the first failing image.
fn check_trace<P: Protocol>(
    trace: &zen_pmem::sim::Trace,
    mode: CrashMode,
    budget: u64,
) -> Result<zen_pmem::sim::CheckStats, String> {
    let seed = seed_from_env(0x1A2F);
    trace
        .check(CheckPlan::new(mode, budget, seed), |point, image| {
            let acked = point.acked_txns().count();
            let backend = SimBackend::from_image(image.bytes.to_vec(), PersistenceDomain::Adr);
            let engine = recover_with::<P>(backend, &lazy_config::<P>(None))?;
            check(&engine, acked)?;
            engine.into_pool().unwrap().abandon();
            Ok(())
        })
        .map_err(|f| f.to_string())
}

fn campaign<P: Protocol>() {
    let (adr, flushed) = run::<P>(PersistenceDomain::Adr, None);
    assert!(flushed > 0, "{}: an ADR run flushes", P::KIND.name());
    let (eadr, eadr_flushed) = run::<P>(PersistenceDomain::Eadr, None);
    assert_eq!(eadr_flushed, 0, "{}: an eADR run flushes nothing", P::KIND.name());
    for (trace, mode, budget) in [
        (&adr, CrashMode::Strict, 40),
        (&adr, CrashMode::Paranoid, 10),
        (&eadr, CrashMode::Eadr, 20),
    ] {
        let stats = check_trace::<P>(trace, mode, budget)
            .unwrap_or_else(|f| panic!("lazy bank/{} ({}): {f}", P::KIND.name(), mode.name()));
        assert!(stats.points > PER_WORKER, "{}: {stats:?}", P::KIND.name());
        eprintln!(
            "lazy bank/{} {}: {} crash points, {} images, 0 failures",
            P::KIND.name(),
            mode.name(),
            stats.points,
            stats.images
        );
    }
}

#[test]
fn the_unflushed_dependency_fault_is_caught_by_the_closure_check() {
    let (trace, _) = run::<Silo>(PersistenceDomain::Adr, Some(Fault::LazyDependencyUnflushed));
    let failure = check_trace::<Silo>(&trace, CrashMode::Strict, 50)
        .expect_err("a reader durable before the writer it read from must be caught");
    assert!(failure.contains("dependency closure"), "caught by another check: {failure}");
    eprintln!("LazyDependencyUnflushed: detected: {}", failure.lines().next().unwrap_or(""));
}

#[test]
fn lazy_crash_campaign_no_wait() {
    campaign::<NoWait>();
}
#[test]
fn lazy_crash_campaign_wait_die() {
    campaign::<WaitDie>();
}
#[test]
fn lazy_crash_campaign_dl_detect() {
    campaign::<DlDetect>();
}
#[test]
fn lazy_crash_campaign_occ() {
    campaign::<Occ>();
}
#[test]
fn lazy_crash_campaign_silo() {
    campaign::<Silo>();
}
#[test]
fn lazy_crash_campaign_tictoc() {
    campaign::<TicToc>();
}
#[test]
fn lazy_crash_campaign_mvcc() {
    campaign::<Mvcc>();
}
#[test]
fn lazy_crash_campaign_hekaton() {
    campaign::<Hekaton>();
}
#[test]
fn lazy_crash_campaign_cicada() {
    campaign::<Cicada>();
}
#[test]
fn lazy_crash_campaign_hstore() {
    campaign::<HStore>();
}

/// The account balances of the state a crash *now* would leave.
fn balances_after_power_failure(engine: &ZenEngine<SimBackend, Silo>) -> Vec<Option<i64>> {
    let image = engine.shared().pool.backend().durable_image();
    let backend = SimBackend::from_image(image, PersistenceDomain::Adr);
    let recovered = recover_with::<Silo>(backend, &lazy_config::<Silo>(None)).unwrap();
    let state = read_state(&recovered);
    recovered.into_pool().unwrap().abandon();
    (0..ACCOUNTS).map(|k| state.get(&(0, k)).copied()).collect()
}

#[test]
fn a_read_only_transaction_is_durable_only_with_the_writers_it_read() {
    for reader in [Durability::Immediate, Durability::Lazy] {
        let sim = SimBackend::new(POOL_BYTES, PersistenceDomain::Adr);
        let pool = Pool::format(sim, &PoolOptions { page_size: 64 << 10, features: 0 }).unwrap();
        let engine =
            ZenEngine::<SimBackend, Silo>::create_on(pool, &lazy_config::<Silo>(None)).unwrap();
        let e: &dyn Engine = &engine;
        let accounts = e.create_table(&accounts()).unwrap();
        e.create_table(&receipts_table()).unwrap();
        let (mut a, mut b) = (e.worker().unwrap(), e.worker().unwrap());
        let immediate =
            TxnOptions { durability: Some(Durability::Immediate), ..Default::default() };
        a.run(&immediate, |tx| {
            (0..ACCOUNTS).try_for_each(|k| tx.insert(accounts, k, &row(INITIAL)))
        })
        .unwrap();
        // A lazy write on worker a: visible, not yet durable.
        let mut tx = a.begin(&TxnOptions::default()).unwrap();
        tx.update(accounts, 0, &row(777)).unwrap();
        assert!(!tx.commit().unwrap().durable, "a lazy commit is not durable on return");
        assert_eq!(balances_after_power_failure(&engine)[0], Some(INITIAL));
        // Worker b reads it.
        let mut out = vec![0u8; ROW];
        let mut tx =
            b.begin(&TxnOptions { durability: Some(reader), ..Default::default() }).unwrap();
        assert!(tx.get(accounts, 0, &mut out).unwrap());
        assert_eq!(value(&out), 777);
        let info = tx.commit().unwrap();
        match reader {
            Durability::Immediate => {
                assert!(info.durable, "an immediate reader returns once what it read is durable");
                assert_eq!(balances_after_power_failure(&engine)[0], Some(777));
            }
            Durability::Lazy => {
                assert!(!info.durable, "a lazy reader says the value it read may not survive");
            }
        }
        // A transaction that hides a key (a delete) is durable before it is
        // visible, even when lazy: no scan can miss a key a crash brings back.
        let mut tx = a.begin(&TxnOptions::default()).unwrap();
        tx.delete(accounts, 2).unwrap();
        assert!(tx.commit().unwrap().durable, "a lazy delete is fenced before it installs");
        assert_eq!(balances_after_power_failure(&engine)[2], None);
        drop((a, b));
        engine.into_pool().unwrap().abandon();
    }
}

/// S4 across holders (issue 14: the rare `crash_multi_worker` zen/hekaton
/// "acked-lost"): a commit floor that one holder raised (stored and flushed,
/// not yet fenced by it) must not let another holder zero an LP slot it
/// covers. Worker `a` commits T0 (account 0, its LP tuple, and receipts 7
/// and 8) and syncs: T0 is acknowledged. Worker `y` supersedes receipt 7
/// and, at its next fence, covers that slot of T0: it raises `a`'s floor to
/// T0's Tx-CTS, and then does nothing more. Worker `x` supersedes account 0,
/// finds `a`'s floor raised, and zeroes T0's LP slot over its next fences
/// (floor at the first, zero store just before the third, handed back to
/// `a` just before the fourth: `txn/maintain.rs`). A power failure now must keep T0: receipt 8 (superseded by
/// nobody) is present. Before the fix `x` trusted the DRAM floor, the LP
/// zero was durable while the floor store was not, and recovery dropped T0.
/// Single-threaded, so the schedule is fixed; every protocol. With `spares`
/// on (S7 of `zen/space.rs`), `x` keeps T0's LP slot as account 0's spare
/// instead of zeroing it, and `a`, its owner, rewrites it with its next
/// update of account 0: the same floor must be durable before that.
fn floor_raised_by_another_holder<P: Protocol>(spares: bool) -> Result<(), String> {
    let sim = SimBackend::new(POOL_BYTES, PersistenceDomain::Adr);
    let pool = Pool::format(sim, &PoolOptions { page_size: 64 << 10, features: 0 }).unwrap();
    let config = EngineConfig { max_workers: 4, ..lazy_config::<P>(None) };
    let engine = ZenEngine::<SimBackend, P>::create_on(pool, &config).unwrap();
    let e: &dyn Engine = &engine;
    let accounts = e.create_table(&accounts()).unwrap();
    let receipts = e.create_table(&receipts_table()).unwrap();
    let (mut a, mut x, mut y) = (e.worker().unwrap(), e.worker().unwrap(), e.worker().unwrap());
    engine.shared().spares_off.store(!spares, std::sync::atomic::Ordering::Relaxed);
    let immediate = TxnOptions { durability: Some(Durability::Immediate), ..Default::default() };
    a.run(&immediate, |tx| tx.insert(accounts, 0, &row(INITIAL))).unwrap();
    a.run(&TxnOptions::default(), |tx| {
        tx.update(accounts, 0, &row(1))?;
        tx.insert(receipts, 7, &row(7))?;
        tx.insert(receipts, 8, &row(8))
    })
    .unwrap();
    a.sync().unwrap();
    y.run(&TxnOptions::default(), |tx| tx.update(receipts, 7, &row(70))).unwrap();
    y.sync().unwrap();
    x.run(&TxnOptions::default(), |tx| tx.update(accounts, 0, &row(2))).unwrap();
    for _ in 0..4 {
        x.sync().unwrap();
    }
    let mut account0 = 2;
    let image = if spares {
        if e.status().gc_spared_slots == 0 {
            return Err(format!("{}: x kept no spare, so this checks nothing", P::KIND.name()));
        }
        // `a` rewrites T0's LP slot, now account 0's spare in its region.
        a.run(&immediate, |tx| tx.update(accounts, 0, &row(3))).unwrap();
        account0 = 3;
        engine.shared().pool.backend().durable_image()
    } else {
        let image = engine.shared().pool.backend().durable_image();
        let reclaimed = |e: &dyn Engine| e.status().gc_reclaimed_slots;
        let before = reclaimed(e);
        // `a` takes back the slots `x` reclaimed for it: T0's LP slot was zeroed.
        a.sync().unwrap();
        if reclaimed(e) == before {
            return Err(format!("{}: x reclaimed nothing, so this checks nothing", P::KIND.name()));
        }
        image
    };
    drop((a, x, y));
    engine.into_pool().unwrap().abandon();
    let backend = SimBackend::from_image(image, PersistenceDomain::Adr);
    let recovered = recover_with::<P>(backend, &lazy_config::<P>(None))?;
    let state = read_state(&recovered);
    recovered.into_pool().unwrap().abandon();
    let want = [((0, 0), account0), ((1, 7), 70), ((1, 8), 8)];
    for (key, v) in want {
        if state.get(&key) != Some(&v) {
            return Err(format!(
                "{}: after the crash {key:?} is {:?}, not {v} (acknowledged T0 lost: {state:?})",
                P::KIND.name(),
                state.get(&key)
            ));
        }
    }
    Ok(())
}

#[test]
fn a_floor_raised_by_one_holder_is_durable_before_another_zeroes_the_lp_it_covers() {
    let results = [false, true].map(|spares| {
        [
            floor_raised_by_another_holder::<NoWait>(spares),
            floor_raised_by_another_holder::<WaitDie>(spares),
            floor_raised_by_another_holder::<DlDetect>(spares),
            floor_raised_by_another_holder::<Occ>(spares),
            floor_raised_by_another_holder::<Silo>(spares),
            floor_raised_by_another_holder::<TicToc>(spares),
            floor_raised_by_another_holder::<Mvcc>(spares),
            floor_raised_by_another_holder::<Hekaton>(spares),
            floor_raised_by_another_holder::<Cicada>(spares),
            floor_raised_by_another_holder::<HStore>(spares),
        ]
    });
    let failures: Vec<String> = results.into_iter().flatten().filter_map(Result::err).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
