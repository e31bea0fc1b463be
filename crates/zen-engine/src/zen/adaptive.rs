//! Zen+ MVCC-based adaptive execution for long-running transactions (Zen+
//! §4.1): read-only snapshots, the detecting stage and the exclusive stage.
//! Active with `EngineConfig::adaptive` and a protocol whose timestamps come
//! from the shared clock (`Protocol::SNAPSHOT_READS`: `mvcc`, `hekaton`).
//!
//! READ-ONLY SNAPSHOTS
//!   A transaction declared read-only (`TxnOptions::read_only()`) reads at
//!   S = (global minimum of running transactions' timestamps) − 1, with no
//!   read set, no validation and no read timestamps; it never aborts for a
//!   conflict (only for the exclusive stage). On a Met-Cache miss it reads
//!   the NVM tuple in place and caches nothing. Choosing S (`begin_snapshot`):
//!
//!   ```text
//!   1. active[me] := 0                 (holds back every reclamation)
//!   2. c := clock.now()
//!   3. low := min(c, begin[w] for every running read-write worker w)
//!         (a worker published as active whose begin timestamp is not yet
//!          published is waited for: it is a few instructions away)
//!   4. S := low − 1;  active[me] := low
//!   ```
//!
//!   `begin[w]` is the timestamp a worker drew after publishing itself active
//!   (MVCC: its Tx-CTS; Hekaton: a tick below its later Tx-CTS).
//!
//!   (R1) Every transaction that can commit a version with Tx-CTS ≤ S has
//!        ended (installed) before step 3 read its worker: a running one
//!        either was seen (its timestamps are ≥ low > S) or published itself
//!        after step 2, so it draws its timestamps above c ≥ low. The
//!        snapshot is therefore complete and never changes.
//!   (R2) Every watermark W used to cut a version chain, evict a head or
//!        reclaim a heap slot satisfies W ≤ low while the snapshot runs: one
//!        computed after step 1 sees active\[me\] ∈ {0, low}; one computed
//!        before step 1 read the clock (≤ c) and, for each worker w running
//!        at step 3, either saw it active (so W ≤ active\[w\] ≤ begin\[w\]) or
//!        read its slot before it was published (so begin\[w\] > that clock
//!        read ≥ W).
//!   (R3) From R2, nothing S may need is gone: a chain is cut only below a
//!        version with Tx-CTS < W ≤ S + 1, which the reader finds first; a
//!        head is evicted to NVM only when its Tx-CTS < W, so a heap
//!        location holds a version ≤ S; a heap slot is reclaimed only when
//!        the version that superseded it has Tx-CTS < W ≤ S + 1, i.e. it was
//!        installed before the snapshot began (R1) and no location read
//!        afterwards points at the old slot; a retired cache entry is reused
//!        only when the watermark passes its retirement time (C4), which for
//!        any entry retired after the reader met it is ≥ c ≥ S + 1.
//!   (R4) A chain that ends before a version ≤ S means the record did not
//!        exist at S: chains are only cut below visible versions (R3), and an
//!        insert over a tombstone installs a new version above it (never in
//!        place), so the only in-place fill is of a never-visible placeholder.
//!
//!   Guarantee: a snapshot transaction sees exactly the transactions with
//!   Tx-CTS ≤ S. Under timestamp ordering (`mvcc`) the serial order is the
//!   Tx-CTS order, so it serializes at S; under Hekaton commit order is Tx-CTS
//!   order too. It is serializable but not strict: it may miss transactions
//!   that committed before it began while an older transaction was still
//!   running (it reads "in the past"). Cicada is excluded because its
//!   per-worker clocks may lag the shared clock, so "minimum − 1" does not
//!   bound its commits. Single-version protocols keep no old versions to
//!   read; their read-only transactions run under the protocol.
//!
//! DETECTING STAGE (per transaction, at every tuple access = safe point)
//!   α  a read-write (not snapshot) transaction accessed tuples whose cache
//!      entries take more than α × its worker's Met-Cache budget (bytes, all
//!      tables), or half that and its region cannot supply an entry: it
//!      becomes privileged.
//!   β  free NVM pages < β × pool pages (checked every 256 accesses): the
//!      running transaction with the most accessed tuples becomes privileged
//!      (the others see they are not the largest and carry on).
//!   γ  tuples accessed by this transaction's aborted attempts (counted by its
//!      worker across retries, reset by a commit or a non-retryable error)
//!      plus the current attempt > γ: it becomes privileged.
//!
//! EXCLUSIVE STAGE (G-EX = `Adaptive::exclusive`, 0 or the worker id + 1)
//!   1. the privileged transaction takes G-EX with a compare-and-swap; a
//!      loser aborts (`AbortReason::Exclusive`), so two transactions that
//!      qualify at once never wait for each other (no deadlock);
//!   2. it waits until every other worker is idle: the others check G-EX at
//!      each safe point and before committing and abort, unless they are
//!      already committing (commit has only bounded waits), and `begin`
//!      waits while G-EX is held. Dekker: `begin` publishes itself active,
//!      then reads G-EX; the privileged sets G-EX, then reads `active`;
//!   3. it runs alone through the usual persist path (Alg. 1), so recovery
//!      is unchanged; when its Met-Cache region is full it reads NVM tuples
//!      in place and writes new versions straight to NVM (the record's
//!      location becomes the new heap slot; the old slot becomes garbage);
//!   4. after it ends it reclaims every worker's garbage (`reclaim_all`:
//!      commit floors, then zeroing, then freeing slots and empty pages, with
//!      the same S1–S5 rules as the workers' own collection);
//!   5. it releases G-EX. A privileged transaction that aborts also ends the
//!      stage (steps 4–5).
//!
//!   Secondary indexes are not versioned: a snapshot's secondary lookup keeps
//!   the candidates whose row exists at S with a matching key, so it drops
//!   rows inserted after S but cannot find rows whose secondary key changed
//!   or that were deleted after S (TPC-C's secondary keys never change).
//!
//! WHAT IT DOES NOT DO
//!   Snapshots for single-version protocols and Cicada (see above); direct
//!   NVM writes for tables with secondary indexes or for inserts (those go
//!   through the Met-Cache and may still fail with `CacheFull`); eager
//!   version pruning (Böttcher et al.), which the paper leaves for later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use serde::Serialize;
use zen_pmem::PmemBackend;

