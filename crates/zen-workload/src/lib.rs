//! `zen-workload`: the workloads of the zenplus testbed (YCSB, TPC-C,
//! SmallBank), the benchmark driver that runs any of them on any engine, and
//! the reports a run produces.
//!
//! - [`Workload`]: schema / generator / transaction logic (DBx1000's split),
//!   written once against `zen_engine`'s object-safe traits.
//! - [`ycsb`], [`tpcc`], [`smallbank`]: the workloads and their consistency
//!   checks ([`CheckReport`]).
//! - [`zipf`]: Zipf (Gray et al.), scrambled Zipfian and `latest` generators.
//! - [`driver`]: worker threads, warmup, retries, statistics, progress.
//! - [`report`]: the versioned summary (JSON, text, CSV time series).
//! - [`meta`]: what a workload stores in the pool besides its tables (its
//!   spec and a per-worker ledger), and whole-table reads for checks.
//! - [`crash`]: the crash harness (subjects, oracle, nested recovery,
//!   report) for every engine that persists, used by `zen crash-test` and
//!   the crash tests; [`crash_receipts`]: the receipts that tell which
//!   transactions survived (also for `zen run --expected-state`).
//! - [`jsonschema`]: the small validator the summary schema is tested with.

pub mod crash;
pub mod crash_receipts;
pub mod driver;
pub mod error;
pub mod jsonschema;
pub mod meta;
pub mod oneshot;
pub mod report;
pub mod smallbank;
pub mod tpcc;
pub mod workload;
pub mod ycsb;
pub mod zipf;

pub use driver::{DriverConfig, IntervalSample, RunResult, Stop, run_benchmark};
pub use error::{Error, Result};
pub use meta::{WorkloadSpec, read_spec};
pub use report::{Report, ReportConfig, SCHEMA_VERSION};
pub use smallbank::{SmallBank, SmallBankConfig, SmallBankSpec};
pub use tpcc::{Tpcc, TpccConfig, TpccSpec};
pub use workload::{CheckReport, Condition, Outcome, Violations, Workload};
pub use ycsb::{CoreWorkload, LongKind, LongTxn, PaperMix, Ycsb, YcsbConfig, YcsbMode, YcsbSpec};
