//! Putting a committed version into the primary index: Alg. 2's
//! `updateIndexGC`, made safe for several threads at once.
//!
//! Recovery builds the engine's own concurrent index directly (no private
//! winners map): a key's record id comes from the point index, and its
//! location word names the newest committed version offered so far.
//!
//! (W1) A location word only moves to a version with a larger Tx-CTS
//!      (compare-and-swap against the version it named, whose Tx-CTS is
//!      read from the slot: no slot is zeroed while offers run). So once
//!      every version has been offered, it names the newest committed one,
//!      whatever the order the threads offered them in.
//! (W2) A slot's `live` bit is set before a location word can name it, and
//!      cleared by whoever moves the word off it (or by the offer itself when
//!      it loses). Every slot is offered once, so once every offer is done
//!      the live bits are exactly the slots location words name.
//! (W3) A record id is published in the point index only after its location
//!      word is stored, so a thread that finds the key finds a version.
//! (W4) Only non-deleted versions link their key into the ordered set; a
//!      tombstone that is still the winner at the end unlinks it
//!      (`clean::zero_winning_tombstones`), which keeps (I1) of `index/mod.rs`.

use std::sync::atomic::Ordering;

use zen_pmem::PmemBackend;

use super::Context;
use crate::error::{Error, Result};
use crate::heap;
use crate::zen::cache::LOC_EMPTY;

/// A committed version of a key, found by the scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Offer {
    pub cts: u64,
    pub table: u32,
    pub key: u64,
    pub slot: u64,
    pub deleted: bool,
}

// Pending lists are min-heaps by Tx-CTS.
impl Ord for Offer {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.cts, self.slot).cmp(&(other.cts, other.slot))
    }
}

impl PartialOrd for Offer {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Offer a committed version; `Ok(true)` when it is its key's newest
/// version so far (a later offer may still supersede it).
pub(super) fn offer<B: PmemBackend>(ctx: &Context<'_, B>, o: Offer) -> Result<bool> {
    let t = &ctx.tables[o.table as usize];
    ctx.pages.set_live(o.slot);
    let rid = match t.index.get(o.key) {
        Some(rid) => rid,
        None => {
            let rid = t.records.allocate().ok_or_else(|| {
                Error::Corrupt(format!("table {}: more keys than records", t.schema.name))
            })?;
            t.records.loc(rid).store(o.slot, Ordering::Release);
            let first = t.index.get_or_insert(o.key, rid);
            if first == rid {
                if !o.deleted {
                    t.index.link(o.key, rid);
                }
                return Ok(true);
            }
            // Another thread gave the key its record first: ours stays
            // unused (no index entry names it).
            t.records.loc(rid).store(LOC_EMPTY, Ordering::Relaxed);
            first
        }
    };
    let loc = t.records.loc(rid);
    let mut current = loc.load(Ordering::Acquire);
    loop {
        // (cts, deleted) of the version the record names now.
        let (current_cts, current_deleted) = if current == LOC_EMPTY {
            (0, true)
        } else {
            let b = ctx.backend();
            (b.load_u64(current + 8) >> 1, b.load_u64(current) & heap::DELETED_BIT != 0)
        };
        if current_cts >= o.cts {
            ctx.pages.clear_live(o.slot);
            return Ok(false);
        }
        match loc.compare_exchange(current, o.slot, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                if current != LOC_EMPTY {
                    ctx.pages.clear_live(current);
                }
                // Whoever installed a non-deleted version linked the key (W4).
                if !o.deleted && current_deleted {
                    t.index.link(o.key, rid);
                }
                return Ok(true);
            }
            Err(now) => current = now,
        }
    }
}
