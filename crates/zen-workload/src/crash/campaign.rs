//! The campaign: record a run on the simulator, crash it, recover every
//! chosen image and apply the oracle (the module docs of `crash/mod.rs`
//! list the checks in order). Generic over the [`Subject`]; the engine is a
//! [`Registration`].

use std::collections::{BTreeSet, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use zen_engine::schema::MAX_KEY;
use zen_engine::{AbortReason, Engine, EngineConfig, EngineWorker, TableId};
use zen_pmem::sim::{CrashPoint, EventKind, SimBackend, Trace};
use zen_pmem::{Marker, PersistenceDomain, Pool, PoolOptions};

use super::config::{CampaignConfig, InjectedFault};
use super::engines::{Registration, SimOpened};
use super::report::{CampaignReport, Failure, NestedCounts, Progress};
use super::subject::{Subject, Survivors};
use super::violation::{CampaignError, HarnessFailure, LintKind, TxnRef, Violation, panic_message};
use crate::crash_receipts::{
    RECEIPT_TABLE, read_receipts, receipt_counts, receipt_schema, write_receipt,
};
use crate::driver::worker_seed;
use crate::meta;

/// Page size of the simulated pools.
pub const PAGE_BYTES: u64 = 64 << 10;
/// Workload transactions run on every recovered image (liveness).
pub const LIVENESS_TXNS: u64 = 2;

/// What the recorded run committed: per worker, per seq, (cts, type, payload).
#[derive(Default)]
pub(crate) struct Recorded {
    by_cts: HashMap<u64, TxnRef>,
    per_worker: Vec<Vec<(u64, u64, [i64; 3])>>,
    read_only: u64,
    user_aborts: u64,
    retries: u64,
    stage_switches: Option<u64>,
}

/// How the recorded run ended.
enum RecordOutcome {
    Done(Box<(Trace, Recorded)>),
    /// A transaction failed for good: a violation of the recorded run.
    Failed(Violation),
}

pub(crate) struct Campaign<'c, S: Subject> {
    pub(super) cfg: &'c CampaignConfig,
    engine: Registration,
    pub(super) subject: &'c S,
    pool_bytes: u64,
    cache_bytes: u64,
    domain: PersistenceDomain,
    /// Every workload's one-shot procedures (`oneshot::procedures`), in
    /// every engine configuration, as the CLI does: a deterministic engine
    /// replays logged epochs with them.
    procedures: zen_engine::Procedures,
}

/// The oracle of one recovered image: the engine, the crash point, whether
/// the state hash is wanted (nested crashes follow).
pub(super) type Oracle<'o> =
    dyn Fn(&dyn Engine, &CrashPoint<'_>, bool) -> Result<Option<u64>, Violation> + 'o;

/// Indices of `k` points spread evenly over `0..n` (all when `n <= k`).
pub(crate) fn spread(n: u64, k: u64) -> BTreeSet<u64> {
    if n <= k {
        return (0..n).collect();
    }
    (0..k).map(|i| if k == 1 { n - 1 } else { i * (n - 1) / (k - 1) }).collect()
}

/// Per fence of the trace (in order), its site signature (module docs).
pub(crate) fn fence_signatures(trace: &Trace) -> Vec<(u32, u32, u32)> {
    let mut since: HashMap<u32, (u32, u32, u32)> = HashMap::new();
    let mut out = Vec::new();
    for e in trace.events() {
        let s = since.entry(e.thread).or_default();
        match &e.kind {
            EventKind::Store { .. } => s.0 += 1,
            EventKind::Flush { .. } => s.1 += 1,
            EventKind::Marker(m) => {
                s.2 += match m {
                    Marker::Begin { .. } => 1,
                    Marker::Ack { .. } => 1 << 8,
                    Marker::CleanShutdown => 1 << 16,
                    Marker::Note { .. } => 1 << 24,
                }
            }
            EventKind::Fence => out.push(std::mem::take(s)),
        }
    }
    out
}

/// Which crash points to check (module docs).
pub(crate) fn select_points(signatures: &[(u32, u32, u32)], limit: u64) -> BTreeSet<u64> {
    let total = signatures.len() as u64 + 1;
    if total <= limit {
        return (0..total).collect();
    }
    let mut chosen = BTreeSet::from([total - 1]);
    let mut seen = BTreeSet::new();
    for (i, sig) in signatures.iter().enumerate() {
        if chosen.len() as u64 >= limit {
            break;
        }
        if seen.insert(*sig) {
            chosen.insert(i as u64);
        }
    }
    let room = limit - chosen.len() as u64;
    let mut extra = spread(total, room + chosen.len() as u64).into_iter();
    while (chosen.len() as u64) < limit {
        match extra.next() {
            Some(i) => {
                chosen.insert(i);
            }
            None => break,
        }
    }
    let mut i = 0;
    while (chosen.len() as u64) < limit && i < total {
        chosen.insert(i);
        i += 1;
    }
    chosen
}

/// FNV-1a over every row of every table: the logical state.
pub(super) fn state_hash(engine: &dyn Engine) -> Result<u64, String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (i, t) in engine.status().tables.iter().enumerate() {
        let id = engine.table_id(&t.name).map_err(|e| e.to_string())?;
        eat(&(i as u64).to_le_bytes());
        meta::scan_all(engine, id, 0..=MAX_KEY, &mut |key, row| {
            eat(&key.to_le_bytes());
            eat(row);
            Ok(())
        })
        .map_err(|e| format!("reading table {}: {e}", t.name))?;
    }
    Ok(h)
}

