//! SmallBank (Cahill et al., SIGMOD '08; the H-Store / BenchBase variant):
//! customers with a savings and a checking account, six transaction types,
//! hotspot accounts.
//!
//! SCHEMA. `accounts` (customer name), `savings` and `checking` (balance in
//! cents, i64), all keyed by customer id `0..accounts`. Initial balances are
//! uniform in $10,000..=$50,000, derived from the customer id so a load is
//! reproducible without a seed; their total is stored in the spec row.
//!
//! TRANSACTIONS (the standard mix, percent):
//!
//! | type             | %  | effect                                                     | money   |
//! | ---------------- | -- | ---------------------------------------------------------- | ------- |
//! | Amalgamate       | 15 | move all of A's savings + checking into B's checking       | kept    |
//! | Balance          | 15 | read A's savings and checking (read-only)                  | kept    |
//! | DepositChecking  | 15 | checking(A) += amount                                      | in      |
//! | SendPayment      | 25 | checking(A) -= amount, checking(B) += amount; user abort if A's checking is short | kept |
//! | TransactSavings  | 15 | savings(A) += amount; user abort if it would go negative  | in      |
//! | WriteCheck       | 15 | checking(A) -= amount, plus a $1 penalty if savings + checking < amount | out |
//!
//! Amounts are uniform in $1..=$100. Like BenchBase, TransactSavings only
//! deposits (its negative-balance rollback is kept for amounts a caller may
//! pass); withdrawals happen through WriteCheck. SendPayment from an account
//! that Amalgamate emptied is a user abort, so hot accounts produce some.
//!
//! Accounts are drawn from the first `hotspot_accounts` customers with
//! probability `hotspot_probability`, uniformly from the rest otherwise
//! (H-Store's fixed-size hotspot); A ≠ B.
//!
//! CONSERVATION. The three transaction types that move money in or out add
//! their net amount to the worker's row of the ledger table, in the same
//! transaction (see `meta.rs`). So at any quiescent point, including after a
//! crash and recovery, Σ savings + Σ checking = initial total + Σ ledger.
//! `check` verifies that, that every customer has all three rows, and that
//! no savings balance is negative (TransactSavings and Amalgamate keep it ≥ 0).

use rand::Rng;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};
use serde_json::json;
use zen_engine::schema::{MAX_KEY, row};
use zen_engine::{ColumnType, Engine, TableId, TableSchema, Transaction, TxnOptions, user_abort};

use crate::error::{Error, Result};
use crate::meta::{self, WorkloadSpec};
use crate::workload::{CheckReport, Violations, Workload};
use crate::zipf::fnv64;

pub const ACCOUNTS: &str = "accounts";
pub const SAVINGS: &str = "savings";
pub const CHECKING: &str = "checking";
pub(crate) const NAME_BYTES: usize = 64;
const DOLLAR_CENTS: i64 = 100;
const MIN_BALANCE_CENTS: i64 = 10_000 * DOLLAR_CENTS;
const MAX_BALANCE_CENTS: i64 = 50_000 * DOLLAR_CENTS;
/// WriteCheck's overdraft penalty.
pub(crate) const PENALTY_CENTS: i64 = DOLLAR_CENTS;

/// The population: stored in the pool by `load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmallBankSpec {
    pub accounts: u64,
    /// Σ of all initial balances, savings and checking.
    pub initial_total_cents: i64,
}

impl SmallBankSpec {
    pub fn new(accounts: u64) -> SmallBankSpec {
        let initial_total_cents =
            (0..accounts).map(|c| initial_balance(c, 0) + initial_balance(c, 1)).sum();
        SmallBankSpec { accounts, initial_total_cents }
    }
}

fn initial_balance(customer: u64, account: u64) -> i64 {
    let span = (MAX_BALANCE_CENTS - MIN_BALANCE_CENTS + 1) as u64;
    MIN_BALANCE_CENTS + (fnv64(customer * 2 + account) % span) as i64
}

/// Everything that defines a SmallBank run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SmallBankConfig {
    pub spec: SmallBankSpec,
    /// The first this many customers are the hotspot.
    pub hotspot_accounts: u64,
    /// Probability that an account is drawn from the hotspot.
    pub hotspot_probability: f64,
}

