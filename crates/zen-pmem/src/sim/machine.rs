//! The live simulated machine: event recording, durable state and lints.
//!
//! What: [`Machine`] is the state behind the simulator's global mutex. Every
//! store, flush, fence and marker of every thread is applied here, in one
//! total order (a legal x86-TSO execution), and appended to the event list.
//!
//! How (ADR): a store's atoms are appended, in visibility order, to the
//! pending list of their cache line, each with a global atom index. A flush of
//! line L by thread T remembers the mark (L, atoms stored so far); a fence by T
//! makes every atom of a marked line whose index is below the mark durable and
//! clears T's marks. Durable atoms leave the pending lists, so the state is
//! O(pending), not O(history). Under eADR a store is durable once visible and
//! nothing is ever pending (the trace still records every event).
//!
//! A store whose bytes equal what is already visible is recorded with no atom
//! for those bytes: it can change no crash image (the word already holds those
//! bytes in every image that holds the atom that made them visible), and
//! dropping it keeps page zeroing of fresh pools free. Lints still see it.
//!
//! Invariants: a line is in `lines` iff it has pending atoms; pending atoms
//! of a line are in increasing index order; `pending_total` and every thread's
//! `pending_atoms` equal the number of pending atoms (of that thread).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::atom::{self, Atom, LINE_BYTES, WORD_BYTES};
use super::lint::{LintError, LintReport, LintWarning};
use super::trace::{Event, EventKind, MarkerRecord, Trace};
use crate::backend::{Mapping, Marker, PersistenceDomain};

/// What a store writes.
#[derive(Clone, Copy)]
pub(crate) enum StoreData<'a> {
    Bytes(&'a [u8]),
    Zeros(u64),
    /// One aligned 8-byte failure-atomic store.
    Word(u64),
}

impl StoreData<'_> {
    fn len(&self) -> u64 {
        match self {
            StoreData::Bytes(b) => b.len() as u64,
            StoreData::Zeros(len) => *len,
            StoreData::Word(_) => WORD_BYTES,
        }
    }

    /// Bytes `[first, end)` of the word at `word`, placed at their positions in the word.
    fn word_value(&self, offset: u64, word: u64, first: u64, end: u64) -> u64 {
        match self {
            StoreData::Zeros(_) => 0,
            StoreData::Word(v) => *v,
            StoreData::Bytes(b) => {
                let mut bytes = [0u8; 8];
                let from = (word + first - offset) as usize;
                bytes[first as usize..end as usize]
                    .copy_from_slice(&b[from..from + (end - first) as usize]);
                u64::from_le_bytes(bytes)
            }
        }
    }
}

struct LiveAtom {
    atom: Atom,
    index: u64,
    /// The whole visible word before this atom (to rebuild the durable image).
    old: u64,
    thread: u32,
}

#[derive(Default)]
struct ThreadState {
    /// Line offset -> atoms stored when the thread last flushed it.
    marks: HashMap<u64, u64>,
    stores_since_fence: u64,
    pending_atoms: u64,
    /// Word offset -> partial non-atomic stores to it in this fence epoch.
    partial_words: HashMap<u64, u32>,
}

/// Lints since the backend was made and since the last trace reset.
#[derive(Default)]
struct Lints {
    total: LintReport,
    trace: LintReport,
}

impl Lints {
    fn error(&mut self, kind: LintError, message: String) {
        self.total.error(kind, || message.clone());
        self.trace.error(kind, || message);
    }
    fn warn(&mut self, kind: LintWarning) {
        self.total.warn(kind);
        self.trace.warn(kind);
    }
}

/// The state behind the simulator's mutex. See the module docs.
pub(crate) struct Machine {
    domain: PersistenceDomain,
    initial: Arc<Vec<u8>>,
    events: Vec<Event>,
    next_atom: u64,
    lines: HashMap<u64, VecDeque<LiveAtom>>,
    pending_total: u64,
    threads: HashMap<u32, ThreadState>,
    /// Lines stored to since their last flush by anyone.
    unflushed: HashSet<u64>,
    lints: Lints,
}

impl Machine {
    pub(crate) fn new(domain: PersistenceDomain, initial: Arc<Vec<u8>>) -> Machine {
        Machine {
            domain,
            initial,
            events: Vec::new(),
            next_atom: 0,
            lines: HashMap::new(),
            pending_total: 0,
            threads: HashMap::new(),
            unflushed: HashSet::new(),
            lints: Lints::default(),
        }
    }

