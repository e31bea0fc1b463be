//! Crash points: what a power failure at one moment of a trace may leave.
//!
//! What: a [`CrashPoint`] is the state just before one fence (or at the end of
//! the trace): the durable image, the pending atoms of every dirty line, the
//! eADR base and the atoms stored since the previous point, and the markers
//! recorded so far (to know which transactions were acknowledged).
//!
//! How: images are made by [`ImageCursor`]s (`images.rs`) from a shared
//! [`ImageCell`]: the cell's pristine image plus one scratch copy that a cursor
//! borrows, changes by applying the chosen atoms (undoing them before the next
//! image), and hands back clean. So an image costs O(atoms applied), not
//! O(pool), and consecutive points reuse the same scratch.
//!
//! Invariants: a cell's scratch, when present, equals its image; a cell is only
//! mutated (by the replay in `trace.rs`) while no point holds it.

use std::borrow::Cow;
use std::sync::Arc;

use parking_lot::Mutex;

use super::atom::Atom;
use super::images::{CrashImages, ImageCursor};
use super::plan;
use super::trace::MarkerRecord;
use crate::backend::Marker;

/// How crash images are derived from a crash point (VERIFICATION.md §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CrashMode {
    /// Px86 under ADR: durable + for every dirty line a prefix of its pending atoms.
    Strict,
    /// Durable + any subset of the pending atoms (also covers tearing inside a line).
    Paranoid,
    /// Persistent caches: any prefix of the global atom order.
    Eadr,
}

impl CrashMode {
    pub const ALL: [CrashMode; 3] = [CrashMode::Strict, CrashMode::Paranoid, CrashMode::Eadr];

    pub fn name(self) -> &'static str {
        match self {
            CrashMode::Strict => "strict",
            CrashMode::Paranoid => "paranoid",
            CrashMode::Eadr => "eadr",
        }
    }

    pub fn parse(s: &str) -> Option<CrashMode> {
        CrashMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// Where a crash point stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashAt {
    /// Just before the fence with this sequence number, by this thread.
    Fence { seq: u64, thread: u32 },
    /// After the last event.
    End,
}

/// An image shared by crash points, with one reusable scratch copy.
pub(crate) struct ImageCell {
    image: Vec<u8>,
    scratch: Mutex<Option<Vec<u8>>>,
}

pub(crate) type SharedImage = Arc<ImageCell>;

/// Largest image whose scratch copy is compared with the image on return.
const DEBUG_COMPARE_MAX_BYTES: usize = 1 << 20;

impl ImageCell {
    pub(crate) fn new(image: Vec<u8>) -> SharedImage {
        Arc::new(ImageCell { image, scratch: Mutex::new(None) })
    }

    pub(crate) fn image(&self) -> &[u8] {
        &self.image
    }

    /// Apply an atom to the image (and to the scratch, keeping them equal).
    pub(crate) fn apply(&mut self, atom: Atom) {
        atom.apply(&mut self.image);
        if let Some(scratch) = self.scratch.get_mut() {
            atom.apply(scratch);
        }
    }

    /// A copy of the image to change: the scratch when free, else a fresh copy.
    pub(crate) fn take_scratch(&self) -> Vec<u8> {
        self.scratch.lock().take().unwrap_or_else(|| self.image.clone())
    }

    /// Return a copy taken with `take_scratch`, equal to the image again.
    pub(crate) fn give_back(&self, scratch: Vec<u8>) {
        // Checked in debug builds for small pools (a full compare costs O(pool)).
        debug_assert!(
            scratch.len() > DEBUG_COMPARE_MAX_BYTES || scratch == self.image,
            "scratch returned dirty"
        );
        let mut slot = self.scratch.lock();
        if slot.is_none() {
            *slot = Some(scratch);
        }
    }
}

/// The pending atoms of the dirty lines, flattened in line order.
#[derive(Default)]
pub(crate) struct PendingSet {
    pub(crate) atoms: Vec<Atom>,
    /// End (exclusive) of each line's atoms in `atoms`.
    pub(crate) ends: Vec<usize>,
    /// Offset of each dirty line.
    pub(crate) lines: Vec<u64>,
}

/// The atoms one crash mode chooses from, grouped.
pub(crate) struct Groups<'a> {
    pub(crate) base: &'a ImageCell,
    pub(crate) atoms: &'a [Atom],
    pub(crate) ends: Cow<'a, [usize]>,
    /// Line offset of each group (`None` for the single eADR group).
    pub(crate) lines: Option<&'a [u64]>,
}