impl SmallBankConfig {
    /// H-Store's defaults: 100 hot accounts drawn 90 % of the time.
    pub fn new(accounts: u64) -> SmallBankConfig {
        SmallBankConfig {
            spec: SmallBankSpec::new(accounts),
            hotspot_accounts: 100.min(accounts),
            hotspot_probability: 0.9,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if !(2..=1 << 40).contains(&self.spec.accounts) {
            return Err(Error::invalid("accounts", self.spec.accounts, "2..=2^40"));
        }
        if self.hotspot_accounts > self.spec.accounts {
            return Err(Error::invalid(
                "hotspot accounts",
                self.hotspot_accounts,
                format!("0..={} (the number of accounts)", self.spec.accounts),
            ));
        }
        if !(0.0..=1.0).contains(&self.hotspot_probability) {
            return Err(Error::invalid("hotspot probability", self.hotspot_probability, "0..=1"));
        }
        Ok(())
    }
}

/// Transaction types, in the order of [`TXN_TYPES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmallBankRequest {
    Amalgamate { from: u64, to: u64 },
    Balance { customer: u64 },
    DepositChecking { customer: u64, amount: i64 },
    SendPayment { from: u64, to: u64, amount: i64 },
    TransactSavings { customer: u64, amount: i64 },
    WriteCheck { customer: u64, amount: i64 },
}

pub const TXN_TYPES: &[&str] = &[
    "amalgamate",
    "balance",
    "deposit_checking",
    "send_payment",
    "transact_savings",
    "write_check",
];
/// The standard mix, percent, in the order of [`TXN_TYPES`].
pub const MIX: [u32; 6] = [15, 15, 15, 25, 15, 15];

/// The SmallBank workload. See the module docs.
#[derive(Debug)]
pub struct SmallBank {
    config: SmallBankConfig,
}

/// Per-worker state of SmallBank.
pub struct SmallBankLocal {
    worker: usize,
    accounts: TableId,
    savings: TableId,
    checking: TableId,
    ledger: TableId,
    name: [u8; NAME_BYTES],
}

impl SmallBank {
    pub fn new(config: SmallBankConfig) -> Result<SmallBank> {
        config.validate()?;
        Ok(SmallBank { config })
    }

    pub fn spec(&self) -> &SmallBankSpec {
        &self.config.spec
    }

    fn customer(&self, rng: &mut SmallRng) -> u64 {
        let (hot, n) = (self.config.hotspot_accounts, self.config.spec.accounts);
        if hot == n || (hot > 0 && rng.random_bool(self.config.hotspot_probability)) {
            rng.random_range(0..hot.max(1))
        } else {
            rng.random_range(hot..n)
        }
    }

    fn two_customers(&self, rng: &mut SmallRng) -> (u64, u64) {
        let from = self.customer(rng);
        let mut to = self.customer(rng);
        // A bounded number of redraws, then the next customer: never A = B.
        for _ in 0..16 {
            if to != from {
                return (from, to);
            }
            to = self.customer(rng);
        }
        if to == from {
            to = (from + 1) % self.config.spec.accounts;
        }
        (from, to)
    }

    fn load_part(
        &self,
        loader: &mut meta::Loader<'_>,
        tables: &[TableId],
        customers: std::ops::Range<u64>,
    ) -> Result<()> {
        let mut name = [0u8; NAME_BYTES];
        for c in customers {
            let text = format!("customer-{c:012}");
            name[..text.len()].copy_from_slice(text.as_bytes());
            loader.insert(tables[0], c, &name)?;
            loader.insert(tables[1], c, &initial_balance(c, 0).to_le_bytes())?;
            loader.insert(tables[2], c, &initial_balance(c, 1).to_le_bytes())?;
        }
        Ok(())
    }
}

/// Read a balance row (for update when `lock`); missing rows are an error.
fn balance(
    tx: &mut dyn Transaction,
    table: TableId,
    customer: u64,
    lock: bool,
) -> zen_engine::Result<i64> {
    let mut value = [0u8; 8];
    let found = if lock {
        tx.get_for_update(table, customer, &mut value)?
    } else {
        tx.get(table, customer, &mut value)?
    };
    if !found {
        return Err(zen_engine::Error::KeyNotFound { table: format!("{table:?}"), key: customer });
    }
    Ok(i64::from_le_bytes(value))
}

