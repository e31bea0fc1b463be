//! Crash images: producing the bytes a machine would see after power-up.
//!
//! What: an [`ImageCursor`] walks one crash point's [`ImagePlan`] and yields
//! each image as an [`ImageView`] borrowing a reusable buffer; [`CrashImages`]
//! wraps it into an `Iterator` of owned [`CrashImage`]s for callers that keep
//! images or hand them to [`super::SimBackend::from_image`].
//!
//! How: the buffer is the point's scratch copy of its base image. For each
//! image the cursor undoes the atoms of the previous one (restoring each
//! touched word from an undo log, newest first) and applies the newly chosen
//! atoms in visibility order, logging the word each overwrites. An image thus
//! costs O(atoms applied), and a 16 MiB pool is checked thousands of times per
//! second. Dropping the cursor undoes the last image and returns the buffer.
//!
//! Invariants: between images (and after drop) the buffer equals the base;
//! every description names the mode, the point, the choice and the seed, so a
//! failure can be replayed with `ZEN_SEED`.

use super::atom::{self, Atom};
use super::plan::{ImageKind, ImagePlan, Selection};
use super::point::{CrashMode, CrashPoint, ImageCell};

/// One crash image in the cursor's buffer.
pub struct ImageView<'c> {
    /// The whole pool as the machine would see it after power-up.
    pub bytes: &'c [u8],
    /// Mode, crash point, which atoms were applied, and the seed.
    pub description: String,
    /// Whether the point's images were enumerated exhaustively.
    pub exhaustive: bool,
    /// Position of this image among its point's images (0-based).
    pub index: u64,
}

/// One owned crash image.
#[derive(Debug, Clone)]
pub struct CrashImage {
    pub bytes: Vec<u8>,
    pub description: String,
    pub exhaustive: bool,
}

