//! The `Workload` trait and the consistency-check report.
//!
//! A workload is split the way DBx1000 splits one: a SCHEMA (`tables`), a
//! GENERATOR (`next`: which transaction to run and with which parameters) and
//! TRANSACTION LOGIC (`execute`: one attempt against `&mut dyn Transaction`).
//! It is written once against the `zen_engine` traits, so every engine runs
//! every workload; the driver is generic over the workload only, so request
//! generation is monomorphised and allocation-free.
//!
//! The driver owns retries: `execute` is ONE attempt, and the driver calls it
//! again with the *same* request after a retryable abort. So `execute` must
//! not consume randomness or advance shared state; everything random is drawn
//! in `next` and carried in the request.
//!
//! Per-worker state (`Local`): table ids, column offsets, reusable buffers
//! and generator state that must not be shared (YCSB's `latest` ζ). It is
//! created on the worker's thread before measurement starts.

use serde::Serialize;
use zen_engine::{Engine, TableSchema, Transaction, TxnOptions};

use crate::error::Result;
use rand::rngs::SmallRng;

/// A benchmark workload. See the module docs.
pub trait Workload: Sync {
    /// One transaction's type and parameters, drawn by `next`.
    type Request: Send;
    /// Per-worker state; see the module docs.
    type Local: Send;

    /// `ycsb`, `tpcc` or `smallbank`.
    fn name(&self) -> &'static str;
    /// Names of the transaction types, indexed by [`Workload::txn_type`].
    fn txn_types(&self) -> &'static [&'static str];
    /// The tables this workload creates.
    fn tables(&self) -> Vec<TableSchema>;
    /// Load-time and run-time parameters, for the report.
    fn parameters(&self) -> serde_json::Value;
    /// Create the tables and the initial population, using up to `threads` workers.
    fn load(&self, engine: &dyn Engine, threads: usize) -> Result<()>;
    /// Called once before the workers start (e.g. to find where inserts resume).
    fn prepare(&self, _engine: &dyn Engine) -> Result<()> {
        Ok(())
    }
    /// Per-worker state for driver worker `worker` of `workers` (0-based, dense).
    fn local(&self, engine: &dyn Engine, worker: usize, workers: usize) -> Result<Self::Local>;
    /// Draw the next transaction.
    fn next(&self, local: &mut Self::Local, rng: &mut SmallRng) -> Self::Request;
    /// Draw the next transaction into `out`, a request drawn before (the
    /// same draw as `next`). The driver refills one request per worker, so
    /// a workload whose request is large can write only what it uses:
    /// YCSB's holds 64 operations (1.5 KiB), and initialising and moving it
    /// was 9 % of an `ideal` YCSB-A transaction.
    fn next_into(&self, local: &mut Self::Local, rng: &mut SmallRng, out: &mut Self::Request) {
        *out = self.next(local, rng);
    }
    /// Index of the request's type in [`Workload::txn_types`].
    fn txn_type(&self, request: &Self::Request) -> usize;
    /// Options of the request's transaction (read-only ones say so).
    fn options(&self, request: &Self::Request) -> TxnOptions;
    /// One attempt of the request. An `Err` aborts the attempt.
    fn execute(
        &self,
        local: &mut Self::Local,
        tx: &mut dyn Transaction,
        request: &Self::Request,
    ) -> zen_engine::Result<()>;
    /// Check the workload's consistency conditions on a quiescent engine.
    fn check(&self, engine: &dyn Engine) -> Result<CheckReport>;
    /// Zen+ soft partitions (Alg. 3 `extractKey`): push the partition-key
    /// value of every request of `request` whose key is known before it
    /// runs (point accesses; scans and lookups by secondary key are not).
    /// Pushing nothing makes the transaction "complex". Must not allocate
    /// beyond `out`'s capacity in steady state.
    fn partition_keys(&self, _request: &Self::Request, _out: &mut Vec<u64>) {}
    /// Each table's partition key as (table, column): its primary key or a
    /// foreign key (TPC-C: the warehouse id). Empty: no soft partitions.
    fn partition_key_columns(&self) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
}

/// How many examples of a violated condition a report keeps.
const EXAMPLES_KEPT: usize = 5;

/// The violations of one condition found so far.
#[derive(Debug, Default, Clone)]
pub struct Violations {
    count: u64,
    examples: Vec<String>,
}

