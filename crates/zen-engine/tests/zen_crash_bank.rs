//! Crash-simulator campaign for EVERY concurrency-control protocol: two
//! workers transfer money between shared accounts on `SimBackend`; each
//! transfer also inserts a receipt row naming itself, so the oracle can tell
//! which transactions survived a crash:
//!
//! 1. every acknowledged transfer's receipt is present (durability);
//! 2. every balance equals its initial value plus the transfers whose receipts
//!    survived (atomicity: no half transfer, no transfer without receipt);
//! 3. the total is conserved; the engine's structural invariants hold; a new
//!    transaction commits after recovery (liveness).

mod common;
mod crash;

use common::*;
use crash::*;
use zen_engine::cc::{
    Cicada, DlDetect, HStore, Hekaton, Mvcc, NoWait, Occ, Protocol, Silo, TicToc, WaitDie,
};
use zen_engine::{Engine, TableId, TxnOptions, ZenEngine};
use zen_pmem::sim::{CheckPlan, CrashMode, SimBackend, seed_from_env};
use zen_pmem::{PersistenceDomain, Pool, PoolOptions};

const ACCOUNTS: u64 = 4;
const INITIAL: i64 = 100;
const PER_WORKER: u64 = 5;

/// A transfer as its receipt row encodes it: (from, to, amount).
fn transfer(worker: u64, seq: u64) -> (u64, u64, i64) {
    let from = (worker + seq) % ACCOUNTS;
    let to = (from + 1 + seq % (ACCOUNTS - 1)) % ACCOUNTS;
    (from, to, (seq as i64 + 1) * (worker as i64 + 1))
}

fn receipt_key(worker: u64, seq: u64) -> u64 {
    10_000 + worker * 100 + seq
}

fn run_bank<P: Protocol>() -> (zen_pmem::sim::Trace, Vec<(u64, u64)>) {
    let sim = SimBackend::new(POOL_BYTES, PersistenceDomain::Adr);
    let pool = Pool::format(sim, &PoolOptions { page_size: 64 << 10, features: 0 }).unwrap();
    let engine = ZenEngine::<SimBackend, P>::create_on(pool, &config::<P>(None)).unwrap();
    let e: &dyn Engine = &engine;
    let accounts = e.create_table(&accounts()).unwrap();
    let receipts = e.create_table(&orders()).unwrap();
    {
        let mut w = e.worker().unwrap();
        w.run(&TxnOptions::default(), |tx| {
            (0..ACCOUNTS).try_for_each(|k| tx.insert(accounts, k, &row(INITIAL)))
        })
        .unwrap();
        w.sync().unwrap();
        w.sync().unwrap();
    }
    engine.shared().pool.backend().reset_trace();
    let workers: Vec<_> = (0..2).map(|_| e.worker().unwrap()).collect();
    let committed: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .into_iter()
            .enumerate()
            .map(|(i, mut w)| {
                scope.spawn(move || {
                    let mut done = Vec::new();
                    let (mut a, mut b) = (vec![0u8; ROW], vec![0u8; ROW]);
                    for seq in 0..PER_WORKER {
                        let (from, to, amount) = transfer(i as u64, seq);
                        let cts = w.run(&TxnOptions::default(), |tx| {
                            tx.get_for_update(accounts, from, &mut a)?;
                            tx.get_for_update(accounts, to, &mut b)?;
                            tx.update(accounts, from, &row(value(&a) - amount))?;
                            tx.update(accounts, to, &row(value(&b) + amount))?;
                            tx.insert(receipts, receipt_key(i as u64, seq), &row(amount))?;
                            Ok(())
                        });
                        cts.unwrap();
                        done.push((receipt_key(i as u64, seq), 0));
                    }
                    done
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let pool = engine.into_pool().unwrap();
    let trace = pool.backend().trace();
    pool.abandon();
    assert!(trace.lints().is_clean(), "{}: {}", P::KIND.name(), trace.lints().summary());
    (trace, committed)
}

/// The oracle (module docs) on one recovered engine.
fn check<P: Protocol>(
    engine: &ZenEngine<SimBackend, P>,
    acked_receipts: usize,
) -> Result<(), String> {
    let e: &dyn Engine = engine;
    e.check_invariants().map_err(|x| format!("structure: {x}"))?;
    let state = read_state(e);
    let mut expect = [INITIAL; ACCOUNTS as usize];
    let mut present = 0;
    for worker in 0..2u64 {
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
            return Err(format!("account {k}: {got:?}, receipts say {}", expect[k as usize]));
        }
    }
    if present < acked_receipts {
        return Err(format!(
            "{present} receipts survived, {acked_receipts} transfers were acknowledged"
        ));
    }
    let mut w = e.worker().map_err(|x| x.to_string())?;
    w.run(&TxnOptions::default(), |tx| tx.insert(TableId(1), 99_999, &row(1)))
        .map_err(|x| format!("liveness: {x}"))
}

fn campaign<P: Protocol>() {
    let (trace, _) = run_bank::<P>();
    let seed = seed_from_env(0xBA4C);
    for (mode, budget) in
        [(CrashMode::Strict, 48), (CrashMode::Paranoid, 12), (CrashMode::Eadr, 12)]
    {
        let stats = trace
            .check(CheckPlan::new(mode, budget, seed), |point, image| {
                let acked = point.acked_txns().count();
                let backend = SimBackend::from_image(image.bytes.to_vec(), PersistenceDomain::Adr);
                let engine = recover::<P>(backend, None)?;
                check(&engine, acked)?;
                engine.into_pool().unwrap().abandon();
                Ok(())
            })
            .unwrap_or_else(|f| panic!("bank/{} ({}): {f}", P::KIND.name(), mode.name()));
        assert!(stats.points > 2 * PER_WORKER, "{}: {stats:?}", P::KIND.name());
        eprintln!(
            "bank/{} {}: {} crash points, {} images, 0 failures",
            P::KIND.name(),
            mode.name(),
            stats.points,
            stats.images
        );
    }
}

#[test]
fn bank_crash_campaign_no_wait() {
    campaign::<NoWait>();
}
#[test]
fn bank_crash_campaign_wait_die() {
    campaign::<WaitDie>();
}
#[test]
fn bank_crash_campaign_dl_detect() {
    campaign::<DlDetect>();
}
#[test]
fn bank_crash_campaign_occ() {
    campaign::<Occ>();
}
#[test]
fn bank_crash_campaign_silo() {
    campaign::<Silo>();
}
#[test]
fn bank_crash_campaign_tictoc() {
    campaign::<TicToc>();
}
#[test]
fn bank_crash_campaign_mvcc() {
    campaign::<Mvcc>();
}
#[test]
fn bank_crash_campaign_hekaton() {
    campaign::<Hekaton>();
}
#[test]
fn bank_crash_campaign_cicada() {
    campaign::<Cicada>();
}
#[test]
fn bank_crash_campaign_hstore() {
    campaign::<HStore>();
}
