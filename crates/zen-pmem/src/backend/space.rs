//! Reserving a pool file's storage, so that no store into its mapping can
//! fault for want of space.
//!
//! WHY. A file mapped `MAP_SHARED` is backed by its file system's blocks
//! (on tmpfs, by its pages). `File::set_len` makes a sparse file: no block
//! behind any page. The file system finds one on the first store to a page,
//! inside the page fault; when it has none left the kernel cannot finish the
//! fault and kills the process with SIGBUS, in the middle of whatever it was
//! doing, without a word. A 1 GiB pool on a 40 MiB tmpfs died that way part
//! of the way through its load, and so would any pool whose file system
//! (`/dev/shm`, a DAX mount) fills up while it runs.
//!
//! WHAT WE DO.
//!
//! 1. Create: before the file exists, refuse when the file system has fewer
//!    bytes free (`statvfs`: `f_bavail · f_frsize`, what `df` calls
//!    available) than the pool's length (for a per-node pool: than the
//!    members it would hold, checked for every member before the first is
//!    created); then `set_len` and `posix_fallocate` the whole file. A
//!    failed reservation removes the file (we created it a moment ago) and
//!    is [`PmemError::NoSpace`] with the path, the bytes needed and the
//!    bytes free.
//! 2. Open: a file whose allocated blocks (`st_blocks · 512`) cover its
//!    length is left alone; otherwise (a sparse pool, e.g. one made before
//!    this module, or copied without its holes) `posix_fallocate` fills the
//!    holes, which allocates blocks but never changes a byte of the file,
//!    or the open is refused with `NoSpace` (needed: the unallocated bytes).
//!    `Pool::open_on` calls this after it has validated the header and the
//!    page table and before its first store, so a file that is not a pool is
//!    refused without being touched, not even in its allocation.
//!
//! Once every page has a block, the pool never asks its file system for
//! space again: page allocation hands out pages inside the file, and a full
//! pool is `NoFreePage` (an `out_of_space` abort), not a signal.
//!
//! WHAT THIS DOES NOT COVER. Copy-on-write file systems (btrfs, ZFS) allocate
//! a new block on every overwrite, so reserved space is no promise there;
//! a DAX device's media errors (poisoned lines) and a file truncated by
//! another process while it is mapped still raise SIGBUS. `crate::sigbus`
//! turns those into a message naming the pool.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{PmemError, Result};

/// Attempts of `posix_fallocate` interrupted by a signal (`EINTR`) before
/// the interruption is reported as the error.
const INTERRUPTED_RETRIES: u32 = 100;

/// Bytes available to an unprivileged user on the file system holding
/// `path` (a file or a directory), as `df` reports them; `None` when
/// `statvfs` fails (the caller then relies on `posix_fallocate` alone).
pub fn free_bytes(path: &Path) -> Option<u64> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: an all-zero `statvfs` is a valid value of this plain C struct.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call and
    // `stats` is a writable `statvfs`; the result is checked before use.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) };
    (rc == 0).then(|| stats.f_bavail.saturating_mul(stats.f_frsize))
}

/// The file system holding the directory `dir` (its device number, which
/// differs between mounts, even of two tmpfs) and its free bytes.
fn file_system(dir: &Path) -> Option<(u64, u64)> {
    Some((std::fs::metadata(dir).ok()?.dev(), free_bytes(dir)?))
}

/// The directory a new file at `path` goes into.
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Step 1 of the module docs, before the files are created: refuse new
/// files of `len` bytes each at `paths` (one pool file, or the members of a
/// per-node pool) when a file system cannot hold the ones it would get. The
/// error names the first of those files and the bytes all of them need.
pub(crate) fn check_room_for_new(paths: &[PathBuf], len: u64) -> Result<()> {
    let mut needed: Vec<(u64, u64, &PathBuf)> = Vec::with_capacity(paths.len());
    for path in paths {
        let Some((fs, free)) = file_system(parent_dir(path)) else { continue };
        match needed.iter_mut().find(|(id, _, _)| *id == fs) {
            Some((_, bytes, _)) => *bytes = bytes.saturating_add(len),
            None => needed.push((fs, len, path)),
        }
        let (_, bytes, first) = needed.iter().find(|(id, _, _)| *id == fs).expect("just added");
        if *bytes > free {
            return Err(PmemError::NoSpace { path: first.to_path_buf(), needed: *bytes, free });
        }
    }
    Ok(())
}