    fn push(&mut self, thread: u32, kind: EventKind) {
        let seq = self.events.len() as u64;
        self.events.push(Event { seq, thread, kind });
    }

    /// Record a store and make it visible through `map`.
    pub(crate) fn store(&mut self, map: &Mapping, thread: u32, offset: u64, data: StoreData<'_>) {
        let len = data.len();
        let end = offset.checked_add(len).expect("store range overflows u64");
        assert!(end <= map.len() as u64, "store {offset}+{len} outside {} bytes", map.len());
        let atomic = matches!(data, StoreData::Word(_));
        let first_atom = self.next_atom;
        let mut atoms = Vec::new();
        let mut last_line = u64::MAX;
        atom::for_each_word(offset, len, |word, first, last| {
            let line = word - word % LINE_BYTES;
            if line != last_line {
                self.unflushed.insert(line);
                last_line = line;
            }
            let mask = atom::byte_mask(first, last);
            if mask != 0xFF && !atomic {
                self.note_partial_store(thread, word);
            }
            let value = data.word_value(offset, word, first, last);
            let mut old = [0u8; 8];
            let available = (map.len() as u64 - word).min(WORD_BYTES) as usize;
            map.read(word, &mut old[..available]);
            let old = u64::from_le_bytes(old);
            if (old ^ value) & atom::mask_bits(mask) != 0 {
                atoms.push(Atom::new(word, mask, value));
                self.add_pending(thread, *atoms.last().expect("just pushed"), old);
            }
        });
        match data {
            StoreData::Bytes(b) => map.write(offset, b),
            StoreData::Zeros(n) => map.write_zeros(offset, n),
            StoreData::Word(v) => map.store_u64(offset, v),
        }
        self.threads.entry(thread).or_default().stores_since_fence += 1;
        self.push(thread, EventKind::Store { offset, len, atomic, first_atom, atoms });
    }

    fn add_pending(&mut self, thread: u32, atom: Atom, old: u64) {
        let index = self.next_atom;
        self.next_atom += 1;
        if self.domain == PersistenceDomain::Eadr {
            return;
        }
        let live = LiveAtom { atom, index, old, thread };
        self.lines.entry(atom.line_offset()).or_default().push_back(live);
        self.pending_total += 1;
        self.threads.entry(thread).or_default().pending_atoms += 1;
    }

    fn note_partial_store(&mut self, thread: u32, word: u64) {
        let count = self.threads.entry(thread).or_default().partial_words.entry(word).or_default();
        *count += 1;
        if *count == 2 {
            let seq = self.events.len();
            self.lints.error(
                LintError::TornCommitWord,
                format!(
                    "torn commit word: thread {thread} wrote the aligned word at {word:#x} with \
                     two or more partial stores in one fence epoch (event {seq}); write commit \
                     words with one aligned 8-byte atomic store"
                ),
            );
        }
    }

    /// Record a flush of every line overlapping `[offset, offset + len)`.
    pub(crate) fn flush(&mut self, pool_len: u64, thread: u32, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let end = offset.checked_add(len).expect("flush range overflows u64");
        assert!(end <= pool_len, "flush {offset}+{len} outside {pool_len} bytes");
        let mut line = offset - offset % LINE_BYTES;
        while line < end {
            let upto_atom = self.next_atom;
            if !self.unflushed.remove(&line) {
                self.lints.warn(LintWarning::CleanLineFlush);
            }
            let state = self.threads.entry(thread).or_default();
            if state.marks.insert(line, upto_atom).is_some() {
                self.lints.warn(LintWarning::RepeatedFlush);
            }
            self.push(thread, EventKind::Flush { line_offset: line, upto_atom });
            line += LINE_BYTES;
        }
    }

    /// Record a fence by `thread`: its marked prefixes become durable.
    pub(crate) fn fence(&mut self, thread: u32) {
        let state = self.threads.entry(thread).or_default();
        if state.marks.is_empty() && state.stores_since_fence == 0 {
            self.lints.warn(LintWarning::EmptyFence);
        }
        state.stores_since_fence = 0;
        state.partial_words.clear();
        let mut marks = std::mem::take(&mut state.marks);
        for (&line, &upto) in &marks {
            self.persist_prefix(line, upto);
        }
        marks.clear();
        self.threads.get_mut(&thread).expect("entry made above").marks = marks;
        self.push(thread, EventKind::Fence);
    }

