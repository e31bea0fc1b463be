//! Serializability checking over random concurrent histories, for every
//! protocol: a black-box list-append workload (Elle's model) on a small hot
//! key set, checked by our own dependency-graph checker AND by the `adya`
//! crate on the same history written as list-append JSON lines; the two must
//! agree (and both must find serializability).
//!
//! Why list-append: every row holds the list of values appended to it, so a
//! read reveals the exact version it saw and the version order is explicit,
//! which makes ww, wr and rw edges decidable from outside the engine.
//!
//! Our checker: per key, the committed lists must be prefixes of one order;
//! edges ww (consecutive appends), wr (writer of the last element a read saw
//! → reader), rw (reader → writer of the first element it did not see); a
//! read of an element appended by an aborted transaction is G1a; any cycle
//! among committed transactions is classified G0 (ww only), G1c (ww/wr),
//! G-single (one rw) or G2-item (more).
//!
//! A quarter of the transactions are declared read-only, so the Zen+
//! snapshots (reads at the global minimum − 1, no validation) are part of
//! every `mvcc` and `hekaton` history checked.

mod common;
mod history;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use common::*;
use history::*;
use rand::{Rng, SeedableRng};
use zen_engine::{CcKind, Engine, TxnOptions};

const KEYS: u64 = 12;
const WORKERS: usize = 3;
const TXNS: usize = 120;

/// Run the workload; returns every attempt (committed or aborted).
fn run_history(cc: CcKind, seed: u64) -> Vec<TxnRecord> {
    run_history_on(&dram_config(cc), seed)
}

/// As `run_history`, on the engine `config` opens.
fn run_history_on(config: &zen_engine::EngineConfig, seed: u64) -> Vec<TxnRecord> {
    let engine: Arc<Box<dyn Engine>> = Arc::new(zen_engine::open(config).unwrap());
    let t = create_lists(engine.as_ref().as_ref(), KEYS);
    let appended: Arc<Mutex<HashMap<u64, usize>>> = Arc::default();
    let start = Arc::new(std::sync::Barrier::new(WORKERS));
    let handles: Vec<_> = (0..WORKERS)
        .map(|p| {
            let (engine, appended, start) = (engine.clone(), appended.clone(), start.clone());
            std::thread::spawn(move || {
                let mut w = engine.worker().unwrap();
                start.wait();
                let mut rng = rand::rngs::SmallRng::seed_from_u64(seed ^ (p as u64) << 32);
                let mut records = Vec::new();
                let mut next = 0u32;
                for _ in 0..TXNS {
                    // A quarter are declared read-only (Zen+ snapshots under
                    // `mvcc` and `hekaton`, the protocol's reads elsewhere).
                    let read_only = rng.random_bool(0.25);
                    let plan: Vec<(u64, bool)> = (0..rng.random_range(2..5))
                        .map(|_| (rng.random_range(0..KEYS), !read_only && rng.random_bool(0.5)))
                        .collect();
                    let opts =
                        if read_only { TxnOptions::read_only() } else { TxnOptions::default() };
                    let mut ops = Vec::new();
                    let mut row = vec![0u8; ROW_BYTES];
                    let r = w.execute(&opts, &mut |tx| {
                        ops.clear();
                        let mut appended_here = HashSet::new();
                        for &(k, append) in &plan {
                            // Widen the window between operations so that
                            // transactions of different workers interleave.
                            for _ in 0..2_000 {
                                std::hint::spin_loop();
                            }
                            if append && appended_here.insert(k) {
                                tx.get_for_update(t, k, &mut row)?;
                                let mut list = decode(&row);
                                let full = appended.lock().unwrap().get(&k).copied().unwrap_or(0)
                                    >= LIST_CAP - 1;
                                if list.len() >= LIST_CAP - 1 || full {
                                    ops.push(Op::Read(k, Some(list)));
                                    continue;
                                }
                                next += 1;
                                let v = (p as u32) << 20 | next;
                                list.push(v);
                                tx.update(t, k, &encode(&list))?;
                                ops.push(Op::Append(k, v));
                            } else {
                                ops.push(read(tx, t, k, &mut row)?);
                            }
                        }
                        Ok(())
                    });
                    if r.is_ok() {
                        let mut a = appended.lock().unwrap();
                        for op in &ops {
                            if let Op::Append(k, _) = op {
                                *a.entry(*k).or_default() += 1;
                            }
                        }
                    }
                    records.push(TxnRecord { process: p, ops: ops.clone(), committed: r.is_ok() });
                }
                records
            })
        })
        .collect();
    let mut history: Vec<TxnRecord> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    // A final reader establishes every key's full version order.
    let lists = read_lists(engine.as_ref().as_ref(), t, KEYS);
    let ops = lists.into_iter().zip(0..).map(|(list, k)| Op::Read(k, Some(list))).collect();
    history.push(TxnRecord { process: WORKERS, ops, committed: true });
    history
}

