//! The engine's structural invariants after recovery (and at any quiescent
//! moment): what `Engine::check_invariants` checks, and what every crash
//! campaign checks on every recovered image (`Check::Structure`).

use std::sync::atomic::Ordering;

use zen_pmem::PmemBackend;

use crate::cc::silo;
use crate::error::{Error, Result};
use crate::heap::SlotHeader;
use crate::zen::Shared;
use crate::zen::cache::{LOC_EMPTY, loc_entry};
use crate::zen::table::spare_slot;

/// Structural invariants, for a quiescent engine (no running transactions):
/// (R1) every index entry's location holds a version of that key;
/// (R2) no two records share a slot; (R3) free slots are disjoint from live ones;
/// (R4) a record's spare (S7 of `space.rs`) holds an older version of the
/// record's own key than its current slot, and is neither free nor another
/// record's slot or spare.
pub fn check_invariants<B: PmemBackend>(shared: &Shared<B>) -> Result<()> {
    let mut live = std::collections::HashSet::new();
    let header = |slot: u64| {
        SlotHeader::decode(
            shared.pool.backend().load_u64(slot),
            shared.pool.backend().load_u64(slot + 8),
        )
    };
    for t in shared.tables().iter() {
        for (key, rid) in t.index.iter() {
            let loc = t.records.loc(rid).load(Ordering::Acquire);
            let slot = match loc_entry(loc) {
                _ if loc == LOC_EMPTY => continue,
                Some((w, idx)) => {
                    let e = t.caches[w].entry(idx);
                    let tid = e.cc[0].load(Ordering::Acquire);
                    if e.record.load(Ordering::Acquire) != rid + 1
                        || t.caches[w].key(idx).load(Ordering::Acquire) != key
                        || tid & silo::OBSOLETE != 0
                    {
                        return Err(Error::Corrupt(format!(
                            "table {}: key {key}: cache entry mismatch",
                            t.schema.name
                        )));
                    }
                    if tid & silo::ABSENT != 0 {
                        continue;
                    }
                    e.slot.load(Ordering::Acquire)
                }
                None => loc,
            };
            let current = match header(slot) {
                Some(h) if h.key == key && !h.deleted => h.cts,
                other => {
                    return Err(Error::Corrupt(format!(
                        "table {}: key {key}: slot {slot} holds {other:?}",
                        t.schema.name
                    )));
                }
            };
            if !live.insert(slot) {
                return Err(Error::Corrupt(format!(
                    "slot {slot} is reachable from two index entries"
                )));
            }
            let Some(spare) = spare_slot(t.records.spare(rid).load(Ordering::Acquire)) else {
                continue;
            };
            match header(spare) {
                Some(h) if h.key == key && !h.deleted && h.cts < current => {}
                other => {
                    return Err(Error::Corrupt(format!(
                        "table {}: key {key}: spare slot {spare} holds {other:?}, not a version \
                         of the key older than {current}",
                        t.schema.name
                    )));
                }
            }
            if !live.insert(spare) {
                return Err(Error::Corrupt(format!("spare slot {spare} is also in use elsewhere")));
            }
        }
        for h in t.heaps.iter() {
            for slot in h.lock().free_slots() {
                if live.contains(&slot) {
                    return Err(Error::Corrupt(format!(
                        "table {}: slot {slot} is both free and live",
                        t.schema.name
                    )));
                }
            }
        }
    }
    Ok(())
}
