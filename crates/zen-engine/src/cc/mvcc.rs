//! MVCC: multi-version timestamp ordering with the versions kept in the
//! Met-Cache (Zen §3.3.2; DBx1000's MVCC, on Met-Cache entries).
//!
//! CC-META
//!   `cc[0]` version word (shared encoding, `silo.rs`): wts = the version's Tx-CTS.
//!   `cc[1]` rts: the largest timestamp of a transaction that read this version
//!           while it was the newest (only the newest version's rts matters:
//!           writers only ever append a version at the head).
//!   `cc[2]` the next older version's location (an entry), 0 if none in DRAM.
//!   `cc[3]` the next newer version's location, set when it is superseded.
//!
//! ```text
//!   record.loc ──▶ [wts 40, rts 55] ──cc[2]──▶ [wts 30] ──cc[2]──▶ [wts 12] ─▶ 0
//!                   newest (head)      ◀─cc[3]──          ◀─cc[3]──
//!   reader T=35 reads wts 30; reader T=60 reads wts 40 and raises rts to 60;
//!   writer T=50 may not supersede (rts 55 > 50): it aborts (TimestampOrder).
//! ```
//!
//! PHASES
//!   begin     T = a fresh timestamp (after publishing the worker as active, so
//!             the GC watermark never passes T); T is also the Tx-CTS.
//!   read      newest version with wts ≤ T; if that is the head, raise its rts to
//!             T, then re-check that it is still the unlocked head (a writer
//!             locks the head, then reads rts: one of the two sees the other).
//!             A head that is locked by a committing writer is waited for.
//!   write     buffered; inserts lock an absent entry as in Silo.
//!   commit    lock the heads of the write set in (table, record) order; each
//!             must have wts ≤ T and rts ≤ T (else abort); re-scan ranges
//!             (phantoms); persist with Tx-CTS = T; install each new version as
//!             a new entry of the worker's region linked to the old head.
//!   gc        once the global minimum Tx-CTS passes a head's wts, every older
//!             version is invisible to all running transactions: the chain is
//!             cut there and the old entries are retired to their owners.
//!             Active versions are never evicted (§3.3.2).
//!
//! GUARANTEES
//!   Serializable (in timestamp order); reads never block on other readers and
//!   never abort for conflicts, except a reader older than the oldest version
//!   still in DRAM (its version was evicted to NVM), which aborts with
//!   TimestampOrder. Scans are phantom-safe through the same commit-time
//!   re-scan as Silo (conservative: any new record in the range aborts).
//!
//! WHAT IT DOES NOT DO
//!   Read-only snapshots at the global minimum − 1 are Zen+'s (§4.1), in
//!   `zen/adaptive.rs`, not this protocol's; no version inlining or Cicada's optimisations (separate protocols).

use std::sync::atomic::{AtomicU64, Ordering};

use super::Protocol;
use super::silo;
use crate::config::CcKind;
use crate::error::AbortReason;
use crate::ts::Clock;

pub struct Mvcc;

impl Protocol for Mvcc {
    const KIND: CcKind = CcKind::Mvcc;
    const MULTI_VERSION: bool = true;
    const SNAPSHOT_READS: bool = true;
    const TIMESTAMP_ORDERING: bool = true;

    fn begin_ts(clock: &Clock, worker: usize, _local: &mut u64) -> Option<u64> {
        Some(clock.next(worker))
    }

    fn may_supersede(txn_ts: Option<u64>, head: u64, rts: u64) -> Result<(), AbortReason> {
        timestamp_order(txn_ts, head, rts)
    }
}

/// The timestamp-ordering rule: a writer at `ts` may supersede the newest
/// version only if it is older than `ts` and nobody younger has read it.
pub fn timestamp_order(txn_ts: Option<u64>, head: u64, rts: u64) -> Result<(), AbortReason> {
    let ts = txn_ts.expect("timestamp-ordering transactions have a timestamp from begin");
    if silo::cts_of(head) > ts || rts > ts {
        return Err(AbortReason::TimestampOrder);
    }
    Ok(())
}

/// Raise a version's read timestamp to at least `ts`.
#[inline]
pub fn raise_rts(rts: &AtomicU64, ts: u64) {
    crate::sched::point();
    if rts.load(Ordering::Acquire) < ts {
        rts.fetch_max(ts, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writers_only_supersede_older_unread_versions() {
        let head = silo::tid(40, false);
        assert_eq!(Mvcc::may_supersede(Some(50), head, 45), Ok(()));
        assert_eq!(Mvcc::may_supersede(Some(50), head, 55), Err(AbortReason::TimestampOrder));
        assert_eq!(Mvcc::may_supersede(Some(30), head, 0), Err(AbortReason::TimestampOrder));
    }
}
