//! The protocols of the OCC core: Silo, strict two-phase locking (no-wait,
//! wait-die, dl-detect), single-version timestamp ordering (TO) and
//! multi-version timestamp ordering (MVCC, old versions in a DRAM version
//! heap). Which one a core runs is `EngineConfig::cc`, checked against
//! `EngineKind::supported_cc` (falcon runs all six, Falcon §5.2.1; ideal,
//! mmdb and wbl only Silo). The persist path is the same for all: a store
//! never sees which protocol decided the commit.
//!
//! THE SEAM. A protocol is a [`Protocol`] value: its answers to the three
//! questions in which the core's protocols differ (does it lock, and what
//! does it do on a lock conflict; does it order transactions by a timestamp
//! drawn at begin; does it keep superseded versions for older readers). The
//! core's code paths (`txn.rs`, `commit.rs`) branch on those answers only,
//! never on the protocol's name. A protocol whose differences fit them is a
//! constant here plus one line of [`PROTOCOLS`] (that line is its
//! registration: `EngineKind::supported_cc` of falcon is derived from it).
//! One that needs a new kind of read, lock or version store adds a field
//! and the core code behind it, as TO's abort-instead-of-old-version did
//! (`old_versions`).
//!
//! ```text
//!   protocol   locking             timestamp_order  old_versions
//!   silo       -                   no               -
//!   no-wait    abort on conflict   no               -
//!   wait-die   older waits         no               -
//!   dl-detect  waits-for graph     no               -
//!   to         -                   yes              no (an older read aborts)
//!   mvcc       -                   yes              yes (DRAM version heap)
//! ```
//!
//! THE RECORD'S `cc` WORD (`table.rs`)
//! ```text
//!   2PL       bits 0..62 = shared holders (one bit per worker),
//!             bit 63 = exclusive (same encoding as Zen's, `cc/two_phase.rs`)
//!   TO, MVCC  rts: the largest timestamp of a transaction that read the
//!             record's current version (the head)
//! ```
//!
//! 2PL (strict, Bernstein et al.; DBx1000's NO_WAIT, WAIT_DIE, DL_DETECT)
//!   read      shared lock, then the stable read of `txn.rs`
//!   write     exclusive lock at `get_for_update` / `update` / `delete` /
//!             `insert` (an upgrade when the worker is the only holder)
//!   conflict  no-wait: abort at once (`WriteLocked`). wait-die: wait if
//!             older (smaller priority, drawn from the clock at begin and
//!             kept by a transaction that died, so it ages) than every
//!             holder, else abort (`Deadlock`). dl-detect: record the holders
//!             in the core's waits-for graph; abort (`Deadlock`) if that
//!             closes a cycle through the requester, else wait. Every wait
//!             is bounded (`LockTimeout`).
//!   commit    Silo's commit skeleton: TID locks (uncontended: the worker
//!             holds every written record exclusively), read validation
//!             (always passes), the commit-time re-scan of every scanned
//!             range (phantoms: gaps are not locked), persist, install; the
//!             2PL locks are released after install (or after the abort)
//!
//! TIMESTAMP ORDERING (TO and MVCC; MVCC as Zen's `cc/mvcc.rs`)
//! ```text
//!   record.tid ─▶ head: the version in the store (falcon: the NVM slot), wts = cts
//!   version heap (MVCC, DRAM, per (table, rid)):  [wts 12 until 30] [wts 30 until 40]
//!   reader T=35 reads wts 30 from the heap (TO: aborts); T=45 reads the head, rts := 45
//!
//!   begin     T = a fresh timestamp, after publishing the worker as active
//!             (`Core::min_active` never passes T); T is the Tx-CTS
//!   read      head unlocked with wts ≤ T: raise its rts to T, SeqCst fence,
//!             re-check the head (a writer locks the head, fences, reads the
//!             rts: one of the two sees the other); head newer than T: MVCC
//!             reads the newest version of the heap with wts ≤ T, TO aborts
//!             (`TimestampOrder`: the version T should read is gone); head
//!             locked (a committer, or an inserter until it ends): wait
//!             (bounded)
//!   scan      the table's `scan_rts` is raised to T before the index is
//!             walked; every key met is read as above (deleted keys stay in
//!             the ordered index until no transaction can see them, so an
//!             older scan meets the deletion and reads or aborts)
//!   commit    lock the write set (TID words), SeqCst fence; each head must
//!             have wts < T and rts ≤ T, an insert also `scan_rts` ≤ T,
//!             else `TimestampOrder`; no read or scan validation; persist
//!             with cts = T; install: MVCC copies the old head (row, or its
//!             absence) into the version heap *before* the new TID is
//!             published, so a reader that sees the new head finds it
//!   gc        each superseded version (TO: each deletion) is queued by its
//!             writer with the cts that superseded it; once `min_active`
//!             reaches that cts nobody can read it and it is dropped; a
//!             deleted key whose deletion is that old leaves the ordered
//!             index
//! ```
//!
//! GUARANTEES
//!   All serializable (Hermitage and the randomized serializability checker
//!   run falcon with each). 2PL is strict; TO and MVCC never show an
//!   uncommitted version (installs follow the commit decision). `scan_rts`
//!   is per table, so it is conservative: an insert by a transaction older
//!   than any scan of the table aborts.
//!
//! WHAT IT DOES NOT DO
//!   No snapshot reads for read-only transactions beyond MVCC's own, no
//!   version inlining, no Thomas write rule in TO (a write older than the
//!   head aborts), no MV2PL / MVOCC (Falcon §5.2.1 combines its version
//!   heap with 2PL and OCC too; here only with TO).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

