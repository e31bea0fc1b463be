//! Hekaton (Larson et al., VLDB '11): multi-version optimistic concurrency
//! control with versions in the Met-Cache.
//!
//! CC-META
//!   `cc[0]` version word (wts = the version's Tx-CTS, and the install latch)
//!   `cc[2]`, `cc[3]` older / newer version, as in `mvcc.rs`
//!
//! PHASES
//!   begin     read timestamp = the clock now − 1 (no clock increment): every
//!             Tx-CTS drawn before, none drawn after
//!   read      the newest version with wts ≤ read timestamp (a snapshot)
//!   write     buffered
//!   commit    latch the newest version of each written record; abort if it is
//!             newer than the snapshot (first committer wins) → draw the end
//!             timestamp (Tx-CTS) → validate: every version read is still the
//!             newest (serializable validation) and scanned ranges are unchanged
//!             → persist → install new versions linked to the old ones.
//!
//! GUARANTEES
//!   Serializable (by end timestamp). Read-only transactions that only read
//!   committed snapshots still validate (Hekaton's serializable mode).
//!
//! WHAT IT DOES NOT DO
//!   Speculative reads of uncommitted versions and commit dependencies:
//!   versions become visible only when installed after persisting.
//!   Zen+ read-only snapshots (global minimum − 1) are the engine's, in
//!   `zen/adaptive.rs`; they apply here because Tx-CTSs come from the
//!   shared clock.

use super::Protocol;
use super::silo;
use crate::config::CcKind;
use crate::error::AbortReason;
use crate::ts::Clock;

pub struct Hekaton;

impl Protocol for Hekaton {
    const KIND: CcKind = CcKind::Hekaton;
    const MULTI_VERSION: bool = true;
    const SNAPSHOT_READS: bool = true;
    const MV_VALIDATION: bool = true;

    fn begin_ts(clock: &Clock, _worker: usize, _local: &mut u64) -> Option<u64> {
        // The snapshot holds every Tx-CTS drawn before this load and none
        // drawn after it. `now()` is the smallest timestamp a later `next`
        // can return (worker 0's), so the snapshot is one below it: at
        // `now()` itself, worker 0's commit after this begin was in the
        // snapshot (a read saw it, and a write could supersede it: Hermitage
        // G0, G1b, OTV and P4). While begin ticked the clock after this load,
        // every later commit was above `now()` and hid that.
        Some(clock.now().saturating_sub(1))
    }

    fn may_supersede(txn_ts: Option<u64>, head: u64, _rts: u64) -> Result<(), AbortReason> {
        let snapshot = txn_ts.expect("Hekaton reads at a snapshot");
        if silo::cts_of(head) > snapshot {
            return Err(AbortReason::WriteLocked);
        }
        Ok(())
    }
}
