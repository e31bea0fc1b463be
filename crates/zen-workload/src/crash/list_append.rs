//! `list-append`: each transaction reads two shared lists and appends its
//! own id to the first (Jepsen's list-append, shaped for crash checks).
//!
//! A list row holds its length and its head: the id of the last appender
//! ([`TxnRef::id`], 0 = empty). The transaction `me` reads list `a` (for
//! update) and list `b` (a plain read: a pure read-from dependency, no
//! write), then writes `a = (len + 1, me)`. Its receipt carries `[a | b <<
//! 16, head of a it read, head of b it read]`, so the receipts alone hold
//! every list: list `l` is the chain head → the head its appender read → …
//! → 0. After a crash:
//!
//! 1. read-from: both heads a surviving transaction read survived too (the
//!    oracle's dependency closure, from [`Subject::read_from`]): this is
//!    what a lazy commit whose reader outlived it breaks (issue 15);
//! 2. each recovered list is exactly its surviving appenders: the chain
//!    from the recovered head visits only surviving appenders of that list,
//!    as many as the recovered length, and every surviving appender is on it;
//! 3. a surviving transaction's plain read of `b` saw a head on `b`'s chain.

use std::collections::BTreeSet;

use rand::Rng;
use rand::rngs::SmallRng;
use serde_json::json;
use zen_engine::schema::{MAX_KEY, row};
use zen_engine::{ColumnType, Engine, TableId, TableSchema, Transaction, TxnOptions};

use super::subject::{Subject, Survivors};
use super::violation::{TxnRef, Violation};
use crate::crash_receipts::Receipt;
use crate::error::{Error, Result};
use crate::meta;
use crate::workload::{CheckReport, Violations, Workload};

/// The lists table.
pub const TABLE: &str = "lists";
const ROW_BYTES: usize = 24;

/// The list-append workload. See the module docs.
#[derive(Debug)]
pub struct ListAppend {
    lists: u64,
}

/// One transaction: append to `append`, also read `read`.
#[derive(Debug, Clone, Copy)]
pub struct Append {
    pub append: u64,
    pub read: u64,
}

/// A recovered list: its length and its last appender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct List {
    pub len: u64,
    pub head: u64,
}

fn list_row(len: u64, head: u64) -> [u8; ROW_BYTES] {
    let mut r = [0u8; ROW_BYTES];
    row::put_u64(&mut r, 0, len);
    row::put_u64(&mut r, 8, head);
    r
}

/// (list appended to, list read) of a receipt.
fn decode(receipt: &Receipt) -> (u64, u64) {
    let packed = receipt.payload[0] as u64;
    (packed & 0xFFFF, (packed >> 16) & 0xFFFF)
}

impl ListAppend {
    pub fn new(lists: u64) -> Result<ListAppend> {
        if !(2..=1 << 16).contains(&lists) {
            return Err(Error::invalid("lists", lists, "2..=2^16"));
        }
        Ok(ListAppend { lists })
    }