/// What a recorded trace gives every campaign's report: its persistence
/// lints, its fences, the crash points they make (one per fence, plus the
/// end) and the distinct fence sites. Returns the fences' signatures.
pub(super) fn count_trace(report: &mut CampaignReport, trace: &Trace) -> Vec<(u32, u32, u32)> {
    report.lint_warnings = trace.lints().warning_count();
    report.lint_errors = trace.lints().error_count();
    let signatures = fence_signatures(trace);
    report.fences = signatures.len() as u64;
    report.crash_points_total = signatures.len() as u64 + 1;
    report.fence_sites.total = signatures.iter().collect::<BTreeSet<_>>().len() as u64;
    signatures
}

/// The first lint error of a run, as a violation.
pub(super) fn lint_violation(trace: &Trace) -> Option<Violation> {
    let l = trace.lints();
    let lint = if l.acked_with_pending > 0 {
        LintKind::AckedWithPending
    } else if l.pending_at_clean_shutdown > 0 {
        LintKind::PendingAtCleanShutdown
    } else if l.torn_commit_words > 0 {
        LintKind::TornCommitWord
    } else {
        return None;
    };
    let first = l.errors().into_iter().next().unwrap_or_default();
    Some(Violation::Lint { lint, detail: format!("{}; first: {first}", l.summary()) })
}

/// Run `f`; a panic becomes a harness failure naming `context`.
pub(super) fn guarded<T>(
    context: impl Fn() -> String,
    f: impl FnOnce() -> T,
) -> Result<T, CampaignError> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        CampaignError::Harness(HarnessFailure { message: panic_message(p), context: context() })
    })
}

impl<'c, S: Subject> Campaign<'c, S> {
    pub(crate) fn new(cfg: &'c CampaignConfig, engine: Registration, subject: &'c S) -> Self {
        // Every image is a copy of the pool, and every recovery allocates
        // the Met-Cache: both sized to the population (most of a check's
        // time goes into them).
        let tables = subject.tables().len() as u64 + 3;
        let big = matches!(
            cfg.workload,
            super::CrashWorkload::Tpcc
                | super::CrashWorkload::Ycsb
                | super::CrashWorkload::SmallBank
        );
        let pages = if big { 48 } else { 16 } + tables * (cfg.threads as u64 + 3);
        let pages = if cfg.workload == super::CrashWorkload::Tpcc { pages + 64 } else { pages };
        let pages = cfg.tuning.pool_pages.unwrap_or(pages);
        let cache_bytes = cfg.tuning.cache_bytes.unwrap_or(if big { 8 << 20 } else { 1 << 20 });
        Campaign {
            cfg,
            engine,
            subject,
            pool_bytes: pages * PAGE_BYTES,
            cache_bytes,
            domain: cfg.domain(),
            procedures: crate::oneshot::procedures(),
        }
    }