fn set_balance(
    tx: &mut dyn Transaction,
    table: TableId,
    customer: u64,
    cents: i64,
) -> zen_engine::Result<()> {
    tx.update(table, customer, &cents.to_le_bytes())
}

impl SmallBankLocal {
    /// H-Store reads the customer's account row first (it looks the name up).
    fn account(&mut self, tx: &mut dyn Transaction, customer: u64) -> zen_engine::Result<()> {
        if !tx.get(self.accounts, customer, &mut self.name)? {
            return Err(zen_engine::Error::KeyNotFound { table: ACCOUNTS.into(), key: customer });
        }
        Ok(())
    }

    fn amalgamate(
        &mut self,
        tx: &mut dyn Transaction,
        from: u64,
        to: u64,
    ) -> zen_engine::Result<()> {
        self.account(tx, from)?;
        self.account(tx, to)?;
        let total =
            balance(tx, self.savings, from, true)? + balance(tx, self.checking, from, true)?;
        let to_checking = balance(tx, self.checking, to, true)?;
        set_balance(tx, self.savings, from, 0)?;
        set_balance(tx, self.checking, from, 0)?;
        set_balance(tx, self.checking, to, to_checking + total)
    }

    fn send_payment(
        &mut self,
        tx: &mut dyn Transaction,
        from: u64,
        to: u64,
        amount: i64,
    ) -> zen_engine::Result<()> {
        self.account(tx, from)?;
        self.account(tx, to)?;
        let from_checking = balance(tx, self.checking, from, true)?;
        if from_checking < amount {
            return Err(user_abort());
        }
        let to_checking = balance(tx, self.checking, to, true)?;
        set_balance(tx, self.checking, from, from_checking - amount)?;
        set_balance(tx, self.checking, to, to_checking + amount)
    }

    /// Add `amount` to one balance and account for it in the ledger.
    fn external(
        &mut self,
        tx: &mut dyn Transaction,
        table: TableId,
        customer: u64,
        amount: i64,
    ) -> zen_engine::Result<()> {
        let current = balance(tx, table, customer, true)?;
        if table == self.savings && current + amount < 0 {
            return Err(user_abort());
        }
        set_balance(tx, table, customer, current + amount)?;
        meta::ledger_add(tx, self.ledger, self.worker, amount, 1)
    }

    fn write_check(
        &mut self,
        tx: &mut dyn Transaction,
        customer: u64,
        amount: i64,
    ) -> zen_engine::Result<()> {
        self.account(tx, customer)?;
        let savings = balance(tx, self.savings, customer, false)?;
        let checking = balance(tx, self.checking, customer, true)?;
        let debit = if savings + checking < amount { amount + PENALTY_CENTS } else { amount };
        set_balance(tx, self.checking, customer, checking - debit)?;
        meta::ledger_add(tx, self.ledger, self.worker, -debit, 1)
    }
}

impl Workload for SmallBank {
    type Request = SmallBankRequest;
    type Local = SmallBankLocal;

