//! One-shot SmallBank: each of the six transaction types is a stored
//! procedure (`smallbank.<type>`) whose write set is known from the request:
//!
//! | procedure          | declared writes                                   |
//! | ------------------ | ------------------------------------------------- |
//! | amalgamate         | savings(A), checking(A), checking(B)              |
//! | balance            | none (read-only)                                  |
//! | deposit_checking   | checking(A), ledger(l)                            |
//! | send_payment       | checking(A), checking(B)                          |
//! | transact_savings   | savings(A), ledger(l)                             |
//! | write_check        | checking(A), ledger(l)                            |
//!
//! Every table is keyed by customer id and every request carries its
//! customer ids, so no key has to be found by a reconnaissance read (the
//! H-Store variant that looks customers up by name would need one).
//!
//! The interactive form adds money moved in or out to the *worker's* ledger
//! row; a one-shot transaction has no worker (the engine picks the thread),
//! so it adds it to ledger row `l` = its position in the epoch modulo
//! [`meta::LEDGER_ROWS`]: a function of the input only, so the final state
//! does not depend on the thread count, and with the engine's round-robin
//! assignment (transaction i on thread i mod N) transactions on different
//! threads do not share a ledger row when N divides 256. The conservation
//! check (`SmallBank::check`) sums every ledger row, so it holds the same.

use zen_engine::schema::row;
use zen_engine::{Engine, OneShot, OneShotTx, ProcId, ProcedureSet, TableId, user_abort};

use super::OneShotWorkload;
use crate::error::Result;
use crate::meta::{self, LEDGER_AMOUNT_AT, LEDGER_EVENTS_AT, LEDGER_ROWS};
use crate::smallbank::{
    ACCOUNTS, CHECKING, NAME_BYTES, PENALTY_CENTS, SAVINGS, SmallBank, SmallBankRequest, TXN_TYPES,
};

/// Input bytes: 4 table ids (u32) | A | B | amount | ledger row (u64 each).
const INPUT_BYTES: usize = 16 + 4 * 8;

/// The tables a SmallBank procedure touches, as its input names them.
#[derive(Debug, Clone, Copy)]
struct Tables {
    accounts: TableId,
    savings: TableId,
    checking: TableId,
    ledger: TableId,
}

/// A decoded input.
#[derive(Debug, Clone, Copy)]
struct Input {
    t: Tables,
    a: u64,
    b: u64,
    amount: i64,
    ledger_row: u64,
}

