//! Receipts: which workload transactions survived a crash or a `kill -9`.
//!
//! What: every *writing* transaction that a crash test or an
//! `--expected-state` run drives also inserts one row into table
//! [`RECEIPT_TABLE`], keyed by (worker, seq), in the same transaction. The
//! receipt commits or aborts with the transaction, so after recovery the
//! receipts say exactly which transactions survived: a worker's receipts
//! must be `0..n` with no gap (its transactions survive as a prefix), `n` at
//! least what was acknowledged, and at most what was attempted.
//!
//! How: `seq` counts the worker's *committed* writing transactions, so a
//! user abort (TPC-C's 1 % New-Order rollback) or a retry reuses its seq and
//! receipts stay dense. [`Receipted`] wraps any [`Workload`] for the
//! benchmark driver (`zen run --expected-state`): it writes the receipt, the
//! intent word before each writing transaction and the ack word after its
//! commit returned (see [`Receipted`] for when exactly), and forces
//! `Durability::Immediate`, so a returned commit is durable.
//! [`check_expected_state`] is the other half (`zen check --expected-state`).
//!
//! Long runs: [`Receipted`] keeps only each worker's last
//! [`RECEIPT_WINDOW`] receipts. The transaction that writes receipt `s`
//! also deletes receipt `s − RECEIPT_WINDOW`, so the table stays small
//! however long a kill loop runs, and a worker's receipts are always the
//! dense range `n − RECEIPT_WINDOW .. n` (from 0 while `n` is smaller). The
//! crash campaigns keep every receipt.
//!
//! Invariants: receipt keys are `worker << 32 | seq` (worker < 2^16, seq <
//! 2^32); a read-only transaction writes no receipt and takes no seq.

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use serde::Serialize;
use zen_engine::schema::{MAX_KEY, row};
use zen_engine::{ColumnType, Durability, Engine, TableId, TableSchema, Transaction, TxnOptions};
use zen_pmem::expected::ExpectedState;

use crate::error::{Error, Result};
use crate::meta;
use crate::workload::{CheckReport, Workload};

/// The receipt table.
pub const RECEIPT_TABLE: &str = "zen_receipts";
/// Bytes of a receipt row: seq, txn type, three payload words.
pub const RECEIPT_BYTES: usize = 40;
const WORKER_SHIFT: u32 = 32;
/// Receipts per worker that [`Receipted`] keeps (module docs).
pub const RECEIPT_WINDOW: u64 = 1024;

/// Schema of [`RECEIPT_TABLE`].
pub fn receipt_schema() -> TableSchema {
    TableSchema::new(RECEIPT_TABLE)
        .column("seq", ColumnType::U64)
        .column("txn_type", ColumnType::U64)
        .column("a", ColumnType::I64)
        .column("b", ColumnType::I64)
        .column("c", ColumnType::I64)
}

/// Key of worker `worker`'s receipt number `seq`.
pub fn receipt_key(worker: usize, seq: u64) -> u64 {
    (worker as u64) << WORKER_SHIFT | seq
}

/// One surviving receipt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    pub worker: usize,
    pub seq: u64,
    pub txn_type: u64,
    /// Workload-defined words (the crash test's bank: from, to, amount).
    pub payload: [i64; 3],
}

/// Insert worker `worker`'s receipt `seq` inside the calling transaction.
pub fn write_receipt(
    tx: &mut dyn Transaction,
    table: TableId,
    worker: usize,
    seq: u64,
    txn_type: usize,
    payload: [i64; 3],
) -> zen_engine::Result<()> {
    let mut r = [0u8; RECEIPT_BYTES];
    row::put_u64(&mut r, 0, seq);
    row::put_u64(&mut r, 8, txn_type as u64);
    for (i, v) in payload.iter().enumerate() {
        row::put_i64(&mut r, 16 + 8 * i, *v);
    }
    tx.insert(table, receipt_key(worker, seq), &r)
}

/// Every receipt in the engine, in key order (empty when the table is missing).
pub fn read_receipts(engine: &dyn Engine) -> Result<Vec<Receipt>> {
    let Ok(table) = engine.table_id(RECEIPT_TABLE) else { return Ok(Vec::new()) };
    read_receipt_range(engine, table, 0..=MAX_KEY)
}

