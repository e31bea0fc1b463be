//! Traces: the recorded events of a simulated run, and their crash points.
//!
//! What: a [`Trace`] is a snapshot of a [`super::SimBackend`]'s run since its
//! last `reset_trace`: the initial durable image and every event in global
//! order. [`Trace::crash_points`] replays it once, front to back, and yields a
//! [`CrashPoint`] just before every fence and one at the end.
//!
//! How: the replay keeps the same state as the live machine (pending atoms per
//! dirty line, flush marks per thread) plus two images: the ADR durable image
//! and the eADR base (everything stored before the previous crash point).
//! Both are shared with the yielded point and copied on write, and a fence is
//! applied only when the next point is asked for, so a caller that drops each
//! point before taking the next (the usual `for` loop) never copies an image:
//! memory stays at two images plus the trace, however many points there are.
//!
//! Why crash only before fences: within one fence epoch the set of reachable
//! images only grows, so the images just before each fence (and at the end)
//! cover every crash state (VERIFICATION.md §1).
//!
//! Invariants: a line is in `lines` iff it has pending atoms; the durable image
//! equals the initial image with every atom made durable by a replayed fence
//! applied in order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use super::atom::Atom;
use super::lint::LintReport;
use super::point::{CrashAt, CrashPoint, ImageCell, PendingSet, SharedImage};
use crate::backend::{Marker, PersistenceDomain};

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Global sequence number (position in the trace).
    pub seq: u64,
    /// Thread slot that issued it.
    pub thread: u32,
    pub kind: EventKind,
}

/// What an event did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A store of `len` bytes at `offset`. `atoms` are the atoms that changed
    /// visible bytes, with global atom indices `first_atom..first_atom + atoms.len()`.
    Store { offset: u64, len: u64, atomic: bool, first_atom: u64, atoms: Vec<Atom> },
    /// A flush of one line: its atoms with index below `upto_atom` (every atom
    /// stored to it so far) become durable at the thread's next fence.
    Flush { line_offset: u64, upto_atom: u64 },
    /// A store fence.
    Fence,
    /// An engine marker.
    Marker(Marker),
}

/// A marker event, kept in order so crash points can slice them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkerRecord {
    pub seq: u64,
    pub thread: u32,
    pub marker: Marker,
}

/// A snapshot of a simulated run. See the module docs.
#[derive(Clone)]
pub struct Trace {
    initial: Arc<Vec<u8>>,
    events: Vec<Event>,
    markers: Vec<MarkerRecord>,
    lints: LintReport,
    domain: PersistenceDomain,
    pool_len: u64,
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace")
            .field("pool_len", &self.pool_len)
            .field("domain", &self.domain)
            .field("events", &self.events.len())
            .field("fences", &self.fence_count())
            .field("markers", &self.markers.len())
            .field("lints", &self.lints)
            .finish()
    }
}

impl Trace {
    pub(crate) fn new(
        initial: Arc<Vec<u8>>,
        events: Vec<Event>,
        markers: Vec<MarkerRecord>,
        lints: LintReport,
        domain: PersistenceDomain,
        pool_len: u64,
    ) -> Trace {
        Trace { initial, events, markers, lints, domain, pool_len }
    }

    /// The durable (and visible) image when recording started.
    pub fn initial_image(&self) -> &[u8] {
        &self.initial
    }

    /// Every event, in global order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Every marker, in global order.
    pub fn markers(&self) -> &[MarkerRecord] {
        &self.markers
    }

    /// Lints counted while this trace was recorded.
    pub fn lints(&self) -> &LintReport {
        &self.lints
    }

    /// The persistence domain the run assumed.
    pub fn domain(&self) -> PersistenceDomain {
        self.domain
    }

    pub fn pool_len(&self) -> u64 {
        self.pool_len
    }

    /// Number of fences (crash points are one more).
    pub fn fence_count(&self) -> usize {
        self.events.iter().filter(|e| e.kind == EventKind::Fence).count()
    }

    /// Number of atoms that changed visible bytes.
    pub fn atom_count(&self) -> u64 {
        self.events
            .iter()
            .map(|e| match &e.kind {
                EventKind::Store { atoms, .. } => atoms.len() as u64,
                _ => 0,
            })
            .sum()
    }

    /// Stream over the crash points: one just before each fence, one at the end.
    pub fn crash_points(&self) -> CrashPoints<'_> {
        CrashPoints {
            trace: self,
            next_event: 0,
            index: 0,
            markers_seen: 0,
            durable: ImageCell::new(self.initial.to_vec()),
            eadr_base: ImageCell::new(self.initial.to_vec()),
            eadr_recent: Arc::new(Vec::new()),
            eadr_fold: None,
            lines: BTreeMap::new(),
            marks: HashMap::new(),
            fence_due: None,
            done: false,
        }
    }
}

