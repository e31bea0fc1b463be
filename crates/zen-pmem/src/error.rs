//! The one error type of `zen-pmem`.
//!
//! Every operating error names the pool path it concerns, so that a message
//! printed by the CLI is enough to act on. Broken invariants are `assert!`s,
//! not variants here: a variant is something a caller or a user can cause.

use std::io;
use std::path::PathBuf;

/// Result alias for the persistent-memory layer.
pub type Result<T, E = PmemError> = std::result::Result<T, E>;

/// What went wrong while creating, opening or using a pool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PmemError {
    #[error("{path}: no such file")]
    NotFound { path: PathBuf },
    #[error("{path}: permission denied")]
    PermissionDenied { path: PathBuf },
    #[error("{path}: already exists; refusing to overwrite a file that is not a new pool")]
    AlreadyExists { path: PathBuf },
    #[error("{path}: file is empty (0 bytes); not a zenplus pool")]
    Empty { path: PathBuf },
    #[error(
        "{path}: file is {len} bytes, shorter than a pool header ({min} bytes); not a zenplus pool"
    )]
    TooShort { path: PathBuf, len: u64, min: u64 },
    #[error("{path}: wrong magic {found:#018x}; not a zenplus pool")]
    BadMagic { path: PathBuf, found: u64 },
    #[error(
        "{path}: header checksum mismatch (stored {stored:#010x}, computed {computed:#010x}); the header is corrupt"
    )]
    BadChecksum { path: PathBuf, stored: u32, computed: u32 },
    #[error(
        "{path}: pool format version {found} is not supported (this build reads version {supported})"
    )]
    UnsupportedVersion { path: PathBuf, found: u32, supported: u32 },
    #[error(
        "{path}: pool uses unknown feature flags {unknown:#x}; it was written by a newer zenplus"
    )]
    UnsupportedFeature { path: PathBuf, unknown: u64 },
    #[error("{path}: corrupt header field `{field}`: {detail}")]
    CorruptHeader { path: PathBuf, field: &'static str, detail: String },
    #[error("{path}: pool is truncated: header says {expected} bytes, file has {actual}")]
    Truncated { path: PathBuf, expected: u64, actual: u64 },
    #[error(
        "{path}: pool size {requested} bytes is below the minimum of {min} bytes ({min_pages} pages of {page_size} bytes)"
    )]
    TooSmall { path: PathBuf, requested: u64, min: u64, min_pages: u64, page_size: u64 },
    #[error("{path}: invalid pool option: {detail}")]
    InvalidOption { path: PathBuf, detail: String },
    #[error("{path}: pool is already open (locked by another handle or process)")]
    AlreadyOpen { path: PathBuf },
    #[error("{path}: no free page left ({page_count} pages of {page_size} bytes, all owned)")]
    NoFreePage { path: PathBuf, page_count: u64, page_size: u64 },
    #[error("{path}: corrupt page table entry for page {page}: {raw:#018x}")]
    CorruptPageTable { path: PathBuf, page: u64, raw: u64 },
    #[error("{path}: page {page} is not owned by ({table}, {worker}) and cannot be released by it")]
    NotOwner { path: PathBuf, page: u64, table: u32, worker: u16 },
    #[error(
        "{path}: not on a DAX file system (MAP_SYNC refused: {source}); use --pmem fs for ordinary files"
    )]
    NotDax { path: PathBuf, source: io::Error },
    #[error("{path}: not a member file of a per-node pool: {detail}")]
    BadMemberHeader { path: PathBuf, detail: String },
    #[error("{path}: belongs to another pool (uuid {found}); this per-node pool is {expected}")]
    ForeignMember { path: PathBuf, expected: String, found: String },
    #[error(
        "{path}: holds member {found} of the per-node pool but was given as member {expected}; were the files swapped or renamed?"
    )]
    SwappedMember { path: PathBuf, expected: u64, found: u64 },
    #[error(
        "{path}: the per-node pool has {in_pool} member files (one per NUMA node) but {given} were given; run with --numa-nodes {in_pool}"
    )]
    MemberCount { path: PathBuf, in_pool: u64, given: u64 },
    #[error("{path}: member file is {actual} bytes, the pool needs exactly {expected}")]
    MemberSize { path: PathBuf, expected: u64, actual: u64 },
    #[error(
        "{path}: is member {index} of a per-node pool of {count} files; open the pool with --pool-per-node"
    )]
    PerNodeMember { path: PathBuf, index: u64, count: u64 },
    #[error("{path}: is a single-file pool, not a per-node one; open it without --pool-per-node")]
    NotPerNode { path: PathBuf },
    #[error(
        "{path}: this CPU has no cache-line flush instruction (clwb, clflushopt or clflush), so stores to a DAX pool cannot be made durable under ADR; use --persistence-domain eadr only if the platform really has eADR, or --pmem fs"
    )]
    NoFlushInstruction { path: PathBuf },
    #[error(
        "{path}: not enough space: backing every page of the pool needs {needed} more bytes ({}) on its file system, which has {free} bytes ({}) free; free some space there, or choose a smaller --pool-size or another directory",
        mib(*.needed),
        mib(*.free)
    )]
    NoSpace { path: PathBuf, needed: u64, free: u64 },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// `bytes` in MiB with one decimal, for messages that also give the exact count.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

impl PmemError {
    /// Map an `io::Error` of a file operation on `path` to the most specific variant.
    pub fn from_io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        let path = path.into();
        match source.kind() {
            io::ErrorKind::NotFound => PmemError::NotFound { path },
            io::ErrorKind::PermissionDenied => PmemError::PermissionDenied { path },
            io::ErrorKind::AlreadyExists => PmemError::AlreadyExists { path },
            _ => PmemError::Io { path, source },
        }
    }

    /// True when retrying later may succeed (space freed, lock released).
    pub fn is_retryable(&self) -> bool {
        matches!(self, PmemError::NoFreePage { .. } | PmemError::AlreadyOpen { .. })
    }
}
