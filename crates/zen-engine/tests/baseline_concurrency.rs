//! Concurrent bank transfers on every baseline: money moves between accounts
//! (and, now and then, into a freshly inserted account that replaces a
//! deleted one) while auditors scan every account in read-only transactions.
//! Serializability means every audit sees the same total; at the end the
//! total, the invariants and (for mmdb and wbl) the state after a kill and
//! recovery must agree.

mod baseline_common;

use std::sync::atomic::{AtomicBool, Ordering};

use baseline_common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use zen_engine::{CcKind, Durability, Engine, EngineKind, Error, TableId, TxnOptions};

const ACCOUNTS: u64 = 32;
const START: i64 = 1000;

fn total(engine: &dyn Engine, t: TableId) -> (i64, usize) {
    let rows = dump(engine, t);
    (rows.iter().map(|r| r.1).sum(), rows.len())
}

/// One transfer: take `amount` from `from`, give it to `to`; with `rekey`,
/// `to` is deleted and its balance re-inserted under a key above the range.
fn transfer(
    w: &mut Box<dyn zen_engine::EngineWorker + '_>,
    t: TableId,
    opts: &TxnOptions,
    rng: &mut SmallRng,
) -> zen_engine::Result<()> {
    let from = rng.random_range(0..ACCOUNTS);
    let to = rng.random_range(0..ACCOUNTS);
    let amount = rng.random_range(1..50);
    w.run(opts, |tx| {
        let mut a = vec![0u8; ROW];
        let mut b = vec![0u8; ROW];
        if from == to
            || !tx.get_for_update(t, from, &mut a)?
            || !tx.get_for_update(t, to, &mut b)?
        {
            return Ok(());
        }
        tx.update(t, from, &row(value(&a) - amount))?;
        tx.update(t, to, &row(value(&b) + amount))
    })
}

/// Move account `key`'s balance to a new key (delete + insert): scans must
/// never see both or neither.
fn rekey(
    w: &mut Box<dyn zen_engine::EngineWorker + '_>,
    t: TableId,
    opts: &TxnOptions,
    key: u64,
    new: u64,
) {
    let result = w.run(opts, |tx| {
        let mut a = vec![0u8; ROW];
        if !tx.get(t, key, &mut a)? {
            return Ok(());
        }
        tx.delete(t, key)?;
        tx.insert(t, new, &a)
    });
    match result {
        Ok(()) | Err(Error::DuplicateKey { .. }) => {}
        Err(e) => panic!("rekey: {e}"),
    }
}

fn bank(kind: EngineKind, threads: usize, durability: Durability) {
    bank_with(kind, CcKind::Silo, threads, durability);
}