use super::Shared;
use super::space::Garbage;

/// `Adaptive::begin_ts` of a worker with no read-write transaction running.
pub const NO_BEGIN: u64 = u64::MAX;
/// `Adaptive::begin_ts` of a worker running a snapshot transaction (it never
/// commits a version, so other snapshots need not wait for it).
pub const SNAPSHOT_BEGIN: u64 = u64::MAX - 1;

/// Why a transaction became privileged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// α: a read-write transaction filled its share of the Met-Cache region.
    Alpha,
    /// β: free NVM fell below its threshold.
    Beta,
    /// γ: retries wasted too many tuple accesses.
    Gamma,
}

impl Trigger {
    pub const ALL: [Trigger; 3] = [Trigger::Alpha, Trigger::Beta, Trigger::Gamma];
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Alpha => "alpha",
            Trigger::Beta => "beta",
            Trigger::Gamma => "gamma",
        }
    }
}

/// Counters of adaptive execution, for `EngineStatus` and bench summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AdaptiveStats {
    /// Switches from the detecting to the exclusive stage.
    pub stage_switches: u64,
    pub privileged_alpha: u64,
    pub privileged_beta: u64,
    pub privileged_gamma: u64,
    /// Wall time spent in the exclusive stage, in microseconds.
    pub exclusive_us: u64,
    /// Read-only transactions that ran on a snapshot.
    pub snapshot_txns: u64,
    /// Tuples read from NVM in place (snapshot misses, privileged misses).
    pub nvm_direct_reads: u64,
    /// New versions written straight to NVM by a privileged transaction.
    pub nvm_direct_writes: u64,
    /// Heap slots reclaimed by privileged transactions (step 4).
    pub exclusive_reclaimed_slots: u64,
    /// A privileged transaction holds G-EX at the time of reading.
    pub exclusive_now: bool,
}

