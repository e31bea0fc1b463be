//! Which crash images to produce at one crash point, within a budget.
//!
//! What: an [`ImagePlan`] enumerates *selections* of pending atoms. The atoms
//! come in groups (a dirty cache line each; under eADR one group holding every
//! atom stored since the previous point, in global order):
//!
//! - strict / eADR: a prefix length per group ([`Selection::Prefix`]);
//! - paranoid: any subset of all atoms ([`Selection::Subset`]).
//!
//! How: when the number of distinct images (Π(nᵢ+1) strict, 2ᴺ paranoid, n+1
//! eADR) is within the budget, every one is produced (mixed-radix / binary
//! counting). Otherwise: the two extremes (nothing / everything applied), then
//! single-group deviations (strict: one line at a prefix with the others at
//! none, or one line cut short with the others at all; paranoid: one atom
//! alone, or all but one atom), interleaved round-robin over the groups so
//! every line gets its most telling deviations first, and capped at ¾ of the
//! remaining budget; the rest are seeded random selections. Values inside a
//! group are visited ends-first, then spread by a golden-ratio stride.
//!
//! Invariants: at most `budget` selections (exactly `count` when exhaustive);
//! the same (sizes, mode, budget, seed) always give the same sequence.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::point::CrashMode;

/// The atoms to apply for one image.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Selection {
    /// Per group, how many of its first atoms are applied.
    Prefix(Vec<u32>),
    /// Per atom (flattened over the groups), whether it is applied.
    Subset(Vec<bool>),
}

/// Why an image was chosen (for its description).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ImageKind {
    Exhaustive(u64),
    Nothing,
    Everything,
    /// Strict: group at prefix `k`, the others at none.
    Alone {
        group: usize,
        k: u32,
    },
    /// Strict: group at prefix `k`, the others at all.
    Reduced {
        group: usize,
        k: u32,
    },
    /// Paranoid: only this atom.
    OnlyAtom {
        atom: usize,
    },
    /// Paranoid: every atom but this one.
    AllBut {
        atom: usize,
    },
    Random(u64),
}

enum Phase {
    Exhaustive,
    Extremes,
    Deviations { round: u32, group: usize, variant: u8 },
    Random,
}

/// The enumeration of one crash point's images. See the module docs.
pub(crate) struct ImagePlan {
    mode: CrashMode,
    sizes: Vec<u32>,
    starts: Vec<usize>,
    total: usize,
    budget: u64,
    count: u64,
    exhaustive: bool,
    emitted: u64,
    deviations_left: u64,
    max_round: u32,
    phase: Phase,
    rng: SmallRng,
}

