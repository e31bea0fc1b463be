//! What a campaign covered and found ([`CampaignReport`]), as JSON (serde)
//! and as the text `zen crash-test` prints.

use std::collections::BTreeMap;

use serde::Serialize;

use super::config::CampaignConfig;
use super::violation::{Check, Violation};

/// Distinct fence sites among the checked crash points, and in the trace.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FenceSites {
    pub hit: u64,
    pub total: u64,
}

/// Images checked.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ImageCounts {
    pub total: u64,
    /// Images of points whose images were all enumerated.
    pub exhaustive: u64,
    /// Images of points sampled within the budget.
    pub sampled: u64,
}

/// Crashes during recovery.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct NestedCounts {
    pub depth: u32,
    /// Recoveries of images taken inside a recovery.
    pub recoveries: u64,
    /// Crash points of recoveries that were crashed.
    pub points: u64,
}

/// Epoch mode (`--epochs`): what the recorded epochs did and where the
/// checked crash points and recoveries fell.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EpochReport {
    /// Epochs recorded.
    pub epochs: u64,
    /// One-shot transactions submitted per epoch.
    pub txns_per_epoch: u64,
    /// Transactions whose procedure failed deterministically because their
    /// reconnaissance was stale (none expected with synchronous epochs).
    pub stale: u64,
    /// Checked crash points by the epoch phase they lie in (the phase the
    /// engine noted last; `between-epochs` after an epoch's acknowledgement).
    /// The init and exec phases write nothing to NVM (except the major
    /// collector's deletions in init, minor GC off) and so hold no fence:
    /// a crash inside them leaves the durable image of the first
    /// row-persist point with nothing pending applied, the first image
    /// every mode builds there.
    pub points_by_phase: BTreeMap<String, u64>,
    /// Checked images by the recorded epoch (1 = the first) their recovery
    /// ended at (0: none of the recorded epochs).
    pub recovered_to_epoch: BTreeMap<u64, u64>,
    /// Images whose recovery ended past the last epoch acknowledged before
    /// the crash (the crashed epoch kept: its mark was durable, or its
    /// logged inputs were replayed).
    pub recovered_unacked: u64,
    /// Stale row versions the recorded epochs deleted by the minor collector
    /// (at their final writes) and by the major collector (in their init
    /// phases): the crash points of those phases cut through that GC.
    pub gc_minor: u64,
    pub gc_major: u64,
}

/// The first violation of a campaign.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The check that fired.
    pub check: Check,
    pub violation: Violation,
    /// The violation in words.
    pub message: String,
    /// The crash point, `None` for a failure of the recorded run itself.
    pub crash_point: Option<String>,
    /// The image, outermost first for nested crashes.
    pub images: Vec<String>,
    /// Where the failing image was written (`--save-failing`).
    pub saved_image: Option<String>,
}

impl Failure {
    pub fn of(violation: Violation) -> Failure {
        Failure {
            check: violation.check(),
            message: violation.to_string(),
            violation,
            crash_point: None,
            images: Vec::new(),
            saved_image: None,
        }
    }
}

/// Progress of a campaign, for a progress line.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub points_done: u64,
    pub points_total: u64,
    pub images: u64,
}

/// What a campaign covered and found.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignReport {
    pub config: CampaignConfig,
    pub population: String,
    pub pool_bytes: u64,
    /// Writing transactions the recorded run committed.
    pub committed: u64,
    /// Of those, acknowledged (`Marker::Ack`) by the end of the trace.
    pub acked: u64,
    pub read_only: u64,
    pub user_aborts: u64,
    pub retries: u64,
    pub fences: u64,
    pub crash_points_total: u64,
    pub crash_points_checked: u64,
    pub exhaustive_points: u64,
    pub fence_sites: FenceSites,
    pub images: ImageCounts,
    pub nested: NestedCounts,
    pub failures: u64,
    pub failure: Option<Failure>,
    /// Persistence-lint warnings of the recorded run.
    pub lint_warnings: u64,
    /// Persistence-lint errors of the recorded run (violations unless the
    /// campaign's tuning says otherwise).
    pub lint_errors: u64,
    /// Zen+ exclusive stages the recorded run went through (Zen+ only).
    pub adaptive_stage_switches: Option<u64>,
    /// Epoch mode only.
    pub epochs: Option<EpochReport>,
    pub record_s: f64,
    pub check_s: f64,
}

