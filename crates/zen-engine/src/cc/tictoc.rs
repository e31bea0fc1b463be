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

use std::sync::atomic::Ordering;

use super::{CommitView, Protocol, ReadItem, silo};
use crate::config::{CcKind, RaceFault};

pub struct TicToc;

impl Protocol for TicToc {
    const KIND: CcKind = CcKind::Tictoc;
    const TICTOC: bool = true;
    const COPY_ON_FOREIGN_WRITE: bool = false;

    /// commit_ts = max(writes' rts + 1, reads' wts).
    ///
    /// A read-only transaction commits at the largest wts it read, and every
    /// read must be valid at that logical time (its rts reaches it, or is
    /// extended to it while unlocked). Validating at 0 instead let any read
    /// pass the `rts >= commit_ts` shortcut, even one locked by a writer about
    /// to commit below the reader's other reads: the reader saw a later write
    /// on one key and an earlier version on another (found by the shuttle
    /// schedules, `tests/schedules.rs`).
    fn commit_logical_ts<V: CommitView>(view: &V, read_only: bool) -> u64 {
        if read_only && view.race(RaceFault::TictocReadOnlyAtZero) {
            return 0;
        }
        let mut ts = view.reads().iter().map(|r| r.wts).max().unwrap_or(0);
        for cc in view.locked_write_entries() {
            ts = ts.max(cc[2].load(Ordering::SeqCst) + 1);
        }
        ts
    }

    /// The version read is still current at `commit_ts` (extend its rts).
    /// A version read from an entry is decided by the entry's words alone,
    /// as in Silo's check (C6 of `zen/cache.rs`); an empty record by its
    /// location word.
    fn read_still_valid<V: CommitView>(view: &V, r: &ReadItem, commit_ts: u64) -> bool {
        let Some(cc) = view.entry_cc(r.table, r.loc) else {
            return V::is_empty_location(r.loc) && view.location_now(r) == r.loc;
        };
        // Whether this transaction holds the word's lock: a search of the
        // write set, asked once and only where the answer matters.
        let mut mine = None;
        loop {
            let word = cc[0].load(Ordering::Acquire);
            if word & !silo::LOCK != r.observed || cc[1].load(Ordering::Acquire) != r.wts {
                return false;
            }
            let rts = cc[2].load(Ordering::Acquire);
            if rts >= commit_ts || *mine.get_or_insert_with(|| view.holds_write_lock(r)) {
                return true;
            }
            if word & silo::LOCK != 0 {
                return false;
            }
            crate::sched::point();
            if cc[2].compare_exchange(rts, commit_ts, Ordering::SeqCst, Ordering::Acquire).is_ok() {
                view.raise_logical_high(commit_ts);
                // Re-check that no writer slipped in between: its install
                // changes the version word, and a writer that locked the
                // record after our lock check may have read the rts before
                // this extension, so its commit timestamp need not be above
                // ours: any lock now fails the read. (The lock CAS and this
                // load, and the extension and the writer's rts load, are
                // SeqCst: one of the two sides sees the other.) The lock
                // case let write skews commit before (found by the shuttle
                // schedules, `tests/schedules.rs`).
                let now = cc[0].load(Ordering::SeqCst);
                if view.race(RaceFault::TictocExtendUnderLock) {
                    return now & !silo::LOCK == r.observed;
                }
                return now == r.observed;
            }
        }
    }
}