/// The crash points of a trace, computed while streaming over it once.
pub struct CrashPoints<'t> {
    trace: &'t Trace,
    next_event: usize,
    index: usize,
    markers_seen: usize,
    durable: SharedImage,
    eadr_base: SharedImage,
    /// Atoms stored since the previous crash point (in global order).
    eadr_recent: Arc<Vec<Atom>>,
    /// Atoms of the last point, to fold into `eadr_base` before the next one.
    eadr_fold: Option<Arc<Vec<Atom>>>,
    /// Dirty lines: pending (atom index, atom) in visibility order.
    lines: BTreeMap<u64, VecDeque<(u64, Atom)>>,
    /// Thread -> line -> mark.
    marks: HashMap<u32, HashMap<u64, u64>>,
    /// The fence the last point stood before, applied on the next call.
    fence_due: Option<u32>,
    done: bool,
}

/// The cell behind `shared`, for writing; copied first if a point still holds it.
fn cell_mut(shared: &mut SharedImage) -> &mut ImageCell {
    if Arc::get_mut(shared).is_none() {
        *shared = ImageCell::new(shared.image().to_vec());
    }
    Arc::get_mut(shared).expect("unique after copy")
}

impl<'t> CrashPoints<'t> {
    /// Apply what the previously yielded point deferred.
    fn settle(&mut self) {
        if let Some(thread) = self.fence_due.take() {
            self.apply_fence(thread);
        }
        if let Some(atoms) = self.eadr_fold.take() {
            let base = cell_mut(&mut self.eadr_base);
            for &atom in atoms.iter() {
                base.apply(atom);
            }
        }
    }

    fn apply_fence(&mut self, thread: u32) {
        let Some(marks) = self.marks.get_mut(&thread) else { return };
        for (line, upto) in marks.drain() {
            let Some(queue) = self.lines.get_mut(&line) else { continue };
            while queue.front().is_some_and(|&(index, _)| index < upto) {
                let (_, atom) = queue.pop_front().expect("front exists");
                cell_mut(&mut self.durable).apply(atom);
            }
            if queue.is_empty() {
                self.lines.remove(&line);
            }
        }
    }

    fn replay(&mut self, event: &Event) {
        match &event.kind {
            EventKind::Store { first_atom, atoms, .. } => {
                for (i, &atom) in atoms.iter().enumerate() {
                    let index = first_atom + i as u64;
                    self.lines.entry(atom.line_offset()).or_default().push_back((index, atom));
                }
                Arc::make_mut(&mut self.eadr_recent).extend_from_slice(atoms);
            }
            EventKind::Flush { line_offset, upto_atom } => {
                let mark = self.marks.entry(event.thread).or_default().entry(*line_offset);
                let slot = mark.or_default();
                *slot = (*slot).max(*upto_atom);
            }
            EventKind::Marker(_) => self.markers_seen += 1,
            EventKind::Fence => {}
        }
    }

    fn point(&mut self, at: CrashAt) -> CrashPoint<'t> {
        let mut pending = PendingSet::default();
        for (&line, queue) in &self.lines {
            pending.atoms.extend(queue.iter().map(|&(_, atom)| atom));
            pending.ends.push(pending.atoms.len());
            pending.lines.push(line);
        }
        let recent = std::mem::take(&mut self.eadr_recent);
        self.eadr_fold = Some(Arc::clone(&recent));
        let trace: &'t Trace = self.trace;
        let point = CrashPoint {
            index: self.index,
            at,
            markers: &trace.markers[..self.markers_seen],
            durable: Arc::clone(&self.durable),
            pending,
            eadr_base: Arc::clone(&self.eadr_base),
            eadr_atoms: recent,
        };
        self.index += 1;
        point
    }
}

impl<'t> Iterator for CrashPoints<'t> {
    type Item = CrashPoint<'t>;

    fn next(&mut self) -> Option<CrashPoint<'t>> {
        if self.done {
            return None;
        }
        self.settle();
        let trace: &'t Trace = self.trace;
        while let Some(event) = trace.events.get(self.next_event) {
            self.next_event += 1;
            if event.kind == EventKind::Fence {
                self.fence_due = Some(event.thread);
                let at = CrashAt::Fence { seq: event.seq, thread: event.thread };
                return Some(self.point(at));
            }
            self.replay(event);
        }
        self.done = true;
        Some(self.point(CrashAt::End))
    }
}
