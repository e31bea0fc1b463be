//! `ExpectedState`: per-worker intent and ack words in a memory-mapped file
//! kept *outside* the pool, for process-kill tests (VERIFICATION.md §2).
//!
//! What: a file of aligned `u64` words that a running `zen run
//! --expected-state FILE` updates with plain atomic stores, and that `zen
//! check --expected-state FILE` reads after the process was killed and the
//! pool recovered. RocksDB's crash test keeps its expected state the same
//! way. Because the words live in a `MAP_SHARED` file mapping, every store
//! the process made before `SIGKILL` is in the page cache and survives the
//! kill (not a power failure: this is a process-crash test).
//!
//! Layout (little-endian `u64` words):
//!
//! ```text
//! word 0          magic "ZENEXPS1"
//! word 1          number of workers W
//! word 2 + 2w     intent[w]: receipts worker w may have created, the one in flight included
//! word 3 + 2w     ack[w]:    receipts worker w knows to be durable (commit returned)
//! ```
//!
//! How: the mapping is a [`memmap2::MmapRaw`]; each word is accessed as an
//! `AtomicU64` (the only `unsafe` here, in `ExpectedState::word`). A worker
//! writes only its own two words, intent before its transaction starts and
//! ack after its commit returned, so on x86-TSO the intent store is visible
//! before any store of the transaction.
//!
//! Invariants: the file is exactly `(2 + 2W) · 8` bytes and starts with the
//! magic; a word index is checked against the mapping before every access.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{PmemError, Result};

/// First word of an expected-state file.
pub const MAGIC: u64 = u64::from_le_bytes(*b"ZENEXPS1");
/// Most workers one file records.
pub const MAX_WORKERS: usize = 256;
const HEADER_WORDS: usize = 2;

/// Intent/ack words of every worker in a mapped file. See the module docs.
pub struct ExpectedState {
    map: memmap2::MmapRaw,
    workers: usize,
    path: PathBuf,
    // Keeps the file open as long as the mapping lives (not required by
    // mmap, but makes the ownership obvious).
    _file: File,
}

impl std::fmt::Debug for ExpectedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpectedState")
            .field("path", &self.path)
            .field("workers", &self.workers)
            .finish()
    }
}

fn file_bytes(workers: usize) -> u64 {
    ((HEADER_WORDS + 2 * workers) * 8) as u64
}

fn corrupt(path: &Path, detail: String) -> PmemError {
    PmemError::CorruptHeader { path: path.to_path_buf(), field: "expected-state file", detail }
}

impl ExpectedState {
    /// Open `path`, or create it (all words zero) for `workers` workers when
    /// it does not exist or is empty.
    pub fn open_or_create(path: &Path, workers: usize) -> Result<ExpectedState> {
        if !(1..=MAX_WORKERS).contains(&workers) {
            return Err(PmemError::InvalidOption {
                path: path.to_path_buf(),
                detail: format!(
                    "{workers} workers; an expected-state file holds 1..={MAX_WORKERS}"
                ),
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| PmemError::from_io(path, e))?;
        let len = file.metadata().map_err(|e| PmemError::from_io(path, e))?.len();
        if len == 0 {
            file.set_len(file_bytes(workers)).map_err(|e| PmemError::from_io(path, e))?;
            let state = ExpectedState::map(file, path, workers)?;
            state.word(1).store(workers as u64, Ordering::SeqCst);
            state.word(0).store(MAGIC, Ordering::SeqCst);
            return Ok(state);
        }
        ExpectedState::validate(file, path, len)
    }

    /// Open an existing file (never creates or changes one).
    pub fn open(path: &Path) -> Result<ExpectedState> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| PmemError::from_io(path, e))?;
        let len = file.metadata().map_err(|e| PmemError::from_io(path, e))?.len();
        if len == 0 {
            return Err(PmemError::Empty { path: path.to_path_buf() });
        }
        ExpectedState::validate(file, path, len)
    }

