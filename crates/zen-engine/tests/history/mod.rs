//! List-append histories (Elle's model) and the two checkers that judge
//! them: our dependency-graph checker and the `adya` crate. Shared by the
//! serializability tests on OS threads and the schedule tests under shuttle.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};

use zen_engine::{ColumnType, Engine, TableId, TableSchema, Transaction, TxnOptions};

/// Values one row can hold; a row is a length word and the values.
pub const LIST_CAP: usize = 60;
pub const ROW_BYTES: usize = 4 + 4 * LIST_CAP;

#[derive(Debug, Clone)]
pub enum Op {
    Read(u64, Option<Vec<u32>>),
    Append(u64, u32),
}

#[derive(Debug, Clone)]
pub struct TxnRecord {
    pub process: usize,
    pub ops: Vec<Op>,
    pub committed: bool,
}

pub fn decode(row: &[u8]) -> Vec<u32> {
    let n = u32::from_le_bytes(row[0..4].try_into().unwrap()) as usize;
    (0..n).map(|i| u32::from_le_bytes(row[4 + 4 * i..8 + 4 * i].try_into().unwrap())).collect()
}

pub fn encode(list: &[u32]) -> Vec<u8> {
    let mut row = vec![0u8; ROW_BYTES];
    row[0..4].copy_from_slice(&(list.len() as u32).to_le_bytes());
    for (i, v) in list.iter().enumerate() {
        row[4 + 4 * i..8 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    row
}

/// Create the `lists` table holding an empty list under each of `keys` keys.
pub fn create_lists(engine: &dyn Engine, keys: u64) -> TableId {
    let schema = TableSchema::new("lists").column("list", ColumnType::Bytes(ROW_BYTES as u16));
    let t = engine.create_table(&schema).unwrap();
    engine
        .worker()
        .unwrap()
        .run(&TxnOptions::default(), |tx| (0..keys).try_for_each(|k| tx.insert(t, k, &encode(&[]))))
        .unwrap();
    t
}

/// Read key `k`'s list (`row` holds `ROW_BYTES`).
pub fn read(
    tx: &mut dyn Transaction,
    t: TableId,
    k: u64,
    row: &mut [u8],
) -> zen_engine::Result<Op> {
    tx.get(t, k, row)?;
    Ok(Op::Read(k, Some(decode(row))))
}

/// The final reader: every key's list, read in one transaction (it fixes
/// each key's version order).
pub fn read_lists(engine: &dyn Engine, t: TableId, keys: u64) -> Vec<Vec<u32>> {
    let mut w = engine.worker().unwrap();
    let mut row = vec![0u8; ROW_BYTES];
    let mut lists = Vec::new();
    w.run(&TxnOptions::default(), |tx| {
        lists.clear();
        for k in 0..keys {
            tx.get(t, k, &mut row)?;
            lists.push(decode(&row));
        }
        Ok(())
    })
    .unwrap();
    lists
}

/// Our checker: `Ok(edges)` when serializable, `Err(anomaly)` otherwise.
pub fn check_ours(history: &[TxnRecord]) -> Result<usize, String> {
    let mut writer: HashMap<u32, usize> = HashMap::new();
    let mut aborted_values: HashSet<u32> = HashSet::new();
    for (i, t) in history.iter().enumerate() {
        for op in &t.ops {
            if let Op::Append(_, v) = op {
                if t.committed {
                    writer.insert(*v, i);
                } else {
                    aborted_values.insert(*v);
                }
            }
        }
    }
    // Version order per key: the longest committed read; every read a prefix.
    let mut order: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    for t in history.iter().filter(|t| t.committed) {
        for op in &t.ops {
            if let Op::Read(k, Some(list)) = op {
                let o = order.entry(*k).or_default();
                if list.len() > o.len() {
                    if !list.starts_with(o) {
                        return Err(format!("incompatible orders on key {k}"));
                    }
                    *o = list.clone();
                } else if !o.starts_with(list) {
                    return Err(format!("incompatible orders on key {k}"));
                }
                if let Some(v) = list.iter().find(|v| aborted_values.contains(v)) {
                    return Err(format!("G1a: read of aborted append {v} on key {k}"));
                }
            }
        }
    }
    let mut edges: HashMap<(usize, usize), &'static str> = HashMap::new();
    let mut add = |a: usize, b: usize, kind: &'static str| {
        if a != b {
            edges.entry((a, b)).or_insert(kind);
        }
    };
    for o in order.values() {
        for pair in o.windows(2) {
            add(writer[&pair[0]], writer[&pair[1]], "ww");
        }
    }
    for (i, t) in history.iter().enumerate().filter(|(_, t)| t.committed) {
        for op in &t.ops {
            if let Op::Read(k, Some(list)) = op {
                if let Some(last) = list.last() {
                    add(writer[last], i, "wr");
                }
                if let Some(next) = order[k].get(list.len()) {
                    add(i, writer[next], "rw");
                }
            }
        }
    }
    let n = history.len();
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges.keys() {
        adj[a].push(b);
    }
    // Any cycle? (iterative DFS with colours)
    let mut colour = vec![0u8; n];
    for start in 0..n {
        if colour[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        colour[start] = 1;
        while let Some(&mut (v, ref mut i)) = stack.last_mut() {
            if *i < adj[v].len() {
                let u = adj[v][*i];
                *i += 1;
                match colour[u] {
                    0 => {
                        colour[u] = 1;
                        stack.push((u, 0));
                    }
                    1 => {
                        let cycle: Vec<usize> =
                            stack.iter().map(|s| s.0).skip_while(|&x| x != u).collect();
                        let kinds: Vec<&str> = cycle
                            .iter()
                            .zip(cycle.iter().skip(1).chain(std::iter::once(&u)))
                            .map(|(a, b)| edges[&(*a, *b)])
                            .collect();
                        let rw = kinds.iter().filter(|k| **k == "rw").count();
                        let class = match (rw, kinds.contains(&"wr")) {
                            (0, false) => "G0",
                            (0, true) => "G1c",
                            (1, _) => "G-single",
                            _ => "G2-item",
                        };
                        return Err(format!("{class} cycle {cycle:?} ({kinds:?})"));
                    }
                    _ => {}
                }
            } else {
                colour[v] = 2;
                stack.pop();
            }
        }
    }
    Ok(edges.len())
}

/// The same history as list-append JSON lines, checked by `adya`.
pub fn check_adya(history: &[TxnRecord]) -> adya::Report {
    let mut lines = String::new();
    for t in history {
        let ops = |done: bool| -> Vec<serde_json::Value> {
            t.ops
                .iter()
                .map(|op| match op {
                    Op::Read(k, list) => {
                        let seen =
                            if done { serde_json::json!(list) } else { serde_json::Value::Null };
                        serde_json::json!(["r", k, seen])
                    }
                    Op::Append(k, v) => serde_json::json!(["append", k, v]),
                })
                .collect()
        };
        lines.push_str(
            &serde_json::json!({"type": "invoke", "process": t.process, "value": ops(false)})
                .to_string(),
        );
        lines.push('\n');
        let kind = if t.committed { "ok" } else { "fail" };
        lines.push_str(
            &serde_json::json!({"type": kind, "process": t.process, "value": ops(true)})
                .to_string(),
        );
        lines.push('\n');
    }
    let h = adya::History::from_json(&lines).expect("our history is valid list-append JSON");
    let opts = adya::Opts { models: vec!["serializable".into()], ..adya::Opts::default() };
    adya::check(&h, adya::Workload::ListAppend, &opts)
}
