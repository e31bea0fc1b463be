//! TPC-C: nine tables, the five transactions in the 45/43/4/4/4 mix, and the
//! consistency conditions of clause 3.3.2 as `check`.
//!
//! What follows the specification (revision 5.11): the schema and population
//! rules (clause 1 and 4.3), NURand with separate load and run constants,
//! remote warehouses (1 % of New-Order lines, 15 % of Payments, when there is
//! more than one warehouse), the 1 % of New-Orders that roll back on an
//! unused item id (a user abort, counted apart from CC aborts), customers
//! selected by last name 60 % of the time through the secondary index on
//! (c_w_id, c_d_id, c_last) with the midpoint by first name, Delivery taking
//! the oldest NEW-ORDER row of each district with a scan and deleting it,
//! Order-Status and Stock-Level reading with scans, integer money.
//!
//! What differs, and why:
//! - No terminals, keying or think times: this is an engine benchmark, so
//!   each driver worker submits transactions back to back, like DBx1000. A
//!   worker's home warehouses are `w − 1 ≡ worker (mod workers)`, or
//!   `worker mod W` when there are more workers than warehouses; the load
//!   writes each home warehouse as the worker that will run it
//!   (`load::part_owner`).
//! - Delivery runs as one ordinary transaction over the ten districts, not
//!   deferred through a queue.
//! - Items of one order are distinct (so no stock row is updated twice in a
//!   transaction).
//! - SCALED-DOWN MODE: items, customers per district and orders per district
//!   are parameters (100,000 / 3,000 / 3,000 at full scale). The population
//!   rules scale with them so the twelve conditions hold: W_YTD and D_YTD are
//!   the sum of the initial $10 history rows; the last 30 % of each
//!   district's orders are undelivered new orders; last names of the first
//!   min(1000, customers) customers are numbered sequentially, so a
//!   by-name lookup (NURand over 0..min(999, customers − 1)) always finds
//!   someone.
//!
//! CONDITION 11 holds only until the first Delivery. Every committed Delivery
//! adds 1 to its worker's ledger row in the same transaction (see
//! `meta.rs`), so `check` knows, even in another process or after a crash,
//! whether any Delivery committed, and reports 11 as skipped if one did.

mod check;
mod load;
pub(crate) mod random;
pub mod schema;
pub(crate) mod txn;

use serde::{Deserialize, Serialize};
use serde_json::json;
use zen_engine::{Engine, TableId, TableSchema, Transaction, TxnOptions};

use crate::error::{Error, Result};
use crate::meta;
use crate::workload::{CheckReport, Workload};
pub use txn::TpccRequest;

use rand::rngs::SmallRng;
use schema::{DISTRICTS, MAX_CUSTOMERS, MAX_ITEMS, MAX_WAREHOUSES};

/// The population: stored in the pool by `load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TpccSpec {
    pub warehouses: u64,
    pub items: u64,
    pub customers_per_district: u64,
    pub orders_per_district: u64,
}

impl TpccSpec {
    /// Full scale: 100,000 items, 3,000 customers and orders per district.
    pub fn full(warehouses: u64) -> TpccSpec {
        TpccSpec {
            warehouses,
            items: 100_000,
            customers_per_district: 3000,
            orders_per_district: 3000,
        }
    }

    /// Undelivered orders per district at load: the last 30 % (900 of 3,000).
    pub fn new_orders_per_district(&self) -> u64 {
        self.orders_per_district * 3 / 10
    }

    pub fn validate(&self) -> Result<()> {
        let range = |name: &'static str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(Error::invalid(name, value, format!("{min}..={max}")))
            }
        };
        range("warehouses", self.warehouses, 1, MAX_WAREHOUSES)?;
        range("items", self.items, 20, MAX_ITEMS.min(100_000))?;
        range("customers per district", self.customers_per_district, 10, MAX_CUSTOMERS.min(3000))?;
        range("orders per district", self.orders_per_district, 10, 1 << 30)
    }
}

