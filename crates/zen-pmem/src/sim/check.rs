//! Driving checks over crash images, nested crashes included.
//!
//! What: [`Trace::check`] runs a caller's checker on every image of every
//! crash point under one [`CheckPlan`] (mode, budget per point, seed) and
//! stops at the first failure with a [`CheckFailure`] that names the image and
//! the seed to replay. [`for_each_nested`] recovers an image, crashes the
//! recovery at each of its own crash points, and recovers those images again,
//! down to a chosen depth (VERIFICATION.md §1, "Nested crashes").
//!
//! How: both stream (one crash point and one image buffer at a time); nested
//! images are copied only when handed to a new [`SimBackend`]. Every level
//! uses the plan's seed (mixed per crash point, as everywhere), so one
//! `ZEN_SEED` replays the whole tree.
//!
//! Invariants: a checker sees images in a deterministic order for a given seed;
//! `CheckStats` counts exactly the images the checker accepted.

use std::fmt;

use super::backend::SimBackend;
use super::images::ImageView;
use super::point::{CrashMode, CrashPoint};
use super::trace::Trace;
use crate::backend::PersistenceDomain;

/// Which images to check at every crash point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckPlan {
    pub mode: CrashMode,
    /// Images per crash point at most (exhaustive when the point has no more).
    pub budget: u64,
    pub seed: u64,
}

impl CheckPlan {
    pub fn new(mode: CrashMode, budget: u64, seed: u64) -> CheckPlan {
        CheckPlan { mode, budget, seed }
    }
}

/// What a check covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckStats {
    pub points: u64,
    /// Points whose images were all enumerated.
    pub exhaustive_points: u64,
    pub images: u64,
}

impl CheckStats {
    pub fn add(&mut self, other: CheckStats) {
        self.points += other.points;
        self.exhaustive_points += other.exhaustive_points;
        self.images += other.images;
    }
}

/// A checker rejected an image (or a recovery failed).
#[derive(Debug, Clone)]
pub struct CheckFailure {
    /// What the checker said.
    pub message: String,
    /// The image, outermost first for nested crashes.
    pub images: Vec<String>,
    /// The seed of the run (replay with `ZEN_SEED`).
    pub seed: u64,
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "crash check failed: {}", self.message)?;
        for (depth, image) in self.images.iter().enumerate() {
            writeln!(f, "  crash {depth}: {image}")?;
        }
        write!(f, "  replay with ZEN_SEED={}", self.seed)
    }
}

impl std::error::Error for CheckFailure {}

impl Trace {
    /// Run `check` on every image of every crash point under `plan`.
    pub fn check<F>(&self, plan: CheckPlan, mut check: F) -> Result<CheckStats, CheckFailure>
    where
        F: FnMut(&CrashPoint<'_>, &ImageView<'_>) -> Result<(), String>,
    {
        let mut stats = CheckStats::default();
        for point in self.crash_points() {
            let mut cursor = point.cursor(plan.mode, plan.budget, plan.seed);
            stats.points += 1;
            stats.exhaustive_points += u64::from(cursor.is_exhaustive());
            while let Some(image) = cursor.next_image() {
                check(&point, &image).map_err(|message| CheckFailure {
                    message,
                    images: vec![image.description.clone()],
                    seed: plan.seed,
                })?;
                stats.images += 1;
            }
        }
        Ok(stats)
    }
}

/// What a nested-crash run covered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NestedStats {
    /// Recoveries run at each depth (index 0: the given image).
    pub recoveries: Vec<u64>,
    /// Crash points of recoveries that were crashed again.
    pub points: u64,
}

impl NestedStats {
    /// Recoveries at every depth.
    pub fn total_recoveries(&self) -> u64 {
        self.recoveries.iter().sum()
    }
}

/// Recover `image`, then crash that recovery at every crash point and recover
/// each image again, `max_depth` times deep.
///
/// `recover` gets a backend on the image and the depth; it runs the recovery
/// (and whatever checks the caller wants) and returns the recovery's trace,
/// e.g. `pool.backend().trace()` before `pool.abandon()`.
pub fn for_each_nested<F>(
    image: Vec<u8>,
    domain: PersistenceDomain,
    plan: CheckPlan,
    max_depth: u32,
    mut recover: F,
) -> Result<NestedStats, CheckFailure>
where
    F: FnMut(SimBackend, u32) -> Result<Trace, String>,
{
    let mut stats = NestedStats { recoveries: vec![0; max_depth as usize + 1], points: 0 };
    let mut chain = Vec::new();
    let nest = Nest { domain, plan, max_depth };
    nest.level(image, 0, &mut recover, &mut stats, &mut chain)?;
    Ok(stats)
}

struct Nest {
    domain: PersistenceDomain,
    plan: CheckPlan,
    max_depth: u32,
}

impl Nest {
    fn level<F>(
        &self,
        image: Vec<u8>,
        depth: u32,
        recover: &mut F,
        stats: &mut NestedStats,
        chain: &mut Vec<String>,
    ) -> Result<(), CheckFailure>
    where
        F: FnMut(SimBackend, u32) -> Result<Trace, String>,
    {
        stats.recoveries[depth as usize] += 1;
        let backend = SimBackend::from_image(image, self.domain);
        let trace = recover(backend, depth).map_err(|message| CheckFailure {
            message: format!("recovery at depth {depth}: {message}"),
            images: chain.clone(),
            seed: self.plan.seed,
        })?;
        if depth == self.max_depth {
            return Ok(());
        }
        for point in trace.crash_points() {
            stats.points += 1;
            let mut cursor = point.cursor(self.plan.mode, self.plan.budget, self.plan.seed);
            while let Some(view) = cursor.next_image() {
                chain.push(view.description);
                self.level(view.bytes.to_vec(), depth + 1, recover, stats, chain)?;
                chain.pop();
            }
        }
        Ok(())
    }
}
