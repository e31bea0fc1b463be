//! What a crash campaign can find: a typed [`Violation`] (the oracle or a
//! named invariant fired), or a [`HarnessFailure`] (anything else went wrong,
//! e.g. a panic).
//!
//! Why typed: "detected" must mean *the check meant for the bug fired*
//! (VERIFICATION.md §1, issue 15). A bug-injection test names the
//! [`Check`] it expects and compares it with [`Violation::check`]; a panic
//! is never a detection. A panic anywhere in a campaign (recording,
//! recovery, the oracle, nested crashes) becomes a [`HarnessFailure`]: the
//! test fails and prints it.
//!
//! Transactions are named by [`TxnRef`] (worker, seq): the `seq`-th
//! committed writing transaction of that worker in the recorded run, which
//! is also its receipt's key (`crash_receipts.rs`). Subjects that record
//! read-from dependencies encode a writer as [`TxnRef::id`] (0 = the load).

use std::fmt;

use serde::Serialize;

use crate::crash_receipts::receipt_key;

/// A transaction of the recorded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct TxnRef {
    pub worker: usize,
    pub seq: u64,
}

impl TxnRef {
    /// The id a subject stores for this transaction: never 0 (0 = the load).
    pub fn id(self) -> u64 {
        receipt_key(self.worker, self.seq) + 1
    }

    /// The transaction an id names (`None` for 0, the load).
    pub fn from_id(id: u64) -> Option<TxnRef> {
        let key = id.checked_sub(1)?;
        Some(TxnRef { worker: (key >> 32) as usize, seq: key & 0xFFFF_FFFF })
    }
}

impl fmt::Display for TxnRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T({}, {})", self.worker, self.seq)
    }
}

/// The persistence lints that are errors (`zen_pmem::sim::LintReport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LintKind {
    /// An acknowledgement while the acknowledging thread had pending stores.
    AckedWithPending,
    /// A clean-shutdown marker with stores still pending.
    PendingAtCleanShutdown,
    /// An aligned word written by two or more partial stores in one epoch.
    TornCommitWord,
}

/// The check that reported a violation (fieldless, for comparisons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Lint(LintKind),
    RecordedRun,
    Recovery,
    Structure,
    ReceiptsNotPrefix,
    UnknownReceipt,
    AckedLost,
    DependencyNotClosed,
    StateMismatch,
    WorkloadCheck,
    Liveness,
    NestedRecovery,
}