#[test]
fn random_histories_are_serializable_for_every_protocol_and_both_checkers_agree() {
    let seed = zen_pmem::sim::seed_from_env(0x5E71A1);
    let mut txns = 0;
    for cc in CcKind::ALL {
        for round in 0..2u64 {
            let history = run_history(cc, seed + round);
            txns += history.len();
            let ours = check_ours(&history);
            let theirs = check_adya(&history);
            assert!(ours.is_ok(), "{cc:?} seed {}: our checker: {:?}", seed + round, ours);
            assert_eq!(
                theirs.valid,
                adya::Valid::True,
                "{cc:?} seed {}: adya: {:?}",
                seed + round,
                theirs.anomaly_types
            );
            let committed = history.iter().filter(|t| t.committed).count();
            assert!(committed > TXNS, "{cc:?}: only {committed} transactions committed");
            eprintln!(
                "{}: {committed} committed, {} aborted, {} dependency edges",
                cc.name(),
                history.len() - committed,
                ours.unwrap()
            );
        }
    }
    eprintln!(
        "{} histories, {txns} transactions: no anomaly (ours and adya agree)",
        CcKind::ALL.len() * 2
    );
}

#[test]
fn both_checkers_catch_a_write_skew_and_an_aborted_read() {
    // Write skew: T0 and T1 each read both keys empty and append to one.
    let skew = vec![
        TxnRecord {
            process: 0,
            committed: true,
            ops: vec![Op::Read(1, Some(vec![])), Op::Read(2, Some(vec![])), Op::Append(1, 10)],
        },
        TxnRecord {
            process: 1,
            committed: true,
            ops: vec![Op::Read(1, Some(vec![])), Op::Read(2, Some(vec![])), Op::Append(2, 20)],
        },
        TxnRecord {
            process: 2,
            committed: true,
            ops: vec![Op::Read(1, Some(vec![10])), Op::Read(2, Some(vec![20]))],
        },
    ];
    assert!(check_ours(&skew).unwrap_err().contains("G2-item"));
    assert_eq!(check_adya(&skew).valid, adya::Valid::False);
    let aborted = vec![
        TxnRecord { process: 0, committed: false, ops: vec![Op::Append(1, 10)] },
        TxnRecord { process: 1, committed: true, ops: vec![Op::Read(1, Some(vec![10]))] },
    ];
    assert!(check_ours(&aborted).unwrap_err().contains("G1a"));
    assert_eq!(check_adya(&aborted).valid, adya::Valid::False);
}

/// falcon (Silo on the shared OCC core, rows updated in place in NVM) under
/// both checkers, on a pool file under ADR and on eADR with hot tracking.
#[test]
fn falcon_histories_are_serializable_and_both_checkers_agree() {
    let seed = zen_pmem::sim::seed_from_env(0xFA1C0);
    for (round, domain) in [zen_pmem::PersistenceDomain::Adr, zen_pmem::PersistenceDomain::Eadr]
        .into_iter()
        .enumerate()
    {
        let dir = tempfile::tempdir().unwrap();
        let config = zen_engine::EngineConfig {
            engine: zen_engine::EngineKind::Falcon,
            pmem: zen_pmem::BackendKind::Fs,
            pool: Some(dir.path().join("falcon.pool")),
            domain,
            ..dram_config(CcKind::Silo)
        };
        let history = run_history_on(&config, seed + round as u64);
        let ours = check_ours(&history);
        let theirs = check_adya(&history);
        assert!(ours.is_ok(), "falcon {domain:?}: our checker: {ours:?}");
        assert_eq!(
            theirs.valid,
            adya::Valid::True,
            "falcon {domain:?}: {:?}",
            theirs.anomaly_types
        );
        let committed = history.iter().filter(|t| t.committed).count();
        assert!(committed > TXNS, "falcon: only {committed} transactions committed");
    }
}