impl CampaignReport {
    pub fn new(config: CampaignConfig, population: String, pool_bytes: u64) -> CampaignReport {
        CampaignReport {
            nested: NestedCounts { depth: config.nested_depth, ..NestedCounts::default() },
            config,
            population,
            pool_bytes,
            committed: 0,
            acked: 0,
            read_only: 0,
            user_aborts: 0,
            retries: 0,
            fences: 0,
            crash_points_total: 0,
            crash_points_checked: 0,
            exhaustive_points: 0,
            fence_sites: FenceSites::default(),
            images: ImageCounts::default(),
            failures: 0,
            failure: None,
            lint_warnings: 0,
            lint_errors: 0,
            adaptive_stage_switches: None,
            epochs: None,
            record_s: 0.0,
            check_s: 0.0,
        }
    }

    pub(crate) fn fail(&mut self, failure: Failure) {
        self.failures = 1;
        self.failure = Some(failure);
    }

    pub fn passed(&self) -> bool {
        self.failures == 0
    }

    /// The check that reported the violation, if any.
    pub fn detected_by(&self) -> Option<Check> {
        self.failure.as_ref().map(|f| f.check)
    }

    /// One line: "bank on zen/silo (strict, lazy, 2 workers): 40 crash points, …".
    pub fn summary_line(&self) -> String {
        let c = &self.config;
        format!(
            "{} on {} ({}, {}, {} workers, {} recovery threads): {} crash points, {} images, {} nested recoveries, {}",
            c.workload.name(),
            c.design(),
            c.mode.name(),
            c.durability.name(),
            c.threads,
            c.recovery_threads,
            self.crash_points_checked,
            self.images.total,
            self.nested.recoveries,
            match &self.failure {
                None => "0 failures".to_string(),
                Some(f) => format!("VIOLATION {}", f.message),
            }
        )
    }

    /// The human-readable summary `zen crash-test` prints.
    pub fn render_text(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "crash test: {} on {} ({} images, {} commits), seed {}\n",
            c.workload.name(),
            c.design(),
            c.mode.name(),
            c.durability.name(),
            c.seed
        );
        out.push_str(&format!("  population        {}\n", self.population));
        out.push_str(&format!(
            "  recorded run      {} workers: {} committed ({} acked), {} read-only, {} user aborts, {} retries; {} fences\n",
            c.threads,
            self.committed,
            self.acked,
            self.read_only,
            self.user_aborts,
            self.retries,
            self.fences
        ));
        if let Some(e) = &self.epochs {
            let phases: Vec<String> =
                e.points_by_phase.iter().map(|(p, n)| format!("{p} {n}")).collect();
            let recovered: Vec<String> =
                e.recovered_to_epoch.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            out.push_str(&format!(
                "  epochs            {} of {} one-shot transactions ({} stale reconnaissance; GC deleted {} stale versions at final writes, {} in init phases)\n",
                e.epochs, e.txns_per_epoch, e.stale, e.gc_minor, e.gc_major
            ));
            out.push_str(&format!("  points by phase   {}\n", phases.join(", ")));
            out.push_str(&format!(
                "  recovered to      epoch {} ({} images past the last acknowledged epoch)\n",
                recovered.join(", epoch "),
                e.recovered_unacked
            ));
        }
        if let Some(knobs) = c.nvcaracal_knobs() {
            out.push_str(&format!("  nvcaracal         {knobs}\n"));
        }
        if let Some(f) = c.fault {
            out.push_str(&format!("  injected fault    {}\n", f.name()));
        }
        out.push_str(&format!(
            "  crash points      {} checked of {} ({} exhaustive)\n",
            self.crash_points_checked, self.crash_points_total, self.exhaustive_points
        ));
        out.push_str(&format!(
            "  fence sites hit   {} of {}\n",
            self.fence_sites.hit, self.fence_sites.total
        ));
        out.push_str(&format!(
            "  images            {} ({} exhaustive, {} sampled; at most {} per point)\n",
            self.images.total, self.images.exhaustive, self.images.sampled, c.images_per_point
        ));
        out.push_str(&format!(
            "  nested recoveries {} at {} crash points of recoveries, depth {}\n",
            self.nested.recoveries, self.nested.points, self.nested.depth
        ));
        out.push_str(&format!("  failures          {}\n", self.failures));
        out.push_str(&format!(
            "  time              record {:.2} s, check {:.2} s\n",
            self.record_s, self.check_s
        ));
        if let Some(f) = &self.failure {
            out.push_str(&format!("VIOLATION {}\n", f.message));
            if let Some(p) = &f.crash_point {
                out.push_str(&format!("  at {p}\n"));
            }
            for (depth, image) in f.images.iter().enumerate() {
                out.push_str(&format!("  crash {depth}: {image}\n"));
            }
            if let Some(s) = &f.saved_image {
                out.push_str(&format!(
                    "  image saved to {s} (a pool file: `zen recover --pool {s}` recovers it)\n"
                ));
            }
        }
        out
    }
}