impl Check {
    /// A short name for reports ("dependency-not-closed").
    pub fn name(self) -> &'static str {
        match self {
            Check::Lint(LintKind::AckedWithPending) => "lint: acked-with-pending",
            Check::Lint(LintKind::PendingAtCleanShutdown) => "lint: pending-at-clean-shutdown",
            Check::Lint(LintKind::TornCommitWord) => "lint: torn-commit-word",
            Check::RecordedRun => "recorded-run",
            Check::Recovery => "recovery",
            Check::Structure => "structure",
            Check::ReceiptsNotPrefix => "receipts-not-prefix",
            Check::UnknownReceipt => "unknown-receipt",
            Check::AckedLost => "acked-lost",
            Check::DependencyNotClosed => "dependency-not-closed",
            Check::StateMismatch => "state-mismatch",
            Check::WorkloadCheck => "workload-check",
            Check::Liveness => "liveness",
            Check::NestedRecovery => "nested-recovery",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A violation of the post-crash oracle or of a named invariant (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Violation {
    /// The recorded run broke a persistence lint (an error, not a warning).
    Lint { lint: LintKind, detail: String },
    /// A transaction of the recorded run failed with a non-retryable error.
    RecordedRun { detail: String },
    /// Recovery refused the crash image (pool open or engine recovery).
    Recovery { detail: String },
    /// `Engine::check_invariants` failed on the recovered engine.
    Structure { detail: String },
    /// A worker's surviving transactions are not a prefix of what it committed.
    ReceiptsNotPrefix { detail: String },
    /// A receipt the recorded run did not write (beyond what its worker
    /// committed, or with other contents).
    UnknownReceipt { detail: String },
    /// A transaction acknowledged durable before the crash point is absent.
    AckedLost { txn: TxnRef, cts: u64, survived: u64 },
    /// Epoch mode: an epoch acknowledged durable before the crash point is
    /// beyond the recovered durable epoch.
    EpochLost { epoch: u64, durable: u64 },
    /// A surviving transaction read (or overwrote) a version whose writer is
    /// absent: the recovered state is not closed under read-from.
    DependencyNotClosed { reader: TxnRef, writer: TxnRef },
    /// The recovered rows disagree with the surviving transactions (a half
    /// transaction, a lost or resurrected write, a torn row).
    StateMismatch { detail: String },
    /// The workload's own consistency conditions (TPC-C 1–12, SmallBank).
    WorkloadCheck { detail: String },
    /// More transactions could not commit after recovery, or their Tx-CTS
    /// did not rise above the recovered ones.
    Liveness { detail: String },
    /// A crash during recovery gave another logical state, or its recovery failed.
    NestedRecovery { depth: u32, detail: String },
}

impl Violation {
    pub fn check(&self) -> Check {
        match self {
            Violation::Lint { lint, .. } => Check::Lint(*lint),
            Violation::RecordedRun { .. } => Check::RecordedRun,
            Violation::Recovery { .. } => Check::Recovery,
            Violation::Structure { .. } => Check::Structure,
            Violation::ReceiptsNotPrefix { .. } => Check::ReceiptsNotPrefix,
            Violation::UnknownReceipt { .. } => Check::UnknownReceipt,
            Violation::AckedLost { .. } | Violation::EpochLost { .. } => Check::AckedLost,
            Violation::DependencyNotClosed { .. } => Check::DependencyNotClosed,
            Violation::StateMismatch { .. } => Check::StateMismatch,
            Violation::WorkloadCheck { .. } => Check::WorkloadCheck,
            Violation::Liveness { .. } => Check::Liveness,
            Violation::NestedRecovery { .. } => Check::NestedRecovery,
        }
    }

    pub fn state(detail: impl Into<String>) -> Violation {
        Violation::StateMismatch { detail: detail.into() }
    }

    pub fn structure(detail: impl fmt::Display) -> Violation {
        Violation::Structure { detail: detail.to_string() }
    }

    pub fn liveness(detail: impl fmt::Display) -> Violation {
        Violation::Liveness { detail: detail.to_string() }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.check())?;
        match self {
            Violation::Lint { detail, .. }
            | Violation::RecordedRun { detail }
            | Violation::Recovery { detail }
            | Violation::Structure { detail }
            | Violation::ReceiptsNotPrefix { detail }
            | Violation::UnknownReceipt { detail }
            | Violation::StateMismatch { detail }
            | Violation::WorkloadCheck { detail }
            | Violation::Liveness { detail } => f.write_str(detail),
            Violation::AckedLost { txn, cts, survived } => write!(
                f,
                "{txn} (Tx-CTS {cts}) was acknowledged durable, but only {survived} of worker {}'s transactions survived",
                txn.worker
            ),
            Violation::EpochLost { epoch, durable } => write!(
                f,
                "epoch {epoch} was acknowledged durable, but recovery's durable epoch is {durable}"
            ),
            Violation::DependencyNotClosed { reader, writer } => write!(
                f,
                "{reader} survived, but {writer}, whose version it read, did not (the recovered state is not closed under read-from)"
            ),
            Violation::NestedRecovery { depth, detail } => {
                write!(f, "crash during recovery (depth {depth}): {detail}")
            }
        }
    }
}

/// Something other than a violation went wrong: a panic (in the engine, the
/// subject or the harness) or a broken harness assumption. Never a detection.
#[derive(Debug, Clone, Serialize)]
pub struct HarnessFailure {
    pub message: String,
    /// Where: "recording", or the crash point and image being checked.
    pub context: String,
}

impl fmt::Display for HarnessFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "harness failure while {}: {}", self.context, self.message)
    }
}