/// Mix a seed with a crash point and mode so every point draws its own images.
pub(crate) fn point_seed(seed: u64, point: usize, mode: CrashMode) -> u64 {
    let mut z = seed ^ (point as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((mode as u64) << 61);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Images of one crash point in a reusable buffer. See the module docs.
pub struct ImageCursor<'p> {
    base: &'p ImageCell,
    buf: Option<Vec<u8>>,
    atoms: &'p [Atom],
    lines: Option<&'p [u64]>,
    plan: ImagePlan,
    selection: Selection,
    undo: Vec<(u64, u64)>,
    mode: CrashMode,
    point: String,
    seed: u64,
}

impl<'p> ImageCursor<'p> {
    pub(crate) fn new(point: &'p CrashPoint<'_>, mode: CrashMode, budget: u64, seed: u64) -> Self {
        let groups = point.groups(mode);
        let plan =
            ImagePlan::new(mode, groups.sizes(), budget, point_seed(seed, point.index, mode));
        ImageCursor {
            base: groups.base,
            buf: Some(groups.base.take_scratch()),
            atoms: groups.atoms,
            lines: groups.lines,
            plan,
            selection: Selection::Prefix(Vec::new()),
            undo: Vec::new(),
            mode,
            point: point.describe(),
            seed,
        }
    }

    /// Whether every distinct image is produced.
    pub fn is_exhaustive(&self) -> bool {
        self.plan.is_exhaustive()
    }

    /// Number of distinct images of the point (saturating).
    pub fn image_count(&self) -> u64 {
        self.plan.count()
    }

    /// Images this cursor produces in all.
    pub fn planned(&self) -> u64 {
        self.plan.planned()
    }

    /// The next image, or `None` when the plan is done.
    pub fn next_image(&mut self) -> Option<ImageView<'_>> {
        self.undo_all();
        let kind = self.plan.next(&mut self.selection)?;
        self.apply_selection();
        let description = self.describe(kind);
        Some(ImageView {
            bytes: self.buf.as_deref().expect("buffer held until drop"),
            description,
            exhaustive: self.plan.is_exhaustive(),
            index: self.plan.emitted() - 1,
        })
    }

    fn apply_selection(&mut self) {
        let buf = self.buf.as_mut().expect("buffer held until drop");
        let mut apply = |atom: Atom| {
            self.undo.push((atom.word_offset(), atom::read_word(buf, atom.word_offset())));
            atom.apply(buf);
        };
        match &self.selection {
            Selection::Prefix(ks) => {
                for (group, &k) in ks.iter().enumerate() {
                    let start = self.plan.group_start(group);
                    self.atoms[start..start + k as usize].iter().for_each(|&a| apply(a));
                }
            }
            Selection::Subset(bits) => {
                for (i, _) in bits.iter().enumerate().filter(|(_, b)| **b) {
                    apply(self.atoms[i]);
                }
            }
        }
    }

    fn undo_all(&mut self) {
        if let Some(buf) = self.buf.as_mut() {
            for (offset, old) in self.undo.drain(..).rev() {
                atom::write_word(buf, offset, old);
            }
        }
    }

    fn group_name(&self, group: usize) -> String {
        match self.lines {
            Some(lines) => format!("line {:#x}", lines[group]),
            None => "the global atom order".to_string(),
        }
    }

    fn selection_summary(&self) -> String {
        const SHOWN: usize = 8;
        match &self.selection {
            Selection::Prefix(ks) => {
                let mut parts: Vec<String> = ks
                    .iter()
                    .enumerate()
                    .take(SHOWN)
                    .map(|(g, k)| format!("{} {k}/{}", self.group_name(g), self.plan.group_size(g)))
                    .collect();
                if ks.len() > SHOWN {
                    parts.push(format!("+{} lines", ks.len() - SHOWN));
                }
                format!("prefixes [{}]", parts.join(", "))
            }
            Selection::Subset(bits) => {
                let chosen: Vec<usize> =
                    bits.iter().enumerate().filter(|(_, b)| **b).map(|(i, _)| i).collect();
                let shown: Vec<String> = chosen.iter().take(SHOWN).map(|i| i.to_string()).collect();
                let more = if chosen.len() > SHOWN { ", …" } else { "" };
                format!("{} of {} atoms [{}{more}]", chosen.len(), bits.len(), shown.join(", "))
            }
        }
    }

    fn describe_kind(&self, kind: ImageKind) -> String {
        let size = |g: usize| self.plan.group_size(g);
        match kind {
            ImageKind::Exhaustive(_) => format!("exhaustive, {}", self.selection_summary()),
            ImageKind::Nothing => "nothing pending applied".to_string(),
            ImageKind::Everything => "everything pending applied".to_string(),
            ImageKind::Alone { group, k } => {
                format!("{} at {k}/{} atoms, the rest at none", self.group_name(group), size(group))
            }
            ImageKind::Reduced { group, k } => {
                format!("{} at {k}/{} atoms, the rest at all", self.group_name(group), size(group))
            }
            ImageKind::OnlyAtom { atom } => format!(
                "only atom {atom} ({:?}, {})",
                self.atoms[atom],
                self.group_name(self.plan.group_of(atom))
            ),
            ImageKind::AllBut { atom } => format!(
                "all but atom {atom} ({:?}, {})",
                self.atoms[atom],
                self.group_name(self.plan.group_of(atom))
            ),
            ImageKind::Random(_) => format!("random, {}", self.selection_summary()),
        }
    }

    fn describe(&self, kind: ImageKind) -> String {
        format!(
            "{} image {}/{} at {}: {}; seed {:#x} (replay with ZEN_SEED={})",
            self.mode.name(),
            self.plan.emitted(),
            self.plan.planned(),
            self.point,
            self.describe_kind(kind),
            self.seed,
            self.seed
        )
    }
}

impl Drop for ImageCursor<'_> {
    fn drop(&mut self) {
        self.undo_all();
        if let Some(buf) = self.buf.take() {
            self.base.give_back(buf);
        }
    }
}

/// Owned images of one crash point (each a full copy of the pool).
pub struct CrashImages<'p> {
    cursor: ImageCursor<'p>,
}

impl<'p> CrashImages<'p> {
    pub(crate) fn new(cursor: ImageCursor<'p>) -> Self {
        CrashImages { cursor }
    }

    /// Whether every distinct image is produced.
    pub fn is_exhaustive(&self) -> bool {
        self.cursor.is_exhaustive()
    }
}

impl Iterator for CrashImages<'_> {
    type Item = CrashImage;

    fn next(&mut self) -> Option<CrashImage> {
        let view = self.cursor.next_image()?;
        Some(CrashImage {
            bytes: view.bytes.to_vec(),
            description: view.description,
            exhaustive: view.exhaustive,
        })
    }
}
