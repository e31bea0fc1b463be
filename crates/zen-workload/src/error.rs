//! The one error type of `zen-workload`.
//!
//! Operating and input errors are variants here, each with a message a user
//! can act on: a bad workload parameter names the parameter, the value and
//! what is allowed; an engine error keeps its `zen_engine::Error` source; a
//! transaction that failed names the worker and the transaction type. A
//! consistency violation is *not* an error: `check` returns a
//! [`crate::CheckReport`] that lists every condition and what failed.

use std::path::PathBuf;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong while loading, running or checking a workload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] zen_engine::Error),
    #[error("invalid {parameter} `{value}`: {allowed}")]
    InvalidParameter { parameter: &'static str, value: String, allowed: String },
    #[error(
        "the pool holds no workload population (table `{table}` is missing); load one with `zen load`"
    )]
    NotLoaded { table: String },
    #[error(
        "this pool's load did not finish: reload it (remove the pool and run `zen load {workload}` again); the {workload} load stopped part-way (out of space, killed or crashed), so rows are missing"
    )]
    LoadUnfinished { workload: &'static str },
    #[error("the pool holds a `{found}` population, not `{expected}`")]
    WrongWorkload { expected: String, found: String },
    #[error("workload metadata in the pool is corrupt: {0}")]
    Metadata(String),
    #[error(
        "worker {worker}: transaction `{txn}` still aborting after {attempts} attempts (last reason: {reason})"
    )]
    RetriesExhausted { worker: usize, txn: &'static str, attempts: u32, reason: &'static str },
    #[error("worker {worker}: transaction `{txn}` failed: {source}")]
    Transaction {
        worker: usize,
        txn: &'static str,
        #[source]
        source: zen_engine::Error,
    },
    #[error("worker thread {0} panicked")]
    WorkerPanicked(usize),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("csv output: {0}")]
    Csv(#[from] csv::Error),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// Shorthand for an [`Error::InvalidParameter`].
    pub fn invalid(
        parameter: &'static str,
        value: impl ToString,
        allowed: impl Into<String>,
    ) -> Error {
        Error::InvalidParameter { parameter, value: value.to_string(), allowed: allowed.into() }
    }

    /// Wrap an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), source }
    }
}
