//! A raw memory mapping with bounds-checked accessors.
//!
//! All pointer arithmetic on pool memory happens here, behind `check_range`,
//! so the safety argument of every access is the same: the range was checked
//! to lie inside a mapping that lives as long as `self`.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::cpu::{self, CACHE_LINE};

enum Owner {
    Mmap(#[allow(dead_code)] memmap2::MmapRaw),
    Libc,
    Heap(std::alloc::Layout),
}

pub(crate) struct Mapping {
    ptr: *mut u8,
    len: usize,
    owner: Owner,
}

// SAFETY: `Mapping` is a pointer to memory it owns (or that the kernel maps for
// it); concurrent access is governed by the engines' protocols, and the only
// word-sized concurrent accesses go through `AtomicU64`.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub(crate) fn from_mmap(map: memmap2::MmapRaw) -> Mapping {
        let ptr = map.as_mut_ptr();
        let len = map.len();
        Mapping { ptr, len, owner: Owner::Mmap(map) }
    }

    /// Take ownership of a mapping made with `libc::mmap`.
    ///
    /// # Safety
    /// `ptr` must be the start of a live `mmap` of `len` bytes that nothing
    /// else unmaps.
    // SAFETY: constructing the value is safe; the caller's obligation above
    // is what makes the later accesses and the `munmap` in `drop` sound.
    pub(crate) unsafe fn from_libc(ptr: *mut u8, len: usize) -> Mapping {
        Mapping { ptr, len, owner: Owner::Libc }
    }

    /// Zeroed heap memory, 4 KiB aligned.
    pub(crate) fn heap(len: usize) -> Mapping {
        let layout = std::alloc::Layout::from_size_align(len.max(CACHE_LINE), 4096)
            .expect("pool length overflows a layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Mapping { ptr, len, owner: Owner::Heap(layout) }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The address of byte 0 (to name the range in `crate::sigbus`).
    pub(crate) fn base_addr(&self) -> usize {
        self.ptr as usize
    }

    #[inline]
    fn check_range(&self, offset: u64, len: u64) -> usize {
        let end = offset.checked_add(len).expect("pool range overflows u64");
        assert!(end <= self.len as u64, "pool range {offset}+{len} outside {} bytes", self.len);
        offset as usize
    }

    #[inline]
    pub(crate) fn read(&self, offset: u64, buf: &mut [u8]) {
        let at = self.check_range(offset, buf.len() as u64);
        // SAFETY: `check_range` proved `[at, at + len)` lies in the mapping; `buf`
        // is a distinct Rust allocation, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(at), buf.as_mut_ptr(), buf.len()) }
    }

    /// Fault in the pages of `[offset, offset + len)` for writing, as stores
    /// would but without changing a byte (`MADV_POPULATE_WRITE`, Linux 5.14):
    /// one system call instead of a fault per 4 KiB page. A hint: a range
    /// outside the mapping or not page aligned, heap memory, or a kernel
    /// without the advice leaves the pages to fault on first store.
    pub(crate) fn populate(&self, offset: u64, len: u64) {
        if matches!(self.owner, Owner::Heap(_))
            || offset.checked_add(len).is_none_or(|end| end > self.len as u64)
        {
            return;
        }
        // MADV_POPULATE_WRITE only populates page tables and backing pages
        // (zero-filled where new); the kernel rejects an unaligned start.
        // SAFETY: the range lies inside this live mapping (checked above) and
        // the advice changes no byte the program can see.
        let _ = unsafe {
            libc::madvise(
                self.ptr.wrapping_add(offset as usize).cast(),
                len as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }

    /// Start loading the lines of `[offset, offset + len)`; a range outside
    /// the mapping is ignored (a hint, never an error).
    #[inline]
    pub(crate) fn prefetch(&self, offset: u64, len: u64) {
        let Some(end) = offset.checked_add(len).filter(|&end| end <= self.len as u64) else {
            return;
        };
        let mut line = offset as usize / CACHE_LINE * CACHE_LINE;
        while line < end as usize {
            cpu::prefetch_addr(self.ptr.wrapping_add(line));
            line += CACHE_LINE;
        }
    }

    #[inline]
    pub(crate) fn write(&self, offset: u64, data: &[u8]) {
        let at = self.check_range(offset, data.len() as u64);
        // SAFETY: as in `read`, with the copy in the other direction.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(at), data.len()) }
    }

    #[inline]
    pub(crate) fn write_zeros(&self, offset: u64, len: u64) {
        let at = self.check_range(offset, len);
        // SAFETY: the range lies in the mapping (`check_range`).
        unsafe { std::ptr::write_bytes(self.ptr.add(at), 0, len as usize) }
    }

    #[inline]
    fn word(&self, offset: u64) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8), "8-byte word at unaligned offset {offset}");
        let at = self.check_range(offset, 8);
        // SAFETY: the word lies in the mapping, is 8-byte aligned (asserted; the
        // mapping itself is page aligned) and lives as long as `self`.
        unsafe { AtomicU64::from_ptr(self.ptr.add(at).cast::<u64>()) }
    }

    #[inline]
    pub(crate) fn load_u64(&self, offset: u64) -> u64 {
        self.word(offset).load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn store_u64(&self, offset: u64, value: u64) {
        self.word(offset).store(value, Ordering::Release)
    }

    /// Write back every line of the range with the CPU's flush instruction.
    #[inline]
    pub(crate) fn flush(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let at = self.check_range(offset, len);
        let first = at / CACHE_LINE * CACHE_LINE;
        // The range `[first, at + len)` lies inside the mapping (`check_range`).
        cpu::flush_lines(self.ptr.wrapping_add(first), at + len as usize - first);
    }

    /// `msync` the whole mapping (file-backed mappings only).
    pub(crate) fn msync(&self) -> std::io::Result<()> {
        match &self.owner {
            Owner::Mmap(map) => map.flush(),
            Owner::Libc => {
                // SAFETY: `ptr`/`len` describe a live mapping owned by `self`.
                let rc = unsafe { libc::msync(self.ptr.cast(), self.len, libc::MS_SYNC) };
                if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
            }
            Owner::Heap(_) => Ok(()),
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        match &self.owner {
            Owner::Mmap(_) => {}
            // SAFETY: the mapping was made by `libc::mmap` with this length and
            // is unmapped exactly once, here.
            Owner::Libc => unsafe {
                libc::munmap(self.ptr.cast(), self.len);
            },
            // SAFETY: allocated in `heap` with this layout, freed once, here.
            Owner::Heap(layout) => unsafe { std::alloc::dealloc(self.ptr, *layout) },
        }
    }
}