    fn config(&self, with_fault: bool) -> EngineConfig {
        let t = &self.cfg.tuning;
        let fault = self.cfg.fault.filter(|_| with_fault);
        let mut c = EngineConfig {
            engine: self.engine.kind,
            cc: self.cfg.cc,
            pmem: zen_pmem::BackendKind::Sim,
            page_size_bytes: PAGE_BYTES,
            pool_size_bytes: self.pool_bytes,
            // Loader / recorded workers / liveness and check workers.
            max_workers: self.cfg.threads + 3,
            cache_size_bytes: self.cache_bytes,
            durability: self.cfg.durability,
            recovery_threads: Some(self.cfg.recovery_threads),
            domain: self.domain,
            fault: match fault {
                Some(InjectedFault::Zen(f)) => Some(f),
                _ => None,
            },
            baseline_fault: match fault {
                Some(InjectedFault::Baseline(f)) => Some(f),
                _ => None,
            },
            dram_ratio: t.dram_budget_bytes.map(|_| 1.0),
            expected_data_bytes: t.dram_budget_bytes,
            // nvcaracal: four pages of input log (an epoch here is one
            // interactive transaction's writes; the loads are the largest).
            nvcaracal_log_bytes: 4 * PAGE_BYTES,
            procedures: self.procedures.clone(),
            ..EngineConfig::default()
        };
        if let Some(alpha) = t.adaptive_alpha {
            c.adaptive_alpha = alpha;
        }
        if let Some(us) = t.group_commit_interval_us {
            c.group_commit_interval_us = us;
        }
        if let Some(bytes) = t.falcon_window_bytes {
            c.falcon_window_bytes = bytes;
        }
        if let Some(variant) = t.falcon_variant {
            c.falcon_variant = variant;
        }
        if let Some(minor) = t.nvcaracal_minor_gc {
            c.nvcaracal_minor_gc = minor;
        }
        if let Some(bytes) = t.nvcaracal_row_bytes {
            c.nvcaracal_row_bytes = bytes;
        }
        c
    }

    pub(super) fn recover(&self, bytes: Vec<u8>) -> Result<Box<dyn SimOpened>, Violation> {
        self.recover_with(bytes, true)
    }

    /// Recover `bytes`, with the campaign's injected fault or without it.
    pub(super) fn recover_with(
        &self,
        bytes: Vec<u8>,
        with_fault: bool,
    ) -> Result<Box<dyn SimOpened>, Violation> {
        let recovery = |detail: String| Violation::Recovery { detail };
        let backend = SimBackend::try_from_image(bytes, self.domain)
            .map_err(|e| recovery(format!("mapping the image: {e}")))?;
        let pool = Pool::open_on(backend).map_err(|e| recovery(format!("pool open: {e}")))?;
        (self.engine.open)(pool, &self.config(with_fault))
            .map_err(|e| recovery(format!("recovery: {e}")))
    }

    pub(super) fn finish(opened: Box<dyn SimOpened>) {
        if let Some(pool) = opened.release() {
            pool.abandon();
        }
    }

    /// The loaded pool's image (no fault: the load is not under test).
    pub(super) fn loaded_image(&self) -> Result<Vec<u8>, String> {
        let sim = SimBackend::new(self.pool_bytes, self.domain);
        let pool = Pool::format(sim, &PoolOptions { page_size: PAGE_BYTES, features: 0 })
            .map_err(|e| format!("formatting the simulated pool: {e}"))?;
        let loaded = (self.engine.create)(pool, &self.config(false)).map_err(|e| e.to_string())?;
        self.subject.load(loaded.engine(), 1).map_err(|e| format!("loading: {e}"))?;
        loaded.engine().create_table(&receipt_schema()).map_err(|e| e.to_string())?;
        {
            let mut w = loaded.engine().worker().map_err(|x| x.to_string())?;
            w.sync().map_err(|x| x.to_string())?;
        }
        let pool = loaded.release().ok_or("the loaded engine is still referenced")?;
        let image = pool.backend().visible_image();
        pool.abandon();
        Ok(image)
    }