fn read_receipt_range(
    engine: &dyn Engine,
    table: TableId,
    range: std::ops::RangeInclusive<u64>,
) -> Result<Vec<Receipt>> {
    let mut out = Vec::new();
    meta::scan_all(engine, table, range, &mut |key, r| {
        out.push(Receipt {
            worker: (key >> WORKER_SHIFT) as usize,
            seq: key & ((1 << WORKER_SHIFT) - 1),
            txn_type: row::get_u64(r, 8),
            payload: [row::get_i64(r, 16), row::get_i64(r, 24), row::get_i64(r, 32)],
        });
        if row::get_u64(r, 0) != key & ((1 << WORKER_SHIFT) - 1) {
            return Err(Error::Metadata(format!(
                "receipt {key:#x} holds seq {}, not its key's",
                row::get_u64(r, 0)
            )));
        }
        Ok(())
    })?;
    Ok(out)
}

/// Receipts per worker, checked to be dense (`0..n`): the number `n` of each.
pub fn receipt_counts(receipts: &[Receipt]) -> std::result::Result<BTreeMap<usize, u64>, String> {
    receipt_counts_windowed(receipts, u64::MAX)
}

/// As [`receipt_counts`] when only the last `window` receipts of each worker
/// are kept: each worker's receipts must be exactly `n − window .. n`
/// (`0..n` when `n <= window`). Returns `n` per worker.
pub fn receipt_counts_windowed(
    receipts: &[Receipt],
    window: u64,
) -> std::result::Result<BTreeMap<usize, u64>, String> {
    let mut ranges: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    for r in receipts {
        let (_, end) = ranges.entry(r.worker).or_insert((r.seq, r.seq));
        if r.seq != *end {
            return Err(format!(
                "worker {}: receipt {} present but receipt {} missing (a later transaction survived an earlier one)",
                r.worker, r.seq, end
            ));
        }
        *end += 1;
    }
    let mut counts = BTreeMap::new();
    for (w, (first, n)) in ranges {
        if first != n.saturating_sub(window) {
            return Err(format!(
                "worker {w}: receipts {first}..{n} present, expected {}..{n} (receipts below {first} missing or a pruned receipt back)",
                n.saturating_sub(window)
            ));
        }
        counts.insert(w, n);
    }
    Ok(counts)
}

/// A workload whose writing transactions also write receipts and, with an
/// [`ExpectedState`], intent/ack words. See the module docs.
///
/// When the ack is written: the driver gives a workload no call after a
/// commit, so worker `w`'s ack for a transaction is stored when `w` draws its
/// *next* request (`next`), which the driver does only after the commit
/// returned. The ack word therefore lags by at most one transaction per
/// worker (and the last transaction before the run ends is never acked):
/// the check stays sound and checks that one transaction less.
pub struct Receipted<'a, W: Workload> {
    inner: &'a W,
    state: Option<&'a ExpectedState>,
}

/// Per-worker state of [`Receipted`].
pub struct ReceiptedLocal<L> {
    inner: L,
    table: TableId,
    worker: usize,
    /// Committed writing transactions of this worker (= its receipts).
    committed: u64,
    /// A writing request was drawn and not yet accounted for.
    pending: bool,
    /// The last attempt of that request ran to the end of its body.
    last_ok: bool,
}

/// A request of [`Receipted`]: the inner request and whether it writes.
pub struct ReceiptedRequest<R> {
    inner: R,
    writes: bool,
}

impl<'a, W: Workload> Receipted<'a, W> {
    /// Create the receipt table (idempotent) and wrap `inner`.
    pub fn new(
        inner: &'a W,
        engine: &dyn Engine,
        state: Option<&'a ExpectedState>,
    ) -> Result<Receipted<'a, W>> {
        engine.create_table(&receipt_schema())?;
        Ok(Receipted { inner, state })
    }
}

