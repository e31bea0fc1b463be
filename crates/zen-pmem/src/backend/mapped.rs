//! File-backed backends: `fs` (any file, `MAP_SHARED`) and `dax` (fsdax, `MAP_SYNC`).
//!
//! Both hold the pool file open with an exclusive lock for as long as they
//! live, so a pool is open in one process (and through one handle) at a time.
//! `create` never touches an existing file; `open` never writes.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::{BackendKind, BackendOptions, Mapping, PersistenceDomain, PmemBackend};
use crate::error::{PmemError, Result};

/// Open (or create) the pool file, lock it, and return it with its length.
fn open_locked(opts: &BackendOptions, create_len: Option<u64>) -> Result<(File, PathBuf, u64)> {
    let path = opts.path.clone().ok_or_else(|| PmemError::InvalidOption {
        path: PathBuf::from("<none>"),
        detail: "a file-backed pool needs --pool PATH".into(),
    })?;
    let file = match create_len {
        Some(_) => OpenOptions::new().read(true).write(true).create_new(true).open(&path),
        None => OpenOptions::new().read(true).write(true).open(&path),
    }
    .map_err(|e| PmemError::from_io(&path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => return Err(PmemError::AlreadyOpen { path }),
        Err(TryLockError::Error(e)) => return Err(PmemError::from_io(&path, e)),
    }
    if let Some(len) = create_len
        && let Err(e) = file.set_len(len)
    {
        drop(file);
        // We created the file a moment ago; removing it loses nothing of the user's.
        let _ = std::fs::remove_file(&path);
        return Err(PmemError::from_io(&path, e));
    }
    let len = file.metadata().map_err(|e| PmemError::from_io(&path, e))?.len();
    if len == 0 {
        return Err(PmemError::Empty { path });
    }
    if isize::try_from(len).is_err() {
        return Err(PmemError::InvalidOption {
            path,
            detail: format!("{len} bytes cannot be mapped"),
        });
    }
    Ok((file, path, len))
}

/// A pool on a regular file mapped `MAP_SHARED`. Durable across process crashes only.
pub struct FsBackend {
    map: Mapping,
    path: PathBuf,
    domain: PersistenceDomain,
    _file: File,
}

impl FsBackend {
    fn map(opts: &BackendOptions, create_len: Option<u64>) -> Result<Self> {
        let (file, path, len) = open_locked(opts, create_len)?;
        let raw = memmap2::MmapOptions::new()
            .len(len as usize)
            .map_raw(&file)
            .map_err(|e| PmemError::from_io(&path, e))?;
        Ok(FsBackend { map: Mapping::from_mmap(raw), path, domain: opts.domain, _file: file })
    }

    pub(crate) fn mapping(&self) -> &Mapping {
        &self.map
    }
}

macro_rules! delegate_to_mapping {
    () => {
        fn path(&self) -> &Path {
            &self.path
        }
        fn len(&self) -> u64 {
            self.map.len() as u64
        }
        fn domain(&self) -> PersistenceDomain {
            self.domain
        }
        #[inline]
        fn read(&self, offset: u64, buf: &mut [u8]) -> u64 {
            self.map.read(offset, buf);
            0
        }
        #[inline]
        fn load_u64(&self, offset: u64) -> u64 {
            self.map.load_u64(offset)
        }
        #[inline]
        fn write(&self, _thread: u32, offset: u64, data: &[u8]) {
            self.map.write(offset, data)
        }
        #[inline]
        fn write_zeros(&self, _thread: u32, offset: u64, len: u64) {
            self.map.write_zeros(offset, len)
        }
        #[inline]
        fn store_u64(&self, _thread: u32, offset: u64, value: u64) {
            self.map.store_u64(offset, value)
        }
        #[inline]
        fn flush(&self, _thread: u32, offset: u64, len: u64) {
            self.map.flush(offset, len)
        }
        #[inline]
        fn fence(&self, _thread: u32, _lines_flushed: u64) -> u64 {
            crate::cpu::store_fence();
            0
        }
        fn sync_all(&self) -> Result<()> {
            self.map.msync().map_err(|e| PmemError::from_io(&self.path, e))
        }
    };
}

impl PmemBackend for FsBackend {
    fn create(opts: &BackendOptions, len: u64) -> Result<Self> {
        FsBackend::map(opts, Some(len))
    }
    fn open(opts: &BackendOptions) -> Result<Self> {
        FsBackend::map(opts, None)
    }
    fn kind(&self) -> BackendKind {
        BackendKind::Fs
    }
    delegate_to_mapping!();
}

/// A pool on an fsdax file mapped `MAP_SHARED_VALIDATE | MAP_SYNC`: stores reach
/// persistent memory directly, flush + fence make them durable.
pub struct DaxBackend {
    map: Mapping,
    path: PathBuf,
    domain: PersistenceDomain,
    _file: File,
}

impl DaxBackend {
    fn map(opts: &BackendOptions, create_len: Option<u64>) -> Result<Self> {
        let (file, path, len) = open_locked(opts, create_len)?;
        // SAFETY: mapping a file we hold open, with a length equal to its size;
        // the result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let source = std::io::Error::last_os_error();
            drop(file);
            if create_len.is_some() {
                // The file is the one we just created: do not leave it behind.
                let _ = std::fs::remove_file(&path);
            }
            return Err(PmemError::NotDax { path, source });
        }
        // SAFETY: `ptr` is a fresh mapping of `len` bytes that only `Mapping` unmaps.
        let map = unsafe { Mapping::from_libc(ptr.cast(), len as usize) };
        Ok(DaxBackend { map, path, domain: opts.domain, _file: file })
    }
}

impl PmemBackend for DaxBackend {
    fn create(opts: &BackendOptions, len: u64) -> Result<Self> {
        DaxBackend::map(opts, Some(len))
    }
    fn open(opts: &BackendOptions) -> Result<Self> {
        DaxBackend::map(opts, None)
    }
    fn kind(&self) -> BackendKind {
        BackendKind::Dax
    }
    delegate_to_mapping!();
}

pub(crate) use delegate_to_mapping;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dax_refuses_a_non_dax_file() {
        // tmpfs and ordinary file systems refuse MAP_SYNC; the error must say so
        // and the file we created must not be left behind.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.pool");
        match DaxBackend::create(&BackendOptions::new(&path), 1 << 20) {
            Err(PmemError::NotDax { .. }) => assert!(!path.exists()),
            Err(other) => panic!("unexpected error {other}"),
            // A DAX-capable machine: the mapping is real; nothing to refuse.
            Ok(b) => assert_eq!(b.len(), 1 << 20),
        }
    }

    #[test]
    fn fs_backend_never_overwrites_and_locks_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.pool");
        std::fs::write(&path, b"user data").unwrap();
        assert!(matches!(
            FsBackend::create(&BackendOptions::new(&path), 1 << 20),
            Err(PmemError::AlreadyExists { .. })
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"user data");
        let first = FsBackend::open(&BackendOptions::new(&path)).unwrap();
        assert!(matches!(
            FsBackend::open(&BackendOptions::new(&path)),
            Err(PmemError::AlreadyOpen { .. })
        ));
        drop(first);
    }
}