fn bank_with(kind: EngineKind, cc: CcKind, threads: usize, durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let open = |kind, dir: &std::path::Path, create| {
        zen_engine::open(&zen_engine::EngineConfig { cc, ..config(kind, dir, create) })
            .unwrap_or_else(|e| {
                panic!("{}/{}: open (create {create}): {e}", kind.name(), cc.name())
            })
    };
    let engine = open(kind, dir.path(), true);
    let t = engine.create_table(&accounts()).unwrap();
    {
        let mut w = engine.worker().unwrap();
        w.run(&immediate(), |tx| {
            for k in 0..ACCOUNTS {
                tx.insert(t, k, &row(START))?;
            }
            Ok(())
        })
        .unwrap();
    }
    let expected = ACCOUNTS as i64 * START;
    let stop = AtomicBool::new(false);
    let opts = TxnOptions { durability: Some(durability), ..Default::default() };
    std::thread::scope(|s| {
        let engine = engine.as_ref();
        let (stop, opts) = (&stop, &opts);
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                s.spawn(move || {
                    let mut w = engine.worker().unwrap();
                    let mut rng = SmallRng::seed_from_u64(i as u64 + 7);
                    for n in 0..1500u64 {
                        transfer(&mut w, t, opts, &mut rng).unwrap();
                        if n % 100 == 0 {
                            let key = rng.random_range(0..ACCOUNTS);
                            rekey(&mut w, t, opts, key, 1000 + i as u64 * 100_000 + n);
                            rekey(&mut w, t, opts, 1000 + i as u64 * 100_000 + n, key);
                        }
                    }
                })
            })
            .collect();
        let auditor = s.spawn(move || {
            let mut w = engine.worker().unwrap();
            let mut audits = 0;
            while !stop.load(Ordering::Acquire) || audits < 5 {
                let mut seen = Vec::new();
                let sum = w
                    .run(&TxnOptions::read_only(), |tx| {
                        let mut sum = 0;
                        seen.clear();
                        tx.scan(t, 0..=u64::MAX >> 1, usize::MAX, &mut |k, r| {
                            sum += value(r);
                            seen.push((k, value(r)));
                            true
                        })?;
                        Ok(sum)
                    })
                    .unwrap();
                assert_eq!(
                    sum,
                    expected,
                    "{}: an audit saw a non-serializable state {} keys: {:?}",
                    kind.name(),
                    seen.len(),
                    seen
                );
                audits += 1;
            }
            audits
        });
        // Stop the auditor even when a worker panicked (else the scope hangs).
        let joined: Vec<_> = workers.into_iter().map(|h| h.join()).collect();
        stop.store(true, Ordering::Release);
        assert!(auditor.join().unwrap() >= 5);
        for j in joined {
            j.unwrap();
        }
    });
    assert_eq!(total(engine.as_ref(), t).0, expected, "{}", kind.name());
    engine.check_invariants().unwrap();
    let before = dump(engine.as_ref(), t);
    if kind == EngineKind::Ideal {
        return;
    }
    // Workers are gone (each synced on drop): a kill loses nothing.
    engine.abandon();
    let engine = open(kind, dir.path(), false);
    assert_eq!(dump(engine.as_ref(), t), before, "{} after recovery", kind.name());
    engine.check_invariants().unwrap();
    engine.close().unwrap();
}

#[test]
fn ideal_bank_transfers_stay_serializable() {
    bank(EngineKind::Ideal, 3, Durability::Immediate);
}

#[test]
fn mmdb_bank_transfers_stay_serializable_and_recover() {
    bank(EngineKind::Mmdb, 3, Durability::Immediate);
}

#[test]
fn wbl_bank_transfers_stay_serializable_and_recover() {
    bank(EngineKind::Wbl, 2, Durability::Immediate);
    bank(EngineKind::Wbl, 4, Durability::Lazy);
}

#[test]
fn falcon_bank_transfers_stay_serializable_and_recover() {
    bank(EngineKind::Falcon, 3, Durability::Immediate);
}

/// falcon's other protocols (`occ/protocol.rs`): the auditor's scans meet
/// 2PL locks (no-wait) or read old versions from the DRAM version heap
/// while rekeys delete and insert (MVCC).
#[test]
fn falcon_bank_transfers_stay_serializable_under_no_wait_and_mvcc() {
    bank_with(EngineKind::Falcon, CcKind::NoWait, 3, Durability::Immediate);
    bank_with(EngineKind::Falcon, CcKind::Mvcc, 3, Durability::Immediate);
}

/// falcon's waiting 2PL variants and single-version TO: the auditor's scans
/// wait for (wait-die, dl-detect) or abort on (TO: a row rewritten after the
/// auditor's timestamp) the transfers' writes, and TO keeps deleted keys
/// indexed for older scans while rekeys delete and insert.
#[test]
fn falcon_bank_transfers_stay_serializable_under_wait_die_dl_detect_and_to() {
    bank_with(EngineKind::Falcon, CcKind::WaitDie, 3, Durability::Immediate);
    bank_with(EngineKind::Falcon, CcKind::DlDetect, 3, Durability::Immediate);
    bank_with(EngineKind::Falcon, CcKind::To, 3, Durability::Immediate);
}
