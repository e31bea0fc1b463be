//! The `PmemBackend` trait: the only way anything in zenplus touches persistent memory.
//!
//! A backend is chosen once (at the CLI, by `--pmem`) and the engines are
//! generic over it, so every call below is monomorphised and inlined. The
//! methods mirror what a CPU offers: stores, an aligned 8-byte failure-atomic
//! store, cache-line write-back and a store fence; reads go through the trait
//! too, so NVM reads can be counted and delayed by the latency model.
//!
//! Callers normally use [`crate::Persister`], which wraps a backend with a
//! worker's counters; the backends themselves do not count.
//!
//! | backend | medium | durable across |
//! | --- | --- | --- |
//! | [`DaxBackend`] | fsdax file, `MAP_SHARED_VALIDATE \| MAP_SYNC` | power failure (ADR: flush + fence; eADR: store) |
//! | [`FsBackend`] | regular file, `MAP_SHARED` | process crash, not power failure |
//! | [`EmuBackend`] | `fs` + NVM device model (`crate::device`) | process crash |
//! | [`DramBackend`] | anonymous memory | nothing |
//! | [`crate::sim::SimBackend`] | crash simulator | simulated power failure |
//! | [`HeapBackend`] | heap memory, no intrinsics (Miri, loom) | nothing |

mod emu;
mod mapped;
mod mapping;
mod memory;
mod space;
mod striped;

pub use emu::EmuBackend;
pub use mapped::{DaxBackend, FsBackend};
pub(crate) use mapping::Mapping;
pub use memory::{DramBackend, HeapBackend};
pub use space::free_bytes;

use std::path::{Path, PathBuf};

use crate::device::{Charge, DeviceParams as LatencyModel, NvmProfile};
use crate::error::Result;

/// Which backend a pool runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Dax,
    Fs,
    Emu,
    Dram,
    Sim,
    Heap,
}

impl BackendKind {
    pub const ALL: [BackendKind; 6] = [
        BackendKind::Dax,
        BackendKind::Fs,
        BackendKind::Emu,
        BackendKind::Dram,
        BackendKind::Sim,
        BackendKind::Heap,
    ];

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Dax => "dax",
            BackendKind::Fs => "fs",
            BackendKind::Emu => "emu",
            BackendKind::Dram => "dram",
            BackendKind::Sim => "sim",
            BackendKind::Heap => "heap",
        }
    }

    pub fn parse(s: &str) -> Option<BackendKind> {
        BackendKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// What a commit on this backend survives, for banners and `--help`.
    pub fn durable_across(self) -> &'static str {
        match self {
            BackendKind::Dax => "power failure (fsdax, MAP_SYNC)",
            BackendKind::Fs | BackendKind::Emu => {
                "process crash (kill -9), NOT power failure: the file lives in the page cache"
            }
            BackendKind::Dram | BackendKind::Heap => "nothing: volatile memory",
            BackendKind::Sim => "simulated power failure (crash simulator)",
        }
    }

    /// True when a pool on this backend can be closed and opened again.
    pub fn is_reopenable(self) -> bool {
        matches!(self, BackendKind::Dax | BackendKind::Fs | BackendKind::Emu | BackendKind::Sim)
    }
}

/// Where stores become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PersistenceDomain {
    /// Asynchronous DRAM refresh: a store is durable after `clwb` + `sfence`.
    #[default]
    Adr,
    /// Extended ADR: CPU caches are persistent; a store is durable once visible.
    /// Flushes are optional for correctness (fences still order stores).
    Eadr,
}

impl PersistenceDomain {
    pub fn name(self) -> &'static str {
        match self {
            PersistenceDomain::Adr => "adr",
            PersistenceDomain::Eadr => "eadr",
        }
    }

    pub fn parse(s: &str) -> Option<PersistenceDomain> {
        match s {
            "adr" => Some(PersistenceDomain::Adr),
            "eadr" => Some(PersistenceDomain::Eadr),
            _ => None,
        }
    }
}

/// Events an engine reports to the backend for checking; only the crash
/// simulator records them, the other backends ignore them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Marker {
    /// A transaction with this (engine-chosen) identifier started persisting.
    Begin { txn: u64 },
    /// The transaction was acknowledged to its client as durable.
    Ack { txn: u64 },
    /// The pool is being closed cleanly: nothing may be pending after this.
    CleanShutdown,
    /// Anything else a test wants in the trace.
    Note { tag: u32, value: u64 },
}

/// How to create or open a backend from a path.
#[derive(Debug, Clone)]
pub struct BackendOptions {
    /// Pool file (ignored by the volatile backends).
    pub path: Option<PathBuf>,
    /// Per-node pool: its member files in node order, mapped back to back as
    /// one pool (`fs`, `emu` and `dax` only; see `header.rs`). Empty: a
    /// single-file pool at `path`.
    pub members: Vec<PathBuf>,
    /// Persistence domain the engine should assume.
    pub domain: PersistenceDomain,
    /// NVM device model (used by `emu` only).
    pub latency: LatencyModel,
}

