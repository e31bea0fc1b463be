//! COMMIT, phase by phase (Alg. 1 of the Zen paper, for every protocol).
//!
//! ```text
//!  body done ─▶ read-only? ──yes──▶ validate (at TicToc's logical time) ─▶ done, cts 0
//!                   │no
//!                   ▼
//!  1 LOCK WRITE SET  lock.rs      sort, lock in (table, record) order, check inserts
//!                   │             (Kung–Robinson protocols hold one mutex from here to 4)
//!                   ▼
//!    Tx-CTS         here          drawn from the clock, or the begin timestamp (TO)
//!                   ▼
//!  2 VALIDATE       validate.rs   the protocol's read checks (cc/), phantoms
//!                   ▼
//!    reserve        persist.rs    a heap slot per write, a cache entry where needed
//!                   ▼ ───────────── the decision: nothing below may fail ─────────────
//!  3 PERSIST        persist.rs    Alg. 1: versions, flush, fence, LP word, flush
//!                   ▼
//!  4 PUBLISH        publish.rs    secondary indexes, retire superseded slots, install, unlock
//!
//!  5 MAINTAIN       ../maintain.rs  after every fence of the worker (inside 3 and `sync`)
//! ```
//!
//! INVARIANTS across the phases (each phase file states its own)
//! (K1) Nothing of the transaction reaches NVM before phase 3; a failure in
//!      1, 2 or the reservation unlocks, returns what it reserved
//!      (`free_unwritten_slots`) and aborts. (Reserving may allocate and
//!      zero a *page*, which is space management, not transaction data.)
//! (K2) Phases 3 and 4 cannot fail: every slot and cache entry they use is
//!      reserved before phase 3 starts.
//! (K3) A worker's Tx-CTS values increase and carry its id in the low byte;
//!      recovery's per-worker LP rule and the FIFO garbage pipeline (S6 of
//!      `space.rs`) rely on it, so it is `assert!`ed in every build.
//! (K4) Every written record stays locked from phase 1 until phase 4 makes
//!      its new version visible; superseded slots are retired before the
//!      unlock (S3).
//! (K5) Read-only and aborted transactions write nothing to NVM.
//!
//! Where a protocol differs, the phases ask it through `Protocol`
//! (`cc/mod.rs`): `may_supersede` in 1, `VALIDATES_READS`,
//! `commit_logical_ts` and `read_still_valid` in 2, its constants
//! (`MULTI_VERSION`, `TICTOC`, `COPY_ON_FOREIGN_WRITE`, …) in the
//! reservation and in 4.

mod lock;
mod persist;
mod publish;
mod validate;

use std::sync::atomic::Ordering;

use zen_pmem::{CounterSnapshot, PmemBackend};

use super::ZenWorker;
use super::scan::ZenTxn;
use crate::api::{CacheStats, CommitInfo, EngineWorker, Transaction, TxnOptions};
use crate::cc::Protocol;
use crate::config::{Fault, RaceFault};
use crate::error::{Error, Result};

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    fn commit(&mut self) -> Result<CommitInfo> {
        if self.snapshot.is_some() {
            // R1: the snapshot is complete and fixed; nothing to validate.
            let durable = self.read_only_durable();
            return Ok(CommitInfo { cts: 0, durable, writes: 0 });
        }
        if self.adaptive_on() && !self.exclusive_mine() {
            // The last safe point: a transaction not yet committing yields to
            // a privileged one.
            self.check_exclusive()?;
        }
        if self.writes.is_empty() {
            let logical = P::commit_logical_ts(self, true);
            self.validate(logical)?;
            let durable = self.read_only_durable();
            return Ok(CommitInfo { cts: 0, durable, writes: 0 });
        }
        // Kung–Robinson: validation and write phase in one critical section.
        let shared = self.s;
        let _serial = P::SERIAL_VALIDATION.then(|| shared.validation.lock());
        // Phase 1.
        if let Err(e) = self.lock_write_set().and_then(|()| self.check_inserts()) {
            self.unlock_all();
            return Err(e);
        }
        let cts = match self.txn_ts {
            Some(ts) if P::TIMESTAMP_ORDERING => ts,
            _ => self.s.clock.next(self.id),
        };
        // Phase 2 and the reservation.
        let logical = P::commit_logical_ts(self, false);
        if let Err(e) = self.validate(logical).and_then(|()| self.allocate_slots()) {
            self.free_unwritten_slots();
            self.unlock_all();
            return Err(e);
        }
        // K3, one comparison.
        assert!(
            cts > self.last_cts && crate::ts::worker_of(cts) == self.id % 256,
            "Tx-CTS {cts} not above this worker's previous {} or not this worker's ({})",
            self.last_cts,
            self.id
        );
        self.last_cts = cts;
        // Phase 3.
        let durable = self.persist_new_versions(cts);
        crate::sched::point();
        if P::TICTOC {
            self.s.raise_tictoc_high(self.id, logical);
        }
        // Phase 4.
        self.publish(cts, logical);
        Ok(CommitInfo { cts, durable, writes: self.writes.len() as u32 })
    }

    fn abort(&mut self) {
        self.unlock_all();
    }

    /// Is the injected bug `f` switched on (verification only)?
    #[inline]
    pub(super) fn fault(&self, f: Fault) -> bool {
        self.s.config.fault == Some(f)
    }

    /// Is the injected race `f` switched on (schedule tests only)?
    #[inline]
    pub(in crate::zen::txn) fn race(&self, f: RaceFault) -> bool {
        self.s.config.race_fault == Some(f)
    }
}

