//! The transient versions of an epoch (DRAM only, dropped with the epoch).
//!
//! Every row a transaction of the epoch declares it writes gets a version
//! array: one pending version per writer, sorted by serial id (sid). The
//! init phase builds them on every epoch thread at once (thread w takes the
//! transactions with sid ≡ w mod N, as the execution phase does) through a
//! sharded row map ([`Building`]); [`Building::freeze`] turns it into the
//! read-only [`Epoch`] the execution and persist phases use.
//!
//! Caracal's two contention optimisations, each switchable at run time
//! (`EngineConfig::nvcaracal_batch_append`, `nvcaracal_split_on_demand`):
//!
//! ```text
//!  off/off   per declared write: shard lock (find or create the row),
//!            row lock, sorted insert (memmove of the later versions)
//!            → a hot row serialises every thread on its lock, and each
//!              insert moves up to the whole array
//!  batch     per thread, its writes grouped by row first; per (thread,
//!  append    row): one shard lock, one row lock, one sorted merge
//!            → a hot row's lock is taken N times an epoch, not once per
//!              version
//!  split-on- a row whose pending versions pass SPLIT_THRESHOLD gets one
//!  demand    array per thread; later appends go to the thread's own
//!            array (uncontended lock, appended in sid order)
//!            → appends to hot rows take no shared lock; a read of a split
//!              row walks every array of the row (k-way, newest first)
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use super::RowRef;
use crate::sched::Mutex;

/// Version states.
pub const PENDING: u8 = 0;
pub const WRITTEN: u8 = 1;
pub const IGNORE: u8 = 2;

/// Pending versions of one row in one epoch above which split-on-demand
/// gives the row one version array per thread.
pub const SPLIT_THRESHOLD: u32 = 32;

/// Shards of the init phase's row map (a power of two).
pub(super) const SHARDS: usize = 64;

/// (table, key).
pub type Key = (u32, u64);

/// One transient version.
pub struct Version {
    pub sid: u32,
    pub state: AtomicU8,
    /// `None` inside: a delete.
    pub value: OnceLock<Option<Box<[u8]>>>,
}

impl Version {
    fn pending(sid: u32) -> Version {
        Version { sid, state: AtomicU8::new(PENDING), value: OnceLock::new() }
    }

    /// Wait until the version's writer has finished; its final state.
    fn settle(&self, waits: &mut u64) -> u8 {
        let mut state = self.state.load(Ordering::Acquire);
        if state == PENDING {
            *waits += 1;
        }
        let mut attempt = 0;
        while state == PENDING {
            attempt += 1;
            crate::api::backoff(attempt.min(8));
            state = self.state.load(Ordering::Acquire);
        }
        state
    }
}

/// What the init phase does, and on how many threads.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub batch_append: bool,
    pub split_on_demand: bool,
    pub threads: usize,
}

/// A row while the init phase runs.
struct InitRow {
    base: Option<RowRef>,
    appends: AtomicU32,
    shared: Mutex<Vec<Version>>,
    split: OnceLock<Box<[Mutex<Vec<Version>>]>>,
}

#[derive(Default)]
struct Shard {
    at: HashMap<Key, usize>,
    rows: Vec<(Key, Arc<InitRow>)>,
}

pub(super) fn shard_of(key: Key) -> usize {
    let h = (key.1 ^ (u64::from(key.0) << 48)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - SHARDS.trailing_zeros())) as usize
}

/// The row map while the init phase runs (shared by its threads).
pub struct Building {
    shards: Vec<Mutex<Shard>>,
    opts: Options,
}

impl Building {
    pub fn new(opts: Options) -> Building {
        Building { shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(), opts }
    }

    /// The row of `key`, created with `base(key)` (its committed state).
    fn row(&self, key: Key, base: &dyn Fn(Key) -> Option<RowRef>) -> Arc<InitRow> {
        let mut shard = self.shards[shard_of(key)].lock();
        if let Some(&i) = shard.at.get(&key) {
            return Arc::clone(&shard.rows[i].1);
        }
        let row = Arc::new(InitRow {
            base: base(key),
            appends: AtomicU32::new(0),
            shared: Mutex::new(Vec::new()),
            split: OnceLock::new(),
        });
        let i = shard.rows.len();
        shard.rows.push((key, Arc::clone(&row)));
        shard.at.insert(key, i);
        row
    }

