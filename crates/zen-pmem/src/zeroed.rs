//! Large all-zero arrays that cost nothing until they are touched.
//!
//! [`ZeroedSlice`] maps anonymous memory: the kernel gives every page as
//! zeros on its first touch, so a slice of millions of entries is one
//! `mmap` (no store at allocation, no resident memory until used, no
//! commit charge: `MAP_NORESERVE`) and its base is page-aligned. The engine's Met-Cache chunks grow geometrically
//! (`zen/cache.rs`): the last one a region opens may be gigabytes of address
//! space of which the region uses what its share allows. A `Vec` built by
//! `collect` would write every element first, and `alloc_zeroed` stores the
//! zeros itself for any alignment above 16 bytes (the entries are
//! line-aligned), faulting the whole chunk in at once.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::ops::Deref;

use bytemuck::Zeroable;

/// `len` values of `T`, all zero, in anonymous memory backed on first touch.
pub struct ZeroedSlice<T> {
    map: Option<memmap2::MmapMut>,
    len: usize,
    _values: PhantomData<T>,
}

impl<T: Zeroable> ZeroedSlice<T> {
    /// Map `len` zero values. Out of memory (no address space for the
    /// mapping) ends the process, as a `Vec` that cannot grow does.
    pub fn new(len: usize) -> ZeroedSlice<T> {
        let layout =
            Layout::array::<T>(len).expect("ZeroedSlice: length overflows the address space");
        assert!(layout.align() <= 4096, "ZeroedSlice: alignment {} above a page", layout.align());
        if layout.size() == 0 {
            return ZeroedSlice { map: None, len, _values: PhantomData };
        }
        // `MAP_NORESERVE`: the mapping is address space, charged as its
        // pages are touched (a chunk's tail past a region's share is never
        // touched), not committed up front.
        let map = memmap2::MmapOptions::new()
            .len(layout.size())
            .no_reserve_swap()
            .map_anon()
            .unwrap_or_else(|_| std::alloc::handle_alloc_error(layout));
        ZeroedSlice { map: Some(map), len, _values: PhantomData }
    }
}

impl<T> Deref for ZeroedSlice<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        match &self.map {
            // SAFETY: `new` mapped `len * size_of::<T>()` bytes (checked by
            // `Layout::array`), page-aligned, so aligned for `T` (asserted
            // at most a page); anonymous memory reads as zeros until
            // written, and `T: Zeroable` makes all-zero bytes a valid `T`.
            // The mapping lives as long as `self`, is never handed out
            // mutably (shared access goes through `T`'s own interior
            // mutability, e.g. atomics), and is unmapped only on drop.
            Some(map) => unsafe { std::slice::from_raw_parts(map.as_ptr().cast::<T>(), self.len) },
            None => &[],
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for ZeroedSlice<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZeroedSlice").field("len", &self.len).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Zeroable)]
    #[repr(C, align(64))]
    struct Line {
        words: [AtomicU64; 8],
    }

    #[test]
    fn values_start_zero_aligned_and_keep_what_is_stored() {
        let s = ZeroedSlice::<Line>::new(100_000);
        assert_eq!(s.len(), 100_000);
        assert_eq!(s.as_ptr() as usize % 64, 0);
        assert!(
            s.iter().step_by(997).all(|l| l.words.iter().all(|w| w.load(Ordering::Relaxed) == 0))
        );
        s[99_999].words[7].store(7, Ordering::Relaxed);
        s[0].words[0].store(1, Ordering::Relaxed);
        assert_eq!(s[99_999].words[7].load(Ordering::Relaxed), 7);
        assert_eq!(s[0].words[0].load(Ordering::Relaxed), 1);
        assert_eq!(s[1].words[0].load(Ordering::Relaxed), 0);
    }

    #[test]
    fn an_empty_slice_maps_nothing() {
        let s = ZeroedSlice::<AtomicU64>::new(0);
        assert!(s.is_empty());
    }

    #[test]
    fn a_gibibyte_slice_maps_at_once_and_reads_back_its_far_end() {
        // 1 GiB of address space; only the two pages touched are backed.
        let s = ZeroedSlice::<AtomicU64>::new(1 << 27);
        s[(1 << 27) - 1].store(3, Ordering::Relaxed);
        assert_eq!(s[(1 << 27) - 1].load(Ordering::Relaxed), 3);
        assert_eq!(s[1 << 20].load(Ordering::Relaxed), 0);
    }
}
