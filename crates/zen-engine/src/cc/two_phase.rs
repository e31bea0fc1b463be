//! Two-phase locking, three deadlock policies: `no-wait`, `wait-die`,
//! `dl-detect` (Bernstein et al.; the DBx1000 variants), on Met-Cache entries.
//!
//! CC-META
//!   `cc[0]` version word (its LOCK bit is only the install latch)
//!   `cc[1]` lock word: bits 0..62 = the holders (one bit per worker, so
//!           2PL engines run with at most 62 workers), bit 63 = exclusive.
//!
//! ```text
//!   shared by workers 0 and 3:   0b0…01001
//!   exclusive by worker 5:       1 << 63 | 0b100000
//! ```
//!
//! PHASES
//!   read      shared lock on the entry (strict 2PL: held to the end)
//!   write     exclusive lock at `get_for_update` / `update` / `delete`
//!             (upgrade from shared when the worker is the only holder);
//!             inserts create their entry exclusively locked
//!   conflict  no-wait: abort; wait-die: wait if older (smaller begin
//!             timestamp) than every holder, else abort; dl-detect: record the
//!             holders in a waits-for graph, abort if that closes a cycle, else
//!             wait. Every wait is bounded (abort with LockTimeout).
//!   commit    persist (Alg. 1), install in place (moved to the writer's
//!             region when homed on another node in a NUMA-local-write
//!             mode, `docs/design/numa.md` N1), release all locks.
//!
//! GUARANTEES
//!   Serializable and strict (strict 2PL). Scans lock every row they read;
//!   gaps are not locked, so phantoms are caught by the engine's commit-time
//!   re-scan instead of by predicate or next-key locks.
//!
//! WHAT IT DOES NOT DO
//!   Wait-die restarts with a fresh timestamp (the bounded retry of `run`
//!   does not carry the old one), so starvation is bounded only by retries.
//!   Lock words are per entry: an entry is never evicted while locked.

use super::{Deadlock, Protocol};
use crate::config::CcKind;

/// Most workers a 2PL engine supports (one lock-word bit each).
pub const MAX_LOCKING_WORKERS: usize = 62;
pub const EXCLUSIVE: u64 = 1 << 63;

pub struct NoWait;
pub struct WaitDie;
pub struct DlDetect;

impl Protocol for NoWait {
    const KIND: CcKind = CcKind::NoWait;
    const LOCKING: Option<Deadlock> = Some(Deadlock::NoWait);
}

impl Protocol for WaitDie {
    const KIND: CcKind = CcKind::WaitDie;
    const LOCKING: Option<Deadlock> = Some(Deadlock::WaitDie);
}

impl Protocol for DlDetect {
    const KIND: CcKind = CcKind::DlDetect;
    const LOCKING: Option<Deadlock> = Some(Deadlock::Detect);
}

/// Does a waits-for graph (bitmaps of whom each worker waits for) have a
/// cycle through `start`?
pub fn has_cycle_through(waits_for: &[u64], start: usize) -> bool {
    let mut seen = 0u64;
    let mut stack = vec![start];
    while let Some(w) = stack.pop() {
        let mut next = waits_for[w];
        while next != 0 {
            let v = next.trailing_zeros() as usize;
            next &= next - 1;
            if v == start {
                return true;
            }
            if seen & (1 << v) == 0 {
                seen |= 1 << v;
                stack.push(v);
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_are_found_only_through_the_start() {
        // 0 → 1 → 2 → 0, and 3 → 1.
        let g = [0b10, 0b100, 0b1, 0b10];
        assert!(has_cycle_through(&g, 0));
        assert!(has_cycle_through(&g, 2));
        assert!(!has_cycle_through(&g, 3));
        assert!(!has_cycle_through(&[0b10, 0], 0));
    }
}