pub use crate::cc::Deadlock;
use crate::cc::two_phase::EXCLUSIVE;
use crate::config::CcKind;
use crate::sched::Mutex;

/// A protocol of the OCC core: its answers to the questions in which the
/// core's protocols differ (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Protocol {
    pub kind: CcKind,
    /// Strict 2PL: reads take shared locks, writes exclusive ones, held to
    /// the end; what a conflict does.
    pub locking: Option<Deadlock>,
    /// The transaction's timestamp T is drawn at begin and is its cts;
    /// reads raise the record's rts, commit checks each written head
    /// against T instead of validating reads.
    pub timestamp_order: bool,
    /// (With `timestamp_order`.) Superseded versions stay in the DRAM
    /// version heap, where a reader older than the head finds them; without
    /// it that reader aborts.
    pub old_versions: bool,
}

impl Protocol {
    pub const SILO: Protocol =
        Protocol { kind: CcKind::Silo, locking: None, timestamp_order: false, old_versions: false };
    pub const NO_WAIT: Protocol = Protocol::two_phase(CcKind::NoWait, Deadlock::NoWait);
    pub const WAIT_DIE: Protocol = Protocol::two_phase(CcKind::WaitDie, Deadlock::WaitDie);
    pub const DL_DETECT: Protocol = Protocol::two_phase(CcKind::DlDetect, Deadlock::Detect);
    pub const TO: Protocol =
        Protocol { kind: CcKind::To, locking: None, timestamp_order: true, old_versions: false };
    pub const MVCC: Protocol =
        Protocol { kind: CcKind::Mvcc, locking: None, timestamp_order: true, old_versions: true };

    const fn two_phase(kind: CcKind, policy: Deadlock) -> Protocol {
        Protocol { kind, locking: Some(policy), timestamp_order: false, old_versions: false }
    }

    /// The protocol of `cc`, if the core runs it.
    pub fn of(cc: CcKind) -> Option<Protocol> {
        PROTOCOLS.into_iter().find(|p| p.kind == cc)
    }
}

/// The protocols the OCC core runs: one line each.
pub const PROTOCOLS: [Protocol; 6] = [
    Protocol::SILO,
    Protocol::NO_WAIT,
    Protocol::WAIT_DIE,
    Protocol::DL_DETECT,
    Protocol::TO,
    Protocol::MVCC,
];