impl AdaptiveStats {
    /// The counts since `earlier` (a previous reading of the same engine).
    pub fn since(&self, earlier: &AdaptiveStats) -> AdaptiveStats {
        AdaptiveStats {
            stage_switches: self.stage_switches - earlier.stage_switches,
            privileged_alpha: self.privileged_alpha - earlier.privileged_alpha,
            privileged_beta: self.privileged_beta - earlier.privileged_beta,
            privileged_gamma: self.privileged_gamma - earlier.privileged_gamma,
            exclusive_us: self.exclusive_us - earlier.exclusive_us,
            snapshot_txns: self.snapshot_txns - earlier.snapshot_txns,
            nvm_direct_reads: self.nvm_direct_reads - earlier.nvm_direct_reads,
            nvm_direct_writes: self.nvm_direct_writes - earlier.nvm_direct_writes,
            exclusive_reclaimed_slots: self.exclusive_reclaimed_slots
                - earlier.exclusive_reclaimed_slots,
            exclusive_now: self.exclusive_now,
        }
    }
}

/// Engine-wide state of adaptive execution.
pub struct Adaptive {
    /// G-EX: 0 when free, else the privileged worker's id + 1. Every begin
    /// reads it, so it has a line of its own: no counter written per
    /// transaction may share it.
    pub exclusive: CachePadded<AtomicU64>,
    /// Timestamp each worker drew after publishing itself active (R1, R2).
    pub begin_ts: Box<[CachePadded<AtomicU64>]>,
    /// Tuples accessed by each worker's running transaction (β's choice).
    pub accessed: Box<[CachePadded<AtomicU64>]>,
    pub stage_switches: AtomicU64,
    pub privileged: [AtomicU64; 3],
    pub exclusive_ns: AtomicU64,
    /// Per worker (each stores its own: a shared counter would be a shared
    /// write per read-only transaction).
    pub snapshot_txns: Box<[CachePadded<AtomicU64>]>,
    pub nvm_direct_reads: AtomicU64,
    pub nvm_direct_writes: AtomicU64,
    pub exclusive_reclaimed: AtomicU64,
}

impl Adaptive {
    pub fn new(regions: usize) -> Adaptive {
        let per_worker =
            |v: u64| (0..regions).map(|_| CachePadded::new(AtomicU64::new(v))).collect();
        Adaptive {
            exclusive: CachePadded::new(AtomicU64::new(0)),
            begin_ts: per_worker(NO_BEGIN),
            accessed: per_worker(0),
            stage_switches: AtomicU64::new(0),
            privileged: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            exclusive_ns: AtomicU64::new(0),
            snapshot_txns: per_worker(0),
            nvm_direct_reads: AtomicU64::new(0),
            nvm_direct_writes: AtomicU64::new(0),
            exclusive_reclaimed: AtomicU64::new(0),
        }
    }

    pub fn stats(&self) -> AdaptiveStats {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        AdaptiveStats {
            stage_switches: get(&self.stage_switches),
            privileged_alpha: get(&self.privileged[0]),
            privileged_beta: get(&self.privileged[1]),
            privileged_gamma: get(&self.privileged[2]),
            exclusive_us: get(&self.exclusive_ns) / 1000,
            snapshot_txns: self.snapshot_txns.iter().map(|a| get(a)).sum(),
            nvm_direct_reads: get(&self.nvm_direct_reads),
            nvm_direct_writes: get(&self.nvm_direct_writes),
            exclusive_reclaimed_slots: get(&self.exclusive_reclaimed),
            exclusive_now: self.holder().is_some(),
        }
    }