    /// Load the population, recover it, and record the workers' run.
    fn record(&self) -> Result<RecordOutcome, String> {
        let image = self.loaded_image()?;
        let engine = self.recover(image).map_err(|e| format!("recovering the loaded pool: {e}"))?;
        let e = engine.engine();
        self.subject.prepare(e).map_err(|x| format!("prepare: {x}"))?;
        {
            let mut w = e.worker().map_err(|x| x.to_string())?;
            w.sync().map_err(|x| x.to_string())?;
            w.sync().map_err(|x| x.to_string())?;
        }
        let receipts = e.table_id(RECEIPT_TABLE).map_err(|x| x.to_string())?;
        let threads = self.cfg.threads;
        let mut locals = Vec::new();
        let mut workers = Vec::new();
        for i in 0..threads {
            locals.push(self.subject.local(e, i, threads).map_err(|x| x.to_string())?);
            workers.push(e.worker().map_err(|x| x.to_string())?);
        }
        if !self.cfg.tuning.trace_from_open {
            engine.backend().reset_trace();
        }
        let opened = engine.as_ref();
        // The workers start together, so their transactions interleave (a
        // cross-worker read of a not-yet-durable version needs it).
        let start = std::sync::Barrier::new(threads);
        let (results, concurrent) = std::thread::scope(|scope| {
            let side = scope.spawn(|| self.subject.concurrent(e));
            let handles: Vec<_> = workers
                .into_iter()
                .zip(locals)
                .enumerate()
                .map(|(i, (mut w, mut local))| {
                    let start = &start;
                    scope.spawn(move || {
                        start.wait();
                        let mut rng = SmallRng::seed_from_u64(worker_seed(self.cfg.seed, i));
                        let mut rec = Recorded::default();
                        let mut mine = Vec::new();
                        for _ in 0..self.subject.requests(i, self.cfg.txns) {
                            self.run_one(
                                Some(opened),
                                w.as_mut(),
                                &mut local,
                                &mut rng,
                                receipts,
                                i,
                                &mut mine,
                                &mut rec,
                            )?;
                        }
                        rec.per_worker = vec![mine];
                        Ok::<_, Violation>(rec)
                    })
                })
                .collect();
            let results: Vec<_> = handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect();
            (results, side.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
        });
        concurrent.map_err(|e| format!("the concurrent part of the run: {e}"))?;
        let mut recorded = Recorded::default();
        for (i, r) in results.into_iter().enumerate() {
            let r = match r {
                Ok(r) => r,
                Err(v) => return Ok(RecordOutcome::Failed(v)),
            };
            recorded.read_only += r.read_only;
            recorded.user_aborts += r.user_aborts;
            recorded.retries += r.retries;
            let mine = r.per_worker.into_iter().next().unwrap_or_default();
            for (seq, (cts, _, _)) in mine.iter().enumerate() {
                recorded.by_cts.insert(*cts, TxnRef { worker: i, seq: seq as u64 });
            }
            recorded.per_worker.push(mine);
        }
        recorded.stage_switches = e.status().adaptive.map(|a| a.stage_switches);
        let pool = engine.release().ok_or("the recorded engine is still referenced")?;
        let trace = pool.backend().trace();
        pool.abandon();
        Ok(RecordOutcome::Done(Box::new((trace, recorded))))
    }

    /// One request with retries; a commit appends (cts, type, payload) to `mine`.
    #[allow(clippy::too_many_arguments)]
    fn run_one(
        &self,
        opened: Option<&dyn SimOpened>,
        w: &mut dyn EngineWorker,
        local: &mut S::Local,
        rng: &mut SmallRng,
        receipts: TableId,
        worker: usize,
        mine: &mut Vec<(u64, u64, [i64; 3])>,
        rec: &mut Recorded,
    ) -> Result<(), Violation> {
        let s = self.subject;
        let request = s.next(local, rng);
        if s.is_maintenance(&request) {
            let done = match opened {
                Some(o) => o.maintenance(w).map_err(|e| e.to_string()),
                None => Err("a maintenance step outside the recorded run".into()),
            };
            return done.map_err(|e| Violation::RecordedRun {
                detail: format!("worker {worker}: maintenance failed: {e}"),
            });
        }
        let mut opts = s.options(&request);
        let writes = !opts.read_only;
        if writes {
            opts.durability = Some(self.cfg.durability);
        }
        let txn_type = s.txn_type(&request);
        let me = TxnRef { worker, seq: mine.len() as u64 };
        let mut payload = [0; 3];
        for attempt in 1..=zen_engine::api::MAX_ATTEMPTS {
            let result = w.execute(&opts, &mut |tx| {
                payload = s.run_txn(local, tx, &request, me)?;
                if writes {
                    write_receipt(tx, receipts, worker, me.seq, txn_type, payload)?;
                }
                Ok(())
            });
            match result {
                Ok(info) => {
                    if writes {
                        mine.push((info.cts, txn_type as u64, payload));
                    } else {
                        rec.read_only += 1;
                    }
                    return Ok(());
                }
                Err(e) => match e.abort_reason() {
                    Some(AbortReason::User) => {
                        rec.user_aborts += 1;
                        return Ok(());
                    }
                    Some(r) if r.is_retryable() && attempt < zen_engine::api::MAX_ATTEMPTS => {
                        rec.retries += 1;
                        zen_engine::api::backoff(attempt);
                    }
                    _ => {
                        return Err(Violation::RecordedRun {
                            detail: format!(
                                "worker {worker}: transaction `{}` failed: {e}",
                                s.txn_types()[txn_type]
                            ),
                        });
                    }
                },
            }
        }
        unreachable!("the last attempt returns")
    }

    /// The receipts against the recorded run: prefix, contents, acknowledged.
    fn check_receipts(
        &self,
        survivors: &Survivors,
        acked: &[u64],
        rec: &Recorded,
    ) -> Result<u64, Violation> {
        let receipts: Vec<_> = survivors.receipts.values().copied().collect();
        let counts =
            receipt_counts(&receipts).map_err(|detail| Violation::ReceiptsNotPrefix { detail })?;
        let mut max_cts = 0;
        for r in &receipts {
            let Some(&(cts, txn_type, payload)) =
                rec.per_worker.get(r.worker).and_then(|m| m.get(r.seq as usize))
            else {
                return Err(Violation::UnknownReceipt {
                    detail: format!(
                        "receipt ({}, {}) survived, but worker {} committed only {}",
                        r.worker,
                        r.seq,
                        r.worker,
                        rec.per_worker.get(r.worker).map_or(0, Vec::len)
                    ),
                });
            };
            if (r.txn_type, r.payload) != (txn_type, payload) {
                return Err(Violation::UnknownReceipt {
                    detail: format!(
                        "receipt ({}, {}) holds type {} {:?}, the run wrote type {txn_type} {payload:?}",
                        r.worker, r.seq, r.txn_type, r.payload
                    ),
                });
            }
            max_cts = max_cts.max(cts);
        }
        for cts in acked {
            if let Some(&txn) = rec.by_cts.get(cts) {
                let survived = counts.get(&txn.worker).copied().unwrap_or(0);
                if txn.seq >= survived {
                    return Err(Violation::AckedLost { txn, cts: *cts, survived });
                }
            }
        }
        Ok(max_cts)
    }

    /// Dependency closure: every writer a survivor read from survived.
    fn check_closure(&self, survivors: &Survivors) -> Result<(), Violation> {
        let mut writers = Vec::new();
        for (reader, r) in &survivors.receipts {
            writers.clear();
            self.subject.read_from(r, &mut writers);
            for &id in &writers {
                if let Some(writer) = TxnRef::from_id(id)
                    && !survivors.receipts.contains_key(&writer)
                {
                    return Err(Violation::DependencyNotClosed { reader: *reader, writer });
                }
            }
        }
        Ok(())
    }

    /// The oracle on one recovered engine (module docs of `crash/mod.rs`).
    /// Returns the logical state hash when `nested` is asked for.
    fn oracle(
        &self,
        e: &dyn Engine,
        acked: &[u64],
        rec: &Recorded,
        nested: bool,
    ) -> Result<Option<u64>, Violation> {
        e.check_invariants().map_err(Violation::structure)?;
        let receipts =
            read_receipts(e).map_err(|x| Violation::state(format!("reading receipts: {x}")))?;
        let survivors = Survivors::new(&receipts);
        let max_cts = self.check_receipts(&survivors, acked, rec)?;
        self.check_closure(&survivors)?;
        self.subject.verify(e, &survivors)?;
        let state = if nested { Some(state_hash(e).map_err(Violation::state)?) } else { None };
        self.liveness(e, max_cts)?;
        self.subject.after_liveness(e)?;
        e.check_invariants().map_err(|x| Violation::structure(format!("after liveness: {x}")))?;
        Ok(state)
    }

    /// More workload transactions commit, above every surviving Tx-CTS.
    fn liveness(&self, e: &dyn Engine, max_cts: u64) -> Result<(), Violation> {
        let threads = self.cfg.threads;
        let receipts = e.table_id(RECEIPT_TABLE).map_err(Violation::liveness)?;
        let mut local = self.subject.local(e, threads, threads + 1).map_err(Violation::liveness)?;
        let mut w = e.worker().map_err(Violation::liveness)?;
        let mut rng = SmallRng::seed_from_u64(worker_seed(self.cfg.seed, threads));
        let mut mine = Vec::new();
        let mut rec = Recorded::default();
        for _ in 0..LIVENESS_TXNS {
            self.run_one(
                None,
                w.as_mut(),
                &mut local,
                &mut rng,
                receipts,
                threads,
                &mut mine,
                &mut rec,
            )
            .map_err(|v| Violation::liveness(v.to_string()))?;
        }
        if let Some(&(cts, _, _)) = mine.iter().find(|(cts, _, _)| *cts <= max_cts) {
            return Err(Violation::liveness(format!(
                "Tx-CTS {cts} after recovery is not above the recovered {max_cts}"
            )));
        }
        Ok(())
    }

    fn save(&self, bytes: &[u8], point: u64, image: u64, nested: usize) -> Option<String> {
        let dir = self.cfg.save_failing.as_ref()?;
        let c = self.cfg;
        let name = format!(
            "crash-{}-{}-{}-seed{}-point{point}-image{image}{}.pool",
            c.workload.name(),
            c.design().replace('/', "-"),
            c.mode.name(),
            c.seed,
            if nested > 0 { format!("-nested{nested}") } else { String::new() }
        );
        let path = dir.join(name);
        let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, bytes));
        match written {
            Ok(()) => Some(path.display().to_string()),
            Err(e) => Some(format!("(could not write {}: {e})", path.display())),
        }
    }

    /// The engine's name (`--engine`).
    pub(super) fn engine_name(&self) -> &'static str {
        self.engine.kind.name()
    }

    pub(super) fn empty_report(&self) -> CampaignReport {
        CampaignReport::new(self.cfg.clone(), self.subject.population(), self.pool_bytes)
    }

    pub(crate) fn run(
        &self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CampaignReport, CampaignError> {
        let started = Instant::now();
        let mut report = self.empty_report();
        let recorded = guarded(|| "recording the run".into(), || self.record())?;
        report.record_s = started.elapsed().as_secs_f64();
        let (trace, rec) = match recorded {
            Ok(RecordOutcome::Done(done)) => *done,
            Ok(RecordOutcome::Failed(violation)) => {
                report.fail(Failure::of(violation));
                return Ok(report);
            }
            Err(message) => {
                return Err(CampaignError::Harness(HarnessFailure {
                    message,
                    context: "recording the run".into(),
                }));
            }
        };
        report.committed = rec.per_worker.iter().map(|w| w.len() as u64).sum();
        report.acked = trace
            .markers()
            .iter()
            .filter(|m| matches!(m.marker, Marker::Ack { txn } if rec.by_cts.contains_key(&txn)))
            .count() as u64;
        report.read_only = rec.read_only;
        report.user_aborts = rec.user_aborts;
        report.retries = rec.retries;
        report.adaptive_stage_switches = rec.stage_switches;
        let signatures = count_trace(&mut report, &trace);
        if self.cfg.tuning.lints_are_violations
            && let Some(v) = lint_violation(&trace)
        {
            report.fail(Failure::of(v));
            return Ok(report);
        }
        let check_started = Instant::now();
        let oracle = |e: &dyn Engine, point: &CrashPoint<'_>, nested: bool| {
            let acked: Vec<u64> = point.acked_txns().collect();
            self.oracle(e, &acked, &rec, nested)
        };
        let outcome = self.check_points(&trace, &signatures, &mut report, progress, &oracle);
        report.check_s = check_started.elapsed().as_secs_f64();
        outcome.map(|()| report)
    }

    /// Recover the chosen images of the chosen crash points of `trace`,
    /// apply `oracle` to each, and crash the chosen recoveries (nested).
    pub(super) fn check_points(
        &self,
        trace: &Trace,
        signatures: &[(u32, u32, u32)],
        report: &mut CampaignReport,
        progress: &mut dyn FnMut(Progress),
        oracle: &Oracle<'_>,
    ) -> Result<(), CampaignError> {
        let chosen = select_points(signatures, self.cfg.crash_points);
        let n = chosen.len() as u64;
        let nest_at = spread(n, self.cfg.tuning.nested_crash_points.unwrap_or(n));
        let mut sites_hit = BTreeSet::new();
        let (mode, budget, seed) = (self.cfg.mode, self.cfg.images_per_point, self.cfg.seed);
        for point in trace.crash_points() {
            let index = point.index() as u64;
            if !chosen.contains(&index) {
                continue;
            }
            report.crash_points_checked += 1;
            if let Some(sig) = signatures.get(index as usize) {
                sites_hit.insert(*sig);
            }
            report.fence_sites.hit = sites_hit.len() as u64;
            let mut cursor = point.cursor(mode, budget, seed);
            let exhaustive = cursor.is_exhaustive();
            report.exhaustive_points += u64::from(exhaustive);
            let nest_here = nest_at.contains(&(report.crash_points_checked - 1));
            let mut nth = 0;
            while let Some(view) = cursor.next_image() {
                let nested = nest_here
                    && nth < self.cfg.tuning.nested_images_per_point
                    && self.cfg.nested_depth > 0;
                nth += 1;
                let context =
                    || format!("checking {}, image {}", point.describe(), view.description);
                let outcome = guarded(context, || {
                    let opened = self.recover(view.bytes.to_vec())?;
                    let recovery_trace = nested.then(|| opened.backend().trace());
                    let result = oracle(opened.engine(), &point, nested);
                    Self::finish(opened);
                    result.map(|hash| hash.zip(recovery_trace))
                })?;
                let state = match outcome {
                    Ok(state) => state,
                    Err(violation) => {
                        let saved = self.save(view.bytes, index, view.index, 0);
                        report.fail(Failure {
                            crash_point: Some(point.describe()),
                            images: vec![view.description.clone()],
                            saved_image: saved,
                            ..Failure::of(violation)
                        });
                        return Ok(());
                    }
                };
                report.images.total += 1;
                if exhaustive {
                    report.images.exhaustive += 1;
                } else {
                    report.images.sampled += 1;
                }
                if let Some((hash, recovery)) = state {
                    let mut chain = vec![view.description.clone()];
                    if let Err((violation, bytes)) =
                        self.nested(&recovery, hash, 1, &mut chain, &mut report.nested)?
                    {
                        let saved = self.save(&bytes, index, view.index, chain.len() - 1);
                        report.fail(Failure {
                            crash_point: Some(point.describe()),
                            images: chain,
                            saved_image: saved,
                            ..Failure::of(violation)
                        });
                        return Ok(());
                    }
                }
            }
            progress(Progress {
                points_done: report.crash_points_checked,
                points_total: chosen.len() as u64,
                images: report.images.total,
            });
        }
        Ok(())
    }

    /// Crash the recovery whose trace is `trace` (module docs, idempotence).
    /// The inner `Err`: the violation and the image that failed (`chain`
    /// names it).
    #[allow(clippy::type_complexity)]
    fn nested(
        &self,
        trace: &Trace,
        reference: u64,
        depth: u32,
        chain: &mut Vec<String>,
        stats: &mut NestedCounts,
    ) -> Result<Result<(), (Violation, Vec<u8>)>, CampaignError> {
        if depth > self.cfg.nested_depth {
            return Ok(Ok(()));
        }
        let total = trace.fence_count() as u64 + 1;
        let picks = spread(total, self.cfg.tuning.nested_points);
        let (mode, seed) = (self.cfg.mode, self.cfg.seed);
        for point in trace.crash_points() {
            if !picks.contains(&(point.index() as u64)) {
                continue;
            }
            stats.points += 1;
            let mut cursor = point.cursor(mode, self.cfg.tuning.nested_images, seed);
            while let Some(view) = cursor.next_image() {
                chain.push(format!("{} (recovery at depth {})", view.description, depth - 1));
                stats.recoveries += 1;
                let context = || format!("a nested recovery: {}", chain.join(" → "));
                let outcome = guarded(context, || -> Result<(u64, Trace), Violation> {
                    let opened = self.recover(view.bytes.to_vec())?;
                    let t = opened.backend().trace();
                    let h = state_hash(opened.engine());
                    Self::finish(opened);
                    Ok((h.map_err(Violation::state)?, t))
                })?;
                let nested = |detail: String| Violation::NestedRecovery { depth, detail };
                match outcome {
                    Ok((hash, _)) if hash != reference => {
                        return Ok(Err((
                            nested("recovery changed the logical state".into()),
                            view.bytes.to_vec(),
                        )));
                    }
                    Ok((_, inner)) => {
                        if let Err(found) =
                            self.nested(&inner, reference, depth + 1, chain, stats)?
                        {
                            return Ok(Err(found));
                        }
                    }
                    Err(v) => return Ok(Err((nested(v.to_string()), view.bytes.to_vec()))),
                }
                chain.pop();
            }
        }
        Ok(Ok(()))
    }
}