impl BackendOptions {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        BackendOptions {
            path: Some(path.into()),
            members: Vec::new(),
            domain: PersistenceDomain::Adr,
            latency: NvmProfile::Optane.model(),
        }
    }

    /// Options for a per-node pool striped over `members` (file 0 first).
    pub fn per_node(members: Vec<PathBuf>) -> Self {
        BackendOptions { path: members.first().cloned(), members, ..BackendOptions::new("") }
    }

    /// Options for a volatile backend that needs no file.
    pub fn anonymous() -> Self {
        BackendOptions {
            path: None,
            members: Vec::new(),
            domain: PersistenceDomain::Adr,
            latency: NvmProfile::Dram.model(),
        }
    }

    pub(crate) fn path_or_memory(&self) -> PathBuf {
        self.path.clone().unwrap_or_else(|| PathBuf::from("<memory>"))
    }

    /// Refuse member files for a backend that has no files.
    pub(crate) fn refuse_members(&self, kind: BackendKind) -> Result<()> {
        if self.members.is_empty() {
            return Ok(());
        }
        Err(crate::PmemError::InvalidOption {
            path: self.path_or_memory(),
            detail: format!(
                "a `{}` pool has no files and cannot be split into per-node files (--pool-per-node needs --pmem fs, emu or dax)",
                kind.name()
            ),
        })
    }
}

/// One member file of a per-node pool, as mapped: bytes `offset..offset + len`
/// of the pool are the file's bytes `0..len`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberFile {
    pub path: PathBuf,
    pub offset: u64,
    pub len: u64,
}

/// The persistent-memory operations. See the module docs.
///
/// Offsets are byte offsets into the pool. Every method asserts that its
/// range lies inside the pool: an out-of-range offset is a programmer error
/// (code that derives offsets from pool contents must validate them first).
pub trait PmemBackend: Send + Sync + Sized + 'static {
    /// Create a new backing store of `len` bytes (a new file for file backends:
    /// an existing file is never overwritten).
    fn create(opts: &BackendOptions, len: u64) -> Result<Self>;
    /// Open an existing backing store.
    fn open(opts: &BackendOptions) -> Result<Self>;

    fn kind(&self) -> BackendKind;
    /// The pool's path, or `<memory>`; used in error messages.
    fn path(&self) -> &Path;
    /// Pool size in bytes.
    fn len(&self) -> u64;
    /// True for a zero-length store (never a valid pool).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn domain(&self) -> PersistenceDomain;

    /// Copy `buf.len()` bytes at `offset` into `buf`; returns nanoseconds of emulated stall.
    fn read(&self, offset: u64, buf: &mut [u8]) -> u64;
    /// A hint that `[offset, offset + len)` will be read soon: the mapped
    /// backends start loading its lines into the CPU caches. No data moves,
    /// nothing is counted or charged, a range outside the pool is ignored.
    /// The default (memory, emulated and simulated backends) does nothing:
    /// `emu` charges its modelled latency on the read itself.
    fn prefetch(&self, _offset: u64, _len: u64) {}
    /// Fault in `[offset, offset + len)` for writing ahead of its first
    /// stores (a fresh page, `Pool::allocate_page_on`): one system call
    /// instead of a page fault per 4 KiB in the middle of commits. Writes and
    /// persists nothing, a hint only. The default (heap, emulated and
    /// simulated backends) does nothing.
    fn populate(&self, _offset: u64, _len: u64) {}
    /// Atomic (acquire) load of the aligned 8-byte word at `offset`.
    fn load_u64(&self, offset: u64) -> u64;
    /// Store `data` at `offset` (not failure-atomic beyond 8-byte aligned words).
    fn write(&self, thread: u32, offset: u64, data: &[u8]);
    /// Store `len` zero bytes at `offset`.
    fn write_zeros(&self, thread: u32, offset: u64, len: u64);
    /// One aligned 8-byte failure-atomic store (release ordering).
    fn store_u64(&self, thread: u32, offset: u64, value: u64);
    /// Write back every cache line overlapping `[offset, offset + len)`.
    fn flush(&self, thread: u32, offset: u64, len: u64);
    /// Store fence by `thread`; `lines_flushed` is the number of lines it flushed
    /// since its previous fence. Returns nanoseconds of emulated stall.
    fn fence(&self, thread: u32, lines_flushed: u64) -> u64;
    /// [`PmemBackend::read`] by worker slot `thread`, with the modelled cost
    /// split ([`Charge`]); the persist primitives call this one. Only `emu`
    /// models anything; the default charges the stall `read` returns as
    /// read latency.
    fn read_by(&self, _thread: u32, offset: u64, buf: &mut [u8]) -> Charge {
        Charge { read_latency_ns: self.read(offset, buf), ..Charge::default() }
    }
    /// [`PmemBackend::fence`] with the modelled cost split: write latency,
    /// bandwidth wait and the media bytes the fenced flushes cost.
    fn fence_by(&self, thread: u32, lines_flushed: u64) -> Charge {
        Charge { write_latency_ns: self.fence(thread, lines_flushed), ..Charge::default() }
    }
    /// The member files of a per-node pool, in order; empty for a single file.
    fn members(&self) -> &[MemberFile] {
        &[]
    }
    /// Record a marker (crash simulator only).
    fn marker(&self, _thread: u32, _marker: Marker) {}
    /// Make sure every byte of an existing pool has storage behind it, so that
    /// no store into the mapping can fault for want of space (SIGBUS): the
    /// file backends fill a sparse file's holes (`posix_fallocate`) or refuse
    /// with `NoSpace`. `Pool::open_on` calls it after validating the pool and
    /// before its first store; `create` reserves by itself. Nothing to do for
    /// the memory backends.
    fn reserve_space(&self) -> Result<()> {
        Ok(())
    }
    /// Push everything to the backing file (close); no-op for volatile backends.
    fn sync_all(&self) -> Result<()> {
        Ok(())
    }
}