    /// Every list, by number (`None`: missing).
    pub fn read_lists(&self, engine: &dyn Engine) -> Result<Vec<Option<List>>> {
        let table = meta::table(engine, TABLE)?;
        let mut out = vec![None; self.lists as usize];
        meta::scan_all(engine, table, 0..=MAX_KEY, &mut |key, r| {
            match out.get_mut(key as usize) {
                Some(slot) => {
                    *slot = Some(List { len: row::get_u64(r, 0), head: row::get_u64(r, 8) })
                }
                None => return Err(Error::Metadata(format!("unexpected list {key}"))),
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn append(
        &self,
        table: TableId,
        tx: &mut dyn Transaction,
        t: &Append,
        me: u64,
    ) -> zen_engine::Result<[i64; 3]> {
        let (mut a, mut b) = ([0u8; ROW_BYTES], [0u8; ROW_BYTES]);
        tx.get_for_update(table, t.append, &mut a)?;
        tx.get(table, t.read, &mut b)?;
        tx.update(table, t.append, &list_row(row::get_u64(&a, 0) + 1, me))?;
        let packed = t.append | t.read << 16;
        Ok([packed as i64, row::get_u64(&a, 8) as i64, row::get_u64(&b, 8) as i64])
    }

    /// Checks 2 of the module docs for list `l`; the chain's members.
    fn check_chain(
        &self,
        l: u64,
        list: List,
        survivors: &Survivors,
    ) -> std::result::Result<BTreeSet<u64>, Violation> {
        let appenders = survivors.receipts.values().filter(|r| decode(r).0 == l).count();
        let mut chain = BTreeSet::new();
        let mut cur = list.head;
        while cur != 0 {
            let Some(r) = survivors.get(cur).filter(|r| decode(r).0 == l) else {
                return Err(Violation::state(format!(
                    "list {l}: holds {:?}, which did not survive or never appended to it",
                    TxnRef::from_id(cur)
                )));
            };
            if !chain.insert(cur) || chain.len() > appenders {
                return Err(Violation::state(format!("list {l}: a cycle in its chain")));
            }
            cur = r.payload[1] as u64;
        }
        if chain.len() != appenders || list.len != appenders as u64 {
            return Err(Violation::state(format!(
                "list {l}: length {} and a chain of {}, but {appenders} surviving transactions appended to it",
                list.len,
                chain.len()
            )));
        }
        Ok(chain)
    }
}

impl Workload for ListAppend {
    type Request = Append;
    type Local = TableId;

    fn name(&self) -> &'static str {
        "list-append"
    }

    fn txn_types(&self) -> &'static [&'static str] {
        &["append"]
    }

    fn tables(&self) -> Vec<TableSchema> {
        vec![
            TableSchema::new(TABLE)
                .column("len", ColumnType::U64)
                .column("head", ColumnType::U64)
                .column("pad", ColumnType::Bytes(8)),
        ]
    }

    fn parameters(&self) -> serde_json::Value {
        json!({ "lists": self.lists })
    }

    fn load(&self, engine: &dyn Engine, _threads: usize) -> Result<()> {
        let table = engine.create_table(&self.tables()[0])?;
        let mut loader = meta::Loader::new(engine)?;
        for k in 0..self.lists {
            loader.insert(table, k, &list_row(0, 0))?;
        }
        loader.finish()
    }

    fn local(&self, engine: &dyn Engine, _worker: usize, _workers: usize) -> Result<TableId> {
        meta::table(engine, TABLE)
    }

    fn next(&self, _local: &mut TableId, rng: &mut SmallRng) -> Append {
        let append = rng.random_range(0..self.lists);
        let read = (append + rng.random_range(1..self.lists)) % self.lists;
        Append { append, read }
    }

    fn txn_type(&self, _request: &Append) -> usize {
        0
    }

    fn options(&self, _request: &Append) -> TxnOptions {
        TxnOptions::default()
    }

    fn execute(
        &self,
        table: &mut TableId,
        tx: &mut dyn Transaction,
        t: &Append,
    ) -> zen_engine::Result<()> {
        self.append(*table, tx, t, 0).map(|_| ())
    }

    fn check(&self, engine: &dyn Engine) -> Result<CheckReport> {
        let lists = self.read_lists(engine)?;
        let mut missing = Violations::default();
        for (k, l) in lists.iter().enumerate() {
            missing.require(l.is_some(), || format!("list {k} is missing"));
        }
        let mut report = CheckReport::new("list-append");
        report.record("lists", "every list is present", missing);
        Ok(report)
    }
}

impl Subject for ListAppend {
    fn population(&self) -> String {
        format!("{} shared lists; each transaction reads two and appends its id to one", self.lists)
    }

    fn run_txn(
        &self,
        table: &mut TableId,
        tx: &mut dyn Transaction,
        t: &Append,
        me: TxnRef,
    ) -> zen_engine::Result<[i64; 3]> {
        self.append(*table, tx, t, me.id())
    }

    fn read_from(&self, receipt: &Receipt, out: &mut Vec<u64>) {
        out.extend([receipt.payload[1] as u64, receipt.payload[2] as u64]);
    }

    fn verify(
        &self,
        engine: &dyn Engine,
        survivors: &Survivors,
    ) -> std::result::Result<(), Violation> {
        let lists =
            self.read_lists(engine).map_err(|e| Violation::state(format!("reading lists: {e}")))?;
        let mut chains = Vec::with_capacity(lists.len());
        for (l, list) in lists.iter().enumerate() {
            let Some(list) = list else {
                return Err(Violation::state(format!("list {l} is missing")));
            };
            chains.push(self.check_chain(l as u64, *list, survivors)?);
        }
        for (t, r) in &survivors.receipts {
            let (_, read) = decode(r);
            let head = r.payload[2] as u64;
            let on_chain = chains.get(read as usize).is_some_and(|c| c.contains(&head));
            if head != 0 && !on_chain {
                return Err(Violation::state(format!(
                    "{t} read list {read} at head {:?}, which is not on that list",
                    TxnRef::from_id(head)
                )));
            }
        }
        Ok(())
    }
}