impl<B: PmemBackend, P: Protocol> EngineWorker for ZenWorker<'_, B, P> {
    fn id(&self) -> usize {
        self.id
    }

    fn execute(
        &mut self,
        opts: &TxnOptions,
        body: &mut dyn FnMut(&mut dyn Transaction) -> Result<()>,
    ) -> Result<CommitInfo> {
        self.durability = opts.durability.unwrap_or(self.s.config.durability);
        let txns = &self.s.txns[self.id];
        txns.store(txns.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let result = self.begin(opts.read_only).and_then(|()| {
            body(&mut ZenTxn { w: self }).and_then(|()| {
                if opts.read_only && !self.writes.is_empty() {
                    return Err(Error::Unsupported("a read-only transaction wrote".into()));
                }
                self.commit()
            })
        });
        if result.is_err() {
            self.abort();
        }
        self.end();
        self.finish(&result);
        result
    }

    fn sync(&mut self) -> Result<()> {
        self.before_fence();
        self.s.pool.persister(self.thread).fence();
        // A worker that syncs may go idle next: its garbage is collected
        // with a watermark computed now, not the published one.
        self.reuse_watermark_left = 0;
        self.after_fence();
        Ok(())
    }

    fn begin_txn(&mut self, opts: &TxnOptions) -> Result<()> {
        if self.explicit.is_some() {
            return Err(Error::Unsupported("a transaction is already open on this worker".into()));
        }
        self.durability = opts.durability.unwrap_or(self.s.config.durability);
        let txns = &self.s.txns[self.id];
        txns.store(txns.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        if let Err(e) = self.begin(opts.read_only) {
            self.end();
            self.finish_adaptive(false, e.is_retryable());
            return Err(e);
        }
        self.explicit = Some(*opts);
        Ok(())
    }

    fn current_txn(&mut self) -> Option<&mut dyn Transaction> {
        if self.explicit.is_some() { Some(self) } else { None }
    }

    fn commit_txn(&mut self) -> Result<CommitInfo> {
        let opts =
            self.explicit.take().ok_or_else(|| Error::Unsupported("no open transaction".into()))?;
        let result = if opts.read_only && !self.writes.is_empty() {
            Err(Error::Unsupported("a read-only transaction wrote".into()))
        } else {
            self.commit()
        };
        if result.is_err() {
            self.abort();
        }
        self.end();
        self.finish(&result);
        result
    }

    fn abort_txn(&mut self) {
        if self.explicit.take().is_some() {
            self.abort();
            self.end();
            self.finish_adaptive(false, false);
        }
    }

    fn counters(&self) -> CounterSnapshot {
        self.s.pool.counters(self.thread).snapshot()
    }

    fn cache_stats(&self) -> CacheStats {
        self.stats
    }
}

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    /// Zen+ bookkeeping once an attempt ended (`adaptive.rs`).
    fn finish(&mut self, result: &Result<CommitInfo>) {
        let retryable = result.as_ref().err().is_some_and(Error::is_retryable);
        self.finish_adaptive(result.is_ok(), retryable);
    }
}

impl<B: PmemBackend, P: Protocol> Drop for ZenWorker<'_, B, P> {
    fn drop(&mut self) {
        // Make lazily committed transactions durable before the worker goes;
        // the second fence covers the slot zeroing the first one's
        // maintenance set up, and the last fence the zeroing and floor
        // raises of the second, so nothing of this worker is left pending
        // (what is left, versions still above the watermark, is reclaimed by
        // the running workers, `Shared::adopt_orphans`, or the id's next user).
        let _ = EngineWorker::sync(self);
        let _ = EngineWorker::sync(self);
        self.before_fence();
        self.s.pool.persister(self.thread).fence();
        self.s.release_worker(self.id);
    }
}
