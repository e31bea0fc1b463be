//! TicToc (Yu et al., SIGMOD '16): optimistic concurrency control with
//! data-driven logical timestamps, on Met-Cache entries.
//!
//! CC-META
//!   `cc[0]` version word (shared encoding; its LOCK bit is TicToc's lock)
//!   `cc[1]` wts: logical timestamp at which the current version was written
//!   `cc[2]` rts: logical timestamp up to which the current version is valid
//!
//! PHASES
//!   read      stable copy of (version word, wts, rts, data)
//!   commit    lock the write set → commit_ts = max(max over writes of rts+1,
//!             max over reads of wts) → validate each read: if its wts changed,
//!             abort; if rts < commit_ts, extend rts to commit_ts unless
//!             another transaction holds the lock (abort) → persist with a
//!             unique Tx-CTS from the global clock (the logical commit_ts is not
//!             unique and is not the persistence order) → install with
//!             wts = rts = commit_ts.
//!
//! GUARANTEES
//!   Serializable in logical-timestamp order, strict; read-only transactions
//!   commit without writing shared metadata unless they must extend an rts.
//!   Scans are phantom-safe through the commit-time re-scan.
//!
//! WHAT IT DOES NOT DO
//!   The delta-rts encoding and the "no-wait locking of the write set in
//!   address order" optimisation are replaced by the engine's common sorted
//!   locking; logical timestamps use full 64-bit words.

use super::Protocol;
use crate::config::CcKind;

pub struct TicToc;

impl Protocol for TicToc {
    const KIND: CcKind = CcKind::Tictoc;
    const TICTOC: bool = true;
    const COPY_ON_FOREIGN_WRITE: bool = false;
}