    /// Thread `w`'s own array of `row` when the row is (or, with `count`
    /// pending versions, becomes) split.
    fn split_part<'r>(
        &self,
        row: &'r InitRow,
        w: usize,
        count: u32,
    ) -> Option<&'r Mutex<Vec<Version>>> {
        let n = self.opts.threads;
        if !self.opts.split_on_demand || n < 2 {
            return None;
        }
        if count <= SPLIT_THRESHOLD && row.split.get().is_none() {
            return None;
        }
        Some(&row.split.get_or_init(|| (0..n).map(|_| Mutex::new(Vec::new())).collect())[w])
    }

    /// Thread `w`'s share of the init phase: a pending version for every
    /// declared write of transactions `w, w + N, …` of `txns`.
    pub fn init_thread<'p>(
        &self,
        w: usize,
        txns: usize,
        writes: impl Fn(usize) -> &'p [Key],
        base: &dyn Fn(Key) -> Option<RowRef>,
    ) {
        let n = self.opts.threads;
        if self.opts.batch_append {
            let mut mine: HashMap<Key, Vec<u32>> = HashMap::new();
            for sid in (w..txns).step_by(n) {
                for &k in writes(sid) {
                    mine.entry(k).or_default().push(sid as u32);
                }
            }
            for (k, sids) in mine {
                let row = self.row(k, base);
                let added = sids.len() as u32;
                let count = row.appends.fetch_add(added, Ordering::Relaxed) + added;
                let versions = sids.into_iter().map(Version::pending);
                match self.split_part(&row, w, count) {
                    // Only thread w appends here, in increasing sid order.
                    Some(part) => part.lock().extend(versions),
                    None => merge_into(&mut row.shared.lock(), versions.collect()),
                }
            }
        } else {
            for sid in (w..txns).step_by(n) {
                for &k in writes(sid) {
                    let row = self.row(k, base);
                    let count = row.appends.fetch_add(1, Ordering::Relaxed) + 1;
                    let v = Version::pending(sid as u32);
                    match self.split_part(&row, w, count) {
                        Some(part) => part.lock().push(v),
                        None => {
                            let mut shared = row.shared.lock();
                            let at = shared.partition_point(|x| x.sid < sid as u32);
                            shared.insert(at, v);
                        }
                    }
                }
            }
        }
    }

    /// The read-only epoch (every init thread has finished).
    pub fn freeze(self) -> Epoch {
        let mut split_rows = 0;
        let shards = self
            .shards
            .into_iter()
            .map(|s| {
                let s = s.into_inner();
                let rows = s
                    .rows
                    .into_iter()
                    .map(|(key, row)| {
                        let row = Arc::into_inner(row).expect(
                            "the init threads have ended, so the map holds the only reference",
                        );
                        let mut parts = vec![row.shared.into_inner()];
                        if let Some(split) = row.split.into_inner() {
                            split_rows += 1;
                            parts.extend(split.into_vec().into_iter().map(Mutex::into_inner));
                        }
                        parts.retain(|p| !p.is_empty());
                        RowVersions {
                            table: key.0,
                            key: key.1,
                            base: row.base,
                            base_bytes: OnceLock::new(),
                            parts,
                        }
                    })
                    .collect();
                (s.at, rows)
            })
            .collect();
        Epoch { shards, split_rows }
    }
}

/// Merge `new` (sorted by sid) into the sorted `v`.
fn merge_into(v: &mut Vec<Version>, new: Vec<Version>) {
    let appendable = match (v.last(), new.first()) {
        (Some(last), Some(first)) => last.sid < first.sid,
        _ => true,
    };
    if appendable {
        v.extend(new);
        return;
    }
    let old = std::mem::take(v);
    v.reserve(old.len() + new.len());
    let (mut a, mut b) = (old.into_iter().peekable(), new.into_iter().peekable());
    loop {
        let take_a = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => x.sid < y.sid,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        v.extend(if take_a { a.next() } else { b.next() });
    }
}

/// A row written in the epoch: its version arrays, each sorted by sid
/// (one unless the row was split).
pub struct RowVersions {
    pub table: u32,
    pub key: u64,
    pub base: Option<RowRef>,
    /// The committed row (`base`) as the epoch's first reader of it read
    /// it from NVM; kept for tables with secondary indexes only, so that
    /// their upkeep after the mark needs no second NVM read.
    pub base_bytes: OnceLock<Box<[u8]>>,
    pub parts: Vec<Vec<Version>>,
}