/// Everything that defines a TPC-C run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TpccConfig {
    pub spec: TpccSpec,
    /// Seed of the population's random values.
    pub load_seed: u64,
}

/// Transaction types, in the order of the mix.
pub const TXN_TYPES: &[&str] = &["new_order", "payment", "order_status", "delivery", "stock_level"];
/// The standard mix, percent.
pub const MIX: [u32; 5] = [45, 43, 4, 4, 4];

/// Table ids, resolved once per worker.
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    pub warehouse: TableId,
    pub district: TableId,
    pub customer: TableId,
    pub history: TableId,
    pub new_order: TableId,
    pub orders: TableId,
    pub order_line: TableId,
    pub item: TableId,
    pub stock: TableId,
    pub ledger: TableId,
}

impl Tables {
    pub fn resolve(engine: &dyn Engine) -> Result<Tables> {
        let t = |name| meta::table(engine, name);
        Ok(Tables {
            warehouse: t(schema::warehouse::NAME)?,
            district: t(schema::district::NAME)?,
            customer: t(schema::customer::NAME)?,
            history: t(schema::history::NAME)?,
            new_order: t(schema::new_order::NAME)?,
            orders: t(schema::orders::NAME)?,
            order_line: t(schema::order_line::NAME)?,
            item: t(schema::item::NAME)?,
            stock: t(schema::stock::NAME)?,
            ledger: t(meta::LEDGER_TABLE)?,
        })
    }
}

/// The TPC-C workload. See the module docs.
#[derive(Debug)]
pub struct Tpcc {
    config: TpccConfig,
}

impl Tpcc {
    pub fn new(config: TpccConfig) -> Result<Tpcc> {
        config.spec.validate()?;
        Ok(Tpcc { config })
    }

    pub fn spec(&self) -> &TpccSpec {
        &self.config.spec
    }

    /// The warehouses worker `worker` of `workers` submits transactions for.
    fn home_warehouses(&self, worker: usize, workers: usize) -> Vec<u64> {
        let w = self.config.spec.warehouses;
        let mine: Vec<u64> =
            (1..=w).filter(|x| (x - 1) % workers as u64 == worker as u64).collect();
        if mine.is_empty() { vec![worker as u64 % w + 1] } else { mine }
    }
}

impl Workload for Tpcc {
    type Request = TpccRequest;
    type Local = txn::TpccLocal;

