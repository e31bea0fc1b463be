//! `bank`: workers transfer money between a few shared accounts (the
//! campaign's smallest workload, and the one with the most cross-worker
//! reads).
//!
//! Each account row holds its balance and the id of the transaction that
//! wrote it last ([`TxnRef::id`], 0 = the load). A transfer reads both
//! accounts, writes both with itself as writer, and its receipt carries
//! `[from | to << 16 | amount << 32, writer of from it read, writer of to
//! it read]`. After a crash:
//!
//! 1. read-from: the writers a surviving transfer read survived too (the
//!    oracle's dependency closure, from [`Subject::read_from`]);
//! 2. atomicity: every balance equals its initial value plus the surviving
//!    transfers (no half transfer, no transfer without its receipt);
//! 3. version order: each account's recovered writer is the newest
//!    surviving transfer that touched it, and following "the writer it
//!    read" back from it visits exactly the surviving transfers of that
//!    account (no lost or resurrected write).

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

/// A recovered account: balance and last writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Account {
    pub balance: i64,
    pub writer: u64,
}

fn account_row(balance: i64, writer: u64) -> [u8; ROW_BYTES] {
    let mut r = [0u8; ROW_BYTES];
    row::put_i64(&mut r, 0, balance);
    row::put_u64(&mut r, 8, writer);
    r
}

/// (from, to, amount) of a transfer's receipt.
fn decode(receipt: &Receipt) -> (u64, u64, i64) {
    let packed = receipt.payload[0] as u64;
    (packed & 0xFFFF, (packed >> 16) & 0xFFFF, (packed >> 32) as i64)
}

impl Bank {
    pub fn new(accounts: u64) -> Result<Bank> {
        if !(2..=1 << 16).contains(&accounts) {
            return Err(Error::invalid("accounts", accounts, "2..=2^16"));
        }
        Ok(Bank { accounts })
    }

    pub fn accounts(&self) -> u64 {
        self.accounts
    }

    /// Every account, by number (`None`: missing).
    pub fn read_accounts(&self, engine: &dyn Engine) -> Result<Vec<Option<Account>>> {
        let table = meta::table(engine, TABLE)?;
        let mut out = vec![None; self.accounts as usize];
        meta::scan_all(engine, table, 0..=MAX_KEY, &mut |key, r| {
            match out.get_mut(key as usize) {
                Some(slot) => {
                    *slot =
                        Some(Account { balance: row::get_i64(r, 0), writer: row::get_u64(r, 8) })
                }
                None => return Err(Error::Metadata(format!("unexpected account {key}"))),
            }
            Ok(())
        })?;
        Ok(out)
    }

    fn transfer(
        &self,
        table: TableId,
        tx: &mut dyn Transaction,
        t: &Transfer,
        me: u64,
    ) -> zen_engine::Result<[i64; 3]> {
        let (mut a, mut b) = ([0u8; ROW_BYTES], [0u8; ROW_BYTES]);
        tx.get_for_update(table, t.from, &mut a)?;
        tx.get_for_update(table, t.to, &mut b)?;
        tx.update(table, t.from, &account_row(row::get_i64(&a, 0) - t.amount, me))?;
        tx.update(table, t.to, &account_row(row::get_i64(&b, 0) + t.amount, me))?;
        let packed = t.from | t.to << 16 | (t.amount as u64) << 32;
        Ok([packed as i64, row::get_u64(&a, 8) as i64, row::get_u64(&b, 8) as i64])
    }

    /// Check 3 of the module docs for one account.
    fn check_writers(
        &self,
        account: u64,
        writer: u64,
        survivors: &Survivors,
    ) -> std::result::Result<(), Violation> {
        let touches = |r: &Receipt| {
            let (from, to, _) = decode(r);
            from == account || to == account
        };
        let expected = survivors.receipts.values().filter(|r| touches(r)).count();
        let (mut cur, mut seen) = (writer, 0usize);
        while cur != 0 {
            let Some(r) = survivors.get(cur).filter(|r| touches(r)) else {
                return Err(Violation::state(format!(
                    "account {account}: written by {:?}, which did not survive or never wrote it",
                    TxnRef::from_id(cur)
                )));
            };
            seen += 1;
            if seen > expected {
                return Err(Violation::state(format!("account {account}: a writer cycle")));
            }
            let (from, _, _) = decode(r);
            cur = if from == account { r.payload[1] as u64 } else { r.payload[2] as u64 };
        }
        if seen != expected {
            return Err(Violation::state(format!(
                "account {account}: its version chain holds {seen} transfers, {expected} surviving transfers touched it"
            )));
        }
        Ok(())
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
                .column("writer", ColumnType::U64)
                .column("pad", ColumnType::Bytes(16)),
        ]
    }

    fn parameters(&self) -> serde_json::Value {
        json!({ "accounts": self.accounts, "initial_balance": INITIAL })
    }

    fn load(&self, engine: &dyn Engine, _threads: usize) -> Result<()> {
        let table = engine.create_table(&self.tables()[0])?;
        let mut loader = meta::Loader::new(engine)?;
        for k in 0..self.accounts {
            loader.insert(table, k, &account_row(INITIAL, 0))?;
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
        self.transfer(*table, tx, t, 0).map(|_| ())
    }

    fn check(&self, engine: &dyn Engine) -> Result<CheckReport> {
        let accounts = self.read_accounts(engine)?;
        let mut missing = Violations::default();
        for (k, b) in accounts.iter().enumerate() {
            missing.require(b.is_some(), || format!("account {k} is missing"));
        }
        let total: i64 = accounts.iter().flatten().map(|a| a.balance).sum();
        let expected = INITIAL * self.accounts as i64;
        let mut conservation = Violations::default();
        conservation.require(total == expected, || format!("total {total}, loaded {expected}"));
        let mut report = CheckReport::new("bank");
        report.record("accounts", "every account is present", missing);
        report.record("total", "transfers conserve the total", conservation);
        Ok(report)
    }
}

impl Subject for Bank {
    fn population(&self) -> String {
        format!("{} shared accounts; transfers of 1..=100 between two of them", self.accounts)
    }

    fn run_txn(
        &self,
        table: &mut TableId,
        tx: &mut dyn Transaction,
        t: &Transfer,
        me: TxnRef,
    ) -> zen_engine::Result<[i64; 3]> {
        self.transfer(*table, tx, t, me.id())
    }

    fn read_from(&self, receipt: &Receipt, out: &mut Vec<u64>) {
        out.extend([receipt.payload[1] as u64, receipt.payload[2] as u64]);
    }

    fn verify(&self, engine: &dyn Engine, survivors: &Survivors) -> Result<(), Violation> {
        let mut expect = vec![INITIAL; self.accounts as usize];
        for r in survivors.receipts.values() {
            let (from, to, amount) = decode(r);
            if from >= self.accounts || to >= self.accounts {
                return Err(Violation::state(format!("receipt {r:?} names no account")));
            }
            expect[from as usize] -= amount;
            expect[to as usize] += amount;
        }
        let got = self
            .read_accounts(engine)
            .map_err(|e| Violation::state(format!("reading accounts: {e}")))?;
        for (k, (g, e)) in got.iter().zip(&expect).enumerate() {
            let Some(account) = g else {
                return Err(Violation::state(format!("account {k} is missing")));
            };
            if account.balance != *e {
                return Err(Violation::state(format!(
                    "account {k}: balance {}, but the {} surviving transfers say {e}",
                    account.balance,
                    survivors.len()
                )));
            }
            self.check_writers(k as u64, account.writer, survivors)?;
        }
        Ok(())
    }
}
