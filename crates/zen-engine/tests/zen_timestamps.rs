//! The Tx-CTS invariants recovery and the garbage pipeline rely on, checked
//! in release builds (they were `debug_assert!`s, so `cargo test --release`
//! never checked them): every Tx-CTS a worker commits carries that worker's
//! id in its low bits and is strictly above the worker's previous one, and
//! all of them are distinct, under every protocol, with contention.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::*;
use zen_engine::{CcKind, TxnOptions};

const KEYS: u64 = 16;
const WORKERS: usize = 3;
const TXNS: usize = 300;

#[test]
fn each_worker_commits_increasing_tx_cts_carrying_its_id_under_every_protocol() {
    for cc in CcKind::ALL {
        let engine = Arc::new(zen_engine::open(&dram_config(cc)).unwrap());
        let t = engine.create_table(&accounts()).unwrap();
        {
            let mut w = engine.worker().unwrap();
            for k in 0..KEYS {
                w.run(&TxnOptions::default(), |tx| tx.insert(t, k, &row(0))).unwrap();
            }
        }
        let threads: Vec<_> = (0..WORKERS)
            .map(|i| {
                let engine = Arc::clone(&engine);
                std::thread::spawn(move || {
                    let mut w = engine.worker().unwrap();
                    let id = w.id() as u64;
                    let mut seen = Vec::new();
                    let mut buf = vec![0u8; ROW];
                    for n in 0..TXNS {
                        let key = (n as u64 * 7 + i as u64) % KEYS;
                        let mut attempts = 0;
                        let info = loop {
                            let r = w.execute(&TxnOptions::default(), &mut |tx| {
                                tx.get(t, key, &mut buf)?;
                                tx.update(t, key, &row(value(&buf) + 1))
                            });
                            match r {
                                Ok(info) => break info,
                                Err(e) if e.is_retryable() && attempts < 100_000 => {
                                    attempts += 1;
                                    zen_engine::api::backoff(attempts);
                                }
                                Err(e) => panic!("{cc:?}: {e}"),
                            }
                        };
                        seen.push((id, info.cts));
                    }
                    seen
                })
            })
            .collect();
        let mut all = HashSet::new();
        for h in threads {
            let seen = h.join().unwrap();
            for pair in seen.windows(2) {
                assert!(pair[1].1 > pair[0].1, "{cc:?}: worker {} went back: {pair:?}", pair[0].0);
            }
            for (id, cts) in seen {
                assert_eq!(cts & 0xFF, id, "{cc:?}: Tx-CTS {cts} does not carry worker {id}");
                assert!(all.insert(cts), "{cc:?}: Tx-CTS {cts} committed twice");
            }
        }
        assert_eq!(all.len(), WORKERS * TXNS);
    }
}