/// Step 1, after `set_len`: give every byte of the new file `file` a block.
/// The caller removes the file when this fails.
pub(crate) fn reserve_new(file: &File, path: &Path, len: u64) -> Result<()> {
    fallocate(file, len).map_err(|e| no_space_or_io(path, len, parent_dir(path), e))
}

/// Step 2 of the module docs: reserve the holes of the existing pool file
/// `file` of `len` bytes, or refuse.
pub(crate) fn reserve_existing(file: &File, path: &Path, len: u64) -> Result<()> {
    let allocated = file.metadata().map_err(|e| PmemError::from_io(path, e))?.blocks() * 512;
    if allocated >= len {
        return Ok(());
    }
    fallocate(file, len).map_err(|e| no_space_or_io(path, len - allocated, path, e))
}

/// `posix_fallocate(file, 0, len)`, retried when a signal interrupts it.
fn fallocate(file: &File, len: u64) -> std::io::Result<()> {
    let len =
        libc::off_t::try_from(len).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    for _ in 0..INTERRUPTED_RETRIES {
        // SAFETY: `file` is an open descriptor for the duration of the call;
        // posix_fallocate only allocates blocks and never changes file data.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, len) };
        if rc != libc::EINTR {
            return if rc == 0 { Ok(()) } else { Err(std::io::Error::from_raw_os_error(rc)) };
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::EINTR))
}

/// `ENOSPC` (or a quota's `EDQUOT`) as [`PmemError::NoSpace`] with the bytes
/// free where `on` lives, read now; anything else as an I/O error.
fn no_space_or_io(path: &Path, needed: u64, on: &Path, e: std::io::Error) -> PmemError {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => PmemError::NoSpace {
            path: path.to_path_buf(),
            needed,
            free: free_bytes(on).unwrap_or(0),
        },
        _ => PmemError::from_io(path, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_is_fully_allocated_and_a_sparse_one_gets_its_holes_filled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let file = File::options().read(true).write(true).create_new(true).open(&path).unwrap();
        file.set_len(1 << 20).unwrap();
        reserve_new(&file, &path, 1 << 20).unwrap();
        assert!(file.metadata().unwrap().blocks() * 512 >= 1 << 20);

        let sparse_path = dir.path().join("sparse");
        std::fs::write(&sparse_path, b"contents").unwrap();
        let sparse = File::options().read(true).write(true).open(&sparse_path).unwrap();
        sparse.set_len(1 << 20).unwrap();
        assert!(sparse.metadata().unwrap().blocks() * 512 < 1 << 20, "set_len made a hole");
        let before = std::fs::read(&sparse_path).unwrap();
        reserve_existing(&sparse, &sparse_path, 1 << 20).unwrap();
        assert!(sparse.metadata().unwrap().blocks() * 512 >= 1 << 20);
        assert_eq!(std::fs::read(&sparse_path).unwrap(), before, "reserving changes no byte");
    }

    #[test]
    fn pools_larger_than_the_free_space_are_refused_with_the_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.pool");
        let free = free_bytes(dir.path()).expect("statvfs of a temporary directory");
        let needed = free + (1 << 30);
        match check_room_for_new(std::slice::from_ref(&path), needed) {
            Err(PmemError::NoSpace { needed: n, free: f, .. }) => {
                assert_eq!(n, needed);
                // Other processes write to the same file system meanwhile.
                assert!(f.abs_diff(free) < 1 << 30, "free {f}, measured {free}");
            }
            other => panic!("expected NoSpace, got {other:?}"),
        }
        assert!(!path.exists());
        check_room_for_new(std::slice::from_ref(&path), 4096).unwrap();
        let members = [dir.path().join("m0"), dir.path().join("m1")];
        match check_room_for_new(&members, free / 2 + (1 << 30)) {
            Err(PmemError::NoSpace { path, needed: n, .. }) => {
                assert_eq!(path, members[0], "the first member on the file system is named");
                assert_eq!(n, 2 * (free / 2 + (1 << 30)), "both members count");
            }
            other => panic!("expected NoSpace for two members, got {other:?}"),
        }
    }
}
