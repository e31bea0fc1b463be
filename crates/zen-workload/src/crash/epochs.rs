//! Epoch mode of the crash harness (`CampaignConfig::epochs`, `zen
//! crash-test … --epochs K`): the recorded run is K epochs of one-shot
//! transactions submitted through an engine's deterministic seam
//! (`zen_engine::det`), not interactive transactions with receipts.
//!
//! Recording: the population is loaded and recovered as for every
//! campaign; then, on one client, each epoch draws `txns` requests from the
//! subject's generator (seeded), turns them into one-shot transactions
//! (`OneShotWorkload::batch`, reconnaissance included) and submits them as
//! one epoch on `threads` epoch threads. The engine marks each epoch's
//! phases in the trace (`EpochPhase` notes) and `Begin`/`Ack { txn: epoch }`.
//!
//! The reference: the recorded batches replayed serially (one epoch
//! thread, no injected fault) on a second engine recovered from the image
//! the recording started from. Its state hash after each epoch is what a
//! recovery must reach; the recorded run must reach the same hashes and
//! results (determinism: `threads` workers against one), else the recorded
//! run is a violation.
//!
//! The oracle of each recovered image, in order (the first violation stops
//! the campaign, as in interactive mode):
//!
//! 1. recovery returns `Ok` ([`Check::Recovery`]); `check_invariants` holds
//!    ([`Check::Structure`]);
//! 2. every epoch acknowledged before the crash point is durable
//!    ([`Check::AckedLost`], `Violation::EpochLost`);
//! 3. the recovered durable epoch d lies in the recorded run, and the rows
//!    equal the serial replay's after epoch d ([`Check::StateMismatch`]): so
//!    nothing of a crashed epoch survives unless its inputs were logged and
//!    recovery replayed it whole;
//! 4. the workload's own conditions ([`Check::WorkloadCheck`]);
//! 5. liveness: one more epoch runs, the durable epoch rises past d and the
//!    invariants hold ([`Check::Liveness`]);
//! 6. nested crashes as in interactive mode ([`Check::NestedRecovery`]).
//!
//! The recorded run's persistence lints are checked first, as always
//! ([`Check::Lint`]).
//!
//! [`Check::Recovery`]: super::Check::Recovery
//! [`Check::Structure`]: super::Check::Structure
//! [`Check::AckedLost`]: super::Check::AckedLost
//! [`Check::StateMismatch`]: super::Check::StateMismatch
//! [`Check::WorkloadCheck`]: super::Check::WorkloadCheck
//! [`Check::Liveness`]: super::Check::Liveness
//! [`Check::NestedRecovery`]: super::Check::NestedRecovery
//! [`Check::Lint`]: super::Check::Lint

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use zen_engine::{AbortReason, DeterministicEngine, Engine, EpochPhase, Error as EngineError};
use zen_engine::{EpochOutcome, OneShot};
use zen_pmem::Marker;
use zen_pmem::sim::{CrashPoint, Trace};

use super::LIVENESS_TXNS;
use super::campaign::{Campaign, count_trace, guarded, lint_violation, state_hash};
use super::report::{CampaignReport, EpochReport, Failure, Progress};
use super::subject::{Subject, workload_check};
use super::violation::{CampaignError, ConfigError, HarnessFailure, Violation};
use crate::driver::worker_seed;
use crate::oneshot::OneShotWorkload;

/// What the recorded epochs did, and what recovery must reach.
struct EpochRecord {
    /// The durable epoch before the first recorded one.
    base: u64,
    /// Epochs recorded (absolute numbers `base + 1 ..= base + epochs`).
    epochs: u64,
    /// The serial replay's state hash after k recorded epochs, k = 0..=epochs.
    expected: Vec<u64>,
    committed: u64,
    user_aborts: u64,
    stale: u64,
    /// Stale versions the recorded epochs' collectors deleted (minor, major).
    gc: (u64, u64),
}

/// How the recorded run ended.
enum Recording {
    Done(Box<(Trace, EpochRecord)>),
    Failed(Violation),
}