    fn validate(file: File, path: &Path, len: u64) -> Result<ExpectedState> {
        let mut head = [0u8; 16];
        if len < 16 {
            return Err(PmemError::TooShort { path: path.to_path_buf(), len, min: 16 });
        }
        std::io::Read::read_exact(&mut &file, &mut head)
            .map_err(|e| PmemError::from_io(path, e))?;
        let magic = u64::from_le_bytes(head[0..8].try_into().expect("8 bytes"));
        let workers = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes"));
        if magic != MAGIC {
            return Err(corrupt(path, format!("magic {magic:#018x}, not an expected-state file")));
        }
        if !(1..=MAX_WORKERS as u64).contains(&workers) || len != file_bytes(workers as usize) {
            return Err(corrupt(path, format!("{workers} workers in a file of {len} bytes")));
        }
        ExpectedState::map(file, path, workers as usize)
    }

    fn map(file: File, path: &Path, workers: usize) -> Result<ExpectedState> {
        let map = memmap2::MmapOptions::new()
            .len(file_bytes(workers) as usize)
            .map_raw(&file)
            .map_err(|e| PmemError::from_io(path, e))?;
        Ok(ExpectedState { map, workers, path: path.to_path_buf(), _file: file })
    }

    /// Word `index` of the file as an atomic.
    fn word(&self, index: usize) -> &AtomicU64 {
        assert!(
            (index + 1) * 8 <= self.map.len(),
            "expected-state word {index} outside {} bytes",
            self.map.len()
        );
        let ptr = self.map.as_mut_ptr().wrapping_add(index * 8).cast::<u64>();
        // The mapping is page aligned, so `ptr` (a multiple of 8 bytes from
        // its start) is 8-byte aligned; the assert above keeps the 8 bytes
        // inside the mapping, which lives as long as `&self`. Every access to
        // the file's words, in this process or another, is atomic.
        // SAFETY: aligned, in bounds, outlived by the mapping, no data race.
        unsafe { AtomicU64::from_ptr(ptr) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Workers the file records.
    pub fn workers(&self) -> usize {
        self.workers
    }

    fn check_worker(&self, worker: usize) {
        assert!(worker < self.workers, "worker {worker} outside the file's {}", self.workers);
    }

    /// Receipts `worker` may have created (its in-flight transaction included).
    pub fn intent(&self, worker: usize) -> u64 {
        self.check_worker(worker);
        self.word(HEADER_WORDS + 2 * worker).load(Ordering::SeqCst)
    }

    /// Receipts `worker` knows to be durable.
    pub fn ack(&self, worker: usize) -> u64 {
        self.check_worker(worker);
        self.word(HEADER_WORDS + 2 * worker + 1).load(Ordering::SeqCst)
    }

    /// Record that `worker` is about to run the transaction making `count` receipts.
    pub fn set_intent(&self, worker: usize, count: u64) {
        self.check_worker(worker);
        self.word(HEADER_WORDS + 2 * worker).store(count, Ordering::SeqCst);
    }

    /// Record that `worker`'s first `count` receipts are durable.
    pub fn set_ack(&self, worker: usize, count: u64) {
        self.check_worker(worker);
        self.word(HEADER_WORDS + 2 * worker + 1).store(count, Ordering::SeqCst);
    }

    /// Write the words to the file (`msync`); not needed for process kills.
    pub fn sync(&self) -> Result<()> {
        self.map.flush().map_err(|e| PmemError::from_io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_survive_reopening_and_bad_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("expected");
        {
            let s = ExpectedState::open_or_create(&path, 3).unwrap();
            assert_eq!((s.workers(), s.intent(2), s.ack(2)), (3, 0, 0));
            s.set_intent(2, 7);
            s.set_ack(2, 6);
        }
        let s = ExpectedState::open(&path).unwrap();
        assert_eq!((s.workers(), s.intent(2), s.ack(2), s.intent(0)), (3, 7, 6, 0));
        // Reopening with another worker count keeps the file's own.
        assert_eq!(ExpectedState::open_or_create(&path, 8).unwrap().workers(), 3);
        let bad = dir.path().join("bad");
        std::fs::write(&bad, [7u8; 64]).unwrap();
        assert!(matches!(ExpectedState::open(&bad), Err(PmemError::CorruptHeader { .. })));
        assert_eq!(std::fs::read(&bad).unwrap(), vec![7u8; 64], "a refused file is unchanged");
        assert!(matches!(
            ExpectedState::open(&dir.path().join("missing")),
            Err(PmemError::NotFound { .. })
        ));
        assert!(ExpectedState::open_or_create(&dir.path().join("zero"), 0).is_err());
    }
}