/// Number of distinct images of groups of `sizes` under `mode` (saturating).
pub(crate) fn image_count(mode: CrashMode, sizes: &[u32]) -> u64 {
    match mode {
        CrashMode::Strict | CrashMode::Eadr => {
            sizes.iter().fold(1u64, |acc, &n| acc.saturating_mul(u64::from(n) + 1))
        }
        CrashMode::Paranoid => {
            let total: u64 = sizes.iter().map(|&n| u64::from(n)).sum();
            if total >= 64 { u64::MAX } else { 1u64 << total }
        }
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The `t`-th value of `[lo, hi]`: one end, the other end, then the interior
/// spread by a golden-ratio stride (a permutation of the range).
pub(crate) fn ladder(t: u32, lo: u32, hi: u32, high_first: bool) -> u32 {
    debug_assert!(lo <= hi && t <= hi - lo);
    match t {
        0 => {
            if high_first {
                hi
            } else {
                lo
            }
        }
        1 => {
            if high_first {
                lo
            } else {
                hi
            }
        }
        _ => {
            let m = u64::from(hi - lo - 1);
            let mut stride = ((m as f64 * 0.618) as u64).max(1);
            while gcd(stride, m) != 1 {
                stride += 1;
            }
            lo + 1 + ((u64::from(t - 2) * stride) % m) as u32
        }
    }
}

impl ImagePlan {
    /// A plan for groups of `sizes` atoms (every size ≥ 1). `seed` should
    /// already be mixed with the crash point.
    pub(crate) fn new(mode: CrashMode, sizes: Vec<u32>, budget: u64, seed: u64) -> ImagePlan {
        let mut starts = Vec::with_capacity(sizes.len());
        let mut total = 0usize;
        for &n in &sizes {
            debug_assert!(n > 0);
            starts.push(total);
            total += n as usize;
        }
        let count = image_count(mode, &sizes);
        let exhaustive = count <= budget;
        let mut plan = ImagePlan {
            mode,
            starts,
            total,
            budget,
            count,
            exhaustive,
            emitted: 0,
            deviations_left: 0,
            max_round: 0,
            phase: if exhaustive { Phase::Exhaustive } else { Phase::Extremes },
            rng: SmallRng::seed_from_u64(seed),
            sizes,
        };
        let (rounds, deviations) = plan.deviation_space();
        plan.max_round = rounds;
        plan.deviations_left = if budget >= deviations.saturating_add(2) {
            deviations
        } else {
            budget.saturating_sub(2) * 3 / 4
        };
        plan
    }

    /// Whether every distinct image is produced.
    pub(crate) fn is_exhaustive(&self) -> bool {
        self.exhaustive
    }

    /// Number of distinct images (saturating).
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    /// Images this plan produces in all.
    pub(crate) fn planned(&self) -> u64 {
        if self.exhaustive { self.count } else { self.budget }
    }

    pub(crate) fn emitted(&self) -> u64 {
        self.emitted
    }

    pub(crate) fn group_start(&self, group: usize) -> usize {
        self.starts[group]
    }

    pub(crate) fn group_size(&self, group: usize) -> u32 {
        self.sizes[group]
    }

    /// Which group a flattened atom index belongs to.
    pub(crate) fn group_of(&self, atom: usize) -> usize {
        self.starts.partition_point(|&s| s <= atom) - 1
    }

    fn strict_like(&self) -> bool {
        self.mode != CrashMode::Paranoid
    }

    /// (rounds, deviations) of the deviation phase.
    fn deviation_space(&self) -> (u32, u64) {
        let rounds = (0..self.sizes.len()).map(|g| self.ladder_len(g)).max().unwrap_or(0);
        let per_group: u64 =
            (0..self.sizes.len()).map(|g| u64::from(self.ladder_len(g))).sum::<u64>();
        (rounds, per_group * u64::from(self.variants()))
    }

    fn variants(&self) -> u8 {
        if self.strict_like() && self.sizes.len() == 1 { 1 } else { 2 }
    }

    /// Values one variant of one group's deviations takes.
    fn ladder_len(&self, group: usize) -> u32 {
        let n = self.sizes[group];
        if self.strict_like() && self.sizes.len() == 1 { n.saturating_sub(1) } else { n }
    }

    /// Fill `sel` with the next selection; `None` when the plan is done.
    pub(crate) fn next(&mut self, sel: &mut Selection) -> Option<ImageKind> {
        if self.emitted >= self.planned() {
            return None;
        }
        let kind = loop {
            match self.phase {
                Phase::Exhaustive => break self.exhaustive_image(sel),
                Phase::Extremes => {
                    let everything = self.emitted == 1;
                    if everything {
                        self.phase = Phase::Deviations { round: 0, group: 0, variant: 0 };
                    }
                    break self.extreme(sel, everything);
                }
                Phase::Deviations { .. } => match self.deviation(sel) {
                    Some(kind) => break kind,
                    None => self.phase = Phase::Random,
                },
                Phase::Random => break self.random(sel),
            }
        };
        self.emitted += 1;
        Some(kind)
    }

    fn reset_prefix(&self, sel: &mut Selection, all: bool) {
        let fill = |g: usize| if all { self.sizes[g] } else { 0 };
        match sel {
            Selection::Prefix(v) if v.len() == self.sizes.len() => {
                v.iter_mut().enumerate().for_each(|(g, k)| *k = fill(g));
            }
            _ => *sel = Selection::Prefix((0..self.sizes.len()).map(fill).collect()),
        }
    }

    fn reset_subset(&self, sel: &mut Selection, all: bool) {
        match sel {
            Selection::Subset(v) if v.len() == self.total => v.fill(all),
            _ => *sel = Selection::Subset(vec![all; self.total]),
        }
    }

    fn exhaustive_image(&mut self, sel: &mut Selection) -> ImageKind {
        let mut ordinal = self.emitted;
        if self.strict_like() {
            self.reset_prefix(sel, false);
            let Selection::Prefix(ks) = sel else { unreachable!("reset to prefix") };
            for (k, &n) in ks.iter_mut().zip(&self.sizes) {
                let radix = u64::from(n) + 1;
                *k = (ordinal % radix) as u32;
                ordinal /= radix;
            }
        } else {
            self.reset_subset(sel, false);
            let Selection::Subset(bits) = sel else { unreachable!("reset to subset") };
            for (i, bit) in bits.iter_mut().enumerate() {
                *bit = (ordinal >> i) & 1 == 1;
            }
        }
        ImageKind::Exhaustive(self.emitted)
    }

    fn extreme(&mut self, sel: &mut Selection, everything: bool) -> ImageKind {
        if self.strict_like() {
            self.reset_prefix(sel, everything);
        } else {
            self.reset_subset(sel, everything);
        }
        if everything { ImageKind::Everything } else { ImageKind::Nothing }
    }

    /// The next deviation, or `None` when they are used up.
    fn deviation(&mut self, sel: &mut Selection) -> Option<ImageKind> {
        while self.deviations_left > 0 {
            let Phase::Deviations { round, group, variant } = self.phase else { return None };
            if round >= self.max_round {
                return None;
            }
            self.phase = if variant + 1 < self.variants() {
                Phase::Deviations { round, group, variant: variant + 1 }
            } else if group + 1 < self.sizes.len() {
                Phase::Deviations { round, group: group + 1, variant: 0 }
            } else {
                Phase::Deviations { round: round + 1, group: 0, variant: 0 }
            };
            if round < self.ladder_len(group) {
                self.deviations_left -= 1;
                return Some(self.make_deviation(sel, round, group, variant == 1));
            }
        }
        None
    }

    fn make_deviation(&self, sel: &mut Selection, t: u32, group: usize, second: bool) -> ImageKind {
        let n = self.sizes[group];
        if self.strict_like() {
            self.reset_prefix(sel, second);
            let Selection::Prefix(ks) = sel else { unreachable!("reset to prefix") };
            let k = match (self.sizes.len() == 1, second) {
                (true, _) => ladder(t, 1, n - 1, false),
                (false, false) => ladder(t, 1, n, true),
                (false, true) => ladder(t, 0, n - 1, false),
            };
            ks[group] = k;
            if second { ImageKind::Reduced { group, k } } else { ImageKind::Alone { group, k } }
        } else {
            self.reset_subset(sel, second);
            let Selection::Subset(bits) = sel else { unreachable!("reset to subset") };
            let atom = self.starts[group] + ladder(t, 0, n - 1, false) as usize;
            bits[atom] = !second;
            if second { ImageKind::AllBut { atom } } else { ImageKind::OnlyAtom { atom } }
        }
    }

    fn random(&mut self, sel: &mut Selection) -> ImageKind {
        if self.strict_like() {
            self.reset_prefix(sel, false);
            let Selection::Prefix(ks) = sel else { unreachable!("reset to prefix") };
            for (k, &n) in ks.iter_mut().zip(&self.sizes) {
                *k = match self.rng.random_range(0..4u8) {
                    0 => 0,
                    1 => n,
                    _ => self.rng.random_range(0..=n),
                };
            }
        } else {
            self.reset_subset(sel, false);
            let Selection::Subset(bits) = sel else { unreachable!("reset to subset") };
            let density = [0.125, 0.5, 0.875][self.rng.random_range(0..3usize)];
            for bit in bits.iter_mut() {
                *bit = self.rng.random_bool(density);
            }
        }
        ImageKind::Random(self.emitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn all(mode: CrashMode, sizes: Vec<u32>, budget: u64) -> Vec<(ImageKind, Selection)> {
        let mut plan = ImagePlan::new(mode, sizes, budget, 7);
        let mut sel = Selection::Prefix(Vec::new());
        let mut out = Vec::new();
        while let Some(kind) = plan.next(&mut sel) {
            out.push((kind, sel.clone()));
        }
        out
    }

    #[test]
    fn ladder_is_a_permutation_of_its_range() {
        for (lo, hi) in [(0, 0), (0, 1), (1, 5), (0, 9), (3, 40)] {
            for high_first in [false, true] {
                let seen: HashSet<u32> =
                    (0..=hi - lo).map(|t| ladder(t, lo, hi, high_first)).collect();
                assert_eq!(seen, (lo..=hi).collect(), "{lo}..={hi}");
            }
        }
    }

    #[test]
    fn exhaustive_plans_produce_each_distinct_selection_once() {
        let strict = all(CrashMode::Strict, vec![2, 2], 256);
        assert_eq!(strict.len(), 9);
        assert_eq!(strict.iter().map(|(_, s)| s.clone()).collect::<HashSet<_>>().len(), 9);
        let paranoid = all(CrashMode::Paranoid, vec![2, 2], 256);
        assert_eq!(paranoid.len(), 16);
        assert_eq!(paranoid.iter().map(|(_, s)| s.clone()).collect::<HashSet<_>>().len(), 16);
    }

    #[test]
    fn budgeted_plans_start_with_extremes_and_respect_the_budget() {
        let images = all(CrashMode::Strict, vec![3; 20], 50);
        assert_eq!(images.len(), 50);
        assert_eq!(images[0].1, Selection::Prefix(vec![0; 20]));
        assert_eq!(images[1].1, Selection::Prefix(vec![3; 20]));
        assert!(matches!(images[2].0, ImageKind::Alone { group: 0, k: 3 }));
        assert!(matches!(images[3].0, ImageKind::Reduced { group: 0, k: 0 }));
        assert!(matches!(images.last().unwrap().0, ImageKind::Random(_)));
        let eadr = all(CrashMode::Eadr, vec![100], 10);
        assert_eq!(eadr.len(), 10);
        assert!(matches!(eadr[2].0, ImageKind::Alone { group: 0, k: 1 }));
    }

    #[test]
    fn plans_with_room_for_every_deviation_list_them_all() {
        let images = all(CrashMode::Paranoid, vec![4, 4], 100);
        let only: HashSet<usize> = images
            .iter()
            .filter_map(|(k, _)| match k {
                ImageKind::OnlyAtom { atom } => Some(*atom),
                _ => None,
            })
            .collect();
        assert_eq!(only, (0..8).collect());
        assert_eq!(images.len(), 100);
    }
}
