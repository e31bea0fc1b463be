//! Cicada (Lim et al., SIGMOD '17): multi-version timestamp ordering with
//! per-worker, loosely synchronised clocks and early abort, on Met-Cache
//! version chains (the same chains as `mvcc.rs`).
//!
//! CC-META  as `mvcc.rs` (wts, rts, older, newer).
//!
//! PHASES
//!   begin     timestamp from the worker's own clock: one more than its last,
//!             raised to the shared clock when that has moved ahead, and the
//!             shared clock raised to it (a max, not an increment: workers
//!             never wait on each other's timestamps): the loose
//!             synchronisation that also keeps the GC watermark moving
//!   read      as MVCC (newest version ≤ ts; raise the head's rts)
//!   write     EARLY ABORT: when the write is issued, a head that is newer
//!             than ts or read by a younger transaction aborts the transaction
//!             at once, instead of at commit
//!   commit    as MVCC (latch heads, re-check timestamp order, persist,
//!             install a new version)
//!
//! GUARANTEES  Serializable in timestamp order (as MVCC).
//!
//! WHAT IT DOES NOT DO
//!   Best-effort inlining is moot here (every Met-Cache entry holds its row
//!   inline); no contention regulation or adaptive backoff beyond `run`'s.
//!   No Zen+ read-only snapshots or adaptive execution (`zen/adaptive.rs`):
//!   the per-worker clocks may lag the shared clock, so the global minimum
//!   − 1 does not bound what a running transaction may still commit.

use super::Protocol;
use super::mvcc::timestamp_order;
use crate::config::CcKind;
use crate::error::AbortReason;
use crate::ts::{Clock, WORKER_BITS};

pub struct Cicada;

impl Protocol for Cicada {
    const KIND: CcKind = CcKind::Cicada;
    const MULTI_VERSION: bool = true;
    const TIMESTAMP_ORDERING: bool = true;
    const EARLY_ABORT: bool = true;

    fn begin_ts(clock: &Clock, worker: usize, local: &mut u64) -> Option<u64> {
        *local = (*local + 1).max(clock.now() >> WORKER_BITS);
        let ts = (*local << WORKER_BITS) | worker as u64;
        // Keep the shared clock (GC watermark, retirement) moving with the
        // workers' clocks, and pull lagging workers forward.
        clock.raise_above(ts);
        Some(ts)
    }

    fn may_supersede(txn_ts: Option<u64>, head: u64, rts: u64) -> Result<(), AbortReason> {
        timestamp_order(txn_ts, head, rts)
    }
}
