//! Read-from dependencies under lazy commits: what a transaction must make
//! durable before its own commit can be (`docs/design/commit-and-recovery.md`,
//! "Lazy commits and read-from dependencies").
//!
//! The hazard: under `Durability::Lazy` a writer T1 on worker W publishes its
//! versions right after its LP store, before any fence persists that store.
//! A reader T2 on another worker can commit and fence first; after a power
//! failure recovery would keep T2 and drop T1, a state not closed under
//! read-from. The rule (shape (a) of issue 15): before T2's first fence, for
//! every version T2 read or overwrote whose writer on another worker is not
//! yet known durable, T2 flushes that writer's LP line. Every other line of
//! T1 was fenced by T1 before its LP store (Alg. 1), so T2's fence makes T1
//! durable no later than T2's LP store can be. Any core may write back any
//! line, and the line holds T1's LP store: T2 saw T1's versions, which T1
//! installed after that store.
//!
//! Cost in the common case: one comparison per read against a worker-local
//! copy of each worker's durable Tx-CTS; a shared load only for a version
//! newer than that copy; a flush only for a writer whose newest commit is
//! still unfenced. Under eADR a store is durable once visible: nothing to do.
//!
//! Phantoms: a transaction that *hides* keys (deletes a row, or changes a
//! secondary-index key) removes index entries at install; a later scan that
//! does not meet the key reads no version, so no dependency could be
//! recorded. Such a transaction therefore fences its LP before it installs
//! (`hides_keys`), whatever its durability: it is durable on return.

use std::sync::atomic::Ordering;

use zen_pmem::PmemBackend;

use super::{WriteKind, ZenWorker};
use crate::api::Durability;
use crate::cc::{Protocol, silo};
use crate::config::Fault;
use crate::zen::cache::loc_entry;

/// What the dependencies of a transaction need before it may be durable.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Dependencies {
    /// LP lines of other workers' commits flushed (made durable by this
    /// worker's next fence).
    pub flushed: u32,
    /// A dependency is not durable until this worker fences: a flushed line,
    /// or this worker's own unfenced commit.
    pub need_fence: bool,
    /// Flush what is not durable (else only report it).
    flush: bool,
}

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Flush (when `flush`) the LP line of every writer this transaction
    /// depends on (its reads, its snapshot reads, and the versions its writes
    /// supersede) that is not yet known durable; the caller then fences.
    /// Without `flush` it only finds whether any is not yet durable.
    pub(super) fn flush_dependencies(&mut self, flush: bool) -> Dependencies {
        let mut deps = Dependencies { flush, ..Dependencies::default() };
        if self.eadr {
            return deps;
        }
        for i in 0..self.reads.len() {
            let cts = silo::cts_of(self.reads[i].observed);
            self.depend_on(cts, &mut deps);
        }
        for i in 0..self.snapshot_deps.len() {
            let cts = self.snapshot_deps[i];
            self.depend_on(cts, &mut deps);
        }
        for i in 0..self.writes.len() {
            if let Some((_, prev)) = self.writes[i].locked {
                self.depend_on(silo::cts_of(prev), &mut deps);
            }
        }
        deps
    }

    /// One dependency on the commit with Tx-CTS `cts`.
    #[inline]
    fn depend_on(&mut self, cts: u64, deps: &mut Dependencies) {
        if cts == 0 {
            return;
        }
        let w = crate::ts::worker_of(cts);
        if w == self.id {
            // Our own commit: our next fence persists its LP line (flushed
            // when it was written).
            if self.unfenced_cts.is_some_and(|u| u >= cts) {
                deps.need_fence = true;
            }
            return;
        }
        // A worker id beyond this engine's regions wrote it in an earlier
        // run: recovered versions are durable.
        let Some(&known) = self.known_durable.get(w) else { return };
        if cts <= known {
            return;
        }
        let durable = &self.s.durable_cts[w];
        let now = durable.load(Ordering::Acquire);
        if now >= cts {
            self.known_durable[w] = now;
            return;
        }
        // The LP address first, the durable mark second: W stores its mark
        // for T1 before it publishes the LP address of any later commit, so
        // an address newer than T1's comes with a mark at or above T1's cts.
        let lp_word = self.s.unfenced_lp[w].load(Ordering::Acquire);
        let now = durable.load(Ordering::Acquire);
        if now >= cts {
            self.known_durable[w] = now;
            return;
        }
        deps.need_fence = true;
        if !deps.flush || self.fault(Fault::LazyDependencyUnflushed) {
            return;
        }
        self.s.pool.persister(self.thread).flush(lp_word, 8);
        deps.flushed += 1;
        // Durable once this worker fences, which the caller does before
        // anything of this transaction (or a later one) can become durable.
        self.known_durable[w] = cts;
    }

    /// Does installing this transaction remove an index entry (a delete, or
    /// a changed secondary key), hiding a key from later scans? Then its LP
    /// is fenced before it installs (see the module doc).
    pub(super) fn hides_keys(&mut self) -> bool {
        if self.eadr {
            return false;
        }
        for i in 0..self.writes.len() {
            let w = self.writes[i];
            if w.kind == WriteKind::Delete {
                return true;
            }
            let t = &self.tables[w.table as usize];
            if t.secondary.is_empty() || w.kind != WriteKind::Update {
                continue;
            }
            let Some((loc, prev)) = w.locked else { continue };
            let Some((owner, idx)) = loc_entry(loc) else { continue };
            if prev & silo::ABSENT != 0 {
                continue;
            }
            self.row_buf.resize(t.row_bytes, 0);
            t.caches[owner].read_row(idx, &mut self.row_buf);
            let new_row = &self.write_data[w.data_at..w.data_at + t.row_bytes];
            if crate::index::secondary_removes_an_entry(
                &t.secondary,
                Some(&self.row_buf),
                Some(new_row),
            ) {
                return true;
            }
        }
        false
    }

    /// A read-only transaction's durability: its reads are durable once
    /// every writer it read from is. Under `Immediate` it flushes and fences
    /// what is not yet (so the client is never told a value that a crash
    /// could take back); under `Lazy` it reports whether they already are.
    pub(super) fn read_only_durable(&mut self) -> bool {
        let immediate = self.durability == Durability::Immediate;
        let deps = self.flush_dependencies(immediate);
        if !deps.need_fence {
            return true;
        }
        if immediate {
            self.fence_and_maintain();
            return true;
        }
        false
    }
}