/// Their `CcKind`s (`EngineKind::supported_cc` of falcon).
pub const CORE_PROTOCOLS: [CcKind; PROTOCOLS.len()] = {
    let mut kinds = [CcKind::Silo; PROTOCOLS.len()];
    let mut i = 0;
    while i < kinds.len() {
        kinds[i] = PROTOCOLS[i].kind;
        i += 1;
    }
    kinds
};

/// Take (or keep) a shared lock for worker `me`; on a conflict, `Err` with
/// the other holders (a bitmap of workers).
pub fn lock_shared(word: &AtomicU64, me: usize) -> Result<(), u64> {
    let bit = 1u64 << me;
    loop {
        crate::sched::point();
        let cur = word.load(Ordering::Acquire);
        if cur & bit != 0 {
            return Ok(());
        }
        if cur & EXCLUSIVE != 0 {
            return Err(cur & !EXCLUSIVE);
        }
        if word.compare_exchange(cur, cur | bit, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            return Ok(());
        }
    }
}

/// Take (or upgrade to) the exclusive lock for worker `me`; `Err` with the
/// other holders when another worker holds the record in any mode.
pub fn lock_exclusive(word: &AtomicU64, me: usize) -> Result<(), u64> {
    let bit = 1u64 << me;
    loop {
        crate::sched::point();
        let cur = word.load(Ordering::Acquire);
        if cur == EXCLUSIVE | bit {
            return Ok(());
        }
        let others = cur & !EXCLUSIVE & !bit;
        if others != 0 {
            return Err(others);
        }
        if word.compare_exchange(cur, EXCLUSIVE | bit, Ordering::AcqRel, Ordering::Acquire).is_ok()
        {
            return Ok(());
        }
    }
}

/// Release whatever worker `me` holds.
pub fn unlock(word: &AtomicU64, me: usize) {
    crate::sched::point();
    let bit = 1u64 << me;
    if word.load(Ordering::Acquire) == EXCLUSIVE | bit {
        word.store(0, Ordering::Release);
    } else {
        word.fetch_and(!bit, Ordering::AcqRel);
    }
}