    fn persist_prefix(&mut self, line: u64, upto_atom: u64) {
        let Some(queue) = self.lines.get_mut(&line) else { return };
        while queue.front().is_some_and(|a| a.index < upto_atom) {
            let done = queue.pop_front().expect("front exists");
            self.pending_total -= 1;
            self.threads.get_mut(&done.thread).expect("storing thread has state").pending_atoms -=
                1;
        }
        if queue.is_empty() {
            self.lines.remove(&line);
        }
    }

    /// Record a marker and check the marker lints.
    pub(crate) fn marker(&mut self, thread: u32, marker: Marker) {
        let seq = self.events.len();
        match marker {
            Marker::Ack { txn } => {
                let pending = self.threads.get(&thread).map_or(0, |t| t.pending_atoms);
                if pending > 0 {
                    let line = self.first_pending_line(Some(thread));
                    self.lints.error(
                        LintError::AckedWithPending,
                        format!(
                            "acked with pending atoms: thread {thread} acknowledged txn {txn} \
                             (event {seq}) with {pending} of its atoms not durable (first on \
                             line {line:#x}): flush and fence before acknowledging"
                        ),
                    );
                }
            }
            Marker::CleanShutdown if self.pending_total > 0 => {
                let line = self.first_pending_line(None);
                self.lints.error(
                    LintError::PendingAtCleanShutdown,
                    format!(
                        "pending at clean shutdown: {} atoms on {} lines not durable at the \
                         clean-shutdown marker (event {seq}; first on line {line:#x})",
                        self.pending_total,
                        self.lines.len()
                    ),
                );
            }
            _ => {}
        }
        self.push(thread, EventKind::Marker(marker));
    }

    /// Lowest line with a pending atom (of `thread`, when given).
    fn first_pending_line(&self, thread: Option<u32>) -> u64 {
        self.lines
            .iter()
            .filter(|(_, q)| thread.is_none_or(|t| q.iter().any(|a| a.thread == t)))
            .map(|(&line, _)| line)
            .min()
            .unwrap_or(0)
    }

    pub(crate) fn pending_atoms(&self) -> u64 {
        self.pending_total
    }

    pub(crate) fn dirty_lines(&self) -> u64 {
        self.lines.len() as u64
    }

    pub(crate) fn event_count(&self) -> u64 {
        self.events.len() as u64
    }

    pub(crate) fn lints(&self) -> LintReport {
        self.lints.total.clone()
    }

    /// The durable image: the visible one with every pending atom undone.
    pub(crate) fn durable_image(&self, map: &Mapping) -> Vec<u8> {
        let mut image = vec![0u8; map.len()];
        map.read(0, &mut image);
        for queue in self.lines.values() {
            for live in queue.iter().rev() {
                atom::write_word(&mut image, live.atom.word_offset(), live.old);
            }
        }
        image
    }

    /// A snapshot of the trace since the last reset.
    pub(crate) fn trace(&self, pool_len: u64) -> Trace {
        let markers = self
            .events
            .iter()
            .filter_map(|e| match e.kind {
                EventKind::Marker(marker) => {
                    Some(MarkerRecord { seq: e.seq, thread: e.thread, marker })
                }
                _ => None,
            })
            .collect();
        Trace::new(
            Arc::clone(&self.initial),
            self.events.clone(),
            markers,
            self.lints.trace.clone(),
            self.domain,
            pool_len,
        )
    }

    /// Start a new trace whose initial image is the current (all durable) one.
    pub(crate) fn reset_trace(&mut self, map: &Mapping) {
        assert!(
            self.pending_total == 0,
            "reset_trace with {} atoms pending on {} lines (first {:#x}): flush and fence first",
            self.pending_total,
            self.lines.len(),
            self.first_pending_line(None)
        );
        let mut image = vec![0u8; map.len()];
        map.read(0, &mut image);
        self.initial = Arc::new(image);
        self.events.clear();
        self.next_atom = 0;
        self.unflushed.clear();
        for state in self.threads.values_mut() {
            state.marks.clear();
            state.stores_since_fence = 0;
            state.partial_words.clear();
        }
        self.lints.trace = LintReport::default();
    }
}
