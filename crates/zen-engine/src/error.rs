//! The one error type of `zen-engine`, and the reasons a transaction aborts.
//!
//! `Error::Abort(reason)` is what a protocol or the engine returns when a
//! transaction cannot commit; `is_retryable()` tells the retry loop (in
//! `Worker::run` and in the benchmark driver) whether running it again may
//! succeed. Everything else is an operating or input error, typed and named.

use zen_pmem::PmemError;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a transaction aborted. Counted per reason by the benchmark driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AbortReason {
    /// A tuple it wanted to write was locked by another transaction.
    WriteLocked,
    /// A tuple it read changed before it committed (OCC validation).
    ReadValidation,
    /// Timestamp ordering: a younger transaction already read or wrote the tuple.
    TimestampOrder,
    /// A lock wait timed out or would risk deadlock.
    LockTimeout,
    /// Two transactions inserted the same key concurrently.
    InsertConflict,
    /// A range it scanned changed (phantom).
    Phantom,
    /// No NVM slot or DRAM cache entry could be found for a new version.
    OutOfSpace,
    /// The caller asked for it (e.g. TPC-C New-Order's 1% rollback).
    User,
    /// The exclusive stage of Zen+ preempted it.
    Exclusive,
    /// Every Met-Cache entry of the worker's region is in use by running transactions.
    CacheFull,
    /// A lock wait was refused to avoid a deadlock (wait-die, dl-detect).
    Deadlock,
}

impl AbortReason {
    pub const ALL: [AbortReason; 11] = [
        AbortReason::WriteLocked,
        AbortReason::ReadValidation,
        AbortReason::TimestampOrder,
        AbortReason::LockTimeout,
        AbortReason::InsertConflict,
        AbortReason::Phantom,
        AbortReason::OutOfSpace,
        AbortReason::User,
        AbortReason::Exclusive,
        AbortReason::CacheFull,
        AbortReason::Deadlock,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AbortReason::WriteLocked => "write_locked",
            AbortReason::ReadValidation => "read_validation",
            AbortReason::TimestampOrder => "timestamp_order",
            AbortReason::LockTimeout => "lock_timeout",
            AbortReason::InsertConflict => "insert_conflict",
            AbortReason::Phantom => "phantom",
            AbortReason::OutOfSpace => "out_of_space",
            AbortReason::User => "user",
            AbortReason::Exclusive => "exclusive",
            AbortReason::CacheFull => "cache_full",
            AbortReason::Deadlock => "deadlock",
        }
    }

    /// Concurrency-control aborts are retried; user aborts and out-of-space are not.
    pub fn is_retryable(self) -> bool {
        !matches!(self, AbortReason::User | AbortReason::OutOfSpace)
    }
}

/// Everything that can go wrong in the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("transaction aborted: {}", .0.name())]
    Abort(AbortReason),
    #[error("unknown table `{0}`")]
    UnknownTable(String),
    #[error("unknown table id {0}")]
    UnknownTableId(u32),
    #[error("table `{table}`: unknown column `{column}`")]
    UnknownColumn { table: String, column: String },
    #[error("table `{table}`: tuple is {actual} bytes, the schema says {expected}")]
    WrongTupleSize { table: String, expected: usize, actual: usize },
    #[error("table `{table}`: duplicate key {key}")]
    DuplicateKey { table: String, key: u64 },
    #[error("table `{table}`: key {key} not found")]
    KeyNotFound { table: String, key: u64 },
    #[error("table `{table}`: key {key} is out of range (keys must be below 2^63)")]
    KeyOutOfRange { table: String, key: u64 },
    #[error("table `{0}` already exists with a different schema")]
    SchemaMismatch(String),
    #[error("invalid schema for table `{table}`: {detail}")]
    InvalidSchema { table: String, detail: String },
    #[error("too many workers: the engine was opened for {max}")]
    TooManyWorkers { max: usize },
    #[error("access set over its limit of {limit} tuples")]
    AccessSetFull { limit: usize },
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    #[error("pool is not a {expected} pool (catalog says `{found}`)")]
    WrongEngine { expected: String, found: String },
    #[error("corrupt pool: {0}")]
    Corrupt(String),
    #[error("{0}")]
    Unsupported(String),
    /// An argument out of its domain (an inverted scan range, a
    /// secondary-index prefix wider than the index key).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// falcon: a transaction's redo record is larger than its worker's log
    /// ring (the transaction is aborted; nothing was written).
    #[error(
        "transaction aborted: its redo record needs {needed_bytes} bytes, the log window holds {window_bytes} (raise --falcon-window-bytes)"
    )]
    LogWindowOverflow { needed_bytes: u64, window_bytes: u64 },
    #[error("one-shot transaction wrote table `{table}` key {key}, which it did not declare")]
    UndeclaredWrite { table: String, key: u64 },
    /// A one-shot transaction found, at its place in the serial order, that
    /// what its reconnaissance read (before the epoch) no longer holds: its
    /// declared write set may be wrong. Deterministic (replay reaches it
    /// too), not a concurrency-control abort: the client re-submits the
    /// transaction, with a new reconnaissance, in a later epoch.
    #[error("reconnaissance is stale: {detail} (re-submit in a later epoch)")]
    StaleReconnaissance { detail: String },
    /// A batch larger than the input log runs as several epochs; one
    /// transaction whose logged inputs alone (with the log's header) do not
    /// fit is refused before anything of the batch runs.
    #[error(
        "transaction {index} of the epoch alone needs {needed_bytes} bytes of input log, the log holds {capacity_bytes} (raise --nvcaracal-log-bytes)"
    )]
    EpochTooLarge { index: usize, needed_bytes: u64, capacity_bytes: u64 },
    #[error(
        "transaction {index} of the epoch alone may need {needed_bytes} bytes of transient versions in DRAM, the budget is {budget_bytes} (raise --nvcaracal-dram-budget)"
    )]
    EpochOverBudget { index: usize, needed_bytes: u64, budget_bytes: u64 },
    #[error("input log of epoch {epoch} cannot be replayed: {detail}")]
    InputLogCorrupt { epoch: u64, detail: String },
    #[error(transparent)]
    Pmem(#[from] PmemError),
}

impl Error {
    /// True when running the same transaction again may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Abort(reason) => reason.is_retryable(),
            _ => false,
        }
    }

    /// The abort reason, if this is an abort.
    pub fn abort_reason(&self) -> Option<AbortReason> {
        match self {
            Error::Abort(reason) => Some(*reason),
            _ => None,
        }
    }
}