/// Raise a read timestamp (a record's rts, a table's `scan_rts`) to at least
/// `ts`, then a SeqCst fence (the reader's half of the head check).
pub fn raise(word: &AtomicU64, ts: u64) {
    crate::sched::point();
    if word.load(Ordering::Acquire) < ts {
        word.fetch_max(ts, Ordering::SeqCst);
    }
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// An old version: its row (`None`: the key had no row then) from `wts`
/// until the write with cts `until` superseded it.
#[derive(Debug)]
struct Version {
    wts: u64,
    until: u64,
    row: Option<Box<[u8]>>,
}

const SHARDS: usize = 64;

/// One shard of the heap: (table, rid) → its old versions, oldest first.
type Shard = Mutex<HashMap<(u32, u64), Vec<Version>>>;

/// The DRAM version heap of a multi-version core: per (table, rid) the
/// superseded versions still visible to some running transaction, oldest
/// first.
pub struct VersionHeap {
    shards: Box<[Shard]>,
    bytes: AtomicU64,
}

impl Default for VersionHeap {
    fn default() -> Self {
        VersionHeap {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            bytes: AtomicU64::new(0),
        }
    }
}

impl VersionHeap {
    fn shard(&self, table: u32, rid: u64) -> &Shard {
        let h = rid.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(table);
        &self.shards[(h >> 58) as usize % SHARDS]
    }

    /// The version `(wts, row)` was superseded by the write with cts `until`.
    pub fn push(&self, table: u32, rid: u64, wts: u64, until: u64, row: Option<&[u8]>) {
        let row: Option<Box<[u8]>> = row.map(Into::into);
        let size = row.as_ref().map_or(0, |r| r.len()) as u64;
        self.shard(table, rid).lock().entry((table, rid)).or_default().push(Version {
            wts,
            until,
            row,
        });
        self.bytes.fetch_add(size, Ordering::Relaxed);
    }

    /// The version of (table, rid) visible at `ts` (the newest with
    /// wts ≤ ts that was superseded after `ts`): its row copied into `out`,
    /// and whether it had one; `None` when the heap holds none (collected).
    pub fn read(&self, table: u32, rid: u64, ts: u64, out: &mut [u8]) -> Option<(u64, bool)> {
        let shard = self.shard(table, rid).lock();
        let v = shard.get(&(table, rid))?.iter().rev().find(|v| v.wts <= ts && ts < v.until)?;
        if let Some(row) = &v.row {
            out.copy_from_slice(row);
        }
        Some((v.wts, v.row.is_some()))
    }

    /// Drop the versions of (table, rid) superseded at or before `horizon`;
    /// true when none is left.
    pub fn collect(&self, table: u32, rid: u64, horizon: u64) -> bool {
        let mut shard = self.shard(table, rid).lock();
        let Some(chain) = shard.get_mut(&(table, rid)) else { return true };
        let mut freed = 0u64;
        chain.retain(|v| {
            let keep = v.until > horizon;
            if !keep {
                freed += v.row.as_ref().map_or(0, |r| r.len()) as u64;
            }
            keep
        });
        let empty = chain.is_empty();
        if empty {
            shard.remove(&(table, rid));
        }
        self.bytes.fetch_sub(freed, Ordering::Relaxed);
        empty
    }

    /// Row bytes the heap holds.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Records with old versions in the heap (quiescent checks).
    pub fn chains(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }
}

/// A superseded version waiting for `Core::min_active` to pass `until`.
#[derive(Debug, Clone, Copy)]
pub struct Garbage {
    pub table: u32,
    pub rid: u64,
    pub key: u64,
    pub until: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_locks_share_and_exclusive_excludes() {
        let w = AtomicU64::new(0);
        assert_eq!(lock_shared(&w, 0), Ok(()));
        assert_eq!(lock_shared(&w, 3), Ok(()));
        assert_eq!(lock_exclusive(&w, 0), Err(1 << 3), "another holder blocks the upgrade");
        unlock(&w, 3);
        assert_eq!(lock_exclusive(&w, 0), Ok(()), "sole holder upgrades");
        assert_eq!(lock_shared(&w, 1), Err(1), "the exclusive holder is named");
        assert_eq!(lock_shared(&w, 0), Ok(()), "the exclusive holder may read");
        unlock(&w, 0);
        assert_eq!(w.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn every_protocol_is_registered_once_and_answers_consistently() {
        for (i, p) in PROTOCOLS.iter().enumerate() {
            assert_eq!(CORE_PROTOCOLS[i], p.kind);
            assert_eq!(Protocol::of(p.kind), Some(*p));
            assert!(!p.old_versions || p.timestamp_order, "{:?}: versions need timestamps", p.kind);
            assert!(p.locking.is_none() || !p.timestamp_order, "{:?}: locks or timestamps", p.kind);
            assert_eq!(p.locking.is_some(), p.kind.is_locking(), "{:?}", p.kind);
        }
        assert_eq!(Protocol::of(CcKind::Tictoc), None);
    }

    #[test]
    fn the_heap_answers_by_timestamp_and_collects_by_horizon() {
        let heap = VersionHeap::default();
        heap.push(0, 7, 10, 20, Some(&[1, 1]));
        heap.push(0, 7, 20, 30, None);
        let mut out = [0u8; 2];
        assert_eq!(heap.read(0, 7, 15, &mut out), Some((10, true)));
        assert_eq!(out, [1, 1]);
        assert_eq!(heap.read(0, 7, 25, &mut out), Some((20, false)));
        assert_eq!(heap.read(0, 7, 5, &mut out), None, "older than every version kept");
        assert_eq!(heap.read(0, 7, 30, &mut out), None, "the head, not the heap, answers");
        assert!(!heap.collect(0, 7, 20));
        assert_eq!(heap.read(0, 7, 15, &mut out), None);
        assert_eq!(heap.bytes(), 0);
        assert!(heap.collect(0, 7, 30));
        assert_eq!(heap.chains(), 0);
    }
}