impl<W: Workload> Workload for Receipted<'_, W> {
    type Request = ReceiptedRequest<W::Request>;
    type Local = ReceiptedLocal<W::Local>;

    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn txn_types(&self) -> &'static [&'static str] {
        self.inner.txn_types()
    }

    fn tables(&self) -> Vec<TableSchema> {
        let mut t = self.inner.tables();
        t.push(receipt_schema());
        t
    }

    fn parameters(&self) -> serde_json::Value {
        let mut p = self.inner.parameters();
        if let Some(map) = p.as_object_mut() {
            map.insert("receipts".into(), serde_json::Value::Bool(true));
            map.insert(
                "expected_state".into(),
                self.state.map(|s| s.path().display().to_string()).into(),
            );
        }
        p
    }

    fn load(&self, engine: &dyn Engine, threads: usize) -> Result<()> {
        self.inner.load(engine, threads)?;
        engine.create_table(&receipt_schema())?;
        Ok(())
    }

    fn prepare(&self, engine: &dyn Engine) -> Result<()> {
        self.inner.prepare(engine)
    }

    fn local(&self, engine: &dyn Engine, worker: usize, workers: usize) -> Result<Self::Local> {
        if let Some(s) = self.state
            && worker >= s.workers()
        {
            return Err(Error::invalid(
                "threads",
                workers,
                format!("at most {} (the expected-state file's workers)", s.workers()),
            ));
        }
        let table = meta::table(engine, RECEIPT_TABLE)?;
        let mine = read_receipt_range(
            engine,
            table,
            receipt_key(worker, 0)..=receipt_key(worker, (1 << WORKER_SHIFT) - 1),
        )?;
        let committed = receipt_counts_windowed(&mine, RECEIPT_WINDOW)
            .map_err(Error::Metadata)?
            .get(&worker)
            .copied()
            .unwrap_or(0);
        if let Some(s) = self.state {
            // What is in the recovered pool is durable: start from it.
            s.set_intent(worker, committed);
            s.set_ack(worker, committed);
        }
        Ok(ReceiptedLocal {
            inner: self.inner.local(engine, worker, workers)?,
            table,
            worker,
            committed,
            pending: false,
            last_ok: false,
        })
    }

    fn next(&self, local: &mut Self::Local, rng: &mut SmallRng) -> Self::Request {
        if std::mem::take(&mut local.pending) && local.last_ok {
            // The driver draws the next request only after the previous one's
            // commit returned (durably: Immediate) or it was rolled back.
            local.committed += 1;
            if let Some(s) = self.state {
                s.set_ack(local.worker, local.committed);
            }
        }
        let inner = self.inner.next(&mut local.inner, rng);
        let writes = !self.inner.options(&inner).read_only;
        if writes {
            local.pending = true;
            local.last_ok = false;
            if let Some(s) = self.state {
                s.set_intent(local.worker, local.committed + 1);
            }
        }
        ReceiptedRequest { inner, writes }
    }

    fn txn_type(&self, request: &Self::Request) -> usize {
        self.inner.txn_type(&request.inner)
    }

    fn options(&self, request: &Self::Request) -> TxnOptions {
        let mut opts = self.inner.options(&request.inner);
        if !opts.read_only {
            opts.durability = Some(Durability::Immediate);
        }
        opts
    }

    fn execute(
        &self,
        local: &mut Self::Local,
        tx: &mut dyn Transaction,
        request: &Self::Request,
    ) -> zen_engine::Result<()> {
        local.last_ok = false;
        self.inner.execute(&mut local.inner, tx, &request.inner)?;
        if request.writes {
            let txn_type = self.inner.txn_type(&request.inner);
            let seq = local.committed;
            write_receipt(tx, local.table, local.worker, seq, txn_type, [0; 3])?;
            if seq >= RECEIPT_WINDOW {
                tx.delete(local.table, receipt_key(local.worker, seq - RECEIPT_WINDOW))?;
            }
        }
        local.last_ok = true;
        Ok(())
    }

    fn check(&self, engine: &dyn Engine) -> Result<CheckReport> {
        self.inner.check(engine)
    }
}

