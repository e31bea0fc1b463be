//! The deterministic-transaction seam, beside [`crate::Engine`].
//!
//! `Engine` is interactive (`execute(|tx| …)`): the engine learns what a
//! transaction writes while it runs. A deterministic engine (Calvin,
//! Caracal, NVCaracal) needs each transaction's write set *before* it runs,
//! and runs transactions in batches (epochs) in a serial order fixed up
//! front. This module is that second seam:
//!
//! - a [`OneShot`] is a stored procedure (by [`ProcId`]) plus its input
//!   bytes plus the `(table, key)`s it may write, declared up front;
//! - procedures are registered in a [`ProcedureSet`] handed to the engine
//!   when it is opened (`EngineConfig::procedures`), because recovery
//!   replays the logged inputs of the crashed epoch with them;
//! - [`DeterministicEngine::submit_epoch`] runs one batch as one epoch and
//!   returns each transaction's outcome once the epoch is durable.
//!
//! A procedure must be a function of its input and what it reads: no
//! clocks, no randomness, no shared counters. Writing a key it did not
//! declare is [`Error::UndeclaredWrite`]: that transaction's writes are all
//! discarded (its outcome is the error) and the rest of the epoch is not
//! affected. An `Err` from the procedure (e.g. [`crate::user_abort`]) does
//! the same; there are no concurrency-control aborts.

use std::sync::Arc;

use serde::Serialize;

use crate::api::TableId;
use crate::error::{Error, Result};

/// A procedure's index in its [`ProcedureSet`]. [`ProcId::APPLY`] is the
/// built-in one every set holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct ProcId(pub u32);

impl ProcId {
    /// The built-in procedure: its input is a list of writes (put or
    /// delete of whole rows), applied in order. The `Engine` adapter runs
    /// an interactive transaction's body at submission and logs its writes
    /// as this procedure's input.
    pub const APPLY: ProcId = ProcId(0);
}

/// What a procedure sees of the database while it runs.
pub trait OneShotTx {
    /// Copy the row of `key` into `out`; `Ok(false)` when absent. Reads see
    /// the writes of every transaction before this one in the serial order
    /// (and this one's own).
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool>;
    /// Write the row of `key` (insert or replace). `UndeclaredWrite` when
    /// `(table, key)` is not in the write set.
    fn put(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()>;
    /// Delete `key` (a no-op when absent). `UndeclaredWrite` as for `put`.
    fn delete(&mut self, table: TableId, key: u64) -> Result<()>;
}

/// A stored procedure: input in, output bytes out (returned to the client
/// with the durable result).
pub type ProcFn = dyn Fn(&mut dyn OneShotTx, &[u8]) -> Result<Vec<u8>> + Send + Sync;

/// The procedures an engine can run and replay, by id; id 0 is
/// [`ProcId::APPLY`].
#[derive(Clone, Default)]
pub struct ProcedureSet {
    names: Vec<String>,
    procs: Vec<Arc<ProcFn>>,
}

impl std::fmt::Debug for ProcedureSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcedureSet").field("names", &self.names).finish()
    }
}

impl ProcedureSet {
    pub fn new() -> ProcedureSet {
        ProcedureSet::default()
    }

    /// Register `f` under `name`; ids are dense in registration order, from 1.
    pub fn register(
        &mut self,
        name: &str,
        f: impl Fn(&mut dyn OneShotTx, &[u8]) -> Result<Vec<u8>> + Send + Sync + 'static,
    ) -> Result<ProcId> {
        if name == "apply" || self.names.iter().any(|n| n == name) {
            return Err(Error::InvalidArgument(format!("procedure `{name}` registered twice")));
        }
        self.names.push(name.to_string());
        self.procs.push(Arc::new(f));
        Ok(ProcId(self.names.len() as u32))
    }

    /// The id of procedure `name`.
    pub fn id(&self, name: &str) -> Option<ProcId> {
        if name == "apply" {
            return Some(ProcId::APPLY);
        }
        self.names.iter().position(|n| n == name).map(|i| ProcId(i as u32 + 1))
    }

    /// The registered procedure `id` (`None` for APPLY and unknown ids).
    pub fn get(&self, id: ProcId) -> Option<&Arc<ProcFn>> {
        (id.0 as usize).checked_sub(1).and_then(|i| self.procs.get(i))
    }

    /// Whether `id` names a procedure of this set (APPLY included).
    pub fn contains(&self, id: ProcId) -> bool {
        id == ProcId::APPLY || self.get(id).is_some()
    }

    /// FNV-1a of the names in id order: logged with each epoch's inputs,
    /// so a replay with another set is refused instead of running other code.
    pub fn fingerprint(&self) -> u64 {
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for n in std::iter::once("apply").chain(self.names.iter().map(String::as_str)) {
            for b in n.bytes().chain(std::iter::once(0)) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }
}

/// The procedures of an engine configuration (shared, cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct Procedures(pub Arc<ProcedureSet>);

impl Procedures {
    pub fn new(set: ProcedureSet) -> Procedures {
        Procedures(Arc::new(set))
    }
}

/// One deterministic transaction: procedure, input, declared write set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OneShot {
    pub proc: ProcId,
    pub input: Vec<u8>,
    /// Every `(table, key)` the procedure may write (put or delete).
    pub writes: Vec<(TableId, u64)>,
}

