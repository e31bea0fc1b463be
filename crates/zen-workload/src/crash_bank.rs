//! `bank`: the crash test's smallest workload (as in the engine's
//! `zen_crash_bank.rs`). Workers transfer money between a few shared
//! accounts; each transfer's receipt names (from, to, amount), so after a
//! crash the exact balance of every account is known from the receipts that
//! survived: no half transfer, no transfer without its receipt, no receipt
//! without its transfer.

use rand::Rng;
use rand::rngs::SmallRng;
use serde_json::json;
use zen_engine::schema::{MAX_KEY, row};
use zen_engine::{ColumnType, Engine, TableId, TableSchema, Transaction, TxnOptions};

use crate::error::{Error, Result};
use crate::meta;
use crate::workload::{CheckReport, Violations, Workload};

/// The accounts table.
pub const TABLE: &str = "bank_accounts";
/// Every account's balance at load.
pub const INITIAL: i64 = 1000;
const ROW_BYTES: usize = 32;

/// The bank workload. See the module docs.
#[derive(Debug)]
pub struct Bank {
    accounts: u64,
}

/// One transfer.
#[derive(Debug, Clone, Copy)]
pub struct Transfer {
    pub from: u64,
    pub to: u64,
    pub amount: i64,
}

fn balance_row(v: i64) -> [u8; ROW_BYTES] {
    let mut r = [0u8; ROW_BYTES];
    row::put_i64(&mut r, 0, v);
    r
}

impl Bank {
    pub fn new(accounts: u64) -> Result<Bank> {
        if !(2..=1 << 20).contains(&accounts) {
            return Err(Error::invalid("accounts", accounts, "2..=2^20"));
        }
        Ok(Bank { accounts })
    }

    pub fn accounts(&self) -> u64 {
        self.accounts
    }

    /// Every balance, by account.
    pub fn balances(&self, engine: &dyn Engine) -> Result<Vec<Option<i64>>> {
        let table = meta::table(engine, TABLE)?;
        let mut out = vec![None; self.accounts as usize];
        meta::scan_all(engine, table, 0..=MAX_KEY, &mut |key, r| {
            match out.get_mut(key as usize) {
                Some(slot) => *slot = Some(row::get_i64(r, 0)),
                None => return Err(Error::Metadata(format!("unexpected account {key}"))),
            }
            Ok(())
        })?;
        Ok(out)
    }
}

impl Workload for Bank {
    type Request = Transfer;
    type Local = TableId;

    fn name(&self) -> &'static str {
        "bank"
    }

    fn txn_types(&self) -> &'static [&'static str] {
        &["transfer"]
    }

    fn tables(&self) -> Vec<TableSchema> {
        vec![
            TableSchema::new(TABLE)
                .column("balance", ColumnType::I64)
                .column("pad", ColumnType::Bytes(24)),
        ]
    }

    fn parameters(&self) -> serde_json::Value {
        json!({ "accounts": self.accounts, "initial_balance": INITIAL })
    }

    fn load(&self, engine: &dyn Engine, _threads: usize) -> Result<()> {
        let table = engine.create_table(&self.tables()[0])?;
        let mut loader = meta::Loader::new(engine)?;
        for k in 0..self.accounts {
            loader.insert(table, k, &balance_row(INITIAL))?;
        }
        loader.finish()
    }

    fn local(&self, engine: &dyn Engine, _worker: usize, _workers: usize) -> Result<TableId> {
        meta::table(engine, TABLE)
    }

    fn next(&self, _local: &mut TableId, rng: &mut SmallRng) -> Transfer {
        let from = rng.random_range(0..self.accounts);
        let to = (from + rng.random_range(1..self.accounts)) % self.accounts;
        Transfer { from, to, amount: rng.random_range(1..=100) }
    }

    fn txn_type(&self, _request: &Transfer) -> usize {
        0
    }

    fn options(&self, _request: &Transfer) -> TxnOptions {
        TxnOptions::default()
    }

    fn execute(
        &self,
        table: &mut TableId,
        tx: &mut dyn Transaction,
        t: &Transfer,
    ) -> zen_engine::Result<()> {
        let (mut a, mut b) = ([0u8; ROW_BYTES], [0u8; ROW_BYTES]);
        tx.get_for_update(*table, t.from, &mut a)?;
        tx.get_for_update(*table, t.to, &mut b)?;
        tx.update(*table, t.from, &balance_row(row::get_i64(&a, 0) - t.amount))?;
        tx.update(*table, t.to, &balance_row(row::get_i64(&b, 0) + t.amount))
    }

    fn check(&self, engine: &dyn Engine) -> Result<CheckReport> {
        let balances = self.balances(engine)?;
        let mut missing = Violations::default();
        for (k, b) in balances.iter().enumerate() {
            missing.require(b.is_some(), || format!("account {k} is missing"));
        }
        let total: i64 = balances.iter().flatten().sum();
        let expected = INITIAL * self.accounts as i64;
        let mut conservation = Violations::default();
        conservation.require(total == expected, || format!("total {total}, loaded {expected}"));
        let mut report = CheckReport::new("bank");
        report.record("accounts", "every account is present", missing);
        report.record("total", "transfers conserve the total", conservation);
        Ok(report)
    }
}
