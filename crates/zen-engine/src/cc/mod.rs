//! Concurrency-control protocols. CC-Meta lives only in DRAM (the four
//! `Entry::cc` words of a Met-Cache entry), never in the heap: that is the
//! point of the Met-Cache. Protocol code never touches persistent memory, and
//! every protocol commits through the same log-free persist path, so the NVM
//! counters of the same committed work are identical across protocols.
//!
//! CC-META WORDS SHARED BY ALL PROTOCOLS
//!   `cc[0]` version word: `cts << 3 | OBSOLETE | ABSENT | LOCK` (see `silo.rs`):
//!           the Tx-CTS of the version the entry holds, the write lock, and
//!           whether the version is a deletion / the entry is no longer current.
//!   `cc[1..4]` protocol-specific (MVCC: read timestamp, previous and next version).
//!
//! THE SEAM. The engine runs the phases (begin / read / write / validate →
//! decision / persist / install / abort); a protocol answers the questions in
//! which protocols differ, through the [`Protocol`] trait below, as constants
//! and small functions the engine's generic code calls (monomorphised, so a
//! constant answer costs nothing). The other eight protocols of §5.4 (2PL
//! variants, OCC, TicToc, Hekaton, Cicada, H-Store) plug in here by answering
//! the same questions: when the timestamp is drawn, what a read registers, what
//! a write must check before it may supersede the newest version, and what is
//! validated at commit.

pub mod cicada;
pub mod hekaton;
pub mod hstore;
pub mod mvcc;
pub mod occ;
pub mod silo;
pub mod tictoc;
pub mod two_phase;

use crate::config::CcKind;
use crate::error::AbortReason;
use crate::ts::Clock;

/// How a two-phase-locking protocol handles a lock conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadlock {
    /// Abort at once.
    NoWait,
    /// Wait if older than every holder, else abort (die).
    WaitDie,
    /// Wait, with cycle detection on a waits-for graph (the requester aborts on a cycle).
    Detect,
}

/// What distinguishes one concurrency-control protocol from another. The
/// constants select code paths in the engine at compile time (each protocol
/// is its own monomorphised engine); the functions answer per-tuple questions.
pub trait Protocol: Send + Sync + 'static {
    const KIND: CcKind;
    /// Versions are chained in the Met-Cache; reads see the snapshot of the
    /// transaction's read timestamp.
    const MULTI_VERSION: bool = false;
    /// Zen+ read-only snapshots at the global minimum − 1 (`zen::adaptive`)
    /// and the adaptive execution built on them: multi-version protocols
    /// whose timestamps come from the shared clock.
    const SNAPSHOT_READS: bool = false;
    /// Multi-version timestamp ordering: the Tx-CTS is fixed at begin, reads
    /// raise the newest version's read timestamp, no read validation.
    const TIMESTAMP_ORDERING: bool = false;
    /// Multi-version optimistic: the versions read must still be the newest at
    /// commit (Hekaton); the Tx-CTS is drawn at commit.
    const MV_VALIDATION: bool = false;
    /// Validation and write phase in one global critical section (Kung–Robinson).
    const SERIAL_VALIDATION: bool = false;
    /// Two-phase locking at access time, with this deadlock policy.
    const LOCKING: Option<Deadlock> = None;
    /// TicToc's data-driven logical timestamps (`cc[1]` wts, `cc[2]` rts).
    const TICTOC: bool = false;
    /// Partition locks instead of tuple concurrency control (H-Store).
    const PARTITIONED: bool = false;
    /// Check timestamp order when a write is issued, not only at commit (Cicada).
    const EARLY_ABORT: bool = false;
    /// A commit to another region's entry copies it into the writer's region
    /// (Zen §3.2), on a best-effort basis. For single-version optimistic
    /// protocols; the others install in place (their locks or version chains
    /// live in the entry), except that in the NUMA-local-write modes every
    /// protocol moves a tuple homed on another node into the writer's region
    /// (N1, `docs/design/numa.md`).
    const COPY_ON_FOREIGN_WRITE: bool = false;

    /// The transaction's read timestamp drawn at begin, for protocols that have
    /// one; `local` is the worker's own clock (Cicada).
    fn begin_ts(_clock: &Clock, _worker: usize, _local: &mut u64) -> Option<u64> {
        None
    }

    /// May a transaction with timestamp `txn_ts` supersede a newest version
    /// whose version word is `head` and read timestamp `rts`? Called with the
    /// version's latch held (and again early for `EARLY_ABORT`).
    fn may_supersede(_txn_ts: Option<u64>, _head: u64, _rts: u64) -> Result<(), AbortReason> {
        Ok(())
    }
}

pub use cicada::Cicada;
pub use hekaton::Hekaton;
pub use hstore::HStore;
pub use mvcc::Mvcc;
pub use occ::Occ;
pub use silo::Silo;
pub use tictoc::TicToc;
pub use two_phase::{DlDetect, NoWait, WaitDie};