/// What one epoch did, phase by phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EpochStats {
    pub epoch: u64,
    pub txns: u64,
    /// Transactions whose procedure returned `Err` (user aborts and
    /// undeclared writes): deterministic, so replay reaches the same.
    pub failed: u64,
    /// Concurrency-control aborts: none by construction (a reader waits for
    /// the pending version of an earlier transaction, it never aborts).
    pub cc_aborts: u64,
    /// Reads that found a pending version and waited for its writer.
    pub waits: u64,
    /// Pending versions inserted by the initialisation phase.
    pub versions: u64,
    /// Rows written to NVM at the end of the epoch (one per row written).
    pub rows_persisted: u64,
    /// Bytes of transaction inputs logged (and persisted) before execution.
    pub log_bytes: u64,
    /// Peak DRAM of the epoch's transient versions (freed at its end).
    pub transient_bytes: u64,
    /// Rows whose version array was split per thread (split-on-demand).
    pub split_rows: u64,
    /// Epochs the batch ran as (more than 1 when its transient versions
    /// would exceed `EngineConfig::nvcaracal_dram_budget_bytes` or its
    /// logged inputs the input log; then `epoch` is the last one and the
    /// other counts are sums, the peaks a max).
    pub parts: u64,
    /// Of the `parts − 1` cuts, those made because the next transaction's
    /// inputs would not fit the input log (the others: the DRAM budget).
    pub log_cuts: u64,
    /// Committed rows read from the cached versions (DRAM) by the epoch's
    /// procedures and index upkeep.
    pub cache_hits: u64,
    /// Committed rows read from NVM by them (every such read when the
    /// cached versions are off).
    pub cache_misses: u64,
    /// Rows not cached because the cache was at its bound.
    pub cache_refused: u64,
    /// Cached versions evicted in the init phase (not used in K epochs).
    pub cache_evicted: u64,
    /// Cached versions and their counted DRAM after the epoch (kept across
    /// epochs, not part of `transient_bytes`).
    pub cache_entries: u64,
    pub cache_bytes: u64,
    /// Stale versions deleted by the minor collector: final writes that
    /// found two versions in the row's slot and overwrote the older.
    pub gc_minor: u64,
    /// Stale versions deleted by the major collector in the init phase
    /// (the rows the previous epoch wrote whose stale version is in the
    /// value pool, or every such row with minor GC off).
    pub gc_major: u64,
    /// Persistent values (nvcaracal's value pool, rows that do not fit the
    /// inline heap) allocated by the epoch's final writes, and freed by its
    /// major collector.
    pub values_allocated: u64,
    pub values_freed: u64,
    pub log_us: f64,
    pub init_us: f64,
    pub exec_us: f64,
    pub persist_us: f64,
}

/// The outcome of an epoch: each transaction's result, in submission order.
#[derive(Debug)]
pub struct EpochOutcome {
    pub results: Vec<Result<Vec<u8>>>,
    pub stats: EpochStats,
}

/// An engine that runs one-shot transactions in epochs.
pub trait DeterministicEngine: Send + Sync {
    /// The procedures it runs (and replays).
    fn procedures(&self) -> &ProcedureSet;
    /// Run `txns` as one epoch in this order (the serial order) on `workers`
    /// threads; returns when the epoch is durable. A batch whose transient
    /// versions may exceed the engine's DRAM budget, or whose inputs do not
    /// fit its input log, runs as several consecutive epochs (same serial
    /// order, same results; each durable in turn). An `Err` means nothing
    /// of the batch ran (bad input: unknown procedure or table, a
    /// transaction whose inputs alone do not fit the input log or whose
    /// versions alone exceed the DRAM budget).
    fn submit_epoch(&self, txns: &[OneShot], workers: usize) -> Result<EpochOutcome>;
    /// The last durable epoch.
    fn durable_epoch(&self) -> u64;
}

/// The phases of an epoch, as a deterministic engine notes them in its
/// pool's trace (`Marker::Note { tag: EpochPhase::NOTE_TAG, value }`, on
/// the crash simulator only; other backends drop markers), so a crash
/// campaign can say in which phase each of its crash points lies. The
/// engine also marks each logged epoch `Marker::Begin { txn: epoch }` when
/// it starts and `Marker::Ack { txn: epoch }` once it is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EpochPhase {
    /// The inputs are written to the input log and fenced.
    InputLog,
    /// The seal (the epoch's inputs are complete) is persisted.
    Seal,
    /// Pending versions are inserted (DRAM only).
    Init,
    /// The procedures run (DRAM, and NVM reads).
    Exec,
    /// Each written row's final version is persisted.
    RowPersist,
    /// The durable epoch word is persisted.
    EpochMark,
}

impl EpochPhase {
    /// The `Marker::Note` tag of a phase note ("EPCH").
    pub const NOTE_TAG: u32 = 0x4550_4348;
    pub const ALL: [EpochPhase; 6] = [
        EpochPhase::InputLog,
        EpochPhase::Seal,
        EpochPhase::Init,
        EpochPhase::Exec,
        EpochPhase::RowPersist,
        EpochPhase::EpochMark,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EpochPhase::InputLog => "input-log",
            EpochPhase::Seal => "seal",
            EpochPhase::Init => "init",
            EpochPhase::Exec => "exec",
            EpochPhase::RowPersist => "row-persist",
            EpochPhase::EpochMark => "epoch-mark",
        }
    }

    /// The note's value.
    pub fn note_value(self) -> u64 {
        self as u64
    }

    /// The phase a note's value names.
    pub fn from_note_value(value: u64) -> Option<EpochPhase> {
        EpochPhase::ALL.get(usize::try_from(value).ok()?).copied()
    }
}
