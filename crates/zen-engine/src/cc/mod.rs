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

pub mod mvcc;
pub mod silo;

use crate::config::CcKind;
use crate::error::AbortReason;
use crate::ts::Clock;

/// What distinguishes one concurrency-control protocol from another.
pub trait Protocol: Send + Sync + 'static {
    const KIND: CcKind;
    /// Versions are chained in the Met-Cache and reads see the snapshot of the
    /// transaction's begin timestamp (no read validation at commit).
    const MULTI_VERSION: bool;

    /// The transaction timestamp drawn at begin, if the protocol fixes its
    /// Tx-CTS then (timestamp ordering); `None` = drawn at commit.
    fn begin_ts(clock: &Clock, worker: usize) -> Option<u64>;

    /// May a transaction with timestamp `txn_ts` supersede a newest version
    /// whose version word is `head` and read timestamp `rts`? Called with the
    /// version's lock held.
    fn may_supersede(txn_ts: Option<u64>, head: u64, rts: u64) -> Result<(), AbortReason>;

    /// Is a read that observed version word `observed` still valid at commit?
    fn read_still_valid(word: &std::sync::atomic::AtomicU64, observed: u64, mine: bool) -> bool;
}

pub use mvcc::Mvcc;
pub use silo::Silo;
