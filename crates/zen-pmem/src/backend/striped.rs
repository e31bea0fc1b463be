//! Mapping per-node pools: several member files as one contiguous range.
//!
//! ```text
//!   reserve:  mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)
//!   member i: mmap(base + offset_i, len_i, RW, MAP_SHARED [| MAP_SYNC] | MAP_FIXED, fd_i, 0)
//!             offset_i = sum of the earlier members' lengths (rounded up to 4 KiB)
//! ```
//!
//! Every byte of the reservation is then backed by exactly one member file,
//! so the engine sees one pool and page numbers keep their meaning; a page
//! of member i lives in file i (on a real machine, on node i's fsdax mount).
//! Flushes and fences work on addresses, so the persist primitives need no
//! change. Whether the files belong together (uuid, index, count, size) is
//! checked by `Pool::open_on` from the member headers before anything is
//! written; this module only maps what it was given, and `create` removes
//! the files it created when it fails half-way.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::{Mapping, MemberFile};
use crate::error::{PmemError, Result};
use crate::header::MAX_MEMBERS;

const OS_PAGE: u64 = 4096;

pub(crate) struct Striped {
    pub map: Mapping,
    pub files: Vec<File>,
    pub members: Vec<MemberFile>,
}

/// Open (or create, splitting `create_len` evenly) the member files and map
/// them back to back. `dax` maps each with `MAP_SYNC`.
pub(crate) fn map(paths: &[PathBuf], create_len: Option<u64>, dax: bool) -> Result<Striped> {
    let count = paths.len() as u64;
    if !(1..=MAX_MEMBERS).contains(&count) {
        return Err(PmemError::InvalidOption {
            path: paths.first().cloned().unwrap_or_default(),
            detail: format!("a per-node pool has 1..={MAX_MEMBERS} member files, not {count}"),
        });
    }
    let member_len = match create_len {
        Some(len) if len % count != 0 || !(len / count).is_multiple_of(OS_PAGE) => {
            return Err(PmemError::InvalidOption {
                path: paths[0].clone(),
                detail: format!("{len} bytes do not split into {count} page-aligned members"),
            });
        }
        Some(len) => Some(len / count),
        None => None,
    };
    if let Some(len) = member_len {
        // All members at once, so that members sharing a file system are
        // refused together, before any is created (`space.rs`).
        super::space::check_room_for_new(paths, len)?;
    }
    let mut files = Vec::with_capacity(paths.len());
    let mut members = Vec::with_capacity(paths.len());
    let mut offset = 0u64;
    for path in paths {
        match super::mapped::open_locked(path, member_len) {
            Ok((file, len)) => {
                files.push(file);
                members.push(MemberFile { path: path.clone(), offset, len });
                offset += len.div_ceil(OS_PAGE) * OS_PAGE;
            }
            Err(e) => return Err(fail(e, &members, create_len.is_some())),
        }
    }
    match map_members(&files, &members, offset, dax) {
        Ok(map) => Ok(Striped { map, files, members }),
        Err(e) => Err(fail(e, &members, create_len.is_some())),
    }
}

/// On a failed create, remove the member files this call created (none of
/// them held anything of the user's); on a failed open, touch nothing.
fn fail(e: PmemError, created: &[MemberFile], creating: bool) -> PmemError {
    if creating {
        for m in created {
            let _ = std::fs::remove_file(&m.path);
        }
    }
    e
}

fn map_members(files: &[File], members: &[MemberFile], total: u64, dax: bool) -> Result<Mapping> {
    let first = &members[0].path;
    let Ok(total) = usize::try_from(total) else {
        return Err(PmemError::InvalidOption {
            path: first.clone(),
            detail: format!("{total} bytes cannot be mapped"),
        });
    };
    // SAFETY: an anonymous, inaccessible reservation at an address the kernel
    // chooses; nothing aliases it, and the result is checked against MAP_FAILED.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            total,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(PmemError::from_io(first, std::io::Error::last_os_error()));
    }
    // SAFETY: `base` is a fresh mapping of `total` bytes that only `Mapping`
    // unmaps; unmapping it later also unmaps the member mappings placed inside.
    let map = unsafe { Mapping::from_libc(base.cast(), total) };
    let flags = if dax {
        libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC | libc::MAP_FIXED
    } else {
        libc::MAP_SHARED | libc::MAP_FIXED
    };
    for (file, m) in files.iter().zip(members) {
        // Offsets are the running sum of the rounded lengths that make up
        // `total`, and the file is open and locked for the life of the backend.
        // SAFETY: `m.offset + m.len` lies inside the reservation, so MAP_FIXED
        // replaces only our own PROT_NONE pages, never another mapping.
        let ptr = unsafe {
            libc::mmap(
                base.cast::<u8>().add(m.offset as usize).cast(),
                m.len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let source = std::io::Error::last_os_error();
            return Err(if dax {
                PmemError::NotDax { path: m.path.clone(), source }
            } else {
                PmemError::from_io(&m.path, source)
            });
        }
    }
    Ok(map)
}

/// Map one fsdax file with `MAP_SYNC` (the single-file `dax` backend).
pub(crate) fn map_dax_file(file: &File, path: &Path, len: u64, created: bool) -> Result<Mapping> {
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
        if created {
            // The file is the one we just created: do not leave it behind.
            let _ = std::fs::remove_file(path);
        }
        return Err(PmemError::NotDax { path: path.to_path_buf(), source });
    }
    // SAFETY: `ptr` is a fresh mapping of `len` bytes that only `Mapping` unmaps.
    Ok(unsafe { Mapping::from_libc(ptr.cast(), len as usize) })
}
