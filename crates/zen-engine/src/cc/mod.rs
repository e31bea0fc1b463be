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
//! THE SEAM. The engine runs the phases (begin / read / write, then commit:
//! lock the write set / validate / persist / publish / maintain, or abort); a
//! protocol answers the questions in which protocols differ, through the
//! [`Protocol`] trait below, as constants and small functions the engine's
//! generic code calls (monomorphised, so a constant answer costs nothing).
//! The ten protocols of §5.4 (Silo, MVCC, the 2PL variants, OCC, TicToc,
//! Hekaton, Cicada, H-Store) plug in here by answering the same questions:
//! when the timestamp is drawn, what a read registers, what a write must
//! check before it may supersede the newest version, and what is validated
//! at commit.
//!
//! COMMIT-TIME VALIDATION lives with the protocols: the hooks
//! [`Protocol::commit_logical_ts`] and [`Protocol::read_still_valid`] read
//! the committing transaction through a [`CommitView`], which the engine
//! implements. Their default bodies are Silo's read check (`silo.rs`); TicToc
//! overrides both (`tictoc.rs`). Whether the read set is validated at all is
//! [`Protocol::VALIDATES_READS`]: locks (2PL, H-Store partitions) and
//! timestamp ordering (MVCC, Cicada) protected the reads already.
//!
//! AN ELEVENTH PROTOCOL whose differences fit the hooks is one file here (a
//! unit struct implementing [`Protocol`], overriding what differs, with
//! `pub mod` and `pub use` lines below) and its registration: a `CcKind`
//! variant with its name and one-line description (`config.rs`), one arm of
//! `open_zen`'s match (`lib.rs`) and one of the crash harness's
//! (`zen-workload/src/crash/engines.rs`). A protocol that needs a new kind of
//! read, lock or version chain still adds engine code, as 2PL
//! (`zen/txn/locking.rs`) and the multi-version ones (`zen/txn/versions.rs`)
//! did.

pub mod cicada;
pub mod hekaton;
pub mod hstore;
pub mod mvcc;
pub mod occ;
pub mod silo;
pub mod tictoc;
pub mod two_phase;

use std::sync::atomic::AtomicU64;

use crate::config::{CcKind, RaceFault};
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

    /// Does commit validate the read set? Not where locks (2PL, H-Store's
    /// partitions) or timestamp ordering (rts) protected the reads already.
    const VALIDATES_READS: bool =
        !(Self::LOCKING.is_some() || Self::PARTITIONED || Self::TIMESTAMP_ORDERING);

    /// The commit's logical timestamp, for protocols that order by one
    /// (TicToc); 0 for the others. Called with the write set locked, or for
    /// a read-only transaction with nothing locked; `read_only` says which.
    fn commit_logical_ts<V: CommitView>(_view: &V, _read_only: bool) -> u64 {
        0
    }

    /// Is the read `r` still valid for a commit at logical time `logical`?
    /// Called with the write set locked, for every read when
    /// `VALIDATES_READS`. The default is Silo's check (`silo.rs`).
    fn read_still_valid<V: CommitView>(view: &V, r: &ReadItem, _logical: u64) -> bool {
        silo::read_still_valid(view, r, Self::MULTI_VERSION)
    }
}

/// A read of the running transaction: what commit validates.
#[derive(Debug, Clone, Copy)]
pub struct ReadItem {
    /// Table id.
    pub table: u32,
    /// Read with the intent to write (`get_for_update`): the protocol's
    /// for-update work (2PL's exclusive lock, Cicada's early check) is done.
    pub for_update: bool,
    /// Record id in the table.
    pub rid: u64,
    /// The record's location word when read (a cache entry, a heap slot, or
    /// empty).
    pub loc: u64,
    /// The version word read, without LOCK.
    pub observed: u64,
    /// TicToc: the version's wts when read.
    pub wts: u64,
}

/// The engine's side of commit-time validation: what a protocol's hooks may
/// read of the committing transaction and of the records it touched.
/// Implemented by Zen's worker; the hooks are generic over it, so each
/// protocol's validation is monomorphised into its engine.
pub trait CommitView {
    /// The transaction's read set.
    fn reads(&self) -> &[ReadItem];
    /// The location word of the record `r` read, now (Acquire).
    fn location_now(&self, r: &ReadItem) -> u64;
    /// The CC-Meta words of the cache entry that location `loc` of `table`
    /// names; `None` for a heap slot or the empty location.
    fn entry_cc(&self, table: u32, loc: u64) -> Option<&[AtomicU64; 4]>;
    /// Whether `loc` is the empty location (the record has no version).
    fn is_empty_location(loc: u64) -> bool;
    /// Whether this transaction holds the lock of the version word `r` was
    /// read from (the entry at `r.loc`). A lock it holds on the same record
    /// through another entry does not count: the record moved after the
    /// read (a copy on a foreign write, N1's move) and the word read may
    /// still be locked by the writer that moved it, its new version already
    /// installed in the copy. Called during validation, with the write set
    /// locked; the hooks ask it only of a locked word.
    fn holds_write_lock(&self, r: &ReadItem) -> bool;
    /// The CC-Meta words of the entry of every locked write.
    fn locked_write_entries(&self) -> impl Iterator<Item = &[AtomicU64; 4]>;
    /// Raise the largest logical timestamp handed out (TicToc: evicted
    /// versions restart above it).
    fn raise_logical_high(&self, ts: u64);
    /// Is the injected race `f` switched on (schedule tests only)?
    fn race(&self, f: RaceFault) -> bool;
}

pub use cicada::Cicada;
pub use hekaton::Hekaton;
pub use hstore::HStore;
pub use mvcc::Mvcc;
pub use occ::Occ;
pub use silo::Silo;
pub use tictoc::TicToc;
pub use two_phase::{DlDetect, NoWait, WaitDie};