fn encode(t: Tables, a: u64, b: u64, amount: i64, ledger_row: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(INPUT_BYTES);
    for id in [t.accounts, t.savings, t.checking, t.ledger] {
        out.extend_from_slice(&id.0.to_le_bytes());
    }
    for v in [a, b, amount as u64, ledger_row] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

fn decode(input: &[u8]) -> zen_engine::Result<Input> {
    if input.len() != INPUT_BYTES {
        return Err(zen_engine::Error::InvalidArgument(format!(
            "smallbank one-shot input: {} bytes, expected {INPUT_BYTES}",
            input.len()
        )));
    }
    let u32_at = |i: usize| TableId(u32::from_le_bytes(input[i..i + 4].try_into().expect("4")));
    let u64_at = |i: usize| u64::from_le_bytes(input[i..i + 8].try_into().expect("8"));
    Ok(Input {
        t: Tables {
            accounts: u32_at(0),
            savings: u32_at(4),
            checking: u32_at(8),
            ledger: u32_at(12),
        },
        a: u64_at(16),
        b: u64_at(24),
        amount: u64_at(32) as i64,
        ledger_row: u64_at(40),
    })
}

/// H-Store reads the customer's account row first.
fn account(tx: &mut dyn OneShotTx, t: Tables, customer: u64) -> zen_engine::Result<()> {
    let mut name = [0u8; NAME_BYTES];
    if !tx.get(t.accounts, customer, &mut name)? {
        return Err(zen_engine::Error::KeyNotFound { table: ACCOUNTS.into(), key: customer });
    }
    Ok(())
}

fn balance(
    tx: &mut dyn OneShotTx,
    table: TableId,
    name: &str,
    customer: u64,
) -> zen_engine::Result<i64> {
    let mut value = [0u8; 8];
    if !tx.get(table, customer, &mut value)? {
        return Err(zen_engine::Error::KeyNotFound { table: name.into(), key: customer });
    }
    Ok(i64::from_le_bytes(value))
}

fn set(
    tx: &mut dyn OneShotTx,
    table: TableId,
    customer: u64,
    cents: i64,
) -> zen_engine::Result<()> {
    tx.put(table, customer, &cents.to_le_bytes())
}

/// Add `amount` (one event) to ledger row `l`.
fn ledger_add(tx: &mut dyn OneShotTx, i: &Input, amount: i64) -> zen_engine::Result<()> {
    let mut entry = [0u8; 16];
    if !tx.get(i.t.ledger, i.ledger_row, &mut entry)? {
        return Err(zen_engine::Error::KeyNotFound {
            table: meta::LEDGER_TABLE.into(),
            key: i.ledger_row,
        });
    }
    let total = row::get_i64(&entry, LEDGER_AMOUNT_AT) + amount;
    let events = row::get_i64(&entry, LEDGER_EVENTS_AT) + 1;
    row::put_i64(&mut entry, LEDGER_AMOUNT_AT, total);
    row::put_i64(&mut entry, LEDGER_EVENTS_AT, events);
    tx.put(i.t.ledger, i.ledger_row, &entry)
}

/// Run transaction type `kind` (an index of [`TXN_TYPES`]); the output is
/// the balance the type reads last (Balance: savings + checking).
fn procedure(kind: usize, tx: &mut dyn OneShotTx, input: &[u8]) -> zen_engine::Result<Vec<u8>> {
    let i = decode(input)?;
    let t = i.t;
    let out = match kind {
        0 => {
            account(tx, t, i.a)?;
            account(tx, t, i.b)?;
            let total =
                balance(tx, t.savings, SAVINGS, i.a)? + balance(tx, t.checking, CHECKING, i.a)?;
            let to = balance(tx, t.checking, CHECKING, i.b)?;
            set(tx, t.savings, i.a, 0)?;
            set(tx, t.checking, i.a, 0)?;
            set(tx, t.checking, i.b, to + total)?;
            to + total
        }
        1 => {
            account(tx, t, i.a)?;
            balance(tx, t.savings, SAVINGS, i.a)? + balance(tx, t.checking, CHECKING, i.a)?
        }
        2 => {
            account(tx, t, i.a)?;
            let c = balance(tx, t.checking, CHECKING, i.a)? + i.amount;
            set(tx, t.checking, i.a, c)?;
            ledger_add(tx, &i, i.amount)?;
            c
        }
        3 => {
            account(tx, t, i.a)?;
            account(tx, t, i.b)?;
            let from = balance(tx, t.checking, CHECKING, i.a)?;
            if from < i.amount {
                return Err(user_abort());
            }
            let to = balance(tx, t.checking, CHECKING, i.b)?;
            set(tx, t.checking, i.a, from - i.amount)?;
            set(tx, t.checking, i.b, to + i.amount)?;
            from - i.amount
        }
        4 => {
            account(tx, t, i.a)?;
            let s = balance(tx, t.savings, SAVINGS, i.a)? + i.amount;
            if s < 0 {
                return Err(user_abort());
            }
            set(tx, t.savings, i.a, s)?;
            ledger_add(tx, &i, i.amount)?;
            s
        }
        5 => {
            account(tx, t, i.a)?;
            let s = balance(tx, t.savings, SAVINGS, i.a)?;
            let c = balance(tx, t.checking, CHECKING, i.a)?;
            let debit = if s + c < i.amount { i.amount + PENALTY_CENTS } else { i.amount };
            set(tx, t.checking, i.a, c - debit)?;
            ledger_add(tx, &i, -debit)?;
            c - debit
        }
        _ => {
            return Err(zen_engine::Error::InvalidArgument(format!(
                "smallbank one-shot: no transaction type {kind}"
            )));
        }
    };
    Ok(out.to_le_bytes().to_vec())
}

/// Register the six procedures (`smallbank.amalgamate`, …) in `set`.
pub fn register_smallbank(set: &mut ProcedureSet) -> zen_engine::Result<()> {
    for (kind, name) in TXN_TYPES.iter().enumerate() {
        set.register(&format!("smallbank.{name}"), move |tx, input| procedure(kind, tx, input))?;
    }
    Ok(())
}

/// Procedure ids (in [`TXN_TYPES`] order) and tables.
pub struct SmallBankPlan {
    procs: Vec<ProcId>,
    t: Tables,
}

impl OneShotWorkload for SmallBank {
    type Plan = SmallBankPlan;

    fn plan(&self, engine: &dyn Engine, procedures: &ProcedureSet) -> Result<SmallBankPlan> {
        let procs = TXN_TYPES
            .iter()
            .map(|name| super::procedure(procedures, &format!("smallbank.{name}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(SmallBankPlan {
            procs,
            t: Tables {
                accounts: meta::table(engine, ACCOUNTS)?,
                savings: meta::table(engine, SAVINGS)?,
                checking: meta::table(engine, CHECKING)?,
                ledger: meta::table(engine, meta::LEDGER_TABLE)?,
            },
        })
    }

    fn batch(
        &self,
        _engine: &dyn Engine,
        plan: &SmallBankPlan,
        requests: &[SmallBankRequest],
    ) -> Result<Vec<OneShot>> {
        requests.iter().enumerate().map(|(i, r)| self.oneshot(plan, r, i)).collect()
    }
}

impl SmallBank {
    /// The one-shot form of `request`, the `index`-th of its epoch (its
    /// ledger row is `index` mod 256).
    pub fn oneshot(
        &self,
        plan: &SmallBankPlan,
        request: &SmallBankRequest,
        index: usize,
    ) -> Result<OneShot> {
        let t = plan.t;
        let l = index as u64 % LEDGER_ROWS;
        let (kind, a, b, amount, writes) = match *request {
            SmallBankRequest::Amalgamate { from, to } => {
                (0, from, to, 0, vec![(t.savings, from), (t.checking, from), (t.checking, to)])
            }
            SmallBankRequest::Balance { customer } => (1, customer, 0, 0, Vec::new()),
            SmallBankRequest::DepositChecking { customer, amount } => {
                (2, customer, 0, amount, vec![(t.checking, customer), (t.ledger, l)])
            }
            SmallBankRequest::SendPayment { from, to, amount } => {
                (3, from, to, amount, vec![(t.checking, from), (t.checking, to)])
            }
            SmallBankRequest::TransactSavings { customer, amount } => {
                (4, customer, 0, amount, vec![(t.savings, customer), (t.ledger, l)])
            }
            SmallBankRequest::WriteCheck { customer, amount } => {
                (5, customer, 0, amount, vec![(t.checking, customer), (t.ledger, l)])
            }
        };
        Ok(OneShot { proc: plan.procs[kind], input: encode(t, a, b, amount, l), writes })
    }
}
