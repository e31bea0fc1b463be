//! The Zen engine on a per-node pool (`--pool-per-node`, two member files)
//! with two virtual NUMA nodes: each worker's heap pages come from its
//! node's file, committed rows survive a crash, and reopening with another
//! node count is refused without touching the files.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use zen_engine::numa::{Binding, NumaConfig, NumaMode};
use zen_engine::{CcKind, EngineConfig, Error, TxnOptions};
use zen_pmem::{BackendOptions, FsBackend, Pool, SYSTEM_TABLE};

fn config(dir: &Path, create: bool, nodes: usize) -> EngineConfig {
    EngineConfig {
        pool_per_node: Some(2),
        numa: NumaConfig {
            nodes: Some(nodes),
            workers: Some(nodes),
            binding: Binding::Even,
            mode: NumaMode::LocalWrite,
            pin: false,
            ..NumaConfig::default()
        },
        ..fs_config(dir, create, CcKind::Silo)
    }
}

fn members(dir: &Path) -> Vec<PathBuf> {
    zen_pmem::pool::member_paths(&dir.join("test.pool"), 2)
}

#[test]
fn each_workers_heap_pages_come_from_its_nodes_file_and_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let engine = zen_engine::open(&config(dir.path(), true, 2)).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    {
        // Workers 0 and 1: on nodes 0 and 1 with `even` binding.
        let mut w0 = engine.worker().unwrap();
        let mut w1 = engine.worker().unwrap();
        for (w, keys) in [(&mut w0, 0..500u64), (&mut w1, 500..1000)] {
            w.run(&TxnOptions::default(), |tx| {
                keys.clone().try_for_each(|k| tx.insert(t, k, &row(k as i64 * 3)))
            })
            .unwrap();
        }
    }
    engine.abandon();
    assert!(!dir.path().join("test.pool").exists());

    let engine = zen_engine::open(&config(dir.path(), false, 2)).unwrap();
    let mut w = engine.worker().unwrap();
    let mut out = vec![0u8; ROW];
    for k in 0..1000u64 {
        assert!(w.run(&TxnOptions::default(), |tx| tx.get(t, k, &mut out)).unwrap(), "key {k}");
        assert_eq!(value(&out), k as i64 * 3);
    }
    drop(w);
    engine.close().unwrap();

    let pool = Pool::<FsBackend>::open(&BackendOptions::per_node(members(dir.path()))).unwrap();
    let mut per_member = [0u64; 2];
    for (page, owner) in pool.owned_pages().unwrap() {
        if owner.table == SYSTEM_TABLE {
            continue;
        }
        let node = usize::from(owner.worker == 1);
        assert_eq!(pool.page_member(page), node, "page {page} of worker {}", owner.worker);
        per_member[node] += 1;
    }
    assert!(per_member[0] > 0 && per_member[1] > 0, "{per_member:?}");
    pool.close().unwrap();
}

#[test]
fn reopening_with_another_node_count_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    zen_engine::open(&config(dir.path(), true, 2)).unwrap().close().unwrap();
    let before: Vec<Vec<u8>> =
        members(dir.path()).iter().map(|m| std::fs::read(m).unwrap()).collect();
    let three = EngineConfig { max_workers: 8, ..config(dir.path(), false, 3) };
    match zen_engine::open(&three) {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("--numa-nodes 2"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a 2-member pool opened on 3 nodes"),
    }
    let after: Vec<Vec<u8>> =
        members(dir.path()).iter().map(|m| std::fs::read(m).unwrap()).collect();
    assert!(before == after, "a refused open changed a member file");
}
