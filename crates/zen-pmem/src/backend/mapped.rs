//! File-backed backends: `fs` (any file, `MAP_SHARED`) and `dax` (fsdax, `MAP_SYNC`).
//!
//! Both hold the pool file open with an exclusive lock for as long as they
//! live, so a pool is open in one process (and through one handle) at a time.
//! `create` never touches an existing file, and reserves a block behind every
//! byte of the new one (`space.rs`); `open` never writes, and reserves the
//! holes of a sparse file only when `Pool::open_on` asks (`reserve_space`),
//! after validation. Per-node pools (several member files as one range) are
//! mapped by `striped.rs`.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use super::{
    BackendKind, BackendOptions, Mapping, MemberFile, PersistenceDomain, PmemBackend, space,
    striped,
};
use crate::error::{PmemError, Result};
use crate::sigbus;

/// Open (or create) one pool file, lock it, and return it with its length.
pub(crate) fn open_locked(path: &Path, create_len: Option<u64>) -> Result<(File, u64)> {
    let file = match create_len {
        Some(_) => OpenOptions::new().read(true).write(true).create_new(true).open(path),
        None => OpenOptions::new().read(true).write(true).open(path),
    }
    .map_err(|e| PmemError::from_io(path, e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(PmemError::AlreadyOpen { path: path.to_path_buf() });
        }
        Err(TryLockError::Error(e)) => return Err(PmemError::from_io(path, e)),
    }
    if let Some(len) = create_len
        && let Err(e) = size_and_reserve(&file, path, len)
    {
        drop(file);
        // We created the file a moment ago; removing it loses nothing of the user's.
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    let len = file.metadata().map_err(|e| PmemError::from_io(path, e))?.len();
    if len == 0 {
        return Err(PmemError::Empty { path: path.to_path_buf() });
    }
    if isize::try_from(len).is_err() {
        return Err(PmemError::InvalidOption {
            path: path.to_path_buf(),
            detail: format!("{len} bytes cannot be mapped"),
        });
    }
    Ok((file, len))
}

/// Give the new, empty `file` its length and a block behind every byte
/// (`space.rs`), or refuse with `NoSpace`.
fn size_and_reserve(file: &File, path: &Path, len: u64) -> Result<()> {
    space::check_room_for_new(&[path.to_path_buf()], len)?;
    file.set_len(len).map_err(|e| PmemError::from_io(path, e))?;
    space::reserve_new(file, path, len)
}

/// The single pool file of `opts`.
fn single_path(opts: &BackendOptions) -> Result<PathBuf> {
    opts.path.clone().ok_or_else(|| PmemError::InvalidOption {
        path: PathBuf::from("<none>"),
        detail: "a file-backed pool needs --pool PATH".into(),
    })
}

/// What a file backend maps: one file, or the members of a per-node pool.
struct Mapped {
    watches: Vec<sigbus::Watch>,
    map: Mapping,
    path: PathBuf,
    members: Vec<MemberFile>,
    files: Vec<File>,
}

impl Mapped {
    fn new(opts: &BackendOptions, create_len: Option<u64>, dax: bool) -> Result<Mapped> {
        if !opts.members.is_empty() {
            let s = striped::map(&opts.members, create_len, dax)?;
            let path = opts.members[0].clone();
            let watches = s
                .members
                .iter()
                .map(|m| {
                    let start = s.map.base_addr() + m.offset as usize;
                    sigbus::Watch::new(start, m.len as usize, &m.path)
                })
                .collect();
            return Ok(Mapped { watches, map: s.map, path, members: s.members, files: s.files });
        }
        let path = single_path(opts)?;
        let (file, len) = open_locked(&path, create_len)?;
        let map = if dax {
            striped::map_dax_file(&file, &path, len, create_len.is_some())?
        } else {
            let raw = memmap2::MmapOptions::new()
                .len(len as usize)
                .map_raw(&file)
                .map_err(|e| PmemError::from_io(&path, e))?;
            Mapping::from_mmap(raw)
        };
        let watches = vec![sigbus::Watch::new(map.base_addr(), map.len(), &path)];
        Ok(Mapped { watches, map, path, members: Vec::new(), files: vec![file] })
    }
}

/// Reserve the holes of every file mapped (`space.rs`, step 2).
fn reserve_files(files: &[File], members: &[MemberFile], path: &Path, len: u64) -> Result<()> {
    if members.is_empty() {
        return space::reserve_existing(&files[0], path, len);
    }
    for (file, m) in files.iter().zip(members) {
        space::reserve_existing(file, &m.path, m.len)?;
    }
    Ok(())
}

/// A pool on a regular file mapped `MAP_SHARED` (or on per-node member
/// files, each mapped `MAP_SHARED | MAP_FIXED` into one range). Durable
/// across process crashes only.
pub struct FsBackend {
    /// Declared first so that the ranges are unregistered before `map` unmaps them.
    _watches: Vec<sigbus::Watch>,
    map: Mapping,
    path: PathBuf,
    domain: PersistenceDomain,
    members: Vec<MemberFile>,
    files: Vec<File>,
}

impl FsBackend {
    fn map(opts: &BackendOptions, create_len: Option<u64>) -> Result<Self> {
        let m = Mapped::new(opts, create_len, false)?;
        Ok(FsBackend {
            _watches: m.watches,
            map: m.map,
            path: m.path,
            domain: opts.domain,
            members: m.members,
            files: m.files,
        })
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
        fn prefetch(&self, offset: u64, len: u64) {
            self.map.prefetch(offset, len)
        }
        fn populate(&self, offset: u64, len: u64) {
            self.map.populate(offset, len)
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
    fn members(&self) -> &[MemberFile] {
        &self.members
    }
    fn reserve_space(&self) -> Result<()> {
        reserve_files(&self.files, &self.members, &self.path, self.map.len() as u64)
    }
    delegate_to_mapping!();
}

/// A pool on an fsdax file (or per-node member files) mapped
/// `MAP_SHARED_VALIDATE | MAP_SYNC`: stores reach persistent memory directly,
/// flush + fence make them durable.
pub struct DaxBackend {
    /// Declared first so that the ranges are unregistered before `map` unmaps them.
    _watches: Vec<sigbus::Watch>,
    map: Mapping,
    path: PathBuf,
    domain: PersistenceDomain,
    members: Vec<MemberFile>,
    files: Vec<File>,
}

impl DaxBackend {
    fn map(opts: &BackendOptions, create_len: Option<u64>) -> Result<Self> {
        let named = opts.members.first().cloned().map_or_else(|| single_path(opts), Ok)?;
        check_flush_support(&named, opts.domain, crate::cpu::flush_instruction())?;
        let m = Mapped::new(opts, create_len, true)?;
        Ok(DaxBackend {
            _watches: m.watches,
            map: m.map,
            path: m.path,
            domain: opts.domain,
            members: m.members,
            files: m.files,
        })
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
    fn members(&self) -> &[MemberFile] {
        &self.members
    }
    fn reserve_space(&self) -> Result<()> {
        reserve_files(&self.files, &self.members, &self.path, self.map.len() as u64)
    }
    delegate_to_mapping!();
}

pub(crate) use delegate_to_mapping;

/// A DAX pool under ADR is durable only through cache-line flushes: refuse it
/// on a CPU without a flush instruction (not x86-64) rather than let every
/// flush be a silent no-op. Under eADR stores persist at visibility and no
/// flush is issued, so it is accepted.
fn check_flush_support(
    path: &Path,
    domain: PersistenceDomain,
    flush: crate::cpu::FlushInstruction,
) -> Result<()> {
    if domain == PersistenceDomain::Adr && flush == crate::cpu::FlushInstruction::None {
        return Err(PmemError::NoFlushInstruction { path: path.to_path_buf() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dax_under_adr_is_refused_without_a_flush_instruction() {
        use crate::cpu::FlushInstruction;
        let path = Path::new("/mnt/pmem/p.pool");
        let err = check_flush_support(path, PersistenceDomain::Adr, FlushInstruction::None)
            .expect_err("no flush instruction under ADR");
        assert!(matches!(err, PmemError::NoFlushInstruction { .. }));
        let text = err.to_string();
        assert!(text.contains("/mnt/pmem/p.pool") && text.contains("clwb"), "{text}");
        // eADR needs no flush; every x86-64 CPU has at least clflush.
        check_flush_support(path, PersistenceDomain::Eadr, FlushInstruction::None).unwrap();
        for f in [FlushInstruction::Clwb, FlushInstruction::Clflushopt, FlushInstruction::Clflush] {
            check_flush_support(path, PersistenceDomain::Adr, f).unwrap();
        }
    }

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
