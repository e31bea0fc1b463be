//! What a campaign runs: a [`Subject`] is a [`Workload`] that also says what
//! each transaction's receipt carries, which versions it read from, and
//! what the recovered rows must look like given the transactions that
//! survived ([`Survivors`]).
//!
//! The subjects: `bank` and `list-append` (`bank.rs`, `list_append.rs`:
//! shared keys, read-from recorded in the receipts, so the oracle can check
//! dependency closure), the tests' scripted scenarios (`script.rs`), and
//! YCSB, SmallBank and TPC-C (below), checked through their own consistency
//! conditions (`Workload::check`).

use std::collections::BTreeMap;

use zen_engine::schema::MAX_KEY;
use zen_engine::{Engine, Transaction};

use super::violation::{TxnRef, Violation};
use crate::crash_receipts::Receipt;
use crate::meta;
use crate::smallbank::SmallBank;
use crate::tpcc::{Tpcc, schema as tpcc_schema};
use crate::workload::Workload;
use crate::ycsb::Ycsb;

/// The transactions that survived a crash: their receipts, by transaction.
#[derive(Debug, Default)]
pub struct Survivors {
    pub receipts: BTreeMap<TxnRef, Receipt>,
}

impl Survivors {
    pub fn new(receipts: &[Receipt]) -> Survivors {
        Survivors {
            receipts: receipts
                .iter()
                .map(|r| (TxnRef { worker: r.worker, seq: r.seq }, *r))
                .collect(),
        }
    }

    /// The receipt of the transaction `id` names (`TxnRef::id`), if it survived.
    pub fn get(&self, id: u64) -> Option<&Receipt> {
        TxnRef::from_id(id).and_then(|t| self.receipts.get(&t))
    }

    /// Surviving transactions per worker.
    pub fn count(&self, worker: usize) -> u64 {
        self.receipts.keys().filter(|t| t.worker == worker).count() as u64
    }

    pub fn len(&self) -> usize {
        self.receipts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.receipts.is_empty()
    }
}

/// A workload a campaign can run (module docs).
pub trait Subject: Workload {
    /// What the population is, in words (for the report).
    fn population(&self) -> String;

    /// Run the transaction body of `request` as transaction `me` (its
    /// [`TxnRef::id`] is what a subject stores to name the writer of a
    /// version); returns the receipt's three payload words.
    fn run_txn(
        &self,
        local: &mut Self::Local,
        tx: &mut dyn Transaction,
        request: &Self::Request,
        _me: TxnRef,
    ) -> zen_engine::Result<[i64; 3]> {
        self.execute(local, tx, request)?;
        Ok([0; 3])
    }

    /// Requests worker `worker` runs in the recorded run (`configured`:
    /// `--txns`; a script runs its own steps).
    fn requests(&self, _worker: usize, configured: u64) -> u64 {
        configured
    }

    /// A scripted step that is no transaction (the engine's maintenance).
    fn is_maintenance(&self, _request: &Self::Request) -> bool {
        false
    }

    /// The writers whose versions the transaction of `receipt` read or
    /// overwrote, as [`TxnRef::id`]s (0 = the load). The oracle requires
    /// every one of a surviving transaction to have survived.
    fn read_from(&self, _receipt: &Receipt, _out: &mut Vec<u64>) {}

    /// The recovered rows against the surviving transactions.
    fn verify(&self, engine: &dyn Engine, _survivors: &Survivors) -> Result<(), Violation> {
        workload_check(self, engine)
    }

    /// Run after the liveness transactions (e.g. grow the catalog).
    fn after_liveness(&self, _engine: &dyn Engine) -> Result<(), Violation> {
        Ok(())
    }

    /// Something the recorded run does besides the workers' transactions,
    /// on its own thread while they run (e.g. catalog rewrites).
    fn concurrent(&self, _engine: &dyn Engine) -> Result<(), String> {
        Ok(())
    }
}

/// The workload's own consistency conditions as a violation.
pub fn workload_check<W: Workload + ?Sized>(w: &W, engine: &dyn Engine) -> Result<(), Violation> {
    let report = w
        .check(engine)
        .map_err(|e| Violation::WorkloadCheck { detail: format!("{} check: {e}", w.name()) })?;
    if report.passed() {
        return Ok(());
    }
    let failed: Vec<String> = report
        .failures()
        .map(|c| match &c.outcome {
            crate::Outcome::Failed { violations, examples } => {
                format!("{} ({}): {violations} violations, e.g. {examples:?}", c.id, c.description)
            }
            _ => c.id.clone(),
        })
        .collect();
    Err(Violation::WorkloadCheck { detail: format!("{}: {}", w.name(), failed.join("; ")) })
}

impl Subject for Ycsb {
    fn population(&self) -> String {
        "64 records; paper mode WH (90 % updates), 4 requests per transaction, θ = 0.6".into()
    }
}

impl Subject for SmallBank {
    fn population(&self) -> String {
        "64 customers, 8 hot (90 %); the standard mix".into()
    }
}

impl Subject for Tpcc {
    fn population(&self) -> String {
        "1 warehouse, 20 items, 10 customers and 10 orders per district; the standard mix".into()
    }

    /// TPC-C's conditions, and Σ(D_NEXT_O_ID − initial) = the surviving New-Orders.
    fn verify(&self, engine: &dyn Engine, survivors: &Survivors) -> Result<(), Violation> {
        workload_check(self, engine)?;
        let read = |e: crate::Error| Violation::WorkloadCheck { detail: e.to_string() };
        let district = meta::table(engine, tpcc_schema::district::NAME).map_err(read)?;
        let initial = self.spec().orders_per_district as i64 + 1;
        let mut orders = 0i64;
        meta::scan_all(engine, district, 0..=MAX_KEY, &mut |_, r| {
            orders +=
                zen_engine::schema::row::get_i64(r, tpcc_schema::district::NEXT_O_ID) - initial;
            Ok(())
        })
        .map_err(read)?;
        let new_orders = survivors.receipts.values().filter(|r| r.txn_type == 0).count() as i64;
        if orders != new_orders {
            return Err(Violation::state(format!(
                "Σ(D_NEXT_O_ID − initial) = {orders}, but {new_orders} New-Order transactions survived"
            )));
        }
        Ok(())
    }
}