    fn name(&self) -> &'static str {
        "tpcc"
    }

    fn txn_types(&self) -> &'static [&'static str] {
        TXN_TYPES
    }

    fn tables(&self) -> Vec<TableSchema> {
        schema::tables()
    }

    fn parameters(&self) -> serde_json::Value {
        let s = &self.config.spec;
        json!({
            "warehouses": s.warehouses,
            "districts_per_warehouse": DISTRICTS,
            "items": s.items,
            "customers_per_district": s.customers_per_district,
            "orders_per_district": s.orders_per_district,
            "new_orders_per_district": s.new_orders_per_district(),
            "full_scale": *s == TpccSpec::full(s.warehouses),
            "mix_percent": TXN_TYPES.iter().zip(MIX).map(|(t, p)| (t.to_string(), serde_json::Value::from(p))).collect::<serde_json::Map<_, _>>(),
            "remote_new_order_line_percent": if s.warehouses > 1 { 1 } else { 0 },
            "remote_payment_percent": if s.warehouses > 1 { 15 } else { 0 },
            "new_order_rollback_percent": 1,
            "customer_by_last_name_percent": 60,
        })
    }

    fn load(&self, engine: &dyn Engine, threads: usize) -> Result<()> {
        load::load(&self.config, engine, threads)
    }

    fn local(&self, engine: &dyn Engine, worker: usize, workers: usize) -> Result<txn::TpccLocal> {
        meta::check_worker_count(worker + 1)?;
        let home = self.home_warehouses(worker, workers);
        Ok(txn::TpccLocal::new(Tables::resolve(engine)?, worker, home))
    }

    fn next(&self, local: &mut txn::TpccLocal, rng: &mut SmallRng) -> TpccRequest {
        txn::generate(&self.config.spec, local, rng)
    }

    fn txn_type(&self, request: &TpccRequest) -> usize {
        request.type_index()
    }

    fn options(&self, request: &TpccRequest) -> TxnOptions {
        if request.is_read_only() { TxnOptions::read_only() } else { TxnOptions::default() }
    }

    fn execute(
        &self,
        local: &mut txn::TpccLocal,
        tx: &mut dyn Transaction,
        request: &TpccRequest,
    ) -> zen_engine::Result<()> {
        txn::execute(local, tx, request)
    }

    fn check(&self, engine: &dyn Engine) -> Result<CheckReport> {
        check::check(&self.config.spec, engine)
    }

    /// Every table with a warehouse id is partitioned by it (a foreign key
    /// for all but `warehouse`), so one warehouse's rows share a partition.
    fn partition_keys(&self, request: &TpccRequest, out: &mut Vec<u64>) {
        match request {
            TpccRequest::NewOrder(n) => {
                // warehouse, district, customer, orders, new_order, order lines
                out.push(n.w);
                // one stock row per line, in its supply warehouse (`item` has no key)
                out.extend(n.lines[..n.count].iter().map(|l| u64::from(l.supply_w)));
            }
            TpccRequest::Payment(p) => {
                out.push(p.w);
                out.push(p.c_w);
            }
            TpccRequest::OrderStatus { w, .. }
            | TpccRequest::Delivery { w, .. }
            | TpccRequest::StockLevel { w, .. } => out.push(*w),
        }
    }

    fn partition_key_columns(&self) -> Vec<(&'static str, &'static str)> {
        vec![
            ("warehouse", "w_id"),
            ("district", "d_w_id"),
            ("customer", "c_w_id"),
            ("history", "h_w_id"),
            ("new_order", "no_w_id"),
            ("orders", "o_w_id"),
            ("order_line", "ol_w_id"),
            ("stock", "s_w_id"),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_warehouse_is_loaded_by_the_worker_that_has_it_as_home() {
        let tpcc = Tpcc::new(TpccConfig { spec: TpccSpec::full(6), load_seed: 1 }).unwrap();
        let w = 6usize;
        for threads in 1..=w {
            for worker in 0..threads {
                for home in tpcc.home_warehouses(worker, threads) {
                    let h = home as usize;
                    let districts =
                        (0..DISTRICTS as usize).map(|d| 1 + w + (h - 1) * DISTRICTS as usize + d);
                    for part in std::iter::once(h).chain(districts) {
                        assert_eq!(load::part_owner(w, part, threads), worker, "part {part}");
                    }
                }
            }
        }
        assert_eq!(load::part_owner(w, 0, 4), 0, "ITEM");
        // More threads than warehouses: round robin over every thread.
        let owners: Vec<_> = (0..67).map(|p| load::part_owner(w, p, 8)).collect();
        assert!((0..8).all(|t| owners.contains(&t)));
    }

    #[test]
    fn home_warehouses_partition_the_warehouses_among_workers() {
        let tpcc = Tpcc::new(TpccConfig { spec: TpccSpec::full(4), load_seed: 0 }).unwrap();
        assert_eq!(tpcc.home_warehouses(0, 2), vec![1, 3]);
        assert_eq!(tpcc.home_warehouses(1, 2), vec![2, 4]);
        assert_eq!(tpcc.home_warehouses(5, 8), vec![2]);
    }

    #[test]
    fn scale_parameters_are_validated_with_their_ranges() {
        let mut spec = TpccSpec::full(1);
        spec.customers_per_district = 5000;
        let err = spec.validate().unwrap_err().to_string();
        assert!(err.contains("customers per district") && err.contains("10..=3000"), "{err}");
        assert!(TpccSpec { warehouses: 0, ..TpccSpec::full(1) }.validate().is_err());
        assert_eq!(TpccSpec::full(1).new_orders_per_district(), 900);
    }
}