impl RowVersions {
    /// The version of transaction `sid`.
    pub fn own(&self, sid: u32) -> Option<&Version> {
        self.parts.iter().find_map(|p| p.binary_search_by_key(&sid, |v| v.sid).ok().map(|i| &p[i]))
    }

    /// The newest written version before `sid`, waiting on pending ones
    /// (`None`: every earlier version was ignored, the base row holds).
    pub fn read(&self, sid: u32, waits: &mut u64) -> Option<&Version> {
        if let [only] = self.parts.as_slice() {
            let before = only.partition_point(|v| v.sid < sid);
            return only[..before].iter().rev().find(|v| v.settle(waits) == WRITTEN);
        }
        let mut cur: Vec<usize> =
            self.parts.iter().map(|p| p.partition_point(|v| v.sid < sid)).collect();
        loop {
            let mut best: Option<(usize, u32)> = None;
            for (i, p) in self.parts.iter().enumerate() {
                if cur[i] > 0 {
                    let s = p[cur[i] - 1].sid;
                    if best.is_none_or(|(_, b)| s > b) {
                        best = Some((i, s));
                    }
                }
            }
            let (i, _) = best?;
            let v = &self.parts[i][cur[i] - 1];
            if v.settle(waits) == WRITTEN {
                return Some(v);
            }
            cur[i] -= 1;
        }
    }

    /// The row's final version of the epoch (execution has ended).
    pub fn last_written(&self) -> Option<&Version> {
        self.parts
            .iter()
            .filter_map(|p| p.iter().rev().find(|v| v.state.load(Ordering::Acquire) == WRITTEN))
            .max_by_key(|v| v.sid)
    }

    fn versions(&self) -> usize {
        self.parts.iter().map(Vec::len).sum()
    }
}

/// The version arrays of an epoch, read-only after init.
pub struct Epoch {
    shards: Vec<(HashMap<Key, usize>, Vec<RowVersions>)>,
    split_rows: u64,
}

impl Epoch {
    pub fn find(&self, key: Key) -> Option<&RowVersions> {
        let (at, rows) = &self.shards[shard_of(key)];
        at.get(&key).map(|&i| &rows[i])
    }

    /// Every row, in a fixed order.
    pub fn rows(&self) -> impl Iterator<Item = &RowVersions> {
        self.shards.iter().flat_map(|(_, rows)| rows.iter())
    }

    pub fn versions(&self) -> u64 {
        self.rows().map(|r| r.versions() as u64).sum()
    }

    /// The rows of shard `s` (`0..SHARDS`; a row's shard is `shard_of` its
    /// key, as in the cached versions).
    pub fn shard_rows(&self, s: usize) -> &[RowVersions] {
        &self.shards[s].1
    }

    /// Rows split per thread (split-on-demand).
    pub fn split_rows(&self) -> u64 {
        self.split_rows
    }

    /// DRAM of the version arrays and the row map (values not included).
    pub fn bytes(&self) -> u64 {
        let mut bytes = 0usize;
        for (at, rows) in &self.shards {
            bytes += at.capacity() * (std::mem::size_of::<(Key, usize)>() + 1);
            bytes += rows.capacity() * std::mem::size_of::<RowVersions>();
            for r in rows {
                bytes += r.parts.capacity() * std::mem::size_of::<Vec<Version>>();
                bytes += r.parts.iter().map(|p| p.capacity()).sum::<usize>()
                    * std::mem::size_of::<Version>();
            }
        }
        bytes as u64
    }
}

/// An upper bound of the transient DRAM one declared write of a row of
/// `row_bytes` costs an epoch: its version, its value, and (if it is the
/// row's first) the row's array and map entry, with the init phase's
/// shared row and growth slack, and a copy of the committed row (kept for
/// tables with secondary indexes when the epoch reads it). The DRAM budget is checked with it before
/// an epoch runs.
pub fn bound_per_write(row_bytes: usize) -> u64 {
    let version = 2 * std::mem::size_of::<Version>() + row_bytes;
    let row = std::mem::size_of::<RowVersions>()
        + row_bytes
        + std::mem::size_of::<InitRow>()
        + std::mem::size_of::<Vec<Version>>()
        + 4 * std::mem::size_of::<(Key, usize)>();
    (version + row) as u64
}
