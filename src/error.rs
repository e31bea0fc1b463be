//! The CLI's error type and its exit codes.
//!
//! | code | meaning                                                   |
//! | ---- | --------------------------------------------------------- |
//! | 0    | success                                                   |
//! | 1    | an operating error (I/O, out of space, engine failure, a SIGBUS in a pool's memory, …) |
//! | 2    | usage: an invalid flag, value or combination              |
//! | 3    | `zen check` found a violated condition or invariant       |
//! | 4    | recovery failed: the pool could not be opened             |
//! | 5    | `zen crash-test` found a violation                        |

use std::fmt;

#[derive(Debug)]
pub enum CliError {
    /// Bad flags or values; the message says what is allowed.
    Usage(String),
    /// A consistency condition or engine invariant failed.
    CheckFailed(String),
    /// The pool could not be opened (recovered).
    Recovery(String),
    /// `zen crash-test` found a violation of the post-crash oracle.
    CrashViolation(String),
    /// Anything else.
    Failed(String),
}

pub type CliResult<T = ()> = Result<T, CliError>;

/// Exit code of an operating error ([`CliError::Failed`]); also the code of
/// a process stopped by a SIGBUS in a pool's memory (`main`).
pub const FAILED_EXIT_CODE: i32 = 1;

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Failed(_) => FAILED_EXIT_CODE,
            CliError::Usage(_) => 2,
            CliError::CheckFailed(_) => 3,
            CliError::Recovery(_) => 4,
            CliError::CrashViolation(_) => 5,
        }
    }

    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::Usage(message.into())
    }

    /// The same error (and exit code) with `note` appended to its message.
    pub fn with_note(self, note: &str) -> CliError {
        match self {
            CliError::Usage(m) => CliError::Usage(format!("{m}; {note}")),
            CliError::CheckFailed(m) => CliError::CheckFailed(format!("{m}; {note}")),
            CliError::Recovery(m) => CliError::Recovery(format!("{m}; {note}")),
            CliError::CrashViolation(m) => CliError::CrashViolation(format!("{m}; {note}")),
            CliError::Failed(m) => CliError::Failed(format!("{m}; {note}")),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(m) => write!(f, "{m}"),
            CliError::CheckFailed(m) => write!(f, "check failed: {m}"),
            CliError::Recovery(m) => write!(f, "recovery failed: {m}"),
            CliError::CrashViolation(m) => write!(f, "crash-test violation: {m}"),
            CliError::Failed(m) => write!(f, "{m}"),
        }
    }
}

impl From<zen_workload::Error> for CliError {
    fn from(e: zen_workload::Error) -> CliError {
        match e {
            zen_workload::Error::InvalidParameter { .. }
            | zen_workload::Error::WrongWorkload { .. } => CliError::Usage(e.to_string()),
            zen_workload::Error::Engine(inner) => CliError::from(inner),
            zen_workload::Error::Transaction {
                source: zen_engine::Error::Abort(zen_engine::AbortReason::OutOfSpace),
                ..
            } => CliError::Failed(format!(
                "{e}: the pool is full; give it more room with --pool-size (the default \
                 is four times the loaded data plus 512 MiB, and TPC-C inserts rows with \
                 every New-Order and Payment)"
            )),
            other => CliError::Failed(other.to_string()),
        }
    }
}

impl From<zen_engine::Error> for CliError {
    fn from(e: zen_engine::Error) -> CliError {
        match e {
            zen_engine::Error::InvalidConfig(_) => CliError::Usage(e.to_string()),
            other => CliError::Failed(other.to_string()),
        }
    }
}

impl From<zen_pmem::PmemError> for CliError {
    fn from(e: zen_pmem::PmemError) -> CliError {
        CliError::Failed(e.to_string())
    }
}
