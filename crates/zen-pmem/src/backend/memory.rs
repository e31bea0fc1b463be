//! Volatile backends: `dram` (anonymous mapping, real flush instructions so the
//! instruction cost is kept) and `heap` (plain heap memory, no intrinsics at
//! all: flushes are no-ops and the fence is an atomic fence; for Miri and loom).
//!
//! Neither survives anything; `open` refuses, since there is nothing to open.

use std::path::{Path, PathBuf};

use super::{BackendKind, BackendOptions, Mapping, PersistenceDomain, PmemBackend};
use crate::error::{PmemError, Result};

fn volatile_len(opts: &BackendOptions, len: u64) -> Result<usize> {
    usize::try_from(len).map_err(|_| PmemError::InvalidOption {
        path: opts.path_or_memory(),
        detail: format!("{len} bytes do not fit in memory"),
    })
}

fn cannot_reopen(opts: &BackendOptions, kind: BackendKind) -> PmemError {
    PmemError::InvalidOption {
        path: opts.path_or_memory(),
        detail: format!("a `{}` pool is volatile and cannot be reopened", kind.name()),
    }
}

/// Anonymous memory with the real flush/fence instructions (no persistence).
pub struct DramBackend {
    map: Mapping,
    path: PathBuf,
    domain: PersistenceDomain,
}

impl PmemBackend for DramBackend {
    fn create(opts: &BackendOptions, len: u64) -> Result<Self> {
        opts.refuse_members(BackendKind::Dram)?;
        let size = volatile_len(opts, len)?;
        let raw = memmap2::MmapOptions::new()
            .len(size)
            .map_anon()
            .map_err(|e| PmemError::from_io(opts.path_or_memory(), e))?;
        Ok(DramBackend {
            map: Mapping::from_mmap(raw.into()),
            path: PathBuf::from("<dram>"),
            domain: opts.domain,
        })
    }
    fn open(opts: &BackendOptions) -> Result<Self> {
        Err(cannot_reopen(opts, BackendKind::Dram))
    }
    fn kind(&self) -> BackendKind {
        BackendKind::Dram
    }
    super::mapped::delegate_to_mapping!();
}

/// Heap memory, no flush instructions (for Miri and loom runs).
pub struct HeapBackend {
    map: Mapping,
    path: PathBuf,
}

impl PmemBackend for HeapBackend {
    fn create(opts: &BackendOptions, len: u64) -> Result<Self> {
        opts.refuse_members(BackendKind::Heap)?;
        let size = volatile_len(opts, len)?;
        Ok(HeapBackend { map: Mapping::heap(size), path: PathBuf::from("<heap>") })
    }
    fn open(opts: &BackendOptions) -> Result<Self> {
        Err(cannot_reopen(opts, BackendKind::Heap))
    }
    fn kind(&self) -> BackendKind {
        BackendKind::Heap
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn len(&self) -> u64 {
        self.map.len() as u64
    }
    fn domain(&self) -> PersistenceDomain {
        PersistenceDomain::Adr
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> u64 {
        self.map.read(offset, buf);
        0
    }
    fn load_u64(&self, offset: u64) -> u64 {
        self.map.load_u64(offset)
    }
    fn write(&self, _thread: u32, offset: u64, data: &[u8]) {
        self.map.write(offset, data)
    }
    fn write_zeros(&self, _thread: u32, offset: u64, len: u64) {
        self.map.write_zeros(offset, len)
    }
    fn store_u64(&self, _thread: u32, offset: u64, value: u64) {
        self.map.store_u64(offset, value)
    }
    fn flush(&self, _thread: u32, _offset: u64, _len: u64) {}
    fn fence(&self, _thread: u32, _lines_flushed: u64) -> u64 {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        0
    }
}