/// One worker's line of an expected-state check.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerExpectation {
    pub worker: usize,
    pub intent: u64,
    pub ack: u64,
    /// Receipts found in the recovered pool.
    pub receipts: u64,
}

/// What `zen check --expected-state` found.
#[derive(Debug, Clone, Serialize)]
pub struct ExpectedStateReport {
    pub path: String,
    /// Workers with a non-zero intent or receipts.
    pub workers: Vec<WorkerExpectation>,
    pub receipts: u64,
    pub acked: u64,
    pub violations: Vec<String>,
}

impl ExpectedStateReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    pub fn render_text(&self) -> String {
        let mut out = format!(
            "expected state {}: {} workers, {} acknowledged transactions, {} receipts\n",
            self.path,
            self.workers.len(),
            self.acked,
            self.receipts
        );
        for w in &self.workers {
            out.push_str(&format!(
                "  worker {:<3} ack {:<8} receipts {:<8} intent {}\n",
                w.worker, w.ack, w.receipts, w.intent
            ));
        }
        if self.passed() {
            out.push_str(
                "  every acknowledged transaction is present, none beyond its worker's intent\n",
            );
        } else {
            for v in &self.violations {
                out.push_str(&format!("  VIOLATION: {v}\n"));
            }
        }
        out
    }
}

/// After recovery: every acknowledged transaction's receipt is present, each
/// worker's receipts are dense, and none lies beyond the worker's intent.
pub fn check_expected_state(
    engine: &dyn Engine,
    state: &ExpectedState,
) -> Result<ExpectedStateReport> {
    let receipts = read_receipts(engine)?;
    let mut violations = Vec::new();
    let counts = match receipt_counts_windowed(&receipts, RECEIPT_WINDOW) {
        Ok(c) => c,
        Err(why) => {
            violations.push(why);
            let mut c = BTreeMap::new();
            for r in &receipts {
                let n = c.entry(r.worker).or_insert(0u64);
                *n = (*n).max(r.seq + 1);
            }
            c
        }
    };
    let mut workers = Vec::new();
    for &w in counts.keys().filter(|w| **w >= state.workers()) {
        violations.push(format!("receipts of worker {w}, beyond the file's {}", state.workers()));
    }
    for worker in 0..state.workers() {
        let (intent, ack) = (state.intent(worker), state.ack(worker));
        let n = counts.get(&worker).copied().unwrap_or(0);
        if n < ack {
            violations.push(format!(
                "worker {worker}: {ack} transactions acknowledged, only {n} present (lost an acknowledged commit)"
            ));
        }
        if n > intent {
            violations.push(format!(
                "worker {worker}: {n} transactions present, but only {intent} were ever started"
            ));
        }
        if ack > intent {
            violations.push(format!("worker {worker}: ack {ack} above intent {intent}"));
        }
        if intent > 0 || n > 0 {
            workers.push(WorkerExpectation { worker, intent, ack, receipts: n });
        }
    }
    Ok(ExpectedStateReport {
        path: state.path().display().to_string(),
        acked: workers.iter().map(|w| w.ack).sum(),
        receipts: receipts.len() as u64,
        workers,
        violations,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipt_counts_find_gaps() {
        let r = |worker, seq| Receipt { worker, seq, txn_type: 0, payload: [0; 3] };
        let counts = receipt_counts(&[r(0, 0), r(0, 1), r(2, 0)]).unwrap();
        assert_eq!(counts.into_iter().collect::<Vec<_>>(), vec![(0, 2), (2, 1)]);
        assert!(receipt_counts(&[r(0, 0), r(0, 2)]).unwrap_err().contains("receipt 1 missing"));
        assert!(receipt_key(1, 5) > receipt_key(0, u32::MAX as u64));
        let window: Vec<_> = (3..7).map(|s| r(1, s)).collect();
        assert_eq!(receipt_counts_windowed(&window, 4).unwrap()[&1], 7);
        assert!(receipt_counts_windowed(&window, 5).is_err(), "receipt 2 must be there");
        assert!(receipt_counts_windowed(&window[1..], 4).is_err(), "receipt 3 must be there");
    }
}