    fn name(&self) -> &'static str {
        "smallbank"
    }

    fn txn_types(&self) -> &'static [&'static str] {
        TXN_TYPES
    }

    fn tables(&self) -> Vec<TableSchema> {
        let balance = |name: &str| TableSchema::new(name).column("balance_cents", ColumnType::I64);
        vec![
            TableSchema::new(ACCOUNTS).column("name", ColumnType::Bytes(NAME_BYTES as u16)),
            balance(SAVINGS),
            balance(CHECKING),
        ]
    }

    fn parameters(&self) -> serde_json::Value {
        let c = &self.config;
        json!({
            "accounts": c.spec.accounts,
            "initial_total_cents": c.spec.initial_total_cents,
            "hotspot_accounts": c.hotspot_accounts,
            "hotspot_probability": c.hotspot_probability,
            "mix_percent": TXN_TYPES.iter().zip(MIX).map(|(t, p)| (t.to_string(), serde_json::Value::from(p))).collect::<serde_json::Map<_, _>>(),
        })
    }

    fn load(&self, engine: &dyn Engine, threads: usize) -> Result<()> {
        let tables = meta::create_tables(engine, &self.tables())?;
        meta::write_spec(engine, &WorkloadSpec::SmallBank(self.config.spec.clone()))?;
        let n = self.config.spec.accounts;
        let parts = (threads * 4).max(1) as u64;
        let per_part = n.div_ceil(parts);
        meta::load_parallel(engine, threads, parts as usize, &|loader, part| {
            let start = (part as u64 * per_part).min(n);
            self.load_part(loader, &tables, start..(start + per_part).min(n))
        })?;
        meta::finish_load(engine)
    }

    fn local(&self, engine: &dyn Engine, worker: usize, _workers: usize) -> Result<SmallBankLocal> {
        meta::check_worker_count(worker + 1)?;
        Ok(SmallBankLocal {
            worker,
            accounts: meta::table(engine, ACCOUNTS)?,
            savings: meta::table(engine, SAVINGS)?,
            checking: meta::table(engine, CHECKING)?,
            ledger: meta::table(engine, meta::LEDGER_TABLE)?,
            name: [0; NAME_BYTES],
        })
    }

    fn next(&self, _local: &mut SmallBankLocal, rng: &mut SmallRng) -> SmallBankRequest {
        let mut pick = rng.random_range(0..100u32);
        let mut kind = 0;
        while pick >= MIX[kind] {
            pick -= MIX[kind];
            kind += 1;
        }
        let amount = rng.random_range(DOLLAR_CENTS..=100 * DOLLAR_CENTS);
        match kind {
            0 => {
                let (from, to) = self.two_customers(rng);
                SmallBankRequest::Amalgamate { from, to }
            }
            1 => SmallBankRequest::Balance { customer: self.customer(rng) },
            2 => SmallBankRequest::DepositChecking { customer: self.customer(rng), amount },
            3 => {
                let (from, to) = self.two_customers(rng);
                SmallBankRequest::SendPayment { from, to, amount }
            }
            4 => SmallBankRequest::TransactSavings { customer: self.customer(rng), amount },
            _ => SmallBankRequest::WriteCheck { customer: self.customer(rng), amount },
        }
    }

    fn txn_type(&self, request: &SmallBankRequest) -> usize {
        match request {
            SmallBankRequest::Amalgamate { .. } => 0,
            SmallBankRequest::Balance { .. } => 1,
            SmallBankRequest::DepositChecking { .. } => 2,
            SmallBankRequest::SendPayment { .. } => 3,
            SmallBankRequest::TransactSavings { .. } => 4,
            SmallBankRequest::WriteCheck { .. } => 5,
        }
    }

    fn options(&self, request: &SmallBankRequest) -> TxnOptions {
        match request {
            SmallBankRequest::Balance { .. } => TxnOptions::read_only(),
            _ => TxnOptions::default(),
        }
    }

    fn execute(
        &self,
        l: &mut SmallBankLocal,
        tx: &mut dyn Transaction,
        request: &SmallBankRequest,
    ) -> zen_engine::Result<()> {
        match *request {
            SmallBankRequest::Amalgamate { from, to } => l.amalgamate(tx, from, to),
            SmallBankRequest::Balance { customer } => {
                l.account(tx, customer)?;
                balance(tx, l.savings, customer, false)?;
                balance(tx, l.checking, customer, false).map(|_| ())
            }
            SmallBankRequest::DepositChecking { customer, amount } => {
                l.account(tx, customer)?;
                l.external(tx, l.checking, customer, amount)
            }
            SmallBankRequest::SendPayment { from, to, amount } => {
                l.send_payment(tx, from, to, amount)
            }
            SmallBankRequest::TransactSavings { customer, amount } => {
                l.account(tx, customer)?;
                l.external(tx, l.savings, customer, amount)
            }
            SmallBankRequest::WriteCheck { customer, amount } => {
                l.write_check(tx, customer, amount)
            }
        }
    }

    /// Every table is keyed by customer id: the customers a request touches.
    fn partition_keys(&self, request: &SmallBankRequest, out: &mut Vec<u64>) {
        match *request {
            SmallBankRequest::Amalgamate { from, to }
            | SmallBankRequest::SendPayment { from, to, .. } => out.extend([from, to]),
            SmallBankRequest::Balance { customer }
            | SmallBankRequest::DepositChecking { customer, .. }
            | SmallBankRequest::TransactSavings { customer, .. }
            | SmallBankRequest::WriteCheck { customer, .. } => out.push(customer),
        }
    }

    fn partition_key_columns(&self) -> Vec<(&'static str, &'static str)> {
        vec![
            (ACCOUNTS, "custid (primary)"),
            (SAVINGS, "custid (primary)"),
            (CHECKING, "custid (primary)"),
        ]
    }

    fn check(&self, engine: &dyn Engine) -> Result<CheckReport> {
        let n = self.config.spec.accounts;
        let mut report = CheckReport::new("smallbank");
        let mut rows = Violations::default();
        let mut negative = Violations::default();
        let mut total = 0i64;
        for name in [ACCOUNTS, SAVINGS, CHECKING] {
            let table = meta::table(engine, name)?;
            let mut expected = 0u64;
            let count = meta::scan_all(engine, table, 0..=MAX_KEY, &mut |key, data| {
                rows.require(key == expected, || {
                    format!("{name}: customer {expected} missing or key {key} out of place")
                });
                expected = key + 1;
                if name != ACCOUNTS {
                    let cents = row::get_i64(data, 0);
                    total += cents;
                    negative.require(name != SAVINGS || cents >= 0, || {
                        format!("savings of {key}: {cents} cents")
                    });
                }
                Ok(())
            })?;
            rows.require(count == n, || format!("{name}: {count} rows, expected {n}"));
        }
        let (net, events) = meta::ledger_totals(engine)?;
        let mut conservation = Violations::default();
        let expected = self.config.spec.initial_total_cents + net;
        conservation.require(total == expected, || {
            format!(
                "balances total {total} cents; initial {} + net deposits {net} ({events} external transactions) = {expected}",
                self.config.spec.initial_total_cents
            )
        });
        report.record("rows", "every customer has an account, savings and checking row", rows);
        report.record(
            "conservation",
            "Σ savings + Σ checking = initial total + net money in/out",
            conservation,
        );
        report.record("savings", "no savings balance is negative", negative);
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_mix_is_the_standard_one() {
        let bank = SmallBank::new(SmallBankConfig::new(1000)).unwrap();
        let mut local = SmallBankLocal {
            worker: 0,
            accounts: TableId(0),
            savings: TableId(1),
            checking: TableId(2),
            ledger: TableId(3),
            name: [0; NAME_BYTES],
        };
        let mut rng = SmallRng::seed_from_u64(4);
        let mut counts = [0u32; 6];
        let draws = 100_000;
        for _ in 0..draws {
            counts[bank.txn_type(&bank.next(&mut local, &mut rng))] += 1;
        }
        for (count, percent) in counts.iter().zip(MIX) {
            let observed = f64::from(*count) / f64::from(draws) * 100.0;
            assert!((observed - f64::from(percent)).abs() < 1.0, "{counts:?}");
        }
    }

    #[test]
    fn hotspot_accounts_get_their_share_and_pairs_are_distinct() {
        let mut config = SmallBankConfig::new(10_000);
        config.hotspot_accounts = 10;
        config.hotspot_probability = 0.75;
        let bank = SmallBank::new(config).unwrap();
        let mut rng = SmallRng::seed_from_u64(6);
        let hot = (0..20_000).filter(|_| bank.customer(&mut rng) < 10).count();
        assert!((hot as f64 / 20_000.0 - 0.75).abs() < 0.02, "{hot}");
        assert!((0..1000).all(|_| {
            let (a, b) = bank.two_customers(&mut rng);
            a != b
        }));
    }

    #[test]
    fn the_initial_total_is_the_sum_of_the_initial_balances() {
        let spec = SmallBankSpec::new(3);
        let sum: i64 = (0..3).map(|c| initial_balance(c, 0) + initial_balance(c, 1)).sum();
        assert_eq!(spec.initial_total_cents, sum);
        assert!(
            (0..100)
                .all(|c| (MIN_BALANCE_CENTS..=MAX_BALANCE_CENTS).contains(&initial_balance(c, 1)))
        );
    }

    #[test]
    fn invalid_hotspots_are_refused() {
        let mut config = SmallBankConfig::new(50);
        config.hotspot_accounts = 51;
        assert!(SmallBank::new(config.clone()).is_err());
        config.hotspot_accounts = 5;
        config.hotspot_probability = 1.5;
        assert!(SmallBank::new(config).is_err());
        assert!(SmallBank::new(SmallBankConfig::new(1)).is_err());
    }
}