impl Violations {
    /// Record one violation; the message is built only for the first few.
    pub fn note(&mut self, message: impl FnOnce() -> String) {
        self.count += 1;
        if self.examples.len() < EXAMPLES_KEPT {
            self.examples.push(message());
        }
    }

    /// Record a violation when `ok` is false.
    pub fn require(&mut self, ok: bool, message: impl FnOnce() -> String) {
        if !ok {
            self.note(message);
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }
}

/// The outcome of one condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum Outcome {
    Passed,
    Failed { violations: u64, examples: Vec<String> },
    Skipped { reason: String },
}

/// One consistency condition and its outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Condition {
    /// Short id, e.g. `3.3.2.1` for TPC-C's first condition.
    pub id: String,
    /// What it states.
    pub description: String,
    pub outcome: Outcome,
}

/// Every condition a workload checked, passed or not.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub workload: String,
    pub conditions: Vec<Condition>,
}

impl CheckReport {
    pub fn new(workload: &str) -> CheckReport {
        CheckReport { workload: workload.to_string(), conditions: Vec::new() }
    }

    /// Add a checked condition: passed when `violations` is empty.
    pub fn record(&mut self, id: &str, description: &str, violations: Violations) {
        let outcome = if violations.count == 0 {
            Outcome::Passed
        } else {
            Outcome::Failed { violations: violations.count, examples: violations.examples }
        };
        self.push(id, description, outcome);
    }

    /// Add a condition that does not apply, and why.
    pub fn skip(&mut self, id: &str, description: &str, reason: &str) {
        self.push(id, description, Outcome::Skipped { reason: reason.to_string() });
    }

    fn push(&mut self, id: &str, description: &str, outcome: Outcome) {
        self.conditions.push(Condition {
            id: id.to_string(),
            description: description.to_string(),
            outcome,
        });
    }

    /// True when no condition failed.
    pub fn passed(&self) -> bool {
        !self.conditions.iter().any(|c| matches!(c.outcome, Outcome::Failed { .. }))
    }

    /// The conditions that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Condition> {
        self.conditions.iter().filter(|c| matches!(c.outcome, Outcome::Failed { .. }))
    }

    /// One line per condition, then a verdict.
    pub fn render_text(&self) -> String {
        let mut out = format!("{} consistency check\n", self.workload);
        for c in &self.conditions {
            let status = match &c.outcome {
                Outcome::Passed => "ok".to_string(),
                Outcome::Failed { violations, .. } => format!("FAILED ({violations} violations)"),
                Outcome::Skipped { reason } => format!("skipped: {reason}"),
            };
            out.push_str(&format!("  {:<10} {:<64} {status}\n", c.id, c.description));
            if let Outcome::Failed { examples, .. } = &c.outcome {
                for e in examples {
                    out.push_str(&format!("             - {e}\n"));
                }
            }
        }
        let failed = self.failures().count();
        let skipped =
            self.conditions.iter().filter(|c| matches!(c.outcome, Outcome::Skipped { .. })).count();
        if failed == 0 && skipped == 0 {
            out.push_str(&format!("  all {} conditions hold\n", self.conditions.len()));
        } else if failed == 0 {
            let checked = self.conditions.len() - skipped;
            out.push_str(&format!("  all {checked} checked conditions hold ({skipped} skipped)\n"));
        } else {
            out.push_str(&format!("  {failed} of {} conditions FAILED\n", self.conditions.len()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_fails_when_any_condition_has_violations() {
        let mut report = CheckReport::new("demo");
        report.record("1", "always true", Violations::default());
        report.skip("2", "not applicable", "no reason to check");
        assert!(report.passed());
        assert!(report.render_text().contains("all 1 checked conditions hold (1 skipped)"));
        let mut v = Violations::default();
        for i in 0..8 {
            v.require(i % 2 == 0, || format!("odd {i}"));
        }
        report.record("3", "only even numbers", v);
        assert!(!report.passed());
        let failed: Vec<_> = report.failures().collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(
            failed[0].outcome,
            Outcome::Failed {
                violations: 4,
                examples: vec!["odd 1".into(), "odd 3".into(), "odd 5".into(), "odd 7".into()]
            }
        );
        assert!(report.render_text().contains("1 of 3 conditions FAILED"));
    }

    #[test]
    fn examples_are_capped_but_violations_are_all_counted() {
        let mut v = Violations::default();
        for i in 0..100 {
            v.note(|| format!("violation {i}"));
        }
        assert_eq!(v.count(), 100);
        assert_eq!(v.examples.len(), EXAMPLES_KEPT);
    }
}