    /// Take G-EX for `worker` (step 1). False when another worker holds it.
    pub fn try_enter(&self, worker: usize, trigger: Trigger) -> bool {
        let won = self
            .exclusive
            .compare_exchange(0, worker as u64 + 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        if won {
            self.stage_switches.fetch_add(1, Ordering::Relaxed);
            let i = Trigger::ALL.iter().position(|t| *t == trigger).expect("a trigger");
            self.privileged[i].fetch_add(1, Ordering::Relaxed);
        }
        won
    }

    /// Release G-EX (step 5), adding the time since `since` to the stage time.
    pub fn leave(&self, worker: usize, since: Instant) {
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.exclusive_ns.fetch_add(ns, Ordering::Relaxed);
        let held = self.exclusive.swap(0, Ordering::SeqCst);
        assert_eq!(held, worker as u64 + 1, "G-EX released by a worker that does not hold it");
    }

    /// The worker holding G-EX, if any.
    #[inline]
    pub fn holder(&self) -> Option<usize> {
        match self.exclusive.load(Ordering::SeqCst) {
            0 => None,
            w => Some(w as usize - 1),
        }
    }
}

impl<B: PmemBackend> Shared<B> {
    /// Step 4 of the exclusive stage: reclaim every worker's garbage, as the
    /// privileged worker `me` (all other workers are idle between
    /// transactions; their pipelines are still taken under their locks, as
    /// `sync` may run). The S1–S6 rules of `space.rs` apply unchanged: items
    /// are taken from the front of each queue while ready; floors are raised
    /// over them (S4) before a fence, all are zeroed and
    /// fenced (S1), then freed, releasing empty pages (S5). A tombstone is
    /// taken only when nothing older is pending anywhere, including the items
    /// this pass takes (they are not yet durably zero). `gc_low` is left to
    /// each worker (it may hold staged items this pass cannot see): it stays
    /// at most the truth, which S3 needs. Returns the slots freed.
    pub(crate) fn reclaim_all(&self, me: usize) -> u64 {
        let freed = self.reclaim_pipelines(Shared::<B>::thread_of(me), |_| true);
        self.gc_reclaimed[me].fetch_add(freed, Ordering::Relaxed);
        self.adaptive.exclusive_reclaimed.fetch_add(freed, Ordering::Relaxed);
        freed
    }

    /// `reclaim_all`'s pass over the pipelines of the workers `take` picks,
    /// on `thread` (also `adopt_orphans`'s, for workers that are gone).
    /// Returns the slots freed.
    pub(crate) fn reclaim_pipelines(&self, thread: u32, take: impl Fn(usize) -> bool) -> u64 {
        let p = self.pool.persister(thread);
        let watermark = self.watermark();
        let mut ready: Vec<Garbage> = Vec::new();
        let mut taken_low = u64::MAX;
        let mut taken_from = vec![u64::MAX; self.regions];
        let mut flushed = Vec::new();
        for (w, gc) in self.gc.iter().enumerate().filter(|&(w, _)| take(w)) {
            let mut gc = gc.lock();
            let durable = self.durable_cts[w].load(Ordering::Acquire);
            while let Some(g) = gc.next_due(durable, watermark) {
                taken_from[w] = taken_from[w].min(g.cts);
                self.cover_with_floor(thread, &g, &mut flushed);
                ready.push(g);
            }
            // A tombstone goes only when nothing older is pending anywhere,
            // including what this pass takes (not yet durably zero).
            let low = gc.pending_low().min(taken_from[w]);
            while let Some(&g) = gc.tombstones.front() {
                let others_clear = self.gc_low.iter().enumerate().all(|(v, l)| {
                    v == w || (l.load(Ordering::SeqCst) > g.cts && taken_from[v] > g.cts)
                });
                if !(low > g.cts && taken_low > g.cts && others_clear) {
                    break;
                }
                gc.tombstones.pop_front();
                self.cover_with_floor(thread, &g, &mut flushed);
                ready.push(g);
            }
            taken_low = taken_low.min(taken_from[w]);
            // Already past the queue: floors raised, zero stores issued or
            // not. Worker `w` flushed the floors of `to_zero` but may not
            // have fenced since: covered again on this thread (S4).
            for g in &gc.to_zero {
                self.cover_with_floor(thread, g, &mut flushed);
            }
            ready.append(&mut gc.to_zero);
            // Floors durable, not zeroed yet; zeroed, or durably zero and not
            // yet freed (zeroed again below: harmless, the slots are not free).
            ready.append(&mut gc.zero_now);
            ready.append(&mut gc.zero_pending);
            ready.append(&mut gc.freeable);
        }
        if ready.is_empty() {
            return 0;
        }
        // S4: floors durable before any LP slot reads as empty.
        p.fence();
        self.floors_fenced(&flushed);
        for g in &ready {
            p.write_u64_atomic(g.slot + 8, 0);
            p.flush(g.slot + 8, 8);
        }
        // S1: zeroes durable before any slot is reused.
        p.fence();
        for g in &ready {
            let Some(t) = self.registry.get(g.table as usize) else { continue };
            let owner = self.slot_owner(g.slot);
            let mut region = t.heaps[owner].lock();
            if let Some(page) = region.free(g.slot) {
                self.release_heap_page(thread, owner, t, &mut region, page);
            }
        }
        ready.len() as u64
    }
}