impl Groups<'_> {
    pub(crate) fn sizes(&self) -> Vec<u32> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let n = u32::try_from(end - start).expect("fewer than 2^32 atoms per line");
                start = end;
                n
            })
            .collect()
    }
}

/// One crash point of a trace. See the module docs.
pub struct CrashPoint<'t> {
    pub(crate) index: usize,
    pub(crate) at: CrashAt,
    pub(crate) markers: &'t [MarkerRecord],
    pub(crate) durable: SharedImage,
    pub(crate) pending: PendingSet,
    pub(crate) eadr_base: SharedImage,
    pub(crate) eadr_atoms: Arc<Vec<Atom>>,
}

impl<'t> CrashPoint<'t> {
    /// Position among the trace's crash points (0-based).
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn at(&self) -> CrashAt {
        self.at
    }

    /// Sequence number of the fence this point stands before (`None` at the end).
    pub fn fence_seq(&self) -> Option<u64> {
        match self.at {
            CrashAt::Fence { seq, .. } => Some(seq),
            CrashAt::End => None,
        }
    }

    /// The thread that was about to fence (`None` at the end).
    pub fn thread(&self) -> Option<u32> {
        match self.at {
            CrashAt::Fence { thread, .. } => Some(thread),
            CrashAt::End => None,
        }
    }

    pub fn is_end(&self) -> bool {
        self.at == CrashAt::End
    }

    /// Every marker recorded before this point, in order.
    pub fn markers_so_far(&self) -> &'t [MarkerRecord] {
        self.markers
    }

    /// Transactions acknowledged before this point, in order.
    pub fn acked_txns(&self) -> impl Iterator<Item = u64> + 't {
        self.markers.iter().filter_map(|m| match m.marker {
            Marker::Ack { txn } => Some(txn),
            _ => None,
        })
    }

    /// Atoms stored but not durable under ADR.
    pub fn pending_atoms(&self) -> usize {
        self.pending.atoms.len()
    }

    /// Lines holding pending atoms under ADR.
    pub fn dirty_lines(&self) -> usize {
        self.pending.lines.len()
    }

    /// Atoms stored since the previous crash point (the eADR choices).
    pub fn eadr_atoms(&self) -> usize {
        self.eadr_atoms.len()
    }

    /// A copy of the ADR durable image (nothing pending applied).
    pub fn durable_image(&self) -> Vec<u8> {
        self.durable.image().to_vec()
    }

    pub(crate) fn groups(&self, mode: CrashMode) -> Groups<'_> {
        match mode {
            CrashMode::Strict | CrashMode::Paranoid => Groups {
                base: &self.durable,
                atoms: &self.pending.atoms,
                ends: Cow::Borrowed(&self.pending.ends),
                lines: Some(&self.pending.lines),
            },
            CrashMode::Eadr => Groups {
                base: &self.eadr_base,
                atoms: &self.eadr_atoms,
                ends: if self.eadr_atoms.is_empty() {
                    Cow::Owned(Vec::new())
                } else {
                    Cow::Owned(vec![self.eadr_atoms.len()])
                },
                lines: None,
            },
        }
    }

    /// Number of distinct images under `mode` (saturating at `u64::MAX`).
    pub fn image_count(&self, mode: CrashMode) -> u64 {
        plan::image_count(mode, &self.groups(mode).sizes())
    }

    /// Whether `budget` covers every image under `mode`.
    pub fn is_exhaustive(&self, mode: CrashMode, budget: u64) -> bool {
        self.image_count(mode) <= budget
    }

    /// Owned images (each a full copy of the pool), for callers that keep them.
    pub fn images(&self, mode: CrashMode, budget: u64, seed: u64) -> CrashImages<'_> {
        CrashImages::new(self.cursor(mode, budget, seed))
    }

    /// Images one at a time in a reusable buffer (O(atoms) per image).
    pub fn cursor(&self, mode: CrashMode, budget: u64, seed: u64) -> ImageCursor<'_> {
        ImageCursor::new(self, mode, budget, seed)
    }

    /// "crash point 3 (before fence seq 57 by thread 1)".
    pub fn describe(&self) -> String {
        match self.at {
            CrashAt::Fence { seq, thread } => {
                format!("crash point {} (before fence seq {seq} by thread {thread})", self.index)
            }
            CrashAt::End => format!("crash point {} (end of trace)", self.index),
        }
    }
}