impl std::error::Error for HarnessFailure {}

/// Why a campaign did not produce a report.
#[derive(Debug, Clone)]
pub enum CampaignError {
    /// The configuration is refused (a typed reason, see [`ConfigError`]).
    Config(ConfigError),
    /// See [`HarnessFailure`].
    Harness(HarnessFailure),
}

impl fmt::Display for CampaignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CampaignError::Config(e) => e.fmt(f),
            CampaignError::Harness(h) => h.fmt(f),
        }
    }
}

impl std::error::Error for CampaignError {}

impl From<ConfigError> for CampaignError {
    fn from(e: ConfigError) -> Self {
        CampaignError::Config(e)
    }
}

/// A refused campaign configuration; each names the flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// `ideal` persists nothing and cannot reopen a pool: no crash state.
    EngineNotCrashCheckable { engine: &'static str },
    /// An injected fault of another engine than the campaign's.
    FaultOfOtherEngine { fault: String, fault_engine: &'static str, engine: &'static str },
    /// A flag out of range.
    OutOfRange { flag: &'static str, value: String, allowed: String },
    /// The population could not be built (workload parameters).
    Population(String),
    /// `--epochs` with a workload that has no one-shot form.
    NoOneShotForm { workload: &'static str },
    /// `--epochs` with an engine without the deterministic seam.
    NotDeterministic { engine: &'static str },
    /// A knob of one engine (e.g. `--nvcaracal-minor-gc`) on a campaign of
    /// another.
    KnobOfOtherEngine { flag: &'static str, knob_engine: &'static str, engine: &'static str },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::EngineNotCrashCheckable { engine } => write!(
                f,
                "--engine {engine}: persists nothing and cannot reopen a pool, so there is no crash state to check (crash campaigns run zen, mmdb, wbl, falcon and nvcaracal)"
            ),
            ConfigError::FaultOfOtherEngine { fault, fault_engine, engine } => write!(
                f,
                "--inject-fault {fault}: a fault of the {fault_engine} engine, not of --engine {engine}"
            ),
            ConfigError::OutOfRange { flag, value, allowed } => {
                write!(f, "{flag} {value}: {allowed}")
            }
            ConfigError::Population(why) => write!(f, "population: {why}"),
            ConfigError::NoOneShotForm { workload } => write!(
                f,
                "--epochs: {workload} has no one-shot form (epoch mode runs ycsb, smallbank and tpcc)"
            ),
            ConfigError::KnobOfOtherEngine { flag, knob_engine, engine } => {
                write!(f, "{flag}: a knob of the {knob_engine} engine, not of --engine {engine}")
            }
            ConfigError::NotDeterministic { engine } => write!(
                f,
                "--epochs: --engine {engine} has no deterministic seam (epoch mode runs engines that take one-shot transactions in epochs, e.g. nvcaracal)"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// The message of a caught panic payload.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_ids_round_trip_and_zero_is_the_load() {
        let t = TxnRef { worker: 3, seq: 17 };
        assert_eq!(TxnRef::from_id(t.id()), Some(t));
        assert_eq!(TxnRef::from_id(0), None);
        assert_ne!(TxnRef { worker: 0, seq: 0 }.id(), 0);
    }

    #[test]
    fn every_violation_names_its_check() {
        let v = Violation::DependencyNotClosed {
            reader: TxnRef { worker: 1, seq: 2 },
            writer: TxnRef { worker: 0, seq: 5 },
        };
        assert_eq!(v.check(), Check::DependencyNotClosed);
        assert!(v.to_string().starts_with("dependency-not-closed: T(1, 2) survived"), "{v}");
    }
}