/// A transaction's result, comparable across runs.
fn result_words(out: &EpochOutcome) -> Vec<Result<Vec<u8>, String>> {
    out.results
        .iter()
        .map(|r| match r {
            Ok(bytes) => Ok(bytes.clone()),
            Err(e) => Err(e.to_string()),
        })
        .collect()
}

/// The phase a crash point lies in (the last phase note, or the epoch
/// acknowledgement, before it).
fn phase_at(point: &CrashPoint<'_>) -> &'static str {
    for m in point.markers_so_far().iter().rev() {
        match m.marker {
            Marker::Ack { .. } => return "between-epochs",
            Marker::Note { tag, value } if tag == EpochPhase::NOTE_TAG => {
                return EpochPhase::from_note_value(value)
                    .map_or("unknown-phase", EpochPhase::name);
            }
            _ => {}
        }
    }
    "before-the-first-epoch"
}

fn recorded(detail: impl Into<String>) -> Violation {
    Violation::RecordedRun { detail: detail.into() }
}

impl<S: Subject + OneShotWorkload> Campaign<'_, S> {
    /// Run the epoch-mode campaign (module docs).
    pub(crate) fn run_epochs(
        &self,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<CampaignReport, CampaignError> {
        let epochs = self.cfg.epochs.unwrap_or(1);
        let started = Instant::now();
        let mut report = self.empty_report();
        let outcome = guarded(|| "recording the epochs".into(), || self.record_epochs(epochs))??;
        report.record_s = started.elapsed().as_secs_f64();
        let (trace, rec) = match outcome {
            Recording::Done(done) => *done,
            Recording::Failed(violation) => {
                report.fail(Failure::of(violation));
                return Ok(report);
            }
        };
        let acks: BTreeSet<u64> = trace
            .markers()
            .iter()
            .filter_map(|m| match m.marker {
                Marker::Ack { txn } if txn > rec.base && txn <= rec.base + rec.epochs => Some(txn),
                _ => None,
            })
            .collect();
        report.committed = rec.committed;
        report.acked = if acks.len() as u64 == rec.epochs { rec.committed } else { 0 };
        report.user_aborts = rec.user_aborts;
        let signatures = count_trace(&mut report, &trace);
        let stats = RefCell::new(EpochReport {
            epochs: rec.epochs,
            txns_per_epoch: self.cfg.txns,
            stale: rec.stale,
            gc_minor: rec.gc.0,
            gc_major: rec.gc.1,
            ..EpochReport::default()
        });
        if self.cfg.tuning.lints_are_violations
            && let Some(v) = lint_violation(&trace)
        {
            report.epochs = Some(stats.into_inner());
            report.fail(Failure::of(v));
            return Ok(report);
        }
        let check_started = Instant::now();
        let last_point = RefCell::new(None);
        let oracle = |e: &dyn Engine, point: &CrashPoint<'_>, nested: bool| {
            if last_point.replace(Some(point.index())) != Some(point.index()) {
                *stats.borrow_mut().points_by_phase.entry(phase_at(point).into()).or_default() += 1;
            }
            self.epoch_oracle(e, point, &rec, nested, &stats)
        };
        let outcome = self.check_points(&trace, &signatures, &mut report, progress, &oracle);
        report.check_s = check_started.elapsed().as_secs_f64();
        report.epochs = Some(stats.into_inner());
        outcome.map(|()| report)
    }

    /// Load, recover, record `epochs` epochs, then the serial replay.
    fn record_epochs(&self, epochs: u64) -> Result<Recording, CampaignError> {
        let harness = |message: String| {
            CampaignError::Harness(HarnessFailure {
                message,
                context: "recording the epochs".into(),
            })
        };
        let image = self.loaded_image().map_err(harness)?;
        let opened =
            self.recover(image).map_err(|e| harness(format!("recovering the loaded pool: {e}")))?;
        let e = opened.engine();
        let det = e
            .deterministic()
            .ok_or(ConfigError::NotDeterministic { engine: self.engine_name() })?;
        let s = self.subject;
        let plan = s
            .prepare(e)
            .and_then(|()| s.plan(e, det.procedures()))
            .map_err(|x| harness(format!("preparing the one-shot workload: {x}")))?;
        let mut local = s.local(e, 0, 1).map_err(|x| harness(x.to_string()))?;
        let start = opened.backend().visible_image();
        let base = det.durable_epoch();
        if !self.cfg.tuning.trace_from_open {
            opened.backend().reset_trace();
        }
        let mut rng = SmallRng::seed_from_u64(worker_seed(self.cfg.seed, 0));
        let mut batches: Vec<Vec<OneShot>> = Vec::new();
        let mut results = Vec::new();
        let mut hashes = vec![state_hash(e).map_err(harness)?];
        let mut rec = EpochRecord {
            base,
            epochs,
            expected: Vec::new(),
            committed: 0,
            user_aborts: 0,
            stale: 0,
            gc: (0, 0),
        };
        for k in 1..=epochs {
            let requests: Vec<S::Request> =
                (0..self.cfg.txns).map(|_| s.next(&mut local, &mut rng)).collect();
            let batch = match s.batch(e, &plan, &requests) {
                Ok(b) => b,
                Err(x) => {
                    return Ok(Recording::Failed(recorded(format!(
                        "epoch {k}: reconnaissance failed: {x}"
                    ))));
                }
            };
            let out = match det.submit_epoch(&batch, self.cfg.threads) {
                Ok(out) => out,
                Err(x) => {
                    return Ok(Recording::Failed(recorded(format!("epoch {k} refused: {x}"))));
                }
            };
            if out.stats.parts != 1 || det.durable_epoch() != base + k {
                return Ok(Recording::Failed(recorded(format!(
                    "epoch {k} ran as {} epochs (durable epoch {}, expected {}): the campaign needs one epoch per batch",
                    out.stats.parts,
                    det.durable_epoch(),
                    base + k
                ))));
            }
            rec.gc.0 += out.stats.gc_minor;
            rec.gc.1 += out.stats.gc_major;
            for (i, r) in out.results.iter().enumerate() {
                match r {
                    Ok(_) => rec.committed += 1,
                    Err(EngineError::Abort(AbortReason::User)) => rec.user_aborts += 1,
                    Err(EngineError::StaleReconnaissance { .. }) => rec.stale += 1,
                    Err(x) => {
                        return Ok(Recording::Failed(recorded(format!(
                            "epoch {k}, transaction {i} failed: {x}"
                        ))));
                    }
                }
            }
            results.push(result_words(&out));
            hashes.push(state_hash(e).map_err(harness)?);
            batches.push(batch);
        }
        let pool = opened
            .release()
            .ok_or_else(|| harness("the recorded engine is still referenced".into()))?;
        let trace = pool.backend().trace();
        pool.abandon();
        match self.serial_replay(start, &batches, &results, &hashes)? {
            Ok(()) => {}
            Err(v) => return Ok(Recording::Failed(v)),
        }
        rec.expected = hashes;
        Ok(Recording::Done(Box::new((trace, rec))))
    }

    /// The recorded batches once more, one epoch thread, no fault, from the
    /// image the recording started from: the same results and state hashes
    /// after every epoch, or the recorded run is a violation.
    fn serial_replay(
        &self,
        start: Vec<u8>,
        batches: &[Vec<OneShot>],
        results: &[Vec<Result<Vec<u8>, String>>],
        hashes: &[u64],
    ) -> Result<Result<(), Violation>, CampaignError> {
        let harness = |message: String| {
            CampaignError::Harness(HarnessFailure { message, context: "the serial replay".into() })
        };
        let opened = self.recover_with(start, false).map_err(|e| harness(e.to_string()))?;
        let e = opened.engine();
        let det = e
            .deterministic()
            .ok_or(ConfigError::NotDeterministic { engine: self.engine_name() })?;
        let mut verdict = Ok(());
        if state_hash(e).map_err(harness)? != hashes[0] {
            verdict =
                Err(recorded("the serial replay's starting state differs from the recorded run's"));
        }
        for (k, batch) in batches.iter().enumerate() {
            if verdict.is_err() {
                break;
            }
            let out =
                det.submit_epoch(batch, 1).map_err(|x| harness(format!("epoch {}: {x}", k + 1)))?;
            let threads = self.cfg.threads;
            if result_words(&out) != results[k] {
                verdict = Err(recorded(format!(
                    "epoch {}: the results on {threads} epoch threads differ from the serial replay's on one",
                    k + 1
                )));
            } else if state_hash(e).map_err(harness)? != hashes[k + 1] {
                verdict = Err(recorded(format!(
                    "epoch {}: the rows on {threads} epoch threads differ from the serial replay's on one",
                    k + 1
                )));
            }
        }
        Self::finish(opened);
        Ok(verdict)
    }

    /// The oracle on one recovered engine (module docs).
    fn epoch_oracle(
        &self,
        e: &dyn Engine,
        point: &CrashPoint<'_>,
        rec: &EpochRecord,
        nested: bool,
        stats: &RefCell<EpochReport>,
    ) -> Result<Option<u64>, Violation> {
        e.check_invariants().map_err(Violation::structure)?;
        let det = e.deterministic().ok_or_else(|| Violation::Recovery {
            detail: "the recovered engine has no deterministic seam".into(),
        })?;
        let durable = det.durable_epoch();
        let acked = point.acked_txns().max();
        if let Some(epoch) = acked
            && epoch > durable
        {
            return Err(Violation::EpochLost { epoch, durable });
        }
        let k = durable.checked_sub(rec.base).filter(|k| *k <= rec.epochs).ok_or_else(|| {
            Violation::state(format!(
                "recovered durable epoch {durable} lies outside the recorded run ({}..={})",
                rec.base,
                rec.base + rec.epochs
            ))
        })?;
        let hash = state_hash(e).map_err(Violation::state)?;
        if hash != rec.expected[k as usize] {
            let detail = match rec.expected.iter().position(|h| *h == hash) {
                Some(j) => format!(
                    "durable epoch {durable}, but the rows are the serial replay's after epoch {}",
                    rec.base + j as u64
                ),
                None => format!(
                    "durable epoch {durable}, but the rows equal the serial replay's after no recorded epoch (an epoch partly applied, or a row lost)"
                ),
            };
            return Err(Violation::state(detail));
        }
        workload_check(self.subject, e)?;
        {
            let mut s = stats.borrow_mut();
            *s.recovered_to_epoch.entry(k).or_default() += 1;
            s.recovered_unacked += u64::from(durable > acked.unwrap_or(rec.base));
        }
        self.epoch_liveness(e, det, durable)?;
        e.check_invariants().map_err(|x| Violation::structure(format!("after liveness: {x}")))?;
        Ok(nested.then_some(hash))
    }

    /// One more epoch runs on the recovered engine and becomes durable.
    fn epoch_liveness(
        &self,
        e: &dyn Engine,
        det: &dyn DeterministicEngine,
        durable: u64,
    ) -> Result<(), Violation> {
        let s = self.subject;
        let plan = s.plan(e, det.procedures()).map_err(Violation::liveness)?;
        let mut local = s.local(e, 0, 1).map_err(Violation::liveness)?;
        let mut rng = SmallRng::seed_from_u64(worker_seed(self.cfg.seed, self.cfg.threads));
        let requests: Vec<S::Request> =
            (0..LIVENESS_TXNS).map(|_| s.next(&mut local, &mut rng)).collect();
        let batch = s.batch(e, &plan, &requests).map_err(Violation::liveness)?;
        let out = det.submit_epoch(&batch, self.cfg.threads).map_err(Violation::liveness)?;
        for r in &out.results {
            match r {
                Ok(_) | Err(EngineError::Abort(AbortReason::User)) => {}
                Err(x) => return Err(Violation::liveness(format!("an epoch after recovery: {x}"))),
            }
        }
        if det.durable_epoch() <= durable {
            return Err(Violation::liveness(format!(
                "the durable epoch stayed at {} after an epoch on the recovered engine (recovered: {durable})",
                det.durable_epoch()
            )));
        }
        workload_check(s, e).map_err(|v| Violation::liveness(format!("after an epoch: {v}")))
    }
}
