//! The simulator's visible image: one shared-memory file mapped twice.
//!
//! What: [`DoubleMap`] holds a `PROT_READ` mapping (the *view*, through which
//! every read the engine makes goes) and a `PROT_READ | PROT_WRITE` mapping
//! (the *store*, written only by the simulator under its mutex) of the same
//! `memfd_create` file, so a stray raw write by the engine through the view
//! faults instead of escaping the simulator.
//!
//! How: `memfd_create`, `ftruncate`, then `pwrite` of the image's non-zero
//! 64 KiB chunks (the file reads as zeros elsewhere, so a mostly empty pool is
//! cheap to load), then two `MAP_SHARED` mappings. Without memfd (old kernels,
//! sandboxes) an unlinked temporary file plays the same role. The descriptor
//! is closed once mapped: the mappings keep the file alive.
//!
//! Invariants: both mappings have the image's length and show the same bytes;
//! nothing ever writes through `view`. A zero-length image gets two empty heap
//! mappings (nothing can be read or written through them).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;

use crate::backend::Mapping;

/// Chunk size for loading an image; all-zero chunks are skipped.
const LOAD_CHUNK_BYTES: usize = 64 << 10;

/// The read-only view and the writable store of one image.
pub(crate) struct DoubleMap {
    pub(crate) view: Mapping,
    pub(crate) store: Mapping,
    /// Start address of the view (for the read-only test).
    pub(crate) view_addr: usize,
}

fn memfd() -> io::Result<File> {
    // SAFETY: the name is a valid NUL-terminated string; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"zen-sim".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Map `len` bytes of `file` with `prot`, shared.
fn map(file: &File, len: usize, prot: libc::c_int) -> io::Result<(Mapping, usize)> {
    // SAFETY: mapping an open file of at least `len` bytes (ftruncated by the
    // caller); the result is checked against MAP_FAILED before use.
    let ptr = unsafe {
        libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `ptr` is a fresh mapping of `len` bytes that only the `Mapping` unmaps.
    Ok((unsafe { Mapping::from_libc(ptr.cast(), len) }, ptr as usize))
}

/// Load `image` into a fresh shared-memory file and map it twice.
pub(crate) fn double_map(image: &[u8]) -> io::Result<DoubleMap> {
    let len = image.len();
    if len == 0 {
        return Ok(DoubleMap { view: Mapping::heap(0), store: Mapping::heap(0), view_addr: 0 });
    }
    let file = match memfd() {
        Ok(file) => file,
        Err(_) => tempfile::tempfile()?,
    };
    file.set_len(len as u64)?;
    for (i, chunk) in image.chunks(LOAD_CHUNK_BYTES).enumerate() {
        if chunk.iter().fold(0u8, |acc, &b| acc | b) != 0 {
            file.write_all_at(chunk, (i * LOAD_CHUNK_BYTES) as u64)?;
        }
    }
    let (view, view_addr) = map(&file, len, libc::PROT_READ)?;
    let (store, _) = map(&file, len, libc::PROT_READ | libc::PROT_WRITE)?;
    Ok(DoubleMap { view, store, view_addr })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_mappings_show_the_image_and_the_view_is_read_only() {
        let mut image = vec![0u8; 3 * LOAD_CHUNK_BYTES];
        image[LOAD_CHUNK_BYTES + 5] = 9;
        let maps = double_map(&image).unwrap();
        let mut byte = [0u8; 1];
        maps.view.read(LOAD_CHUNK_BYTES as u64 + 5, &mut byte);
        assert_eq!(byte, [9]);
        maps.store.write(7, &[3]);
        maps.view.read(7, &mut byte);
        assert_eq!(byte, [3], "a store through one mapping shows through the other");
        let want = format!("{:x}-", maps.view_addr);
        let listing = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = listing.lines().find(|l| l.starts_with(&want)).expect("view is mapped");
        assert!(line.split_whitespace().nth(1).unwrap().starts_with("r--s"), "{line}");
    }

    #[test]
    fn an_empty_image_maps_to_nothing() {
        let maps = double_map(&[]).unwrap();
        assert_eq!((maps.view.len(), maps.store.len()), (0, 0));
    }
}
